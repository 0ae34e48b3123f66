"""Sieve of Eratosthenes on a Python list, and twin primes from it."""


def sieve(limit):
    is_prime = [True] * (limit + 1)
    is_prime[0] = is_prime[1] = False
    p = 2
    while p * p <= limit:
        if is_prime[p]:
            for multiple in range(p * p, limit + 1, p):
                is_prime[multiple] = False
        p += 1
    return [i for i, flag in enumerate(is_prime) if flag]


def twin_primes(primes):
    return [(a, b) for a, b in zip(primes, primes[1:]) if b - a == 2]


def main(n):
    primes = sieve(n)
    twins = twin_primes(primes)
    return len(primes), primes[-1], len(twins), twins[-1]


SIZES = {"tiny": 100, "quick": 60000}
