"""The C hook's callback: a cache miss -> compile a new entry, or decide to run plain Python.

Policy lives here: the input_signature check, recompile reasons, the entry limit, automatic
dynamic dimensions, strict mode (GraphBreakError), one compile per code at a time, and what
a failure to compile does (plain Python; retried later when transient; raised when a signal
handler raised it).
"""
from __future__ import annotations

import signal
import threading

import numpy as np

from pijit import cache, eval_frame, explain, tracebacks
from pijit.cache import BreakInfo, EntryInfo
from pijit.capture.graph_break import STATIC_REASONS, CaptureAbandoned, GraphBreak
from pijit.capture.sources import ItemSource, LocalSource
from pijit.capture.wrap import DYNAMIC_VALUE
from pijit.bytecode_gen.resume import STACK_NAME, build_loop_body, build_resume
from pijit.compile_frame import compile_frame
from pijit.graph.verify import GraphInvariantError
from pijit.guards import Guard, first_failure, hash_args_guard, to_program
from pijit.interface import GraphBreakError


@tracebacks.user_errors
def on_miss(func, args):
    """Called by the C hook when no entry of func's code accepts this call: returns the
    function to run it with (a new entry's), or None to run it as plain Python."""
    code = func.__code__
    rec = cache.record(code)
    if rec is None:
        return None
    if rec.input_signature is not None:
        check_signature(rec.input_signature, code, args)
    entries = None
    try:
        with rec.lock:
            if rec.builder is not None:
                # Another thread is compiling this code: run plain meanwhile, and miss again
                # (then hit its entry, or compile) on a later call. See README, Threads.
                return None
            if rec.retry_in:
                rec.retry_in -= 1           # backing off after a transient failure
                return None
            # One consistent view for the whole decision, however other threads reset.
            entries, generation = list(rec.entries), rec.generation
            rec.builder = threading.get_ident()
        return _compile_miss(func, args, rec, entries, generation)
    except TRANSIENT:
        # Raised by pijit's work around the compile (which guard failed, logging) near the
        # recursion limit or short of memory: not the user's, this call runs plain.
        if not rec.config.compile_with_try:
            raise
        return None
    finally:
        if entries is not None:             # claimed, even if a signal handler raised since
            with rec.lock:
                rec.builder = None


