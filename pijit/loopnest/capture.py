"""The capture hook: FrameCapture.walk calls `at(cap, pc)` at the positions `starts(cap)`
names; at the first instruction of an outermost loop it tries to make the whole nest one
graph node.

A loop the compiler cannot handle (types.Unsupported) is captured as before: unrolled, a
loop node, or residual bytecode (logged on pijit.graph_breaks at INFO).
"""
from __future__ import annotations

import builtins
import logging
import operator
from functools import lru_cache

import numpy as np
from bytecode import Instr, Label, SetLineno

from pijit.bytecode_gen.reconstruct import INTERNAL_PREFIX
from pijit.capture.graph_break import GraphBreak, Reason
from pijit.capture.sources import LocalSource
from pijit.capture.ops_load_store import DELETED, _global, load_local
from pijit.capture.values import (ConstValue, GraphValue, ListValue, RangeValue, Value,
                                  is_immutable, node_arg)
from pijit.capture.wrap import LazyListValue, ObjectValue
from pijit.capture.flow import Loop
from pijit.graph.ir import Meta
from pijit.loopnest import appends, calls, flags, inline
from pijit.loopnest import types as T
from pijit.loopnest.node import NestOp
from pijit.loopnest.recognise import Entry, recognise
from pijit.loopnest.types import Unsupported

log = logging.getLogger("pijit.graph_breaks")

_LOADS = ("LOAD_FAST", "LOAD_FAST_CHECK", "STORE_FAST")
# The entry of the array a `for` loop iterates when no local holds it (not a user's name)
ITERATED = INTERNAL_PREFIX + "iterated"


def starts(cap) -> dict:
    """The positions where `at` may make a loop nest in cap's frame (walked to its end), to
    their loops: the walk asks `at` only there, since the call at every step was 5% of a
    capture's instructions."""
    if not cap.config.loop_nests or cap.bodies:
        return {}
    return _outermost_starts(cap.flow)


def at(cap, pc: int):
    """The position capture continues at when the loop starting at `pc` became a loop-nest
    node; None otherwise (capture goes on as without loop nests)."""
    loop = starts(cap).get(pc)
    if loop is None:
        return None
    first = cap.instrs[pc]
    if isinstance(first, Instr) and first.location is not None and \
            first.location.lineno is not None:
        cap.lineno = first.location.lineno      # the loop's line (the walk sets it there too)
    try:
        return _capture(cap, loop)
    except Unsupported as e:
        log.info("%s:%s: loop is not compiled as a loop nest: %s", cap.code.co_filename,
                 cap.lineno, e)
    except Exception:       # noqa: BLE001 - a recogniser bug must not change what runs
        log.exception("%s:%s: loop nest recognition failed", cap.code.co_filename,
                      cap.lineno)
    return None


def _outermost_starts(flow) -> dict:
    starts = getattr(flow, "_nest_starts", None)
    if starts is None:
        starts = {}
        for loop in flow.loops:
            outer = flow.outermost_loop(loop.start)
            starts[_while_test(flow, outer)] = outer
            first = _iterable_start(flow, outer)
            if first is not None:
                starts[first] = outer
        flow._nest_starts = {pos: Loop(pos, outer.end) for pos, outer in starts.items()}
    return flow._nest_starts


def _iterable_start(flow, loop):
    """Where a `for` loop's iterable starts when it is not a range (`a`, `enumerate(a)`,
    `zip(a, range(n))`): the nest then takes the iterable's expression too, before capture
    evaluates it (capture would unroll it, or break the graph at a call it cannot iterate).
    None for a range, whose loop starts at its GET_ITER with the range on the stack, or an
    expression with jumps. The expression is the instructions before GET_ITER that leave
    one value more on the stack."""
    instrs = flow.instrs
    get_iter = instrs[loop.start]
    if not isinstance(get_iter, Instr) or get_iter.name != "GET_ITER":
        return None
    net = 0
    for pos in range(loop.start - 1, max(loop.start - 40, -1), -1):
        item = instrs[pos]
        if isinstance(item, SetLineno):
            continue
        if not isinstance(item, Instr) or item.has_jump():
            return None
        net += item.stack_effect(jump=False)
        if net == 1:
            if item.name == "LOAD_GLOBAL" and _global_name(item) == "range":
                return None
            return pos
    return None


