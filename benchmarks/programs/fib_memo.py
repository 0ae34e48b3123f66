"""Fibonacci four ways: naive recursion, dict memo, lru_cache, iteration."""
import functools


def fib_naive(n):
    return n if n < 2 else fib_naive(n - 1) + fib_naive(n - 2)


def fib_memo(n, memo=None):
    if memo is None:
        memo = {}
    if n < 2:
        return n
    if n not in memo:
        memo[n] = fib_memo(n - 1, memo) + fib_memo(n - 2, memo)
    return memo[n]


@functools.lru_cache(maxsize=None)
def fib_lru(n):
    return n if n < 2 else fib_lru(n - 1) + fib_lru(n - 2)


def fib_iter(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def main(n):
    fib_lru.cache_clear()
    return fib_naive(n), fib_memo(n * 10), fib_lru(n * 10), fib_iter(n * 10)


SIZES = {"tiny": 10, "quick": 21}
