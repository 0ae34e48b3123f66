"""Jitted block functions on a dask.distributed LocalCluster: the speedup of a pijit-jitted
block function over the same function run by NumPy, block by block on the workers.

    python examples/dask_map_blocks.py [--workers 2] [--blocks 16] [--block-rows 1024]
                                       [--cols 1024] [--repeat 9]

needs `pip install 'pijit[dask]'`. The array is made and kept on the workers (x.persist()),
so the times are the workers' work, not the transfer of blocks. Each variant first runs
twice untimed: the jitted one compiles (once per worker, each kernel built once for all of
them through the kernel disk cache), then pijit times its entry against plain Python and
keeps the faster, which the output reports. Then the variants alternate, with a pause
between runs so that other work on the machine disturbs both alike. Printed: the median
time of one map_blocks over the whole array (wall, on the client: scheduling included) with
its range, the median compute time of one block (the workers' task records), the speedups,
how the calls of each jitted function ran on each worker, and the load average before,
during and after, since other work on the machine shifts every number. Before timing, the
jitted results are checked bit for bit against NumPy's. tests/test_examples.py runs it on
small blocks.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import dask.array as da
import numpy as np
from distributed import Client, LocalCluster, get_task_stream, wait

import pijit


def fused_chain(x):
    return np.exp(-x * x) * 0.5 + np.sqrt(np.abs(x)) * x - 1.0


def row_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# Jitted under other names, so the plain functions stay plain NumPy for the baseline. A
# jitted function pickles as jit of its plain function with its options, which also works
# from a notebook (Dask sends a notebook's functions by value; a function decorated there
# would be sent by its name, which the workers do not have).
fused_chain_jit = pijit.jit(fused_chain)
row_softmax_jit = pijit.jit(row_softmax)

WORKLOADS = {"fused_chain": (fused_chain, fused_chain_jit),
             "row_softmax": (row_softmax, row_softmax_jit)}


def how_the_calls_ran():
    """In a worker (client.run): one line per jitted function, saying how its calls ran
    there: how many, how many of them ran as plain Python before the function was compiled
    (pijit's adaptive option waits until a signature has taken some time), and how each
    entry runs: its jit_level and what pijit's timed trial against plain Python kept, or why
    it runs as plain Python."""
    lines = []
    for name, (_, jitted) in WORKLOADS.items():
        s = pijit.stats(jitted)
        entries = []
        for e in s["entries"]:
            if e["fallback"]:
                entries.append(f"plain Python: {e['fallback']}")
            else:
                kept = f", kept {e['perf']['choice']}" if e["perf"] else ""
                entries.append(f"{e['level']}{kept}")
        lines.append(f"worker {os.getpid()} {name}: {s['call_count']} calls, {s['deferred']} "
                     f"of them plain before compiling; entries: {' | '.join(entries) or '-'}")
    return lines


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=2, help="worker processes (1 thread each)")
    p.add_argument("--blocks", type=int, default=16, help="blocks of the array")
    p.add_argument("--block-rows", type=int, default=1024, help="rows per block")
    p.add_argument("--cols", type=int, default=1024, help="columns (one block wide)")
    p.add_argument("--repeat", type=int, default=9, help="timed runs per variant")
    return p.parse_args()


def run(client, x, fn, name):
    """Seconds of one map_blocks of fn over x, kept on the workers, then released. A fresh
    name each time: the scheduler would otherwise reuse results still held."""
    start = time.perf_counter()
    y = x.map_blocks(fn, meta=np.empty((0, 0)), name=name).persist()
    wait(y)
    seconds = time.perf_counter() - start
    del y
    return seconds


def block_seconds(records, prefix):
    """Compute time of each block whose task name starts with prefix (task stream records)."""
    return [ss["stop"] - ss["start"] for r in records if str(r["key"]).startswith(f"('{prefix}")
            for ss in r["startstops"] if ss["action"] == "compute"]


def spread(values):
    """Milliseconds: median (min-max)."""
    ms = [v * 1e3 for v in values]
    return f"{statistics.median(ms):.1f} ({min(ms):.0f}-{max(ms):.0f})"


def main():
    args = parse_args()
    shape = (args.blocks * args.block_rows, args.cols)
    load = [os.getloadavg()[0]]
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        x = da.random.default_rng(0).standard_normal(shape, chunks=(args.block_rows, args.cols))
        x = x.persist()
        wait(x)
        client.rebalance(x)         # as many blocks on each worker
        held = sorted(len(keys) for keys in client.has_what().values())
        print(f"{args.workers} workers x 1 thread, float64 {shape[0]}x{shape[1]} in "
              f"{args.blocks} blocks of {args.block_rows}x{args.cols} "
              f"({args.block_rows * args.cols * 8 / 2**20:.0f} MiB), {held} per worker; "
              f"{args.repeat} runs each")
        rows = []
        for label, (plain, jitted) in WORKLOADS.items():
            same = (x.map_blocks(jitted, meta=np.empty((0, 0))).view(np.uint64)
                    == x.map_blocks(plain, meta=np.empty((0, 0))).view(np.uint64)).all()
            assert same.compute(), f"{label}: jitted results differ from NumPy's"
            print(f"{label}: the jitted results equal NumPy's bit for bit")
            for k in range(2):      # compiles, and pijit's timed trial against plain Python
                for variant, fn in (("numpy", plain), ("pijit", jitted)):
                    run(client, x, fn, f"{label}-warm-{variant}-{k}")
            walls = {"numpy": [], "pijit": []}
            with get_task_stream(client) as stream:
                for k in range(args.repeat):
                    order = ("numpy", "pijit") if k % 2 == 0 else ("pijit", "numpy")
                    for variant in order:
                        fn = plain if variant == "numpy" else jitted
                        time.sleep(0.2)
                        walls[variant].append(run(client, x, fn, f"{label}-{variant}-{k}"))
                    load.append(os.getloadavg()[0])
            per_block = {v: block_seconds(stream.data, f"{label}-{v}-") for v in walls}
            rows.append((label, walls, per_block))
        ran = client.run(how_the_calls_ran)
    load.append(os.getloadavg()[0])

    print(f"\n| block function | NumPy ms | pijit ms | speedup | NumPy ms/block | "
          f"pijit ms/block | speedup/block |")
    print("|---|---|---|---|---|---|---|")
    for label, walls, per_block in rows:
        med = {v: statistics.median(walls[v]) for v in walls}
        blk = {v: statistics.median(per_block[v]) for v in per_block}
        print(f"| {label} | {spread(walls['numpy'])} | {spread(walls['pijit'])} | "
              f"{med['numpy'] / med['pijit']:.2f}x | {blk['numpy'] * 1e3:.1f} | "
              f"{blk['pijit'] * 1e3:.1f} | {blk['numpy'] / blk['pijit']:.2f}x |")
    print(f"\nwall: one map_blocks over the array, median (min-max) of {args.repeat}; per block:"
          " median compute time of a block on a worker")
    print("\n".join(line for lines in ran.values() for line in lines))
    print(f"1-min load average: {load[0]:.1f} before, {min(load[1:-1]):.1f}-{max(load[1:-1]):.1f}"
          f" during, {load[-1]:.1f} after ({os.cpu_count()} cores)")


if __name__ == "__main__":       # the workers import this file for the functions above
    main()
