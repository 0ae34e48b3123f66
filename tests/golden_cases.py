"""The functions whose dumps test_golden.py keeps as golden text (tests/golden/<name>.txt).

Kept apart from the test so that editing the test does not move these functions' line
numbers, which the dumps show; for the same reason softmax, layernorm and the rest are
written here again rather than imported from benchmarks/ or other tests. Each case: (name, function, maker of the argument tuples it is
called with in order (a second size: the dynamic-shape entry is dumped too), jit_config,
whether a fused kernel is built).
"""
from __future__ import annotations

import numpy as np

_DEVNULL = open("/dev/null", "w")      # noqa: SIM115 - lives as long as the module


def _f64(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _f32(*shape, seed=0):
    return _f64(*shape, seed=seed).astype(np.float32)


def chain(a, b, c, d, e):
    return a * b + c * d - np.exp(e) * 0.5


def int_wrap(a, b):
    return (a * b + 7) // 3 - (a % 5)


def where_clip(x, y):
    return np.where(x > y, np.clip(x, -0.5, 0.5), y * 2.0).astype(np.float32)


def reductions(x):
    return (x.sum(), x.mean(axis=0), x.max(axis=1, keepdims=True), x.argmin(axis=-1),
            (x > 0).any(axis=1), x.var(axis=1), x.prod(axis=0))


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


def recurrence(x):
    for _ in range(10):
        x = x * 0.9 + 0.1
    return x


def row_updates(a, n):
    for i in range(n):
        a[i, :] = a[i, :] * 0.5 + a[i - 1, :]
    return a


def stencil(u):
    for _ in range(4):
        u = u.copy()
        u[1:-1] = 0.25 * (u[:-2] + 2.0 * u[1:-1] + u[2:])
    return u


def graph_break(x, y):
    z = np.sin(x) * y + 1.0
    print("checkpoint", z.shape, file=_DEVNULL)
    return np.sqrt(z * z + y)


def data_branch(x):
    s = x.sum()
    if s > 0:
        return x * 2.0
    return x - 1.0


def changing(x):
    return np.sqrt(x * x + 1.0) - x


def scalars(x, k, flag):
    y = x * k + (1.0 if flag else -1.0)
    return y.mean() + k


class Model:
    def __init__(self):
        self.w = _f64(6, 3, seed=3)
        self.scale = 0.5

    def forward(self, x):
        return np.tanh(x @ self.w) * self.scale


def method(x):
    return Model().forward(x)


CASES = [
    ("chain_o1", chain, lambda: [tuple(_f64(64, seed=s) for s in range(5))], {}, True),
    ("chain_o2", chain, lambda: [tuple(_f64(64, seed=s) for s in range(5))],
     {"jit_level": "O2"}, True),
    ("chain_o0", chain, lambda: [tuple(_f64(64, seed=s) for s in range(5))],
     {"jit_level": "O0"}, False),
    ("int_wrap", int_wrap, lambda: [(np.arange(-8, 8, dtype=np.int8),
                                     np.arange(16, dtype=np.int8))], {}, True),
    ("where_clip", where_clip, lambda: [(_f64(4, 5), _f64(5, seed=1))], {}, True),
    ("reductions", reductions, lambda: [(_f64(6, 7),)], {}, True),
    ("softmax_o1", softmax, lambda: [(_f32(8, 16),)], {}, True),
    ("softmax_o2", softmax, lambda: [(_f32(8, 16),)], {"jit_level": "O2"}, True),
    ("layernorm", layernorm, lambda: [(_f32(8, 16), _f32(16, seed=1), _f32(16, seed=2))],
     {}, True),
    ("mlp", mlp, lambda: [(_f32(4, 8), _f32(8, 16, seed=1), _f32(16, seed=2),
                           _f32(16, 4, seed=3), _f32(4, seed=4))], {}, True),
    ("recurrence", recurrence, lambda: [(_f64(32),)], {}, True),
    # loop nodes (short loops that write unroll by default; a loop nest would take
    # row_updates)
    ("row_updates", row_updates, lambda: [(_f64(5, 4), 5)],
     {"loop_unrolling": False, "loop_nests": False}, False),
    ("stencil", stencil, lambda: [(_f64(16),)], {"loop_unrolling": False}, False),
    ("graph_break", graph_break, lambda: [(_f64(8), np.abs(_f64(8, seed=1)))], {}, True),
    ("data_branch", data_branch, lambda: [(np.abs(_f64(8)),), (-np.abs(_f64(8)),)], {}, True),
    ("changing", changing, lambda: [(_f64(10),), (_f64(12),), (_f64(14),)], {}, True),
    ("scalars", scalars, lambda: [(_f64(8), 3.0, True)], {"specialize_scalar": False}, True),
    ("method", method, lambda: [(_f64(2, 6),)], {}, True),
]
