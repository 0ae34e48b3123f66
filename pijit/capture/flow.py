"""Control-flow facts about a code's instruction list: successors, loops, local liveness and
stack depths. Used to place graph breaks and to pass resume functions only what is live.

Positions are indexes into the `bytecode` package's abstract instruction list (Labels,
TryBegin/TryEnd and SetLineno included, as no-op positions).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from bytecode import Instr, Label, SetLineno, TryBegin, TryEnd

from pijit import _compat

TERMINATORS = _compat.RETURNS | {"RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
                                 "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_NO_INTERRUPT"}
# Instructions reading ("use") or binding ("def") the fast local they name, in the order
# they do it. DELETE_FAST needs the name bound; 3.12's LOAD_FAST_AND_CLEAR (an inlined
# comprehension saving a local it reuses) reads it, maybe unbound, then unbinds it.
LOCAL_ACCESS = {
    "LOAD_FAST": ("use",), "LOAD_FAST_CHECK": ("use",), "STORE_FAST": ("def",),
    "DELETE_FAST": ("use", "def"), "LOAD_FAST_AND_CLEAR": ("use", "def"),
}
# What 3.12+ puts between an inlined comprehension's GET_ITER and its FOR_ITER (PEP 709):
# the locals it saves, the try block that restores them on an exception, the new list,
# set or dict.
_COMPREHENSION_PREFIX = frozenset({"LOAD_FAST_AND_CLEAR", "SWAP", "BUILD_LIST", "BUILD_SET",
                                   "BUILD_MAP"})
# (values popped, values pushed) of 3.11's LOAD_METHOD (the object; the method and self, or
# NULL and the attribute), to which the `bytecode` package's pre_and_post_stack_effect gives
# its net effect as (1, 0) (stack_io).
_POPS_AND_PUSHES = {"LOAD_METHOD": (1, 2)}
# A handler that only restores the locals an inlined comprehension saved, and re-raises.
_CLEANUP_HANDLER = frozenset({"SWAP", "POP_TOP", "STORE_FAST"})


def _stopiteration_guard(item) -> bool:
    """3.12+: a generator's handler turning a StopIteration raised in its body into
    RuntimeError (PEP 479) and re-raising; without an exception it has no effect, as a
    comprehension's cleanup (capture/generators.py walks such bodies)."""
    return item.name == "CALL_INTRINSIC_1" and \
        getattr(item.arg, "name", None) == "INTRINSIC_STOPITERATION_ERROR"


@dataclass(frozen=True)
class Loop:
    """A loop spanning positions [start, end]; start includes the GET_ITER of a for loop."""
    start: int
    end: int


@dataclass(frozen=True)
class LoopBody:
    """A `for` loop body outlined as a function: positions [start, end] (after FOR_ITER, up
    to the JUMP_BACKWARD), the loop head's label position, the locals it reads (params) and
    the locals it assigns that are live at the head (outs, returned each iteration), and
    the handlers of the inlined comprehensions in it (Flow.cleanup_handlers)."""
    head: int
    start: int
    end: int
    params: tuple
    outs: tuple
    handlers: tuple = ()


