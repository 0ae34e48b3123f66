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


_sweep_spec = importlib.util.spec_from_file_location("mutants_sweep",
                                                     HERE / "mutants" / "sweep.py")
sweep = importlib.util.module_from_spec(_sweep_spec)
_sweep_spec.loader.exec_module(sweep)


def _probe_module(tmp_path, monkeypatch):
    """sweep.py's probe module as a probed worker runs it (its exit hook not registered)."""
    import atexit
    monkeypatch.setenv("PIJIT_SWEEP_WORK", str(tmp_path))
    monkeypatch.setattr(atexit, "register", lambda f: f)
    namespace = {}
    exec(sweep.PROBE_MODULE, namespace)
    return namespace


def test_probe_worker_cut_off_mid_write_leaves_no_half_map(tmp_path, monkeypatch):
    """A worker stopped while writing its hits must leave no hits-<pid>.json that parses
    partly (last session's map lost one worker's tests so)."""
    probe = _probe_module(tmp_path, monkeypatch)
    probe["hits"]["tests/a.py::t"] = {1, 2}
    probe["hits"]["tests/b.py::t"] = {object()}    # json.dump fails after writing a.py's
    with pytest.raises(TypeError):
        probe["_dump"]()
    assert list(tmp_path.glob("hits-*.json")) == []
    del probe["hits"]["tests/b.py::t"]
    probe["_dump"]()
    assert sweep.read_hits(tmp_path) == ({1: {"tests/a.py::t"}, 2: {"tests/a.py::t"}}, [])


def test_probe_map_reports_an_unreadable_hits_file_and_keeps_the_others(tmp_path):
    (tmp_path / "hits-1.json").write_text('{"tests/a.py::t": [3], "tests/b.py::u": [4]}')
    (tmp_path / "hits-2.json").write_text('{"tests/c.py::v": [3, 5')
    covered, unreadable = sweep.read_hits(tmp_path)
    assert covered == {3: {"tests/a.py::t"}, 4: {"tests/b.py::u"}}
    assert [pathlib.Path(f).name for f, _ in unreadable] == ["hits-2.json"]


def _c_mutants(text, py=True):
    return sorted(sweep.snippet(text, s["edits"])[1].strip() for s in sweep.c_sites(text, py))


def test_c_sites_mutate_the_c_text_of_strings_only():
    """A planted fault in a C generator is a change of the C text in its strings: binary
    operators between blanks, integers, casts, min/max calls; not the f-string's Python
    expressions, C comments, docstrings, error messages, `*p`, `&x`, `->` or `a<<b`."""
    text = ('def f(n, ct):\n'
            '    """Doc: i < n."""\n'
            '    if n < 0:\n'
            '        raise ValueError("n < 0")\n'
            '    return f"if (i < {n + 1}) x = ({ct})fmin(*p, &q->a); /* i < 2 */"\n')
    assert _c_mutants(text) == [
        'return f"if (i < {n + 1}) x = ({ct})fmax(*p, &q->a); /* i < 2 */"',
        'return f"if (i <= {n + 1}) x = ({ct})fmin(*p, &q->a); /* i < 2 */"']
    assert _c_mutants('OPS = {"lt": "<", "s": "a<<b", "k": "x = (double)y + 1;"}\n') == [
        'OPS = {"lt": "<", "s": "a<<b", "k": "x = (double)y + 2;"}',
        'OPS = {"lt": "<", "s": "a<<b", "k": "x = (double)y - 1;"}',
        'OPS = {"lt": "<", "s": "a<<b", "k": "x = (float)y + 1;"}',
        'OPS = {"lt": "<=", "s": "a<<b", "k": "x = (double)y + 1;"}']


def test_c_sites_of_a_c_file_skip_its_strings_includes_and_comments():
    text = ('#include <a.h>\n'
            'static int f(int n) /* n > 0 */\n'
            '{\n'
            '    return n == 0 ? puts("a + b") : n;\n'
            '}\n')
    assert _c_mutants(text, py=False) == ['return n != 0 ? puts("a + b") : n;',
                                          'return n == 1 ? puts("a + b") : n;']
    assert {s["func"] for s in sweep.c_sites(text, py=False)} == {"f"}
