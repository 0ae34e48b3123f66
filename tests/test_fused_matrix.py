"""Differential test matrix of the fused C backend (issue 5): op x dtype x layout x level.

The cases are generated from the fusion op tables in pijit/graph/fuse.py (every entry of
`_EW` and `_REDUCE`, with each of its callables), so an op added to a table is tested here
without editing this file (a callable it cannot spell fails `test_op_table_is_covered`).
Each case runs plain and jitted and is compared by differential.mismatch: the same type,
dtype, shape, layout and writeability, and values bit for bit (NaNs by class, -0.0 distinct
from 0.0) at O1; at O2 within the bound tests/o2_spec.py derives for the op (bit for bit
where it has none).

The matrix (test ids: family-config-level-callable[variant]-aspect):
- E: every op instance (op x callable x argument variant) on 2-D operands of bool, int8,
  uint64, float32, float64, and a core of the op codes on the other integer dtypes; layouts
  C, F (transposed), sliced with steps, reversed (negative strides), unaligned, and operands
  of different layouts; random values of the op's domain ("kernel" aspect), then ("edge"
  aspect) every pair of edge values (NaN, +-inf, -0.0, subnormals, float max, sqrt(max) * 2,
  0.1 and 2**24 rounded to the dtype, integer min/max) under np.errstate(all="ignore"), the
  pairs NumPy computes without a floating-point error (these must run in the kernel, not its
  NumPy fallback), and per op the values on which it raises: np.errstate(all="raise") must
  raise the same FloatingPointError, all="warn" give the same warnings;
- M: mixed operands (NEP 50): float32 with float64, a Python float on either side (swept over
  edge values), a NumPy float64 scalar, a float64 0-d array; bool with float32 and a Python
  int; ints with floats and Python floats; uint64 with int64, int16 with uint16; Python ints
  out of an integer array's range (Python scalars are graph inputs here: specialize_scalar
  off);
- C: constants folded into the graph (NaN, -0.0, inf, 0.1, 1e300, 2**24 + 1, True, -3, 300,
  np.float64(0.1), np.float32(0.1)) on either side;
- BS: broadcasts (row, column, 0-d array, column x row) and shapes 1-D, 3-D, 0-d, (0,) and
  (3, 0), in every layout;
- F: multiply-adds (x*y + z, z - x*y, ...), which O2 contracts into fused multiply-adds;
- R: every reduction callable, axis None / last / another axis / a tuple of all axes,
  keepdims True and False, on float64 and float32 (rows longer than a summation block, a
  1-D array past the size where kernels release the GIL), 3-D and empty arrays, int8, int64,
  uint32 and bool, with edge values, signed zeros and float32 overflow.

How a case ran is asserted too: where the backend fuses the dtype/op today (expect_fused: a
lower bound), the cell's result must come out of a fused group of the compiled graph, and on
data without floating-point errors the kernel must not hand its group back to NumPy (counted
by wrapping cfused.group_fallback); elsewhere only results are checked.

Levels: every cell runs at O1. O2 adds float features only (libmvec transcendentals, float
reductions, FMA contraction) and renders O1's exact ops the same way, so at O2 the cells run
that O2 changes (inexact ops, reductions, multiply-adds), plus add and where on float and
bool operands in family E (see at_level).

Compile cost: gcc builds one module per distinct C source (~0.3 s each, plus ~0.05 s per op;
cached on disk and in the process), and the source depends on dtypes, ndim and static shapes
but not on strides, data or which callable spelled an op. So the cells of a family are one
generated function per level, its ops chained on shared operands so that the ops of a chain
fuse into one group (see Chain), compiled once and then called on every layout and data set;
the callables of an op run in further batches with the same C source.

`python tests/test_fused_matrix.py` measures the errors of the inexact ops, sums and
multiply-adds over many random inputs (how far inside o2_spec's bounds they stay).
"""
from __future__ import annotations

import builtins
import math
import operator
import re
import traceback
import warnings
import zlib
from dataclasses import dataclass, field

import numpy as np
import pytest

import o2_spec
import pijit
import pijit.backends.cfused as cfused
from differential import mismatch
from o2_spec import EXACT, Scaled
from pijit import cache, eval_frame
from pijit.graph import fuse

LEVELS = ("O1", "O2")


# Tolerances: tests/o2_spec.py, the one place O2's bounds are derived (O1: bit for bit).
EXACT_EXPONENTS = o2_spec.EXACT_EXPONENTS


def tol_key(op: str, exponent=None) -> str:
    """The op's name, or pow_exact for the exponents NumPy and the kernels compute exactly."""
    if op in ("pow", "power") and isinstance(exponent, (int, float)) \
            and exponent in EXACT_EXPONENTS:
        return "pow_exact"
    return op


def tolerance(op: str, level: str, exponent=None):
    """The tolerance of an op at a level (o2_spec.tolerance)."""
    return o2_spec.tolerance(op, level, exponent)


# =============================================================================================
# What the cfused backend fuses today: a lower bound, asserted where it applies (the backend
# may fuse more; then only results are checked until this is widened).
# =============================================================================================
EXACT_OPS = ("add", "sub", "mul", "div", "neg", "pos", "lt", "le", "gt", "ge", "eq", "ne",
             "and", "or", "xor", "invert", "sqrt", "abs", "square", "maximum", "minimum",
             "where", "clip", "astype", "pow_exact", "fma")
# O1 computes these by NumPy's own loops, O2 by libmvec (the ops of fuse.LIBMVEC_235 where
# glibc has them)
NUMPY_LOOP_OPS = ("exp", "log", "sin", "cos", "tanh", "pow", "power") + tuple(
    sorted(fuse.LIBMVEC_235 & fuse.INEXACT))
# every level computes these by NumPy's own loops (exact)
NUMPY_ONLY_OPS = tuple(sorted(fuse.NUMPY_ONLY))
FUSED_AT = {**{op: LEVELS for op in EXACT_OPS + NUMPY_LOOP_OPS + NUMPY_ONLY_OPS}}
INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
KERNEL_DTYPES = ("float32", "float64", "bool") + INTS
COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
# Ops a kernel computes, by the kind of the result's dtype (plus where, astype, comparisons).
RESULT_OPS = {
    "f": ("add", "sub", "mul", "div", "neg", "pos", "exp", "log", "sqrt", "sin", "cos", "tanh",
          "abs", "square", "maximum", "minimum", "clip", "pow", "power", "fma") + NUMPY_ONLY_OPS,
    "i": ("add", "sub", "mul", "neg", "pos", "abs", "square", "maximum", "minimum", "clip",
          "pow", "power", "and", "or", "xor", "invert"),
    "b": ("maximum", "minimum", "and", "or", "xor", "invert")}
RESULT_OPS["u"] = RESULT_OPS["i"]


def _dtype(v):
    return v.dtype if isinstance(v, (np.ndarray, np.generic)) else None


def hands_back(inst, level: str, result, layout: str, aspect: str) -> bool:
    """Where a kernel of a reduction hands its group to NumPy on purpose: at every level, a
    result of two or more axes longer than 1 from an operand not in C order (its layout),
    and float max/min whose result has a zero (its sign depends on NumPy's order; edge data
    has zeros, and one such cell hands back the whole group of cells batched with it); at O1
    float sums over outer axes or along rows (NumPy's order is known only for operands in C
    order)."""
    if inst.reduce is None:
        return False
    if layout != "C" and sum(d > 1 for d in np.shape(result)) >= 2:
        return True     # NumPy lays the result out in the operand's order, the kernel in C's
    if np.asarray(result).dtype.kind == "f" and inst.op in ("max", "min") and (
            aspect == "edge" or np.any(np.asarray(result) == 0)):
        return True
    if level != "O1":
        return False
    # (an integer reduction batched into a group with a float one hands back with it)
    return layout != "C" and (inst.reduce[2] == "other" or inst.op in ("sum", "mean"))


def expect_fused(inst, level: str, operands: dict, result, specialized: bool) -> bool:
    """Does the cfused backend fuse `inst` at `level` with these operands today?"""
    if not isinstance(result, (np.ndarray, np.generic)) or str(result.dtype) not in KERNEL_DTYPES:
        return False
    strong = [_dtype(v) for v in operands.values() if _dtype(v) is not None]
    weak = [v for v in operands.values() if _dtype(v) is None]
    for text in inst.args:          # constants in the source (family C)
        if text in CONSTANTS:
            weak.append(CONSTANTS[text])
        elif re.fullmatch(r"np\.\w+\(.*\)", text):
            strong.append(np.dtype(text[3:text.index("(")]))
    if not any(isinstance(v, np.ndarray) for v in operands.values()) or any(
            str(d) not in KERNEL_DTYPES for d in strong):
        return False
    if any(type(v) is int and not specialized for v in weak):
        return False        # Python int graph inputs: not asserted
    if any(type(w) is float and math.isfinite(w) and d.kind == "f"
           and abs(w) > float(np.finfo(d).max) for w in weak for d in strong):
        return False        # NumPy reports the overflow of casting it: left to NumPy
    if inst.reduce is not None:
        x, mode = operands["x"], inst.reduce[2]
        if mode == "other":         # outer axes: row after row in the dtype, like NumPy
            fused = inst.op in ("sum", "mean", "max", "min")
        else:                       # O1 floats: NumPy's pairwise sums copied; max/min
            fused = level == "O2" or x.dtype.kind in "biu" and inst.op in ("sum", "max", "min") \
                or x.dtype.kind == "f" and (inst.op in ("max", "min") or (
                    inst.op in ("sum", "mean") and (mode == "last" and x.ndim >= 2
                                                    or mode == "all")
                    and result.dtype == x.dtype))
        return fused and x.ndim >= 1 and not (
            inst.op in ("max", "min") and x.size == 0) and result.dtype.kind in "fiub"
    if level not in FUSED_AT.get(inst.key, ()):
        return False
    if inst.op in COMPARE_OPS:      # only like against like (NumPy's mixed rules aside)
        return len(set(strong)) == 1 and all(
            type(w) is float and strong[0].kind == "f" or type(w) is int and strong[0].kind
            in "iu" and np.iinfo(strong[0]).min <= w <= np.iinfo(strong[0]).max for w in weak)
    if inst.op not in ("where", "astype") and inst.op not in RESULT_OPS[result.dtype.kind]:
        return False
    if inst.op == "astype" and strong[0].kind == "f" and result.dtype == np.uint64:
        return False
    if inst.op in ("pow", "power", "clip", "astype") and not isinstance(operands.get("x"),
                                                                      np.ndarray):
        return False
    if inst.op in ("pow", "power") and (inst.exponent == "array" or result.dtype.kind != "f"
                                        and inst.exponent not in range(9)):
        return False
    if (level == "O1" and inst.key in NUMPY_LOOP_OPS or inst.key in NUMPY_ONLY_OPS) and any(
            d != result.dtype for d in strong):
        return False        # NumPy's loop of the result dtype needs operands of it
    return True


