"""Adaptive execution (pijit/adaptive.py over csrc/adapt.c): what pijit cannot speed up runs
as plain Python, new signatures compile once hot, small graphs climb from the NumPy backend
to fused kernels, and a timed trial keeps the faster of an entry and plain Python. Each test
compares results with plain Python and asserts the decision; trials run on a fake clock."""
import numpy as np
import pytest

import pijit
from differential import assert_equal_values
from pijit import eval_frame


# adaptive execution on (conftest's `adaptive`: the suite compiles at the first call)
pytestmark = pytest.mark.usefixtures("adaptive")


def family_compiles(fn):
    code = pijit.api._code_of(fn)
    return sum(pijit.cache.record(c).compile_count for c in pijit.cache.family(code))


def list_build(n):
    out = []
    for i in range(n):
        if i % 3:
            out.append(i * i)
    return out


def text_build(n):
    out = []
    for i in range(n):
        if i % 3:
            out.append(str(i * i))
    return out


def scalar_work(a, b):
    return (a * a + b) % 7


def test_a_pure_python_function_runs_plain_and_is_called_without_the_hook():
    jitted = pijit.jit(scalar_work, jit_config={"compile_after_ms": 0})
    for k in range(5):
        assert jitted(k, 3) == scalar_work(k, 3)
    info = pijit.stats(jitted)
    assert info["entries"] and all(e["fallback"].startswith("no array work: runs as plain")
                                   for e in info["entries"])
    assert info["bypassed"] >= 1            # calls after the decision skip the hook entirely


def test_a_pure_python_loop_runs_inline_and_plain():
    """The loop breaks (its body branches on a value): it used to be outlined as a function
    called per iteration (0.03x plain). A body that touched no array runs inline, and with
    no array anywhere the function is plain Python."""
    jitted = pijit.jit(text_build, jit_config={"compile_after_ms": 0})
    for n in (50, 60, 70):
        assert jitted(n) == text_build(n)
    assert family_compiles(jitted) == 1
    info = pijit.stats(jitted)
    assert info["entries"][0]["fallback"].startswith("no array work")
    assert len(pijit.cache.family(text_build.__code__)) == 1        # no outlined loop body


def test_a_loop_appending_numbers_to_a_list_is_one_loop_nest():
    """The same loop appending ints is a loop nest (C appends to the list), not plain: it
    compiles for the first n and once more when n goes dynamic, never per iteration."""
    jitted = pijit.jit(list_build, jit_config={"compile_after_ms": 0})
    for n in (50, 60, 70, 80):
        assert jitted(n) == list_build(n)
    assert family_compiles(jitted) == 2
    info = pijit.stats(jitted)
    assert all(e["fallback"] is None for e in info["entries"]), info["entries"]
    report = pijit.explain(list_build, 50)
    assert report.ops_per_graph[0] == ["build_list", "loop_nest"], report


def running_max_then_scale(a):
    m = a[0]
    for i in range(1, a.shape[0]):
        if a[i] > m:
            m = a[i]
    return a / m


def test_a_loop_whose_body_breaks_compiles_a_bounded_number_of_entries():
    jitted = pijit.jit(running_max_then_scale, jit_config={"compile_after_ms": 0})
    rng = np.random.default_rng(0)
    for n in (200, 300, 400, 500, 600):
        a = rng.random(n) + 0.1
        assert_equal_values(jitted(a), running_max_then_scale(a))
    assert family_compiles(jitted) <= 6


