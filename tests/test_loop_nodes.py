"""Loop nodes: `for i in range(...)` captured as one graph node whose body is a graph of its
own (pijit/capture/loop_node.py). Differential against plain NumPy on both backends, with
how each call ran; the loops a node cannot express fall back to unrolling or residual code;
dumps, graph passes and the reference semantics of the node."""
from __future__ import annotations

import dataclasses
import functools
import gc

import numpy as np
import pytest

import pijit
from pijit.backends import cfused, numpy_backend
from pijit.capture.index_facts import IndexFacts
from pijit.capture.interpreter import capture_frame
from pijit.capture.loop_node import INDEX_META
from pijit.capture.values import ConstValue, GraphValue, SliceValue
from pijit.config import JitConfig
from pijit.graph.cse import cse
from pijit.graph.dce import dce
from pijit.graph.fuse import find_groups, schedule
from pijit.graph.ir import Graph, LoopOp, Meta, Ref, run_graph
from pijit.graph.purity import is_pure, mutates
from pijit.graph.verify import verify
from differential import assert_equal_values, assert_same

LEVELS = ["O0", "O1"]
SYMBOLIC = {"specialize_scalar": False}     # int arguments are graph values, not constants


def jit_kwargs(level, **options):
    # loop_nests off: these loops over elements would be loop nests (test_loop_nests.py)
    return {"jit_config": {"jit_level": level, "loop_nodes": True, "loop_nests": False,
                           **options}}


def loop_count(report) -> int:
    return sum(ops.count("loop") for ops in report.ops_per_graph)


# -- the functions under test -------------------------------------------------------------
def decay10(x):
    for i in range(10):
        x = x * 0.9 + 0.1
    return x


def decay1000(x):
    for i in range(1000):
        x = x * 0.9 + 0.1
    return x


def decay(x, n):
    for i in range(n):
        x = x * 0.9 + 0.1
    return x


def heat_inplace(u, n):
    for k in range(n):
        u[1:-1] += 0.1 * (u[2:] - 2 * u[1:-1] + u[:-2])
    return u


def heat_copy(u, n):
    for k in range(n):
        un = u.copy()
        un[1:-1] = u[1:-1] + 0.2 * (u[2:] - 2 * u[1:-1] + u[:-2])
        u = un
    return u


def row_update(A, b):
    for i in range(1, A.shape[0]):
        A[i, :] = A[i - 1, :] * 0.5 + b
    return A


def two_carried(x, y, n):
    for i in range(n):
        x, y = y * 0.5, x + y
    return x, y


def changes_dtype(x):
    for i in range(1000):
        x = x + 0.5           # int64 -> float64 in the first iteration
    return x


def index_after_loop(x):
    for i in range(1000):
        x = x * 0.999
    return x, i


def index_after_symbolic_loop(x, n):
    i = -1
    for i in range(n):
        x = x * 0.999 + i
    return x, i


def index_unbound_after_symbolic_loop(x, n):
    for i in range(n):
        x = x * 0.999
    return x, i


def with_break(x, n):
    for i in range(n):
        x = x + 1
        if i == 3:
            break
    return x


def strided(x, n):
    for i in range(n, 0, -2):
        x = x * 0.5 + i
    for i in range(0, n, 3):
        x = x - i
    for i in range(n, 2):
        x = x * 100.0
    return x


def nested(x, n, m):
    for i in range(n):
        for j in range(m):
            x = x * 0.5 + j
        x = x - i
    return x


def relax(x, n):
    for i in range(n):
        x = x * 0.5 + 1.0
    return x


def calls_relax(x, n):
    return relax(x * 2, n) + 1


def appends(x, n):
    out = []
    for i in range(n):
        out.append(x * i)
    return out


def prints(x, n):
    y = x * 2
    for i in range(n):
        y = y + i
        print("step", i)
    return y - 1


def float_accumulator(x, n):
    s = 0.0
    for i in range(n):
        s = s + x[i]            # float -> np.float64: not a fixed point
    return s


def out_of_bounds(x, n):
    for i in range(n):
        x[i] = 1.0
    return x


def fill(x):
    out = np.zeros(8)
    for i in range(8):
        out[i] = x[i] * 2
    return out


