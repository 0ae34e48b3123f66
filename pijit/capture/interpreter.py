"""The symbolic interpreter: a frame's function and arguments -> CaptureResult.

Walks the original bytecode (the `bytecode` package's abstract instructions) with a simulated
stack and locals of abstract values. Handlers live in the ops_* modules, one per opcode family,
named after the opcodes; an instruction no handler accepts raises GraphBreak.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

import numpy as np

from bytecode import Instr, TryBegin

from pijit.capture import int_range, numpy_rules
from pijit.capture.graph_break import (STATIC_REASONS, TO_END_REASONS, CaptureAbandoned,
                                      GraphBreak, Reason)
from pijit.capture.index_facts import IndexFacts
from pijit.capture.instructions import instructions_and_flow
from pijit.loopnest import capture as loopnest
from pijit.capture.loop_node import LoopPlan, RetryCapture
from pijit.capture.ops_load_store import DELETED
from pijit.capture.sources import (AttrSource, CellSource, DictItemSource, GlobalSource,
                                   ItemSource, LocalSource)
from pijit.capture.registry import HANDLERS
from pijit.capture.side_effects import SideEffects
from pijit.capture.values import (GraphValue, NullValue, TupleValue, Value, infer_arg,
                                  node_arg)
from pijit.capture.wrap import ValueBuilder
from pijit.graph.ir import Graph, Ref
from pijit.graph.work import has_work

# Importing the handler modules registers their opcode handlers.
from pijit.capture import (ops_arith, ops_build, ops_call, ops_load_store,  # noqa: F401,E402
                           ops_loop, ops_stack)

# A bound on instructions walked, so constant-folded jumps can never loop forever.
MAX_STEPS = 100_000


@dataclass
class CaptureResult:
    """What capture learned: the graph, the guards it relied on, and the returned structure."""
    graph: Graph
    guards: list
    input_sources: list          # Source per graph input, in input order
    ret: Value | None            # the returned value, in terms of graph outputs and constants
    return_lineno: int           # the user's line of the RETURN_VALUE (or of the break)
    instructions: list = None    # the original code's abstract instructions
    break_point: "BreakPoint | None" = None
    stores: list = ()            # side_effects.Store, replayed after the graph in this order
    bindings: list = None        # Binding per store into a local of the frame, in order
    inlines: list = None         # inline.InlineCall per inlined call of a user function


@dataclass(frozen=True)
class Binding:
    """A store of `value` into the frame's local `name` at `lineno`, after the graph's first
    `position` nodes: what a replay of the graph binds (bytecode_gen/replay.py)."""
    position: int
    name: str
    value: Value
    lineno: int


@dataclass
class BreakPoint:
    """Capture stopped here: positions [start, end] of the original instructions run as
    residual bytecode, from the simulated `stack` and live `locals` (name -> Value) at start;
    each exit (position, stack depth, live local names) continues in a resume function."""
    reason: Reason
    detail: str
    lineno: int
    start: int
    end: int
    stack: list
    locals: dict
    exits: list
    callee: object = None       # a function to jit on its own (its call could not be inlined)
    body: object = None         # flow.LoopBody: the residual loop's body, outlined and jitted
    handlers: tuple = ()        # inlined comprehensions' handlers the span needs (3.12+)
    # Locals bound at start that no later code reads (name -> Value): plain Python's frame
    # still holds them, so the transformed frame stores them too when it can rebuild them.
    dead: dict = field(default_factory=dict)
    # Locals bound at start (arguments included) that the span neither stores nor deletes:
    # resume functions and loop bodies take them too, so their frames hold every local.
    untouched: tuple = ()

    @property
    def where(self) -> str:
        return f"{self.reason.value}: {self.detail}" if self.detail else self.reason.value


class FrameCapture:
    """State of one capture: simulated stack and locals, the graph being built, the guards."""

    def __init__(self, func, args, config, dynamic_dims, instrs, flow, stop_at, *,
                 parent=None, fn_source=None, bound=None, closure=None, plan=None,
                 eager=frozenset(), pure_budget=None):
        self.func = func
        # What this capture spent, against PURE_CAPTURE_COST (None: the call has array
        # arguments, capture never gives up); shared by the frames and retries of a capture.
        self.pure_budget = pure_budget if parent is None else parent.pure_budget
        self.instrs = instrs
        self.flow = flow
        self.stop_at = stop_at          # loop heads where capture breaks instead of unrolling
        # Loop nodes: which loops to try as loop nodes (shared by every frame of a capture),
        # and the loop bodies being walked (innermost last; see loop_node.py).
        self.plan = plan if parent is None else parent.plan
        self.bodies = [] if parent is None else parent.bodies
        self.facts = IndexFacts() if parent is None else parent.facts   # loop indices
        self.snapshots = {}             # position -> (stack, locals, node count, lineno)
        self.loop_counts = {}           # loop head position -> iterations unrolled
        self.loop_first_node = {}       # loop head position -> graph length at its first one
        self.pc = 0
        self.code = func.__code__
        self.config = config
        # An inlined callee shares its caller's graph and guards; its arguments are bound.
        self.parent = parent
        self.fn_source = fn_source      # where the callee function came from (inlined frames)
        self.closure = closure          # CellRefs of a function made during capture
        self.depth = 0 if parent is None else parent.depth + 1
        self.graph = Graph() if parent is None else parent.graph
        self.effects = SideEffects(eager) if parent is None else parent.effects
        self.builder = parent.builder if parent is not None else \
            ValueBuilder(self.graph, config, func, args, dynamic_dims or {}, self.effects,
                         self.pure_budget)
        self.stack: list[Value] = []
        self.locals: dict[str, Value] = dict(bound or {})
        self.kw_names: tuple = ()
        self.lineno = self.code.co_firstlineno
        self.ret: Value | None = None
        self.yielded: list | None = None    # a consumed generator's items (generators.py)
        self.bindings: list[Binding] = []
        self.binding_marks = {}         # position -> len(bindings) when the walk got there
        self.inlines: list[InlineCall] = [] if parent is None else parent.inlines

    def store(self, name: str, value: Value):
        """STORE_FAST: bind a local (recorded as a Binding, outside loop-node bodies); a NULL
        (3.12+: an inlined comprehension restoring a local that was unbound) unbinds it."""
        self.locals[name] = DELETED if isinstance(value, NullValue) else value
        if not self.bodies:
            self.bindings.append(Binding(len(self.graph.nodes), name, value, self.lineno))

    def inline_frame(self, func, fn_source, bound, closure) -> "FrameCapture":
        """A frame capturing a call of `func` into this frame's graph."""
        instrs, flow = instructions_and_flow(func.__code__)
        return FrameCapture(func, (), self.config, None, instrs, flow, {},
                            parent=self, fn_source=fn_source, bound=bound, closure=closure)

    # -- sources of this frame's globals and free variables ------------------------------
    def global_source(self, name):
        """Where LOAD_GLOBAL `name` of this frame reads from, as a source of the top frame."""
        top = self
        while top.parent is not None:
            top = top.parent
        if self.func.__globals__ is top.func.__globals__:
            return GlobalSource(name)
        return DictItemSource(AttrSource(self.fn_source, "__globals__"), name)

    def cell_source(self, index, name):
        if self.parent is None:
            return CellSource(index, name)
        return AttrSource(ItemSource(AttrSource(self.fn_source, "__closure__"), index),
                          "cell_contents")

    # -- stack -------------------------------------------------------------------------
    def push(self, value: Value):
        self.stack.append(value)

    def pop(self) -> Value:
        return self.stack.pop()

    def popn(self, n: int) -> list:
        """The top n values, popped. A count this frame's stack does not hold is a wrong stack
        effect in a handler: an internal error (the code then runs as plain Python), never a
        short list that shifts every value below it."""
        if not 0 <= n <= len(self.stack):
            raise RuntimeError(f"capture stack underflow: {n} values popped from a stack of "
                               f"{len(self.stack)} at {self.code.co_name}+{self.pc}")
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    # -- graph building ----------------------------------------------------------------
    def unsupported(self, reason: Reason, detail: str):
        raise GraphBreak(reason, detail, self.lineno)

    def add_op(self, rule, args: tuple, kwargs: dict, infer_args: tuple | None = None) -> Value:
        """Record `rule.fn(*args, **kwargs)` as a node; its Meta comes from the rule (given
        infer_args when they are not the args as the rule sees them)."""
        try:
            typed = infer_args is None
            if typed:
                infer_args = tuple(infer_arg(a) for a in args)
            metas = rule.infer(infer_args, {k: infer_arg(v) for k, v in kwargs.items()})
            why = typed and int_range.typed_by_value(self, rule, args, kwargs, metas)
            if why:
                raise numpy_rules.Unsupported(why)
        except numpy_rules.Unsupported as e:
            self.unsupported(Reason.UNSUPPORTED_OP, f"{rule.name}: {e}")
        except GraphBreak:
            raise
        except Exception as e:  # the real call would raise: let plain Python raise it
            brk = GraphBreak(Reason.UNSUPPORTED_OP,
                             f"{rule.name} would raise {type(e).__name__}: {e}", self.lineno)
            brk.would_raise = True
            raise brk
        ref = self.graph.add_node(rule.name, rule.fn, tuple(node_arg(a) for a in args),
                                  {k: node_arg(v) for k, v in kwargs.items()},
                                  metas, self.lineno)
        if isinstance(metas, tuple):
            # A tuple result (np.divmod, ...) is one node; items are read with getitem nodes.
            return TupleValue([self._tuple_item(ref, i, m) for i, m in enumerate(metas)])
        return GraphValue(ref, metas)

    def _tuple_item(self, ref: Ref, i: int, meta) -> GraphValue:
        item = self.graph.add_node("tuple_item", operator.getitem, (ref, i), {}, meta, self.lineno)
        return GraphValue(item, meta)

    def _give_up_if_pure(self):
        """Past the budget: give up unless the graph has array work, else ask again 32
        later (a retry starts a new graph)."""
        if not has_work(self.graph):
            raise CaptureAbandoned(f"no array work in {PURE_CAPTURE_COST} steps and reads "
                                   "of capture")
        self.pure_budget.check_at = self.pure_budget.spent + 32

    # -- the walk ----------------------------------------------------------------------
    def run(self) -> CaptureResult:
        self.walk(0)
        return CaptureResult(self.graph, self.builder.guards, self.builder.input_sources,
                             self.ret, self.lineno, stores=list(self.effects.stores),
                             bindings=self.bindings, inlines=self.inlines)

    def walk(self, pc: int, until: int | None = None, span: tuple | None = None) -> None:
        """Interpret from position `pc` until RETURN_VALUE; or, for one pass over a loop
        body (loop_node.py), until control reaches position `until` (the loop head), where
        leaving positions `span` (lo, hi) stops capture. Body passes record no snapshots:
        a break inside a loop body never resumes there."""
        instrs, labels = self.instrs, self.flow.label_pos
        budget = self.pure_budget
        # Only the top frame's states are read (break_point): a break inside an inlined
        # call breaks the top frame at the call.
        snapshots = until is None and self.parent is None
        nests = loopnest.starts(self) if until is None else {}
        steps = 0
        while self.ret is None:
            if pc == until:
                return
            steps += 1
            if budget is not None:
                budget.spent += 1
                if budget.spent > budget.check_at:
                    self._give_up_if_pure()
            if steps > MAX_STEPS or pc >= len(instrs):
                raise self._at(GraphBreak(Reason.CONTROL_FLOW, "walked off the end of the code"), pc)
            if span is not None and not span[0] <= pc <= span[1]:
                raise self._at(GraphBreak(Reason.CONTROL_FLOW,
                                          "leaves the loop body (break)"), pc)
            item = instrs[pc]
            if snapshots:
                self.snapshots[pc] = (list(self.stack), dict(self.locals),
                                      len(self.graph.nodes), self.lineno,
                                      self.effects.snapshot())
                self.binding_marks[pc] = len(self.bindings)
            if pc in nests and (after := loopnest.at(self, pc)) is not None:
                pc = after                    # the loop became one loop-nest node
                continue
            if pc in self.stop_at:
                first = self.stop_at[pc]      # why the loop could not be captured
                e = GraphBreak(first.reason, first.detail, first.lineno)
                e.callee = first.callee
                raise self._at(e, pc)
            if not isinstance(item, Instr):     # a Label, SetLineno, TryBegin or TryEnd
                if isinstance(item, TryBegin) and self.flow.user_try(item):
                    raise self._at(GraphBreak(Reason.EXCEPTION_HANDLING,
                                              "try/except/finally or with block"), pc)
                pc += 1
                continue
            location = item.location
            if location is not None and location.lineno is not None:
                self.lineno = location.lineno
            handler = HANDLERS.get(item.name)
            try:
                if handler is None:
                    self.unsupported(Reason.UNSUPPORTED_OPCODE, item.name)
                self.pc = pc
                target = handler(self, item)
            except GraphBreak as e:
                raise self._at(e, pc)
            pc = labels[target] if target is not None else pc + 1
        if until is not None:
            raise self._at(GraphBreak(Reason.CONTROL_FLOW, "returns from the loop body"), pc)

    def _at(self, e: GraphBreak, pc: int) -> GraphBreak:
        if e.lineno is None:
            e.lineno = self.lineno
        if e.position is None:
            e.position = pc
        return e

    def break_point(self, e: GraphBreak) -> BreakPoint:
        """Where the residual bytecode starts and ends, and the live state at its start."""
        flow, pos = self.flow, e.position
        start = pos
        if isinstance(self.instrs[pos], Instr) and self.instrs[pos].name == "CALL":
            start = flow.call_start(pos)      # re-run KW_NAMES/PRECALL with the call
        loop = flow.outermost_loop(pos)
        last = len(self.instrs) - 1
        if e.reason in TO_END_REASONS:
            end = last
        elif loop is not None:
            end = loop.end
        else:
            end = pos
        if end != last and flow.contains_try(start, end):
            end = last                        # handlers live outside the span: keep them all
        if start not in self.snapshots:
            raise GraphBreak(Reason.CONTROL_FLOW, "no state recorded at the break", e.lineno)
        stack = self.snapshots[start][0]
        if end != last:
            nulls = [i for i, v in enumerate(stack) if isinstance(v, NullValue)]
            first, depth = start, len(stack)
            pushed = flow.null_slots(start, depth) if end == start else []
            if pushed:              # the break instruction may push a NULL itself
                nulls += pushed
                first, depth = start + 1, pushed[-1] + 1
            end = flow.extend_past_nulls(first, max(end, first), depth, nulls)
            if end is None:
                raise GraphBreak(Reason.CONTROL_FLOW, "a call whose arguments branch",
                                 e.lineno)
            end = flow.absorb_simple(end)
            if nulls and flow.null_survives(first, end, depth, min(nulls)):
                # extend_past_nulls walks the span in a line, which a loop in it can mislead
                # (3.12's inlined comprehension as a call's last argument): the NULL would
                # reach a resume function's arguments. The rest runs as residual code.
                end = last
        stack, locals_, node_count, lineno, store_count = self.snapshots[start]
        del self.graph.nodes[node_count:]     # nodes recorded past the break point
        self.effects.truncate(store_count)    # and stores: the residual code makes them
        del self.bindings[self.binding_marks[start]:]
        self.inlines[:] = [c for c in self.inlines if c.last <= node_count]
        bound = {name for name, v in locals_.items() if v is not DELETED}
        nargs = len(self.builder.args)
        args = set(self.code.co_varnames[:nargs])
        live = flow.live_in[start]
        store = {name: locals_[name] for name in sorted(live & bound)
                 if not _is_unchanged_argument(name, locals_[name])}
        dead = {name: locals_[name] for name in sorted(bound - live)
                if not _is_unchanged_argument(name, locals_[name])}
        deleted = {name for name, v in locals_.items() if v is DELETED}
        # A local that only inlined comprehensions store in the span (saving and restoring
        # it) leaves it bound or unbound as it came in.
        assigned = flow.assigned_in(start, end) - flow.saved_only(start, end)
        untouched = (bound | args) - deleted - assigned - flow.deleted_in(start, end)
        reachable = bound | args | assigned
        exits = []
        if end != last:
            for target, depth in sorted(flow.exit_depths(start, end, len(stack)).items()):
                exits.append((target, depth, tuple(sorted(flow.live_in[target] & reachable))))
        body = None
        if loop is not None and start == loop.start and end == loop.end and not (
                self.config.is_adaptive and self.plan.body_work.get((self.code, loop.start)) == 0):
            # Outlined, the body is captured on its own (its array work fused) at the cost of
            # a call per iteration; with the adaptive option, a body that touched no array
            # when walked as a loop node's gains nothing from that: the loop runs inline, as
            # plain bytecode.
            body = flow.for_loop_body(loop, bound | args)
        return BreakPoint(e.reason, e.detail, e.lineno, start, end, stack, store, exits,
                          e.callee, body, tuple(flow.cleanup_handlers(start, end)), dead,
                          tuple(sorted(untouched)))


