"""Each jit() wrapper runs under its own options, also when the same function is jitted twice
with different ones. A cache belongs to a code object, and re-jitting a function used to
re-register its code under the new options: `o1 = jit(f)` then `o2 = jit(f, O2)` made o1 run
at O2 and return O2's (not NumPy's) bits."""
from __future__ import annotations

import gc
import types

import numpy as np
import pytest

import pijit


def transcendental(x):
    return np.exp(x) * np.tanh(x)


X = np.random.default_rng(0).standard_normal(4096)


@pytest.mark.parametrize("order", ["o1 first", "o2 first"])
def test_two_wrappers_at_two_levels_keep_their_own(order):
    want = transcendental(X)
    o1 = pijit.jit(transcendental, jit_config={"adaptive": False})
    o2 = pijit.jit(transcendental, jit_config={"jit_level": "O2", "adaptive": False})
    calls = [o1, o2] if order == "o1 first" else [o2, o1]
    for _ in range(2):
        got = {id(w): w(X) for w in calls}
        assert got[id(o1)].tobytes() == want.tobytes(), "the O1 wrapper gave other bits"
        # O2 (libmvec) differs from NumPy in the last bits somewhere in 4096 values: else
        # this test could not tell the two levels apart
        assert got[id(o2)].tobytes() != want.tobytes()
    report = pijit.explain(o1, X)
    assert report.graph_count == 1


def test_the_same_options_again_reuse_the_compiled_code():
    o2 = pijit.jit(transcendental, jit_config={"jit_level": "O2", "adaptive": False})
    o1 = pijit.jit(transcendental, jit_config={"adaptive": False})
    again = pijit.jit(transcendental, jit_config={"jit_level": "O2", "adaptive": False})
    assert again.fn.__code__ is o2.fn.__code__
    assert o1.fn.__code__ is not o2.fn.__code__
    assert again(X).tobytes() == o2(X).tobytes()
    assert again.__name__ == transcendental.__name__ and again.__wrapped__ is not None


def test_a_function_rejitted_after_its_wrapper_died_keeps_its_own_code():
    """With no wrapper left under the old options, jit() re-registers the function's own code
    (no copy): its record is the new wrapper's, as `pijit.stats(f)`-style lookups by
    `f.__code__` expect, and nothing can run under the old options any more."""
    def double_exp(x):
        return np.exp(x) * 2.0

    o2 = pijit.jit(double_exp, jit_config={"jit_level": "O2", "adaptive": False})
    assert o2(X).tobytes() != (np.exp(X) * 2.0).tobytes()
    del o2
    o1 = pijit.jit(double_exp, jit_config={"adaptive": False})
    assert o1.fn.__code__ is double_exp.__code__
    assert o1(X).tobytes() == (np.exp(X) * 2.0).tobytes()
    assert pijit.cache.record(double_exp.__code__).config.jit_level == "O1"


def test_a_dead_wrapper_in_a_cycle_does_not_keep_its_options():
    """A wrapper no one can reach, kept only by a reference cycle until the collector runs,
    does not count as alive: the function is re-registered, not copied."""
    def triple_exp(x):
        return np.exp(x) * 3.0

    gc.disable()
    try:
        o2 = pijit.jit(triple_exp, jit_config={"jit_level": "O2", "adaptive": False})
        o2.cycle = o2
        del o2
        o1 = pijit.jit(triple_exp, jit_config={"adaptive": False})
    finally:
        gc.enable()
    assert o1.fn.__code__ is triple_exp.__code__
    assert o1(X).tobytes() == (np.exp(X) * 3.0).tobytes()


