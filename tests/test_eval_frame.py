"""Low-level tests of the C frame hook (pijit._eval_frame), through
pijit.eval_frame only.  "Transformed" functions are written by hand: they take
the frame's argument slots positionally."""
import asyncio
import functools
import gc
import os
import sys
import threading

import numpy as np
import pytest

import pijit
import pijit.eval_frame as ef
from memory import rss_allowance, rss_bytes

C_CONTIGUOUS, F_CONTIGUOUS = 0x1, 0x2


# A code stays marked while its CodeState is referenced (pijit.jit's Wrapper holds it);
# the states a test marks by hand are held here until the test ends.
_held = []


def mark(code):
    state = ef.mark(code)
    _held.append(state)
    return state


@pytest.fixture(autouse=True)
def clean_state():
    ef.set_callback(None)
    ef.set_enabled(True)
    ef.set_array_type(np.ndarray)
    yield
    _held.clear()
    from pijit import runtime    # give the callback back to pijit for the other test files
    ef.set_callback(runtime.on_miss)
    ef.set_enabled(True)
    assert ef.depth() == 0
    assert not ef.is_installed()


def jitted(fn):
    """Mark fn's code and wrap it, like pijit.jit will."""
    mark(fn.__code__)
    return ef.Wrapper(fn)


class Recorder:
    def __init__(self, result=None):
        self.calls = []
        self.result = result

    def __call__(self, func, args):
        self.calls.append((func, args))
        return self.result


# ---- hit / miss ----------------------------------------------------------

def test_hit_returns_substitute_result():
    def f(x, y):
        return x + y
    w = jitted(f)
    ef.add_entry(f.__code__, (("local", 0),), (("type", 0, int),), lambda x, y: ("sub", x, y))
    assert w(1, 2) == ("sub", 1, 2)
    assert w(1.5, 2) == 3.5          # miss, no callback: plain
    c = ef.counters(f.__code__)
    assert c == {"calls": 2, "hits": 1, "misses": 1, "state": ef.CANDIDATE, "deferred": 0,
                 "bypassed": 0, "inlined": 0}


@pytest.mark.parametrize("call, expected", [
    (lambda w: w(1), (1, 2, 3, (), {})),
    (lambda w: w(1, 5, 6, 7, k=9, z=0), (1, 5, 9, (6, 7), {"z": 0})),
    (lambda w: w(b=4, a=0), (0, 4, 3, (), {})),
])
def test_miss_callback_sees_argument_slots(call, expected):
    def f(a, b=2, *args, k=3, **kw):
        return "plain"
    rec = Recorder()
    ef.set_callback(rec)
    w = jitted(f)
    assert call(w) == "plain"
    (func, args), = rec.calls
    assert func is f
    assert args == expected


def test_callback_for_method_closure_and_cell_argument():
    rec = Recorder()
    ef.set_callback(rec)

    class C:
        def m(self, x):
            return x * 2
        m = jitted(m)

    c = C()
    assert c.m(3) == 6
    assert C.m(c, 4) == 8
    assert rec.calls[0][1] == (c, 3) and rec.calls[1][1] == (c, 4)

    n = 10

    def closure(x):
        return x + n
    rec.calls.clear()
    assert jitted(closure)(1) == 11
    assert rec.calls == [(closure, (1,))]

    def cellarg(x):           # x is a cell variable: the slot holds the value
        def inner():
            return x
        return inner()
    rec.calls.clear()
    assert jitted(cellarg)(7) == 7
    assert rec.calls == [(cellarg, (7,))]


def test_callback_returning_none_runs_plain_and_result_fn_is_called():
    def f(x):
        return x + 1
    w = jitted(f)
    ef.set_callback(lambda func, args: None)
    assert w(1) == 2

    inside = []

    def cb(func, args):
        inside.append(ef.set_compiling(True))     # flag is set during cb

        def substitute(x):
            inside.append(ef.set_compiling(False))  # and clear afterwards
            return x * 100
        return substitute
    ef.set_callback(cb)
    assert w(3) == 300
    assert inside == [True, False]
    assert ef.get_state(f.__code__) == ef.CANDIDATE   # no entries were added


