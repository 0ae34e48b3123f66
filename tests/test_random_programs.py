"""Random NumPy programs (hypothesis): jitted == plain at O0, O1 and O2 (values by the level's
comparison, warnings by category, message and count, exceptions by type and message), and
how each ran.

The generator keeps the real value of every temporary while it builds a program (evaluating
each new statement with NumPy on the drawn inputs), so it only picks axes, reshapes, indices
and broadcast partners that are valid, and knows each value's dtype. Inputs include every
integer width with values at their limits (NumPy warns when its scalar math overflows
them). Besides expressions, a program writes into its inputs, views of them and its own
arrays: in place (`t += u`, `a //= 2`), by item assignment with any index (`t[1:] = u`,
`a[a > 0] = 0`, `t[[0, 0, -1]] = u`), and in loops over elements (`t[i] = t[i] * 2 + 1`,
`s = s + t[i]`), all in one graph with no break; views of inputs and of temporaries alias,
and now and then the second argument is the first or a reversed view of it (a write into
one shows in the other; the second inputs, drawn to hit the cache, are buffers of their
own). A statement whose plain evaluation raises is dropped, except
that now and then it is kept as the program's last statement: then the jitted function must
raise the same exception, with the same message.
"""
from __future__ import annotations

import math
import re
import traceback
import warnings

import numpy as np
from hypothesis import HealthCheck, event, example, given, note, settings, strategies as st
from hypothesis.extra import numpy as hnp

import pijit

from differential import (assert_equal_values, assert_same, assert_same_outcome, clone,
                          inputs_tol, level_tol, mismatch, run_observed, run_plain)
from o2_spec import EXACT
from pijit.explain import report as explain_report

DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float32", "float64")
NP_NAME = {"bool": "np.bool_", **{d: f"np.{d}" for d in DTYPES[1:]}}
INPUT_NAMES = ("a", "b", "c")

BINOPS = ("+", "-", "*", "/", "//", "%", "**", "<", "<=", "==", "!=", ">", ">=", "&", "|", "^")
BITWISE = ("&", "|", "^")
UNARY_UFUNCS = ("np.exp", "np.log", "np.sqrt", "np.abs", "np.sin", "np.cos", "np.tanh",
                "np.negative", "np.floor", "np.ceil", "np.square", "np.sign", "np.log1p",
                "np.expm1", "np.arctan", "np.isnan", "np.isfinite", "np.logical_not")
BINARY_FUNCS = ("np.maximum", "np.minimum", "np.add", "np.multiply", "np.subtract",
                "np.true_divide", "np.logical_and", "np.arctan2", "np.hypot")
REDUCTIONS = ("sum", "mean", "max", "min", "prod")
INPLACE_OPS = ("+", "-", "*", "/", "//", "**", "&", "|", "^")
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
    if np.dtype(dtype).kind in "iu":     # small values, and the type's limits
        info = np.iinfo(dtype)
        edges = [int(info.min), int(info.min) + 1, int(info.max) - 1, int(info.max)]
        return st.one_of(st.integers(max(-6, int(info.min)), 6), st.sampled_from(edges))
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
    arrays = [relayout(a, draw(st.sampled_from(LAYOUTS))) for a in arrays]
    if len(arrays) >= 2 and draw(st.integers(0, 5)) == 0:
        # the second argument over the first one's buffer: the array itself or reversed
        a = arrays[0]
        arrays[1] = a[..., ::-1] if a.ndim and draw(st.booleans()) else a
    return arrays


# How an input is laid out in memory, drawn for each one (C order most often): Fortran order,
# every other element of a buffer twice as long, a negative stride, a stride of 0 along the
# last axis (a read-only np.broadcast_to, all of its rows equal), as users pass transposes,
# slices, reversed views and broadcasts. The second inputs take the same layout
# (same_kind_inputs), so they still hit the cache.
LAYOUTS = ("C",) * 4 + ("F", "strided", "reversed", "broadcast")


def relayout(a: np.ndarray, how: str) -> np.ndarray:
    """`a`'s shape and dtype laid out `how` (its values too, except that broadcast keeps the
    first element of each row)."""
    if a.ndim == 0 or a.size == 0 or how == "C":
        return a
    if how == "F":
        return np.asfortranarray(a)
    if how == "strided":
        buffer = np.zeros((2 * a.shape[0],) + a.shape[1:], a.dtype)
        buffer[::2] = a
        return buffer[::2]
    if how == "reversed":
        return a[::-1].copy()[::-1]
    return np.broadcast_to(a[..., :1], a.shape)


