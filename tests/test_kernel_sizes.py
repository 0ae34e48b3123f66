"""Fused kernels at the lengths where their C loops change shape: one past and one short of
each length the rendered C splits work at (render.CHUNK for flat chunks and a write's row
segments, CALL_CHUNK for groups calling NumPy's loops, reductions.BLOCK and SUM_CHUNK for
exact sums, 8 for their lanes, AHEAD_ROWS for rows reduced one ahead).

An off-by-one in such a split (`(n + CHUNK - 1) / CHUNK` with the 1 dropped, a `<` for a
`<=`, a tail loop starting one late) loses or repeats the elements of a tail that only these
lengths have: the fused matrix's operands are a few dozen elements long. Each case runs plain
and jitted (tests/differential: bits, mutated inputs, warnings) and must run in its kernel:
one graph, never handed back to NumPy. A kernel's C depends on its static shape, so each case
compiles one kernel per length of `static` and one dynamic-shape kernel that runs every length
of `dynamic`, after them (about 40 compiles, 15 s of CPU in all).
"""
from __future__ import annotations

import numpy as np
import pytest

from differential import assert_same, assert_same_outcome, clone, count_handbacks, \
    run_observed, run_plain
import pijit
from pijit.backends.cfused import reductions, render
from pijit.explain import report

CHUNK, CALL_CHUNK, SUM_CHUNK = render.CHUNK, render.CALL_CHUNK, render.SUM_CHUNK
BLOCK, AHEAD_ROWS = reductions.BLOCK, render.AHEAD_ROWS
RNG = np.random.default_rng(43)


def around(*lengths):
    """Each length, one short of it and one past it."""
    return sorted({m for n in lengths for m in (n - 1, n, n + 1) if m > 0})


def write_strided_1d(out, x):
    out[::2] = x * 2.0 + 1.0        # a 1-D strided destination: one row, in segments
    return out


def write_strided_rows(out, x):
    out[:, 1::2] += x * 3.0
    return out


def flat_elementwise(x, y):
    return x * y - 1.0


def numpy_loop_then_scale(x):
    return np.exp(x) * 0.5          # O1 calls NumPy's exp loop over chunks of CALL_CHUNK


def whole_sum(x):
    return np.sum(x * x)


def row_sums(x):
    return np.sum(x * x, axis=1)


def row_sums_and_max(x):
    return x.sum(axis=1) + x.max(axis=1)        # an exact sum of the input's own row, and a max


def squared_lengths(d):
    return (d * d).sum(axis=-1) + 1e-3          # nbody_step's rows of 3


def rows_centred(x):
    return x - x.max(axis=1, keepdims=True)     # each row's max read again in its row


def column_sums(x):
    return np.sum(x * 2.0, axis=0)


# (function, argument shapes per length n, static lengths, dynamic lengths)
CASES = {
    "write_strided_1d": (write_strided_1d, lambda n: [(2 * n,), (n,)], [CHUNK + 1],
                         around(CHUNK, 2 * CHUNK)),
    "write_strided_rows": (write_strided_rows, lambda n: [(3, 2 * n), (3, n)], [CHUNK + 1],
                           around(CHUNK)),
    "flat_elementwise": (flat_elementwise, lambda n: [(n,), (n,)], [2 * CHUNK + 1],
                         around(CHUNK, 2 * CHUNK)),
    "flat_elementwise_2d": (flat_elementwise, lambda n: [(2, n), (2, n)], [CHUNK + 1],
                            around(CHUNK)),
    "numpy_loop_then_scale": (numpy_loop_then_scale, lambda n: [(n,)], [2 * CALL_CHUNK + 1],
                              around(CALL_CHUNK, 2 * CALL_CHUNK)),
    "whole_sum": (whole_sum, lambda n: [(n,)], [9, BLOCK + 1, SUM_CHUNK + 1],
                  [*range(1, 18), *around(BLOCK, 2 * BLOCK, SUM_CHUNK, 2 * SUM_CHUNK, CHUNK)]),
    # (rows of one element are a shape of their own: a third entry)
    "row_sums": (row_sums, lambda n: [(3, n)], [1, BLOCK + 1, SUM_CHUNK + 1],
                 [*range(2, 18), *around(BLOCK, SUM_CHUNK, 2 * SUM_CHUNK)]),
    # rows shorter than 8: one leaf each, summed without the chunk and leaf loops
    "short_row_sums": (row_sums, lambda n: [(1000, n)], [3], [*range(2, 11), 16]),
    "short_row_sums_and_max": (row_sums_and_max, lambda n: [(200, n)], [5],
                               [*range(2, 11), BLOCK + 1]),
    "squared_lengths": (squared_lengths, lambda n: [(40, 30, n)], [3], [*range(2, 10)]),
    "rows_centred": (rows_centred, lambda n: [(n, 5)], [AHEAD_ROWS + 1],
                     around(AHEAD_ROWS, 2 * AHEAD_ROWS)),
    "rows_centred_long": (rows_centred, lambda n: [(3, n)], [BLOCK + 1], around(BLOCK, CHUNK)),
    "column_sums": (column_sums, lambda n: [(n, 3)], [BLOCK + 1], around(BLOCK, AHEAD_ROWS)),
}


def _args(shapes):
    return [RNG.standard_normal(s) for s in shapes]


@pytest.mark.parametrize("case", list(CASES))
def test_kernel_at_its_split_lengths(case, monkeypatch):
    fn, shapes, static, dynamic = CASES[case]
    handed = count_handbacks(monkeypatch)
    for n in static:
        assert_same(fn, *_args(shapes(n)))
        assert handed == [], f"length {n}: the kernel handed its group to NumPy"
    jitted = pijit.jit(fn, jit_config={"jit_level": "O1"})
    for n in dynamic:
        args = _args(shapes(n))
        want_args, got_args = clone(args), clone(args)
        want = run_plain(fn, want_args, {})
        got = run_observed(jitted, got_args, {})
        assert_same_outcome(got, want, got_args, want_args, f"length {n}")
        assert handed == [], f"length {n}: the kernel handed its group to NumPy"
    # two entries, one graph each: the first length's, then the dynamic one every other ran
    ran, stats = report(jitted.fn.__code__), pijit.stats(jitted)
    assert ran.graph_count == 2 and ran.graph_break_count == 0 and ran.fallback is None, ran
    assert stats["compile_count"] == 2 and stats["cache_misses"] == 2, stats


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8])
def test_short_rows_of_zeros_keep_numpy_signs(n, monkeypatch):
    """Rows of -0.0 and +0.0 (and of both): NumPy's sum starts from +0.0, so a row of -0.0
    sums to +0.0; a short row's sum starts from the same zero."""
    handed = count_handbacks(monkeypatch)
    x = np.zeros((5, n))
    x[0] = -0.0
    x[1, ::2] = -0.0
    x[2] = -1.0
    x[3, -1] = -0.0
    assert_same(row_sums, x)
    assert handed == [], "a row of zeros handed back"
    assert_same(row_sums_and_max, x)    # (a max of mixed zeros is NumPy's: handed back)
    x[4, :] = 1e200         # its square overflows: NumPy's warning, its inf
    assert_same(row_sums, x)
