"""Tracebacks that read as the user's: an exception leaving a jitted call -> its traceback
with pijit's own frames hidden and each user call shown once, at the user's line.

CPython hides its importlib frames from tracebacks the same way (Python/import.c,
remove_importlib_frames): after the fact, by relinking the traceback entries. A jitted call
runs frames the user never wrote: the transformed function (which stands for the user's
frame), resume functions and outlined loop bodies (which continue it), the replay of a graph
(which redoes it in NumPy), generated graph functions and pijit's own modules (hidden). Every
generated code object that stands for a user's function is registered here with the user's
code it comes from; `clean` keeps, of consecutive entries standing for one call, the
innermost, and drops hidden entries, moving the user's line they hold (a graph function's
lines are the user's) to the user's entry before them. PIJIT_FULL_TRACEBACK=1 keeps
everything (for debugging pijit itself).

An error found while compiling a call (a graph break in strict mode, arguments that do not
match input_signature, an interrupt during a build) is raised from a frame standing for the
user's function instead of from pijit's compiler (`user_errors`).
"""
from __future__ import annotations

import os
import types
import weakref

from pijit import cache, config
from pijit.bytecode_gen import frames
from pijit.interface import GraphBreakError

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# Names of generated graph code (backends): internal even though their file is the user's.
_GRAPH_PREFIX = "__pijit_"

# id(code) -> (weak reference to it, the user's code it stands for, whether it continues a
# frame of that code called just before it: resume functions, loop bodies, replays).
_registry: dict = {}


def register(code, origin, continues: bool):
    """Record that generated `code` stands for a call of the user's `origin` code."""
    key = id(code)
    ref = weakref.ref(code, lambda _, key=key, registry=_registry: registry.pop(key, None))
    _registry[key] = (ref, origin_of(origin), continues)


def _entry(code):
    found = _registry.get(id(code))
    if found is None or found[0]() is not code:
        return None
    return found


def origin_of(code):
    """The user's code a (generated) code stands for; itself when it is the user's."""
    found = _entry(code)
    return code if found is None else found[1]


def continues(code) -> bool:
    """A resume function, outlined loop body or replay: it carries on the frame of the same
    user function that called it (or whose failure it redoes)."""
    found = _entry(code)
    return found is not None and found[2]


def is_hidden(code) -> bool:
    """pijit's own frames: its modules, and graph code generated from the user's lines."""
    return code.co_name.startswith(_GRAPH_PREFIX) or code.co_filename.startswith(_PACKAGE_DIR)


def clean(exc: BaseException) -> None:
    """Rewrite the tracebacks of `exc` and of the exceptions it chains, as the module
    docstring says. Never raises (it runs in exception handlers of generated code)."""
    if config.env_full_tracebacks():
        return
    todo, seen = [exc], set()
    while todo:
        exc = todo.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        try:
            exc.__traceback__ = clean_traceback(exc.__traceback__)
        except Exception:       # noqa: BLE001 - a traceback we cannot rebuild stays as it is
            pass
        todo += [exc.__cause__, exc.__context__]


# id of the traceback entry `clean_traceback` returned last. An exception leaving a chain of
# jitted calls (a recursion) is cleaned in each of them; between two cleans CPython only
# prepends the entries of the frames it left, in front of the entry cleaned before, which
# is alive there as long as that traceback is. So the walk stops one entry past it: cleaning
# a 4,000-deep recursion's error was quadratic (39 s), it is linear. An id of a freed entry
# reused by another costs a traceback that keeps some of pijit's frames, never a value.
_clean_head = None


def clean_traceback(tb):
    """The traceback `tb` with hidden entries dropped and continued entries collapsed."""
    global _clean_head
    head = tb
    kept = []               # [frame, lasti, lineno] of the entries kept, outermost first
    changed = False
    rest = None             # the part cleaned before, after the entry where the walk stopped
    while tb is not None:
        frame, code = tb.tb_frame, tb.tb_frame.f_code
        if is_hidden(code):
            changed = True
            if kept and code.co_filename == kept[-1][0].f_code.co_filename and \
                    _generated(kept[-1][0].f_code):
                _move_line(kept[-1], tb.tb_lineno)
        else:
            if kept and continues(code) and origin_of(code) is origin_of(kept[-1][0].f_code) \
                    and _called_from(frame, kept[-1][0]):
                kept.pop()
                changed = True
            kept.append([frame, tb.tb_lasti, tb.tb_lineno])
        if id(tb) == _clean_head and tb is not head:
            rest = tb.tb_next
            break
        tb = tb.tb_next
    result = _relink(kept, rest) if changed else head
    _clean_head = id(result)
    return result


def _called_from(frame, caller) -> bool:
    """`frame` was called by `caller`, through pijit's hidden frames (a replay is run by the
    handler of the frame it redoes) and frames continuing the same call (a loop body's
    resume function, called by the loop body, a clean before dropped): it continues that
    very call, not a recursive call of the same function whose frame comes next."""
    origin = origin_of(frame.f_code)
    back = frame.f_back
    while back is not None and back is not caller and (
            is_hidden(back.f_code) or continues(back.f_code) and origin_of(back.f_code) is origin):
        back = back.f_back
    return back is caller


def _generated(code) -> bool:
    return _entry(code) is not None


def _move_line(entry, lineno):
    """Show the kept entry at `lineno`, through an instruction of its code on that line
    (a traceback entry is displayed from its instruction's position; IPython loops on an
    entry without one), when the code has one."""
    if lineno is None or lineno == entry[2]:
        return
    for start, _, line in entry[0].f_code.co_lines():
        if line == lineno:
            entry[1], entry[2] = start, lineno
            return


def _relink(kept, rest=None):
    tb = rest
    for frame, lasti, lineno in reversed(kept):
        tb = types.TracebackType(tb, frame, lasti, lineno)
    return tb


def user_errors(on_miss):
    """The C hook's miss callback: on_miss(func, args), except that an error the user is
    to see comes out of a frame standing for func's, at the line it concerns, with func's
    arguments as its locals, and chained to nothing of pijit's: on_miss returns a function
    raising it, which the hook calls with the frame's arguments. With compile_with_try off,
    pijit's own errors keep their whole traceback."""
    def callback(func, args):
        try:
            return on_miss(func, args)
        except BaseException as e:      # noqa: BLE001 - KeyboardInterrupt included
            if not _for_the_user(func, e):
                raise
            e.__traceback__ = e.__context__ = e.__cause__ = None
            e.__suppress_context__ = False
            code = func.__code__
            lineno = getattr(e, "lineno", None)
            if lineno is None:          # the line the frame starts at
                lineno = next(line for _, _, line in code.co_lines() if line is not None)
            raiser = frames.raiser(func, e, lineno)
            register(raiser.__code__, code, continues(code))
            return raiser
    callback.__wrapped__ = on_miss
    return callback


def _for_the_user(func, e) -> bool:
    if not isinstance(e, Exception) or isinstance(e, GraphBreakError):
        return True
    rec = cache.record(func.__code__)
    return rec is None or rec.config.compile_with_try
