"""Views of one geometry at every iteration, made once at the C kernel's entry
(pijit/loopnest/hoist.py): plain Python's results, the view hoisted only when no operand
changes in the nest, and the kernel running the nest to its end."""
from __future__ import annotations

import numpy as np
import pytest

import pijit
from pijit.loopnest import lower_c
from tests.differential import assert_same


@pytest.fixture
def hoisted(monkeypatch):
    """The C ops each kernel built in the test made once at its entry."""
    seen = []
    original = lower_c.NestKernel.__init__

    def spy(self, nest, gid=0):
        original(self, nest, gid)
        seen.append([str(op) for op in self.hoisted])

    monkeypatch.setattr(lower_c.NestKernel, "__init__", spy)
    return seen


def horner(coef, xs):
    out = np.empty_like(xs)
    for k in range(len(xs)):
        x = xs[k]
        p = 0.0
        for c in coef[::-1]:
            p = p * x + c
        out[k] = p
    return out


def tails(coef, xs):
    out = np.empty_like(xs)
    for k in range(len(xs)):
        p = 0.0
        for c in coef[k % 3:]:          # a view moving with k: made at each point
            p = p * xs[k] + c
        out[k] = p
    return out


def stepped(coef, xs, s):
    out = np.empty_like(xs)
    for k in range(len(xs)):
        p = 0.0
        for c in coef[::s]:             # s == 0: ValueError at the first point
            p = p + c * xs[k]
        out[k] = p
    return out


def run(fn, *args):
    return assert_same(fn, *args, ops=["loop_nest"], graphs=None, breaks=None)


@pytest.mark.parametrize("ncoef, npts", [(8, 50), (0, 5), (3, 0), (1, 1)])
def test_an_invariant_view_is_made_once(ncoef, npts, hoisted):
    rng = np.random.default_rng(ncoef)
    run(horner, rng.uniform(-1, 1, ncoef), rng.uniform(-2, 2, npts))
    assert hoisted and all(any("a_coef[::-1]" in op for op in ops) for ops in hoisted)


def test_a_view_moving_with_the_loop_stays_in_it(hoisted):
    rng = np.random.default_rng(1)
    run(tails, rng.uniform(-1, 1, 6), rng.uniform(-2, 2, 9))
    assert hoisted and hoisted[-1] == []


@pytest.mark.parametrize("s", [2, -1, 0])
def test_a_view_that_may_fail_stays_in_the_loop(s, hoisted):
    rng = np.random.default_rng(2)
    run(stepped, rng.uniform(-1, 1, 5), rng.uniform(-2, 2, 4), s)     # ValueError at 0
    run(stepped, rng.uniform(-1, 1, 5), np.zeros(0), s)               # no point: no error
    assert hoisted and all(ops == [] for ops in hoisted)


def test_the_kernel_runs_a_hoisted_nest_to_its_end(monkeypatch):
    from pijit.loopnest import node
    resumed = []
    monkeypatch.setattr(node.NestOp, "resume", lambda self, b, *s: resumed.append(b))
    coef, xs = np.arange(4.0), np.linspace(-1, 1, 7)
    got = pijit.jit(horner, jit_config={"jit_level": "O1"})(coef, xs)
    assert resumed == [] and np.array_equal(got, horner(coef, xs))
