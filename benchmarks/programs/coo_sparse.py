"""Sparse matrices by hand: COO triplets to CSR with argsort and bincount, a CSR mat-vec by
loops, duplicates summed with np.add.at, and a power iteration on the result."""
import numpy as np


def to_csr(rows, cols, vals, n):
    order = np.lexsort((cols, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return indptr, cols, vals


def matvec(indptr, indices, data, x):
    n = len(indptr) - 1
    y = np.zeros(n)
    for r in range(n):
        s = 0.0
        for k in range(indptr[r], indptr[r + 1]):
            s += data[k] * x[indices[k]]
        y[r] = s
    return y


def dense(rows, cols, vals, n):
    d = np.zeros((n, n))
    np.add.at(d, (rows, cols), vals)
    return d


def power_iteration(indptr, indices, data, iters):
    x = np.ones(len(indptr) - 1)
    lam = 0.0
    for _ in range(iters):
        y = matvec(indptr, indices, data, x)
        lam = float(np.linalg.norm(y))
        x = y / lam
    return lam, x


def main(n):
    rng = np.random.default_rng(8)
    nnz = 5 * n
    rows = rng.integers(0, n, nnz)
    cols = rng.integers(0, n, nnz)
    vals = rng.random(nnz)
    indptr, indices, data = to_csr(rows, cols, vals, n)
    x = rng.standard_normal(n)
    y = matvec(indptr, indices, data, x)
    ref = dense(rows, cols, vals, n) @ x
    lam, v = power_iteration(indptr, indices, data, 20)
    return y, float(np.abs(y - ref).max()), lam, v[:4]


SIZES = {"tiny": 6, "quick": 400}
