"""Tracers and debuggers see the user's code: while a line tracer is active (sys.settrace:
coverage, pdb/bdb, IDEs) or, on 3.12+, a sys.monitoring tool watches the function's code (any
event but a profiler's), a jitted function runs its original bytecode. Profilers are not
tracers: under cProfile the function stays jitted (3.12+; 3.11's prefix cannot answer a
profiled call). One started inside a call, after a graph break, sees the rest of the call
run as plain Python in the same frame (transform._plain_rest)."""
import bdb
import cProfile
import io
import json
import os
import pdb
import pstats
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import pijit
from pijit._compat import CALL_PREFIX


def softish(x):
    m = x.max()
    e = np.exp(x - m)
    s = e.sum()
    return e / s


def line_events(fn, *args):
    """[(relative line, local names)] of the 'line' events in fn's own code."""
    code = getattr(fn, "fn", fn).__code__
    seen = []

    def tracer(frame, event, arg):
        if frame.f_code is code and event == "line":
            seen.append((frame.f_lineno - code.co_firstlineno, sorted(frame.f_locals)))
        return tracer

    sys.settrace(tracer)
    try:
        result = fn(*args)
    finally:
        sys.settrace(None)
    return seen, result


def test_settrace_sees_every_line_with_the_users_locals():
    x = np.linspace(-1, 1, 7)
    jitted = pijit.jit(softish)
    jitted(x)                                  # compiled before the tracer starts
    plain_events, plain_result = line_events(softish, x)
    jit_events, jit_result = line_events(jitted, x)
    assert jit_events == plain_events and len(plain_events) == 4
    assert np.array_equal(jit_result, plain_result)
    hits = pijit.stats(jitted)["cache_hits"]
    jitted(x)                                   # jitted again once the tracer is gone
    assert pijit.stats(jitted)["cache_hits"] == hits + 1


class Stops(bdb.Bdb):
    def __init__(self):
        super().__init__()
        self.stops = []

    def user_line(self, frame):
        if frame.f_code.co_filename == __file__:
            self.stops.append((frame.f_code.co_name, frame.f_lineno, sorted(frame.f_locals)))
        self.set_continue()


def test_a_breakpoint_inside_a_jitted_function_fires():
    x = np.linspace(-1, 1, 7)
    jitted = pijit.jit(softish)
    jitted(x)
    line = softish.__code__.co_firstlineno + 2          # e = np.exp(x - m)
    stops = []
    for fn in (softish, jitted):
        debugger = Stops()
        debugger.set_break(__file__, line)
        debugger.runcall(fn, x)
        debugger.clear_all_breaks()
        stops.append(debugger.stops)
    assert stops[0] == stops[1]
    assert ("softish", line, ["m", "x"]) in stops[1]


COVERED = """
    import numpy as np, pijit

    @pijit.jit
    def f(x):
        y = x * 2
        if y.sum() > 0:
            z = np.tanh(y)
        else:
            z = y
        return z + 1

    for _ in range(3):
        f(np.ones(4))
"""


@pytest.mark.parametrize("core", ["ctrace", "sysmon"])
def test_coverage_reports_the_body_of_a_jitted_function_as_run(tmp_path, core):
    """Under `coverage run` the body used to be reported as not executed (67%)."""
    pytest.importorskip("coverage")
    if core == "sysmon" and sys.version_info < (3, 12):
        pytest.skip("sys.monitoring (coverage's sysmon core) is new in 3.12")
    script = tmp_path / "covered.py"
    script.write_text(textwrap.dedent(COVERED))
    reports = []
    for env in ({"PIJIT_DISABLE": "1"}, {}):
        env = dict(os.environ, COVERAGE_CORE=core, COVERAGE_FILE=str(tmp_path / ".coverage"),
                   **env)
        for cmd in (["run", str(script)], ["json", "-o", str(tmp_path / "cov.json")]):
            proc = subprocess.run([sys.executable, "-m", "coverage", *cmd], cwd=tmp_path,
                                  capture_output=True, text=True, timeout=300, env=env)
            assert proc.returncode == 0, proc.stderr
        data = json.loads((tmp_path / "cov.json").read_text())
        reports.append(data["files"]["covered.py"]["missing_lines"])
    assert reports[0] == reports[1] == [10]        # only the else branch


