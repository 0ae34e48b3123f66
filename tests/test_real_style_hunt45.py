"""Real-style programs around pijit's newest code (issue hunt45): lists whose length changes
between calls, recomputed broadcast differences, float `**` in loop nests and fused kernels,
short rows and reductions of non-contiguous views. Each runs plain and jitted
(differential: result bits, mutated inputs, printed output, warnings in order, exceptions)
and the way the jitted call ran is asserted, so a fallback to plain Python cannot pass.

Two families of wrong results were found and are fixed here:
- an output array given by position (np.negative(x, x), np.clip(x, lo, hi, x),
  a.max(0, o), np.dot(a, b, o)) was taken for an operand: graph passes thought the call
  pure and moved reads across its write, or a fused kernel dropped the write
  (capture/call_table.out_by_keyword now passes it as out=, or breaks);
- warnings of two fusion groups in another order than NumPy's: a group whose early member
  warns, joined by a node reading a later group's value (a recomputed difference's copy
  included), ran after that group (graph/fuse.find_groups refuses the join).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import pijit
from pijit import cache
from pijit.explain import report

from differential import assert_same, clone, run_plain, run_sizes
from test_hook import _graph_mode  # noqa: F401 - autouse: GRAPH_MODE, hook left uninstalled

LEVELS = ["O0", "O1"]


def _config(level):
    return {"jit_config": {"jit_level": level, "adaptive": False}}


def _reasons(rep):
    return [b["reason"] for b in rep.break_reasons]


def _groups(fn):
    """The fused groups' comment lines of fn's newest compiled entry at O1."""
    source = cache.record(fn.__code__).entries[0].graph_source
    return [line for line in source.splitlines() if line.startswith("/* group")]


# -- an output array given by position ------------------------------------------------------

def negate_in_place(x):
    y = x * 3
    np.negative(x, x)
    return y + 1, x


def sqrt_of_abs_in_place(x):
    a = np.abs(x)
    np.sqrt(a, a)
    return a + 1


def pairwise_then_shift(pos):
    """nbody's differences, the positions moved by a ufunc with a positional out between
    the two reads of d: d must be the one computed before the move."""
    d = pos[None, :, :] - pos[:, None, :]
    r2 = (d * d).sum(-1)
    np.add(pos, 1.0, pos)
    f = (d * 2.0).sum(1)
    return r2, f


X34 = np.linspace(-2.0, 2.0, 12).reshape(3, 4)
POS = np.random.default_rng(45).normal(size=(24, 3))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn, arg, ops", [
    (negate_in_place, X34, ["negative"]),
    (sqrt_of_abs_in_place, X34, ["sqrt"]),
    (pairwise_then_shift, POS, ["add", "sub"])])
def test_a_ufuncs_positional_out_is_its_out(fn, arg, ops, level):
    """Captured as out=: the write is a write (graphs, fusion and remat see it)."""
    rep = assert_same(fn, arg, ops=ops, jit_kwargs=_config(level))
    assert rep.graph_break_count == 0


def no_output_by_position(x):
    return np.sum(x, 0, None, None, True) * 2, np.add(x, 1.0, None) + 1, \
        x.sum(0, None, None, True)


@pytest.mark.parametrize("level", LEVELS)
def test_a_positional_out_of_none_is_no_output(level):
    assert_same(no_output_by_position, X34, breaks=0, ops=["sum", "add"],
                jit_kwargs=_config(level))


def clip_in_place(x):
    y = x * 3
    np.clip(x, -1, 1, x)
    return y + 1, x


def clip_method_in_place(x):
    y = x * 3
    x.clip(-1, 1, x)
    return y + 1, x


def max_method_into(x):
    o = np.zeros(4)
    x.max(0, o)
    return o + 1


def sum_into_read_before(x, o):
    y = o * 1
    np.sum(x, 0, None, o)
    return y + o


def dot_into_read_before(x, o):
    y = o * 1
    np.dot(x[:, :3], x[:, :3], o)
    return y + o


def matmul_into_read_before(x, o):
    y = o * 1
    np.matmul(x[:, :3], x[:, :3], o)
    return y + o


def maximum_with_a_third_argument(x):
    y = x * 3
    np.maximum(x, 0.0, x)       # NumPy warns: a DeprecationWarning
    return y + 1, x


def divmod_into(x):
    q, r = np.empty_like(x), np.empty_like(x)
    np.divmod(x, 0.7, q, r)
    return q + r


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn, args", [
    (clip_in_place, (X34,)), (clip_method_in_place, (X34,)), (max_method_into, (X34,)),
    (sum_into_read_before, (X34, np.ones(4))),
    (dot_into_read_before, (X34, np.ones((3, 3)))),
    (matmul_into_read_before, (X34, np.ones((3, 3)))),
    (maximum_with_a_third_argument, (X34,)), (divmod_into, (X34,))])
def test_a_positional_out_capture_cannot_say_breaks(fn, args, level):
    """A positional out of a call whose out= capture does not take (or one NumPy warns
    of, or several outputs) breaks there: before, the write was lost or moved."""
    rep = assert_same(fn, *args, graphs=None, breaks=1, jit_kwargs=_config(level))
    assert any("out" in r for r in _reasons(rep)), rep


# -- warnings of fusion groups in NumPy's order -----------------------------------------------

def divide_then_broadcast_row(v, x, z=0.0):
    e = v / z               # divide by zero: first in NumPy
    d = x * 3.0             # overflow: second
    return d[:, None] + e


def divide_then_row_sum(v, x, z=0.0):
    e = v / z
    d = x * 3.0
    return (d[:, None] * e).sum(1), d


def scaled_then_pairwise(x, y, v):
    """The copy of d (recomputed for b) meets e, which warns before d: e's group must not
    run after d's."""
    e = v * 5.0
    d = x[:, None] - y[None, :]
    a = (d * 2.0).sum(axis=1)
    b = (d * e).sum(axis=0)
    return a, b


