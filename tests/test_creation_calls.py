"""np.zeros_like, np.ones_like and np.ones in generated code run pijit's cheaper equivalents
(pijit/backends/creation.py): the same allocation builtin, filled by ndarray.fill where that
stores what NumPy's copyto does. Differential against plain NumPy (values, dtype, layout,
exceptions) with the replacement counted as called, in straight-line graphs (the graph
replayed as bytecode) and beside a loop nest (the NumPy backend's generated function)."""
from __future__ import annotations

import numpy as np
import pytest

from differential import assert_same
from pijit.backends import creation
from pijit.graph.ir import Ref

LEVELS = ["O0", "O1"]


@pytest.fixture
def allocations(monkeypatch):
    """Calls of the replacements' allocation builtins, counted."""
    calls = []

    def counted(builtin):
        def run(*args):
            calls.append(builtin.__name__)
            return builtin(*args)
        return run

    monkeypatch.setattr(creation, "_empty_like", counted(np.empty_like))
    monkeypatch.setattr(creation, "_empty", counted(np.empty))
    return calls


def _inputs():
    base = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    return {
        "c": base,
        "f": np.asfortranarray(base),
        "transposed": base.transpose(2, 0, 1),
        "strided": base[:, ::2, 1:],
        "zero_d": np.float64(3.0) * np.ones(()),
        "empty": np.zeros((0, 3)),
        "int8": np.arange(6, dtype=np.int8).reshape(2, 3),
        "bool": np.array([[True, False], [False, True]]).T,
    }


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("layout", list(_inputs()))
def test_zeros_like_and_ones_like_keep_numpys_layout_and_dtype(level, layout, allocations):
    def f(a):
        return np.zeros_like(a), np.ones_like(a), np.zeros_like(a, np.float32), \
            np.ones_like(a, dtype=np.complex128)

    assert_same(f, _inputs()[layout], ops=["zeros_like", "ones_like"],
                jit_kwargs={"jit_config": {"jit_level": level}})
    assert allocations.count("empty_like") >= 4


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", [None, np.bool_, np.uint16, np.int64, np.float16, np.float32,
                                   np.complex64])
def test_every_numeric_dtype(level, dtype, allocations):
    def f(a, n):
        return np.zeros_like(a, dtype=dtype), np.ones(n, dtype), np.ones((n, 2), dtype, "F")

    assert_same(f, np.arange(5.0), 4, ops=["zeros_like", "ones"],
                jit_kwargs={"jit_config": {"jit_level": level}})
    assert allocations.count("empty") >= 2


class Filled(np.ndarray):
    """A subclass whose fill is its own: what NumPy's functions never call."""
    def fill(self, value):
        super().fill(value + 7)


@pytest.mark.parametrize("dtype", [object, "U3", "S2", "M8[s]", "m8[D]", "V8",
                                   [("x", "f8"), ("y", "i2")], np.longdouble])
@pytest.mark.parametrize("subclass", [False, True])
def test_other_results_are_filled_by_copyto(dtype, subclass):
    """Capture takes none of these, but a replacement must do what NumPy's function does
    for every argument it accepts: a void array's fill(0) raises where copyto writes zero
    bytes, and a subclass's fill may be its own."""
    a = np.arange(6.0).reshape(2, 3)
    if subclass:
        a = a.view(Filled)
    for fn, args in ((np.zeros_like, (a, dtype)), (np.ones_like, (a, dtype))):
        mine, want = creation.replacement(fn, args, ())(*args), fn(*args)
        assert type(mine) is type(want) and mine.dtype == want.dtype
        assert mine.shape == want.shape and mine.strides == want.strides
        assert np.asarray(mine).tolist() == np.asarray(want).tolist()
    mine, want = creation.fill_ones((2, 3), dtype, "F"), np.ones((2, 3), dtype, "F")
    assert mine.dtype == want.dtype and mine.strides == want.strides
    assert mine.tolist() == want.tolist()


@pytest.mark.parametrize("level", LEVELS)
def test_outputs_of_a_loop_nest(level, allocations):
    """A kernel by loops allocating its result: the NumPy backend's generated function
    calls the replacement, and the nest writes into what it returned."""
    def running_sums(a):
        out = np.zeros_like(a)
        acc = np.ones(a.shape[1])
        for i in range(a.shape[0]):
            for j in range(a.shape[1]):
                acc[j] += a[i, j]
                out[i, j] = acc[j]
        return out, acc

    assert_same(running_sums, np.arange(12.0).reshape(3, 4).T.copy(order="F"),
                ops=["zeros_like", "ones"], jit_kwargs={"jit_config": {"jit_level": level}})
    assert "empty_like" in allocations and "empty" in allocations


@pytest.mark.parametrize("level", LEVELS)
def test_errors_are_numpys(level):
    def f(n, dtype):
        return np.ones((n, 2), dtype)

    assert_same(f, -1, np.float64, graphs=None, breaks=None,
                jit_kwargs={"jit_config": {"jit_level": level}})


@pytest.mark.parametrize("fn, args, kwargs, replaced", [
    (np.zeros_like, (Ref(0),), (), True),
    (np.zeros_like, (Ref(0), np.float32), (), True),
    (np.zeros_like, (Ref(0),), (("dtype", np.float32),), True),
    (np.zeros_like, (Ref(0),), (("order", "F"),), False),
    (np.zeros_like, (Ref(0),), (("subok", False),), False),
    (np.zeros_like, (Ref(0),), (("shape", (2, 2)),), False),
    (np.zeros_like, (), (("a", Ref(0)),), False),
    (np.zeros_like, (Ref(0), np.float32), (("dtype", np.float32),), False),
    (np.zeros_like, (Ref(0), np.float32, "C"), (), False),
    (np.ones_like, (Ref(0),), (("dtype", int),), True),
    (np.ones, ((2, 3),), (), True),
    (np.ones, (Ref(0), np.int8, "F"), (), True),
    (np.ones, (Ref(0),), (("order", "F"), ("dtype", bool)), True),
    (np.ones, (Ref(0),), (("like", Ref(1)),), False),
    (np.ones, (Ref(0), np.int8, "F", None), (), False),
    (np.zeros, (Ref(0),), (), False),
    (np.full_like, (Ref(0), 1.5), (), False),
])
def test_replaced_only_where_every_argument_binds(fn, args, kwargs, replaced):
    """Any argument form the replacement would bind differently keeps NumPy's function."""
    got = creation.replacement(fn, args, kwargs)
    assert (got is not fn) == replaced, got
