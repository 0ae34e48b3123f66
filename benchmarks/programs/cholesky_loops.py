"""Cholesky factorisation and triangular solves written with explicit loops over a NumPy
array's elements, as textbook code does."""
import math

import numpy as np


def cholesky(a):
    n = a.shape[0]
    L = np.zeros_like(a)
    for j in range(n):
        s = a[j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if s <= 0.0:
            raise ValueError("matrix is not positive definite")
        L[j, j] = math.sqrt(s)
        for i in range(j + 1, n):
            t = a[i, j]
            for k in range(j):
                t -= L[i, k] * L[j, k]
            L[i, j] = t / L[j, j]
    return L


def solve_lower(L, b):
    n = b.shape[0]
    y = np.empty_like(b)
    for i in range(n):
        acc = b[i]
        for k in range(i):
            acc -= L[i, k] * y[k]
        y[i] = acc / L[i, i]
    return y


def solve_upper_t(L, y):
    n = y.shape[0]
    x = np.empty_like(y)
    for i in range(n - 1, -1, -1):
        acc = y[i]
        for k in range(i + 1, n):
            acc -= L[k, i] * x[k]
        x[i] = acc / L[i, i]
    return x


def main(n):
    rng = np.random.default_rng(31)
    m = rng.standard_normal((n, n))
    a = m @ m.T + n * np.eye(n)
    b = rng.standard_normal(n)
    L = cholesky(a)
    x = solve_upper_t(L, solve_lower(L, b))
    try:
        cholesky(-np.eye(3))
        bad = None
    except ValueError as e:
        bad = str(e)
    return L.sum(), x, float(np.abs(a @ x - b).max() < 1e-8), bad


SIZES = {"tiny": 6, "quick": 60}
