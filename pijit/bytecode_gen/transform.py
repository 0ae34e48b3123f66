"""CaptureResult + compiled graph -> the transformed function the C hook calls on a cache hit.

The transformed code takes every argument slot of the original frame as a plain positional
parameter (see `pijit._compat.arg_slot_count`), reloads each graph input from its source and
calls the compiled graph. Without a break it rebuilds the returned structure, makes the
stores capture recorded (stores.py) and returns.
With a break it rebuilds the value stack and live locals of the break point, makes the
recorded stores, runs the
original instructions of the break span as residual bytecode, and at each exit of the span
returns a request that the hook call the resume function for that position with the stack
and live locals there (and the other locals the span leaves alone), once this frame is gone. A graph with opaque calls that may not match returns
None instead of its outputs when one did not: the transformed code then returns a plain run
of the original code. The code keeps the original name, file, line numbers and closure, so
tracebacks read as the user's; at a break it stores every local the user's frame holds (dead
ones too) under the user's names and deletes its own temporaries before the residual code
runs, so a debugger there sees plain Python's frame. Exception handlers (frames.py) clean
tracebacks and replay a failed graph (replay.py).
"""
from __future__ import annotations

import builtins
import dataclasses
import inspect
import types

from bytecode import Instr, Label, TryBegin, TryEnd

from pijit import _compat, eval_frame, tracebacks
from pijit._compat import arg_slot_count
from pijit.bytecode_gen import forms, frames
from pijit.bytecode_gen.copy import (assemble, copy_handlers, copy_instructions, line_at,
                                     prologue)
from pijit.bytecode_gen.reconstruct import OUT_NAME, Emitter, emit_load, is_internal
from pijit.bytecode_gen.replay import Replay
from pijit.bytecode_gen.stores import emit_stores
from pijit.bytecode_gen.resume import PROLOGUE, STACK_NAME
from pijit.capture.flow import LOCAL_ACCESS
from pijit.capture.instructions import read_instructions


def build_transformed(func, capture, graph_fn, out_index: dict, resume_code_for,
                      body_code_for=None, restart=False) -> types.FunctionType:
    """The function an entry calls: (arg slots...) -> the original function's result.

    out_index: {Ref: position in the graph's output tuple}.
    resume_code_for(position, depth, names) -> code object of the resume function there
    (names: the locals it takes after the stack values).
    body_code_for(loop_body) -> code object of an outlined loop body (flow.LoopBody).
    restart: graph_fn may return None instead of its outputs (an opaque call's result did
    not match, pijit.graph.opaque.restartable): the call then runs as plain Python.
    """
    code = func.__code__
    bp = capture.break_point
    lineno = capture.return_lineno
    graph = []
    if capture.graph.nodes or out_index:
        # Spliced in when nothing follows (one frame less per call); with a break, called,
        # so the frame the residual code runs in holds no temporaries of the graph.
        graph = _run_graph(graph_fn, capture.input_sources, len(out_index), lineno,
                           splice=bp is None, restart_code=code if restart else None)
    emitter = Emitter(out_index, lineno)
    # What the stores use is loaded first (from sources as they were before the stores and
    # before locals are rebound); the stores come after everything else is rebuilt.
    loads, stores, store_temps = emit_stores(emitter, capture.stores, lineno)
    if bp is None:
        rest = loads + emitter.emit(capture.ret) + stores + \
            [Instr("RETURN_VALUE", lineno=lineno)]
    else:
        residual, plain, plain_start = _residual(capture.instructions, bp, code,
                                                 resume_code_for, body_code_for)
        rest = loads + [i for value in bp.stack for i in emitter.emit(value)]
        for name, value in {**bp.locals, **bp.dead}.items():
            rest += emitter.emit(value) + [Instr("STORE_FAST", name, lineno=lineno)]
        rest += stores
        rest += _forget_temporaries(code, len(out_index) if graph else 0, emitter, lineno,
                                    store_temps)
        rest = _never(plain_start, lineno) + rest + residual
    replay = Replay(code, capture, lambda c: tracebacks.register(c, code, True))
    instrs = frames.protect(prologue(code, code.co_firstlineno), graph, rest, replay,
                            tracebacks.clean, code.co_firstlineno)
    if bp is not None:
        # Outside the handlers: an exception there leaves the frame as plain Python's does,
        # and a tracer sees no handler of pijit's run.
        instrs += plain
    n = arg_slot_count(code)
    new_code = assemble(instrs, code, code.co_varnames[:n], code.co_name, code.co_qualname)
    tracebacks.register(new_code, code, tracebacks.continues(code))
    fn = types.FunctionType(new_code, func.__globals__, func.__name__, None, func.__closure__)
    fn.__qualname__ = func.__qualname__
    return fn


