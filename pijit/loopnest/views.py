"""Locals bound to views inside a loop nest (`row = A[i]`, `seg = x[a:b]`) -> aliases.

`row = A[i]` makes no array: the local stands for the view, read where it is used (`row[j]`
is `A[i][j]`, `row.shape[0]` and `len(row)` the array's length on that axis, and every
array op slices.py has takes it as the view it is). Python evaluates the view's indices at
the binding, so their values are copied there (a later `i += 1` does not move the row), and
checks its integer indices there: a `vcheck` op does (C: the view's bounds; the Python form
evaluates the user's own `A[i]`, raising the IndexError plain Python raises at that line).
A local is an alias only when the loop binds it at one place and nothing reads it before
the loop or after it (recognise.alias's rules); the array itself cannot be rebound in a
nest, so the view sees every write into it, as NumPy's does.
"""
from __future__ import annotations

import builtins

from pijit import _compat
from pijit.loopnest import types as T
from pijit.loopnest.ir import Const, Op
from pijit.loopnest.slices import PASS, ArrayOp, Leaf, Slice, View, _flatten
from pijit.loopnest.types import Unsupported


def instr(walk, ins, pos, block, stack):
    """Simulate `ins` when it binds or asks the length of an aliased view; PASS otherwise."""
    name = ins.name
    if name == "STORE_FAST" and stack and stack[-1][0] == "view":
        return bind(walk, block, ins.arg, stack.pop(), pos)
    if name in ("LOAD_ATTR", "LOAD_METHOD") and stack and stack[-1][0] in ("row", "view"):
        method, attr = ins.arg if _compat.BYTECODE.attr_pair and name == "LOAD_ATTR" else \
            (name == "LOAD_METHOD", ins.arg)
        if attr != "shape" or method:
            return PASS
        stack.append(("vshape", _whole_axis(walk, stack.pop())))
        return None
    if name in ("BINARY_SUBSCR", "STORE_SUBSCR") and len(stack) >= 2 and \
            stack[-2][0] == "view" and stack[-2][1].index[0] == Slice():
        return _column_element(walk, block, pos, stack, name == "STORE_SUBSCR")
    if name == "BINARY_SUBSCR" and len(stack) >= 2 and stack[-2][0] == "vshape":
        index, (_, (arr, axis)) = stack.pop(), stack.pop()
        if index[0] != "v" or not isinstance(index[1], Const) or index[1].value not in (0, -1):
            raise Unsupported("a shape index of a view other than 0")
        out = []
        block = walk.shape(block, arr, axis, pos, out)
        stack.append(out[0])
        return block
    if name == "CALL" and not isinstance(ins.arg, tuple) and ins.arg == 1 and \
            len(stack) >= 3 and stack[-1][0] == "view" and \
            ("obj", builtins.len) in (stack[-2][:2], stack[-3][:2]):
        arr, axis = _whole_axis(walk, stack.pop())
        del stack[-2:]
        out = []
        block = walk.shape(block, arr, axis, pos, out)
        stack.append(out[0])
        return block
    return PASS


def _column_element(walk, block, pos, stack, store: bool):
    """col[i] of a view whose slice is a whole first axis (`A[:, j]`): the element A[i, j],
    whose IndexError names axis 0 as the user's does."""
    index, (_, view) = stack.pop(), stack.pop()
    value = stack.pop() if store else None
    if index[0] != "v" or any(T.kind(m) != "i" for m in walk.type(index[1])):
        raise Unsupported("an element of a view by a non-integer")
    arr = view.array
    args = (arr, index[1]) + view.index[1:]
    if not store:
        dst = f"t{pos}"
        walk.define(dst, (walk.entries[arr[2:]].array[0],))
        stack.append(("v", dst))
        return walk.emit(block, Op("load", dst, args))
    if value[0] != "v":
        raise Unsupported("a slice stored into an element")
    walk.check_store(arr[2:], walk.type(value[1]))
    walk.written.add(arr)
    return walk.emit(block, Op("store", None, args + (value[1],)))


def _whole_axis(walk, item) -> tuple:
    """(array name, axis) of a row or of a view whose slice is a whole axis (`A[i, :]`,
    `A[:, j]`): its length is the array's on that axis."""
    if item[0] == "row":
        return item[1], 1
    view = item[1]
    axis = next(k for k, s in enumerate(view.index) if isinstance(s, Slice))
    if view.index[axis] != Slice():
        raise Unsupported("the length of a part of an axis")
    return view.array[2:], axis


def bind(walk, block, name: str, item, pos: int):
    """STORE_FAST of a view: check its indices now, copy them, alias the local to it."""
    stores = sum(1 for i in walk.instrs[walk.start:walk.end + 1]
                 if getattr(i, "name", None) in ("STORE_FAST", "DELETE_FAST") and i.arg == name)
    if name in walk.entries or stores != 1:
        raise Unsupported(f"{name} is a view and bound elsewhere too")
    view = item[1]
    arr = view.array[2:]
    dtype = walk.entries[arr].array[0]
    args, (leaf,) = _flatten((Leaf(view, dtype),))
    block = walk.emit(block, Op("vcheck", None, args, "view",
                                array=ArrayOp("view", (leaf,), dtype)))
    copies = {}
    for k, x in enumerate(args):
        if isinstance(x, str) and x not in copies:
            copies[x] = f"w{pos}_{k}"
            walk.define(copies[x], walk.type(x))
            block = walk.emit(block, Op("copy", copies[x], (x,)))
    index = tuple(Slice(*(copies.get(p, p) for p in (s.start, s.stop, s.step)))
                  if isinstance(s, Slice) else copies.get(s, s) for s in view.index)
    ndim = walk.entries[arr].array[1]
    if ndim == 2 and index[1] == Slice() and not isinstance(index[0], Slice):
        walk.aliases[name] = ("row", arr, index[0])     # `row[j]` loads as A[i][j]
    else:
        walk.aliases[name] = ("view", View(view.array, index))
    return block


def check_c(k, op, view_c, bail) -> list:
    """The C of a vcheck: the view's bounds (view_c: slices._view_c), nothing kept."""
    (leaf,) = op.array.trees
    return ["{"] + view_c(k, leaf.view, op.args, "vk", bail) + \
        ["(void)vk_p; (void)vk_n; (void)vk_s;", "}"]

