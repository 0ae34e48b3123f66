"""The miss policy of pijit.runtime: the per-code record under reset, transient and foreign
failures during a compile, automatic dynamic dims decided against every entry, and what the
entry limit keeps (resume functions and outlined loop bodies included).

Each test checks results against plain Python AND how the calls ran (stats, code_info), so
a silent fallback cannot pass. Threads are in test_concurrency.py."""
from __future__ import annotations

import logging
import os
import random
import signal

import numpy as np
import pytest

import pijit
from pijit import cache, eval_frame, runtime

from differential import assert_equal_values, assert_same
from test_hook import _graph_mode  # noqa: F401 - autouse: GRAPH_MODE, hook left uninstalled

O0 = {"jit_level": "O0"}


def _code(fn):
    return fn.fn.__code__


def _affine(x):
    return x * 2.0 + 1.0


# ---------------------------------------------------------------------------------------------
# 14.5: the record stays consistent when a reset lands inside a miss.

class ResetKnob:
    """A hash_args object whose repr (how an unhashable object is fingerprinted) resets the
    jitted function when `armed` reaches zero: the reset then lands inside a guard check."""

    __hash__ = None

    def __init__(self):
        self.version, self.countdown, self.target = 0, None, None

    def __eq__(self, other):
        return self is other

    def __repr__(self):
        if self.countdown is not None:
            self.countdown -= 1
            if self.countdown == 0:
                self.countdown = None
                pijit.reset(self.target)
        return f"ResetKnob({self.version})"


def test_reset_inside_a_miss_keeps_the_record_consistent():
    knob = ResetKnob()
    f = pijit.jit(_affine, hash_args=[knob], jit_config=O0)
    knob.target = f
    pijit.reset(f)
    x = np.arange(3.0)
    assert_equal_values(f(x), _affine(x))
    knob.version = 1
    # repr 1: the C guard walk fails on the new version (a miss); repr 2: on_miss asks which
    # guard failed, and the reset lands there, after on_miss saw one entry.
    knob.countdown = 2
    assert_equal_values(f(x), _affine(x))          # was: IndexError from runtime.on_miss
    # The entry compiled across the reset is not installed: the record and the C cache
    # agree, and the next call compiles afresh.
    assert pijit.stats(f)["entries"] == [] and eval_frame.entry_count(_code(f)) == 0
    assert_equal_values(f(x), _affine(x))
    assert_equal_values(f(x), _affine(x))
    s = pijit.stats(f)
    assert (s["compile_count"], s["cache_hits"], s["cache_misses"]) == (1, 1, 1), s
    assert len(s["entries"]) == eval_frame.entry_count(_code(f)) == 1


# ---------------------------------------------------------------------------------------------
# 14.8 and 16.4: transient failures are retried; what a signal handler raises propagates.

def _failing_affine(monkeypatch, exc_type, times, **config):
    """A jitted _affine (jit_config O0 and `config`) on a fresh cache whose first `times`
    compiles raise exc_type in runtime.compile_frame; returns it, an input, and the log of
    compile attempts."""
    attempts = []
    real = runtime.compile_frame

    def compile_frame(*a, **kw):
        attempts.append(len(attempts))
        if len(attempts) <= times:
            raise exc_type("pijit ran out of something")
        return real(*a, **kw)
    monkeypatch.setattr(runtime, "compile_frame", compile_frame)
    f = pijit.jit(_affine, jit_config={**O0, **config})
    pijit.reset(f)
    return f, np.arange(4.0), attempts


def test_transient_failure_is_retried_at_the_next_miss(monkeypatch):
    f, x, attempts = _failing_affine(monkeypatch, MemoryError, 1)
    for _ in range(3):
        assert_equal_values(f(x), _affine(x))
    s = pijit.stats(f)
    assert len(attempts) == 2
    assert (s["compile_count"], s["cache_hits"], s["cache_misses"]) == (1, 1, 2), s
    assert s["eager_fallbacks"] == [
        f"transient error: MemoryError: pijit ran out of something; compiled again at the "
        f"next miss ({__file__}:{_affine.__code__.co_firstlineno})"]