def counter_and_flag(x, n):
    k = 0
    flag = False
    for i in range(n):
        k = k + 2
        flag = False
        x = x + k
    return x, k, flag


def reads_around_writes(A, b, n):
    before = A * 3              # computed before the rows change, used after
    for i in range(1, n):
        A[i, :] = A[i - 1, :] * 0.5 + b
    after = A * 2
    return before + 1, after + 1


def inplace_carried(x, n):
    x = x * 1                   # fresh: the caller cannot see it
    for i in range(n):
        x += i
    x += 1                      # still fresh after the loop: captured
    return x


def rotate(a, b, c, n):
    a = a * 1
    b = b * 1
    for i in range(n):
        a, b, c = c, a, b       # after two iterations b is the caller's c
    b += 100                    # so this write goes into the caller's c
    return a, b, c


CHECKS = False


def pruned_exits(x, n):
    for i in range(n):
        assert x.ndim == 1
        if CHECKS:
            break
        if x.shape[0] > 100:
            return x
        x = x + i
    return x


def over_rows(x):
    for i in range(x.shape[0]):
        x[i] = x[i] * 2 + i
    return x


# -- trip counts --------------------------------------------------------------------------
@pytest.mark.parametrize("level", LEVELS)
def test_short_constant_loop_unrolls(level):
    # Ten iterations unroll into one flat graph (fusable across iterations at O1) ...
    report = assert_same(decay10, np.arange(5.0), jit_kwargs=jit_kwargs(level))
    assert loop_count(report) == 0 and report.ops_per_graph == [["mul", "add"] * 10]
    # ... and become a loop node when unrolling is off.
    report = assert_same(decay10, np.arange(5.0),
                         jit_kwargs=jit_kwargs(level, loop_unrolling=False))
    assert report.ops_per_graph == [["loop", "tuple_item"]]


@pytest.mark.parametrize("level", LEVELS)
def test_long_constant_loop_is_one_node(level):
    report = assert_same(decay1000, np.arange(5.0), jit_kwargs=jit_kwargs(level))
    assert report.ops_per_graph == [["loop", "tuple_item"]]
    text = report.graphs[0]
    assert text.count("= loop(range(0, 1000, 1), carried=(%0,), invariant=())") == 1
    assert text.count("mul(") == 1 and text.count("add(") == 1     # the body, once


def halves(x):
    acc = x * 0
    prev = x
    for i in range(1000):
        cur = prev * 0.5            # prev: carried, though no code after the loop reads it
        prev = cur + x
        acc = acc + cur
    return acc


@pytest.mark.parametrize("level", LEVELS)
def test_a_value_carried_only_into_the_body_is_carried(level):
    """Liveness at the loop head joins both successors of FOR_ITER (the exit first, then the
    body): prev is live only through the body."""
    report = assert_same(halves, np.arange(5.0), jit_kwargs=jit_kwargs(level))
    assert report.ops_per_graph[0][-3:] == ["loop", "tuple_item", "tuple_item"]
    assert "body: carried (acc, prev)" in report.graphs[0]


@pytest.mark.parametrize("level", LEVELS)
def test_symbolic_trip_count_compiles_once(level):
    f = pijit.jit(decay, **jit_kwargs(level, **SYMBOLIC))
    pijit.reset(f)
    x = np.arange(5.0)
    for n in (10, 0, 1, 1000, 3):
        assert_equal_values(f(x, n), decay(x, n))
    stats = pijit.stats(f)
    assert stats["compile_count"] == 1 and len(stats["entries"]) == 1
    assert stats["cache_misses"] == 1 and stats["cache_hits"] == 4
    assert stats["entries"][0]["ops"] == ["loop", "tuple_item"]
    assert not any("n ==" in g or "n is" in g for g in stats["entries"][0]["guards"])


@pytest.mark.parametrize("level", LEVELS)
def test_symbolic_trip_count_after_a_changed_value(level):
    # Specialized first (range(10) unrolls); the changed value makes n dynamic: a loop node
    # that every later n reuses.
    f = pijit.jit(decay, **jit_kwargs(level))
    pijit.reset(f)
    x = np.arange(5.0)
    for n in (10, 20, 0, 1, 1000, 7):
        assert_equal_values(f(x, n), decay(x, n))
    stats = pijit.stats(f)
    assert stats["compile_count"] == 2
    ops = [e["ops"] for e in stats["entries"]]
    assert sorted(ops) == sorted([["mul", "add"] * 10, ["loop", "tuple_item"]])


