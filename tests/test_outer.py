"""np.outer of 1-D arrays as a broadcast product (pijit/graph/outer.py), so the fused
backend takes it: NumPy's own definition, so the results are NumPy's bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from pijit.backends import cfused
from pijit.capture.interpreter import capture_frame
from pijit.config import JitConfig
from pijit.graph.fuse import find_groups
from pijit.graph.ir import Ref, run_graph
from pijit.graph.outer import expand_outer
from pijit.graph.verify import verify
from differential import assert_equal_values, assert_same


def rank2(A, u1, v1, u2, v2):
    A += np.outer(u1, v1) + np.outer(u2, v2)
    return A


def mixed(u, v, w):
    return np.outer(u, v) * 2.0, np.outer(w, w), np.outer(u, np.ones((2, 2)))


def vectors(n, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(n) * 10).astype(dtype) for _ in range(4)]


def test_expanded_graph_equals_numpy_bits():
    u1, v1, u2, v2 = vectors(7)
    args = (np.ones((7, 7)), u1, v1, u2, v2)
    graph = capture_frame(rank2, args, JitConfig()).graph
    graph.outputs = [graph.inputs[0]]
    expanded = expand_outer(graph)
    verify(expanded)
    assert [n.name for n in expanded.nodes] == [
        "getitem", "getitem", "multiply", "getitem", "getitem", "multiply", "add", "iadd"]
    got = run_graph(expanded, [a.copy() for a in args])[0]
    assert_equal_values(got, rank2(*[a.copy() for a in args]))
    # the two products, the sum and the write into A are one fusion group (the kernel
    # writes into A: cfused's direct writes)
    groups = find_groups(cfused.optimize(graph), exact=True)
    assert len(groups) == 1
    assert [n.name for n in groups[0].nodes] == ["multiply", "multiply", "add", "iadd"]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_outer_fused_differential(dtype):
    u, v, w, _ = vectors(5, dtype, seed=1)
    A = np.zeros((5, 5), dtype)
    rep = assert_same(rank2, A, u, v, w, u)
    assert rep.ops_per_graph[0].count("outer") == 2
    # a 2-D operand (ravelled by NumPy) stays np.outer
    assert_same(mixed, u, v, w)


@pytest.mark.parametrize("rows, cols", [(5, 3), (3, 5), (1, 4), (4, 1)])
def test_outer_of_vectors_of_two_lengths(rows, cols):
    """u[:, None] is (rows, 1) and v[None, :] is (1, cols): the fused product broadcasts
    each along the other's length (square tests cannot tell a column from a row)."""
    u1, u2 = vectors(rows, seed=2)[:2]
    v1, v2 = vectors(cols, seed=3)[:2]
    rep = assert_same(rank2, np.ones((rows, cols)), u1, v1, u2, v2)
    assert rep.graph_count == 1 and rep.ops_per_graph[0].count("outer") == 2
    graph = capture_frame(rank2, (np.ones((rows, cols)), u1, v1, u2, v2), JitConfig()).graph
    expanded = expand_outer(graph)
    verify(expanded)
    assert [expanded.meta(Ref(n.out)).shape for n in expanded.nodes if n.name == "getitem"] \
        == [(rows, 1), (1, cols)] * 2
