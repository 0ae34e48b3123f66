"""When compiling pays: a captured graph -> the plan of its entry (run plain, which tier it
starts in, a timed trial), and the C hook's adapt events (promotions, trial results).

The Python side of csrc/adapt.c. Measured facts behind the rules (this machine, 3.11):
capture costs about 2-10 ms an entry and gcc 60-300 ms a module, but only the code
generation (a few ms) when the module is in the disk cache; so every entry starts on the
NumPy backend and is compiled at jit_level once its calls have taken promote_after_ms, and a
module the disk cache does not have is built in the background (background_compile: gcc is a
subprocess already) while the entry keeps running on the NumPy backend, bit-identical at O1.
A program of a few ms never pays for a compiler it cannot win back; a hot one switches as
soon as its kernels exist. A graph with no array work gains nothing over plain Python (its
scalar ops run as Python objects either way) and costs a guard walk and a call per use;
graph breaks cost a resume call each, so only a trial can tell whether an entry with breaks
beats the original bytecode. A graph whose work is a loop (a loop node or a loop nest) runs
as plain Python until its promotion, not on the NumPy backend: there the loop is generated
Python that runs slower than the bytecode it came from (measured: 0.3-0.6x on collatz,
number_theory, coo_sparse, heat1d, through 20 ms of hits and up to a second of gcc in the
background); plain is the reference, and the switch happens between calls.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pijit import cache, explain
from pijit.backends.cfused import build as kernel_build
from pijit.capture.values import distinct
from pijit.graph.work import graph_work, has_loop

# Hits between two checks of a background build, at most (they double from 1).
MAX_POLL_HITS = 1024


@dataclass(frozen=True)
class Plan:
    """How a new entry runs: `plain` (why: its calls run as plain Python), else at `level`,
    rebuilt at the configured level from hit `promote_at` (0: never) once its hits took
    `promote_after_s` (running plain Python meanwhile, and for good if never promoted, when
    `plain_until_promoted`), with a timed trial of `trial` runs where plain Python wins when
    faster than `margin` times the entry."""
    level: str
    plain: str | None = None
    promote_at: int = 0
    promote_after_s: float = 0.0
    plain_until_promoted: bool = False
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
    if config.jit_level != "O0" and (config.promote_after or config.promote_after_ms):
        return Plan("O0", promote_at=max(config.promote_after, 1),
                    promote_after_s=config.promote_after_ms / 1000, trial=trial, margin=margin,
                    plain_until_promoted=has_loop(graph))
    return Plan(config.jit_level, trial=trial, margin=margin)


def _holds_array(value) -> bool:
    """Does `value` (a captured value) hold an array, itself or in its items? Each value
    is looked at once: a list built as [True] * n holds one value n times (sieve_list's
    n = 60001 cost 40 ms a capture, walked item by item)."""
    seen, todo = set(), [value]
    while todo:
        value = todo.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        meta = getattr(value, "meta", None)
        if meta is not None:
            if any(m.is_array for m in (meta if isinstance(meta, tuple) else (meta,))):
                return True
            continue
        items = getattr(value, "items", None)
        if isinstance(items, dict):
            items = items.values()
        if isinstance(items, (list, tuple, type({}.values()))):
            todo.extend(distinct(items))
        elif isinstance(getattr(value, "value", None), np.ndarray):
            return True
    return False


def on_adapt(event, code, fn, details):
    """The C hook's adapt callback: "promote" -> the entry's function rebuilt at jit_level,
    None to keep it, or hits until the hook asks again (its kernels are being built in the
    background); "trial" -> (best compiled, best plain, plain chosen) recorded."""
    rec = cache.record(code)
    info = _entry_of(rec, fn)
    if info is None:
        return None
    if event == "promote":
        return _promote(rec, code, info)
    if event == "trial":
        best_fn, best_plain, plain = details
        info.perf = {"compiled_s": best_fn, "plain_s": best_plain,
                     "choice": "plain" if plain else "compiled"}
        explain.log("perf", f"{_where(code)}: {code.co_qualname}: compiled "
                    f"{best_fn * 1e6:.1f} us, plain {best_plain * 1e6:.1f} us (fastest of "
                    f"{rec.config.PERF_STATISTICS_COUNT}): keeps "
                    f"{'plain Python' if plain else 'the compiled entry'}")
    return None


def _promote(rec, code, info):
    """The promotion of entry `info`: its function rebuilt at jit_level; None to keep the
    entry as it is (for good); or, while a kernel module it needs is built in the
    background, the hits after which to check again (1, 2, 4, ... MAX_POLL_HITS)."""
    level, build, config = rec.config.jit_level, info.promote, rec.config
    if build is None:
        return None
    where = f"{_where(code)}: {code.co_qualname}"
    # (an entry that runs plain until its promotion has no NumPy-backend form: level None)
    meanwhile = "on the NumPy backend" if info.level else "as plain Python"
    if info.awaiting is not None and not kernel_build.finished(info.awaiting):
        return _poll_later(info)
    try:
        with kernel_build.background(config.background_compile):
            new_fn = build(level)
    except kernel_build.KernelPending as pending:
        if info.awaiting is None:
            explain.log("perf", f"{where}: compiling its kernels at {level} in the "
                        f"background; the entry runs {meanwhile} meanwhile")
        info.awaiting, info.polls = pending.key, 0
        return _poll_later(info)
    except kernel_build.KernelBuildFailed as e:
        info.promote = info.awaiting = None
        explain.log("perf", f"{where}: the background build of its kernels failed ({e}); "
                    f"the entry runs {meanwhile}", warn=True)
        return None
    except Exception as e:          # keep the entry as it runs: it is right
        info.promote = info.awaiting = None
        explain.log("perf", f"{where}: promotion to {level} failed ({type(e).__name__}: {e});"
                    f" the entry runs {meanwhile}", warn=True)
        return None
    info.promote = info.awaiting = None         # once
    explain.log("perf", f"{where}: entry promoted to {level}")
    return new_fn


def _poll_later(info) -> int:
    info.polls += 1
    return min(1 << (info.polls - 1), MAX_POLL_HITS)


def _where(code) -> str:
    return f"{code.co_filename}:{code.co_firstlineno}"


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
