"""`python -m benchmarks.call_floor`: what pijit adds to one call of a small function.

Cases (each plain and jitted): a one-line function whose jitted calls run as plain Python
(nothing to gain; not hot yet; frozen past limit_graph_count), functions not hot yet called
with arrays, with defaults left out (rk4_numpy's lotka: both) and as a class's __init__
(a Wrapper on 3.13, which its class calls generically), one whose entry runs a tiny
compiled graph, a small kernel by loops that allocates its output (np.zeros_like, globals
guarded), a recursive fib(20) (every level calls the jitted function through its
global name, so through the Wrapper, or from 3.12 the jitted function object), and a scalar
math helper called in a loop by a jitted driver (the corpus jits every function). Each side
is warmed first, past the calls after which pijit gives a function it has nothing to do for
back to CPython (3.12+; the path column then says "given back to CPython"). For each:
instructions per call counted by callgrind (the measure to compare: deterministic, unlike
time on a shared machine), and nanoseconds per call as a secondary number (interleaved plain/jit samples, median), with
the ratio jit / plain and how the jitted calls ran (the hook's counters over the measured
calls), so a case that took another path than its name says shows it.

Callgrind counts only the measured loop: each case runs in a child process under
`valgrind --tool=callgrind --instr-atstart=no`, which starts instrumenting at a client
request made right before the loop (a tiny cffi module built once per run) and stops right
after it; the numbers include the loop's own bytecode, the same for both sides.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

CALLS = 2000            # measured calls per case under callgrind
FIB_N = 20


def _jit(fn, **config):
    import pijit
    return pijit.jit(fn, jit_config=config or None)


def _add1(x):
    return x + 1


def _shift(a):
    return a + 1.0


def _axpy(a, b, x):
    return a * x + b


def _add_defaults(x, a=1, b=2, c=3, d=4):
    return x + a


def _fib_namespace(jitted):
    ns = {}
    exec("def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
         ns)
    if jitted:
        ns["fib"] = _jit(ns["fib"])
    return ns["fib"]


def _math_namespace(jitted):
    ns = {"math": math}
    exec("def hyp(x, y):\n    return math.sqrt(x * x + y * y)\n\n"
         "def drive(n):\n    s = 0.0\n    for i in range(n):\n        s += hyp(i, 0.5)\n"
         "    return s\n", ns)
    if jitted:
        ns["hyp"] = _jit(ns["hyp"])
        ns["drive"] = _jit(ns["drive"])
    return ns


class Case:
    """One micro case: `make(jitted)` -> (run(n) making n calls, wrapper or None, calls per
    unit); `warm(wrapper)` brings the jitted side to the state the case measures."""

    def __init__(self, name, doc, make, warm=None, per=1):
        self.name, self.doc, self.make, self.warm, self.per = name, doc, make, warm, per


def _loop1(f, arg):
    def run(n):
        for _ in range(n):
            f(arg)
    return run


def _make_simple(config, arg=7):
    def make(jitted):
        f = _jit(_copy(_add1), **config) if jitted else _copy(_add1)
        return _loop1(f, arg), (f if jitted else None)
    return make


def _copy(fn):
    """A function of its own code, so each case's jitted code has a state of its own."""
    import types
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__,
                              fn.__defaults__, fn.__closure__)


def _make_not_hot_array(jitted):
    a = np.ones(4)
    config = {"compile_after_ms": 10 ** 6}
    f = _jit(_copy(_shift), **config) if jitted else _copy(_shift)
    return _loop1(f, a), (f if jitted else None)


def _make_not_hot(fn, *args):
    """make(jitted) for calls fn(*args) whose signature is never hot (compile_after_ms=10**6):
    what a deferred call costs the function of a program that stays plain."""
    def make(jitted):
        f = _jit(_copy(fn), compile_after_ms=10 ** 6) if jitted else _copy(fn)
        return _loopn(f, args), (f if jitted else None)
    return make


def _loopn(f, args):
    """_loop1 for len(args) arguments, each passed by name (f(*args) would be a call that
    CPython does not inline, plain or jitted)."""
    names = [f"a{i}" for i in range(len(args))]
    ns = dict(zip(names, args), f=f)
    exec(f"def run(n):\n    for _ in range(n):\n        f({', '.join(names)})\n", ns)
    return ns["run"]


def _lotka():
    from benchmarks.programs.rk4_numpy import lotka
    return lotka


