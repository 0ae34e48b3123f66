"""A NaN's bits through arithmetic gcc folds (render.py's c_neg, hides, c_hidden): NumPy's
multiply, divide, add and subtract return their NaN operand, quieted, np.negative flips its
sign bit, and CPython computes floats the same way; gcc takes the sign and payload of an
arithmetic NaN as unspecified and folds x * -1.0 into -x, (-x) * (-y) into x * y,
x + -nan into x - nan, x * 1.0 into x (a signalling NaN left signalling).

Each expression runs plain and jitted, in fused kernels (O1 and O2, float64 and float32) and
in a loop nest over Python floats, on NaNs of both signs with payloads where each operation
meets one NaN at most (where two meet, which comes out is the hardware's choice: the README's
one exception), compared bit for bit (payloads too) and asserted to run in C: every result
out of a fused group that did not hand back to NumPy, or the nest's kernel without a
hand-over to Python."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

from differential import assert_same, count_handbacks, run_plain, clone
import pijit
from pijit.backends.cfused import render
from pijit.loopnest.node import NestOp

NEG_NAN = -math.nan
PAY_NAN = float(np.array([0xfff800000000beef], np.uint64).view(np.float64)[0])
_QNANS = {np.float64: [0x7ff8000000000000, 0xfff8000000000000, 0x7ff8000000000123,
                       0xfff80000000abcde],
          np.float32: [0x7fc00000, 0xffc00000, 0x7fc00123, 0xffc0abcd]}
_SNANS = {np.float64: [0x7ff0000000000001, 0xfff0000000000001],
          np.float32: [0x7f800001, 0xff800001]}

# a and b: NaNs at different positions; f: finite (meets the NaN constants)
CONSTANTS = ["a * -1.0", "-1.0 * a", "-1 * a", "a / -1.0", "-0.0 - a", "0.0 - a", "a * 1.0",
             "a / 1.0", "a - 0.0", "a + -0.0", "a + 0.0", "a * 0.0", "a * -2.0", "a / -2.0",
             "2.0 * a", "a * 2"]
NEGATIONS = ["(-a) * 2.0", "(-a) * -1.0", "(-a) / 2.0", "(-a) / -1.0", "(-a) - 0.0",
             "(-a) * b", "a * (-b)", "(-a) * (-b)", "(-a) / b", "a / (-b)", "(-a) / (-b)",
             "a - (-b)", "a + (-b)", "(-a) + b", "(-a) - b", "(-a) - (-b)", "(-a) + (-b)",
             "-(a - b)", "-(a * b)", "-(a / b)", "-(a * 2.0)", "-(a * -1.0)", "-(-a)",
             "-(a * b) + 1.0", "-(a * b) - 1.0", "1.0 - (-a)", "b * (a * -1.0)",
             "a * b * -1.0", "(-a) * (-b) * -1.0", "np.negative(a) * -1.0"]
CALLS = ["np.square(-a)", "(-a) ** 2", "np.abs(-a)", "-np.abs(a)", "np.sqrt(-(-np.abs(a)))",
         "np.maximum(-a, b)", "np.minimum(b, -a)", "np.where(b > 0, -a, b)",
         "np.clip(-a, -1.0, 1.0)", "a * b + 1.0", "b - a * b"]
NAN_CONSTANTS = ["f * NEG_NAN", "f + NEG_NAN", "NEG_NAN - f", "f - PAY_NAN", "f * PAY_NAN",
                 "f * (-f) + NEG_NAN", "np.where(f > 0, f, NEG_NAN)", "np.maximum(f, PAY_NAN)"]
FUSED = CONSTANTS + NEGATIONS + CALLS + NAN_CONSTANTS
# sums meet one NaN: a's first
SUMS = ["(-a).sum()", "(a * -1.0).sum()", "(-a * b).sum()", "(a * -1.0).sum(axis=-1)",
        "(-a).mean()"]


def operands(dtype, nans=_QNANS, n=67, ones=False):
    """(a, b, f): a's NaNs at i % 4 == 0 and b's at i % 4 == 2, of every kind in turn; signed
    zeros; f finite. ones: a's first NaN only, b finite (for sums)."""
    rng = np.random.default_rng(5)
    a, b, f = (rng.standard_normal(n).astype(dtype) for _ in range(3))
    a[1::8] = -0.0
    f[3::8] = 0.0
    kinds = np.array(nans[dtype], f"u{np.dtype(dtype).itemsize}").view(dtype)
    a[0::4] = np.resize(kinds, a[0::4].shape)
    b[2::4] = np.resize(kinds[::-1], b[2::4].shape)
    if ones:
        a[4:][np.isnan(a[4:])], b[np.isnan(b)] = 1.25, 0.75
    return a, b, f


def together(exprs, params):
    namespace = {"np": np, "NEG_NAN": NEG_NAN, "PAY_NAN": PAY_NAN}
    exec(f"def together({params}):\n    return ({', '.join(exprs)},)\n", namespace)
    return namespace["together"]


def bits(v):
    v = np.asarray(v)
    return v.view(f"u{v.dtype.itemsize}") if v.dtype.kind == "f" else v


def named(exprs, check):
    """check(), with the expression of the result it reports (result[k]) named."""
    try:
        check()
    except AssertionError as e:
        k = re.search(r"result\[(\d+)\]|\((\d+), \d+\)", str(e))
        what = exprs[int(k[1] or k[2])] if k else "?"
        raise AssertionError(f"{what}: {e}") from None


@pytest.fixture
def groups(monkeypatch):
    """The FusionGroups kernels were rendered for, with their graphs."""
    made, init = [], render.GroupKernel.__init__

    def recording(self, graph, grp):
        made.append((graph, grp))
        init(self, graph, grp)
    monkeypatch.setattr(render.GroupKernel, "__init__", recording)
    return made


