"""The benchmark suite: plain NumPy functions, each with an input generator and sizes.

Every kernel here is ordinary NumPy code written the way a user would write it; none is
shaped to suit pijit. A `Workload` gives:

- `fn`: the plain function (the baseline *is* this function; pijit and peers run copies),
- `make(size, rng)`: a list of argument tuples; one timed "call" runs `fn` on each tuple
  (several tuples only for `changing_shapes`, which calls with a new shape each time),
- `sizes`: the size parameter for the `tiny` (tests), `quick` and `full` suites,
- `memory_bound`: True when the minimum time is set by memory traffic; the runner then
  reports bytes-that-must-move / measured bandwidth beside the times,
- `numexpr`: the same computation as a numexpr expression, where one is expressible,
- `jax`: True when the function body runs unchanged with `np` bound to `jax.numpy`
  (the jax port is that rebinding: written once, checked like every other variant),
- `writes_inputs`: the function writes into its inputs (idempotently: the timing loop calls
  it many times on the same arrays).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Workload:
    name: str
    fn: Callable
    make: Callable                     # (size, rng) -> list of argument tuples
    sizes: dict                        # suite size name -> size parameter
    description: str
    memory_bound: bool = False
    numexpr: str | None = None         # expression over the parameter names
    jax: bool = False
    tags: tuple = field(default_factory=tuple)
    # The function writes into its inputs, the same way at every call: after any number of
    # calls they equal the reference's inputs after one (checked instead of "unchanged").
    writes_inputs: bool = False

    def inputs(self, scale: str, seed: int = 0) -> list:
        return self.make(self.sizes[scale], np.random.default_rng(seed))


def _rand(rng, shape, dtype=np.float64, lo=0.0, hi=1.0):
    return (rng.random(shape) * (hi - lo) + lo).astype(dtype, copy=False)


# -- the named workloads ------------------------------------------------------------
def chain_f64(a, b, c, d, e):
    return a * b + c * d - np.exp(e) * 0.5


def chain_f32(a, b, c):
    t = np.tanh(a * b + c) * 0.5 + 0.5
    return t * a - c / (1.0 + b * b)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, gamma, beta):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * gamma + beta


def mlp(x, w1, b1, w2, b2):
    h = np.maximum(x @ w1 + b1, 0.0)
    return h @ w2 + b2


def sum_of_product(a, b, c):
    return np.sum(a * b + c)


def sum_squares(a):
    return np.sum(a * a)


def loop_update(x):
    for i in range(10):
        x = x * 0.9 + 0.1
    return x


def loop_long(x):
    for i in range(300):
        x = x * 0.99 + 0.01
    return x


def stencil(u):
    return 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) - u[1:-1, 1:-1]


# -- writes into arrays: item assignment and in-place updates in the graph ------------------
def rank2_update(A, u1, v1, u2, v2, y):
    A += np.outer(u1, v1) + np.outer(u2, v2)
    x = A.T @ y
    return x, A @ x


def stencil_write(u, out):
    out[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return out


def masked_clamp(x):
    x[x < 0] = 0
    return np.sqrt(x) * 2.0 + 1.0


_DEVNULL = open(os.devnull, "w")


def graph_break(x, y):
    z = np.sin(x) * y + 1.0
    print("checkpoint", z.shape, file=_DEVNULL)     # uncapturable: breaks the graph
    return np.sqrt(z * z + y)


def tiny(x, y):
    return x * y + 1.0


def changing_shapes(x):
    return np.sqrt(x * x + 1.0) - x


# -- kernels of the kind scientific users write ---------------------------------------------
def pairwise_distances(x, y):
    sq = (x * x).sum(axis=1)[:, None] + (y * y).sum(axis=1)[None, :] - 2.0 * (x @ y.T)
    return np.sqrt(np.maximum(sq, 0.0))


def kmeans_step(x, centers):
    d = ((x * x).sum(axis=1)[:, None] - 2.0 * (x @ centers.T)
         + (centers * centers).sum(axis=1)[None, :])
    labels = d.argmin(axis=1)
    onehot = (labels[:, None] == np.arange(centers.shape[0])[None, :]).astype(x.dtype)
    counts = onehot.sum(axis=0)
    new_centers = (onehot.T @ x) / np.maximum(counts, 1.0)[:, None]
    return new_centers, labels


def nbody_step(pos, vel, mass):
    dt = 0.01
    d = pos[None, :, :] - pos[:, None, :]
    r2 = (d * d).sum(axis=-1) + 1e-3
    inv3 = r2 ** -1.5
    acc = (d * (inv3 * mass[None, :])[:, :, None]).sum(axis=1)
    vel2 = vel + dt * acc
    return pos + dt * vel2, vel2


def _cnd(d):
    k = 1.0 / (1.0 + 0.2316419 * np.abs(d))
    poly = k * (0.319381530 + k * (-0.356563782 + k * (1.781477937
                                                       + k * (-1.821255978 + k * 1.330274429))))
    w = 1.0 - 0.3989422804014327 * np.exp(-0.5 * d * d) * poly
    return np.where(d < 0, 1.0 - w, w)


def black_scholes(s, k, t):
    r, sigma = 0.02, 0.3
    sqrt_t = np.sqrt(t)
    d1 = (np.log(s / k) + (r + 0.5 * sigma * sigma) * t) / (sigma * sqrt_t)
    d2 = d1 - sigma * sqrt_t
    disc = k * np.exp(-r * t)
    call = s * _cnd(d1) - disc * _cnd(d2)
    put = call - s + disc
    return call, put


def heat_steps(u):
    r = 0.25
    for _ in range(8):
        u = np.concatenate((u[:1], u[1:-1] + r * (u[2:] - 2.0 * u[1:-1] + u[:-2]), u[-1:]))
    return u


def floyd_warshall(dist):
    n = dist.shape[0]
    for k in range(n):
        dist = np.minimum(dist, dist[:, k:k + 1] + dist[k:k + 1, :])
    return dist


def gemm_update(a, b, c):
    return 1.5 * (a @ b) - 0.5 * c


def moments(x):
    mean = x.mean(axis=0)
    c = x - mean
    var = (c * c).mean(axis=0)
    skew = (c ** 3).mean(axis=0) / var ** 1.5
    kurt = (c ** 4).mean(axis=0) / (var * var) - 3.0
    return mean, var, skew, kurt


def logsumexp(x):
    m = x.max(axis=1, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))[:, 0]


def cosine_similarity(a, b):
    an = a / np.sqrt((a * a).sum(axis=1, keepdims=True))
    bn = b / np.sqrt((b * b).sum(axis=1, keepdims=True))
    return an @ bn.T


def rbf_kernel(x, y):
    sq = (x * x).sum(axis=1)[:, None] + (y * y).sum(axis=1)[None, :] - 2.0 * (x @ y.T)
    return np.exp(-0.5 * np.maximum(sq, 0.0))


def poly_eval(x):
    return ((((0.5 * x - 1.25) * x + 2.0) * x - 0.75) * x + 3.0) * x - 1.0


def bce_loss(z, y):
    return np.mean(np.logaddexp(0.0, z) - y * z)


# -- input generators -----------------------------------------------------------------------
# -- plain Python under jit: nothing for pijit to fuse; it must cost (almost) nothing ------
def py_scalar_loop(n):
    s = 0.0
    for i in range(n):
        s += math.sin(i) * 0.5
    return s


def py_list_build(n):
    out = []
    for i in range(n):
        if i % 3:
            out.append(i * i)
    return out


def py_print_loop(n):
    sink = open(os.devnull, "w")
    total = 0
    for i in range(n):
        total += i * i
        if i % 100 == 0:
            print("step", i, total, file=sink)
    sink.close()
    return total


def py_element_branch(a):
    pos = neg = 0.0
    for i in range(a.shape[0]):
        if a[i] > 0.5:
            pos += a[i]
        else:
            neg -= a[i]
    return pos, neg


def _tree_sum(depth):
    return 1 if depth == 0 else _tree_sum(depth - 1) + _tree_sum(depth - 1) + 1


def py_recursive(depth):
    return _tree_sum(depth)


def many_signatures(x):
    """A library-style function (standardize a sample), called in a run with a hundred
    distinct small shapes and dtypes, a few times each: it pays when capture is cheap or
    skipped for what is not hot."""
    centered = x - x.mean()
    return centered / (np.sqrt((centered * centered).mean()) + 1.0)


# -- calls without an op-table rule, mixed with fusable math (issue 22: opaque call nodes) --
def hist_binning(x):
    """Histogram-based binning: bin probabilities, then every sample centred on the binned
    mean and scaled by its bin's probability."""
    counts, edges = np.histogram(x, bins=64, range=(0.0, 1.0))
    p = counts / x.shape[0]
    centres = (edges[1:] + edges[:-1]) * 0.5
    mean = (p * centres).sum()
    return (x - mean) * (x - mean) * 0.5 + x * 0.25, mean


