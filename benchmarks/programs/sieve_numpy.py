"""Sieve of Eratosthenes on a NumPy bool array; prime gaps with np.diff."""
import numpy as np


def sieve(n):
    flags = np.ones(n + 1, dtype=bool)
    flags[:2] = False
    for i in range(2, int(n ** 0.5) + 1):
        if flags[i]:
            flags[i * i::i] = False
    return np.nonzero(flags)[0]


def gap_histogram(primes):
    gaps = np.diff(primes)
    values, counts = np.unique(gaps, return_counts=True)
    return dict(zip(values.tolist(), counts.tolist()))


def main(n):
    primes = sieve(n)
    hist = gap_histogram(primes)
    return int(primes.size), int(primes[-1]), sorted(hist.items())[:5]


SIZES = {"tiny": 100, "quick": 200000}
