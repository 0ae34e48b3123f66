"""`raise E(args)` inside a loop nest: the instructions -> a `raise` op that hands over.

The C kernel cannot build the exception, and need not: a `raise` op is the only op of its
block and always hands over, so Python resumes the nest at that block (every earlier write
done, the loop state that of that iteration) and runs `raise E(args)` itself, from the
user's line, with the message plain Python builds. The class must be one the walk can
resolve (a global or builtin, guarded by capture.py like every global the nest reads); its
arguments constants (str, numbers, None) or the nest's scalar values.
"""
from __future__ import annotations

import math

from pijit.loopnest.ir import Const, Op
from pijit.loopnest.slices import PASS
from pijit.loopnest.types import Unsupported

# constants an exception's arguments may be, written into the Python form by repr
_LITERALS = (str, int, float, bool, type(None))


def instr(walk, ins, pos, block, stack):
    """Simulate `ins` when it builds or raises an exception; PASS otherwise."""
    name = ins.name
    if name == "LOAD_CONST" and type(ins.arg) is str:
        stack.append(("text", ins.arg))         # used only as an exception's argument
        return None
    if name == "CALL" and not isinstance(ins.arg, tuple):
        nargs = ins.arg
        if len(stack) < nargs + 2:
            return PASS
        first, second = stack[len(stack) - nargs - 2], stack[len(stack) - nargs - 1]
        cls = next((x[1] for x in (first, second) if x[0] == "obj"), None)
        if not _is_exception(cls) or ("null",) not in (first, second):
            return PASS
        args = stack[len(stack) - nargs:]
        del stack[len(stack) - nargs - 2:]
        stack.append(("exc", cls, tuple(_argument(walk, x) for x in args)))
        return None
    if name == "RAISE_VARARGS":
        if ins.arg != 1:
            raise Unsupported("a re-raise or `raise ... from ...` in the loop")
        exc = stack.pop()
        if exc[0] == "obj" and _is_exception(exc[1]):
            exc = ("exc", exc[1], None)             # `raise E`: Python calls E()
        if exc[0] != "exc":
            raise Unsupported(f"raising a {exc[0]}")
        cls, template = exc[1], exc[2]
        fname = f"exc{pos}"
        walk.funcs[fname] = cls
        operands = tuple(x for kind, x in template or () if kind == "v")
        block = walk.emit(block, Op("raise", None, operands, fname, ("raise", template)))
        block.term = ("raise",)
        return True
    return PASS


def _is_exception(obj) -> bool:
    return isinstance(obj, type) and issubclass(obj, BaseException)


def _argument(walk, item):
    """("v", operand) of a nest value, or ("c", value) of a constant."""
    if item[0] == "text":
        return ("c", item[1])
    if item[0] == "none":
        return ("c", None)
    if item[0] == "v" and isinstance(item[1], Const):
        value = item[1].value
        if type(value) in _LITERALS and not (type(value) is float and not math.isfinite(value)):
            return ("c", value)
        raise Unsupported(f"an exception's argument {value!r}")
    if item[0] == "v":
        walk.type(item[1])                          # known (else Unsupported)
        return ("v", item[1])
    raise Unsupported(f"a {item[0]} as an exception's argument")


def python_line(op, operand) -> str:
    """`raise _f_exc<pos>(args)` for the nest's Python form."""
    template = op.domain[1]
    if template is None:
        return f"raise _f_{op.op}"
    args = [repr(x) if kind == "c" else operand(x) for kind, x in template]
    return f"raise _f_{op.op}({', '.join(args)})"
