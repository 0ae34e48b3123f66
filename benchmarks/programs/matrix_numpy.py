"""Small NumPy matrix code: power iteration, Gram-Schmidt, Jacobi iteration."""
import numpy as np


def power_iteration(a, iters):
    v = np.ones(a.shape[0])
    lam = 0.0
    for _ in range(iters):
        w = a @ v
        lam = np.linalg.norm(w)
        v = w / lam
    return lam, v


def gram_schmidt(vectors):
    basis = []
    for v in vectors:
        w = v - sum(np.dot(v, b) * b for b in basis)
        if np.linalg.norm(w) > 1e-10:
            basis.append(w / np.linalg.norm(w))
    return np.array(basis)


def jacobi(a, b, iters):
    x = np.zeros_like(b)
    d = np.diag(a)
    r = a - np.diagflat(d)
    for _ in range(iters):
        x = (b - r @ x) / d
    return x


def main(n):
    rng = np.random.default_rng(16)
    a = rng.random((n, n))
    a = a + a.T + n * np.eye(n)
    lam, _ = power_iteration(a, 50)
    q = gram_schmidt(list(rng.random((n, n))))
    x = jacobi(a, np.ones(n), 40)
    return float(lam), float(np.abs(q @ q.T - np.eye(len(q))).max() < 1e-8), float(x.sum())


SIZES = {"tiny": 4, "quick": 30}
