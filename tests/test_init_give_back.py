"""3.13's jitted __init__ given back to its class (csrc/wrapper.c's init_give_back): a class
calls its Python __init__ without a vectorcall there (CALL_ALLOC_AND_ENTER_INIT), so a jitted
__init__ stays a Wrapper in the class's __dict__ while pijit may have work for it, and once
it has none, the class holds a plain copy of the function instead. What these tests pin down:
what the class's __dict__ holds and when, that constructions then bypass pijit (its counters
stop) and take CPython's specialized call, what puts the Wrapper back (reset, a state change,
a change of the function or of the copy), that a user's assignment stays, that subclasses,
super().__init__, __slots__ and pickling behave as plain Python, and who keeps the Wrapper."""
import dis
import gc
import pickle
import types
import weakref

import numpy as np
import pytest

import pijit
from pijit import _compat, eval_frame as ef

pytestmark = [pytest.mark.skipif("__init__" not in _compat.VECTORCALL_SKIPPED_BY,
                                 reason="3.13: a jitted __init__ is a Wrapper in its class"),
              pytest.mark.usefixtures("adaptive")]


class Point:
    def __init__(self, x, y=2):
        self.x = x * y


def jitted_class(base=object, slots=False, **config):
    """A class (a new one each time) whose __init__ (Point's, on a code of its own) is
    jitted."""
    f = Point.__init__
    init = types.FunctionType(f.__code__.replace(), f.__globals__, "__init__", f.__defaults__)
    init.__qualname__ = "P.__init__"
    body = {"__init__": pijit.jit(init, jit_config=config or None), "__module__": __name__}
    if slots:
        body["__slots__"] = ("x",)
    return type("P", (base,), body)


def code_of(cls):
    return ef.original_code(vars(cls)["__init__"].fn.__code__)


def give_back_now(cls):
    """Every call of the __init__ runs plain from now on: the next construction gives it
    back."""
    wrapper = vars(cls)["__init__"]
    ef.set_state(code_of(cls), ef.NEVER_COMPILE)
    assert cls(3).x == 6
    return wrapper


def test_nothing_to_do_gives_the_class_a_plain_copy_and_constructions_bypass_pijit():
    cls = jitted_class()
    wrapper = give_back_now(cls)
    copy = vars(cls)["__init__"]
    assert type(copy) is types.FunctionType and copy is not wrapper.fn
    assert copy.__pijit__ is wrapper and copy.__wrapped__ is wrapper.fn
    assert copy.__code__ is wrapper.fn.__code__ and copy.__defaults__ == (2,)
    assert ef.given_back(wrapper) and pijit.code_info(cls.__init__)["inlined"] == 1
    seen = ef.counters(code_of(cls))
    ns = {"P": cls}
    exec("def make(n):\n    return [P(i, 2).x for i in range(n)]\n", ns)
    assert ns["make"](50) == [2 * i for i in range(50)]
    assert ef.counters(code_of(cls)) == seen                # not seen at all
    calls = [i.opname for i in dis.get_instructions(ns["make"], adaptive=True)
             if i.opname.startswith("CALL")]
    assert calls[1:] == ["CALL_ALLOC_AND_ENTER_INIT"]       # CPython's specialized call


@pytest.mark.usefixtures("cheap_plain_runs")
def test_a_thousand_plain_constructions_in_a_row_give_it_back():
    """(adapt.c's nothing_to_do: its calls not hot yet cost under 2 us each, here on
    clocks.py's stand-in clock.)"""
    cls = jitted_class(compile_after_ms=10 ** 6)
    wrapper = vars(cls)["__init__"]
    for k in range(900):
        assert cls(k, 3).x == 3 * k
    assert vars(cls)["__init__"] is wrapper and not ef.given_back(wrapper)
    for k in range(300):
        assert cls(k, 3).x == 3 * k
    assert vars(cls)["__init__"] is not wrapper and ef.given_back(wrapper)


def test_an_array_construction_is_never_given_back():
    cls = jitted_class(compile_after_ms=10 ** 6)
    wrapper, a = vars(cls)["__init__"], np.ones(3)
    for _ in range(1200):
        np.testing.assert_array_equal(cls(a).x, a * 2)
    assert vars(cls)["__init__"] is wrapper and not ef.given_back(wrapper)


@pytest.mark.parametrize("again", ["reset", "state", "reset_all"])
def test_reset_or_a_state_change_puts_the_wrapper_back_and_it_compiles(again):
    cls = jitted_class(compile_after_ms=0, perf_statistics=False)
    wrapper = give_back_now(cls)
    if again == "reset":
        pijit.reset(cls.__init__)               # the copy finds its Wrapper
    elif again == "reset_all":
        pijit.reset()
    else:
        ef.set_state(code_of(cls), ef.CANDIDATE)
    assert vars(cls)["__init__"] is wrapper and not ef.given_back(wrapper)
    assert pijit.code_info(cls.__init__)["inlined"] == 0
    a = np.arange(4.0)
    for _ in range(3):
        np.testing.assert_array_equal(cls(a).x, a * 2)
    stats = pijit.stats(cls.__init__)
    assert stats["compile_count"] == 1 and stats["cache_hits"] == 2