def test_a_transient_failure_that_persists_ends_in_plain_python(monkeypatch):
    # inline_plain off: on 3.12+ a code left to plain Python is given back to CPython, whose
    # calls then go uncounted (test_inline), and this test counts every call
    f, x, attempts = _failing_affine(monkeypatch, RecursionError, 10 ** 6, inline_plain=False)
    for _ in range(100):
        assert_equal_values(f(x), _affine(x))
    s = pijit.stats(f)
    # Attempts at the 1st, 2nd, 4th, ... 64th miss, then never again.
    assert len(attempts) == runtime.TRANSIENT_RETRIES + 1 == 7
    assert s["state"] == "never_compile" and s["compile_count"] == 0
    assert s["cache_misses"] == 64 and s["call_count"] == 100
    assert s["eager_fallbacks"][-1].startswith("internal error: RecursionError")
    assert sum(r.startswith("transient error") for r in s["eager_fallbacks"]) == 6
    pijit.reset(f)                                  # a reset starts the count again
    assert_equal_values(f(x), _affine(x))
    assert len(attempts) == 8 and pijit.stats(f)["state"] != "never_compile"


def test_an_internal_error_still_leaves_the_code_to_plain_python(monkeypatch):
    f, x, attempts = _failing_affine(monkeypatch, ValueError, 10 ** 6)
    for _ in range(3):
        assert_equal_values(f(x), _affine(x))
    s = pijit.stats(f)
    assert len(attempts) == 1 and s["state"] == "never_compile"
    assert s["eager_fallbacks"][0].startswith("internal error: ValueError")
    strict = pijit.jit(_affine, jit_config=dict(O0, compile_with_try=False))
    pijit.reset(strict)
    with pytest.raises(ValueError, match="ran out"):
        strict(x)


class Timeout(Exception):
    """What an alarm-based timeout's signal handler raises."""


def _raise_timeout(signum, frame):
    raise Timeout("time is up")


@pytest.fixture
def usr1_handler():
    if not hasattr(signal, "SIGUSR1"):
        pytest.skip("no SIGUSR1 here")
    old = signal.signal(signal.SIGUSR1, _raise_timeout)
    yield
    signal.signal(signal.SIGUSR1, old)


def test_exception_of_a_signal_handler_during_capture_propagates(monkeypatch, usr1_handler):
    from pijit import compile_frame as spine
    real = spine.capture_frame
    signals = []

    def capture_frame(*a, **kw):
        if not signals:
            signals.append(1)
            os.kill(os.getpid(), signal.SIGUSR1)   # the handler runs at the next bytecode
        return real(*a, **kw)
    monkeypatch.setattr(spine, "capture_frame", capture_frame)
    f = pijit.jit(_affine, jit_config=O0)
    pijit.reset(f)
    x = np.arange(4.0)
    with pytest.raises(Timeout, match="time is up"):    # was: swallowed, never_compile
        f(x)
    s = pijit.stats(f)
    assert s["state"] == "candidate" and s["eager_fallbacks"] == [] and s["entries"] == []
    assert_equal_values(f(x), _affine(x))
    assert_equal_values(f(x), _affine(x))
    s = pijit.stats(f)
    assert (s["compile_count"], s["cache_hits"]) == (1, 1), s


def test_exception_of_a_signal_handler_wrapped_by_capture_propagates(monkeypatch, usr1_handler):
    """Capture turns an exception of a call it makes into a graph break ("plain Python will
    raise it"); one a signal handler raised meanwhile is still the user's."""
    from pijit import compile_frame as spine
    from pijit.capture.graph_break import GraphBreak, Reason
    real = spine.capture_frame

    def capture_frame(*a, **kw):
        try:
            os.kill(os.getpid(), signal.SIGUSR1)
            real(*a, **kw)
        except Exception:
            raise GraphBreak(Reason.UNSUPPORTED_CALL, "a call raised")
    monkeypatch.setattr(spine, "capture_frame", capture_frame)
    f = pijit.jit(_affine, jit_config=O0)
    pijit.reset(f)
    with pytest.raises(Timeout):
        f(np.arange(4.0))
    assert pijit.stats(f)["entries"] == []


def test_keyboard_interrupt_during_compile_propagates_and_the_next_call_compiles(monkeypatch):
    f, x, attempts = _failing_affine(monkeypatch, KeyboardInterrupt, 1)
    with pytest.raises(KeyboardInterrupt):
        f(x)
    s = pijit.stats(f)
    assert s["state"] == "candidate" and s["eager_fallbacks"] == [] and s["entries"] == []
    assert cache.record(_code(f)).builder is None
    assert_equal_values(f(x), _affine(x))
    assert len(attempts) == 2 and pijit.stats(f)["compile_count"] == 1


