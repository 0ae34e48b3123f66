"""Loop bodies real code writes, each inside one loop nest compiled to C: `raise` under a
data-dependent `if` (pijit/loopnest/raises.py), branches on flags constant for the whole
nest (flags.py: the dead arm left out, the flag guarded), and locals bound to views
(views.py: `row = A[i]`, `seg = x[a:b]`). Plain Python's results, mutated arrays, printed
output, exceptions and tracebacks bit for bit, one graph with a loop_nest node, and at O1
the C kernel ran (`resumes` empty) or handed over exactly where it must."""
from __future__ import annotations

import traceback

import numpy as np
import pytest

import pijit
from benchmarks.workloads import cholesky_loops as chol_check
from tests.differential import assert_same
from tests.test_loop_nests import LEVELS, compiled, resumes, same  # noqa: F401 (a fixture)

DEBUG = False           # a module flag (test_a_global_flag_folds_its_branch)


def plain_run(fn, *args, level):
    """Plain Python's outcome, however the call is captured (the report, for its ops)."""
    return assert_same(fn, *args, graphs=None, breaks=None,
                       jit_kwargs={"jit_config": {"jit_level": level}})


# -- raise ---------------------------------------------------------------------------------
def first_negative(a, out):
    for i in range(a.shape[0]):
        if a[i] < 0:
            raise IndexError("negative at", i, a[i])
        out[i] = a[i] * 2
    return out


def bare_raise(a, out):
    k = 0
    while k < a.shape[0]:
        out[k] = a[k]
        if a[k] > 10:
            raise OverflowError
        k += 1
    return out


def spd(n, seed=0):
    m = np.random.default_rng(seed).random((n, n))
    return m @ m.T + n * np.eye(n)


def not_spd(n, at):
    A = spd(n)
    A[at, at] = -1.0            # the Cholesky pivot at column `at` goes negative
    return A


@pytest.mark.parametrize("n", [0, 1, 2, 7, 40])
@pytest.mark.parametrize("level", LEVELS)
def test_chol_check_is_one_nest(n, level, resumes):
    compiled(chol_check, spd(n), level=level, resumes=resumes)


@pytest.mark.parametrize("at", ["first", "middle", "last"])
@pytest.mark.parametrize("level", LEVELS)
def test_a_raise_at_an_iteration_hands_over_there(at, level, resumes):
    n = 9
    col = {"first": 0, "middle": 4, "last": n - 1}[at]
    same(chol_check, not_spd(n, col), level=level)
    del resumes[:]
    jitted = pijit.jit(chol_check, jit_config={"jit_level": level})
    for _ in range(2):
        with pytest.raises(ValueError, match="not positive definite") as info:
            jitted(not_spd(n, col))
        frames = traceback.extract_tb(info.tb)
        assert (frames[-1].name, frames[-1].line) == \
            ("cholesky_loops", 'raise ValueError("not positive definite")')
    if level == "O1":
        assert len(resumes) == 2, resumes          # one hand-over per call, at the raise


@pytest.mark.parametrize("where", [0, 3, 7])
@pytest.mark.parametrize("level", LEVELS)
def test_the_writes_before_a_raise_are_done(where, level, resumes):
    a = np.arange(8.0)
    a[where] = -1.5
    compiled(first_negative, np.arange(8.0), np.zeros(8), level=level, resumes=resumes)
    same(first_negative, a, np.zeros(8), level=level)       # IndexError, out[:where] written
    same(bare_raise, np.where(np.arange(8) == where, 11, 1), np.zeros(8, np.int64),
         level=level)
    jitted = pijit.jit(first_negative, jit_config={"jit_level": level})
    out = np.zeros(8)
    with pytest.raises(IndexError) as info:
        jitted(a, out)
    assert info.value.args == ("negative at", where, -1.5)
    assert type(info.value.args[2]) is np.float64
    assert list(out[:where]) == [2.0 * k for k in range(where)] and not out[where:].any()


def check_positive(x):
    if x <= 0:
        raise ValueError("not positive", x)
    return x


