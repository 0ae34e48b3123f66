"""Timing and measurement: one workload at a time, every variant in the same process.

For each workload (see benchmarks/README.md for how to read the numbers):

1. The reference result is plain NumPy on a private copy of the inputs.
2. Every variant (numpy, pijit, peers) gets its own copy of the inputs. Its first call is
   timed (for pijit: cold, after `pijit.reset` with an empty kernel disk cache, then once
   more after a second reset with the kernels on disk but not loaded: the warm-disk-cache
   first call). The first call's result is checked against the
   reference; a mismatch or an exception takes the variant out of the timing and is reported
   as a failure, never as a speed.
3. Warm-up calls (0.15 s of them per variant) are excluded, and before them pijit (adaptive)
   is called until it has settled: its
   signatures hot (compile_after_ms of plain runs), its entries promoted from the NumPy
   backend to jit_level (promote_after_ms of hits, then the kernels' build, in the background
   when they are not on disk, waited for here), its perf_statistics trials done, so the
   samples time the code it settles on. Each variant's calls-per-sample is chosen timeit-style so a
   sample lasts at least `target` seconds (tiny workloads: hundreds of calls per sample,
   reported per call). Samples are interleaved round-robin (A, B, A, B ... with the order
   rotated every round), with a short sleep after each sample so spinning thread pools park.
4. After timing, one more call of each variant is checked again, inputs are checked for
   mutation, and peak memory (tracemalloc, which sees NumPy's data allocations) of one call.
"""
from __future__ import annotations

import contextlib
import copy
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from itertools import repeat as _repeat
from pathlib import Path

import numpy as np

from benchmarks import allocator as allocator_mod
from benchmarks import bandwidth as bandwidth_mod
from benchmarks import peers as peers_mod
from benchmarks.check import compare, nbytes

SCHEMA_VERSION = 1
OWN = ("numpy", "pijit", "pijit_O2")     # variants whose failures fail the run
ALL_BACKENDS = OWN + peers_mod.PEERS
DISK_CACHE_NOTE = ("first_call_cold_s: empty kernel disk cache (a fresh PIJIT_CACHE_DIR); "
                   "first_call_warm_disk_s: after pijit.reset, kernels on disk, not loaded")


def forget_loaded_kernels():
    from pijit.backends.cfused import build as kernel_build
    kernel_build.forget_loaded()


