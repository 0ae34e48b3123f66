"""The comparison every differential test uses (differential.py) catches what it promises to,
and the product differences it found are gone: signed zeros of O2 max/min, layouts of fused
reductions and of the outputs beside them."""
from __future__ import annotations

import numpy as np
import pytest

import o2_spec
from differential import alias_pattern, assert_same, clone, mismatch


@pytest.mark.parametrize("got,want,why", [
    (-0.0, 0.0, "bits differ"),
    (np.array([0.0, -0.0]), np.zeros(2), "bits differ"),
    (np.float32(-0.0), np.float32(0.0), "bits differ"),
    (complex(1, -0.0), complex(1, 0.0), "bits differ"),
    (-np.array([np.nan]), np.array([np.nan]), "bits differ"),         # NaN sign
    (np.ones(3, np.float32), np.ones(3), "dtype"),
    (np.ones((3, 1)), np.ones(3), "shape"),
    (np.ones((3, 2)), np.asfortranarray(np.ones((3, 2))), "layout"),
    (np.broadcast_to(np.ones(2), (3, 2)), np.ones((3, 2)), "layout"),
    (np.ones(3), 1.0, "type"),
    ((1.0, 2.0), [1.0, 2.0], "type"),
    (1, True, "type"),
])
def test_mismatch_sees(got, want, why):
    assert why in mismatch(got, want)


def test_mismatch_sees_writeability():
    ro = np.ones(3)
    ro.flags.writeable = False
    assert "writeable" in mismatch(ro, np.ones(3))


def test_nans_compare_by_class_not_payload():
    quiet = np.array([np.nan])
    other = quiet.view(np.uint64) | np.uint64(1)        # another payload, same class
    assert mismatch(other.view(np.float64), quiet) == ""


def test_o2_bounds_keep_zero_signs_of_exact_ops_and_allow_their_ulps():
    assert "bits differ" in mismatch(np.array([-0.0]), np.array([0.0]), o2_spec.EXACT)
    five = np.array([1.0 + 5 * np.finfo(float).eps])
    six = np.array([1.0 + 6 * np.finfo(float).eps])
    assert mismatch(five, np.ones(1), o2_spec.tolerance("exp", "O2")) == ""
    assert "ulp" in mismatch(six, np.ones(1), o2_spec.tolerance("exp", "O2"))


def test_aliasing_of_outputs_with_each_other_is_compared():
    a = np.ones(4)
    assert alias_pattern((a, a), ()) != alias_pattern((a, a.copy()), ())
    assert alias_pattern((a, a.T), ()) != alias_pattern((a, a.copy()), ())


def _max_min(x):
    # (x * 2.0: values the loop computes, not in memory to look at their zeros' signs)
    return x.max(axis=-1), x.min(axis=-1), (x * 1.0).max(), (x * 2.0).max(axis=-1), \
        (x * 2.0).min(axis=-1)


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_max_min_of_signed_zeros_are_numpys(level):
    """[-0.0] * 10 + [0.0] * 10: NumPy's max is 0.0; the O2 kernel's lanes gave -0.0 (a zero
    result now goes to NumPy at O2 as at O1)."""
    x = np.array([[-0.0] * 10 + [0.0] * 10, [0.0] * 10 + [-0.0] * 10, [-0.0] * 20])
    assert_same(_max_min, x, jit_kwargs={"jit_config": {"jit_level": level}})


_REDUCE_3D = [lambda x: x.min(axis=-1, keepdims=True), lambda x: x.max(axis=0),
              lambda x: (x.sum(axis=-1, keepdims=True), x.mean(axis=(0, 1), keepdims=True))]


@pytest.mark.parametrize("level", ["O1", "O2"])
@pytest.mark.parametrize("k", range(len(_REDUCE_3D)))
def test_reductions_of_fortran_ordered_arrays_keep_numpys_layout(level, k):
    """NumPy lays a reduction's result out in its operand's memory order; kernels write C
    order (strides (32, 8, 8) where NumPy's are (8, 24, 96)): such calls go to NumPy."""
    x = np.asfortranarray(np.arange(3 * 4 * 130, dtype=np.float64).reshape(3, 4, 130) % 7 + 1)
    assert_same(_REDUCE_3D[k], x, jit_kwargs={"jit_config": {"jit_level": level}})


def _astype_and_mean(a):
    return a.astype(np.float32), a.mean()


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_outputs_beside_a_reduction_keep_numpys_layout(level):
    """a.astype(np.float32) of a Fortran-ordered a, with a.mean() in the same kernel, was C
    order at O2; an O2 softmax of a Fortran-ordered array too (issue 14, item 10)."""
    a = np.asfortranarray(np.linspace(-3.0, 3.0, 12 * 70).reshape(12, 70))
    config = {"jit_config": {"jit_level": level}}
    assert_same(_astype_and_mean, a, jit_kwargs=config)
    assert_same(_softmax, a, jit_kwargs=config)


