"""Slices whose bounds are graph ints (`A[i, :i]`, `x[j:]`: loop indices, symbolic int
arguments): their length is a dynamic dim of the graph (capture/meta_rules.py), checked at
run time like any other, instead of a graph break. Differential against plain Python, one
graph with no break, on both backends."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import pijit
from differential import assert_equal_values, assert_same
from pijit import cache

LEVELS = ["O0", "O1"]


def jit_kwargs(level, **options):
    return {"jit_config": {"jit_level": level, **options}}


def forward_substitution(L, b):
    n = L.shape[0]
    x = np.zeros(n)
    for i in range(n):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    return x


def back_substitution(U, b):
    n = U.shape[0]
    x = np.zeros(n)
    for i in range(n - 1, -1, -1):
        x[i] = (b[i] - U[i, i + 1:] @ x[i + 1:]) / U[i, i]
    return x


def tail_updates(x, n):
    for j in range(n):
        x[j:] *= 0.5
        x[:j] += 1.0
    return x


def column_elimination(A):
    n = A.shape[0]
    for k in range(n - 1):
        A[k + 1:, k] /= A[k, k]
        A[k + 1:, k + 1:] -= np.outer(A[k + 1:, k], A[k, k + 1:])
    return A


def symbolic_bounds(x, i, j):
    return x[i:j].sum() + x[:i].sum() * 2.0, x[j::2] * 3.0


def bad_bound(x, i):
    return x[i:].sum()


def slice_lengths(x, i):
    head, tail = x[:i], x[i + 1:]
    return head.shape[0], len(tail) * 1.5, np.zeros(tail.shape) + len(head)


# Loop nodes: without loop nests (which take these loops: tests/test_loop_nests_slices.py).
@pytest.mark.parametrize("level", LEVELS)
def test_triangular_solves_are_loop_nodes(level):
    rng = np.random.default_rng(0)
    n = 130                              # > MAX_LOOP_UNROLLING: a loop node, i a graph int
    L = np.tril(rng.random((n, n))) + n * np.eye(n)
    rep = assert_same(forward_substitution, L, rng.random(n),
                      jit_kwargs=jit_kwargs(level, loop_nests=False))
    assert rep.ops_per_graph[0].count("loop") == 1
    rep = assert_same(back_substitution, L.T.copy(), rng.random(n),
                      jit_kwargs=jit_kwargs(level, loop_unrolling=False, loop_nests=False))
    assert rep.ops_per_graph[0].count("loop") == 1


@pytest.mark.parametrize("level", LEVELS)
def test_slices_by_loop_index_with_writes(level):
    rng = np.random.default_rng(1)
    kw = jit_kwargs(level, loop_unrolling=False, loop_nests=False)
    rep = assert_same(tail_updates, rng.random(20), 12, jit_kwargs=kw)
    assert rep.ops_per_graph == [["loop"]]
    A = rng.random((12, 12)) + 12 * np.eye(12)
    rep = assert_same(column_elimination, A, jit_kwargs=kw)
    assert rep.ops_per_graph[0].count("loop") == 1


@pytest.mark.parametrize("level", LEVELS)
def test_symbolic_int_arguments(level):
    kw = jit_kwargs(level, specialize_scalar=False)
    x = np.arange(30.0)
    for i, j in ((3, 20), (0, 30), (25, 5), (-4, 40), (-40, -2)):
        assert_same(symbolic_bounds, x, i, j, jit_kwargs=kw)
    # a bound that is not an int: a break, and plain Python raises its TypeError
    assert_same(bad_bound, x, 2.5, jit_kwargs=kw, graphs=0, breaks=1)


@pytest.mark.parametrize("level", LEVELS)
def test_lengths_of_symbolic_slices_are_read_at_run_time(level):
    """A slice's length (shape, len, size) is a dynamic dim read when the graph runs: one
    entry serves every bound."""
    kw = jit_kwargs(level, specialize_scalar=False)
    x = np.arange(8.0)
    for i in (3, 0, 7, -2, 12):
        rep = assert_same(slice_lengths, x, i, jit_kwargs=kw)
    assert rep.graph_count == 1 and rep.graph_break_count == 0


def static_value_into_dynamic_slice(x, i):
    x[i:] = np.ones(3)          # fits only when len(x) - i == 3: NumPy decides at run time
    return x


@pytest.mark.parametrize("level", LEVELS)
def test_static_value_into_a_slice_of_dynamic_length(level):
    kw = jit_kwargs(level, specialize_scalar=False)
    # capture cannot tell whether the shapes fit: a break, and plain Python assigns or raises
    assert_same(static_value_into_dynamic_slice, np.zeros(5), 2, jit_kwargs=kw, graphs=1,
                breaks=1)
    assert_same(static_value_into_dynamic_slice, np.zeros(5), 1, jit_kwargs=kw, graphs=1,
                breaks=1)


# -- bounds from graph data (issue 22): np.searchsorted, argmax, count_nonzero, len of a
# mask's result. NumPy integer scalars and Python ints alike; the slice's length is a
# dynamic dim, and the elementwise ops after it fuse over it.

def _fused_groups(fn, *args, level="O1"):
    """The fused groups' comment lines of fn's one compiled entry (fn jitted at `level`,
    compiled at its first call)."""
    gc.collect()    # an earlier test's wrapper of fn, still alive, would give ours a code copy
    jitted = pijit.jit(fn, jit_config={"jit_level": level, "adaptive": False})
    pijit.reset(jitted)
    jitted(*args)
    source = cache.record(fn.__code__).entries[0].graph_source
    return [line for line in source.splitlines() if line.startswith("/* group")]


def head_below(x, v):
    k = np.searchsorted(x, v)
    return x[:k] * 2.0 + 1.0


def around_the_max(x):
    i = np.argmax(x)
    return x[i - 3:] * 2.0 + 1.0, x[:i - 20].sum(), x[i + 100:] + 1.0, x[i::-2] * 0.5


def by_counts(x, t):
    n = np.count_nonzero(x > t)
    m = len(x[x > t])
    return x[n:] * 2.0 + 1.0, x[:m] - 1.0, x[m:n:2], x[-n:] * 3.0


def between(x, y, lo, hi):
    i, j = np.searchsorted(x, np.array([lo, hi]))
    return x[i:j] * y[i:j] + 1.0, y[j:i] * 2.0, x[j:j] + 1.0


DATA_BOUNDS = [
    (head_below, lambda g: (np.sort(g.random(12)), 0.5)),
    (around_the_max, lambda g: (g.random(12),)),
    (by_counts, lambda g: (g.random(12), 0.4)),
    (between, lambda g: (np.sort(g.random(12)), g.random(12), 0.3, 0.7)),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn,make", DATA_BOUNDS, ids=[c[0].__name__ for c in DATA_BOUNDS])
def test_slice_bounds_from_graph_data(fn, make, level):
    """One graph, no break; negative, out-of-range, reversed and empty bounds as NumPy
    clamps them; every new bound (a new result shape) served by the same entry."""
    gen = np.random.default_rng(7)
    for _ in range(3):
        rep = assert_same(fn, *make(gen), jit_kwargs=jit_kwargs(level))
        assert rep.graph_count == 1 and rep.graph_break_count == 0, rep
    jitted = pijit.jit(fn, **jit_kwargs(level))
    pijit.reset(jitted)
    for _ in range(6):
        args = make(gen)
        assert_equal_values(jitted(*args), fn(*args))
    assert pijit.code_info(jitted)["compile_count"] == 1
    assert pijit.stats(jitted)["cache_hits"] == 5


def test_ops_after_a_data_bound_slice_fuse():
    """The mul and add after x[:k] are one fused group over the slice's dynamic length."""
    groups = _fused_groups(head_below, np.arange(10.0), 4.5)
    assert any("[None]" in g and "=mul" in g and "=add" in g for g in groups), groups
    groups = _fused_groups(between, np.arange(10.0), np.ones(10), 2.5, 7.5)
    assert any("[None]" in g and "=mul" in g and "=add" in g for g in groups), groups


