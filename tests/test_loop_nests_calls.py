"""Calls in loop nests (pijit/loopnest/calls.py, inline.py): NumPy scalar ufuncs and scalar
casts, and the user's own functions inlined, run by the nest's C kernel with plain Python's
results (bit for bit, with their types), warnings (at the same iteration, np.errstate
respected) and exceptions (the user's frame and line). Each case runs plain and jitted at O0
and O1 through tests/differential.py, with the loop one loop_nest node (explain) and, at O1,
the kernel running it without handing over (the `resumes` fixture); the matrix of ufuncs x
dtypes also runs every edge value through the kernel one call at a time."""
from __future__ import annotations

import math
import traceback

import numpy as np
import pytest

import pijit
from pijit.loopnest import calls
from pijit.loopnest import node as nest_node
from tests.differential import (assert_same, assert_same_outcome, plain_python, run_observed,
                                run_plain)
from tests.test_loop_nests import resumes, same  # noqa: F401 - resumes: a fixture
from tests.test_loop_nests import compiled as compiled_nest
from tests.test_loop_nests_checks import kernels  # noqa: F401 - a fixture

LEVELS = ["O0", "O1"]


@pytest.fixture
def built(monkeypatch):
    """The C kernel each nest got (None: its build failed and it ran as Python)."""
    seen = []
    original = nest_node.NestOp.kernel

    def spy(self, *args, **kw):
        kernel = original(self, *args, **kw)
        seen.append(kernel)
        return kernel

    monkeypatch.setattr(nest_node.NestOp, "kernel", spy)
    return seen


def compiled(fn, *args, resumes, built, level="O1", breaks=0):
    """tests/test_loop_nests.compiled (plain's results, one loop_nest node, no hand-over),
    and at O1 every nest's C kernel was built (a failed build runs the nest as Python)."""
    del built[:], resumes[:]
    compiled_nest(fn, *args, resumes=resumes, level=level, breaks=breaks)
    if level == "O1":
        assert built and all(k is not None for k in built), "a nest's kernel was not built"

FLOATS = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, -2.5, 3.0, 0.7, 1e-5, -7.25, 100.0, 700.0,
          -745.5, 1e-310, -1e-310, 1e308, -1e308, np.inf, -np.inf, np.nan, -np.nan]
INTS = [0, 1, -1, 2, -3, 7, 100, -128, 127, 255, 2**15 - 1, -2**15, 2**31 - 1, -2**31,
        2**40, -2**62, 2**63 - 1, -2**63]
UNARY_FLOAT = ["sqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
               "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh",
               "arccosh", "arctanh", "cbrt", "absolute", "fabs", "negative", "positive",
               "floor", "ceil", "trunc", "rint", "square", "reciprocal", "sign", "deg2rad",
               "isnan", "isinf", "isfinite", "signbit", "spacing"]
UNARY_INT = ["absolute", "negative", "square", "sign", "invert", "sqrt", "exp", "isnan"]
BINARY = ["add", "subtract", "multiply", "divide", "floor_divide", "remainder", "fmod",
          "power", "maximum", "minimum", "fmax", "fmin", "arctan2", "hypot", "copysign",
          "logaddexp", "nextafter", "greater", "less_equal", "equal", "bitwise_and",
          "left_shift", "right_shift"]
