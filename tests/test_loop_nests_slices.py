"""Array operations on slices inside loop nests (pijit/loopnest/slices.py): dots, sums and
elementwise updates of views by index, compiled into the nest's C kernel. Plain Python's
results, mutated arrays, warnings and exceptions bit for bit, with the loop one loop_nest
node and, where the kernel should go on, no hand-over to Python (`resumes`)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.workloads import cholesky, forward_subst_dot, row_recurrence, syrk_rows
from tests.test_loop_nests import compiled, resumes, same  # noqa: F401 - resumes: a fixture

LEVELS = ["O0", "O1"]
# around BLAS's unroll sizes and NumPy's pairwise leaves
LENGTHS = [0, 1, 2, 3, 7, 8, 9, 31, 32, 33, 127, 128, 129, 1000]


# -- the workloads ---------------------------------------------------------------------------
def cholesky_math(A):
    """The cholesky workload with math.sqrt for np.sqrt (the same bits: both are IEEE's
    correctly rounded square root)."""
    n = A.shape[0]
    L = np.zeros_like(A)
    for j in range(n):
        s = A[j, j] - L[j, :j] @ L[j, :j]
        L[j, j] = math.sqrt(s)
        for i in range(j + 1, n):
            L[i, j] = (A[i, j] - L[i, :j] @ L[j, :j]) / L[j, j]
    return L


def back_subst_dot(U, b):
    n = b.shape[0]
    x = np.zeros(n)
    for i in range(n - 1, -1, -1):
        x[i] = (b[i] - np.dot(U[i, i + 1:], x[i + 1:])) / U[i, i]
    return x


def lu_dot(A):
    n = A.shape[0]
    L = np.eye(n)
    U = np.zeros_like(A)
    for i in range(n):
        for j in range(i, n):
            U[i, j] = A[i, j] - L[i, :i] @ U[:i, j]
        for j in range(i + 1, n):
            L[j, i] = (A[j, i] - L[j, :i].dot(U[:i, i])) / U[i, i]
    return L, U


def spd(n, rng):
    m = rng.random((n, n))
    return m @ m.T + n * np.eye(n)


@pytest.mark.parametrize("n", [1, 2, 7, 33, 120])
@pytest.mark.parametrize("level", LEVELS)
def test_factorizations(n, level, resumes):
    rng = np.random.default_rng(n)
    A = spd(n, rng)
    compiled(cholesky_math, A, level=level, resumes=resumes)
    L = np.tril(rng.random((n, n))) + n * np.eye(n)
    compiled(forward_subst_dot, L, rng.random(n), level=level, resumes=resumes)
    compiled(back_subst_dot, L.T.copy(), rng.random(n), level=level, resumes=resumes)
    compiled(lu_dot, A, level=level, resumes=resumes)


@pytest.mark.parametrize("level", LEVELS)
def test_cholesky_workload(level, resumes):
    compiled(cholesky, spd(40, np.random.default_rng(40)), level=level, resumes=resumes)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("shape", [(1, 3), (7, 5), (120, 64)])
def test_syrk_rows_workload(level, shape, resumes):
    compiled(syrk_rows, np.random.default_rng(7).random(shape), level=level, resumes=resumes)


# -- slice forms -------------------------------------------------------------------------------
def slice_sums(x, out):
    n = x.shape[0]
    for i in range(n):
        out[i, 0] = x[:i].sum()
        out[i, 1] = x[i:].sum()
        out[i, 2] = np.sum(x[-i:])              # -0: the whole array
        out[i, 3] = x[:-i].sum()                # :-0: empty
        out[i, 4] = x[1::2].sum()
        out[i, 5] = x[i::-1].sum()              # a negative step
        out[i, 6] = x[i - 3:i + 20:3].sum()     # bounds clamped at both ends
        out[i, 7] = x[n - i:i].sum()            # empty for the first half
        out[i, 8] = x[-i - 5:-2:-1].sum()       # empty: a negative step, start < stop
        out[i, 9] = x[i:i - 7:-3].sum()
        out[i, 10] = x[::-(i + 1)].sum()
        out[i, 11] = x[i + 1000:].sum()         # past the end
    return out


@pytest.mark.parametrize("n", [1, 9, 40, 300])
@pytest.mark.parametrize("level", LEVELS)
def test_slice_forms(n, level, resumes):
    x = np.random.default_rng(n).standard_normal(n)
    compiled(slice_sums, x, np.zeros((n, 12)), level=level, resumes=resumes)


def rows_and_columns(A, out):
    n, m = A.shape
    for i in range(n):
        out[i, 0] = A[i].sum()                  # a whole row
        out[i, 1] = A[:, i % m].sum()           # a column
        out[i, 2] = A[i, :].sum() - A[-1 - i, ::-1].sum()
        out[i, 3] = A[i] @ A[(i + 1) % n]
    return out


def row_iteration(A, out):
    k = 0
    for row in A:
        out[k] = row[1:].sum() + row[:-1] @ row[1:]
        k += 1
    return out


def element_of_a_row(A, out):
    n, m = A.shape
    for i in range(n):
        for j in range(m):
            out[i][j] = A[i][j] * 2.0
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_views_of_rows(level, resumes):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((9, 6))
    compiled(rows_and_columns, A, np.zeros((9, 4)), level=level, resumes=resumes)
    compiled(row_iteration, A, np.zeros(9), level=level, resumes=resumes)
    compiled(element_of_a_row, A, np.zeros((9, 6)), level=level, resumes=resumes)


# -- dots ----------------------------------------------------------------------------------------
def dots(x, X, y, out):
    for k in range(out.shape[0]):
        out[k, 0] = x[:k] @ y[:k]                       # contiguous
        out[k, 1] = x[:2 * k:2] @ y[:k]                 # a step BLAS takes
        out[k, 2] = x[k:0:-1] @ y[:k]                   # negative: matmul's own loop
        out[k, 3] = np.dot(x[k:0:-1], y[:k])            # negative: np.dot copies it first
        out[k, 4] = X[:k, 1] @ y[:k]                    # a column
        out[k, 5] = np.dot(X[:k, 1], X[:k, 2])
        out[k, 6] = x[:k].dot(y[k:0:-1])
        out[k, 7] = np.dot(x[:k], y[:k])
    return out


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32"])
@pytest.mark.parametrize("level", LEVELS)
def test_dots(dtype, level, resumes):
    rng = np.random.default_rng(7)
    for n in LENGTHS:
        X = (rng.standard_normal((n + 1, 3)) * 8).astype(dtype)
        x, y = (rng.standard_normal((2, 2 * n + 1)) * 8).astype(dtype)
        compiled(dots, x, X, y, np.zeros((n + 1, 8), dtype=dtype), level=level,
                 resumes=resumes)
        resumes.clear()


def signed_zero_dots(x, y, out):
    for k in range(out.shape[0]):
        out[k, 0] = x[k:k + 1] @ y[k:k + 1]
        out[k, 1] = np.dot(x[k:k + 1], y[k:k + 1])
        out[k, 2] = x[k:k + 2] @ y[k:k + 2]
        out[k, 3] = np.dot(x[:0], y[:0])
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_dot_signed_zeros(level, resumes):
    """-0.0 * 1.0: np.dot of one element is that product (-0.0); matmul's dot adds it to
    +0.0 (+0.0)."""
    x = np.array([-0.0, 1.0, -0.0, 0.0, -2.0])
    y = np.array([1.0, -0.0, 3.0, -1.0, 0.0])
    compiled(signed_zero_dots, x, y, np.zeros((4, 4)), level=level, resumes=resumes)


def write_between_dots(x, y):
    n = x.shape[0]
    for i in range(1, n):
        x[i] = (x[:i] @ y[:i]) * 0.25 + np.sum(x[:i]) * 1e-3
        y[i - 1] = x[i]
    return x, y


@pytest.mark.parametrize("level", LEVELS)
def test_writes_seen_by_later_dots(level, resumes):
    rng = np.random.default_rng(5)
    compiled(write_between_dots, rng.random(40), rng.random(40), level=level, resumes=resumes)


def aliased_dots(a, b, out):
    for i in range(out.shape[0]):
        a[i] = a[i] + 1.0
        out[i] = a[:i + 1] @ b[:i + 1]          # b is a view of a
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_dot_of_aliased_arguments(level, resumes):
    base = np.arange(12.0)
    compiled(aliased_dots, base, base[2:], np.zeros(8), level=level, resumes=resumes)


# -- sums ----------------------------------------------------------------------------------------
def sums(x, out):
    for k in range(out.shape[0]):
        out[k, 0] = x[:k].sum()
        out[k, 1] = x[:2 * k:2].sum()
        out[k, 2] = x[k::-1].sum()
        out[k, 3] = np.sum(x[k:])
    return out


@pytest.mark.parametrize("dtype,out", [("float64", "float64"), ("float32", "float32"),
                                       ("int64", "int64"), ("int32", "int64"),
                                       ("int8", "int64"), ("int16", "int64")])
@pytest.mark.parametrize("level", LEVELS)
def test_sums(dtype, out, level, resumes):
    rng = np.random.default_rng(11)
    for n in LENGTHS + [5000, 20000]:
        x = (rng.standard_normal(2 * n + 1) * 100).astype(dtype)
        compiled(sums, x, np.zeros((min(n, 40) + 1, 4), dtype=out), level=level,
                 resumes=resumes)
        resumes.clear()


def expression_sums(x, y, out):
    for i in range(out.shape[0]):
        out[i, 0] = (x[:i] * y[:i]).sum()
        out[i, 1] = np.sum(x[i:] - 2 * y[i:])
        out[i, 2] = (-x[::3]).sum()
    return out


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32"])
@pytest.mark.parametrize("level", LEVELS)
def test_sums_of_expressions(dtype, level, resumes):
    """NumPy sums the expression's temporary: its values computed first, then summed."""
    rng = np.random.default_rng(12)
    for n in (5, 300, 2000):
        x, y = (rng.standard_normal((2, n)) * 50).astype(dtype)
        out = np.zeros((n, 3), dtype=np.int64 if dtype == "int32" else dtype)
        compiled(expression_sums, x, y, out, level=level, resumes=resumes)
        resumes.clear()