def quiet_then_pairwise(x, y, v):
    """The copy of d joins q's group, which starts before d: it must still run after d's
    group (fuse.schedule's edge from a recomputed value's original), whose subtract warns
    before b's multiply."""
    q = np.abs(v)
    d = x[:, None] - y[None, :]
    a = (d * 2.0).sum(axis=1)
    b = (d * q).sum(axis=0)
    return a, b


def _overflowing():
    x, y, v = np.linspace(-1, 1, 40), np.linspace(0, 2, 30), np.ones((40, 30))
    x[3], y[4] = 1.5e308, -1.5e308         # d overflows
    x[5], v[0, 0], v[5, 0] = 1e308, 1e308, 10.0     # e, a and b overflow
    return x, y, v


def _zero_divided():
    v, x = np.ones((40, 30)), np.ones(40)
    v[0, 0], x[1] = 1e308, 1e308
    return v, x


@pytest.mark.parametrize("fn", [divide_then_broadcast_row, divide_then_row_sum])
def test_warnings_of_two_groups_in_numpys_order(fn):
    rep = assert_same(fn, *_zero_divided(), jit_kwargs=_config("O1"))
    assert rep.graph_break_count == 0
    want = run_plain(fn, _zero_divided(), {}).warnings
    assert [w[1].split()[0] for w in want] == ["divide", "overflow"]


@pytest.mark.parametrize("fn", [scaled_then_pairwise, quiet_then_pairwise])
def test_a_recomputed_difference_keeps_numpys_warning_order(fn):
    rep = assert_same(fn, *_overflowing(), ops=["sub"], jit_kwargs=_config("O1"))
    assert rep.graph_break_count == 0
    assert len(run_plain(fn, _overflowing(), {}).warnings) >= 3
    with np.errstate(all="ignore"):
        pijit.jit(fn, **_config("O1"))(*clone(_overflowing()))
    lines = _groups(fn)
    assert sum("=sub" in line for line in lines) == 2, lines     # d was recomputed


