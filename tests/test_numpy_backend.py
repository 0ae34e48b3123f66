"""The NumPy backend's generated code: expression trees, operator syntax, `del` of dead locals,
bit-identical results, aliasing, constants, peak memory and user-located tracebacks."""
import math
import re
import traceback
import tracemalloc

import numpy as np
import pytest

import pijit
import pijit.cache
from pijit.backends import numpy_backend

NAN, INF = float("nan"), math.inf

# These tests read the NumPy backend's generated code: pin it.
O0 = {"jit_level": "O0"}


def run(fn, *args):
    """(jitted result, plain result, generated source) of one call."""
    pijit.reset()
    jitted = pijit.jit(fn, jit_config=O0)
    got = jitted(*args)
    want = fn(*args)
    entries = pijit.cache.record(fn.__code__).entries
    assert entries and entries[0].graph is not None, "expected a captured graph"
    return got, want, entries[0].graph_source


def assert_identical(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert type(g) is type(w)
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(g, w, strict=True)
        assert np.asarray(g).tobytes() == np.asarray(w).tobytes()   # bit-identical, NaN too


def locals_assigned(source):
    return re.findall(r"^\s+(v\d+) = ", source, re.M)


def poly(x):
    return ((((0.5 * x - 1.25) * x + 2.0) * x - 0.75) * x + 3.0) * x - 1.0


def test_long_chain_is_one_expression():
    x = np.random.default_rng(0).standard_normal(1000)
    got, want, source = run(poly, x)
    assert_identical(got, want)
    assert locals_assigned(source) == []
    assert "del " not in source
    assert "0.5 * v0 - 1.25" in source          # operator syntax, original association


def multi_use(x):
    t = x * 2.0
    s = x - np.sum(t * t) + np.max(t)
    return s * s


def test_multi_use_temporary_gets_a_local_and_a_del():
    x = np.linspace(-1.0, 1.0, 50)
    got, want, source = run(multi_use, x)
    assert_identical(got, want)
    lines = source.splitlines()
    t_local = next(i for i, ln in enumerate(lines) if re.match(r"\s+v\d+ = v0 \* 2\.0$", ln))
    name = lines[t_local].split()[0]
    dels = [i for i, ln in enumerate(lines) if re.match(rf"\s+del .*\b{name}\b", ln)]
    assert len(dels) == 1 and dels[0] > t_local
    assert not any(re.search(rf"\b{name}\b", ln) for ln in lines[dels[0] + 1:])


def inplace_after_alias(x):
    t = x * 2
    s = t + 1
    t += 5
    return s, t


def test_inplace_does_not_move_reads_past_it():
    x = np.arange(6.0)
    got, want, source = run(inplace_after_alias, x)
    assert_identical(got, want)
    assert got[1] is not x and not np.shares_memory(got[0], got[1])


def inplace_with_inlined_operand(x, y):
    t = x * 3.0
    t -= y * 0.5
    return t / 2.0


def test_inplace_with_expression_operand():
    x, y = np.arange(5.0), np.linspace(0.0, 1.0, 5)
    got, want, _ = run(inplace_with_inlined_operand, x, y)
    assert_identical(got, want)


def swapped(x, y):
    b = y * 3.0
    a = x * 2.0
    return a + b


def test_evaluation_order_is_kept():
    x, y = np.arange(4.0), np.arange(4.0) + 1
    got, want, source = run(swapped, x, y)
    assert_identical(got, want)
    body = [ln.strip() for ln in source.splitlines()[1:]]
    # y * 3.0 runs first, so it is a statement before the tree that computes x * 2.0.
    assert re.match(r"v\d+ = v\d+ \* 3\.0$", body[0])


def input_out(x):
    return x, x + 1.0, x


def test_output_that_is_an_input_stays_the_same_object():
    x = np.arange(3.0)
    got, want, _ = run(input_out, x)
    assert_identical(got, want)
    assert got[0] is x and got[2] is x


def repeated(x):
    y = x * 2.0 + 1.0
    return y, y


def test_repeated_outputs_are_one_object():
    x = np.arange(3.0)
    got, want, _ = run(repeated, x)
    assert_identical(got, want)
    assert got[0] is got[1]


def indexing(x):
    return (x[1:, None, ..., 0], x[(1, 2)], x[::2], x[..., -1], x[0, :, 1:3] * 2.0,
            x[(0,)], x[-1])


def test_getitem_forms_and_views():
    x = np.arange(60.0).reshape(3, 4, 5)
    got, want, source = run(indexing, x)
    assert_identical(got, want)
    for g, w in zip(got, want):
        assert np.shares_memory(g, x) == np.shares_memory(w, x)
    assert "getitem" not in source and "f1(" not in source


def slice_arguments(x):
    return np.delete(x * 2.0, slice(1, None, 2)) + 1.0, np.delete(x, slice(-4, 5))


def test_a_slice_argument_of_a_call_is_a_slice_object():
    """A slice that is no subscript key (np.delete's) is written as a call of slice()."""
    x = np.arange(7.0)
    got, want, source = run(slice_arguments, x)
    assert_identical(got, want)
    assert "slice(1, None, 2)" in source and "slice(-4, 5, None)" in source


def nonfinite(x):
    return x * NAN, x + INF, x - (-INF), np.maximum(x, -INF) * 1e300


def test_nan_and_inf_constants_are_bound_not_printed():
    x = np.arange(3.0)
    got, want, source = run(nonfinite, x)
    assert_identical(got, want)
    assert "nan" not in source and "inf" not in source


def negative_literals(x):
    return (-2) ** x, -2.5 ** x, x ** -1, -x * -3


def test_negative_literals_keep_their_precedence():
    x = np.arange(1.0, 4.0)
    got, want, _ = run(negative_literals, x)
    assert_identical(got, want)


def test_deep_chain_is_split_into_bounded_trees():
    import operator
    from pijit.graph.ir import Graph, Meta

    graph, meta = Graph(), Meta.array((7,), np.float64)
    ref = x_ref = graph.add_input(meta, "x")
    for _ in range(2000):
        ref = graph.add_node("mul", operator.mul, (ref, 1.0001), {}, meta, 3)
        ref = graph.add_node("add", operator.add, (ref, 0.5), {}, meta, 3)
    graph.outputs = [ref, x_ref]
    compiled = numpy_backend.compile_graph(graph, "deep", __file__, 1)
    x = want = np.linspace(0.0, 1.0, 7)
    for _ in range(2000):
        want = want * 1.0001 + 0.5
    got = compiled.fn(x)
    assert_identical(got, (want, x))
    assert got[1] is x
    assert len(locals_assigned(compiled.source)) >= 4000 // numpy_backend.MAX_TREE_DEPTH - 1


def test_peak_memory_of_polynomial_is_close_to_numpy():
    x = np.random.default_rng(1).standard_normal(4_000_000)
    jitted = pijit.jit(poly, jit_config=O0)
    assert np.array_equal(jitted(x), poly(x))

    def peak(f):
        tracemalloc.start()
        try:
            f(x)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    plain, jit = peak(poly), peak(jitted)
    assert jit <= 1.5 * plain, (plain, jit)


def power_error(a, b):
    c = a + 1
    d = np.power(c, b)
    return d * 2


def index_error(x, idx):
    y = x * 2.0
    z = y[idx]
    return z + 1.0


def test_runtime_error_points_at_the_users_line():
    # Compile with valid data first, so the error comes from the compiled graph.
    pijit.reset()
    jitted = pijit.jit(power_error, jit_config=O0)
    jitted(np.arange(3), np.array([1, 2, 3]))
    with pytest.raises(ValueError) as info:
        jitted(np.arange(3), np.array([-1, 2, 3]))
    frame = traceback.extract_tb(info.value.__traceback__)[-1]
    assert frame.filename == __file__
    assert frame.lineno == power_error.__code__.co_firstlineno + 2   # the np.power line
    assert pijit.cache.record(power_error.__code__).entries[0].graph is not None


def test_index_error_points_at_the_users_line():
    pijit.reset()
    jitted = pijit.jit(index_error, jit_config=O0)
    x = np.arange(4.0)
    jitted(x, np.array([0, 3]))
    with pytest.raises(IndexError) as info:
        jitted(x, np.array([0, 9]))
    frame = traceback.extract_tb(info.value.__traceback__)[-1]
    assert frame.filename == __file__
    assert frame.lineno == index_error.__code__.co_firstlineno + 2   # z = y[idx]
