"""Loop nests whose C kernel keeps values across stores and loop exits:

- a store into one array keeps the elements of the other arrays its loop read (bounds.py's
  unit-stride copy checks at its entry that the arrays' memory is apart, cse.py keeps their
  loads): `y[i] = yi; prev = x[i]` reads x[i] once; arrays that overlap (the same array twice,
  views of one buffer, rows reversed onto each other) run a copy that reads again;
- a loop's element is live in its body only (ir.Nest.live_in): hand-overs neither box nor
  save it, so the kernel does not keep the last element of every inner loop.

Each case runs plain and jitted at O0 and O1 (results, partial writes, warnings, the
exception at the same iteration; one loop_nest node), and at O1 checks the kernel's blocks."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from benchmarks.workloads import cholesky_loops, forward_subst, iir_filter, lu_nopivot
from pijit.loopnest.ir import successors
from tests.test_loop_nests import compiled, resumes, same  # noqa: F401 - resumes: a fixture
from tests.test_loop_nests_checks import kernels  # noqa: F401 - a fixture

LEVELS = ["O0", "O1"]


def loads(kernel, array, unit) -> list:
    return [op for b in kernel.blocks for op in b.ops
            if op.kind == "load" and op.args[0] == array and op.unit == unit]


def apart_stores(kernel) -> list:
    return [op for b in kernel.blocks for op in b.ops if op.kind == "store" and op.apart]


def disjoint_checks(kernel) -> list:
    return [c[0] for b in kernel.blocks if b.term[0] == "version" for c in b.term[1]
            if c[0][0] == "disjoint"]


# -- a store into one array, loads of another --------------------------------------------------
def filter_into(x, y, b0, b1, a1):
    """iir_filter's recursion into an output the caller passes (which may overlap x)."""
    prev_x = x[0] * 0
    prev_y = x[0] * 0
    for i in range(x.shape[0]):
        yi = b0 * x[i] + b1 * prev_x - a1 * prev_y
        y[i] = yi
        prev_x = x[i]           # plain Python reads x[i] again: y[i] may be the same element
        prev_y = yi
    return prev_x, prev_y


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32])
def test_a_filter_reads_its_input_once(level, dtype, resumes, kernels):
    rng = np.random.default_rng(3)
    x = (rng.random(300) * 100).astype(dtype)
    coef = (0.25, 0.5, -0.125) if np.dtype(dtype).kind == "f" else (3, 2, 1)
    compiled(filter_into, x, np.zeros(300, dtype), *coef, resumes=resumes, level=level)
    if level == "O1":
        (k,) = kernels
        assert disjoint_checks(k) == [("disjoint", "a_x", "a_y")]
        assert [op.apart for op in apart_stores(k)] == [("a_x",)]
        # x[i] twice where the arrays may overlap, once where the entry checked them apart
        assert len(loads(k, "a_x", unit=True)) == 1
        assert len(loads(k, "a_x", unit=False)) == 4


def _views(kind, n):
    buf = np.random.default_rng(5).random(n + 1)
    return {"apart": (buf[:n], np.zeros(n)),
            "same": (buf, buf),                 # y is x: y[i] = ... changes x[i]
            "view": (buf, buf[:]),              # another view of the same memory
            "shifted": (buf[:n], buf[1:]),      # y[i] is x[i + 1]
            "shifted back": (buf[1:], buf[:n]),     # y[i] is x[i - 1]
            "reversed": (buf[::-1], buf)}[kind]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("kind", ["apart", "same", "view", "shifted", "shifted back",
                                  "reversed"])
def test_overlapping_arrays_read_again(level, kind, resumes, kernels):
    x, y = _views(kind, 257)
    compiled(filter_into, x, y, 0.25, 0.5, -0.125, resumes=resumes, level=level)
    if level == "O1":
        assert disjoint_checks(kernels[0])


def update_rows(A, B, s):
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            B[i, j] = A[i, j] * s
            A[i, j] = B[i, j] + A[i, j]     # A[i, j] again: B[i, j] may be A[i, j]


def _rows(kind):
    buf = np.random.default_rng(7).random((5, 9)) + 1.0
    return {"apart": (buf[:3].copy(), buf[:3]),
            "same": (buf, buf),
            "rows reversed": (buf, buf[::-1]),          # row 2 of 5 onto itself
            # B starts past A's last row and runs back onto it: B[2] is A[2]
            "reversed past the end": (buf[:3], buf[4::-1]),
            "rows shifted": (buf[1:], buf[:4]),
            "columns reversed": (buf, buf[:, ::-1]),    # not unit strides: never apart
            "transposed": (buf[:5, :5], buf[:5, :5].T)}[kind]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("kind", ["apart", "same", "rows reversed", "reversed past the end",
                                  "rows shifted", "columns reversed", "transposed"])