# =============================================================================================
# The op tables, and how to spell each callable in Python source
# =============================================================================================
# operator functions are captured from their syntax (a call of operator.add(a, b) is not).
OPERATOR_SYNTAX = {
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "truediv": "{0} / {1}",
    "floordiv": "{0} // {1}", "mod": "{0} % {1}", "pow": "{0} ** {1}", "matmul": "{0} @ {1}",
    "and_": "{0} & {1}", "or_": "{0} | {1}", "xor": "{0} ^ {1}", "lshift": "{0} << {1}",
    "rshift": "{0} >> {1}", "neg": "-{0}", "pos": "+{0}", "invert": "~{0}", "inv": "~{0}",
    "lt": "{0} < {1}", "le": "{0} <= {1}", "gt": "{0} > {1}", "ge": "{0} >= {1}",
    "eq": "{0} == {1}", "ne": "{0} != {1}",
}


@dataclass(frozen=True)
class Spelling:
    kind: str       # "operator", "np", "ndarray" or "builtins"
    name: str
    fn: object = field(compare=False, repr=False)

    def call(self, args: list, kwargs: str = "") -> str:
        """Source applying the callable to argument texts (kwargs: text like ", axis=1")."""
        if self.kind == "operator":
            return "(" + OPERATOR_SYNTAX[self.name].format(*args) + ")"
        if self.kind == "expr":         # an expression of several ops (name: its template)
            return "(" + self.name.format(*args) + ")"
        if self.kind == "ndarray":
            return f"{args[0]}.{self.name}({', '.join(args[1:])}{kwargs})".replace("(, ", "(")
        prefix = "np." if self.kind == "np" else ""
        return f"{prefix}{self.name}({', '.join(args)}{kwargs})"

    @property
    def label(self) -> str:
        return "fma" if self.kind == "expr" else f"{self.kind}.{self.name}"


def _spellings() -> dict:
    """id(callable) -> Spelling of every callable this file knows how to spell."""
    out = {}
    for name in OPERATOR_SYNTAX:
        fn = getattr(operator, name, None)
        if fn is not None:
            out.setdefault(id(fn), Spelling("operator", name, fn))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in sorted(dir(np)):
            try:
                fn = getattr(np, name)
            except Exception:       # deprecated or removed attributes
                continue
            if name.startswith("_") or not callable(fn) or isinstance(fn, type):
                continue
            if getattr(fn, "__name__", None) == name or id(fn) not in out:
                out[id(fn)] = Spelling("np", name, fn)
    for name in dir(np.ndarray):
        if not name.startswith("_"):
            fn = getattr(np.ndarray, name)
            out.setdefault(id(fn), Spelling("ndarray", name, fn))
    for name in ("abs", "pow", "min", "max", "sum", "round"):
        fn = getattr(builtins, name)
        out.setdefault(id(fn), Spelling("builtins", name, fn))
    return out


SPELLINGS = _spellings()


def _table_ops(table: dict, op_of) -> tuple:
    """({op code: [Spelling, ...]} in table order, [entries this file cannot spell])."""
    ops, missing = {}, []
    for key, value in table.items():
        spelled = SPELLINGS.get(key)
        if spelled is None:
            missing.append(value)
        else:
            ops.setdefault(op_of(value), []).append(spelled)
    return ops, missing


EW_OPS, EW_MISSING = _table_ops(fuse._EW, lambda v: v[0])
EW_ARITY = {v[0]: v[1] for v in fuse._EW.values()}
RED_OPS, RED_MISSING = _table_ops(fuse._REDUCE, lambda v: v)

# Arguments of each op: placeholders {x} {y} {z} (values), {c} (a bool condition), {lo} {hi}
# (clip bounds), {e} (an exponent array), or literal source. Ops not listed: `arity` values.
VARIANTS = {
    "pow": [("e=2", ["{x}", "2"], 2), ("e=-1.0", ["{x}", "-1.0"], -1.0),
            ("e=3.7", ["{x}", "3.7"], 3.7)],
    "power": [("e=0.5", ["{x}", "0.5"], 0.5), ("e=3", ["{x}", "3"], 3),
              ("e=array", ["{x}", "{e}"], "array")],
    "clip": [("bounds=scalars", ["{x}", "-0.5", "0.75"], None),
             ("bounds=arrays", ["{x}", "{lo}", "{hi}"], None),
             ("hi-only", ["{x}", "None", "0.75"], None)],
    "where": [("y=array", ["{c}", "{x}", "{y}"], None), ("y=0.5", ["{c}", "{x}", "0.5"], None)],
    "astype": [("float32", ["{x}", "np.float32"], None), ("float64", ["{x}", "np.float64"], None)],
}


@dataclass(frozen=True)
class Inst:
    """An op code applied through one callable to one variant of its arguments."""
    op: str
    spelling: Spelling
    variant: str
    args: tuple                 # argument texts with placeholders
    exponent: object = None     # pow/power: the exponent, or "array"
    reduce: tuple = None        # reductions: (axis, keepdims, mode "all"/"last"/"other")
    axis_text: str = ""         # reductions: the axis as spelled
    group_op: str = None        # the op code of its result in a fused group, if not `op`

    @property
    def key(self) -> str:
        return tol_key(self.op, self.exponent)

    @property
    def placeholders(self) -> tuple:
        return tuple(dict.fromkeys(re.findall(r"\{(\w+)\}", " ".join(self.args))))

    @property
    def name(self) -> str:
        return self.spelling.label + (f"[{self.variant}]" if self.variant else "")

    def expr(self, names: dict) -> str:
        args = [a.format(**names) for a in self.args]
        if self.reduce is None:
            return self.spelling.call(args)
        return self.spelling.call(args, f", axis={self.axis_text}, keepdims={self.reduce[1]}")


def ew_instances(ops=None, batch: int = 0) -> list:
    """One Inst per (op code, variant) of _EW, in table order. Batch b picks callable
    (b + variant) % n of the op's n callables: batches 0..n-1 cover every callable, and all
    batches render the same C source."""
    out = []
    for op, spellings in EW_OPS.items():
        if ops is not None and op not in ops:
            continue
        default = [("", ["{x}", "{y}", "{z}"][:EW_ARITY[op]], None)]
        for v, (variant, args, exponent) in enumerate(VARIANTS.get(op, default)):
            out.append(Inst(op, spellings[(batch + v) % len(spellings)], variant, tuple(args),
                            exponent))
    return out


# Reduction variants per ndim: (mode label, keepdims, axis spellings by batch). Spellings of
# one mode render the same C source, so they vary across batches for free.
def _axes(nd):
    full = [None, tuple(range(nd)), tuple(range(nd))[::-1]]
    last = [-1, nd - 1, -1]
    return {"all": full, "last": last, "other": [0, -nd, 0]}


RED_VARIANTS = {
    1: [("all", False), ("last", True)],
    2: [("all", False), ("last", True), ("other", False)],
    3: [("last", True), ("other", False)],
}


def red_instances(nd: int, batch: int, variants=None, ops=None) -> list:
    out = []
    for op, spellings in RED_OPS.items():
        if ops is not None and op not in ops:
            continue
        for v, (mode, keep) in enumerate(variants or RED_VARIANTS[nd]):
            axis = _axes(nd)[mode][batch % 3]
            out.append(Inst(op, spellings[(batch + v) % len(spellings)], f"axis={axis},"
                            f"keepdims={keep}".replace(" ", ""), ("{x}",), None,
                            (axis, keep, "all" if nd == 1 else mode), repr(axis)))
    return out


N_EW_BATCHES = max(len(s) for s in EW_OPS.values())
N_RED_BATCHES = max(len(s) for s in RED_OPS.values())


# =============================================================================================
# Operand values and layouts
# =============================================================================================
DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float32", "float64")
FLOATS = ("float32", "float64")
S2 = (20, 21)       # the 2-D iteration shape: not square, rows not a multiple of a vector,
                    # room for every pair of a float dtype's 20 edge values


@dataclass(frozen=True)
class Spec:
    """An operand: an array of dtype and shape, a Python scalar ("py": dtype float/int/bool)
    or a NumPy scalar ("np"); value: a fixed value instead of random ones."""
    kind: str
    dtype: str
    shape: tuple = ()
    value: object = None

    @property
    def label(self) -> str:
        if self.kind == "array":
            return self.dtype + ("" if self.shape == S2 else f"[{','.join(map(str, self.shape))}]")
        return f"{self.kind}:{self.dtype}" + ("" if self.value is None else f"={self.value}")


