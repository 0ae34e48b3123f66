"""A real IPython session for tests: cells run one by one by an InteractiveShell in a fresh
process (IPython changes process-wide hooks, so never in the test process). IPython is an
optional test dependency: tests using it skip, with the reason, when it is not installed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

_DRIVER = textwrap.dedent("""
    import json, sys
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance(colors="NoColor")
    for cell in json.loads(sys.argv[1]):
        shell.run_cell(cell, store_history=True)
        sys.stdout.flush()
""")


def run_cells(cells: list, *, cwd=None, timeout: float = 300) -> str:
    """Run `cells` (source strings; cell k is In[k+1]) and return what the session printed:
    outputs, and tracebacks as IPython formats them (no colours)."""
    pytest.importorskip("IPython", reason="IPython is not installed (an optional test "
                        "dependency: pip install -e '.[test]')")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in [str(cwd or ""), os.environ.get("PYTHONPATH", "")] if p))
    proc = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(cells)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr
