"""Building generated code from the original's: copying abstract instructions (with fresh
labels and try blocks), and the prologue and signature every generated code object shares.

Residual bytecode and resume functions reuse the original function's instructions; each
copy needs its own Label, TryBegin and TryEnd objects, and jumps may be retargeted.
"""
from __future__ import annotations

import inspect
import types

from bytecode import Bytecode, Instr, Label, TryBegin, TryEnd

from pijit.bytecode_gen import forms


def copy_instructions(items, retarget: dict):
    """Copy `items`; a jump or handler to an original label goes to its copy, or to
    retarget[label] when given. Returns (copies, {original label: copied label})."""
    labels = {item: Label() for item in items if isinstance(item, Label)}
    labels.update(retarget)
    try_blocks = {}
    out = []
    for item in items:
        if isinstance(item, Label):
            out.append(labels[item])
        elif isinstance(item, TryBegin):
            copied = TryBegin(labels.get(item.target, item.target), item.push_lasti,
                              item.stack_depth)
            try_blocks[id(item)] = copied
            out.append(copied)
        elif isinstance(item, TryEnd):
            out.append(TryEnd(try_blocks.get(id(item.entry), item.entry)))
        elif isinstance(item, Instr):
            copied = item.copy()
            if isinstance(item.arg, Label):
                copied.arg = labels[item.arg]
            out.append(copied)
        else:
            out.append(item)
    return out, labels


def copy_handlers(instrs, handlers, retarget: dict):
    """Copy the handler blocks (first, last positions) that a copied span's try blocks jump
    to (inlined comprehensions' cleanup handlers, flow.cleanup_handlers): (the copies, to
    place after the span's last instruction, {original label: copied label} for copying the
    span)."""
    items = [item for first, last in handlers for item in instrs[first:last + 1]]
    return copy_instructions(items, retarget)


def line_at(instrs, pos, default) -> int:
    """The user's line of the first instruction at or after `pos`."""
    for item in instrs[pos:]:
        if isinstance(item, Instr) and item.location is not None and item.location.lineno:
            return item.location.lineno
    return default


def prologue(code, lineno) -> list:
    """COPY_FREE_VARS (for a closure's code) and RESUME: how every generated code starts."""
    out = [Instr("COPY_FREE_VARS", len(code.co_freevars), lineno=None)] if code.co_freevars else []
    return out + [Instr("RESUME", 0, lineno=lineno)]


def assemble(instrs, code, argnames, name, qualname) -> types.CodeType:
    """A code object of `instrs` with plain positional parameters `argnames`, and the
    original code's file, first line, free variables and flags (no *args/**kwargs)."""
    bc = Bytecode(_boxed_constants(instrs))
    bc.argcount = len(argnames)
    bc.posonlyargcount = 0
    bc.kwonlyargcount = 0
    bc.argnames = list(argnames)
    bc.name = name
    bc.qualname = qualname
    bc.filename = code.co_filename
    bc.first_lineno = code.co_firstlineno
    bc.freevars = list(code.co_freevars)
    bc.cellvars = []
    bc.flags = code.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    return bc.to_code()


class Box:
    """A constant loaded as `box.value`: one that cannot be hashed (an array, a list): a code
    object hashes its constants, and tools hash code objects (IPython's traceback display
    counts frames by code: an array constant made it fail on any error in that frame); and
    one the bytecode package would merge with another constant (see _marshal_exact)."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _boxed_constants(instrs) -> list:
    out = []
    for item in instrs:
        if isinstance(item, Instr) and item.name == "LOAD_CONST" and not _kept_apart(item.arg):
            out += [Instr("LOAD_CONST", Box(item.arg), location=item.location),
                    forms.load_attr("value", lineno=item.lineno)]
        else:
            out.append(item)
    return out


def _kept_apart(obj) -> bool:
    """Whether `obj` can be a constant of its own: hashable, and told apart from every other
    constant by the bytecode package, which merges constants whose marshal dumps are equal.
    marshal writes any object with a buffer (a NumPy scalar) as its raw bytes, so
    np.uint8(0), np.False_ and b"\\x00" were one constant, as were np.float64(-0.0) and
    np.int64(-2**63); objects marshal refuses (functions) are keyed by identity."""
    try:
        hash(obj)
    except TypeError:
        return False
    return not _written_as_bytes(obj)


# Types marshal writes as themselves (by exact type).
_MARSHAL_TYPES = (int, float, complex, str, bytes, bool, type(None), type(Ellipsis),
                  types.CodeType)


def _written_as_bytes(obj) -> bool:
    if type(obj) in (tuple, frozenset):
        return any(_written_as_bytes(item) for item in obj)
    if type(obj) in _MARSHAL_TYPES:
        return False
    try:
        memoryview(obj)
    except TypeError:
        return False
    return True
