"""Code whose bytecode differs between CPython 3.11, 3.12 and 3.13 (pijit/_compat.py's
table), captured and run the same way on each: the same results, and the same graphs and
breaks (the counts below hold on every supported version).

3.12: no PRECALL, LOAD_ATTR's method bit, BINARY_SLICE/STORE_SLICE, RETURN_CONST, END_FOR,
CALL_INTRINSIC_1, LOAD_SUPER_ATTR, comprehensions inlined into their function (PEP 709:
LOAD_FAST_AND_CLEAR and a try block restoring the saved locals). 3.13: the NULL above the
callable, CALL_KW, TO_BOOL and COMPARE_OP's bool bit, LOAD_FAST_LOAD_FAST and the other
superinstructions, SET_FUNCTION_ATTRIBUTE, CONVERT_VALUE/FORMAT_SIMPLE/FORMAT_WITH_SPEC.
"""
from __future__ import annotations

import dis
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import pijit
from bytecode import Instr
from pijit import _compat
from pijit.capture.flow import stack_io
from pijit.capture.instructions import read_instructions

from differential import assert_same

HERE = pathlib.Path(__file__).resolve().parent

X = np.linspace(-1.0, 2.0, 12).reshape(3, 4)
V = np.linspace(0.5, 3.0, 8)


def _opnames(fn) -> set:
    return {i.opname for i in dis.get_instructions(fn)}


# -- the table against the interpreter ------------------------------------------------------
def _kw_call(x):
    return np.sum(x, axis=0)


def _method_call(x):
    return x.sum()


def _comprehension(x):
    return [x * i for i in range(2)]


def _closure(x, k=2):
    return lambda: x * k


def test_the_table_describes_this_interpreter():
    """Each fact of _compat.BYTECODE as this interpreter's compiler shows it."""
    facts = _compat.BYTECODE
    assert ("PRECALL" in _opnames(_kw_call)) == facts.precall
    assert ("CALL_KW" in _opnames(_kw_call)) == facts.call_kw
    assert ("KW_NAMES" in _opnames(_kw_call)) == (not facts.call_kw)
    assert ("LOAD_METHOD" in _opnames(_method_call)) == (not facts.attr_pair)
    assert ("SET_FUNCTION_ATTRIBUTE" in _opnames(_closure)) == (not facts.make_function_flags)
    ops = _opnames(_comprehension)
    assert [name for name in ("END_FOR", "POP_TOP") if name in ops][:len(
        facts.for_iter_exit)] == list(facts.for_iter_exit)
    assert (facts.checked_load in dis.opmap)
    # the NULL of LOAD_GLOBAL np (low bit) comes before np.sum's attribute load on 3.11/3.12
    names = [i.opname for i in dis.get_instructions(_kw_call)]
    pushes_null_first = names.index("LOAD_GLOBAL") < names.index("LOAD_ATTR") and \
        "PUSH_NULL" not in names
    assert pushes_null_first == facts.null_first


class _Getter:
    @property
    def fn(self):
        return np.tan


class _SuperGetter(_Getter):
    def run(self, v):
        return super().fn(v)


def _null_pushers(x, obj):
    h = obj.fn
    return h(x) + len(x) + np.add(obj.fn(x), [v for v in x][0])


# (values popped, values pushed) by the instructions that may push a NULL, as CPython
# counts them (dis.stack_effect gives only the difference)
NULL_PUSHERS = {"PUSH_NULL": (0, 1), "LOAD_GLOBAL": (0, 2), "LOAD_METHOD": (1, 2),
                "LOAD_ATTR": (1, 2), "LOAD_SUPER_ATTR": (3, 2), "LOAD_FAST_AND_CLEAR": (0, 1)}