def test_a_profiler_does_not_stop_jitting():
    """Except on 3.11, where a profiled call goes on past the prefix, as plain Python
    (csrc/call_prefix.c prefix_run: the profiler would see the frame return uncalled)."""
    x = np.linspace(-1, 1, 7)
    jitted = pijit.jit(softish)
    jitted(x)
    hits = pijit.stats(jitted)["cache_hits"]
    profiler = cProfile.Profile()
    profiler.runcall(jitted, x)
    assert pijit.stats(jitted)["cache_hits"] == hits + (not CALL_PREFIX)


def profile_rows(fn, x):
    """{name: (calls, primitive calls)} cProfile counts of this file's functions."""
    profiler = cProfile.Profile()
    profiler.runcall(profiled_caller, fn, x)
    stats = pstats.Stats(profiler).stats
    return {name: counts[:2] for (file, _, name), counts in stats.items() if file == __file__
            and not name.startswith("__pijit")}


def test_cprofile_counts_each_function_and_its_caller_once(capsys):
    """On 3.11 a jitted function object's frame, answered at its prefix, returned without
    the profiler seeing it called: cProfile ended its caller's entry there (the caller was
    missing from the profile); with a break the function was counted twice."""
    x = np.ones(3)
    for fn in (softish, profiled_with_a_break):
        jitted = pijit.jit(fn)
        jitted(x)
        plain = profile_rows(fn, x)
        assert profile_rows(jitted, x) == plain
        assert plain == {"profiled_caller": (1, 1), fn.__name__: (2, 2)}


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is new in 3.12")
def test_sys_monitoring_line_events_see_the_users_lines():
    mon = sys.monitoring
    tool = mon.DEBUGGER_ID
    x = np.linspace(-1, 1, 7)
    jitted = pijit.jit(softish)
    jitted(x)
    lines = []

    def on_line(code, line):
        if code is softish.__code__:
            lines.append(line - code.co_firstlineno)

    mon.use_tool_id(tool, "pijit-test")
    try:
        mon.register_callback(tool, mon.events.LINE, on_line)
        mon.set_events(tool, mon.events.LINE)
        jitted(x)
        mon.set_events(tool, 0)
    finally:
        mon.register_callback(tool, mon.events.LINE, None)
        mon.free_tool_id(tool)
    assert lines == [1, 2, 3, 4]


def helper(v):
    return v * 2


def monitored(x):
    m = x.max()
    e = np.exp(x - m)
    try:
        s = helper(e[100])
    except IndexError:
        s = e.sum()
    for k in range(2):
        s = s + k
    return e / s


def monitoring_events(fn, tool, events, local):
    """[(event, offset)] sys.monitoring gives `tool` for `monitored`'s code during fn(x)."""
    mon = sys.monitoring
    code, seen = monitored.__code__, []
    names = [n for n in dir(mon.events) if n.isupper() and n != "NO_EVENTS"]
    mon.use_tool_id(tool, "pijit-test")
    try:
        for name in names:
            mon.register_callback(tool, getattr(mon.events, name),
                                  lambda c, off, *_, name=name: seen.append((name, off))
                                  if c is code else None)
        if local:
            mon.set_local_events(tool, code, events)
        else:
            mon.set_events(tool, events)
        result = fn(np.linspace(-1, 1, 7))
    finally:
        mon.set_events(tool, 0)
        mon.set_local_events(tool, code, 0)
        for name in names:
            mon.register_callback(tool, getattr(mon.events, name), None)
        mon.free_tool_id(tool)
    return seen, result