def test_callback_exception_propagates():
    def f(x):
        return x
    w = jitted(f)

    def cb(func, args):
        raise KeyError("boom")
    ef.set_callback(cb)
    with pytest.raises(KeyError, match="boom"):
        w(1)
    assert ef.get_state(f.__code__) == ef.CANDIDATE


def test_entry_fn_exception_propagates():
    def f(x):
        return x

    def bad(x):
        raise ValueError(x)
    w = jitted(f)
    ef.add_entry(f.__code__, (), (), bad)
    with pytest.raises(ValueError):
        w(1)


def test_callback_adding_entry_makes_callable_and_next_call_hits():
    def f(x):
        return x

    def cb(func, args):
        assert ef.get_state(func.__code__) == ef.BUILDING
        sub = lambda x: ("compiled", x)   # noqa: E731
        ef.add_entry(func.__code__, (("local", 0),), (("type", 0, int),), sub)
        return sub
    rec = []
    ef.set_callback(lambda func, args: rec.append(1) or cb(func, args))
    w = jitted(f)
    assert w(1) == ("compiled", 1)
    assert ef.get_state(f.__code__) == ef.CALLABLE
    assert w(2) == ("compiled", 2)
    assert rec == [1]


def test_state_set_by_callback_is_kept():
    def f(x):
        return x
    w = jitted(f)

    def cb(func, args):
        ef.set_state(func.__code__, ef.NEVER_COMPILE)
    ef.set_callback(cb)
    assert w(1) == 1
    assert ef.get_state(f.__code__) == ef.NEVER_COMPILE
    assert w(1) == 1
    assert ef.counters(f.__code__)["misses"] == 1


def test_entries_mru_order():
    def f(x):
        return x
    w = jitted(f)
    g_int = lambda x: "int"      # noqa: E731
    g_str = lambda x: "str"      # noqa: E731
    ef.add_entry(f.__code__, (("local", 0),), (("type", 0, int),), g_int)
    ef.add_entry(f.__code__, (("local", 0),), (("type", 0, str),), g_str)
    assert [e[2] for e in ef.entries(f.__code__)] == [g_int, g_str]
    assert w("a") == "str"
    assert [e[2] for e in ef.entries(f.__code__)] == [g_str, g_int]
    assert w(1) == "int"
    assert [e[2] for e in ef.entries(f.__code__)] == [g_int, g_str]
    assert ef.entry_count(f.__code__) == 2


def test_none_entry_runs_plain():
    def f(x):
        return x * 2
    rec = Recorder()
    ef.set_callback(rec)
    w = jitted(f)
    ef.add_entry(f.__code__, (("local", 0),), (("type", 0, int),), None)
    assert w(4) == 8
    assert rec.calls == []
    assert ef.counters(f.__code__)["hits"] == 1


# ---- guards --------------------------------------------------------------

def guard_result(sources, checks, *args, fn=None):
    """True if an entry with these guards hits for f(*args)."""
    def f(x, y=None):
        return "miss"
    fn = fn or f
    mark(fn.__code__)
    ef.add_entry(fn.__code__, sources, checks, lambda *a: "hit")
    out = ef.Wrapper(fn)(*args)
    ef.reset(fn.__code__)
    assert out in ("hit", "miss")
    return out == "hit"


X = (("local", 0),)


def test_check_type_and_id():
    o = object()
    assert guard_result(X, (("type", 0, int),), 1)
    assert not guard_result(X, (("type", 0, int),), True)
    assert guard_result(X, (("id", 0, o),), o)
    assert not guard_result(X, (("id", 0, o),), object())


