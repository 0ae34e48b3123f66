"""`out.append(x)` in a nest: a list the loop only appends scalars (or tuples of scalars) to.

The list passes as the nest's arrays do: the object itself (its identity kept: the caller's,
or the one the graph built for `out = []`), after the arrays. The kernel appends to it at the
append, each item boxed as plain Python has it (a Python int for a range's index,
np.float64 for an element of a float64 array, a tuple of those), so the list is plain
Python's at every moment: a hand-over (or an exception) at a later iteration sees it as
Python would, with nothing to flush. (A C buffer flushed at the exit and at each hand-over
was the other design: it boxes the same items, only later, and must then flush on every
path out.) An allocation that fails hands over at the append, where Python appends again
(or raises MemoryError itself). Any other use of the list in the loop (len, indexing, `in`,
iteration, another method, a rebinding, passing it on) is refused by recognise.py, which
knows the list only as a receiver of `.append`.

After the loop the list is a graph value (AppendedList) whose length and items are known
only at run time: the graph goes on after the loop. What it can say of the list exactly
becomes graph nodes (`on_graph`): `len(out)`, `np.array(out)` / `np.asarray(out)` when every
item is a Python float or an np.float64 (float64 whatever the length: an empty list gives
float64 too), and with a numeric `dtype=` when every item is a number (1-D of that dtype).
Anything else (`np.array` of ints, whose empty list is float64; `sum(out)`, an int 0 when it is
empty; indexing, iteration, methods) refuses as any value of dtype object does: a graph break
at that use, the code from there on reading the real list.

The append is an effect: a pass that runs ops twice, out of order or on a path not taken
(ifconvert's selects, vectorize's and lanes' passes, exit_checks' rerun from a loop's start)
leaves loops with appends alone, as it does loops with stores.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pijit.capture.values import ConstValue, GraphValue
from pijit.graph.ir import Meta
from pijit.loopnest import types as T
from pijit.loopnest.ir import Const, Op
from pijit.loopnest.types import Unsupported

# A list's entry in Nest.arrays (in place of (dtype, ndim)), and its graph value's Meta
LIST = ("list", 0)
LIST_META = Meta(list, np.dtype(object), ())


@dataclass(eq=False)
class AppendedList(GraphValue):
    """A list a nest appended to, after the loop. float64: every item (those it held before
    the loop too) is a Python float or an np.float64; numbers: every item is a number (no
    tuple), so np.array(lst, dtype=d) is 1-D of its length."""
    float64: bool = False
    numbers: bool = False


def item_types(nest, name: str, before) -> tuple:
    """(float64, numbers) of the list `name` the nest appends to (AppendedList): `before`,
    the list's Value before the loop, a ListValue of the frame's or an earlier nest's
    AppendedList."""
    if isinstance(before, AppendedList):
        float64, numbers, types = before.float64, before.numbers, []
    else:
        float64, numbers = True, True
        types = [T.of_value(v.value) if isinstance(v, ConstValue) else
                 T.of_pytype(v.meta.pytype, v.meta.dtype) if not v.meta.is_array else None
                 for v in before.items]     # (constants and graph values: capture.py)
    for block in nest.blocks:
        for op in block.ops:
            if op.kind != "append" or op.args[0] != "a_" + name:
                continue
            if op.op == "tuple":
                return False, False
            x = op.args[1]
            types += [x.type] if isinstance(x, Const) else list(nest.types[x])
    if any(t is None for t in types):       # (not `None in`: a dtype == None is float64)
        return False, False
    return float64 and all(t is T.FLOAT or T.is_np(t) and t == T.F64 for t in types), numbers


def _length(lst: list) -> int:
    return len(lst)


def on_graph(cap, target, args: list, kwargs: dict):
    """The value of target(*args, **kwargs) when the call reads an AppendedList and its
    result is exactly known: len() and np.array/np.asarray (module docstring); else None."""
    if not args or not isinstance(args[0], AppendedList):
        return None
    lst = args[0]
    if target is len and len(args) == 1 and not kwargs:
        meta = Meta(int, np.dtype(int), ())
        return GraphValue(cap.graph.add_node("len", _length, (lst.ref,), {}, meta,
                                             cap.lineno), meta)
    if target not in (np.array, np.asarray) or len(args) != 1 or set(kwargs) - {"dtype"}:
        return None
    if "dtype" in kwargs:
        dtype = kwargs["dtype"]
        if not isinstance(dtype, ConstValue) or dtype.value is None or not lst.numbers:
            return None
        try:
            dtype = np.dtype(dtype.value)
        except TypeError:
            return None
        if dtype not in T.DTYPES:
            return None
    elif lst.float64:
        dtype = T.F64
    else:
        return None
    meta = Meta.array((None,), dtype)
    ref = cap.graph.add_node(target.__name__, np.array, (lst.ref,), {"dtype": dtype}, meta,
                             cap.lineno)
    return GraphValue(ref, meta)


def new_list(*items) -> list:
    """The graph node of `out = [...]` before a nest appending to it: a new list each call."""
    return list(items)


def append(walk, block, stack, pos, name: str, args: list):
    """The walk's CALL of `name.append` with `args` (stack items): an append op, None (the
    call's result, which only POP_TOP may take) pushed; the block to continue in."""
    if len(args) != 1:
        raise Unsupported(f"{name}.append() of {len(args)} arguments")
    item = args[0]
    parts = item[1] if item[0] == "tuple" else [item]
    if not parts or any(p[0] != "v" for p in parts):
        raise Unsupported(f"appending a {item[0]} that is not a scalar or a tuple of scalars")
    operands = []
    for k, (_, x) in enumerate(parts):
        if isinstance(x, Const):        # boxed from a variable: a constant of its type
            var = f"t{pos}a{k}"
            walk.define(var, (x.type,))
            block = walk.emit(block, Op("copy", var, (x,)))
            x = var
        operands.append(x)
    block = walk.emit(block, Op("append", None, ("a_" + name,) + tuple(operands),
                                "tuple" if item[0] == "tuple" else ""))
    stack.append(("none",))
    return block


def python_line(op, operand) -> str:
    items = ", ".join(map(operand, op.args[1:]))
    return f"{op.args[0]}.append(({items},))" if op.op == "tuple" else \
        f"{op.args[0]}.append({items})"


def lower_c(kernel, op, bail: str) -> list:
    """The append's C: the item boxed (a tuple built), PyList_Append; a failed allocation
    clears its MemoryError and hands over (Python appends again)."""
    items = op.args[1:]

    def box(x, dst):
        if isinstance(x, Const):
            return kernel.box_as(x.type, kernel.val(x), dst)
        return kernel.box(x, dst)
    out = ["{", "    PyObject *o = NULL;"]
    if op.op == "tuple":
        out.append(f"    PyObject *tp = PyTuple_New({len(items)});")
        for k, x in enumerate(items):
            out += ["    if (tp != NULL) {"] + ["        " + s for s in box(x, "o")]
            out += [f"        if (o == NULL) Py_CLEAR(tp); else if (PyTuple_SetItem(tp, {k}, o) < 0) Py_CLEAR(tp);",
                    "    }"]
        out.append("    o = tp;")
    else:
        out += ["    " + s for s in box(items[0], "o")]
    out += ["    if (o == NULL || PyList_Append((PyObject *)d_" + op.args[0] + ", o) < 0) {",
            "        Py_XDECREF(o);",
            f"        PyErr_Clear(); {bail}",
            "    }",
            "    Py_DECREF(o);",
            "}"]
    return out