MONITORED = [("PY_START", True), ("PY_RETURN", False), ("PY_RETURN", True), ("CALL", False),
             ("CALL", True), ("RAISE", False), ("EXCEPTION_HANDLED", False),
             ("BRANCH", True), ("JUMP", False), ("INSTRUCTION", True)]


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is new in 3.12")
@pytest.mark.parametrize("event,local", MONITORED)
def test_sys_monitoring_tools_see_every_event_of_the_users_code(event, local):
    """A frame the hook answers runs none of its code's instructions: a tool watching
    PY_RETURN, CALL or RAISE globally, or PY_START for that one code, saw nothing of it."""
    x = np.linspace(-1, 1, 7)
    jitted = pijit.jit(monitored)
    jitted(x)
    events = getattr(sys.monitoring.events, event)
    plain, plain_result = monitoring_events(monitored, 3, events, local)
    hits = pijit.stats(jitted)["cache_hits"]
    seen, result = monitoring_events(jitted, 3, events, local)
    assert seen == plain and plain and np.array_equal(result, plain_result)
    assert pijit.stats(jitted)["cache_hits"] == hits          # ran its bytecode
    jitted(x)                                   # jitted again once the tool is gone
    assert pijit.stats(jitted)["cache_hits"] == hits + 1


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is new in 3.12")
@pytest.mark.parametrize("tool", ["PROFILER_ID", "DEBUGGER_ID"])
def test_a_profiler_tool_stays_jitted_unless_it_asks_for_lines(tool):
    """Profilers time the jitted code (their call events are not asked for per line); a
    profiler's tool id asking for line events is a tracer like any other."""
    mon = sys.monitoring
    x = np.linspace(-1, 1, 7)
    jitted = pijit.jit(monitored)
    jitted(x)
    tool = getattr(mon, tool)
    calls = mon.events.PY_START | mon.events.PY_RETURN | mon.events.CALL
    hits = pijit.stats(jitted)["cache_hits"]
    monitoring_events(jitted, tool, calls, False)
    jitted_under_calls = pijit.stats(jitted)["cache_hits"] - hits
    plain, _ = monitoring_events(monitored, tool, mon.events.LINE, False)
    seen, _ = monitoring_events(jitted, tool, mon.events.LINE, False)
    assert seen == plain and len(plain) == 12
    assert pijit.stats(jitted)["cache_hits"] - hits == jitted_under_calls
    assert jitted_under_calls == (tool == mon.PROFILER_ID)


def _trace_the_caller(tracer):
    """What pdb.set_trace does: trace the calling frame from here on, and new frames."""
    sys._getframe(1).f_trace = tracer
    sys.settrace(tracer)


def traced_after_a_break(x, tracer):
    a = x + 1
    print("a break", end="")
    _trace_the_caller(tracer)
    b = a * 2
    c = b + 1
    return c


def _traced_runs(fn, jitted):
    """[(events, exception or None, result)] of fn, then jitted twice, called with a tracer
    each run starts inside: (event, line from the def) of fn's own frames only."""
    code = fn.__code__
    runs = []
    for f in (fn, jitted, jitted):
        seen = []

        def tracer(frame, event, arg):
            if frame.f_code.co_filename == __file__ and frame.f_code.co_name == code.co_name:
                seen.append((event, frame.f_lineno - code.co_firstlineno))
            return tracer

        result = raised = None
        try:
            result = f(np.ones(3), tracer)
        except (ValueError, KeyError) as e:
            raised = e
        finally:
            sys.settrace(None)
        runs.append((seen, raised, result))
    return runs


def test_a_tracer_started_after_a_break_sees_the_users_events(capsys):
    jitted = pijit.jit(traced_after_a_break)
    runs = _traced_runs(traced_after_a_break, jitted)
    assert all(e is None for _, e, _ in runs) and pijit.stats(jitted)["cache_hits"] == 1
    runs = [seen for seen, _, _ in runs]
    assert runs[0] == [("line", 4), ("line", 5), ("line", 6), ("return", 6)]
    assert runs[2] == runs[0]
    assert pijit.explain(traced_after_a_break, np.ones(3), lambda *a: None).graph_break_count
    sys.settrace(None)


def _monitor_from_here(tool, on_line):
    """A sys.monitoring tool that starts watching every code's lines inside a call."""
    mon = sys.monitoring
    mon.use_tool_id(tool, "pijit-test")
    mon.register_callback(tool, mon.events.LINE, on_line)
    mon.set_events(tool, mon.events.LINE)


