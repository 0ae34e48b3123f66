"""The NumPy op table against NumPy itself: every inferred Meta equals Meta.of(real result)."""
from __future__ import annotations

import math
import operator
import types
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pijit.capture import numpy_rules as R
from pijit.capture.numpy_rules import Unsupported
from pijit.graph.ir import Meta, PY_SCALARS

from op_cases import CASES

PY_FLOAT, PY_INT, PY_BOOL = (Meta(t, np.dtype(t)) for t in (float, int, bool))


def meta_of(value):
    if isinstance(value, tuple):
        return tuple(meta_of(v) for v in value)
    return Meta.of(value)


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def check_rule(rule, real_args, real_kwargs, meta_args, meta_kwargs):
    """Run the op for real and assert the rule infers the same Meta; returns the real result."""
    expected = quiet(rule.fn, *real_args, **real_kwargs)
    got = rule.infer(meta_args, meta_kwargs)
    assert got == meta_of(expected), (rule.name, got, meta_of(expected))
    return expected


# ---------------------------------------------------------------------------------------------
# Tracing the op cases: every op on a traced value goes through the table.

def _is_value(x):
    return type(x) is np.ndarray or isinstance(x, np.generic) or type(x) in PY_SCALARS


class Traced:
    """A graph value stand-in carrying its real value; every op is checked against the table."""
    __array_priority__ = 1000
    __array_ufunc__ = None  # make NumPy defer reflected operators to us

    def __init__(self, value):
        self.value = value

    def __getattr__(self, name):
        meta = Meta.of(self.value)
        if name in ("shape", "ndim", "dtype", "size", "itemsize", "nbytes"):
            got = R.static_attr(meta, name)
            assert got == getattr(self.value, name)
            return got
        rule = R.lookup_attr(meta, name)
        if rule is not None:
            return _apply(rule, (self,), {})
        rule = R.lookup_method(meta, name)
        if rule is None:
            raise AssertionError(f"no rule for method/attribute {name} of {meta}")
        return lambda *a, **k: _apply(rule, (self,) + a, k)

    def __len__(self):
        return len(self.value)

    def __bool__(self):
        raise AssertionError("op cases are straight-line")


def _unwrap(obj, to_meta):
    if type(obj) is Traced:
        return Meta.of(obj.value) if to_meta else obj.value
    if type(obj) is TypeProxy:
        return obj.tp
    if type(obj) in (tuple, list):
        return type(obj)(_unwrap(o, to_meta) for o in obj)
    if type(obj) is dict:
        return {k: _unwrap(v, to_meta) for k, v in obj.items()}
    if type(obj) is slice:
        return slice(*(_unwrap(p, to_meta) for p in (obj.start, obj.stop, obj.step)))
    return obj


def _wrap(result):
    if type(result) is tuple:
        return tuple(_wrap(r) for r in result)
    return Traced(result) if _is_value(result) else result


APPLIED = set()


def _apply(rule, args, kwargs):
    APPLIED.add(rule.name)
    expected = check_rule(rule, _unwrap(args, False), _unwrap(kwargs, False),
                          _unwrap(args, True), _unwrap(kwargs, True))
    return _wrap(expected)


def _operator(name, reflected=False):
    rule = R.lookup_operator(name)
    if reflected:
        return lambda self, other: _apply(rule, (other, self), {})
    return lambda self, *other: _apply(rule, (self,) + other, {})


