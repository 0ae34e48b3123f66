"""Jitted functions given back to CPython (csrc/wrapper.c): pijit.jit returns a function object
whose vectorcall is pijit's (3.12+; on 3.11 whose code begins with pijit's prefix,
csrc/call_prefix.c), and once pijit has nothing to do for its calls the vectorcall is
CPython's again (3.11: its code is the user's), so CPython inlines and specializes them as
plain calls. What these tests pin down: the version fact (3.11's calls skip a function's own
vectorcall), when a function is given back and when never, that its calls then bypass pijit
(its counters stop), what arms it again, and that it behaves as the function it was made
from. `vectorcall_of` says "pijit" for an armed one on every version."""
import copy
import pickle
import sys
import threading
import types
import weakref

import numpy as np
import pytest

import pijit
from clocks import cheap_plain_runs, ticking_clock
from pijit import _compat, api, eval_frame as ef

needs_function_vectorcall = pytest.mark.skipif(
    not _compat.FUNCTION_VECTORCALL, reason="3.12+: function watchers (3.11 has none)")


# adaptive execution on (conftest's `adaptive`: the suite compiles at the first call)
pytestmark = pytest.mark.usefixtures("adaptive")


def fresh(fn):
    """fn on a code object of its own (each test its own cache)."""
    new = types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__,
                             fn.__defaults__, fn.__closure__)
    new.__qualname__, new.__kwdefaults__ = fn.__qualname__, fn.__kwdefaults__
    return new


def add1(x):
    return x + 1


def times2(x):
    return x * 2


def counters(f):
    return ef.counters(ef.original_code(f.__code__))


def given_back(fn):
    """fn jitted and called with ints past the 1000 plain calls in a row after which it is
    given back to CPython."""
    f = pijit.jit(fn, jit_config={"compile_after_ms": 0})
    del fn                  # 3.11 gives back only a function whose original nothing holds
    for k in range(1200):
        f(k)
    assert ef.vectorcall_of(f) == "cpython"
    return f


def armed_copy(fn):
    """A copy of fn with pijit's vectorcall whose every call runs plain and is counted
    (bypassed), never given back: how often CPython calls pijit's vectorcall."""
    g = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__)
    state = ef.mark(g.__code__)  # noqa: F841 (the Wrapper takes it over)
    g.__pijit__ = ef.Wrapper(g, fn)
    ef.set_inline(g.__code__, False)
    ef.set_state(g.__code__, ef.NEVER_COMPILE)
    ef.arm(g)
    return g


def test_the_version_fact_is_the_same_in_c_and_python():
    assert bool(ef.FUNCTION_VECTORCALL) == _compat.FUNCTION_VECTORCALL
    assert _compat.CALL_PREFIX == (not _compat.FUNCTION_VECTORCALL)
    f = fresh(add1)
    jitted = pijit.jit(f)
    assert isinstance(jitted, types.FunctionType) and not isinstance(jitted, ef.Wrapper)
    assert api.is_jitted(jitted) and api.wrapper_of(jitted).code_state is not None
    assert ef.vectorcall_of(jitted) == "pijit"
    # 3.11: the user's code behind the prefix; 3.12+: the user's code itself.
    assert (jitted.__code__ is f.__code__) == _compat.FUNCTION_VECTORCALL
    assert ef.original_code(jitted.__code__) is f.__code__
    assert api.wrapper_of(jitted).code_state.code is f.__code__


class Point:
    def __init__(self, x):
        self.x = x

    def __getitem__(self, i):
        return self.x + i

    @property
    def twice(self):
        return self.x * 2


