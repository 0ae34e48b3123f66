"""Calls real library code makes that had no capture rule and broke the graph (issues 18 and
21): `dict.get` and `in` on a dict capture knows key by key (an options dict, a dict the
function builds); tuple()/list() of a generator they consume at once; divmod of Python ints;
sum() of a list whose length changes between calls. Each test compares plain and jitted runs
(results bits, mutated inputs, exceptions) and asserts how the call ran: one graph and no
break where the rule applies, a break where it must not."""
from __future__ import annotations

import numpy as np
import pytest

import pijit

from differential import assert_same
from test_dynamic_lists import newest, run_lengths
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


# ---------------------------------------------------------------------------------------------
# A generator expression (or a generator made in the function) that tuple() or list()
# consumes at once: its items, captured (capture/generators.py).

def reduce_and_keep_shape(x, axes):
    shape = tuple(s for i, s in enumerate(x.shape) if i not in axes)
    return x.sum(axis=axes).reshape(shape) * 2.0


@pytest.mark.parametrize("axes", [(1,), (0, 2), ()])
def test_tuple_of_a_generator_expression_over_a_shape_is_captured(axes):
    report = assert_same(reduce_and_keep_shape, np.arange(24.0).reshape(2, 3, 4), axes)
    assert report.fallback is None


def rows_scaled(x, scales):
    parts = list(x[i] * s for i, s in enumerate(scales) if s != 0)
    parts.append(x[0] - 1.0)
    return parts, tuple(p.sum() for p in parts)


def test_list_of_a_generator_expression_of_arrays_is_a_fresh_list():
    assert_same(rows_scaled, np.arange(12.0).reshape(3, 4) - 5.5, (2.0, 0, -0.5),
                ops=["mul", "sub", "sum"])


def logged(out, v, x):
    out.append(v)
    return x * v


def body_with_effects(x, out):
    # each item's effect happens in the order the consumer pulls them, before the code after
    ys = tuple(logged(out, v, x) for v in (3.0, -1.0, 0.5))
    out.append(len(ys))
    return ys[0] + ys[1] * ys[2]


def test_a_generator_bodys_effects_happen_in_order():
    assert_same(body_with_effects, X, [])       # the caller's list is compared after


def generator_function(x):
    def gen():
        got = yield x + 1.0
        yield got             # next() sends None
        yield x * 2.0
    return tuple(gen()), list(gen())


def test_a_generator_function_made_in_the_function_is_consumed_by_tuple_and_list():
    assert_same(generator_function, X)


