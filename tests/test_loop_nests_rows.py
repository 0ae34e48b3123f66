"""Row pointers of innermost loops (pijit/loopnest/rows.py): an unchecked access `A[i, k]`
whose leading indices the loop never assigns addresses its row from a pointer set before the
loop; an access whose leading index the loop assigns (a diagonal) computes its address at
each iteration.

Each case runs plain and jitted at O0 and O1 (results, partial writes, one loop_nest node),
and at O1 checks which accesses of the kernel address from a row pointer."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.workloads import cholesky_loops, lu_nopivot
from tests.test_loop_nests import compiled, resumes  # noqa: F401 - resumes: a fixture
from tests.test_loop_nests_checks import kernels  # noqa: F401 - a fixture

LEVELS = ["O0", "O1"]


def index_text(base, c) -> str:
    return (base[1] if base[0] == "var" else "") + (f"{c:+d}" if c else "")


def hoisted(kernel) -> list:
    """(array, leading indices as text: `l_i-1`) of each row pointer the kernel sets."""
    kernel.function()
    return sorted({(arr, tuple(index_text(*f) for f in lead))
                   for heads in kernel.rows.pointers.values() for rows in heads.values()
                   for _, arr, lead in rows})


def spd(n, order="C"):
    m = np.random.default_rng(5).random((n, n))
    return np.asarray(m @ m.T + n * np.eye(n), order=order)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("layout", ["C", "F", "rows_reversed"])
def test_cholesky_rows(level, layout, resumes, kernels):
    """L[i, k] and L[j, k] from two row pointers, in the unit-stride copy (C) and the strided
    one (F order, a view with negative strides)."""
    a = spd(23, "F" if layout == "F" else "C")
    if layout == "rows_reversed":
        a = spd(23)[::-1, ::-1]
    compiled(cholesky_loops, a, resumes=resumes, level=level)
    if level == "O1":
        (k,) = kernels
        assert ("a_L", ("l_i",)) in hoisted(k) and ("a_L", ("l_j",)) in hoisted(k)


@pytest.mark.parametrize("level", LEVELS)
def test_lu_rows(level, resumes, kernels):
    a = np.random.default_rng(2).random((17, 17)) + 17 * np.eye(17)
    compiled(lu_nopivot, a, resumes=resumes, level=level)
    if level == "O1":
        (k,) = kernels
        assert ("a_A", ("l_i",)) in hoisted(k) and ("a_A", ("l_k",)) in hoisted(k)


def diagonals(A, B):
    """Leading indices the innermost loop assigns: each access addresses its own row; so does
    A[r - 1, k] (rows.py hoists a variable's row, not one at a constant from it)."""
    n = A.shape[0]
    s = A[0, 0] * 0
    for r in range(1, 3):
        for k in range(n):
            s += A[k, k] * A[r, k] + A[r - 1, k]
            B[n - 1 - k, k] = s + A[k, n - 1 - k]
    return s


@pytest.mark.parametrize("level", LEVELS)
def test_diagonals_address_each_row(level, resumes, kernels):
    a = np.random.default_rng(7).random((9, 9))
    compiled(diagonals, a, np.zeros((9, 9)), resumes=resumes, level=level)
    if level == "O1":
        (k,) = kernels
        assert hoisted(k) == [("a_A", ("l_r",))]


def planes(V, out):
    """Two leading indices: V[i, j, k] from one pointer per (i, j)."""
    for i in range(V.shape[0]):
        for j in range(V.shape[1]):
            t = 0.0
            for k in range(V.shape[2]):
                t = t * 0.5 + V[i, j, k]
            out[i, j] = t


@pytest.mark.parametrize("level", LEVELS)
def test_three_axes(level, resumes, kernels):
    v = np.random.default_rng(1).random((3, 4, 5))
    compiled(planes, v, np.zeros((3, 4)), resumes=resumes, level=level)
    if level == "O1":
        (k,) = kernels
        assert ("a_V", ("l_i", "l_j")) in hoisted(k)
