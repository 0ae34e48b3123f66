"""Innermost loops whose iterations touch disjoint elements, run as SIMD passes with their
invariant loads read once (pijit/loopnest/vectorize.py). Each case runs plain and jitted at O0
and O1 (results, partial writes, warnings, the exception at the same iteration; one
loop_nest node), checks the plan (which loops get passes, which loads are hoisted), and the
cases where the passes must not run: the run-time address checks failing (views of one buffer,
a store hitting the hoisted element, a store that does not move), a loop carrying a value,
a load after a store; a check firing inside a chunk (overflow, NaN, errstate) hands over at
the same iteration as plain Python."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.workloads import lu_nopivot
from pijit.loopnest import vectorize
from tests.test_loop_nests import compiled, resumes, same  # noqa: F401 - resumes: a fixture
from tests.test_loop_nests_checks import kernels  # noqa: F401 - a fixture

LEVELS = ["O0", "O1"]


def planned(kernel) -> list:
    return list(kernel.vectors.values())


def hoisted(kernel) -> list:
    """The loads the kernel's pre-headers read before their loops."""
    return [op for k in kernel.vectors for op in kernel.blocks_by_id[k].ops
            if op.kind == "load"]


def _lu_input(n, rng, dtype=np.float64):
    return (rng.random((n, n)) + n * np.eye(n)).astype(dtype)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", [1, 2, 9, 40])
def test_lu_rows_run_as_passes(level, n, resumes, kernels):
    # 9: rows shorter than MIN_TRIPS at the end of the factorization
    compiled(lu_nopivot, _lu_input(n, np.random.default_rng(n)), resumes=resumes, level=level)
    if level == "O1" and n > 1:
        k = kernels[0]
        assert planned(k) and hoisted(k)
        assert [str(op) for op in hoisted(k)] == ["h%s_0 = load a_A, l_i, l_k" % pre
                                                  for pre in sorted(k.vectors)]


def test_the_passes_run(monkeypatch, resumes, kernels):
    """A sabotaged store pass (it skips the loop) changes the result: the kernel goes through
    the passes for these inputs (the results of the other tests then test them)."""
    original = vectorize.lower

    def skip(k, vec, target):
        lines = original(k, vec, target)
        exit_ = target.get(k.blocks_by_id[vec.head].term[4], k.blocks_by_id[vec.head].term[4])
        at = next(n for n, s in enumerate(lines) if "#pragma omp simd" in s
                  and "reduction" not in s)
        return lines[:at] + [f"        goto b{exit_};"] + lines[at:]

    monkeypatch.setattr(vectorize, "lower", skip)
    with pytest.raises(AssertionError, match="result"):
        same(lu_nopivot, _lu_input(30, np.random.default_rng(1)))


def scale_rows(A, B, k):
    """A[i, j] -= A[i, k] * B[k, j] for j >= k + 1: A[i, k] is invariant and never stored."""
    n = A.shape[0]
    for i in range(n):
        for j in range(k + 1, A.shape[1]):
            A[i, j] = A[i, j] - A[i, k] * B[k, j]
    return A


def scale_all(A, B, k):
    """The same over every j: the store hits A[i, k] at j = k, later iterations must see it."""
    n = A.shape[0]
    for i in range(n):
        for j in range(A.shape[1]):
            A[i, j] = A[i, j] - A[i, k] * B[k, j]
    return A


@pytest.mark.parametrize("level", LEVELS)
def test_a_store_hitting_the_hoisted_element(level, resumes, kernels):
    rng = np.random.default_rng(2)
    A, B = rng.random((5, 37)), rng.random((37, 37)) + 1.0
    compiled(scale_rows, A, B, 2, resumes=resumes, level=level)
    compiled(scale_all, A, B, 20, resumes=resumes, level=level)
    compiled(scale_all, B, B, 20, resumes=resumes, level=level)     # B is A
    if level == "O1":
        assert all(planned(k) and hoisted(k) for k in kernels)


def index_in_the_body(A, B, k):
    for j in range(A.shape[1]):
        kk = k + 1                              # invariant, but assigned in the loop
        A[1, j] = A[1, j] + B[kk, 0] * B[0, kk]
    return A


@pytest.mark.parametrize("level", LEVELS)
def test_an_invariant_index_the_body_computes(level, resumes, kernels):
    """B[kk, 0] reads the same element in every iteration, but kk is set in the body: the
    load stays there (read before the loop, kk would be the value it had before)."""
    rng = np.random.default_rng(7)
    compiled(index_in_the_body, rng.random((3, 20)), rng.random((4, 4)), 2, resumes=resumes,
             level=level)
    if level == "O1":
        assert all(planned(k) and not hoisted(k) for k in kernels)


def shift_add(dst, src):
    for j in range(dst.shape[0]):
        dst[j] = src[j] + 1.0
    return dst


