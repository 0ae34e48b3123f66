"""A loop accumulating a NumPy float checks it once at the loop's exit (pijit/loopnest/
exit_checks.py): a non-finite sum stays non-finite, so a finite one at the end means no
iteration overflowed; else the loop runs again in Python from its start, warning where plain
Python does. Each case runs plain and jitted (results, partial writes, warnings; one
loop_nest node, explain), with sums that overflow at a middle iteration, and the near misses
the rule must leave alone (a store the loop reads back, two accumulators, a branch), and
looks at the kernel's blocks to see the check moved, or not."""
from __future__ import annotations

import math
import re
import struct

import numpy as np
import pytest

from benchmarks.workloads import csr_matvec, dot_zip_f32, forward_subst, poly_horner
from tests.differential import assert_same
from tests.test_loop_nests import resumes, same  # noqa: F401 - resumes: a fixture
from tests.test_loop_nests_checks import kernels  # noqa: F401 - a fixture

LEVELS = ["O0", "O1"]


def exit_checks(kernel) -> list:
    return [op for b in kernel.blocks for op in b.ops if op.kind == "finite"]


@pytest.mark.parametrize("level", LEVELS)
def test_a_triangular_solve_checks_each_row_once(level, resumes, kernels):
    rng = np.random.default_rng(2)
    L = np.tril(rng.random((12, 12))) + 12 * np.eye(12)
    same(forward_subst, L, rng.random(12), level=level)
    if level == "O1":
        assert resumes == []
        (k,) = kernels
        assert exit_checks(k)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("where", [(7, 3), (7, 0), (7, 6), (11, 10)])
def test_an_overflow_midway_warns_at_its_iteration(level, where, resumes, kernels):
    rng = np.random.default_rng(2)
    L = np.tril(rng.random((12, 12))) + 12 * np.eye(12)
    L[where] = 1e308
    same(forward_subst, L, rng.random(12) + 1e3, level=level)
    if level == "O1":
        assert resumes and exit_checks(kernels[0])


def dot_rows(A, x, out):
    for i in range(A.shape[0]):
        s = x[0] * 0.0          # an np.float64 (np.float64(0.0) is no call a nest makes)
        for j in range(A.shape[1]):
            s = s + A[i, j] * x[j]
        out[i] = s
    return out


def scaled(a, s):
    for j in range(a.shape[0]):
        s = a[j] * s            # the accumulator on the right
    return s


def padded(values, n=120, fill=1.0):
    """values then fill up to n elements: long enough to be a loop nest (shorter loops over
    arrays of a known length are unrolled)."""
    return np.concatenate([np.array(values, dtype=float), np.full(n - len(values), fill)])


@pytest.mark.parametrize("level", LEVELS)
def test_sums_products_nan_and_inf(level, resumes, kernels):
    A = np.arange(120.0).reshape(3, 40) / 100
    A[1, 2] = np.inf            # inf from the data: no warning, the rows after go on
    A[2, 0] = np.nan
    same(dot_rows, A, padded([1.0, -1.0, 2.0, 0.5], 40), np.zeros(3), level=level)
    big = padded([1e308, 1e308, -1e308, 0.0, 3.0])      # the sum overflows: warns
    same(dot_rows, np.stack([big, -big]), np.ones(120), np.zeros(2), level=level)
    same(scaled, padded([2.0, 1e200, 1e200, 0.0, 5.0]), np.float64(3.0), level=level)
    same(scaled, padded([2.0, 3.0]), np.float64(np.inf), level=level)
    if level == "O1":
        assert all(exit_checks(k) for k in kernels)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("case", ["in bounds", "out of bounds", "overflow, then out of bounds"])
def test_a_gather_hands_over_from_the_loops_start(level, case, resumes, kernels):
    # x[indices[k]] may be out of bounds: that hand-over restarts the loop in Python too,
    # which warns for the sum first when it overflowed before
    n = 30
    indptr = np.arange(0, 4 * n + 1, 4, dtype=np.int32)
    indices = (np.arange(4 * n) * 7 % n).astype(np.int32)
    data = np.linspace(0.5, 2.0, 4 * n)
    if case != "in bounds":
        indices[4 * 17 + 3] = n + 5             # row 17, its fourth element
    if case.startswith("overflow"):
        data[4 * 17:4 * 17 + 2] = 1e308         # the sum of row 17 overflows first
    same(csr_matvec, indptr, indices, data, np.ones(n), level=level)
    if level == "O1":
        assert exit_checks(kernels[0])
        assert (resumes == []) == (case == "in bounds")