def layout_name(a: np.ndarray) -> str:
    """The layout relayout gave `a` (C when it cannot be told: 0-d, empty, one element)."""
    if a.ndim == 0 or a.size <= 1:
        return "C"
    if a.strides[-1] == 0 and a.shape[-1] > 1:
        return "broadcast"
    if a.strides[0] < 0 and a.shape[0] > 1:
        return "reversed"
    if a.flags.c_contiguous:
        return "C"
    if a.flags.f_contiguous:
        return "F"
    return "strided"


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
    if kind(v) == "f" and np.dtype(dtype).kind in "iu":
        # float -> int of NaN/inf/out of range is undefined in C: keep values representable
        info = np.iinfo(dtype)
        with np.errstate(all="ignore"):
            fits = np.all(np.isfinite(v)) and np.all((np.asarray(v) > float(info.min) - 1)
                                                     & (np.asarray(v) < float(info.max) + 1))
        if not fits:
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


@st.composite
def write_statement(draw, pool):
    """(line, what it reads, target) of a write into an array of the pool: an in-place operator
    (`x += y`), or an item assignment by slices, ints, None, `...`, a boolean mask or an
    integer array with repeated indices (`x[[0, 0, -1]] = y`: the last write wins). The
    target counts as read only through its index, so a written temporary stays live."""
    targets = [n for n, v in pool.items() if type(v) is np.ndarray]
    target = draw(st.sampled_from(targets))
    tv = pool[target]
    y, yv = draw(operand(pool))
    if draw(st.booleans()):
        op = draw(st.sampled_from(INPLACE_OPS))
        return f"{target} {op}= {y}", y, target
    shape = tv.shape
    choice = draw(st.integers(0, 4))
    if not shape or choice == 0:
        index = draw(st.sampled_from(["...", "()"] if not shape else ["...", ":"]))
    elif choice == 1:
        index = f"{target} > 0" if tv.dtype.kind != "b" else target
        if np.ndim(yv) > 1:
            y = f"{y}.ravel()[:1]"          # one value for each selected item
    elif choice == 2:
        index = f"[0, 0, {draw(st.integers(-shape[0], max(shape[0] - 1, 0)))}]"
    else:
        n = draw(st.integers(1, len(shape)))
        items = [_slice_item(draw, d) for d in shape[:n]]
        if draw(st.integers(0, 3)) == 0:
            items = ["..."] + items[1:]
        index = ", ".join(items)
    return f"{target}[{index}] = {y}", f"{index} {y}", target


