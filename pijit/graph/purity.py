"""Which nodes are pure (no effect but their value), and which write into arrays, for DCE,
CSE, fusion and the backends' scheduling.

Only ops known to be pure are: NumPy ufuncs (without out=), operators that are not in-place,
and the reductions and methods listed here. Everything else is treated as having effects;
loop nodes always are (opaque: one node, whatever their body does).

Fusion needs less: a fused group may move across a node that writes no array (`writes_nothing`:
pure, or indexing, views, shape changes, creation, copies, or an opaque call of a pure
function, whose fn says so). Those are not all pure for DCE and CSE (a dropped `x[10]` would
drop its IndexError, a shared view would be one object), and neither are pure nodes that may
warn (`may_warn`: dropping or sharing them would drop NumPy's warnings).
"""
from __future__ import annotations

import builtins
import operator

import numpy as np

from pijit.graph.ir import LoopOp, arg_refs, node_refs

_INPLACE = frozenset(id(f) for f in (
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
    operator.imod, operator.ipow, operator.imatmul, operator.ilshift, operator.irshift,
    operator.iand, operator.ior, operator.ixor))

_PURE = frozenset(id(f) for f in (
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
    operator.mod, operator.pow, operator.neg, operator.pos, operator.lt, operator.le,
    operator.eq, operator.ne, operator.gt, operator.ge, operator.and_, operator.or_,
    operator.xor, operator.invert, operator.matmul, builtins.abs,
    np.sum, np.mean, np.max, np.min, np.amax, np.amin, np.prod, np.where, np.clip,
    np.ndarray.sum, np.ndarray.mean, np.ndarray.max, np.ndarray.min, np.ndarray.prod,
    np.ndarray.astype, np.ndarray.clip, np.matmul, np.dot))


_WRITES_NOTHING = {id(f) for f in (
    operator.getitem, np.concatenate, np.stack, np.hstack, np.vstack, np.reshape,
    np.ndarray.reshape, np.transpose, np.ndarray.transpose, np.swapaxes, np.moveaxis,
    np.expand_dims, np.squeeze, np.ravel, np.ndarray.ravel, np.ndarray.flatten, np.copy,
    np.ndarray.copy, np.broadcast_to, np.argmax, np.argmin, np.ndarray.argmax,
    np.ndarray.argmin, np.arange, np.linspace, np.zeros, np.ones, np.empty, np.full,
    np.zeros_like, np.ones_like, np.empty_like, np.full_like)}


# Ops that never emit NumPy's floating-point or overflow warnings, whatever their operands.
_QUIET = {id(f) for f in (
    operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge,
    operator.and_, operator.or_, operator.xor, operator.invert, operator.pos,
    np.less, np.less_equal, np.equal, np.not_equal, np.greater, np.greater_equal,
    np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.invert, np.positive,
    np.logical_and, np.logical_or, np.logical_xor, np.logical_not,
    np.maximum, np.minimum, np.fmax, np.fmin, np.where, np.clip, np.ndarray.clip,
    np.isnan, np.isinf, np.isfinite, np.signbit, np.copysign, np.floor, np.ceil, np.trunc,
    np.rint, np.max, np.min, np.amax, np.amin, np.ndarray.max, np.ndarray.min, np.any, np.all,
    np.ndarray.any, np.ndarray.all)}
# Quiet on arrays (and floats); NumPy's scalar math warns when they overflow an integer
# (-np.int8(-128), np.uint8(255) + 1): the integer ops of integer-only operands.
_INT_SCALAR_OVERFLOW = {id(f) for f in (
    operator.add, operator.sub, operator.mul, operator.neg, builtins.abs, operator.pow,
    np.add, np.subtract, np.multiply, np.negative, np.absolute, np.square, np.power)}
# Integer array ops (ufunc loops) that wrap around silently.
_INT_ARRAY_QUIET = _INT_SCALAR_OVERFLOW | {id(f) for f in (
    operator.lshift, operator.rshift, np.left_shift, np.right_shift, np.ndarray.astype)}


_SIGN = {id(f) for f in (operator.neg, builtins.abs, np.negative, np.absolute)}


def may_warn(graph, node) -> bool:
    """Whether evaluating the node may emit a NumPy warning (divide by zero, overflow,
    invalid value, in scalar math too): passes keep such a node even when its value is
    unused (dce), and do not merge two of them (cse), so the warnings are NumPy's, as many
    as NumPy gives."""
    fid = id(node.fn)
    if fid in _WRITES_NOTHING or fid in _QUIET or _recomputed(node):
        return False
    metas = [graph.meta(r) for r in node_refs(node)]
    if isinstance(node.meta, tuple) or any(isinstance(m, tuple) for m in metas):
        return True     # an opaque call's tuple result (np.nonzero's...): NumPy's own code
    if metas and all(m.dtype.kind in "biu" for m in metas) and node.meta.dtype.kind in "biu":
        scalar_math = not any(m.is_array for m in metas)
        return fid in _INT_SCALAR_OVERFLOW if scalar_math else fid not in _INT_ARRAY_QUIET
    return fid not in _SIGN        # any other arithmetic on floats (or int / int) may warn


