"""Inference helpers of the NumPy op table: argument Metas -> result Meta, as NumPy computes it.

Types and dtypes come from *probing*: the real NumPy function runs on tiny stand-ins
(arrays -> ones of shape (1,)*ndim, NumPy scalars -> dtype.type(1), Python-scalar Metas ->
pytype(1), so NEP 50 weak scalars stay weak). Shapes come from NumPy's shape rules written
out here, with None for dynamic dims. A rule that cannot be exact raises `Unsupported`.
"""
from __future__ import annotations

import operator

import numpy as np

from pijit.graph.ir import PY_SCALARS, Meta
from pijit.quiet import warnings_as


class Unsupported(Exception):
    """The op cannot be captured exactly; str(e) says why."""


# ---------------------------------------------------------------------------------------------
# Walking arguments

def metas_in(obj) -> list:
    """Every Meta inside a nested argument (tuples, lists, dicts, slices)."""
    if type(obj) is Meta:
        return [obj]
    if type(obj) in (tuple, list):
        return [m for item in obj for m in metas_in(item)]
    if type(obj) is dict:
        return [m for item in obj.values() for m in metas_in(item)]
    if type(obj) is slice:
        return metas_in((obj.start, obj.stop, obj.step))
    return []


def substitute(obj, fn):
    """Rebuild a nested argument with every Meta replaced by fn(meta)."""
    if type(obj) is Meta:
        return fn(obj)
    if type(obj) is tuple:
        return tuple(substitute(a, fn) for a in obj)
    if type(obj) is list:
        return [substitute(a, fn) for a in obj]
    if type(obj) is dict:
        return {k: substitute(v, fn) for k, v in obj.items()}
    if type(obj) is slice:
        return slice(*(substitute(a, fn) for a in (obj.start, obj.stop, obj.step)))
    return obj


def require_const(value, what: str):
    """A value-dependent argument (axis, shape, ...) must be a constant, not a graph value."""
    if metas_in(value):
        raise Unsupported(f"{what} depends on a graph value (result shape would be data-dependent)")
    return value


def stand_in(meta: Meta, value=1):
    """A tiny concrete value with the same type, dtype and ndim as `meta`."""
    if meta.is_array:
        return np.full((1,) * meta.ndim, value, dtype=meta.dtype)
    if meta.is_pyscalar:
        return meta.pytype(value)
    return meta.dtype.type(value)


def small_const(obj):
    """A constant array-like shrunk to ones of shape (1,)*ndim (keeps dtype; scalars kept)."""
    if isinstance(obj, (np.ndarray, list, tuple)) and not metas_in(obj):
        arr = np.asarray(obj)
        return np.ones((1,) * arr.ndim, dtype=arr.dtype)
    return obj


# Dtype kinds whose probes are exact: bool, integers, floats, complex. An object array's
# elements could be anything; strings and datetimes are left to plain Python.
PROBE_KINDS = "biufc"


def probe(fn, args, kwargs, replace=stand_in):
    """Call the real `fn` with every Meta replaced by `replace(meta)`, warnings silenced."""
    for m in metas_in((args, kwargs)):
        if m.dtype.kind not in PROBE_KINDS:
            raise Unsupported(f"values of dtype {m.dtype} are not captured")
    args = substitute(args, replace)
    kwargs = substitute(kwargs, replace)
    with warnings_as("ignore"), np.errstate(all="ignore"):
        return fn(*args, **kwargs)


# (fn, probe_key(args), probe_key(kwargs)) -> the result of probe(fn, args, kwargs). An
# elementwise op is probed at every node (rk4_numpy's two captures: 450 probes, each a
# stand-in array, an errstate and a warnings filter around the call, for a dozen distinct
# answers); the answer depends on nothing but what the key holds. Failed probes are not kept.
_PROBED = {}
PROBE_CACHE_SIZE = 4096


# NumPy 1.24-1.26's NEP 50 switch ("legacy", "weak"), which a program may flip: part of the key.
_promotion_state = getattr(np, "_get_promotion_state", None)


class _Unkeyed(Exception):
    """An argument the probe cache cannot key exactly: probe it every time."""


