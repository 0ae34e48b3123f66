"""A broadcast difference read by two fused groups is recomputed by the second
(pijit/graph/remat.py), not stored by the first and loaded: plain vs jitted (bits, warnings,
mutated inputs; tests/differential), and the groups of the compiled entry."""
from __future__ import annotations

import gc
import re

import numpy as np
import pytest

from differential import assert_same
import pijit
from pijit import cache
from pijit.graph import remat

RNG = np.random.default_rng(24)


def groups(fn, *args, level="O1"):
    """The fused groups' comment lines of fn's compiled entry (compiled at its first call)."""
    gc.collect()
    jitted = pijit.jit(fn, jit_config={"jit_level": level, "adaptive": False})
    pijit.reset(jitted)
    jitted(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    source = cache.record(fn.__code__).entries[0].graph_source
    return [line for line in source.splitlines() if line.startswith("/* group")]


def outputs(lines) -> set:
    return {int(v) for line in lines
            for v in re.findall(r"%(\d+)", re.search(r"out \(([^)]*)\)", line).group(1))}


def gravity(p, m):
    """nbody_step's shape: all-pairs differences d, their squared lengths, a sum of d*w."""
    d = p[None, :, :] - p[:, None, :]
    r2 = (d * d).sum(axis=-1) + 1e-3
    w = r2 ** -1.5 * m[None, :]
    return (d * w[:, :, None]).sum(axis=1)


def gravity_write(p, m):
    """The same, with the operand p written between the two reads of d: d must be kept."""
    d = p[None, :, :] - p[:, None, :]
    r2 = (d * d).sum(axis=-1)
    p += 1.0
    return (d * r2[:, :, None]).sum(axis=1) + m[:, None]


def outer_diff(x, y):
    """A 2-D difference read by two reductions of different axes."""
    d = x[:, None] - y[None, :]
    return (d * d).sum(axis=1), (d * 3.0).sum(axis=0)


@pytest.mark.parametrize("level", ["O1", "O2"])
@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 33])
def test_gravity_recomputes_differences(n, level):
    p, m = RNG.standard_normal((n, 3)), RNG.random(n)
    if n > 1:
        p[1] = p[0]         # a zero difference (and -0.0 signs: p - p)
    assert_same(gravity, p, m, ops=["sub", "pow", "sum"],
                jit_kwargs={"jit_config": {"jit_level": level}})
    lines = groups(gravity, p, m, level=level)
    # d (%3) has n*n*3 values, its operands 2*n*3: recomputed from remat.EXPANSION times that
    recomputed = n * n * 3 >= remat.EXPANSION * 2 * n * 3
    assert sum("=sub" in line for line in lines) == (2 if recomputed else 1), lines
    assert (3 in outputs(lines)) != recomputed, lines


def test_outer_difference_two_reductions():
    x, y = RNG.standard_normal(40), RNG.standard_normal(30)
    x[3], y[5] = -0.0, 0.0
    assert_same(outer_diff, x, y, ops=["sub", "sum"])
    lines = groups(outer_diff, x, y)
    assert sum("=sub" in line for line in lines) == 2, lines


def test_overflowing_difference_warns_once():
    """d overflows: NumPy warns once for the subtract (the copy is quiet) and for what reads
    it, in NumPy's order; under errstate raise, the same error."""
    p, m = RNG.standard_normal((9, 3)), RNG.random(9)
    p[2, 0], p[4, 0] = 1.5e308, -1.5e308
    assert_same(gravity, p, m, ops=["sub"])
    assert 3 not in outputs(groups(gravity, p, m))      # d recomputed

    def raising(p, m):
        with np.errstate(all="raise"):
            return gravity(p, m)
    assert_same(raising, p, m, graphs=None, breaks=None)


def test_operand_written_between_reads_keeps_value():
    p, m = RNG.standard_normal((9, 3)), RNG.random(9)
    assert_same(gravity_write, p, m)
    lines = groups(gravity_write, p, m)
    assert sum("=sub" in line for line in lines) == 1, lines


def test_small_difference_not_recomputed():
    """d = x - y of same-shape operands: no bigger than its operands, stored once."""
    def f(x, y):
        d = x - y
        return (d * d).sum(axis=1), (d * 2.0).sum(axis=0)
    x, y = RNG.standard_normal((20, 8)), RNG.standard_normal((20, 8))
    assert_same(f, x, y)
    assert remat.EXPANSION > 1
    assert sum("=sub" in line for line in groups(f, x, y)) == 1