def twice(x, y):
    for j in range(x.shape[0]):
        y[j] = x[j] * 2.0 - 0.5
    return y


@pytest.mark.parametrize("level", LEVELS)
def test_views_of_one_buffer(level, resumes, kernels):
    """dst[j] = src[j] + 1 over views one element apart reads what the previous iteration
    stored (a recurrence): the address check fails and the loop runs element by element."""
    x = np.arange(40.0)
    compiled(shift_add, x[1:], x[:-1], resumes=resumes, level=level)     # a recurrence
    compiled(shift_add, x[:-1], x[1:], resumes=resumes, level=level)     # reads ahead
    compiled(shift_add, x, x, resumes=resumes, level=level)              # in place
    compiled(shift_add, x[::2], x[1::2], resumes=resumes, level=level)   # interleaved
    y = np.zeros(40)
    compiled(twice, x, y, resumes=resumes, level=level)
    compiled(twice, x[:20], x[10:30], resumes=resumes, level=level)
    compiled(twice, x[10:30], x[:20], resumes=resumes, level=level)
    if level == "O1":
        assert all(planned(k) for k in kernels)


def add_to_column(dst, src):
    for j in range(src.shape[0]):
        dst[j, 0] = dst[j, 0] + src[j]
    return dst


@pytest.mark.parametrize("level", LEVELS)
def test_a_store_that_does_not_move(level, resumes, kernels):
    """Rows of stride 0 (every iteration reads and writes one element: a sum): the check that
    each store moves by its itemsize fails."""
    dst = np.ndarray((12, 1), np.float64, buffer=np.zeros(1), strides=(0, 8))
    assert dst.flags.writeable and dst.strides == (0, 8)
    compiled(add_to_column, dst, np.arange(12.0), resumes=resumes, level=level)
    compiled(add_to_column, np.zeros((12, 1)), np.arange(12.0), resumes=resumes, level=level)
    if level == "O1":
        assert all(planned(k) for k in kernels)


def update(A, k, lo):
    n = A.shape[1]
    for i in range(k + 1, A.shape[0]):
        for j in range(lo, n):
            A[i, j] -= A[i, k] * A[k, j]
    return A


@pytest.mark.parametrize("level", LEVELS)
def test_a_check_firing_in_a_chunk(level, resumes):
    """An overflow (a NumPy float's warning) at a middle iteration: the chunk runs again
    element by element and hands over at that op, every earlier store done; under
    np.errstate(over="raise") the same iteration raises."""
    A = np.random.default_rng(3).random((4, 40))
    A[0, 25] = 1e308
    A[2, 0] = -1e10
    same(update, A.copy(), 0, 1, level=level)
    with np.errstate(over="raise"):
        same(update, A.copy(), 0, 1, level=level)
    for bad in (np.nan, np.inf, -np.inf):
        B = A.copy()
        B[0, 0] = 1.0
        B[0, 30] = bad
        same(update, B, 0, 1, level=level)
    long = np.random.default_rng(6).random((3, 700))          # chunks of vectorize.CHUNK
    resumes.clear()
    compiled(update, long.copy(), 0, 1, resumes=resumes, level=level)
    long[0, 600] = 1e308
    same(update, long, 0, 1, level=level)


@pytest.mark.parametrize("level", LEVELS)
def test_signed_zeros_and_nans_stored(level, resumes):
    A = np.zeros((3, 20))
    A[0] = -0.0
    A[1, ::3] = -0.0
    compiled(update, A.copy(), 0, 1, resumes=resumes, level=level)
    B = np.full((3, 20), -0.0)
    B[:, 0] = -1.0
    compiled(update, B, 0, 1, resumes=resumes, level=level)
    A[2, 5] = np.nan                            # not finite: Python from that element
    same(update, A, 0, 1, level=level)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32, np.int8, np.uint16])