def masked_clamp_sum(x, t):
    """Boolean-mask selection, then a clamp and a sum of what was selected."""
    s = x[x > t]
    return np.clip(s * 2.0 - 0.5, 0.0, 1.0).sum() + s.shape[0] * 0.5


def solve_update(a, b, x):
    """A linear solve followed by an elementwise update of a state vector."""
    y = np.linalg.solve(a, b)
    return x * 0.9 + np.tanh(y) * 0.1 - x * x * 0.01


def cov_normalise(x):
    """Covariance matrix, then its normalisation to correlations, clipped."""
    c = np.cov(x)
    d = np.sqrt(np.diag(c))
    return np.clip(c / d[:, None] / d[None, :], -1.0, 1.0)


def _make_masked(size, rng):
    return [(_rand(rng, (size,)), 0.4)]


def _make_solve(size, rng):
    n, m = size
    a = _rand(rng, (n, n), np.float64, -1, 1) + n * np.eye(n)
    return [(a, _rand(rng, (n, m), np.float64, -1, 1), _rand(rng, (n, m), np.float64, -1, 1))]


def mlp_train_step(x, y, w1, b1, w2, b2, lr):
    """One SGD step of a 2-layer MLP: forward, hand-written gradients, in-place updates."""
    z = x @ w1 + b1
    h = np.maximum(z, 0.0)
    out = h @ w2 + b2
    err = out - y
    loss = (err * err).mean()
    g_out = (2.0 / err.size) * err
    g_w2 = h.T @ g_out
    g_b2 = g_out.sum(axis=0)
    g_h = (g_out @ w2.T) * (z > 0)
    g_w1 = x.T @ g_h
    g_b1 = g_h.sum(axis=0)
    w1 -= lr * g_w1
    b1 -= lr * g_b1
    w2 -= lr * g_w2
    b2 -= lr * g_b2
    return loss


