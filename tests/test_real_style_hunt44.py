"""Real-style programs that pijit got wrong or crashed on (issue hunt44): each runs plain
and jitted (differential.assert_same: results, mutated inputs, printed output, warnings,
exceptions) at O0 and O1, and how the jitted call ran is asserted, so a fallback to plain
Python cannot pass."""
import math

import numpy as np
import pytest

from differential import assert_same

LEVELS = ["O0", "O1"]


def _config(level):
    return {"jit_config": {"jit_level": level, "adaptive": False}}


def _break_reasons(report):
    return [b["reason"].split(":")[0] for b in report.break_reasons]


# -- a try or with block inside a loop ------------------------------------------------------
# Capture stops at the block's TryBegin (or BEFORE_WITH), and such a break's residual code
# runs to the function's end. Started inside a loop, that span held the loop's jump back to
# its head, a label outside the copied span: building the code failed (KeyError on a Label)
# and the whole function ran as plain Python with an "internal error" warning. The loop now
# runs as residual code from its head, as a loop with any other break does.

def reciprocals_or_minus_one(a):
    scale = a * 2
    out = []
    for v in a:
        try:
            out.append(10 // int(v))
        except ZeroDivisionError:
            out.append(-1)
    return out, scale


def safe_sqrt(x):
    out = np.empty_like(x)
    for i, v in enumerate(x):
        try:
            if v < 0:
                raise ValueError("negative")
            out[i] = math.sqrt(v)
        except ValueError as e:
            out[i] = np.nan
            print("bad", i, e)
    return out * 2


class Recorder:
    def __init__(self):
        self.log = []

    def __enter__(self):
        self.log.append("in")
        return self

    def __exit__(self, *exc):
        self.log.append("out")
        return False


def with_in_loop(x, rec):
    total = x.sum()
    for v in x:
        with rec:
            total = total + v * 2
    return total, rec.log


@pytest.mark.parametrize("level", LEVELS)
def test_try_except_in_a_loop(level):
    report = assert_same(reciprocals_or_minus_one, np.array([1, 0, 2]), graphs=1, breaks=1,
                         ops=["mul"], jit_kwargs=_config(level))
    assert _break_reasons(report) == ["exception handling"]


@pytest.mark.parametrize("level", LEVELS)
def test_raise_and_print_in_a_loops_try_block(level):
    report = assert_same(safe_sqrt, np.array([1.0, -1.0, 4.0, -0.0]), graphs=None, breaks=1,
                         jit_kwargs=_config(level))
    assert _break_reasons(report) == ["exception handling"]


@pytest.mark.parametrize("level", LEVELS)
def test_with_block_in_a_loop(level):
    report = assert_same(with_in_loop, np.array([1.0, -0.0, 3.0]), Recorder(), graphs=1,
                         breaks=1, ops=["sum"], jit_kwargs=_config(level))
    assert _break_reasons(report) == ["exception handling"]