def test_2d_views_of_one_buffer(level, kind, resumes, kernels):
    A, B = _rows(kind)
    compiled(update_rows, A, B, 3.0, resumes=resumes, level=level)
    if level == "O1":
        assert disjoint_checks(kernels[0]) == [("disjoint", "a_A", "a_B")]
        assert {op.args[0]: op.apart for op in apart_stores(kernels[0])} == \
            {"a_A": ("a_B",), "a_B": ("a_A",)}


def bump(x, y):
    for i in range(x.shape[0]):
        a = y[i]
        y[i] = a + x[i]
        x[i] = y[i] * 2.0       # y[i] again: its own store changed it


@pytest.mark.parametrize("level", LEVELS)
def test_a_store_still_changes_its_own_array(level, resumes, kernels):
    rng = np.random.default_rng(1)
    compiled(bump, rng.random(100), rng.random(100), resumes=resumes, level=level)
    if level == "O1":
        assert all(op.apart == ("a_x",) for op in apart_stores(kernels[0])
                   if op.args[0] == "a_y")


@pytest.mark.parametrize("level", LEVELS)
def test_an_output_too_short_raises_at_its_iteration(level):
    x = np.random.default_rng(2).random(200)
    # y[197] is out of range: IndexError there, y[:197] written, as in plain Python
    same(filter_into, x, np.zeros(197), 0.25, 0.5, -0.125, level=level)


@pytest.mark.parametrize("level", LEVELS)
def test_nan_inf_and_signed_zeros(level):
    x = np.random.default_rng(4).random(150)
    x[[3, 50, 51]] = [-0.0, np.inf, -np.inf]
    same(filter_into, x, np.zeros(150), -0.0, 0.5, 0.0, level=level)
    x[80] = np.nan
    same(filter_into, x, np.zeros(150), 0.25, 0.5, -0.125, level=level)
    same(filter_into, -np.zeros(150), np.ones(150), 0.25, -0.5, 0.125, level=level)
    # overflow at a middle iteration: NumPy warns there
    big = np.full(150, 1e306)
    same(filter_into, big, np.zeros(150), 0.5, 0.5, -1.5, level=level)


@pytest.mark.parametrize("level", LEVELS)
def test_int_overflow_midway(level):
    x = np.arange(200, dtype=np.int64) * (2**55)
    same(filter_into, x, np.zeros(200, np.int64), 3, 2, 1, level=level)


@pytest.mark.parametrize("level", LEVELS)
def test_workloads_with_their_own_output(level, resumes):
    rng = np.random.default_rng(0)
    compiled(iir_filter, rng.random(500), 0.2, 0.1, -0.7, resumes=resumes, level=level)
    L = np.tril(rng.random((40, 40))) + 40 * np.eye(40)
    compiled(forward_subst, L, rng.random(40), resumes=resumes, level=level)


# -- a loop's element is live in its body only ----------------------------------------------------
def _spd(n, rng):
    m = rng.random((n, n))
    return m @ m.T + n * np.eye(n)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", [0, 1, 2, 7, 30])
def test_cholesky_by_loops(level, n, resumes, kernels):
    compiled(cholesky_loops, _spd(n, np.random.default_rng(n)), resumes=resumes, level=level)
    if level == "O1" and n > 2:      # (smaller n: ranges.py finds some loops empty)
        (k,) = kernels
        live = k.nest.live_in()
        heads = [b for b in k.nest.blocks if b.term[0] == "foriter"]
        assert len(heads) == 4
        for b in heads:
            assert b.term[2] not in live[b.id], f"{b.term[2]} live at its loop's head"
            assert b.term[2] in live[b.term[3]]
        # each inner sum's check at its loop's exit restores the sum alone
        finite = [op for b in k.blocks for op in b.ops if op.kind == "finite"]
        assert finite and all(op.args[1::2] in (("l_s",), ("l_t",)) for op in finite)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("case", ["not positive definite", "nan", "inf", "overflow"])
def test_cholesky_hands_over_where_python_raises_or_warns(level, case):
    A = _spd(12, np.random.default_rng(9))
    if case == "not positive definite":
        A[6, 6] = -1.0                  # raises at j = 6, after five columns
    elif case == "nan":
        A[8, 3] = np.nan                # every column after 3 goes NaN: ValueError at j = 4
    elif case == "inf":
        A[3, 3] = np.inf
    else:
        A[5, 2] = A[2, 5] = 1e200       # t * t overflows in the sums of column 5
    same(cholesky_loops, A, level=level)


