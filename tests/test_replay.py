"""The replay of a graph (bytecode_gen/replay.py) binds what plain Python binds: random
programs are captured, their replay function is run to the end, and its locals at the return
are compared with plain Python's (every local it binds has plain Python's value, and every
array or number local of plain Python is bound)."""
import sys
import warnings

import numpy as np
import pytest
from hypothesis import event, given, note, settings, strategies as st

from pijit.bytecode_gen.replay import Replay, replay_code
from pijit.capture.interpreter import capture_frame
from pijit.config import JitConfig
from test_random_programs import CF_SETTINGS, build, cf_build, cf_programs, programs


def locals_at_return(fn, args):
    """fn(*args) run to its return (or to the exception leaving it): (the frame's locals
    then, the type of that exception or None)."""
    seen = {}

    def profile(frame, event, arg):
        if event == "return" and frame.f_code is fn.__code__:
            seen.update(frame.f_locals)

    old = sys.getprofile()
    sys.setprofile(profile)
    try:
        fn(*args)
    except Exception as e:      # noqa: BLE001 - compared with plain Python's
        return seen, type(e)
    finally:
        sys.setprofile(old)
    return seen, None


def check_replay(fn, args, config):
    """Capture fn(*args), run its replay, compare with plain Python: the same exception
    (if any), and the same locals where the frame returns or raises."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        capture = capture_frame(fn, tuple(args), config)
        replay = Replay(fn.__code__, capture, lambda code: None)
        if capture.break_point is not None or not replay.replayable:
            return "not replayed (a break, or writes into arrays)"
        code = replay_code(fn.__code__, capture.graph, replay.sources, replay.bindings,
                           replay.inlines)
        replayed, replayed_exc = locals_at_return(type(fn)(code, fn.__globals__), [*args])
        plain, plain_exc = locals_at_return(fn, [*args])
    assert replayed_exc is plain_exc, f"replay raised {replayed_exc}, plain {plain_exc}"
    for name, value in replayed.items():
        assert name in plain, f"{name} is not a local of plain Python's frame"
        expected = plain[name]
        assert type(value) is type(expected), f"{name}: {type(value)} != {type(expected)}"
        if isinstance(expected, np.ndarray):
            assert value.dtype == expected.dtype and np.array_equal(value, expected,
                                                                   equal_nan=True), name
    unbound = _dead_in_loop_nests(capture.graph)
    for name, expected in plain.items():
        if isinstance(expected, (np.ndarray, np.generic, int, float)) and name not in unbound:
            assert name in replayed, f"{name} is not bound by the replay"
    return "replayed" + (", raising" if plain_exc else "")


def _dead_in_loop_nests(graph) -> set:
    """Locals a loop nest assigns that nothing reads after it (a `for` loop's index): the
    nest does not return them, so its replay leaves them unbound (a known difference)."""
    dead = set()
    for node in graph.nodes:
        nest = getattr(node.fn, "nest", None)
        if nest is not None:
            dead |= {v[2:] for v in nest.variables()
                     if v.startswith("l_") and v not in nest.outputs}
    return dead


@settings(max_examples=150, deadline=None)
@given(programs())
def test_replay_of_straight_line_programs(program):
    src, args, *_ = program
    note(src)
    event(check_replay(build(src), args, JitConfig()))


@pytest.mark.parametrize("flavor", ["pure", "calls"])
@settings(max_examples=150, **CF_SETTINGS)
@given(data=st.data())
def test_replay_of_programs_with_branches_loops_and_calls(flavor, data):
    """Programs with branches, unrolled loops, and helpers (inlined, replayed as frames of
    their own, which must return what they returned)."""
    src, args, _, _ = data.draw(cf_programs(flavor))
    note(src)
    event(check_replay(cf_build(src), args, JitConfig()))


def running_sum(a, n):
    s = a * 0
    for i in range(n):
        s = s + a * i
    return s


def last_values(a, n):
    s = a + n
    for k in range(150):            # longer than MAX_LOOP_UNROLLING; runs, so t and k are set
        t = s * 0.5
        s = t + a
    return s, t, k


def nested(a, n):
    total = a * 0
    for i in range(n):
        row = total * 0.5
        for j in range(n):
            row = row + a / (i + j + 1)
        total = total + row
    return total


def loop_between(a, n):
    b = a * 2
    c = b + 1
    for i in range(n):
        c = c * 0.5 + b
    d = c - b
    return d


@pytest.mark.parametrize("fn", [running_sum, last_values, nested, loop_between])
def test_replay_of_loop_nodes(fn):
    """n known at run time only: range loops over it are loop nodes, replayed as loops."""
    config = JitConfig(specialize_scalar=False)
    capture = capture_frame(fn, (np.arange(3.0), 4), config)
    assert any(n.name == "loop" for n in capture.graph.nodes)
    assert check_replay(fn, [np.arange(3.0), 4], config) == "replayed"


def write_then_index_error(a, idx):
    a += 1.0                        # a write into the caller's array, then an error
    k = idx.argmax() + 10
    return a[k]                     # IndexError at run time


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_a_graph_that_wrote_is_not_replayed(level):
    """Replaying the failed graph would make its writes twice: a graph with writes raises
    its own error, after writing once, as plain Python."""
    from differential import assert_same
    report = assert_same(write_then_index_error, np.linspace(-1.0, 2.0, 6), np.arange(3),
                         ops=["iadd", "argmax", "getitem"],
                         jit_kwargs={"jit_config": {"jit_level": level}})
    assert report.graph_break_count == 0, report


def keywords_then_index_error(a, idx):
    s = np.sum(a, axis=0, keepdims=True)       # a node with keyword arguments
    k = idx.argmax() + 10
    return s[0, k]                              # IndexError at run time


def test_keyword_arguments_are_replayed_as_keywords():
    """The replay calls a node with its keyword arguments by keyword (3.11, 3.12: KW_NAMES;
    3.13: CALL_KW): passed by position, np.sum(a, 0, True) takes True for its dtype."""
    from differential import assert_same
    a, idx = np.arange(12.0).reshape(3, 4), np.arange(3)
    capture = capture_frame(keywords_then_index_error, (a, idx), JitConfig())
    (node,) = [n for n in capture.graph.nodes if n.name == "sum"]
    assert dict(node.kwargs) == {"axis": 0, "keepdims": True}
    assert check_replay(keywords_then_index_error, [a, idx], JitConfig()) == "replayed, raising"
    report = assert_same(keywords_then_index_error, a, idx)
    assert report.graph_count == 1 and report.graph_break_count == 0, report
