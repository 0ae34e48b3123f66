"""Real-style programs that pijit got wrong or crashed on (issue hunt44): each runs plain
and jitted (differential.assert_same: results, mutated inputs, printed output, warnings,
exceptions) at O0 and O1, and how the jitted call ran is asserted, so a fallback to plain
Python cannot pass."""
import math

import numpy as np
import pytest

from differential import assert_same

LEVELS = ["O0", "O1"]


def _config(level):
    return {"jit_config": {"jit_level": level, "adaptive": False}}


def _break_reasons(report):
    return [b["reason"].split(":")[0] for b in report.break_reasons]


# -- a try or with block inside a loop ------------------------------------------------------
# Capture stops at the block's TryBegin (or BEFORE_WITH), and such a break's residual code
# runs to the function's end. Started inside a loop, that span held the loop's jump back to
# its head, a label outside the copied span: building the code failed (KeyError on a Label)
# and the whole function ran as plain Python with an "internal error" warning. The loop now
# runs as residual code from its head, as a loop with any other break does.

def reciprocals_or_minus_one(a):
    scale = a * 2
    out = []
    for v in a:
        try:
            out.append(10 // int(v))
        except ZeroDivisionError:
            out.append(-1)
    return out, scale


def safe_sqrt(x):
    out = np.empty_like(x)
    for i, v in enumerate(x):
        try:
            if v < 0:
                raise ValueError("negative")
            out[i] = math.sqrt(v)
        except ValueError as e:
            out[i] = np.nan
            print("bad", i, e)
    return out * 2


class Recorder:
    def __init__(self):
        self.log = []

    def __enter__(self):
        self.log.append("in")
        return self

    def __exit__(self, *exc):
        self.log.append("out")
        return False


def with_in_loop(x, rec):
    total = x.sum()
    for v in x:
        with rec:
            total = total + v * 2
    return total, rec.log


@pytest.mark.parametrize("level", LEVELS)
def test_try_except_in_a_loop(level):
    report = assert_same(reciprocals_or_minus_one, np.array([1, 0, 2]), graphs=1, breaks=1,
                         ops=["mul"], jit_kwargs=_config(level))
    assert _break_reasons(report) == ["exception handling"]


@pytest.mark.parametrize("level", LEVELS)
def test_raise_and_print_in_a_loops_try_block(level):
    report = assert_same(safe_sqrt, np.array([1.0, -1.0, 4.0, -0.0]), graphs=None, breaks=1,
                         jit_kwargs=_config(level))
    assert _break_reasons(report) == ["exception handling"]


@pytest.mark.parametrize("level", LEVELS)
def test_with_block_in_a_loop(level):
    report = assert_same(with_in_loop, np.array([1.0, -0.0, 3.0]), Recorder(), graphs=1,
                         breaks=1, ops=["sum"], jit_kwargs=_config(level))
    assert _break_reasons(report) == ["exception handling"]


def log_or_minus_one(M):
    out = M * 0
    for i in range(M.shape[0]):
        for j in range(M.shape[1]):
            try:
                out[i, j] = math.log(M[i, j])
            except ValueError:
                out[i, j] = -1
    return out


def reciprocal_sum_with_finally(x):
    seen = []
    s = x.sum()
    for v in x:
        try:
            if v < 0:
                break
            if v == 0:
                continue
            s += 1 / v
        finally:
            seen.append(float(v))
    return s, seen


def fill_until_index_error(x):
    i = 0
    acc = x * 0
    while i < 5:
        try:
            acc[i] = x[i] * 3
        except IndexError as e:
            print("stop", e)
            break
        finally:
            i += 1
    return acc, i


@pytest.mark.parametrize("fn, arg", [
    (log_or_minus_one, np.arange(6.0).reshape(2, 3) - 2),
    (reciprocal_sum_with_finally, np.array([1.0, 0.0, 2.0, -1.0, 4.0])),
    (fill_until_index_error, np.array([1.0, -0.0]))])
def test_try_blocks_in_a_loop(fn, arg):
    report = assert_same(fn, arg, graphs=1, breaks=1, jit_kwargs=_config("O1"))
    assert _break_reasons(report) == ["exception handling"]


# -- ** of a NumPy float scalar -------------------------------------------------------------
# np.float64(x) ** e is NumPy's scalar math: C's pow (np.float64(-0.0) ** 0.5 is 0.0, and
# pow(x, 2.0) is within 0.52 ulp of x*x, not always equal). The fused C kernel rendered it as
# power's loop over arrays does: sqrt for ** 0.5 (-0.0), x*x for ** 2, 1/x for ** -1, and
# NumPy's SIMD loop for other exponents. Each input below is one where the two differ.

SCALAR_POW_CASES = [(0.5, [-0.0, 5.902893458566169, -np.inf]), (2.0, [9.62758541716221]),
                    (2, [5.384848373059271]), (-1.0, [2.2593749989122838]),
                    (1.7, [3.1183145201048545, 0.623495791498756])]


def powers_of_items(x, e):
    return [x[i] ** e for i in range(len(x))]


def powers_in_a_loop(x, e):
    out = np.empty_like(x)
    for i in range(len(x)):
        out[i] = x[i] ** e
    return out


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("e, values", SCALAR_POW_CASES)
def test_numpy_scalar_power_is_scalar_math(level, e, values):
    x = np.array(values)
    with np.errstate(all="ignore"):
        scalar = np.array([v ** e for v in x])
        assert scalar.tobytes() != np.power(x, e).tobytes()    # the inputs tell them apart
    assert_same(powers_of_items, x, e, graphs=1, breaks=0, ops=["pow"],
                jit_kwargs=_config(level))


@pytest.mark.parametrize("e, values", SCALAR_POW_CASES)
def test_numpy_scalar_power_in_a_loop_body(e, values):
    x = np.array(values * 120)
    report = assert_same(powers_in_a_loop, x, e, graphs=1, breaks=0, jit_kwargs=_config("O1"))
    assert [op for ops in report.ops_per_graph for op in ops if op.startswith("loop")]


def test_float32_scalar_power():
    x = np.array([-0.0, 2.5, 7.1], dtype=np.float32)
    assert_same(powers_of_items, x, 0.5, graphs=1, breaks=0, ops=["pow"],
                jit_kwargs=_config("O1"))


# -- ** in a loop nest ----------------------------------------------------------------------
# CPython's float ** and NumPy's scalar math call C's pow; the nest's C called pow with the
# exponent a constant, which gcc folds: pow(x, 2.0) into x*x and pow(x, -1.0) into 1/x,
# correctly rounded where pow is within 0.52 ulp. The exponent is now hidden from gcc.

def sum_of_squares(x):
    out = np.empty_like(x)
    s = 0.0
    for i in range(len(x)):
        v = x[i] ** 2
        out[i] = v
        s += v
    return out, s


def sum_of_reciprocals(x):
    out = np.empty_like(x)
    s = 0.0
    for i in range(len(x)):
        v = float(x[i]) ** -1.0
        out[i] = v
        if v > 0.3:
            s += v
    return out, s


# (sum_of_squares's s is a Python or a NumPy float after the loop, by its trip count: the
# graph ends there, a break)
@pytest.mark.parametrize("fn, e, values, breaks", [
    (sum_of_squares, 2, [9.62758541716221, 5.384848373059271, 1.3306335603850206], 1),
    (sum_of_reciprocals, -1.0, [2.2593749989122838, 6.8934444548483444, 2.2591016124709586],
     0)])
def test_power_by_a_constant_in_a_loop_nest(fn, e, values, breaks):
    x = np.array(values)
    assert np.array([v ** e for v in x]).tobytes() != np.power(x, e).tobytes()
    assert_same(fn, x, graphs=1, breaks=breaks, ops=["loop_nest"], jit_kwargs=_config("O1"))


# A loop nest whose iterations are apart ran as SIMD passes (vectorize.py), where gcc called
# a SIMD pow (libmvec, 4 ulp): x[i] ** 2 and x[i] ** 1.7 over long arrays differed from plain
# for ~1 value in 8. Such a loop now runs as the scalar loop, but for a float64 x ** 2: v*v
# where that is provably pow's result (lower_c.pj_square_ok), pow elsewhere (in the passes:
# the lanes where it is not are computed again by pow, vectorize.lower).

def squares(x):
    out = np.empty_like(x)
    for i in range(len(x)):
        out[i] = x[i] ** 2
    return out


def powers_1_7(x):
    out = np.empty_like(x)
    for i in range(len(x)):
        out[i] = x[i] ** 1.7
    return out


@pytest.mark.parametrize("fn, dtype", [(squares, np.float64), (squares, np.float32),
                                       (powers_1_7, np.float64)])
def test_power_over_a_long_array_in_a_loop_nest(fn, dtype):
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(0.1, 10, 3000), [2.0, 0.5, 1.0, 4.0, 1e-30]]).astype(dtype)
    if fn is squares:
        x[:3000:2] *= -1
    assert_same(fn, x, graphs=1, breaks=0, ops=["loop_nest"], jit_kwargs=_config("O1"))
