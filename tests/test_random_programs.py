"""Random straight-line NumPy programs (hypothesis): jitted == plain, as exactly one graph.

The generator keeps the real value of every temporary while it builds a program (evaluating
each new statement with NumPy on the drawn inputs), so it only picks axes, reshapes, indices
and broadcast partners that are valid, and knows each value's dtype. A statement whose plain
evaluation raises is dropped, except that now and then it is kept as the program's last
statement: then the jitted function must raise the same exception type.
"""
from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, note, settings, strategies as st
from hypothesis.extra import numpy as hnp

import pijit

from differential import assert_equal_values, assert_same, run_captured

DTYPES = ("bool", "int32", "int64", "float32", "float64")
NP_NAME = {"bool": "np.bool_", "int32": "np.int32", "int64": "np.int64",
           "float32": "np.float32", "float64": "np.float64"}
INPUT_NAMES = ("a", "b", "c")

BINOPS = ("+", "-", "*", "/", "//", "%", "**", "<", "<=", "==", "!=", ">", ">=", "&", "|", "^")
BITWISE = ("&", "|", "^")
UNARY_UFUNCS = ("np.exp", "np.log", "np.sqrt", "np.abs", "np.sin", "np.cos", "np.tanh",
                "np.negative", "np.floor", "np.ceil", "np.square", "np.sign", "np.log1p",
                "np.expm1", "np.arctan", "np.isnan", "np.isfinite", "np.logical_not")
BINARY_FUNCS = ("np.maximum", "np.minimum", "np.add", "np.multiply", "np.subtract",
                "np.true_divide", "np.logical_and", "np.arctan2", "np.hypot")
REDUCTIONS = ("sum", "mean", "max", "min", "prod")
INPLACE_OPS = ("+", "-", "*")
PY_CONSTANTS = (0, 1, 2, 3, -1, -2, 0.5, 2.0, -1.5, 1e-3, True, False)


def quiet_eval(expr, env):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return eval(expr, {"np": np}, env)


def is_value(v) -> bool:
    return type(v) is np.ndarray or isinstance(v, np.generic)


def kind(v) -> str:
    """'b', 'i', 'f' (or 'u', 'c'...) of an array/NumPy scalar/Python scalar."""
    if isinstance(v, bool):
        return "b"
    if isinstance(v, int):
        return "i"
    if isinstance(v, float):
        return "f"
    return np.asarray(v).dtype.kind


# -- inputs -----------------------------------------------------------------------------------
def elements(dtype: str):
    if dtype == "bool":
        return st.booleans()
    if dtype.startswith("int"):
        return st.integers(-6, 6)
    width = 32 if dtype == "float32" else 64
    return st.one_of(
        st.integers(-6, 6).map(float),
        st.floats(-10, 10, width=width),
        st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 0.5]),
    )


@st.composite
def inputs(draw):
    """1-3 arrays with broadcast-compatible shapes (incl. 0-d and size-1 dims)."""
    ndim = draw(st.integers(0, 4 if draw(st.integers(0, 4)) == 0 else 3))
    sizes = st.integers(1, 4) if draw(st.integers(0, 9)) else st.integers(0, 4)  # rarely size 0
    base = draw(st.lists(sizes, min_size=ndim, max_size=ndim))
    arrays = []
    for _ in range(draw(st.integers(1, 3))):
        k = draw(st.integers(0, ndim))
        shape = tuple(d if draw(st.integers(0, 3)) else 1 for d in base[ndim - k:])
        dtype = draw(st.sampled_from(DTYPES))
        arrays.append(draw(hnp.arrays(np.dtype(dtype), shape, elements=elements(dtype))))
    return arrays


# -- one statement ------------------------------------------------------------------------------
def const_src(c) -> str:
    return repr(c)


@st.composite
def operand(draw, pool, allow_const=True):
    """(source, value) of a pool value or, sometimes, a Python constant."""
    if allow_const and draw(st.integers(0, 4)) == 0:
        c = draw(st.sampled_from(PY_CONSTANTS))
        return const_src(c), c
    names = list(pool)
    # Prefer the newest value, so programs chain instead of leaving dead code.
    name = names[-1] if draw(st.booleans()) else draw(st.sampled_from(names))
    return name, pool[name]