def _global_name(instr) -> str:
    return instr.arg[1] if isinstance(instr.arg, tuple) else instr.arg


def _while_test(flow, loop) -> int:
    """Where a loop's region starts: a `while` loop's first test, which CPython (3.11-3.13)
    puts before the loop head (`test; jump-if-false exit; head: body; test; jump back`),
    else the loop's start. The test is the instructions of the while statement's line
    before the head."""
    instrs = flow.instrs
    pos = loop.start - 1
    while pos >= 0 and not isinstance(instrs[pos], Instr):
        if isinstance(instrs[pos], Label):
            pos -= 1
            continue
        return loop.start
    if pos < 0 or not instrs[pos].name.startswith("POP_JUMP") or \
            flow.label_pos.get(instrs[pos].arg, -1) <= loop.end:
        return loop.start
    exit_label = instrs[pos].arg
    line = instrs[pos].location.lineno if instrs[pos].location else None
    first = pos
    while first > 0 and line is not None:
        prev = instrs[first - 1]
        if not isinstance(prev, Instr) or prev.location is None or \
                prev.location.lineno != line or prev.name in ("STORE_FAST", "POP_TOP") or \
                prev.has_jump() and not (prev.name.startswith("POP_JUMP") and
                                         prev.arg is exit_label):
            break
        first -= 1
    return first


def _entry(value):
    if isinstance(value, GraphValue) and value.meta.is_array:
        return ("array", value.meta.dtype, value.meta.ndim)
    if _is_list(value):
        return ("list",)
    return ("scalar", _static(value))


def _entry_of(e: Entry):
    if e.is_list:
        return ("list",)
    return ("array",) + tuple(e.array) if e.array is not None else ("scalar", e.type)


def _is_list(value) -> bool:
    """A list: built by the frame (also one an earlier nest appended to), or the caller's
    (a long one is opaque to capture)."""
    return isinstance(value, (ListValue, appends.AppendedList)) or \
        isinstance(value, ObjectValue) and type(value.obj) is list


