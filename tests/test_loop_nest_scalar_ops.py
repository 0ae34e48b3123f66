"""Every scalar operator of a loop nest (pijit/loopnest/lower_c.py) on edge operands, jitted ==
plain: Python ints (exact, any size), Python floats, NumPy int64 and float64 scalars.

The random nests (test_loop_nests_random) draw small operands, so rules that only matter at
the edges went untested: floor division of two negative ints, a left shift past int64, the
sign of a zero remainder. Here each operator runs over every pair of an edge set in one nest:
the pairs whose result the nest can hold run in one call (every result stored, compared bit
for bit, and the nest must not hand over to Python), and the pairs that raise, overflow the
output or leave int64 run one at a time after a good pair (the same exception at the same
element, the good pair's store kept), where the nest's checks must send them to Python.
"""
from __future__ import annotations

import math
import operator
import warnings

import numpy as np
import pytest

from pijit.loopnest.node import NestOp
from tests.differential import assert_same

# Operands the kernels compute without handing over to Python (with results in range)
CORE = {-1000003, -7, -2, -1, 0, 1, 2, 5, 7, 31, 1000003, -7.5, -2.0, -1.0, -0.0, 0.0, 1.0,
        2.0, 7.5}
INTS = [-2**63, -2**62 - 1, -1000003, -7, -2, -1, 0, 1, 2, 7, 1000003, 2**62, 2**63 - 1]
SHIFTS = [-1, 0, 1, 5, 31, 62, 63, 64, 70]
EXPONENTS = [0, 1, 2, 3, 10, 40, 63]     # constants: a computed int exponent is not captured
FLOATS = [-math.inf, -1e308, -7.5, -2.0, -1.0, -0.0, 0.0, 5e-324, 1.0, 2.0, 7.5, 1e308,
          math.inf, math.nan]

INT_OPS = {"//": operator.floordiv, "%": operator.mod, "<<": operator.lshift,
           ">>": operator.rshift, "+": operator.add, "-": operator.sub, "*": operator.mul,
           "&": operator.and_, "|": operator.or_, "^": operator.xor}
FLOAT_OPS = {"//": operator.floordiv, "%": operator.mod, "/": operator.truediv,
             "+": operator.add, "-": operator.sub, "*": operator.mul}

COMPARES = ["<", "<=", "==", "!=", ">", ">="]

SOURCE = """
def f(xs, ys, out, n):
    for i in range(n):
        x = {x}
        y = {y}
        out[i] = {expr}
"""


def nest(expr, x="xs[i]", y="ys[i]"):
    namespace = {"math": math}
    exec(compile(SOURCE.format(x=x, y=y, expr=expr), f"<loop nest: {expr}>", "exec"),
         namespace)
    return namespace["f"]


def right_operands(op):
    return SHIFTS if op in ("<<", ">>") else INTS


def core_right(op):
    """Right operands the kernels take without a hand-over: shift counts in [0, 62] (NumPy
    shifts by a negative or a 64+ count have their own rules: the kernel hands them over)."""
    return {0, 1, 5, 31} if op in ("<<", ">>") else None


def classify(fn, pairs, out_dtype):
    """(pairs whose result a loop stores into an out_dtype array, [(pair, kind of what it
    raises there)] for the others)."""
    good, bad = [], []
    for x, y in pairs:
        out = np.zeros(1, out_dtype)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")      # a warning is an edge case too
                out[0] = fn(x, y)
            good.append((x, y))
        except Exception as exc:
            bad.append(((x, y), (type(exc), str(exc)[:20])))
    return good, bad


@pytest.fixture
def handovers(monkeypatch):
    """The blocks at which the nests' C kernels handed over to Python, in order."""
    seen = []
    resume = NestOp.resume

    def counted(self, block, *state):
        seen.append(block)
        return resume(self, block, *state)
    monkeypatch.setattr(NestOp, "resume", counted)
    return seen


