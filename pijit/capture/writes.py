"""Writes into arrays: `a[key] = value` and in-place operators (`a += b`) on any array the
graph can reach (inputs, views of them, arrays read from attributes, globals, cells and
containers, temporaries) -> write nodes, kept in program order.

The nodes run NumPy's own setitem and in-place operators on the real objects, so what NumPy
decides at run time stays NumPy's: the cast on assignment, buffering of overlapping operands
(`A[1:] += A[:-1]`), writes through views into their base, two arguments that are one array,
read-only targets (ValueError), indices out of bounds (IndexError), each raised by its node at
the same point of the program, after the writes before it. graph/purity.py marks these nodes
as writes: fusion, CSE, simplification and the backends move nothing across them.

Capture checks only what it relies on afterwards (a write changes no shape or dtype) and
what it can see would raise at the write: that instruction then breaks the graph, so plain
Python raises there (an in-place ufunc's `same_kind` UFuncTypeError, a value that does not
broadcast, an index out of bounds of a static dim).

`ufunc.at(a, indices, b)` (np.add.at...) is a write node of the same kind: NumPy's own
unbuffered loop runs on the real arrays, so repeated indices apply every occurrence, and its
errors (an index out of bounds or of the wrong type, operand dtypes without a loop, a value
that does not broadcast) are raised by the node where plain Python raises them, after the
writes before it. It changes no shape or dtype of its target, so capture checks nothing
but the call's form.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

from pijit.capture import call_table, numpy_rules
from pijit.capture.graph_break import GraphBreak, Reason
from pijit.capture.index_facts import index_key
from pijit.capture.meta_rules import broadcast
from pijit.capture.values import (ConstValue, GraphValue, ListValue, TupleValue, describe,
                                  node_arg)
from pijit.graph.ir import Meta

INPLACE = {
    "add": operator.iadd, "sub": operator.isub, "mul": operator.imul,
    "truediv": operator.itruediv, "floordiv": operator.ifloordiv, "mod": operator.imod,
    "pow": operator.ipow, "matmul": operator.imatmul, "lshift": operator.ilshift,
    "rshift": operator.irshift, "and": operator.iand, "or": operator.ior, "xor": operator.ixor,
}

# What a setitem node evaluates to.
NONE_META = Meta(type(None), np.dtype(object), ())


def store_item(cap, target, key, value):
    """`target[key] = value` on an array: a setitem node."""
    if not isinstance(target, GraphValue) or not target.meta.is_array:
        cap.unsupported(Reason.SIDE_EFFECT, f"item assignment into a {describe(target)}")
    vmeta = _value_meta(cap, value)
    if vmeta.dtype.kind == "c" and target.meta.dtype.kind != "c":
        cap.unsupported(Reason.UNSUPPORTED_OP,
                        f"item assignment casts {vmeta.dtype} to {target.meta.dtype}")
    ikey = index_key(cap, target.meta, key)
    try:
        mask = _mask_of(ikey)
        if mask is not None:
            _check_mask_store(target.meta, mask, vmeta)
        else:
            _check_store(target.meta, ikey, vmeta)
    except numpy_rules.Unsupported as e:
        cap.unsupported(Reason.UNSUPPORTED_OP, f"item assignment: {e}")
    except GraphBreak:
        raise
    except Exception as e:          # the real assignment would raise: plain Python raises it
        cap.unsupported(Reason.UNSUPPORTED_OP,
                        f"item assignment would raise {type(e).__name__}: {e}")
    cap.graph.add_node("setitem", operator.setitem,
                       (target.ref, node_arg(key), node_arg(value)), {}, NONE_META, cap.lineno)


def _value_meta(cap, value) -> Meta:
    """The Meta of an assigned value: a graph value, a Python scalar, or a list/tuple of
    constants (`a[:2] = [1, 2]`)."""
    if isinstance(value, GraphValue):
        return value.meta
    if isinstance(value, ConstValue) and type(value.value) in (bool, int, float, complex):
        return Meta.of(value.value)
    if isinstance(value, (TupleValue, ListValue)) and \
            all(isinstance(v, ConstValue) for v in value.items):
        try:
            arr = np.asarray([v.value for v in value.items])
        except Exception:       # noqa: BLE001 - ragged or odd items: plain Python decides
            arr = None
        if arr is not None and arr.dtype.kind in "biufc":
            return Meta.array(arr.shape, arr.dtype)
    cap.unsupported(Reason.UNSUPPORTED_VALUE, f"assigning a {describe(value)} into an array")


def _mask_of(key):
    """The boolean-array Meta of a key `m` or `(m,)`, else None (other keys containing one
    are refused by the index rule)."""
    if type(key) is tuple and len(key) == 1:
        key = key[0]
    if type(key) is Meta and key.is_array and key.dtype.kind == "b":
        return key
    return None


def _check_store(target: Meta, key, vmeta: Meta):
    """The value broadcasts to target[key] (which the index rule computes, raising as
    NumPy would for an index out of bounds of a static dim)."""
    view = numpy_rules.lookup_operator("getitem").infer((target, key), {})
    shape = vmeta.shape
    view_shape = view.shape if view.is_array else ()
    while len(shape) > len(view_shape) and shape[0] == 1:
        shape = shape[1:]           # NumPy drops the value's leading 1s
    if broadcast(view_shape, shape) != view_shape:
        if None in view_shape:      # NumPy decides at run time; capture cannot say
            raise numpy_rules.Unsupported(f"a value of shape {vmeta.shape} into items of "
                                          f"shape {view_shape}")
        raise ValueError(f"could not broadcast input array from shape {vmeta.shape} "
                         f"into shape {view_shape}")


def _check_mask_store(target: Meta, mask: Meta, vmeta: Meta):
    """`a[m] = v`: m covers a's leading dims; how many elements it selects is known only at
    run time, so the value is a scalar (any count) or has one element per selected item
    (NumPy checks the count, and dynamic dims, at run time: its node raises as NumPy does)."""
    lead = target.shape[:mask.ndim]
    if mask.ndim > target.ndim or any(
            m is not None and t is not None and m != t for m, t in zip(mask.shape, lead)):
        raise IndexError(f"boolean index did not match indexed array; dimension is "
                         f"{lead}, but corresponding boolean dimension is {mask.shape}")
    rest = target.shape[mask.ndim:]
    if vmeta.ndim > 1 + len(rest):
        raise ValueError("the value has more dimensions than the masked items")
    if vmeta.ndim > 1 and broadcast(rest, vmeta.shape[1:]) != rest:
        raise ValueError(f"the value of shape {vmeta.shape} does not broadcast to the items "
                         f"of shape {rest}")


def inplace(cap, name, left: GraphValue, right):
    """`left <op>= right` on an array: an in-place operator node, whose value is `left`
    itself (the same object)."""
    rule = numpy_rules.lookup_operator(name)
    result = cap.add_op(rule, (left, right), {})      # infers dtype/shape, raises if invalid
    if result.meta.shape != left.meta.shape:
        cap.unsupported(Reason.UNSUPPORTED_OP, f"in-place {name} would broadcast the target")
    if not np.can_cast(result.meta.dtype, left.meta.dtype, casting="same_kind"):
        cap.unsupported(Reason.UNSUPPORTED_OP,
                        f"in-place {name} cannot cast {result.meta.dtype} to {left.meta.dtype}")
    # Replace the out-of-place node just recorded by the in-place one.
    node = cap.graph.nodes.pop()
    ref = cap.graph.add_node("i" + name, INPLACE[name], node.args, dict(node.kwargs),
                             left.meta, node.lineno)
    return GraphValue(ref, left.meta)


@dataclass(frozen=True, eq=False)
class UfuncAt:
    """The fn of a `ufunc.at` node: calls NumPy's `ufunc.at` on the real arrays.
    graph/purity.py reads writes_arrays: the node writes into its first argument."""
    ufunc: np.ufunc
    writes_arrays = True

    def __call__(self, *args):
        return self.ufunc.at(*args)

    def __repr__(self):
        return f"{self.ufunc.__name__}.at"


def ufunc_at(cap, ufunc: np.ufunc, args: list, kwargs: dict):
    """`ufunc.at(a, indices[, b])` on an array `a` of the graph: a write node into `a`, in
    program order; its value is None, as NumPy's."""
    name = f"{ufunc.__name__}.at"
    if not call_table.known_ufunc(ufunc):
        cap.unsupported(Reason.UNSUPPORTED_CALL, f"{name} of a ufunc that calls Python code")
    if kwargs or len(args) != ufunc.nin + 1 or ufunc.nout != 1:
        # NumPy raises (TypeError, ValueError) before writing anything: plain Python does
        cap.unsupported(Reason.UNSUPPORTED_CALL, f"{name} with {len(args)} positional and "
                        f"{len(kwargs)} keyword arguments")
    target = args[0]
    if not isinstance(target, GraphValue) or not target.meta.is_array:
        cap.unsupported(Reason.SIDE_EFFECT, f"{name} into a {describe(target)}")
    cap.graph.add_node(name, UfuncAt(ufunc), tuple(node_arg(a) for a in args), {}, NONE_META,
                       cap.lineno)
    return ConstValue(None)
