"""The user's API on an interpreter pijit does not support (pijit._compat.SUPPORTED is
false: CPython before 3.11 or after 3.13, the free-threaded build), where no C extension is
built: `jit` checks its arguments as everywhere, warns once and returns the function itself,
which runs as plain Python. set_context, get_context and reset work; the reports raise."""
from __future__ import annotations

import functools
import platform
import warnings

from pijit import _compat
from pijit.interface import GRAPH_MODE, check_context_key, check_mode, options

WHY = (f"pijit supports CPython 3.11-3.13 with the GIL; this is "
       f"{platform.python_implementation()} {platform.python_version()}"
       f"{' (free-threaded)' if _compat.FREE_THREADED else ''}: jitted functions run as plain "
       "Python")

_warned = False
_mode = GRAPH_MODE


def jit(fn=None, input_signature=None, hash_args=None, jit_config=None, mode="PIJit"):
    """pijit.jit where it cannot compile: `fn` itself (after checking the arguments)."""
    global _warned
    options(input_signature, jit_config, mode)
    if fn is None:
        return functools.partial(jit, input_signature=input_signature, hash_args=hash_args,
                                 jit_config=jit_config, mode=mode)
    if not _warned:
        _warned = True
        warnings.warn(WHY, RuntimeWarning, stacklevel=2)
    return fn


def set_context(mode=None):
    global _mode
    _mode = check_mode(mode)


def get_context(key):
    check_context_key(key)
    return _mode


def reset(fn=None):
    """Nothing is cached here."""


def _no_reports(*args, **kwargs):
    raise RuntimeError(f"{WHY}; there is nothing to report")


explain = code_info = stats = _no_reports