def probe_cached(fn, args, kwargs):
    """probe(fn, args, kwargs), remembered for arguments probe_key can key. The result is
    shared: callers only read its type, dtype and ndim."""
    try:
        key = (fn, probe_key(args), probe_key(kwargs),
               _promotion_state() if _promotion_state is not None else None)
        hash(key)
    except (_Unkeyed, TypeError):
        return probe(fn, args, kwargs)
    try:
        return _PROBED[key]
    except KeyError:
        pass
    value = probe(fn, args, kwargs)
    if len(_PROBED) >= PROBE_CACHE_SIZE:
        _PROBED.clear()
    _PROBED[key] = value
    return value


def probe_key(obj):
    """What a probe of `obj` depends on: a Meta's Python type, dtype and ndim (its stand-in);
    a constant's type and exact value (NEP 50: a Python int's value decides whether it fits;
    a float by its repr, which tells -0.0 from 0.0); containers item by item. Anything else
    raises _Unkeyed."""
    t = type(obj)
    if t is Meta and obj.dtype.metadata is None:
        return (Meta, obj.pytype, obj.dtype, len(obj.shape))
    if t in (int, bool, str) or obj is None:
        return (t, obj)
    if t in (float, complex):
        return (t, repr(obj))
    if t in (tuple, list):
        return (t, tuple(probe_key(item) for item in obj))
    if t is dict:
        return (t, tuple((k, probe_key(v)) for k, v in obj.items()))
    if t is slice:
        return (t, probe_key(obj.start), probe_key(obj.stop), probe_key(obj.step))
    if t is type:
        return (t, obj)
    raise _Unkeyed(t.__name__)


def result_meta(value, shape=None):
    """The Meta of a probe result, with the array shape replaced by `shape` (computed by rule)."""
    if isinstance(value, tuple):
        if shape is not None:
            return tuple(result_meta(v, shape) for v in value)
        return tuple(result_meta(v) for v in value)
    if type(value) is np.ndarray:
        if shape is None:
            return Meta.of(value)
        shape = tuple(shape)
        if len(shape) != value.ndim:  # the rule and NumPy disagree: never guess
            raise Unsupported(f"shape rule gave ndim {len(shape)}, NumPy gives {value.ndim}")
        return Meta(np.ndarray, value.dtype, shape)
    if isinstance(value, np.generic) or type(value) in PY_SCALARS:
        return Meta.of(value)
    raise Unsupported(f"result of type {type(value).__name__} is not a graph value")


def shape_of(obj) -> tuple:
    """Shape of an operand: a Meta's shape or a constant's np.shape."""
    if type(obj) is Meta:
        return obj.shape
    if metas_in(obj):
        raise Unsupported("nested sequence of graph values used as an array")
    return np.shape(obj)


# ---------------------------------------------------------------------------------------------
# Shape rules (None = dynamic dim)

def merge_dims(a, b, what="dimensions"):
    """Two dims that must be equal: the known one wins; mismatch raises like NumPy."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    raise ValueError(f"{what} do not match: {a} vs {b}")


def broadcast(*shapes) -> tuple:
    """np.broadcast_shapes with dynamic dims: None against n>1 gives n (or NumPy raises at run
    time); None against 1 or None stays dynamic."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        dims = [s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise ValueError(f"shapes {shapes} cannot be broadcast together")
        if known:
            out.append(known.pop())
        elif None in dims:
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def normalize_axis(axis, ndim: int) -> int:
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"axis must be an integer, not {type(axis).__name__}")
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return int(axis) % ndim


def normalize_axes(axis, ndim: int) -> tuple:
    """axis None/int/tuple -> sorted tuple of non-negative axes; duplicates raise."""
    require_const(axis, "axis")
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = tuple(normalize_axis(a, ndim) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError("duplicate value in 'axis'")
    return out


def reduce_shape(shape, axis, keepdims) -> tuple:
    axes = normalize_axes(axis, len(shape))
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def size_of(shape):
    """Product of dims, or None when a dim is dynamic (and no dim is 0)."""
    if 0 in shape:
        return 0
    if None in shape:
        return None
    return int(np.prod(shape, dtype=np.int64))


def as_shape(shape) -> tuple:
    """A constant shape argument (int or sequence of ints) as a tuple; negatives raise."""
    require_const(shape, "shape")
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    for d in dims:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"shape entries must be integers, not {type(d).__name__}")
        if d < 0:
            raise ValueError("negative dimensions are not allowed")
    return tuple(int(d) for d in dims)


