"""How far O2 results may be from NumPy's: bounds derived from the algorithms on both sides
(each side's documented error bound, added), not from measured maxima. The tests compare O2
results against these; the README's "O2 error bounds" table says the same numbers
(test_o2_spec.py checks both, and these NumPy bounds against NumPy's own test data).

O0 and O1 are compared bit for bit: they have no entry here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

# -- transcendentals: kernel (glibc libmvec) vs NumPy's loop, both against the exact value ---
# glibc documents libmvec's vector functions as accurate to 4 ulp (NEWS of glibc 2.22, where
# libmvec came; DESIGN.md section 5).
LIBMVEC_ULP = 4
# NumPy's own bound per function: the largest `ulperror` its accuracy tests allow
# (numpy/_core/tests/data/umath-validation-set-<name>.csv, checked against the installed
# NumPy by test_o2_spec.py), as (float32, float64).
NUMPY_ULP = {
    "exp": (3, 1), "log": (4, 1), "sin": (2, 1), "cos": (2, 1), "tanh": (2, 2),
    "expm1": (3, 1), "log1p": (2, 1), "log2": (3, 1), "log10": (4, 1), "exp2": (2, 1),
    "sinh": (2, 1), "cosh": (3, 1), "tan": (4, 1), "arcsin": (4, 1), "arccos": (3, 1),
    "arctan": (3, 1), "arcsinh": (2, 1), "arccosh": (2, 1), "arctanh": (2, 1), "cbrt": (2, 2),
}
# Functions NumPy has no accuracy data for: on AVX512_SKX NumPy computes float64 power and
# arctan2 with SVML's 4-ulp variants, elsewhere (and for float32, and hypot) by libm, which
# glibc keeps within a few ulp: 4 covers both.
OTHER_NUMPY_ULP = 4
OTHER = ("pow", "power", "arctan2", "hypot")


@dataclass(frozen=True)
class Ulp:
    """|got - want| <= n ulp of the exact result (float16 results: f32's bound)."""
    f32: float
    f64: float

    def n(self, dtype) -> float:
        return self.f64 if np.dtype(dtype) == np.float64 else self.f32


@dataclass(frozen=True)
class Scaled:
    """|got - want| <= k * eps(dtype) * scale. scale: sum(|x|) over the reduced elements for
    sums (mean: / count), count * prod(|x|) for products, |x*y| + |z| for x*y + z. k may
    depend on the dtype and the number of reduced elements: k(dtype, count)."""
    k: float | Callable

    def factor(self, dtype, count: int = 1) -> float:
        return self.k(np.dtype(dtype), count) if callable(self.k) else self.k


@dataclass(frozen=True)
class Near:
    """|got - want| <= k * eps(dtype) * max(|want|, 1)."""
    k: float


EXACT = Ulp(0, 0)


def math_ulp(op: str) -> Ulp:
    """A transcendental (or power other than x**2, x, sqrt, 1/x) at O2: libmvec's bound plus
    NumPy's, both from the exact value."""
    f32, f64 = NUMPY_ULP[op] if op in NUMPY_ULP else (OTHER_NUMPY_ULP,) * 2
    return Ulp(LIBMVEC_ULP + f32, LIBMVEC_ULP + f64)


# logaddexp(x, y) = max + t with t = log1p(exp(-|x - y|)) in [0, ln 2]: both sides compute t
# from two calls (vector exp and log1p in the kernel, libm's in NumPy: 4 ulp each, and log1p
# does not magnify exp's relative error since e/((1 + e) log1p(e)) <= 1), so t is within
# 2 * 8 ulp(t) <= 8 eps (t < 1: ulp(t) <= eps/2), and each side rounds the final sum once
# (1/2 ulp of the result each): 8 eps + eps |r| <= 9 eps max(|r|, 1). logaddexp2: t = log2(e)
# * log1p(exp2(-d)) in [0, 1] (ulp(t) <= eps) with one more rounding per side (the multiply):
# 2 * 8.5 eps + eps |r| <= 18 eps max(|r|, 1).
LOGADDEXP = {"logaddexp": Near(9.0), "logaddexp2": Near(18.0)}


# -- reductions -------------------------------------------------------------------------------
def _gamma(h: int, u: float) -> float:
    """gamma_h = h u / (1 - h u): a sum whose every term passes through at most h additions
    errs by at most gamma_h * sum(|x|) (Higham, Accuracy and Stability, 4.2)."""
    return h * u / (1 - h * u)


O2_BLOCK = 128          # the kernel's float64 sum blocks (reductions.BLOCK, NumPy's leaf)


def kernel_sum_depth(count: int) -> int:
    """Additions a term passes through in the O2 kernel's sum of `count` values: within its
    block of 128, an `omp simd` reduction whose order the compiler picks (at worst one after
    another: 127), then the pairwise merge of the blocks, then the result's total."""
    blocks = max(1, -(-count // O2_BLOCK))
    return min(count, O2_BLOCK) + math.ceil(math.log2(blocks)) + 1


def _sum_k(dtype, count: int, mean: bool) -> float:
    """k of |kernel - NumPy| <= k eps sum|x| for a float sum (mean: of sum|x| / count).
    NumPy sums in the dtype, pairwise along a contiguous run but one run after another
    otherwise, so at worst a term passes through all `count` additions (gamma_count). The
    kernel sums float64 with depth kernel_sum_depth, and float32 values in double (its error
    is then the final rounding, 1/2 ulp of the result, plus gamma of the double sum)."""
    eps = float(np.finfo(dtype).eps)
    u = eps / 2
    numpy_err = _gamma(count, u)
    depth = kernel_sum_depth(count)
    kernel_err = _gamma(depth, u) if dtype == np.float64 else u + _gamma(depth, 2.0 ** -53)
    k = (numpy_err + kernel_err) / eps
    return k + 1.0 if mean else k       # a mean divides on both sides: 1/2 ulp each


SUM = Scaled(lambda dtype, count: _sum_k(dtype, count, False))
MEAN = Scaled(lambda dtype, count: _sum_k(dtype, count, True))
# A product of n values in any order (NumPy's in the dtype, the kernel's in double): each
# side's relative error is at most gamma_(n-1), so |kernel - NumPy| <= 2 (n - 1) u |r| <=
# eps * n * prod|x| (the scale), float32 too (its kernel product errs by u32 + gamma(double)).
PROD = Scaled(1.0)
# x*y + z: NumPy rounds the product and the sum (<= u|xy| + u|fl(xy) + z|), a fused
# multiply-add once (<= u|xy + z|): together <= 3u|xy| + 2u|z| + u^2|xy| <= (1.5 + eps/4)
# eps (|xy| + |z|).
FMA = Scaled(lambda dtype, count: 1.5 + float(np.finfo(dtype).eps) / 4)
# A division by a per-row value (softmax's e / s), which O2 computes as e * (1/s): two
# roundings (<= u + u + u^2 relative) against NumPy's one (u): within 1.5 ulp of NumPy's
# (in ulps of the result's magnitude).
RECIPROCAL = Ulp(1.5, 1.5)

# Ops whose O2 result is NumPy's to the bit: correctly rounded IEEE operations, selections,
# integer ops, casts, max/min (a zero result, whose sign depends on the order, goes to NumPy).
EXACT_OPS = ("add", "sub", "mul", "div", "neg", "pos", "lt", "le", "gt", "ge", "eq", "ne",
             "and", "or", "xor", "invert", "sqrt", "abs", "square", "maximum", "minimum",
             "where", "clip", "astype", "pow_exact", "max", "min", "argmax", "argmin",
             "any", "all")
# Exponents for which pow/power is exact (NumPy and the kernel take x*x, x, sqrt(x), 1/x).
EXACT_EXPONENTS = (2, 1, 0.5, -1)


def tolerance(op: str, level: str, exponent=None):
    """The bound of one op at a level: EXACT for every op at O0 and O1."""
    if level != "O2":
        return EXACT
    if op in ("pow", "power") and isinstance(exponent, (int, float)) \
            and exponent in EXACT_EXPONENTS:
        return EXACT
    if op in LOGADDEXP:
        return LOGADDEXP[op]
    if op in NUMPY_ULP or op in OTHER:
        return math_ulp(op)
    return {"sum": SUM, "mean": MEAN, "prod": PROD, "fma": FMA}.get(op, EXACT)


def readme_rows() -> dict:
    """The README's O2 table as this module computes it: {op: (float32, float64)} in ulp."""
    return {op: (math_ulp(op).f32, math_ulp(op).f64) for op in (*NUMPY_ULP, *OTHER)}


# -- functions of several ops: each op within its bound, the errors carried to first order ----
# softmax, layernorm and the rest of the fused backend's tests: see carry().
@dataclass(frozen=True)
class Abs:
    """|got - want| <= the bound of each element (carry's), plus 0.1% for the second-order
    terms carry leaves out; elements whose bound is inf are not compared."""


def carry(fn, *args) -> list:
    """The per-element bounds (for Abs) of fn(*args)'s results at O2, one per result leaf: fn
    runs on NumPy's values with a bound on |O2 - NumPy| beside each (Bounded), every op adding
    its own O2 bound to the errors its inputs carry, to first order. Elements where an op
    cannot bound its result (a comparison whose inputs may be either side of each other, a
    cast of an inexact float to int) get inf. A leaf that is not an array gets None."""
    out = fn(*_wrap(args))
    leaves = list(out) if isinstance(out, (tuple, list)) else [out]
    return [leaf.err if isinstance(leaf, Bounded) else None for leaf in leaves]


def carry_inputs(fn, *args) -> list:
    """The bounds (for Abs) of the arguments as fn(*args) leaves them at O2, one per
    argument (None for one that is not an array): writes into an argument, or into a view
    of it, carry the written values' bounds into it. fn may raise: the writes before count."""
    wrapped = _wrap(args)
    try:
        fn(*wrapped)
    except Exception:       # noqa: BLE001 - the writes made before the exception remain
        pass
    return [w.err if isinstance(w, Bounded) else
            np.zeros(w.shape) if isinstance(w, np.ndarray) else None for w in wrapped]


def _wrap(args) -> list:
    """Each array argument as a Bounded of error 0; arguments over one buffer (the same
    array twice, a view of another) get views of one error buffer, so a write through one
    shows in the others' errors as in their values."""
    wrapped, buffers = [], []       # buffers: (array, its errors), C-contiguous owners
    for a in args:
        if not (isinstance(a, np.ndarray) and a.dtype.kind in "fbiu"):
            wrapped.append(a)
            continue
        owner = next(((b, e) for b, e in buffers if np.shares_memory(a, b)), None)
        if owner is None:
            base = a
            while isinstance(base.base, np.ndarray):
                base = base.base
            if base.flags.c_contiguous and base.dtype == a.dtype:
                owner = (base, np.zeros(base.shape, np.float64))
                buffers.append(owner)
        if owner is None:
            wrapped.append(Bounded(a, 0.0))
            continue
        base, err = owner
        size = a.itemsize
        start = (a.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // size
        view = np.lib.stride_tricks.as_strided(
            err.reshape(-1)[start:], a.shape, tuple(s // size * 8 for s in a.strides))
        wrapped.append(Bounded(a, view))
    return wrapped


def _ulp(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v)
    if v.dtype.kind != "f":
        return np.zeros(v.shape)
    with np.errstate(all="ignore"):
        return np.spacing(np.abs(v)).astype(np.float64)


def _eps(v) -> float:
    v = np.asarray(v)
    return float(np.finfo(v.dtype).eps) if v.dtype.kind == "f" else 0.0


def _mag(v) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.abs(np.asarray(v, np.float64))


# Functions and methods that only move values around (no arithmetic): the errors move
# with them. Others that are not arithmetic are exact on exact inputs (see _exact_only).
_STRUCTURAL = {np.transpose, np.reshape, np.squeeze, np.expand_dims, np.swapaxes,
               np.moveaxis, np.ravel, np.broadcast_to, np.concatenate, np.stack, np.flip,
               np.copy, np.atleast_1d, np.atleast_2d, np.atleast_3d, np.hstack, np.vstack,
               np.roll}
_STRUCTURAL_METHODS = {"reshape", "transpose", "swapaxes", "squeeze", "ravel", "flatten",
                       "copy"}


def _part(x, which: str):
    """x with each Bounded replaced by its value (`v`) or its errors (`err`; other arrays:
    zeros of their shape)."""
    if isinstance(x, Bounded):
        return x.v if which == "v" else x.err
    if isinstance(x, (tuple, list)):
        return type(x)(_part(i, which) for i in x)
    if isinstance(x, dict):
        return {k: _part(i, which) for k, i in x.items()}
    if which == "err" and isinstance(x, np.ndarray):
        return np.zeros(x.shape)
    return x


def _moved(x) -> bool:
    if isinstance(x, Bounded):
        return bool(np.any(x.err > 0))
    if isinstance(x, (tuple, list)):
        return any(_moved(i) for i in x)
    if isinstance(x, dict):
        return any(_moved(i) for i in x.values())
    return False


class Bounded(np.lib.mixins.NDArrayOperatorsMixin):
    """NumPy's value of an expression (`v`) and a bound on how far O2's may be (`err`, float64
    per element, inf where nothing is promised)."""
    __array_priority__ = 100

    def __init__(self, value, err):
        self.v = value if isinstance(value, np.ndarray) or np.isscalar(value) and not \
            isinstance(value, np.generic) else np.asarray(value)
        if isinstance(err, np.ndarray) and err.dtype == np.float64 \
                and err.shape == np.shape(value) and err.flags.writeable:
            self.err = err      # (a view of another's errors, for writes through views)
        else:
            self.err = np.broadcast_to(np.asarray(err, np.float64), np.shape(value)).copy()

    # -- array-like surface -----------------------------------------------------------------
    shape = property(lambda self: np.shape(self.v))
    dtype = property(lambda self: np.asarray(self.v).dtype)
    ndim = property(lambda self: np.ndim(self.v))
    size = property(lambda self: np.size(self.v))
    T = property(lambda self: Bounded(np.asarray(self.v).T, self.err.T))

    def __len__(self):
        return len(self.v)

    def __getitem__(self, key):
        key = _part(key, "v")
        return Bounded(np.asarray(self.v)[key], self.err[key])

    def __setitem__(self, key, value):
        bounded_key, key = key, _part(key, "v")
        v, e = (value.v, value.err) if isinstance(value, Bounded) else (value, 0.0)
        self.v[key] = v
        e = np.asarray(e)
        while e.ndim > self.err[key].ndim and e.shape[0] == 1:
            e = e[0]        # setitem drops a value's leading unit axes (a bool array takes
        self.err[key] = e   # a (1,) into one element, a float64 array would refuse it)
        if _moved(bounded_key):
            # O2's key may select other elements: those a boolean mask may select, and
            # for any other key every element, promise nothing
            if isinstance(bounded_key, Bounded) and bounded_key.dtype.kind == "b":
                self.err[np.asarray(bounded_key.v) | (bounded_key.err > 0)] = np.inf
            else:
                self.err[...] = np.inf

    def astype(self, dtype, *args, **kwargs):
        out = np.asarray(self.v).astype(dtype, *args, **kwargs)
        err = self.err.copy()
        if out.dtype.kind == "f":
            err = err + (_ulp(out) if out.dtype.itemsize < self.dtype.itemsize else 0.0)
        else:
            err = np.where(err > 0, np.inf, 0.0)
        return Bounded(out, err)

    def sum(self, axis=None, keepdims=False, **kw):
        return _reduce("sum", self, axis, keepdims, **kw)

    def mean(self, axis=None, keepdims=False, **kw):
        return _reduce("mean", self, axis, keepdims, **kw)

    def max(self, axis=None, keepdims=False, **kw):
        return _reduce("max", self, axis, keepdims, **kw)

    def min(self, axis=None, keepdims=False, **kw):
        return _reduce("min", self, axis, keepdims, **kw)

    def prod(self, axis=None, keepdims=False, **kw):
        return _reduce("prod", self, axis, keepdims, **kw)

    def clip(self, lo=None, hi=None):
        return np.clip(self, lo, hi)

    def __getattr__(self, name):
        """Other ndarray methods: the errors move with structural ones; the rest (argmax,
        any, ...) are exact on exact inputs, and promise nothing otherwise."""
        if name.startswith("__") or not hasattr(np.ndarray, name):
            raise AttributeError(name)
        if name in _STRUCTURAL_METHODS:
            return lambda *a, **kw: Bounded(getattr(np.asarray(self.v), name)(*a, **kw),
                                            getattr(self.err, name)(*a, **kw))
        return lambda *a, **kw: _exact_only(
            lambda x, *b, **k: getattr(np.asarray(x), name)(*b, **k), self, *a, **kw)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        out = kwargs.pop("out", None)
        if method != "__call__" or out is not None and not (
                len(out) == 1 and isinstance(out[0], Bounded)):
            return NotImplemented
        vals = [i.v if isinstance(i, Bounded) else i for i in inputs]
        errs = [i.err if isinstance(i, Bounded) else 0.0 for i in inputs]
        with np.errstate(all="ignore"):
            value = ufunc(*vals, **kwargs)
            err = _ufunc_err(ufunc, vals, errs, value)
        if out is None:
            return Bounded(value, err)
        target = out[0]         # in place (`x += 1`, out=x): views of it see it too
        if np.ndim(value) > np.ndim(target.v):
            # a NumPy scalar (held 0-d here) `s += x` of an array x: NumPy makes a new value
            # (a 0-d array's out= cannot take it: plain NumPy raises there)
            return Bounded(value, err)
        # cast as the ufunc's out= does: an int8 += int64 result wraps (item assignment of
        # the int64 scalar -256 would raise OverflowError)
        np.copyto(target.v, np.asarray(value), casting="unsafe")
        target.err[...] = err
        return target

    def __array_function__(self, func, types, args, kwargs):
        if func in (np.sum, np.mean, np.max, np.min, np.amax, np.amin, np.prod):
            name = {np.amax: "max", np.amin: "min"}.get(func, func.__name__)
            return _reduce(name, *args, **kwargs)
        if func is np.where and len(args) == 3:
            c, x, y = args
            cv, ce = (c.v, c.err) if isinstance(c, Bounded) else (c, 0.0)
            xv, xe = (x.v, x.err) if isinstance(x, Bounded) else (x, 0.0)
            yv, ye = (y.v, y.err) if isinstance(y, Bounded) else (y, 0.0)
            out = np.where(cv, xv, yv)
            err = np.where(np.asarray(ce) > 0, np.inf, np.where(cv, xe, ye))
            return Bounded(out, np.broadcast_to(err, np.shape(out)))
        if func is np.clip:
            x, lo, hi = (list(args) + [None, None])[:3]
            lo, hi = kwargs.get("a_min", lo), kwargs.get("a_max", hi)
            return Bounded(np.clip(x.v, _part(lo, "v"), _part(hi, "v")),
                           x.err + (np.inf if _moved(lo) or _moved(hi) else 0.0))
        if func is np.dot:
            return np.matmul(*args)
        value = func(*_part(args, "v"), **_part(kwargs, "v"))
        if func in _STRUCTURAL:
            return Bounded(value, func(*_part(args, "err"), **_part(kwargs, "err")))
        return Bounded(value, np.inf if _moved((args, kwargs)) else 0.0)


def _exact_only(func, x, *args, **kwargs):
    """An op whose result O2 gets right only from exact inputs (an index, a truth value);
    for reductions, the reduced elements' errors decide."""
    out = func(np.asarray(x.v), *args, **kwargs)
    axis = kwargs.get("axis", args[0] if args else None)
    try:
        moved = np.any(x.err > 0, axis=axis, keepdims=kwargs.get("keepdims", False))
        if np.shape(moved) != np.shape(out):
            raise ValueError
    except (ValueError, TypeError):
        moved = bool(np.any(x.err > 0))
    return Bounded(out, np.where(moved, np.inf, 0.0))


def _ufunc_err(ufunc, vals, errs, out):
    """The bound of one elementwise op's result: what its inputs carry (first order), one
    rounding of different inputs (eps |out|: NumPy's and O2's each round by half an ulp), and
    the op's own O2 bound."""
    name = ufunc.__name__
    out_f = np.asarray(out)
    eps = _eps(out_f)
    a = [np.asarray(v, np.float64) if np.asarray(v).dtype.kind in "fbiu" else v for v in vals]
    e = [np.asarray(x, np.float64) for x in errs]
    moved = any(np.any(x > 0) for x in e)
    rnd = eps * _mag(out) if moved else 0.0
    if out_f.dtype.kind == "b":         # a comparison: exact unless its inputs may cross
        if not moved:
            return 0.0
        if name in ("less", "less_equal", "greater", "greater_equal", "equal", "not_equal"):
            close = np.abs(a[0] - a[1]) <= e[0] + e[1]
            return np.where(close, np.inf, 0.0)
        return np.where(sum(e) > 0, np.inf, 0.0)
    if name in ("add", "subtract"):
        return e[0] + e[1] + rnd
    if name == "multiply":
        # O2 may contract the product into a multiply-add, skipping its rounding: u |ab|
        return np.abs(a[1]) * e[0] + np.abs(a[0]) * e[1] + e[0] * e[1] + rnd + eps / 2 * _mag(out)
    if name in ("divide", "true_divide"):
        # (a division by a per-row value is a multiplication by its reciprocal: 1.5 ulp)
        den = np.maximum(np.abs(a[1]) - e[1], 0.0)
        with np.errstate(all="ignore"):
            prop = (e[0] + _mag(out) * e[1]) / den
        return np.where(den > 0, prop, np.inf) + rnd + 1.5 * _ulp(out)
    if name == "matmul":      # NumPy's on both sides: only what the inputs carry, plus
        if not moved:           # both sides' roundings of the n-term sums (gamma_n each)
            return 0.0
        n = np.shape(a[0])[-1]
        return (np.abs(a[0]) @ e[1] + e[0] @ np.abs(a[1]) + e[0] @ e[1]
                + 2 * _gamma(n, eps / 2) * (np.abs(a[0]) @ np.abs(a[1])))
    if name in ("negative", "positive", "absolute"):
        return e[0]
    if name in ("maximum", "minimum", "fmax", "fmin"):
        return np.maximum(e[0], e[1])
    if name == "square":
        return 2 * np.abs(a[0]) * e[0] + e[0] ** 2 + rnd
    if name == "sqrt":
        lo = np.maximum(a[0] - e[0], 0.0)
        with np.errstate(all="ignore"):
            prop = np.where(lo > 0, e[0] / (np.sqrt(lo) + np.sqrt(np.maximum(a[0], 0))),
                            np.sqrt(e[0]))
        return prop + rnd
    if name == "power":
        p = vals[1]
        if np.ndim(p) != 0 or isinstance(p, np.ndarray):
            # (kernels take constant exponents only: NumPy computes this on both sides)
            return np.where(e[0] + e[1] > 0, np.inf, 0.0) if moved else 0.0
        if float(p) in (2.0, 1.0, 0.5, -1.0):
            return _ufunc_err({2.0: np.square, 1.0: np.positive, 0.5: np.sqrt,
                               -1.0: np.reciprocal}[float(p)], vals[:1], errs[:1], out)
        with np.errstate(all="ignore"):
            prop = np.abs(float(p) * a[0] ** (float(p) - 1)) * e[0]
        return prop + rnd + math_ulp("power").n(out_f.dtype) * _ulp(out)
    if name == "reciprocal":
        den = np.maximum(np.abs(a[0]) - e[0], 0.0)
        with np.errstate(all="ignore"):
            return np.where(den > 0, e[0] / den ** 2, np.inf) + rnd
    if name in NUMPY_ULP or name in ("arctan2", "hypot"):
        n = math_ulp(name).n(out_f.dtype)
        return _derivative(name, a, out) * (e[0] if len(e) == 1 else e[0] + e[1]) \
            + n * _ulp(out) + rnd
    if name in LOGADDEXP:
        return np.maximum(e[0], e[1]) * (1.0 if name == "logaddexp" else 1.5) + \
            LOGADDEXP[name].k * eps * np.maximum(_mag(out), 1.0) + rnd
    # any other op: NumPy's on both sides (O2 does not compute it otherwise), so exact for
    # equal inputs; nothing promised for others
    return np.where(sum(np.broadcast_arrays(*e)) > 0, np.inf, 0.0) if moved else 0.0


def _derivative(name, a, out):
    """|f'| at the inputs (an upper bound over the interval their errors span, to first
    order), for the transcendentals' error propagation."""
    x = a[0]
    with np.errstate(all="ignore"):
        d = {"exp": lambda: _mag(out), "exp2": lambda: _mag(out) * math.log(2),
             "expm1": lambda: _mag(out) + 1, "log": lambda: 1 / np.abs(x),
             "log2": lambda: 1 / np.abs(x) / math.log(2),
             "log10": lambda: 1 / np.abs(x) / math.log(10),
             "log1p": lambda: 1 / np.abs(1 + x), "sin": lambda: np.ones_like(x),
             "cos": lambda: np.ones_like(x), "tanh": lambda: np.ones_like(x),
             "tan": lambda: 1 + _mag(out) ** 2, "sinh": lambda: np.cosh(x),
             "cosh": lambda: np.abs(np.sinh(x)) + 1, "arctan": lambda: np.ones_like(x),
             "arcsinh": lambda: np.ones_like(x), "cbrt": lambda: np.abs(x) ** (-2 / 3) / 3,
             "hypot": lambda: np.ones_like(x), "arctan2": lambda: np.full_like(x, np.inf),
             }.get(name, lambda: np.full_like(x, np.inf))()
    return np.where(np.isfinite(d), d, np.inf)


def _reduce(name, x, axis=None, keepdims=False, **kw):
    """A reduction's value and bound: sum/mean add the inputs' errors to the SUM/MEAN bound
    over the reduced values; max/min carry the largest input error; prod the relative ones."""
    if not isinstance(x, Bounded):
        x = Bounded(np.asarray(x), 0.0)
    if kw:
        raise NotImplementedError(f"o2_spec.carry: {name} with {kw}")
    v = np.asarray(x.v)
    out = getattr(np, name)(v, axis=axis, keepdims=keepdims)
    count = max(1, v.size // max(1, np.size(out)))
    if name in ("max", "min"):
        return Bounded(out, x.err.max(axis=axis, keepdims=keepdims, initial=0.0))
    if np.asarray(out).dtype.kind != "f":       # integers: exact from exact inputs
        return Bounded(out, np.where(x.err.sum(axis=axis, keepdims=keepdims) > 0, np.inf, 0.0))
    with np.errstate(all="ignore"):
        if name == "prod":
            rel = (x.err / _mag(v)).sum(axis=axis, keepdims=keepdims)
            return Bounded(out, _mag(out) * (rel + PROD.factor(out.dtype, count) *
                                             _eps(out) * count))
        carried = x.err.sum(axis=axis, keepdims=keepdims)
        scale = _mag(v).sum(axis=axis, keepdims=keepdims)
        bound = (SUM if name == "sum" else MEAN).factor(np.asarray(out).dtype, count)
        if name == "mean":
            carried, scale = carried / count, scale / count
        return Bounded(out, carried + bound * _eps(out) * scale)