# -- elementwise updates ---------------------------------------------------------------------
def row_updates(A, B, s):
    n, m = A.shape
    for i in range(1, n):
        A[i, 1:-1] += (B[i, :-2] + B[i, 2:]) * 0.5
        A[i, :] -= s * A[i - 1, :]
        A[i, ::2] *= 2.0
        A[i, 1:m - 1] /= s + 1.0
        B[i, :i] = -A[i, :i]
        B[i - 1] = A[i] * B[i] - 1
        A[i, i:] = 0.25
    return A, B


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("level", LEVELS)
def test_row_updates(dtype, level, resumes):
    rng = np.random.default_rng(2)
    A = rng.random((7, 9)).astype(dtype)
    B = rng.random((7, 9)).astype(dtype)
    compiled(row_updates, A, B, 0.75, level=level, resumes=resumes)


def int_updates(A, k):
    n = A.shape[0]
    for i in range(1, n):
        A[i, :] += A[i - 1, :] * 3 - k
        A[i, 1:] -= A[i, :-1]
        A[i, ::-1] *= 7
    return A


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "uint8"])
@pytest.mark.parametrize("level", LEVELS)
def test_int_updates_wrap(dtype, level, resumes):
    rng = np.random.default_rng(4)
    A = rng.integers(0, 100, (12, 10)).astype(dtype)
    compiled(int_updates, A, 5, level=level, resumes=resumes)


