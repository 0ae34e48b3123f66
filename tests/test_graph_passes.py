"""Graph passes (dce, cse) and fusion grouping, each followed by the verifier."""
from __future__ import annotations

import operator

import numpy as np
import pytest

from pijit.graph.cse import cse
from pijit.graph.dce import dce
from pijit.graph.fuse import find_groups, schedule
from pijit.graph.ir import Graph, Meta, Ref, arg_refs, map_refs
from pijit.graph.simplify import simplify
from pijit.graph.verify import verify
from differential import assert_same

F64 = Meta.array((4, 5), np.float64)


def graph_of(*input_metas):
    g = Graph()
    refs = [g.add_input(m, f"x{i}") for i, m in enumerate(input_metas)]
    return g, refs


def test_dce_drops_unused_pure_keeps_inplace_and_what_may_warn():
    g, (x,) = graph_of(F64)
    dead = g.add_node("neg", operator.neg, (x,), {}, F64)
    g.add_node("exp", np.exp, (x,), {}, F64)        # unused, but may warn of an overflow
    t = g.add_node("mul", operator.mul, (x, 2.0), {}, F64)
    g.add_node("iadd", operator.iadd, (t, 1.0), {}, F64)
    out = g.add_node("add", operator.add, (x, 1.0), {}, F64)
    g.outputs = [out]
    verify(g)
    d = dce(g)
    verify(d)
    assert [n.name for n in d.nodes] == ["exp", "mul", "iadd", "add"]
    assert dead.index not in d._metas


def test_cse_merges_identical_pure_nodes_that_cannot_warn():
    g, (x, y) = graph_of(F64, F64)
    a = g.add_node("maximum", np.maximum, (x, y), {}, F64)
    b = g.add_node("maximum", np.maximum, (x, y), {}, F64)
    c = g.add_node("maximum", np.maximum, (x, 1.0), {}, F64)
    d = g.add_node("maximum", np.maximum, (x, 1), {}, F64)   # 1 and 1.0 stay apart
    out = g.add_node("lt", operator.lt, (a, b), {}, F64)
    g.outputs = [out, c, d]
    s = dce(cse(g))
    verify(s)
    assert [n.name for n in s.nodes] == ["maximum", "maximum", "maximum", "lt"]
    assert s.nodes[-1].args == (a, a)
    # x - y twice warns twice in NumPy (an overflow, say): both stay
    g, (x, y) = graph_of(F64, F64)
    a = g.add_node("sub", operator.sub, (x, y), {}, F64)
    b = g.add_node("sub", operator.sub, (x, y), {}, F64)
    g.outputs = [g.add_node("lt", operator.lt, (a, b), {}, F64)]
    assert [n.name for n in dce(cse(g)).nodes] == ["sub", "sub", "lt"]


def test_cse_keeps_outputs_apart_and_skips_inplace_graphs():
    g, (x,) = graph_of(F64)
    a = g.add_node("neg", operator.neg, (x,), {}, F64)
    b = g.add_node("neg", operator.neg, (x,), {}, F64)
    g.outputs = [a, b]
    assert len(cse(g).nodes) == 2            # two outputs must not be one object
    g2, (x,) = graph_of(F64)
    a = g2.add_node("neg", operator.neg, (x,), {}, F64)
    g2.add_node("iadd", operator.iadd, (a, 1.0), {}, F64)
    b = g2.add_node("neg", operator.neg, (x,), {}, F64)
    g2.outputs = [b]
    assert len(cse(g2).nodes) == 3


def _maxima_by_axis(x):
    return np.stack([np.max(x, axis=0), np.max(x, axis=1)])


def _maxima_by_signed_zero(x):
    return np.stack([np.maximum(x, 0.0), np.maximum(x, -0.0)])


@pytest.mark.parametrize("level", ["O0", "O1"])
@pytest.mark.parametrize("fn, x, ops", [
    (_maxima_by_axis, np.array([[0.0, 5, 1], [3, 1, 2], [4, 0, 9]]), ["max", "stack"]),
    # maximum(0.0, -0.0) is -0.0 and maximum(0.0, 0.0) 0.0: the two constants are two keys
    (_maxima_by_signed_zero, np.array([-0.0, 0.0]), ["maximum", "stack"])])