def test_check_eq():
    nan = float("nan")
    assert guard_result(X, (("eq", 0, 3),), 3)
    assert not guard_result(X, (("eq", 0, 3),), 4)
    assert not guard_result(X, (("eq", 0, 1),), True)       # type differs
    assert not guard_result(X, (("eq", 0, 1.0),), 1)
    assert guard_result(X, (("eq", 0, nan),), float("nan"))  # bitwise
    assert not guard_result(X, (("eq", 0, 0.0),), -0.0)
    assert guard_result(X, (("eq", 0, 1.5),), 1.5)
    assert guard_result(X, (("eq", 0, complex(nan, 1)),), complex(nan, 1))
    assert not guard_result(X, (("eq", 0, 0j),), complex(-0.0, 0))
    assert not guard_result(X, (("eq", 0, 1 + 2j),), 1 + 3j)          # the imaginary part
    assert guard_result(X, (("eq", 0, "ab"),), "a" + "b")

    class BadEq:
        def __eq__(self, other):
            raise RuntimeError
    assert not guard_result(X, (("eq", 0, BadEq()),), BadEq())


def test_check_len():
    assert guard_result(X, (("len", 0, 2),), (1, 2))
    assert guard_result(X, (("len", 0, 2),), [1, 2])
    assert guard_result(X, (("len", 0, 1),), {1: 2})
    assert not guard_result(X, (("len", 0, 2),), [1])
    assert not guard_result(X, (("len", 0, 2),), (1, 2, 3))            # longer fails too
    assert not guard_result(X, (("len", 0, 2),), [1, 2, 3])
    assert not guard_result(X, (("len", 0, 1),), {1: 2, 3: 4})
    assert not guard_result(X, (("len", 0, 2),), "ab")


def test_check_array():
    f64 = np.dtype(np.float64).num
    a = np.zeros((3, 4))
    chk = lambda shape, mask=0, val=0, tn=f64: (("array", 0, tn, len(shape), shape, mask, val),)  # noqa: E731
    assert guard_result(X, chk((3, 4)), a)
    assert guard_result(X, chk((-1, 4)), a)
    assert guard_result(X, chk((-1, -1)), np.zeros((7, 9)))
    assert not guard_result(X, chk((3, 5)), a)
    assert not guard_result(X, chk((2, 4)), a)                      # the first dim too
    assert not guard_result(X, chk((2, -1)), a)
    assert not guard_result(X, chk((3, -1, 4)), np.zeros((2, 3, 4)))
    assert not guard_result(X, chk((3,)), a)
    assert not guard_result(X, chk((3, 4), tn=np.dtype(np.float32).num), a)
    assert guard_result(X, chk((3, 4), C_CONTIGUOUS, C_CONTIGUOUS), a)
    assert not guard_result(X, chk((4, 3), C_CONTIGUOUS, C_CONTIGUOUS), a.T)
    assert guard_result(X, chk((4, 3), F_CONTIGUOUS, F_CONTIGUOUS), a.T)
    assert not guard_result(X, chk((3, 4), F_CONTIGUOUS, F_CONTIGUOUS), a)   # F asked, C given
    assert not guard_result(X, chk((4, 4), F_CONTIGUOUS, F_CONTIGUOUS),
                            np.zeros((4, 8))[:, ::2])                          # neither
    assert not guard_result(X, chk((3,)), np.zeros(3, dtype=">f8"))  # byte order
    assert guard_result(X, chk((3,)), np.zeros(3, dtype="<f8"))
    class Sub(np.ndarray):
        pass
    assert not guard_result(X, chk((3, 4)), a.view(Sub))              # subclass
    assert not guard_result(X, chk((3,)), [1.0, 2.0, 3.0])
    assert guard_result(X, chk(()), np.zeros(()))


def test_check_call():
    assert guard_result(X, (("call", 0, lambda v: v > 2),), 3)
    assert not guard_result(X, (("call", 0, lambda v: v > 2),), 1)
    assert not guard_result(X, (("call", 0, lambda v: 1 / 0),), 1)


GLOBAL_VALUE = 5