for _name, _dunder in [("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "truediv"),
                       ("floordiv", "floordiv"), ("mod", "mod"), ("pow", "pow"),
                       ("matmul", "matmul"), ("lshift", "lshift"), ("rshift", "rshift"),
                       ("and", "and"), ("or", "or"), ("xor", "xor")]:
    setattr(Traced, f"__{_dunder}__", _operator(_name))
    setattr(Traced, f"__r{_dunder}__", _operator(_name, reflected=True))
for _name in ("lt", "le", "eq", "ne", "gt", "ge", "neg", "pos", "invert", "getitem"):
    setattr(Traced, f"__{_name}__", _operator(_name))
Traced.__hash__ = None


class ModuleProxy:
    """np / math / np.linalg with every traced call checked against lookup_call."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        obj = getattr(self._module, name)
        if isinstance(obj, types.ModuleType):
            return ModuleProxy(obj)
        rule = R.lookup_call(obj) if callable(obj) else None
        if rule is None:
            if not callable(obj) or isinstance(obj, type) and not issubclass(obj, np.generic):
                return obj
            return lambda *a, **k: _untraced(obj, name, a, k)
        if isinstance(obj, type):
            return TypeProxy(obj, rule)
        return lambda *a, **k: _call(rule, obj, a, k)


class TypeProxy:
    """np.float32 and friends: callable through the table, usable as a dtype once unwrapped."""

    def __init__(self, tp, rule):
        self.tp, self.rule = tp, rule

    def __call__(self, *args, **kwargs):
        return _call(self.rule, self.tp, args, kwargs)


def _untraced(fn, name, args, kwargs):
    if any(type(x) is Traced for x in _flatten((args, kwargs))):
        raise AssertionError(f"no rule for {name}")
    return fn(*args, **kwargs)


def _flatten(obj):
    if type(obj) in (tuple, list):
        return [x for o in obj for x in _flatten(o)]
    if type(obj) is dict:
        return [x for o in obj.values() for x in _flatten(o)]
    if type(obj) is slice:
        return _flatten([obj.start, obj.stop, obj.step])
    return [obj]


def _call(rule, fn, args, kwargs):
    args, kwargs = _unwrap_types(args), _unwrap_types(kwargs)
    if not any(type(x) is Traced for x in _flatten((args, kwargs))):
        # An all-constant call: capture folds it, but the rule must still agree.
        APPLIED.add(rule.name)
        result = fn(*args, **kwargs)
        if _is_value(result) or type(result) is tuple:
            got = rule.infer(args, kwargs)
            assert got == meta_of(result), (rule.name, got)
        return result
    return _apply(rule, args, kwargs)


def _unwrap_types(obj):
    if type(obj) is TypeProxy:
        return obj.tp
    if type(obj) in (tuple, list):
        return type(obj)(_unwrap_types(o) for o in obj)
    if type(obj) is dict:
        return {k: _unwrap_types(v) for k, v in obj.items()}
    return obj


def _builtin_abs(x):
    if type(x) is Traced:
        return _apply(R.lookup_call(abs), (x,), {})
    return abs(x)


def traced_fn(fn):
    g = dict(fn.__globals__)
    g.update(np=ModuleProxy(np), math=ModuleProxy(math), abs=_builtin_abs)
    return types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)


@pytest.mark.parametrize("endpoint", [True, False])
def test_linspace_matrix(endpoint):
    """The step of 0 samples, or of 1 with the endpoint, is a Python float (NaN), not a scalar
    of the bounds' dtype as for more samples."""
    rule = R.lookup_call(np.linspace)
    for start in (np.float32(1.0), np.float16(-2.0), np.int8(3), 1.5):
        for num in (0, 1, 2, 5):
            for kw in ({"retstep": True}, {"retstep": True, "dtype": np.int16}, {}):
                kwargs = {"endpoint": endpoint, **kw}
                _check_or_both_raise(rule, (start, np.float32(4.0), num), kwargs,
                                     (Meta.of(start), Meta.of(np.float32(4.0)), num), kwargs)


def _meta_args(value):
    if type(value) is np.ndarray or isinstance(value, np.generic):
        return Meta.of(value)
    if type(value) in (tuple, list):
        return type(value)(_meta_args(v) for v in value)
    if type(value) is dict:
        return {k: _meta_args(v) for k, v in value.items()}
    return value


A16 = np.arange(6, dtype=np.float16).reshape(2, 3)
FILLED = [  # (callable, args, kwargs): arrays and NumPy scalars are graph values
    (np.full, ((2, 3), A16[0]), {}), (np.full, ((2, 3), np.float32(2.0)), {}),
    (np.full, ((2, 3), [1, 2.5, 3]), {}), (np.full, ((3,), np.array([7], np.int8)), {}),
    (np.full_like, (A16, np.int8(3)), {}), (np.full_like, (A16, [1, 2, 3]), {"dtype": None}),
    (np.full_like, (A16.astype(np.int8), np.float32(2.5)), {"shape": (4,)}),
    (np.full_like, (A16, A16[1]), {}),
    (np.reshape, (A16,), {"shape": (3, 2)}), (np.ndarray.reshape, (A16, 6), {}),
    (np.ndarray.reshape, (A16, 3, 2), {"order": "F"}), (np.reshape, (A16[:0], (3, 0)), {}),
    (math.acosh, (np.float32(1.5),), {}), (math.acosh, (1.5,), {}),
    (np.repeat, (A16, [1, 2, 0]), {"axis": 1}), (np.repeat, (A16, [2]), {"axis": 0}),
    (np.tile, (A16, (0, 2)), {}), (np.tile, (A16, 0), {}), (np.tile, (A16, (2, 1, 3)), {}),
]


@pytest.mark.parametrize("fn,args,kwargs", FILLED,
                         ids=[f"{getattr(c[0], '__name__', c[0])}-{i}" for i, c in
                              enumerate(FILLED)])
def test_fill_values_keyword_shapes_and_domains(fn, args, kwargs):
    """Forms no op case reaches: fills given as a graph array, a list or a NumPy scalar (the
    probe fills with one element of them), reshape(shape=...), a math function whose first
    probe value is outside its domain (acosh(0.5)), repeat by a list of counts, tile by 0."""
    rule = R.lookup_method(Meta.of(A16), "reshape") if fn is np.ndarray.reshape \
        else R.lookup_call(fn)
    try:
        got = rule.infer(_meta_args(args), _meta_args(kwargs))
    except Exception as e:
        got = e
    assert got == meta_of(quiet(fn, *args, **kwargs)), (rule.name, got)


def _plain(result):
    if type(result) is Traced:
        return result.value
    if type(result) in (tuple, list):
        return type(result)(_plain(r) for r in result)
    return result


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_op_case(case):
    rng = np.random.default_rng(0)
    args = case.make_args(rng)
    expected = quiet(case.fn, *args)
    got = quiet(traced_fn(case.fn), *[Traced(a) if _is_value(a) else a for a in args])
    np.testing.assert_equal(_plain(got), expected)


def test_case_list_is_large_and_distinct():
    assert len(CASES) >= 90
    assert len({c.name for c in CASES}) == len(CASES)


# ---------------------------------------------------------------------------------------------
# A generated op x dtype x shape matrix from the table itself.

DTYPES = [np.dtype(t) for t in ("bool", "int8", "int32", "int64", "uint8", "float16",
                                "float32", "float64", "complex128")]
SHAPE_PAIRS = [((), ()), ((3,), ()), ((2, 3), (3,)), ((2, 1), (1, 4)), ((0, 3), (1,)),
               ((4,), (4,))]


def sample(shape, dtype, rng):
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(1, 4, shape).astype(dtype)
    return (rng.uniform(0.2, 0.9, shape)).astype(dtype)


def as_value(arr, kind):
    """kind: 'array', 'npscalar' or 'pyscalar' form of a 0-d sample."""
    if kind == "array":
        return arr
    if kind == "npscalar":
        return arr[()]
    return arr.item()


UFUNCS = sorted({r for r in R.all_call_rules().values() if isinstance(r.fn, np.ufunc)},
                key=lambda r: r.name)


@pytest.mark.parametrize("rule", [r for r in UFUNCS if r.fn.nin == 1], ids=lambda r: r.name)
def test_unary_ufunc_matrix(rule):
    rng = np.random.default_rng(1)
    for dtype in DTYPES:
        for shape, _ in SHAPE_PAIRS[:4]:
            for kind in ("array", "npscalar", "pyscalar"):
                if kind != "array" and shape:
                    continue
                x = as_value(sample(shape, dtype, rng), kind)
                _check_or_both_raise(rule, (x,), {}, (Meta.of(x),), {})


def _check_or_both_raise(rule, args, kwargs, margs, mkwargs, allow_unsupported=False):
    try:
        expected = quiet(rule.fn, *args, **kwargs)
    except ZeroDivisionError:
        return  # Python scalars divided by a zero sample: a value-dependent run-time error
    except Exception as e:
        assert_raises_like(e, lambda: rule.infer(margs, mkwargs))
        return
    try:
        got = rule.infer(margs, mkwargs)
    except Unsupported:
        if allow_unsupported:
            return
        raise
    assert got == meta_of(expected), (rule.name, args, got, meta_of(expected))


BINARY_OPERANDS = ["array", "npscalar", "pyscalar"]


@pytest.mark.parametrize("name", ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
                                  "and", "or", "xor", "lshift", "lt", "eq", "ge"])
