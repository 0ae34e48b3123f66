"""The symbolic interpreter: a frame's function and arguments -> CaptureResult.

Walks the original bytecode (the `bytecode` package's abstract instructions) with a simulated
stack and locals of abstract values. Handlers live in the ops_* modules, one per opcode family,
named after the opcodes; an instruction no handler accepts raises GraphBreak.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

from bytecode import Bytecode, Label, SetLineno, TryBegin, TryEnd

from pijit.capture import numpy_rules
from pijit.capture.graph_break import GraphBreak, Reason
from pijit.capture.registry import HANDLERS
from pijit.capture.values import (ConstValue, DictValue, GraphValue, ListValue, SliceValue,
                                  TupleValue, Value)
from pijit.capture.wrap import ValueBuilder
from pijit.graph.ir import Graph, Ref

# Importing the handler modules registers their opcode handlers.
from pijit.capture import ops_arith, ops_build, ops_call, ops_load_store, ops_stack  # noqa: F401,E402

# A bound on instructions walked, so constant-folded jumps can never loop forever.
MAX_STEPS = 100_000


@dataclass
class CaptureResult:
    """What capture learned: the graph, the guards it relied on, and the returned structure."""
    graph: Graph
    guards: list
    input_sources: list          # Source per graph input, in input order
    ret: Value                   # the returned value, in terms of graph outputs and constants
    return_lineno: int           # the user's line of the RETURN_VALUE


class FrameCapture:
    """State of one capture: simulated stack and locals, the graph being built, the guards."""

    def __init__(self, func, args, config, dynamic_dims=None):
        self.func = func
        self.code = func.__code__
        self.config = config
        self.graph = Graph()
        self.builder = ValueBuilder(self.graph, config, func, args, dynamic_dims or {})
        self.stack: list[Value] = []
        self.locals: dict[str, Value] = {}
        self.kw_names: tuple = ()
        self.lineno = self.code.co_firstlineno
        self.ret: Value | None = None

    # -- stack -------------------------------------------------------------------------
    def push(self, value: Value):
        self.stack.append(value)

    def pop(self) -> Value:
        return self.stack.pop()

    def popn(self, n: int) -> list:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    # -- graph building ----------------------------------------------------------------
    def unsupported(self, reason: Reason, detail: str):
        raise GraphBreak(reason, detail, self.lineno)

    def add_op(self, rule, args: tuple, kwargs: dict) -> Value:
        """Record `rule.fn(*args, **kwargs)` as a node; its Meta comes from the rule."""
        try:
            metas = rule.infer(tuple(infer_arg(a) for a in args),
                               {k: infer_arg(v) for k, v in kwargs.items()})
        except numpy_rules.Unsupported as e:
            self.unsupported(Reason.UNSUPPORTED_OP, f"{rule.name}: {e}")
        except GraphBreak:
            raise
        except Exception as e:  # the real call would raise: let plain Python raise it
            self.unsupported(Reason.UNSUPPORTED_OP, f"{rule.name} would raise {type(e).__name__}: {e}")
        ref = self.graph.add_node(rule.name, rule.fn, tuple(node_arg(a) for a in args),
                                  {k: node_arg(v) for k, v in kwargs.items()},
                                  metas, self.lineno)
        if isinstance(metas, tuple):
            # A tuple result (np.divmod, ...) is one node; items are read with getitem nodes.
            return TupleValue([self._tuple_item(ref, i, m) for i, m in enumerate(metas)])
        fresh = not rule.may_alias(args, kwargs)
        return GraphValue(ref, metas, fresh=fresh)

    def _tuple_item(self, ref: Ref, i: int, meta) -> GraphValue:
        item = self.graph.add_node("tuple_item", operator.getitem, (ref, i), {}, meta, self.lineno)
        return GraphValue(item, meta, fresh=True)

    # -- the walk ----------------------------------------------------------------------
    def run(self) -> CaptureResult:
        instrs = list(Bytecode.from_code(self.code))
        if any(isinstance(i, (TryBegin, TryEnd)) for i in instrs):
            lines = [i.location.lineno for i in instrs
                     if not isinstance(i, (Label, SetLineno, TryBegin, TryEnd)) and i.location]
            self.lineno = next((ln for ln in lines if ln), self.lineno)
            self.unsupported(Reason.EXCEPTION_HANDLING, "try/except/finally or with block")
        labels = {item: pos for pos, item in enumerate(instrs) if isinstance(item, Label)}
        pc, steps = 0, 0
        while self.ret is None:
            steps += 1
            if steps > MAX_STEPS or pc >= len(instrs):
                self.unsupported(Reason.CONTROL_FLOW, "walked off the end of the code")
            instr = instrs[pc]
            pc += 1
            if isinstance(instr, (Label, SetLineno)):
                continue
            if instr.location is not None and instr.location.lineno is not None:
                self.lineno = instr.location.lineno
            handler = HANDLERS.get(instr.name)
            if handler is None:
                self.unsupported(Reason.UNSUPPORTED_OPCODE, instr.name)
            try:
                target = handler(self, instr)
            except GraphBreak as e:
                if e.lineno is None:
                    e.lineno = self.lineno
                raise
            if target is not None:        # a jump taken at capture time
                pc = labels[target]
        return CaptureResult(self.graph, self.builder.guards, self.builder.input_sources,
                             self.ret, self.lineno)


def infer_arg(value: Value):
    """A Value as a rule's infer() sees it: Metas for graph values, objects for constants."""
    if isinstance(value, GraphValue):
        return value.meta
    return _convert(value, infer_arg)


def node_arg(value: Value):
    """A Value as a node argument: Refs for graph values, objects for constants."""
    if isinstance(value, GraphValue):
        return value.ref
    return _convert(value, node_arg)


def _convert(value: Value, leaf):
    if isinstance(value, ConstValue):
        return value.value
    if isinstance(value, TupleValue):
        return tuple(leaf(v) for v in value.items)
    if isinstance(value, ListValue):
        return [leaf(v) for v in value.items]
    if isinstance(value, DictValue):
        return {k: leaf(v) for k, v in value.items.items()}
    if isinstance(value, SliceValue):
        return slice(leaf(value.start), leaf(value.stop), leaf(value.step))
    raise GraphBreak(Reason.UNSUPPORTED_VALUE,
                     f"{type(value).__name__} cannot be an argument of a NumPy operation")


def capture_frame(func, args, config, dynamic_dims=None) -> CaptureResult:
    """Capture one call of `func` with argument slots `args` (see pijit._compat.arg_slot_count).

    A GraphBreak raised out of here carries `guards`: the facts read before capture stopped.
    """
    capture = FrameCapture(func, args, config, dynamic_dims)
    try:
        return capture.run()
    except GraphBreak as e:
        e.guards = list(capture.builder.guards)
        raise