def test_source_global_and_builtin():
    def f(x):
        return "miss"
    assert guard_result((("global", "GLOBAL_VALUE"),), (("eq", 0, 5),), 1, fn=f)
    assert guard_result((("global", "len"),), (("id", 0, len),), 1, fn=f)
    assert not guard_result((("global", "NO_SUCH_NAME"),), (("id", 0, None),), 1, fn=f)


def test_source_cell():
    v = 3
    e = None

    def f(x):
        return v, e
    assert guard_result((("cell", 1),), (("eq", 0, 3),), 0, fn=f)   # freevars: e, v
    assert f.__code__.co_freevars == ("e", "v")

    def make_empty():
        def g(x):
            if x:
                return later       # noqa: F821 -- cell not yet filled
            return "miss"
        return g
        later = 1                  # noqa: F841
    g = make_empty()
    assert not guard_result((("cell", 0),), (("id", 0, None),), 0, fn=g)


def test_source_attr_and_item():
    class A:
        b = (10, [20, 30])
    a = A()
    src = (("local", 0), ("attr", 0, "b"), ("item", 1, 1), ("item", 2, -1), ("item", 1, 5))
    assert guard_result(src, (("eq", 3, 30),), a)
    assert guard_result(src, (("len", 2, 2),), a)
    assert not guard_result(src, (("eq", 3, 31),), a)
    assert not guard_result(src, (("id", 4, None),), a)              # out of range
    assert not guard_result((("local", 0), ("attr", 0, "nope")), (("id", 1, None),), a)
    assert not guard_result((("local", 0), ("item", 0, 0)), (("id", 1, 1),), "abc")


def test_sources_evaluated_once_per_check():
    count = []

    class P:
        @property
        def q(self):
            count.append(1)
            return 1
    src = (("local", 0), ("attr", 0, "q"))
    assert guard_result(src, (("eq", 1, 1), ("type", 1, int), ("call", 1, bool)), P())
    assert count == [1]


@pytest.mark.parametrize("sources, checks, exc", [
    ([("local", 0)], (), TypeError),
    ((("local", 5),), (), ValueError),
    ((("nope", 0),), (), ValueError),
    ((("attr", 0, "x"),), (), ValueError),
    ((("local", 0), ("attr", 0, 3)), (), TypeError),
    ((("global", 1),), (), TypeError),
    ((("cell", 0),), (), ValueError),
    (X, (("type", 0, 3),), TypeError),
    (X, (("type", 1, int),), ValueError),
    (X, (("array", 0, 12, 2, (3,), 0, 0),), ValueError),
    (X, (("array", 0, 12, 1, (-2,), 0, 0),), ValueError),
    (X, (("call", 0, 3),), TypeError),
    (X, (("len", 0),), TypeError),
    (X, ("type",), TypeError),
])
def test_malformed_guards_raise(sources, checks, exc):
    def f(x):
        return x
    mark(f.__code__)
    with pytest.raises(exc):
        ef.add_entry(f.__code__, sources, checks, None)
    assert ef.entry_count(f.__code__) == 0


def test_add_entry_rejects_non_callable_fn():
    def f(x):
        return x
    mark(f.__code__)
    with pytest.raises(TypeError):
        ef.add_entry(f.__code__, (), (), 3)


def test_reset_during_guard_walk_is_safe():
    def f(x):
        return "plain"

    def evil(v):
        ef.reset(f.__code__)
        return False
    w = jitted(f)
    ef.add_entry(f.__code__, X, (("call", 0, evil),), lambda x: "hit")
    ef.add_entry(f.__code__, X, (("type", 0, int),), lambda x: "hit2")
    assert w(1) == "plain"
    assert ef.entry_count(f.__code__) == 0


# ---- closures sharing one code ---------------------------------------------