def test_binary_operator_matrix(name):
    rule = R.lookup_operator(name)
    rng = np.random.default_rng(2)
    for da in DTYPES[::2] + [np.dtype("uint8"), np.dtype("float32")]:
        for db in DTYPES[::2] + [np.dtype("int8")]:
            for sa, sb in SHAPE_PAIRS:
                for ka in BINARY_OPERANDS:
                    for kb in BINARY_OPERANDS:
                        if (ka != "array" and sa) or (kb != "array" and sb):
                            continue
                        a = as_value(sample(sa, da, rng), ka)
                        b = as_value(sample(sb, db, rng), kb)
                        _check_or_both_raise(rule, (a, b), {}, (Meta.of(a), Meta.of(b)), {},
                                             allow_unsupported=name == "pow")


@pytest.mark.parametrize("rule", [r for r in UFUNCS if r.fn.nin == 2], ids=lambda r: r.name)
def test_binary_ufunc_matrix(rule):
    rng = np.random.default_rng(3)
    for da in (np.dtype("int32"), np.dtype("float32"), np.dtype("float64"), np.dtype("bool")):
        for db in (np.dtype("int64"), np.dtype("float32")):
            for sa, sb in SHAPE_PAIRS[:4]:
                a = sample(sa, da, rng)
                b = sample(sb, db, rng)
                _check_or_both_raise(rule, (a, b), {}, (Meta.of(a), Meta.of(b)), {})
                # a weak Python scalar on the right, as a graph value and as a constant
                _check_or_both_raise(rule, (a, 2.0), {}, (Meta.of(a), PY_FLOAT), {})
                _check_or_both_raise(rule, (a, 2), {}, (Meta.of(a), 2), {})