class Flow:
    """Facts about one instruction list, computed on demand."""

    def __init__(self, instrs: list):
        self.instrs = instrs
        self.label_pos = {item: pos for pos, item in enumerate(instrs) if isinstance(item, Label)}
        self._cleanup = {}          # id(TryBegin) -> its cleanup handler's positions, or None
        self._comprehension_saves = {}  # GET_ITER position -> the locals the loop saves (3.12)
        self._exhausts = {}         # FOR_ITER position -> runs_to_exhaustion

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
        (it returns), since its iterator lives on the stack throughout. From 3.12 a `for`
        ends after the END_FOR (3.13: END_FOR, POP_TOP) that its exhausted FOR_ITER jumps
        past, and an inlined comprehension after the stores restoring the locals it saved:
        a break inside either never resumes in the middle."""
        found = []
        for pos, item in enumerate(self.instrs):
            if isinstance(item, Instr) and item.name == "FOR_ITER":
                get_iter, saved = self._for_start(pos)
                if get_iter is not None:
                    found.append(Loop(get_iter, self._for_end(pos, saved)))
                    self._comprehension_saves[get_iter] = saved
            if isinstance(item, Instr) and item.has_jump() and "BACKWARD" in item.name:
                start = self.label_pos[item.arg]
                head = self._next_instr(start)
                if head is not None and self.instrs[head].name == "FOR_ITER":
                    prev = self._prev_instr(start)
                    if prev is not None and self.instrs[prev].name == "GET_ITER":
                        start = prev
                found.append(Loop(start, pos))
        return found

    def _for_start(self, for_iter: int) -> tuple:
        """(position of the GET_ITER of the FOR_ITER at `for_iter`, the locals an inlined
        comprehension saves before its loop), or (None, ()) when there is none."""
        saved = []
        for pos in range(for_iter - 1, -1, -1):
            item = self.instrs[pos]
            if not isinstance(item, Instr):
                continue
            if item.name == "GET_ITER":
                return pos, tuple(saved)
            if item.name not in _COMPREHENSION_PREFIX:
                return None, ()
            if item.name == "LOAD_FAST_AND_CLEAR":
                saved.append(item.arg)
        return None, ()

    def _for_end(self, for_iter: int, saved: tuple) -> int:
        """The last position of the `for` loop (or inlined comprehension) whose FOR_ITER is
        at `for_iter` and which saved the locals `saved`."""
        exit_pos = self.label_pos[self.instrs[for_iter].arg]
        end = exit_pos - 1
        expected = list(_compat.BYTECODE.for_iter_exit)
        pending = set(saved)
        for pos in range(exit_pos + 1, len(self.instrs)):
            item = self.instrs[pos]
            if isinstance(item, SetLineno):
                continue
            if isinstance(item, Instr) and expected:
                if item.name != expected.pop(0):
                    raise AssertionError(f"{item.name} after an exhausted FOR_ITER")
            elif isinstance(item, Instr) and pending and item.name in ("SWAP", "STORE_FAST"):
                pending.discard(item.arg)
            elif not (isinstance(item, TryEnd) and pending):
                break
            end = pos
        return end

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

    def runs_to_exhaustion(self, for_iter: int) -> bool:
        """Whether the `for` loop whose FOR_ITER is at `for_iter` is the outermost loop there
        and leaves only through that FOR_ITER: no break, return or raise in it (its trip
        count is then how many times its body runs). Asked at the first two iterations of
        every unrolled copy of the loop: answered once per position."""
        if for_iter not in self._exhausts:
            self._exhausts[for_iter] = self._runs_to_exhaustion(for_iter)
        return self._exhausts[for_iter]

    def _runs_to_exhaustion(self, for_iter: int) -> bool:
        loop = self.outermost_loop(for_iter)
        if loop is None or self._next_instr(loop.start + 1) != for_iter or \
                getattr(self.instrs[loop.start], "name", None) != "GET_ITER":
            return False
        for pos in range(loop.start, loop.end + 1):
            item = self.instrs[pos]
            if not isinstance(item, Instr) or pos == for_iter:
                continue
            if item.name in _compat.RETURNS or item.name in ("RAISE_VARARGS", "RERAISE"):
                return False
            if item.has_jump() and not loop.start <= self.label_pos[item.arg] <= loop.end:
                return False
        return True

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
                pops, pushes = stack_io(item)
                lowest = min(lowest, depth - pops)
                depth += pushes - pops
            elif pos > end and isinstance(item, Label):
                return None
            if pos >= end and lowest <= min(nulls):
                return pos
            pos += 1
            if pos >= len(self.instrs):
                return None

    def null_survives(self, start: int, end: int, depth: int, slot: int) -> bool:
        """Whether a path from `start` (at stack depth `depth`) leaves the span [start, end]
        without the stack ever dropping to `slot` entries: the value in that slot (a NULL)
        is then still on it. Every path is followed, loops included."""
        seen = set()
        work = [(start, depth, depth)]
        while work:
            state = work.pop()
            pos, d, low = state
            if pos < start or pos > end:
                if low > slot:
                    return True
                continue
            if state in seen:
                continue
            seen.add(state)
            item = self.instrs[pos]
            if not isinstance(item, Instr):
                work.append((pos + 1, d, low))
                continue
            if item.has_jump():
                pops, pushes = stack_io(item, jump=True)
                work.append((self.label_pos[item.arg], d + pushes - pops, min(low, d - pops)))
            if item.name not in TERMINATORS:
                pops, pushes = stack_io(item, jump=False)
                work.append((pos + 1, d + pushes - pops, min(low, d - pops)))
        return False

    def null_slots(self, pos: int, depth: int) -> list:
        """The stack slots (from depth `depth`) where the instruction at `pos` may push a
        NULL: beside a callable (PUSH_NULL, 3.11's LOAD_METHOD; LOAD_GLOBAL, and 3.12's
        LOAD_ATTR and LOAD_SUPER_ATTR, with their low bit), or for a local an inlined
        comprehension saves unbound (LOAD_FAST_AND_CLEAR)."""
        item = self.instrs[pos]
        if not isinstance(item, Instr):
            return []
        low_bit = isinstance(item.arg, tuple) and item.arg[0] is True and \
            item.name in ("LOAD_GLOBAL", "LOAD_ATTR", "LOAD_SUPER_ATTR")
        if not (low_bit or item.name in ("PUSH_NULL", "LOAD_METHOD", "LOAD_FAST_AND_CLEAR")):
            return []
        pops, pushes = stack_io(item)
        return list(range(depth - pops, depth - pops + pushes))

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
        none = frozenset()
        live = [none] * (n + 1)
        uses, defs = zip(*map(_uses_defs, self.instrs)) if self.instrs else ((), ())
        succ = self.successors
        changed = True
        while changed:
            changed = False
            for pos in range(n - 1, -1, -1):
                # (one successor, no local accessed: most positions pass their set on as is;
                # the identity test spares comparing it with itself)
                after = succ[pos]
                if not after:
                    out = none
                elif len(after) == 1:
                    out = live[after[0]]
                else:
                    out = live[after[0]].union(*(live[s] for s in after[1:]))
                new = out - defs[pos] if defs[pos] else out
                if uses[pos]:
                    new = uses[pos] | new
                if new is not live[pos] and new != live[pos]:
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

    def deleted_in(self, start: int, end: int) -> set:
        """Local names deleted (DELETE_FAST) anywhere in positions [start, end]."""
        return {_local_name(item) for item in self.instrs[start:end + 1]
                if isinstance(item, Instr) and item.name == "DELETE_FAST"}

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
        falling back to the head (break, return), has try blocks, deletes a local (the
        caller's would stay bound: a later iteration's read would not raise), or reads a
        local that may be unbound when the loop starts (`bound` are the locals bound
        there)."""
        instrs = self.instrs
        if not isinstance(instrs[loop.start], Instr) or instrs[loop.start].name != "GET_ITER":
            return None
        head_label = self._next_label(loop.start)
        for_iter = self._next_instr(loop.start + 1)
        if head_label is None or instrs[for_iter].name != "FOR_ITER" or \
                self._for_end(for_iter, ()) != loop.end:
            return None
        jump = self._prev_instr(self.label_pos[instrs[for_iter].arg])
        if instrs[jump].name != "JUMP_BACKWARD":
            return None
        start, end = for_iter + 1, jump - 1
        if self.deleted_in(start, end):
            return None
        for pos in range(start, end + 1):
            item = instrs[pos]
            if self.user_try(item):
                return None
            if isinstance(item, Instr):
                if item.name in _compat.RETURNS or item.name == "YIELD_VALUE":
                    return None
                if item.has_jump():
                    target = self.label_pos[item.arg]
                    if not (start <= target <= end or target == head_label):
                        return None
                    if target == head_label and item.name != "JUMP_BACKWARD":
                        return None
        # A local unbound here that only the body's inlined comprehensions use (saving and
        # restoring it) stays unbound through every iteration: neither passed nor returned.
        unbound = self.saved_only(start, end) - bound
        outs = tuple(sorted(self.assigned_in(start, end) & self.live_in[head_label] - unbound))
        params = self._body_live(start, end, head_label, set(outs)) - unbound
        if not params <= bound:
            return None
        return LoopBody(head_label, start, end, tuple(sorted(params)), outs,
                        tuple(self.cleanup_handlers(start, end)))

    def saved_only(self, start: int, end: int) -> set:
        """Locals that inlined comprehensions in [start, end] save and restore, and that
        nothing else there stores (their value after the span is the one before)."""
        saved, inside = set(), set()
        for loop in self.loops:
            names = self._comprehension_saves.get(loop.start, ())
            if start <= loop.start and loop.end <= end and names:
                saved.update(names)
                inside.update(range(loop.start, loop.end + 1))
        for pos in range(start, end + 1):
            item = self.instrs[pos]
            if pos not in inside and isinstance(item, Instr) and item.name == "STORE_FAST":
                saved.discard(item.arg)
        return saved

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
                uses, defs = _uses_defs(item)
                new = uses | (out - defs)
                if new != live[pos]:
                    live[pos] = new
                    changed = True
        return set(live[start])

    def contains_try(self, start: int, end: int) -> bool:
        """Do positions [start, end] hold a try block (other than an inlined comprehension's,
        whose handler residual code copies: cleanup_handlers)?"""
        return any(self.user_try(i) for i in self.instrs[start:end + 1])

    def user_try(self, item) -> bool:
        """Is `item` the TryBegin or TryEnd of a try block other than an inlined
        comprehension's (try, with, and the handlers of those)?"""
        if isinstance(item, TryEnd):
            item = item.entry
        return isinstance(item, TryBegin) and self.cleanup_handler(item) is None

    def cleanup_handler(self, try_begin):
        """(first, last) positions of the handler of `try_begin` when it only restores the
        locals an inlined comprehension saved and re-raises (PEP 709; itself maybe in the
        try block of an enclosing comprehension), else None. Capture walks into such a try
        block as into plain code: when nothing raises, it has no effect."""
        found = self._cleanup.get(id(try_begin), False)
        if found is not False:
            return found
        self._cleanup[id(try_begin)] = None         # a handler inside itself is not one
        first = self.label_pos.get(try_begin.target)
        for pos in range(first if first is not None else len(self.instrs), len(self.instrs)):
            item = self.instrs[pos]
            if isinstance(item, TryBegin) and self.cleanup_handler(item) is None:
                break
            if isinstance(item, Instr):
                if item.name == "RERAISE":
                    found = (first, self._close_try_blocks(first, pos))
                    break
                if item.name not in _CLEANUP_HANDLER and not _stopiteration_guard(item):
                    break
        self._cleanup[id(try_begin)] = found if found is not False else None
        return self._cleanup[id(try_begin)]

    def _close_try_blocks(self, first: int, last: int) -> int:
        """`last`, or past the TryEnds that follow it and end try blocks begun in [first,
        last]: a nested comprehension's handler lies in the outer one's try block (PEP 709),
        and a copy of the handler without its TryEnd leaves that block open."""
        begun = {id(item) for item in self.instrs[first:last + 1] if isinstance(item, TryBegin)}
        while last + 1 < len(self.instrs) and isinstance(self.instrs[last + 1], TryEnd) and \
                id(self.instrs[last + 1].entry) in begun:
            last += 1
        return last

    def cleanup_handlers(self, start: int, end: int) -> list:
        """The handlers (first, last) of the comprehensions' try blocks in [start, end] and,
        in turn, of those in their handlers: residual code copying the span copies them."""
        found, todo = [], [(start, end)]
        while todo:
            lo, hi = todo.pop()
            for item in self.instrs[lo:hi + 1]:
                block = self.cleanup_handler(item) if isinstance(item, TryBegin) else None
                if block is not None and block not in found and \
                        not (start <= block[0] and block[1] <= end):
                    found.append(block)
                    todo.append(block)
        return sorted(found)


