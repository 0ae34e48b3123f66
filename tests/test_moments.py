"""np.var and np.std recorded as the calls NumPy's `_var` makes (pijit/capture/moments.py):
NumPy's bits, every warning, and fused kernels (no opaque `var`/`std` op, no hand-back to
NumPy); where those calls would not be `_var`'s, the opaque call as before."""
import numpy as np
import pytest

import pijit
from tests.differential import assert_same, count_handbacks

LEVELS = ["O0", "O1"]
DECOMPOSED = ["mean", "subtract", "square"]


@pytest.fixture
def handbacks(monkeypatch):
    return count_handbacks(monkeypatch)


def _ops(fn, *args):
    return [op for ops in pijit.explain(fn, *args).ops_per_graph for op in ops]


def whole(x):
    return np.var(x), np.std(x)


def rows(x):
    return x.var(axis=-1), x.std(-1, keepdims=True)


def columns(x):
    return np.var(x, 0), np.std(x, axis=0, ddof=1)


def both_axes(x):
    return x.var(axis=(0, 1), keepdims=True), np.std(x, axis=(1, 0), ddof=2)


def standardise(x):
    return (x - x.mean(axis=1, keepdims=True)) / x.std(axis=1, keepdims=True)


def negative_ddof(x):
    return np.var(x, axis=0), np.std(x, ddof=-1), np.var(x, axis=-1, ddof=-2)


def _values(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 3.0 + 1e3).astype(dtype)


def _layouts(x):
    """C order, Fortran order, every other row, and both axes reversed."""
    return [x, np.asfortranarray(x), x[::2], x[::-1, ::-1]]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fn", [whole, rows, columns, both_axes, standardise, negative_ddof])
def test_var_and_std_give_numpys_bits(fn, dtype, level):
    """Every axis form (the whole and row forms in every layout), at float32 too: the mean, deviations, squares, sum and
    quotient NumPy's own `_var` computes (float32 with a ddof stays the opaque call; a
    negative ddof divides by the count plus its magnitude, not by the count as a mean)."""
    x = _values((6, 300), dtype)
    for x in (_layouts(x) if fn in (whole, rows) else [x]):
        opaque = dtype == np.float32 and fn in (columns, both_axes, negative_ddof)
        report = assert_same(fn, x, jit_kwargs={"jit_config": {"jit_level": level}},
                             ops=DECOMPOSED)
        flat = [op for ops in report.ops_per_graph for op in ops]
        assert (("var" in flat or "std" in flat) == opaque), flat


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_kernel_computes_them_at_every_pairwise_boundary(dtype, handbacks):
    """Sizes past the boundaries of NumPy's pairwise sum (8, 128, the split above it; the
    sums' own tests, test_pairwise_order.py, take every boundary) in one row and in rows,
    run by fused kernels at O1 (none handed back to NumPy)."""
    for n in (1, 9, 129, 1031):
        x = _values(n, dtype, seed=n)
        assert_same(whole, x, ops=DECOMPOSED)
        assert_same(rows, np.stack([x, -x, x * 0.5]), ops=DECOMPOSED)
    assert handbacks == []


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_signed_zeros_nan_inf_and_overflow(dtype):
    """-0.0 everywhere (var +0.0), a NaN, an inf (nan, with NumPy's invalid-value warning), and
    squares that overflow (inf, with NumPy's overflow warning): the same values and
    warnings."""
    big = np.finfo(dtype).max / 2
    cases = [np.full((3, 40), -0.0, dtype), _values((3, 40), dtype),
             np.array([[1.0, big, -big, 2.0]] * 2, dtype)]
    cases[1][1, 7] = np.nan
    cases[1][2, 3] = np.inf
    for x in cases:
        assert_same(whole, x, ops=DECOMPOSED)
        assert_same(rows, x, ops=DECOMPOSED)


def _var_ddof(x, ddof):
    return np.var(x, ddof=ddof)


def _var_dtype(x):
    return np.var(x, dtype=np.float64)


def _var_positional_dtype(x):
    return np.var(x, 0, np.float32)


def _var_axis_twice(x):
    return np.var(x, 0, axis=1)


@pytest.mark.parametrize("case", [
    pytest.param((_var_ddof, np.ones(3), 3), id="ddof-equal-to-the-count"),
    pytest.param((_var_ddof, np.ones(3), 5), id="ddof-past-the-count"),
    pytest.param((_var_ddof, np.ones(0), 0), id="empty"),
    pytest.param((_var_ddof, np.ones(4, np.float32), 1), id="float32-with-a-ddof"),
    pytest.param((_var_ddof, np.arange(6), 0), id="int"),
    pytest.param((_var_dtype, np.ones(5, np.float32)), id="dtype-given"),
    # float16: _var sums in float16, where np.mean sums float16 in float32 (these differ)
    pytest.param((_var_ddof, _values(40, np.float16, seed=4), 0),
                 id="float16"),
    pytest.param((_var_ddof, _values(7, np.float64), 0.5), id="float-ddof"),
    pytest.param((_var_positional_dtype, _values((3, 5), np.float64)), id="positional-dtype"),
])
def test_what_is_not_var_s_calls_stays_the_opaque_call(case):
    """No decomposition where `_var` would warn of its count (Degrees of freedom <= 0, Mean
    of empty slice) or take other steps (an int array's float64 sum, a dtype, float32's
    division in float64): the one opaque call, with NumPy's values and warnings."""
    fn, *args = case
    report = assert_same(fn, *args, ops=["var"])
    flat = [op for ops in report.ops_per_graph for op in ops]
    assert "subtract" not in flat, flat


def test_a_call_numpy_rejects_is_not_decomposed():
    """np.var(x, 0, axis=1) raises TypeError in NumPy (axis given twice): no graph computes
    a value for it (the call breaks the graph and NumPy raises)."""
    assert_same(_var_axis_twice, _values((3, 5), np.float64), graphs=0, breaks=1)


def test_a_dynamic_dimension_stays_the_opaque_call():
    """The count of reduced items must be known at capture (the check of ddof against it
    is NumPy's warning); a dynamic dim keeps the opaque call."""
    spec = pijit.ArraySpec(shape=(None,), dtype="float64")
    fn = pijit.jit(whole, input_signature=(spec,))
    for n in (5, 9):
        x = _values(n, np.float64)
        assert [np.asarray(v).tobytes() for v in fn(x)] == \
            [np.asarray(v).tobytes() for v in whole(x)]
    assert "var" in _ops(fn, x) and "subtract" not in _ops(fn, x)
