"""Reports and dumps: explain, code_info, print_after_all and friends, PIJIT_LOG channels,
and the README's jit_config table kept equal to the option table."""
import functools
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pijit
from pijit.config import OPTIONS

ROOT = pathlib.Path(__file__).resolve().parent.parent


def scaled_exp(x, y):
    z = np.exp(x) * 2.0
    return z + y.sum(axis=0)


X = np.ones((2, 3), dtype=np.float32)
Y = np.arange(6.0).reshape(2, 3)


def test_explain_fields():
    report = pijit.explain(pijit.jit(scaled_exp), X, Y)
    assert report.graph_count == 1 and report.graph_break_count == 0
    assert report.ops_per_graph == [["exp", "mul", "sum", "add"]]
    assert report.op_count == 4 and report.fallback is None
    assert "x: ndarray float32[2,3] C" in report.guards
    assert "np is <module numpy>" in report.guards
    assert "CALL" in report.bytecode and "RETURN_VALUE" in report.bytecode
    text = str(report)
    assert "Graph count: 1" in text and "exp(%0)  : float32[2,3]" in text


def prints_twice(x):
    y = x + 1
    print(end="")       # a break: the rest runs in a resume function
    z = y * 2
    print(end="")       # and another, in the resume function
    return z - 3


def test_code_info_counts_the_graph_breaks_explain_reports():
    """break_count counts graph breaks, those of the resume functions too (it was the number
    of plain-Python entries: 0 here)."""
    f = pijit.jit(prints_twice)
    report = pijit.explain(f, Y)
    assert (report.graph_count, report.graph_break_count) == (3, 2), report
    f(Y)
    info = pijit.code_info(f)
    assert (info["compile_count"], info["break_count"]) == (1, 2), info


@pytest.mark.parametrize("how", ["jitted", "plain"])
def test_explain_reports_the_graphs_of_a_first_call_adaptive_would_run_plain(
        monkeypatch, how):
    monkeypatch.setenv("PIJIT_ADAPTIVE", "1")       # the suite turns it off for every function
    fn = pijit.jit(scaled_exp) if how == "jitted" else scaled_exp
    report = pijit.explain(fn, X, Y)
    assert report.graph_count == 1 and report.ops_per_graph == [["exp", "mul", "sum", "add"]]
    if how == "jitted":             # and the function itself still defers its first calls
        fn(X, Y)
        assert pijit.code_info(fn)["compile_count"] == 0


def test_explain_of_a_graph_break_names_reason_and_line():
    def f(x):
        y = x + 1
        print(y)      # the line reported
        return y * 2

    report = pijit.explain(pijit.jit(f), X)
    assert report.graph_count == 2 and report.graph_break_count == 1
    assert report.ops_per_graph == [["add"], ["mul"]]
    (brk,) = report.break_reasons
    assert brk["lineno"] == f.__code__.co_firstlineno + 2 and brk["filename"] == __file__
    assert "print" in brk["reason"] and report.fallback is None
    assert "Break reason 1: call to a function pijit cannot capture: print" in str(report)


def test_code_info_and_stats():
    f = pijit.jit(scaled_exp)
    pijit.reset(f)
    assert pijit.code_info(f)["state"] == "candidate"
    f(X, Y)
    f(X, Y)
    f(X.astype(np.float64), Y)
    info = pijit.stats(f)
    assert info["state"] == "callable"
    assert info["compile_count"] == 2 and info["call_count"] == 3
    assert info["cache_hits"] == 1 and info["cache_misses"] == 2
    assert len(info["entries"]) == 2
    assert info["recompile_reasons"] == ["x: expected float32[2,3] C, got float64[2,3] C"]



def test_code_info_says_frozen_past_limit_graph_count():
    """Past limit_graph_count the code's entries still serve their inputs and other inputs run
    plain: code_info says `frozen` (it said `callable`, the state of a code that still
    captures new inputs)."""
    f = pijit.jit(scaled_exp, jit_config={"limit_graph_count": 1})
    pijit.reset(f)
    f(X, Y)
    f(X.astype(np.float64), Y)
    f(X, Y)
    info = pijit.stats(f)
    assert info["state"] == "frozen", info
    assert any("limit_graph_count" in r for r in info["eager_fallbacks"]), info
    assert info["compile_count"] == 1 and info["cache_hits"] == 1, info

def test_int64_of_another_c_type_is_a_signature_of_its_own():
    """int64 as C long and as C long long compare equal as dtypes, but NumPy's results keep
    the input's type (dtype.char): each gets an entry, and the reason names the type."""
    f = pijit.jit(lambda a: a * 3 + 1)
    a = np.arange(10, dtype=np.int64)
    b = a.astype(np.longlong)
    assert a.dtype.num != b.dtype.num
    for x in (a, b, a, b):
        got, want = f(x), x * 3 + 1
        assert got.dtype.char == want.dtype.char and np.array_equal(got, want)
    info = pijit.stats(f)
    assert info["compile_count"] == 2 and info["cache_hits"] == 2
    (reason,) = info["recompile_reasons"]
    assert reason == f"a: expected int64[10] C/F, got int64 (type {b.dtype.char!r})[10] C/F"


