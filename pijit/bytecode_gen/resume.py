"""Resume functions: the original code continued from one position, as a function of the
stack and the live locals at that position.

A resume function has parameters `__pijit_s0..` (the value stack, bottom first) and then the
live locals; its code pushes the stack parameters and jumps into a copy of the original
instructions. It is jitted like the original, so code after a graph break is captured too.
Resume functions are cached per (position, stack depth, live names), so branches that meet
again share one.
"""
from __future__ import annotations

import types

from bytecode import Instr, Label

from pijit.bytecode_gen.copy import (assemble, copy_handlers, copy_instructions, line_at,
                                     prologue)

STACK_NAME = "__pijit_s{}"

# Prologue instructions of the original code that must not run again in a resume function.
_PROLOGUE = frozenset({"RESUME", "COPY_FREE_VARS", "MAKE_CELL"})


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
    prefix = prologue(code, lineno)
    prefix += [Instr("LOAD_FAST", STACK_NAME.format(i), lineno=lineno) for i in range(depth)]
    prefix.append(Instr("JUMP_FORWARD", target, lineno=lineno))
    argnames = [STACK_NAME.format(i) for i in range(depth)] + list(live)
    return assemble(prefix + body, code, argnames, _identifier(f"__resume_{code.co_name}_at_{lineno}"),
                    f"{code.co_qualname}.<resume at line {lineno}>")



def build_loop_body(func, instrs: list, body) -> types.CodeType:
    """The code of a function running one iteration of a `for` loop's body (flow.LoopBody):
    parameters are the loop item and the locals the body reads; it returns the tuple of the
    locals it assigns that the next iteration or the code after the loop reads. A `continue`
    (a jump back to the loop head) returns early."""
    code = func.__code__
    epilogue = Label()
    head = instrs[body.head]
    span = instrs[body.start:body.end + 1]
    handlers, labels = copy_handlers(instrs, body.handlers, {head: epilogue})
    copied, _ = copy_instructions(span, {head: epilogue, **labels})
    for i, item in enumerate(copied):
        if isinstance(item, Instr) and item.arg is epilogue and item.name == "JUMP_BACKWARD":
            copied[i] = Instr("JUMP_FORWARD", epilogue, location=item.location)
    lineno = line_at(instrs, body.start, code.co_firstlineno)
    start = Label()
    prefix = prologue(code, lineno) + [Instr("LOAD_FAST", STACK_NAME.format(0), lineno=lineno),
                                       Instr("JUMP_FORWARD", start, lineno=lineno), start]
    tail = [epilogue] + [Instr("LOAD_FAST", name, lineno=lineno) for name in body.outs] + \
        [Instr("BUILD_TUPLE", len(body.outs), lineno=lineno), Instr("RETURN_VALUE", lineno=lineno)]
    argnames = [STACK_NAME.format(0)] + list(body.params)
    return assemble(prefix + copied + tail + handlers, code, argnames,
                    _identifier(f"__loop_body_{code.co_name}_at_{lineno}"),
                    f"{code.co_qualname}.<loop body at line {lineno}>")


def _identifier(name: str) -> str:
    return name.replace("<", "").replace(">", "")       # <lambda>, <listcomp>
