"""Resume functions: the original code continued from one position, as a function of the
stack and the live locals at that position.

A resume function has parameters `__pijit_s0..` (the value stack, bottom first) and then the
live locals; its code pushes the stack parameters and jumps into a copy of the original
instructions. It is jitted like the original, so code after a graph break is captured too.
Resume functions are cached per (position, stack depth, live names), so branches that meet
again share one.
"""
from __future__ import annotations

import inspect
import types

from bytecode import Bytecode, Instr, Label

from pijit.bytecode_gen.copy import copy_instructions, line_at

STACK_NAME = "__pijit_s{}"

# Prologue instructions of the original code that must not run again in a resume function.
_PROLOGUE = frozenset({"RESUME", "COPY_FREE_VARS", "MAKE_CELL"})


def resume_name(code, lineno) -> str:
    return f"__resume_{code.co_name}_at_{lineno}".replace("<", "").replace(">", "")


def build_resume(func, instrs: list, position: int, depth: int, live: tuple) -> types.CodeType:
    """The code of a function continuing func's code at `position` with `depth` stack values
    and the `live` locals as parameters (residual code makes the function with its frame's
    closure and globals)."""
    code = func.__code__
    body, mapping = copy_instructions(instrs, {})
    target = body[position]
    if not isinstance(target, Label):
        label = Label()
        body.insert(position, label)
        target = label
    body = [i for i in body if not (isinstance(i, Instr) and i.name in _PROLOGUE)]
    lineno = line_at(instrs, position, code.co_firstlineno)
    prefix = []
    if code.co_freevars:
        prefix.append(Instr("COPY_FREE_VARS", len(code.co_freevars), lineno=None))
    prefix.append(Instr("RESUME", 0, lineno=lineno))
    prefix += [Instr("LOAD_FAST", STACK_NAME.format(i), lineno=lineno) for i in range(depth)]
    prefix.append(Instr("JUMP_FORWARD", target, lineno=lineno))

    bc = Bytecode(prefix + body)
    argnames = [STACK_NAME.format(i) for i in range(depth)] + list(live)
    bc.argcount = len(argnames)
    bc.posonlyargcount = 0
    bc.kwonlyargcount = 0
    bc.argnames = argnames
    bc.name = resume_name(code, lineno)
    bc.qualname = f"{code.co_qualname}.<resume at line {lineno}>"
    bc.filename = code.co_filename
    bc.first_lineno = code.co_firstlineno
    bc.freevars = list(code.co_freevars)
    bc.cellvars = []
    bc.flags = code.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    return bc.to_code()

