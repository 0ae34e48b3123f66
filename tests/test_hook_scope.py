"""The hook's scope: which frames it touches (only those of threads inside a jitted call),
how deep it lets the C stack grow, and what a forked child or a subinterpreter inherits.

Crashes are the failure mode here, so each case runs in a subprocess with a timeout and is
compared with the same program run without pijit (PIJIT_DISABLE=1)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pijit
from pijit import eval_frame


def run_script(src, *args, env=None, timeout=120):
    """Run `src` in a fresh interpreter; returns (exit status, stdout, stderr)."""
    full_env = dict(os.environ, **(env or {}))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(src), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=full_env)
    return proc.returncode, proc.stdout, proc.stderr


def same_as_plain(src, *args, timeout=120):
    """The script's exit status and output, jitted, equal the plain run's; returns stdout."""
    jitted = run_script(src, *args, timeout=timeout)
    plain = run_script(src, *args, env={"PIJIT_DISABLE": "1"}, timeout=timeout)
    assert jitted[0] == plain[0] == 0, (jitted, plain)
    assert jitted[1] == plain[1]
    return jitted[1]


RECURSION = """
    import sys, numpy as np, pijit
    sys.setrecursionlimit(30000)

    def plain(n):
        return 0 if n == 0 else 1 + plain(n - 1)

    @pijit.jit
    def f(x, n):
        try:
            r = plain(n)
        except RecursionError:
            r = -1
        return x + r

    for n in map(int, sys.argv[1:]):
        print(n, f(np.ones(2), n).tolist())
    print(pijit.stats(f)["cache_hits"] > 0 or pijit.eval_frame.is_enabled() is False)
