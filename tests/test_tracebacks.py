"""Exceptions from jitted functions read as plain Python's: the same user frames at the same
lines (traceback.extract_tb), no frame from pijit's files, no chained internal exception, and
the frame a debugger lands in holding the user's locals under the user's names, with plain
Python's values. Each case runs plain and jitted and compares."""
import contextlib
import io
import os
import pdb
import signal
import traceback
import types
import warnings

import numpy as np
import pytest

import pijit
from pijit import cache
from ipython_session import run_cells

PIJIT_DIR = os.path.dirname(pijit.__file__)
LEVELS = ["O0", "O1", "O2"]


def failure(fn, *args, errors=None):
    """(exception, [(file, line, function)] of the frames under this one, innermost frame,
    [(category, message)] of the warnings the call gave; every warning shown, those whose
    message starts with `errors` made errors)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if errors is not None:
            warnings.filterwarnings("error", message=errors)
        try:
            fn(*args)
        except Exception as e:      # noqa: BLE001 - what the test compares
            tb = e.__traceback__.tb_next            # this function's own entry
            frames = [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(tb)]
            while tb.tb_next is not None:
                tb = tb.tb_next
            return e, frames, tb.tb_frame, [(w.category, str(w.message)) for w in caught]
    raise AssertionError(f"{fn} did not raise")


def assert_same_failure(fn, *args, jit_config=None, calls=2, locals_=True, errors=None):
    """Plain and jitted raise alike: type, message, frames, context, warnings, and (locals_)
    the innermost frame's locals. Returns the jitted run's (exception, frames, frame)."""
    expected, expected_frames, expected_frame, expected_warnings = failure(fn, *args,
                                                                           errors=errors)
    jitted = pijit.jit(fn, jit_config=jit_config)
    pijit.reset(jitted)
    for _ in range(calls):          # the first call compiles, the next runs the entry
        got, frames, frame, warned = failure(jitted, *args, errors=errors)
        assert type(got) is type(expected) and str(got) == str(expected)
        assert warned == expected_warnings        # a replay gives none of its own
        assert frames == expected_frames, "\n".join(map(str, frames))
        assert not any(f.startswith(PIJIT_DIR) for f, _, _ in frames)
        assert (got.__context__ is None) == (expected.__context__ is None)
        assert got.__cause__ is None and not got.__suppress_context__
        if locals_:
            assert_same_locals(frame.f_locals, expected_frame.f_locals)
        assert frame.f_code.co_name == expected_frame.f_code.co_name
    return got, frames, frame


def assert_same_locals(got: dict, expected: dict):
    assert sorted(got) == sorted(expected), f"{sorted(got)} != {sorted(expected)}"
    for name, value in expected.items():
        if isinstance(value, np.ndarray):
            assert np.array_equal(got[name], value, equal_nan=True), name
        else:
            assert type(got[name]) is type(value) and got[name] == value, name


def ratio(a, b):
    c = a * 2.0
    d = c / b
    e = d + 1.0
    return e * 3.0


@pytest.mark.parametrize("level", LEVELS)
def test_floating_point_error_in_a_fused_group(level):
    """np.errstate(all="raise"): the user's frame at the division's line, holding c."""
    a, b = np.ones(64), np.zeros(64)
    with np.errstate(all="raise"):
        _, frames, frame = assert_same_failure(ratio, a, b, jit_config={"jit_level": level})
    assert frames[-1][1] == ratio.__code__.co_firstlineno + 2
    assert np.array_equal(frame.f_locals["c"], a * 2.0)


def log_then_sqrt(x):
    y = np.log(x)
    z = np.sqrt(x - 2.0)
    return y + z


@pytest.mark.parametrize("level", LEVELS)
def test_warnings_before_the_error_are_given_once(level):
    """The graph warns (log of 0), then raises (sqrt of a negative, under errstate): the
    replay that finds the user's frame gives no second warning."""
    with np.errstate(divide="warn", invalid="raise"):
        assert_same_failure(log_then_sqrt, np.array([0.0, 1.0]), jit_config={"jit_level": level})


