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
        kind = draw(st.sampled_from(["s", "k", "store", "if", "inner", "while", "jump",
                                     "append"] if depth < 2 else ["s", "k", "store"]))
        pad = " " * indent
        if kind == "s":
            out.append(f"{pad}s = s + {draw(float_expr())}")
        elif kind == "k":
            out.append(f"{pad}k = {draw(int_expr())} % 1000")
        elif kind == "store":
            out.append(f"{pad}out[i % {M}] = {draw(float_expr())}")
        elif kind == "append":      # the caller's list (appends.py), compared after the call
            out.append(f"{pad}seen.append("
                       f"{draw(st.sampled_from(['i', 'k', 's', 'a[i]', '(i, k)', '(s, a[i])']))})")
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
    lines = ["def f(a, b, out, n, seen):", "    s = 0.0", "    k = 0", "    x = a[0]",
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
    assert_same(namespace["f"], a, b, np.zeros(M), M, [], ops=["loop_nest"], breaks=1,
                jit_kwargs={"jit_config": {"jit_level": level}})


@settings(max_examples=60, **SETTINGS)
@given(programs())
def test_random_loop_nests_O0(source):
    _run(source, "O0")


@settings(max_examples=25, **SETTINGS)
@given(programs())
def test_random_loop_nests_O1(source):
    _run(source, "O1")


# -- narrow and mixed dtypes -----------------------------------------------------------------
# The shapes the first generator never makes, where miscompiles were found: a branch whose side
# assigns its own condition (`if flag: flag = False`, in both sides, a nested `if`, a walrus);
# both sides of an `if` ending with one store whose check can fail after a side updated a
# variable; a variable of two NumPy dtypes of no common family (`x = u8[i] or s8[i]`, an int32
# or a float32); stores and augmented stores into int8, uint8, int16 and float32 that overflow
# or wrap; NumPy int8 and float32 accumulators beside Python int and float ones; break and
# continue inside those branches. The inputs hold each dtype's edges (255, -128, 2**24 + 1,
# 3e38, nan), so checks fail, warnings fire and errors raise mid-loop. test_random_selects_O1
# runs bodies of such branches alone, so that a check in ifconvert.py's merged block is the
# first to fail (it kills the mutants loops_ifconvert_selects_*, which the longer bodies did not).

U8 = [0, 1, 127, 128, 200, 255]
S8 = [-128, -100, -1, 0, 1, 100, 127]
I32 = [0, 7, -5, 2**24 + 1, 2**31 - 1, -2**31]
F32 = [0.5, -2.5, 0.0, -0.0, 1e-45, 16777217.0, 3e38, -3e38, float("nan")]
# what each output array is stored: a float into an integer array is refused (plain Python)
TARGETS = {"o8": "int", "ou8": "int", "o16": "int", "of32": "float", "out": "float"}


def typed_bool(draw):
    return draw(st.sampled_from([
        f"a[i] > {draw(st.sampled_from([0.2, 0.5, 0.8]))}", "b[i] < 0.0", "flag", "not flag",
        "k % 3 == 0", "c < 0", "t > 2.0", "s > 1.0",
        "u8[i] > s8[i]", "f32[i] < i32[i]"]))


def typed_value(draw, kind):
    """An expression of a Python int ("int"), a NumPy integer of 8 to 16 bits ("narrow") or a
    float of either kind, NumPy's mixed promotions among them ("float"). x and y (two dtypes
    of no family) are only copied and stored: an operation on them is refused (its C domain
    would depend on the run-time type), which would leave the loop plain."""
    pool = {
        "int": ["i", "k", "k * 1000 + i", str(draw(st.sampled_from([-129, -1, 3, 127, 300]))),
                "int(a[i] * 300.0)", "(k - i) // 3"],
        "narrow": ["s8[i]", "u8[i]", "c", "c + s8[i]", "u8[i] + s8[i]", "c * 3",
                   "s8[i] - u8[i]", "-c", "c + 100", "u8[i] * 2"],
        "float": ["s", "t", "a[i] * 300.0", "f32[i] * 2.0", "i32[i] + f32[i]", "t + s",
                  "f32[i] / t", "s8[i] / u8[i]", "t * 1e30", "f32[i] + s8[i]", "a[i] - 0.5"],
    }[kind]
    return draw(st.sampled_from(pool))


def typed_assignment(draw, pad, kind):
    """One assignment of a variable: the condition variable flag, the Python int k and float
    s, the NumPy int8 c and float32 t, x (a uint8 or an int8), y (an int32 or a float32)."""
    return pad + draw(st.sampled_from({
        "flag": [f"flag = {typed_bool(draw)}", "flag = not flag", "flag = False",
                 "flag = True"],
        "k": ["k = k + 1", "k += i", "k = k * 1000 + i", f"k = {typed_value(draw, 'int')}",
              "k -= 200"],
        "s": [f"s = s + {typed_value(draw, 'float')}", "s += a[i]", "s = s * 0.5",
              f"s = float({typed_value(draw, 'narrow')})"],
        "c": ["c = c + s8[i]", "c = c + 100", "c = c - k", "c = c * 2", "c += 1", "c = -c",
              "c = s8[i]"],
        "t": ["t = t + f32[i]", "t = t * 1e20", "t = t + s", "t += 1.5", "t = f32[i]",
              "t = t - k"],
        "x": ["x = u8[i]", "x = s8[i]", "x = u8[i] or s8[i]", "x = s8[i] and u8[i]",
              "x = s8[i] if flag else u8[i]"],
        "y": ["y = i32[i]", "y = f32[i]", "y = i32[i] if a[i] > 0.5 else f32[i]",
              "y = f32[i] or i32[i]"],
    }[kind]))


VARIABLES = ["flag", "k", "s", "c", "t", "x", "y"]
DATA_BOOLS = ["a[i] > 0.5", "b[i] < 0.0", "u8[i] > s8[i]", "f32[i] < i32[i]", "c < 0"]
SIDE_UPDATES = {"k": ["k = k + 1", "k += i", "k = k * 1000 + i", "k -= 200"],
                "s": ["s = s + a[i]", "s = s * 0.5", "s = s + a[i] * 1e300"],
                "t": ["t = t + f32[i]", "t = t * 1e20"], "c": ["c = c + s8[i]", "c = c * 2"]}
# updates of a value a store then fails to fit (an int8, uint8 or int16; a float32), often
OUT_OF_RANGE = {"k": ["k -= 200", "k = k * 1000 + i", "k += i"], "s": ["s = s + a[i] * 1e300"]}


@st.composite
def select_side(draw, pad, most=2):
    """A side of a branch ifconvert.py makes selects (short: both sides and a store they end
    with are at most its MAX_OPS): often flag assigned first, from data (so the branch is on
    data) or not, then a variable its selects pick after flag's (k, s, t sort after it),
    updated from its old value, so that a select reading the condition's new value picks
    the other side's."""
    out = []
    if draw(st.booleans()):
        value = draw(st.sampled_from(DATA_BOOLS + ["not flag", "not flag", "False", "True"]))
        out.append(f"{pad}flag = {value}")
    room = most - len(out)
    for _ in range(draw(st.integers(min(room, 1), room))):
        out.append(typed_assignment(draw, pad, draw(st.sampled_from(VARIABLES)))
                   if draw(st.integers(0, 3)) == 0 else
                   pad + draw(st.sampled_from(sum(SIDE_UPDATES.values(), []))))
    return out


@st.composite
def typed_statements(draw, indent, depth=0, first=None, only=None):
    """1 to 3 statements, the first of kind `first` if given, all of kind `only` if given."""
    out, pad = [], " " * indent
    kinds = VARIABLES + ["store", "store", "jump"]
    if depth < 2:
        kinds += ["if", "if", "select", "select"]
    kinds = [only] if only else kinds
    for n in range(draw(st.integers(1, 3))):
        kind = first if n == 0 and first else draw(st.sampled_from(kinds))
        if kind in VARIABLES:
            out.append(typed_assignment(draw, pad, kind))
        elif kind == "store":
            target = draw(st.sampled_from(sorted(TARGETS)))
            value = draw(st.sampled_from([typed_value(draw, "int"), typed_value(
                draw, "narrow"), "x"] + [typed_value(draw, "float"), "y"] * (
                TARGETS[target] == "float")))
            op = draw(st.sampled_from(["=", "=", "+=", "-=", "*="]))
            out.append(f"{pad}{target}[i % {M}] {op} {value}")
        elif kind == "jump":
            out.append(f"{pad}if {typed_bool(draw)}:")
            out.append(f"{pad}    {draw(st.sampled_from(['break', 'continue']))}")
        else:
            cond = typed_bool(draw)
            cond = draw(st.sampled_from([cond, "flag", "flag", "flag", "not flag",
                                         f"(flag := {cond})", f"flag and {cond}"]))
            out.append(f"{pad}if {cond}:")
            if kind == "if":        # any statements: stores, jumps, inner branches
                sides = [draw(typed_statements(indent + 4, depth + 1))]
                if draw(st.booleans()):
                    sides.append(draw(typed_statements(indent + 4, depth + 1)))
            else:                   # assignments alone (ifconvert.py's selects)
                store = draw(st.integers(0, 2)) > 0        # both sides end with one store
                sides = [draw(select_side(pad + "    ", 2 - store))
                         for _ in range(draw(st.sampled_from([1, 2, 2])))]
                if len(sides) == 2 and store:
                    target = draw(st.sampled_from(sorted(TARGETS)))
                    value = draw(st.sampled_from(["k", "k", "c", "x"] if TARGETS[target] == "int"
                                                 else ["s", "s", "t", "y"]))
                    for side in sides:      # [i], not [i % M]: one index both sides share
                        if value in OUT_OF_RANGE:   # the store's check fails after the side
                            side.append(pad + "    " + draw(st.sampled_from(  # updated it
                                OUT_OF_RANGE[value])))
                        side.append(f"{pad}    {target}[i] = {value}")
            out += sides[0]
            if len(sides) == 2:
                out.append(f"{pad}else:")
                out += sides[1]
    return out


@st.composite
def typed_programs(draw, selects=False):
    """selects: a body of ifconvert.py's branches alone. In a longer body a check failing
    before them (an int8 overflowing) often hands the rest of the loop to Python, where no
    select runs; two miscompiles showed only when a check in the merged block failed first
    (selects picking by the condition's new value; a sunk store failing after the selects)."""
    head = draw(st.sampled_from(["for i in range(n):", "for i in range(1, n):",
                                 "for i, v in enumerate(a):", "for v, i in zip(a, range(n)):"]))
    # at least one branch of each kind, selects first (for the same reason)
    body = [f"        flag = {draw(st.sampled_from(DATA_BOOLS))}"] * draw(st.booleans()) + draw(
        typed_statements(8, only="select")) if selects else [
        *draw(typed_statements(8, first="select")), *draw(typed_statements(8)),
        *draw(typed_statements(8, first="if"))]
    lines = ["def f(a, b, u8, s8, i32, f32, o8, ou8, o16, of32, out, n):",
             "    s = 0.0", "    k = 0", f"    flag = {draw(st.booleans())}", "    c = s8[0]",
             "    t = f32[0]", "    x = u8[0]", "    y = i32[0]", f"    {head}", *body,
             "    return s, k, flag, c, t, x, y"]
    return "\n".join(lines) + "\n"


@st.composite
def typed_inputs(draw):
    """Arrays of the program's dtypes, their elements drawn from each dtype's edges."""
    def pick(pool, dtype):
        return np.array(draw(st.lists(st.sampled_from(pool), min_size=M, max_size=M)), dtype)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    return (rng.random(M), rng.random(M) - 0.5, pick(U8, np.uint8), pick(S8, np.int8),
            pick(I32, np.int32), pick(F32, np.float32))


def _run_typed(source, inputs, level) -> bool:
    """Plain == jitted on each input; whether the loop ran as a loop_nest on some input
    (the recogniser refuses some, and they run as unrolled graphs or plain Python)."""
    note(source)
    namespace = {"np": np}
    exec(compile(source, "<loop nest program>", "exec"), namespace)
    nests = []
    for arrays in inputs:
        note(repr(arrays))
        outs = (np.zeros(M, np.int8), np.zeros(M, np.uint8), np.zeros(M, np.int16),
                np.zeros(M, np.float32), np.zeros(M))
        report = assert_same(namespace["f"], *arrays, *outs, M, graphs=None, breaks=None,
                             jit_kwargs={"jit_config": {"jit_level": level}})
        nests.append(any("loop_nest" in ops for ops in report.ops_per_graph))
    return any(nests)


def _run_typed_examples(level, examples, selects=False):
    """`examples` programs, each on two inputs; most must run as a loop_nest, so that a
    refusal growing silently (every program plain) fails the test."""
    nests = []

    @settings(max_examples=examples, **SETTINGS)
    @given(typed_programs(selects), st.lists(typed_inputs(), min_size=2, max_size=2))
    def run(source, inputs):
        nests.append(_run_typed(source, inputs, level))
    run()
    assert sum(nests) >= 0.6 * len(nests), f"{nests.count(False)} of {len(nests)} plain"


def test_random_typed_loop_nests_O0():
    _run_typed_examples("O0", 60)


def test_random_typed_loop_nests_O1():
    _run_typed_examples("O1", 15)


def test_random_selects_O1():
    _run_typed_examples("O1", 15, selects=True)
