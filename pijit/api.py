"""The user's API: the jit decorator, set_context, and reports on jitted functions (its C-free
part, ArraySpec and the argument checks, is interface.py)."""
from __future__ import annotations

import collections
import functools
import gc
import os
import sys
import threading
import types
import warnings
import weakref

import numpy as np

from pijit import (_compat, adaptive, cache, call_prefix, config as config_mod, eval_frame,
                   explain as explain_mod, runtime)
from pijit.config import JitConfig
from pijit.interface import GRAPH_MODE, PYNATIVE_MODE, check_context_key, check_mode, options

eval_frame.set_array_type(np.ndarray)
eval_frame.set_callback(runtime.on_miss)
if config_mod.env_disabled():
    eval_frame.set_enabled(False)
if _compat.CALL_PREFIX:
    eval_frame.set_prefix_callback(call_prefix.prefixed)
# A forked child has only the thread that forked: the hook's per-thread state follows.
os.register_at_fork(after_in_child=eval_frame.after_fork_child)


def jit(fn=None, input_signature=None, hash_args=None, jit_config=None, mode="PIJit"):
    """Compile `fn` with pijit; usable as @jit, @jit(...) or jit(fn, ...).

    input_signature: an ArraySpec or a sequence of ArraySpec/None, one per parameter (after
    `self`/`cls`); calls that do not match raise TypeError; None dims are dynamic.
    hash_args: an object (or objects) whose value is guarded: a change recompiles.
    jit_config: a dict of options or a pijit.JitConfig (see the README's table).
    mode: "PIJit" (capture what can be captured, fall back to Python otherwise) or "PSJit"
    (whole-function capture; anything else raises pijit.GraphBreakError).
    """
    signature, config = options(input_signature, jit_config, mode)
    if fn is None:
        return functools.partial(jit, input_signature=input_signature, hash_args=hash_args,
                                 jit_config=config, mode=mode)
    return _wrap(fn, signature, hash_args, config)


def _wrap(fn, signature, hash_args, config):
    if isinstance(fn, (staticmethod, classmethod)):
        return type(fn)(_wrap(fn.__func__, signature, hash_args, config))
    if isinstance(fn, types.MethodType):
        return _wrap(fn.__func__, signature, hash_args, config).__get__(fn.__self__)
    if wrapper_of(fn) is not None and wrapper_of(fn).source is not None:
        fn = wrapper_of(fn).source          # a variant's private copy: the user's function
    elif isinstance(fn, eval_frame.Wrapper):
        fn = fn.fn
    elif _handle(fn) is not None:
        fn = vars(fn).get("fn", fn)
    if isinstance(fn, type):
        raise TypeError(f"pijit.jit expects a Python function, got the class {fn.__qualname__}; "
                        "decorate its methods instead")
    if not isinstance(fn, types.FunctionType):
        kind = "a builtin" if isinstance(fn, types.BuiltinFunctionType) else type(fn).__name__
        raise TypeError(f"pijit.jit expects a Python function (def or lambda), got {kind}: "
                        f"{fn!r}")
    code = fn.__code__
    if code.co_flags & _compat.GENERATOR_LIKE:
        warnings.warn(f"pijit.jit: {fn.__qualname__} is a generator or coroutine function; "
                      "it runs as plain Python", stacklevel=3)
        return fn
    if signature is not None:
        names = code.co_varnames[:code.co_argcount]
        if len(signature) > len(names):
            raise TypeError(f"input_signature has {len(signature)} specs but "
                            f"{fn.__qualname__} takes {len(names)} positional parameters")
    rec = cache.record(code)
    source = None
    if rec is not None and (rec.config, rec.input_signature, rec.hash_args) != \
            (config, signature, hash_args):
        if _has_live_wrapper(code):
            source, fn = fn, _variant(fn, config, signature, hash_args)
            code = fn.__code__
        else:               # nothing runs under the old options any more: start afresh
            _reset_code(code)
    # The record (and through it the code's state) is held until the Wrapper owns the state:
    # between the two, the state and its record are a cycle the garbage collector may free.
    rec = cache.register(code, config, signature, hash_args)
    jitted = _jitted_function(fn) if _compat.CALL_PREFIX or (
        _compat.FUNCTION_VECTORCALL and fn.__name__ not in _compat.VECTORCALL_SKIPPED_BY) \
        else None
    if jitted is None:
        jitted = eval_frame.Wrapper(fn)
        functools.update_wrapper(jitted, fn)
        if fn.__name__ in _compat.VECTORCALL_SKIPPED_BY and source is None:
            _plain_init_copy(fn, jitted)
    if source is not None:
        eval_frame.set_source(wrapper_of(jitted), source)
    _WRAPPERS.setdefault(code, []).append(weakref.ref(jitted))
    assert wrapper_of(jitted).code_state is rec.state
    _follow_autoreload()
    return jitted


