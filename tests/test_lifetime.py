"""What a jitted function keeps alive: its compiled entries live exactly as long as the
jitted function, and die with it by the garbage collector, cycles through the user's
globals included (an exec namespace, a closure, a script's __main__ at exit)."""
import gc
import os
import subprocess
import sys
import textwrap
import weakref

import numpy as np

import pijit
from pijit import eval_frame
from memory import rss_allowance, rss_bytes

O0 = {"jit_level": "O0"}      # capture only: these tests are about lifetimes, not kernels


def make_exec_function(i):
    ns = {"np": np, "pijit": pijit, "O0": O0}
    exec(textwrap.dedent(f"""
        @pijit.jit(jit_config=O0)
        def f(x):
            return x * {i} + 1
    """), ns)
    return ns["f"]


def test_exec_made_functions_are_freed_after_their_calls():
    """The cycle namespace -> jitted function -> compiled entry -> transformed function ->
    namespace used to pass through the code object's co_extra slot, which the garbage
    collector cannot see: every such function lived for ever."""
    x = np.arange(3.0)
    refs = []
    for i in range(50):
        f = make_exec_function(i)
        assert np.array_equal(f(x), x * i + 1) and np.array_equal(f(x), x * i + 1)
        assert pijit.stats(f)["cache_hits"] == 1
        refs.append(weakref.ref(f))
        del f
    gc.collect()
    assert sum(r() is not None for r in refs) == 0


def test_memory_of_exec_made_functions_does_not_grow():
    """Rounds of exec-made jitted functions: the process's memory settles (measured: it grew
    by 12-24 MiB per 1,000 functions before)."""
    x = np.arange(3.0)

    def one_round():
        for i in range(300):
            f = make_exec_function(i)
            f(x)
        gc.collect()

    one_round()                 # warm-up: what capture and NumPy keep once
    states, rss = len(eval_frame.all_states()), rss_bytes()
    for _ in range(4):
        one_round()
    assert len(eval_frame.all_states()) == states
    assert rss_bytes() - rss < rss_allowance(8 << 20)


def test_a_dropped_jitted_closure_frees_what_it_captured():
    big = np.ones(1 << 20)
    ref = weakref.ref(big)

    def outer(a):
        @pijit.jit(jit_config=O0)
        def inner(x):
            return x + a.sum()
        return inner

    g = outer(big)
    del big
    assert g(np.ones(2))[0] == 1 + (1 << 20)
    del g
    gc.collect()
    assert ref() is None


def test_pijit_reset_of_everything_still_reaches_every_live_function():
    x = np.arange(3.0)
    f = make_exec_function(7)
    f(x)
    assert pijit.code_info(f)["compile_count"] == 1
    pijit.reset()
    assert pijit.code_info(f)["compile_count"] == 0
    f(x)
    assert pijit.code_info(f)["compile_count"] == 1


EXIT_SCRIPT = """
    import sys, numpy as np, pijit

    @pijit.jit
    def f(x):
        return x * 2

    class Noisy:
        def __del__(self):
            print("finalized", flush=True)

    keep = Noisy()
    f(np.ones(3))
    log = open(sys.argv[1], "w")
    log.write("x" * 26)      # left for the interpreter to close
"""


def test_a_script_with_a_jitted_function_finalizes_main_at_exit(tmp_path):
    """A module-level jitted function, called once, kept __main__ alive past shutdown:
    a file the script wrote and left open had 0 bytes on disk, and no __del__ ran."""
    for env in ({"PIJIT_DISABLE": "1"}, {}):
        path = tmp_path / f"log{len(env)}.txt"
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(EXIT_SCRIPT), str(path)],
                              capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, **env))
        assert proc.returncode == 0, proc.stderr
        assert path.read_bytes() == b"x" * 26
        assert proc.stdout == "finalized\n"


USE_AFTER_FREE = """
    import gc, numpy as np, pijit

    def make(k):
        def inner(x):
            return x + k
        return inner

    # One code, three closures: a hit of one whose cells differ from the entry's function
    # makes a function for its cells (an allocation, so a garbage collection) and puts it
    # in the entry.
    ja, jb, jc = (pijit.jit(make(k)) for k in (1.0, 2.0, 3.0))

    class Trigger:
        def __del__(self):
            jc(x)                     # replaces the entry's function during jb's hit

    x = np.ones(2)
    ja(x), jb(x), jc(x)
    gc.set_threshold(1, 1, 1)
    for _ in range(2000):
        ja(x)                         # the entry now holds a's function, held by it alone
        t = Trigger()
        t.self = t                    # a cycle, collected at jb's allocation
        del t
        assert jb(x).tolist() == [3.0, 3.0]
    print("ok")
"""


def test_a_finalizer_during_a_hit_cannot_free_what_the_hit_uses():
    """fn_for_frame held a borrowed reference to the entry's function across an allocation
    that can run the garbage collector; a finalizer calling another closure of the same
    code then freed it (PYTHONMALLOC=debug makes the use after free crash)."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(USE_AFTER_FREE)],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONMALLOC="debug"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == "ok\n"


def test_a_garbage_collection_between_marking_and_wrapping_keeps_the_function_jitted():
    """jit marks the code (a state and its record: a cycle nothing else held yet), then makes
    the Wrapper; a collection in between (the Wrapper's own allocation can run one) freed
    the state, and the function ran plain, 0 graphs (1 random program in 100 or so). Many
    collection thresholds put a collection at every allocation of jit in turn."""
    old = gc.get_threshold()
    try:
        for threshold in range(1, 40):
            gc.collect()
            gc.set_threshold(threshold, 1, 1)
            for i in range(8):
                ns = {}
                exec(f"def f(x):\n    return x * {i} + 1\n", ns)
                f = pijit.jit(ns["f"], jit_config=O0)
                assert pijit.api.wrapper_of(f).code_state is not None, f"threshold {threshold}"
    finally:
        gc.set_threshold(*old)