def fused_bits(exprs, args, level, groups, handed):
    """exprs (of a, b, f) jitted at `level` == plain, bits and payloads, every result computed
    by a fused group that ran in its kernel."""
    fn = together(exprs, "a, b, f")
    named(exprs, lambda: assert_same(fn, *args, jit_kwargs={"jit_config": {"jit_level": level}}))
    assert handed == [], f"{len(handed)} kernel call(s) handed their group to NumPy"
    graph = groups[-1][0]
    outs = {r.index for _, grp in groups for r in grp.outputs}
    missing = [exprs[k] for k, r in enumerate(graph.outputs) if r.index not in outs]
    assert not missing, f"not computed by a fused group: {missing}"
    jitted = pijit.jit(fn, jit_config={"jit_level": level})
    want = run_plain(fn, *clone((args, {}))).result
    for k, (g, w) in enumerate(zip(jitted(*clone(args)), want)):
        nan = np.isnan(w)           # (O2's other values are within its bounds: assert_same)
        assert np.array_equal(bits(g)[nan], bits(w)[nan]), f"{exprs[k]}: payloads differ"


@pytest.mark.parametrize("level", ["O1", "O2"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_kernels_keep_numpys_nan_bits(dtype, level, groups, monkeypatch):
    fused_bits(FUSED, operands(dtype), level, groups, count_handbacks(monkeypatch))


@pytest.mark.parametrize("level", ["O1", "O2"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sums_of_negated_values_keep_the_nans_sign(dtype, level, groups, monkeypatch):
    fused_bits(SUMS, operands(dtype, ones=True), level, groups, count_handbacks(monkeypatch))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_signalling_nan_times_one_is_quieted_with_numpys_warning(dtype):
    """x * 1.0, x - 0.0... of a signalling NaN: NumPy's quiet NaN and its invalid warning
    (the kernel raises the flag and hands the group to NumPy), not x unchanged, silently."""
    exprs = ["a * 1.0", "a / 1.0", "a - 0.0", "a + -0.0", "a * -1.0", "-0.0 - a"]
    args = operands(dtype, _SNANS)
    for e in exprs:
        named([e], lambda: assert_same(together([e], "a, b, f"), *args))


SOURCE = """
def nest(xs, ys, fs, out):
    for i in range(xs.shape[0]):
        a = float(xs[i])
        b = float(ys[i])
        f = float(fs[i])
{stores}
"""

# (a Python float ** hands a NaN over to Python)
NEST = [e for e in FUSED if "np." not in e and "**" not in e] + [
    "abs(-a)", "-abs(a)", "max(-a, b)", "min(b, -a)", "a * b + 1.0"]


@pytest.fixture
def resumes(monkeypatch):
    seen, resume = [], NestOp.resume

    def counted(self, block, *state):
        seen.append(block)
        return resume(self, block, *state)
    monkeypatch.setattr(NestOp, "resume", counted)
    return seen


@pytest.mark.parametrize("nans", ["quiet", "signalling"])
def test_loop_nests_compute_python_floats_like_cpython(nans, resumes):
    """Python floats in a loop nest's kernel: CPython multiplies x * -1.0, negates -x by its
    sign bit, and quiets a signalling NaN in any arithmetic."""
    stores = "\n".join(f"        out[{k}, i] = {e}" for k, e in enumerate(NEST))
    namespace = {"NEG_NAN": NEG_NAN, "PAY_NAN": PAY_NAN}
    exec(SOURCE.format(stores=stores), namespace)
    xs, ys, fs = operands(np.float64, _QNANS if nans == "quiet" else _SNANS)
    out = np.zeros((len(NEST), len(xs)))
    named(NEST, lambda: assert_same(namespace["nest"], xs, ys, fs, out, ops=["loop_nest"]))
    assert resumes == [], f"the kernel handed over to Python at blocks {resumes}"
    want, got = clone(out), clone(out)
    run_plain(namespace["nest"], (xs, ys, fs, want), {})
    pijit.jit(namespace["nest"])(xs, ys, fs, got)
    bad = [NEST[k] for k in range(len(NEST)) if not np.array_equal(bits(got[k]), bits(want[k]))]
    assert not bad, f"payloads differ: {bad}"


DIVISORS = [3.0, 0.1, 2.0, -0.5, 1e-300, 2.0 ** -1000, 2.0 ** 1000, 2.0 ** -100, 2.0 ** 127]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_divisions_by_constants_round_once(dtype, resumes, groups, monkeypatch):
    """A division by a constant is a multiplication only by an exact reciprocal (a power of
    two's), in fused kernels and loop nests: x / 3.0 is not x * (1 / 3.0)."""
    b = np.random.default_rng(3).standard_normal(4099).astype(dtype) * 1e3
    a, f = operands(dtype)[0], b
    with np.errstate(all="ignore"):         # (divisors the dtype holds)
        exprs = [f"b / {c!r}" for c in DIVISORS if np.isfinite(dtype(c)) and dtype(c) != 0]
    exprs.append("1.0 / b")
    fused_bits(exprs, (a, b, f), "O1", groups, count_handbacks(monkeypatch))
    if dtype == np.float64:
        stores = "\n".join(f"        out[{k}, i] = {e}" for k, e in enumerate(exprs))
        namespace = {}
        exec(SOURCE.format(stores=stores), namespace)
        out = np.zeros((len(exprs), len(b)))
        named(exprs, lambda: assert_same(namespace["nest"], b, b, b, out, ops=["loop_nest"]))
        assert resumes == [], f"the kernel handed over to Python at blocks {resumes}"
