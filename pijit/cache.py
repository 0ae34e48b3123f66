"""Per-code bookkeeping on the Python side: config, entries (for reports), counts, reasons,
and who is compiling the code right now.

The C hook owns the entries it walks; this mirror keeps what reports need: each entry's
guards, graph and bytecode text, the recompile reasons and whole-function fallbacks.
A record hangs off its code's CodeState (pijit._eval_frame), which the jitted function's
Wrapper owns; a record owns the records of the resume functions, loop bodies and callees
made for its code. So everything lives as long as the jitted function, and is freed with
it by the garbage collector (no global table keeps a user's objects alive). Threads miss on
one code concurrently and `pijit.reset` may empty it meanwhile, so the C entries and this
mirror change together under the record's lock, and a compile started before a reset
installs nothing (`generation`).
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

from pijit import eval_frame


@dataclass
class EntryInfo:
    """What one cache entry was compiled from, for explain/code_info/print_after_all."""
    guards: list
    graph: object = None            # pijit.graph.ir.Graph, or None for a plain-Python entry
    graph_source: str = ""
    fallback: object = None         # BreakInfo when this entry runs plain Python
    dynamic_dims: dict = field(default_factory=dict)
    breaks: list = field(default_factory=list)   # BreakInfo of the break ending the graph
    callee: object = None           # function whose call broke the graph: jitted on its own
    level: str | None = None        # the jit_level its graph is compiled at (None: plain)
    code: object = None             # the transformed function's code (adapt events find it)
    promote: object = None          # level -> the transformed function rebuilt at that level
    awaiting: str | None = None     # the promotion waits for this kernel module's build
    polls: int = 0                  # checks of that build so far
    perf: dict | None = None        # the perf_statistics trial: both times and the choice

    @property
    def bytecode(self) -> str:
        """The transformed function's disassembly, made when asked for: dis costs about 2 ms
        an entry, a tenth of a small capture, and only reports read it."""
        from pijit.explain import bytecode_text     # explain imports this module
        return bytecode_text(self.code) if self.code is not None else ""


@dataclass
class BreakInfo:
    """Why capture stopped: the reason and the user's file:line."""
    reason: str
    filename: str
    lineno: int | None

    def __str__(self) -> str:
        return f"{self.reason} ({self.filename}:{self.lineno})"


@dataclass(eq=False)
class CodeRecord:
    config: object
    input_signature: object = None
    hash_args: object = None
    entries: list = field(default_factory=list)   # newest first
    compile_count: int = 0
    recompile_reasons: list = field(default_factory=list)
    eager_fallbacks: list = field(default_factory=list)
    limit_logged: bool = False
    resumes: dict = field(default_factory=dict)   # (position, depth, live) -> resume code
    callees: dict = field(default_factory=dict)   # id -> code jitted because its call was not inlined
    dynamic: dict = field(default_factory=dict)   # source -> dims (or value) dynamic from the start
    state: object = None            # the code's CodeState (keeps the code marked)
    children: list = field(default_factory=list)  # records of the resume codes and callees
    # Held only for short reads and writes of the fields above, never across a compile or
    # user code; reentrant because releasing a C entry may run finalizers that reset.
    lock: object = field(default_factory=threading.RLock, repr=False)
    builder: int | None = None      # threading.get_ident() of the thread compiling this code
    generation: int = 0             # bumped by clear()
    transient_failures: int = 0     # RecursionError/MemoryError while compiling, since reset
    retry_in: int = 0               # misses left to run plain before compiling is tried again
    # Sources whose automatic dynamic dims or value made capture break (a branch or a
    # shape needs them constant), and the entries compiled specialised on them since.
    must_specialize: set = field(default_factory=set)
    specialized_entries: int = 0

    def clear(self):
        self.entries.clear()
        self.compile_count = 0
        self.recompile_reasons.clear()
        self.eager_fallbacks.clear()
        self.limit_logged = False
        self.transient_failures = self.retry_in = 0
        self.must_specialize.clear()
        self.specialized_entries = 0
        self.generation += 1


def record(code) -> CodeRecord | None:
    state = eval_frame.state_of(code)
    return None if state is None else state.record


def register(code, config, input_signature=None, hash_args=None) -> CodeRecord:
    """Create or update the record of a code object being jitted (and mark the code)."""
    state = eval_frame.mark(code)
    rec = state.record
    if rec is None:
        rec = CodeRecord(config, input_signature, hash_args, state=state)
        state.record = rec
    else:
        rec.config, rec.input_signature, rec.hash_args = config, input_signature, hash_args
    eval_frame.set_compile_budget(code, config.compile_after_ms / 1000 if config.is_adaptive
                                  else 0.0)
    eval_frame.set_inline(code, config.inline_plain)
    return rec


def clear(code):
    """Drop the C entries, counters and the record of one code, as one step for threads that
    compile or install entries meanwhile."""
    rec = record(code)
    if rec is None:
        eval_frame.reset(code)
        return
    with rec.lock:
        rec.clear()
        eval_frame.reset(code)


def all_codes() -> list:
    return [state.code for state in eval_frame.all_states() if state.record is not None]


def family(code) -> list:
    """code and, transitively, the resume codes and callees jitted for it."""
    out, todo, seen = [], [code], set()
    while todo:
        c = todo.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        out.append(c)
        rec = record(c)
        if rec is not None:
            todo.extend(rec.resumes.values())
            todo.extend(rec.callees.values())
    return out


def _after_fork_in_child():
    """A thread that held a record's lock, or was compiling, does not exist in a forked
    child: give every record a fresh lock, and let the child compile what it was building
    (the C hook likewise forgets the BUILDING state of a compile begun before the fork)."""
    me = threading.get_ident()
    for state in eval_frame.all_states():
        rec = state.record
        if rec is not None:
            rec.lock = threading.RLock()
            if rec.builder != me:
                rec.builder = None


os.register_at_fork(after_in_child=_after_fork_in_child)