def _compile_miss(func, args, rec, entries, generation):
    """The miss of the thread that holds the code's compile claim: which guard failed, the
    limit, the dynamic dims, then compile and install (unless a reset came meanwhile)."""
    code = func.__code__
    config = rec.config
    # Dims and values dynamic from the start (input_signature, a loop body's item); more are
    # added when a recompile is caused by them changing.
    declared = dict(rec.dynamic) or signature_dims(rec.input_signature, code)
    dynamic = dict(declared)
    reason = None
    varied = eval_frame.take_varied(code)
    if entries:
        reason = first_failure(entries[0].guards, func, args) or "no entry matched"
        if len(entries) >= config.limit_graph_count:
            return _freeze(rec, code, generation, reason)
        explain.log("recompiles", f"{_where(code)}: recompiling {code.co_name}: {reason}")
        if config.enable_dynamic_shape:
            _merge(dynamic, changed_dims(entries, func, args))
    if varied and config.enable_dynamic_shape:
        _merge(dynamic, varied_values(code, args, varied))
    stuck = {s for s in _automatic(dynamic, declared) if s in rec.must_specialize}
    if stuck:
        if rec.specialized_entries >= SPECIALIZED_ENTRIES:
            names = ", ".join(sorted(s.name() for s in stuck))
            return _freeze(rec, code, generation, reason or "", why=(
                f"{code.co_qualname}: {names} took new values or sizes again, and capture "
                f"needs them constant: inputs matching none of its {len(entries)} entries "
                f"run as plain Python (first: {reason})"))
        for source in stuck:        # known to break capture: specialise at once
            dynamic.pop(source)
            if source in declared:
                dynamic[source] = set(declared[source])
    extra = [hash_args_guard(rec.hash_args)] if rec.hash_args is not None else []
    known_breaks = {b.reason for e in entries for b in e.breaks}
    try:
        info, fn, plan, broke = _compile(func, args, rec, declared, dynamic, extra,
                                         known_breaks)
        failure = None
    except Exception as e:      # KeyboardInterrupt, SystemExit...: not ours, they propagate
        failure = e
    if failure is not None:
        # Raised out of the except clause, so that the user's exception does not show as
        # raised while handling pijit's.
        signalled = _signal_exception(failure)
        if signalled is not None:
            raise signalled
        if isinstance(failure, GraphBreak):
            return _fallback(rec, code, generation, failure, extra, reason)
        if isinstance(failure, CaptureAbandoned):
            return _abandoned(rec, code, generation, failure, args, extra, reason)
        if not config.compile_with_try or isinstance(failure, GraphInvariantError):
            raise failure
        return _failed(rec, code, generation, failure)
    program = to_program(info.guards)
    with rec.lock:
        if rec.generation != generation:
            return fn           # reset meanwhile: run what was compiled for this call, once
        rec.entries.insert(0, info)
        rec.compile_count += 1
        rec.must_specialize |= broke
        rec.specialized_entries += bool(broke or stuck)
        if reason is not None:
            rec.recompile_reasons.append(reason)
        eval_frame.add_entry(code, *program, fn, promote_at=plan.promote_at, trial=plan.trial,
                             margin=plan.margin, plain_args=tuple(args) if plan.plain else None,
                             promote_after=plan.promote_after_s,
                             plain_until_promoted=plan.plain_until_promoted)
    if info.callee is not None:
        _jit_callee(rec, info.callee)
    for brk in info.breaks:
        explain.log("graph_breaks", f"{brk.filename}:{brk.lineno}: graph break in "
                    f"{code.co_name}: {brk.reason}", warn=config.LOG_GRAPH_BREAK)
    explain.log("guards", lambda: f"{_where(code)}: new entry for {code.co_name}:\n" +
                "\n".join(f"  {g}" for g in info.guards))
    explain.log("graph", lambda: f"{_where(code)}: graph of {code.co_name}:\n{info.graph}")
    explain.log("bytecode",
                lambda: f"{_where(code)}: transformed {code.co_name}:\n{info.bytecode}")
    return None if plan.plain_until_promoted else fn


# Entries a code compiles specialised on a value or dims that the automatic dynamic rule
# found capture needs constant (a library function checking its int argument, `if M < 1:`,
# sees a new M at nearly every call): past them, a miss caused by such a change freezes the
# code as limit_graph_count does, instead of capturing an entry per value (twice: dynamic,
# then specialised) that later calls rarely hit.
SPECIALIZED_ENTRIES = 2


def _freeze(rec, code, generation, reason, why=None):
    """Past limit_graph_count (or SPECIALIZED_ENTRIES, `why`): inputs that match an entry
    keep using it (the C hook still walks them); the others run as plain Python, reported
    once per code."""
    limit = rec.config.limit_graph_count
    what = why or (f"limit_graph_count={limit} reached for {code.co_qualname}: inputs "
                   f"matching none of its entries run as plain Python (first: {reason})")
    with rec.lock:
        if rec.generation != generation:
            return None
        eval_frame.set_state(code, eval_frame.FROZEN)
        if rec.limit_logged:
            return None
        rec.limit_logged = True
        rec.eager_fallbacks.append(BreakInfo(what, code.co_filename, code.co_firstlineno))
    explain.log("recompiles", f"{_where(code)}: {what}", warn=True)
    return None