# The key of a jitted function object's __dict__ that holds its Wrapper (csrc/wrapper.c).
_HANDLE = "__pijit__"


def _jitted_function(fn):
    """A copy of fn (its code, globals, defaults, closure, and what functools.wraps copies,
    `__wrapped__` being fn) whose calls go through pijit: `fn` names fn, as on a Wrapper,
    and its Wrapper (which owns the code's state) sits in its __dict__. CPython then calls
    it as it calls any function once pijit has nothing to do for its calls (wrapper.c).
    On 3.11 its code is fn's behind pijit's prefix (call_prefix.py). None when fn's calls
    are someone else's (a vectorcall of another JIT's)."""
    if eval_frame.vectorcall_of(fn) != "cpython":
        return None
    jitted = _function_like(fn, _armed_code(fn.__code__))
    setattr(jitted, _HANDLE, eval_frame.Wrapper(jitted, fn))
    _arm(jitted)
    return jitted


def _plain_init_copy(fn, wrapper):
    """3.13: the plain copy of a jitted __init__ that its class holds in the Wrapper's place
    while pijit has nothing to do for its calls (wrapper.c's init_give_back), so that
    constructions take CPython's specialized call again. It is a function as fn is (what
    functools.wraps copies, `fn` and `__wrapped__` naming fn) whose __dict__ holds the
    Wrapper: the class keeps the Wrapper, and pijit.stats, reset and jit find it. That
    __dict__ is the Wrapper's own: an attribute a user sets on the class's __init__ stays
    there when one of the two replaces the other."""
    copy = _function_like(fn, fn.__code__)
    copy.__dict__ = wrapper.__dict__
    copy.fn = fn
    setattr(copy, _HANDLE, wrapper)
    eval_frame.set_init_copy(wrapper, copy)


def _function_like(fn, code):
    """A function of `code` made from fn's parts (globals, name, defaults, closure,
    kwdefaults) with what functools.wraps copies (`__wrapped__` being fn), and `fn` naming
    fn, as on a Wrapper."""
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__,
                             fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    functools.update_wrapper(new, fn)
    new.fn = fn
    return new


def _armed_code(code):
    """The code a jitted function object of `code` runs: 3.11's prefixed one."""
    return call_prefix.prefixed(code) if _compat.CALL_PREFIX else code


def _arm(jitted):
    if _compat.FUNCTION_VECTORCALL:
        eval_frame.arm(jitted)


def _user_code(code):
    """The user's code of what a jitted function object runs (3.11: without the prefix)."""
    return eval_frame.original_code(code)


def _handle(obj):
    """The Wrapper of a jitted function object, else None."""
    if not isinstance(obj, types.FunctionType):
        return None
    w = vars(obj).get(_HANDLE)
    return w if isinstance(w, eval_frame.Wrapper) else None


def wrapper_of(obj):
    """The Wrapper of what pijit.jit returns (the Wrapper itself, or from 3.12 the one in a
    jitted function object's __dict__), else None."""
    return obj if isinstance(obj, eval_frame.Wrapper) else _handle(obj)


def is_jitted(obj) -> bool:
    """Is obj what pijit.jit returns (a Wrapper, or from 3.12 a jitted function object)?"""
    return wrapper_of(obj) is not None


# code -> the copies of it jitted under other options (see _variant), as long as it lives
_VARIANTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# code -> weak references to the wrappers jit() made on it. The code's state and record
# outlive a dead wrapper until the garbage collector breaks their cycle, so the record alone
# cannot tell whether anything still runs under its options.
_WRAPPERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _has_live_wrapper(code) -> bool:
    refs = [r for r in _WRAPPERS.get(code, ()) if r() is not None and not _dropped(r)]
    if refs:        # a wrapper nothing holds may still wait in a longer cycle for the collector
        gc.collect()
        refs = [r for r in refs if r() is not None]
    _WRAPPERS[code] = refs
    return bool(refs)


