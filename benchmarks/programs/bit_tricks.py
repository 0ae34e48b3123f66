"""Bit manipulation on Python ints and NumPy unsigned arrays: popcounts, bit reversal,
xorshift random numbers, Gray codes."""
import numpy as np


def popcount(x):
    c = 0
    while x:
        x &= x - 1
        c += 1
    return c


def reverse_bits32(x):
    r = 0
    for _ in range(32):
        r = (r << 1) | (x & 1)
        x >>= 1
    return r


def xorshift32(state, count):
    out = np.empty(count, dtype=np.uint32)
    s = np.uint32(state)
    for i in range(count):
        s ^= s << np.uint32(13)
        s ^= s >> np.uint32(17)
        s ^= s << np.uint32(5)
        out[i] = s
    return out


def gray(n):
    a = np.arange(n, dtype=np.uint32)
    return a ^ (a >> 1)


def main(n):
    pops = sum(popcount(k) for k in range(n))
    revs = [reverse_bits32(k * 2654435761 % 2 ** 32) for k in range(n // 10)]
    rnd = xorshift32(2463534242, n)
    g = gray(n)
    return pops, sum(revs), int(rnd[-1]), int(rnd.sum(dtype=np.uint64)), g[-5:]


SIZES = {"tiny": 16, "quick": 4000}