@pytest.mark.parametrize("level", LEVELS)
def test_negative_strided_and_empty_ranges(level):
    for n in (11, 0, 1, 2):
        report = assert_same(strided, np.ones(3), n, jit_kwargs=jit_kwargs(level, **SYMBOLIC))
        assert loop_count(report) == 3


@pytest.mark.parametrize("level", LEVELS)
def test_trip_count_from_a_dynamic_dimension(level):
    f = pijit.jit(over_rows, **jit_kwargs(level, loop_unrolling=False))
    pijit.reset(f)
    for rows in (3, 5, 150, 0, 9):
        x = np.arange(rows * 2.0).reshape(rows, 2)
        got, want = f(x.copy()), over_rows(x.copy())
        assert_equal_values(got, want)
    # rows=3: a loop node over range(3) (unrolling is off); then the
    # dimension is dynamic: one loop node over range(x.shape[0]) for every later size.
    stats = pijit.stats(f)
    assert stats["compile_count"] == 2 and stats["cache_hits"] == 3
    assert [e["ops"].count("loop") for e in stats["entries"]] == [1, 1]


# -- bodies that write into arrays ----------------------------------------------------------
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", [50, 0])
def test_heat_step_with_slice_updates(level, n):
    u = np.linspace(0.0, 1.0, 12) ** 2
    report = assert_same(heat_inplace, u, n, jit_kwargs=jit_kwargs(level, **SYMBOLIC))
    assert report.ops_per_graph == [["loop"]]
    assert "iadd(" in report.graphs[0] and "setitem(" in report.graphs[0]
    source = pijit.cache.record(heat_inplace.__code__).entries[0].graph_source
    assert "v1[1:-1] = " in source          # item assignment written as the statement
    report = assert_same(heat_copy, u, n, jit_kwargs=jit_kwargs(level, **SYMBOLIC))
    assert report.ops_per_graph == [["loop", "tuple_item"]]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("rows", [6, 150])
def test_row_update(level, rows):
    # Six rows would unroll (writes are graph nodes): unrolling is off to test the loop node.
    A = np.ones((rows, 4))
    report = assert_same(row_update, A, np.arange(4.0),
                         jit_kwargs=jit_kwargs(level, loop_unrolling=False))
    assert report.ops_per_graph == [["loop"]]
    assert "writes into arrays" in report.graphs[0]


@pytest.mark.parametrize("level", LEVELS)
def test_fill_an_array_made_before_the_loop(level):
    report = assert_same(fill, np.arange(8.0), jit_kwargs=jit_kwargs(level, loop_unrolling=False))
    assert report.ops_per_graph == [["zeros", "loop"]]


@pytest.mark.parametrize("level", LEVELS)
def test_runtime_error_inside_the_loop(level):
    # IndexError at i == 4, after the first four writes: the same error, the same writes.
    report = assert_same(out_of_bounds, np.zeros(4), 6, jit_kwargs=jit_kwargs(level, **SYMBOLIC))
    assert report.ops_per_graph == [["loop"]]


@pytest.mark.parametrize("level", LEVELS)
def test_reads_around_a_loop_that_writes_stay_in_order(level):
    report = assert_same(reads_around_writes, np.ones((5, 3)), np.arange(3.0), 5,
                         jit_kwargs=jit_kwargs(level, **SYMBOLIC))
    assert report.ops_per_graph == [["mul", "loop", "mul", "add", "add"]]


# -- carried values -------------------------------------------------------------------------
@pytest.mark.parametrize("level", LEVELS)
def test_two_carried_arrays(level):
    report = assert_same(two_carried, np.ones(3), np.arange(3.0), 7,
                         jit_kwargs=jit_kwargs(level, **SYMBOLIC))
    assert report.ops_per_graph == [["loop", "tuple_item", "tuple_item"]]
    assert "carried (x, y)" in report.graphs[0]


