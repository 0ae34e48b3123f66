"""Dask runs jitted block functions (issue 23 item 4): dask.array.map_blocks on the threaded
scheduler and on a dask.distributed LocalCluster of two worker processes, results bit-equal
to NumPy's per block and to the whole computation done plainly; the workers and the client
share the kernel disk cache, so each kernel is compiled once, by the process that needs it
first, and the others load it.

The cluster's processes compile with a counting compiler (CC): a script that appends the pid
of the process running it and the module it compiles to a file, then runs gcc. While a gate
file exists it waits first, which holds one worker's build open until the other worker has
missed the same kernel in the cache: the concurrent first build, made certain."""
from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import os
import pathlib

import numpy as np
import pytest

import pijit

da = pytest.importorskip("dask.array", reason="dask is not installed: pip install 'pijit[dask]' "
                                              "(make test installs it with the test extra)")

import dask  # noqa: E402
import dask_blocks as blocks  # noqa: E402 - after the skip: workers import it by name
from test_build_robust import wait_for  # noqa: E402

TIMEOUT = 120       # seconds: the longest wait for the cluster, a result or a build

COUNTING_CC = """#!/bin/sh
case "$1" in --version) exec gcc --version;; esac
echo "$PPID $(echo "$*" | grep -o '_pijit_k_[0-9a-f]*' | head -n 1)" >> {runs}
n=0
while [ -e {gate} ] && [ $n -lt 3000 ]; do sleep 0.02; n=$((n + 1)); done
exec gcc "$@"
"""


def assert_same_bits(got, expected):
    assert got.dtype == expected.dtype == np.float64 and got.shape == expected.shape
    assert np.array_equal(got.view(np.uint64), expected.view(np.uint64))


def assert_blocks_match_numpy(got, fn, x, rows):
    """got equals plain fn over the whole of x, and over each block of `rows` rows."""
    assert_same_bits(got, fn.fn(x))
    start = 0
    for n in rows:
        assert_same_bits(got[start:start + n], fn.fn(x[start:start + n]))
        start += n


@pytest.mark.parametrize("fn", [blocks.fused_chain, blocks.row_softmax],
                         ids=["fused_chain", "row_softmax"])
def test_map_blocks_on_threads_runs_kernels_per_block(fn, caplog):
    caplog.set_level(logging.INFO, logger="pijit.kernels")
    pijit.reset(fn)
    x = np.random.default_rng(1).standard_normal((700, 48))
    rows = (200, 200, 200, 100)
    # meta: dask need not call fn on empty arrays to learn the result type (each such call
    # would compile an entry of its own)
    y = da.from_array(x, chunks=(rows, 48)).map_blocks(fn, meta=np.empty((0, 0)))
    assert pijit.stats(fn)["call_count"] == 0
    assert_blocks_match_numpy(y.compute(scheduler="synchronous"), fn, x, rows)
    s = pijit.stats(fn)
    assert s["compile_count"] == 2          # a 200-row entry, then one with a dynamic row count
    assert [e["fallback"] for e in s["entries"]] == [None, None]
    assert all("exp" in e["ops"] for e in s["entries"])
    assert "fused group" in caplog.text and "NumPy backend" not in caplog.text
    # on the threaded scheduler, every block hits an entry (a pool of the test's own: dask's
    # default one would keep its threads in this process, which later tests fork)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        assert_blocks_match_numpy(y.compute(scheduler="threads", pool=pool), fn, x, rows)
    after = pijit.stats(fn)
    assert after["compile_count"] == 2 and after["cache_misses"] == s["cache_misses"]
    assert after["cache_hits"] == s["cache_hits"] + len(rows)


@dataclasses.dataclass
class Cluster:
    client: object
    cache: pathlib.Path         # the kernel cache dir of the client and the workers
    runs: pathlib.Path          # the counting compiler's "pid module" lines
    gate: pathlib.Path          # while it exists, the counting compiler waits

    def builds(self) -> set:
        """(pid, module) of every kernel module compiled so far, by any process."""
        if not self.runs.exists():
            return set()
        return {tuple(line.split()) for line in self.runs.read_text().splitlines()}

    def modules(self) -> dict:
        """The cache's module files: name -> inode (a rebuilt module is a new file)."""
        return {p.name: p.stat().st_ino for p in self.cache.glob("_pijit_k_*.so")}

    def reports(self, fn) -> dict:
        """Per worker: its pid, pijit.stats(fn) and its kernel log (dask_blocks.report)."""
        return self.client.run(blocks.report, fn)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    distributed = pytest.importorskip(
        "distributed", reason="dask.distributed is not installed: pip install 'pijit[dask]'")
    tmp = tmp_path_factory.mktemp("dask")
    runs, gate, cc = tmp / "cc.runs", tmp / "cc.gate", tmp / "counting-cc"
    cc.write_text(COUNTING_CC.format(runs=runs, gate=gate))
    cc.chmod(0o755)
    with pytest.MonkeyPatch.context() as env, dask.config.set(
            {"distributed.worker.profile.enabled": False}):
        # the client's settings; the worker processes inherit them. No profiler: its thread
        # (the scheduler's, in this process) would outlive the cluster, and later tests fork
        env.setenv("PIJIT_CACHE_DIR", str(tmp / "kernels"))
        env.setenv("CC", str(cc))
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
        try:
            client = distributed.Client(cluster, timeout=TIMEOUT)
            try:
                client.run(blocks.record_kernel_log)
                yield Cluster(client, tmp / "kernels", runs, gate)
            finally:
                client.close(timeout=TIMEOUT)
        finally:
            cluster.close(timeout=TIMEOUT)