# -- programs -----------------------------------------------------------------------------------
def _quiet_exec(src, pool) -> bool:
    """Run a statement on the pool (its values follow the program); False if it raises."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            exec(src, {"np": np}, pool)
    except Exception:
        return False
    finally:
        pool.pop("i", None)         # (a loop's variable is no value of the program)
    return True


@st.composite
def programs(draw):
    """(source, input arrays, raises, other inputs, writes): `prog(a[, b[, c]])`.

    Statements are `tN = <expression>`, and sometimes a write (write_statement: in place,
    `x += y`, or an item assignment, `x[k] = y`, with any index; `writes` counts them) into
    an input, a view of one or a temporary, or a loop over the elements of one of those
    (`x[i] = x[i] * 2 + 1`, or `tM = x[0]` then `tM = tM + x[i]`): views taken earlier must
    see the writes, and the caller's arrays must end as plain Python leaves them. The pool
    keeps the inputs' aliasing (a write into `a` shows in a `b` that is `a` or a view of
    it), so later statements are drawn on the values the program really has."""
    args = draw(inputs())
    names = INPUT_NAMES[:len(args)]
    pool = dict(zip(names, clone(list(args))))
    body = []            # (lines, source text the lines read)
    temps = []
    written = []         # temporaries written into (returned, so the writes are seen)
    raises = False
    writes = 0
    allow_error = draw(st.sampled_from([False] * 7 + [True]))
    steps = draw(st.integers(1, 8))
    attempts = 0

    def define(expr, value):
        name = f"t{len(temps)}"
        temps.append(name)
        body.append((f"    {name} = {expr}", expr))
        pool[name] = value
        return name

    while len(body) < steps and attempts < 4 * steps:
        attempts += 1
        kind_ = draw(st.integers(0, 11))
        if kind_ <= 1:                                # a write
            src, y, target = draw(write_statement(pool))
        elif kind_ == 2:                              # a loop over the elements
            target = draw(st.sampled_from(list(pool)))
            tv = pool[target]
            if type(tv) is not np.ndarray or tv.ndim == 0 or not 0 < tv.shape[0] <= 16:
                continue
            # (x[i] * 2 + 1 keeps x's dtype, so the loop is one loop node: not for bool)
            if tv.dtype.kind in "iuf" and draw(st.booleans()):
                src = (f"for i in range({target}.shape[0]):\n"
                       f"        {target}[i] = {target}[i] * 2 + 1")
                y = target
            else:
                acc = define(f"{target}[0]", quiet_eval(f"{target}[0]", pool))
                src = (f"for i in range(1, {target}.shape[0]):\n"
                       f"        {acc} = {acc} + {target}[i]")
                y, target = acc, acc
        if kind_ <= 2:
            if not _quiet_exec(src, pool):
                continue
            body.append((f"    {src}", y))
            if target in temps:
                written.append(target)
            writes += kind_ <= 1
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
    # Return every temporary no later statement reads (so no statement is dead code), and
    # every one written into, as a tuple when there are several.
    def read_later(t):
        first = next(i for i, (line, _) in enumerate(body) if line.startswith(f"    {t} = "))
        return any(re.search(rf"\b{t}\b", reads) for _, reads in body[first + 1:])
    live = [t for t in temps if t == temps[-1] or not read_later(t) or t in written]
    ret = ", ".join(live)
    src = (f"def prog({', '.join(names)}):\n" + "\n".join(line for line, _ in body) +
           f"\n    return {ret}\n")
    return src, args, raises, draw(same_kind_inputs(args)), writes


@st.composite
def same_kind_inputs(draw, args):
    """New values for the same shapes, dtypes and layouts (a reversed view stays one): must
    hit the cache, not recompile. Each array is a buffer of its own, also where the first
    inputs aliased: a capture that took the aliasing for granted without a guard fails."""
    new = []
    for a in args:
        x = draw(hnp.arrays(a.dtype, a.shape, elements=elements(str(a.dtype))))
        if a.ndim and a.strides[-1] < 0 and a.shape[-1] > 1:
            new.append(x[..., ::-1].copy()[..., ::-1])      # the reversed second argument
        else:
            new.append(relayout(x, layout_name(a)))
    return new


def build(src):
    namespace = {"np": np}
    exec(compile(src, "<generated>", "exec"), namespace)
    return namespace["prog"]


def describe(args) -> str:
    lines = []
    for i, (n, a) in enumerate(zip(INPUT_NAMES, args)):
        first = next((INPUT_NAMES[j] for j in range(i) if np.shares_memory(a, args[j])), None)
        if first is not None:
            lines.append(f"{n} = {first}" if a is args[INPUT_NAMES.index(first)]
                         else f"{n} = {first}[..., ::-1]")
        else:
            how = layout_name(a)
            text = f"np.array({a.tolist()!r}, dtype=np.{a.dtype})"
            lines.append(f"{n} = " + (f"relayout({text}, {how!r})" if how != "C" else text)
                         + f"  # shape {a.shape}"
                         + ("  (reversed view)" if a.ndim and a.strides[-1] < 0 else ""))
    return "\n".join(lines)


def check_program(src, args, raises, args2=None, level="O0"):
    """The program plain and jitted at `level` (assert_same_outcome: values by the level's
    comparison, warnings, exceptions with their messages, aliasing, written inputs), and how
    it ran: one graph with no break, writes into arrays included; a program that raises
    breaks where its raising op would run, naming NumPy's exception."""
    fn = build(src)
    config = {"jit_config": {"jit_level": level}}
    plain_args = clone(list(args))
    want = run_plain(fn, plain_args, {})
    where = f"\n--- program ---\n{src}{describe(args)}\n"
    assert raises == (want.exc is not None), f"the generator expected raises={raises}, " \
                                             f"plain Python gave {want.exc!r}{where}"
    if want.exc is not None:
        inputs = inputs_tol(fn, args, level) if _inputs_defined(want) else None
        jitted = pijit.jit(fn, **config)
        pijit.reset(jitted)
        for call in range(2):
            got_args = clone(list(args))
            got = run_observed(jitted, got_args, {})
            try:
                assert_same_outcome(got, want, got_args, plain_args, f"call {call + 1}",
                                    inputs=inputs)
            except AssertionError as e:
                raise AssertionError(f"{e}{where}") from None
        report = explain_report(fn.__code__)
        assert report.fallback is None, f"fell back to plain Python: {report}{where}"
        name = type(want.exc).__name__
        if any(f"would raise {name}" in b["reason"] for b in report.break_reasons):
            # known at capture (shapes, axes, constants): a break before the op, which
            # then raises as plain Python
            assert report.graph_break_count == 1, f"{report}{where}"
            return "raised at a break"
        # known at run time only (the data): the graph raises it, at the program's line
        assert report.graph_break_count == 0, f"{report}{where}"
        frame = traceback.extract_tb(got.exc.__traceback__)[-1]
        assert frame.filename == "<generated>" and 1 < frame.lineno < src.count("\n"), \
            f"raised at {frame.filename}:{frame.lineno}{where}"
        return "raised in a graph"
    try:
        assert_same(fn, *args, graphs=1, breaks=0, jit_kwargs=config)
        if args2 is not None:
            check_other_values(fn, args2, config)
    except AssertionError as e:
        if level != "O0" and "bits differ" in str(e) and _only_nan_bits_differ(fn, args, config) \
                and (args2 is None or _only_nan_bits_differ(fn, args2, config)):
            report = explain_report(fn.__code__)
            assert (report.graph_count, report.graph_break_count) == (1, 0), f"{report}{where}"
            return "NaN bits: the README's two-NaN exception"
        raise AssertionError(f"{e}{where}--- second inputs ---\n{describe(args2 or [])}") \
            from None
    return "ok"



