"""The user's API: the jit decorator, ArraySpec, set_context, and reports on jitted functions."""
from __future__ import annotations

import functools
import os
import sys
import types
import warnings

import numpy as np

from pijit import (_compat, adaptive, cache, config as config_mod, eval_frame,
                   explain as explain_mod, runtime)
from pijit.config import JitConfig

GRAPH_MODE = 0
PYNATIVE_MODE = 1
MODES = ("PIJit", "PSJit")

eval_frame.set_array_type(np.ndarray)
eval_frame.set_callback(runtime.on_miss)
if config_mod.env_disabled():
    eval_frame.set_enabled(False)
# A forked child has only the thread that forked: the hook's per-thread state follows.
os.register_at_fork(after_in_child=eval_frame.after_fork_child)


class ArraySpec:
    """The expected shape and dtype of one array argument (`input_signature`).

    shape: a tuple of ints and Nones (None: any size, compiled as a dynamic dimension).
    dtype: anything np.dtype accepts, of a numeric kind (bool, int, uint, float, complex).
    """

    def __init__(self, shape, dtype):
        if not isinstance(shape, (tuple, list)):
            raise TypeError(f"ArraySpec shape must be a tuple of ints or None, got "
                            f"{type(shape).__name__} {shape!r}")
        for d in shape:
            if d is not None and type(d) is not int:
                raise TypeError(f"ArraySpec shape entries must be ints or None, got "
                                f"{type(d).__name__} {d!r} in {tuple(shape)!r}")
            if d is not None and d < 0:
                raise ValueError(f"ArraySpec shape entries must be non-negative, got {d!r} "
                                 f"in {tuple(shape)!r}")
        if dtype is None:
            raise TypeError("ArraySpec dtype is required (np.dtype(None) would mean float64)")
        try:
            dt = np.dtype(dtype)
        except TypeError as e:
            raise TypeError(f"ArraySpec dtype {dtype!r} is not a NumPy dtype: {e}") from None
        if dt.kind not in "biufc":
            raise ValueError(f"ArraySpec dtype must be numeric (bool, int, uint, float, "
                             f"complex), got {dt}")
        self.shape = tuple(shape)
        self.dtype = dt

    def mismatch(self, value):
        """None when value fits this spec, else what differs."""
        if type(value) is not np.ndarray:
            return f"expected ndarray {self}, got {type(value).__name__}"
        if value.dtype != self.dtype or value.ndim != len(self.shape) or any(
                d is not None and d != s for d, s in zip(self.shape, value.shape)):
            return f"expected {self}, got {value.dtype}{list(value.shape)}"
        return None

    def __repr__(self) -> str:
        return f"ArraySpec(shape={self.shape!r}, dtype={str(self.dtype)!r})"

    def __str__(self) -> str:
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.dtype}[{dims}]"


def jit(fn=None, input_signature=None, hash_args=None, jit_config=None, mode="PIJit"):
    """Compile `fn` with pijit; usable as @jit, @jit(...) or jit(fn, ...).

    input_signature: an ArraySpec or a sequence of ArraySpec/None, one per parameter (after
    `self`/`cls`); calls that do not match raise TypeError; None dims are dynamic.
    hash_args: an object (or objects) whose value is guarded: a change recompiles.
    jit_config: a dict of options or a pijit.JitConfig (see the README's table).
    mode: "PIJit" (capture what can be captured, fall back to Python otherwise) or "PSJit"
    (whole-function capture; anything else raises pijit.GraphBreakError).
    """
    if not isinstance(mode, str):
        raise TypeError(f"jit mode must be a str, one of {', '.join(map(repr, MODES))}; "
                        f"got {type(mode).__name__} {mode!r}")
    if mode not in MODES:
        raise ValueError(f"jit mode must be one of {', '.join(map(repr, MODES))}; got {mode!r}")
    config = JitConfig.of(jit_config)
    if mode == "PSJit":
        config = config.replace(fullgraph=True)
    signature = _signature(input_signature)
    if fn is None:
        return functools.partial(jit, input_signature=input_signature, hash_args=hash_args,
                                 jit_config=config, mode=mode)
    return _wrap(fn, signature, hash_args, config)


def _signature(input_signature):
    if input_signature is None:
        return None
    if isinstance(input_signature, ArraySpec):
        return (input_signature,)
    if isinstance(input_signature, (tuple, list)) and all(
            s is None or isinstance(s, ArraySpec) for s in input_signature):
        return tuple(input_signature)
    raise TypeError("input_signature must be an ArraySpec or a tuple/list of ArraySpec or None, "
                    f"got {input_signature!r}")


