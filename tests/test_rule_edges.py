"""Rules of purity (pijit/graph/purity.py) and of the C guards (csrc/guards.c) that no other
test broke when they were planted wrong (tests/mutants/h33_*): a node that may raise or warn
only for some operands, and a guard asked about an object that equals, or is a subclass of,
what the entry was compiled for. Each compares plain and jitted bit for bit
(tests/differential.py) and checks how the calls ran (breaks, recompiles)."""
from __future__ import annotations

import builtins
import types

import numpy as np
import pytest

import pijit
from differential import assert_equal_values, assert_same, run_observed, run_plain, clone

X = np.linspace(-1.0, 2.0, 6)


class State:
    def __init__(self):
        self.steps = 0

    def __eq__(self, other):
        return type(other) is type(self) and other.__dict__ == self.__dict__


# -- a store before a node that may raise runs where it stands ---------------------------------
def store_then_divide(s, x, d):
    s.steps += 1
    q = 10 // d                         # ZeroDivisionError for d == 0, after the store
    return x * q


def test_store_before_a_python_division():
    """Compiled for d == 2 (not specialized), called with d == 0: the store is done when
    10 // 0 raises, as in plain Python."""
    config = {"specialize_scalar": False}
    report = assert_same(store_then_divide, State(), X, 2, graphs=None, breaks=None,
                         jit_kwargs={"jit_config": config})
    assert any("before an operation that may raise" in b["reason"]
               for b in report.break_reasons), report
    stats = calls_in_turn(store_then_divide, [(State(), X, 2), (State(), X, 0)], config)
    assert stats["cache_misses"] == 1, stats


# -- an unused integer scalar operation still warns --------------------------------------------
def unused_scalar_overflow(x, k):
    t = k * k                           # np.int8: NumPy's overflow warning; t is never read
    return x + 1.0


def test_unused_integer_scalar_overflow_warns():
    report = assert_same(unused_scalar_overflow, X, np.int8(100),
                         jit_kwargs={"jit_config": {"specialize_scalar": False}})
    assert "mul" in report.ops_per_graph[0], report


# -- guards: another type, another byte order ----------------------------------------------------
def calls_in_turn(fn, arg_lists, jit_config=None):
    """fn jitted once, called with each argument list in turn: each call == plain."""
    jitted = pijit.jit(fn, jit_config=jit_config or {})
    pijit.reset(jitted)
    for args in arg_lists:
        want_args, got_args = clone(args), clone(args)
        want = run_plain(fn, want_args, {})
        got = run_observed(jitted, got_args, {})
        assert repr(got.exc) == repr(want.exc) and got.warnings == want.warnings, args
        assert_equal_values(got.result, want.result)
        assert_equal_values(got_args, want_args, "arguments")
    return pijit.stats(jitted)


def scale(a, k):
    return a * k + k


@pytest.mark.parametrize("config", [{}, {"specialize_scalar": False}])
def test_scalar_guard_tells_equal_values_of_other_types_apart(config):
    """2, 2.0 and True == 1 compare equal; a * k of an int array is int64, float64, int64."""
    a = np.arange(5)
    stats = calls_in_turn(scale, [(a, 2), (a, 2.0), (a, 1), (a, True), (a, 2)], config)
    assert stats["cache_misses"] >= 3, stats


def doubled(a):
    return a * 2.0 + 1.0


def test_array_guard_tells_byte_orders_apart():
    """The same dtype in the other byte order is another array to a kernel."""
    a = np.linspace(0.5, 3.0, 7)
    stats = calls_in_turn(doubled, [(a,), (a.astype(">f8"),), (a,)])
    assert stats["cache_misses"] == 2, stats


def times_a_numpy_scalar(a, s):
    return a.astype(np.float32) * s + s


def test_numpy_scalar_guard_tells_its_types_apart():
    """A NumPy scalar argument is a graph input of its dtype: float32 * float64 scalar is
    float64, float32 * float32 is float32, float32 * int8 is float32."""
    a = np.linspace(-1.0, 2.0, 5)
    stats = calls_in_turn(times_a_numpy_scalar, [(a, np.float64(1.5)), (a, np.float32(1.5)),
                                                 (a, np.int8(3)), (a, np.float64(2.5))])
    assert stats["cache_misses"] == 3, stats


