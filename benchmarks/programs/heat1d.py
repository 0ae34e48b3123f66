"""Explicit finite differences for the 1-D heat equation: one version with an element loop,
one with slices, and the boundary handled by hand."""
import numpy as np


def step_loop(u, r):
    n = len(u)
    out = np.empty(n)
    out[0] = u[0]
    out[n - 1] = u[n - 1]
    for i in range(1, n - 1):
        out[i] = u[i] + r * (u[i - 1] - 2.0 * u[i] + u[i + 1])
    return out


def step_slices(u, r):
    out = u.copy()
    out[1:-1] += r * (u[:-2] - 2 * u[1:-1] + u[2:])
    return out


def run(u0, r, steps, stepper):
    u = u0
    for _ in range(steps):
        u = stepper(u, r)
    return u


def main(n):
    x = np.linspace(0.0, 1.0, n)
    u0 = np.sin(np.pi * x) + 0.1 * np.sin(7 * np.pi * x)
    a = run(u0, 0.4, 50, step_loop)
    b = run(u0, 0.4, 50, step_slices)
    return a, b, float(np.abs(a - b).max())


SIZES = {"tiny": 10, "quick": 400}
