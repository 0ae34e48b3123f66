"""The real-code corpus (benchmarks/programs): every program, with each of its functions and
methods jitted as a user who jits a whole program would, gives plain Python's results bit
for bit, whether every signature compiles at its first call (the suite's PIJIT_ADAPTIVE=0:
every function is captured) or adaptively (the default: what users get)."""
import pytest

import pijit
from benchmarks import corpus, programs
from pijit import eval_frame


def run_both(name, runs=2):
    plain_mod, jit_mod = programs.load(name), programs.load(name, jitted=True)
    try:
        n = plain_mod.SIZES["tiny"]
        for _ in range(runs):
            expected, got = plain_mod.main(n), jit_mod.main(n)
            assert corpus.same(got, expected), (name, got, expected)
        return corpus.what_pijit_did(jit_mod)
    finally:
        programs.unload(plain_mod)
        programs.unload(jit_mod)




@pytest.mark.parametrize("name", programs.NAMES)
def test_program_compiled_at_first_call_gives_plain_results(name):
    did = run_both(name)
    assert did["entries"] > 0           # pijit decided each call, not waved through


@pytest.mark.parametrize("name", programs.NAMES)
def test_program_under_default_options_gives_plain_results(name, adaptive):
    run_both(name, runs=3)


def test_corpus_has_the_programs_the_runner_reports():
    assert len(programs.NAMES) >= 40
    for name in programs.NAMES:
        module = programs.load(name)
        try:
            assert callable(module.main) and {"tiny", "quick"} <= set(module.SIZES)
        finally:
            programs.unload(module)


def test_the_cpu_clock_times_each_run(monkeypatch):
    """--cpu-clock: every run of both variants is timed on corpus.cpu_seconds (here a stand-in
    ticking 1 s a read), not on the wall clock."""
    ticks = iter(range(1000))
    monkeypatch.setitem(corpus.CLOCKS, "cpu", lambda: float(next(ticks)))
    r = corpus.run_program("bubble_sort", size="tiny", rounds=3, clock="cpu")
    assert r["plain_s"] == [1.0] * 3 and r["jit_s"] == [1.0] * 3 and r["mismatches"] == 0
    corpus.run_program("bubble_sort", size="tiny", rounds=1)       # the wall clock
    assert next(ticks) == 12                    # two reads a run, six runs, none since


def test_jit_all_wraps_functions_and_methods():
    module = programs.load("particles", jitted=True)
    try:
        names = {name for name, _ in corpus.jitted_functions(module)}
    finally:
        programs.unload(module)
    assert {"main", "Vec.__init__", "Vec.add", "Particle.step", "World.run"} <= names


def test_a_pure_python_program_is_given_back_to_cpython(adaptive):
    """Default options: the hot helper of a pure-Python program is given back to CPython
    (its calls are CPython's own from then on, counted nowhere); results are plain Python's."""
    jit_mod = programs.load("caesar", jitted=True)
    plain_mod = programs.load("caesar")
    try:
        assert corpus.same(jit_mod.main(20), plain_mod.main(20))
        assert eval_frame.vectorcall_of(jit_mod.shift_char) == "cpython"
        assert pijit.code_info(jit_mod.shift_char)["inlined"] == 1
        before = pijit.stats(jit_mod.shift_char)
        for _ in range(100):
            assert jit_mod.shift_char("q", 3) == "t"
        assert pijit.stats(jit_mod.shift_char) == before
    finally:
        programs.unload(jit_mod)
        programs.unload(plain_mod)


def test_a_pure_python_program_ends_up_plain(adaptive):
    """Every function of a pure-Python program (caesar: string work, a generator expression,
    a Counter) jitted: after a few runs its hot helper has only plain entries and is called
    without the hook; results are plain Python's. (From 3.12 the helper, called a thousand
    times in a row with the same argument types for nothing, is given back to CPython before
    it gets hot: test_a_pure_python_program_is_given_back_to_cpython.)"""
    jit_mod = programs.load("caesar", jitted=True,
                            jit_config={"compile_after_ms": 1, "inline_plain": False})
    plain_mod = programs.load("caesar")
    try:
        # compile_after_ms counts CPU time: on a loaded machine a run of main gets a small
        # share of it, so run until the helper is hot.
        for _ in range(200):
            assert corpus.same(jit_mod.main(20), plain_mod.main(20))
            if pijit.stats(jit_mod.shift_char)["compile_count"]:
                break
        stats = pijit.stats(jit_mod.shift_char)
        assert stats["compile_count"] >= 1
        assert all(e["fallback"] and e["fallback"].startswith("no array work")
                   for e in stats["entries"])
        # how many of the program's calls were bypassed depends on what else got hot (a
        # caller compiled may inline the helper); a call of the plain signature itself is
        before = stats["bypassed"]
        for _ in range(100):
            assert jit_mod.shift_char("q", 3) == "t"
        assert pijit.stats(jit_mod.shift_char)["bypassed"] == before + 100
    finally:
        programs.unload(jit_mod)
        programs.unload(plain_mod)
