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
    callees: set = field(default_factory=set)     # codes jitted because a call was not inlined
    dynamic: dict = field(default_factory=dict)   # source -> dims (or value) dynamic from the start

    def clear(self):
        self.entries.clear()
        self.compile_count = 0
        self.recompile_reasons.clear()
        self.eager_fallbacks.clear()
        self.limit_logged = False


_records: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def record(code) -> CodeRecord | None:
    return _records.get(code)


def register(code, config, input_signature=None, hash_args=None) -> CodeRecord:
    """Create or update the record of a code object being jitted."""
    rec = _records.get(code)
    if rec is None:
        rec = _records[code] = CodeRecord(config, input_signature, hash_args)
    else:
        rec.config, rec.input_signature, rec.hash_args = config, input_signature, hash_args
    return rec


def all_codes() -> list:
    return list(_records.keys())


def family(code) -> list:
    """code and, transitively, the resume codes and callees jitted for it."""
    out, todo, seen = [], [code], set()
    while todo:
        c = todo.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        out.append(c)
        rec = _records.get(c)
        if rec is not None:
            todo.extend(rec.resumes.values())
            todo.extend(rec.callees)
    return out
