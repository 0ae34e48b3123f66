"""The fused-kernel build and launch path under threads, processes, signals, damaged files,
foreign directories, a slow or missing compiler and failed allocations (issues 14, 16, 23).

Whatever can crash or hang runs in a subprocess with a timeout; cache tests damage real
files. Each subprocess runs SCRIPT_HEAD first: pijit's kernel log on stderr, and `fused()`,
which tells how the last call ran (a kernel module built or loaded, no NumPy fallback).
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT_HEAD = textwrap.dedent("""
    import logging, os, sys
    import numpy as np, pijit
    from pijit.backends.cfused import build
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    logging.getLogger("pijit.kernels").setLevel(logging.DEBUG)
    RECORDS = []
    _h = logging.Handler()
    _h.emit = lambda r: RECORDS.append(r.getMessage())
    logging.getLogger("pijit.kernels").addHandler(_h)

    def fused():
        '''Since the last call of fused(): a graph was fused and its module built or loaded,
        and nothing fell back to NumPy.'''
        msgs = RECORDS[:]
        RECORDS.clear()
        return (any("fused group" in m for m in msgs)
                and not any("NumPy backend" in m for m in msgs))
""")


def run_script(body: str, cache, timeout=120, env=None, **kw):
    full = dict(os.environ, PIJIT_CACHE_DIR=str(cache), **(env or {}))
    return subprocess.run([sys.executable, "-c", SCRIPT_HEAD + textwrap.dedent(body)],
                          env=full, capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, **kw)


# -- 7. out of memory in a kernel: MemoryError, no double free (issue 16.7) ----------------------

def test_kernel_out_of_memory_raises_memory_error(tmp_path):
    """A row too long for the kernel's row scratch (an address-space limit makes the
    allocation fail, the input is a broadcast view of one value): MemoryError, as NumPy
    raises, where the kernel used to free its buffers twice and crash."""
    res = run_script("""
        import resource
        def softmax_sum(x):
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            return e.sum(axis=-1)
        def two(x):             # one kernel, a tuple of its two outputs
            e = np.exp(x)
            return e.sum(axis=-1), (e * x).sum(axis=-1)
        cases = []
        for fn in (softmax_sum, two):
            j = pijit.jit(fn)
            for n in (8, 9):            # the second size makes the last dim dynamic
                x = np.broadcast_to(np.float64(0.5), (1, n))
                got, want = j(x), fn(x)
                assert all(map(np.array_equal, got if isinstance(got, tuple) else (got,),
                               want if isinstance(want, tuple) else (want,)))
            assert fused(), RECORDS
            cases.append((fn, j))
        huge = np.broadcast_to(np.float64(0.5), (1, 1 << 28))     # 2 GiB a row
        with open("/proc/self/status") as fh:
            vm = [int(l.split()[1]) for l in fh if l.startswith("VmSize")][0] << 10
        resource.setrlimit(resource.RLIMIT_AS, (vm + (256 << 20), resource.RLIM_INFINITY))
        for fn, j in cases:
            count = pijit.code_info(j)["compile_count"]
            try:
                j(huge)
            except MemoryError as e:
                print(f"jitted: MemoryError{e.args}")     # the kernel's: no message
            try:
                fn(huge)
            except MemoryError:
                print("plain: MemoryError")
            assert pijit.code_info(j)["compile_count"] == count    # the kernel ran
    """, tmp_path, timeout=120)
    assert res.returncode == 0, (res.returncode, res.stderr)
    assert res.stdout == "jitted: MemoryError()\nplain: MemoryError\n" * 2


# -- 8. a forked child runs kernels on one thread, no hang (issue 16.8) --------------------------

def test_fork_pool_with_threads_does_not_hang(tmp_path):
    res = run_script("""
        import multiprocessing as mp
        f = pijit.jit(lambda x: np.sqrt(x * 2.0 + 1.0))
        x = np.linspace(0, 1, 1 << 18)      # big enough for two threads
        assert np.array_equal(f(x), np.sqrt(x * 2.0 + 1.0))
        assert fused(), RECORDS
        def work(k):
            got = f(x + k)
            return bool(np.array_equal(got, np.sqrt((x + k) * 2.0 + 1.0)))
        with mp.get_context("fork").Pool(2) as pool:
            print(pool.map(work, range(4)))
        assert np.array_equal(f(x), np.sqrt(x * 2.0 + 1.0))    # the parent keeps its threads
        print("ok")
    """, tmp_path, env={"PIJIT_NUM_THREADS": "2"}, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "[True, True, True, True]\nok\n"
