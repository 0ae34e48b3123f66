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
from differential import assert_same, assert_same_outcome, clone, run_observed, run_plain

O1 = {"jit_config": {"jit_level": "O1"}}
RNG = np.random.default_rng(20)


def count_fallbacks(monkeypatch) -> list:
    """The list each group fallback call compiled from now on appends to: 'whole' (the
    kernel handed the call to NumPy) or 'repair' (NumPy computed the rest after a flag)."""
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
    return calls


@pytest.fixture
def kernel(monkeypatch, caplog):
    """Run a differential check; return (logged group text, [fallback calls: 'whole' or
    'repair'])."""
    def run(fn, *args, level="O1", **kw):
        calls = count_fallbacks(monkeypatch)
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


def traced_peak(fn, *args) -> int:
    """Peak traced memory (bytes) of one call fn(*args)."""
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_direct_write_allocates_no_temporary():
    """Peak traced memory of the jitted update stays far below A's size (the temporary it
    replaces is A-sized)."""
    A = _floats(1000, 1000)
    u1, v1, u2, v2 = _floats(1000), _floats(1000), _floats(1000), _floats(1000)
    jitted = pijit.jit(f_rank2, **O1)
    pijit.reset(jitted)     # (a fresh cache: its first compile is this shape's)
    jitted(A, u1, v1, u2, v2)
    want = A.copy()
    f_rank2(want, u1, v1, u2, v2)
    peak = traced_peak(jitted, A, u1, v1, u2, v2)
    np.testing.assert_array_equal(A, want, strict=True)
    assert peak < A.nbytes // 8, peak


def test_same_results_at_o0(kernel):
    """O0 runs NumPy's own write nodes (no kernel): the same cases, the same results."""
    assert_same(f_rank2, _floats(20, 10), _floats(20), _floats(10), _floats(20), _floats(10),
                jit_kwargs={"jit_config": {"jit_level": "O0"}})
    u = _floats(12, 12)
    assert_same(f_stencil, u, u, jit_kwargs={"jit_config": {"jit_level": "O0"}})


# -- dynamic axes: one function called with many shapes ---------------------------------------
@pytest.fixture
def shapes(monkeypatch, caplog):
    """Call one jitted function (never reset between calls) with each argument tuple in turn,
    each call differential against plain NumPy (results, mutated inputs bit for bit,
    warnings, exceptions); return ([fallback calls of each call], [logged group texts],
    pijit.stats)."""
    def run(fn, arg_sets):
        calls = count_fallbacks(monkeypatch)
        jitted = pijit.jit(fn, **O1)
        pijit.reset(jitted)
        per_call = []
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="pijit.kernels"):
            for k, args in enumerate(arg_sets):
                want_args, got_args = clone(list(args)), clone(list(args))
                want = run_plain(fn, want_args, {})
                got = run_observed(jitted, got_args, {})
                assert_same_outcome(got, want, got_args, want_args,
                                    f"call {k + 1} {[getattr(a, 'shape', a) for a in args]}")
                per_call.append(calls[:])
                calls.clear()
        texts = [r.getMessage() for r in caplog.records if "group" in r.getMessage()]
        return per_call, texts, pijit.stats(jitted)
    return run


def assert_dynamic_direct(per_call, texts, stats):
    """The first shape compiled a static entry, the second one with dynamic axes that every
    later shape reused; every call wrote in the kernel (no NumPy fallback)."""
    assert stats["compile_count"] == 2, stats
    assert any(" into %" in t and "None" in t for t in texts), texts
    assert per_call == [[]] * len(per_call), per_call


RANK2_SHAPES = [(40, 30), (25, 50), (0, 7), (1, 9), (2, 2), (9, 1), (1, 1), (33, 0), (70, 45)]


def test_rank2_update_with_many_shapes(shapes):
    sets = [(_floats(m, n), _floats(m), _floats(n), _floats(m), _floats(n))
            for m, n in RANK2_SHAPES]
    assert_dynamic_direct(*shapes(f_rank2, sets))