# -- an inner loop's entry checks only what its outer loop's entry did not ----------------------
def gates_checking_no_index(kernel) -> list:
    """The loop entries (gates) that check no index, only iterators' ranges, strides and
    memory apart."""
    return [b.term[1] for b in kernel.blocks if b.term[0] == "version"
            and all(c[0][0] not in ("var", "const") for c in b.term[1])]


def inner_only(A, r, out):
    for i in range(out.shape[0]):
        s = 0.0
        for k in range(A.shape[1]):
            s += A[r, k]            # r: checked at the inner loop's entry, never by the outer
        out[i] = s
    return out


def shifted_rows(A, out):
    for i in range(out.shape[0]):
        r = i + 1
        s = A[i, 0]                 # the outer loop's entry checks i, not i + 1
        for k in range(A.shape[1]):
            s += A[r, k]
        out[i] = s
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_cholesky_checks_its_rows_once(level, resumes, kernels):
    compiled(cholesky_loops, _spd(20, np.random.default_rng(3)), resumes=resumes, level=level)
    if level == "O1":
        # the outermost loop's, and the inner loops' in their outer loop's unchecked copy:
        # L[j, k] and L[i, k] check j and i where their loops start, not at each (i, j)
        assert len(gates_checking_no_index(kernels[0])) >= 3


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("r", [2, 4, 5, -1, -5, -6])
def test_an_index_only_the_inner_loop_reads_stays_checked(level, r):
    A = np.arange(40.0).reshape(5, 8)
    same(inner_only, A, r, np.zeros(30), level=level)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("rows", [6, 7])
def test_an_offset_index_stays_checked(level, rows):
    A = np.arange(56.0).reshape(7, 8)
    # 7 rows out: A[7, k] at the last one raises IndexError after six rows written
    same(shifted_rows, A, np.zeros(rows), level=level)


# -- an inner range whose ends the outer loop's entry bounds --------------------------------------
def _ranges(kernel) -> dict:
    """Iterator -> the number of arguments of the range op making it."""
    return {op.dst: len(op.args) for b in kernel.blocks for op in b.ops if op.kind == "range"}


def _unchecked_copy(kernel) -> set:
    """The blocks the outermost loop's unchecked copy runs (from its gate's first target)."""
    by_id = {b.id: b for b in kernel.blocks}
    gate = next(b for b in kernel.blocks if b.term[0] == "version"
                and any(c[0][0] == "iter" and c[0][1] in {op.dst for op in by_id[0].ops}
                        for c in b.term[1]))
    seen, todo = set(), [gate.term[2]]
    while todo:
        k = todo.pop()
        if k not in seen:
            seen.add(k)
            todo.extend(successors(by_id[k].term))
    return seen


def range_checks(kernel, blocks=None) -> list:
    """The iterators of one-argument ranges (`range(j)`) the gates of `blocks` check."""
    nargs = _ranges(kernel)
    return [c[0][1] for b in kernel.blocks if b.term[0] == "version"
            and (blocks is None or b.id in blocks) for c in b.term[1]
            if c[0][0] == "iter" and nargs[c[0][1]] == 1]


@pytest.mark.parametrize("level", LEVELS)
def test_cholesky_inner_ranges_checked_by_the_outer_loop(level, resumes, kernels):
    compiled(cholesky_loops, _spd(20, np.random.default_rng(4)), resumes=resumes, level=level)
    if level == "O1":
        (k,) = kernels
        # `for k in range(j)` under L[j, j]: j < n proves every k, where j's loop checked it
        assert range_checks(k) and not range_checks(k, _unchecked_copy(k))


def rows_within(L):
    """k from j to j: in bounds where j is (L[j, j])."""
    out = np.zeros(L.shape[0])
    for j in range(L.shape[0]):
        s = L[j, j]
        for k in range(j, j + 1):
            s += L[j, k] * 0.5
        out[j] = s
    return out


def rows_below(L):
    """k = j - 1 first: -1 at j = 0, which Python wraps to the row's last element."""
    out = np.zeros(L.shape[0])
    for j in range(L.shape[0]):
        s = L[j, j]
        for k in range(j - 1, j + 1):
            s += L[j, k] * 0.5
        out[j] = s
    return out


