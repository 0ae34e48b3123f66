"""Calls pijit runs as plain Python (csrc/adapt.c, csrc/eval_frame.c's eval_outside): a
signature not hot yet, an entry that runs plain, a call the Wrapper bypasses. They run
outside the hook, as if no jitted call were in progress (unjitted code they call is not
seen by the hook, CPython inlines their calls), and jitted functions they call enter a
jitted call again. Asserted through what code inside such a call sees (the thread's jitted
depth, whether the hook is installed) and the hook's counters, never by timing."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pijit
from differential import assert_equal_values, assert_same
from pijit import eval_frame


# adaptive execution on (conftest's `adaptive`: the suite compiles at the first call)
pytestmark = pytest.mark.usefixtures("adaptive")


def fresh(fn):
    """A copy of fn with a code object of its own: the hook keeps its state per code."""
    code = fn.__code__.replace(co_name=fn.__code__.co_name)
    assert code is not fn.__code__
    return type(fn)(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def seen_by_hook():
    """Called from inside a jitted function's run: (this thread's jitted-call depth, is the
    hook installed?) as an unjitted helper sees them."""
    return eval_frame.depth(), eval_frame.is_installed()


def calls_helper(k):
    return seen_by_hook(), k + 1


def test_a_call_not_hot_yet_runs_outside_the_hook():
    """Its signature has not run for compile_after_ms: the call runs plain, as if no jitted
    call were in progress (its calls inlined, unjitted frames not seen by the hook)."""
    jitted = pijit.jit(fresh(calls_helper), jit_config={"compile_after_ms": 10_000})
    assert jitted(1) == ((0, False), 2)
    assert pijit.stats(jitted)["deferred"] == 1


def test_a_jitted_call_inside_a_plain_run_enters_the_hook_again():
    inner = pijit.jit(fresh(calls_helper), jit_config={"compile_after_ms": 10_000})

    def outer(k):
        return inner(k), seen_by_hook()
    jitted = pijit.jit(outer, jit_config={"compile_after_ms": 10_000})
    assert jitted(1) == (((0, False), 2), (0, False))
    assert pijit.stats(inner)["deferred"] == 1 and pijit.stats(jitted)["deferred"] == 1
    assert eval_frame.depth() == 0 and not eval_frame.is_installed()


def test_a_plain_entry_and_its_bypass_run_outside_the_hook():
    """compile_after_ms=0: captured at once, no array work -> a plain entry; its next calls
    skip the hook (bypassed), also when called from inside another jitted call."""
    inner = pijit.jit(fresh(calls_helper), jit_config={"compile_after_ms": 0})
    assert inner(1) == ((0, False), 2)          # compiled: the plain entry's first run
    stats = pijit.stats(inner)
    assert stats["compile_count"] == 1
    assert stats["entries"][0]["fallback"].startswith("no array work")

    def outer(k):
        return inner(k)
    jitted = pijit.jit(outer, jit_config={"compile_after_ms": 10_000})
    assert jitted(2) == ((0, False), 3)
    assert pijit.stats(inner)["bypassed"] >= 1


def test_a_plain_run_inside_a_compiled_call_runs_outside_it():
    """A jitted helper that runs plain, called by a compiled call's residual code (the
    helper breaks the graph), runs as if no jitted call were in progress (3.11: its frame
    does not go on under the hook, csrc/call_prefix.c)."""
    inner = pijit.jit(fresh(calls_helper), jit_config={"compile_after_ms": 0})
    assert inner(1) == ((0, False), 2)          # a plain entry

    def outer(x, k):
        y = x * 2.0
        return y, inner(k)
    jitted = pijit.jit(outer, jit_config={"adaptive": False})
    x = np.ones(3)
    for _ in range(2):
        y, got = jitted(x, 2)
        assert got == ((0, False), 3) and np.array_equal(y, x * 2.0)
    assert pijit.stats(jitted)["compile_count"] == 1 and pijit.stats(jitted)["cache_hits"] == 1


def with_default(k, step=1):
    return seen_by_hook(), k + step


def test_bypass_covers_calls_that_leave_defaults_out():
    jitted = pijit.jit(fresh(with_default), jit_config={"compile_after_ms": 0})
    assert jitted(1) == ((0, False), 2)
    before = pijit.stats(jitted)["bypassed"]
    assert jitted(5) == ((0, False), 6)         # the signature of (int, default int)
    assert jitted(5, 2) == ((0, False), 7)      # the same signature, passed in full
    assert pijit.stats(jitted)["bypassed"] == before + 2
    assert jitted(5, 2.5) == ((0, False), 7.5)  # another signature: not remembered
    assert pijit.stats(jitted)["bypassed"] == before + 2


def test_recursion_through_the_wrapper_in_a_plain_run():
    """A recursive jitted function run plain recurses through its Wrapper: each level is a
    plain call of its own, and the thread is back outside every jitted call after it."""
    def depth_of(n):
        return 0 if n == 0 else 1 + jitted(n - 1)
    jitted = pijit.jit(depth_of, jit_config={"compile_after_ms": 10_000})
    assert jitted(200) == 200
    assert pijit.stats(jitted)["deferred"] == 201
    assert eval_frame.depth() == 0 and not eval_frame.is_installed()


def scale(x, k):
    return x * k + 1.0


def test_once_compiled_a_signature_hits_its_entry_not_the_wrappers_plain_run():
    """The Wrapper runs a call plain by itself only while its code has no entry: once a
    signature compiled, its calls hit the entry (and other signatures miss in the hook)."""
    clock = [0.0]

    def tick():
        clock[0] += 0.004                   # every clock read: plain runs last 4 ms
        return clock[0]
    eval_frame.set_perf_clock(tick)
    jitted = pijit.jit(fresh(scale), jit_config={"compile_after_ms": 6, "perf_statistics": False,
                                          "promote_after": 0})
    x = np.linspace(0.0, 1.0, 16)
    for _ in range(2):                      # 4, then 8 ms: hot at the next call
        assert_equal_values(jitted(x, 2.0), scale(x, 2.0))
    assert pijit.stats(jitted)["deferred"] == 2 and pijit.stats(jitted)["compile_count"] == 0
    for _ in range(3):
        assert_equal_values(jitted(x, 2.0), scale(x, 2.0))
    stats = pijit.stats(jitted)
    assert stats["compile_count"] == 1 and stats["cache_hits"] == 2
    assert stats["deferred"] == 2


def test_deep_recursion_through_a_bypassed_wrapper_goes_as_deep_as_plain_python():
    """A pure-Python recursive function under default options ends up bypassed by pijit
    (run outside the hook), and with inline_plain off it is never given back to CPython:
    from 3.12 each level would still recurse in C through pijit's vectorcall, so the deep
    part of the call is given back for that call alone (wrapper.c deep_call); on 3.11
    pijit's prefix runs in the caller's evaluation loop (call_prefix.c). Either way the
    recursion goes as deep as plain Python's, and the function is pijit's after it."""
    src = textwrap.dedent("""
        import sys, pijit
        sys.setrecursionlimit(200000)

        @pijit.jit(jit_config={"compile_after_ms": 0, "inline_plain": False})
        def g(n):
            return 0 if n == 0 else 1 + g(n - 1)

        print(g(5), g(300))
        print(pijit.stats(g)["bypassed"] > 0)
        print(g(150000), pijit.eval_frame.vectorcall_of(g))
    """)
    env = {k: v for k, v in os.environ.items() if k != "PIJIT_ADAPTIVE"}
    proc = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["5", "300", "True", "150000", "pijit"]


def pure_loop(n):
    total = 0
    for i in range(n):
        total += (i * 7) % 5
    return total


def builds_arrays(n):
    a = np.zeros(64)
    for i in range(n):
        a = a * 1.5 + i
    return a


@pytest.fixture
def small_capture_budget(monkeypatch):
    """Capture of pure Python gives up past 32 steps and reads (PURE_CAPTURE_COST)."""
    from pijit.capture import interpreter
    monkeypatch.setattr(interpreter, "PURE_CAPTURE_COST", 32)


def test_capture_of_pure_python_past_its_budget_runs_plain(small_capture_budget):
    jitted = pijit.jit(fresh(pure_loop), jit_config={"compile_after_ms": 0,
                                                     "loop_nests": False})
    for n in (50, 60):                          # unrolled: hundreds of steps of capture
        assert jitted(n) == pure_loop(n)
    stats = pijit.stats(jitted)
    assert stats["compile_count"] == 1
    assert stats["entries"][0]["fallback"].startswith("no array work: runs as plain Python "
                                                      "(no array work in 32 steps and reads "
                                                      "of capture)")
    assert stats["bypassed"] == 1               # the second call: types remembered


def test_capture_that_found_array_work_goes_on_past_the_budget(small_capture_budget):
    jitted = pijit.jit(fresh(builds_arrays), jit_config={"compile_after_ms": 0,
                                                         "perf_statistics": False})
    assert_equal_values(jitted(30), builds_arrays(30))
    entry = pijit.stats(jitted)["entries"][0]
    assert entry["fallback"] is None and "mul" in " ".join(entry["ops"] or ())


def pure_then_arrays(n):
    total = 0
    for i in range(n):
        total += (i * 7) % 5
    return np.arange(4.0) * total


def pure_nested(n):
    total = 0
    for i in range(n):
        for j in range(n):
            total += i * j % 7
    return total


def copy_rows(rows):
    out = []
    for row in rows:
        out.append(row[:])
    return out


class JumpingClock:
    """time.perf_counter of a machine so loaded that a second passes between two readings."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += 1.0
        return self.now