def sqrt_then_more(x):
    y = x + 1.0
    z = np.sqrt(y)
    w = y * 2.0
    return z, w


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn, x, errors", [(log_then_sqrt, [0.0, 1.0], ""),
                                           (log_then_sqrt, [0.0, 1.0], "invalid"),
                                           (sqrt_then_more, [1.0, -3.0], "")])
def test_a_warning_made_an_error_raises_at_its_line(fn, x, errors, level):
    """A warning the user's filters make an error: plain Python raises it at the line of the
    op that warned, in a frame holding what was assigned before it, after showing the
    warnings before it; the graph's run raises it at the graph's end, so the replay runs
    under the user's filters, showing nothing, to raise it where plain Python does (was: at
    the return line, the replay having ignored warnings)."""
    with np.errstate(divide="warn", invalid="warn"):
        assert_same_failure(fn, np.array(x), jit_config={"jit_level": level}, errors=errors)


def test_a_warning_made_an_error_is_the_error_raised():
    """warnings.simplefilter("error"): the log's RuntimeWarning is raised, in the jitted run
    too, and not the FloatingPointError of the sqrt after it (under errstate)."""
    with warnings.catch_warnings(), np.errstate(divide="warn", invalid="raise"):
        warnings.simplefilter("error")
        for level in LEVELS:
            jitted = pijit.jit(log_then_sqrt, jit_config={"jit_level": level})
            for _ in range(2):
                raised = None
                try:
                    jitted(np.array([0.0, 1.0]))
                except Exception as e:      # noqa: BLE001 - which one is what the test checks
                    raised = e
                assert type(raised) is RuntimeWarning, repr(raised)
                assert str(raised) == "divide by zero encountered in log"
            assert pijit.code_info(jitted)["compile_count"] == 1


def gather(x, idx):
    y = x + 1.0
    z = y * 2.0
    return z[idx] - y.sum()


@pytest.mark.parametrize("level", LEVELS)
def test_index_error_inside_a_graph(level):
    assert_same_failure(gather, np.arange(4.0), np.array([1, 9]),
                        jit_config={"jit_level": level})


def after_break(a):
    c = a + 1
    print("after")
    d = c * 2
    e = d[10]
    return e


@pytest.mark.parametrize("level", LEVELS)
def test_error_in_a_resume_function(level):
    """Dead and live locals both in the frame (c is dead at the break, still bound)."""
    with contextlib.redirect_stdout(io.StringIO()):
        assert_same_failure(after_break, np.ones(3), jit_config={"jit_level": level})
    rec = pijit.cache.record(after_break.__code__)
    assert len(rec.resumes) == 1


def two_breaks(a):
    c = a + 1
    print("first")
    d = c * 2
    print("second")
    return d[10]


@pytest.mark.parametrize("fn", [after_break, two_breaks])
def test_the_frame_after_a_break_was_called_by_the_users_caller(fn):
    """The hook calls a resume function once the transformed frame has returned (csrc/
    eval_frame.c, call_with_slots): the frame an error leaves, one per break before, has
    the user's caller as its f_back, as in plain Python (it had the transformed frame, a
    second frame of the same function)."""
    with contextlib.redirect_stdout(io.StringIO()):
        _, frames, frame = assert_same_failure(fn, np.ones(3))
    assert len(pijit.cache.record(fn.__code__).resumes) >= 1
    assert [name for _, _, name in frames] == [fn.__name__]
    assert frame.f_code.co_name == fn.__name__ and frame.f_back.f_code is failure.__code__


def _interrupt():
    signal.raise_signal(signal.SIGINT)


def interrupted_after_a_break(a):
    c = a + 1
    print("a break")
    d = c * 2
    _interrupt()
    return d


