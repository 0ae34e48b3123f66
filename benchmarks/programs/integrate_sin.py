"""Numerical integration with loops calling math.sin and math.exp (trapezoid, midpoint)."""
import math


def f(x):
    return math.sin(x) * math.exp(-0.1 * x)


def trapezoid(func, a, b, n):
    h = (b - a) / n
    total = 0.5 * (func(a) + func(b))
    for i in range(1, n):
        total += func(a + i * h)
    return total * h


def midpoint(a, b, n):
    h = (b - a) / n
    s = 0.0
    for i in range(n):
        s += math.sin(a + (i + 0.5) * h)
    return s * h


def main(n):
    return trapezoid(f, 0.0, math.pi, n), midpoint(0.0, math.pi, n)


SIZES = {"tiny": 50, "quick": 40000}