@contextlib.contextmanager
def _fresh_kernel_cache():
    """An empty kernel disk cache for one measurement (PIJIT_CACHE_DIR is read per build)."""
    from pijit.backends.cfused import build as kernel_build
    old = os.environ.get("PIJIT_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="pijit-bench-") as d:
        os.environ["PIJIT_CACHE_DIR"] = d
        kernel_build.forget_loaded()
        try:
            yield
        finally:
            if old is None:
                os.environ.pop("PIJIT_CACHE_DIR", None)
            else:
                os.environ["PIJIT_CACHE_DIR"] = old


# -- timing primitives ----------------------------------------------------------------------
def call_all(fn, inputs):
    return [fn(*args) for args in inputs]


def make_timer(fn, inputs):
    """run(number) -> (seconds, CPU seconds of the whole process) for `number` passes over
    every input tuple."""
    perf, cpu = time.perf_counter, time.process_time
    if len(inputs) == 1:
        args = inputs[0]

        def run(number):
            t0, c0 = perf(), cpu()
            for _ in _repeat(None, number):
                fn(*args)
            return perf() - t0, cpu() - c0
    else:
        def run(number):
            t0, c0 = perf(), cpu()
            for _ in _repeat(None, number):
                for args in inputs:
                    fn(*args)
            return perf() - t0, cpu() - c0
    return run


def settle_pijit(fn, inputs, *, warm_s=0.25, min_calls=3, limit_s=20.0, patience_s=2.0):
    """Calls a pijit-jitted fn until adaptive execution has settled (see the module's
    docstring, step 3): for warm_s (at least min_calls calls) and until its signature is hot
    (a loop nest whose plain call takes 70 ms needs a few dozen calls before its capture and C
    compile pay: timed before that, its samples had the plain calls and the compile among
    them, lu_nopivot 81 us where its kernel takes 32 us), then, with its background kernel
    builds waited for, until no entry of fn's code or its resume functions awaits a
    promotion and its perf_statistics trials are done (each wait at most patience_s); at most
    limit_s in all. Returns None once settled, else what was still pending, which the report
    shows beside the speedup: samples taken before pijit settled time plain calls or a trial
    among the compiled ones (a loaded machine printed 0.82x with nothing to say so)."""
    import pijit
    from pijit import cache
    from pijit.backends.cfused import build as kernel_build
    start = time.perf_counter()
    calls = 0
    pending = []
    # Hotness is asked every 20 ms (code_info costs more than a tiny workload's call, and
    # its time does not count toward the signature's compile_after_ms), for at most
    # patience_s past warm_s: a signature not hot by then (one given back to CPython stays
    # a candidate) is timed as it runs.
    hot_by = start + min(limit_s, warm_s + patience_s)
    next_ask = start

    def settling():
        nonlocal next_ask
        now = time.perf_counter()
        if calls < min_calls or now - start < warm_s:
            return True
        if now > hot_by:
            pending.append("its signature was still a candidate (plain Python)")
            return False
        if now < next_ask:
            return True
        next_ask = now + 0.02
        return pijit.code_info(fn)["state"] == "candidate"
    while settling():
        call_all(fn, inputs)
        calls += 1
        if time.perf_counter() - start > limit_s:
            return f"still calling after {limit_s:g} s"

    def awaiting(trials):
        """A promotion, or (`trials`) a perf_statistics trial (its calls alternate plain
        Python and the entry: 70 ms and 32 us for lu_nopivot, so the interleave's
        calls-per-sample came out as 1 and its samples took the trial), not done yet."""
        family = cache.family(pijit.api._code_of(fn))
        return any(info.promote is not None
                   or (trials and rec.config.perf_statistics and info.level is not None
                       and info.perf is None)
                   for rec in map(cache.record, family) if rec for info in rec.entries)
    # an entry the steady calls do not reach (a resume function's) never ends its trial
    trials_by = time.perf_counter() + patience_s
    while awaiting(time.perf_counter() < trials_by) and time.perf_counter() - start < limit_s:
        for build in list(kernel_build._builds.values()):
            build.thread.join(max(limit_s - (time.perf_counter() - start), 0.0))
        call_all(fn, inputs)
    if awaiting(False):
        pending.append(f"a promotion was still pending after {limit_s:g} s")
    return "; ".join(pending) or None


def timed_call(fn, inputs):
    t0 = time.perf_counter()
    out = call_all(fn, inputs)
    return time.perf_counter() - t0, out


def summarize(samples):
    a = np.asarray(samples, dtype=float)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return {"median_s": float(med), "q1_s": float(q1), "q3_s": float(q3),
            "min_s": float(a.min()), "max_s": float(a.max()), "samples": int(a.size)}


def peak_memory(fn, inputs):
    """Peak bytes allocated (as tracemalloc sees them) during one call, result included."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    out = call_all(fn, inputs)
    peak = tracemalloc.get_traced_memory()[1] - base
    del out
    if not was_tracing:
        tracemalloc.stop()
    return int(peak)


WARMUP_S = 0.15     # seconds of calls per variant before its samples (interleave)


def interleave(timers, *, repeat, budget_s, target_s, min_rounds=5, max_rounds=60,
               pause_s=0.001, warmup_s=WARMUP_S):
    """Round-robin samples (seconds per call) for every timer, and the cores each sample kept
    busy (process CPU time / wall time); warm-up excluded: each timer's calls for warmup_s
    (at least one sample), so pijit's adaptive policy has settled (a signature runs plain
    for its first 20 ms of calls, a small graph then on the NumPy backend for 8 hits, then a
    timed trial): the sweep's row softmax of 1,000 values measured 1.00x with those phases
    among its samples, 5.6x after them."""
    numbers = {}
    for name, run in timers.items():
        run(1)                                           # warm-up, excluded
        once = run(1)[0]
        numbers[name] = max(1, min(200_000, math.ceil(target_s / max(once, 1e-9))))
        deadline = time.perf_counter() + warmup_s
        run(numbers[name])
        while time.perf_counter() < deadline:
            run(numbers[name])
    samples = {name: [] for name in timers}
    cores = {name: [] for name in timers}
    names = list(timers)
    start = time.perf_counter()
    rounds = 0
    while True:
        k = rounds % len(names)
        for name in names[k:] + names[:k]:
            wall, cpu = timers[name](numbers[name])
            samples[name].append(wall / numbers[name])
            cores[name].append(cpu / wall if wall > 0 else 0.0)
            time.sleep(pause_s)
        rounds += 1
        if repeat:
            if rounds >= repeat:
                break
        elif rounds >= max_rounds or (rounds >= min_rounds
                                      and time.perf_counter() - start > budget_s):
            break
    return samples, numbers, cores


# -- one workload ---------------------------------------------------------------------------
def _fresh_inputs(inputs):
    return copy.deepcopy(inputs)


class _TimeLimit:
    """Stops the code run under it after `seconds` by raising FirstCallTimeout in this thread
    (SIGALRM: the peers compile in Python, where the handler runs between bytecodes).
    `expired` says whether it fired, since a peer may wrap the exception in one of its own
    (torch.compile raises TorchRuntimeError from it). No limit off the main thread, where
    signals cannot be delivered, or when `seconds` is None."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.expired = False

    def __enter__(self):
        self._armed = (self.seconds is not None
                       and threading.current_thread() is threading.main_thread())
        if self._armed:
            self._previous = signal.signal(signal.SIGALRM, self._expire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def _expire(self, signum, frame):
        self.expired = True
        raise FirstCallTimeout(f"first call stopped after {self.seconds:g} s")

    def __exit__(self, *exc):
        if self._armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)
        return False