# -- lists whose length changes between calls -------------------------------------------------

X9 = np.linspace(-1.0, 1.0, 9)
LENGTHS = [3, 5, 2, 7, 0, 4, 1, 6]


def _floats(n):
    return [float(v) for v in np.random.default_rng(n).normal(size=n)]


def run_lengths(fn, make, level):
    """run_sizes over LENGTHS; the newest entry's report."""
    jitted = run_sizes(fn, make, LENGTHS, {"jit_level": level, "adaptive": False})
    stats = pijit.stats(jitted)
    assert stats["cache_hits"] >= len(LENGTHS) - 3, stats
    return report(jitted.fn.__code__)


def fraction_true(x, flags):
    return x * np.mean(flags), np.sum(flags), np.asarray(flags)


def stats_of(x, vals):
    return np.sum(vals), np.mean(vals), len(vals) * x, np.asarray(vals).dtype


def with_the_array(x, vals):
    v = x[:len(vals)]
    return v * vals, vals - v, np.dot(vals, v), v < vals, np.where(v > 0, vals, 0.0)


def into_uint8_plus(x, vals):
    return np.arange(len(vals), dtype=np.uint8) + vals


def conversions(x, vals):
    return np.array(vals, dtype=np.float32), np.asarray(vals, dtype=int), \
        np.array(vals, dtype=bool)


def specials(x, vals):
    a = np.asarray(vals)
    return a * -1.0, np.sign(a), np.minimum(a, 0.0), np.cumsum(vals), np.sort(vals)


def written_conversion(x, vals):
    a = np.asarray(vals)
    a[:1] = 7
    return a, np.asarray(vals), vals


def _mixed_scalars(n):
    return (X9, [np.float64(i) / 3 if i % 3 == 0 else np.int64(i) if i % 3 == 1 else True
                 for i in range(n)])


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn, make", [
    (fraction_true, lambda n: (X9, [bool(i % 3) for i in range(n)])),
    (fraction_true, lambda n: (X9, [np.bool_(i % 3) for i in range(n)])),
    (stats_of, _mixed_scalars),
    (stats_of, lambda n: (X9, _floats(n))),
    (stats_of, lambda n: (X9, list(range(n)))),
    (stats_of, lambda n: (X9, [i - 2 ** 63 for i in range(n)] + [2 ** 63 - 1])),
    (with_the_array, lambda n: (X9, _floats(n))),
    (with_the_array, lambda n: (X9, list(range(n)))),
    (into_uint8_plus, lambda n: (X9, [255 + 1000 * i for i in range(n)])),
    (conversions, lambda n: (X9, _floats(n))),
    (specials, lambda n: (X9, [-0.0, math.nan, math.inf, -math.inf, 0.0, 1.0, -2.5][:n])),
    (written_conversion, lambda n: (X9, _floats(n)))])
def test_dynamic_lists_stay_in_the_graph(fn, make, level):
    rep = run_lengths(fn, make, level)
    assert rep.graph_break_count == 0, rep


def helper_sort(v):
    v.sort()


def helper_set(v):
    if v:
        v[0] = -0.0


def helper_iadd(v):
    v += [5.0]


def helper_remove(v):
    if v:
        v.remove(v[0])


def _mutated_by(helper):
    def mean_mutate_mean(x, vals):
        a = np.mean(vals) if vals else 0.0
        helper(vals)
        return x * a, np.asarray(vals), np.sum(vals)
    return mean_mutate_mean


@pytest.mark.parametrize("helper", [helper_sort, helper_set, helper_iadd, helper_remove])
def test_a_list_a_callee_changes_is_read_after_the_change(helper):
    rep = run_lengths(_mutated_by(helper), lambda n: (X9, _floats(n)), "O1")
    assert rep.graph_break_count >= 1


