"""Generators: Fibonacci, primes by trial division, sliding windows, chained pipelines."""
import itertools


def fibonacci():
    a, b = 0, 1
    while True:
        yield a
        a, b = b, a + b


def primes():
    found = []
    for k in itertools.count(2):
        if all(k % p for p in found if p * p <= k):
            found.append(k)
            yield k


def windows(seq, size):
    it = iter(seq)
    window = tuple(itertools.islice(it, size))
    if len(window) == size:
        yield window
    for x in it:
        window = window[1:] + (x,)
        yield window


def even_fib_sum(limit):
    total = 0
    for f in fibonacci():
        if f > limit:
            break
        if f % 2 == 0:
            total += f
    return total


def main(n):
    ps = list(itertools.islice(primes(), n))
    best = max(windows(ps, 3), key=sum)
    return even_fib_sum(10 ** 30), ps[-1], best


SIZES = {"tiny": 20, "quick": 1500}
