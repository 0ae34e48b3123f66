"""The purity table of calls the op table has no rule for: callable -> "pure" (its result
depends only on its arguments, it mutates none of them, it calls no user code), "random"
(a draw from a NumPy random generator: an effect on that generator's state) or None (not
known: capture never calls it).

Pure: the functions of numpy, numpy.linalg and numpy.fft, and of scipy.special, scipy.linalg,
scipy.ndimage, scipy.signal, scipy.fft and scipy.stats when SciPy is imported, minus those
that write into an argument, do I/O, change global state or call Python callables; ufunc
methods (outer, reduce, accumulate, reduceat; ufunc.at writes into its first argument:
capture/writes.py). A call passing out= (or SciPy's overwrite_*)
writes into an array and is not pure, whatever the function.
"""
from __future__ import annotations

import inspect
import sys
import types

import numpy as np

from pijit.capture.values import ConstValue

# NumPy functions that are not pure: they write into an argument, read or write files,
# change or read global state, print, iterate or call Python objects they are given.
_NOT_PURE_NUMPY = frozenset({
    "copyto", "put", "place", "putmask", "put_along_axis", "fill_diagonal",
    "save", "savez", "savez_compressed", "savetxt", "load", "loadtxt", "genfromtxt",
    "fromfile", "fromregex", "fromiter", "frompyfunc", "fromfunction", "vectorize",
    "apply_along_axis", "apply_over_axes", "piecewise", "nditer", "ndenumerate", "ndindex",
    "set_printoptions", "get_printoptions", "printoptions", "seterr", "geterr", "seterrcall",
    "geterrcall", "errstate", "setbufsize", "getbufsize", "show_config", "show_runtime",
    "info", "test", "get_include", "memmap", "recarray", "asmatrix", "matrix", "bmat",
    "broadcast", "busdaycalendar", "einsum_path", "may_share_memory", "shares_memory",
    "set_string_function", "typename", "mintypecode", "iterable", "isscalar",
})

_SCIPY_MODULES = ("scipy.special", "scipy.linalg", "scipy.ndimage", "scipy.signal",
                  "scipy.fft", "scipy.stats")

# Methods of np.random.Generator / RandomState that are not draws (or that shuffle in place).
_NOT_DRAWS = frozenset({"seed", "set_state", "get_state", "shuffle", "bytes", "spawn",
                        "jumped", "random_raw", "bit_generator"})

_UFUNC_METHODS = frozenset({"outer", "reduce", "accumulate", "reduceat"})

_pure: dict = {}        # id(callable) -> callable (kept alive so ids stay unique)
_scipy_done = False


def _add_module(module, skip=frozenset()):
    for name, obj in vars(module).items():
        if name.startswith("_") or name in skip or isinstance(obj, (type, types.ModuleType)):
            continue
        if callable(obj):
            _pure.setdefault(id(obj), obj)


_add_module(np, _NOT_PURE_NUMPY)
_add_module(np.linalg)
_add_module(np.fft)
# np.ndarray(shape, dtype, buffer=a, ...): a new array (a view of the buffer's memory); the
# only class in the table.
_pure[id(np.ndarray)] = np.ndarray


def _add_scipy():
    """SciPy's modules, once SciPy is imported (pijit never imports it itself)."""
    global _scipy_done
    if _scipy_done or "scipy" not in sys.modules:
        return
    _scipy_done = True
    for name in _SCIPY_MODULES:
        module = sys.modules.get(name)
        if module is None:
            try:
                module = __import__(name, fromlist=["_"])
            except ImportError:
                continue
        _add_module(module)


# Functions whose result's size depends on the data: their opaque nodes' dims are dynamic
# from the start (known only at run time), so new data never mismatches the graph.
_DATA_DEPENDENT_SHAPES = frozenset(id(f) for f in (
    np.nonzero, np.unique, np.argwhere, np.flatnonzero, np.extract, np.compress,
    np.trim_zeros, np.where, np.union1d, np.intersect1d, np.setdiff1d, np.setxor1d,
    np.unique_values, np.unique_counts, np.unique_inverse, np.unique_all, np.roots))
_BINS = frozenset(id(f) for f in (np.histogram, np.histogram_bin_edges))


def data_dependent_shape(target, args=(), kwargs=None) -> bool:
    """The size of target's result may depend on its arguments' data, not only their shapes
    (np.unique, np.nonzero; np.histogram with bins="auto"). args, kwargs: the real ones."""
    if id(target) in _BINS:
        bins = args[1] if len(args) > 1 else (kwargs or {}).get("bins")
        return isinstance(bins, str)
    return id(target) in _DATA_DEPENDENT_SHAPES


# Array methods that are pure (no method that writes into its array: sort, fill, put,
# partition, resize...), with no rule in the op table or a rule that cannot always be exact.
PURE_ARRAY_METHODS = frozenset({"nonzero", "searchsorted", "argpartition", "item", "take",
                                "compress", "choose", "cumprod", "cumsum", "ptp"})
DATA_DEPENDENT_METHODS = frozenset({"nonzero", "compress"})