class Base:
    def scale(self, x):
        return x * 2.0


class Sub(Base):
    def scale(self, x):
        return x * 3.0


def method_user(obj, x):
    return obj.scale(x) + 1.0


def test_type_guard_tells_a_subclass_apart():
    stats = calls_in_turn(method_user, [(Base(), X), (Sub(), X), (Base(), X)])
    assert stats["cache_misses"] == 2, stats


class Scaled:
    def __init__(self):
        self.w = 3.0

    def step(self, x):
        return x * self.w + 1.0


def test_a_method_signature_skips_self():
    """input_signature of a method has one spec per argument after `self`."""
    spec = pijit.ArraySpec((None,), "float64")
    for x in (X, X[:3]):
        assert_same(Scaled.step, Scaled(), x, ops=["mul", "add"],
                    jit_kwargs={"input_signature": (spec,)})


# -- a global that shadows a builtin --------------------------------------------------------------
def test_a_global_defined_after_compile_shadows_the_builtin():
    """LOAD_GLOBAL reads the module's globals before the builtins: a global `abs` defined
    after the compile must miss the entry that used the builtin (and deleting it hit it)."""
    ns = {"np": np}
    exec("def f(x):\n    return abs(x) + 1.0\n", ns)
    jitted = pijit.jit(ns["f"])
    pijit.reset(jitted)
    x = np.array([-1.0, 2.0])
    for shadow in (None, lambda v: v * 10.0, None):
        if shadow is None:
            ns.pop("abs", None)
        else:
            ns["abs"] = shadow
        assert_equal_values(jitted(x), (np.abs(x) if shadow is None else x * 10.0) + 1.0)
    assert pijit.stats(jitted)["cache_misses"] == 2, pijit.stats(jitted)


def test_a_builtin_rebound_between_calls_is_seen():
    """A global found in the builtins is the function's own builtins' (its globals'
    __builtins__), at capture and in the guard, which reads them again once they changed
    though the module's globals did not (the hook keeps the last lookup while both dicts keep
    their versions). Capture read the builtins module's abs before: the builtin's result."""
    own_builtins = dict(builtins.__dict__)
    ns = {"np": np, "__builtins__": own_builtins}
    exec("def f(x):\n    return abs(x) + 1.0\n", ns)
    jitted = pijit.jit(ns["f"])
    pijit.reset(jitted)
    x = np.array([-1.0, 2.0])
    scaled = lambda v: v * 10.0     # noqa: E731
    for replaced in (False, True, True, False):
        own_builtins["abs"] = scaled if replaced else builtins.abs
        assert_equal_values(jitted(x), (x * 10.0 if replaced else np.abs(x)) + 1.0)
    assert pijit.stats(jitted)["cache_misses"] == 2, pijit.stats(jitted)


def test_one_code_under_two_globals_reads_each():
    """Functions of one code object share its entries; each call reads its own globals, also
    when the other function's were the last ones read."""
    ns1, ns2 = {"np": np, "scale": 2.0}, {"np": np, "scale": 3.0}
    exec("def f(x):\n    return x * scale\n", ns1)
    f1 = ns1["f"]
    f2 = types.FunctionType(f1.__code__, ns2, "f")
    j1, j2 = pijit.jit(f1), pijit.jit(f2)
    pijit.reset(j1)
    x = np.arange(3.0)
    for k in range(3):
        assert_equal_values(j1(x), x * 2.0)
        assert_equal_values(j2(x), x * 3.0)
        ns2["scale"] = 3.0      # the same value, rebound: a new version, the same result
    assert pijit.stats(j1)["compile_count"] == 2, pijit.stats(j1)


def test_a_kept_global_lookup_holds_no_reference():
    """The hook keeps a global's last lookup borrowed (the dict holds it): calls that take it
    leave the global's and the builtin's refcounts as they were, and rebinding the global
    frees the old value."""
    import sys
    import weakref

    class Scale(float):
        pass

    ns = {"np": np, "scale": Scale(2.0)}
    exec("def f(x):\n    return x * float(scale) + len(x)\n", ns)
    jitted = pijit.jit(ns["f"])
    pijit.reset(jitted)
    x = np.arange(3.0)
    jitted(x)
    before = sys.getrefcount(ns["scale"]), sys.getrefcount(builtins.len)
    for _ in range(100):
        assert_equal_values(jitted(x), x * 2.0 + 3)
    assert (sys.getrefcount(ns["scale"]), sys.getrefcount(builtins.len)) == before
    gone = weakref.ref(ns["scale"])
    ns["scale"] = Scale(3.0)
    assert gone() is None
    assert_equal_values(jitted(x), x * 3.0 + 3)


