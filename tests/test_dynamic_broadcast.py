"""Dynamic dims broadcast against 1, end to end: after a size change the entry's changed dims
are dynamic (None), and an operand of shape (1, k), (k,), (?, 1) or (1, 1) must broadcast
against them as NumPy does at every later size (1 and 0 included): values, shapes, layouts
and warnings equal to plain NumPy's, with one dynamic entry serving the later calls."""
from __future__ import annotations

import numpy as np
import pytest

import pijit
from differential import assert_same_outcome, clone, level_tol, run_observed, run_plain

LEVELS = ("O0", "O1", "O2")
K = 6


def _row_times(x, r):           # r: (1, K)
    return x * r + 1.0


def _row_and_column(x, r, c):   # r: (K,), c: (?, 1) with x's rows
    return (x - r) * c, (x * c).sum(axis=-1, keepdims=True)


def _against_one_by_one(x, s):  # s: (1, 1)
    return np.maximum(x, s) - s


def _softmax_scaled(x, r):
    e = np.exp(x * r - (x * r).max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _arrays(rows, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, K))
    return x, rng.standard_normal((1, K)), rng.standard_normal(K), rng.standard_normal((rows, 1))


CASES = {"row_times": (_row_times, lambda x, r1, r, c: (x, r1)),
         "row_and_column": (_row_and_column, lambda x, r1, r, c: (x, r, c)),
         "against_one_by_one": (_against_one_by_one, lambda x, r1, r, c: (x, r1[:, :1].copy())),
         "softmax_scaled": (_softmax_scaled, lambda x, r1, r, c: (x, r1))}
ROWS = (3, 4, 1, 7, 0, 2)       # the second size makes the rows dynamic


def test_dynamic_rows_stay_dynamic_in_the_graph():
    """The captured graph of the dynamic entry (O0: nothing but NumPy runs it) gives the
    result of (?, K) * (1, K) the shape (?, K), not (1, K): kernels size their outputs and
    loops by these shapes."""
    jitted = pijit.jit(_row_times, jit_config={"jit_level": "O0"})
    pijit.reset(jitted)
    for rows in (3, 4):
        x, r1, _, _ = _arrays(rows, rows)
        jitted(x, r1)
    from pijit import cache
    graph = cache.record(_row_times.__code__).entries[0].graph
    assert [str(graph.meta(r)) for r in graph.outputs] == [f"float64[?,{K}]"], str(graph)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", list(CASES))
def test_dynamic_rows_broadcast_against_one(name, level):
    fn, pick = CASES[name]
    jitted = pijit.jit(fn, jit_config={"jit_level": level})
    pijit.reset(jitted)
    for k, rows in enumerate(ROWS):
        args = pick(*_arrays(rows, k))
        if name == "softmax_scaled" and rows == 0:
            continue                    # (max of no values: NumPy raises; its own test)
        want = run_plain(fn, clone(args), {})
        got_args = clone(args)
        got = run_observed(jitted, got_args, {})
        tol, scale = level_tol(fn, args, level)
        assert_same_outcome(got, want, list(got_args), list(args), f"{rows} rows", tol, scale)
    info = pijit.code_info(jitted)
    # the first size, then one entry with dynamic rows for every later size
    assert info["compile_count"] == 2, info
    guards = " ".join(g for e in info["entries"] for g in e["guards"])
    assert f"float64[?,{K}]" in guards, guards
    stats = pijit.stats(jitted)
    assert stats["cache_hits"] >= len(ROWS) - 3, stats


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_dynamic_rows_run_fused_against_a_row_of_one(level):
    """After the size change the row broadcast still runs in the kernel (not handed to
    NumPy): the dynamic entry's compiled graph has a fused group reading (1, K)."""
    jitted = pijit.jit(_row_times, jit_config={"jit_level": level})
    pijit.reset(jitted)
    for rows in (3, 5, 9):
        x, r1, _, _ = _arrays(rows, rows)
        got = jitted(x, r1)
        assert got.tobytes() == _row_times(x, r1).tobytes() or level == "O2"
    entry = pijit.code_info(jitted)["entries"][0]
    assert any("[?,6]" in g for g in entry["guards"]), entry
    from pijit import cache
    source = cache.record(_row_times.__code__).entries[0].graph_source
    assert "group 0 [None,6]" in source, source
