"""The NumPy op table: a callable, method, attribute or operator -> OpRule (op name, the
callable the backend runs, and the rule inferring the result's Meta exactly as NumPy would).

Lookups return None when the table has no rule; a rule's `infer` raises `Unsupported` when it
cannot be exact (data-dependent shapes, value-dependent types) and any other exception when the
real call would raise. Helpers live in meta_rules.py.
"""
from __future__ import annotations

import builtins
import math
import operator
from dataclasses import dataclass
from typing import Callable

import numpy as np

from pijit.graph.ir import Meta
from pijit.graph.purity import register_writes_nothing
from pijit.capture.meta_rules import (
    Unsupported, as_shape, atleast_shape, broadcast, concat_shape, dot_shape, einsum_shape,
    index_meta, inner_shape, matmul_shape, matvec_shape, merge_dims, metas_in, normalize_axes,
    normalize_axis, out_meta, out_target, outer_shape, probe, probe_cached, reduce_shape,
    require_const, reshape_shape, result_meta, shape_of, size_of, small_const, stand_in,
    tensordot_shape, vdot_shape, vecdot_shape, vecmat_shape, view_probe,
)

__all__ = ["Unsupported", "OpRule", "lookup_call", "lookup_method", "lookup_attr",
           "lookup_operator", "static_attr", "all_call_rules"]


@dataclass(frozen=True)
class OpRule:
    """name: short op name; fn: what the backend calls with the real values (same argument
    structure as the user's call); infer(args, kwargs) -> Meta | tuple[Meta, ...]."""
    name: str
    fn: Callable
    infer: Callable


# ---------------------------------------------------------------------------------------------
# Rule makers: each returns infer(args, kwargs) for a family of ops.

def _no_out(kwargs):
    if kwargs.get("out") is not None:
        raise Unsupported("out= writes into an existing array")
    where = kwargs.get("where", True)
    if where is not True:
        raise Unsupported("where= leaves unwritten elements")


def _bind(args, names, kwargs) -> dict:
    """Positional args after the first, by parameter name, merged with kwargs."""
    if len(args) - 1 > len(names):
        raise TypeError("too many positional arguments")
    params = dict(zip(names, args[1:]))
    for k in kwargs:
        if k in params:
            raise TypeError(f"got multiple values for argument {k!r}")
    params.update(kwargs)
    return params


def _is_py_int(x) -> bool:
    t = x.pytype if type(x) is Meta else type(x)
    return t in (int, bool)


def elementwise(fn, n_operands, operand_kwargs=()):
    """Ufunc-like: result shape is the broadcast of the operands; type/dtype from a probe.
    A ufunc's `out=` array (a write into it) is the result itself."""
    def infer(args, kwargs):
        out = out_target(fn, kwargs)
        if out is not None:
            kwargs = {k: v for k, v in kwargs.items() if k != "out"}
        _no_out(kwargs)
        operands = list(args[:n_operands]) + [kwargs[k] for k in operand_kwargs if k in kwargs]
        value = probe_cached(fn, args, kwargs)  # NumPy resolves the types before broadcasting
        shape = broadcast(*[shape_of(o) for o in operands if o is not None])
        meta = result_meta(value, shape)
        return meta if out is None else out_meta(meta, out)
    return infer


def python_pow(fn):
    """`**` / pow(): int ** int is int or float depending on the exponent's sign."""
    base = elementwise(fn, 2)

    def infer(args, kwargs):
        if len(args) > 2:
            raise Unsupported("three-argument pow")
        base_arg, exp = args[0], args[1]
        if type(exp) is Meta and _is_py_int(exp):
            if _is_py_int(base_arg):
                raise Unsupported("int ** int: the result type depends on the exponent's sign")
            if type(base_arg) is Meta and base_arg.dtype.kind == "b":
                # ndarray.__pow__ turns `** 2` into np.square: bool ** 2 is int8, ** 3 int64
                raise Unsupported("bool ** int: the result dtype depends on the exponent")
        return base(args, kwargs)
    return infer


