"""Fusion grouping: Graph -> list of FusionGroups, and a schedule of groups and other nodes.

A group is a maximal set of elementwise nodes over bool, integer and float dtypes with one
iteration shape (dynamic dims, None, stand for the same length in every value of the group:
the kernel checks it at run time), plus reductions (sum/mean/prod/max/min/any/all/argmax/
argmin) of its values: over the last axis, whose per-row results later nodes of the group may read again
(keepdims, or reduced and read as `v[:, None]`: the softmax and layernorm shapes, see
FusionGroup), or over all axes (several in one pass).
Inputs broadcast to the iteration shape. Values used only inside the group are never
materialized; a value used outside becomes a group output. Merging is refused when it would
create a cycle through nodes outside the group, and a node that may write into an array
(in-place operators, item assignment, anything not known to write nothing: see
purity.writes_nothing) closes every open group, so reads never move across writes; views and
indexing in between do not. So does a node NumPy runs that may warn (purity.may_warn: a matmul,
a floor_divide): a member joining a group across it would give its warnings on the wrong side of
that node's (a group that began before it runs before it; one that reads its result, after).
A write the kernel can compute into its destination (direct_write: `A += v`, a ufunc's out=,
a store into a basic slice's view) instead joins the group computing its value, as its last
member, and closes every group; schedule() keeps such a group in place like a write node.
An exact float sum over all axes never shares a group with an operand broadcast along the
rows (a (1, n) row, an (m, 1) column): the kernel sums NumPy's pairwise chunks of dense flat
operands only, and would hand every call back.
"""
from __future__ import annotations

import builtins
import ctypes
import dataclasses
import heapq
import math
import operator
from dataclasses import dataclass, field

import numpy as np

from pijit.graph.ir import Graph, Meta, Ref
from pijit.graph.ir import node_refs
from pijit.graph.purity import may_raise_on_data, may_warn, writes_nothing
from pijit.graph.stores import StoreInto

FLOAT = (np.dtype(np.float32), np.dtype(np.float64))
INTEGER = tuple(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64,
                                      np.uint8, np.uint16, np.uint32, np.uint64))
BOOL = np.dtype(np.bool_)
VALUE_DTYPES = FLOAT + INTEGER + (BOOL,)

