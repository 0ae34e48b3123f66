"""Descriptive statistics by hand on lists: mean, variance, median, mode, correlation."""
import math
import random


def mean(xs):
    return sum(xs) / len(xs)


def variance(xs):
    m = mean(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def median(xs):
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def mode(xs):
    counts = {}
    for x in xs:
        counts[x] = counts.get(x, 0) + 1
    return max(counts, key=counts.get)


def correlation(xs, ys):
    mx, my = mean(xs), mean(ys)
    cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    return cov / math.sqrt(sum((x - mx) ** 2 for x in xs) * sum((y - my) ** 2 for y in ys))


def main(n):
    rng = random.Random(17)
    xs = [rng.gauss(10, 2) for _ in range(n)]
    ys = [x * 0.5 + rng.gauss(0, 1) for x in xs]
    ints = [rng.randint(0, 20) for _ in range(n)]
    return mean(xs), variance(xs), median(ys), mode(ints), correlation(xs, ys)


SIZES = {"tiny": 20, "quick": 20000}
