"""The fused C backend against plain NumPy (differential), plus its disk cache.

Comparisons (tests/differential.py): O1 bit for bit, as documented; O2 within the bound
tests/o2_spec.py derives for the function (carry: each op within its own O2 bound, the
errors carried through the function to first order). Both with the same structure (dtypes,
shapes, layouts) and warnings, and with every call run by the kernel unless a test says it
hands some call back to NumPy.
"""
from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import o2_spec
import pijit
from differential import (assert_equal_values, assert_same, count_handbacks, level_tol,
                          run_observed, run_plain)
from pijit import cache
from pijit.backends import cfused
from pijit.backends.cfused import build, render, toolchain
from pijit.graph import fuse


def check_level(got, fn, args, level, where="result"):
    """A jitted fn(*args)'s result `got` against plain fn(*args), by level_tol."""
    tol, scale = level_tol(fn, args, level)
    assert_equal_values(got, fn(*args), where, tol, scale)


def run(fn, *args, fused=True, level="O1", groups=None, min_groups=None, handed_back=False):
    """fn jitted vs plain, twice: same results (level_tol), printed output and warnings, and
    the calls served by the compiled entry.

    fused: whether a kernel was built; groups: how many fused groups it has (when given);
    min_groups: at least that many (functions made by `together` share some groups, as
    common subexpressions across them merge). handed_back: False, every call ran in its
    kernels (no group handed to NumPy); True, some group was handed back; None, either.
    """
    jitted = pijit.jit(fn, jit_config={"jit_level": level})
    pijit.reset(jitted)         # compile anew: the log below must see this compile
    logger = logging.getLogger("pijit.kernels")
    old = logger.level
    logger.setLevel(logging.INFO)
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    handed, fallback = [], cfused.group_fallback

    def counting(*spec, **kw):
        fb = fallback(*spec, **kw)

        def counted(*a):
            handed.append(fb)
            return fb(*a)
        return counted
    cfused.group_fallback = counting
    tol, scale = level_tol(fn, args, level)
    try:
        want = run_plain(fn, args, {})
        assert want.exc is None, want.exc
        for call in range(2):
            got = run_observed(jitted, [a.copy(order="K") if isinstance(a, np.ndarray)
                                        and a.flags.owndata else a for a in args], {})
            assert got.exc is None, f"call {call + 1}: {got.exc!r}"
            assert got.warnings == want.warnings, (got.warnings, want.warnings)
            assert_equal_values(got.result, want.result, f"call {call + 1}", tol, scale)
    finally:
        cfused.group_fallback = fallback
        logger.removeHandler(handler)
        logger.setLevel(old)
    built = [r.getMessage() for r in records if "fused group" in r.getMessage()]
    assert bool(built) == fused, [r.getMessage() for r in records]
    assert not [r for r in records if "build failed" in r.getMessage()], [
        r.getMessage() for r in records]
    assert pijit.stats(jitted)["cache_hits"] >= 1, pijit.stats(jitted)
    if fused and handed_back is not None:
        assert bool(handed) == handed_back, \
            f"{len(handed)} call(s) of a kernel handed the group to NumPy"
    counts = [int(m.split(": ")[1].split()[0]) for m in built]
    if groups is not None:
        assert counts == [groups], built
    if min_groups is not None:
        assert len(counts) == 1 and counts[0] >= min_groups, built
    return got.result


def together(fns, nargs: int):
    """One function returning every fn's result: one graph, one kernel module (one gcc run)
    for all of them."""
    params = ", ".join(f"a{i}" for i in range(nargs))
    calls = ", ".join(f"fns[{k}]({params})" for k in range(len(fns)))
    namespace = {"fns": list(fns)}
    exec(f"def together({params}):\n    return ({calls},)\n", namespace)
    return namespace["together"]


rng = np.random.default_rng(0)
A = rng.standard_normal((7, 9))
B = rng.standard_normal((7, 9))
A32, B32 = A.astype(np.float32), B.astype(np.float32)


def add_computed_int(a, n):
    return a + n ** 5 // 7


def test_a_python_int_past_int64_goes_to_numpy(monkeypatch):
    """A Python int computed in the graph (n ** 5 // 7 of a dynamic n: Python does it) is an
    int64 operand of the kernel: one past INT64_MAX is not a uint64's bits (that made
    a + 10**20 // 7 negative) but goes to NumPy, which adds it as a float."""
    handed = count_handbacks(monkeypatch)
    dynamic = {"jit_config": {"specialize_scalar": False}}
    assert_same(add_computed_int, A, 10 ** 4, jit_kwargs=dynamic, ops=["add"])
    assert handed, "the kernel took 10**20 // 7"
    handed.clear()
    assert_same(add_computed_int, A, 10, jit_kwargs=dynamic, ops=["add"])
    assert not handed, "the kernel handed an int64 operand to NumPy"


def test_chain_f64():
    run(lambda a, b: a * b + a - b / 3.0 * (-a), A, B)
    run(lambda a, b: a * b + a - b / 3.0 * (-a), A, B, level="O2")


def test_o1_computes_transcendentals_by_numpys_loops():
    # O1 calls NumPy's own loop of exp/tanh/log/sin/cos/power on each row: bit for bit, in
    # one kernel with the exact ops around it (run() compares with rtol 0)
    run(lambda a: np.exp(a), A, groups=1)
    run(lambda a, b: np.tanh(a * b + 1.0) * 0.5 + 0.5, A32, B32, groups=1)
    run(lambda a: np.exp(np.log(np.abs(a) + 1.0) * 0.5) - np.sin(a) * np.cos(a), A, groups=1)
    run(lambda a: np.abs(a) ** 1.7 + a ** 3.0, A[:, ::2], groups=1)
    run(lambda a: np.exp(a), A[0, :1].copy(), groups=1)
    x = np.array([-800.0, 1.0, 800.0, np.nan, -np.inf])      # under/overflow, NaN, -inf
    for mode in ("ignore", "warn", "raise"):
        with np.errstate(all=mode), warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                got = pijit.jit(lambda a: np.exp(a) * 2.0)(x)
            except FloatingPointError as e:
                got = e
            mine = [str(w.message) for w in seen]
            del seen[:]
            try:
                want = np.exp(x) * 2.0
            except FloatingPointError as e:
                want = e
            theirs = [str(w.message) for w in seen]
        assert mine == theirs and type(got) is type(want), (mode, mine, theirs)
        if isinstance(want, np.ndarray):
            assert_equal_values(got, want)
    # underflow (ignored by NumPy's default errstate) is reported as np.errstate says
    tiny = np.array([-1e-300, 1.0, 1e-300])
    for mode in ("ignore", "warn", "raise"):
        with np.errstate(under=mode), warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                pijit.jit(lambda a: a * 1e-300 + 0.0)(tiny)
                outcome = [str(w.message) for w in seen]
            except FloatingPointError as e:
                outcome = str(e)
        assert outcome == {"ignore": [], "warn": ["underflow encountered in multiply"],
                           "raise": "underflow encountered in multiply"}[mode]
    # an int operand (exp in float64 of a cast) and whole-array float sums stay in NumPy
    run(lambda a: np.exp(a), np.arange(12).reshape(3, 4), fused=False)
    run(lambda a: (a * 2.0).sum(), A, groups=1)


def test_o1_softmax_and_layernorm_are_one_exact_kernel():
    # row sums by a copy of NumPy's pairwise summation, exp by NumPy's loop, max with a zero
    # result handed back: one kernel, bit for bit (run(): rtol 0)
    x = rng.standard_normal((33, 700))
    for v in (x, x.astype(np.float32), x[::2, 1::3], x.reshape(3, 11, 700), x[:, :5]):
        run(_softmax, v, groups=1)
    for v in (x, x.astype(np.float32), x[:, :129]):
        g, b = rng.standard_normal(v.shape[-1]), rng.standard_normal(v.shape[-1])
        run(_layernorm, v, g.astype(v.dtype), b.astype(v.dtype), groups=1)
    run(_softmax, x.T.copy().T, groups=1, handed_back=True)    # F order: NumPy's
    zero = -np.abs(x)
    zero[:, 3] = 0.0
    zero[::2, 5] = -0.0
    run(lambda a: (a.max(axis=-1), a.min(axis=-1), a.max()), zero, groups=2, handed_back=True)


def test_o2_contracts_multiply_adds():
    # a*b + c rounds once under FMA: O2 differs from NumPy in the last bit somewhere
    x = rng.standard_normal(10_000)
    y = rng.standard_normal(10_000)
    f = pijit.jit(lambda a, b: a * b - 1.0, jit_config={"jit_level": "O2"})
    got, want = f(x, y), x * y - 1.0
    scale = np.abs(x * y) + 1.0
    assert_equal_values(got, want, tol=o2_spec.FMA, scale=scale)
    assert not np.array_equal(got, want)
    assert_equal_values(pijit.jit(lambda a, b: a * b - 1.0)(x, y), want)      # O1: bits


def test_chain_with_exp():
    run(lambda a, b, c: a * b + c * a - np.exp(c) * 0.5, A, B, A + B, level="O2")


def test_float32_stays_float32():
    got = run(lambda a, b: np.tanh(a * b + 1.0) * 0.5 + 0.5, A32, B32, level="O2")
    assert got.dtype == np.float32


