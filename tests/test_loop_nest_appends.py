"""Loop nests appending to a list (pijit/loopnest/appends.py): the same list object as
plain Python's, with the same items of the same types at every moment, so a hand-over to
Python or an exception at a middle iteration finds it as plain Python would. A list the
function built is a graph value after the loop (appends.AppendedList: len() and np.array of
it stay in the graph where their result is exactly known, other uses break there); the
caller's list ends the graph after the loop. `resumes` counts the C kernel's hand-overs, so
a kernel that silently ran the nest in Python cannot pass as compiled."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import pijit
from tests.differential import assert_same
from tests.test_loop_nests import resumes  # noqa: F401 - the fixture

LEVELS = ["O0", "O1"]
CALLERS = "a list of the caller's"      # the reason of the break after the loop


def appended(fn, *args, level="O1", graphs=None, breaks=0, reason=None):
    """Plain Python's result, list and inputs, with one loop_nest node and `breaks` breaks,
    the first for `reason` (a part of it)."""
    report = assert_same(fn, *args, ops=["loop_nest"], graphs=graphs, breaks=breaks,
                         jit_kwargs={"jit_config": {"jit_level": level}})
    if reason is not None:
        assert reason in str(report.break_reasons[0]), report.break_reasons
    return report


def positives(a):
    out = []
    for i in range(a.shape[0]):
        if a[i] > 0:
            out.append(i)
    return np.array(out)


def doubled(a):
    out = []
    for i in range(a.shape[0]):
        if a[i] > 0:
            out.append(a[i] * 2)
    return out


def both_branches(a, t):
    out = [0.5, "start"]
    for i in range(a.shape[0]):
        if a[i] > t:
            out.append(i * 0.5)        # a Python float
        else:
            out.append(-i)             # a Python int
    return out


def pairs(A):
    idx = []
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            if A[i, j] > 0:
                idx.append((i, j))
            elif A[i, j] < -1:
                idx.append((j, A[i, j], True))
    return idx


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn, args", [
    (positives, (np.arange(-3.0, 4.0),)),
    (doubled, (np.array([1.5, -2.0, 7.0, 0.0, 3.25]),)),
    (both_branches, (np.linspace(-1, 1, 9), 0.1)),
    (pairs, (np.arange(-6.0, 6.0).reshape(3, 4),)),
    (positives, (np.zeros(0),)),                    # zero trips
    (pairs, (np.zeros((0, 3)),)),
], ids=["indices", "np.float64", "both branches", "pairs", "zero trips", "zero rows"])
def test_appends(fn, args, level, resumes):
    # np.array of ints is float64 when the list is empty: that call breaks, after the loop
    appended(fn, *args, level=level, breaks=int(fn is positives),
             reason="array" if fn is positives else None)
    if level == "O1":
        assert resumes == [], f"the kernel handed over at blocks {resumes}"


def collect(a):
    out = []
    for i in range(a.shape[0]):
        out.append(a[i])
    return out


@pytest.mark.parametrize("dtype", ["bool", "int8", "int16", "int32", "int64", "uint8",
                                   "uint16", "uint32", "float32", "float64"])
def test_appended_numpy_scalars_keep_their_type(dtype, resumes):
    a = (np.arange(-3, 4) * 37).astype(dtype)
    appended(collect, a)
    assert resumes == []
    got = pijit.jit(collect)(a)
    assert [type(x) for x in got] == [type(x) for x in collect(a)] == [a.dtype.type] * 7


def python_scalars(a):
    out = []
    for i in range(a.shape[0]):
        out.append(i)
        out.append(float(a[i]))
        out.append(a[i] > 0.5)
        out.append(bool(i % 2))
        out.append((i, 2.5, False))
    return out


def test_appended_python_scalars_keep_their_type(resumes):
    a = np.linspace(0, 1, 5)
    appended(python_scalars, a)
    assert resumes == []
    got, want = pijit.jit(python_scalars)(a), python_scalars(a)
    assert [type(x) for x in got] == [type(x) for x in want]
    assert [tuple(map(type, x)) for x in got if type(x) is tuple] == \
        [tuple(map(type, x)) for x in want if type(x) is tuple]


def into_callers(a, out):
    for i in range(a.shape[0]):
        if a[i] > 0:
            out.append((i, a[i]))
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_a_list_the_caller_passed_keeps_its_identity_and_items(level, resumes):
    out = ["kept", (1, 2)]
    # assert_same compares the mutated argument and that the result aliases it
    appended(into_callers, np.array([1.0, -1.0, 2.0]), out, level=level, breaks=1,
             reason=CALLERS)
    got = pijit.jit(into_callers)(np.array([1.0, -1.0, 2.0]), out)
    assert got is out and out[:2] == ["kept", (1, 2)] and len(out) == 4
    if level == "O1":
        assert resumes == []


def grows(a, out):
    s = 1
    for i in range(a.shape[0]):
        s = s * 3          # a Python int: past int64 at i = 39, where Python goes on
        out.append(s)
    return out


def test_a_hand_over_mid_loop_sees_the_items_appended_before(resumes):
    appended(grows, np.zeros(60), [], breaks=1, reason=CALLERS)
    assert resumes and all(b >= 0 for b in resumes)     # the kernel handed over mid-loop


def indexed(a, idx, out):
    for i in range(idx.shape[0]):
        out.append(i)
        out.append(a[idx[i]])          # IndexError at i = 3: 0, a[0], 1, a[1], 2, a[2], 3
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_an_exception_at_a_middle_iteration_leaves_the_items_before_it(level):
    # the caller's list, compared after the IndexError as plain Python left it
    assert_same(indexed, np.arange(3.0), np.array([0, 1, 2, 7, 1]), ["x"], ops=["loop_nest"],
                graphs=None, breaks=None, jit_kwargs={"jit_config": {"jit_level": level}})


def summed_and_appended(a):
    out = []
    s = a[0]
    for i in range(1, a.shape[0]):
        s += a[i]           # an np.float64 sum: exit_checks.py would check it at the exit
        out.append(i)
    return s, out


def test_a_sum_checked_at_the_exit_is_not_rerun_over_the_appends(resumes):
    # a non-finite sum reruns such a loop in Python from its start: appending twice
    appended(summed_and_appended, np.array([1.0, np.inf, 2.0, -np.inf, 3.0]))


def appends_after_an_append(a, out):
    out.append(-1)          # a store capture makes after the graph
    for i in range(a.shape[0]):
        out.append(i)
    return out


def aliased(a):
    out = []
    kept = out
    for i in range(a.shape[0]):
        out.append(i)
    return kept


def in_a_tuple(a):
    out = []
    both = (out, 1)
    for i in range(a.shape[0]):
        out.append(i)
    return both


def reads_len(a):
    out = []
    for i in range(a.shape[0]):
        if len(out) < 2:
            out.append(i)
    return out


def reads_item(a):
    out = [0]
    for i in range(a.shape[0]):
        out.append(out[i] + 1)
    return out


def contains(a):
    out = []
    for i in range(a.shape[0]):
        if i not in out:
            out.append(i)
    return out


def rebinds(a):
    out = []
    for i in range(a.shape[0]):
        out.append(i)
        if i == 1:
            out = 0         # AttributeError at the next append
    return out


def extends(a):
    out = []
    for i in range(a.shape[0]):
        out.extend((i, i))
    return out


def appends_a_row(A):
    out = []
    for i in range(A.shape[0]):
        out.append(A[i])
    return out


def appends_a_list(a):
    out = []
    for i in range(a.shape[0]):
        out.append([i])
    return out


@pytest.mark.parametrize("fn, args", [
    (appends_after_an_append, (np.arange(3.0), [5])),
    (aliased, (np.arange(3.0),)),
    (in_a_tuple, (np.arange(3.0),)),
    (reads_len, (np.arange(4.0),)),
    (reads_item, (np.arange(4.0),)),
    (contains, (np.arange(4.0),)),
    (rebinds, (np.arange(4.0),)),
    (extends, (np.arange(4.0),)),
    (appends_a_row, (np.ones((2, 2)),)),
    (appends_a_list, (np.arange(3.0),)),
])
def test_refused_appends_keep_todays_behaviour(fn, args):
    report = assert_same(fn, *args, graphs=None, breaks=None)
    assert not any("loop_nest" in ops for ops in report.ops_per_graph)


def first_above(a, t, out):
    i = 0
    while i < a.shape[0]:
        if a[i] > t:
            out.append((i, a[i]))
            break
        out.append(i)
        i += 1
    return out


@pytest.mark.parametrize("t", [0.5, 2.0])
def test_appends_in_a_while_loop_with_a_break(t, resumes):
    # 3.12+ copies the function's tail (`return out`) into the break path: the region then
    # returns from inside the loop (recognise._tail_return), the list its result; 3.11's
    # graph ends after the loop, which appends to the caller's list
    if sys.version_info >= (3, 12):
        appended(first_above, np.linspace(0, 1, 7), t, [], graphs=1)
    else:
        appended(first_above, np.linspace(0, 1, 7), t, [], breaks=1, reason=CALLERS)
    assert resumes == []


def returns_inside(a, t):
    out = []
    for i in range(a.shape[0]):
        if a[i] > t:
            return out          # the list, from inside the loop
        out.append(a[i])
    return out


def grows_then_returns(a, t):
    out = []
    s = 1
    for i in range(a.shape[0]):
        if a[i] > t:
            return out
        s = s * 3          # past int64 at i = 39: the rest of the nest runs in Python
        out.append(s)
    return out


def returns_inside_or_a_number(a, t):
    out = []
    for i in range(a.shape[0]):
        if a[i] > t:
            return 0
        out.append(a[i])
    return out


@pytest.mark.parametrize("t", [0.5, 2.0])
def test_a_loop_returning_its_list_from_inside(t, resumes):
    appended(returns_inside, np.linspace(0, 1, 7), t, graphs=1)
    assert resumes == []


@pytest.mark.parametrize("stop", [60, 50, 10])
def test_a_hand_over_in_a_loop_returning_its_list(stop, resumes):
    a = np.zeros(60)
    a[stop:] = 1.0
    appended(grows_then_returns, a, 0.5, graphs=1)
    assert bool(resumes) == (stop > 39), resumes


def test_a_loop_returning_its_list_or_a_number_is_not_a_nest():
    report = assert_same(returns_inside_or_a_number, np.linspace(0, 1, 7), 0.5, graphs=None,
                         breaks=None)
    assert not any("loop_nest" in ops for ops in report.ops_per_graph)


def test_a_long_list_of_the_caller(resumes):
    # past MAX_LOOP_UNROLLING items capture holds the list as an opaque object
    out = list(range(150))
    appended(into_callers, np.array([1.0, -1.0, 2.0]), out, breaks=1, reason=CALLERS)
    got = pijit.jit(into_callers)(np.array([1.0, -1.0, 2.0]), out)
    assert got is out and len(out) == 152 and out[150] == (0, 1.0)
    assert resumes == []


def first_above_then(a, t, out):
    i = 0
    while i < a.shape[0]:
        if a[i] > t:
            out.append((i, a[i]))
            break
        out.append(i)
        i += 1
    n = len(out)
    return out, n


@pytest.mark.parametrize("t", [0.5, 2.0])
def test_appends_in_a_while_loop_with_a_break_then_more_code(t, resumes):
    appended(first_above_then, np.linspace(0, 1, 7), t, [], breaks=1, reason=CALLERS)
    assert resumes == []


# The list after the loop: a graph value (appends.AppendedList), its length and items known
# only at run time. What stays in the graph is exact whatever the length (empty included).

def taken(a, off):
    idx = []
    for i in range(a.shape[0]):
        if a[i] > 0:
            idx.append(i + off)
    return a[np.array(idx, dtype=np.intp)] * 2, len(idx)    # off = 1: IndexError at the end


def as_floats(a):
    out = []
    for i in range(a.shape[0]):
        if a[i] > 0:
            out.append(a[i] * 0.5)          # np.float64
        elif a[i] < -1:
            out.append(float(i))            # a Python float
    v = np.array(out)                       # float64 also when empty
    return v + 1, np.asarray(out).sum(), a[:len(out)]


def two_nests(a):
    out = [0.25]
    for i in range(a.shape[0]):
        if a[i] > 0:
            out.append(a[i])
    for i in range(a.shape[0]):
        if a[i] < 0:
            out.append(i)                   # ints now: np.array only with a dtype
    return np.array(out, dtype=np.float32), len(out), out


def read_between(a):
    out = []
    for i in range(a.shape[0]):
        if a[i] > 0:
            out.append(a[i])
    n1, v1 = len(out), np.array(out)      # not the same values as after the next loop
    for i in range(a.shape[0]):
        if a[i] < 0:
            out.append(a[i])
    return n1, len(out), v1, np.array(out)


def returned(a):
    idx = []
    for i in range(a.shape[0]):
        if a[i] > 0:
            idx.append(i)
    return idx, bool(idx)


AFTER = [(taken, (np.array([1.0, -2.0, 3.0, 0.5]), 0)),
         (taken, (np.array([1.0, -2.0, 3.0, 0.5]), 1)),
         (taken, (np.array([-1.0, -2.0]), 0)),
         (as_floats, (np.array([1.0, -2.0, 3.0, 0.5, -0.5]),)),
         (as_floats, (np.array([-0.5, 0.0]),)),
         (as_floats, (np.zeros(0),)),
         (two_nests, (np.array([1.0, -2.0, 3.0, -0.5]),)),
         (two_nests, (np.zeros(3),)),
         (read_between, (np.array([1.0, -2.0, 3.0, -0.5]),)),
         (returned, (np.array([1.0, -2.0, 3.0]),)),
         (returned, (np.array([-1.0]),))]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn, args", AFTER, ids=[
    "take", "take out of bounds", "take none", "floats", "floats none", "zero trips",
    "two nests", "two nests none", "read between", "returned", "returned empty"])
def test_the_list_is_a_graph_value_after_the_loop(fn, args, level, resumes):
    report = appended(fn, *args, level=level, graphs=1)
    ops = report.ops_per_graph[0]
    assert ops.count("loop_nest") == (2 if fn in (two_nests, read_between) else 1), ops
    if fn is not returned:
        assert "len" in ops and "array" in ops, ops
    if level == "O1":
        assert resumes == []


def ints_to_array(a):
    idx = []
    for i in range(a.shape[0]):
        if a[i] > 0:
            idx.append(i)
    return np.array(idx)        # int64, but float64 when empty


def float32_to_array(a):
    out = []
    for i in range(a.shape[0]):
        out.append(a[i])
    return np.array(out)        # float32, but float64 when empty


def mixed_to_array(a):
    out = [0.5]
    for i in range(a.shape[0]):
        out.append(i)
    return np.array(out)


def complex_first(a):
    out = [1j]
    for i in range(a.shape[0]):
        out.append(a[i])
    return np.array(out)        # complex128


def tuples_to_array(a):
    out = []
    for i in range(a.shape[0]):
        out.append((i, a[i]))
    return np.array(out, dtype=np.float64)      # (n, 2), but (0,) when empty


def dtype_none(a):
    idx = []
    for i in range(a.shape[0]):
        idx.append(i)
    return np.array(idx, dtype=None)            # inferred: as without a dtype


def summed(a):
    out = []
    for i in range(a.shape[0]):
        if a[i] > 0:
            out.append(float(a[i]))
    return sum(out)             # a float, but the int 0 when empty


def callers_then_len(a, out):
    for i in range(a.shape[0]):
        out.append(i)
    return len(out), out


@pytest.mark.parametrize("fn, args", [
    (ints_to_array, (np.array([1.0, 2.0]),)), (ints_to_array, (np.array([-1.0]),)),
    (float32_to_array, (np.ones(3, np.float32),)), (float32_to_array, (np.ones(0, np.float32),)),
    (mixed_to_array, (np.ones(3),)), (complex_first, (np.ones(2),)),
    (tuples_to_array, (np.ones(2),)), (tuples_to_array, (np.ones(0),)),
    (dtype_none, (np.ones(2),)), (dtype_none, (np.ones(0),)),
    (summed, (np.array([1.5, 2.0]),)), (summed, (np.array([-1.5]),)),
    (callers_then_len, (np.ones(3), [7, 8])),
])
def test_uses_not_known_exactly_break_there(fn, args, resumes):
    # the break is at the use (the line after the loop), the code from there plain Python's
    reason = CALLERS if fn is callers_then_len else None
    report = appended(fn, *args, breaks=1, reason=reason)
    assert report.ops_per_graph[0][-1] == "loop_nest", report.ops_per_graph
    assert resumes == []