def test_shared_code_closures_get_their_own_cells():
    def make(n):
        def inner(x):
            return x + n
        return inner

    def make_t(n):
        def t(x):
            return ("t", x + n)
        return t
    a, b = make(1), make(100)
    mark(a.__code__)
    ef.add_entry(a.__code__, X, (("type", 0, int),), make_t(-1))
    wa, wb = ef.Wrapper(a), ef.Wrapper(b)
    assert wa(1) == ("t", 2)
    assert wb(1) == ("t", 101)
    assert wa(2) == ("t", 3)
    fn = ef.entries(a.__code__)[0][2]
    assert fn.__name__ == "t" and fn.__closure__ is a.__closure__


def test_entry_fn_with_matching_closure_is_used_as_is():
    n = 4

    def f(x):
        return x + n

    def t(x):
        return ("t", x + n)
    mark(f.__code__)
    ef.add_entry(f.__code__, (), (), t)
    assert ef.Wrapper(f)(1) == ("t", 5)
    assert ef.entries(f.__code__)[0][2] is t


def test_shared_code_with_other_globals():
    src = "def f(x):\n    return G\n"
    ns1, ns2 = {"G": 1}, {"G": 2}
    exec(src, ns1)
    f2 = type(ns1["f"])(ns1["f"].__code__, ns2, "f")
    tsrc = "def t(x):\n    return ('t', G)\n"
    exec(tsrc, ns1)
    mark(ns1["f"].__code__)
    ef.add_entry(ns1["f"].__code__, (), (), ns1["t"])
    assert ef.Wrapper(ns1["f"])(0) == ("t", 1)
    assert ef.Wrapper(f2)(0) == ("t", 2)


def test_entry_fn_with_wrong_free_variables_raises():
    a, b = 1, 2

    def f(x):
        return a + b

    def t(x):
        return a
    mark(f.__code__)
    ef.add_entry(f.__code__, (), (), t)
    with pytest.raises(RuntimeError, match="free variables"):
        ef.Wrapper(f)(0)


# ---- skip rules -------------------------------------------------------------

def test_generators_and_coroutines_are_not_intercepted():
    rec = Recorder(result=lambda *a: "intercepted")
    ef.set_callback(rec)

    def gen(n):
        yield from range(n)

    async def coro(x):
        return x

    async def agen(n):
        for i in range(n):
            yield i

    for fn in (gen, coro, agen):
        mark(fn.__code__)
        ef.add_entry(fn.__code__, (), (), lambda *a: "intercepted")

    def run_all():
        out = list(gen(3))
        out.append(asyncio.run(coro(5)))

        async def collect():
            return [i async for i in agen(2)]
        out.append(asyncio.run(collect()))
        return out
    assert ef.Wrapper(run_all)() == [0, 1, 2, 5, [0, 1]]
    assert rec.calls == []
    assert ef.counters(gen.__code__)["hits"] == 0


def test_recursion_while_building_runs_plain():
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)
    seen, active = [], []

    def cb(func, args):
        assert not active, "callback re-entered while building"
        active.append(1)
        seen.append(args)
        prev = ef.set_compiling(False)     # let the recursion reach the hook
        try:
            assert ef.get_state(func.__code__) == ef.BUILDING
            calls = ef.counters(func.__code__)["calls"]
            assert func(4) == 24           # runs plain: the state is BUILDING
            assert ef.counters(func.__code__)["calls"] == calls + 4
        finally:
            ef.set_compiling(prev)
            active.pop()
        return None
    ef.set_callback(cb)
    assert jitted(fact)(5) == 120
    # the callback left fact(5) to plain Python: it runs outside the hook, so its calls of
    # fact(4) ... fact(1) (the function itself, not its Wrapper) are plain calls, unseen
    assert seen == [(5,)]
    assert ef.get_state(fact.__code__) == ef.CANDIDATE


def fact_hit(n):
    return 0 if n == 0 else fact_plain(n - 1) + 1


def fact_plain(n):
    return 0 if n == 0 else fact_plain(n - 1) + 1


def test_deep_recursion_through_hits():
    mark(fact_plain.__code__)
    ef.add_entry(fact_plain.__code__, X, (("type", 0, int),), fact_hit)
    w = ef.Wrapper(fact_plain)
    assert w(300) == 300
    assert ef.counters(fact_plain.__code__)["hits"] == 301
    with pytest.raises(RecursionError):
        w(100_000)
    assert w(3) == 3
    ef.reset(fact_plain.__code__)


