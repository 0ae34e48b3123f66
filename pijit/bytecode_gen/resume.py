"""Resume functions: the original code continued from one position, as a function of the
stack and the live locals at that position.

A resume function has parameters `__pijit_s0..` (the value stack, bottom first) and then the
locals: the live ones, then the others the user's frame holds there (for debuggers); its code
pushes the stack parameters, deletes them, and jumps into a copy of the original
instructions. It is jitted like the original, so code after a graph break is captured too.
Resume functions are cached per (position, stack depth, local names), so branches that meet
again share one. Resume functions and loop bodies carry the name, file and lines of the code
they continue: in a traceback they are the user's frame. A loop body is registered with
pijit.tracebacks as continuing the frame that calls it; a resume function runs after that
frame has returned (the hook calls it: transform._call_resume), so it continues what the
code it resumes continued (a loop body's) and otherwise stands for the user's call itself.
"""
from __future__ import annotations

import types

from bytecode import Instr, Label

from pijit import tracebacks
from pijit.bytecode_gen import forms
from pijit.bytecode_gen.copy import (assemble, copy_handlers, copy_instructions, line_at,
                                     prologue)
from pijit.bytecode_gen.reconstruct import INTERNAL_PREFIX

STACK_NAME = INTERNAL_PREFIX + "s{}"

# Prologue instructions of the original code that must not run again in a resume function.
PROLOGUE = frozenset({"RESUME", "COPY_FREE_VARS", "MAKE_CELL"})


def build_resume(func, instrs: list, position: int, depth: int, live: tuple) -> types.CodeType:
    """The code of a function continuing func's code at `position` with `depth` stack values
    and the `live` locals as parameters (residual code makes the function with its frame's
    closure and globals). It is named as func's code: it stands for the user's frame."""
    code = func.__code__
    body, mapping = copy_instructions(instrs, {})
    target = body[position]
    if not isinstance(target, Label):
        label = Label()
        body.insert(position, label)
        target = label
    body = [i for i in body if not (isinstance(i, Instr) and i.name in PROLOGUE)]
    lineno = line_at(instrs, position, code.co_firstlineno)
    # The code before `position` is reachable (never reached): a debugger may jump back
    # there (CPython's f_lineno setter refuses a target its stack analysis does not reach).
    start = Label()
    body.insert(0, start)
    prefix = prologue(code, lineno) + [Instr("LOAD_CONST", False, lineno=lineno)] + \
        forms.jump_if_truthy(start, lineno=lineno) + _push_stack(depth, lineno)
    prefix.append(Instr("JUMP_FORWARD", target, lineno=lineno))
    argnames = [STACK_NAME.format(i) for i in range(depth)] + list(live)
    new = assemble(prefix + body, code, argnames, code.co_name,
                   f"{code.co_qualname}.<resume at line {lineno}>")
    tracebacks.register(new, code, tracebacks.continues(code))
    return new


def build_loop_body(func, instrs: list, body) -> types.CodeType:
    """The code of a function running one iteration of a `for` loop's body (flow.LoopBody):
    parameters are the loop item and the locals the body reads; it returns the tuple of the
    locals it assigns that the next iteration or the code after the loop reads. A `continue`
    (a jump back to the loop head) returns early. Named as func's code, like a resume."""
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
    prefix = prologue(code, lineno) + _push_stack(1, lineno) + [
        Instr("JUMP_FORWARD", start, lineno=lineno), start]
    tail = [epilogue] + [Instr("LOAD_FAST", name, lineno=lineno) for name in body.outs] + \
        [Instr("BUILD_TUPLE", len(body.outs), lineno=lineno), Instr("RETURN_VALUE", lineno=lineno)]
    argnames = [STACK_NAME.format(0)] + list(body.params)
    new = assemble(prefix + copied + tail + handlers, code, argnames, code.co_name,
                   f"{code.co_qualname}.<loop body at line {lineno}>")
    tracebacks.register(new, code, True)
    return new


def _push_stack(depth: int, lineno) -> list:
    """Push the stack parameters, then delete them: the frame keeps the user's locals only
    (a debugger reading it sees no name the user's code does not have)."""
    names = [STACK_NAME.format(i) for i in range(depth)]
    return [Instr("LOAD_FAST", name, lineno=lineno) for name in names] + \
        [Instr("DELETE_FAST", name, lineno=lineno) for name in names]