@pytest.mark.parametrize("clock", ["real", "jumping"])
def test_what_capture_gives_up_on_does_not_depend_on_the_clock(monkeypatch, clock):
    """The budget is counted (steps walked, values read), not timed: under a clock that
    jumps a second at every reading, a capture whose array work follows 40 unrolled
    iterations of pure Python still finds it (a deadline in seconds gave it up at its first
    check), and pure Python (1600 unrolled iterations) is given up at the same count."""
    import time
    from pijit.capture.interpreter import PURE_CAPTURE_COST
    if clock == "jumping":
        monkeypatch.setattr(time, "perf_counter", JumpingClock())
    config = {"compile_after_ms": 0, "perf_statistics": False, "loop_nests": False}
    late = pijit.jit(fresh(pure_then_arrays), jit_config=config)
    assert_equal_values(late(40), pure_then_arrays(40))
    entry = pijit.stats(late)["entries"][0]
    assert entry["fallback"] is None and "mul" in entry["ops"]
    pure = pijit.jit(fresh(pure_nested), jit_config=config)
    assert pure(40) == pure_nested(40)
    assert pijit.stats(pure)["entries"][0]["fallback"].startswith(
        f"no array work: runs as plain Python (no array work in {PURE_CAPTURE_COST} steps "
        "and reads of capture)")