def _wrap(fn, signature, hash_args, config):
    if isinstance(fn, (staticmethod, classmethod)):
        return type(fn)(_wrap(fn.__func__, signature, hash_args, config))
    if isinstance(fn, types.MethodType):
        return _wrap(fn.__func__, signature, hash_args, config).__get__(fn.__self__)
    if isinstance(fn, eval_frame.Wrapper):
        fn = fn.fn
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
    if not _compat.SUPPORTED:
        warnings.warn("pijit.jit: this Python version is not supported; running plain Python",
                      stacklevel=3)
        return fn
    if signature is not None:
        names = code.co_varnames[:code.co_argcount]
        if len(signature) > len(names):
            raise TypeError(f"input_signature has {len(signature)} specs but "
                            f"{fn.__qualname__} takes {len(names)} positional parameters")
    rec = cache.record(code)
    if rec is not None and (rec.config, rec.input_signature, rec.hash_args) != \
            (config, signature, hash_args):
        _reset_code(code)
    # The record (and through it the code's state) is held until the Wrapper owns the state:
    # between the two, the state and its record are a cycle the garbage collector may free.
    rec = cache.register(code, config, signature, hash_args)
    wrapper = eval_frame.Wrapper(fn)
    assert wrapper.code_state is rec.state
    functools.update_wrapper(wrapper, fn)
    return wrapper


def _rejit(fn, signature, hash_args, config):
    """Unpickle a jitted function that is not reachable by its name (pijit.jit(fn) of a
    module-level fn): jit the unpickled function again, with the same options."""
    return _wrap(fn, signature, hash_args, config)


def _reduce(wrapper):
    """Wrapper.__reduce__: by reference, as pickle does functions. A decorated function or
    method is found by its module and qualified name (the name then names this very
    object); anything else pickles as jit(the wrapped function, its options), so the
    wrapped function must pickle, and raises what pickling it raises when it does not."""
    fn = wrapper.fn
    name = getattr(wrapper, "__qualname__", None)
    module = sys.modules.get(getattr(wrapper, "__module__", None))
    if module is not None and isinstance(name, str):
        found = module
        for part in name.split("."):
            found = getattr(found, part, None)
        if found is wrapper or (isinstance(found, types.MethodType) and found.__func__ is wrapper):
            return name
    rec = cache.record(fn.__code__)
    if rec is None:
        return (_rejit, (fn, None, None, JitConfig()))
    return (_rejit, (fn, rec.input_signature, rec.hash_args, rec.config))


def _code_changed(wrapper):
    """The jitted function's __code__ was replaced (IPython's autoreload, an editor): jit
    the new code with the options of the old one. Returns the new code's CodeState."""
    old = wrapper.code_state.record
    code = wrapper.fn.__code__
    if old is None:
        return eval_frame.mark(code)
    return cache.register(code, old.config, old.input_signature, old.hash_args).state


eval_frame.set_reduce_callback(_reduce)
eval_frame.set_code_changed_callback(_code_changed)
eval_frame.set_adapt_callback(adaptive.on_adapt)


def set_context(mode=None):
    """mode=pijit.PYNATIVE_MODE runs every jitted function as plain Python; GRAPH_MODE (the
    default) turns jit back on."""
    if type(mode) is not int:
        raise TypeError(f"set_context mode must be pijit.GRAPH_MODE or pijit.PYNATIVE_MODE "
                        f"(an int), got {type(mode).__name__} {mode!r}")
    if mode not in (GRAPH_MODE, PYNATIVE_MODE):
        raise ValueError(f"set_context mode must be pijit.GRAPH_MODE ({GRAPH_MODE}) or "
                         f"pijit.PYNATIVE_MODE ({PYNATIVE_MODE}); got {mode!r}")
    eval_frame.set_enabled(mode == GRAPH_MODE)


def get_context(key):
    if key != "mode":
        raise ValueError(f"get_context: unknown key {key!r}; valid keys are: 'mode'")
    return GRAPH_MODE if eval_frame.is_enabled() else PYNATIVE_MODE


def _code_of(fn):
    if isinstance(fn, eval_frame.Wrapper):
        return fn.fn.__code__
    if isinstance(fn, types.MethodType):
        return _code_of(fn.__func__)
    if isinstance(fn, (staticmethod, classmethod)):
        return _code_of(fn.__func__)
    if isinstance(fn, types.FunctionType):
        return fn.__code__
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
    """Run fn(*args, **kwargs) once on a fresh cache and report how it ran."""
    if isinstance(fn, types.FunctionType):
        fn = jit(fn)
    code = _code_of(fn)
    _reset_code(code)
    fn(*args, **kwargs)
    return explain_mod.report(code)


def code_info(fn) -> dict:
    return explain_mod.code_info(_code_of(fn))


def stats(fn) -> dict:
    return explain_mod.stats(_code_of(fn))

