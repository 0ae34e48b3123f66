"""The per-call floor: calls the Wrapper makes plain without the hook (csrc/adapt.c's
wrapper_plain_call) and the rules that let it (a code whose every call runs plain; the
argument types of a signature found plain; a frozen code's misses decided by the argument
types), and budgets counted in CPU time (cpu_seconds). Each rule is asserted by its
decision (the hook's counters, code_info/stats), results and exceptions against plain
Python, and refcounts; benchmarks/call_floor.py measures what it saves."""
import gc
import sys
import traceback
import warnings

import numpy as np
import pytest

import pijit
import pijit.eval_frame as ef
from differential import run_plain
from test_adapt import X, Misses, PlainClock


# adaptive execution on (conftest's `adaptive`: the suite compiles at the first call)
pytestmark = pytest.mark.usefixtures("adaptive")


def fresh(fn):
    """A copy of fn with a code object of its own: the hook keeps its state per code."""
    code = fn.__code__.replace(co_name=fn.__code__.co_name)
    return type(fn)(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def add1(x):
    return x + 1


def counters(w):
    return ef.counters(w.fn.__code__)


def test_types_of_a_plain_signature_bypass_and_other_types_still_compile():
    """add1(int) has nothing to gain: its calls bypass the hook (told by their types); a
    float and an array are other signatures: each goes through the hook and is captured,
    the array one into a graph that runs as NumPy does."""
    f = pijit.jit(fresh(add1), jit_config={"compile_after_ms": 0})
    assert f(1) == 2
    assert [f(k) for k in range(1000)] == [k + 1 for k in range(1000)]
    assert counters(f)["bypassed"] == 1000
    assert f(2.5) == 3.5                                        # a new signature: captured
    assert pijit.stats(f)["compile_count"] == 2
    a = np.arange(4.0)
    got = f(a)
    np.testing.assert_array_equal(got, a + 1)
    info = pijit.code_info(f)
    assert info["compile_count"] == 3 and "add" in str(info["entries"][0]["ops"])
    assert [f(k) for k in range(5)] == [k + 1 for k in range(5)]     # ints still bypass
    assert counters(f)["bypassed"] == 1005


def test_a_bypassed_call_raises_as_plain_python():
    def risky(x):
        return 10 // x
    f = pijit.jit(fresh(risky), jit_config={"compile_after_ms": 0})
    assert f(5) == 2 and f(3) == 3 and counters(f)["bypassed"] == 1
    want = run_plain(risky, (0,), {})
    with pytest.raises(ZeroDivisionError) as got:
        f(0)
    assert str(got.value) == str(want.exc) and counters(f)["bypassed"] == 2
    frames = [(fr.name, fr.line) for fr in traceback.extract_tb(got.value.__traceback__)]
    assert frames[-1] == ("risky", "return 10 // x")


def test_a_frozen_code_bypasses_misses_its_argument_types_decide():
    """Past limit_graph_count: a call whose argument types fail every entry's guards runs
    plain, so its signature is bypassed from then on; an input of an entry's types whose
    shape misses it still goes through the hook (the signature cannot tell), and an input
    matching the entry still hits it."""
    f = pijit.jit(fresh(add1), jit_config={"adaptive": False, "limit_graph_count": 1,
                                           "enable_dynamic_shape": False})
    a = np.ones(3)
    np.testing.assert_array_equal(f(a), a + 1)
    assert f(7) == 8 and ef.get_state(f.fn.__code__) == ef.FROZEN
    c = counters(f)
    assert f(8) == 9                        # the first miss of a frozen code: remembered
    assert counters(f)["misses"] == c["misses"] + 1
    c = counters(f)
    assert [f(k) for k in range(100)] == [k + 1 for k in range(100)]
    assert counters(f)["bypassed"] == c["bypassed"] + 100
    b = np.ones(4)
    for _ in range(3):
        np.testing.assert_array_equal(f(b), b + 1)
    assert counters(f)["misses"] == c["misses"] + 3             # walked each time
    assert counters(f)["bypassed"] == c["bypassed"] + 100
    np.testing.assert_array_equal(f(a), a + 1)
    assert counters(f)["hits"] == c["hits"] + 1                 # the entry still serves


def test_a_frozen_code_whose_entries_all_run_plain_bypasses_every_call():
    """Every entry runs plain (no array work) and the code is frozen: any call runs plain,
    even one the signature cannot tell (a keyword argument), without the hook."""
    # (inline_plain off: calls given back to CPython are not counted; tests/test_inline.py)
    f = pijit.jit(fresh(add1), jit_config={"compile_after_ms": 0, "limit_graph_count": 1,
                                           "inline_plain": False})
    assert f(1) == 2 and f(2.5) == 3.5
    assert ef.get_state(f.fn.__code__) == ef.FROZEN
    before = counters(f)
    a = np.ones(3)
    np.testing.assert_array_equal(f(x=a), a + 1)
    assert f(x=4) == 5
    after = counters(f)
    assert after["bypassed"] == before["bypassed"] + 2 and after["misses"] == before["misses"]


def test_a_never_compile_code_bypasses_and_counts_its_calls():
    def f(x):
        return x * 2
    state = ef.mark(f.__code__)  # noqa: F841 (the Wrapper takes it over)
    w = ef.Wrapper(f)
    ef.set_callback(Misses())
    try:
        ef.set_state(f.__code__, ef.NEVER_COMPILE)
        assert [w(k) for k in range(10)] == [2 * k for k in range(10)]
        assert w(x="ab") == "abab"
        c = ef.counters(f.__code__)
        assert c["calls"] == 11 and c["bypassed"] == 11 and c["misses"] == 0
    finally:
        from pijit import runtime
        ef.set_callback(runtime.on_miss)


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def test_recursion_through_the_wrapper_bypasses_every_level():
    ns = {}
    exec("def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n", ns)
    jitted = pijit.jit(ns["fib"], jit_config={"compile_after_ms": 0, "inline_plain": False})
    ns["fib"] = jitted
    assert jitted(2) == fib(2)
    before = counters(jitted)["bypassed"]
    assert jitted(15) == fib(15)
    assert counters(jitted)["bypassed"] == before + 1973     # every call of fib(15)


def refcounts(*objs):
    gc.collect()
    return [sys.getrefcount(o) for o in objs]


@pytest.mark.parametrize("how", ["types", "frozen", "never_compile"])
def test_bypassed_calls_do_not_leak(how):
    if how == "frozen":
        f = pijit.jit(fresh(add1), jit_config={"adaptive": False, "limit_graph_count": 1,
                                               "inline_plain": False})
        f(np.ones(3))
    else:
        f = pijit.jit(fresh(add1), jit_config={"compile_after_ms": 0, "inline_plain": False})
    f(10 ** 30)
    if how == "never_compile":
        ef.set_state(f.fn.__code__, ef.NEVER_COMPILE)
    x = 10 ** 30                # a fresh int object, not a cached small one
    for _ in range(1000):
        f(x)
    before = refcounts(x, f, f.fn, f.fn.__code__)
    for _ in range(100_000):
        f(x)
    after = refcounts(x, f, f.fn, f.fn.__code__)
    assert after == before
    assert counters(f)["bypassed"] >= 100_000


class CpuClock:
    """A CPU clock that advances `share` of each plain run of PlainClock (1 s of wall)."""

    def __init__(self, wall, share):
        self.wall, self.share = wall, share

    def __call__(self):
        return self.wall.now * self.share


@pytest.mark.parametrize("share, compiles_at", [(1.0, 4), (0.5, 5), (0.25, 8)])
def test_the_compile_budget_counts_the_threads_cpu_share(share, compiles_at):
    """Plain runs of 0.5 s of wall time each, a budget of 1.25 s: at a CPU share of 1 the
    4th call compiles (3 runs, 1.5 s); at 0.5, each run after the first (whose window has
    not ended: share 1) counts 0.25 s, so the 5th; at 0.25, 0.125 s, so the 8th. The
    decision runs on stand-in clocks: no timing."""
    wall = PlainClock()

    def g(x):
        wall.now += 0.5
        return ("plain", x)
    state = ef.mark(g.__code__)  # noqa: F841 (the Wrapper takes it over)
    w = ef.Wrapper(g)
    misses = Misses()
    ef.set_callback(misses)
    try:
        ef.set_perf_clock(wall)
        ef.set_cpu_clock(CpuClock(wall, share))
        ef.set_compile_budget(g.__code__, 1.25)
        for k in range(1, compiles_at):
            assert w(k) == ("plain", k) and misses.calls == []
        assert w(compiles_at) == ("plain", compiles_at) and misses.calls == ["int"]
        assert w(0) == ("compiled", 0)
    finally:
        from pijit import runtime
        ef.set_callback(runtime.on_miss)


def rows_or_length(a):
    if a.ndim == 1:
        return a.shape[0] + 1
    return a.sum(axis=1)


def test_a_plain_array_signature_is_told_by_dtype_and_ndim_not_type_alone():
    """A 1-d array call has nothing to gain (its branch reads the shape only) and runs
    plain from then on; a 2-d array is another signature, captured into a graph."""
    f = pijit.jit(fresh(rows_or_length), jit_config={"compile_after_ms": 0})
    v = np.arange(5.0)
    assert f(v) == 6 and f(v) == 6
    assert counters(f)["bypassed"] == 1
    m = np.arange(6.0).reshape(2, 3)
    want = rows_or_length(m)
    got = f(m)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    info = pijit.code_info(f)
    assert info["compile_count"] == 2 and "sum" in str(info["entries"][0]["ops"])


def test_a_signature_found_plain_after_its_types_were_remembered_is_bypassed():
    """Not hot yet, the Wrapper remembers its calls' argument types with their signature;
    once the signature gets an entry that runs plain (hot: captured, nothing to gain), the
    next calls of those types are bypassed, not walked by the hook."""
    wall = PlainClock()

    def g(x):
        wall.ran()
        return ("plain", x)

    def plain_entry(func, args):
        ef.add_entry(func.__code__, X, (("type", 0, type(args[0])),), None,
                     plain_args=tuple(args))
    state = ef.mark(g.__code__)  # noqa: F841 (the Wrapper takes it over)
    w = ef.Wrapper(g)
    ef.set_callback(plain_entry)
    try:
        ef.set_perf_clock(wall)
        ef.set_compile_budget(g.__code__, 2.5)
        assert [w(k) for k in range(3)] == [("plain", k) for k in range(3)]
        assert ef.counters(g.__code__)["deferred"] == 3
        assert w(3) == ("plain", 3) and ef.entry_count(g.__code__) == 1     # hot: captured
        c = ef.counters(g.__code__)
        assert [w(k) for k in range(10)] == [("plain", k) for k in range(10)]
        after = ef.counters(g.__code__)
        assert after["bypassed"] == c["bypassed"] + 10 and after["hits"] == c["hits"]
    finally:
        from pijit import runtime
        ef.set_callback(runtime.on_miss)


def _call_with_reshaped(w, arr, shape, *args):
    """w(*args) while `arr` (an argument or a default) has `shape`, then its shape back
    (setting the shape in place: deprecated by NumPy 2.5, still done by user code)."""
    old = arr.shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        arr.shape = shape
        try:
            return w(*args)
        finally:
            arr.shape = old


def _call_with_defaults(w, defaults, *args):
    g = w.fn
    old, g.__defaults__ = g.__defaults__, defaults
    try:
        return w(*args)
    finally:
        g.__defaults__ = old


# other(w, a, d) -> a call of w whose argument slots differ from w(a)'s (a, then the default
# d) in one respect, or (the last two) hold the same; and whether its signature is w(a)'s.
SLOT_CHANGES = {
    "dtype": (lambda w, a, d: w(a.astype(np.int64)), False),
    "ndim": (lambda w, a, d: w(a.reshape(1, 3)), False),
    "reshaped_in_place": (lambda w, a, d: _call_with_reshaped(w, a, (3, 1), a), False),
    "subclass": (lambda w, a, d: w(a.view(np.ma.MaskedArray)), False),
    "default_type": (lambda w, a, d: _call_with_defaults(w, ("s",), a), False),
    "default_dtype": (lambda w, a, d: _call_with_defaults(w, (d.astype(np.int32),), a), False),
    "default_reshaped_in_place": (lambda w, a, d: _call_with_reshaped(w, d, (1, 2), a), False),
    "default_passed": (lambda w, a, d: w(a, d), True),
    "other_default_alike": (lambda w, a, d: _call_with_defaults(w, (d.copy(),), a), True),
}


@pytest.mark.parametrize("change", SLOT_CHANGES)
def test_the_wrapper_tells_a_signature_not_hot_yet_by_every_argument_slot(change):
    """The Wrapper tells the signature of a call whose argument slots (positional arguments,
    then the defaults it fills in) hold what the last hashed call's did by compares, not a
    hash: types, and an exact array's dtype and ndim, read at each call (an array reshaped in
    place, a default replaced or reshaped). Each signature's plain runs (1 s each on a
    stand-in clock, budget 2.5 s) are counted apart: two calls of w(a), two of another
    signature, then w(a) runs plain a third time and compiles at its fourth; a call whose
    slots hold the same counts toward w(a)'s signature, whose fourth call compiles."""
    other, same = SLOT_CHANGES[change]
    wall = PlainClock()
    d = np.zeros(2)

    def g(x, y=d):
        wall.ran()
        return ("plain", type(x).__name__, x.dtype.str, x.ndim, type(y).__name__,
                getattr(y, "dtype", None), np.ndim(y))

    class Plain:                        # what `other` calls in plain Python
        fn = staticmethod(g)
        __call__ = staticmethod(g)
    state = ef.mark(g.__code__)  # noqa: F841 (the Wrapper takes it over)
    w = ef.Wrapper(g)
    misses = Misses()
    ef.set_callback(misses)
    try:
        ef.set_perf_clock(wall)
        ef.set_compile_budget(g.__code__, 2.5)
        a = np.ones(3)
        mine, theirs = g(a), other(Plain(), a, d)
        assert w(a) == mine and w(a) == mine
        if same:
            assert theirs == mine
            assert other(w, a, d) == mine and misses.calls == []
            assert other(w, a, d) == mine and misses.calls == ["ndarray"]
            assert ef.counters(g.__code__)["deferred"] == 3
            return
        assert theirs != mine
        assert other(w, a, d) == theirs and other(w, a, d) == theirs
        assert misses.calls == [] and ef.counters(g.__code__)["deferred"] == 4
        assert w(a) == mine and misses.calls == []
        assert w(a) == mine and misses.calls == ["ndarray"]
        assert ef.entry_count(g.__code__) == 1
    finally:
        from pijit import runtime
        ef.set_callback(runtime.on_miss)


def length_plus(a, x, k=2, m=None):
    return a.shape[0] + k if m is None else x


@pytest.mark.parametrize("how", ["not_hot", "plain"])
def test_calls_told_their_signature_by_compares_do_not_leak(how):
    """Calls passing an array and leaving defaults out, told their signature by the fast
    compare: deferred while not hot (compile_after_ms=10**6), or bypassed once the
    signature is found plain (the array's shape only: nothing to gain); the arguments, the
    defaults, the function and its code keep their refcounts over 100,000 calls."""
    budget = 10 ** 6 if how == "not_hot" else 0
    f = pijit.jit(fresh(length_plus), jit_config={"compile_after_ms": budget,
                                                  "inline_plain": False})
    a, x = np.ones(2), 10 ** 30
    for _ in range(1000):
        assert f(a, x) == 4
    c = counters(f)
    assert (c["deferred"], c["bypassed"]) == ((1000, 0) if how == "not_hot" else (0, 999))
    defaults = f.fn.__defaults__
    before = refcounts(a, x, f, f.fn, f.fn.__code__, defaults, *defaults)
    for _ in range(100_000):
        f(a, x)
    after = refcounts(a, x, f, f.fn, f.fn.__code__, defaults, *defaults)
    assert after == before
    c = counters(f)
    assert c["deferred" if how == "not_hot" else "bypassed"] >= 100_000