REDUCTION_NAMES = sorted(R.REDUCTIONS)


@pytest.mark.parametrize("name", REDUCTION_NAMES)
def test_reduction_matrix(name):
    rule = R.lookup_call(getattr(np, name))
    rng = np.random.default_rng(4)
    axes_for = {0: [None], 1: [None, 0, -1], 3: [None, 0, 2, (0, 2), -1, (1,)]}
    for dtype in (np.dtype("bool"), np.dtype("int32"), np.dtype("float32"),
                  np.dtype("complex128")):
        for shape in ((), (5,), (2, 3, 4), (0, 3, 2)):
            x = sample(shape, dtype, rng)
            for axis in axes_for[len(shape)]:
                kws = [{"axis": axis}]
                if name not in ("cumsum", "cumprod", "nancumsum", "nancumprod", "argmax",
                                "argmin", "nanargmax", "nanargmin", "count_nonzero"):
                    kws.append({"axis": axis, "keepdims": True})
                for kw in kws:
                    _check_or_both_raise(rule, (x,), kw, (Meta.of(x),), kw)
                    method = R.lookup_method(Meta.of(x), name)
                    if method is not None:
                        _check_or_both_raise(method, (x,), kw, (Meta.of(x),), kw)


# ---------------------------------------------------------------------------------------------
# Errors: the rule raises when NumPy raises; Unsupported for data-dependent shapes.

A23 = Meta.array((2, 3), np.float64)


def assert_raises_like(numpy_error: Exception, infer):
    """infer() raises an exception of NumPy's class (or a public base of it, such as
    TypeError for NumPy's private UFuncTypeError), not any exception: an AttributeError of
    a broken rule is not "raising like NumPy"."""
    got = None
    try:
        infer()
    except Exception as e:
        got = e
    assert got is not None, f"the rule raised nothing, NumPy {numpy_error!r}"
    assert type(got) is not Exception and isinstance(numpy_error, type(got)), (
        f"the rule raised {got!r}, NumPy {numpy_error!r}")


Z23 = np.zeros((2, 3))

