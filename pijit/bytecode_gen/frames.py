"""Exception handlers of transformed code, and frames standing for the user's.

A transformed function runs where the user's frame would, so what an exception leaves behind
must read as the user's: handlers (exception table entries on 3.11-3.13, zero cost until
something raises) cover its body. Around the graph, one first asks a replay (replay.py) for the
exception the user's code raises there, in a frame holding the user's locals; around all
the rest (the user's own try blocks excepted: their handlers run as written), one cleans the
traceback (pijit.tracebacks.clean) and re-raises where it was. `raiser` makes the frame an
error found while compiling a call is raised from: the user's function, at the user's line.
"""
from __future__ import annotations

import types

from bytecode import Instr, Label, TryBegin, TryEnd

from pijit._compat import arg_slot_count
from pijit.bytecode_gen import forms
from pijit.bytecode_gen.copy import assemble, prologue


def protect(head: list, graph: list, rest: list, replay, clean, lineno) -> list:
    """head + graph + rest, with `graph` (may be empty) covered by a handler calling
    replay(exc) (None: re-raise exc; else raise what it returns), and every instruction of
    graph's handler and of `rest` outside the user's try blocks by one calling clean(exc)."""
    to_replay, to_clean = Label(), Label()
    body = list(rest)
    if graph:
        begin = TryBegin(to_replay, True, 0)
        body = [begin] + list(graph) + [TryEnd(begin)] + body + \
            _handler(to_replay, replay, lineno, _raise_result)
    # No line: a tracer (one started inside the call, transform._plain_rest) sees an
    # exception leave the user's frame with no line event of pijit's handler.
    return head + _cover(body, to_clean) + _handler(to_clean, clean, None, _reraise)


def _cover(items: list, target: Label) -> list:
    """items with each run of instructions outside any try block put in one of `target`."""
    out, depth, begin = [], 0, None
    for item in items:
        if isinstance(item, TryBegin):
            if begin is not None:
                out.append(TryEnd(begin))
                begin = None
            depth += 1
        elif isinstance(item, TryEnd):
            depth = max(depth - 1, 0)
        elif isinstance(item, Instr) and depth == 0 and begin is None:
            begin = TryBegin(target, True, 0)
            out.append(begin)
        out.append(item)
    if begin is not None:
        out.append(TryEnd(begin))
    return out


def _handler(label: Label, fn, lineno, ending) -> list:
    """At `label` (stack: lasti, exc): make exc the handled exception, call fn(exc) (a
    failure in it re-raises with the exception state restored, as CPython's own cleanup
    handlers do), then `ending` decides what is raised. An exception that is not an
    Exception (KeyboardInterrupt, SystemExit) is re-raised at once, with no call: fn runs
    Python code, where a second signal's KeyboardInterrupt would replace the first (plain
    Python runs none of the user's code between the two)."""
    cleanup, as_is = Label(), Label()
    # Begun before PUSH_EXC_INFO, as CPython's compiler does: its depth (lasti, exc) then
    # keeps lasti and the previous exception, which PUSH_EXC_INFO puts below exc.
    begin = TryBegin(cleanup, True, 2)
    return [label, begin, Instr("PUSH_EXC_INFO", lineno=lineno),
            Instr("LOAD_CONST", Exception, lineno=lineno),
            Instr("CHECK_EXC_MATCH", lineno=lineno),
            forms.jump_forward("FALSE", as_is, lineno=lineno)] + \
        forms.call([Instr("LOAD_CONST", fn, lineno=lineno)],
                   [[Instr("COPY", 3, lineno=lineno)]], lineno=lineno) + [TryEnd(begin)] + \
        ending(lineno) + [as_is, Instr("SWAP", 2, lineno=lineno),
                          Instr("POP_EXCEPT", lineno=lineno), Instr("RERAISE", 1, lineno=lineno),
                          cleanup, Instr("COPY", 3, lineno=lineno),
                          Instr("POP_EXCEPT", lineno=lineno), Instr("RERAISE", 1, lineno=lineno)]


def _reraise(lineno) -> list:
    """Stack: lasti, previous exception, exc, fn's result -> exc raised again where it was
    raised (RERAISE adds no traceback entry)."""
    return [Instr("POP_TOP", lineno=lineno), Instr("SWAP", 2, lineno=lineno),
            Instr("POP_EXCEPT", lineno=lineno), Instr("RERAISE", 1, lineno=lineno)]


def _raise_result(lineno) -> list:
    """Stack: lasti, previous exception, exc, result -> exc raised again when the result is
    None, else the result raised (the exception state restored first, so it chains to what
    the user's code was handling, as the original did)."""
    again = Label()
    return [Instr("COPY", 1, lineno=lineno),
            forms.jump_forward("NONE", again, lineno=lineno),
            Instr("SWAP", 2, lineno=lineno), Instr("POP_TOP", lineno=lineno),
            Instr("SWAP", 2, lineno=lineno), Instr("POP_EXCEPT", lineno=lineno),
            Instr("RAISE_VARARGS", 1, lineno=lineno), again] + _reraise(lineno)


def raiser(func, exc: BaseException, lineno) -> types.FunctionType:
    """A function to call with func's argument slots that raises `exc` in a frame standing
    for func's (its name, file, globals, closure and arguments) at `lineno`."""
    code = func.__code__
    once = iter([exc])      # emptied when raised: the code keeps no reference to exc
    instrs = prologue(code, lineno) + forms.call(
        [Instr("LOAD_CONST", next, lineno=lineno)], [[Instr("LOAD_CONST", once, lineno=lineno)]],
        lineno=lineno) + [Instr("RAISE_VARARGS", 1, lineno=lineno)]
    new = assemble(instrs, code, code.co_varnames[:arg_slot_count(code)], code.co_name,
                   code.co_qualname)
    fn = types.FunctionType(new, func.__globals__, func.__name__, None, func.__closure__)
    fn.__qualname__ = func.__qualname__
    return fn