def reshape_shape(shape, newshape) -> tuple:
    require_const(newshape, "reshape target")
    new = tuple(newshape) if isinstance(newshape, (tuple, list)) else (newshape,)
    new = tuple(operator.index(d) for d in new)
    if sum(d == -1 for d in new) > 1:
        raise ValueError("can only specify one unknown dimension")
    if any(d < -1 for d in new):
        raise ValueError("negative dimensions not allowed")
    known = int(np.prod([d for d in new if d != -1], dtype=np.int64))
    total = size_of(shape)
    if total is None:
        # A dynamic input: -1 is dynamic too; NumPy checks the sizes at run time.
        return tuple(None if d == -1 else d for d in new)
    if -1 in new:
        if known == 0 or total % known:
            raise ValueError(f"cannot reshape array of size {total} into shape {new}")
        return tuple(total // known if d == -1 else d for d in new)
    if known != total:
        raise ValueError(f"cannot reshape array of size {total} into shape {new}")
    return new


def matmul_shape(a, b) -> tuple:
    if not a or not b:
        raise ValueError("matmul: Input operand does not have enough dimensions")
    a1, b1 = len(a) == 1, len(b) == 1
    a = (1,) + tuple(a) if a1 else tuple(a)
    b = tuple(b) + (1,) if b1 else tuple(b)
    merge_dims(a[-1], b[-2], "matmul core dimensions")
    out = broadcast(a[:-2], b[:-2]) + (a[-2], b[-1])
    if b1:
        out = out[:-1]
    if a1:
        out = out[:-2] + out[-1:] if not b1 else out[:-1]
    return out


def dot_shape(a, b) -> tuple:
    if not a or not b:
        return broadcast(a, b)
    if len(b) == 1:
        merge_dims(a[-1], b[0], "dot dimensions")
        return tuple(a[:-1])
    merge_dims(a[-1], b[-2], "dot dimensions")
    return tuple(a[:-1]) + tuple(b[:-2]) + tuple(b[-1:])


def inner_shape(a, b) -> tuple:
    if not a or not b:
        return broadcast(a, b)
    merge_dims(a[-1], b[-1], "inner dimensions")
    return tuple(a[:-1]) + tuple(b[:-1])


def outer_shape(a, b):
    return (size_of(a) if a else 1, size_of(b) if b else 1)


def _core(shape, n, name):
    if len(shape) < n:
        raise ValueError(f"{name}: operand has too few dimensions")
    return tuple(shape[:len(shape) - n]), tuple(shape[len(shape) - n:])


def vecdot_shape(a, b):
    (ba, (n,)), (bb, (m,)) = _core(a, 1, "vecdot"), _core(b, 1, "vecdot")
    merge_dims(n, m, "vecdot core dimensions")
    return broadcast(ba, bb)


def matvec_shape(a, b):
    (ba, (m, n)), (bb, (k,)) = _core(a, 2, "matvec"), _core(b, 1, "matvec")
    merge_dims(n, k, "matvec core dimensions")
    return broadcast(ba, bb) + (m,)


def vecmat_shape(a, b):
    (ba, (k,)), (bb, (n, m)) = _core(a, 1, "vecmat"), _core(b, 2, "vecmat")
    merge_dims(n, k, "vecmat core dimensions")
    return broadcast(ba, bb) + (m,)


def vdot_shape(a, b):
    sa, sb = size_of(a), size_of(b)
    if sa is not None and sb is not None and sa != sb:
        raise ValueError("vdot: cannot reshape, sizes differ")
    return ()


def concat_shape(shapes, axis):
    if axis is None:
        sizes = [size_of(s) for s in shapes]
        return (None if None in sizes else sum(sizes),)
    ndim = len(shapes[0])
    if ndim == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    if any(len(s) != ndim for s in shapes):
        raise ValueError("all the input arrays must have same number of dimensions")
    ax = normalize_axis(axis, ndim)
    out = []
    for i in range(ndim):
        dims = [s[i] for s in shapes]
        if i == ax:
            out.append(None if None in dims else sum(dims))
        else:
            d = dims[0]
            for e in dims[1:]:
                d = merge_dims(d, e, "concatenation dimensions")
            out.append(d)
    return tuple(out)


def atleast_shape(shape, n):
    """np.atleast_2d's shape rule (pad with leading 1s)."""
    return (1,) * max(0, n - len(shape)) + tuple(shape)


def tensordot_shape(a, b, axes) -> tuple:
    require_const(axes, "tensordot axes")
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > len(a) or n > len(b):
            raise ValueError("tensordot: bad axes")
        axa, axb = list(range(len(a) - n, len(a))), list(range(n))
    else:
        axa, axb = axes
        axa = [axa] if isinstance(axa, (int, np.integer)) else list(axa)
        axb = [axb] if isinstance(axb, (int, np.integer)) else list(axb)
        if len(axa) != len(axb):
            raise ValueError("shape-mismatch for sum")
    axa = [normalize_axis(i, len(a)) for i in axa]
    axb = [normalize_axis(i, len(b)) for i in axb]
    for i, j in zip(axa, axb):
        merge_dims(a[i], b[j], "tensordot dimensions")
    return (tuple(d for i, d in enumerate(a) if i not in axa)
            + tuple(d for i, d in enumerate(b) if i not in axb))


def einsum_shape(subscripts: str, shapes) -> tuple:
    """Output shape of np.einsum's string form (explicit '->' or implicit)."""
    if not isinstance(subscripts, str):
        raise Unsupported("einsum: only the subscripts-string form is supported")
    spec = subscripts.replace(" ", "")
    lhs, arrow, rhs = spec.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(shapes):
        raise ValueError("einsum: number of subscripts does not match operands")
    sizes: dict = {}
    ell_shapes = []
    for term, shape in zip(inputs, shapes):
        if term.count("...") > 1:
            raise ValueError("einsum: more than one ellipsis")
        pre, ell, post = term.partition("...")
        if not all(c.isalpha() for c in pre + post):
            raise ValueError(f"einsum: invalid subscript {term!r}")
        n_named = len(pre) + len(post)
        if (len(shape) != n_named) if not ell else (len(shape) < n_named):
            raise ValueError(f"einsum: operand has {len(shape)} dims, subscripts {term!r}")
        dims = dict()
        named = list(zip(pre, shape[:len(pre)]))
        named += list(zip(post, shape[len(shape) - len(post):] if post else ()))
        for label, dim in named:
            if label in dims:  # repeated label in one operand: a diagonal, sizes must match
                dims[label] = merge_dims(dims[label], dim, "einsum diagonal")
            else:
                dims[label] = dim
        for label, dim in dims.items():
            # einsum broadcasts size-1 dims of a label, like elementwise broadcasting.
            sizes[label] = broadcast((sizes[label],), (dim,))[0] if label in sizes else dim
        if ell:
            ell_shapes.append(tuple(shape[len(pre):len(shape) - len(post)]))
    ell_shape = broadcast(*ell_shapes) if ell_shapes else ()
    if arrow:
        out_pre, out_ell, out_post = rhs.partition("...")
        labels = out_pre + out_post
        if len(set(labels)) != len(labels) or any(c not in sizes for c in labels):
            raise ValueError(f"einsum: invalid output subscripts {rhs!r}")
        return (tuple(sizes[c] for c in out_pre) + (ell_shape if out_ell else ())
                + tuple(sizes[c] for c in out_post))
    counts = {}
    for c in lhs.replace("...", "").replace(",", ""):
        counts[c] = counts.get(c, 0) + 1
    return ell_shape + tuple(sizes[c] for c in sorted(counts) if counts[c] == 1)


# ---------------------------------------------------------------------------------------------
# Indexing

# A slice with a bound known only at run time (`x[i:]`, `A[k, :k]`, i and k graph ints):
# its length is a dynamic dim (None), which later ops check at run time like any other.
SYMBOLIC_SLICE = "symbolic slice"


def _symbolic_slice(s: slice) -> str:
    for part in (s.start, s.stop, s.step):
        if type(part) is Meta and (part.is_array or part.dtype.kind not in "iu"):
            raise Unsupported(f"slice bound of type {part}")
    return SYMBOLIC_SLICE


def _slice_len(dim, s: slice, axis: int):
    for part in (s.start, s.stop, s.step):
        if part is not None and not isinstance(part, (int, np.integer)):
            raise TypeError("slice indices must be integers or None")
    if s.step == 0:
        raise ValueError("slice step cannot be zero")
    if dim is None:     # (a[mask][:5], np.unique(x)[::2]): its length is dynamic too
        return None
    return len(range(*s.indices(dim)))


def _check_bound(value, dim, axis):
    if dim is not None and not -dim <= value < dim:
        raise IndexError(f"index {value} is out of bounds for axis {axis} with size {dim}")


def index_meta(x: Meta, idx) -> Meta:
    """x[idx] with basic and advanced indexing (integer arrays, boolean masks: their count of
    selected items is a dynamic dim; slices by graph ints have a dynamic length)."""
    if x.dtype.kind not in PROBE_KINDS:
        raise Unsupported(f"indexing values of dtype {x.dtype}")
    if not x.is_array:
        if x.is_pyscalar:
            raise TypeError(f"'{x.pytype.__name__}' object is not subscriptable")
        x = Meta(np.ndarray, x.dtype, ())  # NumPy scalars index like 0-d arrays
    items = list(idx) if type(idx) is tuple else [idx]
    kinds = []   # (kind, payload): none / ellipsis / slice / int / adv(shape, const)
    for it in items:
        if it is None:
            kinds.append(("none", None))
        elif it is Ellipsis:
            kinds.append(("ellipsis", None))
        elif type(it) is slice:
            kinds.append(("slice", _symbolic_slice(it) if metas_in(it) else it))
        elif type(it) is Meta:
            if it.dtype.kind == "b" and it.ndim:
                # a mask: its nonzero() index arrays, of a length known only at run time
                kinds += [("adv", ((None,), None))] * it.ndim
                kinds[-it.ndim] = kinds[-it.ndim] + ("mask", it.shape)
                continue
            if it.dtype.kind == "b":
                raise Unsupported("indexing with a boolean scalar")
            if it.dtype.kind not in "iu":
                raise IndexError("only integers, slices, None, Ellipsis and integer or boolean"
                                 " arrays are valid indices")
            kinds.append(("int", None) if it.ndim == 0 else ("adv", (it.shape, None)))
        elif isinstance(it, (bool, np.bool_)):
            raise Unsupported("indexing with a boolean scalar")
        elif isinstance(it, (int, np.integer)):
            kinds.append(("int", int(it)))
        elif isinstance(it, (list, tuple, np.ndarray)):
            if metas_in(it):
                raise Unsupported("index list containing graph values")
            arr = np.asarray(it)
            if arr.size == 0 and not isinstance(it, np.ndarray):
                arr = arr.astype(np.intp)
            if arr.dtype.kind == "b":  # a constant mask: same as its nonzero() index arrays
                if arr.ndim == 0:
                    raise Unsupported("indexing with a boolean scalar")
                kinds += [("adv", (nz.shape, nz)) for nz in arr.nonzero()]
                kinds[-arr.ndim] = kinds[-arr.ndim] + ("mask", arr.shape)
            elif arr.dtype.kind in "iu":
                if arr.ndim == 0:
                    kinds.append(("int", int(arr)))
                else:
                    kinds.append(("adv", (arr.shape, arr)))
            else:
                raise IndexError("arrays used as indices must be of integer (or boolean) type")
        else:
            raise IndexError("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis "
                             "(`None`) and integer or boolean arrays are valid indices")
    if sum(k[0] == "ellipsis" for k in kinds) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(k[0] in ("slice", "int", "adv") for k in kinds)
    if consumed > x.ndim:
        raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional, "
                         f"but {consumed} were indexed")
    has_adv = any(k[0] == "adv" for k in kinds)
    # Advanced indices (ints among them) side by side keep their place in the result, else
    # their dims go first; anything between separates them, an ellipsis of no axes too.
    adv_pos = [i for i, k in enumerate(kinds) if k[0] == "adv" or (has_adv and k[0] == "int")]
    contiguous = adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1)) if adv_pos else True
    has_ellipsis = any(k[0] == "ellipsis" for k in kinds)
    full = [("slice", slice(None))] * (x.ndim - consumed)
    if has_ellipsis:
        pos = next(i for i, k in enumerate(kinds) if k[0] == "ellipsis")
        kinds = kinds[:pos] + full + kinds[pos + 1:]
    else:
        kinds = kinds + full
    first_adv = next((i for i, k in enumerate(kinds)
                      if k[0] == "adv" or (has_adv and k[0] == "int")), None)
    try:
        b_shape = broadcast(*[k[1][0] if k[0] == "adv" else () for k in kinds
                              if k[0] in ("adv", "int")]) if has_adv else ()
    except ValueError as e:     # NumPy's error for index arrays that do not broadcast
        raise IndexError(f"shape mismatch: indexing arrays could not be broadcast "
                         f"together ({e})") from None
    out, dim = [], 0
    for i, k in enumerate(kinds):
        kind = k[0]
        if kind == "none":
            out.append(1)
            continue
        size = x.shape[dim]
        if kind == "slice":
            out.append(None if k[1] is SYMBOLIC_SLICE else _slice_len(size, k[1], dim))
        elif kind == "int":
            if k[1] is not None:
                _check_bound(k[1], size, dim)
        elif kind == "adv":
            const = k[1][1]
            if len(k) > 2:  # first axis of a constant mask: its shape must match
                for j, m in enumerate(k[3]):
                    if None not in (x.shape[dim + j], m) and x.shape[dim + j] != m:
                        raise IndexError("boolean index did not match indexed array")
            if const is not None and const.size and size is not None:
                _check_bound(int(const.min()), size, dim)
                _check_bound(int(const.max()), size, dim)
        if has_adv and contiguous and i == first_adv:
            out.extend(b_shape)
        dim += 1
    if has_adv and not contiguous:
        out = list(b_shape) + out
    if not out and not has_adv and not has_ellipsis:  # every axis taken by an integer
        return Meta(x.dtype.type, x.dtype, ())
    return Meta(np.ndarray, x.dtype, tuple(out))