REDUCE_PARAMS = {
    "sum": ("axis", "dtype", "out", "keepdims", "initial", "where"),
    "mean": ("axis", "dtype", "out", "keepdims", "where"),
    "std": ("axis", "dtype", "out", "ddof", "keepdims", "where"),
    "max": ("axis", "out", "keepdims", "initial", "where"),
    "argmax": ("axis", "out"),
    "any": ("axis", "out", "keepdims", "where"),
    "ptp": ("axis", "out", "keepdims"),
    "median": ("axis", "out", "overwrite_input", "keepdims"),
    "cumsum": ("axis", "dtype", "out"),
    "count_nonzero": ("axis",),
}
# op name -> (parameter family, needs a non-empty reduced axis)
REDUCTIONS = {
    "sum": ("sum", False), "prod": ("sum", False), "nansum": ("sum", False),
    "nanprod": ("sum", False), "mean": ("mean", False), "nanmean": ("mean", False),
    "std": ("std", False), "var": ("std", False), "nanstd": ("std", False),
    "nanvar": ("std", False), "max": ("max", True), "min": ("max", True),
    "amax": ("max", True), "amin": ("max", True), "nanmax": ("max", True),
    "nanmin": ("max", True), "argmax": ("argmax", True), "argmin": ("argmax", True),
    "nanargmax": ("argmax", True), "nanargmin": ("argmax", True), "any": ("any", False),
    "all": ("any", False), "ptp": ("ptp", True), "median": ("median", False),
    "nanmedian": ("median", False), "cumsum": ("cumsum", False), "cumprod": ("cumsum", False),
    "nancumsum": ("cumsum", False), "nancumprod": ("cumsum", False),
    "count_nonzero": ("count_nonzero", False),
}


def reduction(fn, name):
    family, nonempty = REDUCTIONS[name]
    names = REDUCE_PARAMS[family]

    def infer(args, kwargs):
        _no_out(kwargs)
        params = _bind(args, names, kwargs)
        if params.get("overwrite_input"):
            raise Unsupported("overwrite_input mutates the input")
        a = args[0] if args else params.pop("a")
        shape = shape_of(a)
        if not shape:  # the 0-d stand-in has the real shape; 0-d inputs accept axis=0/-1
            return result_meta(probe(fn, args, kwargs))
        axis = require_const(params.get("axis"), "axis")
        keepdims = require_const(params.get("keepdims", False), "keepdims")
        if family in ("argmax", "cumsum") and isinstance(axis, (tuple, list)):
            raise TypeError(f"'{type(axis).__name__}' object cannot be interpreted as an "
                            "integer")
        axes = normalize_axes(axis, len(shape))
        if nonempty and "initial" not in params and any(shape[i] == 0 for i in axes):
            raise ValueError(f"zero-size array to reduction operation {name} "
                             "which has no identity")
        if family == "cumsum":
            out_shape = shape if axis is not None else (size_of(shape),)
        else:
            out_shape = reduce_shape(shape, axis, keepdims)
        return result_meta(probe(fn, args, kwargs), out_shape)
    return infer


def norm_infer(args, kwargs):
    params = _bind(args, ("ord", "axis", "keepdims"), kwargs)
    x = args[0] if args else params["x"]
    require_const((params.get("ord"), params.get("keepdims")), "norm ord/keepdims")
    shape = reduce_shape(shape_of(x), params.get("axis"), params.get("keepdims", False))
    return result_meta(probe(np.linalg.norm, args, kwargs), shape)


def same_shape(fn):
    """Result has the first argument's shape (copy, astype, flip, sort...)."""
    def infer(args, kwargs):
        _no_out(kwargs)
        return result_meta(probe(fn, args, kwargs), shape_of(args[0]))
    return infer


def view(fn, squeeze_like=False, static_only=False):
    """Views that permute, insert or drop axes: NumPy itself on zero-strided fakes."""
    def infer(args, kwargs):
        dyn = any(None in m.shape for m in metas_in((args, kwargs)))
        if dyn and (static_only or (squeeze_like and _squeeze_axis(args, kwargs) is None)):
            raise Unsupported(f"{getattr(fn, '__name__', fn)} depends on a dynamic dim's size")
        for m in metas_in(args[1:]) + metas_in(kwargs):
            raise Unsupported("axis/shape argument depends on a graph value")
        return view_probe(fn, args, kwargs)
    return infer