@pytest.mark.parametrize("level", LEVELS)
def test_horner_checks_each_point_once(level, resumes, kernels):
    # p = p * x + c: a non-finite p makes p * x and the sum non-finite, so the sum's check
    # moves to the inner loop's exit; an overflow at a middle point warns there
    coef = padded([0.5, -2.0, 3.0], 24)
    xs = np.linspace(-1.5, 1.5, 30)
    same(poly_horner, coef, xs, level=level)
    if level == "O1":
        assert resumes == [] and exit_checks(kernels[-1])
    xs[17] = 1e16                                       # overflows (warns) at point 17
    same(poly_horner, coef, xs, level=level)
    xs[17], xs[3] = 0.0, np.inf                         # inf * 0: NaN, no warning
    same(poly_horner, coef, xs, level=level)
    # s = a[j] * 1e300 + 1.0 does not come from s: the next step forgets an overflow
    same(last_scaled, padded([1.0, 1e10, 1.0]), level=level)


def last_scaled(a):
    s = np.float64(0.0)
    for j in range(a.shape[0]):
        s = a[j] * 1e300 + 1.0
    return s


def dot_zip_from(a, b, total):
    for x, y in zip(a, b):
        total += x * y          # a Python float, then an np.float32
    return total


def dot_zip_reset(a, b):
    total = 0.0
    for x, y in zip(a, b):
        total += x * y
        if total > 30.0:
            total = 0.1         # no float32 holds it: total stays a double
    return total


def above_tenth(a):
    n = 0
    t = 0.0
    for x in a:
        if t > 0.1:             # np.float32(0.1) > 0.1 is False (0.1 made a float32 first)
            n += 1
        t = x
    return n


@pytest.mark.parametrize("level", LEVELS)
def test_a_zip_into_a_python_float_checks_at_the_exit_in_a_float(level, resumes, kernels):
    # zip's second step leaves to the same exit as its head, through the check; the
    # accumulator, only ever a float32 value or a constant a float32 holds, is a C float
    rng = np.random.default_rng(3)
    a, b = rng.random(40, dtype=np.float32), rng.random(40, dtype=np.float32)
    same(dot_zip_f32, a, b[:-1], level=level, breaks=1)     # b the shorter one
    if level == "O1":
        assert resumes == [] and exit_checks(kernels[-1])
        assert "l_total" in kernels[-1].nest.narrow
    big = a.copy()
    big[[5, 6, 30]] = 3e38                              # overflows at 6 (warns), then inf
    same(dot_zip_f32, big, b[:-1] + 1, level=level, breaks=1)    # left at b's end
    c = b.copy()
    c[[12, -1]] = 100.0
    same(dot_zip_reset, a, c, level=level, breaks=1)
    # entry values a float32 holds bit for bit run in the kernel (inf: up to the exit's
    # check); others (0.1, a NaN with low payload bits, 1e-45, 1e39) are handed to Python
    # at the entry (block -1)
    held = (-0.0, 0.5, float(np.float32(0.1)), math.inf)
    for total in held + (0.1, 1e-45, 1e39,
                         struct.unpack("<d", struct.pack("<Q", 0x7ff8000000000001))[0]):
        resumes.clear()
        same(dot_zip_from, a, b, total, level=level, breaks=1)
        if level == "O1":
            assert (-1 in resumes) == (total not in held), (total, resumes)
            assert (resumes == []) == (total in held[:3]), (total, resumes)
    same(dot_zip_from, a[:0], b, 0.1, level=level, breaks=1)   # no trip: the float back
    # a constant no float32 holds: float32 and double comparisons differ, so no nest
    assert_same(above_tenth, np.full(200, 0.1, np.float32), graphs=None, breaks=None,
                jit_kwargs={"jit_config": {"jit_level": level}})


def consumed(a):
    s = np.float64(0.0)
    for j in range(a.shape[0]):
        s = s + a[j]
        a[j] = 2.0              # run again from the start, the loop would read these
    return s, a