# fn -> (op code, number of positional args). Keyed by id(): some callables are unhashable.
_EW = {}
for _fns, _op, _n in [
        ((operator.add, np.add), "add", 2), ((operator.sub, np.subtract), "sub", 2),
        ((operator.mul, np.multiply), "mul", 2), ((operator.truediv, np.divide), "div", 2),
        ((operator.neg, np.negative), "neg", 1), ((operator.pos, np.positive), "pos", 1),
        ((operator.lt, np.less), "lt", 2), ((operator.le, np.less_equal), "le", 2),
        ((operator.gt, np.greater), "gt", 2), ((operator.ge, np.greater_equal), "ge", 2),
        ((operator.eq, np.equal), "eq", 2), ((operator.ne, np.not_equal), "ne", 2),
        ((operator.and_, np.bitwise_and), "and", 2), ((operator.or_, np.bitwise_or), "or", 2),
        ((operator.xor, np.bitwise_xor), "xor", 2), ((operator.invert, np.invert), "invert", 1),
        ((np.exp,), "exp", 1), ((np.log,), "log", 1), ((np.sqrt,), "sqrt", 1),
        ((np.sin,), "sin", 1), ((np.cos,), "cos", 1), ((np.tanh,), "tanh", 1),
        ((np.absolute, builtins.abs), "abs", 1), ((np.square,), "square", 1),
        ((np.maximum,), "maximum", 2), ((np.minimum,), "minimum", 2),
        ((np.where,), "where", 3), ((np.clip, np.ndarray.clip), "clip", 3),
        ((operator.pow,), "pow", 2), ((np.power,), "power", 2),
        ((np.ndarray.astype,), "astype", 2)] + [
        ((getattr(np, _name),), _name, 1) for _name in (
            "expm1", "log1p", "log2", "log10", "exp2", "sinh", "cosh", "tan", "arcsin",
            "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "cbrt")] + [
        ((getattr(np, _name),), _name, 2) for _name in (
            "logaddexp", "logaddexp2", "arctan2", "hypot")]:
    for _f in _fns:
        _EW[id(_f)] = (_op, _n)
COMPARE = frozenset(("lt", "le", "gt", "ge", "eq", "ne"))
BITWISE = frozenset(("and", "or", "xor", "invert"))


def _libmvec_235() -> bool:
    """Whether glibc's libmvec has the vector math added in glibc 2.35 (log1p, atan2, ...)."""
    try:
        lib = ctypes.CDLL("libmvec.so.1")
    except OSError:
        return False
    return all(hasattr(lib, f) for f in ("_ZGVbN2v_log1p", "_ZGVbN2vv_atan2", "_ZGVbN4v_cbrtf"))


# Ops libmvec vectorizes since glibc 2.35, and logaddexp/logaddexp2 (NumPy's formulas over
# exp/exp2 and log1p); without them kernels call NumPy's loops for these at every level.
LIBMVEC_235 = frozenset(("expm1", "log1p", "log2", "log10", "exp2", "sinh", "cosh", "tan",
                         "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "cbrt",
                         "arctan2", "hypot", "logaddexp", "logaddexp2"))
_VECTOR_235 = LIBMVEC_235 if _libmvec_235() else frozenset()
# Ops whose C results may differ from NumPy's in the last bits (libmvec: <= 4 ulp): O2 only.
INEXACT = frozenset(("exp", "log", "sin", "cos", "tanh")) | _VECTOR_235
# Float ops kernels compute only by calling NumPy's own loops, at every level (bit-identical;
# no C rendering).
NUMPY_ONLY = LIBMVEC_235 - _VECTOR_235
# The ops a kernel computes, by the kind of the result's dtype (where, astype and the
# comparisons take any dtype).
FLOAT_OPS = frozenset(("add", "sub", "mul", "div", "neg", "pos", "exp", "log", "sqrt", "sin",
                       "cos", "tanh", "abs", "square", "maximum", "minimum", "clip", "pow",
                       "power")) | LIBMVEC_235
INT_OPS = frozenset(("add", "sub", "mul", "neg", "pos", "abs", "square", "maximum",
                     "minimum", "clip", "pow", "power")) | BITWISE
BOOL_OPS = frozenset(("maximum", "minimum")) | BITWISE
ANY_OPS = frozenset(("where", "astype")) | COMPARE
MAX_INT_POWER = 8       # x ** k for integer x: k unrolled multiplications
# Integer ops that NumPy's scalar math (NumPy scalars only, no array operand) checks for
# overflow ("overflow encountered in scalar add"); ufuncs on arrays wrap silently.
SCALAR_OVERFLOW = frozenset(("add", "sub", "mul", "neg", "abs", "square", "pow", "power"))
SPECIAL_POWERS = (2.0, 1.0, 0.5, -1.0)     # x ** e NumPy computes as x*x, x, sqrt(x), 1/x

_REDUCE = {}
for _fns, _op in [((np.sum, np.ndarray.sum), "sum"), ((np.mean, np.ndarray.mean), "mean"),
                  ((np.max, np.amax, np.ndarray.max), "max"),
                  ((np.min, np.amin, np.ndarray.min), "min"),
                  ((np.prod, np.ndarray.prod), "prod"), ((np.any, np.ndarray.any), "any"),
                  ((np.all, np.ndarray.all), "all"), ((np.argmax, np.ndarray.argmax), "argmax"),
                  ((np.argmin, np.ndarray.argmin), "argmin")]:
    for _f in _fns:
        _REDUCE[id(_f)] = _op


def is_const(arg) -> bool:
    """A constant the C code can spell exactly: Python or NumPy bool/int/float scalars."""
    if type(arg) in (bool, float, int):
        return type(arg) is not int or -2 ** 63 <= arg < 2 ** 64
    return isinstance(arg, np.generic) and arg.dtype in VALUE_DTYPES


def fits(value, dtype) -> bool:
    """A constant converts to `dtype` as C converts it: integers exactly (NumPy requires it of
    Python ints), floats without overflow (NumPy reports an overflow in the cast)."""
    if isinstance(value, (bool, np.bool_)):
        return True
    if isinstance(value, (float, np.floating)):
        return dtype.kind != "f" or not np.isfinite(value) or abs(float(value)) <= float(
            np.finfo(dtype).max)
    if not isinstance(value, (int, np.integer)):
        return True
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min <= int(value) <= info.max
    return dtype.kind != "f" or abs(int(value)) < 2 ** 53


def dtype_arg(arg):
    """The dtype named by astype's argument, if it is one a kernel computes in."""
    try:
        dt = np.dtype(arg)
    except TypeError:
        return None
    return dt if dt in VALUE_DTYPES else None


def value_array(meta) -> bool:
    """An array (or 0-d value) of a dtype kernels compute in. Dynamic dims (None) are fine:
    kernels take shapes at run time (and hand inputs whose shapes break the group's symbolic
    ones to NumPy, render.py); only max/min/argmax/argmin need static reduced axes."""
    return meta.dtype in VALUE_DTYPES and (meta.is_array or meta.ndim == 0)


def compute_dtype(graph: Graph, node):
    """The dtype a comparison computes in, by NEP 50: arrays and NumPy scalars are strong,
    Python numbers (constants or graph inputs) weak."""
    operands = []
    for a in node.args:
        if isinstance(a, Ref):
            m = graph.meta(a)
            operands.append(m.pytype(0) if m.is_pyscalar else m.dtype)
        else:
            operands.append(a if isinstance(a, np.generic) or type(a) in (bool, int, float)
                            else np.asarray(a).dtype)
    strong = [o for o in operands if not type(o) in (bool, int, float)]
    if not strong:      # only Python numbers: NumPy's default types
        return np.result_type(*[np.dtype(type(o)) for o in operands])
    return np.result_type(*operands)


def elementwise_op(graph: Graph, node, exact: bool = False, numpy_loops=frozenset()):
    """The op code of a fusable elementwise node, or None.

    exact: only ops whose C result is bit-identical to NumPy's (correctly rounded IEEE ops and
    integer ops, no libmvec math), or that the kernel computes by calling NumPy's own loop
    (`numpy_loops`: op codes; see uses_numpy_loop).
    """
    spec = _EW.get(id(getattr(node.fn, "recomputes", node.fn)))
    if spec is None or node.kwargs or len(node.args) != spec[1]:
        return None
    op = spec[0]
    meta = node.meta
    if not value_array(meta) or not (meta.is_array or isinstance(meta.pytype, type)
                                      and issubclass(meta.pytype, np.generic)):
        return None
    refs = [a for a in node.args if isinstance(a, Ref)]
    if not refs or not isinstance(node.args[0], Ref) and op in ("pow", "power", "astype",
                                                                "clip"):
        return None
    for a in node.args:
        if isinstance(a, Ref):
            m = graph.meta(a)
            if m.dtype not in VALUE_DTYPES:
                return None
        elif not (is_const(a) or (op == "clip" and a is None)
                  or (op == "astype" and dtype_arg(a) is not None)):
            return None
    t = meta.dtype
    if any(isinstance(a, Ref) and graph.meta(a).pytype is int for a in node.args) and (
            (compute_dtype(graph, node) if op in COMPARE else t) not in
            (np.dtype(np.int64),) + FLOAT):
        return None     # its value may not fit (NumPy raises, or compares it exactly)
    allowed = FLOAT_OPS if t in FLOAT else INT_OPS if t in INTEGER else BOOL_OPS
    if op not in allowed | ANY_OPS:
        return None
    if t in INTEGER and op in SCALAR_OVERFLOW and not any(graph.meta(r).is_array
                                                          for r in refs):
        return None     # NumPy's scalar math warns when it overflows; a kernel cannot
    consts = [a for a in node.args if not isinstance(a, Ref) and a is not None]
    if _absorbs(node, op, t):
        return None     # in C its operand would be dead code, and the warnings of computing it
    if op in COMPARE:
        return op if t == BOOL and _comparable(graph, node, consts) else None
    if op == "astype":
        src = graph.meta(node.args[0]).dtype
        return op if dtype_arg(node.args[1]) == t and not (
            src in FLOAT and t == np.dtype(np.uint64)) else None
    if not all(fits(c, t) for c in consts if op != "where" or c is not node.args[0]):
        return None
    if op in ("pow", "power"):
        e = node.args[1]
        if type(e) not in (int, float):
            return None
        if op == "pow" and t in FLOAT and not meta.is_array:
            return None     # a NumPy float scalar's ** is scalar math, C's pow (np.float64(
            # -0.0) ** 0.5 is 0.0, x ** 2 within 0.52 ulp of x*x), not power's loop of arrays
        if t not in FLOAT and not (type(e) is int and 0 <= e <= MAX_INT_POWER):
            return None
    if uses_numpy_loop(graph, node, op, exact) and not (op in numpy_loops and all(
            graph.meta(a).dtype == t for a in node.args if isinstance(a, Ref))):
        return None     # NumPy's loop of dtype t: its operands must be of t (or constants)
    return op


def _absorbs(node, op: str, t) -> bool:
    """An op whose value a constant operand decides (x & False, x | True, x * 0 of integers,
    x ** 0, np.where(c, k, k)): the C compiler drops the computation of its
    other operand, and with it the floating-point flags NumPy would warn of (0 / a ... & False
    warns in NumPy): NumPy computes it."""
    a = node.args
    consts = [c for c in a if not isinstance(c, Ref)]
    if op == "where":
        return type(a[1]) is type(a[2]) and (a[1] is a[2] or a[1] == a[2])
    if op in ("pow", "power"):
        return type(a[1]) in (int, float) and a[1] == 0
    if op == "and":
        return any(not bool(c) for c in consts)
    if op == "or":
        return any(bool(c) if t == BOOL else int(c) == -1 or (
            t.kind == "u" and int(c) == np.iinfo(t).max) for c in consts)
    return op == "mul" and t.kind in "iub" and any(c == 0 for c in consts)


def uses_numpy_loop(graph: Graph, node, op: str, exact: bool) -> bool:
    """Whether the kernel computes this float node by NumPy's own loop of the ufunc on a row
    (NUMPY_ONLY ops; exact kernels: also transcendentals and powers other than x**2, x**1,
    x**0.5, x**-1): bit-identical to NumPy by construction."""
    if node.meta.dtype not in FLOAT:
        return False
    return op in NUMPY_ONLY or exact and _math_call(node, op)


def _math_call(node, op: str) -> bool:
    """A float node computed by a math library call (a transcendental, or a power other than
    x**2, x**1, x**0.5, x**-1), not by a correctly rounded operation."""
    if op in ("pow", "power"):
        return float(node.args[1]) not in SPECIAL_POWERS
    return op in INEXACT


SHORT_ROW = 16      # rows shorter than this do not compute transcendentals per row


def _costly_per_row(node, op: str, shape: tuple) -> bool:
    """A row node would compute this transcendental (or general power) once per row, by a
    scalar call: over rows of a few values that is a scalar call per few elements, where a
    group of its own computes them all by a vector call (nbody_step's r2 ** -1.5 of sums over
    3 coordinates: 55% of its O2 time in scalar pow, O2 slower than O1)."""
    if node.meta.dtype not in FLOAT or shape[-1] is None or shape[-1] >= SHORT_ROW:
        return False
    return _math_call(node, op)


def row_expand(graph: Graph, node) -> bool:
    """`v[:, None]` (`v[:, :, None]`, ...) of an array v: v with a trailing axis of length 1.
    On a row value reduced without keepdims it is that value in keepdims form, which the rows
    of its group may read (`x - x.max(axis=1)[:, None]`)."""
    if node.fn is not operator.getitem or node.kwargs or not isinstance(node.args[0], Ref):
        return False
    key, m = node.args[1], graph.meta(node.args[0])
    full = slice(None)
    return (isinstance(m, Meta) and m.is_array and type(key) is tuple
            and len(key) == m.ndim + 1 and key[-1] is None
            and all(type(k) is slice and k == full for k in key[:-1])
            and node.meta.shape == m.shape + (1,))


# In-place operators a kernel can compute into their target: the operator it computes.
_WRITE_OPS = {id(operator.iadd): operator.add, id(operator.isub): operator.sub,
              id(operator.imul): operator.mul, id(operator.itruediv): operator.truediv}
# Ufuncs whose `out=` a kernel can compute into.
_OUT_UFUNCS = frozenset(id(f) for f in (np.add, np.subtract, np.multiply, np.divide))


def direct_write(graph: Graph, node, exact: bool = False, numpy_loops=frozenset()):
    """(op code, destination Ref, the node as the elementwise node the kernel computes:
    A + v, v.astype(d.dtype)) of a write a kernel may compute straight into its destination,
    or None: `A += v` (-= *= /=) of an array A, and `np.add(x, y, out=A)` (subtract, multiply,
    divide), whose dtype is the operation's result dtype (no cast, so NumPy's same_kind rule
    holds), and StoreInto(d, v) of a view (setitem of a basic slice, graph/stores.py: v cast
    to d's dtype as astype casts). The destination is an array of any number of axes, each
    dynamic (its length, 0 and 1 included, checked by the kernel at run time) or of static
    length 2 or more (static lengths of 1 stay NumPy's: with all of them 1, the kernel would
    read the destination as one value, render.GroupKernel's "one" kind).

    The group's NumPy fallback runs the write node itself, with every NumPy rule (overlap
    buffering, read-only targets, warnings)."""
    kw = dict(node.kwargs)
    if id(node.fn) in _OUT_UFUNCS and set(kw) == {"out"} and len(node.args) == 2:
        dest = kw["out"][0] if type(kw["out"]) is tuple and len(kw["out"]) == 1 else kw["out"]
        fake = dataclasses.replace(node, kwargs=())
    elif id(node.fn) in _WRITE_OPS and not kw and len(node.args) == 2:
        dest = node.args[0]
        fake = dataclasses.replace(node, fn=_WRITE_OPS[id(node.fn)])
    elif isinstance(node.fn, StoreInto) and not kw and len(node.args) == 2:
        dest = node.args[0]
        fake = dataclasses.replace(node, fn=np.ndarray.astype,
                                   args=(node.args[1], graph.meta(dest).dtype))
    else:
        return None
    if not isinstance(dest, Ref):
        return None
    dm = graph.meta(dest)
    if not dm.is_array or dm.ndim == 0 or any(d is not None and d < 2 for d in dm.shape) \
            or dm.dtype not in VALUE_DTYPES:
        return None
    if not isinstance(node.fn, StoreInto):
        operands = [graph.meta(a) if isinstance(a, Ref) else a for a in node.args]
        if any(isinstance(m, Meta) and not (m.is_array or m.ndim == 0) for m in operands) or \
                compute_dtype(graph, fake) != dm.dtype:
            return None     # NumPy computes in another dtype, then casts (or raises)
    fake = dataclasses.replace(fake, meta=Meta.array(dm.shape, dm.dtype))
    op = elementwise_op(graph, fake, exact, numpy_loops)
    if op is None or uses_numpy_loop(graph, fake, op, exact):
        return None
    return op, dest, fake


def _comparable(graph: Graph, node, consts) -> bool:
    """NumPy compares these exactly as C does: no mixed signed/unsigned 64-bit operands (NumPy
    compares those exactly, C through float64), no Python int outside the operands' type, no
    bool arrays against weak Python numbers (NumPy compares those as int/float)."""
    cd = compute_dtype(graph, node)
    kinds = {graph.meta(a).dtype.kind if isinstance(a, Ref) else np.asarray(a).dtype.kind
             for a in node.args}
    if cd.kind == "f" and kinds <= set("iub"):      # float only from mixing int and uint
        return False
    if not all(fits(c, cd) for c in consts):
        return False
    strong = [graph.meta(a) for a in node.args
              if isinstance(a, Ref) and not graph.meta(a).is_pyscalar]
    weak = [a for a in node.args
            if not (isinstance(a, Ref) and not graph.meta(a).is_pyscalar)
            and not (isinstance(a, (bool, np.bool_))
                     or isinstance(a, Ref) and graph.meta(a).dtype == BOOL)]
    return not (strong and all(m.dtype == BOOL for m in strong) and weak)


def reduction_op(graph: Graph, node, exact: bool = False):
    """(op, mode, keepdims) of a fusable reduction, or None. mode: "all", "last", or the
    tuple of reduced axes when they are outer axes only (a column reduction).

    exact: only reductions whose result is NumPy's to the bit: those that cannot depend on
    the order (integers, bools, any/all/argmax/argmin); float sum/mean/max/min over outer
    axes, which NumPy computes row after row in the dtype, and float sums/means along rows
    or over all axes, of their own dtype, which the kernel sums with a copy of NumPy's
    pairwise summation (all for operands in C order: the kernel hands others to NumPy, and
    a whole-array sum over operands that are not all dense too); float max/min, whose
    value is order-free but for the sign of a zero result (the kernel hands that to NumPy).
    """
    op = _REDUCE.get(id(node.fn))
    if op is None or not node.args or not isinstance(node.args[0], Ref) or len(node.args) > 2:
        return None
    kw = dict(node.kwargs)
    if set(kw) - {"axis", "keepdims"} or (len(node.args) == 2 and "axis" in kw):
        return None
    axis = node.args[1] if len(node.args) == 2 else kw.get("axis")
    keepdims = kw.get("keepdims", False)
    src = graph.meta(node.args[0])
    if (not src.is_array or src.ndim == 0 or src.dtype not in VALUE_DTYPES
            or type(keepdims) is not bool or not _reduces_to(op, src.dtype, node.meta.dtype)):
        return None
    nd = src.ndim
    axes = _axes(axis, nd)
    if axes is None:
        return None
    if op in ("max", "min", "argmax", "argmin") and any(src.shape[a] is None for a in axes):
        return None     # empty at run time, NumPy raises: static reduced axes only
    cols = nd - 1 not in axes and op in ("sum", "mean", "max", "min")
    rows = axes == (nd - 1,) and nd >= 2 and op in ("sum", "mean") \
        and src.dtype == node.meta.dtype
    whole = axes == tuple(range(nd)) and op in ("sum", "mean") and src.dtype == node.meta.dtype
    if exact and op not in ORDER_FREE and (src.dtype in FLOAT or node.meta.dtype in FLOAT) \
            and not (cols or rows or whole or op in ("max", "min")):
        return None
    if axes == tuple(range(nd)):
        mode = "all"
    elif axes == (nd - 1,):
        mode = "last"
    elif nd - 1 not in axes and op not in ("argmax", "argmin"):
        mode = axes         # over outer axes only: each row accumulates into the result
    else:
        return None
    if op in ("max", "min", "argmax", "argmin") and any(src.shape[a] == 0 for a in axes):
        return None     # NumPy raises; leave it to NumPy
    return op, mode, keepdims


def _axes(axis, nd: int):
    """The sorted reduced axes of an `axis` argument (None: all), or None when invalid."""
    if axis is None:
        return tuple(range(nd))
    items = axis if type(axis) is tuple else (axis,)
    if not all(type(a) is int and -nd <= a < nd for a in items):
        return None
    axes = tuple(sorted({a % nd for a in items}))
    return axes if len(axes) == len(items) else None


def _reduces_to(op: str, src, out) -> bool:
    """NumPy's result dtype of the reduction (sums of integers in 64 bits, means in float)."""
    if op in ("any", "all"):
        return out == BOOL
    if op in ("argmax", "argmin"):
        return out == np.dtype(np.intp)
    if src in FLOAT or op in ("max", "min"):
        return out == src
    if op == "mean":
        return out == np.dtype(np.float64)
    return out == np.dtype(np.uint64 if src.kind == "u" else np.int64)


# Reductions whose float results do not depend on the order of evaluation.
ORDER_FREE = frozenset(("any", "all", "argmax", "argmin"))


def row_broadcast(value_shape: tuple, shape: tuple) -> bool:
    """A value of `value_shape` broadcasts against `shape` as one value per row (last axis)."""
    return value_shape == shape[:-1] + (1,) or (len(shape) == 1 and value_shape == ())


@dataclass
class FusionGroup:
    """Nodes over one iteration `shape`, run as one kernel.

    Full nodes compute one value per element. A reduction reduces a full value over all axes
    ("all": read only after the kernel, so no member reads it, and the group has no row
    values) or over the last axis ("last": one value per row). Row values (last-axis reductions, and row nodes computed from them) may be broadcast
    back into later full nodes of the same row: softmax and layernorm are one group. Each row
    runs in stages: stage k's loop over the row computes the full nodes and reductions of
    stage k; the row values it finishes are read from stage k + 1 on (`stage`).
    """
    id: int
    shape: tuple
    nodes: list = field(default_factory=list)     # members in node order
    ops: dict = field(default_factory=dict)       # node.out -> op code
    reduce: dict = field(default_factory=dict)    # reduction out -> (op, mode, keepdims)
    rows: set = field(default_factory=set)        # outs of row values
    numpy_loops: set = field(default_factory=set)  # outs computed by NumPy's loop on a row
    exact: bool = True              # found for a level that must match NumPy bit for bit
    stage: dict = field(default_factory=dict)     # see the class docstring
    inputs: list = field(default_factory=list)    # Refs read from outside, first use first
    outputs: list = field(default_factory=list)   # Refs used outside, in node order
    # its last member, when that is a write the kernel computes into its destination
    # (direct_write): its out -> the destination (an input); never an output. In `nodes` it
    # is the elementwise node the kernel computes; `written` has the write node NumPy runs.
    into: dict = field(default_factory=dict)
    written: dict = field(default_factory=dict)

    def members(self) -> list:
        return self.nodes

    @property
    def reductions(self) -> list:
        return [n for n in self.nodes if n.out in self.reduce]

    @property
    def loops(self) -> int:
        """How many loops over each row the kernel runs (one per stage)."""
        return 1 + max((self.loop_of(n) for n in self.nodes
                        if n.out not in self.rows or n.out in self.reduce), default=0)

    def loop_of(self, node) -> int:
        """The stage whose loop computes `node` (a full node or a reduction)."""
        return self.stage[node.out] - (node.out in self.reduce and node.out in self.rows)

    def __str__(self) -> str:
        dims = ",".join(map(str, self.shape))
        parts = []
        for n in self.nodes:
            op = self.ops[n.out]
            if n.out in self.reduce:
                _, mode, keep = self.reduce[n.out]
                op = f"{op}({mode}{', keepdims' if keep else ''})"
            kind = "row " if n.out in self.rows and n.out not in self.reduce else ""
            into = f" into {self.into[n.out]!r}" if n.out in self.into else ""
            parts.append(f"%{n.out}={kind}{op}{into}")
        staged = f" in {self.loops} stages" if self.loops > 1 else ""
        return (f"group {self.id} [{dims}]{staged} in ({', '.join(map(repr, self.inputs))}) "
                f"out ({', '.join(map(repr, self.outputs))}): {'; '.join(parts)}")


def find_groups(graph: Graph, exact: bool = False, numpy_loops=frozenset()) -> list:
    """Greedy grouping in node order (see the module docstring).

    exact: fuse only what computes bit-identical results to NumPy's (see elementwise_op and
    reduction_op). numpy_loops: the op codes an exact kernel may compute by calling NumPy's
    own loop on each row (the backend knows which it can get).
    """
    parent: dict = {}             # group id -> merged-into id (union-find)
    groups: dict = {}             # root id -> FusionGroup
    gdeps: dict = {}              # root id -> group ids it reads from outside (direct)
    closed: set = set()           # roots that accept no new members
    member_of: dict = {}          # value number -> group id
    row_values: set = set()       # value numbers of row values (in any group)
    whole_values: set = set()     # value numbers of reductions over all axes (in any group)
    deps: dict = {}               # value number of non-members -> group ids it depends on
    # Float -> int casts (members): a member reading one joins another group, so every cast
    # a kernel computes is stored. Its invalid-value warning is the FE_INVALID flag of the
    # conversion, and gcc drops a conversion whose value it folds away (`t - t` of an int
    # t), flag and all: NumPy warns there.
    casts: set = set()

    def find(g):
        while parent[g] != g:
            g = parent[g]
        return g

    def value_deps(ref) -> set:
        g = member_of.get(ref.index)
        if g is not None:
            return {find(g)}
        return {find(x) for x in deps.get(ref.index, ())}

    def deps_of(refs) -> set:
        """The groups values `refs` depend on."""
        return set().union(*(value_deps(r) for r in refs))

    def closure(ids) -> set:
        seen, todo = set(), [find(i) for i in ids]
        while todo:
            g = todo.pop()
            if g not in seen:
                seen.add(g)
                todo.extend(find(x) for x in gdeps[g])
        return seen

    def new_group(shape):
        gid = len(parent)
        parent[gid] = gid
        groups[gid] = FusionGroup(gid, shape, exact=exact)
        gdeps[gid] = set()
        return gid

    def external(node, refs, cands) -> set:
        """The groups a node joining `cands` reads from outside them, those of `cands` too."""
        outside = [r for r in refs if r.index not in member_of
                   or find(member_of[r.index]) not in cands]
        of = getattr(node.fn, "of", None) if getattr(node.fn, "recomputes", None) else None
        if of is not None:      # a recomputed value runs after its original (schedule)
            outside.append(Ref(of))
        ext = set().union(*(gdeps[c] for c in cands)) if cands else set()
        for r in outside:
            ext |= value_deps(r)
        return ext

    def warns_late(cands, before) -> bool:
        """Whether a member of the groups `cands` may warn before (in node order) one of the
        groups `before` does: merged with the node, those groups would run after `before`,
        and give their warnings after its, where NumPy gives them first."""
        first = min((warns[n.out] for c in cands for n in groups[c].nodes if n.out in warns),
                    default=None)
        return first is not None and any(warns.get(n.out, -1) > first
                                         for b in before for n in groups[b].nodes)

    def open_group(ref):
        g = member_of.get(ref.index)
        return None if g is None or find(g) in closed else find(g)

    def full_candidates(refs, shape) -> set:
        """Groups a full node of `shape` may join: its member operands must read there as
        full values or as row values broadcast along the rows."""
        cands, refused = set(), set()
        for r in refs:
            g = open_group(r)
            if g is None:
                continue
            if groups[g].shape != shape or r.index in whole_values or r.index in casts or (
                    r.index in row_values and not row_broadcast(graph.meta(r).shape, shape)):
                refused.add(g)
            else:
                cands.add(g)
        cands -= refused
        if any(groups[g].rows for g in cands):      # rows and whole reductions never mix
            cands = {g for g in cands if not has_whole(g)}
        flat = {g for g in cands if has_flat_sum(g)}
        if flat and (broadcast_reads(refs, shape, cands) or any(
                broadcast_reads(group_reads(g), shape, {g}) for g in cands - flat)):
            cands -= flat       # nor do exact flat sums and operands broadcast along rows
        return cands

    def flat_sum(out, red) -> bool:
        """An exact float sum/mean over all axes (not a 1-D row's)."""
        return red[1] == "all" and red[0] in ("sum", "mean") and graph.meta(Ref(out)).dtype in FLOAT

    def has_whole(g) -> bool:
        return any(n.out in whole_values for n in groups[g].nodes)

    def has_flat_sum(g) -> bool:
        return exact and any(flat_sum(o, m) for o, m in groups[g].reduce.items()
                             if o not in groups[g].rows)

    def broadcast_reads(refs, shape, within=()) -> bool:
        """Some of `refs` (not members of the groups `within`) would be inputs broadcast
        along the iteration `shape` (a row (1, n), a column (m, 1)): the kernel then runs row
        by row, where an exact flat sum hands every call to NumPy (render.tree_chunks)."""
        for r in refs:
            m = graph.meta(r)
            if (r.index not in member_of or find(member_of[r.index]) not in within) and \
                    m.is_array and m.shape != shape and (None in m.shape or math.prod(m.shape) > 1):
                return True
        return False

    def group_reads(g) -> list:
        return [r for n in groups[g].nodes for r in node_refs(n)]

    def row_candidates(node, refs) -> set:
        """Groups a row node may join: all its array operands are row values there."""
        cands = set()
        for r in refs:
            g = open_group(r)
            if r.index in casts:
                return set()
            if r.index in row_values and g is not None and (graph.meta(r).shape == node.meta.shape
                                                            or row_expand(graph, node)):
                cands.add(g)
            elif g is not None or graph.meta(r).ndim != 0:
                return set()
        if len({groups[g].shape for g in cands}) != 1:
            return set()
        return cands

    def left_to_numpy(node, refs):
        """The node runs in NumPy, outside every group: close them all when it may write,
        when it may warn (Python's own scalar math gives no NumPy warning), or when it may
        raise on run-time data (a later member's warning, `y.mean()` after `y.max()` of an
        empty y, `np.log(y)` after `y[i]` out of bounds, would come before NumPy's error)."""
        if not writes_nothing(node) or may_raise_on_data(graph, node) or \
                may_warn(graph, node) and (isinstance(node.fn, np.ufunc) or any(
                    not graph.meta(r).is_pyscalar for r in refs)):
            closed.update(find(g) for g in groups)
        deps[node.out] = deps_of(refs)

    def join_write(node) -> bool:
        """A write (direct_write) joins the open group computing its value, as its last
        member: no group stays open across it (reads never move across writes)."""
        write = direct_write(graph, node, exact, numpy_loops)
        if write is None:
            return False
        op, dest, fake = write
        values = [r for r in node_refs(fake) if r != dest]
        opened = {open_group(r) for r in values} - {None}
        if len(opened) != 1 or dest.index in member_of or any(
                r.index in row_values or r.index in casts for r in values):
            return False    # it joins one open group, that computes (some of) its operands
        g = opened.pop()
        grp = groups[g]
        if grp.shape != node.meta.shape or grp.rows or grp.reduce or grp.numpy_loops:
            return False
        mine = {n.out for n in grp.nodes}
        if any(n.out not in mine and any(r.index in mine for r in node_refs(n))
               for n in graph.nodes[:position[node.out]]):
            return False    # read before the write: the group must run before that reader
        reads = {r for n in grp.nodes for r in node_refs(n) if r.index not in mine}
        if view_root(dest) in {view_root(r) for r in reads - {dest}}:
            return False    # views of one array (`u[1:-1] = u[:-2] + u[2:]`): the kernel
            # would hand every call to NumPy; its temporary and setitem are cheaper
        closed.update(find(x) for x in groups)
        member_of[node.out] = g
        grp.nodes.append(fake)
        grp.ops[node.out] = op
        grp.into[node.out] = dest
        grp.written[node.out] = node
        return True

    def view_root(ref):
        """The value `ref` is a view of, through indexing in the graph, and through writes,
        whose value is their destination (`t = np.multiply(x, y, out=A)` is A, as is the
        value of `A += v`)."""
        while ref.index in producer:
            n = producer[ref.index]
            out = dict(n.kwargs).get("out")
            out = out[0] if type(out) is tuple and len(out) == 1 else out
            if n.fn is operator.getitem or id(n.fn) in _WRITE_OPS:
                out = n.args[0]
            if not isinstance(out, Ref):
                return ref
            ref = out
        return ref

    unused = unused_values(graph)
    position = {n.out: k for k, n in enumerate(graph.nodes)}
    warns = {n.out: position[n.out] for n in graph.nodes if may_warn(graph, n)}
    producer = {n.out: n for n in graph.nodes}
    for node in graph.nodes:
        if join_write(node):
            continue
        op = elementwise_op(graph, node, exact, numpy_loops)
        red = None if op is not None else reduction_op(graph, node, exact)
        refs = node_refs(node)
        if node.out in unused:      # kept only for its warnings: NumPy computes it
            op = red = None
        if op is None and red is None and row_expand(graph, node) and refs[0].index in row_values:
            op = "expand"       # a row value read as keepdims: a row node (or nothing)
        if op is None and red is None:
            left_to_numpy(node, refs)
            continue
        row = False
        if red is not None:     # a reduction joins the group of its (full) operand
            src = node.args[0]
            shape = graph.meta(src).shape
            g = open_group(src)
            row = red[1] == "last" or len(shape) == 1
            # only a full value of the group: a reduction's result (`a.sum(keepdims=True)`)
            # exists once its loop is done, after every element it would be reduced at
            cands = {g} if g is not None and src.index not in row_values and \
                src.index not in whole_values else set()
            if src.index not in member_of:      # an input: join a group that reads it
                cands = {find(member_of[n.out]) for grp in groups.values() for n in grp.nodes
                         if src in node_refs(n) and grp.shape == shape
                         and find(member_of[n.out]) not in closed}
                cands = set(sorted(cands)[-1:])
            cands = {c for c in cands if not (groups[c].rows if not row else has_whole(c))}
            if exact and not row:
                # an exact float sum over all axes runs in flat chunks, a column reduction
                # row by row: in one group the kernel would hand every call back
                if flat_sum(node.out, red):
                    cands = {c for c in cands if not any(
                        isinstance(m[1], tuple) for m in groups[c].reduce.values())
                        and not broadcast_reads(group_reads(c), shape, {c})}
                elif isinstance(red[1], tuple):
                    cands = {c for c in cands if not any(
                        flat_sum(o, m) for o, m in groups[c].reduce.items()
                        if o not in groups[c].rows)}
        else:
            cands = row_candidates(node, refs)
            row = bool(cands)
            shape = groups[next(iter(cands))].shape if row else node.meta.shape
            if not row and op == "expand":      # its row value's group is closed
                left_to_numpy(node, refs)
                continue
            if not row:
                cands = full_candidates(refs, shape)
        if row and red is None and _costly_per_row(node, op, shape):
            row, shape = False, node.meta.shape         # a full node of a group of its own
            cands = full_candidates(refs, shape)
        if row and red is None and uses_numpy_loop(graph, node, op, exact):
            left_to_numpy(node, refs)
            continue        # NumPy's loops run over full rows only
        ext = external(node, refs, cands)
        if cands and warns_late(cands, closure(ext)):
            # join only the groups whose warnings may come after those it reads
            cands = {c for c in cands if not warns_late({c}, closure(ext))}
            ext = external(node, refs, cands)
        if cands and (closure(ext) & cands or warns_late(cands, closure(ext))):
            # Merging would need a cycle, or give warnings in another order than NumPy's:
            # start a new group instead.
            if row:
                left_to_numpy(node, refs)
                continue
            cands = set()
            ext = deps_of(refs)
        if cands:
            root = min(cands)
            for c in cands - {root}:
                parent[c] = root
                g = groups.pop(c)
                groups[root].nodes.extend(g.nodes)
                groups[root].ops.update(g.ops)
                groups[root].reduce.update(g.reduce)
                groups[root].rows.update(g.rows)
                groups[root].numpy_loops.update(g.numpy_loops)
                gdeps.pop(c)
        else:
            root = new_group(shape)
        gdeps[root] = {find(x) for x in ext} - {root}
        member_of[node.out] = root
        grp = groups[root]
        grp.nodes.append(node)
        if op == "astype" and graph.meta(refs[0]).dtype in FLOAT and node.meta.dtype in INTEGER:
            casts.add(node.out)
        if red is None:
            grp.ops[node.out] = op
            if not row and uses_numpy_loop(graph, node, op, exact):
                grp.numpy_loops.add(node.out)
        else:
            grp.ops[node.out], grp.reduce[node.out] = red[0], red
        if row:
            grp.rows.add(node.out)
            row_values.add(node.out)
        elif red is not None:
            whole_values.add(node.out)

    # Members in node order; stages, inputs and outputs.
    order = {n.out: k for k, n in enumerate(graph.nodes)}
    used_outside: set = {r.index for r in graph.outputs}
    result = []
    for grp in groups.values():
        grp.nodes.sort(key=lambda n: order[n.out])
        mine = {n.out for n in grp.nodes}
        for other in graph.nodes:
            if other.out not in mine:
                used_outside.update(r.index for r in node_refs(other) if r.index in mine)
        for n in grp.nodes:
            inner = [r for r in node_refs(n) if r.index in mine]
            level = max((grp.stage[r.index] for r in inner), default=0)
            # a row reduction, or NumPy's loop over a row of member values, needs the loop
            # computing its operand done: its readers run in the next loop
            grp.stage[n.out] = level + (n.out in grp.reduce and n.out in grp.rows) + (
                n.out in grp.numpy_loops and bool(inner))
        sink(grp)
        result.append(grp)
    for k, grp in enumerate(sorted(result, key=lambda g: order[g.nodes[0].out])):
        grp.id = k
        mine = {n.out for n in grp.nodes}
        seen = set()
        for n in grp.nodes:
            for r in node_refs(n):
                if r.index not in mine and r.index not in seen:
                    seen.add(r.index)
                    grp.inputs.append(r)
        grp.inputs += [d for d in grp.into.values() if d not in grp.inputs]
        grp.outputs = [Ref(n.out) for n in grp.nodes
                       if n.out in used_outside and n.out not in grp.into]
    return sorted(result, key=lambda g: g.id)


def sink(grp: FusionGroup) -> None:
    """Moves each full value to the loop of its first reader when every member reading it
    runs in a later loop than its operands need (the stages above are the earliest
    possible). Computed early, the value was written into a row-sized scratch buffer and
    read back there: tanh(x * 0.5) * 2 + sqrt(abs(x)) - x * x carried sqrt(abs(x)) and
    x * x past NumPy's tanh loop. Each value is still computed once, from the same
    operands."""
    readers: dict = {}
    for n in grp.nodes:
        for r in node_refs(n):
            readers.setdefault(r.index, []).append(n)
    for n in reversed(grp.nodes):
        users = readers.get(n.out, [])
        if not users or n.out in grp.reduce or n.out in grp.rows or \
                n.out in grp.numpy_loops or n.out in grp.into or \
                any(u.out in grp.rows and u.out not in grp.reduce for u in users):
            continue
        # a NumPy loop reads its operands' rows before loop stage[u]
        first = min(grp.stage[u.out] - 1 if u.out in grp.numpy_loops else grp.loop_of(u)
                    for u in users)
        grp.stage[n.out] = max(grp.stage[n.out], first)


def unused_values(graph: Graph) -> set:
    """Value numbers nothing reads (no node, no output): the nodes dce keeps for the warnings
    they may give. Fused, their C would be dropped by the compiler, warnings and all."""
    read = {r.index for r in graph.outputs}
    for node in graph.nodes:
        read.update(r.index for r in node_refs(node))
    return {n.out for n in graph.nodes if n.out not in read and writes_nothing(n)}


def schedule(graph: Graph, groups: list) -> list:
    """Groups and remaining nodes in an order that respects data flow and effects.

    Each unit runs after the units producing its inputs; a node with effects runs after every
    unit that precedes it in the graph and before every unit that follows it.
    """
    owner = {}
    units = []
    for grp in groups:
        for n in grp.members():
            owner[n.out] = len(units)
        units.append(grp)
    order = {n.out: k for k, n in enumerate(graph.nodes)}
    for node in graph.nodes:
        if node.out not in owner:
            owner[node.out] = len(units)
            units.append(node)

    def span(u):
        outs = [n.out for n in u.members()] if isinstance(u, FusionGroup) else [u.out]
        return min(order[o] for o in outs), max(order[o] for o in outs)

    spans = [span(u) for u in units]
    succ = [set() for _ in units]
    for k, u in enumerate(units):
        members = u.members() if isinstance(u, FusionGroup) else [u]
        for n in members:
            # a recomputed value (graph/remat.py) after its original, whose warnings it skips
            of = getattr(n.fn, "of", None) if getattr(n.fn, "recomputes", None) else None
            for src in [owner.get(r.index) for r in node_refs(n)] + [owner.get(of)]:
                if src is not None and src != k:
                    succ[src].add(k)
    for k, u in enumerate(units):
        # a write: a node, or a group's last member (a group never spans one: find_groups)
        at = spans[k][1] if isinstance(u, FusionGroup) and u.into else \
            spans[k][0] if not isinstance(u, FusionGroup) and not writes_nothing(u) else None
        if at is not None:
            for j, (lo, hi) in enumerate(spans):
                if j != k and hi < at:
                    succ[j].add(k)
                elif j != k and lo > at:
                    succ[k].add(j)
    indeg = [0] * len(units)
    for s in succ:
        for k in s:
            indeg[k] += 1
    ready = [(spans[k][0], k) for k in range(len(units)) if indeg[k] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, k = heapq.heappop(ready)
        out.append(units[k])
        for j in succ[k]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(ready, (spans[j][0], j))
    if len(out) != len(units):
        raise AssertionError("fusion produced a cycle")
    return out
