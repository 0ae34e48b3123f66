"""When pijit pays for capture and for the C compiler (adaptive): scalar arguments that varied
while a signature was not hot are captured dynamic at once, time spent compiling inside a
plain run does not make its caller hot, and a promotion whose kernels are not in the disk
cache compiles them in the background while the entry keeps running on the NumPy backend.
Decisions are asserted on a fake clock and on counters, never on timings; every result is
compared with plain Python's."""
import logging
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import pijit
from differential import assert_equal_values
from pijit import eval_frame
from pijit.backends.cfused import build as kernel_build


@pytest.fixture(autouse=True)
def adaptive(monkeypatch, tmp_path):
    """Adaptive on (the suite compiles at the first call), and a kernel cache of this test's
    own: its kernels are never on disk before it runs."""
    monkeypatch.delenv("PIJIT_ADAPTIVE")
    monkeypatch.setenv("PIJIT_CACHE_DIR", str(tmp_path / "kernels"))
    yield
    eval_frame.set_perf_clock(None)
    for build in list(kernel_build._builds.values()):
        build.thread.join()


class Tick:
    """Every read of the clock advances it by `step` seconds: a timed run lasts `step`."""

    def __init__(self, step):
        self.now, self.step = 0.0, step

    def __call__(self):
        self.now += self.step
        return self.now


def jit(fn, **config):
    """pijit.jit(fn) with these options, with no entry left from another test (the code
    object, and with it its entries, outlives one test)."""
    jitted = pijit.jit(fn, jit_config=config)
    pijit.reset(jitted)
    return jitted


def compiles(fn):
    return pijit.stats(fn)["compile_count"]


def scale_by(x, n):
    return x * n + n


def test_a_scalar_that_varied_while_not_hot_is_captured_dynamic():
    """n took several values in the plain runs: the first entry leaves it dynamic, so later
    values hit it (it used to specialise on the value of the call that became hot, then
    recompile at the next one)."""
    eval_frame.set_perf_clock(Tick(0.004))
    jitted = jit(scale_by, **{"compile_after_ms": 10, "perf_statistics": False,
                                             "jit_level": "O0"})
    x = np.linspace(0.0, 1.0, 50)
    for n in range(1, 8):
        assert_equal_values(jitted(x, n), scale_by(x, n))
    assert pijit.stats(jitted)["deferred"] == 3
    assert compiles(jitted) == 1 and len(pijit.stats(jitted)["entries"]) == 1


def test_a_scalar_that_stayed_the_same_is_still_specialised():
    """The rule's other side: a value that never changed while not hot is a constant of the
    entry (a shape or a branch may depend on it): another value misses it."""
    eval_frame.set_perf_clock(Tick(0.004))
    jitted = jit(scale_by, compile_after_ms=10, perf_statistics=False, jit_level="O0")
    x = np.linspace(0.0, 1.0, 50)
    for n in (3, 3, 3, 3, 4):
        assert_equal_values(jitted(x, n), scale_by(x, n))
    assert compiles(jitted) == 1 and pijit.stats(jitted)["deferred"] == 4


def test_varied_scalars_are_seen_on_the_hooks_path_too():
    """Calls passing keywords (which the Wrapper leaves to the hook) note their values the
    same way."""
    eval_frame.set_perf_clock(Tick(0.004))
    jitted = jit(scale_by, compile_after_ms=10, perf_statistics=False, jit_level="O0")
    x = np.linspace(0.0, 1.0, 50)
    for n in range(1, 8):
        assert_equal_values(jitted(x, n=n), scale_by(x, n=n))
    assert compiles(jitted) == 1 and pijit.stats(jitted)["deferred"] == 3


def test_time_spent_compiling_inside_a_plain_run_does_not_make_its_caller_hot():
    """outer's first plain run compiles inner (4 ms on this clock of its 12): only the 8 ms
    of its own count, so outer is hot at its third call, not its second."""
    inner = jit(scale_by, **{"compile_after_ms": 0, "promote_after": 0,
                                            "promote_after_ms": 0, "perf_statistics": False,
                                            "jit_level": "O0"})

    def outer(x):
        return inner(x, 2) - 1
    jitted = jit(outer, **{"compile_after_ms": 10, "perf_statistics": False,
                                          "jit_level": "O0"})
    eval_frame.set_perf_clock(Tick(0.004))
    x = np.linspace(0.0, 1.0, 50)
    for calls in (1, 2):
        assert_equal_values(jitted(x), outer(x))
        assert compiles(jitted) == 0, calls
    assert compiles(inner) == 1
    assert_equal_values(jitted(x), outer(x))
    assert compiles(jitted) == 1