def run(f, pairs, dtype, out_dtype):
    xs = np.array([x for x, _ in pairs], dtype=dtype)
    ys = np.array([y for _, y in pairs], dtype=dtype)
    return assert_same(f, xs, ys, np.zeros(len(pairs), out_dtype), len(pairs),
                       ops=["loop_nest"])


def check(handovers, f, fn, pairs, dtype, out_dtype, x_of=lambda v: v, core_right=None,
          core_left=CORE):
    good, bad = classify(lambda x, y: fn(x_of(x), x_of(y)), pairs, out_dtype)
    core = [(x, y) for x, y in good if x in core_left and y in (core_right or CORE)
            and not (isinstance(x, float) and not math.isfinite(fn(x_of(x), x_of(y))))]
    assert core, "an edge set with no ordinary pair tests nothing"
    run(f, core, dtype, out_dtype)
    assert handovers == [], "the kernel handed ordinary operands over to Python"
    run(f, good, dtype, out_dtype)      # edge operands: the kernel may hand them over
    # one call per kind of failure: a good pair first, so its store must survive the raise
    seen = set()
    for pair, kind in bad:
        if kind in seen:
            continue
        seen.add(kind)
        run(f, [good[0], pair], dtype, out_dtype)


@pytest.mark.parametrize("op", list(INT_OPS))
def test_python_int_operators(op, handovers):
    pairs = [(x, y) for x in INTS for y in right_operands(op)]
    check(handovers, nest(f"x {op} y", "int(xs[i])", "int(ys[i])"), INT_OPS[op], pairs, np.int64,
          np.int64, int, core_right(op))


@pytest.mark.parametrize("e", EXPONENTS)
def test_python_int_power_by_constants(e, handovers):
    pairs = [(x, 0) for x in INTS]
    check(handovers, nest(f"x ** {e}", "int(xs[i])", "int(ys[i])"), lambda x, _: x ** e, pairs,
          np.int64, np.int64, int)


@pytest.mark.parametrize("op", list(INT_OPS))
def test_numpy_int64_operators(op, handovers):
    """np.int64 scalars: NumPy's wrap-around with its overflow warning, its errors."""
    pairs = [(x, y) for x in INTS for y in right_operands(op)]
    check(handovers, nest(f"x {op} y"), INT_OPS[op], pairs, np.int64, np.int64, np.int64,
          core_right(op))


@pytest.mark.parametrize("op", list(FLOAT_OPS))
def test_python_float_operators(op, handovers):
    pairs = [(x, y) for x in FLOATS for y in FLOATS]
    check(handovers, nest(f"x {op} y", "float(xs[i])", "float(ys[i])"), FLOAT_OPS[op], pairs,
          np.float64, np.float64, float)


@pytest.mark.parametrize("op", list(FLOAT_OPS))
def test_numpy_float64_operators(op, handovers):
    """np.float64 scalars: inf and nan with NumPy's warnings instead of Python's errors."""
    pairs = [(x, y) for x in FLOATS for y in FLOATS]
    check(handovers, nest(f"x {op} y"), FLOAT_OPS[op], pairs, np.float64, np.float64, np.float64)


@pytest.mark.parametrize("rel", COMPARES)
def test_int_compares(rel, handovers):
    """Two ints compared as int64 over every pair of INTS (2**62 and -2**63 are 0 in their
    low 32 bits: a comparison of truncated operands tells them from 0 wrongly), as NumPy
    int64 scalars and as Python ints, all in the kernel."""
    fn = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
          ">": operator.gt, ">=": operator.ge}[rel]
    pairs = [(x, y) for x in INTS for y in INTS]
    xs, ys = (np.array(v, dtype=np.int64) for v in zip(*pairs))
    assert len({fn(x, y) for x, y in pairs}) == 2
    for conv in ("xs[i]", "int(xs[i])"):
        f = nest(f"x {rel} y", conv, conv.replace("xs", "ys"))
        assert_same(f, xs, ys, np.zeros(len(pairs), np.bool_), len(pairs), ops=["loop_nest"])
    assert handovers == [], "the kernel handed ordinary ints over to Python"