# ---------------------------------------------------------------------------------------------
# View probes: zero-strided fakes of the real shape (O(1) memory) give NumPy's own shape.

_SENTINELS = ((1009, 1013, 1019, 1021, 1031, 1033), (1039, 1049, 1051, 1061, 1063, 1069))


def view_probe(fn, args, kwargs):
    """Run a view op (transpose, swapaxes, expand_dims, ...) on zero-strided fakes.

    Dynamic dims get distinct sentinel sizes in two runs; an output dim equal to the same
    sentinel in both runs is that dynamic dim. Only for ops that permute/insert/drop dims
    and do not treat size 1 specially.
    """
    n_dyn = sum(m.shape.count(None) for m in metas_in((args, kwargs)) if m.is_array)
    if n_dyn > len(_SENTINELS[0]):
        raise Unsupported("too many dynamic dims")
    runs = _SENTINELS if n_dyn else (None,)
    results = []
    for sent in runs:
        it = iter(sent or ())

        def fake(m, it=it):
            if not m.is_array:
                return stand_in(m)
            shape = tuple(next(it) if d is None else d for d in m.shape)
            return np.broadcast_to(np.zeros((), m.dtype), shape)

        results.append(probe(fn, args, kwargs, replace=fake))
    if not n_dyn:
        return result_meta(results[0])
    a, b = results
    if type(a) is not np.ndarray:
        return result_meta(a)
    dims = []
    for da, db in zip(a.shape, b.shape):
        if da == db:
            dims.append(da)
        elif da in _SENTINELS[0] and _SENTINELS[1][_SENTINELS[0].index(da)] == db:
            dims.append(None)
        else:
            raise Unsupported("result dim depends on a dynamic dim's value")
    return Meta(np.ndarray, a.dtype, tuple(dims))


def out_target(fn, kwargs):
    """The Meta of a ufunc's `out=` array (`out=a` or `out=(a,)`), None without one; raises
    Unsupported for forms capture does not follow."""
    out = kwargs.get("out")
    if out is None:
        return None
    if not isinstance(fn, np.ufunc) or fn.nout != 1:
        raise Unsupported("out= of a function that is not a one-output ufunc")
    if type(out) is tuple and len(out) == 1:
        out = out[0]
    if type(out) is not Meta or not out.is_array:
        raise Unsupported("out= is not an array of the graph")
    return out


def out_meta(result: Meta, out: Meta) -> Meta:
    """The value of `ufunc(..., out=out)`: out itself, when it holds the result exactly
    (same shape and dtype; other casts and broadcasts are left to plain Python). Dynamic
    dims match as the in-place operators' do (writes.inplace): whatever their lengths at run
    time, NumPy's call returns out or raises, as its node does."""
    if result.shape != out.shape:
        raise Unsupported(f"out= of shape {out.shape} for a result of shape "
                                      f"{result.shape}")
    if result.dtype != out.dtype:
        raise Unsupported(f"out= of dtype {out.dtype} for a {result.dtype} result")
    return out