def test_a_dropped_jitted_function_is_seen_without_a_collection():
    """A jitted function held only by its own Wrapper (the pair's cycle) is freed at the next
    jit() under other options without a full collection (which costs a tenth of a second in a
    big heap); one the caller still holds, or whose Wrapper something else holds, keeps its
    options."""
    def quad_exp(x):
        return np.exp(x) * 4.0

    collections = []

    def count(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    def o2():
        return pijit.jit(quad_exp, jit_config={"jit_level": "O2", "adaptive": False})

    gc.disable()
    gc.callbacks.append(count)
    try:
        dropped = o2()
        assert dropped(X).tobytes() != (np.exp(X) * 4.0).tobytes()
        del dropped
        o1 = pijit.jit(quad_exp, jit_config={"adaptive": False})
        assert collections == [], "a full collection to see a dropped pair"
        assert o1.fn.__code__ is quad_exp.__code__
        held = pijit.jit(quad_exp, jit_config={"adaptive": False})
        handle = pijit.api.wrapper_of(held)
        del held, o1        # the caller keeps one Wrapper alone: that pair stays
        kept = o2()
    finally:
        gc.callbacks.remove(count)
        gc.enable()
    assert kept.fn.__code__ is not quad_exp.__code__, "the held Wrapper's options were dropped"
    assert pijit.cache.record(quad_exp.__code__).config.jit_level == "O1"
    assert handle(X).tobytes() == (np.exp(X) * 4.0).tobytes()
    assert kept(X).tobytes() != handle(X).tobytes()


def test_an_equal_input_signature_is_the_same_options():
    """Specs are compared by value: a library that jits a function again with a new but equal
    ArraySpec gets the same code and cache (no copy of the code, no second compile), and one
    that differs in shape or dtype gets options of its own."""
    def scaled(x):
        return x * 2.0 + 1.0

    first = pijit.jit(scaled, input_signature=pijit.ArraySpec((None,), "float64"),
                      jit_config={"adaptive": False})
    assert first(X).tobytes() == scaled(X).tobytes()
    again = pijit.jit(scaled, input_signature=pijit.ArraySpec([None], np.float64),
                      jit_config={"adaptive": False})
    assert again.fn.__code__ is first.fn.__code__ is scaled.__code__
    assert again(X).tobytes() == scaled(X).tobytes()
    assert pijit.explain(again, X).graph_count == 1
    assert pijit.code_info(again)["compile_count"] == 1, "the equal spec compiled again"
    other = pijit.jit(scaled, input_signature=pijit.ArraySpec((4096,), "float64"),
                      jit_config={"adaptive": False})
    assert other.fn.__code__ is not scaled.__code__
    assert other(X).tobytes() == scaled(X).tobytes()
    with pytest.raises(TypeError, match="float32"):
        other(X.astype(np.float32))


def test_a_spec_cannot_change_once_made():
    spec = pijit.ArraySpec((None, 3), "float32")
    with pytest.raises(AttributeError, match="immutable"):
        spec.shape = (2, 3)
    with pytest.raises(AttributeError, match="immutable"):
        del spec.dtype
    assert spec == pijit.ArraySpec((None, 3), np.float32) != pijit.ArraySpec((None, 3), "f8")
    assert hash(spec) == hash(pijit.ArraySpec([None, 3], "float32"))


def affine(x, k=2.0, *, b=1.0):
    return x * k + b


def scaled_up(x, k=2.0, *, b=1.0):
    return x * k * 10.0 - b


CHANGES = {
    "__defaults__": lambda f: setattr(f, "__defaults__", (7.0,)),
    "__kwdefaults__": lambda f: setattr(f, "__kwdefaults__", {"b": -3.0}),
    "__code__": lambda f: setattr(f, "__code__", scaled_up.__code__),
}


@pytest.mark.parametrize("adaptive", [False, True], ids=["compile at once", "adaptive"])
@pytest.mark.parametrize("order", ["first jit first", "variant first"])
@pytest.mark.parametrize("change", list(CHANGES))
def test_a_variant_follows_its_function_as_the_first_jit_does(change, order, adaptive):
    """jit(f) then jit(f, other options): the second runs a private copy of f on a copy of
    its code; it used to keep f's defaults and code as they were when it was made (25 where
    plain Python gave 70). Both must take each change of f."""
    f = types.FunctionType(affine.__code__, affine.__globals__, "affine", affine.__defaults__)
    f.__kwdefaults__ = dict(affine.__kwdefaults__)
    first = pijit.jit(f, jit_config={"adaptive": adaptive, "compile_after_ms": 0})
    variant = pijit.jit(f, jit_config={"adaptive": adaptive, "compile_after_ms": 0,
                                       "jit_level": "O0"})
    assert variant.fn.__code__ is not f.__code__, "the variant shares the first jit's code"
    both = [first, variant] if order == "first jit first" else [variant, first]
    x = np.arange(5.0)
    for _ in range(3):
        for g in both:
            assert g(x).tobytes() == f(x).tobytes()
    CHANGES[change](f)
    for g in both:      # passed arguments bind alike (3.11 refuses a call that may not)
        assert g(x, 3.0, b=0.5).tobytes() == f(x, 3.0, b=0.5).tobytes(), change
    for _ in range(3):
        for g in both:
            assert g(x).tobytes() == f(x).tobytes(), change
    assert pijit.stats(variant)["compile_count"] >= 1, "the variant never compiled"
    if change == "__code__":
        assert pijit.cache.record(pijit.api._code_of(variant)).config.jit_level == "O0"
        assert pijit.cache.record(scaled_up.__code__).config.jit_level == "O1"


def test_a_variant_of_an_init_follows_it():
    """3.13 jits an __init__ as a Wrapper (not a function object): its variant follows the
    user's function by the Wrapper's call."""
    class Scaled:
        def __init__(self, x, k=2.0):
            self.y = x * k

    def shifted(self, x, k=2.0):
        self.y = x - k

    init = Scaled.__init__
    first = pijit.jit(init, jit_config={"adaptive": False})
    Scaled.__init__ = pijit.jit(init, jit_config={"adaptive": False, "jit_level": "O0"})
    x = np.arange(3.0)
    assert Scaled(x).y.tobytes() == (x * 2.0).tobytes()
    init.__defaults__ = (5.0,)
    assert Scaled(x, 5.0).y.tobytes() == Scaled(x).y.tobytes() == (x * 5.0).tobytes()
    init.__code__ = shifted.__code__
    assert Scaled(x).y.tobytes() == (x - 5.0).tobytes()
    s = Scaled.__new__(Scaled)
    first(s, x, 4.0)                    # passed: binds alike (3.11 refuses one that may not)
    assert s.y.tobytes() == (x - 4.0).tobytes()
    first(s, x)
    assert s.y.tobytes() == (x - 5.0).tobytes()
    assert pijit.stats(Scaled.__init__)["compile_count"] >= 1


def _fresh_f_and_h():
    """Two functions of their own per test: the tests assign f.__code__."""
    def f(x):
        return x + 1.0

    def h(x):
        return np.exp(x) * np.tanh(x)
    return f, h


def test_a_new_code_jitted_elsewhere_under_other_options_keeps_them_apart():
    """`f.__code__ = h.__code__` where h is jitted at O2: f's jitted copy took h's code with
    its own options by re-registering it, so it ran h's O2 entries (O2's bits where its O1
    must give NumPy's) and h's next compiles ran at O1. It now takes a copy of that code."""
    f, h = _fresh_f_and_h()
    want = h(X)
    o1 = pijit.jit(f, jit_config={"adaptive": False})
    o2 = pijit.jit(h, jit_config={"jit_level": "O2", "adaptive": False})
    assert o1(X).tobytes() == f(X).tobytes()
    assert o2(X).tobytes() != want.tobytes()
    f.__code__ = h.__code__
    for _ in range(2):
        assert o1(X).tobytes() == want.tobytes(), "f's O1 copy ran h's O2 entry"
        assert o2(X).tobytes() != want.tobytes()
    assert pijit.cache.record(h.__code__).config.jit_level == "O2"
    assert pijit.cache.record(pijit.api._code_of(o1)).config.jit_level == "O1"
    # 3.11: the prefix runs a code other than its user's function's plain (call_prefix.c)
    assert pijit.stats(o1)["compile_count"] == (0 if pijit._compat.CALL_PREFIX else 1)


def test_a_code_a_jitted_function_took_keeps_its_options_when_jitted_again():
    """After `f.__code__ = h.__code__`, f's jitted copy runs h's code under f's options:
    jit(h, O2) then took h's code as free (no wrapper made on it) and re-registered it at
    O2, so f's copy ran at O2. It now gets a copy of the code."""
    f, h = _fresh_f_and_h()
    want = h(X)
    o1 = pijit.jit(f, jit_config={"adaptive": False})
    f.__code__ = h.__code__
    assert o1(X).tobytes() == want.tobytes()
    o2 = pijit.jit(h, jit_config={"jit_level": "O2", "adaptive": False})
    for _ in range(2):
        assert o2(X).tobytes() != want.tobytes()
        assert o1(X).tobytes() == want.tobytes(), "f's O1 copy ran at O2"
    assert pijit.cache.record(pijit.api._code_of(o1)).config.jit_level == "O1"