def test_keyboard_interrupt_after_a_break_shows_the_users_frames():
    """The handlers of transformed code leave a KeyboardInterrupt's traceback alone (their
    clean runs Python code, where a second signal would replace the first: frames.py); the
    code after a break no longer runs under the transformed frame, so there is nothing
    left to clean."""
    runs = []
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    jitted = pijit.jit(interrupted_after_a_break)
    try:
        for fn in (interrupted_after_a_break, jitted, jitted):
            with contextlib.redirect_stdout(io.StringIO()), \
                    pytest.raises(KeyboardInterrupt) as info:
                fn(np.ones(3))
            runs.append([(f.name, f.lineno) for f in traceback.extract_tb(info.tb)
                         if f.filename == __file__])
    finally:
        signal.signal(signal.SIGINT, old)
    assert len(pijit.cache.record(interrupted_after_a_break.__code__).resumes) == 1
    assert pijit.stats(jitted)["cache_hits"] == 1
    assert runs[1] == runs[2] == runs[0]


def in_residual(a, k):
    c = a * 2
    dead = c.sum()
    print("x")
    return c[k]


def test_error_in_residual_code_after_a_graph():
    with contextlib.redirect_stdout(io.StringIO()):
        assert_same_failure(in_residual, np.ones(3), 7)


def loop_body(a, n):
    s = a * 0
    for i in range(n):
        s = s + a
        print(i)
        t = s[i + 100]
    return s, t


def test_error_in_an_outlined_loop_body():
    """A residual loop's body runs as its own jitted function, with a break inside; the
    frame holds the loop's locals and the function's others (a, n)."""
    with contextlib.redirect_stdout(io.StringIO()):
        assert_same_failure(loop_body, np.ones(3), 2, jit_config={"loop_nodes": False})


def unrolled(a, n):
    s = a * 0
    for i in range(n):
        s = s + a / (i - 2)
    return s


def test_error_in_an_unrolled_loop_at_its_iteration():
    with np.errstate(all="raise"):
        _, _, frame = assert_same_failure(unrolled, np.ones(3), 5)
    assert frame.f_locals["i"] == 2


def writes_then_fails(a, b):
    a += 1.0
    return a / b


def test_graph_writing_into_an_input_keeps_the_line():
    """A graph that writes into arrays is not run again: the frame is the transformed one
    (the arguments under their names, pijit's temporaries beside them), at the right line."""
    with np.errstate(all="raise"):
        _, frames, frame = assert_same_failure(writes_then_fails, np.ones(4), np.zeros(4),
                                               locals_=False)
    assert frames[-1][1] == writes_then_fails.__code__.co_firstlineno + 2
    assert {"a", "b"} <= set(frame.f_locals)


def test_context_of_the_users_handler_is_kept():
    """Called while handling an exception, the error chains to it, as in plain Python."""
    def call_in_handler(fn):
        try:
            raise KeyError("outer")
        except KeyError:
            fn(np.ones(4), np.array([1, 9]))

    for fn in (gather, pijit.jit(gather)):
        e, frames, _, _ = failure(call_in_handler, fn)
        assert isinstance(e.__context__, KeyError) and not e.__suppress_context__
        assert frames[-1][2] == "gather"


def test_post_mortem_debugger_sees_the_users_locals():
    """pdb.post_mortem lands in the user's function at the failing line with its locals."""
    def session(fn):
        e, _, _, _ = failure(fn, np.ones(4), np.zeros(4))
        out = io.StringIO()
        debugger = pdb.Pdb(stdin=io.StringIO("p sorted(locals())\np c.sum()\nwhere\nq\n"),
                           stdout=out, nosigint=True)
        debugger.reset()
        debugger.interaction(None, e.__traceback__)
        return out.getvalue().replace("pijit.jit wrapper", "function")

    with np.errstate(all="raise"):
        plain, jitted = session(ratio), session(pijit.jit(ratio))
    line = ratio.__code__.co_firstlineno + 2
    assert f"({line})ratio()\n-> d = c / b\n(Pdb) ['a', 'b', 'c']\n" in plain
    assert jitted == plain