def _dropped(ref) -> bool:
    """Is ref's jitted function object held only by its own Wrapper (the cycle of the two)?
    Then nothing can call it again: free the pair now by taking the Wrapper out of the
    function's __dict__. A full collection, the alternative, costs a tenth of a second or more
    in a big heap, and a test suite re-jits one function under other options thousands of
    times. The counts are against a probe held the same way (a local and the call's argument),
    so they do not depend on how the interpreter counts those; anything else holding the
    function, its __dict__ or its Wrapper leaves the pair alone."""
    probe = object()
    base = sys.getrefcount(probe)
    jitted = ref()
    if not isinstance(jitted, types.FunctionType):
        return False
    attrs = vars(jitted)
    handle = attrs.get(_HANDLE)
    if not isinstance(handle, eval_frame.Wrapper) or (
            sys.getrefcount(jitted), sys.getrefcount(attrs), sys.getrefcount(handle)) != \
            (base + 1, base + 1, base + 1):
        return False
    del attrs[_HANDLE]
    return True


def _variant(fn, config, signature, hash_args):
    """fn on a copy of its code for a jit() whose options differ from those its code was
    jitted with: a cache belongs to a code object, so without the copy the wrappers made
    before would run under the new options (jit(f) and then jit(f, O2): the first gave O2's
    results). The copy is private: its Wrapper makes it follow fn (set_source, _follow)."""
    new = types.FunctionType(_variant_code(fn.__code__, config, signature, hash_args),
                             fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    functools.update_wrapper(new, fn, updated=())
    new.__dict__.update(fn.__dict__)
    return new


def _variant_code(code, config, signature, hash_args):
    """A copy of `code` for these options: one per distinct options, reused."""
    variants = _VARIANTS.setdefault(code, [])
    for copy in variants:
        rec = cache.record(copy)
        if rec is not None and (rec.config, rec.input_signature, rec.hash_args) == \
                (config, signature, hash_args):
            return copy
    copy = code.replace()
    variants.append(copy)
    cache.register(copy, config, signature, hash_args)
    return copy


def _follow(copy, source):
    """Give a variant's private copy what the user's function `source` changed since it was
    taken (the Wrapper calls this before a call, as the first jit's copy follows `source`
    itself): its defaults, and for a new __code__ a copy of that code with the copy's
    options (the new code itself may be jitted under other options, by the first jit)."""
    copy.__defaults__ = source.__defaults__
    copy.__kwdefaults__ = source.__kwdefaults__
    code = _user_code(copy.__code__)
    if not any(c is code for c in _VARIANTS.get(source.__code__, ())):
        rec = cache.record(code)
        options = (rec.config, rec.input_signature, rec.hash_args) if rec is not None \
            else (JitConfig(), None, None)
        copy.__code__ = _variant_code(source.__code__, *options)


# Jitted functions unpickled by value, the 64 most recent by their code (as numba keeps its
# last unpickled dispatchers): a function that arrives again (Dask and joblib unpickle the
# task's function for every task) runs the same code, and the kept function holds the
# entries compiled for it (they live as long as some jitted function of the code does).
_UNPICKLED: collections.OrderedDict = collections.OrderedDict()
_UNPICKLED_LIMIT = 64
_unpickled_lock = threading.Lock()


def _rejit(fn, signature, hash_args, config):
    """Unpickle a jitted function that is not reachable by its name (pijit.jit(fn) of a
    module-level fn): jit the unpickled function again, with the same options.

    cloudpickle sends a function of __main__ (a script run by Dask's workers, a notebook) by
    value: each unpickling makes a new function and code object, which pijit would compile
    afresh, every block of a map_blocks. Such a function (one its module does not hold under
    its name) whose code equals one unpickled before (the same bytecode, constants and
    names) is given that code; the entries' guards still check this function's globals and
    closure."""
    if _named(fn) is not fn:
        with _unpickled_lock:
            kept = _UNPICKLED.get(fn.__code__)
            if kept is not None:
                fn.__code__ = kept.fn.__code__
            wrapper = _wrap(fn, signature, hash_args, config)
            if is_jitted(wrapper):      # not a generator, say
                _UNPICKLED[fn.__code__] = wrapper
                _UNPICKLED.move_to_end(fn.__code__)
                if len(_UNPICKLED) > _UNPICKLED_LIMIT:
                    _UNPICKLED.popitem(last=False)
        return wrapper
    return _wrap(fn, signature, hash_args, config)


def _named(obj):
    """What obj's module holds under obj's qualified name (None when nothing): obj itself
    when pickle can find it by reference."""
    found = sys.modules.get(getattr(obj, "__module__", None))
    name = getattr(obj, "__qualname__", None)
    if found is None or not isinstance(name, str):
        return None
    for part in name.split("."):
        found = getattr(found, part, None)
    return found


def _reduce(wrapper):
    """Wrapper.__reduce__: by reference, as pickle does functions. A decorated function or
    method is found by its module and qualified name (the name then names this very
    object); anything else pickles as jit(the wrapped function, its options), so the
    wrapped function must pickle, and raises what pickling it raises when it does not.

    A jitted function object pickles as a function does (pickle: by reference; cloudpickle:
    by value when its module does not hold it, with its __dict__): its Wrapper, met in
    that __dict__, pickles as _rearm of the function (pickled before its __dict__, so
    unpickled first) and of the options."""
    if _handle(wrapper.fn) is wrapper:
        fn = wrapper.fn
        rec = cache.record(_user_code(fn.__code__))
        options = (rec.input_signature, rec.hash_args, rec.config) if rec is not None \
            else (None, None, JitConfig())
        return (_rearm, (fn, vars(fn).get("fn", fn), *options))
    fn = wrapper.fn
    found = _named(wrapper)
    if found is wrapper or (isinstance(found, types.MethodType) and found.__func__ is wrapper):
        return wrapper.__qualname__
    rec = cache.record(fn.__code__)
    if rec is None:
        return (_rejit, (fn, None, None, JitConfig()))
    return (_rejit, (fn, rec.input_signature, rec.hash_args, rec.config))


def _rearm(fn, original, signature, hash_args, config):
    """Unpickle the Wrapper of a jitted function object pickled by value: make the function
    being unpickled (`fn`, its __dict__ not set yet) a jitted one with these options, and
    return its Wrapper (for the __dict__). As _rejit, a function whose code equals one
    unpickled before is given that code."""
    with _unpickled_lock:
        kept = _UNPICKLED.get(_user_code(fn.__code__))
        if kept is not None:
            original.__code__ = _code_of(kept)
        jitted = _wrap(original, signature, hash_args, config)
        code = _code_of(jitted)             # a _variant's, when other options took the code
        fn.__code__ = _armed_code(code)
        _UNPICKLED[code] = jitted
        _UNPICKLED.move_to_end(code)
        if len(_UNPICKLED) > _UNPICKLED_LIMIT:
            _UNPICKLED.popitem(last=False)
    wrapper = eval_frame.Wrapper(fn, original)
    _arm(fn)
    return wrapper


def _code_changed(wrapper):
    """The jitted function's __code__ was replaced (IPython's autoreload, an editor): jit
    the new code with the options of the old one. Returns the new code's CodeState."""
    old = wrapper.code_state.record
    code = _user_code(wrapper.fn.__code__)
    if old is None:
        return eval_frame.mark(code)
    options = (old.config, old.input_signature, old.hash_args)
    rec = cache.record(code)
    if rec is not None and (rec.config, rec.input_signature, rec.hash_args) != options \
            and _handle(wrapper.fn) is wrapper:
        # The new code is jitted under other options (`f.__code__ = h.__code__` of an h
        # jitted at O2): re-registering it would serve h's entries to f and f's to h.
        code = _variant_code(code, *options)
        wrapper.fn.__code__ = _armed_code(code)
    # it now runs under these options: a later jit() of the code under others takes a copy
    held = wrapper.fn if _handle(wrapper.fn) is wrapper else wrapper
    refs = _WRAPPERS.setdefault(code, [])
    if not any(r() is held for r in refs):
        refs.append(weakref.ref(held))
    return cache.register(code, *options).state


eval_frame.set_reduce_callback(_reduce)
eval_frame.set_code_changed_callback(_code_changed)
eval_frame.set_source_callback(_follow)
eval_frame.set_adapt_callback(adaptive.on_adapt)


def _follow_autoreload():
    """Make IPython's `%autoreload 2` refresh jitted functions as it does plain ones.

    On a reload it updates the module's old functions in place from the new ones (their
    `__code__`, `__defaults__`, ...), so a name imported with `from mod import f` runs the
    new code; it finds what to update by a table of rules, and a jitted function is a
    Wrapper, which none of them takes. Once autoreload is loaded (a reload decorates the
    module's functions again before it updates the old ones), a rule is added that updates
    the function an old wrapper calls from the new wrapper's: the old wrapper then calls the
    new code (jitted with its options: _code_changed)."""
    autoreload = sys.modules.get("IPython.extensions.autoreload")
    if autoreload is None or getattr(autoreload, "_pijit_follows", False):
        return
    rules = getattr(autoreload, "UPDATE_RULES", None)
    update = getattr(autoreload, "update_function", None)
    if not (isinstance(rules, list) and callable(update)):
        return

    def updates(old, new):
        return all(isinstance(w, eval_frame.Wrapper) and isinstance(w.fn, types.FunctionType)
                   for w in (old, new))

    rules.append((updates, lambda old, new: update(old.fn, new.fn)))
    autoreload._pijit_follows = True


def set_context(mode=None):
    """mode=pijit.PYNATIVE_MODE runs every jitted function as plain Python; GRAPH_MODE (the
    default) turns jit back on."""
    eval_frame.set_enabled(check_mode(mode) == GRAPH_MODE)


def get_context(key):
    check_context_key(key)
    return GRAPH_MODE if eval_frame.is_enabled() else PYNATIVE_MODE


def _code_of(fn):
    if isinstance(fn, eval_frame.Wrapper):
        return fn.fn.__code__
    if isinstance(fn, (types.MethodType, staticmethod, classmethod)):
        return _code_of(fn.__func__)
    if isinstance(fn, types.FunctionType):
        return _user_code(fn.__code__)
    raise TypeError(f"expected a function made by pijit.jit, got {type(fn).__name__}")


def _reset_code(code):
    """Empty the cache of a code and of the resume codes made for it."""
    for member in cache.family(code):
        cache.clear(member)


def reset(fn=None):
    """Empty the cache of one jitted function, or of every one (and then also give the
    buffers kept by the kernels' buffer pool back to the system)."""
    for code in ([_code_of(fn)] if fn is not None else cache.all_codes()):
        _reset_code(code)
    if fn is None:
        eval_frame.release_pool()


def explain(fn, *args, **kwargs) -> explain_mod.ExplainOutput:
    """Run fn(*args, **kwargs) once on a fresh cache and report how it ran.

    fn: a function (jitted or not, then jitted for the report), a bound method, an object
    whose class defines __call__ in Python, or a functools.partial of one of those; the
    report is about the function that runs (the method, the __call__). The call runs a
    private copy of that function's code, jitted with its options: its own cache and
    counters (`stats`, `code_info`) stay as they were. It compiles at once (adaptive off)."""
    func, bind = _explained(fn)
    if _handle(func) is not None:       # the user's function's changes, as a call takes them
        eval_frame.follow_original(func)
    rec = cache.record(_user_code(func.__code__))
    # Without adaptive: the call compiles at once, as the report is about its graphs (with it,
    # a small first call runs plain and there would be nothing to report).
    options = (rec.input_signature, rec.hash_args, rec.config.replace(adaptive=False)) \
        if rec is not None else (None, None, JitConfig.of(None).replace(adaptive=False))
    copy = types.FunctionType(_user_code(func.__code__).replace(), func.__globals__,
                              func.__name__, func.__defaults__, func.__closure__)
    copy.__kwdefaults__ = func.__kwdefaults__
    copy.__qualname__ = func.__qualname__
    try:
        bind(_wrap(copy, *options))(*args, **kwargs)
        return explain_mod.report(copy.__code__)
    finally:
        _reset_code(copy.__code__)


def _explained(fn):
    """(the Python function that runs when fn is called, how to make the same kind of
    callable of a jitted copy of it)."""
    if isinstance(fn, eval_frame.Wrapper):
        return fn.fn, lambda f: f
    if isinstance(fn, types.FunctionType):
        return fn, lambda f: f
    if isinstance(fn, types.MethodType):
        func, bind = _explained(fn.__func__)
        return func, lambda f: types.MethodType(bind(f), fn.__self__)
    if type(fn) is functools.partial:
        func, bind = _explained(fn.func)
        return func, lambda f: functools.partial(bind(f), *fn.args, **fn.keywords)
    call = getattr(type(fn), "__call__", None)
    if not isinstance(fn, type) and isinstance(call, (types.FunctionType, eval_frame.Wrapper)):
        func, bind = _explained(call)
        return func, lambda f: functools.partial(bind(f), fn)
    kind = "the class " + fn.__qualname__ if isinstance(fn, type) else \
        "a builtin" if isinstance(fn, types.BuiltinFunctionType) else type(fn).__name__
    raise TypeError(f"pijit.explain expects a Python function, a bound method, an object "
                    f"whose class defines __call__ in Python, or a functools.partial of one "
                    f"of those; got {kind}: {fn!r}")


def code_info(fn) -> dict:
    return explain_mod.code_info(_code_of(fn))


def stats(fn) -> dict:
    return explain_mod.stats(_code_of(fn))