def _canonical_nans(value):
    """`value` with every float NaN the same NaN (containers item by item)."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "fc":
        return np.where(np.isnan(value), np.array(np.nan, value.dtype), value)
    if isinstance(value, (np.floating, float)) and math.isnan(value):
        return type(value)(math.nan)
    if isinstance(value, (list, tuple)):
        return type(value)(_canonical_nans(v) for v in value)
    return value


def _only_nan_bits_differ(fn, args, config) -> bool:
    """The README's one known exception at O1 and O2 ("O2 error bounds"): where two NaNs of
    different bits meet in one fused add or multiply, the NaN that comes out is the one gcc
    put first (NumPy's is not fixed either), so a random program cannot pin it: True when
    plain and jitted results and written inputs agree once every NaN is the same NaN. A NaN
    whose sign a single operand decides stays pinned (test_rule_edges' strict xfail)."""
    plain_args, got_args = clone(list(args)), clone(list(args))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = fn(*plain_args)
        got = pijit.jit(fn, **config)(*got_args)
    return not mismatch(_canonical_nans(got), _canonical_nans(want)) and \
        not mismatch(_canonical_nans(got_args), _canonical_nans(plain_args), path="inputs")

def check_other_values(fn, args2, config):
    """Same shapes and dtypes, other values: a cache hit (values are not guarded) that
    still equals plain Python."""
    jitted = pijit.jit(fn, **config)
    before = pijit.stats(jitted)
    plain_args = clone(list(args2))
    want = run_plain(fn, plain_args, {})
    got_args = clone(list(args2))
    got = run_observed(jitted, got_args, {})
    after = pijit.stats(jitted)
    assert after["compile_count"] == before["compile_count"], \
        f"new values recompiled: {after['recompile_reasons']}"
    assert after["cache_hits"] > before["cache_hits"]
    level = config["jit_config"]["jit_level"]
    tol, scale = level_tol(fn, args2, level) if want.exc is None else (EXACT, None)
    inputs = inputs_tol(fn, args2, level) if _inputs_defined(want) else None
    assert_same_outcome(got, want, got_args, plain_args, "second inputs", tol, scale, inputs)


def _inputs_defined(want) -> bool:
    """Whether plain Python's failed call left the inputs defined. An integer power that
    meets a negative exponent raises after NumPy has copied its cast buffer, never written,
    back into the output (`a **= c`, a int8, c an int16 0-d array): plain Python left -32 there
    in one process and -23 in another, so there is nothing to compare."""
    return not (isinstance(want.exc, ValueError)
                and str(want.exc) == "Integers to negative integer powers are not allowed.")


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.data_too_large])
@given(programs())
def test_random_program(program):
    _straight_line_test(program, "O0")


# The same programs through the fused C backend (O1 is bit-identical to NumPy); fewer, since
# each new graph is a gcc compile.
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.data_too_large])
@given(programs())
# NumPy's max of one -nan is that -nan (the kernel gave the default +nan)
@example(("def prog(a):\n    t0 = 0.5 % a\n    t1 = t0.max(keepdims=True)\n    return t1\n",
          [np.array([False])], False, [np.array([False])], 0))
# A -nan and a +nan meet in one multiply (a * -(0 + a) with a NaN): the README's two-NaN
# exception, accepted only with every other bit equal (found by a fresh-clone CI run)
@example(("def prog(a):\n    t0 = 0 + a\n    t1 = -t0\n    t2 = np.multiply(a, t1)\n"
          "    a[...] = 0\n    return t2\n",
          [np.array([[0.0], [0.0], [0.0]], np.float32)], False,
          [np.array([[0.0], [0.0], [np.nan]], np.float32)], 1))