def rows_past(L):
    """k = j + 1 last: out of the last row, an IndexError after the rows before written."""
    out = np.zeros(L.shape[0])
    for j in range(L.shape[0]):
        s = L[j, j]
        for k in range(j, j + 2):
            s += L[j, k] * 0.5
        out[j] = s
    return out


def rows_from(L, step):
    out = np.zeros(L.shape[0])
    for j in range(L.shape[0]):
        s = L[j, j]
        for k in range(j + 1, j - 2, step):
            s += L[j, k]
        out[j] = s
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_an_inner_range_within_its_proven_ends_is_not_checked(level, resumes, kernels):
    compiled(rows_within, np.arange(49.0).reshape(7, 7) * 1.5 + 1.0, resumes=resumes,
             level=level)
    if level == "O1":
        (k,) = kernels
        assert not [c for b in k.blocks if b.term[0] == "version" and b.id
                    in _unchecked_copy(k) for c in b.term[1] if c[0][0] != "unit"]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn", [rows_below, rows_past])
def test_an_inner_range_past_its_proven_ends_stays_checked(level, fn):
    same(fn, np.arange(49.0).reshape(7, 7) * 1.5 + 1.0, level=level)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("step", [-1, 1])
def test_an_inner_range_of_another_step_stays_checked(level, step):
    # step -1: k = j + 1 first, out of the last row (IndexError after six rows)
    same(rows_from, np.arange(49.0).reshape(7, 7) + 1.0, step, level=level)


# -- an inner range's stop, and an inner loop's index, checked once at the outer loop's entry ----
def gate_checks(kernel, blocks=None) -> list:
    """The checks of the gates of `blocks` (every gate's when None), less strides and memory."""
    return [c for b in kernel.blocks if b.term[0] == "version"
            and (blocks is None or b.id in blocks) for c in b.term[1]
            if c[0][0] not in ("unit", "disjoint", "advance", "apart")]


def upper_rows(A, n):
    """range(k + 1, n): n past the row's end raises IndexError at the first k whose range
    reaches it, the sums of the rows before it stored."""
    out = np.zeros(A.shape[0])
    for k in range(A.shape[0]):
        s = A[k, k]
        for j in range(k + 1, n):
            s += A[k, j] * 0.5
        out[k] = s
    return out


def offset_row(A, r, out):
    """A[r + 1, k] only in the inner loop: r + 1 checked at the outer loop's entry."""
    for i in range(out.shape[0]):
        s = 0.0
        for k in range(A.shape[1]):
            s += A[r + 1, k]
        out[i] = s
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_lu_inner_ranges_checked_by_the_outer_loop(level, resumes, kernels):
    compiled(lu_nopivot, np.random.default_rng(5).random((12, 12)) + 12 * np.eye(12),
             resumes=resumes, level=level)
    if level == "O1":
        (k,) = kernels
        # `range(k + 1, n)` twice: k + 1 >= 0 where k's loop checked k, n - 1 < n of both
        # axes at that loop's entry, once: no inner entry of its unchecked copy checks a
        # range or an index
        assert ("var", "l_n") in {c[0] for c in gate_checks(k)}
        assert gate_checks(k) and not gate_checks(k, _unchecked_copy(k))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", [0, 1, 5, 7, 8, 9, 20])
def test_an_inner_range_past_the_rows_end_raises_where_python_does(level, n, resumes,
                                                                   kernels):
    # 7 columns: n = 8 and 9 read past the row's end at k = 0 (IndexError, nothing stored);
    # n = 0 and 1: no range reaches a column, n = 1 a check that fails with no access
    run = same if n > 7 else functools.partial(compiled, resumes=resumes)
    run(upper_rows, np.arange(49.0).reshape(7, 7) + 1.0, n, level=level)
    if level == "O1":
        (k,) = kernels
        assert not gate_checks(k, _unchecked_copy(k))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("r", [0, 3, 4, -1, -5, -6])
def test_an_offset_index_only_the_inner_loop_reads(level, r, resumes, kernels):
    # 5 rows: r + 1 = 5 and -5 out of bounds (IndexError before any store), -4 wraps
    A = np.arange(40.0).reshape(5, 8)
    run = same if r in (4, -6) else functools.partial(compiled, resumes=resumes)
    run(offset_row, A, r, np.zeros(3), level=level)
    if level == "O1":
        (k,) = kernels
        assert ("var", "l_r") in {c[0] for c in gate_checks(k)}
        assert not [c for c in gate_checks(k, _unchecked_copy(k)) if c[0][0] == "var"]