def _forget_temporaries(code, n_out, emitter, lineno, store_temps) -> list:
    """Delete the names the user's code does not have (graph outputs, rebuilt containers,
    the stores' temporaries, a resume function's stack parameters) before the residual code
    runs, so its frame holds the user's locals only, as plain Python's does."""
    names = [OUT_NAME.format(i) for i in range(n_out)] + list(emitter.built.values()) + \
        list(store_temps)
    names += [name for name in code.co_varnames[:arg_slot_count(code)] if is_internal(name)]
    return [Instr("DELETE_FAST", name, lineno=lineno) for name in names]


def _run_graph(graph_fn, input_sources, n_out, lineno, splice, restart_code=None) -> list:
    """Instructions that run the compiled graph and store its outputs in OUT_NAME temps:
    its code spliced in when asked and it is a plain generated function, else a call. With
    restart_code, a None from the graph runs that code plainly instead."""
    if restart_code is not None:
        run = _call_graph(graph_fn, input_sources, lineno) + \
            _restart_on_none(restart_code, lineno)
    else:
        run = splice and _inline_graph(graph_fn, input_sources, lineno) or \
            _call_graph(graph_fn, input_sources, lineno)
    return run + [Instr("UNPACK_SEQUENCE", n_out, lineno=lineno)] + \
        [Instr("STORE_FAST", OUT_NAME.format(i), lineno=lineno) for i in range(n_out)]


def _restart_on_none(code, lineno) -> list:
    """On a None on top of the stack: return the original code's result on the argument
    slots, run as plain Python (a copy of the code, which the hook does not know). The
    graph has made no effect the user can see by then (see pijit.capture.opaque)."""
    n = arg_slot_count(code)
    plain = code.replace(co_argcount=n, co_posonlyargcount=0, co_kwonlyargcount=0,
                         co_flags=code.co_flags & ~(inspect.CO_VARARGS |
                                                    inspect.CO_VARKEYWORDS))
    ok = Label()
    out = [Instr("COPY", 1, lineno=lineno),
           forms.jump_forward("NOT_NONE", ok, lineno=lineno),
           Instr("POP_TOP", lineno=lineno)]
    out += forms.call(_make_function(plain, code, lineno),
                      [[Instr("LOAD_FAST", name, lineno=lineno)]
                       for name in code.co_varnames[:n]], lineno=lineno)
    return out + [Instr("RETURN_VALUE", lineno=lineno), ok]


_GRAPH_LOCAL = "__pijit_g_{}"


