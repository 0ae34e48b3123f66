"""NumPy float checks of a loop nest's C kernel that a later check covers, dropped
(pijit/loopnest/float_checks.py): a run of float operations checks once at its end, and a
hand-over there resumes at the run's first operation, so plain Python warns at the right
operation of the right iteration. Each case runs plain and jitted (results, partial writes,
warnings; one loop_nest node, explain) and counts the checks the kernel kept."""
from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.workloads import dtw_distance, forward_subst, iir_filter
from tests.differential import assert_same
from tests.test_loop_nests import resumes  # noqa: F401 - a fixture
from tests.test_loop_nests_checks import kernels  # noqa: F401 - a fixture

LEVELS = ["O0", "O1"]


def same(fn, *args, level="O1", breaks=0):
    return assert_same(fn, *args, ops=["loop_nest"], breaks=breaks,
                       jit_kwargs={"jit_config": {"jit_level": level}})


def float_ops(kernel, checked) -> list:
    """The kernel's NumPy float binops whose non-finite check it kept (or dropped)."""
    return [op for b in kernel.blocks for op in b.ops
            if op.kind == "binop" and op.domain[:1] == ("f",) and "py" not in op.domain
            and op.checked == checked]


@pytest.mark.parametrize("level", LEVELS)
def test_a_filter_checks_once_per_sample(level, resumes, kernels):
    x = np.random.default_rng(0).random(50)
    same(iir_filter, x, 0.5, 0.25, 0.1, level=level)
    if level == "O1":
        assert resumes == []
        (k,) = kernels
        # per copy of the loop: four of the five operations unchecked, the last checked
        assert len(float_ops(k, False)) == 4 * len(float_ops(k, True))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("where", ["first product", "sum", "last difference"])
def test_an_overflow_warns_at_its_operation(level, where, resumes):
    # iir_filter's yi = b0 * x[i] + b1 * prev_x - a1 * prev_y overflows at sample 3 (the
    # product, the sum) or 4 (the difference), the operations before it finite
    x, b0, b1, a1 = {
        "first product": ([0.5, 0.25, 1.0, 1e300, 2.0, 3.0], 1e10, 0.5, 0.1),
        "sum": ([0.5, 0.25, 1e308, 1e308, 2.0, 3.0], 1.0, 1.0, 0.0),
        "last difference": ([0.5, 0.25, 1.0, 1e308, 1e308, 3.0], 1.0, 0.0, -1.0)}[where]
    same(iir_filter, np.array(x), b0, b1, a1, level=level)
    if level == "O1":
        assert resumes


@pytest.mark.parametrize("level", LEVELS)
def test_forward_substitution(level, resumes, kernels):
    rng = np.random.default_rng(2)
    L = np.tril(rng.random((12, 12))) + 12 * np.eye(12)
    same(forward_subst, L, rng.random(12), level=level)
    L[7, 3] = 1e308                     # x[7]'s sum overflows: s += L[7, 3] * x[3]
    same(forward_subst, L, rng.random(12) + 1e3, level=level)
    if level == "O1":
        assert resumes
        assert float_ops(kernels[0], False)


def stored_between(a, k):
    s = np.float64(0.0)
    for i in range(a.shape[0]):
        t = a[i] * k
        a[i] = t                # Python resuming at the product would read inf here
        s = s + t
    return s


def rebound_factor(a, k):
    s = np.float64(0.0)
    for i in range(a.shape[0]):
        t = a[i] * k
        p = t
        k = -a[i]               # read by the product: Python resuming there would use it
        s = s + p
    return s


def divided(a, big):
    s = np.float64(0.0)
    for i in range(a.shape[0]):
        s = s + a[i] / (a[i] * big)      # a divisor's inf makes a finite quotient
    return s


@pytest.mark.parametrize("level", LEVELS)
def test_what_ends_a_run(level, resumes, kernels):
    a = np.array([1.0, 2.0, 1e300, 3.0])
    same(stored_between, a, 1e10, level=level)
    same(rebound_factor, a, 1e10, level=level, breaks=None)
    same(divided, a, 1e10, level=level)
    if level == "O1":
        assert resumes
        assert len(kernels) == 3
        for k in kernels:           # the product keeps its check
            assert [op for op in float_ops(k, True) if op.op == "mul"]


