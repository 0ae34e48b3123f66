"""Library mode: every public function of numpy.polynomial's polynomial, chebyshev and
legendre modules and of statistics (and NormalDist's methods) wrapped in pijit.jit, then
their own test files (numpy/polynomial/tests, the stdlib's test_statistics) run by pytest,
plain and jitted, each in a fresh process -> same outcomes?, and the time ratio with a cold
kernel cache (a fresh PIJIT_CACHE_DIR) and a warm one (the same directory again).

`python -m benchmarks --library` runs it; `python -m benchmarks.library --child MODE SUITE`
is one process (MODE plain or jit), which prints its outcomes and time as JSON.
"""
from __future__ import annotations

import importlib
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time

SUITES = {
    "polynomial": (("numpy.polynomial.polynomial", "numpy.polynomial.chebyshev",
                    "numpy.polynomial.legendre"),
                   ("test_polynomial.py", "test_chebyshev.py", "test_legendre.py")),
    "statistics": (("statistics",), ("test_statistics.py",)),
}


def test_files(suite):
    _, files = SUITES[suite]
    if suite == "polynomial":
        import numpy.polynomial
        base = os.path.join(os.path.dirname(numpy.polynomial.__file__), "tests")
    else:
        import sysconfig
        base = os.path.join(sysconfig.get_paths()["stdlib"], "test")
    return [os.path.join(base, f) for f in files if os.path.exists(os.path.join(base, f))]


def jit_modules(names):
    """Replace every public function of each module (and the methods of its public classes)
    by its pijit.jit wrapper, in the module's namespace: callers that look it up there (the
    module's own functions, the tests) get the jitted one. -> how many were wrapped."""
    import pijit
    count = 0
    for name in names:
        module = importlib.import_module(name)
        for attr, obj in list(vars(module).items()):
            if attr.startswith("_"):
                continue
            if inspect.isfunction(obj) and obj.__module__ == name:
                setattr(module, attr, pijit.jit(obj))
                count += 1
            elif inspect.isclass(obj) and obj.__module__ == name:
                for m, member in list(vars(obj).items()):
                    if inspect.isfunction(member) and not m.startswith("__"):
                        setattr(obj, m, pijit.jit(member))
                        count += 1
    return count


class _Outcomes:
    """A pytest plugin recording each test's outcome."""

    def __init__(self):
        self.outcomes = {}

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            self.outcomes.setdefault(report.nodeid, report.outcome)


def child(mode, suite):
    import pytest
    modules, _ = SUITES[suite]
    wrapped = jit_modules(modules) if mode == "jit" else 0
    files = test_files(suite)
    _seed(modules)
    plugin = _Outcomes()
    t0, cpu0, kids0 = time.perf_counter(), time.process_time(), _children_cpu()
    pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--no-header",
                 "-o", "addopts=", *files], plugins=[plugin])
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - cpu0 + _children_cpu() - kids0
    entries = 0
    if mode == "jit":
        from pijit import cache
        entries = sum(cache.record(c).compile_count for c in cache.all_codes()
                      if cache.record(c))
    print("@@RESULT@@" + json.dumps({"mode": mode, "suite": suite, "seconds": seconds,
                                     "cpu_seconds": cpu,
                                     "wrapped": wrapped, "entries": entries,
                                     "outcomes": plugin.outcomes}))


def _seed(modules):
    """Seed the random generators the suites' tests draw from without a seed of their own
    (test_statistics' test_compare_to_variance fails for about 18% of its random data,
    plain or jitted): each run then draws the same data, and an outcome that differs is
    pijit's doing. NumPy's only where the suite imports it anyway."""
    import random
    random.seed(0)
    if any(m.split(".")[0] == "numpy" for m in modules):
        import numpy
        numpy.random.seed(0)


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (the C compiler's processes)."""
    import resource
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run_child(mode, suite, cache_dir):
    env = dict(os.environ, PIJIT_CACHE_DIR=cache_dir)
    env.pop("PIJIT_ADAPTIVE", None)                 # default options, as a user has them
    proc = subprocess.run([sys.executable, "-m", "benchmarks.library", "--child", mode, suite],
                          capture_output=True, text=True, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("@@RESULT@@"):
            return json.loads(line[len("@@RESULT@@"):])
    raise RuntimeError(f"{suite} {mode} run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def run(suites=None, rounds=1):
    """Plain, jitted cold (fresh kernel cache), jitted warm, plain again per round."""
    rows = []
    for suite in suites or SUITES:
        with tempfile.TemporaryDirectory(prefix="pijit-library-") as cache_dir:
            plain, cold, warm = [], [], []
            for _ in range(rounds):
                plain.append(_run_child("plain", suite, cache_dir))
                cold_dir = tempfile.mkdtemp(dir=cache_dir)
                cold.append(_run_child("jit", suite, cold_dir))
                warm.append(_run_child("jit", suite, cold_dir))
                plain.append(_run_child("plain", suite, cache_dir))
        ref = plain[0]["outcomes"]
        differ = sorted({k for r in plain + cold + warm for k in set(ref) | set(r["outcomes"])
                         if r["outcomes"].get(k) != ref.get(k)})
        runs = (("plain", plain), ("cold", cold), ("warm", warm))
        best = {k: min(r["seconds"] for r in v) for k, v in runs}
        cpu = {k: min(r["cpu_seconds"] for r in v) for k, v in runs}
        rows.append({"suite": suite, "tests": len(ref), "wrapped": cold[0]["wrapped"],
                     "entries": warm[0]["entries"], "plain_s": best["plain"],
                     "cold_s": best["cold"], "warm_s": best["warm"],
                     "warm_ratio": best["warm"] / best["plain"],
                     "cold_ratio": best["cold"] / best["plain"],
                     "plain_cpu_s": cpu["plain"], "cold_cpu_s": cpu["cold"],
                     "warm_cpu_s": cpu["warm"], "warm_cpu_ratio": cpu["warm"] / cpu["plain"],
                     "cold_cpu_ratio": cpu["cold"] / cpu["plain"], "differ": differ})
    return rows


def table(rows) -> str:
    lines = [f"{'suite':<12}{'tests':>7}{'jitted fns':>11}{'entries':>9}{'plain s':>9}"
             f"{'warm s':>9}{'cold s':>9}{'warm/plain':>12}{'cold/plain':>12}"
             f"{'cpu warm/plain':>16}{'cpu cold/plain':>16}  outcomes"]
    for r in rows:
        lines.append(f"{r['suite']:<12}{r['tests']:>7}{r['wrapped']:>11}{r['entries']:>9}"
                     f"{r['plain_s']:>9.2f}{r['warm_s']:>9.2f}{r['cold_s']:>9.2f}"
                     f"{r['warm_ratio']:>11.2f}x{r['cold_ratio']:>11.2f}x"
                     f"{r['warm_cpu_ratio']:>15.2f}x{r['cold_cpu_ratio']:>15.2f}x  "
                     + ("same" if not r["differ"] else f"DIFFER: {r['differ'][:5]}"))
    lines.append("time = pytest's run of the suite's files in a fresh process (fastest of the "
                 "rounds); cold: empty kernel cache, warm: the cold run's cache again; cpu: "
                 "the same runs' CPU seconds, the C compiler's processes included (steadier "
                 "than wall time on a loaded machine)")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        print(table(run(sys.argv[1:] or None)))
