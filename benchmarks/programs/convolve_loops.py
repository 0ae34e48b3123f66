"""1-D convolution and moving statistics by loops over NumPy arrays, beside np.convolve."""
import numpy as np


def convolve_valid(x, k):
    n, m = len(x), len(k)
    out = np.zeros(n - m + 1)
    for i in range(n - m + 1):
        acc = 0.0
        for j in range(m):
            acc += x[i + j] * k[m - 1 - j]
        out[i] = acc
    return out


def moving_minmax(x, w):
    lo = np.empty(len(x) - w + 1)
    hi = np.empty_like(lo)
    for i in range(len(lo)):
        window = x[i:i + w]
        lo[i] = window.min()
        hi[i] = window.max()
    return lo, hi


def main(n):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(n)
    k = np.array([0.25, 0.5, 0.25, -0.125])
    mine = convolve_valid(x, k)
    ref = np.convolve(x, k, mode="valid")
    lo, hi = moving_minmax(x, 5)
    return mine, float(np.abs(mine - ref).max()), lo.sum(), hi.sum()


SIZES = {"tiny": 12, "quick": 3000}