def _make_init(jitted):
    """Point(1.5) of a class whose __init__ is jitted: 3.13 keeps the Wrapper for a
    function named __init__ (compat's VECTORCALL_SKIPPED_BY), which its specializer
    cannot call by CALL_ALLOC_AND_ENTER_INIT as it calls the plain one."""
    ns = {}
    exec("def __init__(self, x):\n    self.x = x\n", ns)
    init = ns["__init__"]
    if jitted:
        init = _jit(init, compile_after_ms=10 ** 6, inline_plain=False)
    return _loopn(type("Point", (), {"__init__": init}), (1.5,)), (init if jitted else None)


def _make_init_given_back(jitted):
    """Point(1.5) of a class whose jitted __init__'s code is left to plain Python (as pijit
    leaves a code it finds nothing to gain in), given back by its first construction: from
    3.12 its class calls the plain function (3.13: a copy, in the Wrapper's place in the
    class's __dict__, so that a construction site first run after it specializes as
    CALL_ALLOC_AND_ENTER_INIT, as the plain one; a site specialized before stays generic);
    3.11: the prefixed function's code is the user's again."""
    from pijit import eval_frame
    ns = {}
    exec("def __init__(self, x):\n    self.x = x\n", ns)
    init = ns.pop("__init__")
    if jitted:
        init = _jit(init)
        eval_frame.set_state(eval_frame.original_code(init.__code__), eval_frame.NEVER_COMPILE)
    cls = type("Point", (), {"__init__": init})
    cls(1.5)
    return _loopn(cls, (1.5,)), (init if jitted else None)


def _make_held(jitted):
    """add1(7) of g = jit(f) while f is kept (its code left to plain Python): given back
    (3.11: behind its prefix, which checks that f is unchanged, as 3.11 has no function
    watcher to see f change)."""
    from pijit import eval_frame
    f = _copy(_add1)
    g = _jit(f) if jitted else f
    if jitted:
        eval_frame.set_state(eval_frame.original_code(g.__code__), eval_frame.NEVER_COMPILE)
    g(7)
    run = _loop1(g, 7)
    run.held = f
    return run, (g if jitted else None)


def _make_frozen(jitted):
    f = _copy(_add1)
    if jitted:
        f = _jit(f, adaptive=False, limit_graph_count=1)
        f(np.ones(3))       # the one entry (array work)
        f(7)                # another signature past the limit: frozen
    return _loop1(f, 7), (f if jitted else None)


def _make_compiled(fn, shape):
    """make(jitted) for calls of fn on ones(shape) whose jitted side runs a compiled entry."""
    def make(jitted):
        a = np.ones(shape)
        f = _jit(_copy(fn), adaptive=False) if jitted else _copy(fn)
        return _loop1(f, a), (f if jitted else None)
    return make


def _alloc_rows(a):
    out = np.zeros_like(a)
    for i in range(a.shape[0]):
        out[i, 0] = a[i, 0] * 2.0
    return out


def _make_fib(jitted):
    fib = _fib_namespace(jitted)

    def run(n):
        for _ in range(n):
            fib(FIB_N)
    return run, (fib if jitted else None)


def _make_math(jitted):
    ns = _math_namespace(jitted)
    drive = ns["drive"]

    def run(n):
        drive(n)
    return run, (ns["hyp"] if jitted else None)


def _warm_until_bypassed(limit_s=120.0):
    """Warm a default-config case until its wrapper's calls are bypassed (hot, captured,
    found plain) or given back to CPython (3.12+): compile_after_ms counts CPU time, which a
    loaded machine (or valgrind) hands out slowly, so a fixed warm-up time would measure
    another path on another day. Gives up after `limit_s` (the path column then says what
    ran)."""
    def warm(run, wrapper):
        end = time.perf_counter() + limit_s
        while wrapper is not None and time.perf_counter() < end:
            before = _counters(wrapper)["bypassed"]
            run(50)
            if _counters(wrapper)["bypassed"] > before or _counters(wrapper)["inlined"]:
                break
    return warm


