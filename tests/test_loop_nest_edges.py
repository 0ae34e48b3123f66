"""Edges of loop-nest scalar rules (pijit/loopnest/types.py, lower_c.py) that the operator
tables of test_loop_nest_scalar_ops do not reach: unary minus and abs of the smallest int64,
narrow NumPy integers beside Python ints they cannot hold, float32 floor division and
remainder. Each nest runs plain and jitted (bit for bit,
tests/differential.py), as one loop_nest node, and where the operands are ordinary the C
kernel must run to the end without handing over (so a rule Python applied after a hand-over
cannot pass as the kernel's); the edge operands then must give Python's result, error or
warning, whoever computes it."""
from __future__ import annotations

import numpy as np
import pytest

import pijit
from tests.differential import assert_equal_values, assert_same, run_observed, run_plain
from tests.test_loop_nests import resumes  # noqa: F401 - a fixture

INT64_MIN = -2**63


def same(fn, *args):
    return assert_same(fn, *args, ops=["loop_nest"])


def in_c(resumes, fn, *args):
    """fn jitted == plain, and its kernel ran to the end."""
    same(fn, *args)
    assert resumes == [], f"the kernel handed over to Python at blocks {resumes}"


# -- unary minus and abs of ints -------------------------------------------------------------
def negate_python_ints(xs, out):
    for i in range(xs.shape[0]):
        out[i] = -int(xs[i])
    return out


def abs_python_ints(xs, out):
    for i in range(xs.shape[0]):
        out[i] = abs(int(xs[i]))
    return out


def negate_numpy_ints(xs, out):
    for i in range(xs.shape[0]):
        out[i] = -xs[i]
    return out


def abs_numpy_ints(xs, out):
    for i in range(xs.shape[0]):
        out[i] = abs(xs[i])
    return out


@pytest.mark.parametrize("fn", [negate_python_ints, abs_python_ints, negate_numpy_ints,
                                abs_numpy_ints])
def test_negation_of_the_smallest_int64(fn, resumes):
    """-x and abs(x) of -2**63: a Python int 2**63 (OverflowError at the int64 store), an
    np.int64 that wraps with NumPy's overflow warning; not -2**63 computed in C."""
    ordinary = np.array([5, -7, 0, 2**63 - 1, INT64_MIN + 1], dtype=np.int64)
    in_c(resumes, fn, ordinary, np.zeros(5, np.int64))
    same(fn, np.array([3, INT64_MIN, 4], dtype=np.int64), np.zeros(3, np.int64))


# -- negative indices -----------------------------------------------------------------------------
def last_items(a, out):
    for i in range(a.shape[0]):
        out[i] = a[i, -1] * 10.0 + a[-1, i % a.shape[1]]
    return out


def test_negative_indices_wrap_by_their_own_axis(resumes):
    """a[i, -1] is the last item of row i: -1 wraps by the length of axis 1, not axis 0."""
    a = np.arange(15.0).reshape(3, 5)
    in_c(resumes, last_items, a, np.zeros(3))
    in_c(resumes, last_items, np.ascontiguousarray(a.T), np.zeros(5))


# -- narrow NumPy ints beside Python ints ------------------------------------------------------
def plus_200(xs, out):
    for i in range(xs.shape[0]):
        out[i] = xs[i] + 200
    return out


def minus_python_int(xs, ks, out):
    for i in range(xs.shape[0]):
        out[i] = xs[i] - int(ks[i])
    return out


def test_narrow_int_beside_a_python_int_it_cannot_hold(resumes):
    """NEP 50: np.int8(-100) + 200 raises OverflowError (200 is no int8), though the sum
    fits; np.uint8(5) - (-1) too. The kernel must not compute them in int64."""
    in_c(resumes, minus_python_int, np.array([7, 100], np.int16), np.array([3, -100]),
         np.zeros(2, np.int16))
    same(plus_200, np.array([-100, -120], np.int8), np.zeros(2, np.int8))
    same(minus_python_int, np.array([7, 5], np.uint8), np.array([3, -1]), np.zeros(2, np.uint8))
    same(minus_python_int, np.array([7, 5], np.int8), np.array([3, 200]), np.zeros(2, np.int8))