def test_random_program_fused(program):
    _straight_line_test(program, "O1")


# And at O2, compared within the bounds o2_spec.carry derives for each program.
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.data_too_large])
@given(programs())
# An in-place add of an int64 sum into an int8 0-d array wraps, as NumPy's out= casts.
@example(("def prog(a):\n    t3 = a.sum(keepdims=True)\n    a += t3\n    return t3\n",
          [np.array(-128, np.int8)], False, [np.array(-128, np.int8)], 1))
# A bool array takes a (1,) value into one element: the bounds' float64 errors must too.
@example(("def prog(a):\n    t0 = a.astype(np.bool_)\n    t0[0] = a\n    return t0\n",
          [np.array([False])], False, [np.array([False])], 1))
# A float -> int cast whose value gcc folded away (t0 - t0) took its invalid-value warning along.
@example(("def prog(a, b, c):\n    t0 = a.astype(np.int8)\n    t1 = t0 - t0\n    a[...] = 0\n"
          "    a[...] = 0\n    return t1\n",
          [np.array([0.0, 0.0], np.float32), np.array([0.0, 0.0], np.float32), np.array(False)],
          False,
          [np.array([0.0, np.nan], np.float32), np.array([0.0, 0.0], np.float32),
           np.array(False)], 2))
# The integer power raises on a negative exponent and leaves `a` undefined (_inputs_defined);
# the exception itself must still match (found by a fresh-clone CI run on 3.12).
@example(("def prog(a, b, c):\n    a[...] = 0\n    a **= c\n    return a[0]\n",
          [np.array([0], np.int8), np.array(0, np.int8), np.array(0, np.int16)], False,
          [np.array([0], np.int8), np.array(0, np.int8), np.array(-32768, np.int16)], 3))
def test_random_program_o2(program):
    _straight_line_test(program, "O2")


def _straight_line_test(program, level):
    src, args, raises, args2, writes = program
    note(src)
    note(describe(args))
    note("second inputs:\n" + describe(args2))
    event(check_program(src, args, raises, args2, level))
    event(f"{src.count(chr(10)) - 2} statements")
    event(f"{writes} writes")


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
    assert check_program(bad, [np.arange(3)], True) == "raised in a graph"
    bad = "def prog(a):\n    t0 = a * 2\n    t1 = t0.reshape(7)\n    return t1\n"
    assert check_program(bad, [np.arange(3)], True) == "raised at a break"


def test_generated_code_has_generated_filename():
    fn = build("def prog(a):\n    t0 = a + 1\n    return t0\n")
    assert fn.__code__.co_filename == "<generated>"
    jitted = pijit.jit(fn)
    assert_equal_values(jitted(np.ones(2)), np.full(2, 2.0))
    report = pijit.explain(jitted, np.ones(2))
    assert report.graph_count == 1 and report.fallback is None


# == programs with control flow, calls and side effects ==========================================
# A second generator: programs over two same-shape float arrays `a`, `b`, a Python int `n`, a
# bool `flag` and a list `out`, with `if` on the scalars (pruned) and on array data (a break),
# `for` loops (short: unrolled; long or with a breaking body: residual), data-dependent `while`
# loops with an iteration cap, calls of the module-level helpers below (inlined; some break),
# prints, unsupported calls, list appends, in-place updates of the inputs and early returns.
# Plain Python is the reference; graph counts are not predicted, only invariants of
# `explain` checked (see check_cf_program).
CF_FILENAME = "<generated-cf>"
CF_HELPERS = '''\
def h_affine(u, v):
    return u * 0.5 + v


def h_scaled(u, k):
    if k > 1:
        return u * k
    return u - k


def h_nested(u, v):
    return h_affine(h_scaled(u, 2), v)


def h_print(u):
    print("h_print", u.shape)
    return u + 1


def h_data(u):
    if u.mean() > 0:
        return u * 2
    return u - 1


def h_late_print(u, v):
    w = u * v
    print("h_late_print", float(w.sum()))
    return w - 1

'''
CF_PURE_HELPERS = ("h_affine({x}, {y})", "h_scaled({x}, n)", "h_scaled({x}, 3)",
                   "h_nested({x}, {y})")