def test_compiling_flag_blocks_interception():
    def f(x):
        return x
    rec = Recorder()
    ef.set_callback(rec)
    w = jitted(f)
    assert ef.set_compiling(True) is False
    try:
        assert w(1) == 1
    finally:
        assert ef.set_compiling(False) is True
    assert rec.calls == []
    w(1)
    assert len(rec.calls) == 1


def test_states_and_counters():
    def f(x):
        return "plain"
    code = f.__code__
    assert ef.get_state(code) is None and ef.counters(code) is None
    mark(code)
    mark(code)                                 # idempotent
    assert ef.get_state(code) == ef.CANDIDATE
    rec = Recorder()
    ef.set_callback(rec)
    w = ef.Wrapper(f)
    ef.add_entry(code, X, (("type", 0, int),), lambda x: "hit")

    ef.set_state(code, ef.NEVER_COMPILE)        # every call plain: the Wrapper skips the hook
    assert w(1) == "plain" and w("s") == "plain"
    assert ef.counters(code) == {"calls": 2, "hits": 0, "misses": 0, "state": 0,
                                 "deferred": 0, "bypassed": 2, "inlined": 0}

    ef.set_state(code, ef.FROZEN)
    assert w(1) == "hit" and w("s") == "plain"
    assert rec.calls == []
    assert ef.counters(code) == {"calls": 4, "hits": 1, "misses": 1, "state": 4,
                                 "deferred": 0, "bypassed": 2, "inlined": 0}
    # The miss failed the entry's type guard: str calls run plain without the hook now,
    # int calls still hit the entry.
    assert w("t") == "plain" and w(2) == "hit"
    assert ef.counters(code) == {"calls": 5, "hits": 2, "misses": 1, "state": 4,
                                 "deferred": 0, "bypassed": 3, "inlined": 0}

    ef.set_state(code, ef.BUILDING)
    assert w(1) == "plain"

    ef.set_state(code, ef.CALLABLE)
    assert w(1) == "hit" and w("s") == "plain"
    assert len(rec.calls) == 1
    assert ef.get_state(code) == ef.CALLABLE     # still has entries

    with pytest.raises(ValueError):
        ef.set_state(code, 7)
    ef.reset(code)
    assert ef.counters(code) == {"calls": 0, "hits": 0, "misses": 0, "state": 1,
                                 "deferred": 0, "bypassed": 0, "inlined": 0}
    assert ef.entry_count(code) == 0
    ef.reset((lambda: 0).__code__)               # unmarked: no-op
    with pytest.raises(TypeError):
        ef.mark(3)


# ---- Wrapper and installation ----------------------------------------------

def test_hook_installed_only_during_wrapped_call():
    states = []

    def f():
        states.append((ef.is_installed(), ef.depth()))
        return 1
    w = ef.Wrapper(f)
    assert not ef.is_installed()
    w()
    assert states == [(True, 1)]
    assert not ef.is_installed()
    ef.Wrapper(lambda: w())()
    assert states[-1] == (True, 2)
    assert not ef.is_installed() and ef.depth() == 0

    ef.install()
    ef.install()
    assert ef.is_installed() and ef.depth() == 2
    ef.uninstall()
    assert ef.is_installed()
    ef.uninstall()
    assert not ef.is_installed()
    with pytest.raises(RuntimeError):
        ef.uninstall()


def test_wrapper_restores_hook_after_exception():
    def f():
        raise ZeroDivisionError
    with pytest.raises(ZeroDivisionError):
        ef.Wrapper(f)()
    assert not ef.is_installed() and ef.depth() == 0


