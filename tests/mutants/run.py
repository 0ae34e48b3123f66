"""make mutants: the planted faults of tests/mutants/*.toml, each applied to a scratch copy of
the tree (never in place), with the tests that must catch it run there (README.md here says
how to write one).

Each mutant is a search/replace of one small snippet of one file (so it survives unrelated
edits of that file): `breaks` says in one line what it breaks, `tests` are the pytest
arguments that must fail with it, and `python` (optional) lists the CPython versions ("3.12")
whose code path it breaks; on the others it is N/A. A snippet that no longer occurs exactly
once is STALE: the run fails, so the mutant gets refreshed. A mutant of csrc/ rebuilds the C
extension in the scratch copy (UNBUILT, a failure, when the mutated C does not compile: a
mutant must break behaviour, not the build). First every distinct set of tests runs on the
unmutated copy and must pass (a "kill" by a test that fails anyway proves nothing). A mutant
counts as killed only when an assertion of a test fails (UNCLEAR: a crash, a timeout or
another exception stopped the tests). The report gives, per mutant, killed / survived /
unclear / unbuilt / stale / n/a, the test that failed first and the seconds it took; the run
fails unless every mutant that applies to this Python is killed.

    python tests/mutants/run.py [NAME ...] [--list] [--no-baseline]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
# Not copied: version control, build trees, caches.
SKIP = {".git", "build", "__pycache__", ".pytest_cache", ".hypothesis", "dist"}
TIMEOUT = 600


REQUIRED = {"breaks", "file", "search", "replace", "tests"}
OPTIONAL = {"python"}
VERSION = "%d.%d" % sys.version_info[:2]


def load() -> list:
    """Every mutant of tests/mutants/*.toml, checked for its keys (a typo in an optional key
    would otherwise silently widen the mutant to every version)."""
    mutants = []
    for path in sorted(HERE.glob("*.toml")):
        spec = tomllib.loads(path.read_text())
        missing, unknown = REQUIRED - set(spec), set(spec) - REQUIRED - OPTIONAL
        if missing or unknown:
            raise SystemExit(f"{path.name}: missing keys {sorted(missing)}, "
                             f"unknown keys {sorted(unknown)}")
        if not (isinstance(spec["tests"], list) and spec["tests"]
                and all(isinstance(t, str) for t in spec["tests"])):
            raise SystemExit(f"{path.name}: tests must be a non-empty list of pytest arguments")
        versions = spec.get("python", [])
        if not (isinstance(versions, list)
                and all(isinstance(v, str) and re.fullmatch(r"3\.\d+", v) for v in versions)):
            raise SystemExit(f'{path.name}: python must be a list of versions like "3.12"')
        mutants.append({"name": path.stem, **spec})
    return mutants


def applies_here(mutant) -> bool:
    """Whether the mutant's code path runs on this Python (no `python` key: on every one)."""
    return not mutant.get("python") or VERSION in mutant["python"]


def stale(mutant) -> str:
    """Why the mutant no longer applies to the tree ('' when it does)."""
    path = ROOT / mutant["file"]
    if not path.exists():
        return f"{mutant['file']} does not exist"
    count = path.read_text().count(mutant["search"])
    return "" if count == 1 else f"its snippet occurs {count} times in {mutant['file']}"


def copy_tree(dest: pathlib.Path):
    def ignore(_, names):
        return [n for n in names if n in SKIP or n.endswith(".egg-info")]
    shutil.copytree(ROOT, dest, ignore=ignore, symlinks=True)


def build_c(tree: pathlib.Path) -> str:
    """Rebuild pijit's C extension in `tree` ('' or the build's error output)."""
    proc = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace",
                           "--force"], cwd=tree, capture_output=True, text=True,
                          timeout=TIMEOUT)
    return "" if proc.returncode == 0 else proc.stdout[-2000:] + proc.stderr[-2000:]


def run_tests(tree: pathlib.Path, tests: list, cache: str):
    """(return code, first failing test or what stopped them, output tail) of the tests;
    a failure that is not an assertion (a crash, a timeout, another exception) says so."""
    env = dict(os.environ, PYTHONPATH=str(tree), PIJIT_TEST_KERNEL_CACHE=cache,
               PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
           "-p", "no:randomly", *tests]
    try:
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {TIMEOUT} s", ""
    out = proc.stdout + proc.stderr
    failed = re.search(r"^(?:FAILED|ERROR) (\S+)", out, re.M)
    crashed = re.search(r"Fatal Python error: (.*)", out)
    first = failed.group(1) if failed else crashed.group(0) if crashed else ""
    if proc.returncode and not re.search(r"^E\s+(AssertionError|assert\b)", out, re.M):
        first = f"NOT BY AN ASSERTION: {first or out[-300:]}"
    return proc.returncode, first, out[-3000:]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip running the tests on the unmutated copy first")
    args = parser.parse_args(argv)
    mutants = load()
    if args.names:
        unknown = set(args.names) - {m["name"] for m in mutants}
        if unknown:
            raise SystemExit(f"unknown mutants: {sorted(unknown)}")
        mutants = [m for m in mutants if m["name"] in args.names]
    if args.list:
        for m in mutants:
            print(f"{m['name']:38} {m['file']}: {m['breaks']}")
        return 0
    if any(m["file"].startswith("csrc/") for m in mutants) \
            and importlib.util.find_spec("setuptools") is None:
        raise SystemExit("the mutants of csrc/ rebuild the C extension, which needs setuptools "
                         "in this Python: pip install -e '.[test]'")
    start = time.monotonic()
    rows, bad = [], 0
    with tempfile.TemporaryDirectory(prefix="pijit-mutants-") as tmp:
        tree = pathlib.Path(tmp) / "tree"
        copy_tree(tree)
        cache = str(pathlib.Path(tmp) / "kernels")       # shared: kernels keyed by source
        if not args.no_baseline:
            for tests in dict.fromkeys(tuple(m["tests"]) for m in mutants
                                       if not stale(m) and applies_here(m)):
                t0 = time.monotonic()
                rc, first, tail = run_tests(tree, list(tests), cache)
                print(f"{'(unmutated)':38} {'passes' if rc == 0 else 'FAILS':8} "
                      f"{time.monotonic() - t0:6.1f} s  {' '.join(tests)}", flush=True)
                if rc != 0:
                    print(tail)
                    print(f"the tests fail without a mutant ({first}): fix them first")
                    return 1
        for m in mutants:
            t0 = time.monotonic()
            why = stale(m)
            if why:
                rows.append((m, "STALE", why, 0.0))
                bad += 1
                continue
            if not applies_here(m):
                rows.append((m, "N/A", f"breaks Python {', '.join(m['python'])} only", 0.0))
                print(f"{m['name']:38} {'N/A':8} {0.0:6.1f} s  {rows[-1][2]}", flush=True)
                continue
            path = tree / m["file"]
            original = path.read_text()
            c_ext = m["file"].startswith("csrc/")
            saved = {p: p.read_bytes() for p in (tree / "pijit").glob("_C*.so")} if c_ext \
                else {}
            try:
                path.write_text(original.replace(m["search"], m["replace"], 1))
                error = build_c(tree) if c_ext else ""
                if error:
                    rc, first = 1, "the mutated C does not build: " \
                        + error.strip().splitlines()[-1]
                else:
                    rc, first, _ = run_tests(tree, m["tests"], cache)
            finally:
                path.write_text(original)
                for p, data in saved.items():
                    p.write_bytes(data)
            status = ("UNBUILT" if error else "SURVIVED" if rc == 0
                      else "UNCLEAR" if first.startswith("NOT BY") else "killed")
            bad += status != "killed"
            rows.append((m, status, first, time.monotonic() - t0))
            print(f"{m['name']:38} {status:8} {time.monotonic() - t0:6.1f} s  {first}",
                  flush=True)
    total = time.monotonic() - start
    killed = sum(r[1] == "killed" for r in rows)
    print(f"\n{len(rows)} mutants on Python {VERSION}: {killed} killed, "
          f"{sum(r[1] == 'SURVIVED' for r in rows)} survived, "
          f"{sum(r[1] == 'UNCLEAR' for r in rows)} killed by no assertion, "
          f"{sum(r[1] == 'UNBUILT' for r in rows)} unbuilt, "
          f"{sum(r[1] == 'STALE' for r in rows)} stale, "
          f"{sum(r[1] == 'N/A' for r in rows)} n/a, in {total:.0f} s")
    for m, status, first, _ in rows:
        if status not in ("killed", "N/A"):
            print(f"  {status}: {m['name']} ({m['file']}): {m['breaks']}"
                  + (f"\n    {first}" if first else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
