"""Fused kernels writing straight into the destination (fuse.direct_write, render.py's
direct_checks/commit): `A += v`, `np.add(x, y, out=A)` and `view[...] = v` (setitem of a
basic slice) as the last member of the group computing v, one pass, no temporary.

Each case is differential (plain vs jitted, twice, on layout-preserving copies: results,
mutated inputs bit for bit, warnings, exceptions; tests/differential.assert_same) and also
asserts how the kernel ran: the group's logged text shows the write (`into %n`) and the
group's NumPy fallback is called (the temporary path: overlap, read-only destination, errors
that raise) or not (the direct path), or called with the repair arguments after a
floating-point flag."""
from __future__ import annotations

import logging
import tracemalloc
import warnings

import numpy as np
import pytest

import pijit
from pijit.backends import cfused
from differential import assert_same, clone, run_observed, run_plain

O1 = {"jit_config": {"jit_level": "O1"}}
RNG = np.random.default_rng(20)


@pytest.fixture
def kernel(monkeypatch, caplog):
    """Run a differential check; return (logged group text, [fallback calls: 'whole' or
    'repair'])."""
    def run(fn, *args, level="O1", **kw):
        calls = []
        fallback = cfused.group_fallback

        def counting(graph, grp, *spec, **kws):
            fb = fallback(graph, grp, *spec, **kws)
            nargs = len(grp.inputs)

            def counted(*a):
                calls.append("whole" if len(a) == nargs else "repair")
                return fb(*a)
            return counted
        monkeypatch.setattr(cfused, "group_fallback", counting)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="pijit.kernels"):
            assert_same(fn, *args, jit_kwargs={"jit_config": {"jit_level": level}}, **kw)
        text = "\n".join(r.getMessage() for r in caplog.records if "group" in r.getMessage())
        return text, calls
    return run


def direct(kernel, fn, *args, **kw):
    """The write ran in the kernel, into the destination, on both calls."""
    text, calls = kernel(fn, *args, **kw)
    assert " into %" in text, text
    assert calls == [], calls
    return text


def temporary(kernel, fn, *args, **kw):
    """The write is fused, but each call took NumPy's path (a temporary)."""
    text, calls = kernel(fn, *args, **kw)
    assert " into %" in text, text
    assert calls == ["whole", "whole"], calls


def f_rank2(A, u1, v1, u2, v2):
    A += np.outer(u1, v1) + np.outer(u2, v2)
    return A


def f_isub(A, B, C):
    A -= B * 0.5 + C
    return A


def f_imul(A, B, C):
    A *= B - C
    return A


def f_idiv(A, B, C):
    A /= B * B + C
    return A


def f_out(A, B, C):
    np.add(B * 2.0, C, out=A)
    np.multiply(A, C - 1.0, out=A)
    return A


