"""Differential testing: run a function plain and jitted, compare everything, and check how
the jitted call ran, so a silent fallback to plain Python cannot pass as capture."""
from __future__ import annotations

import contextlib
import copy
import functools
import io
import types
import warnings
from dataclasses import dataclass, field

import numpy as np

import pijit
import o2_spec
from o2_spec import EXACT, Abs, Near, Scaled, Ulp
from pijit import cache
from pijit.explain import report as explain_report


def _root(a: np.ndarray) -> np.ndarray:
    """The array owning a's memory, also through as_strided's DummyArray (an object that
    holds the array it views as its own .base), whose views would otherwise be copied
    contiguous: a self-overlapping input would reach the function as a plain one."""
    while True:
        base = a.base
        if not isinstance(base, np.ndarray) and isinstance(getattr(base, "base", None),
                                                           np.ndarray):
            base = base.base
        if not isinstance(base, np.ndarray):
            return a
        a = base


def layout_copy(a: np.ndarray, roots: dict | None = None) -> np.ndarray:
    """A copy of `a` with the same strides and offset into a copy of its base (deepcopy would
    make non-contiguous inputs contiguous, and then their layout would go untested). roots:
    id of a base array -> its copy, shared by the arrays of one clone, so views of one buffer
    stay views of one buffer (a write through one is seen through the others)."""
    root = _root(a)
    if root.base is not None:       # a buffer of another kind (bytes, mmap...): a copy
        return a.copy(order="K") if a.flags.forc else np.array(a, copy=True, order="K")
    roots = {} if roots is None else roots
    if id(root) not in roots:
        roots[id(root)] = (root, root.copy(order="A"))
    root_copy = roots[id(root)][1]
    if root is a:
        return root_copy
    offset = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return np.ndarray(a.shape, a.dtype, buffer=root_copy, offset=offset, strides=a.strides)


def clone(value):
    """Deep copy keeping array layouts, objects that appear twice shared, and arrays that
    share a buffer sharing its copy (so aliased inputs stay aliased)."""
    memo, roots = {}, {}

    def visit(obj, depth=0):
        if id(obj) in memo or depth > 4:
            return
        if isinstance(obj, np.ndarray):
            memo[id(obj)] = layout_copy(obj, roots)
        elif isinstance(obj, (tuple, list)):
            for o in obj:
                visit(o, depth + 1)
        elif isinstance(obj, dict):
            for o in obj.values():
                visit(o, depth + 1)
        elif hasattr(obj, "__dict__") and not isinstance(obj, type):
            for o in vars(obj).values():
                visit(o, depth + 1)

    visit(value)
    return copy.deepcopy(value, memo)


@dataclass
class Outcome:
    """What one call did: its result or exception, what it printed and warned."""
    result: object = None
    exc: BaseException | None = None
    out: str = ""
    warnings: list = field(default_factory=list)    # (category name, message), in order


def run_observed(fn, args, kwargs) -> Outcome:
    """Call fn, recording its result or exception, stdout and every warning (each one:
    "always", so a warning repeated from the same line is counted again)."""
    outcome, out = Outcome(), io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            outcome.result = fn(*args, **kwargs)
        except Exception as e:     # compared, not swallowed
            outcome.exc = e
    outcome.out = out.getvalue()
    outcome.warnings = [(w.category.__name__, str(w.message)) for w in caught]
    return outcome


@contextlib.contextmanager
def plain_python():
    """Inside, every jitted function runs as plain Python (PYNATIVE_MODE): a reference that
    calls a jitted helper is still plain."""
    old = pijit.get_context("mode")
    pijit.set_context(mode=pijit.PYNATIVE_MODE)
    try:
        yield
    finally:
        pijit.set_context(mode=old)


def run_plain(fn, args, kwargs) -> Outcome:
    """run_observed with every jit off: the reference run."""
    with plain_python():
        return run_observed(fn, args, kwargs)


def run_captured(fn, args, kwargs):
    """(result, exception, stdout) of fn(*args, **kwargs)."""
    o = run_observed(fn, args, kwargs)
    return o.result, o.exc, o.out


# Objects with a __dict__ compared as themselves: classes, functions and the like (a jitted
# function's wrapper too, by its module). Any other object, callable ones included (a layer
# with __call__), is compared by its attributes.
_COMPARED_BY_IDENTITY = (type, types.FunctionType, types.MethodType, types.ModuleType,
                         types.BuiltinFunctionType, functools.partial)


# -- comparing values ---------------------------------------------------------------------------
# One comparison for every differential test: bit for bit at O0 and O1 (tol EXACT), within an
# O2 bound of tests/o2_spec.py otherwise; the same structure at every level.

