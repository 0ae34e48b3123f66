"""CaptureResult + compiled graph -> the transformed function the C hook calls on a cache hit.

The transformed code takes every argument slot of the original frame as a plain positional
parameter (see `pijit._compat.arg_slot_count`), reloads each graph input from its source and
calls the compiled graph. Without a break it rebuilds the returned structure and returns.
With a break it rebuilds the value stack and live locals of the break point, runs the
original instructions of the break span as residual bytecode, and at each exit of the span
calls the resume function for that position with the stack and live locals there. The code
keeps the original name, file, line numbers and closure, so tracebacks read as the user's.
"""
from __future__ import annotations

import inspect
import types

from bytecode import Bytecode, FreeVar, Instr, Label

from pijit._compat import arg_slot_count
from pijit.bytecode_gen.copy import copy_instructions, line_at
from pijit.bytecode_gen.reconstruct import OUT_NAME, Emitter, emit_load
from pijit.bytecode_gen.resume import STACK_NAME


def build_transformed(func, capture, graph_fn, out_index: dict, resume_code_for) -> types.FunctionType:
    """The function an entry calls: (arg slots...) -> the original function's result.

    out_index: {Ref: position in the graph's output tuple}.
    resume_code_for(position, depth, live) -> code object of the resume function there.
    """
    code = func.__code__
    bp = capture.break_point
    lineno = capture.return_lineno
    instrs = [Instr("RESUME", 0, lineno=code.co_firstlineno)]
    if code.co_freevars:
        instrs.insert(0, Instr("COPY_FREE_VARS", len(code.co_freevars), lineno=None))
    if capture.graph.nodes or out_index:
        instrs += _call_graph(graph_fn, capture.input_sources, len(out_index), lineno)
    emitter = Emitter(out_index, lineno)
    if bp is None:
        instrs += emitter.emit(capture.ret) + [Instr("RETURN_VALUE", lineno=lineno)]
    else:
        for value in bp.stack:
            instrs += emitter.emit(value)
        for name, value in bp.locals.items():
            instrs += emitter.emit(value) + [Instr("STORE_FAST", name, lineno=lineno)]
        instrs += _residual(capture.instructions, bp, code, resume_code_for)

    bc = Bytecode(instrs)
    n = arg_slot_count(code)
    bc.argcount = n
    bc.posonlyargcount = 0
    bc.kwonlyargcount = 0
    bc.argnames = list(code.co_varnames[:n])
    bc.name = code.co_name
    bc.qualname = code.co_qualname
    bc.filename = code.co_filename
    bc.first_lineno = code.co_firstlineno
    bc.freevars = list(code.co_freevars)
    bc.cellvars = []
    bc.flags = code.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    fn = types.FunctionType(bc.to_code(), func.__globals__, func.__name__, None, func.__closure__)
    fn.__qualname__ = func.__qualname__
    return fn


def _call_graph(graph_fn, input_sources, n_out, lineno) -> list:
    instrs = [Instr("PUSH_NULL", lineno=lineno), Instr("LOAD_CONST", graph_fn, lineno=lineno)]
    for source in input_sources:
        instrs += emit_load(source, lineno)
    k = len(input_sources)
    instrs += [Instr("PRECALL", k, lineno=lineno), Instr("CALL", k, lineno=lineno),
               Instr("UNPACK_SEQUENCE", n_out, lineno=lineno)]
    instrs += [Instr("STORE_FAST", OUT_NAME.format(i), lineno=lineno) for i in range(n_out)]
    return instrs


def _residual(original: list, bp, code, resume_code_for) -> list:
    """The break span's original instructions, with exits calling resume functions."""
    label_pos = {item: pos for pos, item in enumerate(original) if isinstance(item, Label)}
    exit_labels = {pos: Label() for pos, _, _ in bp.exits}
    retarget = {label: exit_labels[pos] for label, pos in label_pos.items() if pos in exit_labels}
    span, _ = copy_instructions(original[bp.start:bp.end + 1], retarget)
    out = list(span)
    # The fall-through exit (if any) comes first: control reaches it from the span's end.
    exits = sorted(bp.exits, key=lambda e: e[0] != bp.end + 1)
    for pos, depth, live in exits:
        out.append(exit_labels[pos])
        out += _call_resume(resume_code_for(pos, depth, live), depth, live, code, original, pos)
    return out


def _call_resume(resume_code, depth, live, code, original, pos) -> list:
    """Store the stack into temporaries, make the resume function (with this frame's closure
    and globals) and return what it returns."""
    at = line_at(original, pos, code.co_firstlineno)
    out = [Instr("STORE_FAST", STACK_NAME.format(i), lineno=at) for i in reversed(range(depth))]
    out.append(Instr("PUSH_NULL", lineno=at))
    flags = 0
    if code.co_freevars:
        out += [Instr("LOAD_CLOSURE", FreeVar(name), lineno=at) for name in code.co_freevars]
        out.append(Instr("BUILD_TUPLE", len(code.co_freevars), lineno=at))
        flags = 0x08
    out += [Instr("LOAD_CONST", resume_code, lineno=at), Instr("MAKE_FUNCTION", flags, lineno=at)]
    args = [STACK_NAME.format(i) for i in range(depth)] + list(live)
    out += [Instr("LOAD_FAST", name, lineno=at) for name in args]
    out += [Instr("PRECALL", len(args), lineno=at), Instr("CALL", len(args), lineno=at),
            Instr("RETURN_VALUE", lineno=at)]
    return out