def test_mixed_precision_promotes():
    run(lambda a, b: a * 2.0 + b, A32, B)
    run(lambda a: a * np.float64(2.0) + 1.0, A32)


def test_broadcast_row_column_scalar():
    run(lambda a, r, c: a * r + c - 1.0, A, A[0].copy(), A[:, :1].copy())
    run(lambda a, z: a * z + z, A, np.array(3.0))
    run(lambda r, c: r * c + 1.0, A[0].copy(), A[:, :1].copy())


def test_zero_dim_gives_scalar():
    run(lambda a, b: a * b + 1.0, np.array(2.0), np.array(3.0))


def test_transposed_and_strided():
    run(lambda a, b: a * b + 1.0, A.T, B.T)
    run(lambda a, b: a * b - a, A[::2, ::3], B[::2, 1::3])
    # mixed memory orders (F and C): NumPy decides the result's (the kernel hands it back)
    run(lambda a, b: np.exp(a.T) + b, A, B.T.copy(), level="O2", handed_back=True)


def test_outputs_take_the_inputs_memory_order():
    """Like NumPy's ufuncs: a transposed input gives a transposed result, so what follows
    the kernel (here a float sum, which stays in NumPy at O1) sees the same layout."""
    x, y = rng.standard_normal((50, 70)), rng.standard_normal((50, 70))
    f = lambda a, b: a * b + 1.0        # noqa: E731
    for a, b, back in [(x.T, y.T, False), (x[::-1], y[::-1], False),
                       (x.T[::2], y.T[::2], False), (np.asfortranarray(x), 2.0, False),
                       (x.T, y[0][:, None].copy(), True),  # a row input along the inner axis
                       (x.T, y.T.copy(), True)]:     # mixed orders: NumPy decides (fallback)
        got = run(f, a, b, handed_back=back)
        assert got.strides == f(a, b).strides
    # bit-identical: the sum is NumPy's (x.T is not in C order: handed back)
    run(lambda a: (a + 1).sum(), x.T, handed_back=True)



def test_empty():
    e = np.zeros((0, 4))
    run(lambda a, b: a * b + 1.0, e, e)
    run(lambda a, b: (a * b).sum(axis=-1), e, e, level="O2")
    run(lambda a, b: (a * b + 1.0).sum(), e, e, level="O2")


def test_nan_inf_in_max_min():
    x = np.array([1.0, np.nan, -np.inf, np.inf, 0.0, -0.0, 2.0])
    y = np.array([np.nan, 1.0, 3.0, -np.inf, -0.0, 0.0, np.nan])
    # (C's compares raise the invalid flag on NaN: the kernel hands such calls to NumPy)
    run(lambda a, b: np.maximum(a, b) + np.minimum(a, b) * 1.0, x, y, handed_back=True)
    run(lambda a, b: np.clip(a * 1.0, -1.0, b + 0.0), x, np.full(7, 1.5))
    run(lambda a: (a * 1.0).max(), x, level="O2", handed_back=None)
    run(lambda a: (a + 0.0).min(axis=-1, keepdims=True), np.stack([x, np.arange(7.0)]),
        level="O2", handed_back=None)
    run(lambda a: np.exp(a) + np.log(np.abs(a)),
        np.array([np.nan, np.inf, -np.inf, 0.0, 1e300, -745.2]), level="O2", handed_back=None)


def test_where_and_comparisons():
    run(lambda a, b: np.where(a > b, a * 2.0, b - 1.0), A, B)
    run(lambda a: np.where(a >= 0.0, a, 0.0) + (a < 0.5) * 1.0, A)


def test_pow_and_square():
    p = np.abs(A) + 0.1
    run(lambda a: a ** 2 + np.square(a) + a ** 0.5 + a ** -1 + a ** 3.0, p)
    run(lambda a: (a - 1.0) ** 2, A32)


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_negation_wraps_at_the_smallest_int(dtype):
    """-x of the smallest int wraps to itself in NumPy; in C it is an overflow, which gcc
    may assume away (folding -x > 0 into x < 0) unless computed as unsigned."""
    info = np.iinfo(dtype)
    a = np.array([info.min, -1, 0, 1, info.max, info.min], dtype)
    run(lambda a: ((-a) > 0, (-a) < 0, -a), a)


def test_bool_arrays_against_python_numbers():
    """NumPy compares a bool array with a Python int or float as numbers (True == 2 is
    False, True < 2 True), not with the number cast to bool: such comparisons go to NumPy."""
    b = np.array([[True, False, True], [False, False, True]])
    run(lambda b: (b == 2, b < 0.5, b < 2, b > -1), b, fused=False)


def test_astype():
    run(lambda a: (a * 2.0).astype(np.float32) + np.float32(1.0), A)
    run(lambda a: (a * 2.0).astype(np.float64) + 1.0, A32)


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (None, True), (-1, False),
                                           (-1, True), (1, True)])
def test_reductions(op, axis, keepdims):
    f64 = lambda a, b: getattr(a * b + 1.0, op)(axis=axis, keepdims=keepdims)  # noqa: E731
    run(f64, A, B, level="O2")
    run(f64, A32, B32, level="O2")
    run(_WHOLE[op], rng.standard_normal(100_003), level="O2")


_WHOLE = {"sum": lambda a: np.sum(a * a), "mean": lambda a: np.mean(a * a),
          "max": lambda a: np.max(a * a), "min": lambda a: np.min(a - 1.0)}