CASES = [
    Case("plain_decided", "add1(7): its entry found nothing to gain (compile_after_ms=0)",
         _make_simple({"compile_after_ms": 0})),
    Case("not_hot", "add1(7): signature not hot yet (compile_after_ms=10**6; inline_plain=False: "
         "else 3.12+ gives it back after 1000 calls when they ran under 2 us, which under "
         "callgrind they may not)",
         _make_simple({"compile_after_ms": 10 ** 6, "inline_plain": False})),
    Case("not_hot_array", "a + 1.0 of 4 float64s: signature not hot yet "
         "(compile_after_ms=10**6)", _make_not_hot_array),
    Case("not_hot_mixed", "a * x + b of two 2-element float64 arrays and a float: signature "
         "not hot yet (compile_after_ms=10**6)",
         _make_not_hot(_axpy, np.ones(2), np.ones(2), 0.5)),
    Case("not_hot_defaults", "add(7) of a function with four defaults: signature not hot yet "
         "(compile_after_ms=10**6)", _make_not_hot(_add_defaults, 7)),
    Case("lotka", "rk4_numpy.lotka(0.5, y) of a 2-element y (np.array of two expressions, four "
         "defaults): signature not hot yet (compile_after_ms=10**6)",
         _make_not_hot(_lotka(), 0.5, np.array([10.0, 5.0]))),
    Case("init_not_hot", "Point(1.5), its __init__ (self.x = x) not hot yet "
         "(compile_after_ms=10**6, inline_plain=False)", _make_init),
    Case("init_given_back", "Point(1.5), its __init__'s code left to plain Python, given "
         "back to its class before the loop first runs", _make_init_given_back),
    Case("held_given_back", "add1(7) of g = jit(f) while f is kept, f's code left to plain "
         "Python", _make_held),
    Case("frozen", "add1(7): frozen past limit_graph_count=1 (one array entry)", _make_frozen),
    Case("graph", "a + 1.0 of 4 float64s: a compiled entry (adaptive=False, O1)",
         _make_compiled(_shift, 4)),
    Case("alloc_nest", "out = np.zeros_like(a) of 6x6 float64s filled by a loop nest (a compiled "
         "entry: globals guarded, the output allocated, the nest called)",
         _make_compiled(_alloc_rows, (6, 6))),
    Case("fib", f"fib({FIB_N}), recursive through its global name (default config)", _make_fib,
         warm=_warm_until_bypassed(), per=None),
    Case("math_helper", "hyp(i, 0.5) = math.sqrt(x*x + y*y), called by a jitted loop "
         "(default config)", _make_math, warm=_warm_until_bypassed()),
]
BY_NAME = {c.name: c for c in CASES}


def fib_calls(n=FIB_N):
    a, b = 1, 1         # calls of fib(0), fib(1)
    for _ in range(n - 1):
        a, b = b, a + b + 1
    return b


def _per(case):
    return fib_calls() if case.per is None else case.per


def _counters(wrapper):
    if wrapper is None:
        return None
    from pijit import eval_frame
    return eval_frame.counters(wrapper.fn.__code__)


def _path(before, after, calls):
    """How the measured jitted calls ran, from the hook's counters."""
    if before is None:
        return ""
    d = {k: after[k] - before[k] for k in after if k != "state"}
    from pijit import eval_frame
    state = {eval_frame.NEVER_COMPILE: "never_compile", eval_frame.CANDIDATE: "candidate",
             eval_frame.CALLABLE: "callable", eval_frame.FROZEN: "frozen"}.get(after["state"])
    parts = [f"{k} {v}" for k, v in d.items() if v]
    if after["inlined"]:
        state += ", given back to CPython"
    return f"{state}: " + ", ".join(parts) + f" / {calls} calls"


def prepare(case, jitted):
    """A case's side, warmed past the calls after which a function pijit has nothing to do
    for is given back to CPython (3.12+: 1000 in a row)."""
    run, wrapper = case.make(jitted)
    if case.warm is not None:
        case.warm(run, wrapper)
    run(max(20, math.ceil(1100 / _per(case))))
    return run, wrapper


# ---- callgrind ---------------------------------------------------------------------------------

CG_SOURCE = """
#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void cg_dump(void) { CALLGRIND_DUMP_STATS; }
void cg_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
"""


def build_cg(where):
    """The client-request module, built in `where` (a directory added to sys.path)."""
    from cffi import FFI
    ffi = FFI()
    ffi.cdef("void cg_start(void); void cg_dump(void); void cg_stop(void);")
    ffi.set_source("_pijit_cg", CG_SOURCE)
    ffi.compile(tmpdir=where, verbose=False)