def test_a_callees_module_global_rebound_between_calls_is_seen():
    """A callee of another module reads its own module's globals (a dict item of its
    __globals__ in the guard)."""
    other = types.ModuleType("pijit_test_other")
    exec("SCALE = 2.0\ndef scaled(x):\n    return x * SCALE\n", other.__dict__)
    ns = {"np": np, "other": other}
    exec("def f(x):\n    return other.scaled(x) + 1.0\n", ns)
    jitted = pijit.jit(ns["f"])
    pijit.reset(jitted)
    x = np.arange(3.0)
    for scale in (2.0, 5.0, 5.0, 2.0):
        other.SCALE = scale
        assert_equal_values(jitted(x), x * scale + 1.0)
    assert pijit.stats(jitted)["cache_misses"] == 2, pijit.stats(jitted)


# -- common subexpressions across writes ---------------------------------------------------------
def clipped_around_a_write(a):
    x = np.maximum(a, 1.0)      # quiet (no warning NumPy could give), and no output:
    a[0] = 5.0                  # CSE may merge it; a is the same value number before and
    y = np.maximum(a, 1.0)      # after: only the write tells the two apart
    return x * 2.0, y * 3.0


def clipped_around_a_view_write(a):
    v = a[1:]
    x = np.maximum(a, 1.0)
    v += 1.0                    # through a view
    y = np.maximum(a, 1.0)
    return x * 2.0, y * 3.0


@pytest.mark.parametrize("fn", [clipped_around_a_write, clipped_around_a_view_write])
@pytest.mark.parametrize("level", ["O0", "O1"])
def test_no_common_subexpression_across_a_write(fn, level):
    assert_same(fn, np.arange(4.0), ops=["maximum"],
                jit_kwargs={"jit_config": {"jit_level": level}})


# -- -(-x) and nothing else ------------------------------------------------------------------------
def negated_functions(a):
    return -np.abs(a) + 0.0, -np.sqrt(np.abs(a)) + 0.0, -np.negative(a) + 0.0


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_only_a_double_negation_is_the_operand(level):
    """-(-x) is x bit for bit; -abs(x) and -sqrt(x) are not."""
    assert_same(negated_functions, np.array([-2.0, -0.0, 0.0, 3.0]), ops=["neg"],
                jit_kwargs={"jit_config": {"jit_level": level}})


# -- a store into an object whose class reads attributes its own way --------------------------------
class Doubling:
    def __init__(self):
        self.v = 1.0

    def __getattribute__(self, name):
        value = object.__getattribute__(self, name)
        return value * 2 if name == "v" else value

    def __eq__(self, other):
        return type(other) is Doubling and object.__getattribute__(other, "__dict__") == \
            object.__getattribute__(self, "__dict__")


def store_then_read(o, x):
    o.v = 3.0
    return x * o.v              # 6.0: read back through Doubling.__getattribute__


def test_store_read_back_through_a_custom_getattribute():
    assert_same(store_then_read, Doubling(), X, graphs=None, breaks=None)


def times_minus_one(b):
    return -1 * b, b * -1.0


def test_times_minus_one_keeps_a_nans_sign_at_o1():
    """Found by hunt34's longer random-program run: gcc folded x * -1.0 into -x (see
    tests/test_nan_signs.py)."""
    assert_same(times_minus_one, np.array([np.nan, 1.0, -0.0]), ops=["mul"],
                jit_kwargs={"jit_config": {"jit_level": "O1"}})


def test_times_minus_one_keeps_a_nans_sign_at_o0():
    assert_same(times_minus_one, np.array([np.nan, 1.0, -0.0]), ops=["mul"],
                jit_kwargs={"jit_config": {"jit_level": "O0"}})
