"""Slices whose bounds are graph ints (`A[i, :i]`, `x[j:]`: loop indices, symbolic int
arguments): their length is a dynamic dim of the graph (capture/meta_rules.py), checked at
run time like any other, instead of a graph break. Differential against plain Python, one
graph with no break, on both backends."""
from __future__ import annotations

import numpy as np
import pytest

from differential import assert_same

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


@pytest.mark.parametrize("level", LEVELS)
def test_triangular_solves_are_loop_nodes(level):
    rng = np.random.default_rng(0)
    n = 130                              # > MAX_LOOP_UNROLLING: a loop node, i a graph int
    L = np.tril(rng.random((n, n))) + n * np.eye(n)
    rep = assert_same(forward_substitution, L, rng.random(n), jit_kwargs=jit_kwargs(level))
    assert rep.ops_per_graph[0].count("loop") == 1
    rep = assert_same(back_substitution, L.T.copy(), rng.random(n),
                      jit_kwargs=jit_kwargs(level, loop_unrolling=False))
    assert rep.ops_per_graph[0].count("loop") == 1


@pytest.mark.parametrize("level", LEVELS)
def test_slices_by_loop_index_with_writes(level):
    rng = np.random.default_rng(1)
    kw = jit_kwargs(level, loop_unrolling=False)
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
