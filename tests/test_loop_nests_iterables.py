"""Loop nests over iterables other than range (pijit/loopnest/recognise.py's iterators):
`for x in a` over a 1-D array, `enumerate(x[, start])`, `zip(x, y[, z])` of arrays and
ranges, and `for row in A` over a 2-D array read as row[j], at any nesting level. Each is
compared with plain Python bit for bit (results, mutated arrays, exceptions, warnings) and
captured as one graph with a loop_nest node; at O1 `resumes` proves the C kernel ran the
nest (see test_loop_nests.py)."""
from __future__ import annotations

import numpy as np
import pytest

import pijit
from pijit.loopnest import node as nest_node
from tests.differential import assert_same
from tests.test_loop_nests import LEVELS, compiled, resumes, same  # noqa: F401 (a fixture)

DTYPES = ["int8", "int32", "int64", "uint8", "float32", "float64", "bool"]


def values(n, dtype):
    if dtype == "bool":
        return np.arange(n) % 3 == 1
    return (np.arange(n) * 7 % 11).astype(dtype)


# -- the forms, over every dtype -------------------------------------------------------------
def each_element(a, out, x):
    n = 0
    for x in a:
        out[n] = x
        n += 1
    return x, n, out            # x: the last element (a zero-trip loop leaves the argument)


def each_enumerated(a, out, start, x):
    i = -7
    for i, x in enumerate(a, start):
        out[i - start] = x
    return i, x, out


def each_enumerated_from_zero(a, out):
    i = -1
    for i, x in enumerate(a):
        if x:
            out[i] = x
    return i, out


def each_zipped(a, b, outa, outb, x, y):
    n = m = 0
    for x, y, k in zip(a, b, range(10, 0, -1)):
        outa[n] = x
        outb[n] = y
        n += 1
        m += k
    return x, y, n, m, outa, outb


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("level", LEVELS)
def test_each_form_over_every_dtype(dtype, level, resumes):
    a = values(7, dtype)
    b = values(5, "float32" if dtype != "float32" else "int8")
    first = a.dtype.type(1)
    compiled(each_element, a, np.zeros(7, dtype), first, level=level, resumes=resumes)
    compiled(each_enumerated, a, np.zeros(7, dtype), 3, first, level=level, resumes=resumes)
    compiled(each_enumerated_from_zero, a, np.zeros(7, dtype), level=level, resumes=resumes)
    compiled(each_zipped, a, b, np.zeros(7, dtype), np.zeros(7, b.dtype), first,
             b.dtype.type(0), level=level, resumes=resumes)


def test_the_element_is_the_numpy_scalar_plain_iteration_yields():
    for dtype in DTYPES:
        a = values(3, dtype)
        got = pijit.jit(each_element, jit_config={"adaptive": False})(
            a, np.zeros(3, dtype), a.dtype.type(0))[0]
        assert type(got) is type(next(iter(a))) and got == a[-1]


@pytest.mark.parametrize("level", LEVELS)
def test_zero_trips_leave_the_loop_variables(level, resumes):
    empty = np.zeros(0, np.int32)
    compiled(each_element, empty, np.zeros(0, np.int32), np.int32(5), level=level,
             resumes=resumes)
    compiled(each_enumerated, empty, np.zeros(0, np.int32), 2, np.int32(5), level=level,
             resumes=resumes)
    compiled(each_zipped, np.arange(4.0), np.zeros(0, np.float32), np.zeros(4),
             np.zeros(4, np.float32), 1.5, np.float32(2), level=level, resumes=resumes,
             breaks=1)            # x: the float 1.5 or an np.float64 after the loop


def enumerated_range(n, out):
    last = -1
    for k, r in enumerate(range(3, n, 2), 1):
        out[k] = r * 10 + k
        last = k
    return last, out


@pytest.mark.parametrize("level", LEVELS)
def test_enumerate_of_a_range(level, resumes):
    compiled(enumerated_range, 12, np.zeros(6, np.int64), level=level, resumes=resumes)
    compiled(enumerated_range, 3, np.zeros(6, np.int64), level=level, resumes=resumes)