def test_stack_io_counts_pops_and_pushes():
    """flow.stack_io, which tells where a NULL is pushed and whether it was popped: no count
    negative, pushes - pops the compiler's stack effect, and the NULL pushers' counts (the
    bytecode package gives a pure push as (n, 0), 3.11's LOAD_METHOD as (1, 0))."""
    seen = set()
    for code in (_null_pushers.__code__, _SuperGetter.run.__code__):
        for instr in read_instructions(code):
            if not isinstance(instr, Instr):
                continue
            for jump in (None, True, False) if instr.has_jump() else (None,):
                pops, pushes = stack_io(instr, jump)
                assert pops >= 0 and pushes >= 0, (instr, jump, pops, pushes)
                assert pushes - pops == instr.stack_effect(jump=jump), (instr, jump)
            low_bit = isinstance(instr.arg, tuple) and instr.arg[0] is True
            if instr.name in ("PUSH_NULL", "LOAD_METHOD", "LOAD_FAST_AND_CLEAR") or \
                    low_bit and instr.name in NULL_PUSHERS:
                assert stack_io(instr) == NULL_PUSHERS[instr.name], instr
                seen.add(instr.name)
    assert seen == {"PUSH_NULL", "LOAD_GLOBAL"} | ({"LOAD_ATTR", "LOAD_SUPER_ATTR",
                                                   "LOAD_FAST_AND_CLEAR"}
                                                  if _compat.BYTECODE.attr_pair
                                                  else {"LOAD_METHOD"})


# -- differential tests --------------------------------------------------------------------
def slices(x, lo, hi):
    return x[1:3] * 2 + x[lo:hi].sum()


def slice_store_in_loop(u, n):
    for _ in range(n):
        u[1:-1] = u[1:-1] * 0.5 + u[:-2] * 0.25
    return u


def returns_constant(x):
    y = x * 2
    print("side", y[0, 1])
    if y.ndim == 2:
        return None
    return 1


def comprehension(x):
    return [x * i + 1 for i in range(3)]


def comprehension_keeps_outer_variable(x):
    i = 10
    parts = [x * i for i in range(2)]
    return parts[0] + parts[1] + i


def comprehension_variable_unbound_after(x):
    parts = [x + i for i in range(2)]
    return parts[1], "i" in locals()


def nested_comprehensions(x):
    return [[x[r, c] * 2 for c in range(2)] for r in range(2)]


def comprehension_with_break(x):
    y = x * 3
    return [print("row", i) or y[i] * i for i in range(2)]


def comprehension_raising_after_break(x):
    y = x + 1
    print("before")
    return [y / d for d in (1.0, None)]


def comprehension_in_residual_loop(x, n):
    acc = x + 1
    for k in range(n):
        print("k", k)
        parts = [acc * j for j in range(1, 3)]
        acc = acc + parts[0] * parts[1]
    return acc


def comprehension_reusing_the_loop_variable(x):
    s = x
    for i in range(3):
        print("i", i)
        s = s + sum([i * 2 for i in range(i)])
    return s * i


def comprehensions_after_a_break(x, bind):
    if bind:
        i = 5
        print("i is bound", i)
    d = {i: x * i for i in range(2)}        # MAP_ADD is not captured: a break
    return [x * i for i in range(2)][1] + 1, d


def positive_and_star_args(x):
    parts = (x, 2.0)
    return +np.multiply(*parts)


def truth_of_constants(x, flag, none):
    a = flag and not none
    b = none or x.shape[0]
    if not flag:
        return x - b
    return x * a + b


def data_dependent_comparison(x):
    s = x.sum()
    if s < 3:
        return x * 2
    return x - 1


def data_dependent_truth(x):
    if (x > 1).any() and x.shape[0] == 3:
        return x + 1
    return x


def keyword_and_method_calls(x):
    return np.sum(x, axis=0, keepdims=True).reshape(-1) * x.mean(axis=1).max()


def star_star_call(x):
    kw = {"axis": 1}
    return np.max(x, **kw)


def closures_and_defaults(x):
    scale = 3.0

    def inner(a, b=2.0, *, c=1.0):
        return a * b * scale + c
    return inner(x) + inner(x, c=0.5)


def formatting(x, n):
    label = f"{n!r:>4}|{n:03d}|{n}|{str(n)!s}"
    print(label)
    return x * len(label)


def swap_and_pairs(x, y):
    a, b = y, x
    a, b = b, a
    return a * 2 + b


class Base:
    def scale(self, x):
        return x * 2


class Child(Base):
    def scale(self, x):
        return super().scale(x) + 1


def calls_super(x):
    return Child().scale(x)