# -- float32 floor division and remainder -------------------------------------------------------
F32_OPERANDS = [-7.5, -2.0, -1.0, -0.0, 0.0, 1.0, 2.0, 7.5, 3.0]


def divmod_float32(xs, ys, out):
    for i in range(xs.shape[0]):
        out[i, 0] = xs[i] // ys[i]
        out[i, 1] = xs[i] % ys[i]
    return out


def test_float32_floor_division_and_remainder(resumes):
    """NumPy's float32 // and % (floored, a zero remainder takes the divisor's sign, a zero
    quotient the sign of the true quotient), computed in float in the kernel."""
    pairs = [(x, y) for x in F32_OPERANDS for y in F32_OPERANDS if y != 0]
    xs = np.array([x for x, _ in pairs], np.float32)
    ys = np.array([y for _, y in pairs], np.float32)
    in_c(resumes, divmod_float32, xs, ys, np.zeros((len(pairs), 2), np.float32))


# -- constants beyond int64 ----------------------------------------------------------------------
def below_2_63(xs, out):
    for i in range(xs.shape[0]):
        out[i] = int(xs[i]) < 9223372036854775808
    return out


def test_int_constants_beyond_int64_are_not_compiled():
    """2**63 has no int64 C literal: a nest holding it is left to Python (it compared as
    -2**63 when typed int64)."""
    xs = np.array([0, 2**63 - 1, INT64_MIN, -5], dtype=np.int64)
    report = assert_same(below_2_63, xs, np.zeros(4, np.bool_), graphs=None, breaks=None)
    assert not any("loop_nest" in ops for ops in report.ops_per_graph), report


# -- a read-only array written by the nest ------------------------------------------------------
def doubled_into(out, b):
    for i in range(out.shape[0]):
        out[i] = b[i] * 2.0
    return out


def test_read_only_output_raises_as_plain(resumes):
    """Guards do not look at the writeable flag: the kernel does (and hands the call to
    Python, which raises ValueError at the first write, the array untouched)."""
    b = np.arange(5.0)
    in_c(resumes, doubled_into, np.zeros(5), b)
    jitted = pijit.jit(doubled_into)
    pijit.reset(jitted)
    for writeable in (True, False, True, False):
        want_out, got_out = np.full(5, -1.0), np.full(5, -1.0)
        want_out.flags.writeable = got_out.flags.writeable = writeable
        want = run_plain(doubled_into, [want_out, b], {})
        got = run_observed(jitted, [got_out, b], {})
        assert repr(got.exc) == repr(want.exc), (writeable, got.exc, want.exc)
        assert_equal_values(got_out, want_out, "out")
    assert pijit.stats(jitted)["cache_misses"] == 1, pijit.stats(jitted)
    assert resumes.count(-1) == 2, resumes         # the read-only calls, handed to Python


# -- float32 arithmetic stays float32 ------------------------------------------------------------
def float32_ops(xs, ys, out):
    for i in range(xs.shape[0]):
        out[i, 0] = xs[i] * ys[i]
        out[i, 1] = xs[i] // ys[i]
    return out


def plus_big_int(xs, ks, out):
    for i in range(xs.shape[0]):
        out[i, 0] = xs[i] + 16777217
        out[i, 1] = xs[i] + int(ks[i])
    return out


def test_float32_arithmetic_overflows_and_rounds_as_float32(resumes):
    """np.float32 ops round to float32 and overflow there (inf, NumPy's warning): in double
    1e38 * 10 is finite, and -2.25 + 16777217 rounds to 16777215, where NumPy, converting
    the Python int to float32 first, gives 16777214. NumPy converts a Python int through
    double: 2**54 + 2**30 + 1 becomes 2**54, not (float)int64's 2**54 + 2**31."""
    xs = np.array([1.5, -2.25, 3.0], np.float32)
    ys = np.array([0.5, 4.0, -7.0], np.float32)
    in_c(resumes, float32_ops, xs, ys, np.zeros((3, 2), np.float32))
    big = np.array([1.0, 1e38, 3.0], np.float32)
    same(float32_ops, big, np.array([2.0, 10.0, 1.0], np.float32), np.zeros((3, 2), np.float32))
    same(plus_big_int, xs, np.array([1, 2**54 + 2**30 + 1, -2**54 - 2**30 - 1]),
         np.zeros((3, 2), np.float32))


