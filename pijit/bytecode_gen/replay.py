"""A failed graph, run again as the user's frame: captured graph + bindings -> replay function.

When a graph raises (a FloatingPointError in a fused kernel under np.errstate(all="raise"),
an IndexError from a run-time index), the frame a debugger should land in is the user's
function at the line that failed, holding the user's locals; the compiled graph keeps none of
them (a fused group never materializes the values it computes). A graph that writes into no
array can be run again without effect. Its replay function takes the transformed function's
arguments, computes each captured node in program order by calling the node's NumPy function,
and stores each value into the local the user's code stored it in (capture's Bindings), at
the user's lines, under the name, file and free variables of the user's function. So it
raises where plain Python raises, in a frame holding what plain Python's would; that
exception replaces the original (pijit.tracebacks then drops the transformed frame it
continues). Values the user never named stay on the stack, as in the user's expressions.
"""
from __future__ import annotations

import dataclasses
import sys
import types

from bytecode import Instr

from pijit import config
from pijit._compat import arg_slot_count
from pijit.backends.numpy_backend import plan_inlining
from pijit.bytecode_gen import forms
from pijit.bytecode_gen.copy import assemble, prologue
from pijit.bytecode_gen.reconstruct import TEMP_NAME, emit_load
from pijit.capture.sources import LocalSource
from pijit.capture.values import ConstValue, GraphValue, NullValue
from pijit.graph.ir import Ref, node_refs
from pijit.graph.purity import mutates


# Running out of memory or stack: running the graph again would only need more of it.
_NOT_REPLAYED = (MemoryError, RecursionError)


class Replay:
    """The graph handler's callback in a transformed function of `code` (the user's code, or
    a resume function's): replay(exc) -> the exception plain Python raises there, or None
    to re-raise exc (a graph that writes into arrays, an exception that is not an ordinary
    error such as KeyboardInterrupt, or is MemoryError or RecursionError, a replay that does
    not fail)."""

    def __init__(self, code, capture, register):
        self.code = code
        self.graph = capture.graph
        self.sources = {ref.index: source for ref, source in
                        zip(capture.graph.inputs, capture.input_sources)}
        self.bindings = list(capture.bindings or ())
        self.register = register        # register(code): the replay code stands for `code`
        self.replayable = not any(mutates(n) or any(k == "out" for k, _ in n.kwargs)
                                  for n in self.graph.nodes)
        self._code = None

    def __call__(self, exc):
        if not self.replayable or not isinstance(exc, Exception) or \
                isinstance(exc, _NOT_REPLAYED) or config.env_full_tracebacks():
            return None
        frame = sys._getframe(1)        # the transformed function's, in its handler
        try:
            fn, args = self._function(frame)
        except Exception:               # noqa: BLE001 - no replay: the original stands
            return None
        finally:
            del frame
        try:
            fn(*args)
        except Exception as replayed:   # what plain Python raises there
            replayed.__traceback__ = replayed.__traceback__.tb_next    # this frame's entry
            replayed.__context__ = exc.__context__
            replayed.__suppress_context__ = exc.__suppress_context__
            return replayed
        return None

    def _function(self, frame):
        """The replay function made with the frame's globals and free variables, and the
        frame's arguments."""
        if self._code is None:
            self._code = replay_code(self.code, self.graph, self.sources, self.bindings)
            self.register(self._code)
        local = frame.f_locals
        cells = tuple(types.CellType(local[n]) if n in local else types.CellType()
                      for n in self.code.co_freevars)
        args = [local[n] for n in self.code.co_varnames[:arg_slot_count(self.code)]]
        fn = types.FunctionType(self._code, frame.f_globals, self.code.co_name, None,
                                cells or None)
        return fn, args