def test_set_enabled_false_bypasses():
    def f(x):
        return ef.is_installed()
    rec = Recorder()
    ef.set_callback(rec)
    w = jitted(f)
    ef.set_enabled(False)
    assert ef.is_enabled() is False
    assert w(1) is False
    assert rec.calls == [] and ef.counters(f.__code__)["calls"] == 0
    ef.set_enabled(True)
    assert w(1) is False            # the hook saw the call (a miss), then ran it plain,
    assert len(rec.calls) == 1      # as the callback said: outside the hook


def test_wrapper_as_method_update_wrapper_and_repr():
    def method(self, x, *, k=0):
        "doc of method"
        return (self, x, k)

    class C:
        m = functools.update_wrapper(ef.Wrapper(method), method)
    c = C()
    assert c.m(1, k=2) == (c, 1, 2)
    assert C.m(c, 1) == (c, 1, 0)
    bound = c.m
    assert bound.__self__ is c and bound(5) == (c, 5, 0)
    w = C.__dict__["m"]
    assert w.__get__(None, C) is w
    assert w.__wrapped__ is method and w.__name__ == "method"
    assert w.__doc__ == "doc of method"
    assert w.fn is method
    with pytest.raises(AttributeError):
        w.fn = None
    assert repr(w) == f"<pijit.jit wrapper of {method.__qualname__}>"
    with pytest.raises(TypeError):
        ef.Wrapper(3)


def test_jitted_function_has_the_function_attributes():
    """What pijit.jit returns (a function object) has the function's __code__ (on 3.11 behind
    pijit's prefix), __defaults__, __kwdefaults__, __globals__ and __closure__, and an
    assignment of its defaults changes what its calls compute, as on a function (3.11's
    Wrapper once had none of them: reading raised, assigning went to its __dict__ unseen)."""
    k = np.float64(0.5)

    def user(a, b=2.0, *, c=3.0):
        return a * b + c + k

    jitted = pijit.jit(user)
    for name in ("__defaults__", "__kwdefaults__", "__globals__", "__closure__"):
        assert getattr(jitted, name) == getattr(user, name), name
    # 3.11: the user's code behind pijit's prefix (call_prefix.py), which shows the same
    # names, parameters and lines.
    code = jitted.__code__
    assert ef.original_code(code) is user.__code__
    for name in ("co_name", "co_qualname", "co_filename", "co_firstlineno", "co_varnames",
                 "co_argcount", "co_kwonlyargcount", "co_freevars", "co_cellvars"):
        assert getattr(code, name) == getattr(user.__code__, name), name
    assert [line for _, _, line in code.co_lines() if line is not None] == \
        [line for _, _, line in user.__code__.co_lines() if line is not None]
    a = np.arange(3.0)
    assert jitted(a).tobytes() == user(a).tobytes()
    jitted.__defaults__ = (10.0,)
    jitted.__kwdefaults__ = {"c": -1.0}
    assert jitted.__defaults__ == (10.0,) and jitted.__kwdefaults__ == {"c": -1.0}
    want = a * 10.0 + -1.0 + k
    assert jitted(a).tobytes() == want.tobytes()
    assert jitted(a, 1.0).tobytes() == (a * 1.0 + -1.0 + k).tobytes()
    with pytest.raises(AttributeError):
        jitted.__globals__ = {}


def test_wrapper_is_collected_in_cycles():
    import weakref

    class Target:
        def __call__(self):
            return 1
    t = Target()
    ref = weakref.ref(t)
    w = ef.Wrapper(t)
    w.self_ref = w
    del t, w
    gc.collect()
    assert ref() is None


def test_state_death_releases_entries():
    import weakref

    class Payload:
        pass
    p = Payload()
    ref = weakref.ref(p)
    ns = {}
    exec("def f(x):\n    return x\n", ns)
    state = ef.mark(ns["f"].__code__)
    ef.add_entry(ns["f"].__code__, X, (("id", 0, p),), lambda x: x)
    del p, ns, state
    gc.collect()
    assert ref() is None