# Failures that say nothing about the function: the same compile may succeed on a later call
# (memory short for a moment; a capture deeper than the room the C hook leaves it: the hook
# runs a frame within 200 frames of the recursion limit plain instead of compiling it).
TRANSIENT = (RecursionError, MemoryError)
# Attempts after the first transient failure, at the 2nd, 4th, 8th... miss since; a failure
# that is not transient after all leaves the code to plain Python at the 64th.
TRANSIENT_RETRIES = 6


def _failed(rec, code, generation, e):
    """An exception inside pijit: this call runs plain; a transient one is retried later,
    any other (a bug) leaves the code to plain Python for good (logged)."""
    text = f"{type(e).__name__}: {e}"
    with rec.lock:
        if rec.generation != generation:
            return None
        transient = isinstance(e, TRANSIENT) and rec.transient_failures < TRANSIENT_RETRIES
        if transient:
            rec.transient_failures += 1
            rec.retry_in = 2 ** (rec.transient_failures - 1) - 1
            when = (f"after {rec.retry_in} more misses" if rec.retry_in else "at the next miss")
            why = f"transient error: {text}; compiled again {when}"
        else:
            why = f"internal error: {text}"
            eval_frame.set_state(code, eval_frame.NEVER_COMPILE)
        rec.eager_fallbacks.append(BreakInfo(why, code.co_filename, code.co_firstlineno))
    explain.log("graph_breaks", f"{_where(code)}: pijit failed to compile {code.co_name} "
                f"({why}); running plain Python", warn=True)
    return None


def _signal_exception(e):
    """The exception a Python signal handler raised during the compile (an alarm-based
    timeout, say), found in e's chain however capture wrapped it, or None. It is the
    user's, not a failure of pijit: plain Python would have raised it from this call too."""
    handlers = set()
    for sig in signal.valid_signals():
        try:
            handler = signal.getsignal(sig)
        except (OSError, ValueError):
            continue
        handler = getattr(handler, "__func__", handler)
        handler = getattr(handler, "func", handler)             # functools.partial
        if hasattr(handler, "__code__"):
            handlers.add(id(handler.__code__))
    seen = set()
    while handlers and e is not None and id(e) not in seen:
        seen.add(id(e))
        tb = e.__traceback__
        while tb is not None:
            if id(tb.tb_frame.f_code) in handlers:
                return e
            tb = tb.tb_next
        e = e.__cause__ or e.__context__
    return None


def _compile(func, args, rec, declared, dynamic, extra, known_breaks):
    """compile_frame (-> info, fn, plan, set()) with the automatic dynamic dims and values,
    or without them when they make capture break where the entries compiled so far did not
    (-> ..., the sources that were dynamic automatically). Lists whose length changed stay
    dynamic, breaks and all (see _varied_lists)."""
    makers = _resume_makers(func, rec)
    automatic = _automatic(dynamic, declared)
    lists = _varied_lists(automatic, func, args)
    try:
        compiled = compile_frame(func, args, rec.config, dynamic, extra, *makers)
        if automatic and automatic != lists and \
                any(b.reason not in known_breaks for b in compiled[0].breaks):
            raise _Specialize
    except (GraphBreak, _Specialize):
        if not automatic:
            raise
        # Some op needs the automatic dynamic dims or values to be constants (a shape,
        # a branch on a recursion depth): specialize this entry on them instead.
        kept = {s: dims for s, dims in dynamic.items() if s in lists or s not in automatic}
        compiled = compile_frame(func, args, rec.config, kept, extra, *makers)
        return (*compiled, automatic - lists)
    return (*compiled, set())


def _automatic(dynamic, declared) -> set:
    """The sources whose dims or value are dynamic by the automatic rule, not declared."""
    return {s for s, dims in dynamic.items() if set(dims) != set(declared.get(s, ()))}


def _varied_lists(automatic, func, args) -> set:
    """The automatic dynamic sources that are lists whose length changed, and items of them.
    New breaks where their items are read are kept: an entry specialised on a length would
    be followed by one per length (collected indices, values of a search), none of them hit
    again, and the code would end as plain Python."""
    lists = set()
    for source in automatic:
        try:
            if type(source.read(func, args)) is list:
                lists.add(source)
        except Exception:
            continue
    return lists | {s for s in automatic if isinstance(s, ItemSource) and s.base in lists}