class FirstCallTimeout(Exception):
    """A peer's first call ran past its limit."""


def _variant_record(status="ok", error=None):
    return {"status": status, "error": error, "check": None, "first_call_s": None,
            "steady": None, "calls_per_sample": None, "cores": None, "speedup": None,
            "speedup_q1": None, "speedup_q3": None, "peak_memory_bytes": None,
            "inputs_unchanged": None}


def _prepare(name, workload, threads, pijit):
    """(callable, convert_inputs, to_numpy) for a variant; raises on failure."""
    if name == "numpy":
        return workload.fn, None, None
    if name == "pijit":
        return pijit.jit(peers_mod.fresh_copy(workload.fn)), None, None
    if name == "pijit_O2":      # the level that may change the last bits (README: jit_level)
        return pijit.jit(peers_mod.fresh_copy(workload.fn),
                         jit_config={"jit_level": "O2"}), None, None
    return peers_mod.prepare(name, workload, threads)


def _pijit_report(pijit, jfn, inputs, rec):
    exp = pijit.explain(jfn, *inputs[0])
    rec.update(graph_count=exp.graph_count, graph_break_count=exp.graph_break_count,
               op_count=exp.op_count, ops_per_graph=[list(g) for g in exp.ops_per_graph],
               break_reasons=[{"reason": str(r["reason"]), "filename": str(r["filename"]),
                               "lineno": r["lineno"]} for r in exp.break_reasons],
               fallback=None if exp.fallback is None else str(exp.fallback))