def _clips(x, lo, hi):
    return (np.clip(x * 1.0, 0.0, 1.0), np.clip(x * 1.0, lo, hi), np.clip(x * 1.0, 0.0, hi),
            np.clip(x * 1.0, None, -0.0), (x * 1.0).clip(-0.0, 1.0))


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_clip_ties_are_numpys(level):
    """A tie between x and a bound of the other zero's sign: NumPy keeps x when both bounds
    are broadcast (scalars), the bound otherwise (found by the random programs: clip(-0.0,
    0, 1) was 0.0 fused, -0.0 in NumPy)."""
    x = np.array([-0.0, 0.0, -0.0, 0.5, np.nan, 2.0] * 4)
    lo, hi = np.zeros(x.size), np.full(x.size, 1.0)
    with np.errstate(invalid="ignore"):
        assert_same(_clips, x, lo, hi, jit_kwargs={"jit_config": {"jit_level": level}})


def test_clone_keeps_aliased_arrays_aliased():
    """Views of one buffer stay views of one buffer in the copies each run gets (before, each
    view got a copy of the buffer of its own: a write through one input went unseen through
    the other in the plain and the jitted run alike, so aliasing went untested)."""
    a = np.linspace(0.0, 1.0, 12).reshape(3, 4)
    args = clone((a, a[::-1], a.T, a[1], a.copy()))
    assert args[0] is not a and not np.shares_memory(args[0], a)
    assert all(np.shares_memory(args[0], v) for v in args[1:4])
    assert not np.shares_memory(args[0], args[4])
    assert [v.strides for v in args] == [v.strides for v in (a, a[::-1], a.T, a[1], a)]
    args[1][0, 0] = -1.0
    assert args[0][2, 0] == -1.0 and args[2][0, 2] == -1.0


def _write_one_read_other(x, y):
    t = y * 2.0
    x += 1.0
    return t + y, y.sum()


def _shift_through_one(x, y):
    x[1:] = x[:-1] + y[:-1]
    return x * y


@pytest.mark.parametrize("level", ["O0", "O1", "O2"])
@pytest.mark.parametrize("fn", [_write_one_read_other, _shift_through_one])
@pytest.mark.parametrize("alias", ["same", "reversed", "distinct"])
def test_a_write_through_one_input_is_seen_through_its_alias(fn, alias, level):
    """Two arguments over one buffer: a write through x changes what y reads. (Today each
    write into an argument breaks the graph; graphs in which such writes stay must keep
    this.)"""
    a = np.linspace(-1.0, 2.0, 9)
    y = {"same": a, "reversed": a[::-1], "distinct": a.copy()}[alias]
    report = assert_same(fn, a, y, graphs=None, breaks=None,
                         jit_kwargs={"jit_config": {"jit_level": level}})
    assert report.graph_count >= 1


def arctan2_of_a_sum(x, y):
    return np.arctan2(x + 0.0, y)


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_numpy_loops_over_operands_walked_backwards_are_numpys(level):
    """NumPy runs arctan2 by SVML over positive strides and by libm over negative ones (1 ulp
    apart in about one value of twenty): the kernel, which calls NumPy's loop on rows in
    memory order, hands a reversed operand to NumPy. Inner-axis-only and outer-axis-only
    reversals, and an input read by a member only, keep their own paths."""
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((2, 16, 37))
    for ya in (y[::-1, ::-1], y[:, ::-1], y[::-1], y):
        for xa in (x, x[::-1, ::-1]):
            assert_same(arctan2_of_a_sum, xa, ya, ops=["add", "arctan2"],
                        jit_kwargs={"jit_config": {"jit_level": level}})


def max_of_invalid(a):
    d = a - a                      # inf - inf: x86's default NaN, which has its sign bit set
    return d.max(axis=-1), d.min(axis=0), d.max()


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_a_max_over_negative_nans_is_numpys(level):
    """NumPy's max keeps a -nan it meets or gives its default +nan, by position and loop:
    the kernel hands a -nan result to NumPy (it gave +nan)."""
    inf = np.inf
    for a in (np.array([[1.0, inf, 2.0, 3.0], [inf, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]),
              np.array([[inf]]), np.full((5, 9), 2.0)):
        assert_same(max_of_invalid, a, jit_kwargs={"jit_config": {"jit_level": level}})


def _maximum_of_two_memory_orders(a):
    t0 = a.T
    a[...] = 0
    t1 = a.astype(np.bool_)
    t3 = np.maximum(a, t0.astype(np.bool_))
    return t1, t3


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_broadcast_result_of_two_memory_orders_keeps_numpys_layout(level):
    """Found by test_random_program_o2 (hypothesis): no input of the fused maximum has its
    (2, 2, 2) shape, and the kernel wrote C order where NumPy takes the operands' order
    (tests/test_fused_layouts.py holds the other ways operands disagree)."""
    assert_same(_maximum_of_two_memory_orders, np.zeros((2, 2, 1), dtype=bool),
                jit_kwargs={"jit_config": {"jit_level": level}})