def _slice_item(draw, d):
    d = max(d, 1)      # a size-0 axis: indices are then out of bounds and the statement dropped
    choice = draw(st.integers(0, 7))
    if choice == 0:
        return ":"
    if choice == 1:
        return "::-1"
    if choice == 2:
        return f"{draw(st.integers(0, d))}:"
    if choice == 3:
        return f":{draw(st.integers(-d, d))}"
    if choice == 4:
        return f"::{draw(st.integers(1, 3))}"
    if choice == 5:
        return str(draw(st.integers(-d, d - 1)))   # integer index drops the axis
    if choice == 6:
        return "None"
    return f"{draw(st.integers(-d, d - 1))}:{draw(st.integers(-d, d))}:{draw(st.sampled_from([1, 2, -1]))}"


def _factorizations(size):
    out = [(size,), (-1,), (1, size), (size, 1), (1, -1)]
    for f in range(2, size):
        if size % f == 0:
            out.append((f, size // f))
            out.append((f, -1))
            for g in range(2, size // f):
                if (size // f) % g == 0:
                    out.append((f, g, size // f // g))
    return out


@st.composite
def statement(draw, pool):
    """The source of one expression over the pool (may be invalid: the caller evaluates it)."""
    category = draw(st.sampled_from(("binop", "binop", "binop", "unary", "unary", "func2",
                                     "where", "clip", "reduce", "reduce", "reshape",
                                     "transpose", "index", "index", "astype", "operator1")))
    if category == "binop":
        op = draw(st.sampled_from(BINOPS))
        left, lv = draw(operand(pool))
        right, rv = draw(operand(pool, allow_const=not isinstance(lv, (int, float))))
        if op in BITWISE and (kind(lv) not in "biu" or kind(rv) not in "biu"):
            op = draw(st.sampled_from(("+", "*", "<", "==")))
        if op == "**" and kind(lv) in "biu" and kind(rv) in "biu":
            # ints to negative int powers raise at run time: keep exponents small, >= 0
            if isinstance(rv, (bool, int)):
                right = str(draw(st.integers(0, 3)))
            else:
                right = f"np.abs({right}) % 3"
        if op == "**" and kind(lv) == "b" and kind(rv) == "b":
            op = "*"
        return f"{left} {op} {right}"
    if category == "operator1":
        x, v = draw(operand(pool, allow_const=False))
        op = draw(st.sampled_from(("-", "abs", "~", "+")))
        if op == "~" and kind(v) not in "biu":
            op = "-"
        if op == "-" and kind(v) == "b":
            op = "~"
        return f"abs({x})" if op == "abs" else f"{op}{x}"
    if category == "unary":
        fn = draw(st.sampled_from(UNARY_UFUNCS))
        x, v = draw(operand(pool, allow_const=False))
        if fn == "np.negative" and kind(v) == "b":
            fn = "np.logical_not"
        return f"{fn}({x})"
    if category == "func2":
        fn = draw(st.sampled_from(BINARY_FUNCS))
        x, _ = draw(operand(pool, allow_const=False))
        y, _ = draw(operand(pool))
        return f"{fn}({x}, {y})"
    if category == "where":
        c, cv = draw(operand(pool, allow_const=False))
        cond = c if kind(cv) == "b" else f"{c} > {draw(st.sampled_from(['0', '1', '0.5']))}"
        x, _ = draw(operand(pool))
        y, _ = draw(operand(pool))
        return f"np.where({cond}, {x}, {y})"
    if category == "clip":
        x, v = draw(operand(pool, allow_const=False))
        lo = draw(st.sampled_from([-2, -1, 0, 0.5]))
        hi = draw(st.sampled_from([None, 1, 2, 3.5]))
        if kind(v) == "b":
            return f"np.clip({x}, False, True)"
        return f"np.clip({x}, {lo}, {hi})" if draw(st.booleans()) else \
            f"{x}.clip({lo}, {hi})" if hi is not None else f"np.maximum({x}, {lo})"
    if category == "reduce":
        name = draw(st.sampled_from(REDUCTIONS))
        x, v = draw(operand(pool, allow_const=False))
        ndim = np.ndim(v)
        axis = draw(st.sampled_from([None] + list(range(-ndim, ndim)))) if ndim else None
        args = []
        if axis is not None or draw(st.booleans()):
            args.append(f"axis={axis}")
        if draw(st.integers(0, 2)) == 0:
            args.append("keepdims=True")
        if draw(st.booleans()):
            return f"np.{name}({', '.join([x] + args)})"
        return f"{x}.{name}({', '.join(args)})"
    if category == "reshape":
        x, v = draw(operand(pool, allow_const=False))
        target = draw(st.sampled_from(_factorizations(int(np.size(v)))))
        if len(target) == 1 and draw(st.booleans()):
            return f"{x}.reshape({target[0]})"
        if draw(st.booleans()):
            return f"np.reshape({x}, {target})"
        return f"{x}.reshape{target}" if len(target) > 1 else f"{x}.reshape({target})"
    if category == "transpose":
        x, v = draw(operand(pool, allow_const=False))
        ndim = np.ndim(v)
        choice = draw(st.integers(0, 3))
        if choice == 0 or ndim == 0:
            return f"{x}.T"
        if choice == 1:
            return f"np.transpose({x})"
        if choice == 2:
            perm = tuple(draw(st.permutations(range(ndim))))
            return f"{x}.transpose{perm}" if ndim > 1 else f"{x}.transpose({perm})"
        return f"np.swapaxes({x}, 0, -1)"
    if category == "index":
        x, v = draw(operand(pool, allow_const=False))
        shape = np.shape(v)
        if not shape:
            return f"{x}[{draw(st.sampled_from(['...', 'None', '()']))}]"
        n = draw(st.integers(1, len(shape)))
        items = [_slice_item(draw, d) for d in shape[:n]]
        if draw(st.integers(0, 3)) == 0:
            items = ["..."] + items[1:]
        return f"{x}[{', '.join(items)}]"
    # astype
    x, v = draw(operand(pool, allow_const=False))
    dtype = draw(st.sampled_from(DTYPES))
    if kind(v) == "f" and dtype.startswith("int"):
        # float -> int of NaN/inf/out of range is undefined in C: keep values representable
        with np.errstate(all="ignore"):
            finite = np.all(np.isfinite(v)) and np.all(np.abs(np.asarray(v)) < 2 ** 31)
        if not finite:
            dtype = "float64"
    return f"{x}.astype({NP_NAME[dtype]})"


@st.composite
def error_statement(draw, pool):
    """A statement that usually raises when run: its exception must survive the jit."""
    x, v = draw(operand(pool, allow_const=False))
    shape = np.shape(v)
    choice = draw(st.integers(0, 4))
    if choice == 0:
        return f"{x}.astype(np.int64) ** -{draw(st.integers(1, 2))}"   # ValueError at run time
    if choice == 1:
        return f"{x}[{shape[0] if shape else 0}]"                     # IndexError
    if choice == 2:
        return f"{x}.reshape({np.size(v) + 1})"                       # ValueError
    if choice == 3:
        return f"{x} + np.ones({np.size(v) + 2})"                      # broadcast ValueError
    return f"np.sum({x}, axis={np.ndim(v)})"                          # AxisError


# -- programs -----------------------------------------------------------------------------------
@st.composite
def programs(draw):
    """(source, input arrays, raises, other inputs): a straight-line `prog(a[, b[, c]])`.

    Statements are `tN = <expression>`, and sometimes `tN += <operand>` (in place) on a
    temporary that does not share memory with an input; views of that temporary taken
    earlier must see the update."""
    args = draw(inputs())
    names = INPUT_NAMES[:len(args)]
    pool = {n: a.copy() for n, a in zip(names, args)}
    body = []            # (line, target temp or None, source text the line reads)
    temps = []
    raises = False
    allow_error = draw(st.sampled_from([False] * 7 + [True]))
    steps = draw(st.integers(1, 8))
    attempts = 0

    def define(expr, value):
        name = f"t{len(temps)}"
        temps.append(name)
        body.append((f"    {name} = {expr}", expr))
        pool[name] = value

    while len(body) < steps and attempts < 4 * steps:
        attempts += 1
        if temps and draw(st.integers(0, 5)) == 0:
            target = draw(st.sampled_from(temps))
            tv = pool[target]
            # Only arrays the function owns: an update of an input (or of any view) is a
            # side effect pijit deliberately does not capture (a graph break).
            if type(tv) is not np.ndarray or not tv.flags.owndata or \
                    any(np.shares_memory(tv, pool[n]) for n in names):
                continue
            op = draw(st.sampled_from(INPLACE_OPS))
            y, _ = draw(operand(pool))
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    exec(f"{target} {op}= {y}", {"np": np}, pool)
            except Exception:
                continue
            body.append((f"    {target} {op}= {y}", y))
            continue
        expr = draw(statement(pool))
        try:
            value = quiet_eval(expr, pool)
        except Exception:
            if allow_error:
                define(expr, None)
                raises = True
                break
            continue
        if not is_value(value):
            continue
        if type(value) is np.ndarray and value.size > 4096:
            continue
        define(expr, value)
    if not temps:
        expr = f"{names[0]} + 1"
        define(expr, quiet_eval(expr, pool))
    if allow_error and not raises:
        expr = draw(error_statement({k: v for k, v in pool.items() if v is not None}))
        try:
            quiet_eval(expr, pool)
        except Exception:
            define(expr, None)
            raises = True
    # Return every temporary no later statement reads (so no statement is dead code), as a
    # tuple when there are several.
    def read_later(t):
        first = next(i for i, (line, _) in enumerate(body) if line.startswith(f"    {t} = "))
        return any(re.search(rf"\b{t}\b", reads) for _, reads in body[first + 1:])
    live = [t for t in temps if t == temps[-1] or not read_later(t)]
    ret = ", ".join(live)
    src = (f"def prog({', '.join(names)}):\n" + "\n".join(line for line, _ in body) +
           f"\n    return {ret}\n")
    return src, args, raises, draw(same_kind_inputs(args))


@st.composite
def same_kind_inputs(draw, args):
    """New values for the same shapes and dtypes: must hit the cache, not recompile."""
    return [draw(hnp.arrays(a.dtype, a.shape, elements=elements(str(a.dtype)))) for a in args]


def build(src):
    namespace = {"np": np}
    exec(compile(src, "<generated>", "exec"), namespace)
    return namespace["prog"]


def describe(args) -> str:
    return "\n".join(f"{n} = np.array({a.tolist()!r}, dtype=np.{a.dtype})  # shape {a.shape}"
                     for n, a in zip(INPUT_NAMES, args))


def check_program(src, args, raises, args2=None):
    fn = build(src)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        expected, expected_exc, _ = run_captured(fn, [a.copy() for a in args], {})
        if expected_exc is not None:
            jitted = pijit.jit(fn)
            pijit.reset(jitted)
            for call in range(2):
                _, exc, _ = run_captured(jitted, [a.copy() for a in args], {})
                assert type(exc) is type(expected_exc), \
                    f"call {call + 1}: raised {exc!r}, expected {expected_exc!r}\n{src}"
            return "raised"
        assert not raises or expected_exc is None
        try:
            assert_same(fn, *args, graphs=1, breaks=0)
            if args2 is not None:
                check_other_values(fn, args2)
        except AssertionError as e:
            raise AssertionError(f"{e}\n--- program ---\n{src}{describe(args)}\n"
                                 f"--- second inputs ---\n{describe(args2 or [])}") from None
    return "ok"


def check_other_values(fn, args2):
    """Same shapes and dtypes, other values: a cache hit (values are not guarded) that
    still equals plain Python."""
    jitted = pijit.jit(fn)
    before = pijit.stats(jitted)
    expected, expected_exc, _ = run_captured(fn, [a.copy() for a in args2], {})
    got, exc, _ = run_captured(jitted, [a.copy() for a in args2], {})
    after = pijit.stats(jitted)
    assert after["compile_count"] == before["compile_count"], \
        f"new values recompiled: {after['recompile_reasons']}"
    assert after["cache_hits"] == before["cache_hits"] + 1
    if expected_exc is not None:
        assert type(exc) is type(expected_exc), f"second inputs: {exc!r} != {expected_exc!r}"
    else:
        assert exc is None, f"second inputs: jitted raised {exc!r}"
        assert_equal_values(got, expected, "second inputs")


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.data_too_large])
@given(programs())
def test_random_program(program):
    src, args, raises, args2 = program
    note(src)
    note(describe(args))
    note("second inputs:\n" + describe(args2))
    event(check_program(src, args, raises, args2))
    event(f"{src.count(chr(10)) - 2} statements")


# -- regressions and spot checks of the generator itself -----------------------------------------
def test_generator_builds_valid_programs():
    """Some fixed programs of the generator's shapes, so its rendering stays runnable."""
    src = ("def prog(a, b):\n"
           "    t0 = a * b + 1\n"
           "    t1 = np.sum(t0, axis=-1, keepdims=True)\n"
           "    t2 = t1.reshape(-1)\n"
           "    t3 = np.where(t2 > 0, t2, 0.5)\n"
           "    return t2, t3\n")
    args = [np.arange(6.0).reshape(2, 3), np.arange(3, dtype=np.int32)]
    assert check_program(src, args, False) == "ok"
    bad = "def prog(a):\n    t0 = a ** (a - 3)\n    return t0\n"
    assert check_program(bad, [np.arange(3)], True) == "raised"


def test_generated_code_has_generated_filename():
    fn = build("def prog(a):\n    t0 = a + 1\n    return t0\n")
    assert fn.__code__.co_filename == "<generated>"
    jitted = pijit.jit(fn)
    assert_equal_values(jitted(np.ones(2)), np.full(2, 2.0))
    report = pijit.explain(jitted, np.ones(2))
    assert report.graph_count == 1 and report.fallback is None