def _is_unchanged_argument(name, value) -> bool:
    """An argument still holding its own value is already bound in the transformed code."""
    source = getattr(value, "source", None)
    return isinstance(source, LocalSource) and source.local == name


def capture_frame(func, args, config, dynamic_dims=None) -> CaptureResult:
    """Capture one call of `func` with argument slots `args` (see pijit._compat.arg_slot_count).

    When capture stops at an instruction it cannot capture, the result carries a BreakPoint:
    the graph covers the code before it, and the instruction (or the whole loop around it)
    runs as residual bytecode. A GraphBreak raised out of here means the function cannot be
    split (strict mode, or a reason in STATIC_REASONS); it carries `guards`, the facts read
    before capture stopped.
    """
    instrs, flow = instructions_and_flow(func.__code__)
    budget = None if not config.is_adaptive or config.strict or \
        any(_holds_ndarray(a) for a in args) else PureBudget()
    stop_at = {}          # loop head position -> the break found inside that loop
    plan = LoopPlan()
    eager = set()         # stores that must run where they stand (see side_effects.py)
    while True:
        capture = FrameCapture(func, args, config, dynamic_dims, instrs, flow, stop_at,
                               plan=plan, eager=eager, pure_budget=budget)
        try:
            result = capture.run()
            result.instructions = instrs
            if _retry_eager(capture, result, eager):
                continue
            return result
        except RetryCapture as retry:         # a loop node failed: capture it as before
            plan.no_node.add(retry.key)
            continue
        except GraphBreak as e:
            e.guards = list(capture.builder.guards)
            loop = flow.outermost_loop(e.position)
            if loop is not None and loop.start not in stop_at:
                # A loop that could not be unrolled: capture again, trying it as a loop
                # node, else stopping at its head (it then runs as residual bytecode). So
                # does a try or with block inside a loop (TO_END_REASONS): residual code
                # from the block to the function's end would hold the loop's jump back to
                # a head it does not contain.
                if not plan.force(config, func.__code__, instrs, loop.start):
                    stop_at[loop.start] = e
                continue
            if config.strict or e.reason in STATIC_REASONS or func.__code__.co_cellvars:
                raise
            result = CaptureResult(capture.graph, e.guards, capture.builder.input_sources,
                                   None, e.lineno, instrs)
            result.break_point = capture.break_point(e)
            result.stores = list(capture.effects.stores)
            result.bindings, result.inlines = capture.bindings, capture.inlines
            if _retry_eager(capture, result, eager):
                continue
            return result


