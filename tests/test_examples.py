"""The examples run as their users run them and say what they should: a script in a process
of its own, whose jitted functions Dask's workers get by value (the script is their __main__),
on small inputs, its output checked (results equal to NumPy's, and how the calls ran); and the
example notebook, its code cells as a script and the notebook itself executed by a Jupyter
kernel through nbclient (skipped when nbclient and ipykernel, optional test dependencies, are
not installed)."""
from __future__ import annotations

import contextlib
import io
import json
import linecache
import os
import pathlib
import re
import subprocess
import sys

import pytest

import pijit

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
NOTEBOOK = EXAMPLES / "pijit_in_a_notebook.ipynb"
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



def _with_nbclient(nbclient):
    import nbformat
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    texts, html = [], []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text", ""))
            data = output.get("data", {})
            texts.append(data.get("text/plain", ""))
            html.append(data.get("text/html", ""))
    return "\n".join(texts), "\n".join(html)


def _as_script():
    """Each code cell compiled as a file of its own whose lines tracebacks can show (as
    IPython does)."""
    namespace, out = {"__name__": "__main__"}, io.StringIO()
    with contextlib.redirect_stdout(out):
        for k, cell in enumerate(json.loads(NOTEBOOK.read_text())["cells"]):
            if cell["cell_type"] == "code":
                source, name = "".join(cell["source"]), f"<{NOTEBOOK.name} cell {k}>"
                linecache.cache[name] = (len(source), None, source.splitlines(True), name)
                exec(compile(source, name, "exec"), namespace)
    return out.getvalue(), None


@pytest.mark.parametrize("runner", ["nbclient", "script"])
def test_example_notebook_runs(runner):
    if runner == "script":
        text, html = _as_script()
        return _check(text, html)
    try:
        import ipykernel  # noqa: F401
        import nbclient
    except ImportError:
        pytest.skip("nbclient and ipykernel are not installed (optional test dependencies)")
    _check(*_with_nbclient(nbclient))


def _check(text, html):
    assert "softmax: same result as NumPy" in text
    assert "<pijit ExplainOutput of softmax: 1 graph(s), 0 break(s), 5 op(s)>" in text
    assert "graphs: 2, breaks: 1" in text and "graphs: 1, breaks: 0" in text
    assert "value depends on array data" in text
    assert "normalize_fixed  NumPy" in text
    assert "FloatingPointError: invalid value encountered in subtract" in text
    assert "in softmax, line 3: e = np.exp(x - x.max(axis=-1, keepdims=True))" in text
    if html is not None:            # Jupyter displayed the reports as tables
        assert "<h4>Graph breaks</h4>" in html and "<h4>Guards</h4>" in html
        assert "Cell In[" in html