def broadcast_to_infer(args, kwargs):
    params = _bind(args, ("shape", "subok"), kwargs)
    target = as_shape(params["shape"])
    shape = shape_of(args[0])
    if len(shape) > len(target) or broadcast(shape, target) != target:
        raise ValueError(f"cannot broadcast shape {shape} to {target}")
    value = probe(np.broadcast_to, (args[0], (1,) * len(target)), {})
    return result_meta(value, target)


def _squeeze_axis(args, kwargs):
    return args[1] if len(args) > 1 else kwargs.get("axis")


def reshape_infer(fn, method: bool):
    def infer(args, kwargs):
        a = args[0]
        if kwargs.get("copy") is False:
            raise Unsupported("reshape(copy=False) raises or not depending on strides")
        if method:
            newshape = args[1] if len(args) == 2 else args[1:]
            if "shape" in kwargs:
                newshape = kwargs["shape"]
        else:
            newshape = args[1] if len(args) > 1 else kwargs.get("shape", kwargs.get("newshape"))
        shape = reshape_shape(shape_of(a), newshape)
        # The size-1 stand-in reshapes to (1,)*ndim: NumPy itself gives type and dtype, and
        # checks the keyword the shape came by (the method takes none; NumPy 2.4 dropped
        # newshape=).
        small = (1,) * len(shape)
        named = [k for k in ("shape", "newshape") if k in kwargs]
        if named:
            return result_meta(probe(fn, (a,), {**kwargs, named[0]: small}), shape)
        return result_meta(probe(fn, (a, small), kwargs), shape)
    return infer


def flatten_infer(fn):
    def infer(args, kwargs):
        a = args[0]
        value = probe(fn, args, kwargs)
        return result_meta(value, (size_of(shape_of(a)),))
    return infer


def contraction(fn, shape_rule, n_operands=2):
    """matmul/dot/inner/outer/vdot: dtype from ones of shape (1,)*ndim, shape by rule."""
    def infer(args, kwargs):
        _no_out(kwargs)
        ops = args[:n_operands]
        small = tuple(small_const(o) for o in ops) + tuple(args[n_operands:])
        value = probe(fn, small, kwargs)    # (types first, as NumPy checks them)
        return result_meta(value, shape_rule(*[shape_of(o) for o in ops]))
    return infer


def tensordot_infer(args, kwargs):
    params = _bind(args, ("b", "axes"), kwargs)
    a, b = args[0], params["b"]
    shape = tensordot_shape(shape_of(a), shape_of(b), params.get("axes", 2))
    value = probe(np.tensordot, (small_const(a), small_const(b)), {"axes": params.get("axes", 2)})
    return result_meta(value, shape)


def einsum_infer(args, kwargs):
    _no_out(kwargs)
    if not args or not isinstance(args[0], str):
        raise Unsupported("einsum: only the subscripts-string form is supported")
    require_const(kwargs, "einsum options")
    ops = args[1:]
    shape = einsum_shape(args[0], [shape_of(o) for o in ops])
    value = probe(np.einsum, (args[0],) + tuple(small_const(o) for o in ops), kwargs)
    return result_meta(value, shape)


def _seq(args, kwargs, key):
    seq = args[0] if args else kwargs[key]
    if type(seq) not in (tuple, list):
        raise Unsupported("sequence argument is not a tuple or list")
    return seq