def test_print_after_all(capsys):
    f = pijit.jit(scaled_exp, jit_config={"print_after_all": True})
    pijit.reset(f)
    f(X, Y)
    err = capsys.readouterr().err
    for title in ("original bytecode", "captured graph", "compiled graph",
                  "fused kernels (C)", "guards", "transformed bytecode"):
        assert f"=== pijit: {title}" in err
    assert "%1 = exp(%0)  : float32[2,3]" in err
    assert "=== pijit: compiled graph (cfused backend) ===" in err
    kernels = err.split("=== pijit: fused kernels (C) ===")[1].split("=== pijit:")[0]
    assert "pj_body" in kernels and "pj_module_def" not in kernels  # no prelude
    assert "LOAD_GLOBAL" in err                  # the original bytecode
    assert "y: ndarray float64[2,3] C" in err
    f(X, Y)                                       # a hit prints nothing
    assert capsys.readouterr().err == ""


def test_print_guard_and_print_bb_alone(capsys):
    f = pijit.jit(scaled_exp, jit_config={"print_guard": True})
    f(X, Y)
    err = capsys.readouterr().err
    assert "=== pijit: guards ===" in err and "captured graph" not in err
    g = pijit.jit(lambda x: x * 3, jit_config={"print_bb": True})
    g(X)
    err = capsys.readouterr().err
    assert "=== pijit: original bytecode ===" in err and "guards" not in err


def run_python(code, **env):
    full_env = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=full_env, cwd=ROOT, timeout=120)


PROGRAM = """
    import numpy as np, pijit
    @pijit.jit
    def f(x):
        return x * 2
    @pijit.jit
    def g(x):
        print("side effect")
        return x
    f(np.ones(3)); f(np.ones(4, dtype=np.int32)); g(np.ones(2))
    print("compiles", pijit.stats(f)["compile_count"])
"""


def test_log_channels():
    proc = run_python(PROGRAM, PIJIT_LOG="graph_breaks,recompiles,guards,graph,bytecode")
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    assert "[pijit.guards]" in err and "x: ndarray float64[3] C" in err
    assert "[pijit.recompiles]" in err and "recompiling f" in err
    assert "[pijit.graph]" in err and "mul(%0, 2)" in err
    assert "[pijit.bytecode]" in err
    assert "[pijit.graph_breaks]" in err and "graph break in g" in err
    assert "<string>:8" in err             # the user's file:line of the print


def test_no_log_output_by_default():
    proc = run_python(PROGRAM)
    assert proc.returncode == 0 and proc.stderr == ""
    assert "compiles 2" in proc.stdout


def test_pijit_disable_env_runs_plain():
    proc = run_python(PROGRAM, PIJIT_DISABLE="1")
    assert proc.returncode == 0, proc.stderr
    assert "compiles 0" in proc.stdout


def test_readme_option_table_matches_options():
    readme = (ROOT / "README.md").read_text()
    rows = {line.split("|")[1].strip().strip("`"): line for line in readme.splitlines()
            if line.startswith("| `")}
    assert set(rows) == {o.name for o in OPTIONS}
    for option in OPTIONS:
        cells = [c.strip() for c in rows[option.name].split("|")[1:-1]]
        assert cells[1] == option.type.__name__
        assert cells[2] == f"`{option.default!r}`"
        assert option.doc in cells[3]


class _Scaler:
    def __init__(self):
        self.k = 3.0

    def apply(self, x, y):
        return np.exp(x) * self.k + y

    def __call__(self, x, y):
        return self.apply(x, y) - 1


def test_explain_jits_any_callable_it_can():
    s = _Scaler()
    for fn, args in ((s.apply, (X, Y)), (s, (X, Y)), (functools.partial(s.apply, X), (Y,)),
                     (functools.partial(_Scaler.apply, s, y=Y), (X,)),
                     (pijit.jit(_Scaler.apply).__get__(s), (X, Y))):
        report = pijit.explain(fn, *args)
        assert (report.graph_count, report.graph_break_count) == (1, 0), (fn, report)
        assert report.fallback is None and "exp" in report.ops_per_graph[0]


def test_explain_rejects_what_it_cannot_jit():
    for bad, kind in ((len, "a builtin: <built-in function len>"), (_Scaler, "the class _Scaler"),
                      (3, "int: 3"), (np.exp, "ufunc")):
        with pytest.raises(TypeError, match="pijit.explain expects a Python function") as e:
            pijit.explain(bad, X)
        assert kind in str(e.value)


def times_k(x, k=2.0):
    return x * k


@pytest.mark.parametrize("options", [{}, {"jit_level": "O0"}], ids=["first jit", "variant"])
def test_explain_takes_the_functions_new_defaults_as_a_call_does(options):
    """A jitted copy takes its user's function's changes at its next call; explain, which
    runs a copy of the jitted one, reported the call with the old default (`k == 2.0`)."""
    import types
    f = types.FunctionType(times_k.__code__, globals(), "times_k", (2.0,))
    first = pijit.jit(f)
    jitted = pijit.jit(f, jit_config=options) if options else first
    x = np.arange(3.0)
    assert jitted(x).tobytes() == f(x).tobytes()
    f.__defaults__ = (5.0,)
    report = pijit.explain(jitted, x)
    assert report.graph_count == 1 and "k == 5.0" in report.guards, report.guards
    assert report.ops_per_graph == [["mul"]]
    assert jitted(x, 5.0).tobytes() == f(x).tobytes()
