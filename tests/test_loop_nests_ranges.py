"""Integer checks of a loop nest's C kernel that value ranges prove cannot fail, left out
(pijit/loopnest/ranges.py): a Python int kept in [0, 0xFFFF] by a mask cannot leave int64
when shifted, an index of range(n) cannot overflow when advanced, a value of an int8 array
plus one fits an int16. Each case runs plain and jitted (results, partial writes, the
exception at the same iteration; one loop_nest node, explain), the near misses with values
that do leave the range at a middle iteration, and looks at the kernel's C to see the check
gone, or kept where it must be."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.workloads import crc16
from pijit.loopnest import ranges
from tests.differential import assert_same
from tests.test_loop_nests import resumes  # noqa: F401 - a fixture
from tests.test_loop_nests_checks import kernels  # noqa: F401 - a fixture

LEVELS = ["O0", "O1"]


def same(fn, *args, level="O1", breaks=0, config=None):
    return assert_same(fn, *args, ops=["loop_nest"], breaks=breaks,
                       jit_kwargs={"jit_config": {"jit_level": level, **(config or {})}})


def c_text(kernel) -> str:
    return kernel.function().split("pj_body(", 1)[1]


# -- the rules -----------------------------------------------------------------------------
@pytest.mark.parametrize("op, a, b", [
    ("add", (-3, 5), (2, 7)), ("sub", (-3, 5), (2, 7)), ("mul", (-3, 5), (-7, 2)),
    ("and", (-9, 5), (0, 6)), ("and", (-9, -2), (-5, 3)), ("or", (1, 5), (8, 9)),
    ("or", (-9, 5), (-3, 6)), ("xor", (0, 0x80), (0, 0x7F)), ("xor", (-9, 5), (-1, 6)),
    ("lshift", (-3, 5), (0, 3)), ("rshift", (-300, 500), (1, 4)),
    ("floordiv", (-30, 50), (2, 7)), ("floordiv", (-30, 50), (-7, -2)),
    ("floordiv", (-30, 50), (-2, 3)), ("mod", (-30, 50), (2, 7)), ("mod", (-30, 50), (-7, 3)),
    ("neg", (-3, 5), None), ("invert", (-3, 5), None), ("abs", (-7, 5), None),
    ("abs", (-7, -5), None), ("abs", (3, 5), None)])
def test_each_rule_holds_every_value(op, a, b):
    """exact() contains every result Python gives for the operands of the ranges."""
    lo, hi = ranges.exact(op, a, b)
    fns = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
           "and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y,
           "lshift": lambda x, y: x << y, "rshift": lambda x, y: x >> y,
           "floordiv": lambda x, y: x // y, "mod": lambda x, y: x % y,
           "neg": lambda x: -x, "invert": lambda x: ~x, "abs": abs}
    xs = range(a[0], a[1] + 1)
    if b is None:
        got = [fns[op](x) for x in xs]
    else:
        got = [fns[op](x, y) for x in xs for y in range(b[0], b[1] + 1)
               if not (op in ("floordiv", "mod") and y == 0)]
    assert lo <= min(got) and max(got) <= hi


# -- a mask keeps a Python int small -------------------------------------------------------
@pytest.mark.parametrize("level", LEVELS)
def test_a_masked_shift_register_runs_unchecked(level, resumes, kernels):
    data = np.random.default_rng(0).integers(0, 256, 300, dtype=np.uint8)
    same(crc16, data, level=level)
    if level == "O1":
        assert resumes == []
        (k,) = kernels
        text = c_text(k)
        # crc in [0, 0xFFFF]: no shift or other op can overflow
        assert "_overflow(x" not in text
        assert "(r >> " not in text
        assert k.ranges.of("l_crc") == (0, 0xFFFF)


def register(data, mask, x):
    for k in range(data.shape[0]):
        x = ((x << 1) ^ int(data[k])) & mask
    return x


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("mask, x, proven", [
    (0xFFFF_FFFF_FFFF, 1, True),            # 48 bits: x << 1 stays in int64
    (2**63 - 1, 1, False),                  # x << 1 leaves int64 at the 63rd byte
    (2**62 - 1, 2**62 + 5, False),          # the first x is above the mask's range
])
def test_a_mask_near_int64(level, mask, x, proven, resumes, kernels):
    data = np.random.default_rng(1).integers(0, 256, 200, dtype=np.uint8)
    data[:70] |= 1                          # x keeps growing: a set bit every step
    same(register, data, mask, x, level=level)
    if level == "O1":
        (k,) = kernels
        assert ("(r >> " not in c_text(k)) == proven
        assert (resumes == []) == proven


def grow(a, x):
    for i in range(a.shape[0]):
        x = x * 3 + int(a[i])
    return x


@pytest.mark.parametrize("level", LEVELS)
def test_a_python_int_outgrowing_int64_stays_exact(level, resumes, kernels):
    same(grow, np.arange(60, dtype=np.int32), 1, level=level)      # 3**59 > 2**63
    if level == "O1":
        assert resumes                      # the kernel handed over when x left int64
        assert "__builtin_mul_overflow" in c_text(kernels[0])


# -- stores into narrow arrays -------------------------------------------------------------
def index_into_int8(out, n):
    for i in range(n):
        out[i] = i
    return out


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", [128, 129])
def test_an_index_stored_into_int8(level, n, resumes, kernels):
    # n = 129: NumPy raises OverflowError storing 128, after out[0..127] were written
    same(index_into_int8, np.zeros(200, dtype=np.int8), n, level=level)
    if level == "O1":
        (k,) = kernels
        assert ("127LL" not in c_text(k)) == (n == 128)


def down_into_int8(out, stop):
    for i in range(-1, stop, -1):
        out[i] = i
    return out


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("stop", [-129, -130])
def test_a_falling_index_stored_into_int8(level, stop, resumes, kernels):
    # a step of -1 ends above stop: -128 last for -129; -129 raises OverflowError
    same(down_into_int8, np.zeros(200, dtype=np.int8), stop, level=level)
    if level == "O1":
        (k,) = kernels
        assert ("-128LL" not in c_text(k)) == (stop == -129)


def products_into_uint16(a, b, out):
    for i in range(a.shape[0]):
        out[i] = int(a[i]) * int(b[i])
    return out


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype, proven", [(np.uint8, True), (np.int8, False)])
def test_products_into_uint16(level, dtype, proven, resumes, kernels):
    # uint8 * uint8 <= 65025 fits; int8 * int8 may be negative: OverflowError at i = 5
    a = np.arange(10).astype(dtype)
    b = np.full(10, 3, dtype=dtype)
    if not proven:
        b[5] = -1
        a[5] = 7
    same(products_into_uint16, a, b, np.zeros(10, dtype=np.uint16), level=level)
    if level == "O1":
        (k,) = kernels
        assert ("65535LL" not in c_text(k)) == proven


def picked(a, out, big):
    for i in range(a.shape[0]):
        if a[i] > 0.5:
            v = 100
        else:
            v = big
        out[i] = v
    return out


def picked_and_stored(a, out, big):
    for i in range(a.shape[0]):
        if a[i] > 0.5:
            out[i] = 100
        else:
            out[i] = big    # both sides store: one store of a select (ifconvert.py)
    return out


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("big", [120, 1000])
@pytest.mark.parametrize("fn", [picked, picked_and_stored])
def test_a_value_picked_by_a_select(level, big, fn, resumes, kernels):
    # 100 or big: into an int8 array, 1000 raises OverflowError at the first a[i] <= 0.5
    a = np.array([0.9, 0.8, 0.7, 0.1, 0.9])
    same(fn, a, np.zeros(5, dtype=np.int8), big, level=level)
    if level == "O1":
        (k,) = kernels
        assert ("127LL" not in c_text(k)) == (big == 120)


def running_max_doubled(a, out):
    m = 0
    for i in range(a.shape[0]):
        m = max(m, a[i])        # m's range: 0 and every element's, not 0 alone
        out[i] = m * 2
    return m


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("top", [7, 2**62])
def test_a_running_max_keeps_its_overflow_check(level, top, resumes, kernels):
    # np.int64(2**62) * 2 wraps with NumPy's overflow warning, at the fourth iteration and
    # after; before the loop m is the Python int 0 (a break: m's type after the loop
    # depends on the trip count)
    same(running_max_doubled, np.array([1, 5, 3, top, 2]), np.zeros(5, dtype=np.int64),
         level=level, breaks=1)
    if level == "O1":
        assert (resumes != []) == (top > 7)


def shifted_xor(a, b, out):
    for i in range(a.shape[0]):
        out[i] = (int(a[i]) ^ int(b[i])) << 48
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_a_xor_keeps_its_top_bit(level, resumes, kernels):
    # 0x7F00 ^ 0x80FF = 0xFFFF: << 48 leaves int64 (an int64 array: OverflowError)
    a = np.array([1, 2, 0x7F00, 3], dtype=np.uint16)
    b = np.array([1, 5, 0x80FF, 3], dtype=np.uint16)
    same(shifted_xor, a, b, np.zeros(4, dtype=np.int64), level=level)
    if level == "O1":
        assert resumes


def inverted_past_both_ends(a, low, high):
    for i in range(a.shape[0]):
        y = ~((a[i] & 15) | 16)         # ~ of a np.uint8 in [16, 31]: 255 - it, in [224, 239]
        low[i] = y - 230                # wraps (NumPy warns) below 230
        high[i] = y + 20                # and above 235
    return low, high


def inverted_within(a, out):
    for i in range(a.shape[0]):
        out[i] = ~((a[i] & 15) | 16) - 200
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_an_unsigned_inversion(level, resumes, kernels):
    """~x of a NumPy unsigned integer is its mask minus x: its range is [224, 239] here, so
    `- 200` needs no check, while `- 230` and `+ 20` keep theirs (NumPy's overflow warning
    at each end, from a hand-over)."""
    a = np.arange(16, dtype=np.uint8) * 17
    same(inverted_past_both_ends, a, np.zeros(16, np.uint8), np.zeros(16, np.uint8),
         level=level)
    same(inverted_within, a, np.zeros(16, np.uint8), level=level)
    if level == "O1":
        assert resumes
        both, within = kernels
        assert "> 255LL" in c_text(both) and "> 255LL" not in c_text(within)


# -- a range too narrow drops a check that fires: each of these raises at i = 3 -----------
def max_minus_100(a, b, out):
    for i in range(a.shape[0]):
        out[i] = max(int(a[i]), int(b[i]) % 101 + 50) - 100    # max of [0, 255], [50, 150]
    return out


def max_plus_100(a, b, out):
    for i in range(a.shape[0]):
        out[i] = max(int(a[i]), int(b[i]) % 101 + 50) + 100
    return out


def min_minus_10(a, b, out):
    for i in range(a.shape[0]):
        out[i] = min(int(a[i]), int(b[i]) % 101 + 50) - 10
    return out


def min_plus_110(a, b, out):
    for i in range(a.shape[0]):
        out[i] = min(int(a[i]), int(b[i]) % 101 + 50) + 110
    return out


def and_of_minus_one(a, b, out):
    for i in range(a.shape[0]):
        out[i] = int(a[i]) & (int(b[i]) % 5 - 1)      # [0, 255] & [-1, 3]: x & -1 is x
    return out


def over_a_remainder(a, b, out):
    for i in range(a.shape[0]):
        x = int(a[i])
        out[i] = x / (x % (int(b[i]) % 4 - 3))      # x % y of y in [-3, 0] may be 0
    return out


@pytest.mark.parametrize("fn, a, b, dtype", [
    (max_minus_100, [200, 190, 200, 0, 7], [0, 0, 9, 0, 0], np.uint8),
    (max_plus_100, [10, 0, 150, 200, 7], [0, 9, 0, 0, 0], np.uint8),
    (min_minus_10, [100, 20, 255, 5, 7], [0, 0, 9, 0, 0], np.uint8),
    (min_plus_110, [20, 0, 140, 255, 7], [0, 9, 0, 100, 0], np.uint8),
    (and_of_minus_one, [200, 100, 7, 200, 7], [1, 0, 3, 0, 0], np.int8),
    (over_a_remainder, [7, 9, 5, 6, 7], [0, 1, 2, 0, 0], np.float64)],
    ids=["max-100", "max+100", "min-10", "min+110", "and", "remainder"])
@pytest.mark.parametrize("level", LEVELS)
def test_a_range_holds_the_value_that_fails(fn, a, b, dtype, level, resumes, kernels):
    """min and max of two ranges (each end), x & y of a y that may be -1, x % y of a y that
    may be negative and 0: the value at i = 3 leaves the array's dtype (OverflowError) or
    divides by zero, so the check must stay."""
    same(fn, np.array(a, np.uint8), np.array(b, np.uint8), np.zeros(5, dtype), level=level)
    if level == "O1":
        assert resumes


def grows_after_a_max(n, k):
    m = u = r = 0
    for i in range(n):
        m = max(m, u)       # u is assigned after it: its range grows later
        u = i * k
        p = m + 1
        q = p + 1
        r = q + 2**62       # 2**63 + 2 at i = 3
    return r


@pytest.mark.parametrize("level", LEVELS)
def test_a_max_of_a_variable_assigned_after_it(level, resumes, kernels):
    """max(m, u) is computed again when u's range grows: else m stays [0, 0], the rounds of
    narrowing mend m, p and q but not r, and r's add leaves int64 unchecked (wrapping to a
    negative number instead of Python's exact 2**63 + 2)."""
    same(grows_after_a_max, 4, 2**61, level=level)
    if level == "O1":
        assert resumes
        assert "__builtin_add_overflow" in c_text(kernels[0])