def _measured_runs(case, calls):
    """Runs of a case's loop under callgrind: fib's one run makes thousands of calls."""
    return max(1, calls // 500) if case.per is None else calls


def child(names, calls, cg_dir):
    """Under callgrind: prepare every case (both sides) uninstrumented, then instrument only
    each loop, a dump after each (plain, jit, plain, jit...)."""
    # Valgrind runs no AVX-512: kernels for AVX2 machines, in a cache of this run's own.
    from pijit.backends.cfused import toolchain
    toolchain.CFLAGS = tuple("-march=x86-64-v3" if f == "-march=native" else f
                             for f in toolchain.CFLAGS)
    sys.path.insert(0, cg_dir)
    from _pijit_cg import lib
    cases = [BY_NAME[n] for n in names]
    prepared = [(prepare(c, False), prepare(c, True)) for c in cases]
    paths = []
    lib.cg_start()
    for case, ((plain, _), (jit, wrapper)) in zip(cases, prepared):
        n = _measured_runs(case, calls)
        plain(n)
        lib.cg_dump()
        before = _counters(wrapper)
        jit(n)
        lib.cg_dump()
        paths.append(_path(before, _counters(wrapper), n * _per(case)))
    lib.cg_stop()
    print(json.dumps(paths))


def callgrind(names, calls, cg_dir, python=sys.executable):
    """{case: (Ir per plain call, Ir per jitted call, how the jitted calls ran)}."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-instr=no",
               f"--callgrind-out-file={out}", python, "-m", "benchmarks.call_floor",
               "--child", ",".join(names), "--calls", str(calls), "--cg-dir", cg_dir]
        env = dict(os.environ, PYTHONHASHSEED="0", PIJIT_CACHE_DIR=os.path.join(cg_dir, "k"))
        p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                           cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        if p.returncode != 0:
            raise RuntimeError(f"callgrind run failed:\n{p.stderr[-3000:]}")
        paths = json.loads(p.stdout.strip().splitlines()[-1])
        dumps = sorted((f for f in os.listdir(tmp) if f.startswith("cg.out.")),
                       key=lambda f: int(f.rsplit(".", 1)[1]))
        totals = []
        for name in dumps:
            with open(os.path.join(tmp, name)) as f:
                totals.append(next(int(line.split()[1]) for line in f
                                   if line.startswith(("summary:", "totals:"))))
    out = {}
    for i, name in enumerate(names):
        case = BY_NAME[name]
        per = _measured_runs(case, calls) * _per(case)
        out[name] = (totals[2 * i] / per, totals[2 * i + 1] / per, paths[i])
    return out


# ---- time -------------------------------------------------------------------------------------

def ns_per_call(case, rounds=15, budget=0.01):
    """Median ns per call of each side, samples interleaved (plain, jit, plain, jit...)."""
    sides = [prepare(case, False)[0], prepare(case, True)[0]]
    n = 1
    while True:
        t = time.perf_counter()
        sides[0](n)
        if time.perf_counter() - t > budget:
            break
        n *= 2
    samples = [[], []]
    for _ in range(rounds):
        for i, run in enumerate(sides):
            t = time.perf_counter()
            run(n)
            samples[i].append((time.perf_counter() - t) / (n * _per(case)) * 1e9)
            time.sleep(0.001)
    return [statistics.median(s) for s in samples]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.call_floor", description=__doc__)
    p.add_argument("--only", metavar="CASE,...", help="these cases: " + ", ".join(BY_NAME))
    p.add_argument("--calls", type=int, default=CALLS, help="measured calls under callgrind")
    p.add_argument("--no-callgrind", action="store_true", help="time only")
    p.add_argument("--no-time", action="store_true", help="callgrind only")
    p.add_argument("--json", metavar="OUT.json")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--cg-dir", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args.child.split(","), args.calls, args.cg_dir)
    cases = [BY_NAME[n] for n in args.only.split(",")] if args.only else CASES
    use_cg = not args.no_callgrind and shutil.which("valgrind")
    cg_dir = tempfile.mkdtemp(prefix="pijit_cg_") if use_cg else None
    if use_cg:
        build_cg(cg_dir)
    print(f"Python {sys.version.split()[0]}, NumPy {np.__version__}; instructions per call "
          f"(callgrind, {args.calls} calls{'' if use_cg else ': not run'}) and ns "
          "per call (median)")
    print(f"{'case':<14}{'Ir plain':>10}{'Ir jit':>10}{'jit/plain':>10}{'added':>8}"
          f"{'ns plain':>10}{'ns jit':>9}{'jit/plain':>10}  jitted calls")
    counted = callgrind([c.name for c in cases], args.calls, cg_dir) if use_cg else {}
    rows = []
    for case in cases:
        row = {"case": case.name, "doc": case.doc}
        if use_cg:
            row["ir_plain"], row["ir_jit"], row["path"] = counted[case.name]
        if not args.no_time:
            row["ns_plain"], row["ns_jit"] = ns_per_call(case)
        rows.append(row)
        ir = (f"{row['ir_plain']:>10.0f}{row['ir_jit']:>10.0f}"
              f"{row['ir_jit'] / row['ir_plain']:>9.2f}x{row['ir_jit'] - row['ir_plain']:>8.0f}"
              if use_cg else f"{'':>38}")
        ns = (f"{row['ns_plain']:>10.0f}{row['ns_jit']:>9.0f}"
              f"{row['ns_jit'] / row['ns_plain']:>9.2f}x" if "ns_plain" in row else f"{'':>29}")
        print(f"{case.name:<14}{ir}{ns}  {row.get('path', '')}", flush=True)
    if cg_dir:
        shutil.rmtree(cg_dir, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"python": sys.version.split()[0], "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