def calls_check(a, out):
    for i in range(a.shape[0]):
        out[i] = check_positive(a[i]) * 2
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_a_raise_in_an_inlined_helper(level, resumes):
    compiled(calls_check, np.arange(1.0, 6.0), np.zeros(5), level=level, resumes=resumes)
    a = np.array([1.0, 2.0, -0.0, 4.0])
    same(calls_check, a, np.zeros(4), level=level)
    jitted = pijit.jit(calls_check, jit_config={"jit_level": level})
    with pytest.raises(ValueError) as info:
        jitted(a, np.zeros(4))
    frames = traceback.extract_tb(info.tb)
    assert [(f.name, f.line) for f in frames[-2:]] == [
        ("calls_check", "out[i] = check_positive(a[i]) * 2"),
        ("check_positive", 'raise ValueError("not positive", x)')]


def overflow_then_raise(a, limit):
    s = np.float64(0.0)
    for i in range(a.shape[0]):
        s += a[i] * 1e300
        if a[i] > limit:
            raise ValueError("too big")
    return s


@pytest.mark.parametrize("level", LEVELS)
def test_a_raise_after_a_float_overflow_warns_first(level):
    # the sum overflows (NumPy warns) at i = 2, then the raise at i = 4: a kernel checking
    # the sum only at the loop's exit must not hand over at the raise without the warning
    a = np.array([1.0, 1.0, 1e10, 1.0, 5.0, 1.0])
    same(overflow_then_raise, a, 4.0, level=level)
    same(overflow_then_raise, a, 9.0, level=level)


def overflow_then_break(a, limit):
    s = np.float64(0.0)
    for i in range(a.shape[0]):
        s += a[i] * 1e300
        if a[i] > limit:
            break
    return s


@pytest.mark.parametrize("level", LEVELS)
def test_a_break_after_a_float_overflow_warns(level):
    # the same through a break: the loop's other exit skips a check deferred to its head's
    same(overflow_then_break, np.array([1.0, 1e10, 1.0, 5.0, 1.0]), 4.0, level=level)


def raise_in_helper_position(a):
    for i in range(a.shape[0]):
        if a[i] != a[i]:
            raise ArithmeticError(f"nan at {i}")
    return a


@pytest.mark.parametrize("level", LEVELS)
def test_what_a_raise_cannot_take_runs_as_before(level):
    # an f-string argument is not a constant: the loop is not a nest, the result still plain's
    a = np.array([1.0, np.nan])
    report = plain_run(raise_in_helper_position, a, level=level)
    assert not any("loop_nest" in g for g in report.ops_per_graph)


# -- flags constant for the nest -------------------------------------------------------------
def verbose_loop(a, verbose):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * a[i]
        if verbose:
            print("step", i)
    return s


def quiet_unless(a, out, quiet):
    for i in range(a.shape[0]):
        out[i] = a[i] + 1.0
        if not quiet:
            print("wrote", i, out[i])
    return out


def debug_global(a, out):
    for i in range(a.shape[0]):
        if DEBUG:
            print("i =", i)
        out[i] = a[i] * 3
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_a_false_flag_leaves_its_arm_out(level, resumes):
    a = np.arange(7.0)
    compiled(verbose_loop, a, False, level=level, resumes=resumes, breaks=1)
    compiled(quiet_unless, a, np.zeros(7), True, level=level, resumes=resumes)
    compiled(verbose_loop, np.zeros(0), False, level=level, resumes=resumes, breaks=1)


@pytest.mark.parametrize("first", [False, True])
@pytest.mark.parametrize("level", LEVELS)
def test_the_other_value_misses_and_captures_again(first, level, capsys):
    a = np.arange(5.0)
    jitted = pijit.jit(verbose_loop, jit_config={"jit_level": level})
    for v in (first, not first, first, not first):
        got = jitted(a, v)
        printed = capsys.readouterr().out
        want = verbose_loop(a, v)
        assert capsys.readouterr().out == printed
        assert type(got) is type(want) and got == want
        assert printed == ("".join(f"step {i}\n" for i in range(5)) if v else "")
    assert pijit.stats(jitted)["cache_misses"] == 2      # one entry per value, each guarded
    ops = pijit.explain(verbose_loop, a, False).ops_per_graph
    assert any("loop_nest" in g for g in ops)
    report = pijit.explain(verbose_loop, a, True)
    assert not any("loop_nest" in g for g in report.ops_per_graph)   # the arm is live


