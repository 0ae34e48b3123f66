"""Golden dumps: what `print_after_all` prints (original bytecode, captured graph, compiled
graph with its fused groups, the fused kernels' C, guards, transformed bytecode) for the
functions of golden_cases.py, compared with tests/golden/<name>.txt and, for the bytecode,
which each CPython version has its own of, tests/golden/<name>.py3XX.txt.

A change of codegen anywhere shows up here as a diff to read. When the change is meant,
rewrite the files with `make golden` (PIJIT_UPDATE_GOLDEN=1; on each Python version for a
change of bytecode) and commit them with it, so the review sees what the generated code
became.
"""
from __future__ import annotations

import difflib
import os
import re
import sys
from pathlib import Path

import pytest

import pijit
from pijit.backends.cfused import toolchain

from differential import assert_equal_values, clone, level_tol
from golden_cases import CASES

TESTS = Path(__file__).resolve().parent
GOLDEN = TESTS / "golden"
UPDATE = os.environ.get("PIJIT_UPDATE_GOLDEN") == "1"
_ADDRESS = re.compile(r"\b0x[0-9a-f]{6,}\b")
# The dumps' sections of bytecode, kept per Python version (VERSION_TAG) apart from the rest.
BYTECODE_SECTIONS = ("=== pijit: original bytecode ===", "=== pijit: transformed bytecode ===")
VERSION_TAG = "py%d%d" % sys.version_info[:2]
_SECTION = re.compile(r"^=== pijit: .* ===$", re.MULTILINE)


def dumps(fn, calls, config, capsys) -> str:
    """print_after_all's text over the calls (results checked against plain NumPy)."""
    jitted = pijit.jit(fn, jit_config={**config, "print_after_all": True})
    pijit.reset(jitted)
    capsys.readouterr()
    for args in calls:
        got, want = jitted(*clone(args)), fn(*clone(args))
        # bits at O0/O1, O2's derived bounds (dtypes, shapes, layouts and every result too)
        tol, scale = level_tol(fn, args, config.get("jit_level", "O1"))
        assert_equal_values(got, want, tol=tol, scale=scale)
    # object addresses, and where the clone is (code objects name their files)
    text = _ADDRESS.sub("0x?", capsys.readouterr().err).replace(str(TESTS), "<tests>")
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def split_bytecode(text) -> tuple:
    """(the dump with each bytecode section's body left out, those bodies under their
    headers): what every version shares, and what is this version's."""
    shared, bytecode = [], []
    starts = [m.start() for m in _SECTION.finditer(text)] + [len(text)]
    shared.append(text[:starts[0]])
    for begin, end in zip(starts, starts[1:]):
        section = text[begin:end]
        header = section.split("\n", 1)[0]
        if header in BYTECODE_SECTIONS:
            shared.append(f"{header}\n  (tests/golden/<name>.py3XX.txt)\n")
            bytecode.append(section)
        else:
            shared.append(section)
    return "".join(shared), "".join(bytecode)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_golden(case, capsys, monkeypatch):
    name, fn, make, config, fused = case
    # one part per module, as on a machine of one CPU: the same C on any machine
    monkeypatch.setattr(toolchain, "compile_jobs", lambda: 1)
    text = dumps(fn, make(), config, capsys)
    assert ("=== pijit: fused kernels (C) ===" in text) == fused, name
    shared, bytecode = split_bytecode(text)
    files = {GOLDEN / f"{name}.txt": shared, GOLDEN / f"{name}.{VERSION_TAG}.txt": bytecode}
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        for path, now in files.items():
            path.write_text(now)
        return
    for path, now in files.items():
        assert path.exists(), f"{path} is missing: run `make golden` and commit it"
        expected = path.read_text()
        if now != expected:
            diff = list(difflib.unified_diff(expected.splitlines(), now.splitlines(),
                                             f"golden/{path.name}", "now", lineterm=""))
            pytest.fail(f"{name}: the dumps changed (if meant: make golden)\n"
                        + "\n".join(diff[:120]) + ("\n..." if len(diff) > 120 else ""))


def test_every_golden_file_has_a_case():
    """A case renamed or dropped leaves no stale golden file behind; each case has its
    bytecode for every supported Python version."""
    names = {c[0] for c in CASES}
    assert len(names) == len(CASES)
    files = {p.name for p in GOLDEN.glob("*.txt")}
    assert files == {f"{n}{suffix}.txt" for n in names for suffix in ("", ".py311", ".py312",
                                                                          ".py313")}