def floor_bins(x, counts, lo, width):
    for v in x:
        k = math.floor((v - lo) / width)
        if k >= counts.shape[0]:
            k = counts.shape[0] - 1
        counts[k] += 1


def sqrt_of_quotients(a, b):
    s = 0.0
    for i in range(a.shape[0]):
        s += math.sqrt(a[i] / b[i])
    return s


def float32_plus_int(a, n):
    out = np.zeros_like(a)
    for i in range(a.shape[0]):
        t = a[i] * a[i]
        u = t + n               # float32 + a Python int: checked against 2**24
        out[i] = u * a[i]
    return out


def float32_plus_constant(a):
    out = np.zeros_like(a)
    for i in range(a.shape[0]):
        out[i] = (a[i] * a[i] + 33554433) * a[i]
    return out


def float32_plus_small_constant(a):
    out = np.zeros_like(a)
    for i in range(a.shape[0]):
        out[i] = (a[i] * a[i] + 3) * a[i]
    return out


def float32_sum_of_constants(a):
    s = np.float32(0.0)
    for i in range(a.shape[0]):
        s = s + 33554433
    return s


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("case", ["finite", "zero width", "quotient overflows",
                                  "difference overflows", "nan", "past int64"])
def test_a_floor_checks_its_quotient(level, case, resumes, kernels):
    # math.floor((v - lo) / width) checks once, at the floor, which cannot convert a
    # non-finite quotient: it resumes at the subtraction, so Python warns at the right op
    # of element 5, the counts of elements 0-4 written
    x = np.random.default_rng(3).random(12)
    lo, width = 0.0, 0.125
    if case == "zero width":
        width = 0.0
    elif case == "quotient overflows":
        x[5], width = 1e300, 1e-10
    elif case == "difference overflows":
        x[5], lo = 1.5e308, -1.5e308
    elif case == "nan":
        x[5] = np.nan
    elif case == "past int64":             # a big Python int, clamped: no exception
        x[5], width = 1e30, 0.125
    counts = np.zeros(8, dtype=np.int64)
    same(floor_bins, x, counts, lo, width, level=level)
    if level == "O1":
        assert bool(resumes) == (case != "finite")
        (k,) = kernels
        ops = [op for b in k.blocks for op in b.ops]
        divs = [op for op in ops if op.kind == "binop" and op.op == "truediv"]
        floors = [op for op in ops if op.kind == "call" and op.op == "floor"]
        subs = [(b.id, op) for b in k.blocks for op in b.ops
                if op.kind == "binop" and op.op == "sub" and op.domain[:1] == ("f",)]
        assert divs and not any(op.checked for op in divs)
        assert {op.resume for op in floors} == {k.origin.get(b, b) for b, _ in subs}


@pytest.mark.parametrize("level", LEVELS)
def test_a_math_call_checks_its_argument(level, resumes, kernels):
    a = np.array([1.0, 4.0, 9.0, 2.0, 3.0])
    b = np.array([1.0, 2.0, 0.0, 1.0, 1.0])     # 9 / 0 warns, sqrt(inf) hands over
    same(sqrt_of_quotients, a, np.ones(5), level=level)
    same(sqrt_of_quotients, a, b, level=level)
    if level == "O1":
        assert resumes
        divs = [op for k in kernels for b in k.blocks for op in b.ops
                if op.kind == "binop" and op.op == "truediv"]
        assert divs and not any(op.checked for op in divs)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn, n", [(float32_plus_int, 3), (float32_plus_int, 2**25),
                                   (float32_plus_constant, None), (float32_sum_of_constants, None),
                                   (float32_plus_small_constant, None)])
def test_a_float32_op_with_a_python_int_keeps_its_check(level, fn, n, kernels):
    # float32 would round an int beyond 2**24: the kernel hands over at such an op (its own
    # block), so it is no member of a run and no loop's accumulator (a later check covering
    # it would leave an unchecked op's hand-over, resuming after the product before it
    # whose overflow nothing caught). Before, a constant there made C that did not lower.
    args = () if n is None else (n,)
    same(fn, np.array([1e30, 2.0, 3.0], dtype=np.float32), *args, level=level)
    same(fn, np.array([2.0, 1e30, 3.0], dtype=np.float32), *args, level=level)
    if level == "O1":
        assert kernels
        for k in kernels:       # the sum ends the product's run (but for a small constant)
            unchecked = float_ops(k, False)
            assert unchecked if fn is float32_plus_small_constant else unchecked == []