class _Specialize(Exception):
    """Automatic dynamic dims/values made capture break where specialized entries did not."""


def _jit_callee(rec, callee):
    """A user function whose call could not be inlined is jitted on its own, with the
    caller's options, so its own graphs (and breaks) are captured when residual code calls it."""
    code = callee.__code__
    child = cache.record(code)
    if child is None:
        child = cache.register(code, rec.config, None, None)
    # Owned here too: a record another jitted function made (and owns) dies with it, which
    # the garbage collector may decide in the middle of this function's calls.
    if not any(c is child for c in rec.children):
        rec.children.append(child)
    rec.callees[id(code)] = code


def _resume_makers(func, rec):
    """(resume_code_for, body_code_for) for func's code: each resume function and outlined
    loop body is built once, and jitted with the same options as the code it continues."""
    def jitted(key, build, dynamic=None):
        code = rec.resumes.get(key)
        if code is None:
            code = build()
            child = cache.register(code, rec.config, None, rec.hash_args)
            child.dynamic = dynamic or {}
            rec.children.append(child)
            rec.resumes[key] = code
        return code

    def resume_code_for(instructions, position, depth, live):
        return jitted((position, depth, live),
                      lambda: build_resume(func, instructions, position, depth, live))

    def body_code_for(instructions, body):
        # The loop item (a loop index, usually) changes every iteration: never a constant.
        item = LocalSource(0, STACK_NAME.format(0))
        return jitted(("loop body", body), lambda: build_loop_body(func, instructions, body),
                      {item: {DYNAMIC_VALUE}})
    return resume_code_for, body_code_for


def _fallback(rec, code, generation, e: GraphBreak, extra, reason):
    """The function cannot be split: strict mode raises; otherwise this call runs plain, and
    so do later calls, always (a static reason: frame introspection) or while e's guards hold."""
    where = BreakInfo(e.detail and f"{e.reason.value}: {e.detail}" or e.reason.value,
                      code.co_filename, e.lineno)
    if rec.config.strict:
        raise GraphBreakError(f"{code.co_name}: {where.reason} at "
                              f"{explain.where(where.filename, where.lineno)}",
                              where.filename, where.lineno)
    explain.log("graph_breaks", f"{where.filename}:{where.lineno}: {code.co_name} runs as "
                f"plain Python: {where.reason}", warn=rec.config.LOG_GRAPH_BREAK)
    static = e.reason in STATIC_REASONS
    guards = [] if static else list(getattr(e, "guards", [])) + list(extra)
    program = None if static else to_program(guards)
    with rec.lock:
        if rec.generation != generation:
            return None
        rec.entries.insert(0, EntryInfo(guards=guards, fallback=where))
        if reason is not None:
            rec.recompile_reasons.append(reason)
        if static:
            eval_frame.set_state(code, eval_frame.NEVER_COMPILE)
        else:
            eval_frame.add_entry(code, *program, None)
    return None


def _abandoned(rec, code, generation, e: CaptureAbandoned, args, extra, reason):
    """Capture gave up on pure Python: calls with these argument types run as plain Python
    (an entry that runs plain, guarded by the types only, and remembered by the C hook so
    that the Wrapper calls them without it)."""
    guards = [Guard(LocalSource(i, code.co_varnames[i]), "type", (type(a),))
              for i, a in enumerate(args)] + list(extra)
    where = BreakInfo(f"no array work: runs as plain Python ({e})", code.co_filename,
                      code.co_firstlineno)
    program = to_program(guards)
    with rec.lock:
        if rec.generation != generation:
            return None
        rec.entries.insert(0, EntryInfo(guards=guards, fallback=where))
        rec.compile_count += 1
        if reason is not None:
            rec.recompile_reasons.append(reason)
        eval_frame.add_entry(code, *program, None, plain_args=tuple(args))
    explain.log("graph_breaks", f"{_where(code)}: {code.co_name} runs as plain Python: {e}",
                warn=rec.config.LOG_GRAPH_BREAK)
    return None