def test_values_read_count_toward_the_budget():
    """Copying 40 rows of 40 floats walks about 400 steps but reads 1,640 values (each row's
    items are wrapped and guarded, most of such a capture's time): given up as pure Python."""
    rows = [[float(i * 40 + j) for j in range(40)] for i in range(40)]
    jitted = pijit.jit(fresh(copy_rows), jit_config={"compile_after_ms": 0,
                                                     "loop_nests": False})
    assert jitted(rows) == copy_rows(rows)
    assert "steps and reads of capture" in pijit.stats(jitted)["entries"][0]["fallback"]


TABLE = np.arange(8.0)


def element_then_arrays(n):
    v = TABLE[1]                    # a getitem of one element: no array work
    a = TABLE * v                   # array work, found before the first check
    total = 0
    for i in range(n):
        total += i % 3
    return a + total


def test_array_work_after_a_node_without_work_keeps_capture_going(small_capture_budget):
    """The pure-Python check looks past a first node that touches no array (work.has_work
    stops at the first node with work, not at the first node)."""
    jitted = pijit.jit(fresh(element_then_arrays),
                       jit_config={"compile_after_ms": 0, "perf_statistics": False,
                                   "loop_nests": False})
    assert_equal_values(jitted(40), element_then_arrays(40))
    entry = pijit.stats(jitted)["entries"][0]
    assert entry["fallback"] is None
    assert entry["ops"][:2] == ["getitem", "mul"]