def _inline_graph(graph_fn, input_sources, lineno):
    """The graph function's own bytecode with its parameters stored from the input sources,
    its globals turned into constants and its return left on the stack; None when the
    function is not a simple generated one (closures, exception handling, no parameters
    matching the inputs)."""
    code = getattr(graph_fn, "__code__", None)
    if code is None or code.co_freevars or code.co_cellvars or \
            code.co_argcount != len(input_sources) or code.co_flags & (
                inspect.CO_VARARGS | inspect.CO_VARKEYWORDS | inspect.CO_GENERATOR):
        return None
    items = read_instructions(code)
    if any(isinstance(i, (TryBegin, TryEnd)) for i in items):
        return None
    env = graph_fn.__globals__
    out = []
    for name, source in zip(code.co_varnames, input_sources):
        out += emit_load(source, lineno) + [Instr("STORE_FAST", _GRAPH_LOCAL.format(name),
                                                  lineno=lineno)]
    body, _ = copy_instructions(items, {})
    end = Label()
    for item in body:
        if not isinstance(item, Instr):
            out.append(item)
        elif item.name == "RESUME":
            continue
        elif item.name in LOCAL_ACCESS:
            out.append(Instr(item.name, _GRAPH_LOCAL.format(item.arg), location=item.location))
        elif item.name == "LOAD_GLOBAL":
            push_null, name = item.arg
            if name in env:
                value = env[name]
            elif hasattr(builtins, name):
                value = getattr(builtins, name)
            else:
                return None
            load = [Instr("LOAD_CONST", value, location=item.location)]
            out += forms.with_null(load, lineno=item.lineno) if push_null else load
        elif item.name == "RETURN_CONST":
            out += [Instr("LOAD_CONST", item.arg, location=item.location),
                    Instr("JUMP_FORWARD", end, location=item.location)]
        elif item.name == "RETURN_VALUE":
            out.append(Instr("JUMP_FORWARD", end, location=item.location))
        elif item.name in ("LOAD_NAME", "STORE_GLOBAL", "LOAD_DEREF", "STORE_NAME"):
            return None
        else:
            out.append(item)
    return out + [end]


def _call_graph(graph_fn, input_sources, lineno) -> list:
    return forms.call([Instr("LOAD_CONST", graph_fn, lineno=lineno)],
                      [emit_load(source, lineno) for source in input_sources], lineno=lineno)


def _residual(original: list, bp, code, resume_code_for, body_code_for) -> tuple:
    """The break span's original instructions, with exits calling resume functions (and a
    residual loop's body replaced by a call of its outlined, jitted function), and the
    plain copy of the code (_plain_rest) where they go on instead while the thread is
    watched."""
    label_pos = {item: pos for pos, item in enumerate(original) if isinstance(item, Label)}
    exit_labels = {pos: Label() for pos, _, _ in bp.exits}
    retarget = {label: exit_labels[pos] for label, pos in label_pos.items() if pos in exit_labels}
    at = line_at(original, bp.start, code.co_firstlineno)
    handlers, labels = copy_handlers(original, bp.handlers, retarget)
    retarget = {**retarget, **labels}
    out = []
    # Locals bound here that the span leaves alone also go to resume functions and loop
    # bodies, whose frames then hold every local the user's frame would.
    visible = {name for name in bp.untouched if not is_internal(name)}
    body = bp.body if body_code_for is not None else None
    plain, plain_at = _plain_rest(original, [0] + [pos for pos, _, _ in bp.exits] +
                                  ([body.start] if body is not None else []))
    span, _ = copy_instructions(original[bp.start:bp.end + 1], retarget)
    if body is not None:
        body = dataclasses.replace(body, params=tuple(sorted(visible | set(body.params))))
    if body is None:
        out += span
    else:
        out += _make_function(body_code_for(body), code, at)
        out.append(Instr("STORE_FAST", BODY_NAME, lineno=at))
        # The copy with the loop body's instructions replaced by the call of its function.
        out += span[:body.start - bp.start] + \
            _unless_observed(plain_at[body.start], at) + _call_body(body, at) + \
            span[body.end + 1 - bp.start:]
    # The fall-through exit (if any) comes first: control reaches it from the span's end.
    exits = sorted(bp.exits, key=lambda e: e[0] != bp.end + 1)
    for pos, depth, live in exits:
        names = tuple(live) + tuple(sorted(visible - set(live)))
        out.append(exit_labels[pos])
        out += _unless_observed(plain_at[pos], line_at(original, pos, code.co_firstlineno))
        out += _call_resume(resume_code_for(pos, depth, names), depth, names, code, original,
                            pos)
    return out + handlers, plain, plain_at[0]


def _never(plain_start, lineno) -> list:
    """A jump to the plain copy's start that is never taken: CPython's f_lineno setter (a
    debugger's `jump`) accepts only targets its stack analysis reaches from the code's
    start, so without it pdb could not jump back to a line before the break (\"can't jump
    into an exception handler, or code may be unreachable\"), where plain Python can. There
    the frame goes on as plain Python with its locals as they are, as a jump does."""
    return [Instr("LOAD_CONST", False, lineno=lineno)] + \
        forms.jump_if_truthy(plain_start, lineno=lineno)