@pytest.mark.parametrize("level", LEVELS)
def test_carried_constants_become_graph_values(level):
    # k (an int constant the body changes) is walked again as a graph int; flag stays False.
    report = assert_same(counter_and_flag, np.ones(3), 5, jit_kwargs=jit_kwargs(level, **SYMBOLIC))
    assert loop_count(report) == 1 and "carried (k, x)" in report.graphs[0]


@pytest.mark.parametrize("level", LEVELS)
def test_freshness_is_part_of_the_fixed_point(level):
    kw = jit_kwargs(level, **SYMBOLIC)
    report = assert_same(inplace_carried, np.ones(3), 4, jit_kwargs=kw)
    assert report.ops_per_graph == [["mul", "loop", "tuple_item", "iadd"]]
    for n in (0, 1, 2, 3):
        # the write after the loop goes to whichever array b is at run time
        report = assert_same(rotate, np.ones(2), np.ones(2), np.zeros(2), n, jit_kwargs=kw)
        assert loop_count(report) == 1 and report.ops_per_graph[0][-1] == "iadd"


@pytest.mark.parametrize("level", LEVELS)
def test_exits_pruned_at_capture_time(level):
    report = assert_same(pruned_exits, np.ones(3), 5, jit_kwargs=jit_kwargs(level, **SYMBOLIC))
    assert report.ops_per_graph == [["loop", "tuple_item"]]


@pytest.mark.parametrize("level", LEVELS)
def test_index_used_after_the_loop(level):
    # Constant trip count: the index's last value is a result of the node.
    report = assert_same(index_after_loop, np.ones(3), jit_kwargs=jit_kwargs(level))
    assert report.ops_per_graph == [["loop", "tuple_item", "tuple_item"]]
    assert "last (i)" in report.graphs[0]
    # Symbolic trip count, index bound before the loop: carried, keeps -1 when n == 0.
    for n in (5, 0):
        report = assert_same(index_after_symbolic_loop, np.ones(3), n,
                             jit_kwargs=jit_kwargs(level, **SYMBOLIC))
        assert loop_count(report) == 1
    # Symbolic trip count, index unbound before the loop: unbound after zero iterations,
    # which a loop node cannot express. Falls back: a residual loop whose body is a graph of
    # its own (none when n == 0, which raises UnboundLocalError as in plain Python).
    for n, graphs in ((5, 1), (0, 0)):
        report = assert_same(index_unbound_after_symbolic_loop, np.ones(3), n,
                             jit_kwargs=jit_kwargs(level, **SYMBOLIC), graphs=graphs, breaks=1)
        assert loop_count(report) == 0


def resets_constants(x):
    z, k, h, n = 0.0, 0, 2.5, 1000
    for i in range(1000):
        x = x * 0.5 + (z + k + h)
        z, k, h, n = z * 1.0, 0, h * 1.0, n * 1      # equal numbers, other objects
    return x, z, k, h, n


def flips_zero(x):
    z = 0.0
    for i in range(1000):
        x = x * 0.5 + z
        z = -0.0
    return x, z


def widens_int(x):
    k = 0
    for i in range(1000):
        x = x * 0.5 + k
        k = 0.0
    return x, k


@pytest.mark.parametrize("level", LEVELS)
def test_a_constant_the_body_sets_again_is_the_same_only_by_type_and_sign(level):
    """A carried constant the body sets to the same value stays a constant of one loop node;
    0.0 -> -0.0 and 0 -> 0.0 are equal but other constants (the loop cannot be a node:
    residual loop), which after the loop must have the body's sign and type."""
    report = assert_same(resets_constants, np.ones(3), jit_kwargs=jit_kwargs(level))
    assert loop_count(report) == 1 and "carried (x), last ()" in report.graphs[0]
    for fn in (flips_zero, widens_int):
        report = assert_same(fn, np.ones(3), jit_kwargs=jit_kwargs(level), graphs=2, breaks=1)
        assert loop_count(report) == 0


