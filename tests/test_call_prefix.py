"""3.11's jitted function objects (pijit/call_prefix.py, csrc/call_prefix.c): the user's code
behind a prefix that asks pijit first, in the caller's evaluation loop. What these tests pin
down: the prefix leaves the user's code as it was (lines, exception table), a StopIteration a
compiled call raises leaves the frame once (FOR_ITER, which asks, would take it for "go on"),
a jitted copy follows its user's function when a call's arguments bind alike and refuses when
they might not, and a copy whose user's function someone else holds is given back only as
far as its prefix goes on at once while that function stays as the copy took it (3.11 has no
function watcher to see it change). The rules hold on every version
where they apply; the prefix's own layout only on 3.11."""
import dis
import types

import numpy as np
import pytest

import pijit
from pijit import _compat, call_prefix, eval_frame as ef

only_3_11 = pytest.mark.skipif(not _compat.CALL_PREFIX, reason="3.11's prefix")


def fresh(fn):
    new = types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__,
                             fn.__defaults__, fn.__closure__)
    new.__qualname__ = fn.__qualname__
    return new


def tries(x, n):
    total = 0.0
    for i in range(n):
        try:
            total += x[i]
        except IndexError:
            total -= 1.0
    return total


@only_3_11
def test_the_prefix_keeps_the_users_code_lines_and_handlers():
    code = tries.__code__
    armed = call_prefix.prefixed(code)
    assert ef.original_code(armed) is code and call_prefix.prefixed(armed) is armed
    units = len(armed.co_code) - len(code.co_code)
    assert armed.co_code[units:] == code.co_code
    assert [(s + units, e + units, line) for s, e, line in code.co_lines()] == \
        [(s, e, line) for s, e, line in armed.co_lines() if s >= units]
    assert all(line is None for s, _, line in armed.co_lines() if s < units)
    assert [(e.start + units, e.end + units, e.target + units, e.depth, e.lasti)
            for e in dis._parse_exception_table(code)] == \
        [(e.start, e.end, e.target, e.depth, e.lasti) for e in dis._parse_exception_table(armed)]
    f = types.FunctionType(armed, tries.__globals__)      # no Wrapper: its prefix goes on
    x = np.arange(3.0)
    assert f(x, 5) == tries(x, 5) == 1.0


calls = []


def stops(x):
    calls.append(1)
    y = x * 2.0
    raise StopIteration(y)


def test_a_stop_iteration_leaves_a_compiled_call_once():
    jitted = pijit.jit(fresh(stops))
    x = np.arange(3.0)
    for k in range(1, 4):
        with pytest.raises(StopIteration) as info:
            jitted(x)
        assert np.array_equal(info.value.value, x * 2.0)
        assert len(calls) == k
    calls.clear()
    s = pijit.stats(jitted)
    assert s["compile_count"] == 1 and s["cache_hits"] == 2


def scaled(x, k=1.0):
    return x + k


def times(x, k=1.0):
    return x * k


def test_a_jitted_copy_follows_its_function_when_the_arguments_bind_alike():
    f = fresh(scaled)
    jitted = pijit.jit(f)
    x = np.arange(3.0)
    assert np.array_equal(jitted(x), x + 1.0)
    f.__code__ = times.__code__
    assert np.array_equal(jitted(x), x * 1.0) and np.array_equal(jitted(x, 3.0), x * 3.0)
    f.__defaults__ = (5.0,)
    assert np.array_equal(jitted(x, 2.0), x * 2.0)      # passed: binds alike
    assert np.array_equal(jitted(x), x * 5.0)


@pytest.mark.xfail(_compat.CALL_PREFIX, strict=True, raises=RuntimeError,
                   reason="3.11: a call of the jitted copy binds its arguments before pijit "
                   "sees it; when its function's defaults changed since and the call may have "
                   "taken the old one, pijit cannot tell what was passed and refuses")
def test_a_jitted_copy_takes_its_functions_new_defaults():
    f = fresh(scaled)
    jitted = pijit.jit(f)
    x = np.arange(3.0)
    assert np.array_equal(jitted(x), x + 1.0)
    f.__defaults__ = (7.0,)
    assert np.array_equal(jitted(x), x + 7.0)


def plus_one(x):
    return x + 1.0


def doubled(x):
    return x * 2.0


@pytest.mark.usefixtures("adaptive", "cheap_plain_runs")
def test_a_copy_whose_function_someone_holds_follows_it_after_many_calls():
    f = fresh(plus_one)
    jitted = pijit.jit(f, jit_config={"compile_after_ms": 0})
    for k in range(1200):
        assert jitted(k) == k + 1.0
    # 3.11 cannot see f change once the copy runs f's code by itself: it keeps asking.
    assert ef.vectorcall_of(jitted) == ("cpython" if _compat.FUNCTION_VECTORCALL else "pijit")
    f.__code__ = doubled.__code__
    assert jitted(5) == 10.0