"""


def test_plain_recursion_inside_a_jitted_call_ends_as_in_plain_python():
    """While the hook is installed every Python call recurses in C; a recursion plain
    Python runs inline to the limit (30,000 here) used to overflow the C stack at ~22,000
    (SIGSEGV). Now it succeeds below the limit and raises RecursionError beyond it."""
    out = same_as_plain(RECURSION, 1000, 25000, 29000, 50000)
    assert "29000 [29001.0, 29001.0]" in out and "50000 [0.0, 0.0]" in out


def test_plain_recursion_in_another_thread_while_a_jitted_call_runs():
    out = same_as_plain("""
        import sys, threading, time, numpy as np, pijit
        sys.setrecursionlimit(30000)
        threading.stack_size(0)
        stop = threading.Event()

        def plain(n):
            return 0 if n == 0 else 1 + plain(n - 1)

        @pijit.jit
        def busy(x):
            while not stop.is_set():
                time.sleep(0.001)
            return x

        t = threading.Thread(target=busy, args=(np.ones(2),))
        t.start()
        time.sleep(0.2)
        out = []
        def other():
            for n in (29000, 50000):
                try:
                    out.append(plain(n))
                except RecursionError:
                    out.append("RecursionError")
        t2 = threading.Thread(target=other)
        t2.start()
        t2.join()
        stop.set()
        t.join()
        print(out)
    """)
    assert out.strip() == "[29000, 'RecursionError']"


def test_jitted_recursion_goes_as_deep_as_plain_python():
    """Plain Python runs a recursion inline, as deep as sys.getrecursionlimit() allows. A
    jitted function calling itself reaches pijit at every level: from 3.12 through pijit's
    vectorcall, a C call a level, and 3.12.1's C recursion budget (1500) ran out about 800
    levels deep, under the default limit of 1000. So from 3.12 the function is given back
    to CPython for the deep part of the call (wrapper.c deep_call), and armed again after:
    plain Python's depths and RecursionError. On 3.11 pijit's prefix runs in the caller's
    evaluation loop (call_prefix.c), and a timed run (a second frame of its level) is never
    nested in a timed run of the same code (adapt.c)."""
    status, out, err = run_script("""
        import sys, numpy as np, pijit
        from pijit import eval_frame

        def g(n):
            return 0 if n == 0 else 1 + g(n - 1)

        def walk(a, i):     # compiled levels: a graph at each, the recursion a break
            return 0.0 if i == a.shape[0] else a[i] * 2.0 + walk(a, i + 1)

        plain = [g(990), walk(np.ones(900), 0)]
        g = pijit.jit(g, jit_config={"specialize_scalar": False})
        walk = pijit.jit(walk)
        print(g(990) == plain[0], walk(np.ones(900), 0) == plain[1])
        sys.setrecursionlimit(100000)
        deep = 90000
        print(g(deep) == deep, walk(np.ones(deep), 0) == 2.0 * deep)
        if sys.version_info >= (3, 12):     # walk runs compiled code: never given back
            print(eval_frame.vectorcall_of(walk))   # for good, so armed again
        try:
            g(200000)
        except RecursionError as e:
            print("RecursionError")
    """, env={"PIJIT_ADAPTIVE": "1"})     # as users run it (compiled at the first call,
    assert status == 0, err                 # a break at every level adds a frame a level)
    armed = ["pijit"] if sys.version_info >= (3, 12) else []
    assert out.split() == ["True", "True", "True", "True", *armed, "RecursionError"]


def test_first_call_near_the_recursion_limit_compiles_later():
    """Capture recurses too: a first call close to the recursion limit runs plain that time
    (no internal RecursionError, no never_compile) and the next call compiles."""
    limit = sys.getrecursionlimit()

    @pijit.jit
    def f(x):
        return x * 2 + 1

    def at_depth(n, x):
        return f(x) if n == 0 else at_depth(n - 1, x)

    x = np.arange(4.0)
    depth = limit - 60 - len_stack()
    assert np.array_equal(at_depth(depth, x), x * 2 + 1)
    assert pijit.code_info(f)["state"] == "candidate"
    assert pijit.stats(f)["compile_count"] == 0
    assert np.array_equal(f(x), x * 2 + 1)
    assert pijit.stats(f)["compile_count"] == 1
    assert pijit.code_info(f)["state"] == "callable"


def len_stack():
    frame, n = sys._getframe(), 0
    while frame is not None:
        frame, n = frame.f_back, n + 1
    return n


def test_frames_of_threads_outside_jitted_calls_are_not_touched():
    """The hook is per interpreter, but only threads inside a jitted call are jitted: the
    original function of a jitted one, called from a thread that is not, runs plain and
    counts no call, however many other threads are inside jitted calls."""
    import threading
    inside, release = threading.Event(), threading.Event()

    def original(x):
        return x + 1

    jitted = pijit.jit(original)

    @pijit.jit
    def wait(x):
        inside.set()
        release.wait()
        return x

    t = threading.Thread(target=wait, args=(np.ones(2),))
    t.start()
    try:
        inside.wait()
        assert eval_frame.active_threads() == 1 and eval_frame.is_installed()
        for _ in range(5):
            assert np.array_equal(original(np.ones(3)), np.full(3, 2.0))
        assert pijit.code_info(jitted)["call_count"] == 0
        assert pijit.stats(jitted)["compile_count"] == 0
        # The same call through the jitted function is jitted.
        assert np.array_equal(jitted(np.ones(3)), np.full(3, 2.0))
        assert pijit.stats(jitted)["compile_count"] == 1
    finally:
        release.set()
        t.join()
    assert eval_frame.active_threads() == 0 and not eval_frame.is_installed()


def test_native_mode_is_honoured_while_another_thread_is_in_a_jitted_call():
    import threading
    inside, release = threading.Event(), threading.Event()

    @pijit.jit
    def wait(x):
        inside.set()
        release.wait()
        return x

    @pijit.jit
    def g(x):
        return x * 3

    t = threading.Thread(target=wait, args=(np.ones(2),))
    t.start()
    try:
        inside.wait()
        pijit.set_context(mode=pijit.PYNATIVE_MODE)
        assert np.array_equal(g(np.ones(3)), np.full(3, 3.0))
        assert pijit.stats(g)["compile_count"] == 0 and pijit.stats(g)["cache_hits"] == 0
    finally:
        pijit.set_context(mode=pijit.GRAPH_MODE)
        release.set()
        t.join()


def test_a_child_forked_inside_another_threads_jitted_call_starts_clean():
    out = same_as_plain("""
        import os, sys, threading, numpy as np, pijit
        from pijit import eval_frame
        sys.setrecursionlimit(30000)
        inside, release = threading.Event(), threading.Event()

        def plain(n):
            return 0 if n == 0 else 1 + plain(n - 1)

        @pijit.jit
        def wait(x):
            inside.set()
            release.wait()
            return x

        @pijit.jit
        def g(x):
            return x * 2

        t = threading.Thread(target=wait, args=(np.ones(2),))
        t.start()
        inside.wait()
        pid = os.fork()
        if pid == 0:
            ok = (eval_frame.depth() == 0 and eval_frame.active_threads() == 0
                  and not eval_frame.is_installed() and plain(29000) == 29000
                  and g(np.ones(2)).tolist() == [2.0, 2.0])
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        release.set()
        t.join()
        print("child", os.waitstatus_to_exitcode(status))
    """)
    assert out.strip() == "child 0"


def test_import_in_a_subinterpreter_fails_cleanly(tmp_path):
    """NumPy refuses subinterpreters (ImportError), and pijit's hook state is per process
    too (its module init refuses a subinterpreter as well): importing pijit there is a
    clear ImportError, never a crash."""
    interpreters = pytest.importorskip("_xxsubinterpreters" if sys.version_info < (3, 13)
                                       else "_interpreters")
    result = tmp_path / "result.txt"
    status, out, err = run_script("""
        import sys
        mod = __import__(sys.argv[1])
        run = getattr(mod, "run_string", None) or mod.exec
        interp = mod.create()
        code = (
            "try:\\n"
            "    import pijit\\n"
            "    result = 'imported'\\n"
            "except ImportError as e:\\n"
            "    result = 'ImportError'\\n"
            "open(%r, 'w').write(result)\\n" % sys.argv[2])
        try:
            run(interp, code)
        finally:
            mod.destroy(interp)
        print(open(sys.argv[2]).read())
    """, interpreters.__name__, result)
    assert status == 0, err
    assert out.strip() == "ImportError"


def test_globals_of_a_dict_subclass_are_read_through_its_getitem():
    """LOAD_GLOBAL reads a function's globals through __getitem__ when they are not an exact
    dict (3.11-3.13); a guard on a global read them with a plain dict lookup, so it did not
    see the value the function would."""
    class Scaled(dict):
        def __getitem__(self, key):
            if key == "scale":
                return self.factor
            return dict.__getitem__(self, key)

    ns = Scaled()
    ns.factor = 2.0
    exec("def f(x):\n    return x * scale\n", ns)
    f = ns["f"]
    state = eval_frame.mark(f.__code__)
    eval_frame.add_entry(f.__code__, (("global", "scale"),), (("eq", 0, 2.0),),
                         lambda x: "guarded on scale == 2.0")
    jitted = eval_frame.Wrapper(f)
    assert jitted(3.0) == "guarded on scale == 2.0"
    ns.factor = 5.0
    assert jitted(3.0) == 15.0 == f(3.0)          # the guard fails: plain Python
    assert state.code is f.__code__