FLOAT_TYPES = ["float64", "float32"]
INT_TYPES = ["int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "bool"]


def _values(dtype) -> np.ndarray:
    """The edge values of a dtype (those it can hold, each once)."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        with np.errstate(all="ignore"):
            return np.array(FLOATS, dtype=dt)
    if dt.kind == "b":
        return np.array([False, True])
    info = np.iinfo(dt)
    return np.array(sorted({v for v in INTS if info.min <= v <= info.max}), dtype=dt)


def _make(src: str, name: str):
    """A function from source text, with np in its globals (a file name of its own, so
    tracebacks and guards see a user's function)."""
    namespace = {"np": np, "math": math}
    exec(compile(src, f"<{name}>", "exec"), namespace)
    return namespace[name]


def _unary(ufunc: str):
    return _make(f"def u_{ufunc}(a, out):\n"
                 f"    r = out[0]\n"
                 f"    for i in range(a.shape[0]):\n"
                 f"        r = np.{ufunc}(a[i])\n"
                 f"        out[i] = r\n"
                 f"    return r\n", f"u_{ufunc}")


def _binary(ufunc: str):
    return _make(f"def b_{ufunc}(a, b, out):\n"
                 f"    r = out[0]\n"
                 f"    for i in range(a.shape[0]):\n"
                 f"        r = np.{ufunc}(a[i], b[i])\n"
                 f"        out[i] = r\n"
                 f"    return r\n", f"b_{ufunc}")


def _result_dtype(ufunc, *values):
    return getattr(np, ufunc).resolve_dtypes(tuple(v.dtype for v in values) + (None,))[-1]


def _supported(ufunc, *dtypes) -> bool:
    try:
        calls.loop_signature(getattr(np, ufunc), tuple(np.dtype(d) for d in dtypes))
        return True
    except calls.Unsupported:
        return False


def _quiet(fn, args) -> bool:
    """Whether the plain call warns and raises nothing and gives finite values only."""
    o = run_plain(fn, args, {})
    if o.warnings or o.exc is not None:
        return False
    return all(not np.issubdtype(x.dtype, np.floating) or np.isfinite(x).all()
               for x in args if isinstance(x, np.ndarray))


def each_value(fn, columns, out_dtype, resumes):
    """fn(*[column[k:k+1]], out) jitted at O1 against plain, for each row k: results, types,
    the arrays written, warnings and exceptions; where plain is quiet and finite (operands
    and result), the kernel computed it without handing over."""
    jitted = pijit.jit(fn, jit_config={"jit_level": "O1"})
    for k in range(len(columns[0])):
        args = [c[k:k + 1].copy() for c in columns] + [np.zeros(1, out_dtype)]
        want_args = [a.copy() for a in args]
        want = run_plain(fn, want_args, {})
        del resumes[:]
        got = run_observed(jitted, args, {})
        where = f"{fn.__name__}{tuple(c[k] for c in columns)}"
        assert_same_outcome(got, want, args, want_args, where)
        if _quiet(fn, [a.copy() for a in args[:-1]] + [np.zeros(1, out_dtype)]):
            assert resumes == [], f"{where}: the kernel handed over"


# -- NumPy scalar ufuncs: every ufunc x dtype over edge values --------------------------------
UNARY_CASES = [(u, t) for u in UNARY_FLOAT for t in FLOAT_TYPES + ["int32", "int16", "uint8"]
               if _supported(u, t)] + \
              [(u, t) for u in UNARY_INT for t in INT_TYPES if _supported(u, t)]


@pytest.mark.parametrize("ufunc,dtype", UNARY_CASES)
def test_unary_ufunc(ufunc, dtype, resumes, built):
    fn = _unary(ufunc)
    a = _values(dtype)
    out = _result_dtype(ufunc, a[:1])
    finite = a[np.isfinite(a)] if a.dtype.kind == "f" else a
    fine = finite[[_quiet(fn, [finite[k:k + 1], np.zeros(1, out)]) for k in range(finite.size)]]
    for level in LEVELS:                 # the quiet values in one run, the kernel to its end
        compiled(fn, fine, np.zeros(fine.size, out), level=level, resumes=resumes,
                 built=built)
        same(fn, a, np.zeros(a.size, out), level=level)     # all of them: warnings too
    each_value(fn, [a], out, resumes)


def _pairs(ta, tb):
    a, b = _values(ta), _values(tb)
    if a.dtype.kind == "f" and a.size > 10:
        a = a[[0, 1, 2, 3, 4, 5, 8, 13, 15, 17, 19, 21]]
    if b.dtype.kind == "f" and b.size > 10:
        b = b[[0, 1, 2, 3, 4, 5, 8, 13, 15, 17, 19, 21]]
    if b.dtype.kind in "iu" and b.size > 8:
        b = b[:8]
    if a.dtype.kind in "iu" and a.size > 8:
        a = a[:8]
    return np.repeat(a, b.size), np.tile(b, a.size)


BINARY_TYPES = [("float64", "float64"), ("float32", "float32"), ("int64", "int64"),
                ("int32", "int32"), ("uint8", "uint8"), ("float32", "float64"),
                ("int16", "float32"), ("int8", "uint32")]
BINARY_CASES = [(u, ta, tb) for u in BINARY for ta, tb in BINARY_TYPES if _supported(u, ta, tb)]


@pytest.mark.parametrize("ufunc,ta,tb", BINARY_CASES)
def test_binary_ufunc(ufunc, ta, tb, resumes):
    fn = _binary(ufunc)
    a, b = _pairs(ta, tb)
    out = _result_dtype(ufunc, a[:1], b[:1])
    for level in LEVELS:
        same(fn, a, b, np.zeros(a.size, out), level=level)
    each_value(fn, [a, b], out, resumes)


def weak_operands(a, c, k):
    out = np.zeros(a.shape[0])
    s = np.float32(0)
    for i in range(a.shape[0]):
        s = np.maximum(a[i], c)          # a Python float: float32's loop (NEP 50)
        out[i] = np.add(a[i], k) + s     # a Python int
    return out, s


@pytest.mark.parametrize("level", LEVELS)
def test_python_scalars_are_weak(level, resumes, built):
    a = np.array([0.5, -2.0, 3.25, 1e30], dtype=np.float32)
    compiled(weak_operands, a, 0.1, 3, level=level, resumes=resumes, built=built)
    # a Python float overflowing float32, an int beyond 2**24: NumPy decides (hand-overs)
    same(weak_operands, a, 1e300, 3, level=level)
    same(weak_operands, a, 0.1, 2**24 + 1, level=level)


def int_weak(a, k):
    out = np.zeros_like(a)
    for i in range(a.shape[0]):
        out[i] = np.maximum(a[i], k)
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_a_python_int_out_of_the_loop_types_range(level, resumes, built):
    a = np.array([1, -5, 100], dtype=np.int8)
    compiled(int_weak, a, 3, level=level, resumes=resumes, built=built)
    same(int_weak, a, 300, level=level)          # OverflowError, as NumPy raises it


def casts(a):
    out = np.zeros(a.shape[0], dtype=np.int32)
    s = np.float32(0)
    t = np.float64(0)
    for i in range(a.shape[0]):
        x = a[i]
        out[i] = np.int32(x) + np.int16(np.int8(np.int64(x) % 100))
        s = np.float32(x) + s
        t = np.float64(np.float32(x))
    return out, s, t


@pytest.mark.parametrize("level", LEVELS)
def test_casts(level, resumes, built):
    a = np.array([0.0, -0.5, 2.75, -7.9, 1e5, 123456.5])
    compiled(casts, a, level=level, resumes=resumes, built=built)
    same(casts, np.array([1.0, np.nan, 3.0]), level=level)        # np.int32(nan): NumPy's
    same(casts, np.array([1.0, 3e9, 2.0]), level=level)           # beyond int32


def cast_types(a, k, f):
    u = np.uint8(7)       # (not 0: pijit passes an equal constant, np.False_, for it)
    b = np.bool_(False)
    g = np.float64(0)
    for i in range(a.shape[0]):
        u = np.uint8(a[i] % 7) + np.uint8(k)
        b = np.bool_(a[i] - 2)
        g = np.float64(f) + np.float64(a[i])
    return u, b, g


@pytest.mark.parametrize("level", LEVELS)
def test_cast_result_types(level, resumes, built):
    compiled(cast_types, np.arange(5, dtype=np.int16), 4, 0.25, level=level, resumes=resumes,
             built=built)
    same(cast_types, np.arange(5, dtype=np.int16), 300, 0.25, level=level)   # out of uint8


def clipped_sqrt(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = np.sqrt(a[i]) + np.exp(-a[i])
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_a_warning_at_a_middle_iteration(level, resumes):
    a = np.array([4.0, 2.0, -1.0, 9.0, 16.0])
    report = same(clipped_sqrt, a, level=level)
    assert report.graph_count == 1
    if level == "O1":
        assert resumes                  # the kernel handed over at the third element


@pytest.mark.parametrize("level", LEVELS)
def test_errstate_raise(level):
    a = np.array([4.0, 2.0, -1.0, 9.0])
    # plain raises FloatingPointError at the third element, the first two written
    out = np.zeros(4)

    def partial(a, out):
        for i in range(a.shape[0]):
            out[i] = np.sqrt(a[i])
        return out

    with np.errstate(invalid="raise"):
        same(partial, a, out, level=level)
    with np.errstate(under="raise"):        # exp(-800) underflows: reported only when asked
        same(clipped_sqrt, np.array([1.0, 800.0, 2.0]), level=level)
    same(clipped_sqrt, np.array([1.0, 800.0, 2.0]), level=level)


# -- user functions, inlined ------------------------------------------------------------------
def poly(x, a=2.0, b=1):
    y = x * a
    if y > 1.0:
        y = y - b
    return y * x + b


def uses_poly(v):
    out = np.empty_like(v)
    for i in range(v.shape[0]):
        out[i] = poly(v[i]) + poly(v[i], 0.5)
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_a_helper_with_defaults(level, resumes, kernels, built):
    v = np.linspace(-2.0, 3.0, 11)
    compiled(uses_poly, v, level=level, resumes=resumes, built=built)
    if level == "O1":
        (k,) = kernels
        ops = [op for b in k.nest.blocks for op in b.ops if op.domain[:1] == ("inline",)]
        assert len(ops) == 2 and all(str(op.domain[1]) == "poly" for op in ops)
        assert ops[0].domain[1].defaults and ops[1].domain[1].defaults     # a, b; b


def shifted(x, s=np.float64(2.5), t=np.float32(1e-40), u=np.float32(-0.0)):
    return (x + s) * 3.5 - t + u * x


def uses_shifted(v):
    out = np.empty_like(v)
    for i in range(v.shape[0]):
        out[i] = shifted(v[i])
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_a_helper_with_numpy_float_defaults(level, resumes, kernels, built):
    """A default that is a NumPy float (np.float64(2.5), a float32 subnormal, a float32 -0.0)
    is a constant of the kernel of its own C type: it was written as an int64 (2.5 ran as
    2, 1e-40 as 0)."""
    v = np.linspace(-2.0, 3.0, 11)
    compiled(uses_shifted, v, level=level, resumes=resumes, built=built)
    if level == "O1":
        (k,) = kernels
        (op,) = [op for b in k.nest.blocks for op in b.ops if op.domain[:1] == ("inline",)]
        assert len(op.domain[1].defaults) == 3


def norm2(x, y):
    return math.sqrt(x * x + y * y)


def scaled(x, y, s):
    return norm2(x, y) * s


def nested(a, b):
    t = 0.0
    for i in range(a.shape[0]):
        t += scaled(a[i], b[i], 0.5)
    return t


@pytest.mark.parametrize("level", LEVELS)
def test_a_helper_calling_a_helper(level, resumes, built):
    rng = np.random.default_rng(1)
    compiled(nested, rng.random(9), rng.random(9), level=level, resumes=resumes, built=built)


square_plus_one = lambda x: x * x + 1.0      # noqa: E731 - the lambda is the point


def _renamed(x):
    return x - 0.5


_renamed.__name__ = "scaled value"      # a name that is no identifier, as a decorator may set


def calls_lambdas(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = square_plus_one(a[i]) + _renamed(a[i])
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_helpers_named_by_no_identifier(level, resumes, built):
    """A lambda (named `<lambda>`) or a function whose __name__ is no identifier is inlined
    under a name the nest's Python and C forms can spell."""
    compiled(calls_lambdas, np.linspace(-2.0, 3.0, 11), level=level, resumes=resumes,
             built=built)


def swapped(x):
    return x + 1.0


def _other(x):
    return x * 3.0


def calls_swapped(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = swapped(a[i])
    return out


def test_a_helper_whose_code_changes_recompiles(resumes):
    a = np.arange(4.0)
    jitted = pijit.jit(calls_swapped)
    pijit.reset(jitted)
    original = swapped.__code__
    try:
        first = jitted(a)
        assert np.array_equal(first, a + 1.0)
        swapped.__code__ = _other.__code__
        second = jitted(a)
        assert np.array_equal(second, a * 3.0), "the nest kept the old code of the helper"
        assert pijit.code_info(jitted)["compile_count"] == 2
    finally:
        swapped.__code__ = original
    assert resumes == []


def test_a_helper_whose_default_changes_recompiles():
    v = np.array([0.25, 2.0])
    jitted = pijit.jit(uses_poly)
    saved = poly.__defaults__
    try:
        first = jitted(v)
        poly.__defaults__ = (2.0, 3)
        second = jitted(v)
        with plain_python():
            want = uses_poly(v)
        assert np.array_equal(second, want) and not np.array_equal(first, second)
    finally:
        poly.__defaults__ = saved


def risky(x, d):
    # Python ints: ZeroDivisionError when d == 0
    return x // d


def calls_risky(a, ds, out):
    for i in range(a.shape[0]):
        out[i] = risky(int(a[i]), int(ds[i]))
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_a_helper_raising_at_a_middle_iteration(level, resumes, built):
    a = np.arange(10, 16, dtype=np.int64)
    ds = np.array([3, 2, 0, 1, 5, 2])
    same(calls_risky, a, ds, np.zeros(6, dtype=np.int64), level=level)
    compiled(calls_risky, a, ds + 1, np.zeros(6, dtype=np.int64), level=level,
             resumes=resumes, built=built)
    jitted = pijit.jit(calls_risky, jit_config={"jit_level": level})
    out = np.zeros(6, dtype=np.int64)
    with pytest.raises(ZeroDivisionError) as info:
        jitted(a, ds, out)
    assert list(out) == [3, 5, 0, 0, 0, 0]          # the writes before it done
    frames = traceback.extract_tb(info.tb)
    # the user's frames: the call in calls_risky, then risky's line
    assert [(f.name, f.line) for f in frames[-2:]] == [
        ("calls_risky", "out[i] = risky(int(a[i]), int(ds[i]))"), ("risky", "return x // d")]


def warns_inside(x):
    return np.log(x) * 2.0


def calls_warns_inside(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = warns_inside(a[i])
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_a_helper_warning(level, resumes):
    same(calls_warns_inside, np.array([1.0, 2.0, 0.0, 3.0, -1.0]), level=level)


def fact(n):
    return 1 if n <= 1 else n * fact(n - 1)


def calls_fact(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = fact(a[i])
    return out


def test_recursion_is_not_inlined():
    a = np.array([1, 3, 5], dtype=np.int64)
    report = pijit.explain(calls_fact, a)
    assert not any("loop_nest" in ops for ops in report.ops_per_graph)
    assert_same(calls_fact, a, graphs=None, breaks=None)


def with_loop(n, x):
    s = 0.0
    for k in range(n):
        s = s * x + k
    return s


def calls_with_loop(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = with_loop(4, a[i])
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_a_helper_with_a_loop(level, resumes, built):
    compiled(calls_with_loop, np.linspace(0.0, 2.0, 7), level=level, resumes=resumes, built=built)


def test_print_after_all_shows_the_inlined_function(capsys):
    fn = pijit.jit(uses_poly, jit_config={"print_after_all": True})
    fn(np.arange(3.0))
    err = capsys.readouterr().err
    assert "inlined poly(" in err and "inline poly" in err
    assert "poly inlined (" in err          # the C


def test_guards_name_the_helper_code():
    report = pijit.explain(uses_poly, np.arange(3.0))
    assert any("__code__" in g for g in report.guards), report.guards
    assert any("__defaults__" in g for g in report.guards), report.guards


SCALE = 2.5


def scaled_by_global(x):
    return x * SCALE


def uses_globals(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = scaled_by_global(a[i]) + SCALE * np.pi
    return out


def helper_reads_global(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = scaled_by_global(a[i])
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_global_constants(level, resumes, built):
    compiled(uses_globals, np.arange(4.0), level=level, resumes=resumes, built=built)


@pytest.mark.parametrize("fn", [uses_globals, helper_reads_global])
def test_a_global_constant_that_changes_recompiles(fn):
    global SCALE
    a = np.arange(3.0)
    jitted = pijit.jit(fn)
    pijit.reset(jitted)
    try:
        jitted(a)
        SCALE = 4
        with plain_python():
            want = fn(a)
        got = jitted(a)
        assert got.tobytes() == want.tobytes(), "the nest kept the old value of SCALE"
        assert pijit.code_info(jitted)["compile_count"] == 2
    finally:
        SCALE = 2.5


def reads_global(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = a[i] * SCALE
    return out


def test_a_global_constant_is_guarded_by_value_without_specialize_scalar():
    global SCALE
    a = np.arange(3.0)
    jitted = pijit.jit(reads_global, jit_config={"specialize_scalar": False})
    pijit.reset(jitted)
    try:
        jitted(a)
        SCALE = 4.0
        with plain_python():
            want = reads_global(a)
        assert jitted(a).tobytes() == want.tobytes(), "the nest kept the old value of SCALE"
    finally:
        SCALE = 2.5


def module_attributes(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = np.sqrt(a[i]) + math.sqrt(a[i]) * math.pi
    return out


def _helper_reading_math(x):
    return math.exp(x) - np.e


def callee_module_attributes(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = _helper_reading_math(a[i])
    return out


@pytest.mark.parametrize("fn, patches", [
    (module_attributes, [(np, "sqrt", np.negative), (math, "sqrt", math.exp),
                         (math, "pi", 100.0)]),
    (callee_module_attributes, [(math, "exp", math.sin), (np, "e", 3.0)])])
def test_a_module_attribute_monkeypatched(monkeypatch, fn, patches):
    """The module attributes a nest (or a function it inlines) reads, math.sqrt, np.sqrt,
    math.pi, are guarded by identity: each one monkeypatched between calls (a test's
    setup) runs the new one, and the old ones again once the patches are undone."""
    a = np.arange(1.0, 4.0)
    jitted = pijit.jit(fn)
    pijit.reset(jitted)
    for step in range(len(patches) + 2):
        if 0 < step <= len(patches):
            monkeypatch.setattr(*patches[step - 1])
        elif step:
            monkeypatch.undo()
        with plain_python():
            want = fn(a)
        assert jitted(a).tobytes() == want.tobytes(), f"step {step}: an old attribute ran"
        report = pijit.explain(jitted, a)
        assert report.graph_count == 1 and report.ops_per_graph[0].count("loop_nest") == 1, \
            report


def infinite_constant(a):
    s = 0.0
    for i in range(a.shape[0]):
        s = min(s, a[i] - 1e999)        # a constant inf: the Python form spells it 1e999
    return s


@pytest.mark.parametrize("level", LEVELS)
def test_an_infinite_constant(level, resumes):
    # a NumPy float's non-finite result hands over: the Python form runs with the constant
    same(infinite_constant, np.arange(3.0), level=level, breaks=1)
    assert level == "O0" or resumes


NEG_NAN = -math.nan                  # a NaN whose sign bit is set


def nan_constants(a):
    out = np.empty((a.shape[0], 4))
    for i in range(a.shape[0]):
        out[i, 0] = a[i] if a[i] < 0.5 else math.nan
        out[i, 1] = a[i] if a[i] < 0.5 else np.nan
        out[i, 2] = a[i] if a[i] < 0.5 else NEG_NAN
        out[i, 3] = -np.inf
    return out


def nan_constant_handed_over(a):
    out = np.zeros(a.shape[0])
    for i in range(a.shape[0]):
        out[i + 1] = NEG_NAN            # out of bounds at the last i: Python stores it
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_nan_constants(level, resumes, built):
    # NaN constants of math, NumPy and a global, sign bits kept (compared bit for bit): C's NAN
    # and Python's repr `nan` (a name in the nest's Python form) keep neither
    a = np.array([0.25, 0.75, 0.5, 0.0])
    compiled(nan_constants, a, level=level, resumes=resumes, built=built)
    jitted = pijit.jit(nan_constants, jit_config={"jit_level": level})
    pijit.reset(jitted)
    for _ in range(3):
        jitted(a)
    assert pijit.code_info(jitted)["compile_count"] == 1, "a NaN guard never holds"


@pytest.mark.parametrize("level", LEVELS)
def test_nan_constant_in_the_python_form(level, resumes):
    # the kernel hands the last store over (IndexError): the Python form runs the constant
    same(nan_constant_handed_over, np.arange(3.0), level=level)
    assert level == "O0" or resumes


# -- the workloads ------------------------------------------------------------------------------
@pytest.mark.parametrize("level", LEVELS)
def test_workloads(level, resumes, built):
    from benchmarks.workloads import WORKLOADS
    by_name = {w.name: w for w in WORKLOADS}
    for name, breaks in (("lu_nopivot", 0), ("gauss_seidel", 0), ("route_length", 1)):
        w = by_name[name]
        (args,) = w.inputs("tiny")
        compiled(w.fn, *args, level=level, resumes=resumes, built=built, breaks=breaks)



@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("ufunc", ["sin", "cos"])
def test_float64_sin_and_cos_are_libms_calls(level, ufunc, resumes, kernels, built):
    # NumPy's float64 sin/cos loops call libm's: the kernel calls it itself (calls.LIBM),
    # which must give NumPy's bits over every range reduction libm takes, and its flags
    rng = np.random.default_rng(11)
    a = np.concatenate([np.array(FLOATS), rng.uniform(-4, 4, 200),
                        np.exp(rng.uniform(-700, 700, 400)) * rng.choice([-1, 1], 400),
                        np.pi / 2 * np.arange(-50, 50), 1e22 * np.arange(1, 20)])
    fn = _unary(ufunc)
    same(fn, a, np.zeros(a.size), level=level)
    quiet = a[np.isfinite(a)]
    compiled(fn, quiet, np.zeros(quiet.size), level=level, resumes=resumes, built=built)
    if level == "O1":
        assert kernels and all(k.numpy_loop_count == 0 for k in kernels)
        assert f"pj_libm_{ufunc}(u0)" in kernels[0].function()
