"""The benchmark runner: the quick suite on tiny sizes runs, checks and reports everything.

Speed is never asserted here (DESIGN.md section 7); only that every measurement ran, every
correctness check ran and passed for pijit and plain NumPy, and that the JSON is complete.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import workloads  # noqa: E402
from benchmarks.check import compare  # noqa: E402
from benchmarks.runner import measure_workload  # noqa: E402

TOP_FIELDS = {"schema_version", "config", "env", "peers", "bandwidth", "workloads",
              "wall_time_s"}
ENV_FIELDS = {"python", "platform", "numpy", "cpu_model", "cpu_count", "threads",
              "pijit_commit", "pijit_jit_level", "loadavg_start", "loadavg_end", "thread_env",
              "openblas_env", "blas", "allocator"}
WORKLOAD_FIELDS = {"name", "description", "size", "memory_bound", "bytes_moved", "floor_s",
                   "variants"}
VARIANT_FIELDS = {"status", "error", "check", "first_call_s", "steady", "calls_per_sample",
                  "cores", "speedup", "speedup_q1", "speedup_q3", "peak_memory_bytes",
                  "inputs_unchanged"}
PIJIT_FIELDS = VARIANT_FIELDS | {"first_call_cold_s", "first_call_warm_disk_s", "disk_cache",
                                 "disk_cache_note", "graph_count", "graph_break_count",
                                 "op_count", "ops_per_graph", "break_reasons", "fallback",
                                 "compile_count", "cache_misses", "recompiles", "unsettled"}
STEADY_FIELDS = {"median_s", "q1_s", "q3_s", "min_s", "max_s", "samples"}
CHECK_FIELDS = {"ok", "exact", "max_abs_err", "max_rel_err", "reason"}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    cmd = [sys.executable, "-m", "benchmarks", "--suite", "quick", "--tiny", "--repeat", "1",
           "--no-progress", "--json", str(out / "r.json"), "--markdown", str(out / "r.md")]
    # A limit against a hang, not a speed check: the run takes ~40 s on an idle 2-core
    # machine, several times that on a loaded one, and more under make asan (the runner
    # inherits LD_PRELOAD).
    timeout = 1800 if "libasan" in os.environ.get("LD_PRELOAD", "") else 600
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, json.loads((out / "r.json").read_text()), (out / "r.md").read_text()


def test_every_workload_checked_and_passed(tiny_run):
    _, res, _ = tiny_run
    names = [w["name"] for w in res["workloads"]]
    assert names == [w.name for w in workloads.WORKLOADS]
    for w in res["workloads"]:
        for backend in ("numpy", "pijit"):
            rec = w["variants"][backend]
            assert rec["status"] == "ok", (w["name"], backend, rec["error"])
            assert rec["check"]["ok"] is True, (w["name"], backend)
            assert rec["inputs_unchanged"] is True, (w["name"], backend)
            assert rec["steady"]["samples"] == 1
        assert w["variants"]["pijit"]["speedup"] > 0


def test_json_has_every_field(tiny_run):
    _, res, _ = tiny_run
    assert TOP_FIELDS <= set(res)
    assert ENV_FIELDS <= set(res["env"])
    assert {"copy_bytes_per_s", "triad_bytes_per_s", "read_bytes_per_s", "bytes_per_s",
            "method"} <= set(res["bandwidth"])
    assert set(res["peers"]) == {"numexpr", "numba", "torch", "jax"}
    for w in res["workloads"]:
        assert WORKLOAD_FIELDS <= set(w), w["name"]
        assert (w["floor_s"] is not None) == w["memory_bound"], w["name"]
        assert PIJIT_FIELDS <= set(w["variants"]["pijit"]), w["name"]
        assert w["variants"]["pijit"]["disk_cache"] is True
        for name, rec in w["variants"].items():
            assert VARIANT_FIELDS <= set(rec), (w["name"], name)
            if rec["status"] == "ok":
                assert STEADY_FIELDS <= set(rec["steady"]), (w["name"], name)
                assert CHECK_FIELDS <= set(rec["check"]), (w["name"], name)
                assert 0.0 < rec["cores"] < 8.0, (w["name"], name)


def test_a_variant_using_more_cores_is_marked(tiny_run):
    """A speed is a one-thread number only if the variant kept one core busy: one that kept
    more (a peer's own thread pool) is starred, with a note saying why."""
    from benchmarks import report
    _, res, _ = tiny_run
    res = json.loads(json.dumps(res))
    # (A tiny run's one sample can read more CPU than wall time on a loaded machine.)
    busy = any((v.get("cores") or 0) > report.BUSY for w in res["workloads"]
               for v in w["variants"].values())
    assert ("not a 1-thread number" in report.table(res)) == busy
    rec = res["workloads"][0]["variants"]["pijit"]
    rec["cores"], rec["unsettled"] = report.BUSY + 0.3, None
    text = report.table(res)
    assert f"{rec['speedup']:.2f}x* [" in text and "not a 1-thread number" in text


def test_table_and_markdown(tiny_run):
    proc, res, md = tiny_run
    for w in res["workloads"]:
        assert w["name"] in proc.stdout and w["name"] in md
    assert "speedup" in proc.stdout and "| workload |" in md


def test_allocator_is_pinned_for_the_whole_run(tiny_run):
    """Without the pin, a workload's time depended on what ran before it (benchmarks/
    allocator.py); on glibc the run says it pinned, elsewhere why it did not."""
    import platform
    _, res, _ = tiny_run
    alloc = res["env"]["allocator"]
    if platform.libc_ver()[0] == "glibc":
        assert alloc == {"pinned": True, "mmap_threshold": 32 << 20,
                         "trim_threshold": 64 << 20}
    else:
        assert alloc["pinned"] is False and alloc["reason"]


def test_repeated_break_reasons_are_counted_not_repeated(tiny_run):
    from benchmarks import report
    _, res, _ = tiny_run
    res = json.loads(json.dumps(res))
    rec = res["workloads"][0]["variants"]["pijit"]
    rec["break_reasons"] = [{"reason": "call to print", "lineno": 7}] * 3 + [
        {"reason": "call to open", "lineno": 5}]
    md = report.markdown(res)
    name = res["workloads"][0]["name"]
    assert md.count(f"`{name}`: call to print") == 1
    assert f"`{name}`: call to print (line 7, 3 times)" in md
    assert f"`{name}`: call to open (line 5)" in md


def test_graph_counts_come_from_explain(tiny_run):
    _, res, _ = tiny_run
    by_name = {w["name"]: w["variants"]["pijit"] for w in res["workloads"]}
    assert by_name["chain_f64"]["graph_count"] >= 1
    assert by_name["chain_f64"]["ops_per_graph"]
    assert by_name["changing_shapes"]["compile_count"] >= 1


def test_wrong_result_is_a_failure_not_a_speed(monkeypatch):
    w = workloads.select("tiny")[0]
    broken = workloads.Workload("tiny", w.fn, w.make, w.sizes, w.description)
    from benchmarks import runner

    def prepare(name, workload, threads, pijit):
        if name == "pijit":
            return (lambda x, y: x * y + 1.0001), None, None
        return workload.fn, None, None
    monkeypatch.setattr(runner, "_prepare", prepare)
    res = measure_workload(broken, "tiny", ["numpy", "pijit"], repeat=1)
    pj = res["variants"]["pijit"]
    assert pj["status"] == "mismatch" and pj["speedup"] is None and pj["steady"] is None
    assert res["variants"]["numpy"]["status"] == "ok"


@pytest.mark.parametrize("wrapped", [False, True])
def test_a_peer_whose_first_call_runs_too_long_is_stopped_and_reported(monkeypatch, wrapped):
    """A peer that compiles for ever (torch.compile unrolling a long element loop) must not
    hang the run: it is stopped and reported as timed out, also when it wraps the stop in an
    exception of its own, as torch.compile does."""
    import time as time_mod

    from benchmarks import report, runner
    w = workloads.select("tiny")[0]

    def forever(*args):
        deadline = time_mod.monotonic() + 10
        while time_mod.monotonic() < deadline:      # Python code: the alarm can land
            pass
        raise AssertionError("the limit did not stop the first call")

    def peer(*args):
        try:
            return forever(*args)
        except runner.FirstCallTimeout as exc:
            if wrapped:
                raise RuntimeError("the peer's own error") from exc
            raise

    monkeypatch.setattr(runner.peers_mod, "prepare",
                        lambda name, workload, threads: (peer, None, None))
    start = time_mod.monotonic()
    res = measure_workload(w, "tiny", ["numpy", "numba"], repeat=1, peer_limit_s=0.5,
                           installed={"numba": {"installed": True}})
    assert time_mod.monotonic() - start < 8
    rec = res["variants"]["numba"]
    assert rec["status"] == "timed out" and rec["speedup"] is None, rec
    assert rec["error"] == "first call stopped after 0.5 s"
    assert res["variants"]["numpy"]["status"] == "ok"
    assert report.failures({"workloads": [res]}) == [
        f"TIMED OUT: {w.name} [numba]: first call stopped after 0.5 s"]


def test_compare_tolerances():
    a64 = np.linspace(1, 2, 100)
    assert compare(a64, a64.copy(), strict_dtype=True)["exact"]
    assert compare(a64, a64 * (1 + 1e-9), strict_dtype=True)["ok"]
    assert not compare(a64, a64 * (1 + 1e-4), strict_dtype=True)["ok"]
    a32 = a64.astype(np.float32)
    assert compare(a32, a32 * np.float32(1 + 1e-5), strict_dtype=True)["ok"]
    assert not compare(a32, a64, strict_dtype=True)["ok"]          # dtype must match
    assert compare(a32, a64, strict_dtype=False)["ok"]             # peers: values only
    assert not compare(np.array([1, 2]), np.array([1, 3]), strict_dtype=True)["ok"]
    assert not compare(np.array([np.nan, 1.0]), np.array([1.0, 1.0]), strict_dtype=True)["ok"]
    assert not compare((a64, a64), a64, strict_dtype=True)["ok"]


def test_floor_of_a_reduction_is_read_bound():
    from benchmarks.bandwidth import floor_s
    bw = {"bytes_per_s": 20e9, "read_bytes_per_s": 10e9}
    assert floor_s(bw, 80_000_000, 8) == pytest.approx(8e-3)             # sum: read-only
    assert floor_s(bw, 80_000_000, 80_000_000) == pytest.approx(8e-3)    # copy-like


def test_size_sweep_runs_each_size_as_a_checked_workload(tmp_path):
    """`--sizes`: one workload per (sweep workload, size), each checked against NumPy like
    the suite's, the sizes in the JSON's config."""
    out = tmp_path / "s.json"
    cmd = [sys.executable, "-m", "benchmarks", "--sizes", "100,3e3", "--only", "chain,sum_squares",
           "--tiny", "--repeat", "1", "--no-progress", "--no-bandwidth", "--json", str(out)]
    timeout = 1800 if "libasan" in os.environ.get("LD_PRELOAD", "") else 600
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads(out.read_text())
    assert res["config"]["sizes"] == [100, 3000]
    assert [w["name"] for w in res["workloads"]] == [
        "chain@100", "chain@3000", "sum_squares@100", "sum_squares@3000"]
    for w in res["workloads"]:
        for backend in ("numpy", "pijit"):
            assert w["variants"][backend]["check"]["ok"] is True, (w["name"], backend)
    assert w["size"] == "3000 f64"
    from benchmarks import sweep
    points = sweep.series(res)
    assert [n for n, *_ in points["chain"]] == [100, 3000]


@pytest.mark.parametrize("text, message", [("1e3,x", "'x' is not a number"),
                                           ("0", "not a positive whole number"),
                                           ("2.5", "not a positive whole number")])
def test_bad_sweep_sizes_are_named(text, message):
    from benchmarks import sweep
    with pytest.raises(SystemExit, match=message):
        sweep.parse_sizes(text)
    assert sweep.parse_sizes("") == list(sweep.DEFAULT_SIZES)
    with pytest.raises(SystemExit, match="unknown sweep workload"):
        sweep.workloads([100], "chain,softmax")


def _running_sum(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i]
    return s


def test_settle_times_the_compiled_entry_not_the_warm_up(monkeypatch):
    """An adaptive loop whose signature needs several calls to get hot, then a perf_statistics
    trial: settle_pijit must not return before both are done, or the samples time plain calls
    and the trial (lu_nopivot: 81 us reported, 32 us its kernel). Decided by state, not time."""
    import pijit
    from pijit import cache
    from benchmarks.runner import settle_pijit
    monkeypatch.setenv("PIJIT_ADAPTIVE", "1")
    fn = pijit.jit(_running_sum, jit_config={"compile_after_ms": 20})
    x = np.arange(20000, dtype=np.float64)
    unsettled = settle_pijit(fn, [(x,)], warm_s=0.0, min_calls=1, limit_s=120.0)
    info = pijit.code_info(fn)
    assert unsettled is None and info["state"] != "candidate", (unsettled, info)
    assert "loop_nest" in info["entries"][0]["ops"], info
    (entry,) = cache.record(_running_sum.__code__).entries
    assert entry.level == "O1" and entry.promote is None and entry.perf is not None, info
    assert fn(x) == _running_sum(x)
    pijit.reset(fn)


def test_a_variant_timed_before_it_settled_is_marked(monkeypatch):
    """A signature still running plain Python when the samples start (it needs more calls to
    get hot than the patience allowed) is timed as it is, but the speedup says so."""
    import pijit
    from benchmarks import report
    from benchmarks.runner import settle_pijit
    monkeypatch.setenv("PIJIT_ADAPTIVE", "1")
    fn = pijit.jit(_running_sum, jit_config={"compile_after_ms": 60_000})
    x = np.arange(100, dtype=np.float64)
    unsettled = settle_pijit(fn, [(x,)], warm_s=0.0, min_calls=1, patience_s=0.0)
    assert "candidate" in unsettled and pijit.code_info(fn)["state"] == "candidate"
    rec = {"status": "ok", "speedup": 0.82, "speedup_q1": 0.8, "speedup_q3": 0.9}
    assert report._speedup(rec) == "0.82x [0.80-0.90]"
    assert report._speedup(dict(rec, unsettled=unsettled)) == "0.82x? [0.80-0.90]"
    pijit.reset(fn)