class FakeClock:
    """A trial times its runs alternately, plain Python first: this clock makes each plain
    run last `plain` seconds and each compiled run `compiled` (it is read twice a run)."""

    def __init__(self, plain, compiled):
        self.reads, self.now, self.durations = 0, 0.0, (plain, compiled)

    def __call__(self):
        if self.reads % 2:                          # the end of a timed run
            self.now += self.durations[(self.reads // 2) % 2]
        self.reads += 1
        return self.now


@pytest.mark.parametrize("plain_s, compiled_s, choice", [(1.0, 2.0, "plain"),
                                                          (2.0, 1.0, "compiled")])
def test_perf_statistics_keeps_the_faster_path(plain_s, compiled_s, choice):
    def softmax(x):
        e = np.exp(x - x.max())
        return e / e.sum()

    eval_frame.set_perf_clock(FakeClock(plain_s, compiled_s))
    x = np.linspace(-1, 1, 1 << 17)
    jitted = pijit.jit(softmax, jit_config={"PERF_STATISTICS_COUNT": 2, "compile_after_ms": 0, "promote_after": 0, "promote_after_ms": 0})
    pijit.reset(jitted)                     # the code (and its cache) outlives one parameter
    for _ in range(8):
        assert_equal_values(jitted(x), softmax(x))
    entry = pijit.stats(jitted)["entries"][0]
    assert entry["level"] == "O1"
    assert entry["perf"] == {"compiled_s": compiled_s, "plain_s": plain_s, "choice": choice}
    assert eval_frame.entry_stats(pijit.api._code_of(jitted))[0]["plain"] is (choice == "plain")


@pytest.mark.parametrize("scale, choice", [(10300, "compiled"), (10100, "plain")])
def test_perf_statistics_scale_is_the_margin_plain_python_must_beat(scale, choice):
    """A compiled run 2% slower than plain Python: kept with the default margin of 3%
    (PERF_STATISTICS_SCALE_10000X=10300), replaced with 1% (10100)."""
    def softmax(x):
        e = np.exp(x - x.max())
        return e / e.sum()

    eval_frame.set_perf_clock(FakeClock(1.0, 1.02))
    x = np.linspace(-1, 1, 1 << 17)
    jitted = pijit.jit(softmax, jit_config={"PERF_STATISTICS_COUNT": 2,
                                            "PERF_STATISTICS_SCALE_10000X": scale, "compile_after_ms": 0, "promote_after": 0, "promote_after_ms": 0})
    pijit.reset(jitted)
    for _ in range(8):
        assert_equal_values(jitted(x), softmax(x))
    assert pijit.stats(jitted)["entries"][0]["perf"]["choice"] == choice
    assert eval_frame.entry_stats(pijit.api._code_of(jitted))[0]["plain"] is (choice == "plain")


def test_a_signature_compiles_once_its_plain_calls_took_compile_after_ms():
    clock = [0.0]

    def f(x):
        return x * 2 + 1

    def tick():
        clock[0] += 0.004                   # every clock read: plain runs last 4 ms
        return clock[0]
    eval_frame.set_perf_clock(tick)
    jitted = pijit.jit(f, jit_config={"compile_after_ms": 10, "perf_statistics": False})
    x = np.ones(4)
    for _ in range(3):                      # 4, 8, 12 ms of plain runs
        assert_equal_values(jitted(x), f(x))
    assert pijit.stats(jitted)["compile_count"] == 0
    assert pijit.stats(jitted)["deferred"] == 3
    assert_equal_values(jitted(x), f(x))
    assert pijit.stats(jitted)["compile_count"] == 1


def test_a_call_with_big_arrays_waits_for_compile_after_ms_too():
    """A program that runs a few ms in all never pays for capture, however big its arrays."""
    clock = [0.0]

    def f(x):
        return x * 2 + 1

    def tick():
        clock[0] += 0.004
        return clock[0]
    eval_frame.set_perf_clock(tick)
    jitted = pijit.jit(f, jit_config={"compile_after_ms": 10, "perf_statistics": False})
    big = np.ones(100_000)
    for _ in range(3):
        assert_equal_values(jitted(big), f(big))
    assert pijit.stats(jitted)["compile_count"] == 0 and pijit.stats(jitted)["deferred"] == 3
    assert_equal_values(jitted(big), f(big))
    assert pijit.stats(jitted)["compile_count"] == 1


def test_a_small_graph_climbs_from_numpy_to_fused_kernels():
    def chain(x):
        return np.tanh(x * 0.5) * 2 + x * x
    jitted = pijit.jit(chain, jit_config={"promote_after": 4, "perf_statistics": False,
                                          "compile_after_ms": 0, "promote_after_ms": 0,
                                          "background_compile": False})
    x = np.linspace(-2, 2, 100)
    levels = []
    for _ in range(6):
        assert_equal_values(jitted(x), chain(x))
        levels.append(pijit.stats(jitted)["entries"][0]["level"])
    assert levels == ["O0"] * 4 + ["O1"] * 2


class _Model:
    def __init__(self):
        self.w = np.linspace(0.0, 1.0, 100)

    def scale(self, x):
        return x * self.w

    def forward(self, x):
        return np.tanh(self.scale(x)) + x


@pytest.mark.parametrize("adaptive", [True, False])
def test_an_entry_does_not_keep_what_the_function_read(adaptive):
    """What a promotion rebuilds from holds the capture, and with it every object the
    function read (a model passed as self): an entry keeps it at most until its promotion,
    and an entry that is not to be promoted never."""
    import gc
    import weakref
    jitted = pijit.jit(_Model.forward, jit_config={
        "adaptive": adaptive, "promote_after": 3, "perf_statistics": False,
        "compile_after_ms": 0, "promote_after_ms": 0, "background_compile": False})
    x = np.linspace(-1, 1, 100)
    model = _Model()
    for _ in range(4 if adaptive else 1):
        np.testing.assert_array_equal(jitted(model, x), _Model.forward(model, x))
    assert pijit.stats(jitted)["entries"][0]["level"] == "O1"
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None


def test_a_big_graph_is_promoted_once_its_hits_took_promote_after_ms():
    """However many elements a graph touches, it runs on the NumPy backend until its calls
    have cost as much as a C compile may (promote_after_ms), then at jit_level."""
    def chain(x):
        return np.tanh(x * 0.5) * 2 + x * x
    clock = [0.0]

    def tick():
        clock[0] += 0.002                   # every read: a timed hit lasts 2 ms
        return clock[0]
    eval_frame.set_perf_clock(tick)
    jitted = pijit.jit(chain, jit_config={"perf_statistics": False, "compile_after_ms": 0,
                                          "promote_after_ms": 5, "background_compile": False})
    x = np.linspace(-2, 2, 1 << 17)
    levels = []
    for _ in range(6):
        assert_equal_values(jitted(x), chain(x))
        levels.append(pijit.stats(jitted)["entries"][0]["level"])
    # the compiling call, then hits of 2, 4, 6 ms: promoted before the hit after 6 >= 5
    assert levels == ["O0"] * 4 + ["O1"] * 2


def test_adaptive_off_compiles_at_the_first_call_at_jit_level():
    def chain(x):
        return np.tanh(x * 0.5) * 2 + x * x
    jitted = pijit.jit(chain, jit_config={"adaptive": False})
    x = np.linspace(-2, 2, 100)
    jitted(x)
    entry = pijit.stats(jitted)["entries"][0]
    assert entry["level"] == "O1" and entry["perf"] is None
    assert eval_frame.entry_stats(chain.__code__)[0]["trial_left"] == 0
