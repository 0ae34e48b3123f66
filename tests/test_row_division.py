"""Division by a row value at O1 (render's pj_rdiv): x / s, s one value per row (a row sum, a
row max: softmax, normalising), is the product by 1/s corrected by two FMAs to the quotient
NumPy's division rounds (Markstein), and must equal it bit for bit at every input.

The correction is what makes it exact: x * (1/s) alone is off in the last bit for about a
third of random operands, so random mantissas over many binades test it. A row whose s is
outside pj_rdiv's range (not normal, not finite, 2^60 or more) runs a loop that divides; a
dividend under 2^-960 (float32: 2^-100, so its quotient could be subnormal) or an infinite
one raises invalid and the group runs in NumPy: those cases compare equal too, and show
where they ran; zeros of both signs and NaNs stay in the kernel.
"""
from __future__ import annotations

import logging

import numpy as np
import pytest

from differential import assert_same, count_handbacks
import pijit
from pijit.backends.cfused import reductions, render

RNG = np.random.default_rng(24)
FLOATS = [np.float64, np.float32]


def normalise(x):
    return x / x.sum(axis=1, keepdims=True)


def by_other_rows(x, y):
    return x / y.sum(axis=1, keepdims=True)          # the divisor's row apart from x's


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def scaled_then_divided(x, y):
    return (x * 3.0 - 1.0) / np.sqrt((y * y).sum(axis=1, keepdims=True)) + 0.5


def _source(caplog, fn, *args):
    jitted = pijit.jit(fn, jit_config={"jit_level": "O1"})
    pijit.reset(jitted)
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="pijit.kernels"):
        jitted(*args)
    return "\n".join(r.getMessage() for r in caplog.records if "C source" in r.getMessage())


def _wide(shape, dtype, low=-40, high=40):
    """Random mantissas over many binades, both signs."""
    m = RNG.random(shape) + 0.5
    e = RNG.integers(low, high, shape)
    s = np.where(RNG.random(shape) < 0.5, -1.0, 1.0)
    return (s * np.ldexp(m, e)).astype(dtype)


def _same_bits(fn, *args):
    """Plain and jitted results equal bit for bit, NaN payloads included (assert_same
    compares a NaN's sign and quiet bit only)."""
    with np.errstate(all="ignore"):
        want = fn(*args)
        got = pijit.jit(fn)(*args)
    assert got.dtype == want.dtype
    w, g = want.view(f"u{want.itemsize}"), got.view(f"u{got.itemsize}")
    assert np.array_equal(w, g), np.argwhere(w != g)[:5]


@pytest.mark.parametrize("dtype", FLOATS)
def test_row_quotients_are_numpys(dtype, caplog, monkeypatch):
    """Random operands over 80 binades: the corrected product equals the division, in the
    kernel (its C uses pj_rdiv, nothing handed back)."""
    handed = count_handbacks(monkeypatch)
    x, y = _wide((64, 300), dtype), _wide((64, 300), dtype)
    s = "f" if dtype == np.float32 else "d"
    for fn, args in [(normalise, (x,)), (by_other_rows, (x, y)), (scaled_then_divided, (x, y)),
                     (softmax, (x.clip(-30, 30),))]:
        assert_same(fn, *args, ops=["truediv"])
        assert f"pj_rdiv_{s}(" in _source(caplog, fn, *args), fn.__name__
    assert handed == [], "a row division handed its group to NumPy"


@pytest.mark.parametrize("n", sorted({1, 7, 8, 9, reductions.BLOCK + 1, render.AHEAD_ROWS + 1,
                                      render.SUM_CHUNK + 1, 2 * render.SUM_CHUNK - 1}))
def test_row_quotients_at_split_lengths(n, monkeypatch):
    """Rows one short of and one past the lengths the kernel's loops split at (as
    tests/test_kernel_sizes.py), through the lookahead rows of softmax too."""
    handed = count_handbacks(monkeypatch)
    x = _wide((render.AHEAD_ROWS + 2, n), np.float64)
    assert_same(normalise, x)
    assert_same(softmax, x.clip(-50, 50))
    assert handed == []


@pytest.mark.parametrize("dtype", FLOATS)
def test_zeros_and_nans_stay_in_the_kernel(dtype, monkeypatch):
    """A zero dividend keeps its sign (the remainder is +0, which would make -0 +0), a NaN
    keeps its sign and payload, as the division returns them: without a handback."""
    handed = count_handbacks(monkeypatch)
    bits = np.uint64 if dtype == np.float64 else np.uint32
    width = 64 if dtype == np.float64 else 32
    mant = 52 if dtype == np.float64 else 23
    x = _wide((6, 40), dtype, -5, 5)
    x[0, ::3] = -0.0
    x[1, ::4] = 0.0
    y = np.abs(_wide((6, 40), dtype, -5, 5))
    for k, (sign, payload) in enumerate([(0, 1), (1, 5), (0, 1 << (mant - 2)), (1, 3)]):
        nan = (bits(sign) << bits(width - 1)) | (bits(0x7ff if width == 64 else 0xff)
                                                  << bits(mant)) | bits(1 << (mant - 1)) \
            | bits(payload)
        x[2 + k, k::5] = np.array(nan, bits).view(dtype)
    assert_same(by_other_rows, x, y)
    _same_bits(by_other_rows, x, y)
    x[0, 0] = -0.0
    y[0] = -y[0]                    # -0 / -s is +0
    _same_bits(by_other_rows, x, y)
    assert handed == [], "zeros or NaNs handed back"