@pytest.mark.parametrize("fn, args, graphs, breaks", [
    (slices, (X, 0, 2), 1, 0),
    (slice_store_in_loop, (V.copy(), 3), 1, 0),
    (returns_constant, (X,), 1, 1),
    (comprehension, (X,), 1, 0),
    (comprehension_keeps_outer_variable, (X,), 1, 0),
    (comprehension_variable_unbound_after, (X,), 0, 1),        # locals(): plain Python
    # 3.11: the inner comprehension is a closure over the outer's variable (not inlined);
    # 3.12 inlines both into the function (PEP 709), and they are captured
    (nested_comprehensions, (X,), int(_compat.VERSION >= (3, 12)), 1 - (_compat.VERSION >= (3, 12))),
    (positive_and_star_args, (X,), 1, 0),
    (truth_of_constants, (X, True, None), 1, 0),
    (truth_of_constants, (X, False, None), 1, 0),
    (data_dependent_comparison, (X,), 2, 1),
    (data_dependent_truth, (X,), 2, 1),
    (keyword_and_method_calls, (X,), 1, 0),
    (star_star_call, (X,), 1, 0),
    (closures_and_defaults, (X,), 1, 0),
    (formatting, (X, 7), 1, 1),
    (swap_and_pairs, (X, X + 1), 1, 0),
], ids=lambda v: getattr(v, "__name__", None))
def test_same_capture_on_every_version(fn, args, graphs, breaks):
    assert_same(fn, *args, graphs=graphs, breaks=breaks)


# On 3.11 a comprehension is a function of its own, a closure over the caller's locals it
# reads: a function creating one runs as plain Python when it also breaks (README). On 3.12
# the comprehension is inlined (PEP 709): such functions are captured, the comprehension
# running as residual code after the break, its handler restoring the variable it saved.
INLINED = _compat.VERSION >= (3, 12)


def test_comprehension_with_a_break_inside_runs_it_as_residual_code():
    report = assert_same(comprehension_with_break, X, graphs=int(INLINED), breaks=1)
    assert "print" in report.break_reasons[0]["reason"]
    assert (report.fallback is None) == INLINED


def test_exception_in_residual_comprehension():
    """After the break, capture of the rest breaks in the comprehension (on None): it runs
    as residual code (3.12+: with its handler), raising as plain Python does."""
    assert_same(comprehension_raising_after_break, X, graphs=int(INLINED),
                breaks=2 if INLINED else 1)


def test_comprehension_in_an_outlined_loop_body():
    """A residual loop whose body holds a comprehension: the body is outlined and jitted
    (on 3.12+ with the comprehension's handler copied into it)."""
    report = assert_same(comprehension_in_residual_loop, X, 2,
                         graphs=2 if INLINED else 0, breaks=2 if INLINED else 1)
    if INLINED:     # the body's graph after its print: the comprehension and the update
        assert sorted(report.ops_per_graph[1]) == ["add", "mul", "mul", "mul"]


def test_a_comprehension_variable_the_loop_body_also_stores():
    """The outlined body's comprehension saves and restores i, which the loop stores too:
    i is still one of the body's results, read after the loop (3.12+, flow.saved_only; on
    3.11 the comprehension is a function of its own, reading nothing of the caller's)."""
    report = assert_same(comprehension_reusing_the_loop_variable, X, graphs=4, breaks=2)
    assert report.ops_per_graph == [["mul"], ["add"], ["add"], ["add"]], report


def distinct_products(n):
    return len({i * j for i in range(1, n) for j in range(1, n)})


def sorted_roots(xs):
    return sorted({round(float(x) ** 0.5, 3) for x in xs})


def smallest_pair_product(xs, ys):
    return min({a * b for a in xs for b in ys}), np.array([y * 2.0 for y in ys]).sum()


@pytest.mark.parametrize("fn, args", [(distinct_products, (20,)),
                                      (sorted_roots, (list(range(30)),)),
                                      (smallest_pair_product, ([1.5, -2.0, 3.0], [0.5, 4.0]))])