# -- fallbacks: captured exactly as without loop nodes ----------------------------------------
@pytest.mark.parametrize("level", LEVELS)
def test_carried_dtype_change_falls_back(level):
    report = assert_same(changes_dtype, np.arange(4), jit_kwargs=jit_kwargs(level),
                         graphs=2, breaks=1)
    assert loop_count(report) == 0
    assert "MAX_LOOP_UNROLLING" in report.break_reasons[0]["reason"]


@pytest.mark.parametrize("level", LEVELS)
def test_break_in_the_body_falls_back(level):
    # Constant n: unrolled as before (the break is decided at capture time).
    report = assert_same(with_break, np.ones(3), 9, jit_kwargs=jit_kwargs(level))
    assert loop_count(report) == 0
    # Symbolic n: the whole loop runs as residual bytecode.
    report = assert_same(with_break, np.ones(3), 9, jit_kwargs=jit_kwargs(level, **SYMBOLIC),
                         graphs=0, breaks=1)
    assert loop_count(report) == 0


@pytest.mark.parametrize("level", LEVELS)
def test_other_fallbacks(level):
    kw = jit_kwargs(level, **SYMBOLIC)
    # a list built before the loop changes in it: a residual loop, whose outlined body
    # appends to the list it is given (replayed after the body's graph)
    report = assert_same(appends, np.ones(3), 4, jit_kwargs=kw, graphs=1, breaks=1)
    assert loop_count(report) == 0
    # print in the body: a graph break
    report = assert_same(prints, np.ones(3), 3, jit_kwargs=kw, graphs=3, breaks=2)
    assert loop_count(report) == 0
    # a Python float that becomes a NumPy float: no fixed point
    report = assert_same(float_accumulator, np.arange(5.0), 5, jit_kwargs=kw,
                         graphs=2, breaks=1)
    assert loop_count(report) == 0


def test_loop_nodes_off():
    # As without loop nodes: a residual loop whose body is a graph of its own.
    report = assert_same(decay1000, np.arange(5.0), graphs=1, breaks=1,
                         jit_kwargs={"jit_config": {"loop_nodes": False}})
    assert loop_count(report) == 0
    assert "MAX_LOOP_UNROLLING" in report.break_reasons[0]["reason"]


# -- slices by the loop index ----------------------------------------------------------------
def shortest_paths(d):
    for k in range(d.shape[0]):
        d = np.minimum(d, d[:, k:k + 1] + d[k:k + 1, :])
    return d


def windows(x):
    acc = np.zeros(3)
    for k in range(x.shape[0] - 2):
        acc = acc + x[k:k + 3] * k
    return acc


def windows_past_the_end(x):
    acc = np.zeros(3)
    for k in range(x.shape[0]):
        acc = acc + x[k:k + 3]      # the last two windows are shorter: NumPy raises there
    return acc


def from_the_end(x):
    acc = np.zeros(2)
    for k in range(2, x.shape[0] + 1):
        acc = acc + x[-k:x.shape[0] - k + 2]      # start < 0, stop >= 0: not proved
    return acc


def windows_from_a_constant_minus_the_index(x):
    acc = np.zeros(2)
    for k in range(x.shape[0] - 20):
        acc = acc + x[50 - k:52 - k] * 0.5      # 50 - k is not k - 50: no proved length
    return acc


def copy_columns(a, b):
    for k in range(1, a.shape[1] - 1):
        a[:, k:k + 1] = b[:, k - 1:k] * 0.5 + b[:, k + 1:k + 2]
    return a


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", [7, 130])
def test_slices_by_the_index_of_a_constant_range(level, n):
    """d[:, k:k+1] has one shape for every k of range(n) (capture/index_facts.py): the loop is
    one node over a body with the slice kept symbolic, whether it is short (unrolling off) or
    long; at O1 the body's elementwise work is a fused kernel."""
    # The previous parametrization's wrapper may still wait for the garbage collector: jit
    # would then give this one a code copy of its own, and the record read below be the old.
    gc.collect()
    d = np.random.default_rng(n).uniform(0, 10, (n, n))
    # loop nests off: a nest takes copy_columns (tests/test_loop_nests_slices.py)
    options = {"loop_nests": False} if n > 100 else {"loop_unrolling": False,
                                                      "loop_nests": False}
    report = assert_same(shortest_paths, d, jit_kwargs=jit_kwargs(level, **options))
    assert report.ops_per_graph == [["loop", "tuple_item"]]
    assert "getitem(%" in report.graphs[0] and "slice(%" in report.graphs[0]
    source = pijit.cache.record(shortest_paths.__code__).entries[0].graph_source
    assert ("fused group" in source) == (level == "O1")
    report = assert_same(windows, np.arange(float(n)), jit_kwargs=jit_kwargs(level, **options))
    assert loop_count(report) == 1 and report.graph_break_count == 0
    a, b = np.zeros((4, n)), np.arange(4.0 * n).reshape(4, n)
    report = assert_same(copy_columns, a, b, jit_kwargs=jit_kwargs(level, **options))
    assert report.ops_per_graph == [["loop"]] and "setitem(" in report.graphs[0]


