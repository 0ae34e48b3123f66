"""Closures and decorators: counters, adders, a memoizing decorator, function composition."""
import functools


def make_counter():
    count = 0

    def increment(step=1):
        nonlocal count
        count += step
        return count
    return increment


def make_adder(k):
    def add(x):
        return x + k
    return add


def compose(*funcs):
    def composed(x):
        for f in reversed(funcs):
            x = f(x)
        return x
    return composed


def memoize(fn):
    cache = {}

    @functools.wraps(fn)
    def wrapper(*args):
        if args not in cache:
            cache[args] = fn(*args)
        return cache[args]
    return wrapper


def binomial(n, k):
    if k == 0 or k == n:
        return 1
    return binomial(n - 1, k - 1) + binomial(n - 1, k)


def main(n):
    counter = make_counter()
    for i in range(n):
        counter(i % 3)
    pipeline = compose(make_adder(3), abs, make_adder(-10))
    values = [pipeline(i) for i in range(n)]
    memo = memoize(binomial)
    return counter(0), sum(values), memo(20, 10), memo(20, 10)


SIZES = {"tiny": 30, "quick": 20000}