def test_a_call_whose_argument_is_a_broken_comprehension_never_passes_a_null(fn, args):
    """A break inside a comprehension that is the last argument of a call: the stack below
    it holds the call's NULL. On 3.12+ the comprehension is inlined (its loops in the
    caller), and the span of residual code used to end after its loops with the NULL still
    on the stack, passed to the resume function as an argument: a crash (SIGSEGV). Now the
    rest of the function runs as residual code, as plain Python does (on 3.11 the
    comprehension is a function of its own, and the caller runs as plain Python)."""
    # first in a process of its own, where the crash is a failed assertion, not this one's
    script = (f"import sys; sys.path[:0] = {[str(HERE), str(HERE.parent)]!r}\n"
              f"import pijit\nfrom test_bytecode_versions import {fn.__name__} as f\n"
              f"j = pijit.jit(f, jit_config={{'adaptive': False}})\n"
              f"print([j(*{args!r}) == f(*{args!r}) for _ in range(2)])")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert (proc.returncode, proc.stdout.strip()) == (0, "[True, True]"), proc.stderr[-3000:]
    report = assert_same(fn, *args, graphs=None if INLINED else 0, breaks=1)
    assert "BUILD_SET" in report.break_reasons[0]["reason"]


@pytest.mark.parametrize("bind", [False, True])
def test_a_local_comprehensions_save_is_passed_on_only_when_bound(bind):
    """After the first comprehension (residual code), the resume function gets `i` only
    when it was bound before: the comprehension gives it back as it found it, and the next
    one saves it again (3.12+; on 3.11 the comprehensions are closures over x)."""
    assert_same(comprehensions_after_a_break, X, bind, graphs=int(INLINED),
                breaks=(1 + bind) if INLINED else 1)


def nested_comprehensions_with_break(x):
    y = x * 2
    return [[print("c", c) or y[r, c] for c in range(2)] for r in range(2)]


def nested_comprehension_raising_after_break(x):
    y, r, c = x + 1, "r", "c"
    print("before")
    try:
        return [[y[r, 0] / d for d in (1.0, c)] for r in range(2)]
    except TypeError as e:
        return str(e), r, c


def test_nested_comprehensions_as_residual_code():
    """The inner comprehension's handler lies in the outer one's try block (3.12+): copied
    with the residual code, it keeps the TryEnd closing that block (flow.cleanup_handler),
    else the transformed code's assembly fails and the function runs plain. On 3.11 the
    comprehensions are functions, and one with a print in it is not inlined."""
    report = assert_same(nested_comprehensions_with_break, X.reshape(2, -1)[:, :2],
                         graphs=int(INLINED), breaks=1)
    assert (report.fallback is None) == INLINED
    # raising in the inner comprehension after the break: both handlers restore r and c
    assert_same(nested_comprehension_raising_after_break, X.reshape(2, -1),
                graphs=int(INLINED), breaks=2 if INLINED else 1)


def test_super_method_call_is_inlined():
    """3.12's LOAD_SUPER_ATTR is super() and the method load in one instruction, 3.11 calls
    super() then loads the method: both are inlined (the constructor call alone breaks)."""
    report = assert_same(calls_super, X, graphs=1, breaks=1)
    assert not any("super" in b["reason"] for b in report.break_reasons), report


class Tangent:
    @property
    def fn(self):
        print("getter")
        return np.tan


class SuperTangent(Tangent):
    def run(self, v):
        return super().fn(v * 2) + 1


def calls_a_super_property(x, obj):
    y = x * 3
    return obj.run(y) - 1


def test_a_super_method_load_that_breaks_keeps_the_null():
    """super().fn(v) with fn a property that prints: on 3.12+ the break is at the
    LOAD_SUPER_ATTR, which pops three values and pushes the getter's result and a NULL
    (flow.null_slots, flow.stack_io): the residual span must reach the call taking the NULL,
    not store it for a resume function (a crash: first in a process of its own). 3.11 loads
    the method from super() with LOAD_METHOD, after a break at super()."""
    script = (f"import sys; sys.path[:0] = {[str(HERE), str(HERE.parent)]!r}\n"
              f"import numpy as np, pijit\n"
              f"from test_bytecode_versions import calls_a_super_property as f, "
              f"SuperTangent, X\n"
              f"j = pijit.jit(f, jit_config={{'adaptive': False}})\n"
              f"print([np.array_equal(j(X, SuperTangent()), f(X, SuperTangent())) "
              f"for _ in range(2)])")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert (proc.returncode, proc.stdout.strip().splitlines()[-1:]) == (0, ["[True, True]"]), \
        proc.stderr[-3000:]
    report = assert_same(calls_a_super_property, X, SuperTangent(), graphs=2 + INLINED,
                         breaks=2)
    assert "super().fn" in report.break_reasons[0]["reason"], report