def test_3_11_calls_skip_a_functions_own_vectorcall():
    """Why 3.11 keeps the Wrapper: its calls from plain code (the generic CALL and the
    specialized ones) inline any Python function, whatever its vectorcall; from 3.12 every
    call of a function with a vectorcall of its own goes through it, also __init__ (3.13's
    CALL_ALLOC_AND_ENTER_INIT), __getitem__ (BINARY_SUBSCR_GETITEM) and property getters
    (LOAD_ATTR_PROPERTY), which the specializer inlines only for functions it can version."""
    g = armed_copy(fresh(add1))
    ns = {"g": g}
    exec("def loop(n):\n    for i in range(n):\n        g(i)\n", ns)
    ns["loop"](1000)
    seen = counters(g)["bypassed"]
    assert seen == (1000 if _compat.FUNCTION_VECTORCALL else 0)
    if not _compat.FUNCTION_VECTORCALL:             # so 3.11's code asks pijit itself
        h = pijit.jit(fresh(add1), jit_config={"inline_plain": False})
        ns["g"] = h
        ef.set_state(ef.original_code(h.__code__), ef.NEVER_COMPILE)
        ns["loop"](1000)
        assert ef.vectorcall_of(h) == "pijit"
        assert counters(h)["bypassed"] == 1000
        return
    cls = type("P", (Point,), {})
    init, getitem = armed_copy(fresh(Point.__init__)), armed_copy(fresh(Point.__getitem__))
    fget = armed_copy(fresh(Point.twice.fget))
    cls.__init__, cls.__getitem__, cls.twice = init, getitem, property(fget)
    ns["P"] = cls
    exec("def make(n):\n    t = 0\n    for i in range(n):\n        p = P(i)\n"
         "        t += p[1] + p.twice\n    return t\n", ns)
    assert ns["make"](1000) == sum(3 * i + 1 for i in range(1000))
    skipped = "__init__" in _compat.VECTORCALL_SKIPPED_BY     # 3.13: only the first call
    assert [counters(f)["bypassed"] for f in (init, getitem, fget)] == \
        [1 if skipped else 1000, 1000, 1000]
    jitted_init = pijit.jit(fresh(Point.__init__))
    assert isinstance(jitted_init, ef.Wrapper) == skipped


def test_every_construction_reaches_a_jitted_init():
    """What 3.13's Wrapper for __init__ protects: a class calls its jitted __init__ through
    pijit at every construction, so the entry compiled at the first one runs at the next 49
    (a function object would be pushed as a frame by CALL_ALLOC_AND_ENTER_INIT from the
    second construction on, as plain Python)."""
    class Holder:
        def __init__(self, a):
            self.b = a * 2.0 + 1.0

    Holder.__init__ = pijit.jit(fresh(Holder.__init__),
                                jit_config={"compile_after_ms": 0, "perf_statistics": False})
    a = np.arange(4.0)
    made = [Holder(a) for _ in range(50)]
    np.testing.assert_array_equal(made[-1].b, a * 2.0 + 1.0)
    stats = pijit.stats(Holder.__init__)
    assert (stats["call_count"], stats["compile_count"], stats["cache_hits"]) == (50, 1, 49)
    assert stats["entries"][0]["ops"]


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def jitted_fib(**config):
    ns = {}
    exec("def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n", ns)
    ns["fib"] = pijit.jit(ns["fib"], jit_config=config)
    return ns["fib"]


def test_a_function_with_nothing_to_do_is_given_back_and_its_calls_bypass_pijit():
    f = jitted_fib()
    assert ef.vectorcall_of(f) == "pijit"
    with cheap_plain_runs():
        assert f(15) == fib(15)         # 1973 calls: plain (not hot), 1000 in a row known
    assert ef.vectorcall_of(f) == "cpython"
    assert pijit.code_info(f)["inlined"] == 1
    before = (counters(f), pijit.stats(f)["deferred"])
    assert [f(k) for k in range(20)] == [fib(k) for k in range(20)]
    assert (counters(f), pijit.stats(f)["deferred"]) == before       # not seen at all


def test_reset_arms_it_again_and_an_array_call_is_captured():
    f = pijit.jit(fresh(times2), jit_config={"compile_after_ms": 0})
    for k in range(1200):
        assert f(k) == 2 * k
    assert ef.vectorcall_of(f) == "cpython"
    x = np.arange(4.0)
    np.testing.assert_array_equal(f(x), x * 2)     # given back: runs plain, unseen
    assert pijit.stats(f)["compile_count"] == 1    # (the int signature's plain entry)
    pijit.reset(f)
    assert ef.vectorcall_of(f) == "pijit" and pijit.code_info(f)["inlined"] == 0
    np.testing.assert_array_equal(f(x), x * 2)
    info = pijit.code_info(f)
    assert info["compile_count"] == 1 and info["entries"][0]["ops"]
    for k in range(1200):
        assert f(k) == 2 * k                        # int calls: plain, known, in a row...
    assert ef.vectorcall_of(f) == "pijit"          # ...but a compiled entry: never given back


def test_a_signature_not_hot_yet_whose_calls_cost_is_never_given_back():
    """Calls that run plain while their signature gets hot are not given back when they cost
    (here 1 ms each on a stand-in clock): the signature gets hot and compiles."""
    with ticking_clock(0.0005):
        # 0.5 ms a call: hot after about 1400 calls, past the 1000 in a row
        f = pijit.jit(fresh(times2), jit_config={"compile_after_ms": 700,
                                                 "perf_statistics": False})
        for k in range(1600):
            assert f(k) == 2 * k
            assert ef.vectorcall_of(f) == "pijit"
        assert pijit.stats(f)["compile_count"] == 1 and pijit.stats(f)["deferred"] > 1000