# ---------------------------------------------------------------------------------------------
# 14.9: dynamic dims are decided against every entry of the same dtype and ndim.

def _counts(fn):
    s = pijit.stats(fn)
    return s["compile_count"], s["cache_hits"]


def test_alternating_ndims_make_one_dynamic_entry_each():
    f = pijit.jit(_affine, jit_config=O0)
    pijit.reset(f)
    for k in range(1, 101):
        for x in (np.ones(k), np.ones((k, 3))):
            assert_equal_values(f(x), _affine(x))
    s = pijit.stats(f)
    # (1,) and (1, 3) static; (2,) and (2, 3) dynamic in their changed dim; then all hit
    # (was: 8 static entries, the limit, 0 hits).
    assert _counts(f) == (4, 196), s
    assert s["state"] == "callable" and s["eager_fallbacks"] == []
    guards = sorted(g for e in s["entries"] for g in e["guards"])
    assert guards == ["x: ndarray float64[1,3] C/F", "x: ndarray float64[1] C/F",
                      "x: ndarray float64[?,3] C", "x: ndarray float64[?] C/F"], guards


def test_alternating_dtypes_make_one_dynamic_entry_each():
    f = pijit.jit(_affine, jit_config=O0)
    pijit.reset(f)
    dtypes = (np.float64, np.float32, np.int64)
    for k in range(1, 51):
        for dtype in dtypes:
            x = np.arange(k, dtype=dtype)
            assert_equal_values(f(x), _affine(x))
    assert _counts(f) == (6, 150 - 6)
    assert pijit.stats(f)["recompile_reasons"][2:] == [
        "x: expected int64[1] C/F, got float64[2] C/F",
        "x: expected float64[?] C/F, got float32[2] C/F",
        "x: expected float32[?] C/F, got int64[2] C/F"]


def test_scalar_values_are_decided_against_every_entry():
    def scale(x, s):
        return x * s
    f = pijit.jit(scale, jit_config=O0)
    pijit.reset(f)
    x = np.arange(3.0)
    for k in range(20):
        for s in (float(k), k):                      # a float and an int argument, alternating
            assert_equal_values(f(x, s), scale(x, s))
    # 0.0 and 0 specialized; 1.0 and 1 dynamic values; every later call hits.
    assert _counts(f) == (4, 36)


def test_mixed_ndims_use_the_entries_they_have():
    f = pijit.jit(_affine, jit_config=O0)
    pijit.reset(f)
    rng = random.Random(0)
    for _ in range(2000):
        shape = tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 6)))
        x = np.ones(shape)
        assert_equal_values(f(x), _affine(x))
    compiles, hits = _counts(f)
    # 6 ndims need 12 entries, 8 are allowed: ndims that reached their dynamic entry hit.
    assert compiles == 8 and hits > 600, (compiles, hits)


# ---------------------------------------------------------------------------------------------
# 18.4: past limit_graph_count, matching inputs keep their entries; the rest is said once.

def _breaks_once(x):
    y = x + 1
    print("between graphs")
    return y * 2


def _breaking_loop(x):
    total = x * 0
    for i in range(3):
        total = total + x * i
        print("in the loop", i)
    return total


def _resumes(fn):
    return [c for c in cache.family(_code(fn))[1:]]


@pytest.mark.parametrize("plain", [_breaks_once, _breaking_loop])
def test_past_the_limit_resume_functions_keep_their_entries(plain, caplog):
    f = pijit.jit(plain, jit_config=dict(O0, limit_graph_count=2))
    pijit.reset(f)
    a, b, c = np.arange(3.0), np.arange(3, dtype=np.float32), np.arange(3, dtype=np.int32)
    for x in (a, b):
        assert_equal_values(f(x), plain(x))
    resumes = _resumes(f)
    assert resumes and all(eval_frame.entry_count(r) == 2 for r in resumes), resumes
    with caplog.at_level(logging.WARNING, logger="pijit.recompiles"):
        for _ in range(3):
            assert_equal_values(f(c), plain(c))       # a third dtype: plain Python
    before = {id(r): eval_frame.counters(r) for r in resumes}
    for x in (a, b, a, b):                            # the others still hit, resumes too
        assert_equal_values(f(x), plain(x))
    s = pijit.stats(f)
    assert s["compile_count"] == 2 and s["cache_hits"] == 4, s
    for r in resumes:
        now, then = eval_frame.counters(r), before[id(r)]
        assert now["hits"] - then["hits"] == now["calls"] - then["calls"] >= 4, (r, now, then)
        assert eval_frame.entry_count(r) == 2
    # Said once per code, with the reason, in stats and on PIJIT_LOG=recompiles.
    limit = [r for r in s["eager_fallbacks"] if "limit_graph_count=2 reached" in r]
    assert len(limit) == 1 and f"for {plain.__qualname__}:" in limit[0], s["eager_fallbacks"]
    assert "got int32[3]" in limit[0]
    logged = [r.getMessage() for r in caplog.records if "limit_graph_count" in r.getMessage()]
    assert len(logged) == 1 and "got int32[3]" in logged[0], logged


