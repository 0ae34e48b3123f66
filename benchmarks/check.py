"""The correctness check: a variant's result against plain NumPy's.

Tolerance, by the reference's dtype (documented in benchmarks/README.md):

- integer, bool and other non-float results: exactly equal;
- float64 / complex128: |got - ref| <= rtol * |ref| + atol with rtol = 1e-6,
  float32 / complex64: rtol = 1e-4, float16: rtol = 1e-2;
  atol = rtol * max|ref| (finite values), so cancellation near zero in a long reduction
  does not fail while any error above the result's own scale does;
- NaN must be NaN in the same places, and +-inf the same infinity;
- shapes must match; for numpy and pijit the dtype must match too (peers such as numexpr
  and jax may legitimately pick another float width; their values are still checked).

The numpy reference backend of pijit is expected to be bit-exact (`exact: true` in the
JSON); the tolerance exists for fused kernels and peers that reorder floating-point work.
"""
from __future__ import annotations

import numpy as np

RTOL = {8: 1e-6, 4: 1e-4, 2: 1e-2}


def nbytes(obj) -> int:
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, (list, tuple)):
        return sum(nbytes(o) for o in obj)
    if isinstance(obj, dict):
        return sum(nbytes(o) for o in obj.values())
    if isinstance(obj, np.generic):
        return obj.nbytes
    return 0


def _leaves(obj, path="out"):
    if isinstance(obj, (list, tuple)):
        for i, o in enumerate(obj):
            yield from _leaves(o, f"{path}[{i}]")
    elif isinstance(obj, dict):
        for k in obj:
            yield from _leaves(obj[k], f"{path}[{k!r}]")
    else:
        yield path, obj


def _structure(obj):
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, tuple(_structure(o) for o in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((k, _structure(v)) for k, v in obj.items()))
    return "leaf"


def compare(ref, got, *, strict_dtype: bool) -> dict:
    """{ok, exact, max_abs_err, max_rel_err, reason} for `got` against `ref`."""
    res = {"ok": True, "exact": True, "max_abs_err": 0.0, "max_rel_err": 0.0, "reason": None}
    if _structure(_plain(ref)) != _structure(_plain(got)):
        return _fail(res, f"result structure differs: expected {_describe(ref)}, "
                          f"got {_describe(got)}")
    for (path, r), (_, g) in zip(_leaves(_plain(ref)), _leaves(_plain(got))):
        why = _compare_leaf(r, g, strict_dtype, res)
        if why:
            return _fail(res, f"{path}: {why}")
    return res


def _plain(obj):
    """Tuples from jax/torch pytrees are tuples already; make lists and tuples comparable."""
    if isinstance(obj, list):
        return tuple(_plain(o) for o in obj)
    if isinstance(obj, tuple):
        return tuple(_plain(o) for o in obj)
    return obj


def _describe(obj):
    if isinstance(obj, (list, tuple)):
        return f"{type(obj).__name__} of {len(obj)}"
    return type(obj).__name__


def _fail(res, reason):
    res.update(ok=False, exact=False, reason=reason)
    return res


def _compare_leaf(r, g, strict_dtype, res):
    if not isinstance(r, (np.ndarray, np.generic, int, float, complex, bool)):
        if r is g or r == g:
            return None
        return f"expected {r!r}, got {g!r}"
    ra, ga = np.asarray(r), np.asarray(g)
    if ra.shape != ga.shape:
        return f"shape {ga.shape} != expected {ra.shape}"
    if strict_dtype and ra.dtype != ga.dtype:
        return f"dtype {ga.dtype} != expected {ra.dtype}"
    if strict_dtype and isinstance(r, np.ndarray) != isinstance(g, np.ndarray):
        return f"type {type(g).__name__} != expected {type(r).__name__}"
    if ra.dtype.kind not in "fc":
        if not np.array_equal(ra, ga):
            res["exact"] = False
            return f"{int(np.count_nonzero(ra != ga))} of {ra.size} elements differ (exact " \
                   f"match required for {ra.dtype})"
        return None
    if ga.dtype.kind not in "fciub":
        return f"dtype {ga.dtype} is not numeric"
    if ra.size == 0:
        return None
    exact = np.array_equal(ra, ga, equal_nan=True)
    if exact:
        return None
    res["exact"] = False
    rtol = RTOL.get(ra.real.dtype.itemsize, 1e-6)
    nan_r, nan_g = np.isnan(ra), np.isnan(ga)
    if not np.array_equal(nan_r, nan_g):
        return "NaN in different places"
    inf_r = np.isinf(ra)
    if not np.array_equal(inf_r, np.isinf(ga)) or not np.array_equal(ra[inf_r], ga[inf_r]):
        return "infinities differ"
    fin = ~(nan_r | inf_r)
    rf, gf = ra[fin].astype(np.complex128 if ra.dtype.kind == "c" else np.float64), ga[fin]
    scale = float(np.max(np.abs(rf))) if rf.size else 0.0
    err = np.abs(gf - rf)
    max_abs = float(err.max()) if err.size else 0.0
    max_rel = float((err / np.maximum(np.abs(rf), np.finfo(np.float64).tiny)).max()) \
        if err.size else 0.0
    res["max_abs_err"] = max(res["max_abs_err"], max_abs)
    res["max_rel_err"] = max(res["max_rel_err"], max_rel)
    bad = err > rtol * np.abs(rf) + rtol * scale
    if np.any(bad):
        return (f"{int(np.count_nonzero(bad))} of {ra.size} values outside rtol={rtol:g} "
                f"(max abs err {max_abs:.3g}, max rel err {max_rel:.3g})")
    return None