def test_workers_load_the_kernel_the_client_built(cluster):
    fn, rows = blocks.row_softmax, (200,) * 4
    x = np.random.default_rng(2).standard_normal((800, 64))
    pijit.reset(fn)
    before = cluster.builds()
    assert_same_bits(fn(x[:200]), fn.fn(x[:200]))      # the client builds the block's kernel
    built = cluster.builds() - before
    assert {pid for pid, _ in built} == {str(os.getpid())}
    kernels = {module for _, module in built}
    modules = cluster.modules()
    assert {k + ".so" for k in kernels} <= set(modules)

    y = da.from_array(x, chunks=(rows, 64)).map_blocks(fn, meta=np.empty((0, 0)))
    assert_blocks_match_numpy(cluster.client.compute(y).result(timeout=TIMEOUT), fn, x, rows)

    reports = cluster.reports(fn).values()
    assert sum(r["stats"]["call_count"] for r in reports) == len(rows)   # each block, jitted
    ran = [r for r in reports if r["stats"]["call_count"]]
    for r in ran:
        assert r["stats"]["compile_count"] == 1
        assert [e["fallback"] for e in r["stats"]["entries"]] == [None]
        for k in kernels:
            assert any(m.startswith("kernel cache hit") and k in m for m in r["log"]), r["log"]
            assert not any(m.startswith(f"compiling {k}") for m in r["log"]), r["log"]
    assert cluster.builds() == before | built       # no compiler ran in a worker
    assert cluster.modules() == modules             # no module file rebuilt or added


def test_two_cold_workers_needing_one_kernel_at_once_compile_it_once(cluster):
    fn = blocks.fused_chain
    x = np.random.default_rng(3).standard_normal((2, 300, 40))     # one block per worker
    client = cluster.client
    workers = sorted(client.scheduler_info()["workers"])
    pids = {str(pid) for pid in client.run(os.getpid).values()}
    before = cluster.builds()

    def one_builds_the_other_waits():
        """A worker is in the compiler (held by the gate), and the other has missed the same
        module in the cache since: it waits for the build's lock or is about to."""
        new = cluster.builds() - before
        if not new:
            return False
        (builder, module), *_ = new
        return any(m.startswith("kernel cache: no ") and module + ".so" in m
                   for r in cluster.reports(fn).values() if str(r["pid"]) != builder
                   for m in r["log"])

    cluster.gate.touch()
    try:
        futures = [client.submit(fn, x[k], workers=[w], allow_other_workers=False, pure=False)
                   for k, w in enumerate(workers)]
        assert wait_for(one_builds_the_other_waits, TIMEOUT), (cluster.builds() - before,
                                                               cluster.reports(fn))
    finally:
        cluster.gate.unlink(missing_ok=True)
    for k, future in enumerate(futures):
        assert_same_bits(future.result(timeout=TIMEOUT), fn.fn(x[k]))

    built = cluster.builds() - before
    kernels = {module for _, module in built}
    assert len(built) == len(kernels) >= 1, built   # each module compiled by one process
    (builder,) = {pid for pid, _ in built}
    assert builder in pids
    for r in cluster.reports(fn).values():
        assert r["stats"]["compile_count"] == 1
        assert [e["fallback"] for e in r["stats"]["entries"]] == [None]
        compiled = {k for k in kernels if any(m.startswith(f"compiling {k}") for m in r["log"])}
        if str(r["pid"]) == builder:
            assert compiled == kernels
        else:
            assert compiled == set()
            for k in kernels:      # loaded once the builder released the module's lock
                assert any(m.startswith("kernel cache hit") and k in m for m in r["log"])
    for k in kernels:
        assert (cluster.cache / (k + ".so")).is_file()
        assert (cluster.cache / (k + ".so.sha256")).is_file()
    assert not list(cluster.cache.glob(".build-*"))