def test_cse_keeps_apart_what_differs_only_in_keywords_or_in_a_zero_sign(fn, x, ops, level):
    """Two nodes that cannot warn (so cse would merge them), of one shape and dtype, that
    differ only in a keyword argument or in the sign of a zero constant stay two."""
    assert_same(fn, x, graphs=1, breaks=0, ops=ops,
                jit_kwargs={"jit_config": {"jit_level": level}})


def _quiet_writes_with_unused_results(a, b, m):
    np.negative(a, out=b)            # sign and comparison ufuncs cannot warn: only their
    np.maximum(a, 0.0, out=a)        # out= write keeps them alive, and nothing reads it
    np.less(b, 0.0, out=m)
    return 1


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_dce_keeps_writes_through_out_that_cannot_warn(level):
    """A ufunc that cannot warn, called with out= and its result unused, is still a write:
    dce must keep it though may_warn says no."""
    assert_same(_quiet_writes_with_unused_results, np.linspace(-1.0, 1.0, 7), np.zeros(7),
                np.zeros(7, dtype=bool), ops=["negative", "maximum", "less"],
                jit_kwargs={"jit_config": {"jit_level": level}})


def _maxima_by_scalars_of_equal_bytes(x):
    # np.uint8(255) and np.int8(-1) are the same byte; np.float32(1.0) and
    # np.int32(1065353216) the same four bytes
    return (np.stack([np.maximum(x, np.uint8(255)), np.maximum(x, np.int8(-1))]),
            np.stack([np.minimum(x, np.float32(1.0)), np.minimum(x, np.int32(1065353216))]))


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_cse_keeps_apart_numpy_scalars_of_equal_bytes(level):
    assert_same(_maxima_by_scalars_of_equal_bytes, np.array([-3, 0, 7, 300], dtype=np.int16),
                ops=["maximum", "minimum", "stack"],
                jit_kwargs={"jit_config": {"jit_level": level}})


def test_chain_is_one_group():
    g, (a, b, c) = graph_of(F64, F64, F64)
    t1 = g.add_node("mul", operator.mul, (a, b), {}, F64)
    t2 = g.add_node("mul", operator.mul, (c, a), {}, F64)
    t3 = g.add_node("exp", np.exp, (c,), {}, F64)
    t4 = g.add_node("add", operator.add, (t1, t2), {}, F64)
    t5 = g.add_node("sub", operator.sub, (t4, t3), {}, F64)
    g.outputs = [t5]
    (grp,) = find_groups(g)
    assert [n.out for n in grp.nodes] == [t1.index, t2.index, t3.index, t4.index, t5.index]
    assert grp.inputs == [a, b, c] and grp.outputs == [t5]


def test_softmax_is_one_group_in_three_stages():
    rows = Meta.array((4, 1), np.float64)
    g, (x,) = graph_of(F64)
    m = g.add_node("max", np.ndarray.max, (x,), {"axis": -1, "keepdims": True}, rows)
    d = g.add_node("sub", operator.sub, (x, m), {}, F64)
    e = g.add_node("exp", np.exp, (d,), {}, F64)
    s = g.add_node("sum", np.ndarray.sum, (e,), {"axis": -1, "keepdims": True}, rows)
    r = g.add_node("truediv", operator.truediv, (e, s), {}, F64)
    g.outputs = [r]
    (grp,) = find_groups(g)
    assert grp.reduce == {m.index: ("max", "last", True), s.index: ("sum", "last", True)}
    assert grp.rows == {m.index, s.index}
    # max in loop 0; exp and sum in loop 1 (after the max); the division in loop 2.
    assert [grp.loop_of(n) for n in grp.nodes] == [0, 1, 1, 1, 2]
    assert grp.inputs == [x] and grp.outputs == [r]
    assert "in 3 stages" in str(grp)