def two_sums(a, b):
    s = np.float64(0.0)
    t = np.float64(0.0)
    for j in range(a.shape[0]):
        s = s + a[j]
        t = t + b[j]
    return s, t


def branchy(a):
    s = np.float64(0.0)
    for j in range(a.shape[0]):
        if a[j] > 0:
            s = s + a[j]
    return s


def last_product(a):
    s = np.float64(0.0)
    for j in range(a.shape[0]):
        s = a[j] * 1e300        # not read again: a finite s at the end says nothing
    return s


@pytest.mark.parametrize("level", LEVELS)
def test_near_misses_keep_their_checks(level, resumes, kernels):
    same(consumed, padded([1.0, 1e308, 1e308, 2.0, 3.0]), level=level)
    # s overflows at j = 1, t at j = 3: t's hand-over there must find s's warning done
    same(two_sums, padded([1e308, 1e308, 1.0, 1.0, 1.0]),
         padded([1.0, 1.0, 1e308, 1e308, 1.0]), level=level)
    same(branchy, padded([1e308, -1.0, 1e308, 2.0]), level=level)
    same(last_product, padded([1.0, 1e10, 2.0]), level=level)
    if level == "O1":
        assert resumes
        for k in kernels:
            assert not exit_checks(k)


def skipping_the_diagonal(A, x):
    out = np.zeros(A.shape[0])
    for i in range(A.shape[0]):
        s = x[i] * 1.0
        for j in range(A.shape[1]):
            if j != i:                  # an index branch: it stays one (ifconvert.py)
                s -= A[i, j] * x[j]
        out[i] = s
    return out


def counting_on_the_side(a, out):
    s = a[0] * 0.0
    for j in range(a.shape[0]):
        if j % 3 == 1:
            out[0] += 1.0               # a store on one side: running again would repeat it
        else:
            s = s + a[j]
    return s, out


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("where", [None, (2, 0), (2, 5), (5, 4)])
def test_a_branch_skipping_the_sum_checks_it_at_the_exit(level, where, resumes, kernels):
    # s -= ... on one side of an index branch: the other side leaves s as it was, so a
    # finite s at the exit still means no iteration overflowed (gauss_seidel's inner loop)
    rng = np.random.default_rng(4)
    A, x = rng.random((6, 130)), rng.random(130)
    if where is not None:
        A[where] = -1e308
        x[where[1]] = 1e10
    same(skipping_the_diagonal, A, x, level=level)
    if level == "O1":
        assert (resumes == []) == (where is None)
        (k,) = kernels
        assert exit_checks(k)


@pytest.mark.parametrize("level", LEVELS)
def test_a_branch_storing_keeps_its_checks(level, resumes, kernels):
    same(counting_on_the_side, padded([1.0, 2.0, 1e308, 1e308, 3.0]), np.zeros(1),
         level=level)
    if level == "O1":
        assert resumes
        (k,) = kernels
        assert not exit_checks(k)


def squares_until(a, stop):
    s = a[0] * 0.0
    for j in range(a.shape[0]):
        s = s + a[j] * a[j]
        if j == stop:
            break               # leaves from the body: the exit's check is not on its path
    return s


def logs_until_small(a):
    s = a[0] * 0.0
    for j in range(a.shape[0]):
        t = np.log(a[j])
        if t < -5.0:
            break
        s = s + t
    return s


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("stop", [3, 50, 200])
def test_a_loop_left_by_break_keeps_its_checks(level, stop, resumes, kernels):
    # a square overflowing at j = 10 (then s is inf), or log(0) at j = 10 (-inf, so the
    # loop breaks right there): the warnings come whether the loop ends or breaks after
    a = np.linspace(0.5, 2.0, 120)
    a[10] = 1e200
    same(squares_until, a, stop, level=level)
    a[10] = 0.0
    same(logs_until_small, a, level=level)
    same(squares_until, np.linspace(0.5, 2.0, 120), stop, level=level)
    if level == "O1":
        assert kernels and not any(exit_checks(k) for k in kernels)


def sum_and_double_rows(x, A):
    s = x[0] * 0.0
    for i in range(x.shape[0]):
        s += x[i]
        A[i, :] *= 2.0          # a slice write (slices.py's vstore): the loop stores
    return s