def chain(x):
    return np.tanh(x * 0.5) * 2 + x * x


def levels_until_promoted(jitted, x, calls):
    """Calls jitted(x) `calls` times, each result compared with plain Python's; -> the
    entry's level after each call."""
    levels = []
    for _ in range(calls):
        assert_equal_values(jitted(x), chain(x))
        levels.append(pijit.stats(jitted)["entries"][0]["level"])
    return levels


def test_a_promotion_compiles_in_the_background_and_switches_when_built(caplog):
    """The kernels are not on disk: the promotion starts their build and returns at once;
    the entry runs on the NumPy backend meanwhile (bit-identical results), and the first
    check after the build ended switches it to the fused kernels."""
    jitted = jit(chain, **{"compile_after_ms": 0, "promote_after_ms": 0,
                                          "perf_statistics": False})
    x = np.linspace(-2, 2, 1000)
    with caplog.at_level(logging.INFO, logger="pijit.perf"):
        before = levels_until_promoted(jitted, x, 3)
        assert kernel_build.pending_builds() + sum(
            1 for b in kernel_build._builds.values() if b.error is None) >= 1
        for build in list(kernel_build._builds.values()):
            build.thread.join()
        after = levels_until_promoted(jitted, x, 8)
    assert before == ["O0"] * 3
    assert after[-1] == "O1" and after.count("O0") <= 4       # checks at hits 1, 2, 4, 8 apart
    assert "in the background" in caplog.text and "promoted to O1" in caplog.text


def test_a_failing_background_build_keeps_the_numpy_entry_and_says_so(monkeypatch, caplog):
    monkeypatch.setenv("CC", "false")           # a compiler that always fails
    jitted = jit(chain, **{"compile_after_ms": 0, "promote_after_ms": 0,
                                          "perf_statistics": False})
    x = np.linspace(-2, 2, 1000)
    with caplog.at_level(logging.INFO, logger="pijit.perf"):
        levels_until_promoted(jitted, x, 2)
        for build in list(kernel_build._builds.values()):
            build.thread.join()
        levels = levels_until_promoted(jitted, x, 8)
    assert levels == ["O0"] * 8
    assert "background build of its kernels failed" in caplog.text


def test_without_background_compile_the_promotion_waits_for_the_compiler():
    jitted = jit(chain, **{"compile_after_ms": 0, "promote_after_ms": 0,
                                          "perf_statistics": False,
                                          "background_compile": False})
    x = np.linspace(-2, 2, 1000)
    assert levels_until_promoted(jitted, x, 2) == ["O0", "O1"]
    assert kernel_build.pending_builds() == 0


def test_adaptive_off_compiles_at_once_and_synchronously():
    builds = len(kernel_build._builds)
    jitted = jit(chain, **{"adaptive": False})
    x = np.linspace(-2, 2, 1000)
    assert levels_until_promoted(jitted, x, 1) == ["O1"]
    assert len(kernel_build._builds) == builds


def _alive(pid, wait_s=10.0):
    """Whether process `pid` still runs `wait_s` after its parent exited: a killed child is a
    zombie until init (or a subreaper) reaps it, which on a loaded machine took longer than
    the test's next line (a zombie has run its last)."""
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return False
        except FileNotFoundError:
            return False
        time.sleep(0.05)
    return True


def test_a_build_running_at_exit_is_stopped_and_leaves_nothing(tmp_path):
    """A process that exits while its background build runs kills the compiler (no process
    outlives it) and leaves no module, half-written or not, in the cache."""
    slow_cc = tmp_path / "slow-cc"
    pid_file = tmp_path / "cc.pid"
    slow_cc.write_text(f'#!/bin/sh\n[ "$1" = --version ] && exec gcc --version\n'
                       f'echo $$ >> {pid_file}\nsleep 60\nexec gcc "$@"\n')
    slow_cc.chmod(0o755)
    cache = tmp_path / "cache"
    script = textwrap.dedent("""
        import numpy as np, pijit
        from pijit.backends.cfused import build
        def chain(x):
            return np.tanh(x * 0.5) * 2 + x * x
        j = pijit.jit(chain, jit_config={"compile_after_ms": 0, "promote_after_ms": 0,
                                         "perf_statistics": False})
        x = np.linspace(-2, 2, 1000)
        for _ in range(3):
            assert np.array_equal(j(x), chain(x))
        assert build.pending_builds() == 1
        import os, time
        while not os.path.exists(PID_FILE):     # the compiler has started (and said so)
            time.sleep(0.01)
    """).replace("PID_FILE", repr(str(pid_file)))
    env = dict(os.environ, CC=str(slow_cc), PIJIT_CACHE_DIR=str(cache))
    env.pop("PIJIT_ADAPTIVE", None)
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=120)
    for pid in pid_file.read_text().split():
        assert not _alive(int(pid)), f"compiler {pid} outlived the process"
    left = [p.name for p in cache.rglob("*") if p.suffix in (".so", ".c", ".o")]
    assert left == []