@pytest.mark.parametrize("flag", [False, True])
@pytest.mark.parametrize("level", LEVELS)
def test_a_global_flag_folds_its_branch(flag, level, resumes, monkeypatch):
    monkeypatch.setitem(globals(), "DEBUG", flag)
    a = np.arange(4.0)
    if flag:
        plain_run(debug_global, a, np.zeros(4), level=level)
    else:
        compiled(debug_global, a, np.zeros(4), level=level, resumes=resumes)
    jitted = pijit.jit(debug_global, jit_config={"jit_level": level})
    jitted(a, np.zeros(4))
    monkeypatch.setitem(globals(), "DEBUG", not flag)       # the guard on DEBUG misses
    out = np.zeros(4)
    jitted(a, out)
    assert list(out) == [0.0, 3.0, 6.0, 9.0]
    if not flag:                # the nest's entry assumed DEBUG is False
        assert pijit.stats(jitted)["cache_misses"] == 2


def int_flag(a, out, every):
    for i in range(a.shape[0]):
        out[i] = a[i]
        if every:
            out[i] += 1
    return out


def flips(a, out, on):
    for i in range(a.shape[0]):
        if on:
            out[i] = a[i]
        on = not on
    return out, on


@pytest.mark.parametrize("on", [False, True])
@pytest.mark.parametrize("level", LEVELS)
def test_a_flag_the_loop_assigns_stays_a_branch(on, level, resumes):
    compiled(flips, np.arange(5.0), np.zeros(5), on, level=level, resumes=resumes)


@pytest.mark.parametrize("specialize", [True, False])
def test_an_unspecialized_int_is_not_a_flag(specialize, resumes):
    # without specialize_scalar an int argument is not guarded by value: its branch stays a
    # branch of the kernel (the same entry serves 0 and 2)
    jitted = pijit.jit(int_flag, jit_config={"specialize_scalar": specialize})
    a = np.arange(5.0)
    for every in (0, 2, 0):
        out = np.zeros(5)
        jitted(a, out, every)
        assert list(out) == list(int_flag(a, np.zeros(5), every))
    assert pijit.stats(jitted)["cache_misses"] == (2 if specialize else 1)
    assert resumes == []
    assert all(e["ops"] == ["loop_nest"] for e in pijit.code_info(jitted)["entries"])


# -- locals bound to views -------------------------------------------------------------------
def row_loop(A):
    n = A.shape[0]
    out = np.zeros(n)
    for i in range(n):
        row = A[i]
        t = 0.0
        for j in range(row.shape[0]):
            t += row[j]
        out[i] = t
    return out


def row_len_write(A, B):
    for i in range(A.shape[0] - 1, -1, -1):
        src = A[i]
        dst = B[i, :]
        for j in range(len(src)):
            dst[j] = src[j] * 2
        i -= 1                      # the rows keep the index they were bound with
        dst[0] = src[-1]
    return B


def row_ops(A, out):
    for i in range(A.shape[0]):
        row = A[i]
        seg = row[1:-1]
        out[i] = seg.sum() + row @ row
    return out


def slice_dot(x, y, out):
    n = x.shape[0]
    for i in range(n):
        seg = x[:i]
        out[i] = seg @ y[n - i:]
    return out


def column_loop(A, out):
    for j in range(A.shape[1]):
        col = A[:, j]
        for i in range(col.shape[0]):
            if j % 2:
                out[j] += col[i]
            else:
                col[-1 - i] = out[j - 1]
    return out, A


def seg_elements(x, out, a, b, step):
    for i in range(out.shape[0]):
        seg = x[a + i:b:step]
        for j in range(len(seg)):
            out[i] = max(out[i], seg[j] // 2 + seg[-1 - j])
        if seg.shape[0] > 1:
            seg[-1] = seg[0]
    return out, x


def seg_past_its_end(x, out):
    for i in range(out.shape[0]):
        seg = x[i:i + 3]
        out[i] = seg[i]             # IndexError once i reaches the segment's length
    return out


@pytest.mark.parametrize("dtype", ["int16", "int64", "uint8", "float32", "float64"])
@pytest.mark.parametrize("level", LEVELS)
def test_elements_and_lengths_of_slices_bound_to_locals(dtype, level, resumes):
    x = (np.arange(30) * 7 % 13).astype(dtype)
    for a, b, step in ((0, 30, 1), (2, 25, 3), (28, 1, -2), (-5, 99, 1), (40, 50, 1)):
        compiled(seg_elements, x, np.zeros(6, dtype), a, b, step, level=level,
                 resumes=resumes)
    compiled(seg_elements, x[::-1], np.zeros(4, dtype), 1, -1, 2, level=level,
             resumes=resumes)
    same(seg_past_its_end, x, np.zeros(6, dtype), level=level)


def row_out_of_range(A, out, r):
    for i in range(out.shape[0]):
        row = A[i + r]              # IndexError at the binding, plain Python's line
        out[i] = row[0]
    return out


ROW_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "float32",
              "float64"]