def stack_io(instr, jump=None) -> tuple:
    """(values popped, values pushed) by an instruction: where flow asks whether a NULL was
    popped (null_slots, extend_past_nulls, null_survives), the one place that reads the
    `bytecode` package's pre_and_post_stack_effect. That counts a pop as a negative first
    number but gives an instruction it has no rule for its net effect there: a pure push
    (PUSH_NULL, LOAD_GLOBAL, LOAD_FAST_AND_CLEAR) reads (n, 0), 3.11's LOAD_METHOD (1, 0);
    and 3.11's MAP_ADD 1 (-1, -1). BEFORE_WITH and 3.12's CALL_INTRINSIC_1 and END_SEND also
    pop one more than counted here, never a NULL; 3.11's PRECALL pops nothing and its CALL
    everything, only their sum is right."""
    if instr.name in _POPS_AND_PUSHES:
        return _POPS_AND_PUSHES[instr.name]
    pre, post = instr.pre_and_post_stack_effect(jump=jump)
    net = pre + post
    pops = max(-pre, -net, 0)
    return pops, net + pops


def _local_name(instr) -> str | None:
    """The fast local an instruction names (3.13's LOAD_FAST of a free variable, pushing
    its cell for a closure, names none)."""
    return instr.arg if isinstance(instr.arg, str) else None


def _uses_defs(item) -> tuple:
    """(locals read before being bound, locals bound) by one instruction."""
    events = LOCAL_ACCESS.get(item.name, ()) if isinstance(item, Instr) else ()
    name = _local_name(item) if events else None
    if name is None:
        return frozenset(), frozenset()
    uses = frozenset((name,)) if events[0] == "use" else frozenset()
    return uses, frozenset((name,)) if "def" in events else frozenset()