@pytest.mark.parametrize("y", ["float(ys[i])", "ys[i] * 1.0"], ids=["float", "np.float64"])
@pytest.mark.parametrize("rel", COMPARES)
def test_mixed_int_float_compares(rel, y, handovers):
    """A Python int against a Python float, exact beyond 2**53 as Python compares them, and
    against an np.float64 (which NumPy compares after converting the int)."""
    big = [2**53, 2**53 + 1, -2**53 - 1, 2**63 - 1, 2**62 + 1, 3, -3]
    floats = [float(2**53), float(2**53 + 2), -float(2**53), 9.223372036854776e18, 3.0,
              -3.0, math.inf, math.nan]
    fn = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
          ">": operator.gt, ">=": operator.ge}[rel]
    f = nest(f"x {rel} y", "int(xs[i])", y)
    pairs = [(x, y) for x in big for y in floats]
    xs = np.array([x for x, _ in pairs], dtype=np.int64)
    ys = np.array([y for _, y in pairs], dtype=np.float64)
    want = [fn(int(x), float(v)) for x, v in zip(xs, ys)]
    assert len(set(want)) == 2
    assert_same(f, xs, ys, np.zeros(len(pairs), np.bool_), len(pairs), ops=["loop_nest"])


@pytest.mark.parametrize("src", ["int(xs[i])", "int(float(xs[i]))", "int(xs[i] * 0.5)"])
def test_int_of_floats(src, handovers):
    """int() of a float truncates toward zero; NaN raises ValueError, infinities and values
    past int64 give Python ints the int64 output cannot hold (OverflowError at the store)."""
    def fn(x, _):
        return int(x * 0.5) if "0.5" in src else int(x)
    pairs = [(x, 0.0) for x in FLOATS + [2.7, -2.7, 9.2e18, -9.3e18, 0.49]]
    check(handovers, nest(src), fn, pairs, np.float64, np.int64, np.float64)


def test_python_int_true_division(handovers):
    """int / int is correctly rounded in Python even past 2**53 (not (double)x / (double)y)."""
    pairs = [(x, y) for x in INTS + [2**53 + 1, 3 * 2**60 + 1] for y in INTS + [3, 2**53 + 1]]
    check(handovers, nest("x / y", "int(xs[i])", "int(ys[i])"), operator.truediv, pairs,
          np.int64, np.float64, int)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32])
@pytest.mark.parametrize("op", ["+", "-", "*", "//", "%"])
def test_numpy_narrow_int_operators(op, dtype, handovers):
    """NumPy scalars of a narrow dtype wrap around with NumPy's overflow warning."""
    info = np.iinfo(dtype)
    values = sorted(v for v in {info.min, info.min + 1, -7, -1, 0, 1, 2, 7, info.max - 1,
                                info.max} if info.min <= v <= info.max)
    pairs = [(x, y) for x in values for y in values]
    check(handovers, nest(f"x {op} y"), INT_OPS[op], pairs, dtype, dtype,
          lambda v: dtype(v))


@pytest.mark.parametrize("args", ["x, y", "y, x, y", "x, y, 0 * y, y"])
@pytest.mark.parametrize("fn", ["min", "max"])
@pytest.mark.parametrize("conv", ["float", "int"])
def test_min_max_keep_pythons_choice_on_ties_and_nan(fn, conv, args, handovers):
    """min/max return the first of equal operands (0.0 vs -0.0) and compare NaN as Python
    does (min(nan, 1.0) is nan, min(1.0, nan) is 1.0), over two arguments or more (compiled
    as a chain of two-operand ops)."""
    values = FLOATS if conv == "float" else INTS
    pairs = [(x, y) for x in values for y in values]
    dtype = np.float64 if conv == "float" else np.int64
    py = eval(f"lambda x, y: {fn}({args})")         # noqa: S307 - the test's own text
    check(handovers, nest(f"{fn}({args})", f"{conv}(xs[i])", f"{conv}(ys[i])"),
          py, pairs, dtype, dtype, {"float": float, "int": int}[conv])


