"""Fused reductions over arrays made of edge values only: NaN with zeros or with non-zeros,
signed zeros in either order, infinities of both signs, a NaN at the start, inside a later
block, at the end.

The fused matrix (test_fused_matrix) draws its reduction data from random values with edge
values mixed in, so an array whose answer turns on NaN alone (np.all of NaN and ones is
True: NaN is not zero) or on a signed zero alone was never met: a kernel that took NaN for
false passed it. Each pattern runs at lengths inside one block, across blocks and past a
summation chunk, compared bit for bit with NumPy, and the reduction must be captured.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.differential import assert_same, count_handbacks

NAN, INF = np.nan, np.inf

PATTERNS = {
    "nan_ones": [NAN, 1.0],
    "nan_zeros": [NAN, 0.0],
    "ones_then_nan": [1.0, 1.0, 1.0, NAN],
    "zeros": [0.0],
    "negative_zeros": [-0.0],
    "zero_then_negative_zero": [0.0, -0.0],
    "negative_zero_then_zero": [-0.0, 0.0],
    "infinities": [INF, -INF],
    "negative_infinity_and_ones": [-INF, 1.0, 1.0],
    "negative_nan": [-NAN, 2.0],
}
LENGTHS = [1, 7, 300, 5000]

REDUCTIONS = {
    "all": lambda x: np.all(x * 1.0),
    "any": lambda x: np.any(x * 1.0),
    "max": lambda x: np.max(x * 1.0),
    "min": lambda x: np.min(x * 1.0),
    "argmax": lambda x: np.argmax(x * 1.0),
    "argmin": lambda x: np.argmin(x * 1.0),
    "sum": lambda x: np.sum(x * 1.0),
    "mean": lambda x: np.mean(x * 1.0),
    "row_all": lambda x: np.all((x * 1.0).reshape(-1, 1) + x[:1], axis=1),
}


def data(pattern, n, dtype):
    a = np.resize(np.array(PATTERNS[pattern], dtype=np.float64), n).astype(dtype)
    return a


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("pattern", list(PATTERNS))
@pytest.mark.parametrize("op", list(REDUCTIONS))
def test_reduction_of_edge_values_is_numpys(op, pattern, dtype):
    fn = REDUCTIONS[op]
    for n in LENGTHS:
        x = data(pattern, n, dtype)
        with np.errstate(all="ignore"):
            assert_same(fn, x, ops=[op.removeprefix("row_")], graphs=1, breaks=0)


def test_a_nan_deep_in_a_later_block_is_found():
    """argmax/argmin return the first NaN's index, max/min NaN, wherever the NaN sits."""
    for pos in (0, 127, 128, 2047, 2048, 4999):
        x = np.ones(5000)
        x[pos] = NAN
        for op in ("argmax", "argmin", "max", "min", "any", "all"):
            assert_same(REDUCTIONS[op], x, ops=[op])


def _int_max_min(x):
    return (x * 1).max(), (x * 1).min(), (x * 1).max(axis=-1), (x * 1).min(axis=-1)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_integer_max_and_min_start_from_the_dtype_s_bounds(dtype, monkeypatch):
    """An integer max (min) starts from the dtype's smallest (largest) value, not from 0:
    rows of only negative values, and of values near the top of the dtype, in a kernel."""
    handed = count_handbacks(monkeypatch)
    info = np.iinfo(dtype)
    for n in (1, 7, 300):
        low = (info.min + np.arange(2 * n) % 50).astype(dtype).reshape(2, n)
        high = (info.max - np.arange(2 * n) % 50).astype(dtype).reshape(2, n)
        assert_same(_int_max_min, -np.abs(low + 1) - 1, ops=["max", "min"])
        assert_same(_int_max_min, high, ops=["max", "min"])
    assert not handed, "integer max/min run in the kernel"


def _at_axis_minus_ndim(x):
    return x.sum(axis=-2), np.cumsum(x, axis=-2), x.max(axis=-x.ndim, keepdims=True)


def test_axis_minus_ndim_is_the_first_axis():
    """axis=-ndim is axis 0 (in range), not an AxisError that breaks the graph."""
    assert_same(_at_axis_minus_ndim, np.arange(6.0).reshape(2, 3), ops=["sum", "cumsum", "max"])



def _whole_then_sum(a):
    t = (a * 2).sum(keepdims=True)
    return t.sum(), t


def _whole_then_prod(a):
    t = (a * 2).max(keepdims=True)
    return t.prod(), t


def _columns_then_sum(a):
    t = (a * 2).max(axis=0, keepdims=True)
    return np.sum(t), t


def _columns_then_max(a):
    t = (a * 2).sum(axis=0, keepdims=True)
    return t.max(), t


