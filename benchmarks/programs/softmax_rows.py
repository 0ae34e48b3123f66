"""Row-wise softmax, log-sum-exp and a top-k per row written the way model code does, in a
Python loop over rows and whole-array beside it."""
import numpy as np


def softmax_loop(x):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        row = x[i]
        e = np.exp(row - row.max())
        out[i] = e / e.sum()
    return out


def softmax(x, axis=-1):
    z = x - x.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def logsumexp(x):
    m = x.max(axis=1)
    return m + np.log(np.exp(x - m[:, None]).sum(axis=1))


def topk(x, k):
    idx = np.argsort(-x, axis=1, kind="stable")[:, :k]
    return idx, np.take_along_axis(x, idx, axis=1)


def main(n):
    rng = np.random.default_rng(12)
    x = rng.standard_normal((n, 64)).astype(np.float32)
    a = softmax_loop(x)
    b = softmax(x)
    idx, vals = topk(x, 3)
    return a, b, logsumexp(x.astype(np.float64)), idx, vals


SIZES = {"tiny": 4, "quick": 300}
