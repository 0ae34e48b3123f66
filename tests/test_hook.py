"""The frame hook as users meet it, through `pijit.jit`: what it leaves alone (generators),
what it must survive (recursion, threads, run-time exceptions), how arguments reach a
captured frame (closures, defaults, keywords, *args, **kwargs, methods), and the cache policy
(guards, recompile reasons, dynamic shapes, limits, modes, reset, input_signature).

Every test checks results against the plain function AND how the jitted call ran
(explain / stats / code_info), so a silent fallback to plain Python cannot pass.
The raw C API is covered by test_eval_frame.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import traceback
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import pijit
from pijit import eval_frame

from differential import assert_equal_values, assert_same

HERE = os.path.abspath(__file__)


@pytest.fixture(autouse=True)
def _graph_mode():
    """Every test starts and ends in GRAPH_MODE with the hook uninstalled."""
    pijit.set_context(mode=pijit.GRAPH_MODE)
    yield
    pijit.set_context(mode=pijit.GRAPH_MODE)
    assert not eval_frame.is_installed()


def counts(fn):
    s = pijit.stats(fn)
    return s["compile_count"], s["cache_hits"], s["cache_misses"]


def break_at(report, lineno, word):
    """The report shows that capture stopped at `lineno` for `word`: either the whole
    function fell back to plain Python, or it was split by a graph break there."""
    reasons = report.break_reasons
    assert reasons, f"no break or fallback reported:\n{report}"
    assert any(r["lineno"] == lineno and word in r["reason"] for r in reasons), reasons
    return True


def graph_entries(fn):
    return [e for e in pijit.stats(fn)["entries"] if e["fallback"] is None]


# ---------------------------------------------------------------------------------------------
# Generators are left alone.

def _gen_fn(x):
    for i in range(3):
        yield x * i


def test_jit_of_generator_function_warns_and_returns_it():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jitted = pijit.jit(_gen_fn)
    assert jitted is _gen_fn
    messages = [str(w.message) for w in caught]
    assert any("generator" in m and "_gen_fn" in m for m in messages), messages
    assert caught[0].filename == HERE          # the warning points at the caller
    x = np.arange(3.0)
    got = list(jitted(x))
    assert_equal_values(got, [x * 0, x * 1, x * 2])
    assert not eval_frame.is_installed()


def test_jit_of_generator_function_decorator_form_warns():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        @pijit.jit(jit_config={"fullgraph": False})
        def gen2(x):
            yield x + 1
    assert any("generator" in str(w.message) for w in caught)
    assert list(gen2(np.ones(2)))[0].tolist() == [2.0, 2.0]


def _helper_gen(n):
    for i in range(n):
        yield i


def _calls_generator(x):
    return x + sum(_helper_gen(4))


def test_jitted_function_calling_a_generator():
    x = np.arange(4.0)
    expected = _calls_generator(x.copy())
    jitted = pijit.jit(_calls_generator)
    pijit.reset(jitted)
    for _ in range(3):
        assert_equal_values(jitted(x), expected)
    assert not eval_frame.is_installed()
    # A call to an unknown Python function is not captured; the report says where.
    report = pijit.explain(jitted, x)
    assert break_at(report, _calls_generator.__code__.co_firstlineno + 1, "_helper_gen")
    assert all(r["filename"] == HERE for r in report.break_reasons)
    # The generator itself was never touched by the hook.
    assert _helper_gen.__code__ not in [c for c in pijit.cache.all_codes()]


# ---------------------------------------------------------------------------------------------
# Recursion.

@pijit.jit
def _rec_halves(x):
    if x.shape[0] <= 1:
        return x * 1.0
    return _rec_halves(x[1:]) + x[0]


def _rec_halves_plain(x):
    if x.shape[0] <= 1:
        return x * 1.0
    return _rec_halves_plain(x[1:]) + x[0]


def test_recursion_with_smaller_arrays():
    pijit.reset(_rec_halves)
    for n in (6, 6, 3):
        x = np.arange(float(n)) + 0.5
        assert_equal_values(_rec_halves(x), _rec_halves_plain(x))
    s = pijit.stats(_rec_halves)
    # Recursion with shapes known at capture is inlined into one graph per top-level shape.
    assert s["call_count"] == 3
    assert s["compile_count"] == 2 and s["cache_hits"] == 1
    report = pijit.explain(_rec_halves, np.arange(4.0))
    assert report.graph_count == 1 and report.graph_break_count == 0
    assert not eval_frame.is_installed()


@pijit.jit
def _rec_count(x, n):
    if n == 0:
        return x
    return _rec_count(x * 2.0, n - 1) + 1.0


def test_recursion_on_python_int_depth():
    pijit.reset(_rec_count)
    x = np.ones(3)
    for _ in range(2):
        assert_equal_values(_rec_count(x, 4), np.full(3, 2.0 ** 4 + 4))
    s = pijit.stats(_rec_count)
    # The recursion on a guarded int inlines to a depth of 4: one graph, hit the second time.
    assert s["call_count"] == 2 and s["compile_count"] == 1 and s["cache_hits"] == 1
    assert pijit.explain(_rec_count, x, 4).ops_per_graph == [["mul"] * 4 + ["add"] * 4]
    # Deeper than MAX_INLINE_DEPTH: breaks, and every level still gives the right result.
    assert_equal_values(_rec_count(x, 12), np.full(3, 2.0 ** 12 + 12))


# ---------------------------------------------------------------------------------------------
# Threads.

def _threaded_plain(x, y):
    return np.tanh(x) * y + x.sum(axis=-1, keepdims=True)


def test_eight_threads_different_shapes():
    jitted = pijit.jit(_threaded_plain)
    pijit.reset(jitted)
    barrier = threading.Barrier(8)
    calls = 100

    def work(i):
        rng = np.random.default_rng(i)
        x = rng.standard_normal((i + 1, 3 + i % 2))
        y = rng.standard_normal(x.shape[-1])
        expected = _threaded_plain(x, y)
        barrier.wait()
        bad = 0
        for _ in range(calls):
            got = jitted(x, y)
            if not (got.shape == expected.shape and np.array_equal(got, expected)):
                bad += 1
        return bad

    with ThreadPoolExecutor(8) as ex:
        results = list(ex.map(work, range(8)))
    assert results == [0] * 8
    # The hook is per interpreter: installed while any thread is in a jitted call, and
    # uninstalled once the last one returns.
    assert not eval_frame.is_installed()
    s = pijit.stats(jitted)
    assert s["call_count"] == 8 * calls
    # A call that arrives while another thread compiles this code runs plain (neither a hit
    # nor a miss); how many do depends on timing.
    assert s["cache_hits"] + s["cache_misses"] <= 8 * calls
    assert 1 <= s["compile_count"] <= 8 and s["cache_misses"] <= 8
    assert s["cache_hits"] >= 1
    assert all(e["fallback"] is None for e in s["entries"])


# ---------------------------------------------------------------------------------------------
# Run-time exceptions keep the user's file and line.

def _power_fails(x, y):
    z = x + 1
    w = np.power(z, -y)                        # FAIL LINE: ints to negative powers
    return w * 2


def _index_fails(x, idx):
    y = x * 2
    z = y[idx]                                 # FAIL LINE: out of bounds
    return z + 1


def _fail_line(fn):
    lines, start = __import__("inspect").getsourcelines(fn)
    (offset,) = [i for i, line in enumerate(lines) if "FAIL LINE" in line]
    return start + offset


@pytest.mark.parametrize("fn,args,exc", [
    (_power_fails, (np.arange(1, 4), np.arange(1, 4)), ValueError),
    (_index_fails, (np.arange(5.0), np.array([0, 7])), IndexError),
])
def test_runtime_exception_has_user_file_and_line(fn, args, exc):
    with pytest.raises(exc) as plain_info:
        fn(*args)
    jitted = pijit.jit(fn)
    pijit.reset(jitted)
    for call in range(2):          # compiling call, then cached call
        with pytest.raises(exc) as info:
            jitted(*args)
        assert str(info.value) == str(plain_info.value)
        last = traceback.extract_tb(info.value.__traceback__)[-1]
        assert last.filename == HERE, (call, last)
        assert last.lineno == _fail_line(fn), (call, last)
        assert not eval_frame.is_installed()
    s = pijit.stats(jitted)
    assert (s["compile_count"], s["cache_hits"], s["cache_misses"]) == (1, 1, 1)
    assert s["eager_fallbacks"] == []
    assert len(graph_entries(jitted)) == 1
    # And it still works on good inputs afterwards.
    good = (args[0], np.array([0, 1])) if fn is _index_fails else (args[0], -args[1] * 0)
    assert_equal_values(jitted(*good), fn(*good))


# ---------------------------------------------------------------------------------------------
# Closures, defaults, keywords, *args, **kwargs.

def _make_scaler(c):
    def scale(x):
        return x * c + 1.0
    return scale


def test_closures_sharing_one_code_object():
    s2, s3 = _make_scaler(2.0), _make_scaler(3.0)
    assert s2.__code__ is s3.__code__
    j2, j3 = pijit.jit(s2), pijit.jit(s3)
    pijit.reset(j2)
    x = np.arange(4.0)
    for _ in range(2):
        assert_equal_values(j2(x), x * 2.0 + 1.0)
        assert_equal_values(j3(x), x * 3.0 + 1.0)
    s = pijit.stats(j2)
    assert s["compile_count"] == 2
    assert s["cache_hits"] == 2
    assert any("c: expected 2.0, got 3.0" in r for r in s["recompile_reasons"]), s
    assert all(e["fallback"] is None for e in s["entries"])


def test_closure_over_array():
    def make(w):
        def f(x):
            return x @ w
        return f
    w = np.arange(6.0).reshape(3, 2)
    assert_same(make(w), np.ones((4, 3)), ops=["matmul"])


def _defaults(x, k=2.0, *, kw=1.0):
    return x * k + kw


@pytest.mark.parametrize("kwargs", [{}, {"k": 3.0}, {"kw": 5.0}, {"k": 4.0, "kw": -1.0}])
def test_defaults_and_keyword_only(kwargs):
    assert_same(_defaults, np.arange(3.0), kwargs=kwargs, ops=["mul", "add"])


def test_keyword_args_by_name():
    def f(x, y, z=None):
        if z is None:
            return x - y
        return x - y * z
    a, b = np.arange(3.0), np.ones(3)
    assert_same(f, kwargs={"y": b, "x": a})
    assert_same(f, a, kwargs={"y": b, "z": a})


def _varargs(x, *args):
    return x + args[0] * args[1]


def test_star_args():
    assert_same(_varargs, np.arange(3.0), np.ones(3), 2.0, ops=["mul", "add"])


def _varkw(x, **kw):
    return x + kw["y"]


def test_star_star_kwargs_correct():
    """A **kwargs dict is captured: one graph reading kw["y"] (its key guarded), for other
    keys a new entry."""
    x, y = np.arange(3.0), np.ones(3)
    report = assert_same(_varkw, x, kwargs={"y": y}, ops=["add"])
    assert report.ops_per_graph == [["add"]]
    assert_same(_varkw, x, kwargs={"y": y, "z": x}, ops=["add"])
    jitted = pijit.jit(_varkw)
    pijit.reset(jitted)
    jitted(x, y=y)
    with pytest.raises(KeyError):
        jitted(x, z=y)


# ---------------------------------------------------------------------------------------------
# Methods: self attributes are guarded.

class _Model:
    K = 3.0

    def __init__(self):
        self.w = np.arange(3.0)
        self.scale = 2.0

    @pijit.jit
    def forward(self, x):
        return x * self.w * self.scale

    @staticmethod
    @pijit.jit
    def static(x):
        return x + 1.0

    @classmethod
    @pijit.jit
    def klass(cls, x):
        return x + cls.K


def test_method_self_attributes_guarded():
    pijit.reset(_Model.forward)
    m = _Model()
    x = np.ones(3)
    for _ in range(2):
        assert_equal_values(m.forward(x), x * m.w * 2.0)
    assert counts(_Model.forward) == (1, 1, 1)
    m.w = np.ones((2, 3))                         # shape of self.w changes
    assert_equal_values(m.forward(x), x * m.w * 2.0)
    m.scale = 5.0                                 # scalar attribute changes
    assert_equal_values(m.forward(x), x * m.w * 5.0)
    assert_equal_values(m.forward(x), x * m.w * 5.0)
    s = pijit.stats(_Model.forward)
    assert s["compile_count"] == 3
    reasons = s["recompile_reasons"]
    assert any(r.startswith("self.w:") and "[2,3]" in r for r in reasons), reasons
    assert any("self.scale: expected 2.0, got 5.0" in r for r in reasons), reasons
    assert s["cache_hits"] == 2
    assert all(e["fallback"] is None for e in s["entries"])
    report = pijit.explain(m.forward, x)
    assert report.graph_count == 1 and report.fallback is None
    assert "self.scale == 5.0" in report.guards


def _pair_sum(t):
    a, b = t
    return a + b


def test_a_longer_tuple_misses_the_entry_of_a_shorter_one():
    """The graph of a 2-tuple unpacked item by item must not serve a 3-tuple: plain Python
    raises for it (len guards are equalities, not lower bounds)."""
    jitted = pijit.jit(_pair_sum)
    pijit.reset(jitted)
    x = np.arange(3.0)
    assert_equal_values(jitted((x, x)), x + x)
    assert "len(t) == 2" in pijit.explain(jitted, (x, x)).guards
    with pytest.raises(ValueError, match="too many values to unpack"):
        jitted((x, x, x))
    with pytest.raises(ValueError, match="not enough values to unpack"):
        jitted((x,))
    assert_equal_values(jitted((x, 2 * x)), 3 * x)


def test_method_on_two_instances():
    pijit.reset(_Model.forward)
    a, b = _Model(), _Model()
    b.scale = 4.0
    x = np.full(3, 2.0)
    for _ in range(2):
        assert_equal_values(a.forward(x), x * a.w * 2.0)
        assert_equal_values(b.forward(x), x * b.w * 4.0)
    assert counts(_Model.forward) == (2, 2, 2)


def test_staticmethod_and_classmethod():
    pijit.reset(_Model.static)
    pijit.reset(_Model.klass)
    x = np.arange(3.0)
    m = _Model()
    assert_equal_values(_Model.static(x), x + 1.0)
    assert_equal_values(m.static(x), x + 1.0)
    assert_equal_values(_Model.klass(x), x + 3.0)
    assert_equal_values(m.klass(x), x + 3.0)
    assert counts(_Model.static) == (1, 1, 1)
    assert counts(_Model.klass) == (1, 1, 1)
    assert len(graph_entries(_Model.klass)) == 1


def test_jit_of_bound_method_and_descriptor_objects():
    class C:
        def __init__(self):
            self.b = np.ones(2)

        def f(self, x):
            return x + self.b
    c = C()
    jitted = pijit.jit(c.f)
    x = np.arange(2.0)
    assert_equal_values(jitted(x), x + 1.0)
    assert_equal_values(jitted(x), x + 1.0)
    assert counts(jitted) == (1, 1, 1)
    sm = pijit.jit(staticmethod(lambda x: x * 3))
    assert isinstance(sm, staticmethod)


# ---------------------------------------------------------------------------------------------
# Guards and recompiles.

def _recompile_fn(x):
    return x * 2.0 + 1.0


def test_recompile_on_dtype_change():
    jitted = pijit.jit(_recompile_fn)
    pijit.reset(jitted)
    a, b = np.ones(3), np.ones(3, np.float32)
    for v in (a, b, a, b):
        assert_equal_values(jitted(v), _recompile_fn(v))
    s = pijit.stats(jitted)
    assert (s["compile_count"], s["cache_hits"]) == (2, 2)
    assert s["recompile_reasons"] == ["x: expected float64[3] C/F, got float32[3] C/F"]


def test_recompile_on_ndim_change():
    jitted = pijit.jit(_recompile_fn)
    pijit.reset(jitted)
    a, b = np.ones(3), np.ones((2, 3))
    for v in (a, b, a, b):
        assert_equal_values(jitted(v), _recompile_fn(v))
    s = pijit.stats(jitted)
    assert (s["compile_count"], s["cache_hits"]) == (2, 2)
    (reason,) = s["recompile_reasons"]
    assert reason.startswith("x: expected float64[3]") and "[2,3]" in reason


def test_shape_change_dynamic_shape_on():
    jitted = pijit.jit(_recompile_fn, jit_config={"enable_dynamic_shape": True})
    pijit.reset(jitted)
    for n in (3, 4, 5, 6, 7, 3):
        v = np.arange(float(n))
        assert_equal_values(jitted(v), _recompile_fn(v))
    s = pijit.stats(jitted)
    # 3 compiles a static entry; 4 recompiles with the changed dim dynamic; the rest reuse it.
    assert s["compile_count"] == 2, s
    assert s["cache_hits"] == 4
    assert s["recompile_reasons"] == ["x: expected float64[3] C/F, got float64[4] C/F"]
    assert any("float64[?]" in g for e in s["entries"] for g in e["guards"]), s["entries"]


def test_shape_change_dynamic_shape_off():
    jitted = pijit.jit(_recompile_fn, jit_config={"enable_dynamic_shape": False})
    pijit.reset(jitted)
    for n in (3, 4, 5, 3, 4):
        v = np.arange(float(n))
        assert_equal_values(jitted(v), _recompile_fn(v))
    s = pijit.stats(jitted)
    assert (s["compile_count"], s["cache_hits"]) == (3, 2)
    assert s["recompile_reasons"] == ["x: expected float64[3] C/F, got float64[4] C/F",
                                      "x: expected float64[4] C/F, got float64[5] C/F"]
    assert not any("?" in g for e in s["entries"] for g in e["guards"])


def _scalar_fn(x, s):
    return x * s


def test_recompile_on_scalar_value_change():
    jitted = pijit.jit(_scalar_fn)
    pijit.reset(jitted)
    x = np.arange(3.0)
    for s in (2.0, 3.0, 2.0, 3.0):
        assert_equal_values(jitted(x, s), x * s)
    st = pijit.stats(jitted)
    assert (st["compile_count"], st["cache_hits"]) == (2, 2)
    assert st["recompile_reasons"] == ["s: expected 2.0, got 3.0"]


def test_specialize_scalar_false_does_not_recompile():
    jitted = pijit.jit(_scalar_fn, jit_config={"specialize_scalar": False})
    pijit.reset(jitted)
    x = np.arange(3.0)
    for s in (2.0, 3.5, -1.0, 0.0, 1e10):
        assert_equal_values(jitted(x, s), x * s)
    st = pijit.stats(jitted)
    assert (st["compile_count"], st["cache_hits"], st["cache_misses"]) == (1, 4, 1)
    assert st["recompile_reasons"] == []
    assert len(graph_entries(jitted)) == 1


G_ARR = np.arange(3.0)
G_SCALE = 2.0


def _reads_globals(x):
    return x + G_ARR * G_SCALE


def test_recompile_on_global_rebound():
    global G_ARR, G_SCALE
    old = G_ARR, G_SCALE
    jitted = pijit.jit(_reads_globals)
    pijit.reset(jitted)
    x = np.ones(3)
    try:
        assert_equal_values(jitted(x), x + G_ARR * G_SCALE)
        G_ARR = np.full(3, 7.0)                      # same dtype and shape: value is read live
        assert_equal_values(jitted(x), x + G_ARR * G_SCALE)
        G_SCALE = 3.0                                 # scalar constant: recompiles
        assert_equal_values(jitted(x), x + G_ARR * G_SCALE)
        G_ARR = np.ones((2, 3))                       # shape changes: recompiles
        assert_equal_values(jitted(x), x + G_ARR * G_SCALE)
        G_ARR = np.ones(3, np.int32)                  # dtype changes: recompiles
        assert_equal_values(jitted(x), x + G_ARR * G_SCALE)
        assert_equal_values(jitted(x), x + G_ARR * G_SCALE)
    finally:
        G_ARR, G_SCALE = old
    s = pijit.stats(jitted)
    reasons = s["recompile_reasons"]
    assert any(r.startswith("G_SCALE: expected 2.0, got 3.0") for r in reasons), reasons
    assert any(r.startswith("G_ARR:") and "[2,3]" in r for r in reasons), reasons
    assert any(r.startswith("G_ARR:") and "int32" in r for r in reasons), reasons
    assert s["compile_count"] == 4
    assert s["cache_hits"] == 2
    assert all(e["fallback"] is None for e in s["entries"])


def _double(x):
    return x * 2.0


def _triple(x):
    return x * 3.0


G_HELPER = _double


def _calls_global_helper(x):
    return G_HELPER(x) + 1.0


def test_recompile_on_global_function_rebound():
    """A global function inlined into the graph is guarded by identity: rebinding it
    recompiles (else the old callee's code would run)."""
    global G_HELPER
    jitted = pijit.jit(_calls_global_helper)
    pijit.reset(jitted)
    x = np.arange(3.0)
    try:
        assert_equal_values(jitted(x), x * 2.0 + 1.0)
        G_HELPER = _triple
        assert_equal_values(jitted(x), x * 3.0 + 1.0)
    finally:
        G_HELPER = _double
    s = pijit.stats(jitted)
    assert s["compile_count"] == 2 and any(r.startswith("G_HELPER") for r in
                                           s["recompile_reasons"]), s


def test_recompile_on_hash_args_change():
    table = {"k": 1}

    def f(x):
        return x + 1.0
    jitted = pijit.jit(f, hash_args=table)
    pijit.reset(jitted)
    x = np.ones(3)
    assert_equal_values(jitted(x), x + 1.0)
    assert_equal_values(jitted(x), x + 1.0)
    assert counts(jitted) == (1, 1, 1)
    table["k"] = 2
    assert_equal_values(jitted(x), x + 1.0)
    assert_equal_values(jitted(x), x + 1.0)
    s = pijit.stats(jitted)
    assert (s["compile_count"], s["cache_hits"]) == (2, 2)
    assert len(s["recompile_reasons"]) == 1 and "hash_args" in s["recompile_reasons"][0]


def test_recompile_on_hash_args_array_change():
    """An array in hash_args is fingerprinted by its bytes: a change in the middle of a long
    one (which its repr elides) recompiles; a same-valued copy does not."""
    table = np.zeros(2000)

    def f(x):
        return x + 1.0
    jitted = pijit.jit(f, hash_args=[table])
    pijit.reset(jitted)
    x = np.ones(3)
    assert_equal_values(jitted(x), x + 1.0)
    table[1000] = 1.0
    assert_equal_values(jitted(x), x + 1.0)
    s = pijit.stats(jitted)
    assert s["compile_count"] == 2 and "hash_args" in s["recompile_reasons"][0], s
    assert_equal_values(jitted(x), x + 1.0)
    assert pijit.stats(jitted)["compile_count"] == 2


SCALE = [1]


def _scale():
    return SCALE[0]


def _scaled(x):
    return x * _scale()


def test_hash_args_scalars_by_type_and_bits():
    """A pijit_constexpr call reads SCALE[0] at capture and only hash_args guards it: its
    fingerprint must tell 1, True and 1.0 apart (equal, but x * v takes another dtype) and 0.0
    from -0.0 (another sign), and take NaN for NaN (else every call recompiles)."""
    jitted = pijit.jit(_scaled, hash_args=SCALE,
                       jit_config={"pijit_constexpr": (_scale,), "jit_level": "O0"})
    pijit.reset(jitted)
    flags, ones = np.array([True, False]), np.ones(2)
    try:
        for value, x in [(1, flags), (True, flags), (1.0, flags), (0.0, ones), (-0.0, ones),
                         (float("nan"), ones), (float("nan"), ones)]:
            SCALE[0] = value
            assert_equal_values(jitted(x), _scaled(x), f"SCALE[0] = {value!r}")
    finally:
        SCALE[0] = 1
    s = pijit.stats(jitted)
    assert (s["compile_count"], s["cache_hits"]) == (6, 1), s
    assert [r.startswith("hash_args") for r in s["recompile_reasons"]] == \
        [True, True, False, True, True], s["recompile_reasons"]
    assert len(graph_entries(jitted)) == 6


# ---------------------------------------------------------------------------------------------
# The entry limit.

def _limited(x):
    return x - 1


def test_limit_graph_count():
    jitted = pijit.jit(_limited, jit_config={"limit_graph_count": 2,
                                             "enable_dynamic_shape": False})
    pijit.reset(jitted)
    arrays = {n: np.arange(n) for n in (1, 2, 3, 4)}
    for n in (1, 2):
        assert_equal_values(jitted(arrays[n]), arrays[n] - 1)
    assert pijit.stats(jitted)["compile_count"] == 2
    for n in (3, 4, 3, 4):                        # past the limit: plain Python, correct
        assert_equal_values(jitted(arrays[n]), arrays[n] - 1)
    s = pijit.stats(jitted)
    assert s["compile_count"] == 2 and len(s["entries"]) == 2
    hits_before = s["cache_hits"]
    for n in (1, 2, 1, 2):                        # matching inputs still hit
        assert_equal_values(jitted(arrays[n]), arrays[n] - 1)
    s = pijit.stats(jitted)
    assert s["cache_hits"] == hits_before + 4
    assert s["compile_count"] == 2
    assert s["call_count"] == 10


# ---------------------------------------------------------------------------------------------
# Modes, PIJIT_DISABLE, reset.

def _mode_fn(x):
    return x * 3.0


def test_pynative_mode_runs_plain_and_graph_mode_restores():
    jitted = pijit.jit(_mode_fn)
    pijit.reset(jitted)
    x = np.arange(3.0)
    pijit.set_context(mode=pijit.PYNATIVE_MODE)
    assert pijit.get_context("mode") == pijit.PYNATIVE_MODE
    for _ in range(3):
        assert_equal_values(jitted(x), x * 3.0)
    s = pijit.stats(jitted)
    assert (s["compile_count"], s["cache_hits"], s["cache_misses"]) == (0, 0, 0)
    assert s["entries"] == []
    pijit.set_context(mode=pijit.GRAPH_MODE)
    assert pijit.get_context("mode") == pijit.GRAPH_MODE
    for _ in range(2):
        assert_equal_values(jitted(x), x * 3.0)
    assert counts(jitted) == (1, 1, 1)


def test_pijit_disable_env_runs_plain():
    script = (
        "import json, numpy as np, pijit\n"
        "@pijit.jit\n"
        "def f(x):\n"
        "    return x * 2 + 1\n"
        "x = np.arange(3.0)\n"
        "r = [f(x).tolist() for _ in range(3)]\n"
        "s = pijit.stats(f)\n"
        "print(json.dumps({'r': r, 'compile_count': s['compile_count'],\n"
        "                  'hits': s['cache_hits'], 'misses': s['cache_misses'],\n"
        "                  'mode': pijit.get_context('mode'),\n"
        "                  'native': pijit.PYNATIVE_MODE}))\n")
    results = {}
    for value in ("1", "0"):
        env = dict(os.environ, PIJIT_DISABLE=value)
        env.pop("PIJIT_LOG", None)
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        results[value] = json.loads(out.stdout.strip().splitlines()[-1])
    on, off = results["1"], results["0"]
    assert on["r"] == off["r"] == [[1.0, 3.0, 5.0]] * 3
    assert (on["compile_count"], on["hits"], on["misses"]) == (0, 0, 0)
    assert on["mode"] == on["native"]
    assert (off["compile_count"], off["hits"], off["misses"]) == (1, 2, 1)


def test_reset_one_and_all():
    def a(x):
        return x + 1

    def b(x):
        return x + 2
    ja, jb = pijit.jit(a), pijit.jit(b)
    x = np.ones(2)
    ja(x), ja(x), jb(x), jb(x)
    assert counts(ja)[0] == 1 and counts(jb)[0] == 1
    pijit.reset(ja)
    assert pijit.stats(ja)["compile_count"] == 0 and pijit.stats(ja)["entries"] == []
    assert pijit.stats(jb)["compile_count"] == 1          # untouched
    assert_equal_values(ja(x), x + 1)
    assert pijit.stats(ja)["compile_count"] == 1          # compiled again
    pijit.reset()
    for j in (ja, jb):
        s = pijit.stats(j)
        assert s["compile_count"] == 0 and s["entries"] == [] and s["recompile_reasons"] == []
    assert_equal_values(jb(x), x + 2)
    assert_equal_values(jb(x), x + 2)
    assert pijit.stats(jb)["compile_count"] == 1


# ---------------------------------------------------------------------------------------------
# input_signature.

def _sig_fn(x):
    return x.sum(axis=1) * 2.0


def test_input_signature_dynamic_first_dim():
    jitted = pijit.jit(_sig_fn, input_signature=(pijit.ArraySpec((None, 4), "float64"),))
    pijit.reset(jitted)
    for n in (2, 5, 17, 3, 2):
        x = np.arange(n * 4.0).reshape(n, 4)
        assert_equal_values(jitted(x), _sig_fn(x))
    s = pijit.stats(jitted)
    assert (s["compile_count"], s["cache_hits"], s["cache_misses"]) == (1, 4, 1)
    assert s["recompile_reasons"] == []


def test_input_signature_dynamic_first_dim_of_size_one_and_zero():
    jitted = pijit.jit(_sig_fn, input_signature=(pijit.ArraySpec((None, 4), "float64"),))
    pijit.reset(jitted)
    for n in (2, 1, 0, 5):
        x = np.arange(n * 4.0).reshape(n, 4)
        assert_equal_values(jitted(x), _sig_fn(x))
    s = pijit.stats(jitted)
    assert s["compile_count"] == 1, s["recompile_reasons"]


@pytest.mark.parametrize("bad", [np.ones((2, 4), np.float32), np.ones(4), np.ones((2, 5)),
                                 np.ones((2, 4, 1)), [[1.0] * 4]])
def test_input_signature_mismatch_raises_type_error(bad):
    jitted = pijit.jit(_sig_fn, input_signature=(pijit.ArraySpec((None, 4), "float64"),))
    pijit.reset(jitted)
    with pytest.raises(TypeError, match=r"argument 'x'.*input_signature"):
        jitted(bad)
    assert not eval_frame.is_installed()
    assert pijit.stats(jitted)["compile_count"] == 0
    x = np.ones((3, 4))
    assert_equal_values(jitted(x), _sig_fn(x))            # still usable


def test_input_signature_on_method_skips_self():
    class C:
        @pijit.jit(input_signature=(pijit.ArraySpec((None,), "float64"),))
        def f(self, x):
            return x * 2.0
    c = C()
    for n in (2, 3, 4):
        assert_equal_values(c.f(np.ones(n)), np.full(n, 2.0))
    assert pijit.stats(C.f)["compile_count"] == 1
    with pytest.raises(TypeError, match="'x'"):
        c.f(np.ones(2, np.int64))


# ---------------------------------------------------------------------------------------------
# The hook is not left installed.

def test_hook_not_installed_after_return_or_exception():
    @pijit.jit
    def ok(x):
        return x + 1

    @pijit.jit
    def bad(x):
        return x.reshape(7)

    @pijit.jit
    def falls_back(x):
        print(end="")
        return x + 1

    x = np.ones(3)
    assert not eval_frame.is_installed()
    for _ in range(2):
        ok(x)
        assert not eval_frame.is_installed()
        with pytest.raises(ValueError):
            bad(x)
        assert not eval_frame.is_installed()
        falls_back(x)
        assert not eval_frame.is_installed()
    assert counts(ok) == (1, 1, 1)
    # A shape error known at capture time: the error is raised by the plain-Python part.
    s = pijit.stats(bad)
    assert s["call_count"] == 2 and s["compile_count"] <= 1
    assert break_at(pijit.explain(falls_back, x), falls_back.fn.__code__.co_firstlineno + 2,
                    "print")


def test_nested_jitted_calls_share_the_hook():
    @pijit.jit
    def inner(x):
        return x * 2

    @pijit.jit
    def outer(x):
        return inner(x) + 1
    x = np.arange(3.0)
    for _ in range(2):
        assert_equal_values(outer(x), x * 2 + 1)
        assert not eval_frame.is_installed()
    # `outer` inlines the jitted `inner` into its own graph; `inner` alone compiles on its own.
    assert pijit.explain(outer, x).ops_per_graph == [["mul", "add"]]
    assert pijit.stats(inner)["compile_count"] == 0
    assert_equal_values(inner(x), x * 2)
    assert pijit.stats(inner)["compile_count"] == 1
