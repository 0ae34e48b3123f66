"""The hook's adaptive decisions (csrc/adapt.c), through pijit.eval_frame only: new input
signatures wait until hot, entries are promoted at a given hit, and timed trials keep the
faster of an entry's function and plain Python. Trials run on a fake clock here: the
decision is asserted, never a timing."""
import numpy as np
import pytest

import pijit.eval_frame as ef

X = (("local", 0),)


@pytest.fixture(autouse=True)
def clean_state():
    ef.set_callback(None)
    yield
    from pijit import runtime
    ef.set_callback(runtime.on_miss)
    ef.set_adapt_callback(None)
    ef.set_perf_clock(None)


class Misses:
    """A compile callback that records its calls and adds an entry for the argument's type."""

    def __init__(self):
        self.calls = []

    def __call__(self, func, args):
        self.calls.append(type(args[0]).__name__)
        ef.add_entry(func.__code__, X, (("type", 0, type(args[0])),),
                     lambda x: ("compiled", x))
        return None


def test_a_new_signature_compiles_at_its_threshold_call():
    def f(x):
        return ("plain", x)
    state = ef.mark(f.__code__)
    w = ef.Wrapper(f)
    misses = Misses()
    ef.set_callback(misses)
    ef.set_compile_threshold(f.__code__, 3)
    assert w(1) == ("plain", 1)                 # the code's first signature compiles at once
    assert misses.calls == ["int"] and w(2) == ("compiled", 2)
    assert [w("a"), w("b")] == [("plain", "a"), ("plain", "b")]     # not hot yet
    assert misses.calls == ["int"] and ef.counters(f.__code__)["deferred"] == 2
    assert w("c") == ("plain", "c")             # the third call of str compiles (runs plain)
    assert misses.calls == ["int", "str"] and w("d") == ("compiled", "d")
    arr = np.ones(3)
    assert w(arr)[0] == "plain" and w(arr)[0] == "plain" and misses.calls[-1] == "str"
    assert state.code is f.__code__


def test_signatures_are_told_apart_by_array_dtype_and_ndim():
    def f(x):
        return "plain"
    state = ef.mark(f.__code__)  # noqa: F841 (the Wrapper takes it over)
    w = ef.Wrapper(f)
    misses = Misses()
    ef.set_callback(misses)
    ef.set_compile_threshold(f.__code__, 2)
    w(0)
    for a in (np.ones(3), np.ones(4, np.float32), np.ones((2, 2))):
        w(a)
    assert ef.counters(f.__code__)["deferred"] == 3     # three signatures, each seen once
    w(np.ones(5))                                       # float64[1] again: hot
    assert misses.calls == ["int", "ndarray"]


def test_promotion_replaces_the_entrys_function_at_its_hit():
    def f(x):
        return "plain"
    state = ef.mark(f.__code__)  # noqa: F841 (the Wrapper takes it over)
    w = ef.Wrapper(f)
    events = []

    def promoted(x):
        return "promoted"

    def adapt(event, code, fn, details):
        events.append(event)
        return promoted
    ef.set_adapt_callback(adapt)
    ef.add_entry(f.__code__, X, (("type", 0, int),), lambda x: "first", promote_at=3)
    assert [w(1), w(1), w(1), w(1)] == ["first", "first", "promoted", "promoted"]
    assert events == ["promote"]
    assert ef.entry_stats(f.__code__)[0]["hits"] == 4


class FakeClock:
    """A clock that advances by the duration of the run it times: runs of plain Python last
    `plain`, runs of the entry's function `fn` (the function under test tells which ran)."""

    def __init__(self, plain, fn):
        self.now, self.durations, self.running = 0.0, {"plain": plain, "fn": fn}, None

    def __call__(self):
        if self.running is not None:
            self.now += self.durations[self.running]
            self.running = None
        return self.now


@pytest.mark.parametrize("plain_time, fn_time, keeps", [
    (1.0, 2.0, "plain"),       # plain clearly faster: plain from then on
    (2.0, 1.0, "fn"),
    (0.984375, 1.0, "fn"),     # plain barely faster: the compiled function stays
])
def test_a_trial_keeps_the_faster(plain_time, fn_time, keeps):
    clock = FakeClock(plain_time, fn_time)

    def f(x):
        clock.running = "plain"
        return "plain"

    def compiled(x):
        clock.running = "fn"
        return "fn"
    state = ef.mark(f.__code__)  # noqa: F841 (the Wrapper takes it over)
    w = ef.Wrapper(f)
    told = []
    ef.set_adapt_callback(lambda event, code, fn, details: told.append((event, details)))
    ef.set_perf_clock(clock)
    ef.add_entry(f.__code__, X, (("type", 0, int),), compiled, trial=6)
    ran = [w(1) for _ in range(6)]
    assert sorted(ran) == ["fn"] * 3 + ["plain"] * 3          # alternated while timed
    assert told == [("trial", (fn_time, plain_time, keeps == "plain"))]
    assert [w(1) for _ in range(3)] == [keeps] * 3
    stats = ef.entry_stats(f.__code__)[0]
    assert stats["plain"] is (keeps == "plain") and stats["trial_left"] == 0
    assert (stats["best_fn"], stats["best_plain"]) == (fn_time, plain_time)


def test_a_raising_run_is_not_timed():
    clock = FakeClock(1.0, 2.0)
    calls = []

    def f(x):
        clock.running = "plain"
        calls.append("plain")
        if len(calls) == 1:
            raise ValueError("first")
        return "plain"
    state = ef.mark(f.__code__)  # noqa: F841 (the Wrapper takes it over)
    w = ef.Wrapper(f)
    ef.set_adapt_callback(lambda *a: None)
    ef.set_perf_clock(clock)
    ef.add_entry(f.__code__, X, (("type", 0, int),), lambda x: "fn", trial=2)
    with pytest.raises(ValueError, match="first"):
        w(1)
    assert ef.entry_stats(f.__code__)[0]["trial_left"] == 2
