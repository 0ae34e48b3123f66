"""Loop nodes: `for i in range(...)` -> one graph node that runs the loop's body, a Graph of
its own, once per index (instead of unrolled copies, or a residual loop and a graph call per
iteration).

At the loop's GET_ITER the body is walked once, symbolically: the index is a graph int, and
each loop-carried local (assigned in the body and live at the loop head) is a placeholder
with the Meta it has at loop entry. That one pass stands for every iteration only if the
carried values end it with the Metas they started with (a fixed point; a constant carried
value must stay the same constant, or is made a graph value and walked again), and if it met
nothing a loop node cannot express: a graph break, `break`/`return`, exception handling,
`del`, stores to cell variables, changes to lists built before the loop. Writes into arrays
(`a[i, :] = ...`, `u[1:-1] += ...`) are captured in the body, in order; the loop node is then
an effect kept in place by every pass. When the pass fails, capture restarts with the loop
captured exactly as without loop nodes (unrolled, or residual): RetryCapture, LoopPlan.

Which loops: a range whose bounds are graph values (known only at run time: no guard on
their values), or a constant range longer than MAX_LOOP_UNROLLING, or any range loop when
loop_unrolling is off or unrolling it failed. Shorter constant ranges unroll first: one flat
graph lets the fused backend fuse across iterations.
"""
from __future__ import annotations

import logging
import operator
from dataclasses import dataclass, field

import numpy as np
from bytecode import Instr, Label

from pijit.capture.graph_break import GraphBreak, Reason
from pijit.capture.ops_load_store import DELETED, load_local
from pijit.capture.ops_stack import leave_for
from pijit.capture.values import (ConstValue, GraphValue, IteratorValue, RangeValue,
                                  describe, node_arg)
from pijit.graph.work import nodes_work
from pijit.graph.ir import Graph, LoopOp, Meta, Ref, map_refs, node_refs
from pijit.graph.purity import mutates

log = logging.getLogger("pijit.graph_breaks")

# The loop index: range() yields Python ints.
INDEX_META = Meta(int, np.dtype(int), ())

# Stands for the range iterator on the simulated stack while the body is walked.
_ITERATOR = IteratorValue([])

# Stands for a local that is unbound at loop entry.
_UNBOUND = object()


class RetryCapture(Exception):
    """A loop could not be a loop node: capture the frame again, capturing it as before."""

    def __init__(self, key, cause: GraphBreak):
        super().__init__(f"not a loop node: {cause.detail or cause.reason.value}")
        self.key = key              # (code, position of the loop's GET_ITER)
        self.cause = cause


@dataclass
class LoopPlan:
    """What earlier captures of one frame learned about its loops, keyed (code, GET_ITER
    position): loops that cannot be loop nodes, and loops whose unrolling failed."""
    no_node: set = field(default_factory=set)
    force_node: set = field(default_factory=set)
    # Array elements the body of a loop that could not be a loop node touched before capture
    # stopped in it: none means a residual loop gains nothing from outlining its body.
    body_work: dict = field(default_factory=dict)

    def force(self, config, code, instrs, pos) -> bool:
        """Try the `for` loop at `pos`, whose unrolling failed, as a loop node on the next
        capture; False when that is not possible or was tried already."""
        key = (code, pos)
        item = instrs[pos]
        if not config.loop_nodes or key in self.force_node or key in self.no_node or \
                not isinstance(item, Instr) or item.name != "GET_ITER":
            return False
        self.force_node.add(key)
        return True


def symbolic_range(cap, args, kwargs) -> RangeValue:
    """range(...) with graph int arguments: a RangeValue (its loop becomes a loop node)."""
    if kwargs or not 1 <= len(args) <= 3:
        cap.unsupported(Reason.UNSUPPORTED_CALL, "range() with these arguments")
    for a in args:
        if isinstance(a, ConstValue) and isinstance(a.value, (int, np.integer)):
            continue
        if isinstance(a, GraphValue) and not a.meta.is_array and \
                issubclass(a.meta.pytype, (int, np.integer)):
            continue
        cap.unsupported(Reason.UNSUPPORTED_CALL, f"range() of a {describe(a)}")
    bounds = list(args) if len(args) > 1 else [ConstValue(0), args[0]]
    if len(bounds) == 2:
        bounds.append(ConstValue(1))
    return RangeValue([], call=(range, list(args), {}), bounds=bounds)


