"""The examples run as their users run them: a script in a process of its own, whose jitted
functions Dask's workers get by value (the script is their __main__). Each is run on small
inputs and its output checked: results equal to NumPy's, and how the calls ran."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

import pijit

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
TIMEOUT = 300       # seconds: a 2-worker cluster, four kernel builds, on a loaded machine


def test_dask_map_blocks(tmp_path):
    pytest.importorskip("distributed", reason="dask.distributed is not installed: "
                                              "pip install 'pijit[dask]'")
    blocks, repeat = 4, 1
    # PIJIT_ADAPTIVE=0: every block compiles at its first call, so how the calls ran is
    # certain (with adaptive, blocks this small would run plain Python until hot)
    env = dict(os.environ, PIJIT_ADAPTIVE="0", PIJIT_CACHE_DIR=str(tmp_path / "kernels"))
    res = subprocess.run(
        [sys.executable, str(EXAMPLES / "dask_map_blocks.py"), "--workers", "2",
         "--blocks", str(blocks), "--block-rows", "64", "--cols", "48", "--repeat", str(repeat)],
        capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    for name in ("fused_chain", "row_softmax"):
        assert f"{name}: the jitted results equal NumPy's bit for bit" in out
        assert re.search(rf"^\| {name} \| [0-9.]+ \(", out, re.M), out    # its timing row
    ran = re.findall(r"^worker (\d+) (\w+): (\d+) calls, (\d+) of them plain before compiling; "
                     r"entries: (.*)$", out, re.M)
    workers = {pid for pid, *_ in ran}
    assert len(workers) == 2 and str(os.getpid()) not in workers, out
    for name in ("fused_chain", "row_softmax"):
        mine = [r for r in ran if r[1] == name]
        assert len(mine) == 2, out
        # every block of every map_blocks ran jitted: the check, two warm-ups, the timed runs
        assert sum(int(calls) for _, _, calls, _, _ in mine) == blocks * (1 + 2 + repeat), out
        for _, _, calls, deferred, entries in mine:
            # one entry per worker that ran blocks (all blocks have one shape), compiled at the
            # default jit_level (fused C kernels), no call run plain
            level = pijit.JitConfig().jit_level
            assert (deferred, entries) == ("0", level if int(calls) else "-"), out
