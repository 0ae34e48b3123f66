"""np.var and np.std as the ufunc calls and reductions NumPy's own `_methods._var` makes.

NumPy computes a variance in Python, from a mean, a subtraction, a square, a sum and a
division; an opaque `var` node hides that from fusion, so at O1 it ran at several times the
cost of reading its input once. Recorded as those same calls, in the same order and dtypes,
the value is NumPy's to the bit by construction (each call is one the graph already gives
NumPy's result for), and fusion makes one pass of the deviations' sum.

Recorded this way only where `_var`'s steps are exactly these calls: a float32 or float64
array, an `axis` and `keepdims` and `ddof` given as constants (no dtype, out, where, mean or
correction), and a count of reduced items known at capture and larger than ddof and 0 (else
NumPy warns "Degrees of freedom <= 0" or "Mean of empty slice": the opaque call keeps that).
The last division is `mean`'s own when ddof is 0 (the same sum, divided by the same
`np.intp` count); with another ddof, float64's quotient is a `true_divide` by that count, and
float32's (a float64 division rounded back to float32) stays opaque.
"""
from __future__ import annotations

import math

import numpy as np

from pijit.capture import numpy_rules
from pijit.capture.meta_rules import Unsupported, normalize_axes
from pijit.capture.values import ConstValue, GraphValue

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def var_or_std(cap, name: str, args: list, kwargs: dict):
    """The Value of np.var/np.std(*args, **kwargs) as the calls of `_var`, or None when they
    would not be exactly those (the caller records the opaque call)."""
    params = _bind(args, kwargs)
    if params is None:
        return None
    x, axis, ddof, keepdims = params
    meta = x.meta
    if not meta.is_array or meta.dtype not in _FLOATS or meta.ndim == 0:
        return None
    try:
        axes = normalize_axes(axis, meta.ndim)
    except (Unsupported, TypeError, ValueError):
        return None                 # NumPy raises: the opaque call does too
    if any(meta.shape[a] is None for a in axes):
        return None
    count = math.prod(meta.shape[a] for a in axes)
    if count == 0 or ddof >= count or (ddof and meta.dtype == np.float32):
        return None
    call = numpy_rules.lookup_call
    axis_kw = {"axis": ConstValue(axis)}
    mean = cap.add_op(call(np.mean), (x,), {**axis_kw, "keepdims": ConstValue(True)})
    dev = cap.add_op(call(np.subtract), (x, mean), {})
    sq = cap.add_op(call(np.square), (dev,), {})
    kd = {**axis_kw, "keepdims": ConstValue(keepdims)}
    if ddof == 0:
        out = cap.add_op(call(np.mean), (sq,), kd)
    else:
        total = cap.add_op(call(np.sum), (sq,), kd)
        out = cap.add_op(call(np.true_divide), (total, ConstValue(np.intp(count - ddof))), {})
    if name == "std":
        out = cap.add_op(call(np.sqrt), (out,), {})
    return out


def _bind(args: list, kwargs: dict):
    """(x, axis, ddof, keepdims) when every argument is a constant of the accepted kinds."""
    if not args or len(args) > 2 or set(kwargs) - {"axis", "ddof", "keepdims"}:
        return None
    if len(args) == 2 and "axis" in kwargs:
        return None
    x = args[0]
    if not isinstance(x, GraphValue):
        return None
    given = {"axis": args[1]} if len(args) == 2 else {}
    given.update(kwargs)
    if not all(isinstance(v, ConstValue) for v in given.values()):
        return None
    axis = given["axis"].value if "axis" in given else None
    ddof = given["ddof"].value if "ddof" in given else 0
    keepdims = given["keepdims"].value if "keepdims" in given else False
    if type(ddof) is not int or type(keepdims) is not bool:
        return None
    if not (axis is None or type(axis) is int or
            type(axis) is tuple and all(type(a) is int for a in axis)):
        return None                 # (a list is no axis to NumPy's _var: it raises)
    return x, axis, ddof, keepdims