def test_dtypes(level, dtype, resumes):
    rng = np.random.default_rng(4)
    A = (rng.random((6, 33)) * 10).astype(dtype)
    same(update, A, 1, 2, level=level)
    if dtype in (np.int8, np.uint16, np.int32):
        big = np.full((3, 30), np.iinfo(dtype).max // 3, dtype=dtype)
        big[0, :] = 1
        big[0, 15:] = 4             # wraps with a warning from j = 15 on
        big[0, 0] = 1
        same(update, big, 0, 1, level=level)


def first_index_error(y, x, n):
    for j in range(n):
        y[j] = x[j] * 3.0
    return y


@pytest.mark.parametrize("level", LEVELS)
def test_index_error_at_the_same_iteration(level, resumes):
    same(first_index_error, np.zeros(20), np.arange(30.0), 25, level=level)
    same(first_index_error, np.zeros(30), np.arange(20.0), 25, level=level)
    resumes.clear()
    compiled(first_index_error, np.zeros(30), np.arange(30.0), 30, resumes=resumes,
             level=level)


def carried(x, y):
    s = x[0]                    # a NumPy float throughout: one type
    for j in range(1, x.shape[0]):
        s = s + x[j]
        y[j] = s
    return y


def index_after(x, y):
    j = -1
    for j in range(x.shape[0]):
        y[j] = x[j] + 1.0
    return y, j


def load_after_store(x, y, z):
    for j in range(x.shape[0]):
        y[j] = x[j] * 1.0
        z[j] = y[j] * 10.0
    return z


def columns(A, c):
    for i in range(A.shape[0]):
        A[i, c] = A[i, c] * 0.5 + A[i, 0]
    return A


def backwards(x, y):
    for j in range(x.shape[0] - 1, -1, -3):
        y[j] = x[j] / 3.0
    return y


@pytest.mark.parametrize("level", LEVELS)
def test_loops_the_passes_leave_alone(level, resumes, kernels):
    x = np.arange(1.0, 31.0)
    compiled(carried, x, np.zeros(30), resumes=resumes, level=level)
    compiled(index_after, x, np.zeros(30), resumes=resumes, level=level)
    big = np.full(30, 1e300)
    same(load_after_store, big, np.zeros(30), np.zeros(30), level=level)
    if level == "O1":
        assert not any(planned(k) for k in kernels)


@pytest.mark.parametrize("level", LEVELS)
def test_other_strides_and_steps(level, resumes, kernels):
    A = np.random.default_rng(5).random((40, 5))
    compiled(columns, A, 3, resumes=resumes, level=level)
    compiled(columns, np.asfortranarray(A), 3, resumes=resumes, level=level)
    compiled(columns, A, 0, resumes=resumes, level=level)     # A[i, 0] is the stored element
    x = np.linspace(-1.0, 1.0, 50)
    compiled(backwards, x, np.zeros(50), resumes=resumes, level=level)
    compiled(backwards, x[::-1], np.zeros(100)[::2], resumes=resumes, level=level)
    if level == "O1":
        assert all(planned(k) for k in kernels)


# -- a float64 `** 2` in the passes: v*v where it must be pow's result, pow in the others --

# pow(v, 2.0) != v*v for these (glibc's pow, within 0.54 ulp, is not correctly rounded)
NOT_THE_PRODUCT = [-9.293955668401892, -0.029556329873226872, 9.680920944534968,
                   -4.162010103560354, 4.661727112162666, 0.23982343760764202]


def squares_into(x, y, out):
    for j in range(x.shape[0]):
        out[j] = (x[j] - y[j]) ** 2 * 0.5
    return out


def squares_in_place(x):
    for j in range(x.shape[0]):
        x[j] = x[j] ** 2
    return x


def squares_and_a_value(x, out, marks, c):
    """Stores of a value set before the loop beside the square's."""
    for j in range(x.shape[0]):
        out[j] = x[j] ** 2
        marks[j] = c
    return out, marks


def _square_inputs(n):
    """n values (chunks of vectorize.CHUNK and a short tail), those pow does not square as
    v*v spread over them, and some squares below the normal range or near overflow."""
    x = np.random.default_rng(8).uniform(-10.0, 10.0, n)
    at = np.linspace(0, n - 1, min(n, 3 * len(NOT_THE_PRODUCT))).astype(int)
    x[at] = np.resize(NOT_THE_PRODUCT, len(at))
    if n > 310:
        x[300:306] = [1e-160, -3e-160, 2.0 ** 511, 1.3e154, 0.5, 3.0]
    return x


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", [9, 700])
def test_squares_run_as_passes(level, n, resumes, kernels):
    x = _square_inputs(n)
    assert (x * x).tobytes() != np.array([v ** 2 for v in x]).tobytes()
    compiled(squares_into, x, np.zeros(n), np.zeros(n), resumes=resumes, level=level)
    compiled(squares_in_place, x.copy(), resumes=resumes, level=level)
    compiled(squares_and_a_value, x, np.zeros(n), np.zeros(n), -0.0, resumes=resumes,
             level=level)
    if level == "O1":
        assert all(planned(k) for k in kernels)


@pytest.mark.parametrize("level", LEVELS)
def test_a_square_check_firing_in_a_chunk(level, resumes):
    """A NumPy float square that overflows (warns) or is zero (hands over: pow(0, 2) is
    left to Python) in a lane pow computes, or any lane: the same iteration as plain."""
    for bad in (1.5e154, -1e200, 0.0, 1e-200, np.nan):
        x = _square_inputs(700)
        x[430] = bad
        same(squares_into, x, np.zeros(700), np.zeros(700), level=level)
        same(squares_in_place, x, level=level)


def test_float32_squares_stay_scalar(resumes, kernels):
    x = np.random.default_rng(8).uniform(-10.0, 10.0, 700).astype(np.float32)
    compiled(squares_in_place, x, resumes=resumes)
    assert not any(planned(k) for k in kernels)