def enumerated_near_int64(a, start):
    last = 0
    for i, x in enumerate(a, start):
        last = i * 2 + int(x)           # past int64 at the last elements: Python's ints
    return last


def enumerate_start_reassigned(a, out, s):
    for i, x in enumerate(a, s):
        out[i - 2] = x + s              # enumerate read s once: i counts from its old value
        s += 1
    return s, out


@pytest.mark.parametrize("level", LEVELS)
def test_enumerate_counts_from_its_start_exactly(level, resumes):
    # the counter is the element's index plus the start (one induction variable): its add
    # hands over where it leaves int64, and the start is the value enumerate was given
    a = np.arange(5, dtype=np.int64)
    same(enumerated_near_int64, a, 2**62 - 3, level=level)
    same(enumerated_near_int64, a, 2**63 - 3, level=level)
    assert level == "O0" or resumes
    del resumes[:]
    compiled(enumerate_start_reassigned, np.arange(4.0), np.zeros(4), 2, level=level,
             resumes=resumes)


def test_enumerate_of_an_array_indexes_without_checks(monkeypatch):
    # i is the array's index: the stores out[i] of a versioned loop skip their bounds checks
    # (a counter of its own left them checked, and gcc laid the loop out 2x slower)
    from pijit.loopnest.lower_c import NestKernel
    captured = []
    original = nest_node.NestOp.__init__

    def spy(self, nest, *args):
        captured.append(nest)
        original(self, nest, *args)
    monkeypatch.setattr(nest_node.NestOp, "__init__", spy)
    pijit.jit(each_enumerated_from_zero, jit_config={"adaptive": False})(
        np.arange(6.0), np.zeros(6))
    blocks = NestKernel(captured[0]).blocks
    assert any(op.kind == "store" and not op.checked for b in blocks for op in b.ops)


# -- break, continue, nesting ------------------------------------------------------------------
def first_above(a, t):
    found = -1
    for i, x in enumerate(a):
        if x < 0:
            continue
        if x > t:
            found = i
            break
    return found


def zipped_until(a, b, t):
    s = 0.0
    for x, y in zip(a, b):
        if x == y:
            continue
        s += float(x) * float(y)
        if s > t:
            break
    return s


def elements_skipping(a):
    n = 0
    for x in a:
        if x % 3 == 0:
            continue
        if x > 40:
            break
        n += int(x)
    return n


def stop_at_the_first_big(a, b, i, x, y):
    for i, (x, y) in enumerate(zip(a, b)):
        if x + y > 5:
            break
    return i, x, y              # at the break, or after the last trip


@pytest.mark.parametrize("level", LEVELS)
def test_break_and_continue(level, resumes):
    a, b = np.arange(6, dtype=np.int32), np.arange(0.0, 3.0, 0.5)
    compiled(stop_at_the_first_big, a, b, -1, np.int32(-1), -1.5, level=level,
             resumes=resumes, breaks=1)     # y: -1.5 or an np.float64
    compiled(stop_at_the_first_big, a, -b, -1, np.int32(-1), np.float64(-1.5),
             level=level, resumes=resumes)  # never breaks
    a = np.array([0.5, -1.0, 0.25, 2.0, 3.0, -4.0])
    compiled(first_above, a, 1.0, level=level, resumes=resumes)
    compiled(first_above, a, 9.0, level=level, resumes=resumes)         # never breaks
    compiled(zipped_until, a, a[::-1].copy(), 2.0, level=level, resumes=resumes)
    compiled(zipped_until, a, a, 2.0, level=level, resumes=resumes)     # always continues
    compiled(elements_skipping, np.arange(50, dtype=np.int16), level=level, resumes=resumes)


# -- returns from inside the loop: the nest hands back the function's result ---------------
def index_of(a, x):
    for i in range(a.shape[0]):
        if a[i] == x:
            return i
    return -1