def mismatch(got, want, tol=EXACT, scale=None, count: int = 1, path: str = "result") -> str:
    """'' when `got` is `want` (see assert_equal_values), else the first difference.

    tol: EXACT (bits), or an o2_spec bound for float values; scale: per element, for Scaled
    bounds; count: the number of reduced elements (Scaled bounds that depend on it)."""
    if type(got) is not type(want):
        return f"{path}: type {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, np.ndarray):
        return _array_mismatch(got, want, tol, scale, count, path)
    if isinstance(want, np.generic):
        return _array_mismatch(np.asarray(got), np.asarray(want), tol, scale, count, path)
    if isinstance(want, (float, complex)):
        g, w = np.asarray(got), np.asarray(want)
        return _array_mismatch(g, w, tol, scale, count, path)
    if isinstance(want, (tuple, list)):
        if len(got) != len(want):
            return f"{path}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            why = mismatch(g, w, tol, None if scale is None else scale[i], count,
                           f"{path}[{i}]")
            if why:
                return why
        return ""
    if isinstance(want, dict):
        if list(got) != list(want):
            return f"{path}: keys {list(got)} != {list(want)}"
        for k in want:
            why = mismatch(got[k], want[k], tol, None, count, f"{path}[{k!r}]")
            if why:
                return why
        return ""
    if hasattr(want, "__dict__") and not isinstance(want, _COMPARED_BY_IDENTITY) and \
            not type(want).__module__.startswith("pijit"):
        return mismatch(vars(got), vars(want), tol, None, count, f"vars({path})")
    return "" if got == want else f"{path}: {got!r} != {want!r}"


def assert_equal_values(got, expected, path="result", tol=EXACT, scale=None, count=1):
    """Same types, dtypes, shapes, layouts (strides of the axes longer than 1), writeability,
    and values: bit for bit with tol EXACT (so -0.0 is not 0.0, Python floats included; NaNs
    by class: sign and quiet bit), else within an O2 bound of tests/o2_spec.py (then NaN and
    inf positions and signs still equal)."""
    why = mismatch(got, expected, tol, scale, count, path)
    assert not why, why


def level_tol(fn, args, level) -> tuple:
    """(tol, scale) comparing fn(*args) jitted at `level` with plain: bits (EXACT) at O0 and
    O1; at O2 the per-element bounds o2_spec.carry derives for fn (Abs), one per result."""
    if level != "O2":
        return EXACT, None
    with warnings.catch_warnings(), np.errstate(all="ignore"), plain_python():
        warnings.simplefilter("ignore")
        bounds = o2_spec.carry(fn, *clone(tuple(args)))
        several = isinstance(fn(*clone(tuple(args))), (tuple, list))
    return Abs(), bounds if several else bounds[0]


def inputs_tol(fn, args, level) -> tuple:
    """(tol, scale) comparing the arguments as fn(*args) jitted at `level` leaves them with
    plain's: bits at O0 and O1; at O2 the bounds o2_spec.carry_inputs derives for the values
    the function writes into them, one per argument."""
    if level != "O2":
        return EXACT, None
    with warnings.catch_warnings(), np.errstate(all="ignore"), plain_python():
        warnings.simplefilter("ignore")
        return Abs(), o2_spec.carry_inputs(fn, *clone(tuple(args)))


def layout(a: np.ndarray) -> tuple:
    """The strides that matter: those of axes longer than 1 (none when the array is empty)."""
    if a.size == 0:
        return ()
    return tuple(s for s, n in zip(a.strides, a.shape) if n > 1)