def test_past_the_limit_a_resume_function_of_its_own_is_reported_once(caplog):
    """The function's own entries are few; a resume function sees a new value each call
    (a global read after the break) and reaches the limit alone."""
    def body(x):
        y = x + 1
        print("between graphs")
        return y * _SCALE
    f = pijit.jit(body, jit_config=dict(O0, limit_graph_count=2, enable_dynamic_shape=False))
    pijit.reset(f)
    x = np.arange(3.0)
    global _SCALE
    with caplog.at_level(logging.WARNING, logger="pijit.recompiles"):
        for k in range(6):
            _SCALE = float(k)
            assert_equal_values(f(x), (x + 1) * float(k))
    _SCALE = 1.0
    s = pijit.stats(f)
    assert s["compile_count"] == 1 and s["cache_hits"] == 5, s
    (limit,) = [r for r in s["eager_fallbacks"] if "limit_graph_count" in r]
    assert "<resume at line" in limit and "_SCALE" in limit, limit
    assert len([r for r in caplog.records if "limit_graph_count" in r.getMessage()]) == 1


_SCALE = 1.0


# ---------------------------------------------------------------------------------------------
# 18: a value capture needs constant (a library function checking its int argument) is
# specialised at once once that is known, and after SPECIALIZED_ENTRIES such entries the
# code stops compiling one entry per value.

def _checked_head(x, n):
    if n < 1:                       # a branch on n: capture needs n constant
        raise ValueError("n must be positive")
    return x[:n] * 2.0 + n


def _count_captures(monkeypatch):
    """The dynamic sources of each compile_frame call the runtime makes."""
    calls = []
    real = runtime.compile_frame

    def counting(func, args, config, dynamic, *rest):
        calls.append(sorted(s.name() for s in dynamic))
        return real(func, args, config, dynamic, *rest)
    monkeypatch.setattr(runtime, "compile_frame", counting)
    return calls


def test_a_value_capture_needs_constant_is_specialised_once_known(monkeypatch, caplog):
    f = pijit.jit(_checked_head, jit_config=O0)
    pijit.reset(f)
    captures = _count_captures(monkeypatch)
    x = np.linspace(0.0, 1.0, 40)
    with caplog.at_level(logging.WARNING, logger="pijit.recompiles"):
        for n in range(1, 21):
            assert_equal_values(f(x, n), _checked_head(x, n))
    # n=1 static; n=2 tried dynamic (the branch breaks it) then specialised; n=3 specialised
    # at once; n=4 on: plain Python (was: 8 entries, two captures each from n=2).
    assert captures == [[], ["n"], [], []], captures
    s = pijit.stats(f)
    assert s["compile_count"] == 3 and s["cache_hits"] == 0, s
    assert all(not e["fallback"] and e["ops"] for e in s["entries"]), s["entries"]
    (why,) = s["eager_fallbacks"]
    assert "_checked_head: n took new values or sizes again, and capture needs" in why, why
    assert "n: expected 3, got 4" in why, why
    assert len([r for r in caplog.records if "new values or sizes" in r.getMessage()]) == 1
    for n in (3, 2, 1, 7, 3):        # the entries it has still serve their values
        assert_equal_values(f(x, n), _checked_head(x, n))
    s = pijit.stats(f)
    assert s["compile_count"] == 3 and s["cache_hits"] == 4, s
    with pytest.raises(ValueError, match="n must be positive"):
        f(x, 0)