def stacking(fn, kind):
    def infer(args, kwargs):
        _no_out(kwargs)
        seq = _seq(args, kwargs, "tup" if kind in ("hstack", "vstack") else "arrays")
        if not seq:
            raise ValueError("need at least one array to concatenate")
        shapes = [shape_of(o) for o in seq]
        axis = require_const(args[1] if len(args) > 1 else kwargs.get("axis", 0), "axis")
        if kind == "concatenate":
            shape = concat_shape(shapes, axis)
        elif kind == "stack":
            base = shapes[0]
            if any(len(s) != len(base) for s in shapes):
                raise ValueError("all input arrays must have the same shape")
            for s in shapes[1:]:
                base = tuple(merge_dims(x, y, "stacked shapes") for x, y in zip(base, s))
            ax = normalize_axis(axis, len(base) + 1)
            shape = base[:ax] + (len(seq),) + base[ax:]
        elif kind == "hstack":
            shapes = [s if s else (1,) for s in shapes]
            shape = concat_shape(shapes, 0 if all(len(s) == 1 for s in shapes) else 1)
        elif kind == "vstack":
            shape = concat_shape([atleast_shape(s, 2) for s in shapes], 0)
        else:  # column_stack
            cols = [(s[0] if s else 1, 1) if len(s) < 2 else s for s in shapes]
            shape = concat_shape(cols, 1)
        small = [small_const(o) for o in seq]
        value = probe(fn, (small,) + tuple(args[1:]),
                      {k: v for k, v in kwargs.items() if k not in ("arrays", "tup")})
        return result_meta(value, shape)
    return infer


def where_infer(args, kwargs):
    if len(args) + len(kwargs) != 3:
        raise Unsupported("np.where(cond) has a data-dependent shape")
    return elementwise(np.where, 3)(args, kwargs)


def clip_infer(fn):
    return elementwise(fn, 3, ("a_min", "a_max", "min", "max"))


def nan_to_num_infer(args, kwargs):
    params = _bind(args, ("copy", "nan", "posinf", "neginf"), kwargs)
    if params.get("copy", True) is not True:
        raise Unsupported("nan_to_num(copy=False) writes into its input")
    return elementwise(np.nan_to_num, 1)(args, kwargs)


def repeat_infer(fn):
    def infer(args, kwargs):
        params = _bind(args, ("repeats", "axis"), kwargs)
        a = args[0]
        reps = require_const(params["repeats"], "repeats")
        axis = require_const(params.get("axis"), "axis")
        shape = shape_of(a)
        if axis is None:
            shape, axis = (size_of(shape),), 0
        ax = normalize_axis(axis, len(shape))
        reps_arr = np.asarray(reps)
        if reps_arr.ndim == 0:
            total = None if shape[ax] is None else shape[ax] * int(reps_arr)
        else:
            if shape[ax] is not None and reps_arr.shape != (shape[ax],) and reps_arr.size != 1:
                raise ValueError("operands could not be broadcast together")
            if reps_arr.size == 1:
                total = None if shape[ax] is None else shape[ax] * int(reps_arr.ravel()[0])
            elif shape[ax] is None:
                total = int(reps_arr.sum())
            else:
                total = int(reps_arr.sum())
        if (reps_arr < 0).any():
            raise ValueError("repeats may not contain negative values")
        out = shape[:ax] + (total,) + shape[ax + 1:]
        value = probe(fn, (a, 1) + ((params["axis"],) if params.get("axis") is not None
                                    else ()), {})
        return result_meta(value, out)
    return infer


def tile_infer(args, kwargs):
    params = _bind(args, ("reps",), kwargs)
    reps = require_const(params["reps"], "reps")
    reps = tuple(reps) if isinstance(reps, (tuple, list)) else (reps,)
    shape = shape_of(args[0])
    d = max(len(reps), len(shape))
    shape = (1,) * (d - len(shape)) + tuple(shape)
    reps = (1,) * (d - len(reps)) + tuple(int(r) for r in reps)
    out = tuple(0 if r == 0 else (None if s is None else s * r) for s, r in zip(shape, reps))
    value = probe(np.tile, (args[0], (1,) * len(reps)), {})
    return result_meta(value, out)


def trace_infer(fn):
    def infer(args, kwargs):
        _no_out(kwargs)
        params = _bind(args, ("offset", "axis1", "axis2", "dtype", "out"), kwargs)
        shape = shape_of(args[0])
        a1 = normalize_axis(params.get("axis1", 0), len(shape))
        a2 = normalize_axis(params.get("axis2", 1), len(shape))
        if a1 == a2:
            raise ValueError("axis1 and axis2 cannot be the same")
        out = tuple(d for i, d in enumerate(shape) if i not in (a1, a2))
        return result_meta(probe(fn, args, kwargs), out)
    return infer


def sort_infer(fn):
    def infer(args, kwargs):
        params = _bind(args, ("axis", "kind", "order"), kwargs)
        shape = shape_of(args[0])
        if not shape:
            return result_meta(probe(fn, args, kwargs))
        axis = require_const(params.get("axis", -1), "axis")
        if axis is None:
            shape = (size_of(shape),)
        else:
            normalize_axis(axis, len(shape))
        return result_meta(probe(fn, args, kwargs), shape)
    return infer


def data_dependent(name):
    def infer(args, kwargs):
        raise Unsupported(f"{name} has a data-dependent shape")
    return infer


def value_shaped(fn, name):
    """Creation ops whose shape comes from argument values (eye, arange...): constants only."""
    def infer(args, kwargs):
        if metas_in((args, kwargs)):
            raise Unsupported(f"{name}: the result shape depends on a graph value")
        return result_meta(fn(*args, **kwargs))
    return infer


def creation(fn):
    """zeros/ones/empty(shape, dtype=...)."""
    def infer(args, kwargs):
        params = _bind(args, ("dtype", "order"), kwargs)
        shape = as_shape(args[0] if args else params.pop("shape"))
        require_const(params, "dtype")
        return result_meta(fn((0,) * len(shape), **params), shape)
    return infer


def full_infer(args, kwargs):
    params = _bind(args, ("fill_value", "dtype", "order"), kwargs)
    shape = as_shape(args[0] if args else params.pop("shape"))
    fill = params.pop("fill_value")
    if broadcast(shape_of(fill), shape) != shape:
        raise ValueError("could not broadcast fill_value to shape")
    value = probe(np.full, ((0,) * len(shape), _scalar_of(fill)), params)
    return result_meta(value, shape)


def _scalar_of(fill):
    """The probe fill value: a Meta array's fill is probed as one of its elements."""
    if type(fill) is Meta and fill.is_array:
        return Meta(fill.dtype.type, fill.dtype, ())
    if isinstance(fill, (np.ndarray, list)):
        return np.asarray(fill).ravel()[:1].reshape(())
    return fill


def like(fn, with_fill):
    names = (("fill_value",) if with_fill else ()) + ("dtype", "order", "subok", "shape")

    def infer(args, kwargs):
        params = _bind(args, names, kwargs)
        a = args[0] if args else params.pop("a")
        shape = params.get("shape")
        out = as_shape(shape) if shape is not None else shape_of(a)
        if with_fill:
            if broadcast(shape_of(params["fill_value"]), out) != out:
                raise ValueError("could not broadcast fill_value to shape")
            params["fill_value"] = _scalar_of(params["fill_value"])
        if shape is not None:
            params["shape"] = (0,) * len(out)
        return result_meta(probe(fn, (a,), params), out)
    return infer


def linspace_infer(fn):
    def infer(args, kwargs):
        params = _bind(args, ("stop", "num", "endpoint", "retstep", "dtype", "axis"), kwargs)
        start, stop = args[0] if args else params.pop("start"), params.pop("stop")
        num = require_const(params.pop("num", 50), "num")
        require_const(params, "linspace options")
        if num < 0:
            raise ValueError("Number of samples must be non-negative")
        bshape = broadcast(shape_of(start), shape_of(stop))
        if bshape and params.get("retstep"):
            raise Unsupported("linspace(retstep=True) with array bounds")
        ax = normalize_axis(params.get("axis", 0), len(bshape) + 1)
        shape = bshape[:ax] + (num,) + bshape[ax:]
        # num 0, or 1 with the endpoint, leaves the step undefined: a Python float NaN, where
        # 2 samples give one of the bounds' dtype; min(num, 2) keeps both cases apart
        value = probe(fn, (small_const(start), small_const(stop), min(num, 2)), params)
        if isinstance(value, tuple):
            return (result_meta(value[0], shape), result_meta(value[1]))
        return result_meta(value, shape)
    return infer