# Ops that raise only on shapes, dtypes or constant indices, all checked by capture when every
# shape is static (an index taken from graph data is not).
_SHAPE_CHECKED = {id(f) for f in (
    operator.getitem, np.concatenate, np.stack, np.hstack, np.vstack, np.reshape,
    np.ndarray.reshape, np.transpose, np.ndarray.transpose, np.swapaxes, np.moveaxis,
    np.expand_dims, np.squeeze, np.ravel, np.ndarray.ravel, np.ndarray.flatten, np.copy,
    np.ndarray.copy, np.broadcast_to, np.zeros, np.ones, np.empty, np.full, np.zeros_like,
    np.ones_like, np.empty_like, np.full_like)}


def register_writes_nothing(fn):
    """Declare a helper the capture puts in graphs (an attribute read such as `.T`) as
    writing no array, and raising on nothing capture does not check."""
    _WRITES_NOTHING.add(id(fn))
    _SHAPE_CHECKED.add(id(fn))
    return fn


def writes_nothing(node) -> bool:
    """True when the node writes into no array (so computations may move across it)."""
    if any(k == "out" for k, _ in node.kwargs):
        return False
    return is_pure(node) or id(node.fn) in _WRITES_NOTHING or \
        getattr(node.fn, "writes_nothing", False) is True


def is_inplace(node) -> bool:
    """An in-place operator node (`a += b`): it mutates its first argument."""
    return id(node.fn) in _INPLACE


def is_loop(node) -> bool:
    return isinstance(node.fn, LoopOp)


def mutates(node) -> bool:
    """True when the node writes into an array: in-place operators, item assignment
    (`a[k] = v`), ufuncs with out=, and loop nodes whose body does any of them."""
    if id(node.fn) in _INPLACE or node.fn is operator.setitem or \
            any(k == "out" for k, _ in node.kwargs):
        return True
    if getattr(node.fn, "writes_arrays", False):      # a loop nest (pijit.loopnest)
        return True
    return isinstance(node.fn, LoopOp) and node.fn.mutates


def is_pure(node) -> bool:
    """True when dropping or sharing this node's evaluation cannot be observed."""
    if any(k == "out" for k, _ in node.kwargs):
        return False
    return id(node.fn) in _PURE or isinstance(node.fn, np.ufunc) or _recomputed(node)


def _recomputed(node) -> bool:
    """A copy of a ufunc's node computed again for a later reader, warnings off
    (graph/remat.py: the original gives them)."""
    return isinstance(getattr(node.fn, "recomputes", None), np.ufunc)


# Reductions without an identity: they raise on an empty operand.
_NO_IDENTITY = frozenset(id(f) for f in (
    np.max, np.min, np.amax, np.amin, np.ndarray.max, np.ndarray.min, np.argmax, np.argmin,
    np.ndarray.argmax, np.ndarray.argmin))



def may_raise_on_data(graph, node) -> bool:
    """A node that writes nothing and warns of nothing yet may raise on what only the run
    time knows: a reduction without an identity whose operand may be empty (a dynamic dim;
    capture refuses a static empty one: ValueError), an index taken from graph data
    (IndexError)."""
    if node.fn is operator.getitem:
        return any(r for a in node.args[1:] for r in arg_refs(a))
    return id(node.fn) in _NO_IDENTITY and any(
        None in graph.meta(r).shape for r in node_refs(node)[:1])


_DIVISIONS = frozenset(id(f) for f in (
    operator.truediv, operator.floordiv, operator.mod, operator.pow, operator.itruediv,
    operator.ifloordiv, operator.imod, operator.ipow, np.power, np.float_power))


def may_raise(node, graph) -> bool:
    """True unless the node cannot raise at run time, given what capture checked (shapes and
    dtypes when all are static). Stores replayed after the graph (capture/side_effects.py)
    must not come before such a node. As for DCE, errors np.seterr turns warnings into are
    not counted."""
    refs = node_refs(node)
    metas = [graph.meta(r) for r in refs] + [node.meta]
    if isinstance(node.fn, LoopOp) or any(
            None in m.shape for m in metas if hasattr(m, "shape")):
        return True
    if id(node.fn) in _DIVISIONS and any(
            getattr(m, "is_pyscalar", False) or np.dtype(getattr(m, "dtype", "f8")).kind in "iub"
            for m in metas):
        return True     # ZeroDivisionError of Python numbers; integers to negative powers
    if id(node.fn) in _NO_IDENTITY and any(0 in getattr(m, "shape", ()) for m in metas):
        return True
    if node.fn in (float, complex, bool) or node.fn is int and all(
            np.dtype(m.dtype).kind in "iub" for m in metas[:-1]):
        return False    # conversions of scalars (int() of a float may meet NaN or inf)
    if id(node.fn) in _SHAPE_CHECKED:
        return node.fn is operator.getitem and any(
            r for a in node.args[1:] for r in arg_refs(a))     # indices from graph data
    # (a write into an array, in place or by item, raises on a read-only one: the caller's
    # arrays, views of them and np.broadcast_to's results may be)
    return not is_pure(node)