# (rule call, the same operation in NumPy)
RAISING = [
    (lambda: R.lookup_operator("add").infer((A23, Meta.array((4,), np.float64)), {}),
     lambda: Z23 + np.zeros(4)),
    (lambda: R.lookup_operator("matmul").infer((A23, A23), {}), lambda: Z23 @ Z23),
    (lambda: R.lookup_call(np.sum).infer((A23,), {"axis": 2}), lambda: np.sum(Z23, axis=2)),
    (lambda: R.lookup_call(np.sum).infer((A23,), {"axis": (0, 0)}),
     lambda: np.sum(Z23, axis=(0, 0))),
    (lambda: R.lookup_method(A23, "reshape").infer((A23, 4, 2), {}),
     lambda: Z23.reshape(4, 2)),
    (lambda: R.lookup_method(A23, "reshape").infer((A23, -1, -1), {}),
     lambda: Z23.reshape(-1, -1)),
    (lambda: R.lookup_call(np.concatenate).infer(((A23, Meta.array((2, 4), np.float64)),), {}),
     lambda: np.concatenate((Z23, np.zeros((2, 4))))),
    (lambda: R.lookup_call(np.stack).infer(((A23, Meta.array((3, 2), np.float64)),), {}),
     lambda: np.stack((Z23, np.zeros((3, 2))))),
    (lambda: R.lookup_call(np.add).infer((A23, Meta.array((2, 3), np.int64)),
                                         {"dtype": np.int32, "casting": "safe"}),
     lambda: np.add(Z23, np.zeros((2, 3), np.int64), dtype=np.int32, casting="safe")),
    (lambda: R.lookup_operator("getitem").infer((A23, (0, 0, 0)), {}), lambda: Z23[0, 0, 0]),
    (lambda: R.lookup_operator("getitem").infer((A23, (5,)), {}), lambda: Z23[5,]),
    (lambda: R.lookup_operator("getitem").infer((A23, 2.5), {}), lambda: Z23[2.5]),
    (lambda: R.lookup_method(A23, "transpose").infer((A23, 0, 0), {}),
     lambda: Z23.transpose(0, 0)),
    (lambda: R.lookup_call(np.max).infer((Meta.array((0, 3), np.float64),), {"axis": 0}),
     lambda: np.max(np.zeros((0, 3)), axis=0)),
    (lambda: R.lookup_call(np.einsum).infer(("ij,jk->ik", A23, A23), {}),
     lambda: np.einsum("ij,jk->ik", Z23, Z23)),
    (lambda: R.lookup_operator("sub").infer((Meta.array((3,), bool), PY_BOOL), {}),
     lambda: np.zeros(3, bool) - True),
    (lambda: R.lookup_operator("add").infer((Meta.array((3,), np.int8), 300), {}),
     lambda: np.zeros(3, np.int8) + 300),
    (lambda: R.lookup_method(A23, "reshape").infer((A23,), {"shape": (3, 2)}),
     lambda: Z23.reshape(shape=(3, 2))),
    (lambda: R.lookup_method(A23, "reshape").infer((A23, 3), {}), lambda: Z23.reshape(3)),
    (lambda: R.lookup_call(np.zeros).infer(((2, -1),), {}), lambda: np.zeros((2, -1))),
]


@pytest.mark.parametrize("call,numpy_call", RAISING)
def test_rules_raise_where_numpy_raises(call, numpy_call):
    with pytest.raises(Exception) as info:
        numpy_call()
    assert_raises_like(info.value, call)


@pytest.mark.parametrize("call", [
    lambda: R.lookup_call(np.nonzero).infer((A23,), {}),
    lambda: R.lookup_call(np.unique).infer((A23,), {}),
    lambda: R.lookup_call(np.where).infer((A23,), {}),
    lambda: R.lookup_call(np.arange).infer((Meta(int, np.dtype(int)),), {}),
    lambda: R.lookup_call(np.zeros).infer(((Meta(int, np.dtype(int)), 3),), {}),
    lambda: R.lookup_operator("pow").infer((PY_INT, PY_INT), {}),
    lambda: R.lookup_call(math.sqrt).infer((A23,), {}),
    lambda: R.lookup_call(np.squeeze).infer((Meta.array((None, 3), np.float64),), {}),
])
def test_unsupported(call):
    with pytest.raises(Unsupported):
        call()


def test_data_dependent_lengths_are_dynamic_dims():
    # masks select a count of items known at run time; slices by graph ints have a length
    # known at run time
    getitem = R.lookup_operator("getitem")
    assert getitem.infer((A23, Meta.array((2, 3), bool)), {}) == Meta.array((None,), np.float64)
    assert getitem.infer((A23, (Meta.array((2,), bool),)), {}) == \
        Meta.array((None, 3), np.float64)
    i = Meta(int, np.dtype(int))
    assert getitem.infer((A23, (1, slice(i, None))), {}) == Meta.array((None,), np.float64)
    assert getitem.infer((A23, (slice(None, i), slice(1, 3))), {}) == \
        Meta.array((None, 2), np.float64)
    with pytest.raises(Unsupported):
        getitem.infer((A23, slice(Meta(float, np.dtype(float)), None)), {})
    with pytest.raises(IndexError):
        getitem.infer((A23, Meta.array((3,), bool)), {})


def test_ufunc_out_is_the_result():
    add = R.lookup_call(np.add)
    assert add.infer((A23, A23), {"out": A23}) == A23
    assert add.infer((A23, 1.0), {"out": (A23,)}) == A23
    for out in (Meta.array((2, 3), np.float32), Meta.array((3, 3), np.float64)):
        with pytest.raises(Unsupported):       # a cast or a broadcast into out: plain Python
            add.infer((A23, A23), {"out": out})
    with pytest.raises(Unsupported):
        R.lookup_call(np.clip).infer((A23, 0, 1), {"out": A23})