def test_full_values_are_computed_in_the_loop_that_reads_them():
    """A full value only later loops read is computed in the first of them (fuse.sink), not
    kept in a scratch row from loop 0; one a NumPy loop reads stays before that loop, and
    one read in its own loop too stays there."""
    g, (x,) = graph_of(F64)
    half = g.add_node("mul", operator.mul, (x, 0.5), {}, F64)
    th = g.add_node("tanh", np.tanh, (half,), {}, F64)
    th2 = g.add_node("mul", operator.mul, (th, 2.0), {}, F64)
    ab = g.add_node("abs", np.abs, (x,), {}, F64)
    sq = g.add_node("sqrt", np.sqrt, (ab,), {}, F64)
    early = g.add_node("add", operator.add, (half, ab), {}, F64)
    u = g.add_node("add", operator.add, (th2, sq), {}, F64)
    xx = g.add_node("mul", operator.mul, (x, x), {}, F64)
    r = g.add_node("sub", operator.sub, (u, xx), {}, F64)
    r2 = g.add_node("mul", operator.mul, (r, early), {}, F64)
    k = g.add_node("mul", operator.mul, (x, 3.0), {}, F64)
    k1 = g.add_node("add", operator.add, (k, 1.0), {}, F64)
    r3 = g.add_node("add", operator.add, (r2, k), {}, F64)
    g.outputs = [r3, k1]
    (grp,) = find_groups(g, exact=True, numpy_loops=frozenset({"tanh"}))
    assert grp.numpy_loops == {th.index}
    loop = {n.out: grp.loop_of(n) for n in grp.nodes if n.out not in grp.numpy_loops}
    assert loop[half.index] == 0            # NumPy's tanh reads it before loop 1
    assert loop[k.index] == loop[k1.index] == 0     # k1 (an output no member reads) reads k
    assert loop[early.index] == loop[ab.index] == 1     # (ab: all its readers moved)
    assert loop[sq.index] == loop[xx.index] == loop[u.index] == loop[r3.index] == 1


def test_layernorm_row_nodes_join_the_group():
    rows = Meta.array((4, 1), np.float64)
    g, (x, w) = graph_of(F64, Meta.array((5,), np.float64))
    mu = g.add_node("mean", np.ndarray.mean, (x,), {"axis": -1, "keepdims": True}, rows)
    d = g.add_node("sub", operator.sub, (x, mu), {}, F64)
    sq = g.add_node("square", np.square, (d,), {}, F64)
    var = g.add_node("mean", np.ndarray.mean, (sq,), {"axis": -1, "keepdims": True}, rows)
    ve = g.add_node("add", operator.add, (var, 1e-5), {}, rows)
    sd = g.add_node("sqrt", np.sqrt, (ve,), {}, rows)
    y = g.add_node("truediv", operator.truediv, (d, sd), {}, F64)
    z = g.add_node("mul", operator.mul, (y, w), {}, F64)
    g.outputs = [z, sd]
    (grp,) = find_groups(g)
    assert grp.rows == {mu.index, var.index, ve.index, sd.index}
    assert grp.stage[sd.index] == 2 and grp.stage[z.index] == 2
    assert grp.outputs == [sd, z]


def test_row_value_without_keepdims_does_not_broadcast_into_rows():
    g, (x,) = graph_of(Meta.array((5, 5), np.float64))
    m = g.add_node("max", np.ndarray.max, (x,), {"axis": -1}, Meta.array((5,), np.float64))
    d = g.add_node("sub", operator.sub, (x, m), {}, Meta.array((5, 5), np.float64))
    g.outputs = [d]
    groups = find_groups(g)
    assert len(groups) == 2         # x - m broadcasts m along the last axis: not a row value
    assert [u.id for u in schedule(g, groups)] == [0, 1]


def test_whole_reduction_closes_the_group():
    g, (x,) = graph_of(F64)
    s = g.add_node("sum", np.ndarray.sum, (x,), {}, Meta(np.float64, np.dtype(np.float64), ()))
    d = g.add_node("sub", operator.sub, (x, s), {}, F64)
    g.outputs = [d]
    assert len(find_groups(g)) == 2


def test_no_fusion_through_an_outside_node():
    g, (a, w) = graph_of(F64, Meta.array((5, 5), np.float64))
    t = g.add_node("mul", operator.mul, (a, 2.0), {}, F64)
    mm = g.add_node("matmul", operator.matmul, (t, w), {}, F64)
    u = g.add_node("add", operator.add, (t, mm), {}, F64)     # joining t's group: a cycle
    g.outputs = [u]
    groups = find_groups(g)
    assert len(groups) == 2
    order = schedule(g, groups)
    assert [getattr(x, "name", "group") for x in order] == ["group", "matmul", "group"]


