"""Handlers for loops: GET_ITER, FOR_ITER and backward jumps.

A `for` loop over a range becomes one loop node when its trip count is known only at run
time or exceeds MAX_LOOP_UNROLLING, or when unrolling it failed (see loop_node.py). Other
loops over iterables known at capture time (range with guarded bounds, tuples, lists, zip
and enumerate of those, rows of an array with a static first dimension) unroll while the
loop runs at most MAX_LOOP_UNROLLING iterations; otherwise capture stops and the whole loop
runs as residual bytecode (see interpreter.capture_frame).
"""
from __future__ import annotations

from collections.abc import Sequence

from pijit.capture.graph_break import Reason
from pijit.capture.loop_node import try_loop_node
from pijit.capture import numpy_rules
from pijit.capture.ops_stack import POP_JUMP_FORWARD_IF, POP_JUMP_FORWARD_IF_NONE, leave_for
from pijit.capture.registry import handler
from pijit.capture.values import (ConstValue, GraphValue, IteratorValue, ListValue,
                                  RangeValue, TupleValue, describe)


def iterate(cap, value) -> IteratorValue:
    """The items `for item in value` yields, when capture knows them all."""
    if isinstance(value, RangeValue):
        cap.unsupported(Reason.LOOP, "iterating over a range whose bounds are known only "
                                     "at run time (not as a loop node)")
    if isinstance(value, IteratorValue):
        return value
    if isinstance(value, ConstValue) and isinstance(value.value, (range, tuple, list, str)):
        return IteratorValue(const_items(value.value))
    if isinstance(value, ListValue):
        items = value.items
        return IteratorValue(list(items), lists=((value, len(items)),))
    if isinstance(value, TupleValue):
        return IteratorValue(list(value.items))
    if isinstance(value, GraphValue) and value.meta.is_array and value.meta.ndim >= 1 \
            and value.meta.shape[0] is not None:
        rows = value.meta.shape[0]
        if rows > cap.config.MAX_LOOP_UNROLLING:
            cap.unsupported(Reason.LOOP, f"iterating over {rows} rows exceeds MAX_LOOP_UNROLLING")
        getitem = numpy_rules.lookup_operator("getitem")
        return IteratorValue(Made(rows, lambda i: cap.add_op(getitem, (value, ConstValue(i)),
                                                              {})))
    cap.unsupported(Reason.LOOP, f"iterating over a {describe(value)} "
                                 "whose items are known only at run time")


def const_items(values) -> "Made":
    """The items of a constant range, tuple, list or str as ConstValues, each made when a
    loop first reaches it: unrolling stops after MAX_LOOP_UNROLLING of them, and making all
    (for ch in a 300-character text, for k in range(n) with n guarded) took 2-15 ms of
    capture's time. (A list's items are read when iterate is called, as before.)"""
    values = tuple(values) if isinstance(values, list) else values
    return Made(len(values), lambda i: ConstValue(values[i]))


class Made(Sequence):
    """Items made when a loop first reaches each: an array's rows or elements (a getitem
    node there, after the writes of the iterations before it, as plain Python's iterator
    reads each when it yields it: read all at GET_ITER, `for x in a[::-1]: a[0] = f(x)`
    read a[0] before the writes), and enumerate, zip and reversed of such items."""

    def __init__(self, length: int, make):
        self.length, self.make, self.made = length, make, {}

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        if i not in self.made:
            self.made[i] = self.make(i)
        return self.made[i]


def iterator_call(cap, target, args, kwargs) -> IteratorValue:
    """zip/enumerate/reversed/iter over iterables capture knows item by item."""
    it = _iterator_items(cap, target, args, kwargs)
    it.call = (target, list(args), dict(kwargs))
    return it


def _iterator_items(cap, target, args, kwargs) -> IteratorValue:
    it = _made_items(cap, target, args, kwargs)
    it.lists = tuple(pair for a in args if isinstance(a, (ListValue, IteratorValue))
                     for pair in iterate(cap, a).lists)
    return it


def _made_items(cap, target, args, kwargs) -> IteratorValue:
    if kwargs and not (target is zip and set(kwargs) == {"strict"}) and \
            not (target is enumerate and set(kwargs) == {"start"}):
        cap.unsupported(Reason.UNSUPPORTED_CALL, f"{target.__name__} with {sorted(kwargs)}")
    if target is enumerate:
        start = kwargs.get("start", args[1] if len(args) > 1 else ConstValue(0))
        if not isinstance(start, ConstValue):
            cap.unsupported(Reason.UNSUPPORTED_CALL, "enumerate start known only at run time")
        if not isinstance(start.value, int):    # enumerate raises TypeError: plain Python
            cap.unsupported(Reason.UNSUPPORTED_CALL, "enumerate start that is not an int")
        items = iterate(cap, args[0]).items
        return IteratorValue(Made(len(items), lambda i: TupleValue(
            [ConstValue(start.value + i), items[i]])))
    if target is zip:
        columns = [iterate(cap, a).items for a in args]
        strict = kwargs.get("strict", ConstValue(False))
        if isinstance(strict, ConstValue) and strict.value and len({len(c) for c in columns}) > 1:
            cap.unsupported(Reason.UNSUPPORTED_CALL, "zip(strict=True) of unequal lengths")
        return IteratorValue(Made(min(map(len, columns), default=0),
                                  lambda i: TupleValue([c[i] for c in columns])))
    if len(args) != 1:
        cap.unsupported(Reason.UNSUPPORTED_CALL, f"{target.__name__} with {len(args)} arguments")
    items = iterate(cap, args[0]).items
    if target is reversed:
        return IteratorValue(Made(len(items), lambda i: items[len(items) - 1 - i]))
    return IteratorValue(items if isinstance(items, Made) else list(items))


