"""The layout of a fused kernel's result is NumPy's: NumPy's iterator orders a result's axes
by its operands' strides, and where operands disagree on two axes, by C order. A kernel
runs only when its order is that order (every operand agrees with it), and hands the group
to NumPy otherwise; these cases hold operands that disagree in each way a group meets
them (no input of the full shape, a broadcast input against the full ones, a member born
of broadcast inputs alone, a reduction), next to operands that agree and must still run
in the kernel."""
from __future__ import annotations

import numpy as np
import pytest

import pijit
from differential import assert_equal_values, assert_same, count_handbacks

LEVELS = ["O1", "O2"]


def _jit(level):
    return {"jit_config": {"jit_level": level}}


def max_with_transpose(a):
    return np.maximum(a, a.T)


def scaled_sum(x, y):
    return x * 2.0 + y


def doubled(x):
    return x * 2.0


def sum_of_broadcast(a, b):
    return (a + b).sum(axis=-1)


def product_sum_kept(a, b):
    return np.sum(a * b, axis=-1, keepdims=True)


def plus_broadcast_pair(b, c, x):
    return x + (b + c)


def _rng():
    return np.random.default_rng(7)


def _order(shape, axes, rng):
    """An array of `shape` whose axes are laid out in memory in the order `axes` (outer
    first)."""
    return rng.random([shape[d] for d in axes]).transpose(np.argsort(axes))


def _disagreeing():
    rng = _rng()
    return [
        # no input has the full shape (2, 2, 2): NumPy takes the order both operands share
        pytest.param(max_with_transpose, (np.arange(4.0).reshape(2, 2, 1),), ["maximum"],
                     id="no-full-input"),
        pytest.param(max_with_transpose, (np.zeros((2, 2, 1), dtype=bool),), ["maximum"],
                     id="no-full-input-bool"),
        # a broadcast input in C order against a full one in F order: C order wins where
        # both step along two axes
        pytest.param(scaled_sum, (_order((3, 4, 5), (2, 1, 0), rng),
                                  _order((3, 1, 5), (0, 1, 2), rng)), ["mul", "add"],
                     id="broadcast-input-disagrees"),
        # b + c has the full shape but is born in C order (neither operand steps along
        # both axes 0 and 1) and meets x with those axes swapped: NumPy keeps C order there
        pytest.param(plus_broadcast_pair, (rng.random((3, 1, 5)), rng.random((1, 4, 5)),
                                           _order((3, 4, 5), (1, 0, 2), rng)), ["add"],
                     id="member-born-in-c-order"),
        # a reduction over broadcast operands, one with its first two axes swapped: its
        # result takes that order
        pytest.param(sum_of_broadcast, (_order((3, 4, 1), (1, 0, 2), rng),
                                        rng.random((1, 1, 5))), ["add", "sum"],
                     id="reduction-operands-swapped"),
        pytest.param(product_sum_kept, (_order((3, 4, 1), (1, 0, 2), rng),
                                        rng.random((1, 1, 5))), ["mul", "sum"],
                     id="kept-reduction-operands-swapped"),
        # the only full input is broadcast along an axis (a zero stride): NumPy's iterator
        # takes no order from that axis (C order for a broadcast row; a middle axis goes
        # outermost), where sorting the strides would put it innermost
        pytest.param(doubled, (np.broadcast_to(rng.random((1, 7)), (3, 7)),), ["mul"],
                     id="full-input-broadcast-row"),
        pytest.param(doubled, (np.broadcast_to(_order((3, 1, 5), (2, 1, 0), rng),
                                               (3, 4, 5)),), ["mul"],
                     id="full-input-broadcast-middle-axis"),
    ]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn, args, ops", _disagreeing())
def test_operands_in_orders_numpy_resolves_give_numpys_layout(fn, args, ops, level,
                                                               monkeypatch):
    handed = count_handbacks(monkeypatch)
    assert_same(fn, *args, ops=ops, jit_kwargs=_jit(level))
    assert handed, "operands that disagree with the kernel's order must go to NumPy"


def _agreeing():
    rng = _rng()
    return [
        pytest.param(max_with_transpose, (np.arange(4.0).reshape(2, 2, 1)[:, :1],),
                     ["maximum"], id="no-full-input-one-long-axis"),
        pytest.param(scaled_sum, (_order((3, 4, 5), (2, 1, 0), rng),
                                  _order((3, 1, 5), (2, 1, 0), rng)), ["mul", "add"],
                     id="broadcast-input-agrees-in-f-order"),
        pytest.param(scaled_sum, (rng.random((3, 4, 5)), rng.random((3, 1, 5))),
                     ["mul", "add"], id="c-order"),
        pytest.param(plus_broadcast_pair, (rng.random((3, 1, 5)), rng.random((1, 4, 5)),
                                           rng.random((3, 4, 5))), ["add"],
                     id="member-born-in-c-order-meets-c"),
        pytest.param(sum_of_broadcast, (rng.random((3, 4, 1)), rng.random((1, 1, 5))),
                     ["add", "sum"], id="reduction-in-c-order"),
        # operands in one order but for the strides of axes of length 1, which step nowhere
        # (a column view whose unit axis has a long stride, a row with a zero one)
        pytest.param(scaled_sum, (np.arange(3.0).reshape(3, 1)[:, ::2], rng.random((3, 1))),
                     ["mul", "add"], id="column-view-long-unit-stride"),
        pytest.param(scaled_sum, (np.arange(3.0)[None, :], rng.random((1, 3))),
                     ["mul", "add"], id="row-view-zero-unit-stride"),
        pytest.param(product_sum_kept, (np.arange(4.0).reshape(4, 1)[:, ::2],
                                        rng.random((4, 1))), ["mul", "sum"],
                     id="reduction-column-view-long-unit-stride"),
    ]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn, args, ops", _agreeing())
def test_operands_that_agree_run_in_the_kernel(fn, args, ops, level, monkeypatch):
    handed = count_handbacks(monkeypatch)
    assert_same(fn, *args, ops=ops, jit_kwargs=_jit(level))
    assert not handed, "operands in the kernel's order must not go to NumPy"


@pytest.mark.parametrize("level", LEVELS)
def test_an_entry_of_dynamic_shape_keeps_numpys_layout(level):
    """A first call with x of shape (2, 1, 1) and a second of (3, 1, 3) make x's first and
    last axes dynamic while y stays (3,), so no input has the group's full shape statically:
    an F-ordered x must still give NumPy's F-ordered result."""
    rng = _rng()
    jitted = pijit.jit(scaled_sum, **_jit(level))
    pijit.reset(jitted)
    for n, m in ((2, 1), (3, 3), (2, 3), (4, 3)):
        x, y = np.asfortranarray(rng.random((n, 1, m))), rng.random(3)
        assert_equal_values(jitted(x, y), scaled_sum(x, y), f"x of shape {x.shape}")
    guards = [g for e in pijit.code_info(jitted)["entries"] for g in e["guards"]]
    assert any("?" in g for g in guards), guards
