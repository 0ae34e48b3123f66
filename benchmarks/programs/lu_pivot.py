"""LU factorisation with partial pivoting: argmax of a column, row swaps by fancy indexing,
rank-1 updates by slices; then a solve and a determinant."""
import numpy as np


def lu(a):
    a = a.astype(float).copy()
    n = a.shape[0]
    perm = np.arange(n)
    sign = 1
    for k in range(n - 1):
        p = k + int(np.argmax(np.abs(a[k:, k])))
        if a[p, k] == 0.0:
            continue
        if p != k:
            a[[k, p]] = a[[p, k]]
            perm[[k, p]] = perm[[p, k]]
            sign = -sign
        a[k + 1:, k] /= a[k, k]
        a[k + 1:, k + 1:] -= np.outer(a[k + 1:, k], a[k, k + 1:])
    return a, perm, sign


def solve(lu_, perm, b):
    n = len(b)
    y = b[perm].astype(float)
    for i in range(n):
        y[i] -= lu_[i, :i] @ y[:i]
    for i in range(n - 1, -1, -1):
        y[i] = (y[i] - lu_[i, i + 1:] @ y[i + 1:]) / lu_[i, i]
    return y


def det(lu_, sign):
    return sign * np.prod(np.diag(lu_))


def main(n):
    rng = np.random.default_rng(7)
    a = rng.integers(-5, 6, size=(n, n))
    b = rng.standard_normal(n)
    f, perm, sign = lu(a)
    x = solve(f, perm, b)
    return f, perm, x, det(f, sign)


SIZES = {"tiny": 5, "quick": 70}