class Cell:
    """A layer object called as layer(x), as in MindSpore's nn.Cell (construct does the work).
    Equal to a copy with the same arrays (the runner checks inputs are left unchanged)."""

    def __call__(self, x):
        return self.construct(x)

    def __eq__(self, other):
        if type(other) is not type(self) or vars(self).keys() != vars(other).keys():
            return False
        return all(np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
                   for a, b in zip(vars(self).values(), vars(other).values()))


class Dense(Cell):
    def __init__(self, w, b):
        self.weight, self.bias = w, b

    def construct(self, x):
        return x @ self.weight + self.bias


class ReLU(Cell):
    def construct(self, x):
        return np.maximum(x, 0)


class Sequential(Cell):
    def __init__(self, *layers):
        self.layers = list(layers)

    def construct(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def layer_stack(net, x):
    return net(x)


def _make_train_step(size, rng):
    batch, din, dh, dout = size
    arrays = [_rand(rng, (batch, din), np.float64, -1, 1), _rand(rng, (batch, dout)),
              _rand(rng, (din, dh), np.float64, -0.1, 0.1), _rand(rng, (dh,), np.float64, -0.1, 0.1),
              _rand(rng, (dh, dout), np.float64, -0.1, 0.1), _rand(rng, (dout,), np.float64, -0.1, 0.1)]
    # lr 0: every update is computed and written, and leaves the weights (so each call's
    # result and the runner's unchanged-inputs check) as they were
    return [(*arrays, 0.0)]


def _make_layer_stack(size, rng):
    batch, width, out = size
    f = np.float32

    def dense(n_in, n_out):
        return Dense(_rand(rng, (n_in, n_out), f, -0.1, 0.1), _rand(rng, (n_out,), f, -0.1, 0.1))
    net = Sequential(dense(width, width), ReLU(), dense(width, width), ReLU(), dense(width, out))
    return [(net, _rand(rng, (batch, width), f, -1, 1))]


def _make_py_n(size, rng):
    return [(size,)]


def _make_many_signatures(size, rng):
    kinds, calls = size
    shapes = [(n,) for n in range(3, 40)] + [(n, 3) for n in range(2, 30)] + \
        [(2, n, 2) for n in range(2, 14)]
    dtypes = (np.float64, np.float32, np.int64)
    signatures = [(shapes[i % len(shapes)], dtypes[i % len(dtypes)]) for i in range(kinds)]
    return [(_rand(rng, shape, np.float64, -8, 8).astype(dtype),)
            for _ in range(calls) for shape, dtype in signatures]


def _arrays(count, dtype=np.float64, lo=0.0, hi=1.0):
    def make(n, rng):
        shape = n if isinstance(n, tuple) else (n,)
        return [tuple(_rand(rng, shape, dtype, lo, hi) for _ in range(count))]
    return make


def _make_row_recurrence(size, rng):
    return [(_rand(rng, size, np.float64, 0.0, 1.0), 0.25)]


def _make_layernorm(size, rng):
    rows, cols = size
    return [(_rand(rng, (rows, cols), np.float32, -2, 2), _rand(rng, (cols,), np.float32, 0.5, 1.5),
             _rand(rng, (cols,), np.float32, -0.5, 0.5))]


def _make_mlp(size, rng):
    batch, din, dh, dout = size
    f = np.float32
    return [(_rand(rng, (batch, din), f, -1, 1), _rand(rng, (din, dh), f, -0.1, 0.1),
             _rand(rng, (dh,), f, -0.1, 0.1), _rand(rng, (dh, dout), f, -0.1, 0.1),
             _rand(rng, (dout,), f, -0.1, 0.1))]


def _make_pair(size, rng):
    n, m, dim = size
    return [(_rand(rng, (n, dim), np.float64, -1, 1), _rand(rng, (m, dim), np.float64, -1, 1))]


def _make_kmeans(size, rng):
    n, dim, k = size
    x = _rand(rng, (n, dim), np.float64, -1, 1)
    return [(x, x[rng.choice(n, k, replace=False)].copy())]


def _make_nbody(size, rng):
    n = size
    return [(_rand(rng, (n, 3), np.float64, -1, 1), _rand(rng, (n, 3), np.float64, -0.1, 0.1),
             _rand(rng, (n,), np.float64, 0.5, 1.5))]


def _make_bs(size, rng):
    return [(_rand(rng, (size,), np.float64, 10, 100), _rand(rng, (size,), np.float64, 10, 100),
             _rand(rng, (size,), np.float64, 0.1, 2.0))]


def _make_floyd(size, rng):
    d = _rand(rng, (size, size), np.float64, 1, 100)
    np.fill_diagonal(d, 0.0)
    return [(d,)]


def _make_gemm(size, rng):
    return [tuple(_rand(rng, (size, size), np.float64, -1, 1) for _ in range(3))]


def _make_bce(size, rng):
    return [(_rand(rng, (size,), np.float64, -4, 4), (rng.random(size) < 0.5).astype(np.float64))]


def _make_changing(size, rng):
    base, count = size
    return [(_rand(rng, (base * (i + 1),), np.float64, -1, 1),) for i in range(count)]


def _make_rank2(size, rng):
    """The second term is minus the first (u2 = -u1, v2 = v1), so every call adds exact zeros
    and A stays as it was over the timing loop's many calls."""
    u1, v1 = _rand(rng, (size,), np.float64, -1, 1), _rand(rng, (size,), np.float64, -1, 1)
    return [(_rand(rng, (size, size), np.float64, -1, 1), u1, v1, -u1, v1,
             _rand(rng, (size,), np.float64, -1, 1))]


def _make_stencil_write(size, rng):
    return [(_rand(rng, size), np.zeros(size))]


def _make_tiny(size, rng):
    return [(_rand(rng, (size,)), _rand(rng, (size,)))]


# -- loops over array elements (issue 21): written as plain Python, as numba users write them --
def forward_subst(L, b):
    n = b.shape[0]
    x = np.zeros(n)
    for i in range(n):
        s = 0.0
        for j in range(i):
            s += L[i, j] * x[j]
        x[i] = (b[i] - s) / L[i, i]
    return x


def crc16(data):
    crc = 0xFFFF
    for k in range(data.shape[0]):
        crc ^= int(data[k]) << 8
        for _ in range(8):
            if crc & 0x8000:
                crc = ((crc << 1) ^ 0x1021) & 0xFFFF
            else:
                crc = (crc << 1) & 0xFFFF
    return crc


def mandelbrot(h, w, x0, y0, step, maxit):
    out = np.zeros((h, w), dtype=np.int32)
    for i in range(h):
        ci = y0 + i * step
        for j in range(w):
            cr = x0 + j * step
            zr = 0.0
            zi = 0.0
            n = 0
            while n < maxit and zr * zr + zi * zi <= 4.0:
                zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
                n += 1
            out[i, j] = n
    return out


def lcs_table(a, b):
    n, m = a.shape[0], b.shape[0]
    dp = np.zeros((n + 1, m + 1), dtype=np.int64)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if a[i - 1] == b[j - 1]:
                dp[i, j] = dp[i - 1, j - 1] + 1
            else:
                dp[i, j] = max(dp[i - 1, j], dp[i, j - 1])
    return dp


def csr_matvec(indptr, indices, data, x):
    n = indptr.shape[0] - 1
    y = np.zeros(n)
    for r in range(n):
        s = 0.0
        for k in range(indptr[r], indptr[r + 1]):
            s += data[k] * x[indices[k]]
        y[r] = s
    return y


def running_max(a):
    out = np.empty_like(a)
    m = a[0]
    for i in range(a.shape[0]):
        if a[i] > m:
            m = a[i]
        out[i] = m
    return out


def running_argmax(a):
    vals = np.empty_like(a)
    idx = np.empty(a.shape[0], dtype=np.int64)
    best = a[0]
    at = 0
    for i, x in enumerate(a):
        if x > best:
            best = x
            at = i
        vals[i] = best
        idx[i] = at
    return vals, idx


def iir_filter(x, b0, b1, a1):
    y = np.empty_like(x)
    prev_x = 0.0
    prev_y = 0.0
    for i in range(x.shape[0]):
        yi = b0 * x[i] + b1 * prev_x - a1 * prev_y
        y[i] = yi
        prev_x = x[i]
        prev_y = yi
    return y


def cholesky(A):
    n = A.shape[0]
    L = np.zeros_like(A)
    for j in range(n):
        s = A[j, j] - L[j, :j] @ L[j, :j]
        L[j, j] = np.sqrt(s)
        for i in range(j + 1, n):
            L[i, j] = (A[i, j] - L[i, :j] @ L[j, :j]) / L[j, j]
    return L


def cholesky_loops(A):
    """Cholesky by element loops, checking each pivot (a raise under a data-dependent if)."""
    n = A.shape[0]
    L = np.zeros_like(A)
    for j in range(n):
        s = A[j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if s <= 0.0:
            raise ValueError("not positive definite")
        L[j, j] = np.sqrt(s)
        for i in range(j + 1, n):
            t = A[i, j]
            for k in range(j):
                t -= L[i, k] * L[j, k]
            L[i, j] = t / L[j, j]
    return L


def forward_subst_dot(L, b):
    n = b.shape[0]
    x = np.zeros(n)
    for i in range(n):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    return x


def _make_spd(size, rng):
    m = rng.random((size, size))
    return [(m @ m.T + size * np.eye(size),)]


def lu_nopivot(A):
    A = A.copy()
    n = A.shape[0]
    for k in range(n):
        for i in range(k + 1, n):
            A[i, k] /= A[k, k]
            for j in range(k + 1, n):
                A[i, j] -= A[i, k] * A[k, j]
    return A


def row_recurrence(X, c):
    """Each row smoothed from the one above it (an image filter's or a scheme's sweep): the
    rows depend on each other, so the loop over them stays; each row is whole-row NumPy."""
    A = X.copy()
    for i in range(1, A.shape[0]):
        A[i, 1:-1] = A[i, 1:-1] * c + (A[i - 1, :-2] + A[i - 1, 2:]) * (0.5 - 0.5 * c)
    return A


def gauss_seidel(A, b, x, sweeps):
    x = x.copy()
    n = b.shape[0]
    for _ in range(sweeps):
        for i in range(n):
            s = b[i]
            for j in range(n):
                if j != i:
                    s -= A[i, j] * x[j]
            x[i] = s / A[i, i]
    return x


def haversine(lat1, lon1, lat2, lon2):
    """Great-circle distance in km between two points given in radians."""
    sdlat = np.sin((lat2 - lat1) * 0.5)
    sdlon = np.sin((lon2 - lon1) * 0.5)
    a = sdlat * sdlat + np.cos(lat1) * np.cos(lat2) * sdlon * sdlon
    return 2.0 * 6371.0 * np.arcsin(np.sqrt(a))


def route_length(lat, lon):
    total = 0.0
    for i in range(1, lat.shape[0]):
        total += haversine(lat[i - 1], lon[i - 1], lat[i], lon[i])
    return total


def syrk_rows(A):
    """The lower triangle of A @ A.T, one dot of rows per element."""
    n = A.shape[0]
    C = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1):
            C[i, j] = A[i, :] @ A[j, :]
    return C


def dtw_distance(a, b):
    """Dynamic time warping distance: a DP table, min() of three neighbours."""
    n, m = len(a), len(b)
    D = np.full((n + 1, m + 1), np.inf)
    D[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost = abs(a[i - 1] - b[j - 1])
            D[i, j] = cost + min(D[i - 1, j], D[i, j - 1], D[i - 1, j - 1])
    return D[n, m]


def dot_zip_f32(a, b):
    """A dot product over zip of float32 arrays into `total = 0.0`: a Python float, then an
    np.float32 from the first product on."""
    total = 0.0
    for x, y in zip(a, b):
        total += x * y
    return total


def poly_horner(coef, xs):
    """Horner's rule at each point over the coefficients, highest first (a reversed view)."""
    out = np.empty_like(xs)
    for k in range(len(xs)):
        x = xs[k]
        p = 0.0
        for c in coef[::-1]:
            p = p * x + c
        out[k] = p
    return out


def squares_loop(x):
    """x[i] ** 2 element by element: CPython's float ** calls pow, not always x*x."""
    out = np.empty_like(x)
    for i in range(len(x)):
        out[i] = x[i] ** 2
    return out


def hist_floor(x, lo, hi, nbins):
    """A histogram by math.floor of each value's bin position, clamped to the last bin."""
    counts = np.zeros(nbins, dtype=np.int64)
    width = (hi - lo) / nbins
    for v in x:
        k = math.floor((v - lo) / width)
        if k >= nbins:
            k = nbins - 1
        counts[k] += 1
    return counts


def _make_dtw(size, rng):
    return [(rng.random(size), rng.random(size + 7))]


def _make_horner(size, rng):
    npts, ncoef = size
    return [(rng.uniform(-1.0, 1.0, ncoef), rng.uniform(-2.0, 2.0, npts))]


def _make_hist(size, rng):
    return [(rng.random(size), 0.0, 1.0, 64)]


def _make_lu(size, rng):
    return [(rng.random((size, size)) + size * np.eye(size),)]     # no pivoting needed


def _make_gs(size, rng):
    n, sweeps = size
    return [(rng.random((n, n)) + n * np.eye(n), rng.random(n), np.zeros(n), sweeps)]


def _make_route(size, rng):
    return [(np.radians(rng.uniform(-60.0, 60.0, size)),
             np.radians(rng.uniform(-180.0, 180.0, size)))]


def _make_fsub(size, rng):
    L = np.tril(rng.random((size, size))) + size * np.eye(size)
    return [(L, rng.random(size))]


def _make_crc(size, rng):
    return [(rng.integers(0, 256, size, dtype=np.uint8),)]


def _make_mandel(size, rng):
    h, w = size
    return [(h, w, -2.0, -1.25, 2.5 / h, 100)]


def _make_lcs(size, rng):
    return [(rng.integers(0, 4, size), rng.integers(0, 4, size))]


def _make_csr(size, rng):
    n, per_row = size
    indptr = np.arange(0, n * per_row + 1, per_row, dtype=np.int32)
    indices = rng.integers(0, n, n * per_row).astype(np.int32)
    return [(indptr, indices, rng.random(n * per_row), rng.random(n))]


def _make_iir(size, rng):
    return [(rng.random(size), 0.2, 0.1, -0.7)]


W = Workload
WORKLOADS = [
    W("chain_f64", chain_f64, _arrays(5), {"tiny": 1000, "quick": 10_000_000, "full": 10_000_000},
      "elementwise chain a*b+c*d-exp(e)*0.5, float64", memory_bound=True,
      numexpr="a*b + c*d - exp(e)*0.5", jax=True),
    W("chain_f32", chain_f32, _arrays(3, np.float32),
      {"tiny": 1000, "quick": 1_000_000, "full": 1_000_000},
      "elementwise chain with tanh and division, float32", memory_bound=True,
      numexpr="(tanh(a*b + c)*0.5 + 0.5)*a - c/(1.0 + b*b)", jax=True),
    W("softmax", softmax, _arrays(1, np.float32, -4, 4),
      {"tiny": (8, 16), "quick": (4096, 512), "full": (4096, 1024)},
      "row softmax, float32", memory_bound=True, jax=True),
    W("layernorm", layernorm, _make_layernorm,
      {"tiny": (8, 16), "quick": (4096, 512), "full": (4096, 1024)},
      "layer normalization over rows with gain and bias, float32", memory_bound=True, jax=True),
    W("mlp", mlp, _make_mlp,
      {"tiny": (4, 8, 16, 4), "quick": (256, 512, 1024, 256), "full": (1024, 1024, 4096, 1024)},
      "MLP forward: relu(x@W1+b1)@W2+b2, float32", jax=True),
    W("sum_of_product", sum_of_product, _arrays(3),
      {"tiny": 1000, "quick": 4_000_000, "full": 10_000_000},
      "reduction over a fused product: sum(a*b+c), float64", memory_bound=True,
      numexpr="sum(a*b + c)", jax=True),
    W("sum_squares", sum_squares, _arrays(1),
      {"tiny": 1000, "quick": 4_000_000, "full": 10_000_000},
      "reduction over a square: np.sum(a*a), float64", memory_bound=True,
      numexpr="sum(a*a)", jax=True),
    W("loop_update", loop_update, _arrays(1),
      {"tiny": 1000, "quick": 1_000_000, "full": 1_000_000},
      "Python loop: for i in range(10): x = x*0.9+0.1", memory_bound=True, jax=True),
    W("loop_long", loop_long, _arrays(1),
      {"tiny": 1000, "quick": 1_000_000, "full": 1_000_000},
      "Python loop of 300 trips (a loop node: one C kernel)", jax=True),
    W("stencil", stencil, _arrays(1), {"tiny": (16, 16), "quick": (2048, 2048), "full": (4096, 4096)},
      "5-point Laplacian stencil with slices", memory_bound=True, jax=True),
    W("graph_break", graph_break, _arrays(2),
      {"tiny": 1000, "quick": 1_000_000, "full": 10_000_000},
      "two NumPy blocks with a print between them", memory_bound=True),
    W("tiny", tiny, _make_tiny, {"tiny": 8, "quick": 8, "full": 8},
      "x*y+1 on 8 elements: per-call overhead", numexpr="x*y + 1.0", jax=True),
    W("changing_shapes", changing_shapes, _make_changing,
      {"tiny": (10, 4), "quick": (1000, 6), "full": (100_000, 6)},
      "sqrt(x*x+1)-x called with a new shape each call (recompiles)",
      numexpr="sqrt(x*x + 1.0) - x", jax=True),
    W("pairwise_distances", pairwise_distances, _make_pair,
      {"tiny": (8, 6, 3), "quick": (1000, 1000, 64), "full": (4000, 4000, 64)},
      "Euclidean distance matrix via the Gram trick", jax=True),
    W("kmeans_step", kmeans_step, _make_kmeans,
      {"tiny": (20, 3, 4), "quick": (20000, 16, 32), "full": (200000, 32, 64)},
      "one k-means (Lloyd) step: assign + centroid update", jax=True),
    W("nbody_step", nbody_step, _make_nbody, {"tiny": 8, "quick": 512, "full": 2048},
      "all-pairs gravity, one leapfrog step", jax=True),
    W("black_scholes", black_scholes, _make_bs,
      {"tiny": 1000, "quick": 1_000_000, "full": 10_000_000},
      "Black-Scholes call and put with a polynomial normal CDF helper", memory_bound=True),
    W("heat_steps", heat_steps, _arrays(1), {"tiny": 100, "quick": 1_000_000, "full": 10_000_000},
      "8 explicit steps of the 1-D heat equation (loop + concatenate)", memory_bound=True, jax=True),
    W("floyd_warshall", floyd_warshall, _make_floyd, {"tiny": 8, "quick": 256, "full": 768},
      "all-pairs shortest paths, vectorized over each k"),
    W("gemm_update", gemm_update, _make_gemm, {"tiny": 8, "quick": 512, "full": 2048},
      "GEMM-like update 1.5*(A@B) - 0.5*C", jax=True),
    W("moments", moments, _arrays(1), {"tiny": (50, 4), "quick": (10000, 100), "full": (100000, 100)},
      "column mean, variance, skewness, kurtosis", memory_bound=True, jax=True),
    W("logsumexp", logsumexp, _arrays(1, np.float64, -5, 5),
      {"tiny": (8, 16), "quick": (2000, 1000), "full": (10000, 2000)},
      "row-wise stable logsumexp", memory_bound=True, jax=True),
    W("cosine_similarity", cosine_similarity, _make_pair,
      {"tiny": (8, 6, 3), "quick": (1000, 1000, 64), "full": (4000, 4000, 64)},
      "row-normalized similarity matrix", jax=True),
    W("rbf_kernel", rbf_kernel, _make_pair,
      {"tiny": (8, 6, 3), "quick": (1000, 1000, 64), "full": (4000, 4000, 64)},
      "Gaussian RBF kernel matrix", jax=True),
    W("poly_eval", poly_eval, _arrays(1, np.float64, -2, 2),
      {"tiny": 1000, "quick": 4_000_000, "full": 10_000_000},
      "degree-5 polynomial by Horner's rule", memory_bound=True,
      numexpr="((((0.5*x - 1.25)*x + 2.0)*x - 0.75)*x + 3.0)*x - 1.0", jax=True),
    W("bce_loss", bce_loss, _make_bce, {"tiny": 1000, "quick": 2_000_000, "full": 10_000_000},
      "mean binary cross-entropy from logits (logaddexp)", memory_bound=True, jax=True),
    W("mlp_train_step", mlp_train_step, _make_train_step,
      {"tiny": (4, 8, 16, 4), "quick": (256, 512, 512, 64), "full": (1024, 1024, 1024, 256)},
      "2-layer MLP SGD step: forward, hand-written gradients, in-place updates (lr 0), float64"),
    W("layer_stack", layer_stack, _make_layer_stack,
      {"tiny": (4, 8, 4), "quick": (256, 512, 64), "full": (1024, 1024, 256)},
      "Sequential of Dense/ReLU layer objects called as layer(x), float32"),
    W("rank2_update", rank2_update, _make_rank2, {"tiny": 16, "quick": 2000, "full": 4000},
      "in-place rank-2 update A += outer(u1,v1) + outer(u2,v2), then two GEMVs on A",
      writes_inputs=True),
    W("stencil_write", stencil_write, _make_stencil_write,
      {"tiny": (16, 16), "quick": (2048, 2048), "full": (4096, 4096)},
      "5-point stencil written into the interior of an input array", memory_bound=True,
      writes_inputs=True),
    W("masked_clamp", masked_clamp, _arrays(1, np.float64, -1, 1),
      {"tiny": 1000, "quick": 4_000_000, "full": 10_000_000},
      "x[x < 0] = 0 into the input, then sqrt(x)*2+1", memory_bound=True,
      writes_inputs=True),
]

WORKLOADS += [
    W("hist_binning", hist_binning, _arrays(1),
      {"tiny": 1000, "quick": 2_000_000, "full": 10_000_000},
      "np.histogram (an opaque call) then fused centring and scaling", memory_bound=True),
    W("masked_clamp_sum", masked_clamp_sum, _make_masked,
      {"tiny": 1000, "quick": 2_000_000, "full": 10_000_000},
      "x[x > t] (a data-dependent size) then a fused clamp and sum", memory_bound=True),
    W("solve_update", solve_update, _make_solve,
      {"tiny": (8, 4), "quick": (256, 4096), "full": (512, 16384)},
      "np.linalg.solve (an opaque call) then a fused elementwise update"),
    W("cov_normalise", cov_normalise, _arrays(1),
      {"tiny": (4, 50), "quick": (400, 5000), "full": (1000, 20000)},
      "np.cov (an opaque call) then normalisation to correlations"),
]

PLAIN_PYTHON = "plain Python under jit (the baseline column is the plain function)"
WORKLOADS += [
    W("py_scalar_loop", py_scalar_loop, _make_py_n,
      {"tiny": 100, "quick": 200_000, "full": 1_000_000},
      "pure-Python loop calling math.sin", tags=(PLAIN_PYTHON,)),
    W("py_list_build", py_list_build, _make_py_n,
      {"tiny": 100, "quick": 200_000, "full": 1_000_000},
      "pure-Python loop appending to a list under a branch", tags=(PLAIN_PYTHON,)),
    W("py_print_loop", py_print_loop, _make_py_n,
      {"tiny": 100, "quick": 200_000, "full": 1_000_000},
      "pure-Python loop with a print every 100 steps", tags=(PLAIN_PYTHON,)),
    W("py_element_branch", py_element_branch, _arrays(1),
      {"tiny": 100, "quick": 100_000, "full": 1_000_000},
      "loop over array elements with a data-dependent branch", tags=(PLAIN_PYTHON,)),
    W("py_recursive", py_recursive, _make_py_n, {"tiny": 6, "quick": 16, "full": 18},
      "a recursive Python function (a full binary tree)", tags=(PLAIN_PYTHON,)),
    W("many_signatures", many_signatures, _make_many_signatures,
      {"tiny": (6, 2), "quick": (100, 4), "full": (300, 4)},
      "library-style: 100 distinct small shapes and dtypes, 4 calls each per run "
      "(compare the first call, cold and warm, with the plain run)"),
]

LOOPS = "loops over array elements (issue 21: one loop nest compiled to C)"
WORKLOADS += [
    W("forward_subst", forward_subst, _make_fsub, {"tiny": 8, "quick": 400, "full": 1000},
      "forward substitution L x = b, triangular inner loop", tags=(LOOPS,)),
    W("cholesky", cholesky, _make_spd, {"tiny": 6, "quick": 120, "full": 300},
      "Cholesky factorization by dots of row slices (L[i, :j] @ L[j, :j])", tags=(LOOPS,)),
    W("cholesky_loops", cholesky_loops, _make_spd, {"tiny": 6, "quick": 60, "full": 250},
      "Cholesky by element loops, raising on a non-positive pivot", tags=(LOOPS,)),
    W("forward_subst_dot", forward_subst_dot, _make_fsub,
      {"tiny": 8, "quick": 4000, "full": 6000},
      "forward substitution by a dot of slices per row (L[i, :i] @ x[:i])", tags=(LOOPS,)),
    W("crc16", crc16, _make_crc, {"tiny": 16, "quick": 20_000, "full": 200_000},
      "CRC-16/CCITT bit loop over bytes (Python int state)", tags=(LOOPS,)),
    W("mandelbrot", mandelbrot, _make_mandel,
      {"tiny": (4, 6), "quick": (100, 150), "full": (400, 600)},
      "escape-time Mandelbrot with a while loop per pixel", tags=(LOOPS,)),
    W("lcs_table", lcs_table, _make_lcs, {"tiny": 6, "quick": 400, "full": 1500},
      "longest-common-subsequence DP table", tags=(LOOPS,)),
    W("csr_matvec", csr_matvec, _make_csr,
      {"tiny": (8, 2), "quick": (20_000, 8), "full": (200_000, 8)},
      "CSR sparse matrix-vector product, data-dependent inner bounds", tags=(LOOPS,)),
    W("running_max", running_max, _arrays(1),
      {"tiny": 50, "quick": 200_000, "full": 2_000_000},
      "running maximum with a data-dependent branch", tags=(LOOPS,)),
    W("running_argmax", running_argmax, _arrays(1),
      {"tiny": 50, "quick": 200_000, "full": 2_000_000},
      "running maximum and its index, over enumerate(a)", tags=(LOOPS,)),
    W("iir_filter", iir_filter, _make_iir, {"tiny": 50, "quick": 200_000, "full": 2_000_000},
      "first-order recursive (IIR) filter", tags=(LOOPS,)),
    W("lu_nopivot", lu_nopivot, _make_lu, {"tiny": 6, "quick": 60, "full": 150},
      "LU factorization without pivoting, k-i-j loops on a copy", tags=(LOOPS,)),
    W("gauss_seidel", gauss_seidel, _make_gs,
      {"tiny": (6, 2), "quick": (100, 10), "full": (300, 10)},
      "Gauss-Seidel sweeps over a dense diagonally dominant system", tags=(LOOPS,)),
    W("row_recurrence", row_recurrence, _make_row_recurrence,
      {"tiny": (6, 10), "quick": (256, 4096), "full": (1024, 8192)},
      "rows smoothed from the row above: A[i, 1:-1] = A[i, 1:-1] * c + (...) per row",
      tags=(LOOPS,)),
    W("syrk_rows", syrk_rows, _arrays(1),
      {"tiny": (6, 4), "quick": (120, 64), "full": (400, 200)},
      "symmetric rank-k update by rows: C[i, j] = A[i, :] @ A[j, :] over j <= i",
      tags=(LOOPS,)),
    W("route_length", route_length, _make_route,
      {"tiny": 20, "quick": 10_000, "full": 100_000},
      "length of a route: a haversine helper (np.sin/cos/arcsin/sqrt) per leg",
      tags=(LOOPS,)),
    W("dtw_distance", dtw_distance, _make_dtw, {"tiny": 6, "quick": 300, "full": 1000},
      "dynamic time warping table: abs() and min() of three neighbours", tags=(LOOPS,)),
    W("dot_zip_f32", dot_zip_f32, _arrays(2, np.float32),
      {"tiny": 50, "quick": 200_000, "full": 2_000_000},
      "dot product over zip(a, b) of float32 into total = 0.0", tags=(LOOPS,)),
    W("poly_horner", poly_horner, _make_horner,
      {"tiny": (10, 4), "quick": (20_000, 8), "full": (200_000, 8)},
      "Horner's rule per point over coef[::-1]", tags=(LOOPS,)),
    W("hist_floor", hist_floor, _make_hist, {"tiny": 50, "quick": 200_000, "full": 2_000_000},
      "histogram by math.floor of each value's bin, clamped", tags=(LOOPS,)),
    W("squares_loop", squares_loop, _arrays(1, lo=-10.0, hi=10.0),
      {"tiny": 50, "quick": 200_000, "full": 2_000_000},
      "x[i] ** 2 into out element by element (pow's result, not always x*x)", tags=(LOOPS,)),
]

SUITES = {"quick": "quick", "full": "full", "tiny": "tiny"}


def select(only: str | None = None) -> list:
    if not only:
        return list(WORKLOADS)
    names = [n.strip() for n in only.split(",") if n.strip()]
    by_name = {w.name: w for w in WORKLOADS}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SystemExit(f"unknown workload(s): {', '.join(unknown)}; "
                         f"choose from: {', '.join(by_name)}")
    return [by_name[n] for n in names]