def _array_mismatch(g: np.ndarray, w: np.ndarray, tol, scale, count, path) -> str:
    if g.dtype != w.dtype:
        return f"{path}: dtype {g.dtype} != {w.dtype}"
    if g.shape != w.shape:
        return f"{path}: shape {g.shape} != {w.shape}"
    if g.ndim and layout(g) != layout(w):
        return f"{path}: strides {g.strides} != {w.strides} (layout differs)"
    if g.flags.writeable != w.flags.writeable:
        return f"{path}: writeable {g.flags.writeable} != {w.flags.writeable}"
    if w.dtype.kind == "c":     # real and imaginary parts, each as floats
        g, w = np.stack([g.real, g.imag], -1), np.stack([w.real, w.imag], -1)
        scale = None if scale is None else np.asarray(scale)[..., None]
    if w.dtype.kind != "f" or w.dtype.itemsize not in (2, 4, 8):
        return _at(g != w, g, w, f"{path}: values differ") if np.any(g != w) else ""
    free = np.zeros(w.shape, bool)     # elements a carried bound does not promise
    if isinstance(tol, Abs):
        free = ~np.isfinite(np.broadcast_to(np.asarray(scale, np.float64), w.shape))
    gn, wn = np.isnan(g), np.isnan(w)
    if np.any((gn != wn) & ~free):
        return _at((gn != wn) & ~free, g, w, f"{path}: NaN positions differ")
    bits_g, bits_w = _bits(g), _bits(w)
    if tol == EXACT or not isinstance(tol, (Ulp, Scaled, Near, Abs)):
        # NaNs compare by class (sign, quiet bit), not payload
        cls = _nan_class(bits_g, w.dtype.itemsize), _nan_class(bits_w, w.dtype.itemsize)
        differ = np.where(wn, cls[0] != cls[1], bits_g != bits_w)
        return _at(differ, g, w, f"{path}: bits differ") if np.any(differ) else ""
    wi = np.isinf(w)
    bad_inf = ((np.isinf(g) != wi) | (wi & (bits_g != bits_w))) & ~free
    if np.any(bad_inf):
        return _at(bad_inf, g, w, f"{path}: inf positions differ")
    fin = np.isfinite(w) & ~free
    with np.errstate(all="ignore"):
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        err = np.abs(g64 - w64)
        eps = float(np.finfo(w.dtype).eps)
        if isinstance(tol, Ulp):
            n = tol.n(w.dtype)
            if n == 0:
                differ = fin & (bits_g != bits_w)
                return _at(differ, g, w, f"{path}: bits differ") if np.any(differ) else ""
            # the exact value is within n ulp of either, so its ulp is at most the spacing
            # just above max(|got|, |want|) / (1 - n eps)
            top = np.minimum(np.maximum(np.abs(g64), np.abs(w64)) / (1 - n * eps),
                             float(np.finfo(w.dtype).max)).astype(w.dtype)
            bound = n * np.spacing(top).astype(np.float64)
            what = f"{n} ulp"
        elif isinstance(tol, Scaled):
            k = tol.factor(w.dtype, count)
            bound = k * eps * np.asarray(scale, np.float64)
            what = f"{k:.3g} eps * scale"
        elif isinstance(tol, Near):
            bound = tol.k * eps * np.maximum(np.abs(w64), 1.0)
            what = f"{tol.k} eps max(|want|, 1)"
        else:
            bound = np.asarray(scale, np.float64) * 1.001
            what = "the bound carried through the function (o2_spec.carry)"
    bad = fin & ~(err <= bound)
    if np.any(bad):
        return _at(bad, g, w, f"{path}: error {err[bad].max():.3g} > {what}")
    exact = fin & (bound == 0) & (bits_g != bits_w)     # no error allowed: no zero's sign
    return _at(exact, g, w, f"{path}: bits differ (bound 0)") if np.any(exact) else ""


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.dtype.itemsize}")


def _nan_class(bits: np.ndarray, size: int) -> np.ndarray:
    """Sign and quiet bit of each float: the NaN "class" (payloads are not compared)."""
    width = 8 * size
    mant = {2: 10, 4: 23, 8: 52}[size]
    sign = (bits >> np.array(width - 1, bits.dtype)) & np.array(1, bits.dtype)
    quiet = (bits >> np.array(mant - 1, bits.dtype)) & np.array(1, bits.dtype)
    return sign * 2 + quiet


def _at(mask, g, w, what) -> str:
    mask = np.asarray(mask)
    if mask.ndim == 0:
        return f"{what}: got {g[()]!r}, want {w[()]!r}"
    k = tuple(int(i) for i in np.argwhere(mask)[0])
    return f"{what} at {k}: got {g[k]!r}, want {w[k]!r}"



def _leaves(value):
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    else:
        yield value


def alias_pattern(result, args):
    """For each array in the result: whether it is, or shares memory with, each argument
    array and each array of the result before it (`return t, t.T` must stay one buffer)."""
    arrays = [a for a in _leaves(args) if isinstance(a, np.ndarray)]
    pattern, seen = [], []
    for leaf in _leaves(result):
        if isinstance(leaf, np.ndarray):
            pattern.append(tuple((leaf is a, bool(np.shares_memory(leaf, a)))
                                 for a in arrays + seen))
            seen.append(leaf)
    return pattern