# ---------------------------------------------------------------------------------------------
# Dynamic dims

DYN = Meta.array((None, 3), np.float32)


def test_known_dims_win_over_dynamic_ones():
    """Where NumPy requires two dims to be equal, a dynamic one equals the known one: the
    result keeps the known length (kernels are sized by it)."""
    known = Meta.array((4, 3), np.float32)
    for pair in ((DYN, known), (known, DYN)):
        assert R.lookup_call(np.stack).infer((pair,), {}) == Meta.array((2, 4, 3), np.float32)
        assert R.lookup_call(np.concatenate).infer((pair,), {"axis": 1}) == \
            Meta.array((4, 6), np.float32)


def test_squeeze_of_a_dynamic_array_by_axis():
    """squeeze() of an array with a dynamic dim depends on whether that dim is 1, unless an
    axis, positional or by keyword, names the dims that go."""
    def infer(rule, args, kwargs):
        try:
            return rule.infer(args, kwargs)
        except Unsupported as e:
            return f"Unsupported: {e}"

    dyn = Meta.array((None, 1, 3), np.float32)
    for rule in (R.lookup_call(np.squeeze), R.lookup_method(dyn, "squeeze")):
        assert infer(rule, (dyn, 1), {}) == Meta.array((None, 3), np.float32)
        assert infer(rule, (dyn,), {"axis": (1,)}) == Meta.array((None, 3), np.float32)
        assert "dynamic dim" in infer(rule, (dyn,), {})


def test_dynamic_dims():
    assert R.lookup_operator("add").infer((DYN, Meta.array((4, 1), np.float64)), {}) == \
        Meta.array((4, 3), np.float64)
    assert R.lookup_operator("mul").infer((DYN, 2.0), {}) == DYN
    assert R.lookup_call(np.sum).infer((DYN,), {"axis": 1}) == Meta.array((None,), np.float32)
    assert R.lookup_attr(DYN, "T").infer((DYN,), {}) == Meta.array((3, None), np.float32)
    assert R.lookup_method(DYN, "reshape").infer((DYN, -1), {}) == \
        Meta.array((None,), np.float32)
    assert R.lookup_operator("getitem").infer((DYN, (slice(None), 0)), {}) == \
        Meta.array((None,), np.float32)
    assert R.lookup_operator("matmul").infer((DYN, Meta.array((3, 5), np.float32)), {}) == \
        Meta.array((None, 5), np.float32)
    assert R.lookup_call(np.concatenate).infer(((DYN, DYN),), {}) == DYN
    # a slice of a dynamic dim has a dynamic length (a[mask][1:], np.unique(x)[::2])
    assert R.lookup_operator("getitem").infer((DYN, slice(1, None)), {}) == DYN
    assert R.lookup_operator("getitem").infer((DYN, (slice(None, None, -2), 1)), {}) == \
        Meta.array((None,), np.float32)
    with pytest.raises(Unsupported):
        R.static_attr(DYN, "shape")
    assert R.static_attr(DYN, "ndim") == 2


def test_static_attrs():
    m = Meta.array((2, 3), np.int32)
    assert [R.static_attr(m, n) for n in ("shape", "ndim", "size", "itemsize", "nbytes")] == \
        [(2, 3), 2, 6, 4, 24]


# ---------------------------------------------------------------------------------------------
# Hypothesis: random shapes, dtypes, axes and indices.

dtypes_st = st.sampled_from(DTYPES)
shape_st = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)


@settings(max_examples=150, deadline=None)
@given(shape_st, shape_st, dtypes_st, dtypes_st,
       st.sampled_from(["add", "mul", "truediv", "floordiv", "lt", "and", "pow"]))
def test_hyp_elementwise(sa, sb, da, db, name):
    rng = np.random.default_rng(0)
    # make the shapes broadcastable most of the time
    sb = tuple(d if d == 1 or i % 2 else 1 for i, d in enumerate(sb))
    a, b = sample(sa, da, rng), sample(sb, db, rng)
    _check_or_both_raise(R.lookup_operator(name), (a, b), {}, (Meta.of(a), Meta.of(b)), {})


@settings(max_examples=150, deadline=None)
@given(shape_st, dtypes_st, st.data(),
       st.sampled_from(["sum", "mean", "max", "argmin", "any", "std", "cumsum", "prod"]))