def test_strict_mode_graph_break_names_the_users_line():
    def strict(a):
        c = a + 1
        print(c.shape)
        return c

    jitted = pijit.jit(strict, mode="PSJit")
    e, frames, frame, _ = failure(jitted, np.ones(3))
    assert isinstance(e, pijit.GraphBreakError)
    line = strict.__code__.co_firstlineno + 2
    assert str(e).endswith(f"print at {__file__}:{line}")
    assert (e.filename, e.lineno) == (__file__, line)
    assert frames == [(__file__, line, "strict")]
    assert e.__context__ is None and e.__cause__ is None
    assert list(frame.f_locals) == ["a"]
    assert len("".join(traceback.format_exception(e)).splitlines()) < 10


def test_input_signature_error_comes_from_the_users_function():
    def f(x):
        return x * 2

    jitted = pijit.jit(f, input_signature=pijit.ArraySpec((None,), "float32"))
    e, frames, _, _ = failure(jitted, np.ones(3))
    assert isinstance(e, TypeError) and "input_signature" in str(e)
    assert frames == [(__file__, f.__code__.co_firstlineno, "f")]
    assert e.__context__ is None


def test_interrupt_during_a_build_shows_the_users_frames(monkeypatch):
    from pijit.backends.cfused import build

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(build, "load_kernels", interrupted)

    def f(x):
        return np.exp(x) * 2.0

    jitted = pijit.jit(f)
    pijit.reset(jitted)
    try:
        jitted(np.ones(3))
    except KeyboardInterrupt as e:
        frames = traceback.extract_tb(e.__traceback__)[1:]
        assert [(fs.name, fs.lineno) for fs in frames] == [("f", f.__code__.co_firstlineno)]
        assert e.__context__ is None
    else:
        raise AssertionError("the interrupt was lost")
    monkeypatch.undo()
    assert np.array_equal(jitted(np.ones(3)), f(np.ones(3)))


def test_full_tracebacks_on_request(monkeypatch):
    """PIJIT_FULL_TRACEBACK=1 keeps pijit's frames (debugging pijit itself)."""
    monkeypatch.setenv("PIJIT_FULL_TRACEBACK", "1")
    with np.errstate(all="raise"):
        _, frames, _, _ = failure(pijit.jit(ratio), np.ones(64), np.zeros(64))
    assert any(f.startswith(PIJIT_DIR) or "__pijit" in name for f, _, name in frames)


def test_hidden_frames_and_continuations_are_recognised():
    from pijit import tracebacks
    code = types.SimpleNamespace(co_name="__pijit_group0", co_filename="/user/file.py")
    assert tracebacks.is_hidden(code)
    assert not tracebacks.is_hidden(ratio.__code__)
    assert tracebacks.origin_of(ratio.__code__) is ratio.__code__
    assert not tracebacks.continues(ratio.__code__)


def inlined_helper(x, y):
    z = x * 2
    return z[y]


def calls_helper(x, y):
    w = x + 1
    return inlined_helper(w, y) * 3


def test_error_in_an_inlined_callee_shows_its_frame():
    """The replay calls a function standing for the callee's frame: plain Python's frames."""
    assert_same_failure(calls_helper, np.ones(3), np.array([5]))


def _outer_helper(x, y):
    v = x - 1
    return inlined_helper(v, y) + v


def _calls_nested(x, y):
    w = x + 1
    return _outer_helper(w, y) * 3


class _Stepper:
    def __init__(self):
        self.scale = 2.0

    def step(self, x, y, shift=1.0):
        z = x * self.scale + shift
        return z[y]

    def run(self, x, y):
        w = x + 1
        return self.step(w, y) - 1

    def run_pair(self, x, y):
        pair = (self, x + 1)
        z = pair[1] * 2
        return z[y]


def _make_closure(k):
    def scaled(x, y):
        z = x * k
        return z[y]
    return scaled


_scaled = _make_closure(3.0)


def _calls_closure(x, y):
    w = x + 1
    return _scaled(w, y) * 2


def _pair(x):
    return x + 1, x * 2


def _unpacks(x, y):
    a, b = _pair(x)
    c = a + b
    return c[y] + _pair(a)[0]


def _pair_with_constant(x):
    return x + 1, 2


def _unpacks_constant(x, y):
    a, b = _pair_with_constant(x)
    c = a * b
    return c[y]