@pytest.mark.parametrize("make", [
    lambda n: (X9, [np.float32(i) / 3 for i in range(n)]),
    lambda n: (X9, [np.array(float(i)) for i in range(n)]),
    lambda n: (X9, [2 ** 63 + i for i in range(n)]),
    lambda n: (X9, [[float(i), 1.0] for i in range(n)]),
    lambda n: (X9, [np.int32(i) for i in range(n)])])
def test_items_that_tell_no_dtype_break(make):
    rep = run_lengths(stats_of, make, "O1")
    assert rep.graph_break_count >= 1


# -- float ** in loop nests and fused kernels ------------------------------------------------

V = np.array([2.0, -2.0, 0.5, -0.0, 0.0, np.nan, np.inf, -np.inf, 1e-300, -1e300, 3.0, -1.0,
              1.0, 7.5])


def loop_powers(x):
    out = np.empty((x.shape[0], 5))
    for i in range(x.shape[0]):
        v = x[i]
        out[i, 0] = v ** 2
        out[i, 1] = v ** 0.5
        out[i, 2] = v ** -1.5
        out[i, 3] = v ** 3
        out[i, 4] = abs(v) ** 0.5
    return out


def loop_power_by(x, p):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = x[i] ** p
    return out


def polynomial(c, x):
    out = np.zeros_like(x)
    for i in range(x.shape[0]):
        acc = 0.0
        for k in range(c.shape[0]):
            acc += c[k] * x[i] ** k
        out[i] = acc
    return out


def fused_powers(x):
    return x ** 2 + 1, x ** 0.5 * 2, x ** -1.5 - 1, x ** 3 + 0, np.power(x, 2.5) + 1


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn, args", [
    (loop_powers, (V,)), (loop_power_by, (V, 0.5)), (loop_power_by, (V, -1.5)),
    (loop_power_by, (V, -2)), (polynomial, (np.array([1.0, -2.0, 0.5]), V)),
    (fused_powers, (V,)), (fused_powers, (V.clip(-1e30, 1e30).astype(np.float32),))])
def test_float_powers(fn, args, level):
    assert_same(fn, *args, breaks=0, jit_kwargs=_config(level))


def int_powers_in_a_loop(x, p):
    s = 0
    for i in range(x.shape[0]):
        s += x[i] ** p
    return s


@pytest.mark.parametrize("level", LEVELS)
def test_an_int_to_a_negative_int_power_raises_numpys_error(level):
    x = np.array([2, -3, 0, 1], dtype=np.int64)
    assert_same(int_powers_in_a_loop, x, -1, graphs=None, breaks=None,
                jit_kwargs=_config(level))
    assert_same(int_powers_in_a_loop, x * 1000, 7, breaks=0, jit_kwargs=_config(level))


# -- short rows and reductions of non-contiguous views ----------------------------------------

A = np.random.default_rng(3).normal(size=(5, 7, 6)) * 10.0 ** np.arange(-3, 3)
A[0, 0, :] = -0.0
A[1, 2, 3] = np.nan


def reductions(x):
    return [x.sum(axis=ax) + 0 for ax in (0, 1, 2, (0, 1), (1, 2), None)] + \
        [x.mean(axis=ax) * 1 for ax in (0, 2)] + [np.max(x * 1, axis=ax) for ax in (0, 1, 2)]


def short_rows(x):
    return (x * 2).sum(axis=-1), (x + 1).sum(-1, keepdims=True), (x * x).mean(-1)


@pytest.mark.parametrize("view", [
    lambda a: a[:, ::2], lambda a: a[::-1], lambda a: a.transpose(2, 0, 1),
    lambda a: a[..., ::3], lambda a: a[:, 1:, :5], np.asfortranarray,
    lambda a: a.astype(np.float32)[:, ::2]])
@pytest.mark.parametrize("fn", [reductions, short_rows])
def test_reductions_of_views(fn, view):
    assert_same(fn, view(A), breaks=0, jit_kwargs=_config("O1"))