def flat_index_of(A, x):
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            if A[i, j] == x:
                return i * A.shape[1] + j       # from the inner loop of two
    return -1


def any_above(a, t):
    for x in a:
        if x > t:
            return True                         # 3.12+: RETURN_CONST, in and after the loop
    return False


def doubled_until_negative(a, out):
    for i in range(a.shape[0]):
        out[i] = a[i] * 2.0                     # the writes before the return stay
        if a[i] < 0:
            return i
    return a.shape[0]


def halvings(x, limit):
    k = 0
    while x > limit:
        x = x / 2
        k += 1
        if k > 20:
            return -k
    return k


def product_until(a, t):
    s = a[0] * 0.0 + 1.0
    for x in a:
        s = s * x                               # overflows (warns) midway: Python goes on
        if s > t:
            return s
    return s


@pytest.mark.parametrize("level", LEVELS)
def test_returns_from_inside_the_loop(level, resumes):
    a = np.array([0.5, -1.0, 0.25, 2.0, 3.0, -4.0])
    for x in (2.0, 7.0):
        compiled(index_of, a, x, level=level, resumes=resumes)
        compiled(flat_index_of, a.reshape(2, 3), x, level=level, resumes=resumes)
        compiled(any_above, a.astype(np.float32), x, level=level, resumes=resumes)
    compiled(doubled_until_negative, a, np.zeros(6), level=level, resumes=resumes)
    compiled(doubled_until_negative, abs(a), np.zeros(6), level=level, resumes=resumes)
    compiled(halvings, 1e3, 1.0, level=level, resumes=resumes)
    compiled(halvings, 1e30, 1.0, level=level, resumes=resumes)
    same(doubled_until_negative, abs(a), np.zeros(3), level=level)     # IndexError at i=3
    same(product_until, np.array([1e200, 1e200, 2.0]), 1e300, level=level)   # warns


def enumerate_in_range(a, out):
    for r in range(out.shape[0]):
        for k, x in enumerate(a, r):
            out[r, k - r] = x * k
    return out


def zip_in_elements(a, b, c):
    t = 0.0
    for w in c:
        for x, y in zip(a, b):
            t += float(w) * float(x - y)
    return t


def rows_and_elements(A, w):
    out = np.zeros(A.shape[0])
    for i, row in enumerate(A):
        t = 0.0
        for x, v in zip(row, w):
            t += float(x) * v
        out[i] = t + len(row)
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_nesting(level, resumes):
    compiled(enumerate_in_range, np.arange(5.0), np.zeros((4, 5)), level=level,
             resumes=resumes)
    compiled(zip_in_elements, np.arange(6.0), np.arange(6.0)[::-1].copy(),
             np.array([1, -2, 3], np.int8), level=level, resumes=resumes)
    compiled(rows_and_elements, np.arange(12.0).reshape(3, 4), np.array([0.5, -1.0, 2.0]),
             level=level, resumes=resumes)


# -- views by index -----------------------------------------------------------------------------
def horner_prefix(coef, xs, k, out):
    for j in range(xs.shape[0]):
        p = 0.0
        for c in coef[:k]:          # the view made once: k changing later does not move it
            p = p * xs[j] + c
            k = 1
        out[j] = p
    return out


def views_of_rows(A, out):
    for i in range(A.shape[0]):
        t = 0.0
        for m, x in enumerate(A[i, 1::2], 1):
            t += x * m
        for x in A[:, i]:           # a column
            t -= x
        for x in A[i][::-1]:        # backwards
            t = t * 0.5 + x
            A[i, 0] = t             # seen by the next step's read (the view's element)
        out[i] = t
    return out


