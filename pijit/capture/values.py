"""Abstract values on the simulated stack and in simulated locals.

A value is either known at capture time (ConstValue: a module, a function, a guarded Python
scalar, a dtype), a graph value known by its Meta (GraphValue: an array or scalar computed
from inputs), a container of values, or a callable built by attribute lookup (MethodValue).
"""
from __future__ import annotations

import types
from dataclasses import dataclass, field

import numpy as np

from pijit.capture.graph_break import GraphBreak, Reason
from pijit.graph.ir import Meta, Ref

# Types whose instances cannot change, so a capture-time object may be baked into code.
IMMUTABLE_TYPES = (int, float, complex, bool, str, bytes, type(None), type(Ellipsis),
                   np.generic, np.dtype, slice, range, type, types.ModuleType,
                   types.FunctionType, types.BuiltinFunctionType, np.ufunc)


def is_immutable(obj) -> bool:
    if type(obj) in (tuple, frozenset):
        return all(is_immutable(o) for o in obj)
    return isinstance(obj, IMMUTABLE_TYPES)


@dataclass(eq=False)
class Value:
    source: object = field(default=None, kw_only=True)


@dataclass(eq=False)
class ConstValue(Value):
    """A Python object known at capture time (guarded through its source if it has one)."""
    value: object


@dataclass(eq=False)
class GraphValue(Value):
    """An array or scalar computed in the graph."""
    ref: Ref
    meta: Meta


@dataclass(eq=False)
class TupleValue(Value):
    """A tuple; `cls`: the namedtuple class of a call's result that was one (NumPy's
    EighResult, SVDResult...), whose fields read its items and which residual code rebuilds."""
    items: list
    cls: type = None


@dataclass(eq=False)
class ListValue(Value):
    """A list: built by a frame being captured (`frame`, which alone may mutate it), or read
    from an input (`source`). `body`: the loop body being walked when it was built (a list
    built before a loop node's body cannot change in it)."""
    items: list
    frame: object = None
    body: object = None


@dataclass(eq=False)
class DictValue(Value):
    """A dict with constant keys: keys are Python objects, values are Values."""
    items: dict


@dataclass(eq=False)
class SliceValue(Value):
    """slice(start, stop, step) where a part is a graph scalar."""
    start: Value
    stop: Value
    step: Value


@dataclass(eq=False)
class MethodValue(Value):
    """`obj.name` about to be called: a method of a graph value or of a constant."""
    obj: Value
    name: str


@dataclass(eq=False)
class SuperValue(Value):
    """super(cls, obj) of an object read from a source (`cls` a guarded class): its
    attributes are the functions found after cls in type(obj).__mro__."""
    cls: Value
    obj: Value


@dataclass(eq=False)
class BoundValue(Value):
    """A function bound to `obj` (an attribute of a SuperValue): calling it inlines func
    with obj first."""
    func: Value
    obj: Value


@dataclass(eq=False)
class NullValue(Value):
    """A NULL on the stack: beside a callable (PUSH_NULL, LOAD_GLOBAL with the low bit; on
    which side: pijit._compat.BYTECODE.null_first), or a local an inlined comprehension
    saved while it was unbound (LOAD_FAST_AND_CLEAR)."""


@dataclass(eq=False)
class TruthValue(Value):
    """bool(value) that 3.13 makes before a jump (TO_BOOL, COMPARE_OP's bool bit), of a value
    whose truth is known only at run time: the jump breaks the graph, and residual code
    makes the bool again from the value."""
    value: Value


NULL = NullValue()


def contains_graph_value(value: Value) -> bool:
    if isinstance(value, GraphValue):
        return True
    if isinstance(value, (TupleValue, ListValue)):
        return any(contains_graph_value(v) for v in value.items)
    if isinstance(value, DictValue):
        return any(contains_graph_value(v) for v in value.items.values())
    if isinstance(value, SliceValue):
        return any(contains_graph_value(v) for v in (value.start, value.stop, value.step))
    return False