def monitored_after_a_break(x, on_line):
    a = x + 1
    print("a break", end="")
    _monitor_from_here(sys.monitoring.DEBUGGER_ID, on_line)
    b = a * 2
    c = b + 1
    return c


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is new in 3.12")
def test_a_monitoring_tool_started_after_a_break_sees_the_users_lines(capsys):
    """Its LINE events come with the transformed code (the frame's): same name, file, lines."""
    code = monitored_after_a_break.__code__
    mon = sys.monitoring
    runs = []
    jitted = pijit.jit(monitored_after_a_break)
    for fn in (monitored_after_a_break, jitted, jitted):
        seen = []

        def on_line(c, line):
            if c.co_filename == __file__ and c.co_name == code.co_name:
                seen.append(line - code.co_firstlineno)

        try:
            fn(np.ones(3), on_line)
        finally:
            mon.set_events(mon.DEBUGGER_ID, 0)
            mon.register_callback(mon.DEBUGGER_ID, mon.events.LINE, None)
            mon.free_tool_id(mon.DEBUGGER_ID)
        runs.append(seen)
    assert pijit.stats(jitted)["cache_hits"] == 1
    assert runs[0] == [4, 5, 6] and runs[2] == runs[0]


def profiled_with_a_break(x):
    a = x + 1
    print("a break", end="")
    b = a * 2
    return b + 1


def profile_events(fn, *args):
    """[(event, name)] sys.setprofile sees of the frames of this file's functions."""
    seen = []

    def profiler(frame, event, arg):
        if event in ("call", "return") and frame.f_code.co_filename == __file__ and \
                not frame.f_code.co_name.startswith("__pijit"):
            seen.append((event, frame.f_code.co_name))

    sys.setprofile(profiler)
    try:
        result = fn(*args)
    finally:
        sys.setprofile(None)
    return seen, result


def profiled_caller(fn, x):
    return fn(x) + fn(x)


def test_a_profiler_sees_one_call_of_a_function_with_a_break(capsys):
    """After a break the rest ran in a resume function the hook called once the frame had
    returned: a profiler saw the function called twice per call (and cProfile kept the
    counts of one of the two codes, which share a name, file and line)."""
    x = np.ones(3)
    jitted = pijit.jit(profiled_with_a_break)
    jitted(x)
    plain, plain_result = profile_events(profiled_caller, profiled_with_a_break, x)
    hits = pijit.stats(jitted)["cache_hits"]
    seen, result = profile_events(profiled_caller, jitted, x)
    assert seen == plain and plain.count(("call", "profiled_with_a_break")) == 2
    assert np.array_equal(result, plain_result)
    assert pijit.stats(jitted)["cache_hits"] == hits + 2 * (not CALL_PREFIX)
    assert pijit.explain(profiled_with_a_break, x).graph_break_count == 1


def stepped_after_a_break(x, commands, out):
    a = x + 1
    pdb.Pdb(stdin=commands, stdout=out, nosigint=True, readrc=False).set_trace()
    b = a * 2
    for k in range(2):
        b = b + k
    c = b.sum()
    return c


PDB_SESSION = "next\np sorted(locals())\nnext\nnext\nnext\nstep\nnext\nnext\nnext\nnext\ncontinue\n"


def test_pdb_steps_through_the_rest_of_a_jitted_function_after_a_break():
    """pdb.set_trace() (as breakpoint() does) after a break: `next` used to leave the
    function at the request's return (the rest ran in a resume function pdb never
    stopped in)."""
    jitted = pijit.jit(stepped_after_a_break)
    sessions = []
    for fn in (stepped_after_a_break, jitted, jitted):
        out = io.StringIO()
        try:
            result = fn(np.ones(3), io.StringIO(PDB_SESSION), out)
        finally:
            sys.settrace(None)
        sessions.append((re.sub(r"0x[0-9a-f]+", "0x", out.getvalue()), result))
    assert pijit.stats(jitted)["cache_hits"] == 1
    assert sessions[2] == sessions[0]
    loop_line = stepped_after_a_break.__code__.co_firstlineno + 5
    assert sessions[0][0].count(f"({loop_line})stepped_after_a_break()\n-> b = b + k") == 2
    assert "['a', " in sessions[0][0] and "'commands', 'out', 'x']" in sessions[0][0]
    report = pijit.explain(stepped_after_a_break, np.ones(3), io.StringIO("continue\n"),
                           io.StringIO())
    sys.settrace(None)
    assert report.graph_break_count