def _plain_rest(original: list, positions: list) -> tuple:
    """A copy of the code's instructions, run as they are (prologue left out), and
    {position: label of its copy} for each of `positions`. A frame jumps in at a break
    when something watches the thread (eval_frame.OBSERVED, see csrc/eval_frame.c): its
    stack and locals there are the original frame's, so the rest of the call runs as
    plain Python, in this frame: a tracer or profiler sees one call of the user's function
    and every line of it, as without pijit, and a debugger steps on through it."""
    copied, _ = copy_instructions(original, {})
    labels = {}
    for pos in sorted(set(positions), reverse=True):
        if isinstance(copied[pos], Label):
            labels[pos] = copied[pos]
        else:
            labels[pos] = Label()
            copied.insert(pos, labels[pos])
    return [i for i in copied if not (isinstance(i, Instr) and i.name in PROLOGUE)], labels


def _unless_observed(plain, at) -> list:
    """Go on in the plain copy at `plain` when the thread is watched (a truth test of a
    constant: a profiler sees no call)."""
    return [Instr("LOAD_CONST", eval_frame.OBSERVED, lineno=at)] + \
        forms.jump_if_truthy(plain, lineno=at)


BODY_NAME = "__pijit_body"
ITEM_NAME = "__pijit_item"


def _call_body(body, at) -> list:
    """One iteration: the loop item is on the stack; call the body, store what it returns."""
    out = [Instr("STORE_FAST", ITEM_NAME, lineno=at)]
    out += forms.call([Instr("LOAD_FAST", BODY_NAME, lineno=at)],
                      [_load_and_forget(ITEM_NAME, at)] +
                      [[Instr("LOAD_FAST", name, lineno=at)] for name in body.params], lineno=at)
    out.append(Instr("UNPACK_SEQUENCE", len(body.outs), lineno=at))
    return out + [Instr("STORE_FAST", name, lineno=at) for name in body.outs]


def _make_function(new_code, code, at) -> list:
    """Push a function of `new_code` made with this frame's globals and closure."""
    out, flags = [], 0
    if code.co_freevars:
        out += [forms.load_cell(name, lineno=at) for name in code.co_freevars]
        out.append(Instr("BUILD_TUPLE", len(code.co_freevars), lineno=at))
        flags = 0x08
    return out + [Instr("LOAD_CONST", new_code, lineno=at)] + forms.make_function(flags, lineno=at)


def _call_resume(resume_code, depth, live, code, original, pos) -> list:
    """Store the stack into temporaries, make the resume function (with this frame's closure
    and globals) and return a request that the hook call it with the stack and the locals
    (eval_frame.RESUME, see csrc/eval_frame.c): it runs once this frame has returned, so
    the user's function has one frame on the stack after a break, as in plain Python."""
    at = line_at(original, pos, code.co_firstlineno)
    out = [Instr("STORE_FAST", STACK_NAME.format(i), lineno=at) for i in reversed(range(depth))]
    # A live local may be unbound on the path taken (assigned only on another path through
    # the span): the checked load raises UnboundLocalError there, as 3.11's LOAD_FAST does.
    args = [_load_and_forget(STACK_NAME.format(i), at) for i in range(depth)] + \
        [[forms.load_checked(name, lineno=at)] for name in live]
    # Without a closure, the hook makes the function of the code (once: csrc/eval_frame.c).
    fn = _make_function(resume_code, code, at) if code.co_freevars else \
        [Instr("LOAD_CONST", resume_code, lineno=at)]
    out += [Instr("LOAD_CONST", eval_frame.RESUME, lineno=at)] + fn + \
        [i for arg in args for i in arg]
    return out + [Instr("BUILD_TUPLE", depth + len(live) + 2, lineno=at),
                  Instr("RETURN_VALUE", lineno=at)]


def _load_and_forget(name, lineno) -> list:
    """Push a temporary and delete it: the user's frame never has it."""
    return [Instr("LOAD_FAST", name, lineno=lineno), Instr("DELETE_FAST", name, lineno=lineno)]
