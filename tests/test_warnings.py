"""NumPy's warnings, the same at every level (category, message and count): the differences
the random-program fuzzers found. NumPy's scalar math warns when it overflows an integer
(arrays wrap silently), so kernels leave it to NumPy; code whose value is unused still warns
(dce keeps it, NumPy computes it), and two equal expressions warn twice (cse keeps both); an
op a constant decides (x & False) is NumPy's, or C would drop what its operand computes."""
from __future__ import annotations

import sys
import types
import warnings

import numpy as np
import pytest

import pijit
from differential import assert_same

LEVELS = ("O0", "O1", "O2")


def _scalar_add(y):
    return y[1] + 1


def _scalar_loop(a):
    s = a[0]
    for i in range(3):
        s = a[i] * 2 + 1
    return s


def _scalar_negative(y):
    return -y[0], -y[2]


def _scalar_square(y):
    return y[1] * y[1] + y[0]


def _dead_division(a):
    t = a / a           # unused: still 0 / 0
    return a + 1.0


def _twice(a, b):
    t1 = a / b
    t2 = a / b
    return t1 + t2


def _absorbed(a):
    t = 0 / a               # 0 / 0 warns; in C the ops below would not need t at all
    return (t > 0) & False, (t < 1) | True, np.where(t > 0, 1, 1), (a > 0) * 0


def _array_wraps(y):
    return (y + 1) * 2         # arrays wrap around without a warning


def _float_scalar_overflow(x):
    return x[0] * np.float32(1e30) + 1.0


def _where_masks_a_division(a, b):
    return np.where(a > 0, a / b, 0.0)      # b is 0 only where a > 0 is False


def _where_masks_an_overflow(x):
    return np.where(x < 1.0, x * np.float32(1e30), x)


def _where_masks_a_cast(x):
    return np.where(x == x, x.astype(np.int32), -1)      # NaN to int32 where x is NaN


# A float -> int cast warns of NaN and out-of-range values by the conversion's FE_INVALID flag;
# gcc drops a conversion whose value it folds away (t - t, t ^ t, (b + t) - t, t == t of an int
# t), flag and all, while NumPy computes every cast element and warns
def _cast_minus_itself(x):
    t = x.astype(np.int8)
    return t - t


def _cast_xor_itself(x):
    t = x.astype(np.int64)
    return t ^ t


def _cast_added_and_taken_away(x, b):
    t = x.astype(np.int32)
    return (b + t) - t


def _cast_equal_to_itself(x):
    t = x.astype(np.uint16)
    return t == t


def _cast_folded_into_a_write(x, out):
    t = x.astype(np.int16)
    out[...] = t - t


def _cast_minus_itself_into(x, out):
    t = x.astype(np.int16)
    np.subtract(t, t, out=out)


def _row_cast_minus_itself(x):
    m = x.sum(axis=-1, keepdims=True).astype(np.int32)
    return x + (m - m)


# gcc turns a vector `c ? a / b : d` into a masked division that raises no flag in the lanes
# c leaves out; NumPy computes every element of both operands and warns of them
_MASKED = np.arange(-500.0, 500.0)
_MASKED32 = np.concatenate([np.full(300, 1e30, np.float32), np.zeros(700, np.float32)])
_NANS = np.where(np.arange(1000) % 7 == 0, np.nan, np.arange(1000.0))
U8 = np.array([1, 255, 3], np.uint8)
CASES = [(_scalar_add, (U8,), ["getitem", "add"]),
         (_scalar_loop, (np.array([100, 200, 250], np.uint8),), ["loop_nest"]),
         (_scalar_negative, (np.array([5, 0, 7], np.uint8),), ["neg"]),
         (_scalar_square, (np.array([7, 2 ** 31 - 1], np.int32),), ["mul", "add"]),
         (_dead_division, (np.array([0.0, 1.0, 2.0]),), ["truediv", "add"]),
         (_twice, (np.array([0.0, 1.0]), np.zeros(2)), ["truediv", "add"]),
         (_absorbed, (np.array([0.0, 1.0]),), ["truediv", "and", "or", "where"]),
         (_array_wraps, (U8,), ["add", "mul"]),
         (_float_scalar_overflow, (np.array([1e30, 2.0], np.float32),), ["mul", "add"]),
         (_where_masks_a_division, (_MASKED, np.where(_MASKED > 0, 1.0, 0.0)),
          ["gt", "truediv", "where"]),
         (_where_masks_an_overflow, (_MASKED32,), ["lt", "mul", "where"]),
         (_where_masks_a_cast, (_NANS,), ["eq", "astype", "where"]),
         (_cast_minus_itself, (np.array([0.0, np.nan], np.float32),), ["astype", "sub"]),
         (_cast_xor_itself, (_NANS,), ["astype", "xor"]),
         (_cast_added_and_taken_away, (np.array([1.0, 3e9]), np.arange(2, dtype=np.int32)),
          ["astype", "add", "sub"]),
         (_cast_equal_to_itself, (_NANS,), ["astype", "eq"]),
         (_cast_folded_into_a_write, (_NANS, np.ones(1000, np.int16)), ["astype", "sub"]),
         (_cast_minus_itself_into, (_NANS, np.ones(1000, np.int16)), ["astype", "subtract"]),
         (_row_cast_minus_itself, (_NANS.reshape(100, 10),), ["sum", "astype", "sub", "add"])]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn,args,ops", CASES, ids=[c[0].__name__ for c in CASES])