# What a capture of a call whose arguments hold no array may spend (instructions walked and
# values read, by every frame and retry of the capture) before it is left to plain Python
# (CaptureAbandoned) if its graph has no array work by then. A signature is captured once
# its plain calls took compile_after_ms: a pure-Python program of a few such functions paid
# 10 ms of capture each for nothing (mandelbrot_python: two of them, 0.5x plain over five
# runs), while code with array work shows it early: every capture of the program corpus
# and of library mode (numpy.polynomial, statistics) that found array work had found it
# within 150 steps and reads. 1000 is about the 3 ms the budget was in seconds (220-370 a
# CPU millisecond on the shared machine). Counted, not timed, so that what is captured does
# not depend on the machine's load. A read counts like a step: reading a list's items
# (gauss_lists: 19,894 of them in 2,663 steps) is most of such a capture's time.
PURE_CAPTURE_COST = 1000


class PureBudget:
    """What one capture of a call without array arguments spent, in steps and reads."""
    __slots__ = ("spent", "check_at")

    def __init__(self):
        self.spent = 0
        self.check_at = PURE_CAPTURE_COST


def _holds_ndarray(obj, depth=2) -> bool:
    """An ndarray, or a list/tuple/dict holding one (two levels deep)."""
    if isinstance(obj, np.ndarray):
        return True
    if depth and isinstance(obj, (list, tuple)):
        return any(_holds_ndarray(v, depth - 1) for v in obj)
    if depth and isinstance(obj, dict):
        return any(_holds_ndarray(v, depth - 1) for v in obj.values())
    return False


def _retry_eager(capture, result, eager) -> bool:
    """True when a recorded store precedes a node that may raise: capture again with that
    store left to residual code (a graph break there)."""
    capture.effects.finished = True
    store = capture.effects.unsafe(result.graph)
    if store is None:
        return False
    eager.add(store.where)
    return True
