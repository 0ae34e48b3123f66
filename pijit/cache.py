"""Per-code bookkeeping on the Python side: config, entries (for reports), counts, reasons.

The C hook owns the entries it walks; this mirror keeps what reports need: each entry's
guards, graph and bytecode text, the recompile reasons and whole-function fallbacks.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field


@dataclass
class EntryInfo:
    """What one cache entry was compiled from, for explain/code_info/print_after_all."""
    guards: list
    graph: object = None            # pijit.graph.ir.Graph, or None for a plain-Python entry
    graph_source: str = ""
    bytecode: str = ""
    fallback: object = None         # BreakInfo when this entry runs plain Python
    dynamic_dims: dict = field(default_factory=dict)
    breaks: list = field(default_factory=list)   # BreakInfo of the break ending the graph
    callee: object = None           # function whose call broke the graph: jitted on its own


@dataclass
class BreakInfo:
    """Why capture stopped: the reason and the user's file:line."""
    reason: str
    filename: str
    lineno: int | None

    def __str__(self) -> str:
        return f"{self.reason} ({self.filename}:{self.lineno})"


@dataclass
class CodeRecord:
    config: object
    input_signature: object = None
    hash_args: object = None
    entries: list = field(default_factory=list)
    compile_count: int = 0
    recompile_reasons: list = field(default_factory=list)
    eager_fallbacks: list = field(default_factory=list)
    limit_logged: bool = False
    resumes: dict = field(default_factory=dict)   # (position, depth, live) -> resume code
    callees: dict = field(default_factory=dict)   # id -> code jitted because its call was not inlined
    dynamic: dict = field(default_factory=dict)   # source -> dims (or value) dynamic from the start

    def clear(self):
        self.entries.clear()
        self.compile_count = 0
        self.recompile_reasons.clear()
        self.eager_fallbacks.clear()
        self.limit_logged = False


# id(code) -> (weak reference to the code, CodeRecord). Keyed by identity: code objects
# compare equal when compiled from the same source, yet each is jitted on its own.
_records: dict = {}


def record(code) -> CodeRecord | None:
    found = _records.get(id(code))
    if found is None or found[0]() is not code:
        return None
    return found[1]


def register(code, config, input_signature=None, hash_args=None) -> CodeRecord:
    """Create or update the record of a code object being jitted."""
    rec = record(code)
    if rec is None:
        key = id(code)
        # The dict is bound now: at interpreter exit module globals may already be gone.
        ref = weakref.ref(code, lambda _, key=key, records=_records: records.pop(key, None))
        rec = CodeRecord(config, input_signature, hash_args)
        _records[key] = (ref, rec)
    else:
        rec.config, rec.input_signature, rec.hash_args = config, input_signature, hash_args
    return rec


def all_codes() -> list:
    return [code for code in (ref() for ref, _ in list(_records.values())) if code is not None]


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