def test_dynamic_elementwise_nodes_fuse_and_a_max_over_a_dynamic_dim_does_not():
    """Elementwise nodes of a dynamic shape form their own group (the kernel takes shapes at
    run time); a max over a dynamic dim is left to NumPy (empty, it must raise; sums over
    dynamic dims do fuse: test_cfused)."""
    dyn = Meta.array((None,), np.float64)
    g, (i, x) = graph_of(Meta.array((4,), np.int64), dyn)
    out_i = g.add_node("add", operator.add, (i, 1), {}, Meta.array((4,), np.int64))
    sq = g.add_node("mul", operator.mul, (x, x), {}, dyn)
    out_x = g.add_node("add", operator.add, (sq, 1.0), {}, dyn)
    scalar = Meta(np.float64, np.dtype(np.float64), ())
    top = g.add_node("max", np.ndarray.max, (out_x,), {}, scalar)
    g.outputs = [out_i, out_x, top]
    groups = sorted(find_groups(g), key=lambda grp: len(grp.nodes))
    assert [grp.shape for grp in groups] == [(4,), (None,)]
    assert groups[0].outputs == [out_i] and groups[1].outputs == [out_x]
    assert not groups[1].reductions


def test_whole_reductions_share_one_pass():
    g, (x,) = graph_of(F64)
    scalar = Meta(np.float64, np.dtype(np.float64), ())
    sq = g.add_node("mul", operator.mul, (x, x), {}, F64)
    s1 = g.add_node("sum", np.ndarray.sum, (sq,), {}, scalar)
    s2 = g.add_node("max", np.ndarray.max, (x,), {}, scalar)
    g.outputs = [g.add_node("add", operator.add, (s1, s2), {}, scalar)]
    first, second = find_groups(g)
    assert first.reduce == {s1.index: ("sum", "all", False), s2.index: ("max", "all", False)}
    assert second.inputs == [s1, s2]


def test_inplace_node_closes_groups():
    g, (x,) = graph_of(F64)
    t = g.add_node("mul", operator.mul, (x, 2.0), {}, F64)
    g.add_node("iadd", operator.iadd, (x, 1.0), {}, F64)
    u = g.add_node("add", operator.add, (t, x), {}, F64)
    g.outputs = [u]
    groups = find_groups(g)
    assert len(groups) == 2                     # t must be read before x changes
    order = schedule(g, groups)
    assert [getattr(x, "name", "group") for x in order] == ["group", "iadd", "group"]


def test_views_do_not_close_groups_but_a_matmul_that_may_warn_does():
    """Pairwise distances, sx[:, None] + sy[None, :] - 2 * (x @ y.T): the row sums fuse
    through their views; the add before the matmul may warn (overflow), as may the matmul, so
    the add cannot join the group of the sub after the matmul (its warnings would come after
    the matmul's, NumPy gives them before)."""
    g, (x, y) = graph_of(F64, Meta.array((6, 5), np.float64))
    rows = []
    for v, n, key in ((x, 4, (slice(None), None)), (y, 6, (None, slice(None)))):
        sq = g.add_node("mul", operator.mul, (v, v), {}, Meta.array((n, 5), np.float64))
        s = g.add_node("sum", np.ndarray.sum, (sq,), {"axis": 1}, Meta.array((n,), np.float64))
        shape = (n, 1) if key[1] is None else (1, n)
        rows.append(g.add_node("getitem", operator.getitem, (s, key), {},
                               Meta.array(shape, np.float64)))
    both = g.add_node("add", operator.add, tuple(rows), {}, Meta.array((4, 6), np.float64))
    yt = g.add_node("transpose", np.transpose, (y,), {}, Meta.array((5, 6), np.float64))
    xy = g.add_node("matmul", operator.matmul, (x, yt), {}, Meta.array((4, 6), np.float64))
    two = g.add_node("mul", operator.mul, (2.0, xy), {}, Meta.array((4, 6), np.float64))
    g.outputs = [g.add_node("sub", operator.sub, (both, two), {}, Meta.array((4, 6), np.float64))]
    verify(g)
    first, second, add, last = find_groups(g)
    # sx[:, None] is the row sum in keepdims form: a row node of its group; sy[None, :] is not
    assert sorted(first.ops.values()) == ["expand", "mul", "sum"]
    assert sorted(second.ops.values()) == ["mul", "sum"]
    assert list(add.ops.values()) == ["add"]
    assert sorted(last.ops.values()) == ["mul", "sub"]
    assert [getattr(u, "name", "group") for u in schedule(g, find_groups(g))] == [
        "group", "group", "getitem", "group", "transpose", "matmul", "group"]