@pytest.mark.parametrize("level", LEVELS)
def test_a_loop_writing_slices_keeps_its_checks_in_the_loop(level, resumes, kernels):
    """The sum's check stays per iteration: a restart of the loop from its start after an
    overflow would double the rows written before it a second time."""
    x = np.array([1.0, 1e308, 1e308, 2.0, 3.0])
    same(sum_and_double_rows, x, np.ones((5, 3)), level=level)
    if level == "O1":
        assert not exit_checks(kernels[0])


# -- NumPy ufunc calls: their flags read once, at the restarted loop's exit --------------------
def arc_sum(a):
    s = a[0] * 0.0
    for j in range(a.shape[0]):
        s = s + np.arcsin(a[j]) * np.cos(a[j])
    return s


def log_sum(a):
    s = a[0] * 0.0
    for j in range(a.shape[0]):
        s = s + np.log(a[j])
    return s


def exp_sum(a):
    s = a[0] * 0.0
    for j in range(a.shape[0]):
        s = s + np.exp(-a[j])
    return s


def arc_store(a, out):
    s = a[0] * 0.0
    for j in range(a.shape[0]):
        t = np.arcsin(a[j])
        out[j] = t              # a store: no restart, each call reads its own flags
        s = s + t
    return s, out


def flag_reads(kernel) -> list:
    """The exit checks that also read the loop's NumPy flags."""
    return [op for op in exit_checks(kernel) if op.op == "flags"]


def ufunc_values(dtype, bad=None, at=60):
    a = np.linspace(-0.9, 0.9, 120).astype(dtype)
    if bad is not None:
        a[at] = bad
    return a


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("bad", [None, 1.5, -np.inf, np.nan, -0.0, 2.0])
def test_ufunc_flags_are_read_at_the_loops_exit(level, dtype, bad, resumes, kernels):
    # arcsin of 1.5, 2.0 or -inf warns (invalid) at iteration 60: the exit's read sees the
    # flag and Python runs the loop again, warning there; NaN raises no flag but leaves the
    # sum NaN (Python runs the loop again, without a warning); -0.0 is just a value
    same(arc_sum, ufunc_values(dtype, bad), level=level)
    if level == "O1":
        (k,) = kernels
        assert flag_reads(k)
        assert (resumes == []) == (bad is None or bad == 0)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("where", [None, 0, 37, 119])
def test_divide_and_underflow_at_a_middle_iteration(level, where, resumes, kernels):
    a = np.linspace(0.5, 3.0, 120)
    if where is not None:
        a[where] = 0.0          # log(0): divide by zero, -inf (then the sum is -inf too)
    same(log_sum, a, level=level)
    if level == "O1":
        assert flag_reads(kernels[0]) and (resumes == []) == (where is None)
    # exp(-800) underflows: only np.errstate asking for it makes Python run the loop again
    b = np.linspace(0.5, 3.0, 120)
    b[50] = 800.0
    resumes.clear()
    kernels.clear()
    same(exp_sum, b, level=level)
    if level == "O1":
        assert flag_reads(kernels[0]) and resumes == []
    for mode in ("warn", "raise"):
        resumes.clear()
        with np.errstate(under=mode):
            same(exp_sum, b, level=level)
        if level == "O1":
            assert resumes
    with np.errstate(divide="raise"):
        same(log_sum, a, level=level)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("bad", [None, 1.5])
def test_a_loop_storing_reads_each_calls_flags(level, bad, resumes, kernels):
    # out[j] = ... : run again from the start, the loop would find its stores done, so each
    # call keeps its own read and hands over at its own iteration
    a = ufunc_values(np.float64, bad)
    same(arc_store, a, np.zeros(120), level=level)
    if level == "O1":
        assert not flag_reads(kernels[0]) and (resumes == []) == (bad is None)


def test_the_route_length_workload_reads_no_flags_in_its_loop(resumes, kernels):
    from benchmarks.workloads import route_length
    rng = np.random.default_rng(5)
    lat, lon = rng.uniform(-1.0, 1.0, 200), rng.uniform(-3.0, 3.0, 200)
    same(route_length, lat, lon, breaks=1)
    assert resumes == []
    (k,) = kernels
    assert flag_reads(k)
    source = k.function()
    assert "pj_nest_ufunc(" in source and not re.search(r"pj_nest_ufunc\([^;]*, 1\)", source)