def _guarded_value(cap, value, unread: str | None):
    """The value of a scalar local that the graph's guards fix (a ConstValue: by an "eq"
    guard on its source, or a constant of the code), else flags.UNKNOWN. An argument not read
    yet (`unread`: its name) is judged by what reading it will make (wrap.pins_value)."""
    if not isinstance(value, ConstValue):
        return flags.UNKNOWN
    if unread is not None and not cap.builder.pins_value(
            value.value, LocalSource(cap.code.co_varnames.index(unread), unread)):
        return flags.UNKNOWN
    return value.value


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
    bounds = iterated = None
    if is_for:
        top = cap.stack[-1] if cap.stack else None
        if isinstance(top, RangeValue):
            bounds = list(top.bounds)
        elif isinstance(top, ConstValue) and type(top.value) is range:
            r = top.value
            bounds = [ConstValue(r.start), ConstValue(r.stop), ConstValue(r.step)]
        elif isinstance(top, GraphValue) and top.meta.is_array:
            iterated = top      # an array no local holds: `for x in a[1:]`, `self.data`
        else:
            raise Unsupported("a for loop over something other than a range or an array")
    elif cap.stack:
        # a while loop whose head follows a value still on the stack (a resume function
        # entered after a call in its condition): the walk starts from an empty stack
        raise Unsupported("a while loop entered with values on the stack")
    loads = [i.arg for i in instrs[loop.start:loop.end + 1]
             if isinstance(i, Instr) and i.name in _LOADS]
    if not all(isinstance(name, str) for name in loads):
        # 3.13's LOAD_FAST of a local a closure also holds (the bytecode package's CellVar)
        raise Unsupported("a variable a closure shares is read in the loop")
    names = set(loads)
    entries, values, unread = {}, {}, []
    nargs = len(cap.builder.args)
    for name in sorted(names & flow.live_in[loop.start]):
        value = cap.locals.get(name)
        if value is None and cap.parent is None and name in cap.code.co_varnames[:nargs]:
            # an argument not read yet: judged by its object, read (and guarded) only
            # once the nest is known to compile, so a loop that does not leaves no trace
            raw = cap.builder.args[cap.code.co_varnames.index(name)]
            unread.append(name)
            if type(raw) is np.ndarray:
                value = GraphValue(None, Meta.of(raw))
            elif type(raw) is list:
                value = ObjectValue(raw, None)
            else:
                value = ConstValue(raw)
        if value is None or value is DELETED:
            raise Unsupported(f"{name} may be unbound in the loop")
        if isinstance(value, GraphValue) and value.meta.is_array:
            if value.meta.dtype not in T.DTYPES:
                raise Unsupported(f"an array of {value.meta.dtype}")
            entries[name] = Entry(array=(value.meta.dtype, value.meta.ndim))
        elif _is_list(value):
            entries[name] = Entry(is_list=True)     # recognise: appended to, nothing else
        else:
            entries[name] = Entry(type=_static(value), value=_guarded_value(
                cap, value, name if name in unread else None))
        values[name] = value
    if iterated is not None:
        if iterated.meta.dtype not in T.DTYPES:
            raise Unsupported(f"an array of {iterated.meta.dtype}")
        entries[ITERATED] = Entry(array=(iterated.meta.dtype, iterated.meta.ndim))
        values[ITERATED] = iterated
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
                               lambda pos: flow.live_in[pos],
                               ITERATED if iterated is not None else None)
    stored = [g for g in resolved if g in cap.effects.globals]
    if stored:      # resolve read the module's dict, not the value the function stored
        raise Unsupported(f"global {stored[0]!r} is assigned before the loop")
    for gname in dict.fromkeys(resolved):       # guard what the nest assumed of globals
        _global(cap, gname)
        obj = cap.func.__globals__.get(gname)
        if calls.global_constant(obj) is not None:      # by value, whatever specialize_scalar
            cap.builder.guard(cap.global_source(gname), "eq", obj)
    inline.guard_module_attrs(cap, nest.module_attrs)
    inline.guard(cap, nest)                     # and of the functions it inlined
    for name in unread:
        values[name] = load_local(cap, name)
        if _entry(values[name]) != _entry_of(entries[name]):
            raise Unsupported(f"{name} is not what it seemed")
    lists = [a[2:] for a, e in nest.arrays.items() if e == appends.LIST]
    callers = appends_to(cap, nest, lists, values) if lists else []
    nest.lineno = cap.lineno
    name = f"{cap.code.co_name}_nest{loop.start}"
    op = NestOp(nest, cap.code, name, cap.func.__globals__)
    args = [node_arg(values[a[2:]]) for a in nest.arrays]
    if bounds is not None:
        args += [node_arg(b) for b in bounds]
    args += [node_arg(values[v[2:]]) for v in nest.inputs if v.startswith("l_")]
    nest.known = {v: a for v, a in zip(nest.inputs, args[len(nest.arrays):])
                  if type(a) in (int, bool, float)}
    unions = [o[2:] for o in nest.outputs if len(nest.types[o]) > 1]
    if unions and (cap.parent is not None or cap.config.strict):
        raise Unsupported(f"{', '.join(unions)} may be a Python or a NumPy scalar after the "
                          "loop (which would need a graph break)")
    # The NumPy member of a union: only the code after the break below sees the value.
    metas = tuple(_meta(max(nest.types[o], key=T.is_np)) for o in nest.outputs)
    graph = cap.graph
    ref = graph.add_node("loop_nest", op, tuple(args), {}, metas, cap.lineno)
    if is_for:
        cap.pop()
    for k, out in enumerate(nest.outputs):
        item = graph.add_node("tuple_item", operator.getitem, (ref, k), {}, metas[k],
                              cap.lineno)
        if nest.returns:        # the function's result: capture ends here
            cap.ret = GraphValue(item, metas[k])
        else:
            cap.store(out[2:], GraphValue(item, metas[k]))   # a Binding for the replay
    if nest.returned is not None:       # `return out`: the list the nest appended to
        cap.ret = values[nest.returned]
    if callers and not nest.returns:
        cap.stop_at[exit_pos] = GraphBreak(
            Reason.LOOP, f"the loop appends to {', '.join(callers)}, a list of the caller's",
            cap.lineno)
    elif unions:
        # s = 0.0; for ...: s += x[i] leaves a float or an np.float64 depending on the trip
        # count: the graph ends after the loop, and the code after it is captured again
        # (a resume function, guarded on the type the value has)
        cap.stop_at[exit_pos] = GraphBreak(
            Reason.LOOP, f"{', '.join(unions)} may be a Python or a NumPy scalar after the "
                         "loop (depending on its trip count)", cap.lineno)
    return exit_pos