@pytest.mark.parametrize("dtype", FLOATS)
def test_small_dividends_over_large_divisors(dtype, monkeypatch):
    """Dividends just above pj_rdiv's smallest (2^-960, float32 2^-100): over row values
    under its largest divisor (2^60, 2^20) their quotients are normal, in pj_rdiv; over
    larger ones, subnormal, which the rows' dividing loop rounds as NumPy does. No
    handback either way."""
    handed = count_handbacks(monkeypatch)
    small = -960 if dtype == np.float64 else -100
    x = _wide((16, 400), dtype, small + 1, small + 20)
    top = 60 if dtype == np.float64 else 20
    for low in (top - 20, top + 30):            # row sums of 400: about 2^(low + 10)
        y = np.abs(_wide((16, 400), dtype, low - 10, low - 8))
        assert_same(by_other_rows, x, y)
    assert handed == [], "small dividends handed back"


@pytest.mark.parametrize("dtype", FLOATS)
def test_near_ties_of_subnormal_quotients(dtype, monkeypatch):
    """Quotients a hair from a midpoint of the subnormal grid, of dividends pj_rdiv would
    take, over row values past its largest divisor (where the theorem's no-underflow
    premise fails): the rows' dividing loop rounds them as NumPy does, in the kernel."""
    handed = count_handbacks(monkeypatch)
    info = np.finfo(dtype)
    k = RNG.integers(64, 1000, (8, 200)) + 0.5
    b = np.ldexp(RNG.random((8, 1)) + 1.0, 110 if dtype == np.float64 else 45)
    x = (k * float(info.smallest_subnormal) * b).astype(dtype)   # a/b = (k + 1/2) ulps
    y = np.zeros((8, 200), dtype)
    y[:, :1] = b
    assert_same(by_other_rows, x, y)
    assert handed == [], "near ties handed back"


@pytest.mark.parametrize("dtype", FLOATS)
def test_subnormal_quotients_go_to_numpy(dtype, monkeypatch):
    """Subnormal dividends over softmax-like sums: the corrected product would be off in the
    last bit for about one in 600 (its remainder is not exact there), so the kernel hands
    such a group to NumPy."""
    handed = count_handbacks(monkeypatch)
    tiny = np.finfo(dtype).smallest_normal
    x = (RNG.random((40, 500)) * tiny).astype(dtype)       # subnormals
    x[::2] = (RNG.random((20, 500)) * 64 * tiny).astype(dtype)      # just above
    y = (RNG.random((40, 500)) * 4).astype(dtype)
    assert_same(by_other_rows, x, y)
    assert handed, "subnormal quotients computed in the kernel"
    handed.clear()
    with np.errstate(under="raise"):
        assert_same(by_other_rows, x, y)         # NumPy's FloatingPointError, from its line


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("divisor", ["zero", "negative_zero", "inf", "nan", "subnormal",
                                     "huge", "largest", "just_under_largest",
                                     "smallest_normal"])
def test_divisors_at_the_ends_of_the_range(dtype, divisor, monkeypatch):
    """A row value outside pj_rdiv's range (not normal, not finite, 2^60 or more): its row
    runs the loop that divides, in the kernel, unless NumPy's division raises a flag there
    too (x / 0, x / subnormal overflowing: the group runs in NumPy, with its warnings); one
    inside, however near its ends, runs pj_rdiv. The other rows are the same either way."""
    handed = count_handbacks(monkeypatch)
    info = np.finfo(dtype)
    top = np.ldexp(dtype(1), info.maxexp - 2)       # 1/top is the smallest normal
    most = np.ldexp(dtype(1), 60 if dtype == np.float64 else 20)    # pj_rdiv's largest b
    value, flagged, scale = {
        "zero": (0.0, True, 1), "negative_zero": (-0.0, True, 1), "inf": (np.inf, False, 1),
        "nan": (np.nan, False, 1), "subnormal": (info.smallest_subnormal * 3, True, 1),
        "huge": (top, False, 1), "largest": (most, False, 1),
        "just_under_largest": (np.nextafter(most, dtype(0)), False, 1),
        # quotients of x in [2^-4, 6) kept from overflow
        "smallest_normal": (info.smallest_normal, False, 2.0 ** -4)}[divisor]
    x, y = _wide((5, 30), dtype, -3, 3), _wide((5, 30), dtype, -3, 3)
    x[2] *= dtype(scale)
    y[2] = 0
    y[2, 0] = value
    x[2, 1] = 0.0
    x[2, 2] = np.nan
    assert_same(by_other_rows, x, y)
    _same_bits(by_other_rows, x, y)
    assert bool(handed) == flagged, f"a row divided by {divisor}: handed back {handed}"


@pytest.mark.parametrize("dtype", FLOATS)
def test_infinite_and_overflowing_dividends(dtype, monkeypatch):
    """An infinite dividend (inf - inf in the remainder: invalid) and quotients that overflow
    go to NumPy, with its overflow warning."""
    handed = count_handbacks(monkeypatch)
    info = np.finfo(dtype)
    x, y = _wide((4, 30), dtype, -3, 3), np.abs(_wide((4, 30), dtype, -3, 3))
    x[1, 3] = -np.inf
    assert_same(by_other_rows, x, y)
    x[1, 3] = info.max
    y[1] = 0.001
    assert_same(by_other_rows, x, y)
    assert len(handed) >= 2
