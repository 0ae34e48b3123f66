"""Differential testing: run a function plain and jitted, compare everything, and check how
the jitted call ran, so a silent fallback to plain Python cannot pass as capture."""
from __future__ import annotations

import contextlib
import copy
import io
import math

import numpy as np

import pijit
from pijit import cache
from pijit.explain import report as explain_report


def layout_copy(a: np.ndarray) -> np.ndarray:
    """A copy of `a` with the same strides and offset into a copy of its base (deepcopy would
    make non-contiguous inputs contiguous, and then their layout would go untested)."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root is a or root.base is not None:
        return a.copy(order="K") if a.flags.forc else np.array(a, copy=True, order="K")
    root_copy = root.copy(order="A")
    offset = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return np.ndarray(a.shape, a.dtype, buffer=root_copy, offset=offset, strides=a.strides)


def clone(value):
    """Deep copy keeping array layouts, and keeping objects that appear twice shared."""
    memo = {}

    def visit(obj, depth=0):
        if id(obj) in memo or depth > 4:
            return
        if isinstance(obj, np.ndarray):
            memo[id(obj)] = layout_copy(obj)
        elif isinstance(obj, (tuple, list)):
            for o in obj:
                visit(o, depth + 1)
        elif isinstance(obj, dict):
            for o in obj.values():
                visit(o, depth + 1)
        elif hasattr(obj, "__dict__") and not isinstance(obj, type):
            for o in vars(obj).values():
                visit(o, depth + 1)

    visit(value)
    return copy.deepcopy(value, memo)


def run_captured(fn, args, kwargs):
    """(result, exception, stdout) of fn(*args, **kwargs)."""
    out = io.StringIO()
    result, exc = None, None
    with contextlib.redirect_stdout(out):
        try:
            result = fn(*args, **kwargs)
        except Exception as e:     # compared, not swallowed
            exc = e
    return result, exc, out.getvalue()


def assert_equal_values(got, expected, path="result"):
    """Same type, dtype, shape and values (NaN equal to NaN, -0.0 distinct from 0.0 for types)."""
    assert type(got) is type(expected), f"{path}: type {type(got)} != {type(expected)}"
    if isinstance(expected, np.ndarray):
        assert got.dtype == expected.dtype, f"{path}: dtype {got.dtype} != {expected.dtype}"
        assert got.shape == expected.shape, f"{path}: shape {got.shape} != {expected.shape}"
        equal_nan = expected.dtype.kind in "fc"
        assert np.array_equal(got, expected, equal_nan=equal_nan), f"{path}: values differ"
    elif isinstance(expected, (tuple, list)):
        assert len(got) == len(expected), f"{path}: length {len(got)} != {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_equal_values(g, e, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert list(got) == list(expected), f"{path}: keys {list(got)} != {list(expected)}"
        for k in expected:
            assert_equal_values(got[k], expected[k], f"{path}[{k!r}]")
    elif isinstance(expected, (float, complex, np.inexact)):
        both_nan = _isnan(got) and _isnan(expected)
        assert both_nan or got == expected, f"{path}: {got!r} != {expected!r}"
    elif hasattr(expected, "__dict__") and not isinstance(expected, type):
        assert_equal_values(vars(got), vars(expected), f"vars({path})")
    else:
        assert got == expected, f"{path}: {got!r} != {expected!r}"


def _isnan(x) -> bool:
    try:
        return bool(np.isnan(x).any()) if isinstance(x, complex) else math.isnan(x)
    except TypeError:
        return False


def _leaves(value):
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    else:
        yield value


def alias_pattern(result, args):
    """For each array in the result: which argument arrays it shares memory with / is."""
    arrays = [a for a in _leaves(args) if isinstance(a, np.ndarray)]
    pattern = []
    for leaf in _leaves(result):
        if isinstance(leaf, np.ndarray):
            pattern.append(tuple((leaf is a, bool(np.shares_memory(leaf, a))) for a in arrays))
    return pattern


def assert_same(fn, *args, graphs=1, breaks=0, ops=None, jit_kwargs=None, kwargs=None,
                calls=2):
    """Run fn plain and jitted (`calls` times, on deep copies) and compare results, mutated
    inputs, printed output and exceptions; then check the jitted run made `graphs` graphs
    and `breaks` breaks (graphs=0: the function must have fallen back to plain Python), that
    the op names include `ops`, and that later calls hit the cache. Returns the report."""
    kwargs = kwargs or {}
    plain_args, plain_kwargs = clone((args, kwargs))
    expected, expected_exc, expected_out = run_captured(fn, plain_args, plain_kwargs)
    jitted = pijit.jit(fn, **(jit_kwargs or {}))
    pijit.reset(jitted)
    for call in range(calls):
        jit_args, jit_kwargs_ = clone((args, kwargs))
        got, exc, out = run_captured(jitted, jit_args, jit_kwargs_)
        where = f"call {call + 1}"
        assert out == expected_out, f"{where}: printed output differs:\n{out!r}\n{expected_out!r}"
        if expected_exc is not None:
            assert type(exc) is type(expected_exc), f"{where}: raised {exc!r}, expected {expected_exc!r}"
            assert str(exc) == str(expected_exc)
        else:
            assert exc is None, f"{where}: jitted call raised {exc!r}"
            assert_equal_values(got, expected)
            assert alias_pattern(got, jit_args) == alias_pattern(expected, plain_args), \
                f"{where}: aliasing of results with inputs differs"
        assert_equal_values(list(jit_args), list(plain_args), "mutated inputs")
        assert_equal_values(jit_kwargs_, plain_kwargs, "mutated kwargs")
    code = jitted.fn.__code__
    report = explain_report(code)
    assert report.graph_count == graphs, f"expected {graphs} graphs, got {report}"
    assert report.graph_break_count == breaks, f"expected {breaks} breaks, got {report}"
    if graphs:
        assert report.fallback is None, f"fell back to plain Python: {report.fallback}"
        stats = pijit.stats(jitted)
        assert stats["cache_hits"] >= calls - 1, f"later calls did not hit the cache: {stats}"
    if ops is not None:
        flat = [op for graph_ops in report.ops_per_graph for op in graph_ops]
        for op in ops:
            assert op in flat, f"op {op!r} not captured; ops were {flat}"
    assert cache.record(code) is not None
    return report