def kind(target) -> str | None:
    """"pure", "random" or None (unknown: never called by capture) for a callable."""
    rng = random_generator(target)
    if rng is not None:
        return "random"
    _add_scipy()
    if _pure.get(id(target)) is target:
        return "pure"
    owner = getattr(target, "__self__", None)
    if isinstance(owner, np.ufunc) and getattr(target, "__name__", "") in _UFUNC_METHODS \
            and known_ufunc(owner):
        return "pure"       # NumPy's and SciPy's ufuncs (np.frompyfunc's call Python code)
    return None


def known_ufunc(ufunc) -> bool:
    """One of NumPy's (or SciPy's) ufuncs, whose loops run no Python code (np.frompyfunc's
    do)."""
    _add_scipy()
    return _pure.get(id(ufunc)) is ufunc


def runs_python_code(obj) -> bool:
    """A callable argument the callee may call: anything but classes and the pure table's
    functions (np.frompyfunc's ufuncs, lambdas, partials and methods included)."""
    if not callable(obj) or isinstance(obj, type):
        return False
    _add_scipy()
    return _pure.get(id(obj)) is not obj


def is_generator(obj) -> bool:
    """Whether obj is a np.random.Generator or RandomState: reading its attributes runs no
    user code (another object's may: a property, __getattr__, which capture must not run
    where plain Python would not)."""
    random = sys.modules.get("numpy.random")
    return random is not None and isinstance(obj, (random.Generator, random.RandomState))


def random_generator(target):
    """The np.random.Generator or RandomState a bound draw method (np.random.normal,
    rng.integers) advances, else None."""
    random = sys.modules.get("numpy.random")
    if random is None:      # not imported yet (np.random's first touch imports it: 12 ms)
        return None
    owner = getattr(target, "__self__", None)
    name = getattr(target, "__name__", "_")
    if isinstance(owner, (random.Generator, random.RandomState)) and \
            not name.startswith("_") and name not in _NOT_DRAWS:
        return owner
    return None


def writes_argument(target, n_positional: int, kwargs: dict) -> str | None:
    """Why this call writes into one of its arguments (out=, overwrite_*=True), else None."""
    for key, value in kwargs.items():
        if key == "out" and value is not None:
            return "out= writes into an existing array"
        if key.startswith("overwrite") and value is not False:
            return f"{key}= may write into its input"
    position = _out_position(target)
    if position is not None and position < n_positional:
        return "out= writes into an existing array"
    return None


_OUT_POSITION: dict = {}


def _out_position(target) -> int | None:
    """Where target takes `out` by position (np.clip(a, lo, hi, out): 3), or None (no such
    parameter, a keyword-only one as np.einsum(*operands, out=None)'s, no signature)."""
    key = id(target)
    if key not in _OUT_POSITION:
        position = None
        try:
            params = list(inspect.signature(target).parameters.values())
        except (TypeError, ValueError):
            params = []
        for k, p in enumerate(params):
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                break
            if p.name == "out":
                position = k
                break
        _OUT_POSITION[key] = (target, position)     # (target kept alive: ids stay unique)
    return _OUT_POSITION[key][1]


# Where `out` is among the arguments (after self) of the ndarray methods that have one, from
# their docstrings' signatures (a.clip(min, max, out)): C methods have no __signature__.
_METHOD_OUT = {"all": 1, "any": 1, "argmax": 1, "argmin": 1, "choose": 1, "clip": 2,
               "compress": 2, "cumprod": 2, "cumsum": 2, "dot": 1, "max": 1, "mean": 2,
               "min": 1, "prod": 2, "round": 1, "std": 2, "sum": 2, "take": 2, "trace": 4,
               "var": 2}
# NumPy warns (DeprecationWarning) when these get a third positional argument: out= would
# drop the warning.
_WARN_ON_POSITIONAL_OUT = frozenset(id(f) for f in (np.maximum, np.minimum))


def out_by_keyword(target, args: list, kwargs: dict, method: str | None = None):
    """(args, kwargs) of the same call with an output array given by position
    (np.negative(x, x), np.clip(x, lo, hi, x), a.max(0, o)) given as out= instead: the
    rules and graph passes read out= only, and took the positional one for an operand, so
    the write was lost. method: the name of an ndarray method called with args (self
    excluded). None when capture cannot say the call in that form (several outputs, more
    arguments after out, out given twice, a call NumPy warns of): it breaks there."""
    if method is not None:
        position = _METHOD_OUT.get(method)
    elif isinstance(target, np.ufunc):
        position = target.nin
        if len(args) > position and (id(target) in _WARN_ON_POSITIONAL_OUT or
                                     len(args) != position + target.nout):
            return None
    else:
        position = _out_position(target)
    if position is None or len(args) <= position or \
            isinstance(args[position], ConstValue) and args[position].value is None:
        return args, kwargs         # no output array (np.sum(x, 0, None, None, True))
    if len(args) != position + 1 or "out" in kwargs:
        return None
    return list(args[:position]), {**kwargs, "out": args[position]}
