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
    from pijit import adaptive, runtime
    ef.set_callback(runtime.on_miss)
    ef.set_adapt_callback(adaptive.on_adapt)
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


class PlainClock:
    """A clock under which every plain run of a function that calls `ran()` lasts 1 s."""

    def __init__(self):
        self.now = 0.0

    def ran(self):
        self.now += 1.0

    def __call__(self):
        return self.now


def plain_wrapper(budget):
    """(a Wrapper of a function whose plain runs each last 1 s on `clock`, clock, the misses
    the hook reports), with a compile budget of `budget` seconds."""
    clock = PlainClock()

    def f(x):
        clock.ran()
        return ("plain", x)
    state = ef.mark(f.__code__)  # noqa: F841 (the Wrapper takes it over)
    w = ef.Wrapper(f)
    misses = Misses()
    ef.set_callback(misses)
    ef.set_perf_clock(clock)
    ef.set_compile_budget(f.__code__, budget)
    return w, clock, misses


def test_a_signature_compiles_once_its_plain_runs_took_the_budget():
    w, clock, misses = plain_wrapper(budget=2.5)
    f = w.fn
    assert [w(1), w(2), w(3)] == [("plain", 1), ("plain", 2), ("plain", 3)]
    assert misses.calls == [] and ef.counters(f.__code__)["deferred"] == 3
    assert w(4) == ("plain", 4) and misses.calls == ["int"]       # 3 s >= 2.5 s: compiles
    assert w(5) == ("compiled", 5)
    assert w("a") == ("plain", "a") and misses.calls == ["int"]   # a new signature waits
    assert ef.counters(f.__code__)["deferred"] == 4


def test_a_call_with_big_arrays_waits_for_the_budget_too():
    def f(x):
        return "plain"
    state = ef.mark(f.__code__)  # noqa: F841
    w = ef.Wrapper(f)
    misses = Misses()
    ef.set_callback(misses)
    ef.set_compile_budget(f.__code__, 1000.0)
    w(np.ones(100))
    w(np.ones(1 << 20))
    assert misses.calls == [] and ef.counters(f.__code__)["deferred"] == 2


def test_signatures_are_told_apart_by_array_dtype_and_ndim():
    clock = PlainClock()

    def f(x):
        clock.ran()
        return "plain"
    state = ef.mark(f.__code__)  # noqa: F841
    w = ef.Wrapper(f)
    misses = Misses()
    ef.set_callback(misses)
    ef.set_perf_clock(clock)
    ef.set_compile_budget(f.__code__, 1.5)
    for a in (np.ones(3), np.ones(4, np.float32), np.ones((2, 2))):
        w(a)
    assert misses.calls == [] and ef.counters(f.__code__)["deferred"] == 3
    w(np.ones(5))                               # float64[1] again: 1 s, not yet
    w(np.ones(6))                               # 2 s: compiles
    assert misses.calls == ["ndarray"]


class CountingClock:
    """A clock that counts its reads; time does not pass."""

    def __init__(self):
        self.reads = 0

    def __call__(self):
        self.reads += 1
        return 0.0


@pytest.mark.parametrize("how", ["wrapper", "hook"])
def test_plain_runs_not_hot_yet_time_only_a_sample(how):
    """Two clock reads cost more than a one-line function's call: a signature's first 16
    plain runs are timed, then one in 16. Through the Wrapper (positional arguments) and
    through the hook (a keyword argument: the Wrapper cannot tell the signature)."""
    def f(x):
        return x + 1
    state = ef.mark(f.__code__)  # noqa: F841 (the Wrapper takes it over)
    w = ef.Wrapper(f)
    misses = Misses()
    ef.set_callback(misses)
    clock = CountingClock()
    ef.set_perf_clock(clock)
    ef.set_compile_budget(f.__code__, 1000.0)
    call = (lambda k: w(k)) if how == "wrapper" else (lambda k: w(x=k))
    assert [call(k) for k in range(200)] == [f(k) for k in range(200)]
    assert misses.calls == [] and ef.counters(f.__code__)["deferred"] == 200
    assert clock.reads == 2 * (16 + len(range(16, 200, 16)))


def test_a_sampled_plain_run_counts_for_the_runs_it_stands_for():
    """Past the first 16 runs, a timed run counts 16 times: under a clock where every
    plain run lasts 1 s, 16 timed runs make 16 s, the 17th (timed) 32 s: a budget of
    31.5 s is used up by 17 runs, and the 18th compiles."""
    w, clock, misses = plain_wrapper(budget=31.5)
    f = w.fn
    assert [w(k) for k in range(17)] == [("plain", k) for k in range(17)]
    assert misses.calls == []
    assert w(17) == ("plain", 17) and misses.calls == ["int"]
    assert w(18) == ("compiled", 18)


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