def check_signature(signature, code, args):
    """Raise TypeError when the call's arguments do not match input_signature."""
    for slot, spec in _signature_slots(signature, code):
        if spec is None:
            continue
        why = spec.mismatch(args[slot])
        if why is not None:
            raise TypeError(f"{code.co_name}() argument {code.co_varnames[slot]!r} does not "
                            f"match input_signature: {why}")


def signature_dims(signature, code) -> dict:
    """Dynamic dims declared by input_signature: {LocalSource: {axis, ...}}."""
    dims = {}
    for slot, spec in _signature_slots(signature, code):
        if spec is not None and spec.shape is not None:
            dynamic = {i for i, d in enumerate(spec.shape) if d is None}
            if dynamic:
                dims[LocalSource(slot, code.co_varnames[slot])] = dynamic
    return dims


def _signature_slots(signature, code):
    if signature is None:
        return []
    names = code.co_varnames[:code.co_argcount]
    first = 1 if len(signature) == len(names) - 1 and names and names[0] in ("self", "cls") else 0
    return [(first + i, spec) for i, spec in enumerate(signature)]


def changed_dims(entries, func, args) -> dict:
    """What changed since the entries in a way the next entry can leave dynamic: {source:
    dims} for arrays of the dtype and ndim an entry saw with other sizes (and the dims that
    entry left dynamic already), {source: {DYNAMIC_VALUE}} for int and float scalars of
    another value than an entry saw (loop indices, step counts) and for lists of another
    length (wrap.py then guards only their type). Every entry counts, not only the newest:
    calls alternating between ndims or dtypes would otherwise never compare two sizes of one
    kind, and compile a static entry per call."""
    changed, values = {}, {}
    for entry in entries:
        for guard in entry.guards:
            if not (guard.kind in ("array", "len")
                    or guard.kind == "eq" and type(guard.params[0]) in (int, float)):
                continue
            if guard.source not in values:
                try:
                    values[guard.source] = guard.source.read(func, args)
                except Exception:
                    values[guard.source] = _UNREADABLE
            value = values[guard.source]
            if guard.kind == "len":
                if type(value) is list and len(value) != guard.params[0]:
                    changed[guard.source] = {DYNAMIC_VALUE}
                continue
            if guard.kind == "eq":
                old = guard.params[0]
                if type(value) is type(old) and value != old:
                    changed[guard.source] = {DYNAMIC_VALUE}
                continue
            dtype, shape, flags = guard.params
            if type(value) is not np.ndarray or value.dtype != dtype or value.ndim != len(shape):
                continue
            dims = {i for i, (d, s) in enumerate(zip(shape, value.shape))
                    if d is not None and d != s}
            if dims:
                _merge(changed, {guard.source: dims | entry.dynamic_dims.get(guard.source, set())})
    return changed


_UNREADABLE = object()


def varied_values(code, args, varied: int) -> dict:
    """{source: {DYNAMIC_VALUE}} for the int and float arguments whose bit is set in `varied`
    (csrc/adapt.c's take_varied: they took other values while the signature was not hot):
    captured dynamic from the start, rather than specialised on this call's value and
    recompiled at the next."""
    return {LocalSource(i, code.co_varnames[i]): {DYNAMIC_VALUE}
            for i in range(min(len(args), code.co_argcount + code.co_kwonlyargcount, 64))
            if varied >> i & 1 and type(args[i]) in (int, float)}


def _merge(into: dict, more: dict):
    for source, dims in more.items():
        into[source] = set(into.get(source, ())) | set(dims)


def _where(code) -> str:
    return f"{code.co_filename}:{code.co_firstlineno}"