def test_a_costly_signature_that_runs_plain_for_good_is_given_back():
    """Calls that cost (0.5 ms each on a stand-in clock) get hot and are captured; capture
    finds no array work, so the signature runs plain for good (its calls bypass the hook),
    and 1000 such calls in a row later the function is given back to CPython: its cost no
    longer matters, there is nothing left to win for it."""
    with ticking_clock(0.0005):
        f = pijit.jit(fresh(times2), jit_config={"compile_after_ms": 700,
                                                 "perf_statistics": False})
        calls = 0
        while ef.vectorcall_of(f) == "pijit" and calls < 5000:
            assert f(calls) == 2 * calls
            calls += 1
        stats = pijit.stats(f)
        assert ef.vectorcall_of(f) == "cpython" and pijit.code_info(f)["inlined"] == 1
        assert stats["compile_count"] == 1 and stats["deferred"] > 1000
        assert stats["entries"][0]["fallback"].startswith("no array work")
        # the capture's call, then 1000 in a row known to run plain (and the two that
        # remembered the signature and found the streak full)
        assert stats["call_count"] == stats["deferred"] + 1 and stats["bypassed"] == 1002
        assert calls == stats["call_count"] + stats["bypassed"]
        before = counters(f)
        assert [f(k) for k in range(5)] == [times2(k) for k in range(5)]
        assert counters(f) == before                    # not seen at all


def test_calls_passing_arrays_are_never_given_back():
    """However cheap their plain runs (1 us each on a stand-in clock), calls passing arrays
    while their signature is not hot are not calls pijit has nothing to do for."""
    clock = [0.0]

    def tick():
        clock[0] += 0.0000005
        return clock[0]
    ef.set_perf_clock(tick)
    f = pijit.jit(fresh(times2), jit_config={"compile_after_ms": 10_000})
    x = np.ones(2)
    for _ in range(1500):
        f(x)
    assert ef.vectorcall_of(f) == "pijit" and pijit.stats(f)["deferred"] == 1500


def test_a_never_compile_code_is_given_back_at_once_and_a_state_change_arms_it():
    f = pijit.jit(fresh(add1))
    code = ef.original_code(f.__code__)
    ef.set_state(code, ef.NEVER_COMPILE)
    assert f(1) == 2 and ef.vectorcall_of(f) == "cpython"
    ef.set_state(code, ef.CANDIDATE)
    assert ef.vectorcall_of(f) == "pijit"


def test_inline_plain_off_keeps_every_call():
    f = jitted_fib(inline_plain=False)
    with cheap_plain_runs():            # never hot: every call counted plain
        assert f(15) == fib(15) and ef.vectorcall_of(f) == "pijit"
        before = pijit.stats(f)["bypassed"] + pijit.stats(f)["deferred"]
        f(10)
    assert pijit.stats(f)["bypassed"] + pijit.stats(f)["deferred"] == before + 177


@needs_function_vectorcall
def test_a_new_code_of_the_function_or_of_its_original_arms_it():
    f = given_back(fresh(add1))
    f.__code__ = fresh(times2).__code__
    assert ef.vectorcall_of(f) == "pijit"
    x = np.arange(3.0)
    np.testing.assert_array_equal(f(x), x * 2)
    assert pijit.stats(f)["compile_count"] == 1    # the new code, jitted with f's options
    g_orig = fresh(add1)
    g = given_back(g_orig)
    g_orig.__code__ = fresh(times2).__code__       # the user's function changes, as a Wrapper
    assert ef.vectorcall_of(g) == "pijit"          # would see it
    assert g(5) == 10 and g.__code__ is g_orig.__code__


def test_inside_a_jitted_call_the_hook_still_sees_a_given_back_function():
    inner = given_back(fresh(times2))
    ns = {"inner": inner, "np": np}
    exec("def outer(x, n):\n    for i in range(n):\n        x = inner(x)\n    return x\n", ns)
    outer = pijit.jit(ns["outer"], jit_config={"adaptive": False})
    x = np.arange(3.0)
    np.testing.assert_array_equal(outer(x, 3), x * 8)
    assert ef.vectorcall_of(inner) == "pijit" or pijit.stats(inner)["compile_count"] >= 1


def test_given_back_for_every_thread():
    f = jitted_fib()
    with cheap_plain_runs():
        f(15)
    assert ef.vectorcall_of(f) == "cpython"
    before = counters(f)
    out = []
    t = threading.Thread(target=lambda: out.append(f(12)))
    t.start()
    t.join()
    assert out == [fib(12)] and counters(f) == before