def float_bound(x):
    return x[:x.sum()]          # a float bound: NumPy's TypeError, from plain Python


def test_a_float_scalar_bound_breaks():
    rep = assert_same(float_bound, np.arange(3.0), graphs=1, breaks=None)
    assert "not an integer" in rep.break_reasons[0]["reason"], rep


# -- slices of results whose size depends on the data (issue 22): a[a > t][:5],
# np.nonzero(x)[0][1:], np.unique(x)[::2]. Their length is a dynamic dim like the
# result's own; the ops after stay in the graph.

def first_selected(a, t):
    s = a[a > t][:5]
    return s * 2.0 + 1.0, a[a > t][-3:].sum(), a[a < t][::-2] - 1.0


def nonzero_tail(x):
    i = np.nonzero(x > 0.5)[0][1:]
    return i * 2 + 1, np.flatnonzero(x < 0.2)[:-1] + 0


def unique_every_other(x):
    u = np.unique(np.round(x * 6.0))
    return u[::2] * 0.5, u[1:] - u[:-1], u[100:] + 1.0


def mismatched_lengths(a, t):
    return a[a > t][:4] + a[a < t][1:]      # NumPy decides: broadcast, or ValueError


DATA_SIZED = [
    (first_selected, lambda g: (g.random(30), 0.4)),
    (nonzero_tail, lambda g: (g.random(30),)),
    (unique_every_other, lambda g: (g.random(30),)),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn,make", DATA_SIZED, ids=[c[0].__name__ for c in DATA_SIZED])
def test_slices_of_data_sized_results(fn, make, level):
    gen = np.random.default_rng(3)
    for size in (30, 3, 1, 0):         # empty results and results shorter than the slice
        args = make(gen)
        args = (args[0][:size],) + args[1:]
        rep = assert_same(fn, *args, jit_kwargs=jit_kwargs(level))
        assert rep.graph_count == 1 and rep.graph_break_count == 0, rep
    jitted = pijit.jit(fn, **jit_kwargs(level))
    pijit.reset(jitted)
    for _ in range(5):                 # a new number of selected items each call
        args = make(gen)
        assert_equal_values(jitted(*args), fn(*args))
    assert pijit.code_info(jitted)["compile_count"] == 1
    assert pijit.stats(jitted)["cache_hits"] == 4


@pytest.mark.parametrize("level", LEVELS)
def test_slices_of_data_sized_results_that_do_not_broadcast(level):
    kw = jit_kwargs(level)
    a = np.array([0.9, 0.1, 0.8, 0.2, 0.7, 0.3])
    assert_same(mismatched_lengths, a, 0.5, jit_kwargs=kw)          # 3 and 2: ValueError
    assert_same(mismatched_lengths, a[:4], 0.5, jit_kwargs=kw)      # 2 and 1: broadcast
    assert_same(mismatched_lengths, np.array([0.9, 0.1, 0.2]), 0.5, jit_kwargs=kw)


def test_ops_after_slices_of_data_sized_results_fuse():
    x = np.random.default_rng(4).random(20)
    for fn, args in ((first_selected, (x, 0.4)), (nonzero_tail, (x,))):
        groups = _fused_groups(fn, *args)
        assert any("[None]" in g and "=mul" in g and "=add" in g for g in groups), groups


def writes_by_a_data_bound(x, y, v):
    k = np.searchsorted(x, v)
    x[:k] = 0.0
    y[k:] += x[k:] * 2.0
    return x + y


@pytest.mark.parametrize("level", LEVELS)
def test_writes_through_slices_by_a_data_bound(level):
    x = np.sort(np.random.default_rng(1).random(8))
    for v in (0.3, -1.0, 5.0):           # a bound inside, below and past the end
        rep = assert_same(writes_by_a_data_bound, x, np.ones(8), v,
                          jit_kwargs=jit_kwargs(level))
        assert rep.ops_per_graph[0].count("setitem") == 2, rep.ops_per_graph