def f_stencil(out, u):
    out[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return out


def f_column(out, x, y):
    out[:, 2] = x * 3.0 - y
    return out


def f_strided(out, x, y):
    out[::2, 1::3] = x * y + 1.0
    return out


def f_broadcast(out, x):
    out[1:, :] = x * 2.0 + 1.0         # x of one row: the value broadcasts into the view


def _floats(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fn", [f_isub, f_imul, f_idiv, f_out])
@pytest.mark.parametrize("order", ["C", "F"])
def test_inplace_float_ops_write_into_the_array(kernel, fn, dtype, order):
    A, B, C = (np.asarray(_floats(37, 29, dtype=dtype), order=order) for _ in range(3))
    direct(kernel, fn, A, B, C + 3.0)


def test_rank2_update_writes_into_A(kernel):
    A = _floats(120, 90)
    text = direct(kernel, f_rank2, A, _floats(120), _floats(90), _floats(120), _floats(90))
    assert "out ()" in text, text       # no temporary: the group has no output at all


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
@pytest.mark.parametrize("fn", ["add", "sub", "mul"])
def test_inplace_int_ops(kernel, dtype, fn):
    src = {"add": "A += B * 3 + C", "sub": "A -= B - C * 2", "mul": "A *= B + C"}[fn]
    ns = {"np": np}
    exec(f"def f(A, B, C):\n    {src}\n    return A\n", ns)
    A, B, C = (RNG.integers(0, 100, (31, 17)).astype(dtype) for _ in range(3))
    direct(kernel, ns["f"], A, B, C)


def test_inplace_on_a_strided_view(kernel):
    A = _floats(40, 60)

    def f(A, B):
        v = A[::2, 5:45]
        v *= B + 1.0
        return A
    direct(kernel, f, A, _floats(20, 40))


def test_inplace_of_a_one_dim_array(kernel):
    def f(a, b):
        a += b * b
        return a.sum()
    direct(kernel, f, _floats(1000), _floats(1000))


@pytest.mark.parametrize("fn,shapes", [
    (f_stencil, [(48, 40), (48, 40)]),
    (f_column, [(30, 6), (30,), (30,)]),
    (f_strided, [(20, 30), (10, 10), (10, 10)]),
])
def test_setitem_into_a_basic_slice(kernel, fn, shapes):
    direct(kernel, fn, *[_floats(*s) for s in shapes])


def test_setitem_int_destination_truncates(kernel):
    def f(out, x):
        out[2:-2] = x * 2.5 - 7.0
        return out
    direct(kernel, f, np.arange(40, dtype=np.int64), _floats(36) * 50)
    direct(kernel, f, np.zeros(40, np.int32), np.linspace(-9.9, 9.9, 36))


def test_setitem_int_destination_of_nan_warns_as_numpy(kernel):
    """The cast raises invalid at element 20: the kernel commits nothing from there and
    NumPy computes the rest, warning once ("invalid value encountered in cast")."""
    def f(out, x):
        out[:] = x * 2.0
        return out
    x = _floats(64)
    x[20] = np.nan
    text, calls = kernel(f, np.zeros(64, np.int64), x)
    assert " into %" in text and calls == ["repair", "repair"], (text, calls)


def test_broadcast_value_takes_numpy_setitem(kernel):
    """A value of fewer dims than the view is not computed over the view's shape: NumPy's
    setitem broadcasts it (the group writes a temporary, as before)."""
    text, calls = kernel(f_broadcast, _floats(8, 5), _floats(5))
    assert " into %" not in text and calls == [], (text, calls)


# -- overlap: NumPy's result comes from a temporary ------------------------------------------
def f_shifted(A, B):
    A[1:] += A[:-1] * B
    return A


def test_same_array_twice_takes_the_temporary(kernel):
    u = _floats(30, 30)
    temporary(kernel, f_stencil, u, u)      # out is u: the stencil reads what it writes


def test_view_of_the_destination_takes_the_temporary(kernel):
    # views of one graph value: not fused (the kernel computes the value, NumPy writes it)
    text, calls = kernel(f_shifted, _floats(50), _floats(49))
    assert " into %" not in text and calls == [], (text, calls)

    def f(A, B):
        A += A.T * B          # the base read transposed
        return A
    temporary(kernel, f, _floats(20, 20), _floats(20, 20))


def test_view_and_base_passed_as_two_arguments(kernel):
    A = _floats(40, 40)
    temporary(kernel, f_isub, A[5:25, 5:25], A[:20, :20], A[10:30, 10:30])
    # disjoint views of one array: the direct path
    direct(kernel, f_isub, A[:20, :20], A[20:, 20:], A[20:, :20])


def test_the_destination_read_at_its_own_index_is_direct(kernel):
    def f(A, B):
        A += A * B - 1.0
        return A
    direct(kernel, f, _floats(33, 21), _floats(33, 21))


def test_read_only_destination_raises_as_numpy(monkeypatch):
    """(clone() copies arrays writable, so this one compares by hand.)"""
    calls = []
    fallback = cfused.group_fallback

    def counting(graph, grp, *spec, **kws):
        fb = fallback(graph, grp, *spec, **kws)
        return lambda *a: calls.append(len(a)) or fb(*a)
    monkeypatch.setattr(cfused, "group_fallback", counting)
    for fn, shapes in [(f_isub, [(20, 10)] * 3), (f_stencil, [(48, 40)] * 2)]:
        args = [_floats(*s) for s in shapes]
        jitted = pijit.jit(fn, **O1)
        pijit.reset(jitted)                 # (compiled again, with the counting fallback)
        jitted(*clone(args))                # compiled on a writable destination
        for _ in range(2):
            want_args, got_args = clone(args), clone(args)
            want_args[0].flags.writeable = got_args[0].flags.writeable = False
            want = run_plain(fn, want_args, {})
            got = run_observed(jitted, got_args, {})
            assert type(got.exc) is type(want.exc) is ValueError, (got.exc, want.exc)
            assert str(got.exc) == str(want.exc)
            np.testing.assert_array_equal(got_args[0], args[0], strict=True)
        assert len(calls) == 2, calls       # the kernel handed both calls to NumPy
        assert pijit.stats(jitted)["compile_count"] == 1
        calls.clear()


# -- floating-point errors ------------------------------------------------------------------
def _overflowing(order="C", flat=True):
    """(A, B, C) where A -= B * 0.5 + C overflows at one element of row 17."""
    A, B, C = (np.asarray(_floats(40, 30), order=order) for _ in range(3))
    A[17, 11], C[17, 11] = -1.7e308, 1.7e308
    return A, B, C


@pytest.mark.parametrize("order", ["C", "F"])
def test_flag_repairs_from_the_flagged_row(kernel, order):
    """Flat chunks (dense operands), rows of the transposed iteration: the rows before the
    flag are the kernel's, NumPy writes the rest and warns once, as plain NumPy does."""
    text, calls = kernel(f_isub, *_overflowing(order))
    assert calls == ["repair", "repair"], calls

    # rows: operands that are not dense (views of wider arrays)
    A, B, C = (np.asarray(_floats(40, 35), order=order)[:, :30] for _ in range(3))
    A[17, 11], C[17, 11] = -1.7e308, 1.7e308
    text, calls = kernel(f_isub, A, B, C)
    assert calls == ["repair", "repair"], calls
    if order == "C":        # (operands broadcast along the rows of an F-order A go to NumPy)
        def rows(A, u, v):
            A -= np.outer(u, v)
            return A
        A = _floats(40, 30)
        A[17, 11] = -1.7e308
        u, v = _floats(40), _floats(30)
        u[17], v[11] = 1e300, 1e10
        text, calls = kernel(rows, A, u, v)
        assert calls == ["repair", "repair"], calls


def test_flags_in_the_value_and_in_the_write_warn_in_order(kernel):
    def f(A, B, C):
        A /= B * C
        return A
    A, B, C = _floats(30, 30), _floats(30, 30), _floats(30, 30)
    B[3, 3], C[3, 3] = 1e200, 1e200          # overflow in the value
    A[20, 1], B[20, 1] = 1.0, 0.0            # divide by zero in the write
    text, calls = kernel(f, A, B, C)
    assert calls == ["repair", "repair"], calls


def test_errors_that_raise_take_the_temporary(kernel):
    """np.seterr(all='raise'): NumPy raises before writing (an error in the value) or after
    writing all of A (in the write); the kernel hands those calls to NumPy."""
    old = np.seterr(all="raise")
    try:
        temporary(kernel, f_isub, *_overflowing())
        temporary(kernel, f_isub, _floats(10, 10), _floats(10, 10), _floats(10, 10))
    finally:
        np.seterr(**old)


def test_warnings_as_errors_take_the_temporary():
    """An "error" filter of RuntimeWarning: no direct write (the error would come after
    rows the kernel wrote)."""
    jitted = pijit.jit(f_isub, **O1)
    pijit.reset(jitted)
    args = _overflowing()
    for _ in range(2):
        want_args, got_args = clone(args), clone(args)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            with pytest.raises(RuntimeWarning) as want:
                f_isub(*want_args)
            with pytest.raises(RuntimeWarning) as got:
                jitted(*got_args)
        assert str(got.value) == str(want.value)
        np.testing.assert_array_equal(got_args[0], want_args[0], strict=True)


# -- the caller's view of A -----------------------------------------------------------------
def test_write_then_break_then_exception(kernel):
    def then_break(A, u, v):
        A += np.outer(u, v) * 2.0
        print("checkpoint", A.shape)
        return A.sum()
    text, calls = kernel(then_break, _floats(30, 20), _floats(30), _floats(20), graphs=None,
                         breaks=None)
    assert " into %" in text and calls == [], (text, calls)

    def then_raise(A, B):
        A -= B * 3.0
        raise ValueError("after the write")
    text, calls = kernel(then_raise, _floats(30, 20), _floats(30, 20), graphs=None,
                         breaks=None)
    assert " into %" in text and calls == [], (text, calls)


def test_direct_write_allocates_no_temporary():
    """Peak traced memory of the jitted update stays far below A's size (the temporary it
    replaces is A-sized)."""
    A = _floats(1000, 1000)
    u1, v1, u2, v2 = _floats(1000), _floats(1000), _floats(1000), _floats(1000)
    jitted = pijit.jit(f_rank2, **O1)
    # compiled for A's shape alone: after the shapes other tests called f_rank2 with, A's
    # axes would be dynamic, and a write over dynamic axes is not direct
    pijit.reset(jitted)
    jitted(A, u1, v1, u2, v2)
    want = A.copy()
    f_rank2(want, u1, v1, u2, v2)
    tracemalloc.start()
    try:
        jitted(A, u1, v1, u2, v2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(A, want, strict=True)
    assert peak < A.nbytes // 8, peak


def test_same_results_at_o0(kernel):
    """O0 runs NumPy's own write nodes (no kernel): the same cases, the same results."""
    assert_same(f_rank2, _floats(20, 10), _floats(20), _floats(10), _floats(20), _floats(10),
                jit_kwargs={"jit_config": {"jit_level": "O0"}})
    u = _floats(12, 12)
    assert_same(f_stencil, u, u, jit_kwargs={"jit_config": {"jit_level": "O0"}})