def test_deep_recursion_of_a_given_back_function_is_plain_pythons():
    """Given back, a recursive function recurses as in plain Python (inlined, no C frame per
    level): as deep as the recursion limit allows, and RecursionError past it."""
    import subprocess
    import textwrap
    src = textwrap.dedent("""
        import sys, pijit
        sys.setrecursionlimit(100000)

        def g(n):
            return 0 if n == 0 else 1 + g(n - 1)
        plain = g
        g = pijit.jit(g, jit_config={"compile_after_ms": 0})
        for _ in range(300):
            g(3)
        print(g(5), g(2000), g(60000), plain(60000))
        try:
            g(200000)
        except RecursionError:
            print("RecursionError")
    """)
    import os
    env = {k: v for k, v in os.environ.items() if k != "PIJIT_ADAPTIVE"}
    proc = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["5", "2000", "60000", "60000", "RecursionError"]


def documented(x, k=2, *, m=3):
    """Doc."""
    return x * k + m


documented.tag = "mine"


def test_a_jitted_function_is_the_function_it_was_made_from():
    f = fresh(documented)
    f.__module__, f.__dict__["tag"] = documented.__module__, "mine"
    j = pijit.jit(f)
    attrs = ("__name__", "__qualname__", "__doc__", "__module__", "tag")
    if _compat.FUNCTION_VECTORCALL:
        attrs += ("__defaults__", "__kwdefaults__")
    for attr in attrs:
        assert getattr(j, attr) == getattr(f, attr), attr
    assert j.__wrapped__ is f and j.fn is f
    assert j(1) == f(1) == 5 and j(1, 3, m=0) == f(1, 3, m=0)
    assert weakref.ref(j)() is j
    if _compat.FUNCTION_VECTORCALL:         # (a Wrapper not found by name copies by _rejit)
        assert copy.copy(j) is j and copy.deepcopy(j) is j
    assert pijit.jit(j).fn is f                          # jit(jit(f)) jits f
    o2 = pijit.jit(j, jit_config={"jit_level": "O0"})
    assert o2.fn.__code__ is not f.__code__         # a copy of f on a code of its own
    assert api.wrapper_of(o2).code_state is not api.wrapper_of(j).code_state

    class C:
        m = pijit.jit(fresh(lambda self, x: (type(self).__name__, x)))
        s = staticmethod(pijit.jit(fresh(documented)))
        c = classmethod(pijit.jit(fresh(lambda cls, x: (cls.__name__, x))))
    c = C()
    assert c.m(1) == ("C", 1) and C.s(2) == 7 and C.c(1) == ("C", 1)
    assert isinstance(c.m, types.MethodType) and c.m.__func__ is C.__dict__["m"]
    assert pijit.code_info(c.m)["call_count"] >= 0


def test_a_jitted_function_pickled_by_value_unpickles_jitted():
    cloudpickle = pytest.importorskip("cloudpickle")
    ns = {"__name__": "not_importable"}
    exec("def f(x):\n    return x + 1\n", ns)
    j = pijit.jit(ns["f"], jit_config={"jit_level": "O0"})
    back = cloudpickle.loads(cloudpickle.dumps(j))
    assert api.is_jitted(back) and back(np.ones(2)).tolist() == [2.0, 2.0]
    assert pijit.api.cache.record(api._code_of(back)).config.jit_level == "O0"
    with pytest.raises(pickle.PicklingError):
        pickle.dumps(j)


def test_giving_back_and_arming_again_leaks_nothing():
    f = pijit.jit(fresh(add1), jit_config={"compile_after_ms": 0})
    x = 10 ** 30

    def cycle():
        for _ in range(1100):
            f(x)
        assert ef.vectorcall_of(f) == "cpython"
        pijit.reset(f)

    cycle()
    import gc
    gc.collect()
    before = [sys.getrefcount(o) for o in (x, f, f.__code__, api.wrapper_of(f))]
    for _ in range(20):
        cycle()
    gc.collect()
    assert [sys.getrefcount(o) for o in (x, f, f.__code__, api.wrapper_of(f))] == before


def test_a_call_that_drops_its_own_wrapper_finishes_and_later_calls_run_plain():
    """The caller holds the function, not its Wrapper (an item of the function's __dict__):
    a call whose body drops it must still finish with it (make asan saw the Wrapper freed
    under the running call), and later calls run as CPython runs the function."""
    import gc

    def drop(x):
        g.__dict__.pop("__pijit__", None)
        gc.collect()
        return x + 1
    g = pijit.jit(fresh(drop))
    assert g(1) == 2 and "__pijit__" not in g.__dict__
    assert g(2) == 3 and ef.vectorcall_of(g) == "pijit"
