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

The append is an effect: a pass that runs ops twice, out of order or on a path not taken
(ifconvert's selects, vectorize's and lanes' passes, exit_checks' rerun from a loop's start)
leaves loops with appends alone, as it does loops with stores.
"""
from __future__ import annotations

import numpy as np

from pijit.graph.ir import Meta
from pijit.loopnest.ir import Const, Op
from pijit.loopnest.types import Unsupported

# A list's entry in Nest.arrays (in place of (dtype, ndim)), and its graph value's Meta
LIST = ("list", 0)
LIST_META = Meta(list, np.dtype(object), ())


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
            out += [f"        if (o == NULL) Py_CLEAR(tp); else PyTuple_SET_ITEM(tp, {k}, o);",
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