_OTHER_MODULE = """
import numpy as np
W = np.arange(3.0)

def weighted(x, y):
    z = x * W
    return z[y]
"""


def _other_module():
    module = types.ModuleType("other_helpers")
    exec(compile(_OTHER_MODULE, "other_helpers.py", "exec"), module.__dict__)
    return module


_other = _other_module()


def _calls_other_module(x, y):
    w = x + 1
    return _other.weighted(w, y) * 2


class _Weights:
    """Values the callee reads from its own frame, not from its arguments' values: an array
    attribute of `self`, an item of a list attribute, a closure's array, a global array."""

    def __init__(self):
        self.w = np.arange(3.0)
        self.ws = [np.ones(3), np.arange(3.0) + 1]

    def step(self, x, y):
        z = x * self.w + self.ws[1]
        return z[y]

    def run(self, x, y):
        w = x + 1
        return self.step(w, y) - 1


def _make_array_closure(k):
    def scaled(x, y):
        z = x * k
        return z[y]
    return scaled


_array_scaled = _make_array_closure(np.arange(3.0))
_W = np.arange(3.0) + 2


def _weighted_here(x, y):
    z = x * _W
    return z[y]


def _calls_array_closure(x, y):
    w = x + 1
    return _array_scaled(w, y) * 2


def _calls_weighted_here(x, y):
    w = x + 1
    return _weighted_here(w, y) * 2


@pytest.mark.parametrize("fn, depth", [
    (_calls_nested, 3), (_Stepper().run, 2), (_calls_closure, 2), (_unpacks, 1),
    (_calls_other_module, 2), (_Weights().run, 2), (_calls_array_closure, 2),
    (_calls_weighted_here, 2), (_unpacks_constant, 1),
], ids=["nested", "method", "closure", "tuple", "other module", "attributes of self",
        "closure array", "global array", "tuple with a constant"])
@pytest.mark.parametrize("level", ["O0", "O1"])
def test_error_in_inlined_callees(fn, depth, level):
    """Errors in callees (or, for the tuple, after two calls returned) as plain Python."""
    _, frames, _ = assert_same_failure(fn, np.ones(3), np.array([7]),
                                       jit_config={"jit_level": level})
    assert len(frames) == depth


def _calls_closure_argument(x, y, scaled):
    w = x + 1
    return scaled(w, y) * 2


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_error_in_a_closure_passed_as_an_argument(level):
    """The callee's cell is read as its own free variable: the caller reaches it only
    through its argument's __closure__."""
    _, frames, _ = assert_same_failure(_calls_closure_argument, np.ones(3), np.array([7]),
                                       _array_scaled, jit_config={"jit_level": level})
    assert len(frames) == 2


def test_ipython_shows_cells_and_no_internal_frames():
    out = run_cells([
        "import numpy as np, pijit",
        "@pijit.jit\ndef ratio(a, b):\n    c = a * 2.0\n    d = c / b\n    return d + 1.0",
        "with np.errstate(all='raise'):\n    ratio(np.ones(8), np.zeros(8))",
        "@pijit.jit(mode='PSJit')\ndef strict(a):\n    c = a + 1\n    print(c.shape)\n"
        "    return c",
        "strict(np.ones(3))",
    ])
    error, strict = out.split("GraphBreakError")[0], out[out.index("GraphBreakError"):]
    assert "Cell In[2], line 4" in error and "FloatingPointError" in error
    assert "Cell In[4], line 4" in strict and "at Cell In[4], line 4" in strict
    for internal in ("pijit/", "__pijit", "<lambda>", "During handling"):
        assert internal not in out, out


def loop_node(a, n):
    s = a * 0
    for i in range(n):
        s = s + a / (i - 2)
    return s


def nested_loop_nodes(a, n):
    s = a * 0
    for i in range(n):
        t = s * 0.5
        for j in range(n):
            t = t + a / (i - j - 1)
        s = s + t
    return s