def jumps_back_after_a_break(x, commands, out):
    a = x + 1
    print("a break", end="")
    pdb.Pdb(stdin=commands, stdout=out, nosigint=True, readrc=False).set_trace()
    b = a * 2
    a = b + a
    return b


def _jump_sessions(target, shown):
    """pdb's output and the result of jumps_back_after_a_break run plain, then jitted twice,
    its session jumping from the return back to `target` (a line from the def); `shown`
    filters the names `p sorted(locals())` prints."""
    line = jumps_back_after_a_break.__code__.co_firstlineno + target
    commands = f"next\nnext\njump {line}\nnext\nnext\nnext\np {shown}\ncontinue\n"
    jitted = pijit.jit(jumps_back_after_a_break)
    sessions, hits = [], []
    for fn in (jumps_back_after_a_break, jitted, jitted):
        out = io.StringIO()
        try:
            result = fn(np.ones(3), io.StringIO(commands), out)
        finally:
            sys.settrace(None)
        sessions.append((re.sub(r"0x[0-9a-f]+", "0x", out.getvalue()), result.tolist()))
        hits.append(pijit.stats(jitted)["cache_hits"])
    assert hits[2] == hits[1] + 1 and pijit.stats(jitted)["break_count"]
    return sessions


@pytest.mark.parametrize("target", [1, 2])
def test_pdb_jumps_back_to_a_line_before_the_break(target, capsys):
    """The jump failed ("can't jump into an exception handler, or code may be unreachable"):
    the plain copy the frame goes on in after the break was reachable only from there, so
    CPython's f_lineno setter found no reachable instruction of an earlier line."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # 3.12+: None to unbound locals
        sessions = _jump_sessions(target, "sorted(n for n in locals() if '__' not in n)")
    assert sessions[1] == sessions[0] and sessions[2] == sessions[0]
    # the debugger, started after the break, was back before it
    assert "Jump failed" not in sessions[0][0] and '-> print("a break"' in sessions[0][0]


@pytest.mark.xfail(strict=True, reason="a jump to the line of a break lands in the "
                   "transformed code's own instructions of that line (its resume prefix pushing "
                   "the stack parameters, or its graph), not in the plain copy: UnboundLocalError "
                   "(__pijit_s0) on 3.11, a None called on 3.12+")
def test_pdb_jumps_back_to_the_line_of_a_break(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sessions = _jump_sessions(3, "sorted(n for n in locals() if '__' not in n)")
    assert sessions[1] == sessions[0] and sessions[2] == sessions[0]


@pytest.mark.xfail(sys.version_info >= (3, 12), strict=True,
                   reason="3.12+'s f_lineno setter binds None to every unbound local: after "
                   "a jump the frame also shows pijit's deleted temporaries (__pijit_*), None")
def test_pdb_jumps_back_and_the_frame_holds_the_users_locals_only(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sessions = _jump_sessions(1, "sorted(locals())")
    assert sessions[2] == sessions[0]


class Shows:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def raises_in_a_with_after_a_break(x, tracer):
    a = x + 1
    with Shows():
        print("a break", end="")
        _trace_the_caller(tracer)
        a = a * 2
        raise ValueError("boom")
    return a


def reraises_after_a_break(x, tracer):
    a = x + 1
    try:
        raise KeyError("k")
    except KeyError:
        print("a break", end="")
        _trace_the_caller(tracer)
        a = a * 2
        raise


@pytest.mark.parametrize("fn", [raises_in_a_with_after_a_break, reraises_after_a_break])
def test_an_exception_leaving_a_traced_frame_after_a_break_has_the_users_lines(fn, capsys):
    """The exception leaves through pijit's cleaning handler, whose instructions had the
    function's first line: a tracer started after the break saw a 'line' event there (on
    the `def` line) before the frame's return, which plain Python has not."""
    jitted = pijit.jit(fn)
    runs = [(seen, type(e), str(e)) for seen, e, _ in _traced_runs(fn, jitted)]
    assert all(e is not None for _, e, _ in runs) and pijit.stats(jitted)["cache_hits"] == 1
    assert runs[0][0] == ([("line", 5), ("line", 6), ("exception", 6), ("line", 2),
                           ("return", 6)] if fn is raises_in_a_with_after_a_break else
                          [("line", 7), ("line", 8), ("return", 8)])
    assert runs[2] == runs[0]
    stats = pijit.stats(jitted)
    assert stats["break_count"] and stats["entries"][0]["ops"] == ["add"]