def test_strict_capture_never_gives_up(small_capture_budget):
    """fullgraph must capture all or raise: it is never abandoned (the plan may still run
    a graph without array work plain)."""
    jitted = pijit.jit(fresh(pure_loop), jit_config={"compile_after_ms": 0, "fullgraph": True,
                                                     "loop_nests": False})
    assert jitted(50) == pure_loop(50)
    assert "of capture" not in (pijit.stats(jitted)["entries"][0]["fallback"] or "")


def _filter(img):
    out = img * 0.25
    for k in range(1, 4):
        out = out + np.roll(img, k) * (0.25 / k) - img * 0.01
    return out


def filter_all(images):
    sums = []
    for img in images:
        sums.append(_filter(img).sum())
    return sums


def test_unrolling_stops_at_the_node_limit():
    """A loop over 80 arrays calling an inlined 20-node filter is not unrolled past
    UNROLLED_NODES: the loop runs as residual code calling its body's graph (capture of the
    unrolled copies cost far more than the function's plain run)."""
    from pijit.capture.ops_loop import UNROLLED_NODES
    images = [np.linspace(0.0, 1.0, 32) * k for k in range(80)]
    report = pijit.explain(filter_all, images)
    assert any("unrolling past %d graph nodes" % UNROLLED_NODES in b["reason"]
               for b in report.break_reasons)
    assert all(len(ops) <= UNROLLED_NODES + 32 for ops in report.ops_per_graph)
    assert_same(filter_all, images, graphs=None, breaks=None,
                jit_kwargs={"jit_config": {"adaptive": False}})


def chain_while(x):
    i = 0
    while i < 60:
        x = np.tanh(x) * 0.5 + x * 0.25 - 0.125
        i += 1
    return x


def test_a_while_loop_stops_unrolling_at_the_node_limit():
    """A while loop's length is not known before it ends: it unrolls up to UNROLLED_NODES,
    then runs as residual code (60 copies of its 6-node body would pass the limit)."""
    from pijit.capture.ops_loop import UNROLLED_NODES
    report = pijit.explain(chain_while, np.linspace(-1.0, 1.0, 8))
    assert any("unrolling past %d graph nodes" % UNROLLED_NODES in b["reason"]
               for b in report.break_reasons)
    assert all(len(ops) <= UNROLLED_NODES + 32 for ops in report.ops_per_graph)
    assert_same(chain_while, np.linspace(-1.0, 1.0, 8), graphs=None, breaks=None,
                jit_kwargs={"jit_config": {"adaptive": False}})


def test_a_first_call_with_big_arrays_runs_plain_on_the_wrappers_path():
    """The Wrapper's own plain runs take calls with big array arguments too: a signature
    compiles once its calls took compile_after_ms, whatever their size."""
    jitted = pijit.jit(fresh(scale), jit_config={"compile_after_ms": 10_000,
                                                 "perf_statistics": False})
    big = np.linspace(0.0, 1.0, 100_000)
    assert_equal_values(jitted(big, 2.0), scale(big, 2.0))
    stats = pijit.stats(jitted)
    assert stats["compile_count"] == 0 and stats["deferred"] == 1


def test_capture_leaves_numpy_random_unimported():
    """np.random is imported lazily (12 ms): capturing calls that draw nothing must not be
    what imports it."""
    code = ("import sys, numpy, pijit\n"
            "def g(x): return max(x, 1) + len([x])\n"
            "f = pijit.jit(lambda x: x * 2 + g(3), jit_config={'adaptive': False})\n"
            "f(numpy.ones(3))\n"
            "print('numpy.random' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False", out