@only_3_11
@pytest.mark.usefixtures("adaptive", "cheap_plain_runs")
def test_a_copy_whose_function_someone_holds_is_given_back_behind_its_prefix():
    """Its prefix then only checks the function: the calls are counted nowhere; a change of
    the function is followed (and arms it), as is a reset."""
    f = fresh(plus_one)
    jitted = pijit.jit(f, jit_config={"compile_after_ms": 0})
    code = ef.original_code(jitted.__code__)
    for k in range(1200):
        assert jitted(k) == k + 1.0
    assert ef.given_back(jitted) and pijit.code_info(jitted)["inlined"] == 1
    assert jitted.__code__ is not code                  # the prefix stays
    seen = ef.counters(code)
    assert [jitted(k) for k in range(50)] == [k + 1.0 for k in range(50)]
    assert ef.counters(code) == seen                    # not seen at all
    pijit.reset(jitted)
    assert not ef.given_back(jitted)
    x = np.arange(3.0)
    np.testing.assert_array_equal(jitted(x), x + 1.0)
    assert pijit.code_info(jitted)["compile_count"] == 1
    for k in range(1200):
        assert jitted(k) == k + 1.0
    assert not ef.given_back(jitted)                    # a compiled entry: never
    pijit.reset(jitted)
    for k in range(1200):
        assert jitted(k) == k + 1.0
    assert ef.given_back(jitted)
    f.__code__ = doubled.__code__
    assert jitted(5) == 10.0 and not ef.given_back(jitted)


@only_3_11
@pytest.mark.usefixtures("adaptive", "cheap_plain_runs")
def test_inside_a_jitted_call_a_held_copy_given_back_is_seen_and_given_back_once():
    """Calls from inside a jitted call (here a Wrapper's call of a plain driver) take the
    armed path, as a given-back function's reach the hook: counted, and not given back
    again at each (code_info's 'inlined' counts the give-backs of live functions)."""
    f = fresh(plus_one)
    jitted = pijit.jit(f, jit_config={"compile_after_ms": 0})
    code = ef.original_code(jitted.__code__)
    for k in range(1200):
        jitted(k)
    assert ef.given_back(jitted)
    seen = ef.counters(code)["bypassed"]

    def driver(n):
        return [jitted(k) for k in range(n)]
    assert ef.Wrapper(driver)(50) == [k + 1.0 for k in range(50)]
    assert ef.counters(code)["bypassed"] == seen + 50
    assert ef.given_back(jitted) and pijit.code_info(jitted)["inlined"] == 1


@pytest.mark.usefixtures("adaptive")
def test_a_decorated_function_is_given_back_and_reset_arms_it():
    @pijit.jit(jit_config={"compile_after_ms": 0})
    def plus(x):
        return x + 1
    for k in range(1200):
        assert plus(k) == k + 1
    assert ef.vectorcall_of(plus) == "cpython" and ef.given_back(plus)
    # 3.11: given back, the function runs the user's code itself.
    assert plus.__code__ is ef.original_code(plus.__code__)
    pijit.reset(plus)
    assert ef.vectorcall_of(plus) == "pijit" and not ef.given_back(plus)
    x = np.arange(3.0)
    assert np.array_equal(plus(x), x + 1)


@only_3_11
def test_the_prefix_leaks_nothing():
    """Compiled hits, a StopIteration kept and raised by the prefix, a call made again for
    a changed function, and calls of a function left to plain Python (go on)."""
    import gc
    import sys
    f, g = fresh(scaled), fresh(stops)
    jitted, raising = pijit.jit(f), pijit.jit(g)
    x = np.arange(3.0)
    prefix = jitted.__code__.co_consts[-1]

    def cycle(swap):
        jitted(x)
        jitted(x, 2.0)
        with pytest.raises(StopIteration):
            raising(x)
        if swap:
            f.__code__ = (times if f.__code__ is scaled.__code__ else scaled).__code__
            jitted(x)
        calls.clear()

    for swap in (False, True):
        for _ in range(3):
            cycle(swap)
        gc.collect()
        before = [sys.getrefcount(o) for o in (x, f, jitted, g, raising, prefix)]
        for _ in range(20):
            cycle(swap)
        gc.collect()
        assert [sys.getrefcount(o) for o in (x, f, jitted, g, raising, prefix)] == before
