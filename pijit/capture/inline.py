"""Inlining calls of user Python functions (functions, lambdas, closures, methods,
staticmethods, functools.partial, other jitted functions) into the caller's graph.

The callee's bytecode is walked by a child FrameCapture sharing the caller's graph and
guards; its globals, closure cells and defaults are read through sources based on where the
callee function came from, so they are guarded like the caller's own. When the callee cannot
be captured whole, inlining is abandoned: the call becomes a graph break in the caller, and
the callee is jitted on its own (`GraphBreak.callee`), so it gets its own graphs and breaks
and returns into the caller's residual code.
"""
from __future__ import annotations

import inspect
import itertools
import sysconfig
import types
from dataclasses import dataclass

from pijit import eval_frame
from pijit._compat import GENERATOR_LIKE
from pijit.capture.generators import consumed_at_once
from pijit.capture.graph_break import GraphBreak, Reason
from pijit.capture.ops_build import new_list
from pijit.capture.sources import AttrSource, ConstSource, DictItemSource, ItemSource
from pijit.capture.values import ConstValue, DictValue, FunctionValue, TupleValue, is_immutable

_LIBRARY_DIRS = tuple(sorted({sysconfig.get_paths()[k] for k in
                              ("stdlib", "platstdlib", "purelib", "platlib")}))


@dataclass(frozen=True)
class InlineCall:
    """A call of a user function inlined into the graph: graph nodes [first, last) are its
    work (each at the call's line; `lines` keeps the callee's own), `args` its parameters'
    values, `bindings` its stores into its locals, `ret` what it returned. `depth`: the
    callee frame's inlining depth (1: called by the captured function). A replay runs such a
    call as a frame of the callee (bytecode_gen/replay.py)."""
    func: object
    fn_source: object
    depth: int
    first: int
    last: int
    lines: tuple
    args: dict
    bindings: list
    ret: object


def is_library(func) -> bool:
    """Code from the standard library or installed packages (not the user's own)."""
    filename = func.__code__.co_filename
    return filename.startswith(_LIBRARY_DIRS) or filename.startswith("<frozen")


def inline_call(cap, func, fn_source, args: list, kwargs: dict):
    """The value of func(*args, **kwargs), captured into cap's graph."""
    func, fn_source = _user_function(cap, func, fn_source)
    why = _why_not(cap, func, fn_source)
    if why is not None:
        e = GraphBreak(Reason.UNSUPPORTED_CALL, f"{func.__qualname__} is not inlined: {why}")
        e.callee = None if is_library(func) or func.__code__.co_flags & GENERATOR_LIKE else func
        raise e
    _guard_definition(cap, func, fn_source)
    defaults = [_default(cap, d, ItemSource(AttrSource(fn_source, "__defaults__"), i)
                         if fn_source is not None else None)
                for i, d in enumerate(func.__defaults__ or ())]
    kwdefaults = {k: _default(cap, d, DictItemSource(AttrSource(fn_source, "__kwdefaults__"), k)
                              if fn_source is not None else None)
                  for k, d in (func.__kwdefaults__ or {}).items()}
    bound = bind_arguments(cap, func.__code__, func.__qualname__, args, kwargs, defaults,
                           kwdefaults)
    return _run(cap, cap.inline_frame(func, fn_source, bound, None), func, func)


def _user_function(cap, func, fn_source):
    """3.11: a jitted function object runs its user's function's code behind pijit's prefix
    (call_prefix.py), and follows that function (ops_call's _follow_original has made it
    take its changes): the user's function is inlined, as a Wrapper's is, when the copy
    calls it with the same defaults (a default assigned to the copy itself: not inlined)."""
    code = eval_frame.original_code(func.__code__)
    if code is func.__code__:
        return func, fn_source
    handle = vars(func).get("__pijit__")
    original = getattr(handle, "original", None)
    if original is None or original.__code__ is not code \
            or original.__defaults__ is not func.__defaults__ \
            or original.__kwdefaults__ is not func.__kwdefaults__:
        e = GraphBreak(Reason.UNSUPPORTED_CALL,
                       f"{func.__qualname__} is not inlined: its jitted copy has defaults "
                       "of its own")
        e.callee = None
        raise e
    if fn_source is not None:
        fn_source = AttrSource(AttrSource(fn_source, "__pijit__"), "original")
    return original, fn_source


def _guard_definition(cap, func, fn_source):
    """Guard what inlining relies on besides the function's identity, which a reload changes
    in place (IPython's autoreload assigns `__code__`, `__defaults__`, ...): its code, and the
    number of its defaults (a default is read by position from the end)."""
    source = fn_source if fn_source is not None else ConstSource(func, func.__qualname__)
    cap.builder.guard(AttrSource(source, "__code__"), "id", func.__code__)
    if func.__defaults__ and fn_source is not None:
        defaults = AttrSource(fn_source, "__defaults__")
        cap.builder.guard(defaults, "type", tuple)
        cap.builder.guard(defaults, "len", len(func.__defaults__))