def test_setitem_closes_groups():
    g, (x,) = graph_of(F64)
    t = g.add_node("mul", operator.mul, (x, 2.0), {}, F64)
    g.add_node("setitem", operator.setitem, (x, 0, 1.0), {}, Meta(type(None), np.dtype(object), ()))
    g.outputs = [g.add_node("add", operator.add, (t, x), {}, F64)]
    assert len(find_groups(g)) == 2             # t must be read before x changes


# -- constant folding and exact identities (simplify.py) ------------------------------------
SCALAR = Meta(float, np.dtype(np.float64), ())


def test_constant_scalars_fold_but_warning_ones_stay():
    g, (x,) = graph_of(F64)
    c = g.add_node("mul", operator.mul, (2.0, 3.0), {}, SCALAR)
    bad = g.add_node("truediv", operator.truediv, (np.float64(1.0), 0.0), {},
                     Meta(np.float64, np.dtype(np.float64), ()))
    out = g.add_node("add", operator.add, (x, c), {}, F64)
    g.outputs = [out, bad]
    s = simplify(g)
    verify(s)
    assert [n.name for n in s.nodes] == ["truediv", "add"]     # 1/0 warns at run time
    assert s.nodes[1].args == (x, 6.0)


def test_exact_identities_read_the_operand():
    g, (x,) = graph_of(F64)
    t1 = g.add_node("mul", operator.mul, (1.0, x), {}, F64)
    t2 = g.add_node("truediv", operator.truediv, (t1, 1), {}, F64)
    t3 = g.add_node("neg", operator.neg, (t2,), {}, F64)
    t4 = g.add_node("neg", operator.neg, (t3,), {}, F64)
    t5 = g.add_node("sub", operator.sub, (t4, 0.0), {}, F64)
    out = g.add_node("exp", np.exp, (t5,), {}, F64)
    g.outputs = [out]
    s = dce(simplify(g))
    verify(s)
    assert [(n.name, n.args) for n in s.nodes] == [("exp", (x,))]


def test_identities_that_could_be_seen_are_kept():
    g, (x, i) = graph_of(F64, Meta.array((4, 5), np.int64))
    plus_zero = g.add_node("add", operator.add, (x, 0.0), {}, F64)        # -0.0 + 0.0
    minus_negzero = g.add_node("sub", operator.sub, (x, -0.0), {}, F64)   # same
    to_float = g.add_node("mul", operator.mul, (i, 1.0), {}, F64)         # int -> float
    widened = g.add_node("mul", operator.mul, (i, 1.0), {}, F64)          # the same, read below
    returned = g.add_node("mul", operator.mul, (x, 1.0), {}, F64)         # a copy for the caller
    written = g.add_node("mul", operator.mul, (x, 1.0), {}, F64)
    g.add_node("iadd", operator.iadd, (written, 1.0), {}, F64)            # must not write into x
    g.outputs = [g.add_node("add", operator.add, (plus_zero, minus_negzero), {}, F64),
                 to_float, returned, written, g.add_node("add", operator.add, (widened, x), {}, F64)]
    s = simplify(g)
    verify(s)
    assert len(s.nodes) == len(g.nodes)


def _identities_then_writes(x):
    y = x * 1.0             # a new array in NumPy: the write below must not reach x
    y += 1.0
    t = x / 1.0             # the old values of x, read after x is written
    x -= 0.5
    return y.sum() + t.sum()


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_identities_written_or_read_after_a_write_are_copies(level):
    assert_same(_identities_then_writes, np.array([-0.0, 1.5, 3.0]),
                ops=["mul", "iadd", "truediv", "isub"],
                jit_kwargs={"jit_config": {"jit_level": level}})


def _ones_stacked_with_int8(x):
    return np.stack([(x > 0) * 1, x.astype(np.int8)])       # bool * 1 is int64, not bool


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_an_identity_that_changes_the_dtype_is_kept(level):
    assert_same(_ones_stacked_with_int8, np.array([-1.5, 0.0, 2.5]), ops=["mul", "stack"],
                jit_kwargs={"jit_config": {"jit_level": level}})


# -- the verifier after every stage of a real compile (PIJIT_VERIFY_GRAPHS, on in the suite) ---
def _chain(a, b):
    t = a * b
    return t + a, t - b