CF_BREAKING_HELPERS = ("h_print({x})", "h_data({x})", "h_late_print({x}, {y})")
CF_FLAVORS = {
    # statement kind -> weight
    "mixed": {"assign": 6, "if_scalar": 3, "if_data": 2, "for_small": 3, "for_long": 1,
              "for_list": 1, "while_data": 1, "print": 2, "unsupported": 1, "append": 1,
              "inplace": 1, "return": 1, "error": 0},
    "loops": {"assign": 4, "if_scalar": 1, "if_data": 1, "for_small": 5, "for_long": 2,
              "for_list": 3, "while_data": 3, "print": 1, "unsupported": 0, "append": 1,
              "inplace": 1, "return": 2, "error": 0},
    "calls": {"assign": 5, "if_scalar": 2, "if_data": 1, "for_small": 1, "for_long": 0,
              "for_list": 0, "while_data": 0, "print": 2, "unsupported": 2, "append": 2,
              "inplace": 2, "return": 1, "error": 1},
    # no construct that must break: exactly one graph, no break
    "pure": {"assign": 6, "if_scalar": 3, "if_data": 0, "for_small": 3, "for_long": 0,
             "for_list": 2, "while_data": 0, "print": 0, "unsupported": 0, "append": 0,
             "inplace": 0, "return": 1, "error": 0},
}
CF_BREAKING_KINDS = {"if_data", "for_long", "while_data", "print", "unsupported", "append",
                     "inplace", "error"}