def test_values_that_can_be_dynamic_are_not_held_back(monkeypatch):
    """The rule's other side: n used only as a number goes dynamic at its first change, and
    a new dtype of x still compiles (no freeze)."""
    def head_scaled(x, n):
        return x * n + 1.0
    f = pijit.jit(head_scaled, jit_config=O0)
    pijit.reset(f)
    captures = _count_captures(monkeypatch)
    for dtype in (np.float64, np.float32):
        x = np.linspace(0.0, 1.0, 40).astype(dtype)
        for n in range(1, 11):
            assert_equal_values(f(x, n), head_scaled(x, n))
    # Per dtype: n=1 static, then n dynamic from n=2.
    assert captures == [[], ["n"], [], ["n"]], captures
    s = pijit.stats(f)
    assert s["compile_count"] == 4 and s["eager_fallbacks"] == [], s


def _row_steps(x):
    if x.shape[0] < 2:              # a branch on a dim: capture needs it constant
        raise ValueError("need two rows")
    return x[1:] - x[:-1]


def test_dims_capture_needs_constant_are_specialised_once_known(monkeypatch):
    """The same rule for an array whose size a branch reads."""
    f = pijit.jit(_row_steps, jit_config=O0)
    pijit.reset(f)
    captures = _count_captures(monkeypatch)
    for n in range(2, 12):
        x = np.arange(float(n))
        assert_equal_values(f(x), _row_steps(x))
    assert captures == [[], ["x"], [], []], captures
    s = pijit.stats(f)
    assert s["compile_count"] == 3 and len(s["eager_fallbacks"]) == 1, s
    assert "_row_steps: x took new values or sizes again" in s["eager_fallbacks"][0]
    for n in (4, 3, 2):
        x = np.arange(float(n))
        assert_equal_values(f(x), _row_steps(x))
    assert pijit.stats(f)["cache_hits"] == 3


# ---------------------------------------------------------------------------------------------
# Issue 18: a list whose length changes between calls is not captured once per length.

def _scaled_by_mean(x, vals):
    return np.sqrt(x * x + 1.0) * np.mean(vals)


def _lists(count):
    rng = np.random.default_rng(18)
    return [[float(v) for v in rng.random(1 + i % 9)] for i in range(count)]


def test_a_list_of_new_lengths_goes_dynamic_at_its_first_change(monkeypatch):
    """len(vals) guarded once, then neither its length nor its items: np.mean(vals) is an
    asarray node on the list, guarded by its items' dtype, and the whole function is one
    graph (was: a break at np.mean, and before that an entry per length up to
    limit_graph_count, then plain Python)."""
    f = pijit.jit(_scaled_by_mean, jit_config=O0)
    pijit.reset(f)
    captures = _count_captures(monkeypatch)
    x = np.linspace(-1.0, 1.0, 40)
    for vals in _lists(30):
        assert_equal_values(f(x, list(vals)), _scaled_by_mean(x, vals))
    # vals=[v0] static; then vals (and v0, which changed too) dynamic
    assert captures == [[], ["vals", "vals[0]"]], captures
    s = pijit.stats(f)
    assert s["compile_count"] == 2 and s["eager_fallbacks"] == [], s
    assert s["cache_misses"] == 2, s
    dynamic = s["entries"][0]           # the newest
    assert [g for g in dynamic["guards"] if "vals" in g] == [
        "type(vals) is list", "np.asarray(vals): float64[?] (by its items' types)"], dynamic
    assert dynamic["ops"] == ["mul", "add", "sqrt", "asarray", "mean", "mul"], dynamic
    assert s["break_count"] == 0, s


def _collected(a, t):
    idx = []
    for i in range(a.shape[0]):
        if a[i] > t:
            idx.append(i)
    return a[np.array(idx, dtype=np.int64)].sum() * 2.0 + a.mean()


def test_indices_collected_in_a_loop_compile_once_after_it(monkeypatch):
    """The list a loop nest collects indices into is a graph value after the loop, and
    np.array(idx, dtype=np.int64) of it a graph node: one graph, whatever the count of
    indices; the function captured for t static, then dynamic (was: a resume function
    after the loop, captured again per count of indices until the list went dynamic)."""
    f = pijit.jit(_collected, jit_config=O0)
    pijit.reset(f)
    captures = _count_captures(monkeypatch)
    a = np.random.default_rng(5).random(60)
    for t in np.linspace(0.02, 0.98, 40):
        assert_equal_values(f(a, float(t)), _collected(a, float(t)))
    s = pijit.stats(f)
    assert s["eager_fallbacks"] == [], s
    assert captures == [[], ["t"]], captures