def _drops_a_used_node(graph):
    """A broken pass: removes the first node though later nodes read it."""
    from pijit.graph.dce import replace_nodes
    return replace_nodes(graph, graph.nodes[1:])


@pytest.mark.parametrize("stage", ["cse", "simplify"])
def test_a_pass_that_breaks_the_graph_fails_loudly(stage, monkeypatch):
    """Not a silent fallback to NumPy or plain Python (compile_with_try is on): the call
    raises, naming the pass."""
    import pijit
    import pijit.backends.cfused as cfused
    from pijit.graph.verify import GraphInvariantError
    assert pijit.config.env_verify_graphs()          # tests/conftest.py turns it on
    monkeypatch.setattr(cfused, stage, _drops_a_used_node)
    jitted = pijit.jit(_chain)
    pijit.reset(jitted)
    a = np.arange(4.0)
    with pytest.raises(GraphInvariantError, match=f"after {stage}: .* uses %"):
        jitted(a, a + 1)


def test_a_malformed_capture_fails_loudly(monkeypatch):
    import pijit
    from pijit import compile_frame
    from pijit.graph.verify import GraphInvariantError
    real = compile_frame.capture_frame

    def capture_without_a_node(*args, **kwargs):
        result = real(*args, **kwargs)
        result.graph.nodes = result.graph.nodes[1:]
        return result
    monkeypatch.setattr(compile_frame, "capture_frame", capture_without_a_node)
    jitted = pijit.jit(_chain, jit_config={"jit_level": "O0"})
    pijit.reset(jitted)
    with pytest.raises(GraphInvariantError, match="after capture"):
        jitted(np.arange(4.0), np.ones(4))


def _sum_where_positive(x):
    return np.sum(x, where=x > 0)       # the mask is read through a keyword only


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_dce_keeps_what_a_node_reads_through_a_keyword(level):
    assert_same(_sum_where_positive, np.linspace(-2.0, 3.0, 11), ops=["gt", "sum"],
                jit_kwargs={"jit_config": {"jit_level": level}})


def _quiet_reads_around_an_out_write(a, b, c):
    before = np.maximum(c, 1.0).sum()       # quiet: cse may merge equal ones
    view = c[1:]
    v_before = np.maximum(view, 1.0) + 1
    np.add(a, b, out=c)                     # writes c and, through it, view
    return before, np.maximum(c, 1.0).sum(), v_before, np.maximum(view, 1.0) + 1


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_no_common_subexpression_across_a_write_through_out(level):
    """A ufunc's out= write is a mutation: equal reads of the array before and after it are
    two values."""
    assert_same(_quiet_reads_around_an_out_write, np.arange(4.0), np.ones(4), np.zeros(4),
                ops=["maximum", "add"], jit_kwargs={"jit_config": {"jit_level": level}})


def _equal_values_one_seen_through_a_view(a):
    t1 = 0 + a                  # quiet (bool + int): cse may merge equal ones
    t2 = 0 + a
    return t1, t2.T             # plain: t2.T is a view of t2, not of the returned t1


def _equal_values_both_seen_through_views(a):
    return (0 + a)[::-1], (0 + a)[::-1]


@pytest.mark.parametrize("level", ["O0", "O1"])
@pytest.mark.parametrize("fn", [_equal_values_one_seen_through_a_view,
                                _equal_values_both_seen_through_views])
def test_cse_keeps_apart_values_read_through_views(fn, level):
    """Found by the random programs (1,000 examples at O1; hunt34): merging `0 + a` into an
    equal value made a returned view alias another result."""
    assert_same(fn, np.array([False, True, True]), ops=["add"],
                jit_kwargs={"jit_config": {"jit_level": level}})


def test_every_ref_arg_refs_finds_map_refs_replaces():
    """What a pass reads (arg_refs) and what it rewrites (map_refs) are the same Refs, dict
    keys and slice parts included, or a renumbering pass would leave a key pointing at a value
    that moved."""
    arg = ([Ref(1), {Ref(2): Ref(3), "k": (Ref(4),)}], slice(Ref(5), None, Ref(6)))
    assert list(arg_refs(arg)) == [Ref(i) for i in range(1, 7)]
    moved = map_refs(arg, lambda r: Ref(r.index + 10))
    assert list(arg_refs(moved)) == [Ref(i) for i in range(11, 17)]
    assert map_refs(arg, lambda r: r) == arg