def try_loop_node(cap, value):
    """At a GET_ITER: when it starts a `for` loop over a range that should be a loop node,
    capture the loop as one and return the loop's exit label (else None: capture goes on).
    Raises RetryCapture when the loop cannot be a loop node."""
    config = cap.config
    if not config.loop_nodes or cap.plan is None:
        return None
    for_iter = _next_instr(cap.instrs, cap.pc + 1)
    if for_iter is None or cap.instrs[for_iter].name != "FOR_ITER":
        return None                     # e.g. the iterator of a comprehension's call
    key = (cap.code, cap.pc)
    if key in cap.plan.no_node:
        return None
    if isinstance(value, RangeValue):
        bounds, trip = value.bounds, None
    elif isinstance(value, ConstValue) and type(value.value) is range:
        r = value.value
        if len(r) == 0:
            return None
        if len(r) <= config.MAX_LOOP_UNROLLING and config.loop_unrolling and \
                key not in cap.plan.force_node:
            return None                 # short: unroll
        bounds, trip = [ConstValue(r.start), ConstValue(r.stop), ConstValue(r.step)], len(r)
    else:
        return None
    first_node = len(cap.graph.nodes)
    try:
        return LoopCapture(cap, for_iter, bounds, trip).build()
    except GraphBreak as e:
        cap.plan.body_work[key] = nodes_work(cap.graph, cap.graph.nodes[first_node:])
        if e.lineno is None:
            e.lineno = cap.lineno
        log.info("%s:%s: loop is not a loop node: %s", cap.code.co_filename, e.lineno,
                 e.detail or e.reason.value)
        raise RetryCapture(key, e) from None


def _next_instr(instrs, pos):
    while pos < len(instrs) and not isinstance(instrs[pos], Instr):
        pos += 1
    return pos if pos < len(instrs) else None


@dataclass
class _Pass:
    """One walk of the body: the placeholders it read, and the locals it ended with."""
    placeholders: dict          # carried name -> GraphValue placeholder
    index: GraphValue
    outs: dict                  # carried name -> Value at the end of the pass, or _UNBOUND
    nodes: list                 # the body's nodes, cut from the frame's graph