def replay_code(code, graph, sources: dict, bindings: list) -> types.CodeType:
    """The code of the replay function of `graph` (see the module docstring)."""
    named = {b.value.ref.index for b in bindings if _node_ref(b.value, sources) is not None}
    inlined = plan_inlining(dataclasses.replace(graph, outputs=[]), keep=named)
    by_out = {node.out: node for node in graph.nodes}
    steps = _steps(graph, bindings, inlined)
    homes, skip, last_use = _homes(steps, by_out, inlined, sources)

    def operand(arg, lineno) -> list:
        if isinstance(arg, Ref):
            if arg.index in sources:
                return emit_load(sources[arg.index], lineno)
            if arg.index in inlined:
                return node_expr(by_out[arg.index])
            return [Instr("LOAD_FAST", homes[arg.index], lineno=lineno)]
        if type(arg) in (tuple, list):
            build = "BUILD_TUPLE" if type(arg) is tuple else "BUILD_LIST"
            return [i for a in arg for i in operand(a, lineno)] + \
                [Instr(build, len(arg), lineno=lineno)]
        if type(arg) is dict:
            return [i for k, v in arg.items() for i in operand(k, lineno) + operand(v, lineno)] \
                + [Instr("BUILD_MAP", len(arg), lineno=lineno)]
        if type(arg) is slice:
            return [i for a in (arg.start, arg.stop, arg.step) for i in operand(a, lineno)] + \
                [Instr("BUILD_SLICE", 3, lineno=lineno)]
        return [Instr("LOAD_CONST", arg, lineno=lineno)]

    def node_expr(node) -> list:
        lineno = node.lineno or code.co_firstlineno
        args = [operand(arg, lineno) for arg in node.args] + \
            [operand(value, lineno) for _, value in node.kwargs]
        return forms.call([Instr("LOAD_CONST", node.fn, lineno=lineno)], args,
                          tuple(k for k, _ in node.kwargs), lineno=lineno)

    body = []
    for i, (kind, item) in enumerate(steps):
        if kind == "node":
            lineno = item.lineno or code.co_firstlineno
            body += node_expr(item) + [Instr("STORE_FAST", homes[item.out], lineno=lineno)]
        else:
            lineno = item.lineno
            ref = _node_ref(item.value, sources)
            # A NULL (3.12+): an inlined comprehension unbinding the local it found unbound.
            load = [] if i in skip else \
                [Instr("LOAD_FAST_AND_CLEAR", item.name, lineno=lineno)] \
                if isinstance(item.value, NullValue) else \
                [Instr("LOAD_FAST", homes[ref], lineno=lineno)] if ref is not None else \
                _load_value(item, sources)
            if load:
                body += load + [Instr("STORE_FAST", item.name, lineno=lineno)]
        body += [Instr("DELETE_FAST", homes[k], lineno=lineno) for k, last in last_use.items()
                 if last == i and homes[k] == TEMP_NAME.format(k)]
    end = graph.nodes[-1].lineno if graph.nodes and graph.nodes[-1].lineno else \
        code.co_firstlineno
    body += [Instr("LOAD_CONST", None, lineno=end), Instr("RETURN_VALUE", lineno=end)]
    return assemble(prologue(code, code.co_firstlineno) + body, code,
                    code.co_varnames[:arg_slot_count(code)], code.co_name, code.co_qualname)


def _node_ref(value, sources):
    """The value number of the node computing `value`, if a node does."""
    if isinstance(value, GraphValue) and value.source is None and value.ref.index not in sources:
        return value.ref.index
    return None


def _load_value(binding, sources) -> list:
    """Instructions loading a bound value that no node computes: from its source, or a
    constant; none for an argument still bound to itself or a value not rebuilt here."""
    value = binding.value
    if value.source is not None:
        if isinstance(value.source, LocalSource) and value.source.local == binding.name:
            return []
        return emit_load(value.source, binding.lineno)
    if isinstance(value, ConstValue):
        return [Instr("LOAD_CONST", value.value, lineno=binding.lineno)]
    return []


def _steps(graph, bindings, inlined) -> list:
    """("node", node) for each node written as a statement and ("bind", binding), in the
    order the user's code ran them."""
    steps, pending = [], list(bindings)
    pending.reverse()
    for k, node in enumerate(graph.nodes):
        while pending and pending[-1].position <= k:
            steps.append(("bind", pending.pop()))
        if node.out not in inlined:
            steps.append(("node", node))
    steps += [("bind", b) for b in reversed(pending)]
    return steps


def _homes(steps, by_out, inlined, sources):
    """(local of each statement node, binding steps its node's store already does, step of
    each node's last read). A node's home is the user's local it is stored in right after
    it is computed, when that local keeps it until its last read; else a temporary."""
    def reads(node) -> set:
        out = set()
        for ref in node_refs(node):
            if ref.index in inlined:
                out |= reads(by_out[ref.index])
            elif ref.index not in sources:
                out.add(ref.index)
        return out

    last_use, stores = {}, {}
    for i, (kind, item) in enumerate(steps):
        if kind == "node":
            for k in reads(item):
                last_use[k] = i
        else:
            ref = _node_ref(item.value, sources)
            if ref is not None:
                last_use[ref] = i
            stores.setdefault(item.name, []).append(i)
    homes, skip = {}, set()
    for i, (kind, item) in enumerate(steps):
        if kind != "node":
            continue
        homes[item.out] = TEMP_NAME.format(item.out)
        last_use.setdefault(item.out, i)        # never read: its temporary goes at once
        if i + 1 < len(steps) and steps[i + 1][0] == "bind":
            binding = steps[i + 1][1]
            later = [j for j in stores[binding.name] if j > i + 1]
            if _node_ref(binding.value, sources) == item.out and \
                    (not later or last_use.get(item.out, i) < later[0]):
                homes[item.out] = binding.name
                skip.add(i + 1)
    return homes, skip, {k: v for k, v in last_use.items() if k in homes}