@pytest.mark.parametrize("level", LEVELS)
def test_slices_whose_length_changes_with_the_index_have_a_dynamic_length(level):
    # the length changes at the end of the range, or a bound wraps around within it: the
    # slice's length is a dynamic dim checked at run time (windows_past_the_end raises
    # NumPy's broadcast ValueError at the same index as plain Python)
    x = np.arange(130.0)
    for fn in (windows_past_the_end, from_the_end):
        report = assert_same(fn, x, jit_kwargs=jit_kwargs(level))
        assert loop_count(report) == 1


@pytest.mark.parametrize("level", LEVELS)
def test_a_slice_by_a_constant_minus_the_index_is_one_loop_node(level):
    """c - k is not affine in k as index_facts knows it (k - c is): its slice keeps a
    length read at run time, in one loop node, not a length proved wrong."""
    report = assert_same(windows_from_a_constant_minus_the_index, np.arange(60.0),
                         jit_kwargs=jit_kwargs(level, loop_unrolling=False))
    assert loop_count(report) == 1 and report.graph_break_count == 0, report


def test_the_two_ends_prove_one_length_for_every_index():
    """IndexFacts.ends: whenever both ends give one length, every index does. Exhaustive
    over small ranges, offsets and axis lengths, against Python's slicing of range(dim)
    (random sampling missed the rare counterexamples, e.g. a length that grows then
    shrinks when one bound is negative and the other not)."""
    graph = Graph()
    proved = 0
    for lo in range(-5, 6):
        for span in range(6):
            facts = IndexFacts()
            index = GraphValue(graph.add_placeholder(INDEX_META), INDEX_META)
            facts.add_index(index, range(lo, lo + span + 1))
            bound = {}
            for c in range(-4, 5):
                bound[c] = GraphValue(graph.add_placeholder(INDEX_META), INDEX_META)
                facts.note_operator("add", (index, ConstValue(c)), bound[c])
            starts = [(None, ConstValue(None))] + [(c, bound[c]) for c in bound]
            stops = [(c, bound[c]) for c in bound] + [(("const", c), ConstValue(c))
                                                       for c in range(-4, 5)]
            for c1, start in starts:
                for c2, stop in stops:
                    ends = facts.ends(SliceValue(start, stop, ConstValue(None)))
                    if ends is None:
                        continue
                    for dim in range(7):
                        if len({len(range(dim)[s]) for s in ends}) > 1:
                            continue
                        proved += 1
                        want = len(range(dim)[ends[0]])
                        for k in range(lo, lo + span + 1):
                            s = slice(None if c1 is None else k + c1,
                                      c2[1] if isinstance(c2, tuple) else k + c2)
                            assert len(range(dim)[s]) == want, (lo, span, dim, s, ends)
    assert proved > 10000       # the check ran on many proved slices, not on none


# -- structure: nesting, inlining, dumps, passes ---------------------------------------------
@pytest.mark.parametrize("level", LEVELS)
def test_nested_loop_nodes(level):
    report = assert_same(nested, np.ones(3), 4, 3, jit_kwargs=jit_kwargs(level, **SYMBOLIC))
    assert report.ops_per_graph == [["loop", "tuple_item"]]
    text = report.graphs[0]
    assert text.count("= loop(") == 2          # the inner loop is a node of the outer body
    inner = next(line for line in text.splitlines() if "= loop(" in line and
                 not line.startswith("  %"))
    assert inner.startswith("      %")