def appends_to(cap, nest, lists: list, values: dict):
    """The lists the nest appends to, made graph values (values[name], and the local:
    appends.AppendedList, which the code after the loop reads as a list whose length and
    items are known only at run time): a list the frame built (`out = []`) is built by a
    node before the nest, from its items, so the nest appends to that object; a list read
    from a source (the caller's) is a graph input, that very object. Unsupported when a list
    the frame built may be seen through another name, a container or a recorded store (an
    alias would keep the list capture knew), when an append capture recorded (made after the
    graph) may reach the list, or in an inlined call or strict mode. The caller's lists,
    which capture may know through other names too, returned: the graph ends after the loop
    (the code after it reads the real list)."""
    if cap.parent is not None or cap.config.strict:
        raise Unsupported("appending to a list needs a graph break after the loop")
    for name in lists:
        lst = values[name]
        if lst.source is not None:
            if any(s.kind == "append" for s in cap.effects.stores):
                raise Unsupported("a list.append before the loop is made after the graph")
            continue
        if not isinstance(lst, appends.AppendedList) and (lst.frame is not cap or
                                                          lst.body is not None):
            raise Unsupported(f"appending to {name}, a list of another frame")
        others = [v for k, v in cap.locals.items() if k != name] + list(cap.stack) + \
            [(s.target, s.value) for s in cap.effects.stores]
        if _holds(others, lst, set()):      # (an alias would keep what capture knew of it)
            raise Unsupported(f"the list {name} is also held elsewhere")
        if isinstance(lst, ListValue) and not all(
                isinstance(i, GraphValue) or isinstance(i, ConstValue) and
                is_immutable(i.value) for i in lst.items):
            raise Unsupported(f"the list {name} holds items the graph cannot rebuild")
    callers = []
    for name in lists:
        lst = values[name]
        if lst.source is not None:
            values[name] = cap.builder._input(appends.LIST_META, lst.source)
            callers.append(name)
            continue
        if isinstance(lst, appends.AppendedList):      # an earlier nest's
            ref = lst.ref
        else:
            ref = cap.graph.add_node("build_list", appends.new_list,
                                     tuple(node_arg(i) for i in lst.items), {},
                                     appends.LIST_META, cap.lineno)
        float64, numbers = appends.item_types(nest, name, lst)
        values[name] = appends.AppendedList(ref, appends.LIST_META, float64=float64,
                                            numbers=numbers)
        if not nest.returns:
            cap.store(name, values[name])
    return callers


def _holds(value, target, seen: set) -> bool:
    """Whether `value` (a capture Value, or a list, tuple or dict of them) reaches
    `target` (through any Value's fields: a tuple's items, a bound method's object...)."""
    if value is target:
        return True
    if id(value) in seen:
        return False
    seen.add(id(value))
    if isinstance(value, (list, tuple)):
        return any(_holds(v, target, seen) for v in value)
    if isinstance(value, dict):
        return any(_holds(v, target, seen) for v in value.values())
    if isinstance(value, LazyListValue) or isinstance(value, (ConstValue, GraphValue)):
        return False
    if isinstance(value, Value):
        return any(_holds(v, target, seen) for v in vars(value).values())
    return False


@lru_cache(maxsize=None)
def _meta(t) -> Meta:
    if isinstance(t, T.PyScalar):
        py = {T.INT: int, T.FLOAT: float, T.BOOL: bool}[t]
        return Meta(py, np.dtype(py), ())
    return Meta(t.type, t, ())
