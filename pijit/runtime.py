"""The C hook's callback: a cache miss -> compile a new entry, or decide to run plain Python.

Policy lives here: the input_signature check, recompile reasons, the entry limit, automatic
dynamic dimensions, strict mode (GraphBreakError), and what a failure to compile does.
"""
from __future__ import annotations

import numpy as np

from pijit import cache, eval_frame, explain
from pijit.cache import BreakInfo, EntryInfo
from pijit.capture.graph_break import STATIC_REASONS, GraphBreak
from pijit.capture.sources import LocalSource
from pijit.capture.wrap import DYNAMIC_VALUE
from pijit.bytecode_gen.resume import STACK_NAME, build_loop_body, build_resume
from pijit.compile_frame import compile_frame
from pijit.guards import first_failure, hash_args_guard, to_program



class GraphBreakError(RuntimeError):
    """Raised in strict mode (mode="PSJit", fullgraph, jit_syntax_level="STRICT") when the
    function cannot be captured as one graph; names the reason and the user's file:line."""


def on_miss(func, args):
    """Called by the C hook when no entry of func's code accepts this call."""
    code = func.__code__
    rec = cache.record(code)
    if rec is None:
        return None
    config = rec.config
    if rec.input_signature is not None:
        check_signature(rec.input_signature, code, args)
    # Dims and values dynamic from the start (input_signature, a loop body's item); more are
    # added when a recompile is caused by them changing.
    declared = dict(rec.dynamic) or signature_dims(rec.input_signature, code)
    dynamic = dict(declared)
    if rec.entries:
        reason = first_failure(rec.entries[0].guards, func, args) or "no entry matched"
        rec.recompile_reasons.append(reason)
        explain.log("recompiles", f"{_where(code)}: recompiling {code.co_name}: {reason}")
        if config.enable_dynamic_shape:
            _merge(dynamic, changed_dims(rec.entries, func, args))
    if len(rec.entries) >= config.limit_graph_count:
        eval_frame.set_state(code, eval_frame.FROZEN)
        if not rec.limit_logged:
            rec.limit_logged = True
            explain.log("recompiles", f"{_where(code)}: limit_graph_count="
                        f"{config.limit_graph_count} reached for {code.co_name}; "
                        "other inputs run as plain Python", warn=True)
        return None
    extra = [hash_args_guard(rec.hash_args)] if rec.hash_args is not None else []
    makers = _resume_makers(func, rec)
    known_breaks = {b.reason for e in rec.entries for b in e.breaks}
    try:
        try:
            info, fn = compile_frame(func, args, config, dynamic, extra, *makers)
            if dynamic != declared and any(b.reason not in known_breaks for b in info.breaks):
                raise _Specialize
        except (GraphBreak, _Specialize):
            if dynamic == declared:
                raise
            # Some op needs the automatic dynamic dims or values to be constants (a shape,
            # a branch on a recursion depth): specialize this entry instead.
            info, fn = compile_frame(func, args, config, declared, extra, *makers)
    except GraphBreak as e:
        return _fallback(rec, code, e, extra)
    except Exception as e:
        if not config.compile_with_try:
            raise
        rec.eager_fallbacks.append(BreakInfo(f"internal error: {type(e).__name__}: {e}",
                                             code.co_filename, code.co_firstlineno))
        explain.log("graph_breaks", f"{_where(code)}: pijit failed to compile "
                    f"{code.co_name} ({type(e).__name__}: {e}); running plain Python", warn=True)
        eval_frame.set_state(code, eval_frame.NEVER_COMPILE)
        return None
    rec.compile_count += 1
    rec.entries.insert(0, info)
    if info.callee is not None:
        _jit_callee(rec, info.callee)
    for brk in info.breaks:
        explain.log("graph_breaks", f"{brk.filename}:{brk.lineno}: graph break in "
                    f"{code.co_name}: {brk.reason}", warn=config.LOG_GRAPH_BREAK)
    eval_frame.add_entry(code, *to_program(info.guards), fn)
    explain.log("guards", f"{_where(code)}: new entry for {code.co_name}:\n" +
                "\n".join(f"  {g}" for g in info.guards))
    explain.log("graph", f"{_where(code)}: graph of {code.co_name}:\n{info.graph}")
    explain.log("bytecode", f"{_where(code)}: transformed {code.co_name}:\n{info.bytecode}")
    return fn


class _Specialize(Exception):
    """Automatic dynamic dims/values made capture break where specialized entries did not."""


def _jit_callee(rec, callee):
    """A user function whose call could not be inlined is jitted on its own, with the
    caller's options, so its own graphs (and breaks) are captured when residual code calls it."""
    code = callee.__code__
    if cache.record(code) is None:
        rec.children.append(cache.register(code, rec.config, None, None))
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


def _fallback(rec, code, e: GraphBreak, extra):
    where = BreakInfo(e.detail and f"{e.reason.value}: {e.detail}" or e.reason.value,
                      code.co_filename, e.lineno)
    if rec.config.strict:
        raise GraphBreakError(f"{code.co_name}: {where.reason} at {where.filename}:{where.lineno}")
    explain.log("graph_breaks", f"{where.filename}:{where.lineno}: {code.co_name} runs as "
                f"plain Python: {where.reason}", warn=rec.config.LOG_GRAPH_BREAK)
    if e.reason in STATIC_REASONS:
        rec.entries.insert(0, EntryInfo(guards=[], fallback=where))
        eval_frame.set_state(code, eval_frame.NEVER_COMPILE)
        return None
    guards = list(getattr(e, "guards", [])) + list(extra)
    rec.entries.insert(0, EntryInfo(guards=guards, fallback=where))
    eval_frame.add_entry(code, *to_program(guards), None)
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
    another value than an entry saw (loop indices, step counts). Every entry counts, not
    only the newest: calls alternating between ndims or dtypes would otherwise never compare
    two sizes of one kind, and compile a static entry per call."""
    changed, values = {}, {}
    for entry in entries:
        for guard in entry.guards:
            if not (guard.kind == "array"
                    or guard.kind == "eq" and type(guard.params[0]) in (int, float)):
                continue
            if guard.source not in values:
                try:
                    values[guard.source] = guard.source.read(func, args)
                except Exception:
                    values[guard.source] = _UNREADABLE
            value = values[guard.source]
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


def _merge(into: dict, more: dict):
    for source, dims in more.items():
        into[source] = set(into.get(source, ())) | set(dims)


def _where(code) -> str:
    return f"{code.co_filename}:{code.co_firstlineno}"