@pytest.mark.parametrize("level", LEVELS)
def test_loop_in_an_inlined_function(level):
    report = assert_same(calls_relax, np.ones(3), 6, jit_kwargs=jit_kwargs(level, **SYMBOLIC))
    assert report.ops_per_graph == [["mul", "loop", "tuple_item", "add"]]


def test_dumps_show_the_body(capsys):
    f = pijit.jit(decay, **jit_kwargs("O0", print_after_all=True, **SYMBOLIC))
    pijit.reset(f)
    f(np.ones(3), 4)
    err = capsys.readouterr().err
    assert "= loop(range(0, %0, 1), carried=(%1,), invariant=())  : (float64[3],)" in err
    assert "body: carried (x), last ()" in err and "input i  : int" in err
    assert "for l" in err and "# body of loop node" in err


def capture(fn, *args, **options):
    return capture_frame(fn, args, JitConfig(loop_nodes=True, **options))


def test_graph_passes_treat_the_loop_as_one_node():
    A = np.ones((6, 4))
    graph = capture(row_update, A, np.arange(4.0), loop_unrolling=False,
                    loop_nests=False).graph
    graph.outputs = [graph.inputs[0]]
    verify(graph)
    (loop,) = [n for n in graph.nodes if isinstance(n.fn, LoopOp)]
    assert mutates(loop) and not is_pure(loop) and loop.fn.mutates
    verify(loop.fn.body)
    assert [n.name for n in loop.fn.body.nodes] == ["sub", "getitem", "mul", "add", "setitem"]
    assert dce(graph).nodes == graph.nodes          # an effect: kept although unused
    assert cse(graph) is graph                      # a graph that writes: not merged
    assert find_groups(graph) == [] and schedule(graph, []) == graph.nodes

    graph = capture(decay, np.ones(3), 5, **SYMBOLIC).graph
    (loop,) = [n for n in graph.nodes if isinstance(n.fn, LoopOp)]
    assert not mutates(loop) and not is_pure(loop)
    graph.outputs = []
    assert [n.name for n in dce(graph).nodes] == ["loop", "tuple_item"]


def test_the_verifier_checks_loop_nodes_and_their_bodies():
    """A pass that breaks a loop node (its arity, its fixed point) or its body (a use before
    definition) is caught by verify, at the node or inside the body."""
    graph = capture(decay, np.ones(3), 5, **SYMBOLIC).graph
    verify(graph)
    (at,) = [k for k, n in enumerate(graph.nodes) if isinstance(n.fn, LoopOp)]
    loop = graph.nodes[at]
    body = loop.fn.body

    def problem(node) -> str:
        g = dataclasses.replace(graph, nodes=list(graph.nodes))
        g.nodes[at] = node
        try:
            verify(g)
        except AssertionError as e:
            return str(e)
        return "no problem found"

    def with_body(b):
        return dataclasses.replace(loop, fn=dataclasses.replace(loop.fn, body=b))

    assert "wrong arity" in problem(dataclasses.replace(loop, args=loop.args + (1.0,)))
    float32 = Meta.array(body.input_metas[0].shape, np.float32)
    assert "carried metas are not a fixed point" in problem(with_body(dataclasses.replace(
        body, input_metas=[float32] + body.input_metas[1:],
        _metas={**body._metas, body.inputs[0].index: float32})))
    first, undefined = body.nodes[0], Ref(max(body._metas) + 1)
    use_before = dataclasses.replace(first, args=(undefined,) + first.args[1:])
    assert f"uses %{undefined.index} before definition" in problem(with_body(
        dataclasses.replace(body, nodes=[use_before] + body.nodes[1:])))


def test_reference_semantics_match_the_backend():
    graph = capture(two_carried, np.ones(3), np.arange(3.0), 7, **SYMBOLIC).graph
    graph.outputs = [Ref(n.out) for n in graph.nodes if n.name == "tuple_item"]
    compiled = numpy_backend.compile_graph(graph, "g", __file__, 1)
    for n in (7, 0, 1):
        args = {"n": n, "x": np.ones(3), "y": np.arange(3.0)}
        inputs = [args[name] for name in graph.input_names]
        want = two_carried(np.ones(3), np.arange(3.0), n)
        for got in (compiled.fn(*inputs), run_graph(graph, inputs)):
            assert_equal_values(got[0], want[0])
            assert_equal_values(got[1], want[1])


