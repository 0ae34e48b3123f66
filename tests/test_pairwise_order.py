"""O1 float sums add in NumPy's pairwise order, bit for bit, at every size class.

NumPy sums n contiguous floats (its @TYPE@_pairwise_sum, in the dtype: float32 in float32)
as: under 8 values in order from +0.0; up to 128 (a leaf) in eight accumulators, lane k
adding values k, k + 8, ... in order, combined as ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)), then
the rest in order; above that the two halves split at n / 2 rounded down to a multiple of 8.
The kernels reach that order in pieces (render.py's vector leaves, pj_leaf_*, pj_comb_* and
lanes; the recursion's chunks streamed and their sums added as the levels above do), so each
piece is a place where another order could slip in.

The data is chosen so an order matters: `reference` below computes NumPy's order and a list
of plausible wrong ones (in order, lanes combined in order, splits not at a multiple of 8, a
leaf of 128 split, sibling leaves of uneven halves summed as one, float32 in double), and the
tests first check that every wrong order gives other bits than NumPy on each size's data,
then that the jitted sum gives NumPy's bits, run by the kernel (no hand-back).
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

import pijit
from tests.differential import assert_equal_values, assert_same, count_handbacks

# Every size class of the recursion: under 8, leaves (with and without a tail of under 8),
# exactly 128, a node whose halves are two leaves (both of 64+, the right one with a tail),
# 250/255 whose right half (130, 135) is no leaf, deeper splits, and the kernels' chunk
# lengths (render.SUM_CHUNK 2048, render.CHUNK 16384) and one past them.
SIZES = [0, 1, 2, 5, 7, 8, 9, 15, 16, 17, 63, 64, 100, 127, 128, 129, 136, 137, 200, 250,
         255, 256, 257, 383, 1000, 1001, 2047, 2048, 2049, 4103, 16383, 16384, 16385, 40009]


def split(n: int) -> int:
    n2 = n // 2
    return n2 - n2 % 8


def _leaf(a: np.ndarray, combine=None):
    """A leaf: eight lanes, combined, then the rest in order."""
    r = list(a[:8])
    n8 = len(a) - len(a) % 8
    for i in range(8, n8, 8):
        r = [r[k] + a[i + k] for k in range(8)]
    res = combine(r) if combine else ((r[0] + r[1]) + (r[2] + r[3])) + \
        ((r[4] + r[5]) + (r[6] + r[7]))
    for v in a[n8:]:
        res = res + v
    return res


def pairwise(a: np.ndarray, *, combine=None, split_at=split, leaf=128, pair_as_leaves=False):
    """The pairwise sum of a's values in a's dtype (NumPy scalars round each add), in NumPy's
    order; the keywords change one step of it (the wrong orders of WRONG)."""
    n = len(a)
    if n < 8:
        res = a.dtype.type(0)
        for v in a:
            res = res + v
        return res
    if n <= leaf:
        return _leaf(a, combine)
    n2 = split_at(n)
    if pair_as_leaves and n <= 2 * leaf:      # both halves as leaves, whatever their length
        return _leaf(a[:n2], combine) + _leaf(a[n2:], combine)
    kw = dict(combine=combine, split_at=split_at, leaf=leaf, pair_as_leaves=pair_as_leaves)
    return pairwise(a[:n2], **kw) + pairwise(a[n2:], **kw)


def _in_order(r):
    res = r[0]
    for v in r[1:]:
        res = res + v
    return res


WRONG = {
    "reversed": lambda a: _in_order(list(a[::-1])),
    "sequential": lambda a: _in_order(list(a)),
    "lanes_in_order": lambda a: pairwise(a, combine=_in_order),
    "lanes_paired_by_stride": lambda a: pairwise(
        a, combine=lambda r: ((r[0] + r[4]) + (r[1] + r[5])) + ((r[2] + r[6]) + (r[3] + r[7]))),
    "split_at_half": lambda a: pairwise(a, split_at=lambda n: n // 2),
    "leaf_under_128": lambda a: pairwise(a, leaf=127),
    "uneven_pair_as_leaves": lambda a: pairwise(a, pair_as_leaves=True),
    "float32_in_double": lambda a: a.dtype.type(pairwise(a.astype(np.float64))),
}


def _nodes(n: int) -> list:
    """The lengths of the recursion's nodes of 8 values or more (leaves included)."""
    if n < 8:
        return []
    if n <= 128:
        return [n]
    return [n] + _nodes(split(n)) + _nodes(n - split(n))


