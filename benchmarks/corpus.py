"""Real-code corpus runs: each program of benchmarks/programs plain and with every function
jitted, interleaved in one process -> jitted/plain speed per program, the geometric mean and
the slowest programs with what pijit did in them. Library mode lives in library.py.

How a whole program is judged: its time from the first call on, capture and compiles
included, over `rounds` runs of main(n) (each a fresh seed inside main), so a program that
is run once counts its cold start; one untimed plain run first pays the first-use costs of
the libraries both variants share. `speed` = plain time / jitted time (1.00x: as fast).
"""
from __future__ import annotations

import gc
import math
import resource
import struct
import time

import numpy as np

from benchmarks import programs


def same(a, b) -> bool:
    """Bit-for-bit equality of program results: floats by their bits (-0.0 is not 0.0, NaN
    equals NaN of the same bits), arrays by dtype, shape and bytes, containers item by item."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, complex):
        return same(a.real, b.real) and same(a.imag, b.imag)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (set, frozenset)):
        return a == b
    return a == b


def jitted_functions(module):
    """(qualified name, jitted function) of every function pijit.jit made in a jitted program
    module (a Wrapper, or from 3.12 a function object: api.is_jitted)."""
    from pijit.api import is_jitted
    out = []
    for name, obj in vars(module).items():
        if is_jitted(obj):
            out.append((name, obj))
        elif isinstance(obj, type) and obj.__module__ == module.__name__:
            for attr, member in vars(obj).items():
                member = getattr(member, "__func__", member)
                if is_jitted(member):
                    out.append((f"{name}.{attr}", member))
    return out


def what_pijit_did(module) -> dict:
    """Totals over a jitted program's functions (and their resume functions): entries
    compiled, calls run plain before their signature was hot, calls that skipped the hook,
    graph breaks; and per function, the entries' fallbacks and break reasons."""
    import pijit
    from pijit import cache
    totals = {"compiles": 0, "entries": 0, "deferred": 0, "bypassed": 0, "breaks": 0,
              "plain_entries": 0}
    detail = []
    for name, fn in jitted_functions(module):
        st = pijit.stats(fn)
        code = pijit.api._code_of(fn)
        family = [c for c in cache.family(code)]
        compiles = sum(cache.record(c).compile_count for c in family if cache.record(c))
        breaks = [b.reason for c in family if cache.record(c)
                  for e in cache.record(c).entries for b in e.breaks]
        plain = [e["fallback"] for e in st["entries"] if e["fallback"]]
        totals["compiles"] += compiles
        totals["entries"] += len(st["entries"])
        totals["deferred"] += st["deferred"]
        totals["bypassed"] += st["bypassed"]
        totals["breaks"] += len(breaks)
        totals["plain_entries"] += len(plain)
        if compiles or breaks or st["eager_fallbacks"]:
            detail.append({"function": name, "calls": st["call_count"], "compiles": compiles,
                           "resumes": len(family) - 1, "plain": plain, "breaks": breaks,
                           "eager_fallbacks": st["eager_fallbacks"],
                           "perf": [e["perf"] for e in st["entries"] if e["perf"]]})
    totals["functions"] = detail
    return totals


