"""Golden dumps: what `print_after_all` prints (original bytecode, captured graph, compiled
graph with its fused groups, the fused kernels' C, guards, transformed bytecode) for the
functions of golden_cases.py, compared with tests/golden/<name>.txt.

A change of codegen anywhere shows up here as a diff to read. When the change is meant,
rewrite the files with `make golden` (PIJIT_UPDATE_GOLDEN=1) and commit them with it, so the
review sees what the generated code became.
"""
from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import numpy as np
import pytest

import pijit
from pijit.backends.cfused import toolchain

from differential import assert_equal_values, clone
from golden_cases import CASES

TESTS = Path(__file__).resolve().parent
GOLDEN = TESTS / "golden"
UPDATE = os.environ.get("PIJIT_UPDATE_GOLDEN") == "1"
_ADDRESS = re.compile(r"\b0x[0-9a-f]{6,}\b")


def dumps(fn, calls, config, capsys) -> str:
    """print_after_all's text over the calls (results checked against plain NumPy)."""
    jitted = pijit.jit(fn, jit_config={**config, "print_after_all": True})
    pijit.reset(jitted)
    capsys.readouterr()
    for args in calls:
        got, want = jitted(*clone(args)), fn(*clone(args))
        if config.get("jit_level") == "O2":
            for g, w in zip(np.atleast_1d(got), np.atleast_1d(want)):
                np.testing.assert_allclose(g, w, rtol=1e-5)
        else:
            assert_equal_values(got, want)
    # object addresses, and where the clone is (code objects name their files)
    text = _ADDRESS.sub("0x?", capsys.readouterr().err).replace(str(TESTS), "<tests>")
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_golden(case, capsys, monkeypatch):
    name, fn, make, config, fused = case
    # one part per module, as on a machine of one CPU: the same C on any machine
    monkeypatch.setattr(toolchain, "compile_jobs", lambda: 1)
    text = dumps(fn, make(), config, capsys)
    assert ("=== pijit: fused kernels (C) ===" in text) == fused, name
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"{path} is missing: run `make golden` and commit it"
    expected = path.read_text()
    if text != expected:
        diff = list(difflib.unified_diff(expected.splitlines(), text.splitlines(),
                                         f"golden/{name}.txt", "now", lineterm=""))
        pytest.fail(f"{name}: the dumps changed (if meant: make golden)\n"
                    + "\n".join(diff[:120]) + ("\n..." if len(diff) > 120 else ""))


def test_every_golden_file_has_a_case():
    """A case renamed or dropped leaves no stale golden file behind."""
    names = {c[0] for c in CASES}
    assert len(names) == len(CASES)
    assert {p.stem for p in GOLDEN.glob("*.txt")} == names