def wrong_orders(n: int, dtype) -> list:
    """The wrong orders that differ from NumPy's at length n (the others add as NumPy does
    there: under 8 values NumPy adds in order, so `sequential` is no wrong order there; two
    float32 values add to the same float32 in double)."""
    nodes = _nodes(n)
    names = ["reversed"] if n > 2 else []
    if dtype == np.float32 and n > 2:
        names.append("float32_in_double")
    if n >= 8:
        names += ["sequential", "lanes_in_order", "lanes_paired_by_stride"]
    if 128 in nodes:
        names.append("leaf_under_128")
    if any(m > 128 and m // 2 % 8 for m in nodes):
        names.append("split_at_half")
    if any(128 < m <= 256 and m - split(m) > 128 for m in nodes):
        names.append("uneven_pair_as_leaves")
    return names


def values(n: int, dtype, seed: int) -> np.ndarray:
    """n values of both signs over ten decades: every add rounds, so another order gives
    other bits (checked per size by test_the_data_tells_the_orders_apart)."""
    rng = np.random.default_rng(seed * 100003 + n)
    return (rng.standard_normal(n) * 10.0 ** rng.integers(-5, 5, n)).astype(dtype)


def distinguishing(n: int, dtype) -> np.ndarray:
    """Values of length n on which NumPy's order and each wrong one give other bits: the
    first seed that tells them all apart."""
    for seed in range(20):
        a = values(n, dtype, seed)
        want = np.add.reduce(a)
        if all(WRONG[w](a) != want for w in wrong_orders(n, dtype)):
            return a
    raise AssertionError(f"no data of length {n} tells every wrong order apart")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_data_tells_the_orders_apart(dtype):
    """The reference is NumPy's order on the installed NumPy, and each size's data gives
    other bits under every wrong order that applies to its length; each wrong order
    applies to some length."""
    told = set()
    for n in SIZES:
        a = distinguishing(n, dtype)
        assert pairwise(a).tobytes() == np.add.reduce(a).tobytes(), n
        told.update(wrong_orders(n, dtype))
    assert told == set(WRONG) - ({"float32_in_double"} if dtype == np.float64 else set())


def _jitted(fn):
    jitted = pijit.jit(fn)
    pijit.reset(jitted)
    return jitted


@pytest.fixture
def handbacks(monkeypatch):
    return count_handbacks(monkeypatch)


def _whole(x, y):
    return np.sum(x * y), np.mean(x * y)


def _rows(x, y):
    return (x * y).sum(axis=-1), (x + y).mean(axis=-1)


def _rows_of_input(x, y):
    return x.sum(axis=-1), x * y


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_whole_sums_add_in_numpys_order(dtype, handbacks):
    """np.sum / np.mean of a fused product over all values: the kernel's streamed chunks
    and its vector leaves give NumPy's bits at every size class."""
    jitted = _jitted(_whole)
    for n in SIZES[1:]:
        x = distinguishing(n, dtype)
        ones = np.ones(n, dtype)
        for got, want in zip(jitted(x, ones), _whole(x, ones)):
            assert_equal_values(got, want, f"n={n}")
    assert handbacks == []


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_row_sums_add_in_numpys_order(dtype, handbacks):
    """Sums and means along the last axis, of a fused value (a row buffer) and of an input's
    own row, contiguous or strided (gathered first): NumPy's bits at every size class."""
    fns = [_jitted(_rows), _jitted(_rows_of_input)]
    for n in SIZES[1:]:
        row = distinguishing(n, dtype)
        x = np.stack([row, row[::-1], -row])
        wide = np.repeat(x, 2, axis=1)          # wide[:, ::2] is x, strided
        ones = np.ones_like(x)
        for arg in (x, wide[:, ::2]):
            for jitted, fn in zip(fns, (_rows, _rows_of_input)):
                for got, want in zip(jitted(arg, ones), fn(arg, ones)):
                    assert_equal_values(got, want, f"{fn.__name__} n={n}")
    assert handbacks == []


def test_a_long_sum_streams_in_numpys_order(handbacks):
    """Past the L1-sized chunks and many of them: a million and more values, both dtypes."""
    jitted = _jitted(_whole)
    for dtype in (np.float64, np.float32):
        x = values(1_000_003, dtype, 1)
        ones = np.ones_like(x)
        for got, want in zip(jitted(x, ones), _whole(x, ones)):
            assert_equal_values(got, want)
    assert handbacks == []


# Every boundary of the kernels' vector leaves (render.lanes, kernel_support.h's pj_leaf_*
# and pj_comb_*): no group of 8, one group with and without a tail, one leaf of 128, the
# first split, 1024 plus whole groups and a tail, beside the sizes above.
BOUNDARIES = [*range(18), 127, 128, 129, 255, 256, 1023,
              *[1024 + 8 + r for r in (0, 1, 7)], 1024 + 40 + 7]
SPECIAL_AT = [8, 9, 16, 17, 128, 129, 1039]
# where the strided and reversed layouts run too (the others: contiguous only, as the layout
# changes how a leaf's values are read, not where its groups and tail begin)
LAYOUTS_AT = {*SPECIAL_AT, 0, 1, 7, 127, 255, 1023, 1071}


def _layouts(x: np.ndarray) -> list:
    """x contiguous, every third value of a longer array, and reversed (a view of x's
    values, last first: the plain sum adds them in that order too)."""
    wide = np.zeros(3 * len(x) + 1, x.dtype)
    wide[1::3] = x
    return [x, wide[1::3], x[::-1].copy()[::-1]]


def _data(n: int, dtype) -> list:
    """Values telling NumPy's order from the wrong ones where some do (under 8 float32
    values, not all), and where the signs and non-finite values in the lanes show: all -0.0
    (a sum of 8 or more is -0.0, of fewer +0.0), a NaN and an inf, a -inf among finite
    values."""
    if n < 8:
        return [values(n, dtype, 0), np.full(n, -0.0, dtype)]
    out = [distinguishing(n, dtype), np.full(n, -0.0, dtype)]
    if n in SPECIAL_AT:
        a = distinguishing(n, dtype)
        a[(5 * n) // 7] = np.nan
        a[n // 3] = np.inf
        b = distinguishing(n, dtype)
        b[n - 1] = -np.inf
        out += [a, b]
    return out


def _whole_of_input(x, y):
    return np.sum(x), np.mean(x * y) + np.sum(y * 0.5)


@functools.lru_cache(maxsize=None)
def _signatures(dtype, rows: bool) -> dict:
    """jit options making both arguments' dims dynamic: one kernel serves every size. One
    object per kind: jit() tells options apart by the ArraySpecs' identity."""
    spec = pijit.ArraySpec(shape=(None, None) if rows else (None,), dtype=np.dtype(dtype).name)
    return {"input_signature": (spec, spec)}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_vector_leaves_give_numpys_bits_at_every_boundary(dtype, handbacks):
    """Whole-array and row sums and means, of computed values (the lanes) and of an input's
    own values (pj_leaf_*), contiguous at each boundary of the vector leaves, strided and
    reversed at some of them, on data that tells NumPy's order from the wrong ones, and on
    signed zeros, NaN and infinities: NumPy's bits, one graph, run by the kernel (but the
    mean of no values, which NumPy warns of). Every size runs through entries of dynamic
    dims (their kernels take the size at run time); the sizes where groups and tails begin
    run through entries specialised to their shape too (static sizes, constants in the C)."""
    # the dynamic entries first, then the specialised ones: options that change at every
    # jit() make each look for live wrappers of the others (a garbage collection each: 80 s
    # a dtype late in the CI's sessions on 3.12 and 3.13, 12 s on 3.11)
    for static in (False, True):
        for n in (SPECIAL_AT if static else BOUNDARIES):
            before = len(handbacks)
            for x in _data(n, dtype):
                for arg in ([x] if static else _layouts(x) if n in LAYOUTS_AT else [x]):
                    _check_boundary(arg, n, dtype, static)
            assert n == 0 or len(handbacks) == before, f"n={n}: handed back to NumPy"


def _check_boundary(arg, n: int, dtype, static: bool):
    y = np.linspace(0.5, 1.5, n).astype(dtype)
    rows, ys = np.stack([arg, -arg]), np.stack([y, y])
    for fn, args in ((_whole, (arg, y)), (_whole_of_input, (arg, y)),
                     (_rows, (rows, ys)), (_rows_of_input, (rows, ys))):
        if n == 0 and fn in (_rows, _rows_of_input):
            continue
        assert_same(fn, *args,
                    jit_kwargs=None if static else _signatures(dtype, args[0].ndim == 2))


def _column_sums(x):
    return x.sum(axis=0), x.mean(axis=0)


def _outer_sums(x):
    return x.sum(axis=(0, 1)), x.mean(axis=(0, 1))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_column_kept_as_one_value_is_summed_pairwise(dtype, handbacks):
    """Over outer axes NumPy adds row after row only where it keeps more than one value per
    row: an (n, 1) column summed over axis 0 (or (n, m, 1) over axes 0 and 1) is one
    contiguous run its inner loop sums pairwise, as a whole-array sum. The kernel hands
    those to NumPy, at run time too (a dynamic dim that turns out 1); wider rows stay its
    own. An int column's mean, summed in float64, likewise."""
    column = distinguishing(1000, dtype).reshape(1000, 1)
    assert_same(_column_sums, column)
    assert_same(_outer_sums, distinguishing(1080, dtype).reshape(120, 9, 1))
    ints = np.random.default_rng(7).integers(-2**62, 2**62, (1000, 1))
    assert_same(_column_sums, ints)
    spec = pijit.ArraySpec(shape=(None, None), dtype=np.dtype(dtype).name)
    assert_same(_column_sums, column, jit_kwargs={"input_signature": (spec,)})
    assert handbacks
    del handbacks[:]
    assert_same(_column_sums, distinguishing(1000, dtype).reshape(500, 2))
    assert handbacks == []


def _means(x):
    return np.mean(x), x.mean(axis=-1), x.mean(keepdims=True)


def test_a_float32_mean_divides_in_double(handbacks):
    """NumPy divides a float32 mean's sum by its np.intp count in float64 (NEP 50 promotes
    the pair), then rounds: past 2**24 values the count is not a float32, and a float32
    division by the rounded count is another quotient."""
    n = 2**24 + 3
    rng = np.random.default_rng(1)
    x = rng.random(n, dtype=np.float32) + np.float32(7)
    assert_same(_means, x.reshape(1, n), calls=1)
    columns = rng.random((n, 2), dtype=np.float32) + np.float32(7)
    assert_same(lambda c: c.mean(axis=0), columns, calls=1)
    assert handbacks == []
