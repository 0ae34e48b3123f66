"""Control-flow facts about a code's instruction list: successors, loops, local liveness and
stack depths. Used to place graph breaks and to pass resume functions only what is live.

Positions are indexes into the `bytecode` package's abstract instruction list (Labels,
TryBegin/TryEnd and SetLineno included, as no-op positions).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from bytecode import Instr, Label, TryBegin, TryEnd

TERMINATORS = frozenset({"RETURN_VALUE", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD",
                         "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_NO_INTERRUPT"})
LOCAL_USES = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "DELETE_FAST"})
LOCAL_DEFS = frozenset({"STORE_FAST", "DELETE_FAST"})


@dataclass(frozen=True)
class Loop:
    """A loop spanning positions [start, end]; start includes the GET_ITER of a for loop."""
    start: int
    end: int


@dataclass(frozen=True)
class LoopBody:
    """A `for` loop body outlined as a function: positions [start, end] (after FOR_ITER, up
    to the JUMP_BACKWARD), the loop head's label position, the locals it reads (params) and
    the locals it assigns that are live at the head (outs, returned each iteration)."""
    head: int
    start: int
    end: int
    params: tuple
    outs: tuple


class Flow:
    """Facts about one instruction list, computed on demand."""

    def __init__(self, instrs: list):
        self.instrs = instrs
        self.label_pos = {item: pos for pos, item in enumerate(instrs) if isinstance(item, Label)}

    # -- successors ----------------------------------------------------------------------
    @cached_property
    def successors(self) -> list:
        """Positions control can reach next from each position (exception edges included)."""
        succ = []
        handler = None
        for pos, item in enumerate(self.instrs):
            nxt = []
            if isinstance(item, TryBegin):
                handler = self.label_pos[item.target]
            elif isinstance(item, TryEnd):
                handler = None
            if isinstance(item, Instr):
                if item.has_jump():
                    nxt.append(self.label_pos[item.arg])
                if item.name not in TERMINATORS:
                    nxt.append(pos + 1)
            else:
                nxt.append(pos + 1)
            if handler is not None and isinstance(item, Instr):
                nxt.append(handler)
            succ.append([n for n in nxt if n < len(self.instrs)])
        return succ

    # -- loops ---------------------------------------------------------------------------
    @cached_property
    def loops(self) -> list:
        """Loops from backward jumps, widened to include a for loop's GET_ITER; and every
        `for` statement from its GET_ITER to its exit, even one whose body never jumps back
        (it returns), since its iterator lives on the stack throughout."""
        found = []
        for pos, item in enumerate(self.instrs):
            if isinstance(item, Instr) and item.name == "FOR_ITER":
                prev = self._prev_instr(pos)
                exit_pos = self.label_pos[item.arg]
                if prev is not None and self.instrs[prev].name == "GET_ITER":
                    found.append(Loop(prev, exit_pos - 1))
            if isinstance(item, Instr) and item.has_jump() and "BACKWARD" in item.name:
                start = self.label_pos[item.arg]
                head = self._next_instr(start)
                if head is not None and self.instrs[head].name == "FOR_ITER":
                    prev = self._prev_instr(start)
                    if prev is not None and self.instrs[prev].name == "GET_ITER":
                        start = prev
                found.append(Loop(start, pos))
        return found

    def outermost_loop(self, pos: int) -> Loop | None:
        """The widest span of overlapping loops that contains `pos`, if any."""
        best = None
        for loop in self.loops:
            if loop.start <= pos <= loop.end:
                if best is None:
                    best = loop
                else:
                    best = Loop(min(best.start, loop.start), max(best.end, loop.end))
        if best is None:
            return None
        changed = True
        while changed:           # nested or overlapping loops widen the span
            changed = False
            for loop in self.loops:
                if loop.start <= best.end and loop.end >= best.start and \
                        (loop.start < best.start or loop.end > best.end):
                    best = Loop(min(best.start, loop.start), max(best.end, loop.end))
                    changed = True
        return best

    def call_start(self, pos: int) -> int:
        """The position of the KW_NAMES/PRECALL that belong to the CALL at `pos`."""
        start = pos
        prev = self._prev_instr(start)
        while prev is not None and self.instrs[prev].name in ("PRECALL", "KW_NAMES"):
            start = prev
            prev = self._prev_instr(start)
        return start

    def extend_past_nulls(self, start: int, end: int, depth: int, nulls: list):
        """Extend the span [start, end] until no NULL of the stack at start (at positions
        `nulls`) is left on the stack when the span exits: a NULL (pushed for a call whose
        arguments are being evaluated) cannot be passed to a resume function. Returns the
        new end, or None when the span would have to cross a jump."""
        if not nulls:
            return end
        lowest = depth
        pos = start
        while True:
            item = self.instrs[pos]
            if isinstance(item, Instr):
                if pos > end and (item.has_jump() or item.name in TERMINATORS):
                    return None
                pre, post = item.pre_and_post_stack_effect()
                lowest = min(lowest, depth + pre)
                depth += pre + post
            elif pos > end and isinstance(item, Label):
                return None
            if pos >= end and lowest <= min(nulls):
                return pos
            pos += 1
            if pos >= len(self.instrs):
                return None

    def absorb_simple(self, end: int) -> int:
        """Extend a span over the POP_TOP/STORE_FAST that consume its result, so the resume
        function does not receive a value it would only drop or rename."""
        pos = end + 1
        while pos < len(self.instrs) and isinstance(self.instrs[pos], Instr) and \
                self.instrs[pos].name in ("POP_TOP", "STORE_FAST", "NOP"):
            end = pos
            pos += 1
        return end

    def _next_instr(self, pos):
        for p in range(pos, len(self.instrs)):
            if isinstance(self.instrs[p], Instr):
                return p
        return None

    def _prev_instr(self, pos):
        for p in range(pos - 1, -1, -1):
            if isinstance(self.instrs[p], Instr):
                return p
        return None

    # -- liveness ------------------------------------------------------------------------
    @cached_property
    def live_in(self) -> list:
        """For each position, the local names read before being written on some path."""
        n = len(self.instrs)
        live = [frozenset()] * (n + 1)
        uses, defs = [], []
        for item in self.instrs:
            u = d = frozenset()
            if isinstance(item, Instr):
                name = _local_name(item)
                if item.name in LOCAL_USES:       # DELETE_FAST needs the name bound
                    u = frozenset((name,))
                if item.name in LOCAL_DEFS:
                    d = frozenset((name,))
            uses.append(u)
            defs.append(d)
        succ = self.successors
        changed = True
        while changed:
            changed = False
            for pos in range(n - 1, -1, -1):
                out = frozenset().union(*(live[s] for s in succ[pos])) if succ[pos] else frozenset()
                new = uses[pos] | (out - defs[pos])
                if new != live[pos]:
                    live[pos] = new
                    changed = True
        return live

    def assigned_in(self, start: int, end: int) -> set:
        """Local names stored anywhere in positions [start, end]."""
        names = set()
        for item in self.instrs[start:end + 1]:
            if isinstance(item, Instr) and item.name == "STORE_FAST":
                names.add(_local_name(item))
        return names

    # -- stack depths --------------------------------------------------------------------
    def exit_depths(self, start: int, end: int, depth: int) -> dict:
        """Walk positions [start, end] from stack depth `depth`; return {outside position:
        depth on arrival} for every edge leaving the range (fall-through included)."""
        exits = {}
        seen = {}
        work = [(start, depth)]
        while work:
            pos, d = work.pop()
            if pos < start or pos > end:
                exits.setdefault(pos, d)
                continue
            if pos in seen:
                continue
            seen[pos] = d
            item = self.instrs[pos]
            if not isinstance(item, Instr):
                work.append((pos + 1, d))
                continue
            if item.has_jump():
                work.append((self.label_pos[item.arg], d + item.stack_effect(jump=True)))
            if item.name not in TERMINATORS:
                work.append((pos + 1, d + item.stack_effect(jump=False)))
        return exits

    def for_loop_body(self, loop: Loop, bound: set):
        """The body of a simple `for` loop, to be outlined as its own function: a LoopBody,
        or None when the loop is not a `for`, or its body leaves the loop other than by
        falling back to the head (break, return), has try blocks, or reads a local that may
        be unbound when the loop starts (`bound` are the locals bound there)."""
        instrs = self.instrs
        if not isinstance(instrs[loop.start], Instr) or instrs[loop.start].name != "GET_ITER":
            return None
        head_label = self._next_label(loop.start)
        for_iter = self._next_instr(loop.start + 1)
        if head_label is None or instrs[for_iter].name != "FOR_ITER":
            return None
        start, end = for_iter + 1, loop.end - 1
        if not isinstance(instrs[loop.end], Instr) or instrs[loop.end].name != "JUMP_BACKWARD":
            return None
        for pos in range(start, end + 1):
            item = instrs[pos]
            if isinstance(item, (TryBegin, TryEnd)):
                return None
            if isinstance(item, Instr):
                if item.name in ("RETURN_VALUE", "YIELD_VALUE"):
                    return None
                if item.has_jump():
                    target = self.label_pos[item.arg]
                    if not (start <= target <= end or target == head_label):
                        return None
                    if target == head_label and item.name != "JUMP_BACKWARD":
                        return None
        outs = tuple(sorted(self.assigned_in(start, end) & self.live_in[head_label]))
        params = self._body_live(start, end, head_label, set(outs))
        if not params <= bound:
            return None
        return LoopBody(head_label, start, end, tuple(sorted(params)), outs)

    def _next_label(self, pos):
        for p in range(pos, len(self.instrs)):
            if isinstance(self.instrs[p], Label):
                return p
            if isinstance(self.instrs[p], Instr) and p > pos:
                return None
        return None

    def _body_live(self, start, end, head, outs) -> set:
        """Locals read in positions [start, end] before being written, when leaving the span
        (back to the loop head) reads `outs`."""
        live = {pos: frozenset() for pos in range(start, end + 2)}
        exit_live = frozenset(outs)
        changed = True
        while changed:
            changed = False
            for pos in range(end, start - 1, -1):
                item = self.instrs[pos]
                succ = [head] if isinstance(item, Instr) and item.name == "JUMP_BACKWARD" and \
                    self.label_pos[item.arg] == head else self.successors[pos]
                out = frozenset()
                for s in succ:
                    out |= exit_live if (s == head or s > end) else live[s]
                uses = defs = frozenset()
                if isinstance(item, Instr):
                    name = _local_name(item)
                    if item.name in LOCAL_USES:
                        uses = frozenset((name,))
                    if item.name in LOCAL_DEFS:
                        defs = frozenset((name,))
                new = uses | (out - defs)
                if new != live[pos]:
                    live[pos] = new
                    changed = True
        return set(live[start])

    def contains_try(self, start: int, end: int) -> bool:
        return any(isinstance(i, (TryBegin, TryEnd)) for i in self.instrs[start:end + 1])


def _local_name(instr) -> str | None:
    arg = instr.arg
    return arg if isinstance(arg, str) else getattr(arg, "name", None)