@pytest.mark.parametrize("e", [2, 3, -1, -2, 0, 2.0, 0.5])
@pytest.mark.parametrize("conv", ["float", "np.float64"])
def test_float_power_by_constants(conv, e, handovers):
    """x ** e of a negative x and an integral constant e is C's pow, as CPython's and NumPy's
    (CPython: pow of |x|, negated for an odd e); a zero result hands over (NumPy's underflow
    flag), and so does a negative x with e = 0.5 (NumPy: nan and a warning; a Python float
    ** 0.5 is not compiled: a complex)."""
    if conv == "float" and e == 0.5:
        return
    pairs = [(x, 0.0) for x in FLOATS + [1e-200, -1e-200, 3.0, -3.0]]
    x = "float(xs[i])" if conv == "float" else "xs[i]"
    check(handovers, nest(f"x ** {e!r}", x), lambda v, _: v ** e, pairs, np.float64,
          np.float64, float if conv == "float" else np.float64,
          core_left=CORE - {0.0} if e != 0.5 else {v for v in CORE if isinstance(v, float)
                                                   and v > 0})


@pytest.mark.parametrize("fn", ["sqrt", "exp", "log", "sin", "cos", "tanh", "atan", "floor",
                                "ceil", "trunc"])
def test_math_functions_raise_where_python_raises(fn, handovers):
    """math.sqrt(-1.0) and math.log(0.0) raise ValueError, math.exp(1000.0) OverflowError,
    math.sin(inf) ValueError; NaN passes through. math.floor, ceil and trunc make Python
    ints: of 1e308 a big one, of NaN a ValueError, of inf an OverflowError."""
    pairs = [(x, 0.0) for x in FLOATS + [1000.0, -1000.0, 0.5]]
    check(handovers, nest(f"math.{fn}(x)", "float(xs[i])"), lambda x, _: getattr(math, fn)(x),
          pairs, np.float64, np.float64, float)


@pytest.mark.parametrize("level", ["O0", "O1"])
@pytest.mark.parametrize("expr", ["x + (-1) ** 200 + 10 * (-1) ** 201", "x + (-2) ** 200",
                                  "x - (-10) ** 40 // 10 ** 39"])
def test_negative_literal_base_of_an_unfolded_power(expr, level):
    """CPython folds no int power whose result may be large ((-1) ** 200, (-2) ** 200): the
    nest gets the negative literal as the base, and its Python form (the whole nest at O0,
    the rest after an int left int64 at O1) must keep it a literal: `-2 ** 200` is
    -(2 ** 200)."""
    xs = np.arange(100.0) % 7
    assert_same(nest(expr, "int(xs[i])"), xs, xs, np.zeros(100), 100, ops=["loop_nest"],
                jit_kwargs={"jit_config": {"jit_level": level}})


def nonfinite_constants(xs, out, n):
    for i in range(n):
        x = xs[i]
        if x > 3.0:
            out[i] = x - math.inf
        elif x > 1.0:
            out[i] = -math.nan + x
        else:
            out[i] = x + math.inf


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_nonfinite_constants(level):
    """math.inf and math.nan are constants of the nest; its Python form (the whole nest at
    O0) writes them as values, not as the names repr gives (`inf`, `nan`), and NaN's sign
    and payload by its bits."""
    xs = np.arange(100.0) % 5
    assert_same(nonfinite_constants, xs, np.zeros(100), 100, ops=["loop_nest"],
                jit_kwargs={"jit_config": {"jit_level": level}})