def divides_each(x, n, divisors):
    return tuple(n // d + x for d in divisors)


def test_an_error_in_a_generator_body_at_run_time_is_plain_pythons():
    # n is known only at run time: n // 0 raises ZeroDivisionError from the graph
    config = {"jit_config": {"specialize_scalar": False}}
    assert_same(divides_each, X, 7, (2, 0), graphs=None, breaks=None, jit_kwargs=config)
    assert_same(divides_each, X, 7, (2, -3), jit_kwargs=config)


def walrus_generator(x):
    first = tuple(g := (v * 2.0 for v in (x, x + 1.0)))
    return first, tuple(g)          # g is exhausted: ()


def generator_to_any(x, vals):
    y = x * 2.0
    return y if any(v > 1 for v in vals) else -y


def test_a_generator_not_consumed_at_once_by_tuple_or_list_is_not_inlined():
    # the generator outlives the consumer's call (walrus); any() may stop early
    for fn, args in ((walrus_generator, (X,)), (generator_to_any, (X, (0, 2, 1)))):
        report = assert_same(fn, *args, graphs=None, breaks=None)
        assert report.graph_break_count >= 1, report
        assert "genexpr" in report.break_reasons[0]["reason"], report


def stopiteration_in_body(x):
    it = iter((x, x))
    return tuple(next(it) for _ in range(3))     # PEP 479: RuntimeError, not StopIteration


def test_stopiteration_in_a_generator_body_is_plain_pythons_runtimeerror():
    # next() has no rule: the genexpr is not inlined, and the function runs plain
    assert_same(stopiteration_in_body, X, graphs=0, breaks=None)


def containers(x):
    t = (x, x * 2.0)
    lst = list(t)
    copied = list(lst)          # a new list: the append below does not reach it
    lst.append(3.0)
    return lst, tuple(lst[:2]), t, copied


def test_tuple_and_list_of_known_containers_are_captured():
    assert_same(containers, X)


# ---------------------------------------------------------------------------------------------
# divmod of Python ints known only at run time: (a // b, a % b) in the graph.

def split_rows(x, n, k):
    q, r = divmod(n, k)
    return x[:q] * 2.0 + r, divmod(n, 4)


SCALARS_AT_RUN_TIME = {"jit_config": {"specialize_scalar": False}}


@pytest.mark.parametrize("n, k", [(7, 3), (-7, 3), (7, -3), (-7, -3), (0, 5), (True, 2)])
def test_divmod_of_python_ints_known_at_run_time_is_captured(n, k):
    assert_same(split_rows, X, n, k, ops=["floordiv", "mod"], jit_kwargs=SCALARS_AT_RUN_TIME)


def test_divmod_by_zero_raises_divmods_own_message():
    assert_same(split_rows, X, 7, 0, graphs=None, breaks=None, jit_kwargs=SCALARS_AT_RUN_TIME)


def float_divmod(x, a, b):
    q, r = divmod(a, b)
    return x * q + r


@pytest.mark.parametrize("a, b", [(7.5, 2.0), (-0.0, 3.0), (7.0, 0.0)])
def test_divmod_of_floats_known_at_run_time_still_breaks(a, b):
    # floats' divmod raises "float divmod()", not the message of // or %
    assert_same(float_divmod, X, a, b, graphs=None, breaks=None, jit_kwargs=SCALARS_AT_RUN_TIME)
    report = pijit.explain(pijit.jit(float_divmod, **SCALARS_AT_RUN_TIME), X, 7.5, 2.0)
    assert report.graph_break_count == 1 and "divmod" in report.break_reasons[0]["reason"]


# ---------------------------------------------------------------------------------------------
# sum() of a list whose length changes between calls (capture/dynamic_lists.py): Python's
# own sum, called by the graph on the list, when its items tell float64.

def total_scaled(x, vals):
    s = sum(vals)
    return x * s + 1.0, s


SHORT, LONG = [2, 3, 6, 1, 9, 4], [102, 3, 6, 1, 9]


@pytest.mark.parametrize("kind, make, lengths", [
    ("floats", lambda n: [0.5 * i - 1.25 for i in range(n)], SHORT),
    # 3.12+ sums floats compensated (1.0 here), 3.11 one after another (0.0)
    ("cancelling", lambda n: [1e16, 1.0, -1e16] + [0.0] * n, SHORT),
    ("ints_then_floats", lambda n: list(range(n)) + [0.5], SHORT),
    # (a short list of np.float64 items, guarded item by item, breaks at sum: dynamic at once)
    ("np_float64_first", lambda n: [np.float64(1.5)] + [0.25] * n, LONG),
    ("signed_zeros", lambda n: [-0.0] * (n + 1), SHORT),
])
def test_sum_of_a_float_list_of_many_lengths_stays_in_the_graph(kind, make, lengths):
    s = run_lengths(total_scaled, lambda n: (X, make(n)), lengths)
    assert s["break_count"] == 0 and s["eager_fallbacks"] == [], s
    assert "builtins.sum" in newest(s)["ops"], newest(s)


def test_sum_of_an_empty_list_is_the_int_0_as_plain_pythons():
    # the graph was compiled for a float: the int 0 runs that call plain, same outcome
    s = run_lengths(total_scaled, lambda n: (X, [0.5] * n), [2, 3, 0, 4, 0, 5])
    assert s["break_count"] == 0, s


def test_sum_of_an_int_list_still_breaks():
    # an int sum may leave int64; the graph would have to type it by its value
    s = run_lengths(total_scaled, lambda n: (X, list(range(n))), [2, 3, 6, 1])
    assert s["break_count"] >= 1 and "builtins.sum" not in newest(s)["ops"], s
