"""Calls real library code makes that had no capture rule and broke the graph (issue 21):
`dict.get` and `in` on a dict capture knows key by key (an options dict, a dict the function
builds), ... Each test compares plain and jitted runs (results bits, mutated inputs,
exceptions) and asserts how the call ran: one graph and no break where the rule applies,
a break where it must not."""
from __future__ import annotations

import numpy as np
import pytest

import pijit

from differential import assert_same
from test_hook import _graph_mode  # noqa: F401 - autouse: GRAPH_MODE, hook left uninstalled

X = np.linspace(-1.5, 2.0, 11)


# ---------------------------------------------------------------------------------------------
# dict.get and `in` on a dict whose keys capture knows.

def variance_with_options(x, opts):
    ddof = opts.get("ddof", 0)
    scale = opts.get("scale")
    m = x.mean()
    v = ((x - m) ** 2).sum() / (x.size - ddof)
    return v if scale is None else v * scale


@pytest.mark.parametrize("opts", [{}, {"ddof": 1}, {"scale": -2.0}, {"ddof": 2, "scale": 0.5},
                                  {"ddof": None}])
def test_dict_get_of_an_options_dict_is_captured(opts):
    # {"ddof": None}: the item is None (not the default): x.size - None raises TypeError
    graphs, breaks = (1, 1) if opts.get("ddof", 0) is None else (1, 0)
    assert_same(variance_with_options, X, opts, graphs=graphs, breaks=breaks)


def keyed_lookups(x, opts):
    # a found item wins over the default; 1 and True are one key, as in Python's dicts
    table = {1: 2.0, "b": 3.0, None: -1.0}
    return (x * opts.get("w", 10.0) + table.get(True, 0.0) + table.get(None, 5.0)
            + table.get("c", 7.0) + ({"s": 4.0}.get("s") or 0.0))


@pytest.mark.parametrize("opts", [{"w": 0.25}, {"w": -0.0}, {"v": 1.0}])
def test_dict_get_finds_items_by_python_equality_and_defaults_otherwise(opts):
    assert_same(keyed_lookups, X, opts, ops=["mul", "add"])


def membership(x, opts):
    y = x * 2.0
    if "clip" in opts:
        y = np.clip(y, -opts["clip"], opts["clip"])
    if "shift" not in opts:
        return y
    return y + opts["shift"]


@pytest.mark.parametrize("opts", [{}, {"clip": 1.0}, {"shift": -3.0}, {"clip": 0.5, "shift": 1.0}])
def test_in_and_not_in_of_a_dict_are_captured(opts):
    assert_same(membership, X, opts)


def get_after_store(x, opts):
    opts["n"] = opts.get("n", 0) + 1
    return x * opts.get("n")


def test_dict_get_sees_a_store_made_earlier_in_the_function():
    report = assert_same(get_after_store, X, {"n": 2})        # the caller's dict is compared
    assert report.graph_count == 1 and report.graph_break_count == 0


def get_by_run_time_key(x, opts, key):
    return x * opts.get(key, 1.0)


def test_dict_get_of_a_key_known_only_at_run_time_breaks():
    report = assert_same(get_by_run_time_key, X, {1: 3.0}, 1, graphs=None, breaks=1,
                         jit_kwargs={"jit_config": {"specialize_scalar": False}})
    assert "dict" in report.break_reasons[0]["reason"]


def get_wrong_arguments(x, opts):
    y = x + 1.0
    return y * opts.get("a", 1.0, 2.0)


def test_dict_get_with_wrong_arguments_raises_plain_pythons_typeerror():
    assert_same(get_wrong_arguments, X, {"a": 2.0}, graphs=1, breaks=1)


def test_dict_get_guards_the_keys_a_later_call_adds():
    jitted = pijit.jit(variance_with_options, jit_config={"adaptive": False})
    for opts in ({}, {"ddof": 1}, {}, {"scale": 3.0}):
        got, want = jitted(X, opts), variance_with_options(X, opts)
        assert np.float64(got).tobytes() == np.float64(want).tobytes(), opts