def measure_workload(workload, scale, backends, *, threads=1, repeat=None, budget_s=1.5,
                     target_s=0.002, bandwidth=None, installed=None, warmup_s=WARMUP_S,
                     peer_limit_s=peers_mod.FIRST_CALL_LIMIT_S):
    import pijit
    installed = installed or {}
    pristine = workload.inputs(scale)
    reference_inputs = _fresh_inputs(pristine)
    reference = call_all(workload.fn, reference_inputs)
    # what every variant's inputs must hold after its calls
    expected_inputs = reference_inputs if workload.writes_inputs else pristine
    in_bytes = sum(nbytes(a) for args in pristine for a in args)
    out_bytes = nbytes(reference)
    result = {"name": workload.name, "description": workload.description,
              "size": size_label(pristine), "memory_bound": workload.memory_bound,
              "bytes_moved": int(in_bytes + out_bytes) if workload.memory_bound else None,
              "floor_s": None, "variants": {}}
    if workload.memory_bound and bandwidth:
        result["floor_s"] = bandwidth_mod.floor_s(bandwidth, in_bytes, out_bytes)

    timers, prepared = {}, {}
    for name in backends:
        if name in peers_mod.PEERS and not installed.get(name, {}).get("installed"):
            result["variants"][name] = _variant_record("not installed", "not installed")
            continue
        rec = _variant_record()
        result["variants"][name] = rec
        try:
            fn, convert, to_numpy = _prepare(name, workload, threads, pijit)
        except peers_mod.NotApplicable as exc:
            rec.update(status="not applicable", error=str(exc))
            continue
        except Exception as exc:
            rec.update(status="error", error=f"{type(exc).__name__}: {exc}")
            continue
        own = _fresh_inputs(pristine)
        call_inputs = convert(own) if convert else own
        limit = _TimeLimit(None)
        to_np = to_numpy or (lambda x: x)
        try:
            if name == "pijit":
                _pijit_report(pijit, fn, call_inputs, rec)
                with _fresh_kernel_cache():
                    pijit.reset(fn)
                    rec["first_call_s"], out = timed_call(fn, call_inputs)
                    rec["first_call_cold_s"] = rec["first_call_s"]
                    check = compare(reference, out, strict_dtype=True)
                    pijit.reset(fn)
                    forget_loaded_kernels()
                    rec["first_call_warm_disk_s"], out2 = timed_call(fn, call_inputs)
                rec["disk_cache"] = True
                rec["disk_cache_note"] = DISK_CACHE_NOTE
                if check["ok"]:
                    check = compare(reference, out2, strict_dtype=True)
            else:
                limit = _TimeLimit(None if name in OWN else peer_limit_s)
                with limit:
                    rec["first_call_s"], out = timed_call(fn, call_inputs)
                check = compare(reference, to_np(out), strict_dtype=name in OWN)
        except Exception as exc:
            if limit.expired:
                rec.update(status="timed out", error=f"first call stopped after {peer_limit_s:g} s")
            else:
                rec.update(status="error", error=f"{type(exc).__name__}: {exc}")
            continue
        rec["check"] = check
        if not check["ok"]:
            rec["status"] = "mismatch"
            rec["error"] = check["reason"]
            continue
        if name.startswith("pijit"):
            # tiny: checks only, the timings mean little; no waits for hotness or trials
            rec["unsettled"] = settle_pijit(fn, call_inputs,
                                            warm_s=max(warmup_s, 0.01) * 5 / 3,
                                            patience_s=0.0 if scale == "tiny" else 2.0)
        timers[name] = make_timer(fn, call_inputs)
        prepared[name] = (fn, call_inputs, own, to_np, name in OWN)

    if timers:
        samples, numbers, cores = interleave(timers, repeat=repeat, budget_s=budget_s,
                                             target_s=target_s, warmup_s=warmup_s)
        base = samples.get("numpy")
        for name, s in samples.items():
            rec = result["variants"][name]
            rec["steady"] = summarize(s)
            rec["calls_per_sample"] = numbers[name]
            rec["cores"] = float(np.median(cores[name]))
            if base:
                rec["speedup"] = float(np.median(base) / np.median(s))
                ratios = np.asarray(base) / np.asarray(s)      # paired: same round
                rec["speedup_q1"], rec["speedup_q3"] = (float(x) for x in
                                                        np.percentile(ratios, [25, 75]))

    for name, (fn, call_inputs, own, to_np, strict) in prepared.items():
        rec = result["variants"][name]
        try:
            out = to_np(call_all(fn, call_inputs))          # steady-state result, checked too
            check = compare(reference, out, strict_dtype=strict)
            if name in OWN + ("numexpr",):      # allocations tracemalloc sees
                rec["peak_memory_bytes"] = peak_memory(fn, call_inputs)
        except Exception as exc:
            check = {"ok": False, "reason": f"{type(exc).__name__}: {exc}"}
        unchanged = (compare(expected_inputs, own, strict_dtype=True)["ok"]
                     if own is call_inputs else None)
        rec["inputs_unchanged"] = unchanged
        if not check["ok"] or unchanged is False:
            rec["status"] = "mismatch"
            rec["error"] = check.get("reason") if not check["ok"] else "inputs were modified"
            rec["check"] = check
            for key in ("steady", "speedup", "speedup_q1", "speedup_q3"):
                rec[key] = None                             # a wrong result has no speed
        if name == "pijit":
            st = pijit.stats(fn)
            rec.update(compile_count=st["compile_count"], cache_misses=st["cache_misses"],
                       recompiles=len(st["recompile_reasons"]))
    return result


def size_label(inputs):
    """'10M f64', '4096x512 f32', or '6 shapes, 1000..6000 f64' for changing shapes."""
    def one(args):
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        if not arrays:                  # plain Python: its int parameter
            return "n=" + ",".join(str(a) for a in args if isinstance(a, int)), "py"
        big = max(arrays, key=lambda a: a.size)
        dims = "x".join(_short(d) for d in big.shape)
        return dims, f"{big.dtype.kind}{big.dtype.itemsize * 8}"
    if len(inputs) > 1:
        first, dt = one(inputs[0])
        return f"{len(inputs)} shapes {first}..{one(inputs[-1])[0]} {dt}"
    dims, dt = one(inputs[0])
    return f"{dims} {dt}"