def test_warnings_are_numpys(fn, args, ops, level):
    assert_same(fn, *args, ops=ops, jit_kwargs={"jit_config": {"jit_level": level}})


def _unused_division_by_a_numpy_int(a, b):
    k = b.min()                 # a NumPy integer scalar of the graph (0 here)
    t = a // k                  # unused: an int array by an int scalar still warns
    u = a % k
    return a + 1


def _floor_divide_then_log(a, b):
    t0 = -b
    t1 = 0 // t0
    t2 = 0 + a
    t5 = np.log(t0)
    return t1, t2, t5


@pytest.mark.parametrize("level", LEVELS)
def test_unused_integer_array_division_by_a_scalar_warns(level):
    """NumPy's array loop warns of an integer division by zero even when the divisor is a
    scalar: the unused divisions are kept (not judged by NumPy's scalar-math rule)."""
    assert_same(_unused_division_by_a_numpy_int, np.arange(4), np.zeros(3, np.int64),
                ops=["min", "floordiv", "mod", "add"],
                jit_kwargs={"jit_config": {"jit_level": level}})


def test_warnings_keep_their_order_across_an_op_numpy_runs():
    assert_same(_floor_divide_then_log, np.array(False), np.zeros((3, 4), np.float32))


def _max_then_mean(x):
    y = x * 1.5
    return y.sum(), y.max(), y.mean()


def _log_after_an_index(x, i):
    y = x * 1.5
    return y[i], np.log(y)


def test_an_error_numpy_raises_comes_before_a_later_member_s_warning():
    """A node NumPy runs that raises on run-time data closes the groups, so no later member
    warns first: over a dynamic dim, y.max() (a fused max needs static reduced axes) raises
    ValueError on an empty y before y.mean() warns "Mean of empty slice"; y[i] with i from
    the data raises IndexError before np.log(y) warns of its invalid values."""
    spec = pijit.ArraySpec(shape=(None, 4), dtype="float64")
    kw = {"input_signature": (spec,)}
    assert_same(_max_then_mean, np.zeros((0, 4)), ops=["mul", "sum", "max", "mean"],
                jit_kwargs=kw)
    assert_same(_max_then_mean, np.arange(12.0).reshape(3, 4), jit_kwargs=kw)
    assert_same(_log_after_an_index, -np.ones(5), np.array(100), ops=["mul", "getitem", "log"])
    assert_same(_log_after_an_index, np.ones(5), np.array(3))
    assert_same(_max_then_mean, np.arange(12.0).reshape(3, 4), jit_kwargs=kw)


def _divides(a, b):
    q = a / b
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] / b[i]
    return q, s