def versioned_ops(kernel, kind, op) -> list:
    """(block, op) of the kernel's ops of a kind and name in the copy of its loops whose
    loads bounds.py proved in range (where no load ends a run)."""
    fast = {b.id for b in kernel.blocks if any(o.kind == "load" and not o.checked
                                               for o in b.ops)}
    lo = min(fast)
    return [(b.id, o) for b in kernel.blocks if b.id >= lo and b.term[0] != "select"
            for o in b.ops if o.kind == kind and o.op == op]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("case", ["finite", "nan", "inf", "inf - inf", "overflow"])
def test_dtw_checks_once_per_cell(level, case, resumes, kernels):
    # cost = abs(a[i - 1] - b[j - 1]); D[i, j] = cost + min(three neighbours): abs keeps a
    # difference not finite, the float mins hand over in no C, so the sum's check covers the
    # difference and resumes at it; Python then warns at the subtraction of cell (6, j)
    rng = np.random.default_rng(5)
    a, b = rng.random(9), rng.random(11)
    a[5], b[4] = {"finite": (a[5], b[4]), "nan": (np.nan, b[4]), "inf": (a[5], -np.inf),
                  "inf - inf": (np.inf, np.inf), "overflow": (1.5e308, -1.5e308)}[case]
    same(dtw_distance, a, b, level=level)
    if level == "O1":
        assert bool(resumes) == (case != "finite")
        (k,) = kernels
        subs = [(bid, op) for bid, op in versioned_ops(k, "binop", "sub")
                if op.domain[:1] == ("f",)]
        adds = [op for _, op in versioned_ops(k, "binop", "add") if op.domain[:1] == ("f",)]
        assert subs and not any(op.checked for _, op in subs)
        assert adds and all(op.checked for op in adds)
        assert {op.resume for op in adds} == {k.origin.get(bid, bid) for bid, _ in subs}


def negated(a, k):
    out = np.zeros_like(a)
    for i in range(a.shape[0]):
        out[i] = -(a[i] * k) + 1.0
    return out


def max_between(a, b, k):
    out = np.zeros_like(a)
    for i in range(a.shape[0]):
        t = a[i] * k
        out[i] = t + max(b[i], 0.5)     # a float max between the product and the sum
    return out


def min_between(a, b, n):
    out = np.zeros_like(a)
    for i in range(a.shape[0]):
        t = a[i] * 1e10
        out[i] = t + min(b[i], n)       # an int n: C would check it exact in a double
    return out


def min_of_product(a, b):
    out = np.zeros_like(a)
    for i in range(a.shape[0]):
        out[i] = min(a[i] * 1e10, 1.0) + b[i]   # min(inf, 1.0) is 1.0: the product checks
    return out


def gathered(a, b, idx):
    out = np.zeros_like(a)
    for i in range(a.shape[0]):
        t = a[i] * 1e10
        out[i] = t + b[idx[i]]          # the load hands over: Python resumes at it
    return out


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("big", [False, True])
def test_what_a_run_goes_through(level, big, resumes, kernels):
    # -x keeps a product's overflow, a max of floats hands over in no C: the sum checks
    # it. min(x, 1.0) of an infinite x is finite, and a min of an int may hand over (for one
    # beyond 2**53, though the kernel's entry keeps n exact), as does a load: the product
    # keeps its check
    rng = np.random.default_rng(6)
    a, b = rng.random(40), rng.random(40)
    if big:
        a[17] = 1e300
    same(negated, a, 1e10, level=level)
    same(max_between, a, b, 1e10, level=level)
    same(min_of_product, a, b, level=level)
    same(min_between, a, b, 3, level=level)
    if level == "O1":
        assert bool(resumes) == big
    idx = np.arange(40)
    idx[17] = 40                        # IndexError where the product may overflow
    same(gathered, a, b, idx, level=level)
    if level == "O1":
        products = [[op for _, op in versioned_ops(k, "binop", "mul")] for k in kernels]
        assert [{op.checked for op in ops} for ops in products] == \
            [{False}, {False}, {True}, {True}, {True}]
