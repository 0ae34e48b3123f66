"""Monte Carlo estimate of pi with the random module."""
import math
import random


def inside_circle(x, y):
    return x * x + y * y <= 1.0


def estimate_pi(samples):
    hits = 0
    for _ in range(samples):
        x = random.random()
        y = random.random()
        if inside_circle(x, y):
            hits += 1
    return 4.0 * hits / samples


def main(n):
    random.seed(6)
    est = estimate_pi(n)
    return est, abs(est - math.pi) < 0.5


SIZES = {"tiny": 200, "quick": 40000}