def test_hyp_reduction(shape, dtype, data, name):
    x = sample(shape, dtype, np.random.default_rng(0))
    nd = len(shape)
    axis = data.draw(st.one_of(
        st.none(), st.integers(-nd - 1, nd),
        st.lists(st.integers(-nd, max(nd - 1, 0)), max_size=nd).map(tuple)))
    kw = {"axis": axis}
    if name not in ("argmin", "cumsum") and data.draw(st.booleans()):
        kw["keepdims"] = True
    rule = R.lookup_call(getattr(np, name))
    _check_or_both_raise(rule, (x,), kw, (Meta.of(x),), kw)


def _index_item(draw, dim):
    kind = draw(st.sampled_from(["int", "slice", "none", "array", "list", "ell"]))
    if kind == "int":
        return draw(st.integers(-dim - 1, dim))
    if kind == "slice":
        return slice(draw(st.one_of(st.none(), st.integers(-5, 5))),
                     draw(st.one_of(st.none(), st.integers(-5, 5))),
                     draw(st.sampled_from([None, 1, 2, -1, -2])))
    if kind == "none":
        return None
    if kind == "array":
        n = draw(st.integers(0, 3))
        return np.zeros((n,) if draw(st.booleans()) else (1, n), np.int64)
    if kind == "list":
        return [0] * draw(st.integers(0, 2))
    return Ellipsis


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=0, max_size=4).map(tuple), st.data())
def test_hyp_getitem(shape, data):
    x = np.zeros(shape)
    items = tuple(_index_item(data.draw, 3) for _ in range(data.draw(st.integers(0, 4))))
    idx = items[0] if len(items) == 1 and data.draw(st.booleans()) else items
    # graph-value index arrays: ndarray items become Metas
    midx = tuple(Meta.of(i) if type(i) is np.ndarray else i for i in items) \
        if type(idx) is tuple else (Meta.of(idx) if type(idx) is np.ndarray else idx)
    rule = R.lookup_operator("getitem")
    _check_or_both_raise(rule, (x, idx), {}, (Meta.of(x), midx), {})



@pytest.mark.parametrize("shape, idx", [
    ((1, 1), (None, [], Ellipsis, 0)),                  # found by test_hyp_getitem
    ((2, 5, 3), (slice(None), [0, 1, 0], Ellipsis, [1, 2, 0])),
    ((2, 5, 3), (Ellipsis, [0, 1, 0], [1, 2, 0])),
    ((2, 5, 3), (Ellipsis, 0, [1, 2])),
    ((4, 5, 6), (None, [0, 1], None, [1, 2])),
])
def test_getitem_advanced_indices_apart_put_their_dims_first(shape, idx):
    """Advanced indices with anything between them, an ellipsis of no axes too, give their
    broadcast dims first (NumPy); side by side they keep their place."""
    x = np.zeros(shape)
    _check_or_both_raise(R.lookup_operator("getitem"), (x, idx), {}, (Meta.of(x), idx), {})


# ---------------------------------------------------------------------------------------------
# Single-array table entries over dtypes x shapes: (callable, extra args, kwargs).

UNARY_CALLS = [
    (np.transpose, (), {}), (np.ravel, (), {}), (np.copy, (), {}), (np.flip, (), {}),
    (np.expand_dims, (0,), {}), (np.squeeze, (), {}), (np.atleast_2d, (), {}),
    (np.real, (), {}), (np.imag, (), {}), (np.round, (1,), {}), (np.nan_to_num, (), {}),
    (np.clip, (0, 1), {}), (np.clip, (None, 2.5), {}), (np.sort, (), {}),
    (np.argsort, (), {"axis": None}), (np.zeros_like, (), {}),
    (np.ones_like, (), {"dtype": np.float32}), (np.full_like, (3,), {}),
    (np.empty_like, (), {"shape": (2, 2)}), (np.asarray, (), {}),
    (np.array, (), {"dtype": np.int16}), (np.float32, (), {}), (np.int64, (), {}),
    (np.complex64, (), {}), (np.bool_, (), {}), (np.linalg.norm, (), {}),
    (np.tile, ((2, 1),), {}), (np.repeat, (2,), {}), (np.where, (1.0, 0), {}),
    (np.repeat, ([1, 0, 4],), {}), (np.repeat, ([3],), {}),
    (np.reshape, (-1,), {}), (np.outer, (np.ones(2),), {}), (np.vdot, (np.ones(1),), {}),
    (np.broadcast_to, ((2, 1, 1),), {}), (np.sinc, (), {}), (abs, (), {}),
]
UNARY_METHODS = [
    ("astype", (np.float16,), {}), ("copy", (), {}), ("ravel", (), {}), ("flatten", (), {}),
    ("transpose", (), {}), ("squeeze", (), {}), ("round", (), {}), ("conj", (), {}),
    ("clip", (0, None), {}), ("reshape", (1, -1), {}), ("repeat", (3,), {}),
]


