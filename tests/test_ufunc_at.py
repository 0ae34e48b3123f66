"""`ufunc.at` (np.add.at, np.subtract.at, np.maximum.at...) in the graph as a write node on
its target (capture/writes.py), in program order: repeated indices apply every occurrence,
reads after it see it, views of the target see it, the caller's array ends as plain Python
leaves it also when a break or an exception follows, and NumPy's errors come from the call.
Differential against plain Python (results, mutated inputs, exceptions; twice) and captured
as one graph with no break."""
from __future__ import annotations

import numpy as np
import pytest

import pijit
from differential import assert_equal_values, assert_same
from pijit import cache

LEVELS = ["O0", "O1"]


def jit_kwargs(level, **options):
    return {"jit_config": {"jit_level": level, **options}}


def add_at_reads_around(a, idx, v):
    before = a * 2.0            # read before the write: the old values
    np.add.at(a, idx, v)        # repeated indices: every occurrence adds
    return a + before, a.sum()


def methods(a, idx, v):
    np.subtract.at(a, idx, v)
    np.maximum.at(a, idx[::-1], v * 0.5)
    np.minimum.at(a, idx, 3.0)
    np.multiply.at(a, idx, 1.5)
    np.negative.at(a, idx[:2])          # a unary ufunc: no value
    return a - 1.0


def int_target(counts, bins):
    np.add.at(counts, bins, 1)          # a histogram by hand
    np.bitwise_or.at(counts, bins[:3], 8)
    return counts * 2


def index_from_data(a, x):
    idx = (x * 4.0).astype(np.int64)    # an index array computed in the graph
    np.add.at(a, idx, x)
    return a * 3.0


def two_d(a, rows, cols, v):
    np.add.at(a, (rows, cols), v)       # a tuple of index arrays
    np.add.at(a, (slice(None), [0, 0]), 1.0)
    np.maximum.at(a, a > 4.0, 4.0)      # a boolean mask
    return a.sum(axis=0)


def into_a_view(a, idx):
    view = a[::2]
    tail = a[1:]
    np.add.at(view, idx, 10.0)          # the base and its other views see it
    return tail * 1.0, view + 0.0


def bound_method(a, idx):
    at = np.add.at
    r = at(a, idx, 2.0)
    return r, a + 1.0


def value_aliases_target(a, idx):
    np.add.at(a, idx, a[::-1][:len(idx)])
    return a