def A(dtype, shape=S2) -> Spec:
    return Spec("array", dtype, tuple(shape))


def clean(rng, dtype, shape, domain=None):
    """Random values on which NumPy raises no floating-point error."""
    dt = np.dtype({"float": "float64", "int": "int64"}.get(dtype, dtype))
    if dt.kind == "b":
        return np.asarray(rng.random(shape) < 0.5)
    if dt.kind == "f":
        if domain == "unit":        # products of thousands of these stay in range
            v = rng.uniform(0.8, 1.25, shape) * rng.choice([-1.0, 1.0], shape)
        elif domain in ("pos", "small"):
            v = rng.uniform(0.125, 4.0, shape)
        else:
            v = rng.standard_normal(shape) * 2
        return np.asarray(v).astype(dt)
    lo, hi = {"pos": (1, 40), "small": (1, 8)}.get(domain, (-40, 40) if dt.kind == "i"
                                                   else (0, 80))
    v = np.asarray(rng.integers(lo, hi, shape)).astype(dt)
    if domain == "nonzero":
        v[v == 0] = 1
    return v


def value_of(spec: Spec, arr):
    """A clean array as the operand `spec` asks for."""
    if spec.value is not None:
        return spec.value
    if spec.kind == "array":
        return arr
    if spec.kind == "np":
        return np.dtype(spec.dtype).type(arr.reshape(-1)[0])
    return {"float": float, "int": int, "bool": bool}[spec.dtype](arr.reshape(-1)[0])


