"""Loop nodes with elementwise bodies compiled into one C kernel (cfused/loops.py), against
plain Python + NumPy: results, identity, warnings, thread counts, and that the kernel ran."""
from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

import pijit

from differential import assert_equal_values, level_tol

rng = np.random.default_rng(7)
X = rng.standard_normal((37, 53))
DYNAMIC = {"specialize_scalar": False}      # n is a graph input: one entry for every n


def decay(x, n):
    for i in range(n):
        x = x * 0.9 + 0.1
    return x


def pair(x, y, n):
    for i in range(1, n, 2):
        x, y = y * 0.5 + i, x - y * 0.25
    return x, y


def down(x, w, n):
    for i in range(n, 0, -3):
        x = x * w + i
    return x


def with_sum(x, n):
    for i in range(n):
        x = x - x.mean() * 0.5
    return x


class KernelLog(logging.Handler):
    """The pijit.kernels INFO messages while active."""

    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())

    def __enter__(self):
        self.logger = logging.getLogger("pijit.kernels")
        self.old = self.logger.level
        self.logger.setLevel(logging.INFO)
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self)
        self.logger.setLevel(self.old)

    def loop_kernels(self) -> int:
        return sum(m.count("\n  loop %") for m in self.messages)


def check(fn, *args, kernels=1, level="O1", threads=1, trips=()):
    """fn jitted (n dynamic) vs plain for each trip count; exactly `kernels` loop kernels."""
    jitted = pijit.jit(fn, jit_config={**DYNAMIC, "jit_level": level, "num_threads": threads})
    pijit.reset(jitted)
    with KernelLog() as log:
        for n in trips:
            got, want = jitted(*args, n), fn(*args, n)
            # bits at O1 (signed zeros too), dtypes, shapes, layouts; at O2 (which contracts
            # x * 0.9 + 0.1 into an FMA) the bounds o2_spec carries through the loop
            tol, scale = level_tol(fn, (*args, n), level)
            assert_equal_values(got, want, f"{n} trips", tol, scale)
    assert log.loop_kernels() == kernels, log.messages
    assert pijit.stats(jitted)["compile_count"] == 1        # no recompile for a new n
    return jitted


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_recurrence_is_one_kernel_for_every_trip_count(level):
    jitted = check(decay, X, level=level, trips=(300, 1, 7, 2))
    ops = pijit.explain(jitted, X, 5).ops_per_graph
    assert ops == [["loop", "tuple_item"]]


def test_zero_trips_return_the_input_itself():
    jitted = check(decay, X, trips=(3,))
    assert jitted(X, 0) is X and decay(X, 0) is X


def test_two_carried_values_the_index_and_strided_layouts():
    y = rng.standard_normal((37, 53))
    check(pair, X, y, trips=(1, 2, 9, 40))
    check(pair, X.T, y.T, trips=(9,))          # the outputs keep the transposed layout


def test_negative_step_and_broadcast_invariant():
    w = rng.standard_normal(53)
    check(down, X, w, trips=(10, 1, 0, 31))


def test_bodies_with_reductions_are_not_loop_kernels():
    check(with_sum, X, kernels=0, level="O2", trips=(4,))


def test_threads_do_not_change_results():
    big = rng.standard_normal((400, 300))
    one = check(decay, big, trips=(50,))
    two = check(decay, big, threads=2, trips=(50,))
    assert_equal_values(one(big, 50), two(big, 50))


def test_overflow_warns_like_numpy():
    x = np.array([1e300, 1.0, -1e300])
    jitted = pijit.jit(lambda x, n: _grow(x, n), jit_config=DYNAMIC)
    for _ in range(2):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            result = jitted(x, 5)
        with warnings.catch_warnings(record=True) as expected:
            warnings.simplefilter("always")
            plain = _grow(x, 5)
        assert_equal_values(result, plain)
        assert [str(w.message) for w in got] == [str(w.message) for w in expected]


def _grow(x, n):
    for i in range(n):
        x = x * 1e10
    return x
