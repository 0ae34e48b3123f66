"""Loop-nest edges found by hunt36's automatic mutation sweep, each a rule no other test
reached: test_loop_nest_scalar_ops runs one failing pair per kind of error, so a left shift
by 64 or more (OverflowError like any too-large int) never ran after its first kind."""
import numpy as np
import pytest

from test_loop_nest_scalar_ops import nest, run


@pytest.mark.parametrize("op, pairs", [
    ("<<", [(1, 5), (1, 64)]),          # 2**64: OverflowError at the store, not x86's 1 << 0
    ("<<", [(1, 5), (3, 70)]),
], ids=["lshift64", "lshift70"])
def test_python_int_left_shift_counts_past_62(op, pairs):
    run(nest(f"x {op} y", "int(xs[i])", "int(ys[i])"), pairs, np.int64, np.int64)