def view_at_a_bad_row(A, out, rows):
    for r in range(rows):
        s = 0
        for x in A[r, 2:]:          # IndexError at the row past the end
            s += x
        out[r] = s
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_iterating_over_views(level, resumes):
    coef = np.array([1.0, -2.0, 0.5, 3.0, -0.25])
    for k in (0, 3, 5, 9, -2):
        compiled(horner_prefix, coef, np.array([0.5, -1.5, 2.0]), k, np.zeros(3),
                 level=level, resumes=resumes)
    compiled(views_of_rows, np.arange(20.0).reshape(4, 5), np.zeros(4), level=level,
             resumes=resumes)
    A = np.arange(12, dtype=np.int32).reshape(3, 4)
    compiled(view_at_a_bad_row, A, np.zeros(3, np.int64), 3, level=level, resumes=resumes)
    same(view_at_a_bad_row, A, np.zeros(4, np.int64), 4, level=level)


# -- writes into the iterated array ----------------------------------------------------------
def smear(a):
    i = 0
    for x in a:                 # reads a[i] at each step: it sees the write of the step before
        if i + 1 < a.shape[0]:
            a[i + 1] += x
        i += 1
    return a


def smear_enumerated(a):
    for i, x in enumerate(a):
        if i + 1 < len(a):
            a[i + 1] = a[i + 1] + x * 0.5
    return a


def zip_with_itself(a):
    for x, y in zip(a, a):
        a[-1] = x + y           # zip reads the last element after this write
    return a


@pytest.mark.parametrize("level", LEVELS)
def test_a_write_into_the_iterated_array_is_seen(level, resumes):
    compiled(smear, np.arange(1, 9, dtype=np.int64), level=level, resumes=resumes)
    compiled(smear_enumerated, np.linspace(0, 1, 9), level=level, resumes=resumes)
    compiled(zip_with_itself, np.arange(5.0), level=level, resumes=resumes)


# -- bail-outs mid-loop ------------------------------------------------------------------------
def hash_elements(a):
    h = 0
    for x in a:
        h = h * 1000003 + int(x)
    return h


def divide_enumerated(a, out, pivot):
    for i, x in enumerate(a):
        out[i] = 100 // (int(x) - pivot)
    return out


def zipped_hash(a, b):
    h = 0
    for x, k in zip(a, range(len(b))):
        h = h * 1000003 + int(x) + int(b[k])
    return h


def counter_past_int64(a, start):
    last = 0
    for i, x in enumerate(a, start):
        last = i - int(x)
    return last


@pytest.mark.parametrize("level", LEVELS)
def test_bail_outs_resume_at_the_right_iteration(level, resumes):
    a = np.arange(40, dtype=np.uint8)
    same(hash_elements, a, level=level)
    assert hash_elements(a) > 2**200
    same(zipped_hash, a, a[::-1].copy(), level=level)
    same(counter_past_int64, np.arange(8, dtype=np.int32), 2**63 - 3, level=level)
    assert counter_past_int64(np.arange(8, dtype=np.int32), 2**63 - 3) == 2**63 + 4 - 7
    if level == "O1":
        assert resumes and min(resumes) >= 0        # the kernel handed over mid-loop
    same(divide_enumerated, np.arange(10, dtype=np.int32), np.zeros(10, np.int32), 5,
         level=level)                               # ZeroDivisionError at i=5, out[:5] written


@pytest.mark.parametrize("level", LEVELS)
def test_traceback_points_at_the_users_line(level):
    jitted = pijit.jit(divide_enumerated, jit_config={"jit_level": level, "adaptive": False})
    with pytest.raises(ZeroDivisionError) as info:
        jitted(np.arange(10, dtype=np.int32), np.zeros(10, np.int32), 5)
    last = info.traceback[-1]
    assert last.path.name == "test_loop_nests_iterables.py"
    assert last.statement.lines[0].strip() == "out[i] = 100 // (int(x) - pivot)"


# -- arrays no local holds ------------------------------------------------------------------
def max_of_the_rest(a):
    m = a[0]
    for x in a[1:]:
        if x > m:
            m = x
    return m


