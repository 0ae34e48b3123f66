"""When compiling pays: a captured graph -> the plan of its entry (run plain, which tier it
starts in, a timed trial), and the C hook's adapt events (promotions, trial results).

The Python side of csrc/adapt.c. Measured facts behind the rules (this machine, 3.11):
capture costs about 2-10 ms an entry and gcc 60-300 ms a module, so the C compiler is paid
only for graphs that touch many elements or for entries that keep being hit; a graph with no
array work gains nothing over plain Python (its scalar ops run as Python objects either way)
and costs a guard walk and a call per use; graph breaks cost a resume call each, so only a
trial can tell whether an entry with breaks beats the original bytecode.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pijit import cache, explain
from pijit.graph.work import graph_work

# Array elements a graph touches per call from which it compiles at jit_level at once.
BIG_WORK = 65536


@dataclass(frozen=True)
class Plan:
    """How a new entry runs: `plain` (why: its calls run as plain Python), else at `level`,
    rebuilt at the configured level at hit `promote_at` (0: never), with a timed trial of
    `trial` runs where plain Python wins when faster than `margin` times the entry."""
    level: str
    plain: str | None = None
    promote_at: int = 0
    trial: int = 0
    margin: float = 1.0


def plan_entry(config, graph, break_values) -> Plan:
    """The plan of an entry for `graph`; `break_values`: None without a graph break, else
    the values live at the break (the stack and locals the residual code starts from)."""
    if not config.is_adaptive:
        return Plan(config.jit_level)
    work = graph_work(graph)
    if work == 0 and not any(_holds_array(v) for v in break_values or ()):
        # Pure Python up to the end or the break, and no array for the code after the break
        # to work on: nothing to fuse anywhere worth a resume call.
        return Plan(config.jit_level, plain="no array work: runs as plain Python")
    trial = 2 * config.PERF_STATISTICS_COUNT if config.perf_statistics else 0
    margin = 10000 / config.PERF_STATISTICS_SCALE_10000X
    if work == 0:                   # only the residual code around a break: nothing to fuse
        return Plan("O0", trial=trial, margin=margin)
    if config.jit_level != "O0" and config.promote_after and work < BIG_WORK:
        return Plan("O0", promote_at=config.promote_after, trial=trial, margin=margin)
    return Plan(config.jit_level, trial=trial, margin=margin)


def _holds_array(value) -> bool:
    meta = getattr(value, "meta", None)
    if meta is not None:
        return any(m.is_array for m in (meta if isinstance(meta, tuple) else (meta,)))
    items = getattr(value, "items", None)
    if isinstance(items, dict):
        items = list(items.values())
    if isinstance(items, (list, tuple)):
        return any(_holds_array(v) for v in items)
    return isinstance(getattr(value, "value", None), np.ndarray)


def on_adapt(event, code, fn, details):
    """The C hook's adapt callback: "promote" -> the entry's function rebuilt at jit_level
    (or None to keep it); "trial" -> (best compiled, best plain, plain chosen) recorded."""
    rec = cache.record(code)
    info = _entry_of(rec, fn)
    if info is None:
        return None
    where = f"{code.co_filename}:{code.co_firstlineno}"
    if event == "promote":
        level, build, info.promote = rec.config.jit_level, info.promote, None    # once
        if build is None:
            return None
        try:
            new_fn = build(level)
        except Exception as e:          # keep the NumPy-backend entry: it is right
            explain.log("perf", f"{where}: {code.co_qualname}: promotion to {level} failed "
                        f"({type(e).__name__}: {e}); the entry stays on the NumPy backend",
                        warn=True)
            return None
        explain.log("perf", f"{where}: {code.co_qualname}: entry promoted to {level} at hit "
                    f"{rec.config.promote_after}")
        return new_fn
    if event == "trial":
        best_fn, best_plain, plain = details
        info.perf = {"compiled_s": best_fn, "plain_s": best_plain,
                     "choice": "plain" if plain else "compiled"}
        explain.log("perf", f"{where}: {code.co_qualname}: compiled {best_fn * 1e6:.1f} us, "
                    f"plain {best_plain * 1e6:.1f} us (fastest of "
                    f"{rec.config.PERF_STATISTICS_COUNT}): keeps "
                    f"{'plain Python' if plain else 'the compiled entry'}")
    return None


def _entry_of(rec, fn):
    """The EntryInfo whose transformed function is `fn` (the hook may run a copy of it with
    another closure: the code tells)."""
    if rec is None or fn is None:
        return None
    target = getattr(fn, "__code__", None)
    for info in list(rec.entries):
        if info.code is not None and info.code is target:
            return info
    return None