def test_sum_accuracy_at_least_numpy():
    x = (rng.random(1_000_000) + 1e6).astype(np.float32)
    exact = x.astype(np.float64).sum()
    got = pijit.jit(lambda a: (a * 1.0).sum(), jit_config={"jit_level": "O2"})(x)
    assert abs(float(got) - exact) <= abs(float(x.sum()) - exact) + 1e-3 * abs(exact) * 1e-6


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _layernorm(x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * g + b


def test_softmax_and_layernorm_are_one_kernel():
    level = "O2"
    x = rng.standard_normal((33, 700))
    for v in (x, x.T.copy().T, x[::2, 1::3], x[0].copy(), x.reshape(3, 11, 700)):
        # (F order: NumPy's, whose results are in F order too)
        back = not v.flags.c_contiguous and v.flags.f_contiguous
        run(_softmax, v, level=level, groups=1, handed_back=back)
        run(_softmax, v.astype(np.float32), level=level, groups=1, handed_back=back)
    for v in (x, x.T.copy().T, x[::2, 1::3], x[0].copy()):
        g, b = rng.standard_normal(v.shape[-1]), rng.standard_normal(v.shape[-1])
        back = not v.flags.c_contiguous and v.flags.f_contiguous
        run(_layernorm, v, g, b, level=level, groups=1, handed_back=back)
        run(_layernorm, v.astype(np.float32), g.astype(np.float32), b.astype(np.float32),
            level=level, groups=1, handed_back=back)


def _moments(x):
    mean = x.mean(axis=0)
    c = x - mean
    var = (c * c).mean(axis=0)
    return mean, var, (c ** 3).mean(axis=0) / var ** 1.5, c.max(axis=0), c.min(axis=0)


def test_o1_column_reductions_go_row_after_row_like_numpy():
    # NumPy sums over outer axes row after row in the dtype (C-order operands): so does O1
    x = rng.standard_normal((500, 37))
    for v in (x, x.astype(np.float32), x[::2, 1::3], x.reshape(10, 50, 37)):
        run(_moments, v, groups=3)
    zeros = np.array([[-0.0, 0.0, np.nan], [0.0, -0.0, 1.0], [-0.0, -0.0, 2.0]])
    run(lambda a: ((a * 1.0).sum(axis=0), (a * 1.0).max(axis=0), (a * 1.0).min(axis=0)), zeros,
        groups=1)
    # other orders: the kernel hands the group to NumPy (same values; still one group)
    run(_moments, x.T.copy().T, groups=3, handed_back=True)


def test_division_by_row_values():
    # O2 multiplies by the row value's reciprocal (within 1.5 ulp); O1 divides (bit for bit)
    i = rng.integers(1, 50, (30, 40))
    run(lambda a: a / a.sum(axis=1, keepdims=True), i, groups=1)
    x = rng.random((30, 400)) + 0.5
    for v in (x, x.astype(np.float32)):
        got = run(lambda a: a / a.sum(axis=1, keepdims=True), v,
                  level="O2", groups=1)
        assert got.dtype == v.dtype


def test_row_values_reshaped_by_none_join_their_rows():
    def softmax_none(x):            # no keepdims: the row values are read as m[:, None]
        m = x.max(axis=1)
        e = np.exp(x - m[:, None])
        return e / e.sum(axis=1)[:, None]

    def centered_and_mean(x):       # the expanded row value is an output too
        m = x.mean(axis=-1)[:, :, None]
        return x - m, m

    x = rng.standard_normal((33, 70))
    for v in (x, x[::2, 1::3], x.astype(np.float32)):
        run(softmax_none, v,
            level="O2", groups=1)
    run(centered_and_mean, x.reshape(3, 11, 70), level="O2", groups=1)
    # integer rows reduce exactly at O1 too; a None on anything else is not a row node
    i = rng.integers(-50, 50, (20, 30))
    run(lambda a: a - a.max(axis=1)[:, None], i, groups=1)
    run(lambda a, b: a.sum(axis=1)[:, None] + b[:, None], i, i[:, 0].copy(), groups=2)


def _row_max(x):
    return x - x.max(axis=-1, keepdims=True)


def _row_min(x):
    return x.min(axis=-1) * 2.0


def _row_argmax(x):
    return x.argmax(axis=-1)


@pytest.mark.parametrize("level", ["O1", "O2"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_row_max_hands_nans_and_zeros_to_numpy_across_blocks(level, dtype):
    """A float max/min notes only whether it met a NaN (reductions.MaxMin.update: a loop
    noting its sign too was not vectorized), so a NaN result, of either sign, goes to NumPy,
    as a zero result does when the row has zeros of both signs; other rows stay in the
    kernel (a zero of one sign too). Rows shorter than a vector, of odd lengths and crossing
    the 2048-value blocks, strided rows, a NaN in the first, a middle or the last element of
    a row; argmax (the first NaN's index) stays in the kernel."""
    neg = np.copysign(np.nan, -1.0)
    for n in (1, 9, 2049):
        x = (rng.standard_normal((5, n)) + 3.0).astype(dtype)
        for fn in (_row_max, _row_min):
            run(fn, x, level=level, groups=1)
            run(fn, x[:, ::2], level=level, groups=1)
            for at, nan in ((0, neg), (n // 2, np.nan), (n - 1, neg)):
                bad = x.copy()
                bad[4 - at % 5, at] = nan
                run(fn, bad, level=level, groups=1, handed_back=True)
            bad = x.copy()
            bad[1, 0] = bad[3, n - 1] = np.nan
            run(_row_argmax, bad, level=level, groups=1)
        zero = -np.abs(x)
        zero[2, n // 3] = -0.0
        zero[3, n - 1] = 0.0
        run(_row_max, zero, level=level, groups=1)
        zero[3, 0] = -0.0
        run(_row_max, zero, level=level, groups=1, handed_back=n > 1)


def _dot_rows(a, b):
    return (a * b).sum(axis=-1), (a - b).mean(axis=-1)


def test_exact_sums_add_computed_values_in_lanes(caplog):
    """At O1 a sum of values the loop computes adds each into NumPy's eight leaf
    accumulators as it is computed (render.lanes), for leaves of 8 values or more; a sum of
    an input's own row reads it in place, and O2 sums in blocks. NumPy's bits for leaves of
    every length class (under 8, a tail of under 8, exactly 128, split nodes, past a
    2048-value chunk, flat 16384-value chunks), strided and 3-d rows, signed zeros, NaN and
    infinities (NaN or inf in a sum raise no flag, so they stay in the kernel)."""
    x = rng.standard_normal((3, 300))
    lanes = re.compile(r"va\d+\[j - i\] = v\d+;")
    assert lanes.search(_source(caplog, _dot_rows, x, x + 1.0, level="O1"))
    assert lanes.search(_source(caplog, lambda a: np.sum(a * a), x[0], level="O1"))
    assert not lanes.search(_source(caplog, lambda a: a.sum(axis=-1) * 2.0, x, level="O1"))
    assert not lanes.search(_source(caplog, _dot_rows, x, x + 1.0, level="O2"))
    for n in (1, 7, 8, 9, 15, 128, 129, 137, 255, 1001, 2049, 16385):
        a = rng.standard_normal((3, n)) * 10.0 ** rng.integers(-5, 5, (3, n))
        b = rng.standard_normal((3, n))
        run(_dot_rows, a, b)
        run(lambda u, v: np.sum(u * v), a[1], b[1], groups=1)
        run(_dot_rows, a[:, ::-2], b[:, ::2], handed_back=None)
    a = rng.standard_normal((2, 3, 150))
    run(_dot_rows, a, a * 0.5)
    zeros = np.full((2, 40), -0.0)
    run(_dot_rows, zeros, zeros + 0.0)
    special = rng.standard_normal((3, 140))
    special[0, 3], special[1, 130], special[2, 0] = np.nan, np.inf, -np.inf
    run(_dot_rows, special, np.ones_like(special))


def _tanh_chain(x):
    return np.tanh(x * 0.5) * 2.0 + np.sqrt(np.abs(x)) - x * x


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_values_read_after_a_numpy_loop_are_computed_there(level, caplog):
    """At O1, sqrt(abs(x)) and x * x are computed in the loop after NumPy's tanh loop,
    which reads them (fuse.sink), so the kernel keeps only tanh's operand in a scratch row
    (tanh's loop writes over it); NumPy's bits over flat chunks, rows, strided and reversed operands, odd
    sizes and chunk boundaries, NaN, infinities and signed zeros (NaN from sqrt of a
    negative: handed to NumPy, which warns)."""
    x = rng.standard_normal(1000)
    src = _source(caplog, _tanh_chain, x, level=level)
    # (O2: tanh inline, one loop, no scratch row)
    assert len(re.findall(r"\bw\d+\[j\] = v\d+;", src)) == (level == "O1")
    for n in (1, 7, 1000, 16383, 16385, 40001):
        x = rng.standard_normal(n) * 3.0
        run(_tanh_chain, x, level=level, groups=1)
        run(_tanh_chain, x[::-3], level=level, groups=1, handed_back=None)
    m = rng.standard_normal((7, 300))
    run(_tanh_chain, m, level=level, groups=1)
    run(_tanh_chain, m[:, ::2], level=level, groups=1)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e300, -1e-300, 2.0])
    with np.errstate(invalid="ignore", over="ignore"):
        run(_tanh_chain, special, level=level, groups=1, handed_back=None)
    run(_tanh_chain, np.abs(special[:4]), level=level, groups=1, handed_back=None)


def _softmax_rows(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _exp_and_its_operand(x):        # x - m is read again after np.exp's loop
    d = x - x.max(axis=1, keepdims=True)
    e = np.exp(d)
    return e / e.sum(axis=1, keepdims=True) + d


def _tanh_of_exp(x):                # two NumPy loops in a row over one scratch row
    return np.tanh(np.exp(x * 0.25)) - x


def _exp_kept(x):                   # np.exp's row is an output: tanh may not write over it
    e = np.exp(x * 0.25)
    return np.tanh(e) * 2.0, e


def test_numpy_loop_runs_in_place_over_an_operand_nothing_else_reads(caplog):
    """At O1 np.exp's loop writes over its operand's scratch row (x - max) when no later
    loop reads that row, so softmax keeps one scratch row, not two; an operand read again
    keeps its row (the result goes to a row of its own), bit for bit like NumPy's."""
    x = rng.standard_normal((9, 1024)) * 4.0
    x[2, :7] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 800.0, -800.0]
    x[3] = -np.inf
    for fn, in_place in ((_softmax_rows, True), (_exp_and_its_operand, False),
                         (_tanh_of_exp, True), (_exp_kept, False)):
        with np.errstate(all="ignore"):
            src = _source(caplog, fn, x, level="O1")
        calls = re.findall(r"pj_ufunc1\(\d+, (\w+), sizeof\(double\), (\w+),", src)
        assert calls and any(a == b for a, b in calls) == in_place, (fn.__name__, calls)
        assert not any(a == b and a[0] != "w" for a, b in calls), (fn.__name__, calls)
        if fn is not _exp_kept:
            rows = set(re.findall(r"double \*(w\d+) = 1 \?", src))
            assert len(rows) == (1 if in_place else 2), (fn.__name__, rows)
        with np.errstate(all="ignore"):
            run(fn, x, groups=1, handed_back=None)
            run(fn, x[:, 1:999], groups=1, handed_back=None)
        run(fn, x[4:], groups=1)
    for n in (5, 16384, 16385):
        run(_tanh_of_exp, rng.standard_normal(n), groups=1)


def test_flat_chunks_of_a_group_calling_numpy_loops_stay_short(caplog):
    """A flat group that calls NumPy's loops and neither reduces nor writes runs in chunks
    of PJ_CALL_CHUNK (its scratch rows stay in L1); a group without such calls, or with a
    reduction, keeps PJ_CHUNK. Bit for bit across chunk boundaries, with NaN, infinities
    and signed zeros at them."""
    chunk = re.compile(r"nrows = flat \? \(N \+ (PJ_\w+) - 1\)")
    x = rng.standard_normal(3000) * 3.0
    for fn, used in ((_tanh_chain, "PJ_CALL_CHUNK"), (_tanh_of_exp, "PJ_CALL_CHUNK"),
                     (lambda v: v * v + 1.0, "PJ_CHUNK"),
                     (lambda v: np.tanh(v * 0.5).max(), "PJ_CHUNK")):
        assert chunk.findall(_source(caplog, fn, x, level="O1")) == [used]
    n = render.CALL_CHUNK
    for size in (n - 1, n, n + 1, 3 * n + 5, render.CHUNK + 3):
        x = rng.standard_normal(size) * 3.0
        run(_tanh_chain, x, groups=1)
        run(_tanh_of_exp, x, groups=1)
        run(lambda v: np.tanh(v * 0.5).max(), x, groups=1)
    x = np.abs(rng.standard_normal(2 * n + 1))
    x[[n - 1, n, 2 * n]] = [np.inf, -0.0, np.nan]
    with np.errstate(all="ignore"):
        run(_tanh_chain, x, groups=1, handed_back=None)


def test_row_values_as_outputs_and_nan_rows():
    def norm_stats(x):
        mu = x.mean(axis=-1, keepdims=True)
        ms = (x * x).mean(axis=-1, keepdims=True)       # same stage as mu
        sd = np.sqrt(ms - mu * mu)
        return (x - mu) / sd, mu, sd, x.max(axis=-1)
    x = rng.standard_normal((9, 300)) + 2.0
    run(norm_stats, x, groups=1, level="O2")
    x[3, 7] = np.nan        # (a NaN max goes to NumPy)
    run(norm_stats, x, groups=1, level="O2", handed_back=True)


def _source(caplog, fn, *args, level, what="C source"):
    """The C source of fn's kernel module, rendered anew (or its other kernel log messages
    containing `what`, such as the fused-group summary: "fused group")."""
    jitted = pijit.jit(fn, jit_config={"jit_level": level})
    pijit.reset(jitted)
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="pijit.kernels"):
        jitted(*args)
    return "\n".join(r.getMessage() for r in caplog.records if what in r.getMessage())


def _normalize(x):          # loop 0 reduces a value it computes (x * x), read by no later loop
    return x / np.sqrt((x * x).sum(axis=-1, keepdims=True))


def _scaled_max(x, g):      # loop 0 reads a row broadcast to every row (g)
    return x - (x * g).max(axis=-1, keepdims=True)


def _lse(x):                # the last loop reduces too (O2; O1 sums exactly, by a call)
    m = x.max(axis=-1, keepdims=True)
    return m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_last_loop_reduces_the_next_row_ahead(level, caplog, monkeypatch):
    """The last loop of row r also runs loop 0 of row r + 1 (its row max or sums), which row
    r + 1 then takes instead of reading its row once more. Rows with NaN, -inf, a zero max
    (which O1 hands to NumPy) right after ordinary rows; 3-d rows; one row, no row, empty
    rows; strided rows (read once more instead); integers."""
    x = rng.standard_normal((12, 70))
    x[3, 5] = np.nan
    x[5] = -np.inf
    x[7] = -np.abs(x[7])
    x[7, 9] = 0.0
    x[8, :] = 0.0
    g = rng.standard_normal(70)
    exact = level == "O1"
    cases = [(_softmax, (x,)), (_softmax, (x.astype(np.float32),)),
             (_softmax, (x.reshape(3, 4, 70),)), (_softmax, (x[:1],)), (_softmax, (x[:0],)),
             (_softmax, (x[:, ::3],)), (_scaled_max, (x, g)),
             (lambda a: a - a.max(axis=-1, keepdims=True), (rng.integers(-99, 99, (9, 40)),)),
             (lambda a: a * 3 - a.sum(axis=-1, keepdims=True), (np.zeros((4, 0), np.int64),))]
    if not exact:           # (exact float sums are NumPy's pairwise, read in place)
        cases += [(_normalize, (x[9:] + 3.0,)), (_layernorm, (x[9:], g, g * 0.5)),
                  (_lse, (x,)), (_lse, (x.astype(np.float32),))]
    with np.errstate(invalid="ignore"):
        for fn, args in cases:      # (NaN, -inf and zero rows: some handed to NumPy)
            run(fn, *args, handed_back=None,
                level=level, groups=1)
    # on ordinary rows (more than one thread's share of 64) the kernels run: no hand-back
    clean = rng.standard_normal((150, 70))
    ahead = [(_softmax, (clean,)), (_scaled_max, (clean, g))] + (
        [] if exact else [(_normalize, (clean + 3.0,)), (_lse, (clean,))])
    handed = count_handbacks(monkeypatch)
    for fn, args in ahead:
        run(fn, *args,
            level=level, groups=1)
        assert not handed, fn
        assert "ahead_r = ahead ? r + 1 : -1;" in _source(caplog, fn, *args, level=level)
    assert "ahead_r" not in _source(caplog, lambda a: a * 2.0 + 1.0, x, level=level)


def _scaled_pair(u, v):
    a = np.sqrt(u * u + 1.0) * 2.0
    return a, a - v


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_dynamic_shapes_run_fused(level, caplog, monkeypatch):
    """After a size change the entry's dims are dynamic (None); its elementwise group is still
    one kernel, taking shapes at run time: new sizes (0 and 1 too), strided and 2-d inputs
    with a static axis reuse it, bit for bit at O1. Inputs broadcasting along a dynamic dim
    (u[1] with v[5]: `a` would get v's shape) and mismatched sizes go to NumPy, which gives
    `a` its own shape or raises NumPy's error."""
    handed = count_handbacks(monkeypatch)
    jitted = pijit.jit(_scaled_pair, jit_config={"jit_level": level})
    pijit.reset(jitted)

    def check(u, v):
        check_level(jitted(u, v), _scaled_pair, (u, v), level)
    with caplog.at_level(logging.INFO, logger="pijit.kernels"):
        for n in (1000, 1001, 5000, 0, 1, 77):
            check(rng.standard_normal(n), rng.standard_normal(n))
    built = [r.getMessage() for r in caplog.records if "fused group" in r.getMessage()]
    assert len(built) == 2 and "group 0 [None]" in built[1], built
    info = pijit.code_info(jitted)
    assert info["compile_count"] == 2 and not handed
    assert any("float64[?]" in g for e in info["entries"] for g in e["guards"]), info
    x = rng.standard_normal(3000)
    check(x[::3], x[1::3])          # (another layout: an entry of its own)
    check(x[:1500:3], x[1:1500:3])
    check(np.ones(1), rng.standard_normal(5))
    assert handed, "u[1] with v[5]: handed to NumPy"
    with pytest.raises(ValueError, match="could not be broadcast"):
        jitted(np.ones(4), np.ones(5))
    two = pijit.jit(lambda m, r: m * r + 1.0, jit_config={"jit_level": level})
    for cols in (10, 11, 12):       # (3, ?) with a row of (?,)
        m, r = rng.standard_normal((3, cols)), rng.standard_normal(cols)
        check_level(two(m, r), lambda m, r: m * r + 1.0, (m, r), level)
    assert any("float64[3,?]" in g for e in pijit.code_info(two)["entries"] for g in e["guards"])


def _same_with_warnings(jitted, fn, *args, level):
    """jitted(*args) against fn(*args) (level_tol), with the same warnings."""
    got, want = run_observed(jitted, args, {}), run_plain(fn, args, {})
    assert got.warnings == want.warnings, (fn.__name__, got.warnings, want.warnings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (compared above)
        check_level(got.result, fn, args, level, fn.__name__)


def _stats(x):
    return x.sum(), x.mean(axis=0), (x * x).sum(axis=1), x.mean(axis=-1)


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_dynamic_shapes_fuse_reductions(level, caplog):
    """Row groups (softmax, layernorm) and sums/means over dynamic dims run fused: a batch
    of any size, rows of any length (0 too, with NumPy's warnings) reuse one entry. A max over
    a dynamic axis stays NumPy's (empty, it raises)."""
    exact = level == "O1"
    jit = {f: pijit.jit(f, jit_config={"jit_level": level}) for f in (_softmax, _layernorm, _stats)}
    for j in jit.values():
        pijit.reset(j)
    with caplog.at_level(logging.INFO, logger="pijit.kernels"):
        for cols in (64, 65, 0):
            g, b = rng.standard_normal(cols), rng.standard_normal(cols)
            for rows in (10, 11, 1, 0, 300):
                x = rng.standard_normal((rows, cols))
                _same_with_warnings(jit[_layernorm], _layernorm, x, g, b, level=level)
                _same_with_warnings(jit[_stats], _stats, x, level=level)
                if cols:
                    _same_with_warnings(jit[_softmax], _softmax, x, level=level)
    groups = [r.getMessage() for r in caplog.records if "fused group" in r.getMessage()]
    def built(*parts):
        return sum(all(p in m for p in parts) for m in groups)
    assert built("[None,64]", "%1=max(last, keepdims)", "%5=div") == 1, groups      # softmax
    assert built("[None,None]", "%1=mean(last, keepdims)", "%12=add") == 1, groups  # layernorm
    assert built("[None,None]", "%2=mean((0,))") == 1, groups
    # softmax over rows of any length: its max is NumPy's, the rest one group
    assert built("[None,None]", "%4=sum(last, keepdims)", "%5=div") == 1, groups
    for f in jit:
        assert pijit.code_info(jit[f])["compile_count"] == 3, f      # static, [?,64], [?,?]
    with pytest.raises(ValueError, match="zero-size array"):
        jit[_softmax](np.ones((2, 0)))


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_mean_of_no_values_warns_like_numpy(level):
    """A mean over no values is NaN with NumPy's warnings, also where the result is empty
    (rows of none) and where it is computed after the loops (column and whole means)."""
    def whole(x):
        return (x * 2.0).mean()
    for fn, x in ((_stats, np.zeros((0, 64))), (whole, np.zeros((0, 3))),
                  (_stats, np.zeros((0, 0))), (_stats, np.zeros((3, 0), np.int32)),
                  (lambda a: a.mean(axis=0) * 2.0, np.zeros((0, 5), np.float32))):
        jitted = pijit.jit(fn, jit_config={"jit_level": level})
        pijit.reset(jitted)
        _same_with_warnings(jitted, fn, x, level=level)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")         # (its warnings were compared above)
            assert pijit.explain(jitted, x).graph_count == 1


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_middle_loop_prefetches_the_next_row(level, caplog):
    """A loop between a row kernel's first and last computes in sub-blocks, each prefetching
    its part of the next row (and, where the loop calls a vector math function, of this row's
    output): rows not a multiple of the sub-block, float32 and float64 (other sub-blocks),
    rows too long to prefetch, strided and 3-d rows, one row, NaN rows; O1 stays bit for bit."""
    exact = level == "O1"
    x = rng.standard_normal((7, 1000))
    x[2, 5] = np.nan
    g = rng.standard_normal(1000)
    long_rows = rng.standard_normal((2, 20000)).astype(np.float32)
    with np.errstate(invalid="ignore"):
        for v in (x, x.astype(np.float32), x[:, ::3], x.reshape(7, 2, 500), x[:1], long_rows):
            # (a NaN row max goes to NumPy)
            run(_softmax, v, level=level, groups=1, handed_back=bool(np.isnan(v).any()))
        for v, gv in ((x, g), (x[:, :333], g[:333]), (long_rows, long_rows[0])):
            run(_layernorm, v, gv, gv * 0.5, level=level, groups=1)
    src = _source(caplog, _softmax, x, level=level)
    assert "__builtin_prefetch(pf0 + l, 0, 3);" in src
    # the output only where the loop computes exp (O1: NumPy's exp runs between loops)
    assert ("__builtin_prefetch((const char *)q0 + l, 1, 3);" in src) != exact
    src = _source(caplog, _layernorm, x, g, g * 0.5, level=level)
    assert "__builtin_prefetch(pf0 + l, 0, 3);" in src
    assert "q0 + l" not in src and "pf1" not in src and "pf2" not in src     # g, b: one row
    assert "pf0" not in _source(caplog, lambda a: a * 2.0 + 1.0, x, level=level)   # one loop
    # a row's sub-blocks (so an O2 sum's order) depend on its length only, not on whether
    # it prefetches (the last row does not)
    (pfs,) = re.findall(r"const npy_intp pfs = ([^;]*);", src)
    assert not re.search(r"\br\b|\bpf\b", pfs), pfs


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_streaming_loop_prefetches_ahead_on_big_inputs(level, caplog):
    """A loop reading dense inputs from memory (64 MiB of them or more) prefetches
    PJ_PF_AHEAD bytes ahead of its reads: results as before, over sizes not a multiple of its
    sub-block, strided and broadcast inputs (not prefetched); the condition is in the C."""
    exact = level == "O1"
    n = 7 * ((64 << 20) // 16 // 7 + 11)        # two float64 inputs: just over PJ_PF_STREAM
    a, b = rng.standard_normal(n), rng.standard_normal(n)

    def chain(a, b):
        return a * b - np.exp(b) * 0.5
    run(chain, a, b, level=level, groups=1)
    run(chain, a[:1001], b[:1001], level=level, groups=1)          # small: no prefetch
    run(chain, a.reshape(-1, 7)[:, ::2], b.reshape(-1, 7)[:, 3:], level=level, groups=1)
    run(lambda u, v: u * v + 1.0, np.concatenate((a, b)).reshape(-1, 7), b[:7], level=level,
        groups=1)
    src = _source(caplog, chain, a[:1001], b[:1001], level=level)
    streamed = "__builtin_prefetch((const char *)p1 + l, 0, 3);" if exact else \
        "__builtin_prefetch((const char *)p0 + l, 0, 3);"
    assert streamed in src and "+ PJ_PF_AHEAD; l < je * 8 + PJ_PF_AHEAD" in src
    assert re.search(r"if \(flat && N \* \(8( \+ 8)*\) >= PJ_PF_STREAM\)", src)


def _inverse_cubes(pos, mass):          # nbody_step's: rows of 3 coordinates
    d = pos[None, :, :] - pos[:, None, :]
    r2 = (d * d).sum(axis=-1) + 1e-3
    return (d * (r2 ** -1.5 * mass[None, :])[:, :, None]).sum(axis=1)


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_transcendental_of_short_row_values_is_a_group_of_its_own(level, caplog):
    """A power or transcendental of row values is computed once per row (a scalar call) in
    the row group, unless the rows are shorter than fuse.SHORT_ROW: then it is a full node of
    a group over the row values' shape (one vector call for many rows; O2 spent 55% of
    nbody_step in scalar pow). Over long rows it stays a row node (one call per long row)."""
    exact = level == "O1"
    pos, mass = rng.standard_normal((40, 3)), rng.random(40)
    run(_inverse_cubes, pos, mass, level=level, min_groups=2)
    text = _source(caplog, _inverse_cubes, pos, mass, level=level, what="fused group")
    assert "row pow" not in text and re.search(r"\[40,40\] in .*=pow; %\d+=mul", text), text

    def scaled(x):
        return x * np.exp(-x.sum(axis=-1, keepdims=True))
    x = rng.standard_normal((30, fuse.SHORT_ROW))
    run(scaled, x, level=level, groups=2 if exact else 1)
    if not exact:       # (O1 leaves a row's exp to NumPy: NumPy's loops run over full rows)
        assert "row exp" in _source(caplog, scaled, x, level=level, what="fused group")
    short = x[:, :fuse.SHORT_ROW - 1]
    assert "row exp" not in _source(caplog, scaled, short, level=level, what="fused group")


@pytest.mark.skipif(not fuse.LIBMVEC_235 <= fuse.INEXACT, reason="glibc older than 2.35")
def test_o2_vectorizes_glibc_235_math_and_logaddexp(caplog):
    """O2 computes log1p, arctan2, hypot, ... by libmvec and logaddexp by NumPy's formula
    over vector exp and log1p (no NumPy loop in the kernel); O1 calls NumPy's loops (exact)."""
    z = rng.uniform(-30, 30, 5000)
    z[:50] = z[50:100]
    y = (rng.random(5000) < 0.5).astype(np.float64)

    def loss(z, y):
        return np.mean(np.logaddexp(0.0, z) - y * z), np.logaddexp2(z, y * 3.0)

    def mix(a, b):
        return np.log1p(np.abs(a)) * np.arctan2(a, b) + np.hypot(a, b) - np.expm1(b * 0.1)
    calls = re.compile(r"pj_ufunc[12]\(\d")
    for fn, args, groups in ((loss, (z, y), 2), (mix, (z, y), 1)):
        run(fn, *args, level="O2", groups=groups)
        assert not calls.search(_source(caplog, fn, *args, level="O2"))
        run(fn, *args, groups=groups)                     # O1: bit for bit
        assert calls.search(_source(caplog, fn, *args, level="O1"))
    def doubled(u, v):
        return np.logaddexp(u, v) * 2.0
    for dtype in (np.float32, np.float64):            # NaN: invalid, as NumPy warns
        a = np.array([np.nan, 1.0, -np.inf, np.inf, 2.0] * 4, dtype)
        b = np.array([1.0, np.nan, -np.inf, np.inf, 2.0] * 4, dtype)
        assert ("RuntimeWarning", "invalid value encountered in logaddexp") in \
            run_plain(doubled, (a, b), {}).warnings     # (run() compares the warnings)
        out = run(doubled, a, b, level="O2", groups=1, handed_back=True)
        assert np.isnan(out[:2]).all() and out[2] == -np.inf and out[3] == np.inf


def test_logsumexp_rows():
    def lse(x):
        m = x.max(axis=-1, keepdims=True)
        return np.log(np.exp(x - m).sum(axis=-1, keepdims=True)) + m
    run(lse, rng.standard_normal((40, 129)) * 30.0, groups=1, level="O2")


INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
              np.uint64]


def _ints(dtype, shape, seed):
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max, shape, dtype=dtype,
                                                endpoint=True)


_INT_FNS = [lambda a, b: a * b + a - b,                            # wraps around
            lambda a, b: -a + abs(b) - np.square(a),               # abs(INT_MIN) wraps too
            lambda a, b: np.maximum(a, b) ^ (a & b) | ~np.minimum(a, b),
            lambda a, b: np.where(a > b, a, b) + a ** 3 - b ** 0,
            lambda a, b: np.clip(a, 3, 100) * (a <= b),
            lambda a, b: (a + b).astype(np.float32) * 0.5 + (a == b),
            lambda a, b: a / b + np.sqrt(a * 1.0),
            lambda a, b: (a * b).sum(axis=-1) + 3,
            lambda a, b: (a - b).sum(),
            lambda a, b: (a ^ b).max(axis=-1, keepdims=True) - (a | b).min(axis=-1,
                                                                           keepdims=True)]


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_kernels_match_numpy_exactly(dtype):
    a, b = _ints(dtype, (6, 9), 1), _ints(dtype, (6, 9), 2)
    b[0, :3] = 0
    a[1, :2] = np.iinfo(dtype).min
    every = together(_INT_FNS, 2)
    with np.errstate(all="ignore"):
        # (b holds zeros: a / b raises divide by zero, so NumPy computes that group)
        run(every, a, b, min_groups=len(_INT_FNS) // 2, handed_back=True)
        run(every, a.T, b[::-1].T, handed_back=True)
    run(lambda a: (a * 2).mean(axis=-1) + 1.0, a, groups=1, level="O2")


def test_bool_kernels_and_sums():
    p, q = A > 0.3, B < 0.1
    run(lambda p, q: (p & ~q) | (p ^ q), p, q, groups=1)
    run(lambda p, q: np.where(p, 1.5, 2.0) + q.sum(axis=-1, keepdims=True), p, q, groups=1)
    # (the two NumPy scalars' sum is scalar math, which warns when it overflows: NumPy's)
    run(lambda p, q: (p | q).sum() + np.maximum(p, q).max(), p, q, groups=2)


def test_integer_scalars_and_constants():
    u = _ints(np.uint64, (4, 5), 3)
    run(lambda u: u + np.uint64(2 ** 63 + 5) - 7, u, groups=1)
    i = _ints(np.int64, (4, 5), 4)
    run(lambda i, k: i * k + (-2 ** 63), i, 12345678901, groups=1)
    run(lambda i, k: i * k + 1.5, _ints(np.int32, (4, 5), 5), 3, groups=1)


def test_comparisons_numpy_does_exactly_are_left_to_numpy():
    u8 = _ints(np.uint8, (4, 5), 6)
    run(lambda a: a < 300, u8, fused=False)                 # out-of-range Python int
    i, u = _ints(np.int64, (4, 5), 7), _ints(np.uint64, (4, 5), 8)
    run(lambda i, u: i < u, i, u, fused=False)              # mixed 64-bit signedness


_MORE_REDUCTIONS = [lambda a: (a + a).argmax(axis=-1), lambda a: (a * 1).argmin(),
                    lambda a: np.argmax(a - 1, axis=1, keepdims=True),
                    lambda a: (a > 1).any(axis=-1, keepdims=True), lambda a: (a < 3).all(),
                    lambda a: np.any(a * 2, axis=-1), lambda a: (a * 1).prod(axis=-1)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16, np.uint32, np.int64,
                                   np.bool_])
def test_arg_any_all_prod_reductions(dtype):
    a = (rng.standard_normal((6, 37)) * 3).astype(dtype)
    a[2, 5] = a[2, 30] = a.max() if dtype != np.bool_ else True      # ties: first index wins
    every = together(_MORE_REDUCTIONS, 1)
    run(every, a)       # O1: a float product stays in NumPy (its rounding depends on order)
    run(every, a, level="O2",
        min_groups=len(_MORE_REDUCTIONS) // 2)
    if np.dtype(dtype).kind == "f":
        a[3, 7] = a[4, 0] = np.nan       # NaN is the first max/min (via the NumPy fallback)
        run(_MORE_REDUCTIONS[0], a)
        run(_MORE_REDUCTIONS[1], a)


_COLS = [lambda a: (a * 2).sum(axis=0), lambda a: (a + 1).mean(axis=(0, 1), keepdims=True),
         lambda a: (a - 1).max(axis=1), lambda a: (a * 1).min(axis=(0,)),
         lambda a: (a > 0).any(axis=0), lambda a: (a < 3).all(axis=1, keepdims=True),
         lambda a: (a * 1).prod(axis=0)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.uint8, np.bool_])
def test_reductions_over_outer_axes(dtype):
    a = (rng.standard_normal((5, 6, 37)) * 5).astype(dtype)
    exact = [f for f in _COLS if np.dtype(dtype).kind != "f" or f in (_COLS[4], _COLS[5])]
    for x in (a, a[:, ::2, ::3]):
        run(together(_COLS, 1), x, level="O2",
            min_groups=len(_COLS) // 2)
        # O1: exact, so fused only where the order of evaluation does not matter
        run(together(exact, 1), x, min_groups=len(exact) // 2)


def _threaded(fn, *args, threads, level):
    jitted = pijit.jit(fn, jit_config={"jit_level": level, "num_threads": threads})
    pijit.reset(jitted)
    jitted(*args)
    return jitted(*args)


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_results_do_not_depend_on_the_thread_count(level):
    x = rng.standard_normal((301, 517))         # > PAR_MIN elements: threads share the work
    y = rng.standard_normal((301, 517)).astype(np.float32)
    cases = [(lambda a, b: a * b + a - 0.5, (x, y)), (lambda a, b: a * b + a - 0.5, (x.T, y.T)),
             (lambda a: (a > 0.1).sum(axis=-1) + (a * 3).argmax(axis=-1), (x,)),
             (lambda a: (a * 2).max(), (x,)), (_layernorm, (x, x[0].copy(), x[1].copy())),
             (_softmax, (y[:, ::2],)), (_softmax, (y,)),
             # row means, most taken ahead of their rows, in a kernel writing bools (an O2 sum
             # adds in its loop's vector lanes: a wider loop, another order)
             (_mean_and_above, (x,)), (_lse, (y,)),
             # NumPy's loops (O1) or libmvec (O2) per row, and per flat chunk
             (lambda a: np.tanh(a * 0.5) + np.exp(-a * a), (x,)),
             (lambda a: np.tanh(a * 0.5) + np.exp(-a * a), (x.ravel(),))]
    for fn, args in cases:
        one = _threaded(fn, *args, threads=1, level=level)
        for threads in (2, 3):
            many = _threaded(fn, *args, threads=threads, level=level)
            assert_equal_values(many, one, f"{threads} threads against 1")
        check_level(one, fn, args, level)


def _mean_and_above(a):
    m = a.mean(axis=-1, keepdims=True)
    return m, a - m > 0.01


def _parts(result):
    return result if isinstance(result, tuple) else (result,)


def test_thread_count_settings_are_checked(monkeypatch):
    with pytest.raises(ValueError, match="num_threads"):
        pijit.jit(lambda a: a, jit_config={"num_threads": -1})
    monkeypatch.setenv("PIJIT_NUM_THREADS", "two")
    with pytest.raises(ValueError, match="PIJIT_NUM_THREADS must be a positive integer"):
        pijit.JitConfig().threads
    monkeypatch.setenv("PIJIT_NUM_THREADS", "3")
    assert pijit.JitConfig().threads == 3 and pijit.JitConfig(num_threads=2).threads == 2


def test_partial_fusion_with_int_and_matmul():
    w = rng.standard_normal((9, 5))
    run(lambda a, w: np.maximum(a @ w + 1.0, 0.0) * 2.0, A, w)
    run(lambda a, i: (a * 2.0 + 1.0)[:, :3] + i, A, np.arange(3))


def test_unfusable_graph_uses_numpy():
    run(lambda i, j: np.cumsum(i) // j, np.arange(5), np.arange(1, 6), fused=False)


def test_inplace_not_reordered():
    def f(a):
        t = a * 2.0
        b = a + 0.0
        b += 1.0
        return t + b * 3.0
    run(f, A)


def test_layout_fallback_unaligned():
    raw = np.zeros(8 * 10 + 1, np.uint8)[1:].view(np.float64)
    raw[:] = np.arange(10.0)
    assert not raw.flags.aligned
    run(lambda a: a * 2.0 + 1.0, raw, handed_back=True)


# -- disk cache ---------------------------------------------------------------------------

_SCRIPT = textwrap.dedent("""
    import logging, sys
    import numpy as np, pijit
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("pijit.kernels").setLevel(logging.DEBUG)
    f = pijit.jit(lambda a, b: np.exp(a * b) + 0.25 * a - b)
    a = np.linspace(0, 1, 50); b = a[::-1].copy()
    assert f(a, b).tobytes() == (np.exp(a * b) + 0.25 * a - b).tobytes()   # O1: bits
    print("ok")
""")


def _subprocess(cache: str):
    env = dict(os.environ, PIJIT_CACHE_DIR=cache)
    return subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                          text=True, timeout=60, cwd=os.path.dirname(os.path.dirname(__file__)))


def test_second_process_reuses_disk_cache(tmp_path):
    first = _subprocess(str(tmp_path))
    assert first.returncode == 0 and "ok" in first.stdout, first.stderr
    assert "compiling" in first.stderr
    sos = list(tmp_path.glob("*.so"))
    assert len(sos) == 1
    built = sos[0].stat()
    second = _subprocess(str(tmp_path))
    assert second.returncode == 0 and "ok" in second.stdout, second.stderr
    assert "compiling" not in second.stderr and "cache hit" in second.stderr
    used = sos[0].stat()
    assert used.st_ino == built.st_ino                  # the same file, not a rebuild
    assert used.st_mtime_ns > built.st_mtime_ns         # marked as used (eviction order)


def test_corrupt_cache_file_is_rebuilt(tmp_path):
    assert _subprocess(str(tmp_path)).returncode == 0
    (so,) = tmp_path.glob("*.so")
    so.write_bytes(b"not an ELF file")
    again = _subprocess(str(tmp_path))
    assert again.returncode == 0 and "ok" in again.stdout, again.stderr
    assert "rebuilding" in again.stderr
    assert so.read_bytes()[:4] == b"\x7fELF"


def test_unwritable_cache_dir_still_works(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where a directory should be")
    res = _subprocess(str(blocker / "cache"))
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr


def _scaled(k):
    """A function whose kernel module is its own (the constant differs)."""
    def f(a):
        return a * (k + 0.5) - 0.25
    return f


def test_cache_keeps_to_its_size_limit_dropping_the_least_recently_used(tmp_path,
                                                                        monkeypatch):
    monkeypatch.setenv("PIJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build, "_loaded", {})
    fns, paths = [_scaled(k) for k in range(3)], []
    for f in fns[:2]:
        before = set(tmp_path.glob("*.so"))
        run(f, A, groups=1)
        (new,) = set(tmp_path.glob("*.so")) - before
        paths.append(new)
    # room for two and a half modules; f0 used again (loaded from disk) after f1 was built
    limit = int(2.5 * max(p.stat().st_size for p in paths))
    monkeypatch.setattr(pijit.config, "env_cache_bytes", lambda: limit)
    monkeypatch.setattr(build, "_loaded", {})
    run(fns[0], A, groups=1)
    before = set(tmp_path.glob("*.so"))
    run(fns[2], A, groups=1)                            # a third module: f1's goes
    (third,) = set(tmp_path.glob("*.so")) - before
    assert set(tmp_path.glob("*.so")) == {paths[0], third}
    monkeypatch.setattr(build, "_loaded", {})          # f1 again: built anew, f0's goes
    run(fns[1], A, groups=1)
    assert paths[1].exists() and not paths[0].exists() and third.exists()


def test_cache_limit_setting_is_checked(monkeypatch, caplog):
    monkeypatch.delenv("PIJIT_CACHE_MB", raising=False)
    assert pijit.config.env_cache_bytes() == 1024 << 20
    monkeypatch.setenv("PIJIT_CACHE_MB", "0")
    assert pijit.config.env_cache_bytes() == 0
    monkeypatch.setenv("PIJIT_CACHE_MB", "lots")
    with pytest.raises(ValueError, match=r"PIJIT_CACHE_MB must be an integer >= 0 "
                                         r"\(megabytes\), got 'lots'"):
        pijit.config.env_cache_bytes()
    # in a call: the graph runs on NumPy, and the warning names the setting
    f = _scaled(7)
    with caplog.at_level(logging.WARNING, logger="pijit.kernels"):
        got = pijit.jit(f)(A)
    assert_equal_values(got, f(A))
    assert any("PIJIT_CACHE_MB" in r.getMessage() for r in caplog.records)


def test_precompiled_header_is_used_and_a_damaged_one_is_survived(tmp_path, monkeypatch, caplog):
    from pijit.backends.cfused import toolchain
    gch = toolchain.PCH_HEADER + ".gch"
    if not os.path.exists(gch):
        pytest.skip("no precompiled header (built by setup.py build_ext)")
    assert toolchain.pch_flags() == ["-include", toolchain.PCH_HEADER]
    # a truncated .gch is fatal for gcc (one for other flags is ignored): compile without it
    damaged = tmp_path / "kernel_prelude.h"
    damaged.write_text(open(toolchain.HEADER).read())
    with open(gch, "rb") as f:
        (tmp_path / "kernel_prelude.h.gch").write_bytes(f.read(4096))
    monkeypatch.setattr(toolchain, "PCH_HEADER", str(damaged))
    monkeypatch.setattr(build, "_loaded", {})
    monkeypatch.setenv("PIJIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CC", raising=False)     # (make asan sets one: gcc without its preload)
    with caplog.at_level(logging.WARNING, logger="pijit.kernels"):
        run(lambda a: a * 3.0 - 0.375, A, groups=1)
    assert any("compiling without it" in r.getMessage() for r in caplog.records)


def test_split_parts_shares_bodies_out_longest_first():
    assert render.split_parts(["x" * 9000, "x" * 4000, "x" * 5000], 2) == [[0], [1, 2]]
    assert render.split_parts(["x" * 9000] * 3, 3) == [[0], [1], [2]]
    assert render.split_parts(["x" * 9000] * 3, 8) == [[0], [1], [2]]
    assert render.split_parts(["x" * 9000] * 3, 1) == []
    assert render.split_parts(["x" * 9000], 4) == []
    small = "x" * (render.PART_MIN - 1)                # a part this small would not pay
    assert render.split_parts(["x" * 9000, small], 2) == []


def _three_groups(a, b):
    x = np.log(a) * b + 1.0
    y = x @ b
    z = np.sqrt(y) - np.exp(y * 0.01)
    w = z @ b
    return w.sum(axis=1) * 2.0 + np.tanh(w).max(axis=1)


def test_module_in_parts_runs_like_one(monkeypatch, tmp_path, caplog, capsys):
    """With gcc jobs to spare, a module's bodies are compiled in parts side by side and
    linked: every part must see the state set through part 0 (each group's NumPy fallback,
    the slots of NumPy's loops) and have its own NumPy API table. A part without them would
    hand every call back (counted) or crash."""
    monkeypatch.setattr(toolchain, "compile_jobs", lambda: 3)
    monkeypatch.setattr(build, "_loaded", {})
    monkeypatch.setenv("PIJIT_CACHE_DIR", str(tmp_path))
    a, b = np.abs(A[:, :7]) + 0.5, np.abs(B[:, :7]) + 0.5
    source = _source(caplog, _three_groups, a, b, level="O1")
    assert "#define PJ_PARTS 3" in source
    pijit.jit(_three_groups, jit_config={"print_after_all": True})(a, b)
    dumped = capsys.readouterr().err.split("=== pijit: fused kernels (C) ===\n")[1]
    dumped = dumped.split("=== pijit:")[0]             # print_after_all's C: every part
    assert dumped.startswith("#if PJ_PART == 0\n") and "#if PJ_PART == 2\n" in dumped
    assert dumped.count("\npj_body") == 3 and "pj_set_fallback" not in dumped
    handed = count_handbacks(monkeypatch)
    with caplog.at_level(logging.INFO, logger="pijit.kernels"):
        got = run(_three_groups, a, b, groups=3)
    assert any("in 3 parts" in r.getMessage() for r in caplog.records)
    assert not handed
    assert_equal_values(got, _three_groups(a, b))
    # each group's kernel reaches its NumPy fallback (here given no arguments, it raises
    # the fallback's TypeError; one not set would raise RuntimeError)
    (kernels,) = build._loaded.values()
    for k in range(3):
        with pytest.raises(TypeError):
            getattr(kernels, f"g{k}")()
    assert len(handed) == 3
    jitted = pijit.jit(_three_groups)                  # the log of negatives: NumPy warns
    _same_with_warnings(jitted, _three_groups, a - 1.0, b, level="O1")
    assert len(handed) == 5     # (and the NaN max of the last group goes to NumPy)


def test_build_failure_falls_back_to_numpy(monkeypatch, caplog):
    """A kernel that cannot be built: the captured graph runs on the NumPy backend (logged),
    not the function as plain Python."""
    monkeypatch.setenv("CC", "/nonexistent/gcc")
    monkeypatch.setattr(build, "_loaded", {})
    monkeypatch.setenv("PIJIT_CACHE_DIR", os.path.join(os.environ["PIJIT_CACHE_DIR"], "fresh"))

    def f(a):
        return a * 3.0 - 0.125
    jitted = pijit.jit(f)
    pijit.reset(jitted)
    with caplog.at_level(logging.WARNING, logger="pijit.kernels"):
        got = jitted(A)
    assert_equal_values(got, f(A))
    assert any("kernel build failed" in r.getMessage() and "using the NumPy backend"
               in r.getMessage() for r in caplog.records), caplog.text
    (entry,) = cache.record(f.__code__).entries
    assert entry.fallback is None and entry.graph is not None       # a graph, not plain
    assert "fused groups" not in entry.graph_source     # the NumPy backend's code
    assert_equal_values(jitted(A), f(A))
    assert pijit.stats(jitted)["cache_hits"] == 1


def _row_sums(x):
    return x.sum(axis=-1) * 0.5


def _normalized(x):
    e = x * x + 1.0            # a row buffer (the next stage reads it), summed where it is
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn", [_row_sums, _normalized])
def test_row_sums_in_the_recursions_leaves_are_numpys(dtype, fn):
    """O1 row sums walk NumPy's pairwise recursion leaf by leaf (its shape from pijit._C's
    kernel_support, each leaf summed by the kernel), on the input's row or a row buffer as
    they are (a strided row gathered first): every length class (under 8, a leaf, split
    leaves with remainders) equals NumPy bit for bit."""
    rng = np.random.default_rng(7)
    for n in (1, 5, 8, 13, 127, 128, 129, 136, 1000, 4099):
        x = rng.standard_normal((3, 2 * n)).astype(dtype) * 10.0 ** rng.integers(-3, 4, (3, 2 * n))
        for arg in (x[:, :n], x[:, ::2]):
            got = run(fn, arg, groups=1)
            assert_equal_values(got, fn(arg))


def _sum_of_squares(x):
    return np.sum(x * x), (x * 0.5).mean()


def _sums_of_x(x):
    return x.sum(), x.mean(), x.sum(axis=-1), x.mean(axis=-1)


def _sum_of_product(x, b):
    return np.sum(x * b)


def _whole_and_columns(x):
    y = x * 2.0
    return y.sum(), y.sum(axis=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_o1_whole_and_long_row_sums_follow_numpys_recursion(dtype, monkeypatch):
    """Sums over all values (and rows longer than a chunk) are NumPy's pairwise recursion,
    streamed: the kernel computes the values in the recursion's chunks (at most PJ_CHUNK
    values over all axes, PJ_SUM_CHUNK along rows), each leaf by leaf, and adds the leaf
    and chunk sums as the levels above do. Bit for bit at O1, for every size class around the chunk lengths, no hand-back on C-order operands; other layouts (NumPy
    sums them in another order) are handed back, with the same result."""
    backs = count_handbacks(monkeypatch)
    rng = np.random.default_rng(11)
    for n in (1, 7, 129, 2048, 2049, 16384, 16385, 32775, 1_000_003):
        a = (rng.standard_normal(n) * 10.0 ** rng.integers(-4, 5, n)).astype(dtype)
        got = run(_sum_of_squares, a, min_groups=1)
        assert got == _sum_of_squares(a), n
    for shape in ((3, 40001), (40001, 3), (2, 16385)):
        x = rng.standard_normal(shape).astype(dtype)
        got = run(_sums_of_x, x, min_groups=1)
        for g, w in zip(got, _sums_of_x(x)):
            assert_equal_values(g, w)
    assert backs == []
    x = rng.standard_normal((300, 70)).astype(dtype)
    for layout in (x.T, x[:, ::2], np.asfortranarray(x)):
        got = run(_sums_of_x, layout, min_groups=1, handed_back=None)
        for g, w in zip(got, _sums_of_x(layout)):
            assert_equal_values(g, w)
    assert backs        # handed back: NumPy's order of those is not the kernel's
    # an operand broadcast along rows runs row by row, not in flat chunks: the product gets a
    # group of its own, and the sum reads it dense (in one group, every call was handed back)
    backs.clear()
    b = rng.standard_normal(70).astype(dtype)
    assert run(_sum_of_product, x, b, groups=2) == _sum_of_product(x, b)
    assert backs == []
    # a column reduction of the same values runs row by row: it gets a group of its own
    backs.clear()
    got = run(_whole_and_columns, x, groups=2)
    for g, w in zip(got, _whole_and_columns(x)):
        assert_equal_values(g, w)
    assert backs == []


def _two_alike(x, y, z):
    a = x / y + 1.0                 # a group
    s = np.sort(a)                  # (not fused: the next group is another one)
    return s / z + 1.0              # a group rendered alike: the same body, its own fallback


def test_groups_rendered_alike_share_one_body_and_keep_their_fallbacks(caplog):
    """Groups whose C is the same up to the names of locals (an unrolled loop's) are
    compiled once; each still hands back to its own NumPy fallback, so a warning names the
    line of the group that raised it."""
    from pijit.backends.cfused import render
    prelude = "\n".join([render.PRELUDE, render.VECTOR_DECLS, render.HELPERS,
                         render.NUMPY_LOOPS, render.FALLBACK, render.MODULE])
    assert not render._LOCALS.search(prelude)       # renaming touches locals only
    x, y = np.linspace(1, 2, 50), np.linspace(2, 3, 50)
    z = np.linspace(-1, 1, 50)
    z[25] = 0.0
    jitted = pijit.jit(_two_alike)
    pijit.reset(jitted)
    with caplog.at_level(logging.DEBUG, logger="pijit.kernels"), \
            warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        result = jitted(x, y, z)
    source = "\n".join(r.getMessage() for r in caplog.records if "C source" in r.getMessage())
    assert source.count("(int gk, PyObject *const *args") == 1
    assert "return pj_body0(0, args, nargs)" in source and \
        "return pj_body0(1, args, nargs)" in source
    with warnings.catch_warnings(record=True) as want:
        warnings.simplefilter("always")
        expected = _two_alike(x, y, z)
    assert_equal_values(result, expected)
    assert [(w.category, w.lineno) for w in got] == [(w.category, w.lineno) for w in want]
    assert got[0].lineno == _two_alike.__code__.co_firstlineno + 3


def test_unrolled_loop_compiles_one_body(caplog):
    def steps(u):
        for _ in range(8):
            u = np.concatenate((u[:1], u[1:-1] + 0.25 * (u[2:] - 2.0 * u[1:-1] + u[:-2]),
                                u[-1:]))
        return u
    u = np.linspace(0.0, 1.0, 40) ** 2
    jitted = pijit.jit(steps)
    with caplog.at_level(logging.DEBUG, logger="pijit.kernels"):
        got = jitted(u)
    assert any("8 fused group(s)" in r.getMessage() for r in caplog.records)
    source = "\n".join(r.getMessage() for r in caplog.records if "C source" in r.getMessage())
    assert source.count("(int gk, PyObject *const *args") == 1
    assert all(f"return pj_body0({k}, args, nargs)" in source for k in range(8))
    assert_equal_values(got, steps(u))


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_unrolled_groups_with_lookahead_and_suffixed_locals_share_one_body(level, caplog):
    """The renaming covers every numbered local: the lookahead's (bn, pn, nv) and those with a
    suffix (v<value>_a of maximum, v<value>_d of logaddexp)."""
    def rows(x):
        for _ in range(3):
            x = np.concatenate((x - x.max(axis=-1, keepdims=True), x[:1]))
        return x

    def steps(u):
        for _ in range(4):
            v = u[1:] - u[:-1]
            u = np.concatenate((u[:1], np.maximum(v, 0.0) + np.logaddexp(v, 0.5)))
        return u
    cases = [(rows, rng.standard_normal((100, 30)), "3 fused group(s)")]
    if level == "O2":           # (O1 calls NumPy's logaddexp loop, a slot per group)
        cases.append((steps, np.linspace(0.0, 1.0, 40), "4 fused group(s)"))
    for fn, x, groups in cases:
        source = _source(caplog, fn, x, level=level)
        assert any(groups in r.getMessage() for r in caplog.records)
        assert source.count("(int gk, PyObject *const *args") == 1
        got = pijit.jit(fn, jit_config={"jit_level": level})(x)
        check_level(got, fn, (x,), level)


def test_kernel_module_without_its_support_table_falls_back_to_numpy(monkeypatch, caplog):
    """A kernel module's init takes the routines it shares from pijit._eval_frame; without
    them the module does not load (never a call through a NULL table): NumPy runs the graph."""
    import types
    monkeypatch.setitem(sys.modules, "pijit._eval_frame", types.ModuleType("pijit._eval_frame"))
    monkeypatch.setattr(build, "_loaded", {})
    monkeypatch.setenv("PIJIT_CACHE_DIR", os.path.join(os.environ["PIJIT_CACHE_DIR"], "nosupport"))

    def f(a):
        return a.sum(axis=-1) * 0.25
    jitted = pijit.jit(f)
    with caplog.at_level(logging.WARNING, logger="pijit.kernels"):
        got = jitted(A)
    assert_equal_values(got, f(A))
    assert any("kernel build failed" in r.getMessage() and "kernel_support" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert "fused groups" not in pijit.cache.record(f.__code__).entries[0].graph_source


def test_bool_array_against_python_int_left_to_numpy():
    run(lambda a: (-1 > a), np.array(False), fused=False)
    run(lambda a, b: np.where(a > 0.5, b, 0.0), A, B)


def _divide_then_add(a, b):
    return a / b + 1.0


def test_floating_point_errors_reported_like_numpy():
    """A kernel that divides by zero (or overflows, or makes NaN from numbers) hands the group
    back to NumPy, which warns, or raises under np.errstate, exactly as plain NumPy does."""
    a = np.ones(6)
    b = np.array([1.0, 0.0, 2.0, 4.0, -0.0, 8.0])
    jitted = pijit.jit(_divide_then_add)
    pijit.reset(jitted)
    for _ in range(2):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            result = jitted(a, b)
        with warnings.catch_warnings(record=True) as expected:
            warnings.simplefilter("always")
            plain = _divide_then_add(a, b)
        assert_equal_values(result, plain)
        assert [(w.category, str(w.message)) for w in got] == \
            [(w.category, str(w.message)) for w in expected]
        assert got[0].filename == __file__            # the user's line, not pijit's
        with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="divide"):
            jitted(a, b)
        with np.errstate(divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("error")
            assert_equal_values(jitted(a, b), plain)
    # the graph was compiled with a fused kernel (not the NumPy backend as a whole)
    source = pijit.cache.record(_divide_then_add.__code__).entries[0].graph_source
    assert "fused groups" in source and pijit.stats(jitted)["cache_hits"] >= 5


def _pair_forces(pos, mass):
    d = pos[None, :, :] - pos[:, None, :]
    r2 = (d * d).sum(axis=-1) + 1e-3
    return (d * (r2 ** -1.5 * mass[None, :])[:, :, None]).sum(axis=1), r2


def test_short_rows_of_3_d_groups_step_through_every_outer_index(monkeypatch):
    """nbody_step's all-pairs sums: 3-d groups whose rows are 3 coordinates, millions of rows
    at its size. The row loop steps its outer indices from the row before (the last axis
    before the row wraps into the next first-axis index) instead of dividing per row: every
    row is the right one, bit for bit, in the kernels (no hand-back), for sizes where the
    second axis wraps often or never (1 body), and for strided positions."""
    handed = count_handbacks(monkeypatch)
    for n in (1, 2, 5, 33):
        pos, mass = rng.standard_normal((n, 3)), rng.random(n) + 0.5
        assert_same(_pair_forces, pos, mass, ops=["sum", "pow"])
        wide = np.repeat(pos, 2, axis=0)[::2]
        assert_same(_pair_forces, wide, mass, ops=["sum", "pow"])
    assert not handed, "a group of the all-pairs sums went to NumPy"