def assert_same_outcome(got: Outcome, want: Outcome, got_args, want_args, where: str,
                        tol=EXACT, scale=None, inputs=(EXACT, None)):
    """got (jitted) against want (plain): printed output, warnings (category, message and
    count, in order), the exception (type and message) or the result (assert_equal_values)
    and its aliasing, then the arguments as the calls left them (inputs: their (tol,
    scale), see inputs_tol; None where plain Python leaves them undefined)."""
    assert got.out == want.out, f"{where}: printed output differs:\n{got.out!r}\n{want.out!r}"
    assert got.warnings == want.warnings, \
        f"{where}: warnings {got.warnings} != plain {want.warnings}"
    if want.exc is not None:
        assert type(got.exc) is type(want.exc), f"{where}: raised {got.exc!r}, expected " \
                                                f"{want.exc!r}"
        assert str(got.exc) == str(want.exc), f"{where}: message {got.exc} != {want.exc}"
    else:
        assert got.exc is None, f"{where}: jitted call raised {got.exc!r}"
        assert_equal_values(got.result, want.result, f"{where}: result", tol, scale)
        assert alias_pattern(got.result, got_args) == alias_pattern(want.result, want_args), \
            f"{where}: aliasing of results (with inputs, with each other) differs"
    if inputs is not None:
        assert_equal_values(got_args, want_args, f"{where}: mutated inputs", *inputs)


def count_handbacks(monkeypatch) -> list:
    """A list that gets an entry each time a kernel hands its group to NumPy."""
    from pijit.backends import cfused
    handed, fallback = [], cfused.group_fallback

    def counting(*spec, **kw):          # the NumPy fallback a kernel gets, counted
        fn = fallback(*spec, **kw)

        def counted(*args):
            handed.append(fn)
            return fn(*args)
        return counted
    monkeypatch.setattr(cfused, "group_fallback", counting)
    return handed


def run_sizes(fn, make, sizes, jit_config):
    """fn plain and jitted on make(n) for each n of sizes, each call on fresh copies, every
    outcome compared (assert_same_outcome): what varies is the input's size, so the jitted
    function goes dynamic after the first call. Returns the jitted function."""
    jitted = pijit.jit(fn, jit_config=jit_config)
    pijit.reset(jitted)
    for n in sizes:
        args = make(n)
        want_args, got_args = clone(args), clone(args)
        want = run_plain(fn, want_args, {})
        got = run_observed(jitted, got_args, {})
        assert_same_outcome(got, want, list(got_args), list(want_args), f"size {n}")
    return jitted


def assert_same(fn, *args, graphs=1, breaks=0, ops=None, jit_kwargs=None, kwargs=None,
                calls=2):
    """Run fn plain and jitted (`calls` times, on deep copies) and compare results, mutated
    inputs, printed output, warnings and exceptions (assert_same_outcome); then check the
    jitted run made `graphs` graphs and `breaks` breaks (graphs=0: the function must have
    fallen back to plain Python; None, for either: any number, checked by the caller), that
    the op names include `ops`, and that later calls hit the cache. Values compare by
    level_tol (bits, or O2's derived bounds). Returns the report."""
    kwargs = kwargs or {}
    level = ((jit_kwargs or {}).get("jit_config") or {}).get("jit_level", "O1")
    tol, scale = level_tol(lambda *a: fn(*a, **kwargs), args, level)
    # (arrays passed by keyword are compared bit for bit: carry_inputs bounds positional ones)
    in_tol, in_scale = inputs_tol(lambda *a: fn(*a, **kwargs), args, level) \
        if not kwargs else (EXACT, None)
    plain_args = clone((args, kwargs))
    want = run_plain(fn, *plain_args)
    jitted = pijit.jit(fn, **(jit_kwargs or {}))
    pijit.reset(jitted)
    for call in range(calls):
        jit_args = clone((args, kwargs))
        got = run_observed(jitted, *jit_args)
        assert_same_outcome(got, want, (list(jit_args[0]), jit_args[1]),
                            (list(plain_args[0]), plain_args[1]), f"call {call + 1}", tol,
                            scale, (in_tol, None if in_scale is None else (in_scale, None)))
    code = jitted.fn.__code__
    report = explain_report(code)
    assert graphs is None or report.graph_count == graphs, \
        f"expected {graphs} graphs, got {report}"
    assert breaks is None or report.graph_break_count == breaks, \
        f"expected {breaks} breaks, got {report}"
    if graphs != 0:
        assert report.fallback is None, f"fell back to plain Python: {report.fallback}"
        stats = pijit.stats(jitted)
        assert stats["cache_hits"] >= calls - 1, f"later calls did not hit the cache: {stats}"
    if ops is not None:
        flat = [op for graph_ops in report.ops_per_graph for op in graph_ops]
        for op in ops:
            assert op in flat, f"op {op!r} not captured; ops were {flat}"
    assert cache.record(code) is not None
    return report
