"""CaptureResult + CompiledGraph -> the transformed function the C hook calls on a cache hit.

The transformed code takes every argument slot of the original frame as a plain positional
parameter (see `pijit._compat.arg_slot_count`), reloads each graph input from its source,
calls the compiled graph, and rebuilds the returned structure (tuples, lists, dicts,
constants, objects passed through) around the graph's outputs. It keeps the original name,
file, first line and closure, so tracebacks and `co_name` still read as the user's function.
"""
from __future__ import annotations

import inspect
import types

from bytecode import Bytecode, FreeVar, Instr

from pijit._compat import arg_slot_count
from pijit.capture.graph_break import GraphBreak, Reason
from pijit.capture.sources import (AttrSource, CellSource, ConstSource, GlobalSource,
                                   ItemSource, LocalSource)
from pijit.capture.values import (ConstValue, DictValue, GraphValue, ListValue, SliceValue,
                                  TupleValue)

_OUT = "__pijit_out{}"


def emit_load(source, lineno) -> list:
    """Instructions that push the value of `source` (the residual-code twin of Source.read)."""
    if isinstance(source, LocalSource):
        return [Instr("LOAD_FAST", source.local, lineno=lineno)]
    if isinstance(source, GlobalSource):
        return [Instr("LOAD_GLOBAL", (False, source.global_name), lineno=lineno)]
    if isinstance(source, CellSource):
        return [Instr("LOAD_DEREF", FreeVar(source.var), lineno=lineno)]
    if isinstance(source, AttrSource):
        return emit_load(source.base, lineno) + [Instr("LOAD_ATTR", source.attr, lineno=lineno)]
    if isinstance(source, ItemSource):
        return emit_load(source.base, lineno) + [Instr("LOAD_CONST", source.index, lineno=lineno),
                                                 Instr("BINARY_SUBSCR", lineno=lineno)]
    if isinstance(source, ConstSource):
        return [Instr("LOAD_CONST", source.obj, lineno=lineno)]
    raise TypeError(f"cannot reload {source!r}")


def emit_value(value, out_index: dict, lineno) -> list:
    """Instructions that push the returned value `value` (graph outputs read from temps)."""
    if isinstance(value, GraphValue):
        return [Instr("LOAD_FAST", _OUT.format(out_index[value.ref]), lineno=lineno)]
    if value.source is not None:          # an object passed through: same identity
        return emit_load(value.source, lineno)
    if isinstance(value, ConstValue):
        return [Instr("LOAD_CONST", value.value, lineno=lineno)]
    if isinstance(value, (TupleValue, ListValue)):
        code = [i for v in value.items for i in emit_value(v, out_index, lineno)]
        op = "BUILD_TUPLE" if isinstance(value, TupleValue) else "BUILD_LIST"
        return code + [Instr(op, len(value.items), lineno=lineno)]
    if isinstance(value, DictValue):
        code = []
        for key, item in value.items.items():
            code.append(Instr("LOAD_CONST", key, lineno=lineno))
            code += emit_value(item, out_index, lineno)
        return code + [Instr("BUILD_MAP", len(value.items), lineno=lineno)]
    if isinstance(value, SliceValue):
        code = [i for v in (value.start, value.stop, value.step)
                for i in emit_value(v, out_index, lineno)]
        return code + [Instr("BUILD_SLICE", 3, lineno=lineno)]
    raise GraphBreak(Reason.UNSUPPORTED_VALUE, f"returning a {type(value).__name__}", lineno)


def graph_outputs(value, found: dict) -> dict:
    """Refs of the graph values the returned structure needs, in first-use order."""
    if isinstance(value, GraphValue):
        found.setdefault(value.ref, len(found))
    elif value.source is None:
        items = ()
        if isinstance(value, (TupleValue, ListValue)):
            items = value.items
        elif isinstance(value, DictValue):
            items = value.items.values()
        elif isinstance(value, SliceValue):
            items = (value.start, value.stop, value.step)
        for item in items:
            graph_outputs(item, found)
    return found


def build_transformed(func, capture, graph_fn, lineno) -> types.FunctionType:
    """The function an entry calls: (arg slots...) -> the original function's result."""
    code = func.__code__
    n = arg_slot_count(code)
    out_index = graph_outputs(capture.ret, {})
    instrs = [Instr("RESUME", 0, lineno=code.co_firstlineno)]
    if code.co_freevars:
        instrs.insert(0, Instr("COPY_FREE_VARS", len(code.co_freevars), lineno=None))
    if capture.graph.nodes or out_index:
        instrs += [Instr("PUSH_NULL", lineno=lineno), Instr("LOAD_CONST", graph_fn, lineno=lineno)]
        for source in capture.input_sources:
            instrs += emit_load(source, lineno)
        k = len(capture.input_sources)
        instrs += [Instr("PRECALL", k, lineno=lineno), Instr("CALL", k, lineno=lineno),
                   Instr("UNPACK_SEQUENCE", len(out_index), lineno=lineno)]
        instrs += [Instr("STORE_FAST", _OUT.format(i), lineno=lineno) for i in range(len(out_index))]
    instrs += emit_value(capture.ret, out_index, lineno)
    instrs.append(Instr("RETURN_VALUE", lineno=lineno))

    bc = Bytecode(instrs)
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
    new_code = bc.to_code()
    fn = types.FunctionType(new_code, func.__globals__, func.__name__, None, func.__closure__)
    fn.__qualname__ = func.__qualname__
    return fn