@handler("GET_ITER")
def GET_ITER(cap, instr):
    exit_label = try_loop_node(cap, cap.stack[-1])
    if exit_label is not None:
        return exit_label
    if not cap.config.loop_unrolling:
        cap.unsupported(Reason.LOOP, "loop_unrolling is off")
    value = cap.pop()
    it = iterate(cap, value)
    if it is not value:
        it.origin = value
    cap.push(it)


@handler("FOR_ITER")
def FOR_ITER(cap, instr):
    it = cap.stack[-1]
    if not isinstance(it, IteratorValue) or isinstance(it, RangeValue):
        cap.unsupported(Reason.LOOP, "FOR_ITER over an iterator capture does not know")
    count_iteration(cap)
    check_length(cap, it)
    # (reading an input list's items again breaks when the loop appended to another input
    # list, which may be this one: side_effects' check_list_read)
    if any(len(lst.items) != length for lst, length in it.lists):
        cap.unsupported(Reason.LOOP, "the loop changes the length of a list it iterates")
    if it.index >= len(it.items):
        leave_for(cap)
        return instr.arg
    it.index += 1
    cap.push(it.items[it.index - 1])
    return None


@handler("END_FOR")
def END_FOR(cap, instr):
    cap.popn(-instr.stack_effect())


@handler("JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT")
def JUMP_BACKWARD(cap, instr):
    head = cap.flow.label_pos[instr.arg] + 1
    if cap.instrs[head].__class__.__name__ != "Instr" or cap.instrs[head].name != "FOR_ITER":
        count_iteration(cap)            # FOR_ITER counts the iterations of `for` loops
    return instr.arg


@handler("POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_FALSE",
         "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE")
def POP_JUMP_BACKWARD_IF(cap, instr):
    """The loop condition at the bottom of a `while` loop: decided like a forward jump."""
    decide = POP_JUMP_FORWARD_IF_NONE if instr.name.endswith("NONE") else POP_JUMP_FORWARD_IF
    target = decide(cap, instr)
    if target is not None:
        count_iteration(cap)
    return target


# Graph nodes past which no loop unrolls further: capture and the graph passes cost about
# 0.7 ms a node (fusion more than linearly), and gcc grows with the kernels, so a loop whose
# unrolled copies (inlined calls' loops included, which MAX_LOOP_UNROLLING counts per
# function) reach this size is cheaper as a loop node (a range loop: its body compiled once)
# or as residual code calling its body's graph: unrolling 60 calls of a 78-node image filter
# took 40 s of capture, fusion and gcc for a function whose plain run took 7 ms, and 50
# steps of an 11-node stencil 1 s for a 14 ms run. A loop whose length is known stops after
# its first iteration when its copies would pass the limit (not after capturing them).
UNROLLED_NODES = 256


def count_iteration(cap):
    """Count unrolled iterations of the loop around the current instruction."""
    loop = cap.flow.outermost_loop(cap.pc)
    key = loop.start if loop is not None else cap.pc
    count = cap.loop_counts.get(key, 0)
    cap.loop_counts[key] = count + 1
    if count == 0:
        cap.loop_first_node[key] = len(cap.graph.nodes)
    if cap.loop_counts[key] > cap.config.MAX_LOOP_UNROLLING:
        _too_many(cap)
    if len(cap.graph.nodes) > UNROLLED_NODES:
        cap.unsupported(Reason.LOOP, f"unrolling past {UNROLLED_NODES} graph nodes")
    if count and any(getattr(n.fn, "repeats", False)
                     for n in cap.graph.nodes[cap.loop_first_node[key]:]):
        # A loop (nest or node) in the body: nothing fuses across it, and each unrolled
        # copy is one more loop to compile (a time-stepping loop calling a step function
        # with an element loop built 50 nests, 2 s of capture and gcc for a 14 ms run).
        cap.unsupported(Reason.LOOP, "a loop inside the body of a loop being unrolled")


def check_length(cap, it: IteratorValue):
    """At the FOR_ITER of an outermost loop that runs to its end: give up on unrolling it as
    soon as its length shows that count_iteration would (at its start: too many iterations;
    after its first iteration: copies of that body past UNROLLED_NODES), not after
    capturing the copies it would refuse."""
    if it.index > 1 or not cap.flow.runs_to_exhaustion(cap.pc):
        return
    trip = len(it.items)
    first = cap.loop_first_node[cap.flow.outermost_loop(cap.pc).start]
    if it.index == 0 and trip + 1 > cap.config.MAX_LOOP_UNROLLING:
        _too_many(cap)
    body = len(cap.graph.nodes) - first
    if it.index == 1 and first + body * trip > UNROLLED_NODES:
        cap.unsupported(Reason.LOOP, f"unrolling past {UNROLLED_NODES} graph nodes "
                                     f"({trip} iterations of {body} nodes)")


def _too_many(cap):
    cap.unsupported(Reason.LOOP, f"more than MAX_LOOP_UNROLLING="
                                 f"{cap.config.MAX_LOOP_UNROLLING} iterations")
