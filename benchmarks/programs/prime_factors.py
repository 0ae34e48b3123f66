"""Prime factorisation by trial division; numbers with many divisors."""
from collections import Counter


def factorize(n):
    factors = []
    d = 2
    while d * d <= n:
        while n % d == 0:
            factors.append(d)
            n //= d
        d += 1 if d == 2 else 2
    if n > 1:
        factors.append(n)
    return factors


def divisor_count(n):
    count = 1
    for exp in Counter(factorize(n)).values():
        count *= exp + 1
    return count


def first_triangle_with_divisors(k):
    i, t = 1, 1
    while divisor_count(t) <= k:
        i += 1
        t += i
    return t


def main(n):
    return (factorize(600851475143), sum(len(factorize(k)) for k in range(2, n)),
            first_triangle_with_divisors(60))


SIZES = {"tiny": 30, "quick": 6000}
