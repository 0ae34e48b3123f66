"""The planted faults of tests/mutants/ still apply to the tree (`make mutants` runs them; this
catches a snippet that a change moved, in the ordinary suite, so the change refreshes it),
and each names tests that exist."""
from __future__ import annotations

import importlib.util
import pathlib
import re

import pytest

HERE = pathlib.Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("mutants_run", HERE / "mutants" / "run.py")
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)

MUTANTS = run.load()


def test_the_set_is_standing():
    """At least 25 mutants (issue 17), over the C guards, the hook, capture, the graph passes
    and fusion, the C renderer, bytecode generation and the runtime."""
    assert len(MUTANTS) >= 25
    files = {m["file"] for m in MUTANTS}
    for part in ("csrc/guards.c", "pijit/graph/fuse.py", "pijit/backends/cfused/render.py",
                 "pijit/runtime.py"):
        assert part in files, part


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m["name"] for m in MUTANTS])
def test_mutant_applies_and_names_real_tests(mutant):
    assert run.stale(mutant) == "", f"stale: refresh tests/mutants/{mutant['name']}.toml"
    assert mutant["search"] != mutant["replace"]
    assert mutant["breaks"].strip() and "\n" not in mutant["breaks"]
    args = mutant["tests"]
    for i, arg in enumerate(args):
        if arg.startswith("-") or (i and args[i - 1] in ("-k", "-m")):
            continue
        path, _, test = arg.partition("::")
        source = run.ROOT / path
        assert source.exists(), arg
        if test:
            name = test.split("::")[-1].split("[")[0]
            assert re.search(rf"^\s*(def|class) {re.escape(name)}\b", source.read_text(),
                             re.M), arg


def test_load_rejects_an_unknown_key(tmp_path, monkeypatch):
    """A misspelt `python` key would widen a version's mutant to every version."""
    (tmp_path / "x.toml").write_text('breaks = "b"\nfile = "f"\nsearch = "s"\nreplace = "r"\n'
                                     'tests = ["t"]\npythons = ["3.12"]\n')
    monkeypatch.setattr(run, "HERE", tmp_path)
    with pytest.raises(SystemExit, match="unknown keys.*pythons"):
        run.load()
