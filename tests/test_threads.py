"""num_threads: the kernels are built for the asked thread count and really run on that many
threads (not only equal results, which one thread would also give), in a fresh process so
no earlier test has started OpenMP's threads."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_SCRIPT = textwrap.dedent("""
    import json, logging, os, sys
    import numpy as np, pijit

    def tasks():
        return len(os.listdir("/proc/self/task"))

    records = []
    handler = logging.Handler()
    handler.emit = records.append
    log = logging.getLogger("pijit.kernels")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)

    def chain(a, b):
        return a * b + a - 0.5

    def rows(a):
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    threads = int(sys.argv[1])
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((301, 517)), rng.standard_normal((301, 517))
    out = {}
    for name, fn, args in (("chain", chain, (x, y)), ("rows", rows, (x,))):
        jitted = pijit.jit(fn, jit_config={"num_threads": threads})
        before = tasks()
        got = jitted(*args)
        after = tasks()
        source = "\\n".join(r.getMessage() for r in records if "C source" in r.getMessage())
        records.clear()
        out[name] = {"before": before, "after": after,
                     "same": got.tobytes() == fn(*args).tobytes(),
                     "threads_define":
                         f"#define PJ_THREADS (pj_one_thread ? 1 : {threads})" in source,
                     "parallel": "#pragma omp parallel num_threads(PJ_THREADS)" in source,
                     "graphs": pijit.explain(jitted, *args).graph_count}
    print(json.dumps(out))
""")


def _run(threads: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "PIJIT_NUM"))}
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(threads)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_two_threads_are_built_for_and_run():
    """num_threads=2 over 155617 elements (more than PAR_MIN): the module defines two threads,
    its loops are OpenMP parallel regions, and the first call starts OpenMP's second thread
    (the process gains one); the results are NumPy's to the bit."""
    for name, seen in _run(2).items():
        assert seen["threads_define"] and seen["parallel"], (name, seen)
        assert seen["same"] and seen["graphs"] == 1, (name, seen)
    first = _run(2)["chain"]
    assert first["after"] >= first["before"] + 1, first


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_one_thread_starts_no_thread():
    for name, seen in _run(1).items():
        assert seen["threads_define"] and seen["same"], (name, seen)
        assert seen["after"] == seen["before"], (name, seen)