def test_a_users_assignment_meanwhile_stays():
    cls = jitted_class()
    wrapper = give_back_now(cls)        # held: the class no longer does once replaced

    def mine(self, x):
        self.x = -x
    cls.__init__ = mine
    pijit.reset(wrapper)
    assert vars(cls)["__init__"] is mine and cls(4).x == -4
    assert not ef.given_back(wrapper)


def test_a_new_code_of_the_function_puts_the_wrapper_back_and_runs():
    cls = jitted_class()
    wrapper = give_back_now(cls)
    wrapper.fn.__code__ = (lambda self, x, y=2: setattr(self, "x", x - y)).__code__
    assert vars(cls)["__init__"] is wrapper
    assert cls(10).x == 8


def test_a_new_code_of_the_copy_reaches_the_function_as_through_the_wrapper():
    cls = jitted_class()
    wrapper = give_back_now(cls)
    cls.__init__.__defaults__ = (5,)                # the copy, as cls.__init__ finds it
    assert vars(cls)["__init__"] is wrapper and wrapper.fn.__defaults__ == (5,)
    assert cls(2).x == 10


def test_subclasses_super_init_and_slots_construct_as_plain_python():
    base = jitted_class()
    sub = type("Sub", (base,), {})

    class Own(base):
        def __init__(self, x):
            super().__init__(x, 10)
            self.y = x

    slotted = jitted_class(slots=True)
    wrappers = [vars(base)["__init__"], vars(slotted)["__init__"]]
    for cls in (base, slotted):
        ef.set_state(code_of(cls), ef.NEVER_COMPILE)
    made = [(sub(3).x, Own(4).x, Own(4).y, slotted(5).x) for _ in range(3)]
    assert made == [(6, 40, 4, 10)] * 3
    assert [vars(c)["__init__"] is not w for c, w in zip((base, slotted), wrappers)] == \
        [True, True]
    assert "__init__" not in vars(sub) and sub.__init__ is vars(base)["__init__"]


def test_pickling_while_given_back():
    cls = jitted_class()
    give_back_now(cls)
    globals()["P"] = cls                            # pickle finds the class by its name
    try:
        p = pickle.loads(pickle.dumps(cls(7)))
        assert type(p) is cls and p.x == 14
        assert pickle.loads(pickle.dumps(cls.__init__)) is cls.__init__
    finally:
        del globals()["P"]


def test_the_class_keeps_the_wrapper_and_frees_it_with_itself():
    cls = jitted_class()
    ref = weakref.ref(give_back_now(cls))
    gc.collect()
    assert ref() is not None and ref().code_state is not None
    pijit.reset()
    assert vars(cls)["__init__"] is ref()
    del cls
    gc.collect()
    assert ref() is None


def test_a_class_whose_metaclass_sets_attributes_itself_keeps_the_wrapper():
    class Meta(type):
        def __setattr__(cls, name, value):
            type.__setattr__(cls, name, value)

    cls = Meta("M", (), {"__init__": vars(jitted_class())["__init__"]})
    wrapper = vars(cls)["__init__"]
    ef.set_state(code_of(cls), ef.NEVER_COMPILE)
    for k in range(3):
        assert cls(k).x == 2 * k
    assert vars(cls)["__init__"] is wrapper and not ef.given_back(wrapper)


def test_the_copy_given_back_runs_what_the_function_runs_by_then():
    cls = jitted_class()
    wrapper = vars(cls)["__init__"]
    wrapper.fn.__code__ = (lambda self, x, y=2: setattr(self, "x", x + y)).__code__
    assert cls(1).x == 3                            # the Wrapper follows its function...
    ef.set_state(code_of(cls), ef.NEVER_COMPILE)
    assert cls(5).x == 7 and vars(cls)["__init__"] is not wrapper
    assert cls(5).x == 7                            # ...and so does the copy given back


def test_an_attribute_set_on_the_classs_init_stays_through_give_back_and_restore():
    """The copy had a __dict__ of its own: an attribute set on the jitted __init__ (a
    decorator's mark, a registry's tag) was gone once the class held the copy (an
    AttributeError plain Python has not), and one set on the copy was gone once the Wrapper
    was back."""
    cls = jitted_class()
    cls.__init__.tag = "set on the Wrapper"
    wrapper = give_back_now(cls)
    assert type(vars(cls)["__init__"]) is types.FunctionType
    assert getattr(cls.__init__, "tag", None) == "set on the Wrapper"
    cls.__init__.mark = "set on the copy"
    pijit.reset(wrapper)
    assert vars(cls)["__init__"] is wrapper and not ef.given_back(wrapper)
    assert (getattr(cls.__init__, "tag", None), getattr(cls.__init__, "mark", None)) == \
        ("set on the Wrapper", "set on the copy")
    assert cls(3).x == 6 and pijit.stats(cls.__init__)["call_count"] >= 1