def _rows_then_prod(a):
    t = (a * 2).prod(axis=-1, keepdims=True)
    return t.prod(), t


@pytest.mark.parametrize("dtype", [np.int64, np.float64, np.bool_])
@pytest.mark.parametrize("fn", [_whole_then_sum, _whole_then_prod, _columns_then_sum,
                                _columns_then_max, _rows_then_prod])
def test_a_reduction_of_a_reductions_result_runs_after_it(fn, dtype):
    """`(a * 2).sum(keepdims=True).prod()`: the second reduction reads a value that exists
    only once the first one's loop is done, so it cannot be reduced in that loop (the kernel
    named a variable it had not computed yet, and the graph went to NumPy after a failed gcc
    run: the no_internal_errors fixture fails on that). Both stay captured, NumPy's bits."""
    x = (np.arange(12).reshape(3, 4) % 5).astype(dtype)
    assert_same(fn, x, ops=[fn.__name__.rsplit("_", 1)[1]])


def _row_product_then_sum(a, r, c):
    t = a * r
    return t - t.sum()


def _column_difference_then_mean(a, r, c):
    t = a - c
    return t, t.mean(keepdims=True)


def _sum_then_row_product(a, r, c):
    t = a * 2
    return t.sum(), t * r


def _sum_beside_a_broadcasting_group(a, r, c):
    t = a * 2
    u = a - c
    return t.sum(), t + u


@pytest.mark.parametrize("level", ["O1", "O2"])
@pytest.mark.parametrize("fn", [_row_product_then_sum, _column_difference_then_mean,
                                _sum_then_row_product, _sum_beside_a_broadcasting_group])
def test_an_exact_whole_sum_never_shares_a_kernel_with_a_broadcast_operand(fn, level,
                                                                            monkeypatch):
    """O1 sums a float array over all axes in NumPy's pairwise order only in flat chunks of
    dense operands (render.tree_chunks); an operand broadcast along the rows (a (1, n) row,
    an (m, 1) column) makes the kernel run row by row, and it handed every call to NumPy.
    Such a sum and such an operand go to kernels of their own, both run (found by
    tests/fusion_grammar.py's enumeration: `t = a * r; t - t.sum()`)."""
    handed = count_handbacks(monkeypatch)
    a = np.arange(12.0).reshape(3, 4) * 0.75 - 2.0
    r, c = np.linspace(0.5, 2.0, 4)[None, :], np.linspace(-1.0, 3.0, 3)[:, None]
    assert_same(fn, a, r, c, ops=["mean" if "mean" in fn.__name__ else "sum"],
                jit_kwargs={"jit_config": {"jit_level": level}})
    assert handed == []


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _logsumexp(x):
    m = x.max(axis=1, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))[:, 0]


def _row_max_min(x):
    return x.max(axis=1), x.min(axis=-1, keepdims=True)


def _zero_rows(n, dtype):
    """Rows whose max (min) is a zero of one sign only: +0.0 or -0.0 among negative (positive)
    values, rows of -0.0 or +0.0 alone; the zero first, in the middle, last."""
    x = -np.abs(np.random.default_rng(n).standard_normal((8, n))) - 0.5
    x[0, n // 2] = 0.0
    x[1, n // 2] = -0.0
    x[2, :] = -0.0
    x[3, :] = 0.0
    x[4, 0] = x[4, n - 1] = -0.0
    x[5, n - 1] = 0.0
    x[6:] = -x[6:]
    x[6, n // 3] = -0.0
    x[7, 0] = 0.0
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fn", [_softmax, _logsumexp, _row_max_min])
def test_a_row_max_of_one_signed_zero_stays_in_the_kernel(fn, dtype, monkeypatch):
    """A row max (min) of zero is one of the row's zeros: with zeros of one sign in the row
    (a softmax of non-positive values, of ReLU outputs) the kernel knows which, so the row
    stays in the kernel (it went to NumPy, the whole group with it); zeros of both signs
    still go to NumPy, whose lanes decide. Bits compared; odd lengths, inside one vector,
    across blocks, strided rows."""
    handed = count_handbacks(monkeypatch)
    for n in (1, 3, 37, 300, 2049):
        x = _zero_rows(n, dtype)
        assert_same(fn, x, ops=["max"] if fn is not _row_max_min else ["max", "min"])
        assert_same(fn, np.repeat(x, 2, axis=1)[:, ::2], ops=["max"])
        assert not handed, (n, "a zero of one sign handed the row to NumPy")
    mixed = _zero_rows(37, dtype)
    mixed[0, 3] = mixed[6, 5] = -0.0
    mixed[6, 6] = 0.0
    assert_same(fn, mixed, ops=["max"])
    assert handed, "zeros of both signs stayed in the kernel"
