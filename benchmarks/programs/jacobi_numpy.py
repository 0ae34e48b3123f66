"""Jacobi iteration for a 2-D Laplace problem with NumPy slices and a convergence test."""
import numpy as np


def step(u):
    new = u.copy()
    new[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return new


def solve(u, tol, max_iter):
    it = 0
    diff = np.inf
    while diff > tol and it < max_iter:
        new = step(u)
        diff = np.max(np.abs(new - u))
        u = new
        it += 1
    return u, it, diff


def main(n):
    u = np.zeros((n, n))
    u[0, :] = 1.0
    u[:, 0] = np.linspace(1.0, 0.0, n)
    u, it, diff = solve(u, 1e-4, 400)
    return u[n // 2].copy(), it, float(diff)


SIZES = {"tiny": 8, "quick": 48}
