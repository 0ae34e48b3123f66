"""Capture patterns beyond single ops: argument kinds, closures, globals, methods, containers,
pruned branches, in-place updates of fresh arrays, dynamic shapes; and what falls back."""
import functools
import math

import numpy as np
import pytest

import pijit
from differential import assert_same, assert_same_outcome, run_observed, run_plain

G_SCALE = 2.5
G_ARRAY = np.linspace(0.0, 1.0, 4)
CONFIG = {"eps": 1e-5}


def rng_array(*shape, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


X = rng_array(3, 4)
Y = rng_array(3, 4, seed=1)


# -- arguments --------------------------------------------------------------------------
def defaults(x, scale=2.0, shift=1):
    return x * scale + shift


def kwonly(x, *, axis=0, keepdims=False):
    return x.sum(axis=axis, keepdims=keepdims)


def star_args(x, *rest):
    return x + rest[0] * rest[1]


def star_kwargs(x, **kw):
    return x * kw["a"] - kw["b"]


def all_kinds(x, y=1.0, *args, z, w=2, **kw):
    return x * y + z - w + len(args) + len(kw)


def test_defaults():
    assert_same(defaults, X)
    assert_same(defaults, X, kwargs={"shift": 3})


def test_kwonly():
    assert_same(kwonly, X, kwargs={"axis": 1, "keepdims": True}, ops=["sum"])


def test_star_args():
    assert_same(star_args, X, Y, 3.0)


def test_star_kwargs():
    assert_same(star_kwargs, X, kwargs={"a": 2.0, "b": 0.5})


def test_all_argument_kinds():
    assert_same(all_kinds, X, 2.0, 7, 8, kwargs={"z": 1.5, "q": 4})


def star_helper(x, *rest, scale=1.0, **kw):
    return x * scale + rest[0] - rest[-1] * kw["shift"]


def calls_star_helper(x):
    return star_helper(x, 1.0, 2.0, 4.0, scale=3.0, shift=0.5)


def needs_two(a, b, c=10.0):
    return a * b + c


def calls_needs_two_with_one(x):
    return needs_two(x)


def calls_needs_two_twice_b(x):
    return needs_two(x, 2.0, b=3.0)


def reversed_digits(x):
    acc = 0.0
    for w in reversed((1.0, 2.0, 4.0)):
        acc = acc * 10.0 + w
    return x * acc


def test_inlined_call_binding():
    """An inlined callee's *args and **kwargs are bound as Python binds them; a call Python
    rejects (a missing argument, one given twice) raises its TypeError."""
    assert_same(calls_star_helper, X, ops=["mul", "add", "sub"])
    assert_same(calls_needs_two_with_one, X, graphs=None, breaks=None)
    assert_same(calls_needs_two_twice_b, X, graphs=None, breaks=None)
    assert_same(reversed_digits, X, ops=["mul"])


# -- globals, closures, attributes ------------------------------------------------------
def uses_globals(x):
    return x * G_SCALE + G_ARRAY + CONFIG["eps"]


def make_closure(scale, offset):
    def closure(x):
        return np.tanh(x * scale) + offset
    return closure


def test_globals():
    report = assert_same(uses_globals, X)
    assert any("G_ARRAY" in g for g in report.guards)
    assert any("G_SCALE" in g for g in report.guards)


def test_closure():
    report = assert_same(make_closure(2.0, np.ones(4)), X, ops=["tanh", "mul", "add"])
    assert any(g.startswith("scale") for g in report.guards)


def inner_with_defaults(x):
    def step(v, k=3.0, *, shift=-0.5):
        return v * k + shift
    return step(x) - step(x, 2.0, shift=1.0)


def test_a_function_made_during_capture_keeps_its_defaults():
    """MAKE_FUNCTION's defaults and keyword-only defaults reach the inlined call."""
    assert_same(inner_with_defaults, X, ops=["mul", "sub"])


def nonlocal_total(x):
    total = 0.5

    def add(v):
        nonlocal total
        total = total + v
    add(1.5)
    add(2.0)
    return x * total


def test_a_function_made_during_capture_stores_into_its_closure():
    """`nonlocal` in a function made and called during capture stores into the caller's
    variable (STORE_DEREF through the made closure)."""
    assert_same(nonlocal_total, X, ops=["mul"])


def pair_sum(x):
    t = (x, x + 1.0)
    return t[0] * t[1]


def test_a_stack_effect_below_the_frame_fails_capture(monkeypatch):
    """A handler that pops more than the frame's stack holds (a wrong stack effect) is an
    internal error: the call runs as plain Python, instead of a graph built from a stack with
    every value shifted."""
    from pijit.capture.registry import HANDLERS
    build_tuple = HANDLERS["BUILD_TUPLE"]

    def pops_one_too_many(cap, instr):
        cap.stack.extend(cap.popn(len(cap.stack) + 1))
        return build_tuple(cap, instr)

    monkeypatch.setitem(HANDLERS, "BUILD_TUPLE", pops_one_too_many)
    f = pijit.jit(pair_sum)
    np.testing.assert_array_equal(f(X), pair_sum(X))
    info = pijit.stats(f)
    assert (info["compile_count"], info["state"]) == (0, "never_compile"), info
    assert "capture stack underflow" in info["eager_fallbacks"][0], info


def array_kinds(x):
    a = isinstance(x, np.ndarray)
    b = isinstance(x, (float, int))
    c = isinstance(x[0], np.floating)
    d = type(x) is np.ndarray
    return x * (1 + a + 2 * b + 4 * c + 8 * d)


def test_isinstance_and_type_of_captured_arrays():
    """isinstance() and type() of graph values are constants of their Python type."""
    assert_same(array_kinds, X, ops=["mul"])


class Linear:
    def __init__(self, n_in, n_out):
        self.w = rng_array(n_in, n_out, seed=3)
        self.b = rng_array(n_out, seed=4)
        self.act = True

    def forward(self, x):
        h = x @ self.w + self.b
        return np.maximum(h, 0) if self.act else h


def test_method_self_attributes():
    layer = Linear(4, 5)
    report = assert_same(Linear.forward, layer, X, ops=["matmul", "add", "maximum"])
    assert "type(self) is Linear" in report.guards
    assert any(g.startswith("self.w: ndarray float64[4,5]") for g in report.guards)
    assert "self.act == True" in report.guards


class _Doubled:
    """A validating field (a data descriptor) storing its value under its own name in the
    instance dict, and reading it back transformed."""

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        return obj.__dict__[self.name] * 2.0

    def __set__(self, obj, value):
        if value < 0:
            raise ValueError(f"{self.name} must be >= 0")
        obj.__dict__[self.name] = value


class _Gained:
    gain = _Doubled()

    def __init__(self, gain):
        self.gain = gain


def _apply_gain(model, x):
    return x * model.gain + 1.0


def test_a_data_descriptor_wins_over_the_instance_dict():
    """obj.name where the class holds a data descriptor of that name reads the descriptor
    (as Python does), not the instance dict entry it stores under the same name."""
    report = assert_same(_apply_gain, _Gained(3.0), X, breaks=None)
    assert not any(g.startswith("model.gain ==") for g in report.guards), report.guards


def test_jitted_method_decorator():
    class Model:
        def __init__(self):
            self.scale = 3.0

        @pijit.jit
        def construct(self, x):
            return x * self.scale

    m = Model()
    np.testing.assert_array_equal(m.construct(X), X * 3.0)
    np.testing.assert_array_equal(m.construct(X), X * 3.0)
    assert pijit.stats(Model.construct)["cache_hits"] == 1
    assert pijit.explain(Model.construct, m, X).ops_per_graph == [["mul"]]


# -- containers and constants -----------------------------------------------------------
def returns_structures(x):
    s = x.sum()
    return {"sum": s, "rows": [x[0], x[-1]], "meta": (x.shape, x.dtype.name, "tag")}, None


def returns_input_itself(x, y):
    return x, y, x.T


def tuple_unpack(x):
    a, b, c = x
    rows, cols = x.shape
    return a + b * c, rows * cols


def shape_arithmetic(x):
    n, m = x.shape
    return x.reshape(n * m // 2, 2), np.zeros((n, m + 1), dtype=x.dtype), x.shape + (1,)


def fstring_constant(x):
    label = f"{x.shape[0]}x{x.ndim}"
    return x * len(label)


def test_structures():
    assert_same(returns_structures, X)


def test_identity_of_returned_inputs():
    x, y = X.copy(), Y.copy()
    f = pijit.jit(returns_input_itself)
    for _ in range(2):
        a, b, t = f(x, y)
        assert a is x and b is y and t.base is x
    assert_same(returns_input_itself, X, Y)


def identities(x, y, kind=np.float32):
    same = x is x
    none = x is None
    other = None is not y
    const = kind is np.float32
    return x * (1.0 + same + 2.0 * none + 4.0 * other + 8.0 * const)


def two_arrays_are(x, y):
    return x * 2.0 if x is y else x - y


def test_is_between_known_values():
    """`is` as a value (IS_OP, not a jump on None): of constants, of a value and itself, of
    None and an array, is known at capture; of two arrays only at run time (a break)."""
    assert_same(identities, X, Y, ops=["mul"])
    assert_same(two_arrays_are, X, Y, graphs=None, breaks=1)
    assert_same(two_arrays_are, X, X, graphs=None, breaks=1)


def test_unpack_rows_and_shape():
    assert_same(tuple_unpack, X, ops=["getitem", "mul", "add"])


def test_shape_arithmetic():
    assert_same(shape_arithmetic, X, ops=["reshape", "zeros"])


def test_fstring_of_constants():
    assert_same(fstring_constant, X)


# -- branches on guarded constants ------------------------------------------------------
def branchy(x, mode, bias=None):
    if mode == "relu":
        y = np.maximum(x, 0)
    elif mode == "tanh":
        y = np.tanh(x)
    else:
        y = x
    if bias is not None:
        y = y + bias
    if x.ndim == 2 and x.shape[1] > 2:
        y = y.sum(axis=1)
    return y


@pytest.mark.parametrize("mode", ["relu", "tanh", "none"])
def test_branch_pruned_on_constants(mode):
    report = assert_same(branchy, X, mode)
    assert f"mode == {mode!r}" in report.guards
    assert_same(branchy, X, mode, np.ones(4))


def conditional_expression(x, flag):
    return x * 2 if flag else x - 1


def test_conditional_expression():
    assert_same(conditional_expression, X, True)
    assert_same(conditional_expression, X, False)


# -- in-place updates, dtypes -----------------------------------------------------------
def inplace_on_fresh(x):
    y = x * 2.0
    y += 1.0
    y *= x
    return y


def test_inplace_on_fresh_array():
    assert_same(inplace_on_fresh, X, ops=["iadd", "imul"])


def mixed_dtypes(a, b, c):
    return a + b, a * c, b / c, (a > 0) & (b < 0.5), c // 2


def test_mixed_dtype_promotion():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    b = rng_array(3, 4, dtype=np.float32)
    c = np.arange(1, 5, dtype=np.int64)
    assert_same(mixed_dtypes, a, b, c)


def python_scalar_math(x, n):
    return x * math.sqrt(n) + math.pi, math.floor(n / 3)


def test_math_on_python_scalars():
    assert_same(python_scalar_math, X, 7)
    report = assert_same(python_scalar_math, X, 7,
                         jit_kwargs={"jit_config": {"specialize_scalar": False}})
    assert "type(n) is int" in report.guards


def add_int(x, n):
    return x + n, np.asarray(n).dtype


@pytest.mark.parametrize("n", [2 ** 63, 2 ** 64 - 1, 2 ** 70, -2 ** 63 - 1])
@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_python_int_past_int64_is_not_a_graph_int(n, dtype):
    """A graph int is an int64; NumPy makes an int past that range a uint64 or an object
    array, or raises OverflowError with an int64 array: a dynamic int argument is guarded
    to the range, so the entry compiled for 5 does not take n (wrap.fits_int64). Before,
    2**63 reached the kernel as int64 bits (x + 2**63 wrapped around instead of raising)."""
    jitted = pijit.jit(add_int, jit_config={"specialize_scalar": False})
    x = np.arange(3, dtype=dtype)
    for value in (5, n):
        want = run_plain(add_int, (x.copy(), value), {})
        got = run_observed(jitted, (x.copy(), value), {})
        assert_same_outcome(got, want, [x, value], [x, value], f"n={value}")
    report = pijit.explain(jitted, x, 5)
    assert report.graph_count == 1 and "-2**63 <= value < 2**63(n)" in report.guards
    stats = pijit.stats(jitted)
    assert "n: -2**63 <= value < 2**63 no longer holds" in str(stats["recompile_reasons"]), stats


def power_dtype(x, n):
    m = n ** 5
    return x * 2, np.asarray(m).dtype


def cube_list_kind(x, n):
    m = n * n * n
    return x + 1, np.array([m, 1]).dtype.kind


def cube_full_sum(x, n):
    m = -n * n * n
    return x - 1, np.full(2, m).dtype, type(np.sum(m))


def cube_weak(x, n):
    return (x + n * n * n) * 0.5


OPAQUE = {"power_dtype": ["asarray"], "cube_list_kind": ["array"],
          "cube_full_sum": ["full", "sum"]}


@pytest.mark.parametrize("fn", [power_dtype, cube_list_kind, cube_full_sum])
def test_computed_python_int_typed_by_value(fn):
    """A Python int computed in the graph from a dynamic int (n ** 5, n * n * n) is exact at
    run time but its Meta is int64's: np.asarray(m), np.array([m, 1]), np.full(2, m) and
    np.sum(m) are uint64 or object past int64, and capture folded the int64 of the Meta
    into `.dtype` (int64 for n = 10**4, object in plain Python). Such an op is refused
    (int_range.typed_by_value) and left to an opaque call, which checks the type at run time;
    with an array, where m is weak, it is not (cube_weak)."""
    jitted = pijit.jit(fn, jit_config={"specialize_scalar": False})
    x = np.arange(3, dtype=np.int64)
    for n in (3, 10 ** 4, 3 * 10 ** 6, -3 * 10 ** 6, 2 ** 21, 7):
        want = run_plain(fn, (x.copy(), n), {})
        got = run_observed(jitted, (x.copy(), n), {})
        assert_same_outcome(got, want, [x, n], [x, n], f"n={n}")
    report = pijit.explain(jitted, x, 3)   # ops checking their result's type at run time
    assert report.graph_count == 1 and report.graph_break_count == 0, report
    assert report.opaque_calls == [OPAQUE[fn.__name__]], report


def test_computed_python_int_weak_with_an_array():
    jitted = pijit.jit(cube_weak, jit_config={"specialize_scalar": False})
    for x in (np.arange(3, dtype=np.int64), np.arange(3.0)):
        for n in (3, 2 ** 21, 3 * 10 ** 6, 7):
            want = run_plain(cube_weak, (x.copy(), n), {})
            got = run_observed(jitted, (x.copy(), n), {})
            assert_same_outcome(got, want, [x, n], [x, n], f"n={n}")
        report = pijit.explain(jitted, x, 10 ** 4)
        assert report.graph_count == 1 and report.graph_break_count == 0, report


def noncontiguous(x):
    return np.exp(x) * 2


def test_noncontiguous_inputs():
    base = rng_array(6, 8)
    assert_same(noncontiguous, base.T)
    assert_same(noncontiguous, base[::2, 1::3])
    report = assert_same(noncontiguous, base[:, ::2])
    assert any("any layout" in g for g in report.guards)


def zero_d_and_empty(x, e):
    return x * 2 + 1, e.sum(), e * 3


def test_zero_d_and_empty():
    assert_same(zero_d_and_empty, np.array(2.5), np.zeros((0, 3)))


def delete_local(x):
    y = x * 2
    z = y + 1
    del y
    return z


def test_del_local():
    assert_same(delete_local, X)


# -- dynamic shapes ---------------------------------------------------------------------
def rowwise(x):
    return x - x.mean(axis=1, keepdims=True)


def test_input_signature_dynamic_dim():
    spec = (pijit.ArraySpec((None, 4), "float64"),)
    f = pijit.jit(rowwise, input_signature=spec)
    for n in (3, 5, 9):
        x = rng_array(n, 4)
        np.testing.assert_array_equal(f(x), rowwise(x))
    info = pijit.code_info(f)
    assert info["compile_count"] == 1
    assert "x: ndarray float64[?,4] C" in info["entries"][0]["guards"]


def test_automatic_dynamic_dims_after_shape_change():
    f = pijit.jit(rowwise)
    for n in (3, 5, 9, 11):
        x = rng_array(n, 4)
        np.testing.assert_array_equal(f(x), rowwise(x))
    stats = pijit.stats(f)
    assert stats["compile_count"] == 2
    assert "x: expected float64[3,4] C, got float64[5,4] C" in stats["recompile_reasons"][0]


def scaled_by_len(x):
    return x * len(x) - len(x[0])


def test_len_is_the_first_dim():
    """len() of a (3, 4) array is 3, a constant of its static first dim (not its last), and
    read from the array once that dim is dynamic."""
    report = assert_same(scaled_by_len, X)
    assert report.fallback is None and report.graph_count == 1
    f = pijit.jit(scaled_by_len)
    for n in (3, 5, 9):
        x = rng_array(n, 4)
        np.testing.assert_array_equal(f(x), scaled_by_len(x))
    info = pijit.code_info(f)
    assert info["compile_count"] == 2
    assert any("x: ndarray float64[?,4] C" in e["guards"] for e in info["entries"])


def shape_plus_axis(x):
    return x.reshape(x.shape + (1,)) * 2.0, x.reshape((1,) + x.shape) + 1.0


def test_a_dynamic_shape_joined_with_a_constant_tuple():
    """A shape with a dynamic dim (a tuple of graph ints) + a constant tuple, on either side."""
    f = pijit.jit(shape_plus_axis, input_signature=(pijit.ArraySpec((None, 4), "float64"),))
    for n in (3, 5):
        x = rng_array(n, 4)
        for got, want in zip(f(x), shape_plus_axis(x)):
            np.testing.assert_array_equal(got, want)
            assert got.shape == want.shape
    info = pijit.code_info(f)
    assert info["compile_count"] == 1
    # alone: in shape_plus_axis the second join runs in the resume function after the first
    # reshape's break, where x's shape is static and the join a constant
    spec = (pijit.ArraySpec((None, 4), "float64"),)
    assert_same(axis_before_shape, rng_array(3, 4), graphs=2, breaks=1,
                jit_kwargs={"input_signature": spec})


def axis_before_shape(x):
    return x.reshape((1,) + x.shape) - 1.0


def shapes_joined(x):
    return x * 2.0, x.shape + x.shape


def shapes_subtracted(x):
    return x * 2.0, x.shape - x.shape          # TypeError, as in Python


def test_two_dynamic_shapes_joined():
    """Two tuples of graph ints: + joins them in the graph; any other operator is not a
    tuple join (`-` raises TypeError where Python does, after a break)."""
    spec = {"input_signature": (pijit.ArraySpec((None, 4), "float64"),)}
    assert_same(shapes_joined, rng_array(3, 4), jit_kwargs=spec)
    assert_same(shapes_subtracted, rng_array(3, 4), graphs=1, breaks=1, jit_kwargs=spec)


# -- what still runs as plain Python as a whole ------------------------------------------
def introspects(x):
    y = x * 2
    return locals()["y"]


def test_frame_introspection_runs_the_whole_function_plain():
    report = assert_same(introspects, X, graphs=0, breaks=1)
    assert "locals" in report.fallback
    assert report.break_reasons[0]["lineno"] == introspects.__code__.co_firstlineno + 2
    with pytest.raises(pijit.GraphBreakError, match="introspects"):
        pijit.jit(introspects, mode="PSJit")(X.copy())


def raises_at_capture(x):
    return x.reshape(5, 7)


def test_error_the_user_would_see_is_raised_unchanged():
    assert_same(raises_at_capture, X, graphs=0, breaks=1)


def copy_then_swap(items, x):
    """A slice of a list is a new list: item assignment into it works, the input is left
    alone (capture once made it a tuple: TypeError at the swap)."""
    items = items[:]
    items[0], items[-1] = items[-1], items[0]
    head = items[1:3]
    head.append(9)
    return items, head, x * 2.0


def test_a_list_slice_is_a_list():
    assert_same(copy_then_swap, [4, 5, 6, 7], X, graphs=None, breaks=None)


# -- constants in generated code ---------------------------------------------------------
def scalar_constants_with_equal_bytes(x):
    # The generated code's constants: each NumPy scalar's raw bytes equal another's.
    return (x + 1, np.uint8(0), np.False_, b"\x00", np.float64(-0.0),
            np.int64(-2 ** 63), np.float32(1.0), np.int32(1065353216), (np.uint8(1), 1),
            (np.True_, 1))


def test_constants_with_equal_bytes_stay_apart():
    """The bytecode package merged constants whose marshal dumps are equal, and marshal
    writes a NumPy scalar as its raw bytes: np.False_ came back as np.uint8(0)."""
    report = assert_same(scalar_constants_with_equal_bytes, X, graphs=1, breaks=0)
    assert report.op_count >= 1


# -- long sequences ------------------------------------------------------------------------
def first_plus(xs, x):
    return x * 2.0 + xs[0]


@pytest.mark.parametrize("kind", [list, tuple])
def test_a_sequence_too_long_to_unroll_is_not_guarded_item_by_item(kind):
    """A 500-item list or tuple is opaque: its items are neither wrapped nor guarded (each
    a guard, and a new value in any of them a recompile); reading one breaks the graph."""
    xs = kind(range(500))
    report = assert_same(first_plus, xs, X, graphs=2, breaks=1)
    assert len(report.guards) < 20, len(report.guards)
    jitted = pijit.jit(first_plus, jit_config={"adaptive": False})
    for k in range(3):
        jitted(kind(range(k, 500 + k)), X)
    assert pijit.stats(jitted)["cache_misses"] == 1


def positional_only(x, k, /, shift=1.0):
    return x * k + shift


def passes_a_positional_only_by_keyword(x):
    y = x * 2.0
    return positional_only(y, k=3.0)        # plain Python raises TypeError


def test_a_positional_only_parameter_passed_by_keyword_raises():
    report = assert_same(passes_a_positional_only_by_keyword, X, graphs=1, breaks=1,
                         ops=["mul"])
    assert "positional_only" in report.break_reasons[0]["reason"], report


def scaled_and_shifted(x, scale=1.0, shift=0.0):
    return x * scale + shift


DOUBLED = functools.partial(scaled_and_shifted, scale=2.0)


def partial_with_a_keyword_overridden(x):
    return DOUBLED(x, scale=3.0, shift=1.0)     # the call's scale wins, as in Python


def test_a_call_keyword_overrides_the_partial_keyword():
    assert_same(partial_with_a_keyword_overridden, X, ops=["mul", "add"])


def int_and_ellipsis(x):
    y = x[0, ...]               # a 0-d array, not a scalar: every axis taken, with `...`
    return y, type(y), y.ndim, y * 2.0, x[..., 1]      # type and ndim read from its Meta


def test_an_int_with_an_ellipsis_is_a_0d_array():
    assert_same(int_and_ellipsis, X[0], ops=["getitem", "mul"])
    assert_same(int_and_ellipsis, X, ops=["getitem", "mul"])


class DynamicAttributes:
    """Every attribute made by __getattr__, which says so."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        print("made", name)
        return np.sin


def calls_a_made_attribute(x, obj):
    y = x * 2
    return obj.fn(y) + 1


def test_a_method_call_of_an_unknown_object_runs_its_getattr_once():
    # capture asked for obj.fn to see whether it was a random generator's draw, running
    # __getattr__ once more than plain Python (which printed "made fn" once)
    report = assert_same(calls_a_made_attribute, X, DynamicAttributes(), graphs=2, breaks=1)
    assert "method 'fn'" in report.break_reasons[0]["reason"], report


class PrintingProperty:
    @property
    def fn(self):
        print("getter")
        return np.tan


def calls_a_property_that_breaks(x, obj):
    y = x * 2
    return obj.fn(y) + 1


def test_a_method_load_breaking_in_its_property_getter_keeps_the_null():
    # 3.11's LOAD_METHOD of a property pushes NULL and the getter's result; the getter
    # (inlined) breaks at its print, at that instruction: the residual span must reach the
    # call taking the NULL (flow.null_slots), not store it for a resume function
    # (UnboundLocalError on 3.11)
    report = assert_same(calls_a_property_that_breaks, X, PrintingProperty(), graphs=2,
                         breaks=2)
    assert "PrintingProperty.fn (inlined)" in report.break_reasons[0]["reason"], report


def linspace_step(x, n):
    y, step = np.linspace(x[0], x[1], n, retstep=True)
    return y * 2, isinstance(step, float), type(step).__name__


def linspace_step_dtype(x, n):
    y, step = np.linspace(x[0], x[1], n, retstep=True)
    return y + 1, step.dtype


@pytest.mark.parametrize("n", [0, 1, 2, 5])
@pytest.mark.parametrize("fn", [linspace_step, linspace_step_dtype])
def test_linspace_step_type_follows_the_sample_count(fn, n):
    """np.linspace(a, b, n, retstep=True) on float32 bounds: the step is a Python float (NaN)
    for n < 2, which is a float and has no dtype (the AttributeError of capture falls back to
    plain Python, which raises it); a float32 scalar from 2 samples on."""
    x = np.array([1.0, 3.0], np.float32)
    if fn is linspace_step_dtype and n < 2:
        assert_same(fn, x, n, graphs=0)
    else:
        assert_same(fn, x, n, ops=["linspace"])


def or_and_defaults(x, scale, shift):
    return x * (scale or 2.0) + (shift and x[0])


@pytest.mark.parametrize("scale,shift", [(0.0, 0), (3.0, 0), (0.0, 1.5), (-2.0, 4)])
def test_or_and_of_constants_pick_an_operand(scale, shift):
    """`a or b` / `a and b` on specialised scalars (3.11: JUMP_IF_TRUE_OR_POP and
    JUMP_IF_FALSE_OR_POP) keep the operand the truth test picks, and only it, on the stack."""
    report = assert_same(or_and_defaults, np.arange(1.0, 4.0), scale, shift)
    assert ["mul", "add"] == [op for op in report.ops_per_graph[0] if op in ("mul", "add")]


def fstring_fields(x, scale, name):
    label = f"{name!r}:{scale:.2f}|{scale!s:>6}|{name}"
    return x * scale, label


def test_fstring_conversions_and_specs_of_constants():
    """f-string fields with a conversion (!r, !s), a format spec, both or neither, folded at
    capture (3.11/3.12: FORMAT_VALUE's flags; 3.13: CONVERT_VALUE, FORMAT_WITH_SPEC)."""
    report = assert_same(fstring_fields, X, 1.5, "w")
    assert report.ops_per_graph == [["mul"]], report


def keyed_by_arguments(x, name, other):
    d = {name: x * 2.0, other: x + 1.0}
    y = x - {name: 3.0}[name]           # x below the map on the stack
    return d[name] - d[other] * y, d


def test_dicts_keyed_by_specialised_arguments():
    """{k: v} with keys known at capture but not in the code (BUILD_MAP): pairs in order."""
    report = assert_same(keyed_by_arguments, X, "a", "b")
    assert report.ops_per_graph == [["mul", "add", "sub", "mul", "sub"]], report



def list_iadd_seen_by_alias(a):
    out = [1]
    kept, held = out, (out,)
    out += [a[0], 2]
    out += (3,)
    return kept, held, a + 1


def list_imul_seen_by_alias(a, n):
    out = [a[0], 1]
    kept = out
    out *= n
    return kept, a + 1


def callers_list_imul(a, out):
    out *= 2
    return a + 1


def callers_lists_added(a, x, y):
    return x + y, x * 2, a + 1


@pytest.mark.parametrize("fn, args, breaks", [
    (list_iadd_seen_by_alias, (np.arange(3.0),), 0),
    (list_imul_seen_by_alias, (np.arange(3.0), 3), 0),
    (list_imul_seen_by_alias, (np.arange(3.0), -1), 0),
    (callers_list_imul, (np.arange(3.0), [1, 2]), 1),       # the caller's: Python changes it
    (callers_lists_added, (np.arange(3.0), [1], [2.5]), 0),
], ids=["+= seen by an alias", "*= 3 seen by an alias", "*= -1", "caller's *=", "caller's +"])
def test_inplace_operators_change_the_list_itself(fn, args, breaks):
    # list += / *= change the list every name holding it sees (capture made a new one: the
    # alias kept [1]); a list read from the caller made capture fail with an internal error
    assert_same(fn, *args, graphs=1, breaks=breaks)


# -- a loop that changes the length of the list it iterates -------------------------------

def appends_to_its_input(xs, x):
    out = []
    for v in xs:
        if v > 2 and len(xs) < 6:
            xs.append(v - 1)
        out.append(v * x)
    return out


def appends_to_its_own(x):
    todo = [3, 1]
    seen = []
    for i, v in enumerate(todo):
        seen.append(v * x + i)
        if v > 1:
            todo.append(v - 1)
    return seen


def extends_one_it_zips(x):
    a, b = [1.0, 2.0], [5.0, 6.0, 7.0, 8.0]
    total = x * 0.0
    for u, w in zip(a, b):
        total = total + u * w
        if len(a) < 4:
            a += [u + 10.0]
    return total


def appends_to_another_input(lists, x):
    total = x * 0.0
    for v in lists[0]:
        total = total + v
        if len(lists[1]) < 4:
            lists[1].append(v + 1.0)
    return total


SHARED = [1.0]


@pytest.mark.parametrize("fn, args", [
    (appends_to_its_input, ([1, 3, 5], X)),
    (appends_to_another_input, ([SHARED, SHARED], X)),      # one list by two paths
    (appends_to_its_own, (X,)),
    (extends_one_it_zips, (X,)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_a_loop_growing_the_list_it_iterates_sees_the_new_items(fn, args):
    """Python's list iterator reads the list at each step, so items appended in the loop are
    iterated too; unrolling read the items once at GET_ITER and stopped at the old length
    ([1, 3, 5] where plain Python gives [1, 3, 5, 2, 4, 3, 2]). The loop now breaks."""
    report = assert_same(fn, *args, graphs=None, breaks=None)
    reason = "may be one appended to" if fn is appends_to_another_input \
        else "changes the length of a list it iterates"
    assert any(reason in r["reason"] for r in report.break_reasons), report.break_reasons
