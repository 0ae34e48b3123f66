"""Fusion around writes, end to end: a program whose elementwise work sits on both sides of a
write (an in-place operator of every kind, item and slice assignment, a write through a view,
`out=`, a loop node's writes) must give plain NumPy's values at every level, as one graph with
the write in it. The rule under test: a write closes the open fusion groups (fuse.py), so no
read moves across it; without the rule the read after `x += 1` joins the group computed
before it and sees the old x."""
from __future__ import annotations

import numpy as np
import pytest

from differential import assert_same

LEVELS = ("O0", "O1", "O2")


def _jit(level):
    return {"jit_config": {"jit_level": level}}


A = np.linspace(-2.0, 3.0, 6 * 8).reshape(6, 8)
W = np.linspace(0.5, 1.5, 8 * 8).reshape(8, 8)
I = (np.arange(6 * 8).reshape(6, 8) % 11 + 1).astype(np.int64)


def _after_matmul(op):
    """x = a @ w (a buffer of the function's own); t reads x; x is updated in place; the
    result reads t and the new x."""
    src = (f"def f(a, w):\n"
           f"    x = a @ w\n"
           f"    t = x * 2.0\n"
           f"    x {op}= 1.5\n"
           f"    return t + x\n")
    ns = {"np": np}
    exec(compile(src, f"<fusion-order {op}=>", "exec"), ns)
    return ns["f"]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("op", ["+", "-", "*", "/", "**"])
def test_float_inplace_operator_between_reads(op, level):
    f = _after_matmul(op)
    assert_same(f, A, W, jit_kwargs=_jit(level), ops=["matmul", f"i{_NAMES[op]}"])


_NAMES = {"+": "add", "-": "sub", "*": "mul", "/": "truediv", "**": "pow", "//": "floordiv",
          "%": "mod", "&": "and", "|": "or", "^": "xor", "<<": "lshift", ">>": "rshift"}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("op", ["+", "-", "*", "//", "%", "&", "|", "^", "<<", ">>"])
def test_integer_inplace_operator_between_reads(op, level):
    src = (f"def f(i):\n"
           f"    x = i.copy()\n"
           f"    t = x + 1\n"
           f"    x {op}= 2\n"
           f"    return t * x\n")
    ns = {}
    exec(compile(src, f"<fusion-order int {op}=>", "exec"), ns)
    assert_same(ns["f"], I, jit_kwargs=_jit(level), ops=[f"i{_NAMES[op]}"])


def _matmul_inplace(a, w):
    x = a @ w
    t = x + 1.0
    x @= w
    return t * x


def _item_assignment(a):
    x = a * 2.0
    t = x - 1.0
    x[1] = 7.0
    x[:, 2] = t[:, 3]
    return t + x


def _slice_assignment_overlapping(a):
    x = a + 0.5
    t = x * 3.0
    x[1:] = x[:-1]                  # overlap: NumPy copies the source first
    return t - x


def _write_through_a_view(a):
    x = a * 1.0
    v = x[::2]
    t = x + 2.0
    v += 10.0                       # x changes through v
    return t * x, v


def _ufunc_out(a):
    x = a * 2.0
    t = x - 3.0
    np.add(x, 1.0, out=x)
    return t + x


def _quiet_ufunc_out(a):
    x = a * 2.0
    t = x - 3.0
    np.maximum(x, 0.5, out=x)       # a write that cannot warn: only the write rule closes
    return t + x


def _loop_node_writes(a, n):
    x = a * 2.0
    t = x + 1.0
    for k in range(n):
        x[k] = x[k] * 0.5 + t[k]
    return t * x


def _write_then_reduce(a):
    x = a * 2.0
    s = x.sum(axis=-1, keepdims=True)
    x -= 1.0
    return x / s, x.max()


def _two_writes(a):
    x = a * 2.0
    y = x + 1.0
    x += y
    z = x * y
    y *= 2.0
    return x + y + z


# (fn, args, ops the graphs must include, jit options): every write is a node of the one graph
# (capture/writes.py); the loop runs as a loop node with unrolling off (a short loop whose
# body writes is unrolled otherwise).
CASES = [(_matmul_inplace, (A[:, :8], W), ["matmul", "imatmul"], {}),
         (_item_assignment, (A,), ["mul", "sub", "setitem"], {}),
         (_slice_assignment_overlapping, (A,), ["add", "mul", "setitem"], {}),
         (_write_through_a_view, (A,), ["mul", "add", "iadd"], {}),
         (_ufunc_out, (A,), ["mul", "sub", "add"], {}),
         (_quiet_ufunc_out, (A,), ["mul", "sub", "maximum", "add"], {}),
         (_loop_node_writes, (A, 4), ["loop"], {"loop_unrolling": False,
                                                 "loop_nests": False}),
         (_write_then_reduce, (A,), ["isub", "sum", "max"], {}),
         (_two_writes, (A,), ["iadd", "imul"], {})]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn,args,ops,options", CASES, ids=[c[0].__name__ for c in CASES])
def test_writes_between_reads(fn, args, ops, options, level):
    jit_kwargs = {"jit_config": {"jit_level": level, **options}}
    assert_same(fn, *args, jit_kwargs=jit_kwargs, ops=ops, graphs=1, breaks=0)


def _alias_then_write(i):
    x = i.copy()
    y = x                   # the same array: the write below changes what y * 3 reads
    t = y * 3
    x += 1
    u = y * 3               # not the same value as t (cse must not merge across the write)
    return t, u - t


@pytest.mark.parametrize("level", LEVELS)
def test_equal_expressions_across_a_write(level):
    assert_same(_alias_then_write, I, jit_kwargs=_jit(level), ops=["iadd"])
