"""`python -m benchmarks`: run the quick suite and print a table (see benchmarks/README.md).

Thread counts for BLAS/OpenMP must be in the environment before NumPy is imported, so this
module parses the command line and sets them first, and imports NumPy only afterwards.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from benchmarks import peers     # no NumPy import: safe before the thread variables are set

THREAD_VARS = ("PIJIT_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
               "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS", "NUMBA_NUM_THREADS")
BACKENDS = ("numpy", "pijit", "pijit_O2", "numexpr", "numba", "torch", "jax")


def parser():
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Time pijit against plain NumPy (and installed peers) on a suite of NumPy "
                    "workloads; every result is checked against plain NumPy.")
    p.add_argument("--suite", choices=("quick", "full"), default="quick",
                   help="quick (default, about a minute) or full (the issue's big sizes)")
    p.add_argument("--only", metavar="NAME,...", help="run only these workloads")
    p.add_argument("--sizes", nargs="?", const="", metavar="N,...",
                   help="instead of the suite, a size sweep: chain, row_softmax and "
                        "sum_squares (float64; --only picks among them) at each of these "
                        "element counts (default 1e2,1e3,...,1e7); --plot draws speedup "
                        "against size")
    p.add_argument("--backends", metavar="B,...", default=",".join(BACKENDS),
                   help="variants to run, from: %(default)s (numpy, the baseline, always runs; "
                        "peers that are not installed are reported as such)")
    p.add_argument("--repeat", type=int, metavar="N",
                   help="exactly N timed samples per variant (default: at least 5, more while "
                        "the per-workload time budget lasts)")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="threads for BLAS/OpenMP/pijit (sets %s before NumPy is imported; "
                        "default 1)" % ", ".join(THREAD_VARS[:3]))
    p.add_argument("--peer-limit", type=float, default=peers.FIRST_CALL_LIMIT_S,
                   metavar="S",
                   help="stop a peer's first call (its compile) after S seconds and report "
                        "it as timed out (default %(default)g; torch.compile unrolls Python "
                        "loops over elements trip by trip)")
    p.add_argument("--unset-openblas-env", action="store_true",
                   help="remove OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for this run")
    p.add_argument("--json", metavar="OUT.json", help="write every measured field as JSON")
    p.add_argument("--markdown", metavar="OUT.md", help="write the table as markdown")
    p.add_argument("--plot", metavar="OUT.png", help="bar chart of speedups (needs matplotlib)")
    p.add_argument("--tiny", action="store_true",
                   help="tiny inputs and short budgets (for tests: checks run, timings mean "
                        "little)")
    p.add_argument("--no-bandwidth", action="store_true", help="skip the bandwidth probe")
    p.add_argument("--no-pin-allocator", action="store_true",
                   help="leave glibc malloc's mmap/trim thresholds dynamic (by default they "
                        "are pinned, so a workload's time does not depend on what ran before "
                        "it; see benchmarks/allocator.py)")
    p.add_argument("--programs", nargs="?", const="", metavar="NAME,...",
                   help="instead of the suite, the real-code corpus (benchmarks/programs: "
                        "every function of each program jitted, run plain and jitted "
                        "interleaved): speed per program, geometric mean, the slowest with "
                        "what pijit did; optionally only these programs")
    p.add_argument("--rounds", type=int, default=5, metavar="N",
                   help="--programs: runs of each program's main per variant (default 5; "
                        "the first, with capture and compiles, counts)")
    p.add_argument("--cpu-clock", action="store_true",
                   help="--programs: time each run by the process's CPU seconds (its waited-for "
                        "children's included) instead of wall time, on a machine other "
                        "processes load")
    p.add_argument("--library", nargs="?", const="", metavar="SUITE,...",
                   help="instead of the suite, library mode: every public function of "
                        "numpy.polynomial's polynomial/chebyshev/legendre and of statistics "
                        "jitted, their own test files run plain and jitted (cold and warm "
                        "kernel cache) in fresh processes: outcomes and time ratios")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _set_thread_env(args):
    if args.threads < 1:
        raise SystemExit("--threads must be >= 1")
    for var in THREAD_VARS:
        os.environ[var] = str(args.threads)
    if args.unset_openblas_env:
        os.environ.pop("OPENBLAS_CORETYPE", None)
        os.environ.pop("OPENBLAS_L2_SIZE", None)
    if "numpy" in sys.modules:      # called in-process after NumPy was loaded: say so
        print("note: NumPy was already imported; --threads may not reach its BLAS",
              file=sys.stderr)


def _progress():
    if not sys.stderr.isatty():
        def lines(items):
            items = list(items)
            for i, w in enumerate(items, 1):
                name = getattr(w, "name", w)            # a workload, or a program's name
                print(f"[{i}/{len(items)}] {name}", file=sys.stderr, flush=True)
                yield w
        return lines
    try:
        from tqdm import tqdm
    except ImportError:
        def bar(items):
            items = list(items)
            for i, w in enumerate(items, 1):
                name = getattr(w, "name", w)
                print(f"\r[{i}/{len(items)}] {name:<24}", end="", file=sys.stderr, flush=True)
                yield w
            print(file=sys.stderr)
        return bar
    return lambda items: tqdm(items, desc="benchmarks", unit="workload", file=sys.stderr)


def main(argv=None):
    args = parser().parse_args(argv)
    _set_thread_env(args)
    if args.programs is not None:
        return _programs(args)
    if args.library is not None:
        from benchmarks import library
        rows = library.run([s for s in args.library.split(",") if s] or None)
        print(library.table(rows))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
        return 1 if any(r["differ"] for r in rows) else 0
    from benchmarks import report, runner, sweep, workloads    # NumPy: after the env
    sizes = None if args.sizes is None else sweep.parse_sizes(args.sizes)
    chosen = workloads.select(args.only) if sizes is None else sweep.workloads(sizes, args.only)
    if args.list:
        for w in chosen:
            print(f"{w.name:20s} {w.description}")
        return 0
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        raise SystemExit(f"unknown backend(s) {unknown}; choose from {', '.join(BACKENDS)}")
    if args.plot:                                          # fail before the run, not after
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise SystemExit("--plot needs matplotlib (pip install matplotlib)") from None
    results = runner.run_suite(chosen, suite=args.suite, tiny=args.tiny, backends=backends,
                               repeat=args.repeat, threads=args.threads,
                               bandwidth=not args.no_bandwidth,
                               pin_allocator=not args.no_pin_allocator,
                               peer_limit_s=args.peer_limit,
                               progress=None if args.no_progress else _progress())
    results["config"]["sizes"] = sizes
    print(report.table(results))
    if args.json:
        report.write_json(results, args.json)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(report.markdown(results))
    if args.plot:
        report.plot(results, args.plot)
    failed = any(r["status"] in ("mismatch", "error")
                 for w in results["workloads"] for n, r in w["variants"].items()
                 if n in runner.OWN)
    return 1 if failed else 0


def _programs(args):
    from benchmarks import corpus, programs
    names = [n for n in args.programs.split(",") if n] or None
    if args.list:
        print("\n".join(programs.NAMES))
        return 0
    results = corpus.run_all(names, size="tiny" if args.tiny else "quick", rounds=args.rounds,
                             progress=None if args.no_progress else _progress(),
                             clock="cpu" if args.cpu_clock else "wall")
    print(corpus.table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if any(r["mismatches"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