@dataclass(eq=False)
class IteratorValue(Value):
    """An iterator over items known at capture time (range, tuple, list, zip, enumerate):
    loops over it unroll. It never leaves the graph (it cannot be rebuilt as residual code)."""
    items: list
    index: int = 0
    origin: object = None       # the Value GET_ITER made it from, to rebuild it unconsumed
    call: tuple = None          # (callable, args, kwargs) of the zip/enumerate/... call that made it
    # (ListValue, its length) of each list it iterates, as GET_ITER found them: the items
    # are read then, and Python's list iterator would see the loop change the list
    lists: tuple = ()


@dataclass(eq=False)
class RangeValue(IteratorValue):
    """range(start, stop, step) with a bound known only at run time (a graph int). A `for`
    loop over it becomes a loop node (loop_node.py); it cannot be unrolled or iterated at
    capture time. Residual code rebuilds it by calling range again (the `call` it keeps).
    bounds: the Values start, stop, step."""
    bounds: list = None


@dataclass(eq=False)
class CellRef(Value):
    """A closure cell of a frame being captured (LOAD_CLOSURE): reads and writes through it
    go to that frame's local `name`."""
    frame: object
    name: str


@dataclass(eq=False)
class FunctionValue(Value):
    """A function made during capture (MAKE_FUNCTION: lambdas, comprehensions, nested defs).
    It can be called (and is inlined); it cannot leave the graph."""
    code: object
    defaults: tuple = ()
    kwdefaults: dict = None
    closure: tuple = ()


def describe(value) -> str:
    """What the user's object is, for graph-break reasons (never an internal class name)."""
    if isinstance(value, GraphValue):
        return f"array {value.meta}" if value.meta.is_array else value.meta.pytype.__name__
    if isinstance(value, ConstValue):
        return type(value.value).__name__
    if isinstance(value, (SuperValue, BoundValue)):
        return "super object" if isinstance(value, SuperValue) else "bound method"
    obj = getattr(value, "obj", None)
    if obj is not None and not isinstance(value, MethodValue):
        return type(obj).__name__
    if isinstance(value, MethodValue):
        return f"attribute {value.name!r}"
    names = ((TupleValue, "tuple"), (ListValue, "list"), (DictValue, "dict"),
             (SliceValue, "slice"), (IteratorValue, "iterator"), (NullValue, "NULL"),
             (FunctionValue, "function"), (CellRef, "cell"), (TruthValue, "bool"))
    return next((name for cls, name in names if isinstance(value, cls)), type(value).__name__)


def infer_arg(value: Value):
    """A Value as a rule's infer() sees it: Metas for graph values, objects for constants."""
    if isinstance(value, GraphValue):
        return value.meta
    return _convert(value, infer_arg)


def map_graph_values(value: Value, fn):
    """infer_arg with fn(graph_value) for the graph values inside."""
    if isinstance(value, GraphValue):
        return fn(value)
    return _convert(value, lambda v: map_graph_values(v, fn))


def node_arg(value: Value):
    """A Value as a node argument: Refs for graph values, objects for constants."""
    if isinstance(value, GraphValue):
        return value.ref
    return _convert(value, node_arg)


def _convert(value: Value, leaf):
    if isinstance(value, ConstValue):
        return value.value
    if isinstance(value, TupleValue):
        return tuple(leaf(v) for v in value.items)
    if isinstance(value, ListValue):
        return [leaf(v) for v in value.items]
    if isinstance(value, DictValue):
        return {k: leaf(v) for k, v in value.items.items()}
    if isinstance(value, SliceValue):
        return slice(leaf(value.start), leaf(value.stop), leaf(value.step))
    raise GraphBreak(Reason.UNSUPPORTED_VALUE,
                     f"a {describe(value)} cannot be an argument of a NumPy operation")


def distinct(values):
    """`values` without repeats of one object, in first-seen order (at C speed): a list
    built as [True] * n holds one value n times, and walks over captured values visit it
    once (sieve_list's n = 60001 cost 40 ms a capture, walked item by item)."""
    return dict(zip(map(id, values), values)).values()