def array_infer(fn, copy_default):
    def infer(args, kwargs):
        params = _bind(args, ("dtype",), kwargs)
        if params.get("copy", copy_default) is not copy_default or params.get("ndmin", 0):
            raise Unsupported("copy=/ndmin= options of array construction")
        obj = args[0] if args else params.pop("object")
        if type(obj) in (list, tuple):
            if not obj or any(type(o) in (list, tuple) for o in obj):
                raise Unsupported("nested sequences of graph values")
            shapes = [shape_of(o) for o in obj]
            base = shapes[0]
            if any(len(s) != len(base) for s in shapes):
                raise ValueError("inhomogeneous shape")
            for s in shapes[1:]:
                base = tuple(merge_dims(x, y, "array element shapes") for x, y in zip(base, s))
            shape = (len(obj),) + base
            probe_args = ([small_const(o) for o in obj],) + args[1:]
        else:
            shape = shape_of(obj)
            probe_args = args
        return result_meta(probe(fn, probe_args, kwargs), shape)
    return infer


def scalar_type(fn):
    """np.float32(x), np.int64(x)...: a NumPy scalar, or an array for array arguments."""
    def infer(args, kwargs):
        if len(args) != 1 or kwargs:
            raise Unsupported("scalar type call with several arguments")
        return result_meta(probe(fn, args, {}), shape_of(args[0]))
    return infer


_MATH_PROBES = (1, 2, 0.5, 0)


def math_rule(fn):
    """math.* on Python/NumPy scalars -> Python float/int/bool; arrays are Unsupported."""
    def infer(args, kwargs):
        if any(m.is_array for m in metas_in((args, kwargs))):
            raise Unsupported(f"math.{fn.__name__} on an array")
        err = None
        for v in _MATH_PROBES:  # a probe outside the domain (acosh(0.5)) tries the next value
            try:
                return result_meta(probe(fn, args, kwargs,
                                         replace=lambda m: stand_in(m, m.pytype(v) if
                                                                    m.is_pyscalar else v)))
            except (ValueError, OverflowError, ZeroDivisionError) as e:
                err = e
        raise err
    return infer


def matmul_infer(fn):
    return contraction(fn, matmul_shape)


def getitem_infer(args, kwargs):
    x, idx = args
    return index_meta(x, idx)


def static_only_view(fn):
    return view(fn, static_only=True)


# ---------------------------------------------------------------------------------------------
# The tables

@register_writes_nothing
def _attr_T(x):
    return x.T


@register_writes_nothing
def _attr_mT(x):
    return x.mT


@register_writes_nothing
def _attr_real(x):
    return x.real


@register_writes_nothing
def _attr_imag(x):
    return x.imag


_ATTRS = {"T": _attr_T, "mT": _attr_mT, "real": _attr_real, "imag": _attr_imag}

_OPERATORS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
    "lshift": operator.lshift, "rshift": operator.rshift, "and": operator.and_,
    "or": operator.or_, "xor": operator.xor, "lt": operator.lt, "le": operator.le,
    "eq": operator.eq, "ne": operator.ne, "gt": operator.gt, "ge": operator.ge,
}
_UNARY = {"neg": operator.neg, "pos": operator.pos, "invert": operator.invert}


def _operator_rule(name: str) -> OpRule:
    if name == "matmul":
        return OpRule("matmul", operator.matmul, matmul_infer(operator.matmul))
    if name == "getitem":
        return OpRule("getitem", operator.getitem, getitem_infer)
    if name == "pow":
        return OpRule("pow", operator.pow, python_pow(operator.pow))
    if name in _UNARY:
        return OpRule(name, _UNARY[name], elementwise(_UNARY[name], 1))
    fn = _OPERATORS[name]
    return OpRule(name, fn, elementwise(fn, 2))


OPERATOR_RULES = {n: _operator_rule(n)
                  for n in list(_OPERATORS) + list(_UNARY) + ["matmul", "getitem"]}

# Array methods: name -> rule maker taking the method callable
_METHOD_MAKERS = {
    **{n: (lambda n: lambda f: reduction(f, n))(n)
       for n in ("sum", "prod", "mean", "std", "var", "max", "min", "argmax", "argmin", "any",
                 "all", "cumsum", "cumprod")},
    "reshape": lambda f: reshape_infer(f, method=True),
    "transpose": view,
    "swapaxes": view,
    "squeeze": lambda f: view(f, squeeze_like=True),
    "diagonal": static_only_view,
    "astype": same_shape,
    "copy": same_shape,
    "ravel": flatten_infer,
    "flatten": flatten_infer,
    "clip": lambda f: elementwise(f, 3, ("min", "max")),
    "round": lambda f: elementwise(f, 1),
    "conj": lambda f: elementwise(f, 1),
    "conjugate": lambda f: elementwise(f, 1),
    "dot": lambda f: contraction(f, dot_shape),
    "repeat": repeat_infer,
    "trace": trace_infer,
    "argsort": sort_infer,
    "nonzero": lambda f: data_dependent("nonzero"),
}