def inline_made(cap, fv: FunctionValue, args: list, kwargs: dict):
    """Call a function made during capture (lambda, comprehension, nested def)."""
    code = fv.code
    generator = consumed_at_once(cap, fv)
    if cap.depth >= cap.config.MAX_INLINE_DEPTH or code.co_cellvars or \
            (code.co_flags & GENERATOR_LIKE and not generator):
        cap.unsupported(Reason.UNSUPPORTED_CALL, f"{code.co_qualname}: cannot inline")
    kwdefaults = dict(fv.kwdefaults.items) if isinstance(fv.kwdefaults, DictValue) else {}
    bound = bind_arguments(cap, code, code.co_qualname, args, kwargs, list(fv.defaults),
                           kwdefaults)
    cells = tuple(types.CellType() for _ in code.co_freevars)   # reads go through CellRefs
    func = types.FunctionType(code, cap.func.__globals__, code.co_name, None, cells)
    child = cap.inline_frame(func, None, bound, fv.closure)
    if not generator:
        return _run(cap, child, func, None)
    child.yielded = []          # its items, for the consumer the next instruction calls
    _run(cap, child, func, None)
    return new_list(cap, child.yielded)


def _run(cap, child, func, callee):
    first = len(cap.graph.nodes)
    args = dict(child.locals)
    try:
        child.run()
    except GraphBreak as inner:
        where = (func.__qualname__, func.__code__.co_filename, inner.lineno)
        path = [where] + getattr(inner, "inline_path", [])
        cause = getattr(inner, "inline_cause", None) or inner.detail or inner.reason.value
        e = GraphBreak(Reason.UNSUPPORTED_CALL, _inline_break_detail(path, cause))
        e.inline_path, e.inline_cause = path, cause
        e.callee = callee
        raise e from None
    if not cap.bodies:
        nodes = cap.graph.nodes
        cap.inlines.append(InlineCall(callee, child.fn_source, child.depth, first, len(nodes),
                                      tuple(n.lineno for n in nodes[first:]), args,
                                      child.bindings, child.ret))
    _at_call_line(cap, first)
    return child.ret


def _inline_break_detail(path, cause):
    """'f (inlined) breaks at file:line: g (inlined) breaks at ...: cause', with a recursion's
    repeats of one frame said once with their count, so a break 8 calls deep in a recursive
    function reads as one line, not eight copies of the same prefix."""
    parts = []
    for where, group in itertools.groupby(path):
        n = len(list(group))
        name, filename, lineno = where
        deep = f", {n} levels deep" if n > 1 else ""
        parts.append(f"{name} (inlined{deep}) breaks at {filename}:{lineno}: ")
    return "".join(parts) + cause


def _at_call_line(cap, first):
    """The nodes the callee added get the line of the call: generated code carries the
    caller's file name, and in the caller's frame the callee's work happens at that line."""
    nodes = cap.graph.nodes
    for k in range(first, len(nodes)):
        if nodes[k].lineno != cap.lineno:
            nodes[k] = nodes[k].at_line(cap.lineno)


def _why_not(cap, func, fn_source):
    code = func.__code__
    config = cap.config
    if cap.depth >= config.MAX_INLINE_DEPTH:
        return f"MAX_INLINE_DEPTH={config.MAX_INLINE_DEPTH} reached"
    if code.co_flags & GENERATOR_LIKE:
        return "generator or coroutine"
    if code.co_cellvars:
        return "it creates closures"
    if is_library(func):
        module = getattr(func, "__module__", "") or ""
        if not any(module == m or module.startswith(m + ".") for m in config.allowed_inline_modules):
            return f"library function (module {module!r} is not in allowed_inline_modules)"
    if fn_source is None and (code.co_freevars or func.__defaults__ or func.__kwdefaults__):
        return "its closure or defaults cannot be guarded"
    return None


def bind_arguments(cap, code, qualname, args, kwargs, defaults, kwdefaults) -> dict:
    """Parameter name -> Value, as Python binds a call (defaults: Values of the trailing
    positional defaults; kwdefaults: name -> Value); a call Python would reject stops
    capture (plain Python then raises the TypeError)."""
    names = code.co_varnames
    npos, nkw = code.co_argcount, code.co_kwonlyargcount
    pos_names, kw_names = names[:npos], names[npos:npos + nkw]
    i = npos + nkw
    varargs = names[i] if code.co_flags & inspect.CO_VARARGS else None
    varkw = names[i + bool(varargs)] if code.co_flags & inspect.CO_VARKEYWORDS else None

    def reject(why):
        cap.unsupported(Reason.UNSUPPORTED_CALL, f"{qualname}() {why}")

    bound = dict(zip(pos_names, args))
    if len(args) > npos and varargs is None:
        reject(f"takes {npos} positional arguments but {len(args)} were given")
    if varargs is not None:
        bound[varargs] = TupleValue(list(args[npos:]))
    extra = {}
    for key, value in kwargs.items():
        if key in pos_names[code.co_posonlyargcount:] or key in kw_names:
            if key in bound:
                reject(f"got multiple values for argument {key!r}")
            bound[key] = value
        elif varkw is not None:
            extra[key] = value
        else:
            reject(f"got an unexpected keyword argument {key!r}")
    if varkw is not None:
        bound[varkw] = DictValue(extra)
    first_default = npos - len(defaults)
    for j, name in enumerate(pos_names):
        if name not in bound:
            if j < first_default:
                reject(f"missing required argument {name!r}")
            bound[name] = defaults[j - first_default]
    for name in kw_names:
        if name not in bound:
            if name not in kwdefaults:
                reject(f"missing required keyword-only argument {name!r}")
            bound[name] = kwdefaults[name]
    return bound


def _default(cap, obj, source):
    if source is not None:
        return cap.builder.wrap(obj, source)
    if is_immutable(obj):
        return ConstValue(obj)
    cap.unsupported(Reason.UNSUPPORTED_CALL, "a mutable default that cannot be guarded")
