"""A list whose length changes between calls, handed to NumPy -> graph nodes on the list.

The runtime makes a list source dynamic once its length changed between calls (runtime.py
changed_dims): wrap.py then guards only its type, and reads it as a DynamicListValue, whose
items capture never reads (reading one, iterating, indexing break the graph there, as
before). Library code hands such lists to NumPy (statistics of a list of values,
polynomials on a list of coefficients, distances between lists of points); what capture
can say of those uses exactly becomes graph nodes on the list itself, a graph input read
from its source:

- `len(lst)`: a `len` node, an int known at run time;
- `np.array(lst)`, `np.asarray(lst)` (and asanyarray, ascontiguousarray), `lst` where a
  NumPy function with a rule takes an array (`np.mean(lst)`, `np.dot(lst, x)`), and `lst`
  as an operand of a binary operator beside an array (`x * lst`, `lst - x`): an asarray
  node, NumPy's own conversion of the list where the program makes it, one per use as in
  plain Python (no two uses share an array a write could reach). Its dtype is what the
  items' exact types tell (guards.items_dtype: float64, int64 or bool), guarded by them
  (the "items" guard: a scan of the item types in C, no conversion), and its one dim is
  dynamic. Items that tell nothing (arrays, nested lists, np.float32, ints past int64)
  break there, as before; `dtype=` other than that one is NumPy's conversion of the list
  to it (np.array(lst, dtype=d): its casts and errors are NumPy's).
- `lst` handed to a call without a rule that capture knows to be pure (np.polyval,
  np.median...: an opaque node): the list itself, as plain Python hands it; the node
  checks its result at run time.

The graph reads the list when the node runs, while the stores capture records
(`lst.append(x)`) are made after the graph: a use after an append to this list in the same
capture, or to any list read from a source (it may be this one), breaks there, as before;
so does a use in a loop node's body. Capture knows no other way to change a list in a
graph (another method, an item store, a call that may write break first), and a loop nest
appending to a caller's list ends the graph after its loop.
"""
from __future__ import annotations

import inspect
import sys

import numpy as np

from pijit.capture import numpy_rules
from pijit.capture.graph_break import Reason
from pijit.capture.opaque import opaque_call
from pijit.capture.values import ConstValue, GraphValue
from pijit.capture.wrap import DynamicListValue
from pijit.guards import items_dtype
from pijit.graph.ir import Meta

_INT = Meta(int, np.dtype(int), ())
_CONVERSIONS = (np.array, np.asarray, np.asanyarray, np.ascontiguousarray)
# NumPy callables with a rule that read a list otherwise than as np.asarray of it: a
# sequence of arrays to join, a scalar type (np.float64(lst) is an array, but its rule
# is the scalar's), a conversion with options (np.array(lst, copy=False) raises). They
# break on a dynamic list, as before.
_NOT_AS_ARRAY = frozenset(id(f) for f in _CONVERSIONS + (
    np.concatenate, np.stack, np.hstack, np.vstack, np.column_stack, np.bool_, np.int8,
    np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.float16,
    np.float32, np.float64, np.longdouble, np.complex64, np.complex128))


def among(args, kwargs) -> bool:
    return any(type(v) is DynamicListValue for v in args) or \
        any(type(v) is DynamicListValue for v in kwargs.values())


def special(cap, target, args: list, kwargs: dict):
    """The value of target(*args, **kwargs) when it is len or a conversion of a dynamic
    list (module docstring), else None."""
    if not args or type(args[0]) is not DynamicListValue:
        return None
    if target is len and len(args) == 1 and not kwargs:
        return GraphValue(cap.graph.add_node("len", len, (_input(cap, args[0]).ref,), {},
                                             _INT, cap.lineno), _INT)
    if any(target is f for f in _CONVERSIONS):
        return _conversion(cap, target, args, kwargs)
    if target is sum and len(args) == 1 and not kwargs:
        return _python_sum(cap, args[0])
    return None


def substitute(cap, target, args: list, kwargs: dict, pure: bool):
    """(args, kwargs) with the dynamic lists among them made graph values, when target is
    a NumPy function with a rule (asarray nodes) or, without a rule, pure (pure: call_table
    says so; the lists themselves); else None, and the call goes on as before (reading the
    list's items breaks). An `out` argument stays the list (NumPy refuses a list there,
    and would write into an asarray node's array)."""
    rule = numpy_rules.lookup_call(target)
    if rule is not None and _numpy(target) and id(target) not in _NOT_AS_ARRAY:
        make = _asarray
    elif rule is None and pure:
        make = _input
    else:
        return None
    first_out = _first_out(target)
    return ([make(cap, v) if type(v) is DynamicListValue and i < first_out else v
             for i, v in enumerate(args)],
            {k: make(cap, v) if type(v) is DynamicListValue and k != "out" else v
             for k, v in kwargs.items()})