def _build_call_table() -> dict:
    table: dict = {}

    def add(fn, name, infer):
        table[fn] = OpRule(name, fn, infer)

    # vars(np), not dir(np) + getattr: getattr of NumPy's lazy submodules (f2py, testing)
    # would import them, 150 ms of `import pijit`.
    for obj in list(vars(np).values()):
        if isinstance(obj, np.ufunc) and obj.signature is None and obj not in table:
            add(obj, obj.__name__, elementwise(obj, obj.nin))
    for name in REDUCTIONS:
        add(getattr(np, name), name, reduction(getattr(np, name), name))
    add(np.where, "where", where_infer)
    add(np.clip, "clip", clip_infer(np.clip))
    add(np.round, "round", elementwise(np.round, 1))
    add(np.around, "around", elementwise(np.around, 1))
    add(np.nan_to_num, "nan_to_num", nan_to_num_infer)
    for fn in (np.isclose, np.angle, np.sinc, np.fix, np.i0):
        add(fn, fn.__name__, elementwise(fn, 2 if fn is np.isclose else 1))
    for fn in (np.allclose, np.array_equal):
        add(fn, fn.__name__, elementwise(fn, 0))  # scalar result of any two shapes
    add(np.linalg.norm, "norm", norm_infer)
    # views
    for fn in (np.transpose, np.swapaxes, np.moveaxis, np.expand_dims,
               np.real, np.imag, np.flip, np.flipud, np.fliplr, np.rot90, np.atleast_1d,
               np.atleast_2d, np.atleast_3d, np.matrix_transpose):
        add(fn, fn.__name__, view(fn))
    add(np.broadcast_to, "broadcast_to", broadcast_to_infer)
    add(np.squeeze, "squeeze", view(np.squeeze, squeeze_like=True))
    add(np.diagonal, "diagonal", static_only_view(np.diagonal))
    add(np.reshape, "reshape", reshape_infer(np.reshape, method=False))
    add(np.ravel, "ravel", flatten_infer(np.ravel))
    add(np.copy, "copy", same_shape(np.copy))
    add(np.sort, "sort", sort_infer(np.sort))
    add(np.argsort, "argsort", sort_infer(np.argsort))
    add(np.repeat, "repeat", repeat_infer(np.repeat))
    add(np.tile, "tile", tile_infer)
    add(np.trace, "trace", trace_infer(np.trace))
    # contractions
    add(np.matmul, "matmul", matmul_infer(np.matmul))
    add(np.dot, "dot", contraction(np.dot, dot_shape))
    add(np.inner, "inner", contraction(np.inner, inner_shape))
    add(np.outer, "outer", contraction(np.outer, outer_shape))
    add(np.vdot, "vdot", contraction(np.vdot, vdot_shape))
    add(np.tensordot, "tensordot", tensordot_infer)
    add(np.vecdot, "vecdot", contraction(np.vecdot, vecdot_shape))
    add(np.matvec, "matvec", contraction(np.matvec, matvec_shape))
    add(np.vecmat, "vecmat", contraction(np.vecmat, vecmat_shape))
    add(np.einsum, "einsum", einsum_infer)
    # joining
    for fn, kind in ((np.concatenate, "concatenate"), (np.stack, "stack"),
                     (np.hstack, "hstack"), (np.vstack, "vstack"),
                     (np.column_stack, "column_stack")):
        add(fn, kind, stacking(fn, kind))
    # creation
    for fn in (np.zeros, np.ones, np.empty):
        add(fn, fn.__name__, creation(fn))
    add(np.full, "full", full_infer)
    for fn in (np.zeros_like, np.ones_like, np.empty_like):
        add(fn, fn.__name__, like(fn, False))
    add(np.full_like, "full_like", like(np.full_like, True))
    for fn in (np.eye, np.identity, np.arange, np.tri):
        add(fn, fn.__name__, value_shaped(fn, fn.__name__))
    add(np.linspace, "linspace", linspace_infer(np.linspace))
    add(np.array, "array", array_infer(np.array, True))
    add(np.asarray, "asarray", array_infer(np.asarray, None))
    add(np.asanyarray, "asanyarray", array_infer(np.asanyarray, None))
    add(np.ascontiguousarray, "ascontiguousarray",
        array_infer(np.ascontiguousarray, None))
    for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
              np.uint64, np.float16, np.float32, np.float64, np.longdouble, np.complex64,
              np.complex128):
        add(t, t.__name__, scalar_type(t))
    # data-dependent shapes: explicit rules so capture reports why
    for fn in (np.nonzero, np.unique, np.argwhere, np.flatnonzero, np.extract, np.compress,
               np.trim_zeros):
        add(fn, fn.__name__, data_dependent(fn.__name__))
    # builtins and math
    add(builtins.abs, "abs", elementwise(builtins.abs, 1))
    add(builtins.pow, "pow", python_pow(builtins.pow))
    for name in ("sqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
                 "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh",
                 "acosh", "atanh", "floor", "ceil", "trunc", "pow", "fabs", "hypot",
                 "copysign", "degrees", "radians", "isnan", "isinf", "isfinite", "fmod",
                 "erf", "erfc", "gamma", "lgamma", "cbrt", "remainder", "ldexp", "frexp",
                 "modf", "isclose", "gcd"):
        fn = getattr(math, name, None)
        if fn is not None:
            add(fn, name, math_rule(fn))
    return table


