"""The capture hook: FrameCapture.walk calls `at(cap, pc)` at every position; at the first
instruction of an outermost loop it tries to make the whole nest one graph node.

A loop the compiler cannot handle (types.Unsupported) is captured as before: unrolled, a
loop node, or residual bytecode (logged on pijit.graph_breaks at INFO).
"""
from __future__ import annotations

import builtins
import logging
import operator
from functools import lru_cache

import numpy as np
from bytecode import Instr

from pijit.capture.ops_load_store import DELETED, _global, load_local
from pijit.capture.values import ConstValue, GraphValue, RangeValue, node_arg
from pijit.graph.ir import Meta
from pijit.loopnest import types as T
from pijit.loopnest.node import NestOp
from pijit.loopnest.recognise import Entry, recognise
from pijit.loopnest.types import Unsupported

log = logging.getLogger("pijit.graph_breaks")

_LOADS = ("LOAD_FAST", "LOAD_FAST_CHECK", "STORE_FAST")


def at(cap, pc: int):
    """The position capture continues at when the loop starting at `pc` became a loop-nest
    node; None otherwise (capture goes on as without loop nests)."""
    if not cap.config.loop_nests or cap.bodies:
        return None
    loop = _outermost_starts(cap.flow).get(pc)
    if loop is None:
        return None
    try:
        return _capture(cap, loop)
    except Unsupported as e:
        log.info("%s:%s: loop is not compiled as a loop nest: %s", cap.code.co_filename,
                 cap.lineno, e)
        return None


def _outermost_starts(flow) -> dict:
    starts = getattr(flow, "_nest_starts", None)
    if starts is None:
        starts = {}
        for loop in flow.loops:
            outer = flow.outermost_loop(loop.start)
            starts[outer.start] = outer
        flow._nest_starts = starts
    return starts


def _static(value):
    """(static type, node argument) of a scalar Value."""
    if isinstance(value, ConstValue):
        t = T.of_value(value.value)
    elif isinstance(value, GraphValue) and not value.meta.is_array:
        t = T.of_pytype(value.meta.pytype, value.meta.dtype)
    else:
        t = None
    if t is None:
        raise Unsupported("a value that is not a number")
    return t


def _capture(cap, loop):
    instrs, flow = cap.instrs, cap.flow
    is_for = isinstance(instrs[loop.start], Instr) and instrs[loop.start].name == "GET_ITER"
    bounds = None
    if is_for:
        top = cap.stack[-1] if cap.stack else None
        if isinstance(top, RangeValue):
            bounds = list(top.bounds)
        elif isinstance(top, ConstValue) and type(top.value) is range:
            r = top.value
            bounds = [ConstValue(r.start), ConstValue(r.stop), ConstValue(r.step)]
        else:
            raise Unsupported("a for loop over something other than a range")
    names = {i.arg for i in instrs[loop.start:loop.end + 1]
             if isinstance(i, Instr) and i.name in _LOADS}
    entries, values = {}, {}
    for name in sorted(names & flow.live_in[loop.start]):
        value = cap.locals.get(name)
        if value is None:
            nargs = len(cap.builder.args)
            if cap.parent is None and name in cap.code.co_varnames[:nargs]:
                value = load_local(cap, name)
        if value is None or value is DELETED:
            raise Unsupported(f"{name} may be unbound in the loop")
        if isinstance(value, GraphValue) and value.meta.is_array:
            if value.meta.dtype not in T.DTYPES:
                raise Unsupported(f"an array of {value.meta.dtype}")
            entries[name] = Entry(array=(value.meta.dtype, value.meta.ndim))
        else:
            entries[name] = Entry(type=_static(value))
        values[name] = value
    resolved = []

    def resolve(gname):
        globs = cap.func.__globals__
        if gname in globs:
            obj = globs[gname]
        elif hasattr(builtins, gname):
            obj = getattr(builtins, gname)
        else:
            raise Unsupported(f"global {gname!r} is not defined")
        resolved.append(gname)
        return obj

    range_types = [_static(b) for b in bounds] if bounds is not None else None
    nest, exit_pos = recognise(instrs, loop.start, loop.end, entries, range_types, resolve,
                               lambda pos: flow.live_in[pos])
    for gname in dict.fromkeys(resolved):       # guard what the nest assumed of globals
        _global(cap, gname)
    nest.lineno = cap.lineno
    name = f"{cap.code.co_name}_nest{loop.start}"
    op = NestOp(nest, cap.code.co_filename, name)
    args = [node_arg(values[a[2:]]) for a in nest.arrays]
    if bounds is not None:
        args += [node_arg(b) for b in bounds]
    args += [node_arg(values[v[2:]]) for v in nest.inputs if v.startswith("l_")]
    metas = tuple(_meta(nest.types[o][0]) for o in nest.outputs)
    graph = cap.graph
    ref = graph.add_node("loop_nest", op, tuple(args), {}, metas, cap.lineno)
    if is_for:
        cap.pop()
    for k, out in enumerate(nest.outputs):
        item = graph.add_node("tuple_item", operator.getitem, (ref, k), {}, metas[k],
                              cap.lineno)
        cap.locals[out[2:]] = GraphValue(item, metas[k])
    return exit_pos


@lru_cache(maxsize=None)
def _meta(t) -> Meta:
    if isinstance(t, T.PyScalar):
        py = {T.INT: int, T.FLOAT: float, T.BOOL: bool}[t]
        return Meta(py, np.dtype(py), ())
    return Meta(t.type, t, ())
