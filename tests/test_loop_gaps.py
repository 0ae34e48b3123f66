"""Loop-nest edges found by the automatic mutation sweeps (hunt36, hunt37), each a rule no
other test reached: test_loop_nest_scalar_ops runs one failing pair per kind of error, so a
left shift by 64 or more (OverflowError like any too-large int) never ran after its first
kind; the SIMD passes' address checks never met views of one array whose indices differ by a
constant; a Python int out of a small integer dtype never reached a call's range checks."""
import logging

import numpy as np
import pytest

from differential import assert_same
from test_loop_nest_scalar_ops import nest, run
from tests.test_loop_nests import compiled, resumes, same  # noqa: F401 - resumes: a fixture
from tests.test_loop_nests_checks import kernels  # noqa: F401 - a fixture


@pytest.mark.parametrize("op, pairs", [
    ("<<", [(1, 5), (1, 64)]),          # 2**64: OverflowError at the store, not x86's 1 << 0
    ("<<", [(1, 5), (3, 70)]),
], ids=["lshift64", "lshift70"])
def test_python_int_left_shift_counts_past_62(op, pairs):
    run(nest(f"x {op} y", "int(xs[i])", "int(ys[i])"), pairs, np.int64, np.int64)


def overlapping_rows(A):
    for j in range(8):
        A[1, j] = A[0, j + 7] * 2.0
    return A


def test_vector_address_check_counts_the_offset(resumes, kernels):
    """vectorize.py's run-time check that a store and a load touch bytes apart takes each
    index's constant: rows 8 elements apart, a load 7 ahead, each iteration reads what the
    one before stored (a recurrence); without the 7 the address ranges look apart."""
    A = np.ndarray((2, 15), np.float64, buffer=np.arange(1.0, 25.0), strides=(64, 8))
    compiled(overlapping_rows, A, resumes=resumes)
    assert all(k.vectors for k in kernels)


def doubled(a):
    for i in range(a.shape[0]):
        a[i] = a[i] * 2.0
    return a


@pytest.mark.internal_errors
def test_loop_nest_c_that_does_not_compile_is_an_internal_error(monkeypatch, caplog):
    """As for fused kernels (test_build_robust): a compiler diagnostic at a line of a loop
    nest's C is a bug of lower_c, logged as an error with its traceback, so that every test
    meeting one fails (no_internal_errors); the nest runs as Python. It was a warning: a
    planted fault that made the C invalid passed every test."""
    from pijit.backends.cfused import build, render
    source = render.module_source
    monkeypatch.setattr(render, "module_source",
                        lambda *a, **k: (lambda s, own: (s + "\nint pj_broken = ;\n", own))(
                            *source(*a, **k)))
    monkeypatch.setattr(build, "_loaded", {})
    with caplog.at_level(logging.WARNING, logger="pijit"):
        assert_same(doubled, np.arange(5.0), ops=["loop_nest"])
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert errors and all(isinstance(r.exc_info[1], build.SourceError) for r in errors), \
        caplog.records
    assert "loop nest" in errors[0].getMessage()


@pytest.mark.internal_errors
def test_loop_nest_lowering_that_raises_is_an_internal_error(monkeypatch, caplog):
    """An exception while lowering a nest to C (lower_c's own assertions) is a bug too:
    an error with its traceback, not a "build failed" warning; the nest runs as Python."""
    from pijit.loopnest import lower_c

    def planted(self):
        raise AssertionError("planted")
    monkeypatch.setattr(lower_c.NestKernel, "function", planted)
    with caplog.at_level(logging.WARNING, logger="pijit"):
        assert_same(doubled, np.arange(5.0), ops=["loop_nest"])
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert errors and all(str(r.exc_info[1]) == "planted" for r in errors), caplog.records


def add_python_ints(a, b):
    out = np.zeros(a.shape[0], np.int16)
    for i in range(a.shape[0]):
        out[i] = np.add(a[i], int(b[i]))
    return out


def python_int_to_int16(a):
    out = np.zeros(a.shape[0], np.int16)
    for i in range(a.shape[0]):
        out[i] = np.int16(int(a[i]) * 1000)
    return out


@pytest.mark.parametrize("fn, args", [
    # a Python int beside an int8 element: NEP 50's OverflowError past int8, not a wrap
    (add_python_ints, (np.arange(4, dtype=np.int8), np.array([1, 300, 2, 3]))),
    # np.int16(a Python int) past int16: OverflowError (a NumPy int would wrap)
    (python_int_to_int16, (np.array([1, 2, 40, 3]),)),
], ids=["ufunc_operand", "cast"])
def test_python_int_out_of_a_small_dtype_in_a_call(fn, args, resumes):
    """calls.py's range checks of a Python int converted to an integer dtype other than
    int64, in a ufunc's operand and in a cast (the suite only met ints in range there)."""
    same(fn, *args)
    assert resumes, "the kernel did not hand the call over"


def row_of_either(A, B, c):
    out = np.zeros(A.shape[0])
    for i in range(A.shape[0]):
        if c[i] > 0:
            row = A[i]
        else:
            row = B[i]
        out[i] = row[0] + row[1]
    return out


def test_a_view_bound_in_two_places_is_not_an_alias():
    """views.py aliases a local bound to a view only when the loop binds it once: bound in
    both arms of an if, which view it holds is known only at run time (an alias would read
    the arm the walk saw last). The loop runs as Python, unrolled."""
    A = np.arange(8.0).reshape(4, 2)
    report = assert_same(row_of_either, A, -10 * A, np.array([1, -1, 1, -1]), graphs=None,
                         breaks=None)
    assert not any("loop_nest" in ops for ops in report.ops_per_graph), report


def column_and_part_views(A, out):
    for j in range(A.shape[1]):
        col = A[:, j]
        seg = A[j % 3, 1:]
        out[j] = col[0] * 2.0 + col[2] - seg[1]
    return out


def test_views_that_are_not_rows(resumes):
    """Only `row = A[i]` of a 2-d A loads as A[i, j]; a column and a part of a row stay
    views (the suite bound rows only)."""
    compiled(column_and_part_views, np.arange(12.0).reshape(3, 4), np.zeros(4),
             resumes=resumes)


def overwritten(a):
    s = 0.0
    for i in range(a.shape[0]):
        s = 2.0 - a[i] * 1e300      # s is no operand: a later finite value replaces an inf
    return s


def test_an_overwritten_float_keeps_its_check_in_the_loop():
    """exit_checks.py moves a float check to the loop's exit only for an accumulator (acc =
    acc op x, which stays non-finite once it is): a value each iteration overwrites warns at
    its own iteration, as NumPy does."""
    same(overwritten, np.array([1.0, 1e10, 2.0, 3.0]), breaks=1)     # s: a Python or NumPy float


def counted_then_scaled(a):
    n = 0
    for i in range(a.shape[0]):
        if a[i] > 0:
            n += 1
    return a * n + 1.5


def test_a_python_int_a_nest_leaves_feeds_the_graph(resumes):
    """A value the nest leaves that is a Python int on every path (no NumPy scalar union)
    keeps its Python type's Meta after the loop: the graph goes on with it."""
    compiled(counted_then_scaled, np.array([1.0, -1.0, 2.0]), resumes=resumes)