CALL_RULES = _build_call_table()
_METHOD_CACHE: dict = {}


# ---------------------------------------------------------------------------------------------
# Lookup API

def lookup_call(fn) -> OpRule | None:
    """The rule for a call of the concrete callable `fn` (np.exp, math.sqrt, abs, np.float32)."""
    try:
        return CALL_RULES.get(fn)
    except TypeError:  # unhashable callables are never in the table
        return None


def lookup_method(meta: Meta, name: str) -> OpRule | None:
    """The rule for `value.name(...)` on an array or NumPy scalar; fn takes self first."""
    if meta.is_pyscalar or name not in _METHOD_MAKERS:
        return None
    key = (meta.pytype, name)
    if key not in _METHOD_CACHE:
        fn = getattr(meta.pytype, name, None)
        if fn is None:
            return None
        _METHOD_CACHE[key] = OpRule(name, fn, _METHOD_MAKERS[name](fn))
    return _METHOD_CACHE[key]


def lookup_attr(meta: Meta, name: str) -> OpRule | None:
    """The rule for a computed attribute (T, mT, real, imag) of a graph value."""
    fn = _ATTRS.get(name)
    if fn is None or not hasattr(stand_in(meta), name):
        return None
    return OpRule(name, fn, lambda args, kwargs: view_probe(fn, args, kwargs))


def lookup_operator(name: str) -> OpRule:
    """The rule for a bytecode operator ("add", ..., "neg", "getitem"); KeyError if unknown."""
    return OPERATOR_RULES[name]


def static_attr(meta: Meta, name: str):
    """shape/ndim/dtype/size/itemsize/nbytes of a value as a Python constant."""
    if meta.is_pyscalar:
        raise AttributeError(f"'{meta.pytype.__name__}' object has no attribute '{name}'")
    if name == "ndim":
        return meta.ndim
    if name == "dtype":
        return meta.dtype
    if name == "itemsize":
        return meta.dtype.itemsize
    if name in ("shape", "size", "nbytes"):
        size = size_of(meta.shape)
        if size is None:
            raise Unsupported(f"{name} of a value with dynamic dims")
        if name == "shape":
            return tuple(meta.shape)
        return size if name == "size" else size * meta.dtype.itemsize
    raise Unsupported(f"{name} is not a static attribute")


def all_call_rules() -> dict:
    """Every call rule, keyed by callable (for table-driven tests)."""
    return dict(CALL_RULES)