# -- divisions and comparisons -------------------------------------------------------------
def divided(a, out, k):
    for i in range(a.shape[0]):
        out[i] = k // (int(a[i]) + 1) + k % (int(a[i]) - 300)
    return out


def divided_by_element(a, out, k):
    for i in range(a.shape[0]):
        out[i] = k // int(a[i])
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_a_divisor_that_cannot_be_zero(level, resumes, kernels):
    a = np.array([3, 0, 255, 7], dtype=np.uint8)
    same(divided, a, np.zeros(4, dtype=np.int64), 1000, level=level)
    same(divided_by_element, a, np.zeros(4, dtype=np.int64), 1000, level=level)  # a[1] = 0
    if level == "O1":
        first, second = kernels
        assert "INT64_MIN &&" not in c_text(first) and "INT64_MIN &&" in c_text(second)


def index_below_value(x, out, n):
    for i in range(n):
        out[i] = i < x[i]
    return out


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", [4, 2**53 + 2])
def test_an_index_compared_with_floats(level, n, resumes, kernels):
    # an index of range(4) converts to a double exactly; one of range(2**53 + 2) might not
    # (an IndexError at i = 4 here, after the four stores)
    same(index_below_value, np.array([0.5, 3.0, 1.0, np.nan]), np.zeros(4, dtype=bool), n,
         level=level)
    if level == "O1":
        assert ("PJ_I53" not in c_text(kernels[0])) == (n == 4)