@st.composite
def cf_programs(draw, flavor="mixed"):
    """(source, args, breaking, args2): `prog(a, b, n, flag, out)` with nested blocks."""
    weights = CF_FLAVORS[flavor]
    kinds = [k for k, w in weights.items() for _ in range(w)]
    pure = flavor == "pure"
    st_ = {"temps": [], "breaking": False, "uid": 0}

    def uid():
        st_["uid"] += 1
        return st_["uid"]

    def pick(names):
        return names[-1] if draw(st.booleans()) else draw(st.sampled_from(names))

    def scalar(scalars):
        return draw(st.sampled_from(["0.5", "2", "-1.5", "n", "3"] + list(scalars)))

    def expr(readable, scalars):
        x, y = pick(readable), pick(readable)
        choice = draw(st.integers(0, 10))
        if choice == 0:
            return f"{x} {draw(st.sampled_from(['+', '-', '*']))} {y}"
        if choice == 1:
            return f"{x} * {scalar(scalars)} + {y}"
        if choice == 2:
            return f"np.tanh({x})"
        if choice == 3:
            return f"np.abs({x}) + {scalar(scalars)}"
        if choice == 4:
            return f"{x}.clip(-4, 4)"
        if choice == 5:
            return f"np.maximum({x}, {y})"
        if choice == 6:
            return f"{x}[::-1]"                                  # a view: aliasing matters
        if choice == 7:
            return f"{x} - {x}.mean()"
        if choice in (8, 9) or pure:
            return draw(st.sampled_from(CF_PURE_HELPERS)).format(x=x, y=y)
        st_["breaking"] = True
        return draw(st.sampled_from(CF_BREAKING_HELPERS)).format(x=x, y=y)

    def block(indent, readable, scalars, depth, max_len, in_loop, top, can_return=False):
        """Lines of a block. Returns (lines, returned) - returned: ends with `return`.
        `return` only ends if/else blocks (a loop body that always returns is a plain `if`)."""
        pad = "    " * indent
        lines = []
        for _ in range(draw(st.integers(1, max_len))):
            kind = draw(st.sampled_from(kinds))
            if depth >= 2 and kind in ("if_scalar", "if_data", "for_small", "for_long",
                                       "for_list", "while_data"):
                kind = "assign"
            if kind in ("for_long", "while_data") and in_loop:
                kind = "assign"
            if kind == "return" and not can_return:
                kind = "assign"
            if kind in CF_BREAKING_KINDS:
                st_["breaking"] = True
            temps = st_["temps"]
            if kind == "assign" or not temps:
                e = expr(readable, scalars)
                if top or not temps:
                    # only top-level statements define names, so every name is bound on
                    # every path
                    target = f"t{len(temps)}"
                    temps.append(target)
                    readable = readable + [target]
                else:
                    target = draw(st.sampled_from(temps))
                lines.append(f"{pad}{target} = {e}")
                continue
            t = draw(st.sampled_from(temps))
            x = pick(readable)
            if kind in ("if_scalar", "if_data"):
                if kind == "if_scalar":
                    cond = draw(st.sampled_from(["n > 1", "n == 0", "flag", "not flag",
                                                 "n % 2 == 1 and flag"] +
                                                [f"{s} >= 1" for s in scalars]))
                else:
                    cond = draw(st.sampled_from([f"{x}.sum() > 0", f"{x}.max() < 1.5",
                                                 f"({x} > 0).any()", f"{x}.mean() > {t}.min()"]))
                lines.append(f"{pad}if {cond}:")
                body, ret = block(indent + 1, readable, scalars, depth + 1, 3, in_loop, False,
                                  True)
                lines += body
                if draw(st.booleans()):
                    lines.append(f"{pad}else:")
                    body, ret2 = block(indent + 1, readable, scalars, depth + 1, 2, in_loop,
                                       False, True)
                    lines += body
                    if ret and ret2:
                        return lines, True
                continue
            if kind == "for_small":
                var = f"i{uid()}"
                k = draw(st.integers(0, 3 if depth == 0 else 2))
                lines.append(f"{pad}for {var} in range({k}):")
                body, _ = block(indent + 1, readable, scalars + [var], depth + 1, 3, True, False)
                lines += body
                continue
            if kind == "for_long":
                var = f"i{uid()}"
                k = draw(st.integers(101, 130))
                lines.append(f"{pad}for {var} in range({k}):")
                lines.append(f"{pad}    {t} = {t} * 0.99 + {var} * 0.001")
                continue
            if kind == "for_list":
                k = uid()
                var, jvar = f"u{k}", f"j{k}"
                items = f"[{x}, {pick(readable)}]"
                enum = draw(st.booleans())
                lines.append(f"{pad}for {jvar}, {var} in enumerate({items}):" if enum
                             else f"{pad}for {var} in {items}:")
                body, _ = block(indent + 1, readable + [var], scalars + ([jvar] if enum else []),
                                depth + 1, 2, True, False)
                lines += body
                continue
            if kind == "while_data":
                w = f"w{uid()}"
                bound = draw(st.sampled_from(["0.5", "1.0", "2.5"]))
                lines += [f"{pad}{w} = 0",
                          f"{pad}while np.abs({t}).max() > {bound} and {w} < 30:",
                          f"{pad}    {t} = {t} * 0.5",
                          f"{pad}    {w} += 1"]
                continue
            if kind == "print":
                lines.append(pad + draw(st.sampled_from([
                    f'print("p", {x}.shape)',
                    f'print("sum", float({x}.sum()))',
                    f'print(f"max={{{x}.max():.4f}} n={{n}}")',
                    f'print("s", {draw(st.sampled_from(scalars or ["n"]))})'])))
                continue
            if kind == "unsupported":
                lines.append(pad + draw(st.sampled_from([
                    f"{t} = {t} + len(str({x}))",
                    f"{t} = {t} * len(repr({x}.shape))",
                    f"{t} = {t} - float(str(float({x}.max()))[:3] == 'nan')"])))
                continue
            if kind == "append":
                lines.append(pad + draw(st.sampled_from([
                    f"out.append({x})", f"out.append(float({x}.sum()))",
                    f"out.append({x} * 2)"])))
                continue
            if kind == "inplace":
                target = draw(st.sampled_from(["a", "b"]))
                lines.append(pad + draw(st.sampled_from([
                    f"{target} += {x}", f"{target} *= 0.5", f"{target}[0] = {x}[-1]",
                    f"{target}[0] = 1.25"])))
                continue
            if kind == "error":
                lines.append(pad + draw(st.sampled_from([
                    f"{t} = {t} * (10 // n)",                   # ZeroDivisionError if n == 0
                    f"{t} = {t}[np.array([0, 9])]",             # IndexError (shape[0] <= 4)
                    f"{t} = {t} + np.ones(7)"])))               # broadcast ValueError
                continue
            # return: inside a branch or loop only; the block ends there
            vals = draw(st.lists(st.sampled_from(readable), min_size=1, max_size=2))
            lines.append(f"{pad}return {', '.join(vals)}")
            return lines, True
        return lines, False

    # a and b are used as read-only inputs of expressions; in-place updates are statements
    body, _ = block(1, ["a", "b"], [], 0, draw(st.integers(1, 7)), False, True)
    temps = st_["temps"]
    body.append(f"    return {', '.join(temps + ['n'])}")
    src = CF_HELPERS + "\ndef prog(a, b, n, flag, out):\n" + "\n".join(body) + "\n"

    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=2)))
    dtype = np.dtype(draw(st.sampled_from(["float64", "float64", "float32"])))
    floats = st.floats(-5, 5, width=dtype.itemsize * 8, allow_subnormal=False)

    def arrays():
        return draw(hnp.arrays(dtype, shape, elements=floats))
    args = [arrays(), arrays(), draw(st.integers(0, 3)), draw(st.booleans()),
            draw(st.sampled_from([[], [1.0]]))]
    args2 = [arrays(), arrays()] + args[2:]
    return src, args, st_["breaking"], args2