@pytest.mark.parametrize("dtype, k", [("uint8", 300), ("int16", 70000), ("int8", -200)])
@pytest.mark.parametrize("level", LEVELS)
def test_int_scalar_out_of_the_arrays_range_raises(dtype, k, level):
    """A Python int beside an integer view it does not fit: NumPy raises OverflowError (NEP
    50) before the first write; the kernel checks it once before its loop and hands over."""
    A = (np.arange(120) % 50).reshape(12, 10).astype(dtype)
    same(int_updates, A, k, level=level)


def overlapping(x):
    for _ in range(3):
        x[1:] += x[:-1]
        x[:-1] = x[1:] * 0.5
        x[::-1] = x[:] + 1.0
        x[2:] = x[:-2]
    return x


def overlapping_arguments(a, b):
    for i in range(4):
        a[i:i + 6] = b[:6] * 2.0            # b is a view of a
        b[1:7] += a[i:i + 6]
    return a, b


@pytest.mark.parametrize("level", LEVELS)
def test_overlap_reads_everything_first(level, resumes):
    compiled(overlapping, np.arange(1.0, 13.0), level=level, resumes=resumes)
    base = np.arange(20.0)
    compiled(overlapping_arguments, base, base[3:], level=level, resumes=resumes)


def broadcast_updates(x, y):
    n = x.shape[0]
    for i in range(n):
        x[i:] += y[i:i + 1]                 # one element broadcast over the rest
        x[:i] = y[:1] * y[i:i + 1]
    return x


@pytest.mark.parametrize("level", LEVELS)
def test_length_one_broadcasts(level, resumes):
    compiled(broadcast_updates, np.arange(10.0), np.arange(1.0, 11.0), level=level,
             resumes=resumes)


# -- errors and warnings at the iteration they happen -------------------------------------
def dot_mismatch(x, y, out):
    for i in range(x.shape[0]):
        out[i] = x[:i] @ y[:min(i, 4)]
    return out


def update_mismatch(x, y):
    for i in range(x.shape[0]):
        x[i:i + 3] += y[:3]             # two items left at i = n - 2: NumPy raises
    return x


def index_out_of_range(A, out):
    for i in range(out.shape[0]):
        out[i] = A[i, :i].sum()
    return out


def zero_step(x, out):
    for i in range(out.shape[0]):
        out[i] = x[::3 - i].sum()
    return out


