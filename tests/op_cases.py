"""Straight-line NumPy functions a user might write, with argument makers: the op-coverage corpus.

Each OpCase runs plain and jitted in differential tests; tests/test_numpy_rules.py also traces
each one op by op against the NumPy op table.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class OpCase:
    name: str
    fn: Callable
    make_args: Callable  # rng -> tuple of fresh arguments


def f64(rng, *shape):
    return rng.standard_normal(shape)


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def i64(rng, *shape, lo=-5, hi=6):
    return rng.integers(lo, hi, shape).astype(np.int64)


def i32(rng, *shape, lo=-5, hi=6):
    return rng.integers(lo, hi, shape).astype(np.int32)


def pos64(rng, *shape):
    return rng.uniform(0.5, 2.0, shape)


def bools(rng, *shape):
    return rng.random(shape) < 0.5


def c128(rng, *shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


CASES: list = []


def case(make_args):
    """Register the decorated function as an OpCase named after it."""
    def register(fn):
        CASES.append(OpCase(fn.__name__, fn, make_args))
        return fn
    return register


# --- operators --------------------------------------------------------------------------------

@case(lambda r: (f64(r, 3, 4), f64(r, 4)))
def arith_broadcast(x, y):
    return x + y, x - y, x * y, x / y, -x, +y


@case(lambda r: (f32(r, 5), 2.5))
def float32_weak_scalar(x, s):
    return x * s, x + 1, s - x, x / 3


@case(lambda r: (i64(r, 2, 3), i64(r, 3, lo=1)))
def int_floordiv_mod(x, y):
    return x // y, x % y, x / y, x ** 2


@case(lambda r: (i32(r, 4), i64(r, 1)))
def int_mixed_widths(x, y):
    return x + y, x * 3, x - np.int8(2), x + 2.0


@case(lambda r: (i64(r, 3, 3, lo=0, hi=8), i64(r, 3, lo=0, hi=3)))
def bit_ops(x, y):
    return x & y, x | y, x ^ y, ~x, x << y, x >> y


@case(lambda r: (bools(r, 4), bools(r, 4)))
def bool_logic(a, b):
    return a & b, a | b, a ^ b, ~a


@case(lambda r: (f64(r, 2, 3), f64(r, 3)))
def comparisons(x, y):
    return x < y, x <= y, x == y, x != y, x > y, x >= 0.0


@case(lambda r: (f64(r, 3, 4), f64(r, 4, 5)))
def matmul_op(a, b):
    return a @ b


@case(lambda r: (f32(r, 2, 3, 4), f32(r, 4)))
def matmul_batched_vec(a, v):
    return a @ v, v @ a.swapaxes(-1, -2)


@case(lambda r: (f64(r, 4), f64(r, 4)))
def matmul_vec_vec(a, b):
    return a @ b


@case(lambda r: (c128(r, 3), f64(r, 3)))
def complex_arith(z, x):
    return z * x, z + 1j, abs(z), z.conj(), z.real, z.imag


@case(lambda r: (np.float64(1.5), np.float32(2.0), 3))
def numpy_scalars(a, b, n):
    return a * b, b * n, b + 1.0, a ** n, -b


@case(lambda r: (2.5, 4))
def python_scalars_math(x, n):
    return math.sqrt(x), math.exp(x), math.log(x), math.floor(x), math.ceil(x), x * n, x / n


@case(lambda r: (0.3, 1.7))
def python_math_trig(a, b):
    return (math.sin(a), math.cos(a), math.tan(a), math.tanh(b), math.atan2(a, b),
            math.pow(b, a), math.fabs(-a), math.hypot(a, b))


@case(lambda r: (f64(r, 0), f64(r, 1)))
def empty_and_size1(e, o):
    return e + o, e * 2.0, o - 1


@case(lambda r: (np.array(2.0), f64(r, 3)))
def zero_d_array(z, x):
    return z + 1.0, z * x, np.exp(z), -z


@case(lambda r: (f64(r, 6, 4)[::2], f64(r, 4, 3).T))
def non_contiguous(x, y):
    return x + y, x * 2, np.exp(y)


@case(lambda r: (f64(r, 3), 2))
def pow_variants(x, n):
    return x ** n, x ** 0.5, 2.0 ** x, np.power(x, 3)


# --- unary ufuncs -----------------------------------------------------------------------------

@case(lambda r: (pos64(r, 3, 2),))
def exp_log_family(x):
    return (np.exp(x), np.exp2(x), np.expm1(x), np.log(x), np.log2(x), np.log10(x),
            np.log1p(x), np.sqrt(x), np.cbrt(x), np.square(x))


@case(lambda r: (f32(r, 5),))
def float32_transcendental(x):
    return np.exp(x), np.log1p(np.abs(x)), np.sqrt(np.abs(x)), np.tanh(x)


@case(lambda r: (r.uniform(-0.9, 0.9, (4,)),))
def trig_family(x):
    return (np.sin(x), np.cos(x), np.tan(x), np.arcsin(x), np.arccos(x), np.arctan(x),
            np.sinh(x), np.cosh(x), np.tanh(x), np.arcsinh(x), np.arctanh(x))


@case(lambda r: (pos64(r, 4) + 1.0,))
def arccosh_case(x):
    return np.arccosh(x)


@case(lambda r: (f64(r, 2, 3),))
def sign_abs_family(x):
    return np.abs(x), np.absolute(x), np.fabs(x), np.sign(x), np.negative(x), np.positive(x)


@case(lambda r: (pos64(r, 4), i64(r, 4)))
def reciprocal_case(x, n):
    return np.reciprocal(x), np.reciprocal(x.astype(np.float32)), np.abs(n)


@case(lambda r: (f64(r, 5) * 3,))
def rounding_family(x):
    return np.floor(x), np.ceil(x), np.trunc(x), np.rint(x), np.round(x, 1), np.around(x, 2)


@case(lambda r: (i64(r, 4), f32(r, 3)))
def rounding_ints(n, x):
    return np.floor(n), np.round(n, -1), np.round(x), x.round(1)


@case(lambda r: (f64(r, 4), f64(r, 4)))
def degrees_radians(x, y):
    return np.deg2rad(x), np.rad2deg(x), np.degrees(y), np.radians(y)


@case(lambda r: (np.array([1.0, np.nan, np.inf, -np.inf]),))
def float_predicates(x):
    return np.isnan(x), np.isinf(x), np.isfinite(x), np.signbit(x)


@case(lambda r: (np.array([1.0, np.nan, np.inf, -np.inf], dtype=np.float32),))
def nan_to_num_case(x):
    return np.nan_to_num(x), np.nan_to_num(x, nan=0.5, posinf=9.0)


@case(lambda r: (c128(r, 3),))
def conj_case(z):
    return np.conj(z), np.conjugate(z), np.real(z), np.imag(z), np.abs(z)


# --- binary ufuncs ----------------------------------------------------------------------------

@case(lambda r: (f64(r, 3, 1), f64(r, 1, 4)))
def binary_float_ufuncs(x, y):
    return (np.maximum(x, y), np.minimum(x, y), np.fmax(x, y), np.fmin(x, y), np.hypot(x, y),
            np.arctan2(x, y), np.copysign(x, y), np.heaviside(x, 0.5))


@case(lambda r: (pos64(r, 4), f64(r, 4)))
def power_family(x, y):
    return np.power(x, y), np.float_power(x, 2), np.float_power(x.astype(np.float32), y)


@case(lambda r: (f64(r, 5) * 4, pos64(r, 5)))
def mod_family(x, y):
    return (np.mod(x, y), np.remainder(x, y), np.fmod(x, y), np.floor_divide(x, y),
            np.true_divide(x, y), np.divide(x, 2))


@case(lambda r: (i32(r, 3, 4), i32(r, 4, lo=1)))
def int_ufuncs(x, y):
    return (np.add(x, y), np.subtract(x, y), np.multiply(x, y), np.floor_divide(x, y),
            np.mod(x, y), np.maximum(x, 0))


@case(lambda r: (bools(r, 2, 3), bools(r, 3)))
def logical_family(a, b):
    return (np.logical_and(a, b), np.logical_or(a, b), np.logical_xor(a, b),
            np.logical_not(a))


@case(lambda r: (i64(r, 4, lo=0, hi=100), i64(r, 4, lo=0, hi=4)))
def bitwise_family(x, y):
    return (np.bitwise_and(x, y), np.bitwise_or(x, y), np.bitwise_xor(x, y),
            np.bitwise_not(x), np.invert(x), np.left_shift(x, y), np.right_shift(x, y))


@case(lambda r: (f64(r, 3), f64(r, 3)))
def compare_ufuncs(x, y):
    return (np.greater(x, y), np.less(x, y), np.equal(x, y), np.not_equal(x, y),
            np.greater_equal(x, y), np.less_equal(x, 0))


@case(lambda r: (f64(r, 3, 4), f64(r, 4)))
def where_case(x, y):
    return np.where(x > 0, x, y), np.where(x > 0, 1.0, 0), np.where(y < 0, -y, 2)


@case(lambda r: (f64(r, 4, 3),))
def clip_case(x):
    return (np.clip(x, -0.5, 0.5), np.clip(x, None, 0.1), np.clip(x, a_min=-0.2, a_max=None),
            x.clip(0, 1), x.clip(max=0.3))


@case(lambda r: (i32(r, 6), 2))
def clip_int_weak(x, hi):
    return np.clip(x, 0, hi), np.clip(x, -1.5, 1.5)


@case(lambda r: (f64(r, 4), 3.0))
def ufunc_python_scalar_first(x, s):
    return np.maximum(s, x), np.add(1, x), np.subtract(s, 1)


# --- reductions -------------------------------------------------------------------------------

@case(lambda r: (f64(r, 3, 4, 5),))
def reductions_axes(x):
    return (x.sum(), x.sum(axis=0), x.sum(axis=(0, 2)), x.sum(axis=-1, keepdims=True),
            np.sum(x, 1), np.mean(x, axis=(1, 2)), x.mean())


@case(lambda r: (f32(r, 4, 3),))
def reductions_float32(x):
    return (x.sum(axis=0), x.mean(axis=1), x.std(), x.var(axis=0, ddof=1), x.max(),
            np.min(x, axis=0), x.prod(axis=1))


@case(lambda r: (i32(r, 3, 4),))
def reductions_int(n):
    return (n.sum(), n.sum(axis=0), n.mean(), n.prod(), np.sum(n, dtype=np.int8),
            n.std(axis=1), n.var())


@case(lambda r: (bools(r, 3, 4),))
def reductions_bool(b):
    return b.sum(), b.any(), b.all(axis=0), np.any(b, axis=1, keepdims=True), b.mean()


@case(lambda r: (f64(r, 3, 4),))
def max_min_family(x):
    return (np.max(x, axis=1), np.amax(x, axis=0), np.min(x), np.amin(x, axis=(0, 1)),
            x.max(axis=0, keepdims=True), np.ptp(x, axis=1), np.ptp(x))


@case(lambda r: (f64(r, 3, 4),))
def argminmax(x):
    return (x.argmax(), x.argmin(axis=0), np.argmax(x, axis=1), np.argmin(x, axis=-1),
            np.argmax(x, axis=0, keepdims=True))


@case(lambda r: (f64(r, 3, 4),))
def cumulative(x):
    return x.cumsum(), x.cumsum(axis=0), np.cumprod(x, axis=1), np.cumsum(x.astype(np.int32))


@case(lambda r: (np.array([[1.0, np.nan, 3.0], [4.0, 5.0, np.nan]]),))
def nan_reductions(x):
    return (np.nansum(x), np.nanmean(x, axis=0), np.nanmax(x, axis=1), np.nanmin(x),
            np.nansum(x, axis=1, keepdims=True))


@case(lambda r: (f64(r, 5),))
def reductions_1d_scalar(x):
    return x.sum(), x.mean(), x.std(ddof=1), x.var(), x.max(), x.argmax(), np.all(x > -10)


@case(lambda r: (f64(r, 4, 6),))
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@case(lambda r: (f32(r, 8, 4), f32(r, 4), f32(r, 4)))
def layernorm(x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * g + b


@case(lambda r: (f64(r, 10),))
def logsumexp(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


@case(lambda r: (f64(r, 4, 3), i64(r, 4, lo=0, hi=3)))
def cross_entropy(logits, labels):
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -logp[np.arange(4), labels].mean()


@case(lambda r: (f64(r, 5, 3), f64(r, 3, 2), f64(r, 2)))
def mlp_layer(x, w, b):
    h = np.maximum(x @ w + b, 0.0)
    return np.tanh(h).sum(axis=0)


# --- array methods ----------------------------------------------------------------------------

@case(lambda r: (f64(r, 2, 3, 4),))
def reshape_forms(x):
    return (x.reshape(6, 4), x.reshape((4, -1)), x.reshape(-1), np.reshape(x, (2, 12)),
            x.reshape(2, 3, 2, 2))


@case(lambda r: (f64(r, 2, 3, 4),))
def transpose_forms(x):
    return (x.transpose(), x.transpose(1, 0, 2), x.transpose((2, 0, 1)), np.transpose(x),
            np.transpose(x, (0, 2, 1)), x.T, x.mT)


@case(lambda r: (i32(r, 3, 4),))
def astype_forms(x):
    return (x.astype(np.float32), x.astype("float64"), x.astype(bool), x.astype(np.int8),
            x.astype(complex))


@case(lambda r: (f64(r, 3, 4)[:, ::2],))
def copy_ravel_flatten(x):
    return x.copy(), x.ravel(), x.flatten(), np.ravel(x), np.copy(x)


@case(lambda r: (f64(r, 1, 3, 1),))
def squeeze_forms(x):
    return x.squeeze(), x.squeeze(0), np.squeeze(x, axis=(0, 2)), np.squeeze(x)


@case(lambda r: (f64(r, 2, 3, 4),))
def swapaxes_moveaxis(x):
    return x.swapaxes(0, 2), np.swapaxes(x, 1, -1), np.moveaxis(x, 0, -1), np.moveaxis(
        x, [0, 1], [2, 0])


@case(lambda r: (f64(r, 3),))
def expand_dims_forms(x):
    return np.expand_dims(x, 0), np.expand_dims(x, -1), np.expand_dims(x, (0, 2)), x[None, :]


@case(lambda r: (f64(r, 3, 4), f64(r, 4)))
def dot_method(a, v):
    return a.dot(v), v.dot(v), a.dot(a.T)


@case(lambda r: (f64(r, 4, 4),))
def diagonal_trace(a):
    return a.diagonal(), np.diagonal(a, 1), a.trace(), np.trace(a)


@case(lambda r: (f64(r, 5),))
def method_round_clip(x):
    return x.round(), x.round(2), x.clip(-1, 1), x.conj()


# --- indexing ---------------------------------------------------------------------------------

@case(lambda r: (f64(r, 4, 5, 6),))
def basic_indexing(x):
    return (x[0], x[1, 2], x[1, 2, 3], x[:, 1], x[::2, 1:4, -1], x[..., 0], x[None, 0],
            x[:, None, ::-1], x[-1, ...], x[()])


@case(lambda r: (f64(r, 5, 4), i64(r, 3, lo=0, hi=5), i64(r, 3, lo=0, hi=4)))
def advanced_indexing(x, i, j):
    return x[i], x[i, j], x[:, j], x[i, 1:3], x[i[:, None], j], x[[0, 2]], x[1, j]


@case(lambda r: (f64(r, 3, 4, 5), i64(r, 2, lo=0, hi=3)))
def advanced_indexing_split(x, i):
    return x[i, :, i], x[:, 0, i], x[0, :, i], x[..., i]


@case(lambda r: (f64(r, 6),))
def scalar_item_index(x):
    return x[2] * 2.0, x[-1] + x[0], x[1:4].sum()


@case(lambda r: (np.float64(3.5), f64(r, 4)))
def index_by_graph_int(s, x):
    n = x.shape[0] - 1
    return x[n], s * x[n - 1]


# --- joining and building ---------------------------------------------------------------------

@case(lambda r: (f64(r, 2, 3), f32(r, 4, 3)))
def concatenate_case(a, b):
    return (np.concatenate((a, b)), np.concatenate([a, b], axis=0),
            np.concatenate((a.T, b.T), axis=1), np.concatenate((a, b), axis=None))


@case(lambda r: (f64(r, 3), f64(r, 3), i64(r, 3)))
def stack_family(a, b, n):
    return (np.stack((a, b)), np.stack([a, b, n], axis=1), np.hstack((a, b)),
            np.vstack((a, b)), np.column_stack((a, n)), np.stack((a, b), axis=-1))


@case(lambda r: (f64(r, 2, 3), f64(r, 2, 1)))
def hstack_vstack_2d(a, b):
    return np.hstack((a, b)), np.vstack((a, a)), np.column_stack((a, b))


@case(lambda r: (f64(r, 3, 2),))
def like_creation(x):
    return (np.zeros_like(x), np.ones_like(x, dtype=np.int32), np.empty_like(x).shape,
            np.full_like(x, 7), np.full_like(x, 2.5, dtype=np.float32),
            np.zeros_like(x, shape=(4,)))


@case(lambda r: (f32(r, 3), 1.5, 4))
def full_with_graph_scalar(x, s, n):
    return np.full((2, 3), s), np.full(3, n), np.full((3,), x[0]), x + np.zeros(3)


@case(lambda r: (0.0, 2.0))
def linspace_graph(a, b):
    return np.linspace(a, b, 5), np.linspace(a, b, 4, endpoint=False)


@case(lambda r: (f64(r, 3), i32(r, 2)))
def asarray_array(x, n):
    return np.asarray(x), np.array(x), np.asarray(n, dtype=np.float64), np.array(x, np.float32)


@case(lambda r: (1.5, 2.5, f64(r, 2)))
def array_of_scalars(a, b, v):
    return np.array([a, b]), np.array((v, v)), np.asarray([a, 3.0])


@case(lambda r: (f64(r, 3), 2.0))
def scalar_type_casts(x, s):
    return np.float32(s), np.int64(x[0]), np.float32(x), np.complex128(s), np.int32(7) + x


@case(lambda r: (f64(r, 3, 1),))
def broadcast_to_case(x):
    return np.broadcast_to(x, (2, 3, 4)), np.broadcast_to(x[:, 0], (5, 3))


@case(lambda r: (f64(r, 2, 3),))
def flip_tile_repeat(x):
    return (np.flip(x), np.flip(x, axis=1), np.tile(x, 2), np.tile(x, (2, 1, 1)),
            np.repeat(x, 2), np.repeat(x, 3, axis=0), x.repeat(2, axis=1))


@case(lambda r: (f64(r, 3), f64(r, 4)))
def outer_inner_vdot(a, b):
    return np.outer(a, b), np.inner(a, a), np.vdot(a, a), np.dot(a, a), np.inner(b, 2.0)


@case(lambda r: (f64(r, 2, 3), f32(r, 3, 4), f64(r, 4)))
def dot_matmul_functions(a, b, v):
    return np.dot(a, b), np.matmul(a, b), np.dot(b, v), np.matmul(v, b.T), np.dot(a, 2)


@case(lambda r: (f64(r, 2, 3), f64(r, 3, 4), f64(r, 5, 2, 3)))
def einsum_forms(a, b, t):
    return (np.einsum("ij,jk->ik", a, b), np.einsum("ij,jk", a, b), np.einsum("ii", b[:, :3]),
            np.einsum("bij->bji", t), np.einsum("...ij,jk->...ik", t, b), np.einsum("ij->", a),
            np.einsum("i,j->ij", a[0], b[0]))


@case(lambda r: (f64(r, 2, 3, 4), f64(r, 3, 4, 5)))
def tensordot_forms(a, b):
    return (np.tensordot(a, b), np.tensordot(a, b, axes=2),
            np.tensordot(a, b, axes=([1], [0])), np.tensordot(a[0], b[:, :, 0], axes=0),
            np.tensordot(a, b, axes=(-2, 0)))         # one axis each, as ints


@case(lambda r: (f64(r, 3, 4), f64(r, 4)))
def norms(a, v):
    return (np.linalg.norm(v), np.linalg.norm(a), np.linalg.norm(a, axis=1),
            np.linalg.norm(a, ord="fro"), np.linalg.norm(a, ord=1), np.linalg.norm(v, ord=np.inf),
            np.linalg.norm(a, ord=2), np.linalg.norm(a, axis=0, keepdims=True))


@case(lambda r: (f32(r, 3),))
def norm_float32(v):
    return np.linalg.norm(v), np.linalg.norm(v, 1)


@case(lambda r: (f64(r, 2, 2),))
def static_attrs(x):
    return x.shape, x.ndim, x.size, x.dtype, x.itemsize, x.nbytes, x * x.shape[0]


@case(lambda r: (f64(r, 3), f64(r, 3)))
def sort_argsort(x, y):
    return np.sort(x), np.argsort(y), x.argsort()


@case(lambda r: (c128(r, 2, 2),))
def complex_reductions(z):
    return z.sum(), np.abs(z).max(), z.mean(axis=0), z.real.T, np.angle(z)


@case(lambda r: (f64(r, 3, 3),))
def isclose_allclose(x):
    return np.isclose(x, x.T), np.allclose(x, x), np.array_equal(x, x)


@case(lambda r: (f64(r, 4),))
def abs_builtin(x):
    return abs(x), abs(x[0]), abs(-x).sum()


@case(lambda r: (i64(r, 3, 3), 2))
def int_matmul_and_pow(a, n):
    return a @ a, a ** n, a.sum(axis=0) // n


@case(lambda r: (bools(r, 5), f64(r, 5)))
def bool_arith(m, x):
    return m + m, m * x, m.astype(np.float32) * 2, np.where(m, x, 0.0)


@case(lambda r: (f64(r, 2, 3),))
def chained_views(x):
    y = x.T.reshape(-1)[::2]
    return y, y.sum(), x[:, ::-1].T[0]


@case(lambda r: (np.float32(2.0), 3.0))
def numpy_scalar_weak(a, s):
    return a + s, a * 2, np.exp(a), np.sqrt(s), a.astype(np.float64)


@case(lambda r: (np.int64(7), 2))
def numpy_int_scalar(a, n):
    return a // n, a % n, a / n, a << n, -a, abs(a)


@case(lambda r: (f64(r, 3), 3))
def graph_int_in_math(x, n):
    return math.sqrt(n), math.exp(n) * x, math.log(n, 2), math.floor(2.5 * n)


@case(lambda r: (f64(r, 3, 3),))
def atleast_rot(x):
    return np.atleast_2d(x[0]), np.atleast_3d(x), np.rot90(x), np.flipud(x), np.fliplr(x)


@case(lambda r: (f64(r, 2, 3), f64(r, 2, 3)))
def uint_and_small_ints(x, y):
    u = (x > 0).astype(np.uint8)
    return u + 1, u * 3, u - np.uint8(1), u + (y > 0)


@case(lambda r: (f64(r, 4),))
def median_count(x):
    return np.median(x), np.count_nonzero(x > 0), np.count_nonzero(x > 0, axis=0)


@case(lambda r: (f32(r, 2, 3), 0.5))
def mixed_chain(x, a):
    y = a * x + (1 - a) * x ** 2
    return y.astype(np.float64).mean(axis=0) @ np.ones(3), y.dtype


@case(lambda r: (i32(r, 2, 2), f32(r, 2, 2)))
def promotion_int_float(n, x):
    return n + x, n * 1.5, n / n, n + np.float16(1)


@case(lambda r: (f64(r, 3, 4),))
def expand_and_reduce(x):
    d = x[:, None, :] - x[None, :, :]
    return np.sqrt((d ** 2).sum(axis=-1))


@case(lambda r: (f64(r, 6),))
def divmod_modf(x):
    return np.divmod(x, 0.7), np.modf(x), np.frexp(x)


@case(lambda r: (f64(r, 3, 2),))
def zeros_ones_empty(x):
    return x + np.zeros((3, 2)), x * np.ones(2, dtype=np.float32), np.empty((0, 2)).shape


@case(lambda r: (f64(r, 5),))
def eye_identity_arange(x):
    return np.eye(5) @ x, np.identity(5).sum(axis=0) * x, x + np.arange(5)


@case(lambda r: (f64(r, 2, 3),))
def eq_none_and_neg_index(x):
    return x[-1, -2], x[:, -1:], x[-2:, :2]


@case(lambda r: (i64(r, 4, lo=1, hi=5),))
def float_power_ints(n):
    return np.float_power(n, 2), np.power(n, 2), np.exp(n), np.sqrt(n)


@case(lambda r: (f64(r, 3), f64(r, 3)))
def heaviside_sign_copysign(x, y):
    return np.heaviside(x, y), np.sign(y), np.copysign(1.0, x), np.signbit(y)
