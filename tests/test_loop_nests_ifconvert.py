"""Branches of a loop nest's C kernel made selects (pijit/loopnest/ifconvert.py): both sides
of a small `if` run and the condition picks; a check that fails there (an overflow, a zero
divisor, an index out of bounds, a store out of range) runs the original branch instead.
Each case runs plain and jitted (results, partial writes, warnings, the exception at the
same iteration; one loop_nest node, explain) and looks at the kernel's blocks to see the
branch converted, or kept where it must be."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.workloads import crc16, lcs_table, py_element_branch
from tests.differential import assert_same
from tests.test_loop_nests import resumes  # noqa: F401 - a fixture
from tests.test_loop_nests_checks import kernels  # noqa: F401 - a fixture

LEVELS = ["O0", "O1"]


def same(fn, *args, level="O1", breaks=0):
    return assert_same(fn, *args, ops=["loop_nest"], breaks=breaks,
                       jit_kwargs={"jit_config": {"jit_level": level}})


def selects(kernel) -> list:
    """The merged blocks (both sides of a branch) of a kernel."""
    return [b for b in kernel.blocks if b.term[0] == "select"]


def sunk_stores(kernel) -> list:
    return [op for b in selects(kernel) for op in b.ops if op.kind == "store"]


# -- branches made selects -----------------------------------------------------------------
@pytest.mark.parametrize("level", LEVELS)
def test_a_branch_on_data_runs_both_sides(level, resumes, kernels):
    a = np.random.default_rng(0).random(200)
    a[::7] = 0.5                                    # the condition's edge
    same(py_element_branch, a, level=level, breaks=1)
    if level == "O1":
        assert resumes == []
        (k,) = kernels
        assert selects(k)


def off_diagonal(A, out):
    for i in range(A.shape[0]):
        s = A[i, 0] * 0.0
        for j in range(A.shape[1]):
            if i != j:                  # indices only: a branch the predictor gets right
                s = s + A[i, j]
            else:
                s = s * 0.5
        out[i] = s
    return out


def alternating(a, out):
    for i in range(a.shape[0]):
        if i % 2:                       # a truth test of an index: no data either
            out[i] = a[i] * 2.0
        else:
            out[i] = a[i]
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_a_branch_on_indices_stays_a_branch(level, resumes, kernels):
    same(off_diagonal, np.arange(20.0).reshape(4, 5), np.zeros(4), level=level)
    same(alternating, np.arange(130.0), np.zeros(130), level=level)
    if level == "O1":
        assert resumes == []
        assert len(kernels) == 2 and not any(selects(k) for k in kernels)


@pytest.mark.parametrize("level", LEVELS)
def test_the_benchmark_loops(level, resumes, kernels):
    rng = np.random.default_rng(3)
    same(crc16, rng.integers(0, 256, 40, dtype=np.uint8), level=level)
    same(lcs_table, rng.integers(0, 3, 17), rng.integers(0, 3, 11), level=level)
    if level == "O1":
        assert resumes == []
        crc, lcs = kernels
        assert selects(crc)
        # dp[i, j] from dp[i, j - 1] on one side: the branch stays (see _sunk_store), the
        # element read from a variable (forward.py)
        assert not selects(lcs)


def maximum_so_far(a):
    m = a[0]
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        x = a[i]
        m = x if x > m else m
        out[i] = m
    return out


def counted(a):
    n = 0
    for i in range(a.shape[0]):
        if a[i] < 0.25:
            n += 1
    return n


@pytest.mark.parametrize("level", LEVELS)
def test_a_conditional_expression_and_a_one_sided_if(level, resumes, kernels):
    a = np.array([0.3, -0.0, 0.0, 0.7, np.nan, 0.2, 0.9, 0.1])
    same(maximum_so_far, a, level=level)
    same(counted, a, level=level)
    if level == "O1":
        assert resumes == []
        assert all(selects(k) for k in kernels)


def every_other_flagged(a):
    flag = False
    n = 0
    for i in range(a.shape[0]):
        if flag:                        # a side assigns the condition itself
            flag = False
            n += i
        else:
            flag = a[i] > 0.5
    return n


@pytest.mark.parametrize("level", LEVELS)
def test_a_side_assigning_the_condition(level, resumes, kernels):
    """The selects pick by the value the branch tested, not the one the condition's own
    select gives it: they did, so n took i where the flag was set, not at the next i."""
    a = np.random.default_rng(5).random(300)
    same(every_other_flagged, a, level=level)
    if level == "O1":
        assert resumes == []
        (k,) = kernels
        assert selects(k)


# -- a side that hands over ----------------------------------------------------------------
def powers(a):
    p = q = 1
    for i in range(a.shape[0]):
        if a[i] > 0:
            p = p * 3
        else:
            q = q * 5
    return p, q


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("first", ["true side", "false side"])
def test_each_side_overflows_at_a_middle_iteration(level, first, resumes, kernels):
    # Python ints past int64: 3**40 on the true side, 5**28 on the false side; the kernel
    # hands over at the side that overflows first and Python finishes exactly
    # p's 40th factor (index 59) before q's 28th (index 83), or q's (index 41) before p's
    a = np.tile([1, 1, -1] if first == "true side" else [-1, -1, 1], 40)
    same(powers, a, level=level)
    if level == "O1":
        assert len(resumes) == 2                # one hand-over per call, both calls
        assert all(selects(k) for k in kernels)


def products(a):
    s = t = np.float64(1.0)
    for i in range(a.shape[0]):
        if a[i] > 0:
            s = s * a[i]
        else:
            t = t * -a[i]
    return s, t


@pytest.mark.parametrize("level", LEVELS)
def test_a_numpy_float_overflow_warns_on_its_side(level, resumes, kernels):
    a = np.array([1e100, -1e150, 2.0, 1e100, -1e150, 1e120, -3.0, -1e10, 5.0])
    same(products, a, level=level)          # s overflows at index 5, t at index 7
    if level == "O1":
        assert resumes
        assert all(selects(k) for k in kernels)


# -- the side not taken must not fail ------------------------------------------------------
def divide_where_nonzero(a, b):
    s = 0
    for i in range(a.shape[0]):
        if b[i] != 0:
            s = s + a[i] // b[i]
        else:
            s = s + 1
    return s


def load_where_in_range(a, idx):
    s = 0.0
    for i in range(idx.shape[0]):
        k = idx[i]
        if k < a.shape[0]:
            s += a[k]
        else:
            s -= 1.0
    return s


@pytest.mark.parametrize("level", LEVELS)
def test_a_failing_check_on_the_side_not_taken(level, resumes, kernels):
    a = np.arange(10, 20)
    b = np.array([3, 0, -4, 0, 0, 7, 1, 0, 2, -1])
    same(divide_where_nonzero, a, b, level=level, breaks=1)
    idx = np.array([2, 10, -3, 40, 9, 0, 11])
    same(load_where_in_range, np.arange(10.0), idx, level=level, breaks=1)
    if level == "O1":
        assert resumes == []
        assert all(selects(k) for k in kernels)


# -- stores both sides end with ------------------------------------------------------------
def pick_into(a, b, out):
    for i in range(a.shape[0]):
        if a[i] > b[i]:
            out[i] = a[i] - b[i]
        else:
            out[i] = b[i] * 2.0
    return out


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("view", ["a", "reversed b", "apart"])
def test_a_store_both_sides_end_with_is_sunk(level, view, resumes, kernels):
    rng = np.random.default_rng(7)
    a, b = rng.random(9), rng.random(9)
    out = {"a": a, "reversed b": b[::-1], "apart": np.zeros(9)}[view]
    same(pick_into, a, b, out, level=level)
    if level == "O1":
        assert resumes == []
        (k,) = kernels
        assert sunk_stores(k)


def narrow(a, out):
    for i in range(a.shape[0]):
        if a[i] > 0:
            out[i] = a[i] * 2
        else:
            out[i] = a[i] - 1
    return out


def gathered(a, idx, out):
    for i in range(idx.shape[0]):
        if idx[i] >= 0:
            out[i] = a[idx[i]]
        else:
            out[i] = 0.5
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_a_sunk_store_that_fails_raises_where_python_does(level, resumes, kernels):
    # 300 does not fit an int8 at index 3; a[12] is out of bounds at index 4, with
    # out[0..3] written before
    same(narrow, np.array([1, -5, 60, 150, -100, 2]), np.zeros(6, np.int8), level=level)
    same(gathered, np.arange(10.0), np.array([1, -1, 9, 0, 12, 3]), np.zeros(6),
         level=level)
    if level == "O1":
        assert resumes
        assert all(sunk_stores(k) for k in kernels)


def running_into_float32(a, out):
    s = a[0] * 0.0
    for i in range(a.shape[0]):
        if a[i] > 0:
            s = s + a[i]
            out[i] = s
        else:
            s = s * 0.5
            out[i] = s
    return s


def counted_into_int8(a, out):
    n = 0
    for i in range(a.shape[0]):
        if a[i] > 0:
            n = n + 50
            out[i] = n
        else:
            n = n - 1
            out[i] = n
    return n


@pytest.mark.parametrize("level", LEVELS)
def test_a_sunk_store_failing_after_its_side_updated_a_variable(level, resumes, kernels):
    """The sunk store's check fails (a float32 overflowing, warned; 149 out of int8's range,
    raised) and the branch runs again from the state before the sides, not after their
    selects (which added a[i] or 50 twice: 1e300 for 5e299, 199 for 149)."""
    same(running_into_float32, np.array([1.0, -1.0, 1e300, 1.0, -1.0, 1.0]),
         np.zeros(6, np.float32), level=level)
    same(counted_into_int8, np.array([1.0, -1.0, 1.0, 1.0, -1.0, 1.0]), np.zeros(6, np.int8),
         level=level)
    if level == "O1":
        assert resumes
        assert len(kernels) == 2 and all(sunk_stores(k) for k in kernels)


def int32_or_float32(a, n32, f32, out):
    for i in range(a.shape[0]):
        if a[i] > 0.5:
            out[i] = n32[i]
        else:
            out[i] = f32[i]
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_stores_of_an_int32_or_a_float32(level, resumes, kernels):
    """The value stored is an int32 or a float32 by the side: one C variable holding both
    would be a double (types.carrier), not the float32 that once rounded 2**24 + 1."""
    a = np.array([0.9, 0.1, 0.7, 0.2, 0.6])
    same(int32_or_float32, a, np.arange(5, dtype=np.int32) * 2 + 2**24 + 1,
         np.arange(5, dtype=np.float32) * 0.5, np.zeros(5), level=level)
    if level == "O1":
        assert resumes == [] and len(kernels) == 1


def two_targets(a, out):
    for i in range(1, a.shape[0]):
        if a[i] > 0.5:
            out[i] = a[i]
        else:
            out[i - 1] = a[i]
    return out


def moved_index(a, out):
    j = 0
    for i in range(a.shape[0]):
        if a[i] > 0.5:
            j = i
            out[j] = 1.0
        else:
            out[j] = 2.0
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_stores_into_other_elements_keep_the_branch(level, resumes, kernels):
    a = np.array([0.1, 0.9, 0.2, 0.3, 0.8, 0.6, 0.1])
    same(two_targets, a, np.zeros(7), level=level)
    same(moved_index, a, np.zeros(7), level=level)
    if level == "O1":
        assert resumes == []
        assert not any(selects(k) for k in kernels)