def _collected_untyped(a, t):
    idx = []
    for i in range(a.shape[0]):
        if a[i] > t:
            idx.append(i)
    return a[np.array(idx)].sum() * 2.0 + a.mean()     # np.array of ints: a break there


def test_indices_collected_in_a_loop_and_read_after_a_break_compile_once(monkeypatch):
    """np.array of the indices breaks the graph (its dtype is float64 when the list is
    empty): its resume function gets the list as an argument, and a new count of indices
    does not capture it again once the list went dynamic."""
    f = pijit.jit(_collected_untyped, jit_config=O0)
    pijit.reset(f)
    captures = _count_captures(monkeypatch)
    a = np.random.default_rng(5).random(60)
    for t in np.linspace(0.02, 0.9, 40):
        assert_equal_values(f(a, float(t)), _collected_untyped(a, float(t)))
    s = pijit.stats(f)
    assert s["eager_fallbacks"] == [], s
    # the function: t static, then dynamic; the resume function at np.array: the list of
    # one length, then dynamic (the list is the one dynamic source other than t)
    assert len(captures) == 4 and sum(c not in ([], ["t"]) for c in captures) == 1, captures


def _items_summed(x, vals):
    return x * np.array(vals).sum()


def test_a_list_of_one_length_keeps_its_length_guarded(monkeypatch):
    """Items that change become dynamic scalars; the length, which did not change, stays
    guarded and the list is read item by item in the graph (no break)."""
    f = pijit.jit(_items_summed, jit_config=O0)
    pijit.reset(f)
    captures = _count_captures(monkeypatch)
    x = np.linspace(-1.0, 1.0, 40)
    for vals in _lists(30):
        vals = (vals * 3)[:3]
        assert_equal_values(f(x, list(vals)), _items_summed(x, vals))
    assert captures == [[], ["vals[0]", "vals[1]", "vals[2]"]], captures
    s = pijit.stats(f)
    assert s["compile_count"] == 2 and s["eager_fallbacks"] == [], s
    info = pijit.explain(f, x, [1.0, 2.0, 4.0])
    assert info.graph_count == 1 and info.graph_break_count == 0, info


def _appends_and_prints(x, n):
    out = []
    for i in range(n):
        out.append(x * 2.0)
        print(len(out))
    return out


def test_a_loop_body_appending_to_a_growing_list_compiles_twice():
    """The print breaks the loop body, which is outlined and gets `out` one item longer at
    every call: `out` goes dynamic at the second iteration. The append is still captured
    (no break there); len(out) breaks where print breaks anyway."""
    x = np.linspace(-1.0, 1.0, 8)
    report = assert_same(_appends_and_prints, x, 30, graphs=None, breaks=None, calls=1)
    reasons = [b["reason"] for b in report.break_reasons]
    append_line = _appends_and_prints.__code__.co_firstlineno + 3
    assert not any(b["lineno"] == append_line for b in report.break_reasons), reasons
    assert any("length changes between calls" in r for r in reasons), reasons
    f = pijit.jit(_appends_and_prints, jit_config=O0)
    f(x, 30)
    code = pijit.api._code_of(f)
    counts = [cache.record(c).compile_count for c in cache.family(code)]
    assert max(counts) == 2 and sum(counts) <= len(counts) + 1, counts     # was: 8, frozen


def _head_by_mean(x, vals, n):
    if n < 1:                       # a branch on n: capture needs it constant
        raise ValueError("n must be positive")
    return x[:n] * np.mean(vals)


def test_a_varied_list_stays_dynamic_beside_a_value_that_must_be_constant(monkeypatch):
    """n and the length of vals change at the same call: the entry is specialised on n
    only; vals stays dynamic (was: both specialised, vals then never dynamic)."""
    f = pijit.jit(_head_by_mean, jit_config=O0)
    pijit.reset(f)
    captures = _count_captures(monkeypatch)
    x = np.linspace(-1.0, 1.0, 40)
    for i in range(12):
        vals = [float(v) for v in range(1 + i % 5)]
        assert_equal_values(f(x, vals, 1 + i % 7), _head_by_mean(x, vals, 1 + i % 7))
    # n=1 static; n=2: n, vals dynamic (n breaks), then vals only (np.mean of it in the
    # graph); n=3: specialised at once, vals dynamic; then frozen by n.
    assert captures == [[], ["n", "vals"], ["vals"], ["vals"]], captures
    (why,) = pijit.stats(f)["eager_fallbacks"]
    assert "_head_by_mean: n took new values or sizes again" in why, why