def smooth(a):
    out = np.empty_like(a)
    out[0] = a[0]
    for i in range(1, a.shape[0]):
        out[i] = 0.5 * out[i - 1] + a[i]
    return out


@pytest.fixture
def python_nest_runs(monkeypatch):
    """Runs of a loop nest's Python form (the NumPy backend's, or a kernel's hand-over)."""
    from pijit.loopnest import node as nest_node
    seen = []
    run, resume = nest_node.NestOp.__call__, nest_node.NestOp.resume

    def counted_run(self, *args):
        seen.append("run")
        return run(self, *args)

    def counted_resume(self, block, *state):
        seen.append(block)
        return resume(self, block, *state)
    monkeypatch.setattr(nest_node.NestOp, "__call__", counted_run)
    monkeypatch.setattr(nest_node.NestOp, "resume", counted_resume)
    return seen


def nest_calls(jitted, x, calls):
    """Calls jitted(x) `calls` times, each result compared with plain Python's; -> (level,
    runs plain until promoted) of the entry after each call."""
    out = []
    for _ in range(calls):
        assert_equal_values(jitted(x), smooth(x))
        entry = eval_frame.entry_stats(smooth.__code__)[0]
        out.append((pijit.stats(jitted)["entries"][0]["level"], entry["plain_pending"]))
    return out


@pytest.mark.parametrize("background", [False, True])
def test_a_loop_nest_runs_plain_until_its_kernel_is_built(python_nest_runs, background):
    """A loop nest on the NumPy backend is generated Python, slower than the bytecode it came
    from: until the promotion its entry's calls run plain Python (timed: 8 ms each on the
    clock here, so the promotion comes at the 4th hit, past 20 ms), and the nest's Python
    form never runs, not even built for the NumPy backend; once built, its C kernel runs
    (in the background: from the check at the hit after the one that started the build).
    Each case its own dtype: its own kernel, which the process has not loaded yet."""
    eval_frame.set_perf_clock(Tick(0.008))
    jitted = jit(smooth, **{"compile_after_ms": 0, "promote_after_ms": 20,
                            "perf_statistics": False, "background_compile": background})
    x = np.linspace(-1, 1, 200, dtype=np.float32 if background else np.float64)
    before = nest_calls(jitted, x, 4)               # the capture's call, then 3 timed hits
    assert before == [(None, True)] * 4
    promoting = nest_calls(jitted, x, 1)
    for build in list(kernel_build._builds.values()):
        build.thread.join()
    after = nest_calls(jitted, x, 3)
    assert promoting == [(None, True) if background else ("O1", False)]
    assert after == [("O1", False)] * 3
    assert python_nest_runs == []
    assert pijit.explain(smooth, x).ops_per_graph[0].count("loop_nest") == 1


def test_a_loop_nest_whose_promotion_fails_runs_plain_for_good(monkeypatch, python_nest_runs,
                                                                caplog):
    """No NumPy-backend form to fall back on: plain Python it is, and the log says so."""
    from pijit import compile_frame

    def failing(*args, **kwargs):
        raise RuntimeError("no compiler today")
    monkeypatch.setattr(compile_frame.cfused, "compile_graph", failing)
    jitted = jit(smooth, **{"compile_after_ms": 0, "promote_after_ms": 0,
                            "perf_statistics": False, "background_compile": False})
    x = np.linspace(-1, 1, 200)
    with caplog.at_level(logging.INFO, logger="pijit.perf"):
        assert nest_calls(jitted, x, 6) == [(None, True)] * 6
    assert eval_frame.entry_stats(smooth.__code__)[0]["hits"] == 5
    assert python_nest_runs == []
    assert "no compiler today); the entry runs as plain Python" in caplog.text


def test_by_default_a_signature_compiles_once_its_plain_calls_took_100_ms():
    """The default compile_after_ms: capture costs 2-30 ms an entry, which most calls of a
    short program never win back (README: the corpus's geometric mean by budget). Each
    plain run lasts 1/64 s on the clock here: 7 runs are 109 ms."""
    eval_frame.set_perf_clock(Tick(1 / 64))
    jitted = jit(chain)
    x = np.linspace(-2, 2, 100)
    for _ in range(7):
        assert_equal_values(jitted(x), chain(x))
    assert compiles(jitted) == 0
    assert_equal_values(jitted(x), chain(x))
    assert compiles(jitted) == 1