def operands(cap, values: tuple) -> tuple:
    """The operands of a binary operator with a dynamic list beside an array made asarray
    nodes: the array's operator (which Python tries before the list's concatenation or
    repetition) is NumPy's ufunc, converting the list. Others unchanged (a list beside a
    scalar, a NumPy scalar included, breaks as before)."""
    if len(values) == 2 and any(isinstance(v, GraphValue) and v.meta.is_array
                                for v in values):
        return tuple(_asarray(cap, v) if type(v) is DynamicListValue else v for v in values)
    return values


def _first_out(target) -> int:
    """The position of target's first output argument (a ufunc's after its inputs, else
    the parameter named out; past its positional parameters when out is keyword-only),
    or 0 when its parameters cannot be read."""
    if isinstance(target, np.ufunc):
        return target.nin
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return 0
    position = 0
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            return sys.maxsize
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) or p.name == "out":
            break
        position += 1
    return position


def _numpy(target) -> bool:
    """A NumPy function or ufunc (not a builtin or math function, which a list does not
    convert: abs(lst) raises)."""
    module = getattr(target, "__module__", None) or ""
    return isinstance(target, np.ufunc) or module == "numpy" or module.startswith("numpy.")


def _conversion(cap, target, args, kwargs):
    """np.array(lst), np.asarray(lst)...: a fresh array (plain Python converts at each
    call too); with a `dtype=` other than the items' dtype, NumPy converts the list to it."""
    if len(args) != 1 or set(kwargs) - {"dtype"}:
        return None
    lst = args[0]
    dtype = kwargs.get("dtype", ConstValue(None))
    if not isinstance(dtype, ConstValue):
        return None
    if dtype.value is None:
        return _asarray(cap, lst)
    try:
        dtype = np.dtype(dtype.value)
    except TypeError:
        return None
    if dtype.kind not in "biufc" or not dtype.isnative:
        return None
    source = _input(cap, lst)
    if dtype == _items_dtype(cap, lst):
        return _asarray(cap, lst)
    meta = Meta.array((None,), dtype)
    ref = cap.graph.add_node("array", np.array, (source.ref,), {"dtype": dtype}, meta,
                             cap.lineno)
    return GraphValue(ref, meta)


def _python_sum(cap, lst):
    """sum(lst) of a list whose items tell float64 (floats, np.float64s, ints beside them):
    Python's own sum of the list, called by the graph where the program calls it (3.12+
    sums floats compensated), as an opaque node checking its result's type (float, or
    np.float64 when the first item is one; the int 0 of an empty list: a mismatch, which
    runs the call plain). Other lists (ints, whose sum may leave int64) break, as before."""
    if items_dtype(lst.obj) != np.float64:
        return None
    cap.builder.guard(lst.source, "items", np.dtype(np.float64))
    return opaque_call(cap, sum, [_input(cap, lst)], {}, "pure")


def _asarray(cap, lst) -> GraphValue:
    source = _input(cap, lst)       # (first: a use that breaks there guards no items)
    meta = Meta.array((None,), _items_dtype(cap, lst))
    ref = cap.graph.add_node("asarray", np.asarray, (source.ref,), {}, meta, cap.lineno)
    return GraphValue(ref, meta)


def _items_dtype(cap, lst) -> np.dtype:
    dtype = items_dtype(lst.obj)
    if dtype is None:
        cap.unsupported(Reason.UNSUPPORTED_VALUE, "np.asarray of a list whose length changes "
                        "between calls, of items that do not tell its dtype")
    cap.builder.guard(lst.source, "items", dtype)
    return dtype


def _input(cap, lst) -> GraphValue:
    """The list as a graph input, where the graph may read it (module docstring)."""
    if cap.bodies:
        cap.unsupported(Reason.UNSUPPORTED_VALUE, "a list whose length changes between calls, "
                        "in a loop node's body")
    if cap.effects.appended(lst):
        cap.unsupported(Reason.SIDE_EFFECT, "reads a list whose length changes between calls "
                        "after an append to it (made after the graph)")
    cap.effects.check_list_read(lst)
    return cap.builder.list_input(lst.source)