class Buffer:
    def __init__(self, data):
        self.data = data

    def total(self, out):
        k = 0
        for x in self.data:
            out[k] = x * 2
            k += 1
        return out


def every_other_row(A):
    t = 0
    for row in A[::2]:
        t += int(row[1])
        row[0] = t              # a write through a view of A
    return t, A


def smear_a_view(a):
    i = 1
    for x in a[1:]:             # the view's iterator sees the write into a
        if i + 1 < a.shape[0]:
            a[i + 1] += x
        i += 1
    return a


@pytest.mark.parametrize("level", LEVELS)
def test_an_array_no_local_holds(level, resumes):
    compiled(max_of_the_rest, np.array([0.5, 2.0, -1.0, 3.5, 3.0]), level=level,
             resumes=resumes)
    compiled(Buffer(np.arange(5, dtype=np.int16)).total, np.zeros(5, np.int16), level=level,
             resumes=resumes)
    compiled(every_other_row, np.arange(14).reshape(7, 2), level=level, resumes=resumes)
    compiled(smear_a_view, np.arange(1.0, 8.0), level=level, resumes=resumes)


# -- rows of a 2-D array ---------------------------------------------------------------------
def scale_rows(A, out):
    i = 0
    for row in A:
        t = 0.0
        for j in range(len(row)):
            row[j] = row[j] * 2
            t += float(row[j])
        out[i] = t
        i += 1
    return out, A


def row_out_of_bounds(A):
    k = 0
    for row in A:
        row[k + 1] = row[k] + 1.0       # IndexError at the middle row, naming axis 0
        k += 1
    return A


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64"])
@pytest.mark.parametrize("level", LEVELS)
def test_rows(dtype, level, resumes):
    A = np.arange(12).reshape(3, 4).astype(dtype)
    compiled(scale_rows, A, np.zeros(3), level=level, resumes=resumes)
    compiled(scale_rows, np.zeros((0, 4), dtype), np.zeros(0), level=level, resumes=resumes)
    same(row_out_of_bounds, np.arange(15.0).reshape(5, 3), level=level)


# -- what stays as before ----------------------------------------------------------------------
def row_as_an_array(A):
    t = 0.0
    for row in A:
        t += row.max()                  # an array method the nest does not have
    return t


def row_after_the_loop(A):
    row = A[0]
    for row in A:
        row[0] = 1.0
    return row


def strict_zip(a, b):
    t = 0.0
    for x, y in zip(a, b, strict=True):
        t += float(x * y)
    return t


def over_a_list(xs, a):
    for x in xs:
        a[0] += x
    return a


def float_start(a):
    t = 0
    for i, x in enumerate(a, 1.5):
        t += i
    return t


def rebinds_the_array(a, b):
    t = 0.0
    for x in a:                 # the iterator keeps the first array
        t += float(x)
        a = b
    return t, a


def three_d(a):
    n = 0
    for x in a:
        n += 1
    return n


def comprehensions(a):
    # on 3.11 a comprehension's loop runs over the iterator its function was given (`for i
    # in .0`: no GET_ITER in the region); 3.12 inlines it (PEP 709)
    rows = [a[i] * 2 for i in range(a.shape[0])]
    return np.stack(rows).sum(axis=0)


def test_what_a_nest_cannot_take_runs_as_before():
    A = np.arange(6.0).reshape(2, 3)
    for fn, args in ((row_as_an_array, (A,)), (row_after_the_loop, (A,)),
                     (strict_zip, (np.arange(3.0), np.arange(4.0))),
                     (over_a_list, ([1.0, 2.0], np.zeros(2))),
                     (float_start, (np.arange(3.0),)),
                     (rebinds_the_array, (np.arange(3.0), np.zeros(5))),
                     (three_d, (np.zeros((2, 2, 2)),)),
                     (comprehensions, (np.arange(6.0).reshape(3, 2),))):
        report = assert_same(fn, *args, graphs=None, breaks=None)
        assert not any("loop_nest" in ops for ops in report.ops_per_graph), fn.__name__
