"""Locals bound to views inside a loop nest (`row = A[i]`, `seg = x[a:b]`) -> aliases.

`row = A[i]` makes no array: the local stands for the view, read where it is used (`row[j]`
is `A[i][j]`, `row.shape[0]` and `len(row)` the array's length on that axis, and every
array op slices.py has takes it as the view it is; an element or the length of a view of
part of an axis, `seg = x[a:b]`, is a vload/vlen op over the view). Python evaluates the view's indices at
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
from pijit.loopnest.slices import (PASS, ArrayOp, Leaf, Scalar, Slice, View, _flatten,
                                   view_dtype)
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
        item = stack.pop()
        stack.append(("vshape", item if item[0] == "view" and _part(item[1]) else
                      _whole_axis(walk, item)))
        return None
    if name in ("BINARY_SUBSCR", "STORE_SUBSCR") and len(stack) >= 2 and \
            stack[-2][0] == "view" and stack[-1][0] == "v":
        view = stack[-2][1]
        if view.index[0] == Slice():
            return _column_element(walk, block, pos, stack, name == "STORE_SUBSCR")
        if _part(view):
            return _view_element(walk, block, pos, stack, name == "STORE_SUBSCR")
    if name == "BINARY_SUBSCR" and len(stack) >= 2 and stack[-2][0] == "vshape":
        index, (_, of) = stack.pop(), stack.pop()
        if index[0] != "v" or not isinstance(index[1], Const) or index[1].value not in (0, -1):
            raise Unsupported("a shape index of a view other than 0")
        if of[0] == "view":
            return _view_length(walk, block, pos, stack, of[1])
        out = []
        block = walk.shape(block, of[0], of[1], pos, out)
        stack.append(out[0])
        return block
    if name == "CALL" and not isinstance(ins.arg, tuple) and ins.arg == 1 and \
            len(stack) >= 3 and stack[-1][0] == "view" and \
            ("obj", builtins.len) in (stack[-2][:2], stack[-3][:2]):
        item = stack.pop()
        del stack[-2:]
        if _part(item[1]):
            return _view_length(walk, block, pos, stack, item[1])
        arr, axis = _whole_axis(walk, item)
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


def _part(view) -> bool:
    """Whether a view's slice is a part of its axis (`x[a:b]`, `x[::-1]`), not all of it."""
    return next(s for s in view.index if isinstance(s, Slice)) != Slice()


def _view_element(walk, block, pos, stack, store: bool):
    """seg[j] of a view of part of an axis: a vload (or a vstore "put") over the view, whose
    C finds the view's first item, length and stride as slices.py's ops do, then checks j
    against that length as Python's indexing of the view does; the Python form indexes the
    user's view (`x[a:b][j]`)."""
    index, (_, view) = stack.pop(), stack.pop()
    value = stack.pop() if store else None
    if any(T.kind(m) != "i" for m in walk.type(index[1])):
        raise Unsupported("an element of a view by a non-integer")
    arr = view.array[2:]
    dtype = walk.entries[arr].array[0]
    if not store:
        args, trees = _flatten((Leaf(view, dtype), Scalar(index[1], T.INT)))
        dst = f"t{pos}"
        walk.define(dst, (dtype,))
        stack.append(("v", dst))
        return walk.emit(block, Op("vload", dst, args, "element",
                                   array=ArrayOp("element", trees, dtype)))
    if value[0] != "v":
        raise Unsupported("a slice stored into an element")
    walk.check_store(arr, walk.type(value[1]))
    walk.written.add(view.array)
    args, trees = _flatten((Leaf(view, dtype), Scalar(index[1], T.INT),
                            Scalar(value[1], walk.type(value[1])[0])))
    return walk.emit(block, Op("vstore", None, args, "put", array=ArrayOp("put", trees, dtype)))