def traced_inside_a_loop_after_a_break(x, tracer):
    a = x + 1
    for k in range(3):
        a = a * 2
        print("a break", end="")
        if k == 1:
            _trace_the_caller(tracer)
        a = a + k
    return a


@pytest.mark.xfail(strict=True, reason="a break inside a for loop's body outlines the body "
                   "(a function of its own, transform._call_body): a tracer started in it "
                   "traces that frame, sees it return a tuple, and never the loop's own "
                   "frame; the rest of the call is plain only from the next iteration on")
def test_a_tracer_started_inside_an_outlined_loop_body_sees_the_users_events(capsys):
    jitted = pijit.jit(traced_inside_a_loop_after_a_break)
    runs = _traced_runs(traced_inside_a_loop_after_a_break, jitted)
    assert all(e is None for _, e, _ in runs) and pijit.stats(jitted)["cache_hits"] == 1
    runs = [(seen, result.tolist()) for seen, _, result in runs]
    assert runs[0][0] == [("line", 7), ("line", 2), ("line", 3), ("line", 4), ("line", 5),
                          ("line", 7), ("line", 2), ("line", 8), ("return", 8)]
    assert runs[2] == runs[0]


def _monitor_this_frame(on_line):
    """What a sys.monitoring debugger does: the LINE events of the calling frame's code."""
    mon = sys.monitoring
    mon.use_tool_id(mon.DEBUGGER_ID, "pijit-test")
    mon.register_callback(mon.DEBUGGER_ID, mon.events.LINE, on_line)
    mon.set_local_events(mon.DEBUGGER_ID, sys._getframe(1).f_code, mon.events.LINE)


def locally_monitored_after_a_break(x, on_line):
    a = x + 1
    print("a break", end="")
    _monitor_this_frame(on_line)
    b = a * 2
    c = b + 1
    return c


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is new in 3.12")
def test_a_tool_watching_the_frames_own_code_after_a_break_sees_the_users_lines(capsys):
    """Local events of the frame's code (no global event): the break handed the rest to a
    resume function, whose code the tool does not watch (it saw one line of three)."""
    code = locally_monitored_after_a_break.__code__
    mon = sys.monitoring
    runs = []
    jitted = pijit.jit(locally_monitored_after_a_break)
    for fn in (locally_monitored_after_a_break, jitted, jitted):
        seen, codes = [], []

        def on_line(c, line):
            if c.co_filename == __file__ and c.co_name == code.co_name:
                seen.append(line - code.co_firstlineno)
                codes.append(c)

        try:
            result = fn(np.ones(3), on_line)
        finally:
            for c in set(codes):
                mon.set_local_events(mon.DEBUGGER_ID, c, 0)
            mon.register_callback(mon.DEBUGGER_ID, mon.events.LINE, None)
            mon.free_tool_id(mon.DEBUGGER_ID)
        runs.append((seen, result.tolist()))
    assert pijit.stats(jitted)["cache_hits"] == 1
    assert runs[0] == ([4, 5, 6], [5.0] * 3) and runs[2] == runs[0]