def layouts(dtype):
    """C order, F order (rows not contiguous), rows walked backwards, a strided view."""
    base = (np.arange(42) * 5 % 17).astype(dtype).reshape(6, 7)
    return [base, np.asfortranarray(base), base[:, ::-1], base[::-1, ::2]]


@pytest.mark.parametrize("n", [0, 1, 5, 33])
@pytest.mark.parametrize("level", LEVELS)
def test_row_loop_is_one_nest(n, level, resumes):
    A = np.random.default_rng(n).standard_normal((n, n + 2))
    compiled(row_loop, A, level=level, resumes=resumes)
    compiled(row_loop, np.zeros((n, 0)), level=level, resumes=resumes)  # zero trips: t float


@pytest.mark.parametrize("dtype", ROW_DTYPES)
@pytest.mark.parametrize("level", LEVELS)
def test_row_views_of_every_dtype_and_layout(dtype, level, resumes):
    for A in layouts(dtype):
        if dtype == "float32":
            # t = 0.0 then t += row[j]: a float or an np.float32, two C types (not a nest)
            plain_run(row_loop, A, level=level)
        else:
            compiled(row_loop, A, level=level, resumes=resumes)
        compiled(row_len_write, A, np.zeros(A.shape, dtype), level=level, resumes=resumes)
        compiled(column_loop, A, np.zeros(A.shape[1], dtype), level=level, resumes=resumes)
        if dtype.startswith("float"):
            compiled(row_ops, A, np.zeros(A.shape[0], dtype), level=level, resumes=resumes)


@pytest.mark.parametrize("level", LEVELS)
def test_slices_bound_to_locals(level, resumes):
    x = np.random.default_rng(1).standard_normal(40)
    compiled(slice_dot, x, x[::-1].copy(), np.zeros(40), level=level, resumes=resumes)
    compiled(slice_dot, x[::-2], x[::2], np.zeros(20), level=level, resumes=resumes)


@pytest.mark.parametrize("r", [0, 2, 3, -6, -7])
@pytest.mark.parametrize("level", LEVELS)
def test_a_view_out_of_range_raises_at_its_binding(r, level):
    A = np.arange(15.0).reshape(5, 3)
    same(row_out_of_range, A, np.zeros(3), r, level=level)
    if r in (3, -7):
        jitted = pijit.jit(row_out_of_range, jit_config={"jit_level": level})
        with pytest.raises(IndexError) as info:
            jitted(A, np.zeros(3), r)
        assert traceback.extract_tb(info.tb)[-1].line == \
            "row = A[i + r]              # IndexError at the binding, plain Python's line"


def row_read_after(A):
    for i in range(A.shape[0]):
        row = A[i]
        row[0] = 1.0
    return row


def row_bound_twice(A, out):
    for i in range(A.shape[0]):
        row = A[i]
        if i % 2:
            row = A[0]
        out[i] = row[1]
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_what_a_view_alias_cannot_take_runs_as_before(level):
    A = np.arange(12.0).reshape(4, 3)
    for fn, args in ((row_read_after, (A,)), (row_bound_twice, (A, np.zeros(4)))):
        report = plain_run(fn, *args, level=level)
        assert not any("loop_nest" in g for g in report.ops_per_graph)


# -- the four ------------------------------------------------------------------------
def syrk2(A):
    n = A.shape[0]
    C = np.zeros((n, n))
    for i in range(n):
        C[i, :i+1] += A[i] @ A[:i+1].T
    return C


@pytest.mark.parametrize("n", [1, 4, 30])
@pytest.mark.parametrize("level", LEVELS)
def test_syrk2_stays_plain_pythons(n, level):
    plain_run(syrk2, np.random.default_rng(n).standard_normal((n, 3)), level=level)