def _view_length(walk, block, pos, stack, view):
    """len(seg) of a view of part of an axis: a vlen op (the slice's length, as CPython's
    slice rules make it)."""
    dtype = view_dtype(walk, view)
    args, trees = _flatten((Leaf(view, dtype),))
    dst = f"t{pos}"
    walk.define(dst, (T.INT,))
    walk.funcs["len"] = builtins.len
    stack.append(("v", dst))
    return walk.emit(block, Op("vlen", dst, args, "len", array=ArrayOp("len", trees, dtype)))


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
    block, view = _made(walk, block, item[1], pos)
    arr = view.array[2:]
    index = view.index
    ndim = walk.entries[arr].array[1]
    if ndim == 2 and index[1] == Slice() and not isinstance(index[0], Slice):
        walk.aliases[name] = ("row", arr, index[0])     # `row[j]` loads as A[i][j]
    else:
        walk.aliases[name] = ("view", view)
    return block


def _made(walk, block, view, pos: int):
    """(block, the view with its index operands copied): where Python makes the view, its
    indices are checked (a vcheck) and their values kept."""
    dtype = view_dtype(walk, view)
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
    return block, View(view.array, index)


def iterate(walk, block, view, pos: int, it: str, size: str):
    """GET_ITER of a view (`for c in coef[:k]`, `for x in A[i, 1:]`, `for x in A[:, j]`):
    Python makes the view once, so its indices are checked and kept there and its length
    read (a vlen into `size`); range iterator `it` counts its elements, each loaded by
    `element`. (block, the iterator's description)."""
    block, view = _made(walk, block, view, pos)
    dtype = view_dtype(walk, view)
    args, trees = _flatten((Leaf(view, dtype),))
    walk.funcs["len"] = builtins.len
    block = walk.emit(block, Op("vlen", size, args, "len", array=ArrayOp("len", trees, dtype),
                                kept=size))
    block = walk.emit(block, Op("range", it, (Const(0, T.INT), size, Const(1, T.INT)),
                                "range"))
    return block, ("velem", it, view, size)


def element(walk, block, desc):
    """(block, the stack item) of a step of `iterate`'s iterator: the view's element k."""
    it, view, size = desc[1:]
    dtype = view_dtype(walk, view)
    dst = f"{it}_x"
    walk.define(dst, (dtype,))
    args, trees = _flatten((Leaf(view, dtype), Scalar(f"{it}_k", T.INT)))
    # the view is the one `iterate` made and measured (its indices kept), and k runs over
    # range(len(view)): the C reads from the first item and stride kept there, unchecked
    block = walk.emit(block, Op("vload", dst, args, "element",
                                array=ArrayOp("element", trees, dtype), kept=size))
    return block, ("v", dst)


def check_c(k, op, view_c, bail) -> list:
    """The C of a vcheck: the view's bounds (view_c: slices._view_c), nothing kept."""
    (leaf,) = op.array.trees
    return ["{"] + view_c(k, leaf.view, op.args, "vk", bail) + \
        ["(void)vk_p; (void)vk_n; (void)vk_s;", "}"]


def element_c(k, op, view_c, bail) -> list:
    """The C of a vload, a vlen or a vstore "put" (see _view_element)."""
    from pijit.loopnest.lower_c import ctype

    a = op.array
    ct = ctype(a.dtype)
    if op.kind == "vload" and op.kept:
        j = k.val(op.args[a.trees[1].value])
        return ["{", f"v_{op.dst} = *({ct} *)(kp_{op.kept} + (npy_intp){j} * ks_{op.kept});",
                "}"]
    L = ["{"] + view_c(k, a.trees[0].view, op.args, "vk", bail)
    if op.kind == "vlen":
        kept = [f"kp_{op.kept} = vk_p; ks_{op.kept} = vk_s;"] if op.kept else \
            ["(void)vk_p; (void)vk_s;"]
        return L + kept + [f"v_{op.dst} = (int64_t)vk_n;", "}"]
    L += [f"int64_t j = (int64_t){k.val(op.args[a.trees[1].value])};",
          "if (j < 0) j += vk_n;",
          f"if ((uint64_t)j >= (uint64_t)vk_n) {bail}"]
    if op.kind == "vload":
        return L + [f"v_{op.dst} = *({ct} *)(vk_p + j * vk_s);", "}"]
    L += k.store_value(op.args[a.trees[2].value], a.dtype, bail)
    return L + [f"*({ct} *)(vk_p + j * vk_s) = sv;", "}"]