def test_threads_call_concurrently():
    def f(x):
        return x + 1
    lock = threading.Lock()

    def cb(func, args):
        with lock:
            if ef.entry_count(func.__code__) == 0:
                ef.add_entry(func.__code__, X, (("type", 0, int),), lambda x: x + 1)
        return None
    ef.set_callback(cb)
    w = jitted(f)
    errors = []
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)

    def worker(k):
        try:
            for i in range(3000):
                assert w(i * k) == i * k + 1
        except BaseException as e:  # pragma: no cover
            errors.append(e)
    try:
        ts = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert errors == []
    c = ef.counters(f.__code__)
    assert c["calls"] == 8 * 3000
    # frames seen while another thread was compiling ran plain (neither hit
    # nor miss); once the entry exists every call hits
    assert c["misses"] <= 8 and c["hits"] > 8 * 3000 // 2
    assert ef.get_state(f.__code__) == ef.CALLABLE
    assert not ef.is_installed()


# ---- references and memory -------------------------------------------------

def test_refcounts_stable_over_hits_and_misses():
    def f(a, b, s):
        return None

    def t(a, b, s):
        return a

    a, b, s = np.zeros((4, 4)), np.ones(3, np.float32), "key"
    f64, f32 = np.dtype(np.float64).num, np.dtype(np.float32).num
    mark(f.__code__)
    srcs = (("local", 0), ("local", 1), ("local", 2), ("attr", 0, "T"), ("global", "GLOBAL_VALUE"))
    checks = (("array", 0, f64, 2, (4, -1), 0, 0), ("array", 1, f32, 1, (3,), 0, 0),
              ("eq", 2, "key"), ("type", 3, np.ndarray), ("eq", 4, 5))
    ef.add_entry(f.__code__, srcs, checks, t)
    w = ef.Wrapper(f)
    cb = Recorder()
    ef.set_callback(cb)

    def counts():
        return [sys.getrefcount(o) for o in (a, b, s, t, f, w, cb)]
    w(a, b, s)
    before = counts()
    for _ in range(200_000):
        w(a, b, s)
    assert counts() == before
    for _ in range(10_000):       # misses through the callback
        w(a, a, s)
    cb.calls.clear()
    assert counts() == before
    assert ef.counters(f.__code__)["hits"] == 200_001


def test_refcounts_stable_over_the_wrappers_plain_calls():
    """Plain calls the Wrapper makes by itself: not hot yet (timed and untimed ones, through
    the Wrapper and through the hook), then bypassed once the signature runs plain."""
    def f(a, b=None):
        return a

    a, b = np.zeros(3), "key"
    mark(f.__code__)
    w = ef.Wrapper(f)
    cb = Recorder()
    ef.set_callback(cb)
    ef.set_compile_budget(f.__code__, 1000.0)

    def counts():
        return [sys.getrefcount(o) for o in (a, b, f, w, cb)]
    w(a, b)
    before = counts()
    for _ in range(10_000):
        w(a, b)
        w(a, b=b)               # a keyword: the hook's run_until_hot
    assert counts() == before
    assert ef.counters(f.__code__)["deferred"] == 20_001
    ef.add_entry(f.__code__, (("local", 0),), (("type", 0, np.ndarray),), None)
    w(a, b=b)                   # hits the plain entry: its signature runs plain for good
    for _ in range(10_000):
        w(a, b)
    assert counts() == before
    assert ef.counters(f.__code__)["bypassed"] == 10_000


def test_rss_stable_over_1m_hits():
    def f(x, y):
        return x

    def t(x, y):
        return y
    mark(f.__code__)
    ef.add_entry(f.__code__, (("local", 0), ("local", 1)),
                 (("type", 0, int), ("array", 1, np.dtype(np.float64).num, 1, (-1,), 0, 0)), t)
    w = ef.Wrapper(f)
    arr = np.zeros(8)
    for _ in range(10_000):
        w(1, arr)
    gc.collect()
    before = rss_bytes()
    for _ in range(1_000_000):
        w(1, arr)
    gc.collect()
    assert rss_bytes() - before < rss_allowance(4 << 20)