class LoopCapture:
    """Captures one `for` loop over a range as a loop node in the frame `cap`."""

    def __init__(self, cap, for_iter: int, bounds: list, trip: int | None):
        self.cap = cap
        self.bounds = bounds            # Values: start, stop, step
        self.trip = trip                # the iteration count when it is a constant
        instrs, flow = cap.instrs, cap.flow
        heads = [p for p in range(cap.pc, for_iter) if isinstance(instrs[p], Label)]
        if not heads:
            self._fail(Reason.CONTROL_FLOW, "the loop body never goes back to the loop head")
        self.head = heads[-1]
        exit_pos = flow.label_pos[instrs[for_iter].arg]
        self.start, self.end = for_iter + 1, exit_pos - 1
        first = instrs[_next_instr(instrs, self.start)]
        self.index_name = first.arg if first.name == "STORE_FAST" else "index"
        self._check_structure()
        self.carried = sorted(flow.assigned_in(self.start, self.end) & flow.live_in[self.head])

    def _check_structure(self):
        """No exception handling in the body (3.12+ inlined comprehensions' try blocks aside).
        (A `break`, `return` or `raise` stops the
        walk only if the path the body takes reaches it: one under a condition decided at
        capture time, such as an assert, is allowed.)"""
        if self.cap.flow.contains_try(self.start, self.end):
            self._fail(Reason.EXCEPTION_HANDLING, "exception handling in the loop body")

    def _fail(self, reason, detail):
        raise GraphBreak(reason, detail, self.cap.lineno)

    # -- the passes ----------------------------------------------------------------------
    def build(self) -> Label:
        """Walk the body until the pass holds for every iteration (see the module docstring),
        then make the loop node; return the loop's exit label."""
        cap = self.cap
        entries = {name: self._entry(name) for name in self.carried}
        lifted = set()      # constant entries the body changes: walked as graph values
        # A pass, then at most one more with every changed constant lifted at a time: a
        # constant still changing after that is refused (never another pass: no bound on them)
        for _ in range(2):
            walked = self._walk(entries, lifted)
            changed = self._changed_constants(entries, walked.outs, lifted)
            if not changed:
                break
            lifted = changed
        else:
            self._fail(Reason.LOOP, f"{', '.join(sorted(changed))} changes in the loop body")
        self._emit(entries, walked)
        return cap.instrs[self._for_iter()].arg

    def _for_iter(self) -> int:
        return self.start - 1

    def _entry(self, name):
        """The value of local `name` at loop entry, or _UNBOUND."""
        value = self.cap.locals.get(name)
        if value is DELETED:
            return _UNBOUND
        if value is None:
            nargs = len(self.cap.builder.args)
            if self.cap.parent is None and name in self.cap.code.co_varnames[:nargs]:
                return load_local(self.cap, name)       # an argument not read yet
            return _UNBOUND
        return value

    def _walk(self, entries: dict, lifted: set) -> _Pass:
        """Walk the body once from the state at the loop head; cut its nodes."""
        cap = self.cap
        graph = cap.graph
        saved = (list(cap.stack), dict(cap.locals), cap.lineno)
        node_count = len(graph.nodes)
        placeholders = {}
        for name in self.carried:
            entry = entries[name]
            if isinstance(entry, GraphValue) or name in lifted:
                meta = entry.meta if isinstance(entry, GraphValue) else Meta.of(entry.value)
                placeholders[name] = GraphValue(graph.add_placeholder(meta), meta)
        index = GraphValue(graph.add_placeholder(INDEX_META), INDEX_META)
        if self.trip:                           # a constant range: slices by the index
            cap.facts.add_index(index, range(*(b.value for b in self.bounds)))
        cap.locals.update(placeholders)
        cap.stack[-1] = _ITERATOR               # GET_ITER made the range an iterator
        cap.push(index)                         # FOR_ITER pushed the next index
        cap.bodies.append(self)
        try:
            cap.walk(self.start, until=self.head, span=(self.start, self.end))
        finally:
            cap.bodies.pop()
        if len(cap.stack) != len(saved[0]) or cap.stack[-1] is not _ITERATOR:
            self._fail(Reason.CONTROL_FLOW, "the loop body leaves values on the stack")
        outs = {}
        for name in self.carried:
            value = cap.locals.get(name)
            outs[name] = _UNBOUND if value is None or value is DELETED else value
        nodes = graph.nodes[node_count:]
        del graph.nodes[node_count:]
        cap.stack, cap.locals, cap.lineno = saved
        return _Pass(placeholders, index, outs, nodes)

    def _changed_constants(self, entries, outs, lifted) -> set:
        """Carried names whose entry is a constant that the body changes: they are walked
        again as graph values (when their type has a Meta)."""
        changed = set()
        for name in self.carried:
            entry, out = entries[name], outs[name]
            if name in lifted or not isinstance(entry, ConstValue) or out is entry:
                continue
            if isinstance(out, ConstValue) and _same_constant(entry.value, out.value):
                continue
            try:
                Meta.of(entry.value)
            except TypeError:
                self._fail(Reason.LOOP, f"{name} (a {describe(entry)}) changes in the loop body")
            changed.add(name)
        return changed

    # -- the node ------------------------------------------------------------------------
    def _emit(self, entries, walked: _Pass):
        """Check the pass is valid for every iteration, make the body Graph and the loop
        node, and bind the carried locals to the node's results."""
        cap = self.cap
        carried, last, constants = [], [], {}
        for name in self.carried:
            entry, out = entries[name], walked.outs[name]
            if name in walked.placeholders:
                meta = walked.placeholders[name].meta
                if not isinstance(out, GraphValue) or out.meta != meta:
                    self._fail(Reason.LOOP, f"{name} changes from {meta} to "
                                            f"{_describe_value(out)} in the loop body")
                carried.append(name)
            elif entry is _UNBOUND:
                if out is _UNBOUND:
                    continue            # not bound on the path the body takes
                if self.trip is None:
                    self._fail(Reason.LOOP, f"{name} is bound by the loop only when it runs "
                                            "(the trip count is known only at run time)")
                if isinstance(out, GraphValue):
                    last.append(name)
                elif isinstance(out, ConstValue):
                    constants[name] = out
                else:
                    self._fail(Reason.LOOP, f"{name} is a {describe(out)} after the loop body")
            elif out is not entry and not (isinstance(out, ConstValue) and isinstance(
                    entry, ConstValue) and _same_constant(entry.value, out.value)):
                self._fail(Reason.LOOP, f"{name} (a {describe(entry)}) changes in the loop body")
        outputs = [walked.outs[n].ref for n in carried + last]
        body, invariant = self._cut(walked, carried, outputs)
        op = LoopOp(body, len(carried), len(last), any(mutates(n) for n in body.nodes),
                    tuple(carried + last))
        inits = [node_arg(entries[n]) if isinstance(entries[n], GraphValue)
                 else entries[n].value for n in carried]
        args = tuple(node_arg(b) for b in self.bounds) + tuple(inits) + tuple(invariant)
        metas = tuple(body.meta(r) for r in body.outputs)
        graph = cap.graph
        ref = graph.add_node("loop", op, args, {}, metas, cap.lineno)
        leave_for(cap)                  # the range: FOR_ITER drops its iterator at the exit
        for k, name in enumerate(carried + last):
            item = graph.add_node("tuple_item", operator.getitem, (ref, k), {}, metas[k],
                                  cap.lineno)
            cap.store(name, GraphValue(item, metas[k]))
        cap.locals.update(constants)

    def _cut(self, walked: _Pass, carried: list, outputs: list):
        """The body Graph: inputs are the carried placeholders, the index, then every value
        of the frame's graph the body reads (the invariants, returned as parent Refs)."""
        parent = self.cap.graph
        own = {n.out for n in walked.nodes}
        inputs = [walked.placeholders[n].ref for n in carried] + [walked.index.ref]
        known = own | {r.index for r in inputs}
        invariant = []
        for r in [r for n in walked.nodes for r in node_refs(n)] + outputs:
            if r.index not in known:
                known.add(r.index)
                invariant.append(r)
        names = dict(zip(parent.inputs, parent.input_names))
        body = Graph()
        remap = {}
        for r, name in zip(inputs, carried + [self.index_name]):
            remap[r.index] = body.add_input(parent.meta(r), name).index
        for r in invariant:
            remap[r.index] = body.add_input(parent.meta(r), names.get(r, repr(r))).index

        def rename(r):
            return Ref(remap[r.index])

        for n in walked.nodes:
            new = body.add_node(n.name, n.fn, map_refs(n.args, rename),
                                {k: map_refs(v, rename) for k, v in n.kwargs}, n.meta, n.lineno)
            remap[n.out] = new.index
        body.outputs = [rename(r) for r in outputs]
        return body, invariant


def _same_constant(a, b) -> bool:
    """Constants equal as Python values and types (so 0 and 0.0, -0.0 and 0.0 differ)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, (float, complex, np.inexact)):
        return repr(a) == repr(b)
    try:
        return bool(a == b) and hash(a) == hash(b)
    except TypeError:
        return False


def _describe_value(value) -> str:
    if value is _UNBOUND:
        return "unbound"
    if isinstance(value, GraphValue):
        return str(value.meta)
    return f"a {describe(value)}"
