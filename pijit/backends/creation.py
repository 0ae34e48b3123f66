"""Cheaper callables for NumPy's Python-level array creation, used when code is generated.

`np.zeros_like`, `np.ones_like` and `np.ones` are Python functions that allocate with a C
builtin (`empty_like`, `empty`) and then fill through `copyto(a, v, casting="unsafe")`, which
is most of their cost: about 11,700 instructions a call of `zeros_like` on a 6x6 float64
array (NumPy 2.4, 3.11, callgrind), against 3,600 for `empty_like` itself. Kernels written
as loops allocate their outputs this way at every call, so a small jitted kernel spent most
of its time there (cholesky by loops on 6x6: 16,000 instructions a call, 11,700 of them the
`zeros_like`).

Each replacement allocates with the same builtin and the same arguments, so shape, dtype,
memory layout and subclass are NumPy's, and fills with `ndarray.fill`, which stores the same
value NumPy's `copyto` does for a bool, integer, float or complex dtype (0 and 1 are exact
in each); any other result (object, string, datetime, void, structured dtypes; a subclass,
whose `fill` may be its own) is filled by `copyto` from what the original copies. Only the
argument forms the replacement accepts in full are rewritten (`replacement`): others keep
NumPy's function.
"""
from __future__ import annotations

import numpy as np

_ndarray, _empty, _empty_like, _zeros, _copyto = (np.ndarray, np.empty, np.empty_like, np.zeros,
                                                  np.copyto)
# dtype.kind of the dtypes whose fill(v) stores what copyto(a, v, casting="unsafe") does.
_PLAIN_KINDS = frozenset("biufc")


# Three copies of one body: a shared helper would cost each call a Python frame more.
def fill_zeros_like(a, dtype=None):
    r = _empty_like(a, dtype)
    if type(r) is _ndarray and r.dtype.kind in _PLAIN_KINDS:
        r.fill(0)
    else:       # NumPy's zeros_like copies a zero of the dtype: '' for strings, not '0'
        _copyto(r, _zeros(1, dtype=r.dtype), casting="unsafe")
    return r


def fill_ones_like(a, dtype=None):
    r = _empty_like(a, dtype)
    if type(r) is _ndarray and r.dtype.kind in _PLAIN_KINDS:
        r.fill(1)
    else:
        _copyto(r, 1, casting="unsafe")
    return r


def fill_ones(shape, dtype=None, order="C"):
    r = _empty(shape, dtype, order)
    if type(r) is _ndarray and r.dtype.kind in _PLAIN_KINDS:
        r.fill(1)
    else:
        _copyto(r, 1, casting="unsafe")
    return r


# NumPy's function -> (its replacement, the replacement's parameters).
_REPLACEMENTS = {
    id(np.zeros_like): (np.zeros_like, fill_zeros_like, ("a", "dtype")),
    id(np.ones_like): (np.ones_like, fill_ones_like, ("a", "dtype")),
    id(np.ones): (np.ones, fill_ones, ("shape", "dtype", "order")),
}


def replacement(fn, args, kwargs):
    """The cheaper callable doing what `fn(*args, **kwargs)` does, or `fn` itself when the
    arguments do not bind to the replacement's parameters (the first one positional, each
    at most once). kwargs: the node's (name, value) pairs."""
    entry = _REPLACEMENTS.get(id(fn))
    if entry is None or entry[0] is not fn:
        return fn
    params = entry[2]
    names = [name for name, _ in kwargs]
    if not 1 <= len(args) <= len(params) or len(set(names)) != len(names) \
            or not set(names) <= set(params[len(args):]):
        return fn
    return entry[1]