@pytest.mark.parametrize("fn", [loop_node, nested_loop_nodes])
def test_error_inside_a_loop_node_at_its_iteration(fn):
    """A loop node is replayed as the user's loop: the frame has the index and the carried
    locals of the failing iteration."""
    config = {"specialize_scalar": False}       # n is then known at run time only
    report = pijit.explain(pijit.jit(fn, jit_config=config), np.ones(3), 1)
    assert "loop" in report.ops_per_graph[0] and report.graph_break_count == 0
    with np.errstate(all="raise"):
        assert_same_failure(fn, np.ones(3), 5, jit_config=config)


def test_entries_keep_no_object_the_function_only_read():
    """The replay kept by an entry holds values by their sources: an object the function
    read (a model passed as self, with its arrays) is freed once the caller drops it."""
    import gc
    import weakref

    for method in (_Stepper.run, _Stepper.run_pair):     # self as an argument; in a tuple
        stepper = _Stepper()
        jitted = pijit.jit(method)
        jitted(stepper, np.ones(3), np.array([1]))
        assert cache.record(method.__code__).entries[0].graph is not None
        alive = weakref.ref(stepper)
        del stepper
        gc.collect()
        assert alive() is None, method.__name__


_deep_callee = []


def _deep(x, n):
    y = x * 2.0
    if n == 0:
        raise ValueError(f"bottom {y[0]}")
    return _deep_callee[0](x, n - 1) + y


@pytest.mark.parametrize("depth", [1, 2, 300])
def test_error_through_a_deep_recursion_of_jitted_calls(depth):
    """Each jitted call the error leaves cleans the traceback again, from the entries it
    added to the part cleaned before (a full walk each time was quadratic: 39 s for a
    4,000-deep recursion): every level's frame is kept, at its line."""
    x = np.ones(3)
    _deep_callee[:] = [_deep]
    expected, expected_frames, _, _ = failure(_deep, x, depth)
    jitted = pijit.jit(_deep)
    pijit.reset(jitted)
    _deep_callee[:] = [jitted]
    try:
        for _ in range(2):
            got, frames, frame, _ = failure(jitted, x, depth)
            assert type(got) is ValueError and str(got) == str(expected)
            assert frames == expected_frames
            assert_same_locals(frame.f_locals, {"x": x, "n": 0, "y": x * 2.0})
    finally:
        _deep_callee.clear()
    assert pijit.stats(jitted)["compile_count"] >= 1


def comprehension_scales(a, j):
    parts = [a * j for j in range(3)]
    del parts
    b = np.stack([a * k for k in range(3)])
    return b / 0.0


@pytest.mark.parametrize("bound", [True, False])
def test_error_after_a_comprehension_leaves_its_variable_as_plain(bound):
    """The replay runs a comprehension's variable as the user's code does: on 3.12+ the
    comprehension is inlined (PEP 709) and restores the local it reused, so `j` holds the
    argument again and `k` is unbound where the division raises (3.11: their own frames)."""
    a = np.ones(3)
    with np.errstate(all="raise"):
        _, _, frame = assert_same_failure(comprehension_scales, a, 7 if bound else 0.5)
    assert "k" not in frame.f_locals


def scaled_sum(x, n):
    s = 0.0
    for i in range(n):
        s += x[i] * 2.0
    return s


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_error_inside_a_loop_nest_reads_as_the_users(level):
    """An index out of bounds in a loop nest (its C kernel hands over to its Python form,
    which raises): one frame of the user's function at the loop body's line, and the
    debugger's frame holds the user's loop variables with plain Python's values."""
    x = np.arange(5.0)
    report = pijit.explain(pijit.jit(scaled_sum, jit_config={"jit_level": level}), x, 5)
    assert report.ops_per_graph == [["loop_nest", "tuple_item"]]
    _, frames, frame = assert_same_failure(scaled_sum, x, 7, locals_=False,
                                           jit_config={"jit_level": level})
    assert frames[-1][1] == scaled_sum.__code__.co_firstlineno + 3
    _, _, plain, _ = failure(scaled_sum, x, 7)
    for name in ("x", "s", "i"):
        assert_same_locals({name: frame.f_locals[name]}, {name: plain.f_locals[name]})