def test_bodies_compile_with_another_backend():
    # numpy_backend.compile_graph's compile_body hook: the fused backend compiles the body.
    graph = capture(decay, np.ones(64), 5, **SYMBOLIC).graph
    graph.outputs = [Ref(graph.nodes[-1].out)]
    compiled = numpy_backend.compile_graph(
        graph, "g", __file__, 1, compile_body=functools.partial(cfused.compile_graph, level="O1"))
    assert "fused group" in compiled.source
    x = np.linspace(0, 1, 64)
    for n in (5, 0, 30):
        (got,) = compiled.fn(*[{"n": n, "x": x}[name] for name in graph.input_names])
        assert_equal_values(got, decay(x, n))


# -- what stops unrolling ----------------------------------------------------------------------
def _heat_step(u, r):
    out = np.empty_like(u)
    out[0] = u[0]
    out[-1] = u[-1]
    for i in range(1, u.shape[0] - 1):
        out[i] = u[i] + r * (u[i - 1] - 2.0 * u[i] + u[i + 1])
    return out


def heat_steps(u, r):
    for _ in range(6):
        u = _heat_step(u, r)
    return u


def test_a_loop_nest_in_the_body_stops_unrolling():
    """Six steps of a step function with an element loop: one loop node around one loop
    nest, not six unrolled nests (each one more nest to capture and compile; nothing fuses
    across them)."""
    u = np.sin(np.linspace(0.0, 3.0, 12))
    report = assert_same(heat_steps, u, 0.4, graphs=1, breaks=0)
    top = report.ops_per_graph[0]
    assert top.count("loop") == 1 and "loop_nest" not in top, top


def long_chain(x):
    for _ in range(60):
        x = np.tanh(x) * 0.5 + x * 0.25 - 0.125
    return x


def counting_iterations(monkeypatch) -> list:
    from pijit.capture import ops_loop
    counted = []
    original = ops_loop.count_iteration
    monkeypatch.setattr(ops_loop, "count_iteration",
                        lambda cap: (counted.append(1), original(cap)))
    return counted


def test_a_loop_too_long_to_unroll_is_seen_after_one_iteration(monkeypatch):
    """60 copies of a 6-node body pass the unrolling budget: capture knows it after the
    first iteration and makes a loop node, without unrolling up to the budget first."""
    counted = counting_iterations(monkeypatch)
    report = assert_same(long_chain, np.linspace(-1.0, 1.0, 8), graphs=1, breaks=0)
    assert loop_count(report) == 1
    assert 0 < len(counted) <= 4, len(counted)      # per capture: two, then the loop node


def decay150(x):
    for _ in range(150):
        x = x * 0.5 + 1.0
    return x


def test_a_loop_longer_than_max_unrolling_is_seen_at_its_start(monkeypatch):
    """Without loop nodes, a loop of 150 (more than MAX_LOOP_UNROLLING): capture knows it at
    the first FOR_ITER and leaves the loop to residual code, without unrolling 100 copies
    first."""
    counted = counting_iterations(monkeypatch)
    report = assert_same(decay150, np.linspace(-1.0, 1.0, 8), graphs=None, breaks=None,
                         jit_kwargs={"jit_config": {"loop_nodes": False}})
    assert "MAX_LOOP_UNROLLING" in report.break_reasons[0]["reason"]
    assert 0 < len(counted) <= 4, len(counted)


def first_big(x):
    for k in range(1000):
        if k == 3:
            break
        x = x * 2.0 + 1.0
    y = x * 3.0 - 1.0       # a tail CPython 3.12+ does not copy to the break (as `return x`)
    return y * y + x


def test_a_loop_that_breaks_early_still_unrolls():
    """A loop of 1000 that leaves at its fourth iteration unrolls those: its length says
    nothing about how often its body runs."""
    report = assert_same(first_big, np.linspace(-1.0, 1.0, 8), graphs=1, breaks=0,
                         jit_kwargs={"jit_config": {"loop_nodes": False}})
    assert loop_count(report) == 0