def edge_values(dtype) -> list:
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return [False, True]
    if dt.kind == "f":
        fi = np.finfo(dt)
        tenth = dt.type(0.1)            # 0.1 and 2**24 + 1 rounded to dtype, and neighbours
        return [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 0.5, -2.5, 3.0, float(fi.max),
                -float(fi.max), float(fi.tiny), float(fi.smallest_subnormal),
                -float(fi.smallest_subnormal), math.sqrt(float(fi.max)) * 2.0, float(tenth),
                float(np.nextafter(tenth, dt.type(1))), 2.0 ** 24, 2.0 ** 24 + 2]
    ii = np.iinfo(dt)
    if dt.kind == "i":
        return [ii.min, ii.min + 1, -2, -1, 0, 1, 2, 7, ii.max - 1, ii.max]
    return [0, 1, 2, 3, 7, ii.max // 2, ii.max // 2 + 1, ii.max - 1, ii.max]


def to_layout(a, layout: str):
    """The same logical array in another memory layout."""
    if not isinstance(a, np.ndarray) or a.ndim == 0:
        return a
    if layout == "C":
        return np.ascontiguousarray(a)
    if layout == "F":
        return np.asfortranarray(a)
    if layout == "sliced":      # a[::2, ..., 1::3] of a bigger array (1-D: [1::3])
        big = [2 * n for n in a.shape[:-1]] + [3 * a.shape[-1] + 1]
        idx = tuple(slice(None, None, 2) for _ in a.shape[:-1]) + (slice(1, None, 3),)
        view = np.zeros(big, a.dtype)[idx]
        view[...] = a
        return view
    if layout == "reversed":    # negative strides on every axis
        rev = (slice(None, None, -1),) * a.ndim
        return np.ascontiguousarray(a[rev])[rev]
    if layout == "unaligned":
        if a.dtype.itemsize == 1:
            return np.ascontiguousarray(a)
        view = np.zeros(a.nbytes + 1, np.uint8)[1:].view(a.dtype).reshape(a.shape)
        view[...] = a
        return view
    raise ValueError(layout)


# Layouts per operand: the first array operand gets the first, the others the second.
LAYOUTS_FULL = [("C", "C"), ("F", "F"), ("sliced", "sliced"), ("reversed", "reversed"),
                ("unaligned", "unaligned"), ("C", "F")]
LAYOUTS_BASIC = [("C", "C"), ("F", "F"), ("sliced", "sliced")]
# Kernels take operands of these layouts without a fallback when all have the same one (they
# iterate in their inputs' memory order; operands of different orders go to NumPy).
KERNEL_LAYOUTS = ("C", "F", "sliced", "reversed")


# =============================================================================================
# Running plain vs jitted, and how the jitted call ran
# =============================================================================================
_kernel_fallbacks: list = []     # texts of the groups whose kernel handed them back to NumPy


def _counting_group_fallback(original):
    def group_fallback(graph, grp, *args, **kwargs):
        fn = original(graph, grp, *args, **kwargs)
        text = str(grp)

        def counted(*a):
            _kernel_fallbacks.append(text)
            return fn(*a)
        return counted
    return group_fallback


@pytest.fixture(autouse=True, scope="module")
def count_kernel_fallbacks():
    """Record each time a kernel hands its group back to NumPy (the backend installs
    cfused.group_fallback(graph, group, ...) as the kernel's fallback)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cfused, "group_fallback", _counting_group_fallback(cfused.group_fallback))
        yield


GROUP_LINE = re.compile(r"/\* (group \d+ \[[^\]]*\] in .*) \*/")
GROUP_OUT = re.compile(r" out \(([^)]*)\)")


@dataclass(frozen=True)
class Group:
    """A fused group as listed in a compiled graph's source (cfused backend)."""
    outs: frozenset         # value numbers the group outputs
    body: str               # its members, e.g. "%2=add; %3=mul -> sum(all)"

    def computes(self, value: int, op: str) -> bool:
        """Does the group compute `value` with `op` (an elementwise node or its reduction)?"""
        return value in self.outs and re.search(rf"(%{value}=(row )?|-> ){op}\b", self.body) \
            is not None

    @classmethod
    def parse(cls, text: str) -> "Group":
        outs = GROUP_OUT.search(text)
        nums = re.findall(r"%(\d+)", outs.group(1)) if outs else []
        return cls(frozenset(map(int, nums)), text.split(":", 1)[1] if ":" in text else text)


def fused_groups(source: str) -> list:
    return [Group.parse(t) for t in GROUP_LINE.findall(source or "")]


@dataclass
class Outcome:
    result: object = None
    exc: BaseException = None
    warnings: list = None


def call(fn, args, errstate="ignore") -> Outcome:
    out = Outcome()
    state = errstate if isinstance(errstate, dict) else {"all": errstate}
    with warnings.catch_warnings(record=True) as caught, np.errstate(**state):
        warnings.simplefilter("always")
        try:
            out.result = fn(*args)
        except Exception as e:      # compared, not swallowed
            out.exc = e
    out.warnings = [(w.category.__name__, str(w.message)) for w in caught]
    return out


def same_exception(got: Outcome, want: Outcome) -> bool:
    return type(got.exc) is type(want.exc) and str(got.exc) == str(want.exc)


@dataclass
class Ran:
    """How one jitted call ran."""
    groups: list            # fused Groups of the compiled graph
    fallbacks: list         # Groups whose kernel handed them back to NumPy in this call
    outputs: list           # value numbers of the graph's outputs, in order
    problem: str = ""       # not served by a compiled graph without breaks

    def value_of(self, k: int, n: int):
        """The graph value of the k-th of n returned results (None if not one value each)."""
        return self.outputs[k] if len(self.outputs) == n else None


def run_jitted(jitted, args, errstate="ignore") -> tuple:
    code = jitted.fn.__code__
    rec = cache.record(code)
    hits, compiles = eval_frame.counters(code)["hits"], rec.compile_count if rec else 0
    _kernel_fallbacks.clear()
    out = call(jitted, args, errstate)
    fallbacks = list(_kernel_fallbacks)
    rec = cache.record(code)
    problem = ""
    served = rec is not None and (eval_frame.counters(code)["hits"] > hits
                                  or rec.compile_count > compiles)
    if not served:
        problem = "the call ran as plain Python (no compiled entry served it)"
    elif rec.eager_fallbacks or any(e.fallback is not None or e.breaks or e.graph is None
                                    for e in rec.entries):
        problem = f"not captured as one graph: {[str(b) for e in rec.entries for b in e.breaks]}" \
                  f" {[str(f) for f in rec.eager_fallbacks]}"
    entry = rec.entries[0] if rec and rec.entries else None
    return out, Ran(fused_groups(entry.graph_source) if entry else [],
                    [Group.parse(t) for t in fallbacks],
                    [r.index for r in entry.graph.outputs] if entry and entry.graph else [],
                    problem)


def _ordered(a: np.ndarray) -> np.ndarray:
    """Floats as integers in value order: adjacent floats differ by 1, -0.0 and 0.0 too."""
    ints = a.view(f"i{a.dtype.itemsize}").astype(np.int64)
    mag = ints & np.int64((1 << (8 * a.dtype.itemsize - 1)) - 1)
    return np.where(ints < 0, -mag - 1, mag)


def ulp_diff(got, want) -> int:
    """Max ulp distance where both are finite."""
    got, want = np.asarray(got), np.asarray(want)
    fin = np.isfinite(got) & np.isfinite(want)
    if not fin.any():
        return 0
    return int(np.max(np.abs(_ordered(got[fin]) - _ordered(want[fin]))))


def compare(got, want, tol, scale=None, count=1) -> str:
    """'' when got matches want (differential.mismatch: type, dtype, shape, layout,
    writeability; values bit for bit, or within an O2 bound), else why not. scale, count: a
    Scaled bound's scale per result element and number of reduced elements."""
    return mismatch(got, want, tol, scale, count)


# =============================================================================================
# Cells, chains and suites
# =============================================================================================
@dataclass(frozen=True)
class Cell:
    """One op instance on operands of given specs, in one configuration of a family."""
    inst: Inst
    specs: tuple            # ((placeholder, Spec), ...)
    config: str             # the configuration's label (part of the test id)

    @property
    def name(self) -> str:
        return self.inst.name

    def probe(self):
        """The cell alone, as a plain function of its placeholders."""
        phs = [ph for ph, _ in self.specs]
        return make_function("probe", phs, [self.inst.expr({p: p for p in phs})])


# Cells of one configuration run in chains: ops on the same operands, which the backend fuses
# into one group (one kernel: ~0.3 s of gcc per group, little per op). Families E and C chain
# ops by how they raise floating-point errors (by_flags), since a kernel that raises one hands
# its whole group back to NumPy: edge values no op of a chain raises on run in the kernel.
# The other families make one chain per configuration.
CHAIN_OF = {**{op: "select" for op in ("lt", "le", "gt", "ge", "eq", "ne", "maximum", "minimum",
                                       "where", "clip", "neg", "pos", "abs", "and", "or", "xor",
                                       "invert")},
            **{op: "arith" for op in ("add", "sub", "mul", "square", "astype")},
            "div": "div", "sqrt": "root", "log": "domain",
            **{op: "math" for op in ("exp", "sin", "cos", "tanh")}}
# Domains of clean random data per chain and operand (NumPy raises no error on them).
DOMAIN = {("domain", "x"): "pos", ("root", "x"): "pos", ("div", "y"): "nonzero",
          ("float", "x"): "small", ("float", "y"): "nonzero"}


def chain_of(inst, dtype: str, by_flags: bool) -> str:
    """The chain of a cell: by how its op raises floating-point errors (by_flags), else one
    chain per configuration; reductions by mode (several reductions share a kernel)."""
    if inst.reduce is not None:     # float sums, products and picks raise different errors
        if np.dtype(dtype).kind in "biu":
            return f"reduce-{inst.reduce[2]}"
        cls = {"sum": "sum", "mean": "sum", "prod": "prod"}.get(inst.op, "pick")
        return f"reduce-{inst.reduce[2]}-{cls}"
    if not by_flags:
        return "all"
    if np.dtype(dtype).kind in "biu":   # integer results raise no floating-point errors
        return "int" if chain_of(inst, "float64", True) in ("select", "arith") else "float"
    if inst.op in ("pow", "power"):
        return {2: "arith", -1: "div", 0.5: "root"}.get(inst.exponent, "domain") \
            if isinstance(inst.exponent, (int, float)) else "domain"
    return CHAIN_OF.get(inst.op, "arith")


@dataclass
class Chain:
    """Cells on shared operands. The first operand with the chain's full shape goes through
    an identity astype (`entry`) that every op reads, so the ops join that node's group."""
    kind: str
    config: str
    cells: list
    specs: dict             # placeholder -> Spec (the union of the cells')
    entry: str = None       # the placeholder read through the astype, if any

    @classmethod
    def of(cls, kind, config, cells):
        specs = {}
        for cell in cells:
            for ph, spec in cell.specs:
                assert specs.setdefault(ph, spec) == spec, (cell, ph)
        arrays = [s.shape for s in specs.values() if s.kind == "array"]
        full = np.broadcast_shapes(*arrays) if arrays else None
        entry = None
        if not kind.startswith("reduce"):
            entry = next((ph for ph in ("x", "y") if ph in specs and specs[ph].kind == "array"
                          and specs[ph].shape == full), None)
        return cls(kind, config, cells, specs, entry)

    def clean_values(self, rng) -> dict:
        out = {}
        for ph, spec in self.specs.items():
            if ph == "e":
                kind = np.dtype(spec.dtype).kind
                v = (rng.integers(0, 4, spec.shape) if kind in "biu" else
                     rng.uniform(-2.0, 3.0, spec.shape)).astype(spec.dtype)
            else:       # Python numbers: positive (ints: in range of any array dtype)
                dom = "pos" if spec.kind == "py" else "unit" if self.kind.endswith(
                    "prod") else None
                v = clean(rng, spec.dtype, spec.shape, DOMAIN.get((self.kind, ph), dom))
            out[ph] = value_of(spec, v)
        x, y = out.get("x"), out.get("y")
        if (isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.shape == y.shape
                and x.dtype == y.dtype and (self.kind, "y") not in DOMAIN):
            y.flat[::5] = x.flat[::5]       # ties, for comparisons and selections
        return out

    def scale(self, cell, values: dict) -> tuple:
        """(scale, count) of a Scaled bound: sum(|x|) of the reduced elements (mean: / count)
        or count * prod(|x|), and the number of reduced elements; |x*y| + |z| of a
        multiply-add."""
        if cell.inst.op == "fma":
            with np.errstate(all="ignore"):
                x, y, z = (np.asarray(values[ph], np.float64) for ph in ("x", "y", "z"))
                return np.abs(x * y) + np.abs(z), 1
        if cell.inst.reduce is None or cell.inst.op not in ("sum", "mean", "prod"):
            return None, 1
        x = np.abs(np.asarray(values["x"], np.float64))
        axis, keep, _ = cell.inst.reduce
        with np.errstate(all="ignore"):
            s = np.sum(x, axis=axis, keepdims=keep)
            count = max(1, x.size // max(1, np.size(s)))
            if cell.inst.op == "mean":
                s = s / count
            elif cell.inst.op == "prod":
                s = np.prod(x, axis=axis, keepdims=keep) * count
        return s, count

    def operands(self, cell, values) -> dict:
        return {ph: values[ph] for ph, _ in cell.specs}


def make_function(name: str, params: list, returns: list, body=(), env=None):
    src = f"def {name}({', '.join(params)}):\n"
    src += "".join(f"    {line}\n" for line in body)
    src += f"    return ({', '.join(returns)},)\n"
    ns = {"np": np, **CONSTANTS, **(env or {})}
    exec(compile(src, f"<fused_matrix:{name}>", "exec"), ns)
    return ns[name]


@dataclass
class Part:
    """One generated function: its chains, plain and jitted."""
    chains: list
    fn: object
    jitted: object
    batch: int

    @property
    def cells(self) -> list:
        return [c for ch in self.chains for c in ch.cells]


# Edge data sets of a suite: (how, number of layouts), see edge_data.
EDGE_GRID = [("grid", 2), ("quiet", 2), ("quiet-nonan", 4)]
EDGE_FILL = [("fill", 2), ("fill-nonan", 4)]
EDGE_ZEROS = EDGE_FILL + [("zeros", 4)]
EDGE_REDUCE = EDGE_ZEROS + [("overflow", 1)]
# Errors the kernels report like NumPy (they hand the group back on these flags); underflow
# is not among them, and NumPy ignores it by default.
RAISE = dict(divide="raise", over="raise", invalid="raise", under="ignore")


class Suite:
    """The cells of a family at one level: clean data in every layout, edge data,
    floating-point errors. Runs once, lazily; failures are kept per (config, cell name,
    aspect) for the test items."""

    def __init__(self, family, level, cells_by_batch, *, layouts=LAYOUTS_FULL, edge=EDGE_FILL,
                 fperr=False, specialize=True, sweep=None, draws=0, env=None,
                 by_flags=False):
        self.family, self.level = family, level
        self.by_flags = by_flags
        self.cells_by_batch = cells_by_batch
        self.layouts, self.edge, self.fperr = layouts, edge, fperr
        self.specialize, self.sweep, self.draws = specialize, sweep, draws
        self.env = env or {}
        self.failures: dict = {}
        self.checked: set = set()     # (config, cell name, aspect) of every check that ended
        self.error = ""               # what stopped the run, if anything did
        self.done = False

    def fail(self, cell, aspect, text):
        expr = cell.inst.expr({ph: ph for ph, _ in cell.specs})
        self.failures.setdefault((cell.config, cell.name, aspect), []).append(f"{expr}: {text}")

    def jit(self, fn):
        return pijit.jit(fn, jit_config={"jit_level": self.level, "limit_graph_count": 64,
                                         "specialize_scalar": self.specialize})

    # -- building ------------------------------------------------------------------------------
    def build(self, rng):
        """Chains per batch (cells NumPy rejects on clean data are set aside), one function
        per batch."""
        self.parts, self.raising = [], []
        for b, cells in self.cells_by_batch.items():
            by_chain: dict = {}
            for cell in cells:
                kind = chain_of(cell.inst, dict(cell.specs)["x"].dtype, self.by_flags)
                by_chain.setdefault((cell.config, kind), []).append(cell)
            chains = []
            for (config, kind), group in by_chain.items():
                chain = Chain.of(kind, config, group)
                values = chain.clean_values(rng)
                keep = []
                for cell in group:
                    want = call(cell.probe(), list(chain.operands(cell, values).values()), RAISE)
                    if isinstance(want.exc, (NameError, SyntaxError, KeyError)):
                        raise want.exc      # a bug of this file, not a NumPy error
                    if want.exc is None or isinstance(want.exc, FloatingPointError):
                        keep.append(cell)       # (floating-point errors: ignored in chains)
                    if want.exc is not None:
                        self.raising.append((cell, chain.operands(cell, values), want))
                if keep:
                    chains.append(Chain.of(kind, config, keep))
            params, body, returns = [], [], []
            for k, chain in enumerate(chains):
                names = {ph: f"{ph}_{k}" for ph in chain.specs}
                params += names.values()
                if chain.entry is not None:
                    spec = chain.specs[chain.entry]
                    body.append(f"t_{k} = {names[chain.entry]}.astype("
                                f"np.{np.dtype(spec.dtype).type.__name__})")
                    names[chain.entry] = f"t_{k}"
                returns += [cell.inst.expr(names) for cell in chain.cells]
            if chains:
                name = re.sub(r"\W", "_", f"{self.family}_{self.level}_{b}")
                fn = make_function(name, params, returns, body, env=self.env)
                self.parts.append(Part(chains, fn, self.jit(fn), b))

    # -- one run -----------------------------------------------------------------------------
    def args_for(self, part, data, layout) -> list:
        """data: {id(chain): {placeholder: value}}; the first array operand of a chain gets
        layout[0], the others layout[1]."""
        args = []
        for chain in part.chains:
            first = True
            for ph in chain.specs:
                v = data[id(chain)][ph]
                if isinstance(v, np.ndarray) and v.ndim:
                    v = to_layout(v, layout[0] if first else layout[1])
                    first = False
                args.append(v)
        return args

    def check(self, part, data, layout, aspect, **how):
        """Plain vs jitted on `data` in `layout` (see _check); the part's cells count as
        checked for `aspect` once it returns."""
        self._check(part, data, layout, aspect, **how)
        self.mark_checked(part.cells, aspect)

    def _check(self, part, data, layout, aspect, *, fused=False, kernel=False,
               errstate="ignore"):
        """Plain vs jitted on `data` in `layout`. fused: assert the cells the backend fuses
        are in fused groups; kernel: assert those exact cells ran in their kernel when plain
        NumPy raises no floating-point error on their chain."""
        args = self.args_for(part, data, layout)
        want = call(part.fn, args, errstate)
        got, ran = run_jitted(part.jitted, args, errstate)
        where = f"layout {layout}, {aspect} data"
        cells = part.cells
        if ran.problem:
            for cell in cells:
                self.fail(cell, aspect, f"{where}: {ran.problem}")
            return
        if want.exc is not None or got.exc is not None:
            if not same_exception(got, want):
                for cell in cells:
                    self.fail(cell, aspect, f"{where}: raised {got.exc!r}, NumPy {want.exc!r}")
            return
        if got.warnings != want.warnings:
            for cell in cells:
                self.fail(cell, aspect, f"{where}: warnings {got.warnings} != NumPy's "
                                        f"{want.warnings}")
        k = 0
        for chain in part.chains:
            values = data[id(chain)]
            quiet = None
            # libmvec may raise spurious flags (exp(inf), sin(huge), ...): then the kernel
            # hands its group back to NumPy, which is correct, so no assertion on such chains
            inexact = any(tolerance(c.inst.op, self.level, c.inst.exponent) != EXACT
                          for c in chain.cells)
            # operands broadcast along some axis: their order is ambiguous, and kernels hand
            # operands of different orders to NumPy, so only C layouts must run in the kernel
            shapes = {s.shape for s in chain.specs.values() if s.kind == "array" and s.shape}
            broadcast = len(shapes) > 1
            for cell in chain.cells:
                g, w = got.result[k], want.result[k]
                value = ran.value_of(k, len(cells))
                k += 1
                tol = tolerance(cell.inst.op, self.level, cell.inst.exponent)
                scale, count = chain.scale(cell, values) if isinstance(tol, Scaled) else (None, 1)
                why = compare(g, w, tol, scale, count)
                if why:
                    self.fail(cell, aspect, f"{where}: {why}")
                operands = chain.operands(cell, values)
                if not (fused or kernel) or not expect_fused(cell.inst, self.level, operands, w,
                                                             self.specialize):
                    continue
                op = cell.inst.group_op or cell.inst.op
                if value is None:
                    self.fail(cell, "kernel", f"{where}: cannot tell the graph value of each "
                                              f"result: outputs {ran.outputs}")
                    continue
                if fused and not any(grp.computes(value, op) for grp in ran.groups):
                    self.fail(cell, "kernel", f"{where}: {op} (%{value}) is not in a fused "
                                              f"group; groups: {[g.body for g in ran.groups]}")
                if (kernel and layout[0] == layout[1] and layout[0] in KERNEL_LAYOUTS
                        and (layout[0] == "C" or not broadcast) and not inexact
                        and not hands_back(cell.inst, self.level, w, layout[0], aspect)
                        and any(value in grp.outs for grp in ran.fallbacks)):
                    if quiet is None:       # does NumPy raise on any op of the chain?
                        quiet = all(call(c.probe(), list(chain.operands(c, values).values()),
                                         RAISE).exc is None for c in chain.cells)
                    if quiet:
                        back = [g.body for g in ran.fallbacks if value in g.outs]
                        self.fail(cell, aspect, f"{where}: the kernel of {op} (%{value}) "
                                                f"handed its group back to NumPy on data "
                                                f"without floating-point errors: {back}")

    def run(self):
        """Runs once (the first item of the suite starts it). Anything escaping a check is
        kept as the suite's error: then every item fails with it (see test_matrix), instead
        of the items after the first passing unchecked."""
        if self.done:
            return
        self.done = True
        try:
            self._run()
        except Exception:       # noqa: BLE001 - reported by every item of the suite
            self.error = traceback.format_exc()

    def mark_checked(self, cells, aspect):
        self.checked.update((cell.config, cell.name, aspect) for cell in cells)

    def _run(self):
        rng = np.random.default_rng(zlib.crc32(f"{self.family} {self.level}".encode()))
        self.build(rng)
        for part in self.parts:
            try:
                self.run_part(part, rng)
            except Exception:   # noqa: BLE001 - fails the part's cells, the others go on
                for cell in part.cells:
                    for aspect in ("kernel", "edge"):
                        self.fail(cell, aspect, f"the check raised:\n{traceback.format_exc()}")
        # cells NumPy rejects (TypeError, ValueError, OverflowError, FloatingPointError on
        # clean data ...): the same error jitted
        for cell, values, want in self.raising:
            got = call(self.jit(cell.probe()), list(values.values()), RAISE)
            if not same_exception(got, want):
                self.fail(cell, "kernel", f"raised {got.exc!r}, NumPy {want.exc!r}")
            # (a cell NumPy rejects on every data set has no edge data of its own)
            self.mark_checked([cell], "kernel")
            if not any(cell in part.cells for part in self.parts):
                self.mark_checked([cell], "edge")

    def run_part(self, part, rng):
        """Every check of one generated function."""
        first = part.batch == 0     # other batches: other callables, first layout only
        clean_data = {id(ch): ch.clean_values(rng) for ch in part.chains}
        edge = {how: {id(ch): edge_data(ch, how) for ch in part.chains}
                for how, _ in self.edge}
        for k, layout in enumerate(self.layouts if first else self.layouts[:1]):
            # one cache entry at a time: its graph numbers the results of the calls
            pijit.reset(part.jitted)
            self.check(part, clean_data, layout, "kernel", fused=True, kernel=True)
            for how, n_layouts in self.edge:
                if k < n_layouts:
                    data = {key: d if d is not None else clean_data[key]
                            for key, d in edge[how].items()}
                    self.check(part, data, layout, "edge", kernel=True)
            if k == 0:
                for _ in range(self.draws if first else 0):
                    more = {id(ch): ch.clean_values(rng) for ch in part.chains}
                    self.check(part, more, layout, "kernel")
                if self.sweep and first:
                    self.run_sweep(part, rng)
                if self.fperr:
                    self.run_fperr(part, clean_data)

    def run_sweep(self, part, rng):
        """Python-float operands (graph inputs when specialize_scalar is off) over edge values."""
        for value in self.sweep:
            data = {}
            for ch in part.chains:
                d = ch.clean_values(rng)
                for ph, spec in ch.specs.items():
                    if spec.kind == "py" and spec.dtype == "float":
                        d[ph] = value
                data[id(ch)] = d
            self.check(part, data, self.layouts[0], "edge", kernel=True)

    def run_fperr(self, part, clean_data):
        """Per cell, edge values on which it alone raises: under np.errstate(all="raise") and
        "warn" the jitted call raises the same FloatingPointError and gives the same warnings.
        Where other ops of the chain raise too, fusion may compute them in another order: then
        the error's type and the set of warnings must match."""
        # clean data on which some op raises (a constant out of float32's range) comes first
        quiet = call(part.fn, self.args_for(part, clean_data, self.layouts[0]), RAISE).exc is None
        for ch in part.chains:
            for k, cell in enumerate(ch.cells):
                bad, strict = edge_data(ch, "raising", k), quiet
                if bad is None:
                    bad, strict = edge_data(ch, "raising-first", k), False
                if bad is None:
                    continue
                data = dict(clean_data)
                data[id(ch)] = bad
                args = self.args_for(part, data, self.layouts[0])
                for errstate in ("raise", "warn"):
                    want = call(part.fn, args, errstate)
                    got, ran = run_jitted(part.jitted, args, errstate)
                    where = f"np.errstate(all={errstate!r})" + ("" if strict else " (loose)")
                    same = (same_exception(got, want) if strict else
                            type(got.exc) is type(want.exc))
                    warned = (got.warnings == want.warnings if strict else
                              sorted(got.warnings) == sorted(want.warnings))
                    if ran.problem:
                        self.fail(cell, "edge", f"{where}: {ran.problem}")
                    elif not same:
                        self.fail(cell, "edge", f"{where}: raised {got.exc!r}, NumPy "
                                                f"{want.exc!r}")
                    elif not warned:
                        self.fail(cell, "edge", f"{where}: warnings {got.warnings} != NumPy's "
                                                f"{want.warnings}")


_edge_cache: dict = {}
_raises: dict = {}


def _chain_key(chain) -> tuple:
    return (chain.kind, tuple((c.inst.op, c.inst.variant) for c in chain.cells),
            tuple(chain.specs.items()))


def edge_data(chain, how: str, k: int = None) -> dict:
    """Edge values for a chain's operands. how: "grid" (every combination of the edge values
    of x and y), "quiet"/"quiet-nonan" (the grid's elements on which no op of the chain makes
    NumPy raise a floating-point error; nonan: nor is an operand NaN), "raising" (those on
    which cell k alone raises),
    "raising-first" (those on which cell k is the first to raise),
    "fill" / "fill-nonan" (each array cycles through its dtype's edge values), "zeros" (floats:
    signed zeros, a row of -0.0) or "overflow" (floats: +-max, or for products big and
    1/big: partial sums and products overflow in float32, not in double). None if no
    element qualifies."""
    key = (_chain_key(chain), how, k)
    if key not in _edge_cache:
        _edge_cache[key] = _edge_data(chain, how, k)
    return _edge_cache[key]


def _edge_data(chain, how, k):
    rng = np.random.default_rng(7)
    values = chain.clean_values(rng)
    arrays = [ph for ph, s in chain.specs.items() if s.kind == "array" and ph not in ("c", "e")]
    if how in ("zeros", "overflow"):
        for ph in arrays:
            spec = chain.specs[ph]
            if np.dtype(spec.dtype).kind != "f":
                continue
            if how == "zeros":
                v = np.where(rng.random(spec.shape) < 0.5, -0.0, 0.0)
                if v.ndim:
                    v[(0,) * (v.ndim - 1)] = -0.0
            elif chain.kind.endswith("prod"):   # partial products overflow, the whole not
                big = math.sqrt(float(np.finfo(spec.dtype).max)) * 4
                v = np.resize([big, big, 1 / big, -1 / big], spec.shape)
            else:
                big = float(np.finfo(spec.dtype).max)
                v = np.resize([big, big, -big, -big], spec.shape)
            values[ph] = np.asarray(v).astype(spec.dtype)
        return values
    if how.startswith("fill"):
        for j, ph in enumerate(arrays):
            spec = chain.specs[ph]
            vals = np.array(edge_values(spec.dtype), spec.dtype)
            if how == "fill-nonan" and vals.dtype.kind == "f":
                vals = vals[~np.isnan(vals)]
            values[ph] = np.resize(np.roll(vals, 5 * j), spec.shape).astype(spec.dtype)
        return values
    main = arrays[:2]
    vals = [np.array(edge_values(chain.specs[ph].dtype), chain.specs[ph].dtype) for ph in main]
    cols = dict(zip(main, (g.ravel() for g in np.meshgrid(*vals, indexing="ij"))))
    n = len(next(iter(cols.values())))
    for ph, spec in chain.specs.items():
        if ph == "c":
            cols[ph] = np.resize([True, False, False], n)
        elif ph == "e":
            e = np.arange(4) if np.dtype(spec.dtype).kind in "biu" else vals[0]
            cols[ph] = np.resize(e, n).astype(spec.dtype)
        elif ph not in cols and spec.kind == "array":   # a third operand: shifted
            cols[ph] = np.roll(cols[main[-1]], 5)
    if how != "grid":
        raises = raise_matrix(chain, cols)
        if how == "raising":        # cell k alone raises
            keep = raises[:, k] & (raises.sum(axis=1) == 1)
        elif how == "raising-first":    # cell k is the first to raise
            keep = raises[:, k] & ~raises[:, :k].any(axis=1)
        else:
            keep = ~raises.any(axis=1)
        if how == "quiet-nonan":
            for c in cols.values():
                if c.dtype.kind == "f":
                    keep &= ~np.isnan(c)
        if not keep.any():
            return None
        cols = {ph: c[keep] for ph, c in cols.items()}
    for ph, c in cols.items():
        spec = chain.specs[ph]
        values[ph] = np.resize(c, spec.shape).astype(spec.dtype)
    return values


def raise_matrix(chain, cols) -> np.ndarray:
    """[element, cell]: does plain NumPy raise computing the cell on the element of the edge
    grid (errstate RAISE, or any other error)?"""
    key = _chain_key(chain)
    hit = _raises.get(key)
    if hit is None:
        phs = list(chain.specs)
        whole = make_function("probe", phs, [c.inst.expr({p: p for p in phs})
                                             for c in chain.cells])
        probes = [(c.probe(), [ph for ph, _ in c.specs]) for c in chain.cells]
        n = len(next(iter(cols.values())))
        hit = np.zeros((n, len(probes)), bool)
        with np.errstate(**RAISE):
            for e in range(n):
                one = {ph: c[e:e + 1] for ph, c in cols.items()}
                try:
                    whole(*[one[ph] for ph in phs])
                    continue
                except Exception:
                    pass
                for j, (fn, cphs) in enumerate(probes):
                    try:
                        fn(*[one[ph] for ph in cphs])
                    except Exception:
                        hit[e, j] = True
        _raises[key] = hit
    return hit


# =============================================================================================
# The families of the matrix
# =============================================================================================
def _specs(inst, x: Spec, y: Spec = None) -> tuple:
    """Operand specs of an instance: x and the other values from x/y, c bool, e like x."""
    out = []
    for ph in inst.placeholders:
        if ph == "c":
            out.append((ph, A("bool", x.shape)))
        elif ph in ("x", "lo", "e"):
            out.append((ph, x))
        else:
            out.append((ph, y or x))
    return tuple(out)


# E: every op instance on 2-D operands of each dtype. Integer kernels cost the most to
# compile, so int8 and uint64 (the narrowest signed, the widest unsigned) take every op and
# the other integers a core of the op codes.
E_CORE = ("add", "mul", "div", "neg", "lt", "maximum", "where", "invert")
E_OPS = {dt: E_CORE if dt in ("uint8", "int16", "uint16", "int32", "int64", "uint32") else None
         for dt in DTYPES}


def _family_e(dtypes):
    cells = {}
    for b in range(N_EW_BATCHES):
        cells[b] = [Cell(i, _specs(i, A(dt)), dt) for dt in dtypes
                    for i in ew_instances(E_OPS[dt], batch=b)]
    return cells


# O2 adds float features to O1 (transcendentals, float reductions, FMA contraction), and
# its exact single ops render like O1's: so at O2 the cells with float results run that O2
# changes (inexact ops, reductions, multiply-adds), plus in family E the O2_SMOKE ops on
# float and bool operands; compile time goes to the differences (see the module docstring).
O2_SMOKE = ("add", "where")
_result_kinds: dict = {}


def at_level(cells_by_batch: dict, level: str, smoke: bool = False) -> dict:
    if level == "O1":
        return cells_by_batch
    out = {}
    for b, cells in cells_by_batch.items():
        out[b] = [c for c in cells if result_kind(c) == "f" and (
            tolerance(c.inst.op, level, c.inst.exponent) != EXACT or c.inst.reduce
            or smoke and c.inst.op in O2_SMOKE and all(np.dtype({"float": "f8", "int": "i8"}.get(
                s.dtype, s.dtype)).kind in "fb" for _, s in c.specs))]
    return out


def result_kind(cell) -> str:
    """The dtype kind of the cell's result on clean data ('' if NumPy raises)."""
    key = (cell.inst.op, cell.inst.variant, cell.specs)
    if key not in _result_kinds:
        chain = Chain.of("probe", cell.config, [cell])
        values = chain.clean_values(np.random.default_rng(0))
        out = call(cell.probe(), list(values.values()))
        _result_kinds[key] = "" if out.exc is not None else np.asarray(out.result[0]).dtype.kind
    return _result_kinds[key]


# M: mixed operand dtypes on a few binary ops (Python floats are graph inputs here, so the
# sweep over edge values does not recompile).
MIXED_OPS = ("add", "lt")
MIXED = [(A("float32"), A("float64")), (A("float32"), Spec("py", "float")),
         (Spec("py", "float"), A("float32")), (A("float32"), Spec("np", "float64")),
         (A("bool"), A("float32")), (A("float32"), A("float64", ())),
         (A("int32"), A("float32")), (A("uint64"), A("int64")), (A("int64"), Spec("py", "float")),
         (A("bool"), Spec("py", "int")), (A("int16"), A("uint16")),
         (Spec("py", "int"), A("uint32")),
         (A("uint8"), Spec("py", "int", value=-3)), (A("int8"), Spec("py", "int", value=300))]
SWEEP = [math.nan, math.inf, -math.inf, -0.0, 0.0, 0.1, 1e300, 3.4028235e38, 5e-324, -2.5]


def _family_m():
    cells = []
    for x, y in MIXED:
        for inst in ew_instances(MIXED_OPS):
            cells.append(Cell(inst, (("x", x), ("y", y)), f"{x.label}+{y.label}"))
    return {0: cells}


# C: constants folded into the graph (globals K_*; np.float64(...) calls fold too).
CONSTANTS = {"K_nan": math.nan, "K_negzero": -0.0, "K_inf": math.inf, "K_tenth": 0.1,
             "K_huge": 1e300, "K_2p24": 2 ** 24 + 1, "K_true": True, "K_neg3": -3, "K_300": 300}
CONST_CASES = [  # (op, args, dtypes)
    ("add", ("{x}", "K_nan"), ("float32",)), ("add", ("{x}", "K_negzero"), ("float32", "float64")),
    ("add", ("{x}", "K_tenth"), ("float32", "float64")), ("add", ("{x}", "K_huge"), ("float32",)),
    ("add", ("{x}", "K_2p24"), ("float32",)), ("add", ("{x}", "K_true"), ("float32",)),
    ("sub", ("K_tenth", "{x}"), ("float32",)), ("div", ("K_inf", "{x}"), ("float32",)),
    ("lt", ("{x}", "K_tenth"), ("float32", "int64", "uint8")),
    ("eq", ("{x}", "K_2p24"), ("float32",)),
    ("gt", ("{x}", "np.float64(0.1)"), ("float32",)),
    ("le", ("np.float32(0.1)", "{x}"), ("float64",)),
    ("where", ("{c}", "{x}", "K_inf"), ("float32",)),
    # Python ints out of an integer array's range: NumPy raises for arithmetic, compares
    ("add", ("{x}", "K_neg3"), ("uint8",)), ("lt", ("{x}", "K_neg3"), ("uint8",)),
    ("eq", ("{x}", "K_300"), ("int8",)), ("mul", ("{x}", "K_300"), ("int16",)),
]


def _family_c():
    cells = []
    for op, args, dtypes in CONST_CASES:
        if op not in EW_OPS:
            continue
        sp = EW_OPS[op][-1 if op in ("lt", "le", "gt", "eq") else 0]
        for dt in dtypes:
            inst = Inst(op, sp, ",".join(a.replace("{", "").replace("}", "") for a in args), args)
            cells.append(Cell(inst, _specs(inst, A(dt)), dt))
    return {0: cells}


# B: broadcasts, and S: shapes; a few ops each.
BROADCAST_OPS = ("add", "maximum")
BROADCASTS = [("float64", S2, S2[-1:]), ("float64", S2, (S2[0], 1)), ("float64", S2, ()),
              ("float64", (S2[0], 1), S2[-1:]), ("float32", S2[-1:], S2)]
SHAPES = [("float64", (37,), ("add", "lt")), ("float64", (3, 4, 9), ("add", "where")),
          ("float64", (), ("add", "lt", "sqrt", "where")), ("float64", (0,), ("add",)),
          ("float64", (3, 0), ("add", "lt")), ("float32", (), ("add", "lt")),
          ("int32", (3, 4, 9), ("add", "lt", "sqrt", "where")),
          ("int64", (), ("add", "lt", "sqrt", "where")), ("bool", (0,), ("add", "lt", "where"))]


def _family_bs():
    cells = []
    for dt, xs, ys in BROADCASTS:
        for inst in ew_instances(BROADCAST_OPS):
            cells.append(Cell(inst, _specs(inst, A(dt, xs), A(dt, ys)),
                              f"{dt}[{','.join(map(str, xs))}]+[{','.join(map(str, ys))}]"))
    for dt, shape, ops in SHAPES:
        for inst in ew_instances(ops):
            if inst.variant not in ("", "y=array"):
                continue
            cells.append(Cell(inst, _specs(inst, A(dt, shape)), A(dt, shape).label))
    return {0: cells}


# F: multiply-adds, which O2 contracts into fused multiply-adds (one rounding, not two).
FMA_FORMS = [("x*y+z", "{0} * {1} + {2}", "add"), ("z+x*y", "{2} + {0} * {1}", "add"),
             ("x*y-z", "{0} * {1} - {2}", "sub"), ("z-x*y", "{2} - {0} * {1}", "sub")]


def _family_f():
    cells = []
    for dt in FLOATS:
        for variant, template, group_op in FMA_FORMS:
            inst = Inst("fma", Spelling("expr", template, None), variant, ("{x}", "{y}", "{z}"),
                        group_op=group_op)
            cells.append(Cell(inst, (("x", A(dt)), ("y", A(dt)), ("z", A(dt))), dt))
    return {0: cells}


# R: reductions.
RED_CONFIGS = [  # (dtype, shape, variants (None: RED_VARIANTS), ops (None: every op))
    ("float64", S2, None, None), ("int8", S2, None, None),
    ("float32", (6, 300), [("all", True), ("last", False), ("other", True)],
     ("sum", "mean", "max", "min", "prod")),
    ("float64", (40009,), [("all", False)], ("sum", "mean")),
    ("float64", (3, 4, 130), None, ("sum", "max", "argmax")),
    ("float64", (3, 0), [("last", False)], ("sum", "max", "prod", "argmax")),
    ("int64", S2, [("last", True)], ("sum", "prod", "max")),
    ("uint32", S2, [("last", True)], ("sum", "min", "argmin")),
    ("bool", S2, [("all", False)], ("sum", "any", "all", "max"))]


def _family_r():
    cells = {}
    for b in range(N_RED_BATCHES):
        cells[b] = []
        for dt, shape, variants, ops in RED_CONFIGS:
            for inst in red_instances(len(shape), b, variants, ops):
                cells[b].append(Cell(inst, (("x", A(dt, shape)),), A(dt, shape).label))
    return cells


FAMILIES = {
    # one suite (one generated function per batch and level) per group of dtypes
    "E": lambda level: [Suite(f"E_{name}", level, at_level(_family_e(dtypes), level, True),
                              edge=EDGE_GRID, fperr=True, by_flags=True,
                              draws=8 if name == "float" else 0)
                        for name, dtypes in (("float", FLOATS), ("bool", ("bool",)),
                                             ("int", DTYPES[1:9]))],
    "M": lambda level: [Suite("M", level, at_level(_family_m(), level), specialize=False,
                              sweep=SWEEP, layouts=LAYOUTS_BASIC)],
    "C": lambda level: [Suite("C", level, at_level(_family_c(), level), layouts=LAYOUTS_BASIC,
                              by_flags=True)],
    "BS": lambda level: [Suite("BS", level, at_level(_family_bs(), level), edge=EDGE_ZEROS)],
    "F": lambda level: [Suite("F", level, at_level(_family_f(), level), layouts=LAYOUTS_BASIC)],
    "R": lambda level: [Suite("R", level, at_level(_family_r(), level), layouts=LAYOUTS_FULL[:5],
                              edge=EDGE_REDUCE)],
}
_suites: dict = {}


def suites(family, level) -> list:
    key = (family, level)
    if key not in _suites:
        _suites[key] = FAMILIES[family](level)
    return _suites[key]


# Known differences from NumPy (bugs in the cfused backend): regular expressions over
# (family, config, level, cell name, aspect) -> reason; matching items are strict xfails,
# so a fix makes them fail until the entry is removed.
KNOWN_BUGS: list = [
    # By design at O2 (README jit_level): float32 sums accumulate in double.
    (("R", r"float32\[6,300\]", "O2",
      r"(np|ndarray)\.(mean|sum)\[axis=(None|\(.*\)|-1|1),.*", "edge"),
     "float32 sums and means (whole-array and last-axis) accumulate in double: "
     "where NumPy's float32 partial sums overflow the kernel's do not: "
     "np.float32([max, max, -max, -max]).sum() is inf in NumPy (overflow warning), 0.0 "
     "jitted; repeated to 300 elements NumPy gives nan (column sums and means match NumPy: "
     "a column mean that overflows float32 is handed to it)"),
]


def _known(key) -> str | None:
    for pattern, reason in KNOWN_BUGS:
        if all(p is None or re.fullmatch(p, v) for p, v in zip(pattern, key)):
            return reason
    return None


def _items():
    out = []
    for family in FAMILIES:
        for level in LEVELS:
            for si, suite in enumerate(suites(family, level)):
                names = {}
                for cells in suite.cells_by_batch.values():
                    for cell in cells:
                        names.setdefault((cell.config, cell.name), None)
                aspects = ("kernel", "edge")
                for config, name in names:
                    for aspect in aspects:
                        key = (family, config, level, name, aspect)
                        reason = _known(key)
                        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                        out.append(pytest.param(family, si, level, config, name, aspect,
                                                marks=marks,
                                                id=f"{family}-{config}-{level}-{name}-{aspect}"))
    return out


@pytest.mark.parametrize("family,suite_index,level,config,name,aspect", _items())
def test_matrix(family, suite_index, level, config, name, aspect):
    suite = suites(family, level)[suite_index]
    suite.run()
    assert not suite.error, f"the suite's run stopped, so this item was not checked:\n" \
                            f"{suite.error}"
    problems = suite.failures.get((config, name, aspect), [])
    more = f"\n  ... {len(problems) - 5} more" if len(problems) > 5 else ""
    assert not problems, (f"{name} on {config} at {level} ({aspect}):\n  "
                          + "\n  ".join(problems[:5]) + more)
    assert (config, name, aspect) in suite.checked, \
        f"{name} on {config} at {level} ({aspect}): no check of the suite compared it"


def _item_keys(suite) -> set:
    return {(c.config, c.name, aspect) for cells in suite.cells_by_batch.values()
            for c in cells for aspect in ("kernel", "edge")}


def test_a_check_that_raises_fails_its_items(monkeypatch):
    """Anything escaping a check (an injected TypeError in compare) fails the items it would
    have checked; none passes unchecked."""
    suite = FAMILIES["F"]("O1")[0]

    def broken(*args, **kwargs):
        raise TypeError("injected")
    monkeypatch.setitem(globals(), "compare", broken)
    suite.run()
    keys = _item_keys(suite)
    assert keys and all("injected" in "".join(suite.failures.get(k, [])) for k in keys)


def test_a_suite_that_cannot_start_fails_every_item(monkeypatch):
    """A run that stops before its checks (here: building the functions) is the error of every
    item, whichever item started it (a strict xfail starting it no longer hides it)."""
    suite = FAMILIES["F"]("O1")[0]
    monkeypatch.setattr(suite, "build", lambda rng: 1 / 0)
    suite.run()
    assert "ZeroDivisionError" in suite.error
    assert not suite.checked


def test_op_table_is_covered():
    """Every callable of the fusion tables is spelled and run by this file."""
    assert not EW_MISSING and not RED_MISSING, (
        f"entries of pijit.graph.fuse's tables this file cannot spell (teach _spellings or "
        f"OPERATOR_SYNTAX): {EW_MISSING + RED_MISSING}")
    ran = {(c.inst.op, c.inst.spelling) for s in suites("E", "O1") + suites("R", "O1")
           for cells in s.cells_by_batch.values() for c in cells}
    for table in (EW_OPS, RED_OPS):
        for op, spellings in table.items():
            for sp in spellings:
                assert (op, sp) in ran, f"{sp.label} ({op}) is not in the matrix"


# =============================================================================================
# Measuring the bounds: python tests/test_fused_matrix.py
# =============================================================================================
# MEASURED (gcc 12.2, glibc 2.36 libmvec, NumPy 2.4.6, AVX-512 Xeon), O2, kernel vs NumPy:
#   max ulp, 2 ranges per op x 4 x 2**20 random inputs (MEASURE_RANGES):
#     float32: exp 4, log 7, sin 2, cos 2, tanh 0, pow(x, 3.7) 1, power(x, 3) 1
#     float64: exp 3, log 2, sin 3, cos 3, tanh 0, pow(x, 3.7) 1, power(x, 3) 1
#   glibc 2.35's additions (2 x 2**18 inputs per range; arctan2 and hypot: 3 x 2**18 normal
#   pairs at scales 1, 1e-20, 1e20, not by measure()):
#     float32: expm1 0, log1p 1, log2 0, log10 0, exp2 3, sinh 1, cosh 1, tan 0, arcsin 0,
#              arccos 0, arctan 0, arcsinh 0, arccosh 0, arctanh 2, cbrt 0, arctan2 0, hypot 1
#     float64: expm1 2, log1p 2, log2 2, log10 2, exp2 1, sinh 2, cosh 2, tan 3, arcsin 3,
#              arccos 2, arctan 3, arcsinh 1, arccosh 1, arctanh 1, cbrt 2, arctan2 3, hypot 1
#   logaddexp, logaddexp2: |kernel - NumPy| / (eps * max(|NumPy|, 1)) <= 2.0 (float32 and
#   float64; 4 x 2**18 normal pairs at scales 1e-3 to 1e30)
#   (float32 log: x = 0.783278 gives -0.24426757 in the kernel, -0.24426767 in NumPy; the
#   exact value lies between, 3.2 and 3.8 ulp away.) On the matrix's own 20x21 arrays
#   (normal * 2, and the positive domain) tanh reaches 2 ulp in both dtypes.
#   sums, max |kernel - NumPy| / (eps * sum|x|) over n = 100, 1000, 10007, 2**20 and normal,
#   uniform and offset data: sum 1.09, mean 1.19 (float32 and float64 alike); on the
#   matrix's own data up to 1.6 (float64 mean over 21-element rows).
#   multiply-adds, max |kernel - NumPy| / (eps * (|x*y| + |z|)), 4 x 2**20 normal inputs:
#   1.00 (float32 and float64).
_LOG_RANGES = {"float32": [(1e-37, 3e38, True), (0.5, 2, False)],
               "float64": [(1e-307, 1e308, True), (0.5, 2, False)]}
_TRIG_RANGES = {"float32": [(-10, 10, False), (-1e4, 1e4, False)],
                "float64": [(-10, 10, False), (-1e6, 1e6, False)]}
_POW_RANGES = {"float32": [(1e-8, 1e8, True), (0.5, 2, False)],
               "float64": [(1e-60, 1e60, True), (0.5, 2, False)]}
_HYPERBOLIC_RANGES = {"float32": [(-88, 88, False), (-1, 1, False)],
                      "float64": [(-709, 709, False), (-1, 1, False)]}
_UNIT_RANGES = {dt: [(-1, 1, False), (-0.5, 0.5, False)] for dt in ("float32", "float64")}
MEASURE_RANGES = {   # op -> {dtype: [(low, high, log-uniform?), ...]}
    "exp": {"float32": [(-87, 88, False), (-2, 2, False)],
            "float64": [(-708, 709, False), (-2, 2, False)]},
    "log": _LOG_RANGES, "log2": _LOG_RANGES, "log10": _LOG_RANGES,
    "sin": _TRIG_RANGES, "cos": _TRIG_RANGES, "tan": _TRIG_RANGES,
    "tanh": {"float32": [(-10, 10, False), (-0.5, 0.5, False)],
             "float64": [(-20, 20, False), (-0.5, 0.5, False)]},
    "pow": _POW_RANGES, "power": _POW_RANGES,
    "expm1": {"float32": [(-80, 80, False), (-1, 1, False)],
              "float64": [(-700, 700, False), (-1, 1, False)]},
    "log1p": {"float32": [(1e-30, 3e38, True), (-0.5, 0.5, False)],
              "float64": [(1e-300, 1e308, True), (-0.5, 0.5, False)]},
    "exp2": {"float32": [(-125, 127, False), (-2, 2, False)],
             "float64": [(-1020, 1023, False), (-2, 2, False)]},
    "sinh": _HYPERBOLIC_RANGES, "cosh": _HYPERBOLIC_RANGES,
    "arcsin": _UNIT_RANGES, "arccos": _UNIT_RANGES,
    "arctan": {dt: [(-100, 100, False), (-2, 2, False)] for dt in ("float32", "float64")},
    "arcsinh": {dt: [(-1e4, 1e4, False), (-1, 1, False)] for dt in ("float32", "float64")},
    "arccosh": {"float32": [(1, 1e30, True), (1, 2, False)],
                "float64": [(1, 1e300, True), (1, 2, False)]},
    "arctanh": {dt: [(-0.999, 0.999, False), (-0.5, 0.5, False)]
                for dt in ("float32", "float64")},
    "cbrt": {"float32": [(1e-30, 1e30, True), (-2, 2, False)],
             "float64": [(1e-300, 1e300, True), (-2, 2, False)]},
}


def measure(n=2 ** 20, rounds=4):      # pragma: no cover - a tool, not a test
    """Max kernel-vs-NumPy errors of the inexact ops and sums at O2 over random inputs."""
    import pijit.backends.cfused as cf
    cf.group_fallback = _counting_group_fallback(cf.group_fallback)
    rng = np.random.default_rng(12345)
    print(f"transcendentals: max ulp kernel vs NumPy over {rounds} x {n} inputs per range")
    for dtype in FLOATS:
        insts = [i for i in ew_instances() if tolerance(i.op, "O2", i.exponent) != EXACT
                 and i.placeholders == ("x",)]
        fn = make_function("m", [f"x{k}" for k in range(len(insts))],
                           [i.expr({"x": f"x{k}"}) for k, i in enumerate(insts)])
        jitted = pijit.jit(fn, jit_config={"jit_level": "O2"})
        worst = {i.name: 0 for i in insts}
        falls = 0
        for r in range(len(next(iter(MEASURE_RANGES.values()))["float32"])):
            for _ in range(rounds):
                args = []
                for i in insts:
                    lo, hi, log = MEASURE_RANGES[i.op][dtype][r]
                    v = (np.exp(rng.uniform(np.log(lo), np.log(hi), n)) if log
                         else rng.uniform(lo, hi, n))
                    args.append(v.astype(dtype))
                want = call(fn, args)
                got, ran = run_jitted(jitted, args)
                falls += len(ran.fallbacks)
                for i, g, w in zip(insts, got.result, want.result):
                    worst[i.name] = max(worst[i.name], ulp_diff(g, w))
        print(f"  {dtype}: " + ", ".join(f"{k} {v}" for k, v in worst.items())
              + f"  (kernel fallbacks: {falls})")
    print("sums: max |kernel - NumPy| / (eps * sum|x|)")
    for dtype in FLOATS:
        for size in (100, 1000, 10007, 2 ** 20):
            fn = make_function("s", ["x", "y"], ["x.sum()", "np.mean(y)"])
            jitted = pijit.jit(fn, jit_config={"jit_level": "O2"})
            worst = [0.0, 0.0]
            for dist in ("normal", "uniform", "offset"):
                for _ in range(rounds):
                    v = {"normal": rng.standard_normal(size), "uniform": rng.random(size),
                         "offset": rng.random(size) + 1e3}[dist].astype(dtype)
                    got, _ = run_jitted(jitted, [v, v])
                    want = call(fn, [v, v])
                    scale = float(np.sum(np.abs(v.astype(np.float64))))
                    eps = float(np.finfo(dtype).eps)
                    for k in range(2):
                        s = scale / (size if k else 1)
                        err = abs(float(got.result[k]) - float(want.result[k])) / (eps * s)
                        worst[k] = max(worst[k], err)
            print(f"  {dtype} n={size}: sum {worst[0]:.3f}, mean {worst[1]:.3f}")
    print("multiply-adds at O2: max |kernel - NumPy| / (eps * (|x*y| + |z|))")
    for dtype in FLOATS:
        forms = [t for _, t, _ in FMA_FORMS]
        fn = make_function("f", ["x", "y", "z"], [t.format("x", "y", "z") for t in forms])
        jitted = pijit.jit(fn, jit_config={"jit_level": "O2"})
        worst = 0.0
        for _ in range(rounds):
            x, y, z = (rng.standard_normal(n).astype(dtype) for _ in range(3))
            got, _ = run_jitted(jitted, [x, y, z])
            want = call(fn, [x, y, z])
            scale = np.abs(x.astype(np.float64) * y) + np.abs(z.astype(np.float64))
            for g, w in zip(got.result, want.result):
                err = np.abs(g.astype(np.float64) - w) / (scale * float(np.finfo(dtype).eps))
                worst = max(worst, float(err.max()))
        print(f"  {dtype}: {worst:.3f}")


if __name__ == "__main__":      # pragma: no cover
    measure()