# -- stores of values the array's dtype cannot hold -----------------------------------------------
def store_int_plus(xs, out):
    for i in range(xs.shape[0]):
        out[i] = int(xs[i]) + 100
    return out


def store_float_times(xs, out):
    for i in range(xs.shape[0]):
        out[i] = float(xs[i]) * 1e30
    return out


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32])
def test_int_store_out_of_the_arrays_range(dtype, resumes):
    """A Python int the array cannot hold raises OverflowError at its store (after the
    stores before it); the kernel must not store it cast."""
    in_c(resumes, store_int_plus, np.array([1, 2, 3]), np.zeros(3, dtype))
    top = int(np.iinfo(dtype).max)
    same(store_int_plus, np.array([1, top - 50, 3]), np.zeros(3, dtype))


def test_float_store_overflowing_float32(resumes):
    """A double beyond float32's range stored into a float32 array: inf with NumPy's
    'overflow encountered in cast' warning."""
    in_c(resumes, store_float_times, np.array([1.0, -2.5, 0.0]), np.zeros(3, np.float32))
    same(store_float_times, np.array([1.0, 1e10, -1e10]), np.zeros(3, np.float32))


# -- Python ints past int64 passed to a nest -----------------------------------------------------
def plus_k(a, out, k):
    for i in range(a.shape[0]):
        out[i] = a[i] + k
    return out


def test_python_int_argument_past_int64(resumes):
    """k is a run-time input of the nest (specialize_scalar off) only within int64, which
    the kernel's int64 holds: the guard of a dynamic int is its range (wrap.fits_int64), so
    one past it (NumPy adds it as a float, 1.8e19) is a constant of an entry of its own,
    and the kernel never gets it."""
    config = {"jit_config": {"specialize_scalar": False}}
    a = np.array([0.5, -1.0, 2.0])
    assert_same(plus_k, a, np.zeros(3), 7, ops=["loop_nest"], jit_kwargs=config)
    assert resumes == [], resumes
    jitted = pijit.jit(plus_k, **config)
    pijit.reset(jitted)
    for k in (7, 2**64 + 1, -2**63 - 1, 7):
        want, got = run_plain(plus_k, [a, np.zeros(3), k], {}), \
            run_observed(jitted, [a, np.zeros(3), k], {})
        assert repr(got.exc) == repr(want.exc), k
        assert_equal_values(got.result, want.result, f"k={k}")
    stats = pijit.stats(jitted)
    assert (stats["cache_misses"], stats["cache_hits"]) == (3, 1), stats
    assert any("2**63" in r for r in stats["recompile_reasons"]), stats
    assert resumes == [], resumes


# -- an index i - 1 at i = 0 ------------------------------------------------------------------------
def neighbours(a, out):
    for i in range(a.shape[0] - 1):
        out[i] = a[i - 1] * 10.0 + a[i + 1]     # a[-1] at i = 0: the last element
    return out


def test_index_below_the_iterator_wraps_at_zero(resumes):
    """Versioning proves an index i + c in bounds for every i of the range before running
    the loop unchecked; a[i - 1] at i = 0 is a[-1], which the checked loop wraps. (a is a
    view of a longer buffer: a read before it would see 99.0, not a's last element.)"""
    buffer = np.array([99.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    in_c(resumes, neighbours, buffer[1:], np.zeros(4))


# -- floats stored into integer arrays ------------------------------------------------------------
def store_scaled(xs, out):
    for i in range(xs.shape[0]):
        out[i] = float(xs[i]) * 2.5
    return out


def test_float_into_an_int_array_is_not_compiled():
    """NumPy converts a Python float stored into an int array with int() (NaN: ValueError,
    inf: OverflowError); a C cast would give anything: the loop is not a nest."""
    for xs in (np.array([1.0, -2.0, 3.5]), np.array([1.0, np.nan]), np.array([np.inf])):
        report = assert_same(store_scaled, xs, np.zeros(xs.shape[0], np.int64), graphs=None,
                             breaks=None)
        assert not any("loop_nest" in ops for ops in report.ops_per_graph), report
