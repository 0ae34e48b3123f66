"""Random loop nests (hypothesis): for loops over range, array elements, enumerate and zip,
while loops, with branches, break/continue, nested triangular loops and inner loops over
elements, Python int and float carried values; jitted == plain (results, mutated arrays,
exceptions) at O0 and O1, each captured as a loop_nest."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, note, settings, strategies as st

from tests.differential import assert_same

M = 7       # elements of a and b

SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                phases=[p for p in __import__("hypothesis").Phase if p.name != "explain"])


@st.composite
def float_expr(draw, depth=0):
    leaves = ["a[i]", f"b[(i + {draw(st.integers(0, 5))}) % {M}]", "s", "x",
              repr(draw(st.sampled_from([0.5, -1.25, 2.0, 0.0, 3.0]))), "float(k)"]
    if depth >= 2 or draw(st.booleans()):
        return draw(st.sampled_from(leaves))
    x, y = draw(float_expr(depth + 1)), draw(float_expr(depth + 1))
    form = draw(st.sampled_from(["+", "-", "*", "/", "abs", "min", "max", "sqrt"]))
    if form in ("abs", "min", "max"):
        return f"{form}({x})" if form == "abs" else f"{form}({x}, {y})"
    if form == "sqrt":
        return f"math.sqrt(abs({x}))"
    return f"({x} {form} {y})"


@st.composite
def int_expr(draw, depth=0):
    leaves = ["i", "k", str(draw(st.integers(-3, 9))), "int(a[i] * 10.0)"]
    if depth >= 2 or draw(st.booleans()):
        return draw(st.sampled_from(leaves))
    x, y = draw(int_expr(depth + 1)), draw(int_expr(depth + 1))
    op = draw(st.sampled_from(["+", "-", "*", "//", "%", "&", "|", "^"]))
    return f"({x} {op} {y})"


@st.composite
def statements(draw, indent, depth=0, in_loop=True):
    out = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["s", "k", "store", "if", "inner", "while", "jump"]
                                    if depth < 2 else ["s", "k", "store"]))
        pad = " " * indent
        if kind == "s":
            out.append(f"{pad}s = s + {draw(float_expr())}")
        elif kind == "k":
            out.append(f"{pad}k = {draw(int_expr())} % 1000")
        elif kind == "store":
            out.append(f"{pad}out[i % {M}] = {draw(float_expr())}")
        elif kind == "if":
            cmp = draw(st.sampled_from(["<", "<=", ">", "==", "!="]))
            out.append(f"{pad}if {draw(float_expr())} {cmp} {draw(float_expr())}:")
            out += draw(statements(indent + 4, depth + 1))
            if draw(st.booleans()):
                out.append(f"{pad}else:")
                out += draw(statements(indent + 4, depth + 1))
        elif kind == "inner":
            out.append(pad + draw(st.sampled_from(["for j in range(i):", "for z in b:",
                                                   "for j, z in zip(range(i), b):"])))
            out.append(f"{pad}    s = s + {draw(st.sampled_from(['a[j]', 'z']))} * "
                       f"{draw(st.sampled_from([0.5, -2.0, 1.0]))}")
        elif kind == "while":
            out.append(f"{pad}w = 0")
            out.append(f"{pad}while w < {draw(st.integers(0, 4))} and a[w] < "
                       f"{draw(st.sampled_from([0.3, 0.7, 1.0]))}:")
            out.append(f"{pad}    w += 1")
            out.append(f"{pad}    k = k + w")
        else:
            cond = f"a[i] > {draw(st.sampled_from([0.2, 0.6, 0.9]))}"
            out.append(f"{pad}if {cond}:")
            out.append(f"{pad}    {draw(st.sampled_from(['break', 'continue']))}")
    return out


@st.composite
def programs(draw):
    body = draw(statements(8))
    start = draw(st.sampled_from(["", "1, "]))
    head = draw(st.sampled_from([f"for i in range({start}n):", "for i, x in enumerate(a):",
                                 f"for x, i in zip(a, range({start}n)):",
                                 "for i, (x, y) in enumerate(zip(a, b), -1):"]))
    lines = ["def f(a, b, out, n):", "    s = 0.0", "    k = 0", "    x = a[0]",
             "    j = 0", "    z = b[0]", f"    {head}",
             "        s = s + a[i] * 0.5",      # s: a float or an np.float64 (one break)
             *body, "    return s, k, x, out"]
    return "\n".join(lines) + "\n"


def _run(source, level):
    note(source)
    namespace = {"math": math, "np": np}
    exec(compile(source, "<loop nest program>", "exec"), namespace)
    rng = np.random.default_rng(len(source))
    a, b = rng.random(M), rng.random(M) - 0.5
    assert_same(namespace["f"], a, b, np.zeros(M), M, ops=["loop_nest"], breaks=1,
                jit_kwargs={"jit_config": {"jit_level": level}})


@settings(max_examples=60, **SETTINGS)
@given(programs())
def test_random_loop_nests_O0(source):
    _run(source, "O0")


@settings(max_examples=25, **SETTINGS)
@given(programs())
def test_random_loop_nests_O1(source):
    _run(source, "O1")