CASES = [
    (add_at_reads_around, lambda: (np.arange(6.0), np.array([0, 1, 1, 5, 1]), 0.25)),
    (methods, lambda: (np.linspace(-2, 2, 7), np.array([3, 1, 1, 6, 3]),
                       np.arange(5.0))),
    (int_target, lambda: (np.zeros(5, np.int32), np.array([4, 0, 4, 4, 2, 0]))),
    (index_from_data, lambda: (np.zeros(4), np.random.default_rng(0).random(9))),
    (two_d, lambda: (np.arange(12.0).reshape(3, 4), np.array([0, 2, 2]),
                     np.array([1, 3, 3]), np.array([1.0, 2.0, 4.0]))),
    (into_a_view, lambda: (np.arange(10.0), np.array([0, 4, 4, 1]))),
    (bound_method, lambda: (np.arange(4.0), [0, 0, 3])),
    (value_aliases_target, lambda: (np.arange(6.0), np.array([0, 0, 2]))),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn,make", CASES, ids=[c[0].__name__ for c in CASES])
def test_ufunc_at_is_a_write_node(fn, make, level):
    rep = assert_same(fn, *make(), jit_kwargs=jit_kwargs(level))
    assert any(op.endswith(".at") for op in rep.ops_per_graph[0]), rep.ops_per_graph


def repeated_indices(a, idx):
    np.add.at(a, idx, 1.0)
    return a


@pytest.mark.parametrize("level", LEVELS)
def test_repeated_indices_apply_every_occurrence(level):
    """Unbuffered: a[[0, 0, 0]] += 1 adds once, np.add.at adds three times."""
    jitted = pijit.jit(repeated_indices, **jit_kwargs(level))
    pijit.reset(jitted)
    got = jitted(np.zeros(3), np.array([0, 0, 0, 2]))
    assert got.tolist() == [3.0, 0.0, 1.0]


# -- errors: NumPy's, raised by the call, after the writes before it ------------------------

def out_of_bounds(a, idx):
    a[0] = -1.0                         # a write before: done in both runs
    np.add.at(a, idx, 1.0)              # IndexError for an index from the data
    return a * 2.0


def no_loop_for_the_dtypes(a, idx):
    a += 1.0
    np.left_shift.at(a, idx, 1)         # no left_shift loop for float64: UFuncTypeError
    return a


def not_broadcastable(a, idx, v):
    np.add.at(a, idx, v)
    return a


def float_index(a, x):
    np.add.at(a, x * 2.0, 1.0)          # an index array of floats: IndexError
    return a


def later_error(a, idx, k):
    np.add.at(a, idx, 1.0)
    b = a * 2.0
    return b[k]                         # IndexError after the write, in the same graph


@pytest.mark.parametrize("level", LEVELS)
def test_errors_are_numpys_at_the_call(level):
    kw = jit_kwargs(level)
    assert_same(out_of_bounds, np.zeros(4), np.array([1, 7]), jit_kwargs=kw)
    assert_same(out_of_bounds, np.zeros(4), np.array([1, -5]), jit_kwargs=kw)
    assert_same(out_of_bounds, np.zeros(4), np.array([1, -4]), jit_kwargs=kw)
    assert_same(no_loop_for_the_dtypes, np.zeros(3), np.array([1]), jit_kwargs=kw)
    assert_same(not_broadcastable, np.zeros(4), np.array([1, 2]), np.ones(3), jit_kwargs=kw)
    assert_same(float_index, np.zeros(4), np.ones(2), jit_kwargs=kw)


@pytest.mark.parametrize("level", LEVELS)
def test_an_error_after_the_write_leaves_it_done_once(level):
    """The graph that failed wrote into the caller's array: it is not run again."""
    kw = jit_kwargs(level, specialize_scalar=False)
    assert_same(later_error, np.zeros(4), np.array([1, 1, 3]), 9, jit_kwargs=kw)
    assert_same(later_error, np.zeros(4), np.array([1, 1, 3]), 2, jit_kwargs=kw)


def at_then_break(a, idx):
    np.add.at(a, idx, 1.0)
    print(a.sum())                      # a break: a is already written
    np.subtract.at(a, idx[:1], 0.5)
    return a


def at_then_raise(a, idx):
    np.add.at(a, idx, 1.0)
    raise ValueError("after the write")


@pytest.mark.parametrize("level", LEVELS)
def test_a_break_or_an_exception_after_the_write(level):
    kw = jit_kwargs(level)
    assert_same(at_then_break, np.zeros(5), np.array([0, 0, 4]), jit_kwargs=kw, graphs=2,
                breaks=1)
    assert_same(at_then_raise, np.zeros(5), np.array([0, 0, 4]), jit_kwargs=kw, graphs=None,
                breaks=None)


def scatter_sum(x, idx, n):
    out = np.zeros(n)
    np.add.at(out, idx, x * x)
    return out / (out.sum() + 1.0)


@pytest.mark.parametrize("level", LEVELS)
def test_sizes_changing_between_calls_reuse_one_entry(level):
    """Index arrays and targets of new sizes: the entry goes dynamic once, then serves every
    size (no recompile per call)."""
    jitted = pijit.jit(scatter_sum, **jit_kwargs(level, specialize_scalar=False))
    pijit.reset(jitted)
    gen = np.random.default_rng(5)
    for n, m in ((4, 10), (6, 3), (9, 17), (3, 8), (12, 40), (5, 1)):
        x, idx = gen.random(m), gen.integers(0, n, m)
        assert_equal_values(jitted(x, idx, n), scatter_sum(x, idx, n))
    assert pijit.code_info(jitted)["compile_count"] <= 2
    assert pijit.stats(jitted)["cache_hits"] >= 4
    rep = assert_same(scatter_sum, gen.random(7), gen.integers(0, 5, 7), 5,
                      jit_kwargs=jit_kwargs(level, specialize_scalar=False))
    assert rep.ops_per_graph[0].count("add.at") == 1


def test_fusion_does_not_move_reads_across_the_write():
    """At O1 the reads of `a` before add.at and after it are two fused groups, one kernel
    call on each side of the write."""
    jitted = pijit.jit(add_at_reads_around, jit_config={"jit_level": "O1", "adaptive": False})
    pijit.reset(jitted)
    got = jitted(np.arange(6.0), np.array([0, 1, 1]), 0.5)
    assert_equal_values(got, add_at_reads_around(np.arange(6.0), np.array([0, 1, 1]), 0.5))
    source = cache.record(add_at_reads_around.__code__).entries[0].graph_source
    assert "group 0 [6] in (%0) out (%1): %1=mul" in source, source
    assert "group 1 [6] in (%0, %1) out (%4, %5): %4=add; %5=sum(all)" in source, source
    calls = [line.strip() for line in source.splitlines() if "= f" in line or "f3(" in line]
    assert calls[0].startswith("v1 = f1(") and calls[1].startswith("f3(v0, v2") and \
        calls[2].startswith("v6 = f6("), source


PY_ADD = np.frompyfunc(lambda x, y: x + y, 2, 1)


def frompyfunc_at(a, idx):
    b = a * 2.0
    PY_ADD.at(b, idx, 1.0)              # runs Python code: never called by capture
    return b


def missing_operand(a, idx):
    b = a + 1.0
    np.add.at(b, idx)                   # NumPy's ValueError: plain Python raises it
    return b


def test_calls_capture_leaves_to_plain_python():
    assert_same(missing_operand, np.zeros(3), np.array([0]), graphs=1, breaks=1)
    rep = assert_same(frompyfunc_at, np.zeros(3), np.array([0, 0]), graphs=1, breaks=1)
    assert "calls Python code" in rep.break_reasons[0]["reason"]


def at_in_a_loop(a, idx, n):
    for i in range(n):
        np.add.at(a, idx, a[i])         # reads what the iteration before wrote
    return a * 2.0


@pytest.mark.parametrize("level", LEVELS)
def test_ufunc_at_in_a_loop_node(level):
    kw = jit_kwargs(level, specialize_scalar=False)
    for n in (4, 0, 5):
        rep = assert_same(at_in_a_loop, np.arange(5.0), np.array([0, 0, 3]), n, jit_kwargs=kw)
        assert rep.ops_per_graph == [["loop", "mul"]], rep.ops_per_graph
