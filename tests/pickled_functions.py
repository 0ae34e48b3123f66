"""Jitted functions at module level, for the pickling tests (a process pool finds them by
name, as it does plain functions)."""
import numpy as np

import pijit


@pijit.jit
def decorated(x):
    return np.tanh(x) * 2 + 1


def plain(x):
    return x * x - 1


transformed = pijit.jit(plain, jit_config={"jit_level": "O0", "limit_graph_count": 3})


class Model:
    def __init__(self, w):
        self.w = w

    @pijit.jit
    def construct(self, x):
        return x @ self.w + 1


lambda_jitted = pijit.jit(lambda x: x + 1)