# -- what is known of the inputs -----------------------------------------------------------
def crc_from(data, crc):
    for k in range(data.shape[0]):
        crc ^= int(data[k]) << 8
        for _ in range(8):
            if crc & 0x8000:
                crc = ((crc << 1) ^ 0x1021) & 0xFFFF
            else:
                crc = (crc << 1) & 0xFFFF
    return crc


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("start, specialize, proven", [
    (0x1D0F, True, True),
    (2**62 + 3, True, False),       # crc << 1 leaves int64 at the first bit
    (0x1D0F, False, False)])
def test_an_argument_known_by_its_value(level, start, specialize, proven, resumes, kernels):
    # a guarded int argument is its value; unguarded (specialize_scalar=False) it may be
    # any int: crc ^ data << 8 then may overflow when shifted, and the checks stay
    data = np.random.default_rng(2).integers(0, 256, 50, dtype=np.uint8)
    same(crc_from, data, start, level=level, config={"specialize_scalar": specialize})
    if level == "O1":
        assert (resumes == []) == (start < 2**16)
        (k,) = kernels
        assert ("(r >> " not in c_text(k)) == proven


# -- the range's own advance ----------------------------------------------------------------
def near_the_top(out, start, stop, step):
    n = 0
    for i in range(start, stop, step):
        out[i - start] = n          # a wrapped i would index far out of bounds
        n += 1
    return n, out


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("bounds", [(2**63 - 5, 2**63 - 1, 3), (-2**63 + 4, -2**63, -3),
                                    (0, 4, 1)])
def test_an_advance_leaving_int64_is_checked(level, bounds, resumes, kernels):
    # the advance past the last element overflows int64 (not the element itself): the
    # kernel hands over there, and Python ends the loop as plain Python does
    same(near_the_top, np.zeros(4, np.int64), *bounds, level=level)
    if level == "O1" and bounds == (0, 4, 1):
        assert resumes == []
        assert "__builtin_add_overflow(v_it" not in c_text(kernels[0]), \
            "range(0, 4) cannot overflow when advanced: no check"
    elif level == "O1":
        assert "__builtin_add_overflow(v_it" in c_text(kernels[0])