def _short(n):
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 10_000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


# -- environment ----------------------------------------------------------------------------
def environment(threads):
    import os
    import pijit
    env = {"python": sys.version.split()[0], "platform": platform.platform(),
           "numpy": np.__version__, "cpu_model": _cpu_model(), "cpu_count": os.cpu_count(),
           "threads": threads, "pijit_commit": _git_commit(),
           "pijit_jit_level": pijit.JitConfig().jit_level,
           "loadavg_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
           "thread_env": {k: os.environ.get(k) for k in
                          ("PIJIT_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                           "MKL_NUM_THREADS")},
           "openblas_env": {k: os.environ.get(k) for k in
                            ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")},
           "blas": _blas_info()}
    return env


def _cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _git_commit():
    try:
        root = Path(__file__).resolve().parent.parent
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, text=True,
                              capture_output=True, timeout=5).stdout.strip() or None
    except Exception:
        return None


def _blas_info():
    try:
        import threadpoolctl
    except ImportError:
        cfg = None
        try:
            blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
            cfg = {"name": blas.get("name"), "version": blas.get("version")}
        except Exception:
            pass
        return {"source": "numpy.show_config (threadpoolctl not installed)", "build": cfg}
    return {"source": "threadpoolctl",
            "pools": [{k: info.get(k) for k in ("internal_api", "version", "architecture",
                                                 "num_threads", "threading_layer", "filepath")}
                      for info in threadpoolctl.threadpool_info()]}


# -- the suite ------------------------------------------------------------------------------
# (steady-state time budget per workload, seconds per sample, bw elements, warm-up seconds
# per variant: pijit settles for 5/3 of it first). The tiny scale checks that every variant
# runs and agrees (the tests); its times are not what it is for.
SCALE_SETTINGS = {
    "tiny": (0.05, 0.0002, 1 << 20, 0.01),
    "quick": (1.2, 0.002, 1 << 23, WARMUP_S),
    "full": (6.0, 0.005, 1 << 24, WARMUP_S),
}


def _warm_pijit():
    """Compile one throwaway function so the first workload does not pay pijit's imports."""
    import pijit

    def warm(x):
        return x * 2.0 + 1.0
    jw = pijit.jit(warm)
    jw(np.ones(4))
    pijit.reset(jw)


def run_suite(workloads, *, suite="quick", tiny=False, backends=ALL_BACKENDS, repeat=None,
              threads=1, bandwidth=True, progress=None, pin_allocator=True,
              peer_limit_s=peers_mod.FIRST_CALL_LIMIT_S):
    from benchmarks import bandwidth as bw_mod
    scale = "tiny" if tiny else suite
    budget_s, target_s, bw_n, warmup_s = SCALE_SETTINGS[scale]
    backends = ["numpy"] + [b for b in backends if b != "numpy"]   # the baseline always runs
    allocator = (allocator_mod.pin() if pin_allocator
                 else {"pinned": False, "reason": "not asked to (--no-pin-allocator)"})
    t0 = time.perf_counter()
    results = {"schema_version": SCHEMA_VERSION,
               "config": {"suite": suite, "tiny": tiny, "scale": scale, "backends": backends,
                          "repeat": repeat, "threads": threads, "budget_s": budget_s,
                          "target_sample_s": target_s},
               "env": environment(threads), "peers": peers_mod.availability(),
               "bandwidth": None, "workloads": []}
    if bandwidth:
        results["bandwidth"] = bw_mod.measure(n=bw_n)
    if "pijit" in backends:
        _warm_pijit()
    results["env"]["blas"] = _blas_info()                 # after numpy has loaded its BLAS
    results["env"]["allocator"] = allocator
    items = progress(workloads) if progress else workloads
    for w in items:
        if hasattr(items, "set_postfix_str"):
            items.set_postfix_str(w.name)
        results["workloads"].append(measure_workload(
            w, scale, backends, threads=threads, repeat=repeat, budget_s=budget_s,
            target_s=target_s, bandwidth=results["bandwidth"], installed=results["peers"],
            warmup_s=warmup_s, peer_limit_s=peer_limit_s))
    results["wall_time_s"] = time.perf_counter() - t0
    import os
    results["env"]["loadavg_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    return results
