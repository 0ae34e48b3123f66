"""All-pairs shortest paths: Floyd-Warshall with a triple loop over a NumPy matrix, and the
vectorised row update beside it; path reconstruction with a Python while loop."""
import numpy as np


def floyd_loops(w):
    d = w.copy()
    nxt = np.full(d.shape, -1, dtype=np.int64)
    n = d.shape[0]
    for i in range(n):
        for j in range(n):
            if d[i, j] < np.inf:
                nxt[i, j] = j
    for k in range(n):
        for i in range(n):
            dik = d[i, k]
            if dik == np.inf:
                continue
            for j in range(n):
                if dik + d[k, j] < d[i, j]:
                    d[i, j] = dik + d[k, j]
                    nxt[i, j] = nxt[i, k]
    return d, nxt


def floyd_vector(w):
    d = w.copy()
    for k in range(d.shape[0]):
        d = np.minimum(d, d[:, k:k + 1] + d[k:k + 1, :])
    return d


def path(nxt, i, j):
    if nxt[i, j] < 0:
        return []
    out = [i]
    while i != j:
        i = int(nxt[i, j])
        out.append(i)
    return out


def main(n):
    rng = np.random.default_rng(11)
    w = rng.uniform(1.0, 10.0, size=(n, n))
    w[rng.random((n, n)) < 0.6] = np.inf
    np.fill_diagonal(w, 0.0)
    d, nxt = floyd_loops(w)
    d2 = floyd_vector(w)
    return d, bool(np.array_equal(d, d2)), path(nxt, 0, n - 1)


SIZES = {"tiny": 5, "quick": 40}