def cpu_seconds() -> float:
    """CPU seconds of this process (every thread) and of its children waited for (a gcc run
    pijit waits for): on a machine other processes share, a program's wall time counts
    theirs too (linreg_numpy measured 0.54x by wall time at a load of 3 on two cores, 0.94x
    by CPU time, where a quiet run of either says 0.97x). A background build pijit does not
    wait for is not counted; the wall clock counts it, as a user would."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)     # (os.times: 10 ms ticks)
    return time.process_time() + children.ru_utime + children.ru_stime


CLOCKS = {"wall": time.perf_counter, "cpu": cpu_seconds}


def run_program(name, size="quick", rounds=5, clock="wall"):
    """Time program `name` plain and jitted (fresh modules), interleaved, on `clock` (a key
    of CLOCKS); check results."""
    now = CLOCKS[clock]
    plain_mod = programs.load(name)
    jit_mod = programs.load(name, jitted=True)
    n = plain_mod.SIZES[size]
    plain_t, jit_t, mismatches = [], [], 0
    try:
        plain_mod.main(n)       # untimed: NumPy's and the stdlib's first-use costs, for both
        for r in range(rounds):
            order = ((plain_mod, plain_t), (jit_mod, jit_t))
            results = {}
            for mod, times in (order if r % 2 == 0 else order[::-1]):
                gc.collect()
                t0 = now()
                results[mod is jit_mod] = mod.main(n)
                times.append(now() - t0)
            if not same(results[False], results[True]):
                mismatches += 1
        did = what_pijit_did(jit_mod)
    finally:
        programs.unload(plain_mod)
        programs.unload(jit_mod)
    steady_p, steady_j = sorted(plain_t[1:]), sorted(jit_t[1:])
    return {"name": name, "n": n, "rounds": rounds, "plain_s": plain_t, "jit_s": jit_t,
            "speed": sum(plain_t) / sum(jit_t),
            "first_speed": plain_t[0] / jit_t[0],
            "steady_speed": (steady_p[len(steady_p) // 2] / steady_j[len(steady_j) // 2]
                             if steady_p else None),
            "mismatches": mismatches, "pijit": did}


def run_all(names=None, size="quick", rounds=5, progress=None, clock="wall"):
    chosen = names or programs.NAMES
    out = []
    for name in (progress(chosen) if progress else chosen):
        out.append(run_program(name, size, rounds, clock))
    return out


def geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def table(results, slowest=6) -> str:
    lines = [f"{'program':<22}{'n':>7}{'plain ms':>10}{'speed':>8}{'1st':>8}{'steady':>8}"
             f"{'compiles':>9}{'breaks':>7}{'deferred':>9}{'bypassed':>9}  check"]
    for r in sorted(results, key=lambda r: r["speed"]):
        did = r["pijit"]
        plain_ms = 1e3 * sorted(r["plain_s"])[len(r["plain_s"]) // 2]
        steady = f"{r['steady_speed']:.2f}x" if r["steady_speed"] else "-"
        lines.append(f"{r['name']:<22}{r['n']:>7}{plain_ms:>10.2f}{r['speed']:>7.2f}x"
                     f"{r['first_speed']:>7.2f}x{steady:>8}{did['compiles']:>9}"
                     f"{did['breaks']:>7}{did['deferred']:>9}{did['bypassed']:>9}  "
                     f"{'ok' if not r['mismatches'] else 'WRONG x%d' % r['mismatches']}")
    speeds = [r["speed"] for r in results]
    lines.append(f"geometric mean {geomean(speeds):.3f}x over {len(results)} programs; "
                 f"below 0.95x: {sum(s < 0.95 for s in speeds)}; worst "
                 f"{min(speeds):.2f}x; wrong: {sum(1 for r in results if r['mismatches'])}")
    lines.append("speed = plain / jitted time over all rounds (first call included); "
                 "1st: first run only; steady: median of the later runs")
    for r in sorted(results, key=lambda r: r["speed"])[:slowest]:
        lines.append(f"\n{r['name']} ({r['speed']:.2f}x):")
        for f in r["pijit"]["functions"]:
            lines.append(f"  {f['function']}: {f['calls']} calls, {f['compiles']} compiles, "
                         f"{f['resumes']} resume functions")
            for why in sorted(set(f["plain"]))[:3]:
                lines.append(f"    plain entry: {why}")
            for why in sorted(set(f["breaks"]))[:4]:
                lines.append(f"    break: {why}")
            for why in f["eager_fallbacks"][:2]:
                lines.append(f"    eager fallback: {why}")
            for p in f["perf"][:2]:
                lines.append(f"    trial: {p}")
    return "\n".join(lines)