def cf_build(src):
    namespace = {"np": np}
    exec(compile(src, CF_FILENAME, "exec"), namespace)
    return namespace["prog"]


def _cf_run_and_compare(fn, jitted, args, where):
    plain_args, _ = clone((list(args), {}))
    want = run_plain(fn, plain_args, {})
    jit_args, _ = clone((list(args), {}))
    got = run_observed(jitted, jit_args, {})
    assert_same_outcome(got, want, jit_args, plain_args, where)
    return want.out, want.exc


def check_cf_program(src, args, breaking, args2=None, level="O0"):
    fn = cf_build(src)
    nlines = src.count("\n")
    jitted = pijit.jit(fn, jit_config={"jit_level": level})
    pijit.reset(jitted)
    try:
        printed, exc = "", None
        for call in range(2):
            printed, exc = _cf_run_and_compare(fn, jitted, args, f"call {call + 1}")
        report = explain_report(fn.__code__)
        assert report.fallback is None, \
            f"fell back to plain Python: {report.fallback}"
        for brk in report.break_reasons:
            assert brk["filename"] == CF_FILENAME, f"break outside the program: {brk}"
            assert 1 <= brk["lineno"] <= nlines, f"break line outside the program: {brk}"
        if not breaking:
            assert (report.graph_count, report.graph_break_count) == (1, 0), \
                f"a program without breaking constructs: {report}"
        if printed:
            assert report.graph_break_count >= 1, f"printed without a break: {report}"
        if report.graph_count:
            assert pijit.stats(jitted)["cache_hits"] >= 1, pijit.stats(jitted)
        if args2 is not None:      # other data: other branches, same jitted function
            _cf_run_and_compare(fn, jitted, args2, "second inputs")
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- program ---\n{src}\nargs = {args!r}\n"
                             f"args2 = {args2!r}") from None
    if report.fallback is not None:
        return "known fallback"
    if exc is not None:
        return f"raised {type(exc).__name__}"
    return f"graphs={min(report.graph_count, 5)} breaks={min(report.graph_break_count, 5)}"


CF_SETTINGS = dict(deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])


def _cf_test(program, level="O0"):
    src, args, breaking, args2 = program
    note(src)
    note(f"args = {args!r}\nargs2 = {args2!r}")
    event(check_cf_program(src, args, breaking, args2, level))


@settings(max_examples=600, **CF_SETTINGS)
@given(cf_programs("mixed"))
def test_random_control_flow_program(program):
    _cf_test(program)


@settings(max_examples=60, **CF_SETTINGS)
@given(cf_programs("mixed"))
def test_random_control_flow_program_fused(program):
    _cf_test(program, "O1")


@settings(max_examples=350, **CF_SETTINGS)
@given(cf_programs("loops"))
def test_random_loop_program(program):
    _cf_test(program)


@settings(max_examples=350, **CF_SETTINGS)
@given(cf_programs("calls"))
def test_random_call_program(program):
    _cf_test(program)


@settings(max_examples=300, **CF_SETTINGS)
@given(cf_programs("pure"))
def test_random_unbroken_control_flow_program(program):
    """No construct that must break: one graph, no break, whatever the branches and loops."""
    src, args, breaking, args2 = program
    assert not breaking
    _cf_test(program)


def test_cf_generator_spot_checks():
    src = CF_HELPERS + ("\ndef prog(a, b, n, flag, out):\n"
                        "    t0 = a * 2 + b\n"
                        "    if n > 1:\n"
                        "        t0 = h_scaled(t0, n)\n"
                        "    for i1 in range(3):\n"
                        "        t0 = t0 + i1\n"
                        "    return t0, n\n")
    args = [np.ones(3), np.arange(3.0), 2, True, []]
    assert check_cf_program(src, args, False) == "graphs=1 breaks=0"
    src = CF_HELPERS + ("\ndef prog(a, b, n, flag, out):\n"
                        "    t0 = h_print(a)\n"
                        "    if t0.sum() > 0:\n"
                        "        out.append(t0)\n"
                        "        return t0\n"
                        "    a += 1\n"
                        "    return t0, n\n")
    for sign in (1.0, -1.0):
        check_cf_program(src, [np.ones(3) * sign, np.ones(3), 0, False, []], True,
                         [np.ones(3) * -sign, np.ones(3), 0, False, []])