@pytest.mark.parametrize("fn", [f_isub, f_idiv, f_out])
def test_inplace_with_many_3d_shapes(shapes, fn):
    dims = [(4, 5, 6), (3, 7, 2), (0, 3, 4), (1, 1, 5), (2, 2, 2), (5, 1, 3), (6, 4, 1)]
    sets = [(_floats(*s), _floats(*s), _floats(*s) + 3.0) for s in dims]
    assert_dynamic_direct(*shapes(fn, sets))


def test_setitem_with_many_shapes(shapes):
    dims = [(48, 40), (30, 33), (2, 2), (3, 3), (1, 5), (4, 2), (61, 17)]
    assert_dynamic_direct(*shapes(f_stencil, [(_floats(*s), _floats(*s)) for s in dims]))
    dims = [(20, 30), (14, 9), (1, 4), (3, 2), (0, 5), (41, 23)]
    sets = [(_floats(*s), _floats((s[0] + 1) // 2, (s[1] + 1) // 3),
             _floats((s[0] + 1) // 2, (s[1] + 1) // 3)) for s in dims]
    sets = [(o, x[:, :len(range(1, o.shape[1], 3))], y[:, :len(range(1, o.shape[1], 3))])
            for o, x, y in sets]
    assert_dynamic_direct(*shapes(f_strided, sets))


def test_setitem_column_of_a_dynamic_axis(shapes):
    """out[:, 2] of out (?, 6): an int on a static axis, a view of a dynamic length."""
    sets = [(_floats(m, 6), _floats(m), _floats(m)) for m in (30, 20, 0, 1, 2, 57)]
    assert_dynamic_direct(*shapes(f_column, sets))


def test_mismatched_dynamic_shapes_raise_as_numpy(shapes):
    """A destination the value would broadcast into, or that would broadcast (NumPy raises
    "non-broadcastable output"): NumPy's path, its error."""
    sets = [(_floats(6, 5), _floats(6, 5), _floats(6, 5)),
            (_floats(4, 3), _floats(4, 3), _floats(4, 3)),
            (_floats(1, 3), _floats(4, 3), _floats(4, 3)),
            (_floats(4, 3), _floats(1, 3), _floats(4, 1))]
    per_call, texts, stats = shapes(f_isub, sets)
    assert per_call[2:] == [["whole"], ["whole"]], per_call


def test_dynamic_flag_repairs_from_the_flagged_row(shapes):
    """An overflow at a middle row of shapes seen after the axes became dynamic."""
    sets = []
    for shape, at in [((40, 30), (17, 11)), ((50, 20), (31, 3)), ((9, 70), (4, 69)),
                      ((1, 30), (0, 5))]:
        A, B, C = _floats(*shape), _floats(*shape), _floats(*shape)
        A[at], C[at] = -1.7e308, 1.7e308
        sets.append((A, B, C))
    per_call, texts, stats = shapes(f_isub, sets)
    assert stats["compile_count"] == 2, stats
    assert per_call == [["repair"]] * 4, per_call


# -- more axes, strides and views ------------------------------------------------------------
def f_iadd2(X, Y):
    X += Y * 2.0
    return X


def _views3():
    base = _floats(9, 14, 12)
    return {"dense": lambda: (_floats(5, 6, 7), _floats(5, 6, 7)),
            "fortran": lambda: (np.asfortranarray(_floats(5, 6, 7)), np.asfortranarray(
                _floats(5, 6, 7))),
            "transposed": lambda: (_floats(6, 5, 7).transpose(1, 0, 2),
                                   _floats(6, 5, 7).transpose(1, 0, 2)),
            "strided": lambda: (_floats(9, 14, 12)[::2, 1::2, 2:9], _floats(5, 7, 7)),
            "negative": lambda: (_floats(9, 14, 12)[::-2, ::-1, 3:10], _floats(5, 14, 7)),
            "4-d": lambda: (_floats(3, 4, 5, 6)[:, ::2], _floats(3, 2, 5, 6)),
            # rows of the last two axes (render.collapse), and not (Y's rows have gaps)
            "collapsible": lambda: (_floats(10, 6, 7)[::2], _floats(10, 6, 7)[1::2]),
            "uncollapsible": lambda: (_floats(9, 6, 7)[::2], _floats(5, 6, 9)[:, :, :7]),
            "disjoint": lambda: (base[:4, :, :6], base[5:, :, 6:])}


@pytest.mark.parametrize("layout", list(_views3()))
def test_3d_destinations(kernel, layout):
    direct(kernel, f_iadd2, *_views3()[layout]())


def test_setitem_into_a_plane_of_a_3d_array(kernel):
    def f(T, x, y):
        T[:, :, 2] = x * y - 1.0
        T[1:, ::2, 0] = x[1:, ::2] + 0.5
        return T
    direct(kernel, f, _floats(20, 30, 4), _floats(20, 30), _floats(20, 30))


@pytest.mark.parametrize("step", [2, -3])
def test_strided_and_reversed_1d_destinations(kernel, step):
    def f(out, x, y):
        out[::step] = x * y + 1.0
        return out

    def g(a, b):
        v = a[::step]
        v -= b * 0.5
        return a
    n = len(range(0, 90, abs(step)))
    direct(kernel, f, _floats(90), _floats(n), _floats(n))
    direct(kernel, g, _floats(90), _floats(n))
    # longer than a segment (PJ_CHUNK elements): several segments of one row
    n = len(range(0, 100_000, abs(step)))
    direct(kernel, f, _floats(100_000), _floats(n), _floats(n))
    direct(kernel, g, _floats(100_000), _floats(n))


def test_negative_strides_of_a_2d_destination(kernel):
    def f(A, B, C):
        v = A[::-1, ::-2]
        v *= B - C
        return A
    direct(kernel, f, _floats(30, 40), _floats(30, 20), _floats(30, 20))


# -- overlap ----------------------------------------------------------------------------------
def test_overlapping_3d_operands_take_the_temporary(kernel):
    base = _floats(10, 12, 8)
    temporary(kernel, f_iadd2, base[:6, 2:], base[3:9, :10])
    temporary(kernel, f_iadd2, base[::2, ::2], base[1::2, 1::2])     # interleaved extents


def test_destination_over_itself_takes_the_temporary(kernel):
    """A destination whose elements share memory (a stride-0 axis, rows laid over each
    other): NumPy buffers the write, so the result is its last row; a kernel writing row
    after row would add every row."""
    buf = _floats(64)
    zero = np.ndarray((4, 5), np.float64, buffer=buf, strides=(0, 8))
    assert zero.flags.writeable
    temporary(kernel, f_iadd2, zero, _floats(4, 5))
    laid = np.ndarray((6, 5), np.float64, buffer=buf, strides=(16, 8))
    temporary(kernel, f_iadd2, laid, _floats(6, 5))
    temporary(kernel, f_iadd2, np.ndarray((3, 4, 5), np.float64, buffer=buf,
                                          strides=(0, 40, 8)), _floats(3, 4, 5))


# -- floating-point flags at a middle row -----------------------------------------------------
@pytest.mark.parametrize("layout", ["strided", "negative", "transposed", "fortran",
                                    "collapsible", "uncollapsible"])
def test_3d_flag_repairs_from_the_flagged_row(kernel, layout):
    """Rows over two outer axes (views), flat chunks in a permuted order (F order, more than
    one chunk): the kernel writes what precedes the flag in its own order, NumPy the rest."""
    if layout == "fortran":
        X, Y = (np.asfortranarray(_floats(30, 40, 50)) for _ in range(2))
        X[20, 30, 40], Y[20, 30, 40] = 1.7e308, 1.7e308
    else:
        X, Y = _views3()[layout]()
        X[2, 3, 4], Y[2, 3, 4] = 1.7e308, 1.7e308
    text, calls = kernel(f_iadd2, X, Y)
    assert " into %" in text and calls == ["repair", "repair"], (text, calls)


def test_flag_in_a_middle_segment_of_a_long_row(kernel):
    def f(out, x, y):
        out[::2] = x * y + 1.0
        return out
    x, y = _floats(50_000), _floats(50_000)
    x[37_000], y[37_000] = 1e200, 1e200
    text, calls = kernel(f, _floats(100_000), x, y)
    assert " into %" in text and calls == ["repair", "repair"], (text, calls)


def test_strided_1d_destination_scratch_is_bounded():
    """A 1-D strided destination is one row: its scratch (the row computed before it is
    written, and the gathered strided operand) is a segment, not the array."""
    def f(out, x):
        v = out[::2]
        v += x * 3.0
        return out
    out, x = _floats(2_000_000), _floats(1_000_000)
    jitted = pijit.jit(f, **O1)
    pijit.reset(jitted)
    jitted(out.copy(), x)
    want = out.copy()
    f(want, x)
    peak = traced_peak(jitted, out, x)
    np.testing.assert_array_equal(out, want, strict=True)
    assert peak < x.nbytes // 16, peak


def test_dynamic_direct_write_allocates_no_temporary():
    """After a second shape (dynamic axes), the rank-2 update still allocates nothing of
    A's size."""
    jitted = pijit.jit(f_rank2, **O1)
    pijit.reset(jitted)
    for m, n in [(30, 20), (20, 30)]:
        jitted(_floats(m, n), _floats(m), _floats(n), _floats(m), _floats(n))
    A = _floats(700, 900)
    u1, v1, u2, v2 = _floats(700), _floats(900), _floats(700), _floats(900)
    want = A.copy()
    f_rank2(want, u1, v1, u2, v2)
    peak = traced_peak(jitted, A, u1, v1, u2, v2)
    np.testing.assert_array_equal(A, want, strict=True)
    assert peak < A.nbytes // 8, peak
    assert pijit.stats(jitted)["compile_count"] == 2


def test_setitem_int_on_a_dynamic_axis_warns_then_raises(shapes):
    """out[3] = v where out's first axis is dynamic: not split into a view (which could
    raise IndexError before v is computed); NumPy computes v, warns, then raises."""
    def f(out, x, y):
        out[3] = x * y
        return out
    x, y = _floats(4), _floats(4)
    x[1], y[1] = 1e200, 1e200
    sets = [(_floats(5, 4), _floats(4), _floats(4)), (_floats(7, 4), _floats(4), _floats(4)),
            (_floats(2, 4), x, y), (_floats(9, 4), x, y)]
    per_call, texts, stats = shapes(f, sets)
    assert stats["compile_count"] == 2, stats



def _store_through_out(A, B, C):
    t = np.multiply(B, C, out=A)
    A[1:] = t[:-1] * 2.0
    return A


def _store_through_iadd(A, B, C):
    D = A
    A += B
    D[1:] = A[:-1] * C[1:]
    return D


@pytest.mark.parametrize("fn", [_store_through_out, _store_through_iadd])
def test_a_view_of_a_writes_value_is_a_view_of_its_destination(kernel, fn):
    """`t = np.multiply(x, y, out=A)` is A, and so is the value of `A += v`: a store into a
    view of A of a value read from t (or from A after +=, through another name) reads what
    it writes, and NumPy writes it from its temporary (the kernel computes the value only).
    Fused into A, its kernel handed every call to NumPy (found by tests/fusion_grammar.py)."""
    text, calls = kernel(fn, _floats(9, 5), _floats(9, 5), _floats(9, 5))
    assert calls == [] and "=mul" in text, (text, calls)