def overflowing(x, out):
    for i in range(out.shape[0]):
        out[i] = x[:i] @ x[:i]
        x[i:] *= 1e80
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_errors_at_the_same_iteration(level):
    rng = np.random.default_rng(9)
    same(dot_mismatch, rng.random(8), rng.random(8), np.zeros(8), level=level)
    same(update_mismatch, rng.random(8), rng.random(8), level=level)
    # A views the first 5 rows of 7 and `out` starts non-zero: a row read one past A's end
    # (an index check `>` for `>=`) reads real values, and a write plain Python never makes
    # shows
    same(index_out_of_range, rng.random((7, 9))[:5], np.full(9, 7.0), level=level)
    same(zero_step, rng.random(9), np.zeros(6), level=level)
    same(overflowing, rng.random(8) + 1.0, np.zeros(8), level=level)


def non_finite_inputs(x, y, out):
    for i in range(out.shape[0]):
        out[i, 0] = x[:i + 1] @ y[:i + 1]
        out[i, 1] = x[i:].sum()
        y[:i] = x[:i] / y[:i]
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_non_finite_values_hand_over(level):
    x = np.array([1.0, np.inf, -np.inf, np.nan, 0.0, 2.0])
    y = np.array([0.0, 2.0, 0.0, 1.0, -0.0, 3.0])
    same(non_finite_inputs, x, y, np.zeros((6, 2)), level=level)


def load_update_load(x, out):
    for i in range(out.shape[0]):
        a = x[i]
        x[:] += 1.0
        out[i] = a + x[i]
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_updates_are_seen_by_later_loads(level, resumes):
    compiled(load_update_load, np.arange(5.0), np.zeros(5), level=level, resumes=resumes)


def stencil_rows(A, B, c):
    for i in range(1, A.shape[0]):
        A[i, 1:-1] += B[i - 1, 2:] * c - A[i - 1, :-2]
        B[i, :] = B[i, :] * c + A[i, :]
    return A, B


def strided_rows(A, B, c):
    for i in range(1, A.shape[0]):
        A[i, ::2] = A[i - 1, ::2] * c - B[i, :1]        # every other element; B broadcast
        B[i, ::-1] = B[i - 1, :] + A[i, :]              # written backwards
        A[i - 1, 1::3] = 2                              # filled, every third element
        B[i - 1, :i] = 3                                # filled, unit stride
    return A, B


def int_sums(x, out):
    for i in range(out.shape[0]):
        out[i] = x[i, :].sum() + 3 * x[i, ::2].sum() + x[:, i].sum()    # rows, every other
    return out                                                         # element, a column


# Views of unit stride run a SIMD copy of the update's loop (slices.py _scratch): lengths
# around the vector widths and the scratch buffer's (SCRATCH), elements of 4 and 8 bytes
@pytest.mark.parametrize("m", [3, 4, 9, 18, 255, 256, 258, 1001])
@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("float32", "float32"),
                                    ("int64", "int64"), ("int32", "int32")])
@pytest.mark.parametrize("level", LEVELS)
def test_contiguous_and_strided_row_updates(m, dtypes, level, resumes):
    rng = np.random.default_rng(m)
    A = (rng.random((5, m)) * 4).astype(dtypes[0])
    B = (rng.random((5, m)) * 4).astype(dtypes[1])
    c = 3 if dtypes[0][0] == "i" else 0.5
    compiled(stencil_rows, A, B, c, level=level, resumes=resumes)
    compiled(strided_rows, A, B, c, level=level, resumes=resumes)
    if dtypes[0][0] == "i":
        big = np.iinfo(dtypes[0]).max // (8 * m)    # no sum overflows: NumPy would warn
        x = rng.integers(-big, big, size=(m, m), dtype=dtypes[0])
        compiled(int_sums, x, np.zeros(m, dtypes[0]), level=level, resumes=resumes)


@pytest.mark.parametrize("m", [9, 300])
@pytest.mark.parametrize("level", LEVELS)
def test_an_overflow_in_a_contiguous_row_hands_over_before_it_is_written(m, level):
    # row 3's update overflows at one middle element: NumPy warns and writes the whole row,
    # inf included; the kernel hands over with the row untouched and Python runs it
    A = np.random.default_rng(1).random((6, m))
    B = np.random.default_rng(2).random((6, m))
    B[2, m // 2] = 1.5e308
    report = same(stencil_rows, A, B, 4.0, level=level)
    assert report.ops_per_graph[0].count("loop_nest") == 1


@pytest.mark.parametrize("shape", [(2, 3), (6, 10), (40, 300)])
@pytest.mark.parametrize("level", LEVELS)
def test_row_recurrence_workload(level, shape, resumes):
    X = np.random.default_rng(11).random(shape)
    compiled(row_recurrence, X, 0.25, level=level, resumes=resumes)