def _shown(calls) -> list:
    """(message, line) of each warning the "default" action shows over `calls`, in order."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for call in calls:
            call()
    return [(str(w.message), w.lineno) for w in caught]


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_a_line_warns_once_under_the_default_action(level):
    """The "default" action shows a warning once per line: jitted calls, their compiles (a
    new size compiles again) and plain calls share the module's record of the lines shown,
    so a jitted program prints what the plain one prints (compiling used to reset every
    module's record, and generated code kept records of its own)."""
    jitted = pijit.jit(_divides, jit_config={"jit_level": level})
    pijit.reset(jitted)
    args = [(np.array([1.0, 2.0] * n), np.array([0.0, 1.0] * n)) for n in (150, 151)]
    want = _shown([lambda: _divides(*args[0])])
    assert len(want) == 2
    got = _shown([lambda: jitted(*args[0]), lambda: jitted(*args[0]),
                  lambda: jitted(*args[1]), lambda: _divides(*args[1])])
    assert got == want
    report = pijit.explain(jitted, *args[0])
    assert report.graph_count == 1 and "loop_nest" in report.ops_per_graph[0], report


@pytest.mark.parametrize("level", ["O0", "O1"])
@pytest.mark.parametrize("action", ["ignore", "error"])
def test_a_filter_by_module_matches_jitted_warnings(level, action):
    """warnings.filterwarnings(action, module=...) of the user's module applies to what its
    jitted functions warn, as to its plain ones."""
    jitted = pijit.jit(_divides, jit_config={"jit_level": level})
    pijit.reset(jitted)
    a, b = np.array([1.0, 2.0] * 150), np.array([0.0, 1.0] * 150)
    for fn in (_divides, jitted, jitted):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warnings.filterwarnings(action, module=__name__)
            if action == "error":
                with pytest.raises(RuntimeWarning, match="divide by zero"):
                    fn(a, b)
            else:
                fn(a, b)
        assert caught == [], [str(w.message) for w in caught]


def _double_negative(u, f):
    return -(-u[0]) + 1, -(-f[0]) * 2.0


@pytest.mark.parametrize("level", LEVELS)
def test_a_double_negation_of_an_integer_scalar_warns_twice(level):
    """-(-x) is x, but of a NumPy integer scalar each negation that overflows warns: twice
    for np.uint8(1) (simplify keeps both; of a float, which negates quietly, it takes x)."""
    assert_same(_double_negative, np.array([1, 0], np.uint8), np.array([2.0, 0.0]), ops=["neg"],
                jit_kwargs={"jit_config": {"jit_level": level}})


def negated_beside_float_stores(s8, ou8, n):
    c = s8[0]
    for i in range(n):
        c = -c                  # int8 -(-128): NumPy warns at each negation
        ou8[i] = 0.0            # a Python float stored into a uint8 array
    return c


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_negations_beside_float_stores_warn_each_time(level):
    """Found by test_loop_nests_random's typed generator: the float stores keep the loop out of
    a loop nest, so it unrolls into one graph of 7 negations; simplify took -(-c) for c (4
    warnings), and each negation warns in NumPy (-np.int8(-128) is -128)."""
    report = assert_same(negated_beside_float_stores, np.full(7, -128, np.int8),
                         np.zeros(7, np.uint8), 7, jit_kwargs={"jit_config": {"jit_level": level}})
    assert report.ops_per_graph[0].count("neg") == 7, report


def scalar_overflow(a):
    return a * 2.0, np.int8(100) + 100        # NEP 50: int8 + int8, overflows


def cast_overflow(a):
    return a + np.float32(1e300)              # overflow encountered in cast


@pytest.mark.parametrize("fn", [scalar_overflow, cast_overflow])
def test_constants_that_warn_are_not_folded(fn):
    """Arithmetic on constants (fold) and a library call on constants (_fold_call) run at
    capture: one that warns warned at the first call only, and later calls, running the
    folded constant, did not. It is left to run time (a break), and warns at every call."""
    assert_same(fn, np.arange(3.0), breaks=1, calls=3)


_CELLS = """
def inverse(a):
    return 1 / a

def inverse_each(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = 1.0 / a[i]
    return out
"""


@pytest.mark.parametrize("level", ["O0", "O1", "O2"])
@pytest.mark.parametrize("name, op", [("inverse", "truediv"), ("inverse_each", "loop_nest")])
def test_a_line_warns_again_after_its_module_drops_its_registry(level, name, op,
                                                                 monkeypatch):
    """IPython deletes its namespace's __warningregistry__ before each cell, so a line that
    warned in one cell warns again in the next. Generated code (graphs, kernels' NumPy
    fallbacks, loop nests' Python form) runs in a namespace of its own holding the module's
    registry (quiet.warning_scope): it took it again at each call when the module's entry
    changed (quiet.registry_sync, for __main__). Before, the registry of the first compile
    kept the line silent in every later cell."""
    main = types.ModuleType("__main__")         # IPython's user module is __main__
    monkeypatch.setitem(sys.modules, "__main__", main)
    ns = vars(main)
    ns["np"] = np
    exec(_CELLS, ns)
    jitted = pijit.jit(ns[name], jit_config={"jit_level": level})
    pijit.reset(jitted)

    def cells(fn):
        shown = []
        for _ in range(3):
            ns.pop("__warningregistry__", None)     # what IPython does before each cell
            shown += _shown_keeping_registries([lambda: fn(np.zeros(2)),
                                                lambda: fn(np.zeros(2))])
        return shown
    want = cells(ns[name])
    assert len(want) == 3
    assert cells(jitted) == want
    report = pijit.explain(jitted, np.zeros(2))
    assert report.graph_count == 1 and report.graph_break_count == 0, report
    assert op in report.ops_per_graph[0], report


def _shown_keeping_registries(calls) -> list:
    """_shown without catch_warnings/simplefilter, which reset every registry."""
    shown, old = [], warnings.showwarning
    warnings.showwarning = lambda message, category, filename, lineno, *rest: \
        shown.append((str(message), lineno))
    try:
        for call in calls:
            call()
    finally:
        warnings.showwarning = old
    return shown