@pytest.mark.parametrize("fn,extra,kwargs", UNARY_CALLS,
                         ids=[getattr(c[0], "__name__", str(c[0])) for c in UNARY_CALLS])
def test_single_array_call_matrix(fn, extra, kwargs):
    rule = R.lookup_call(fn)
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        for shape in ((), (1,), (3,), (1, 1), (2, 1), (0, 1)):
            for kind in ("array", "npscalar", "pyscalar"):
                if kind != "array" and shape:
                    continue
                x = as_value(sample(shape, dtype, rng), kind)
                _check_or_both_raise(rule, (x,) + extra, kwargs, (Meta.of(x),) + extra, kwargs)


@pytest.mark.parametrize("name,extra,kwargs", UNARY_METHODS, ids=[m[0] for m in UNARY_METHODS])
def test_single_array_method_matrix(name, extra, kwargs):
    rng = np.random.default_rng(6)
    for dtype in DTYPES:
        for shape in ((), (1,), (3,), (2, 1), (0, 1)):
            for kind in ("array", "npscalar"):
                if kind != "array" and shape:
                    continue
                x = as_value(sample(shape, dtype, rng), kind)
                rule = R.lookup_method(Meta.of(x), name)
                _check_or_both_raise(rule, (x,) + extra, kwargs, (Meta.of(x),) + extra, kwargs)


CONTRACTION_SHAPES = [(), (3,), (2, 3), (3, 2), (4, 2, 3), (1, 3, 3)]


@pytest.mark.parametrize("fn", [np.matmul, np.dot, np.inner, np.outer, np.vdot, np.vecdot,
                                np.matvec, np.vecmat, operator.matmul],
                         ids=lambda f: f.__name__)
def test_contraction_matrix(fn):
    rule = R.lookup_call(fn) or R.lookup_operator("matmul")
    rng = np.random.default_rng(7)
    for sa in CONTRACTION_SHAPES:
        for sb in CONTRACTION_SHAPES:
            for da, db in ((np.float32, np.float64), (np.int32, np.int8), (bool, bool)):
                a, b = sample(sa, np.dtype(da), rng), sample(sb, np.dtype(db), rng)
                _check_or_both_raise(rule, (a, b), {}, (Meta.of(a), Meta.of(b)), {})


@pytest.mark.parametrize("spec", ["ij,jk->ik", "ij,jk", "ii", "ii->i", "ij->ji", "...ij,...jk",
                                  "i,i", "i,j->ij", "ij->", "bij,bjk->bik", "...i->..."])
def test_einsum_matrix(spec):
    rule = R.lookup_call(np.einsum)
    rng = np.random.default_rng(8)
    n_ops = spec.split("->")[0].count(",") + 1
    for shapes in [((3, 3), (3, 3)), ((2, 3), (3, 4)), ((3,), (3,)), ((2, 3, 3), (2, 3, 3)),
                   ((1, 3), (3, 1)), ((3,), (1,))]:
        ops = [sample(s, np.dtype(np.float32), rng) for s in shapes[:n_ops]]
        _check_or_both_raise(rule, (spec, *ops), {}, (spec, *map(Meta.of, ops)), {})


@pytest.mark.parametrize("fn,kind", [(np.concatenate, 0), (np.concatenate, 1),
                                     (np.concatenate, None), (np.stack, 0), (np.stack, -1),
                                     (np.hstack, 0), (np.vstack, 0), (np.column_stack, 0)],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_joining_matrix(fn, kind):
    rule = R.lookup_call(fn)
    rng = np.random.default_rng(9)
    kw = {} if fn in (np.hstack, np.vstack, np.column_stack) else {"axis": kind}
    for sa, sb in [((), ()), ((3,), (3,)), ((3,), (2,)), ((2, 3), (2, 3)), ((2, 3), (1, 3)),
                   ((2, 3), (2, 1)), ((2, 3), (3,))]:
        a, b = sample(sa, np.dtype(np.int32), rng), sample(sb, np.dtype(np.float32), rng)
        _check_or_both_raise(rule, ((a, b),), kw, ((Meta.of(a), Meta.of(b)),), kw)
