"""A list whose length changes between calls, handed to NumPy, stays in the graph (issue 18;
pijit/capture/dynamic_lists.py): np.mean(vals), np.asarray(vals), len(vals), np.polyval(coeffs,
x)... become nodes on the list, guarded by what its items' types tell of its dtype.

Every test runs a function plain and jitted over lists of many lengths (so the list goes
dynamic after the first call), compares each call's outcome (result bits, warnings,
exceptions, the lists as the calls left them), and asserts how the newest entry ran: its ops
and guards, and that no call broke the graph, or that it breaks where it must."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import pijit
import pijit.eval_frame as ef
from pijit.capture.sources import LocalSource
from pijit.explain import report
from pijit.graph.opaque import OpaqueCall, OpaqueMismatch
from pijit.guards import Guard, items_dtype, to_program

from differential import run_sizes
from test_hook import _graph_mode  # noqa: F401 - autouse: GRAPH_MODE, hook left uninstalled

LEVELS = ["O0", "O1"]


def run_lengths(fn, make, lengths, level="O1"):
    """The jitted function's stats after run_sizes over these list lengths, with its break
    reasons."""
    jitted = run_sizes(fn, make, lengths, {"jit_level": level})
    stats = pijit.stats(jitted)
    stats["reasons"] = [b["reason"] for b in report(jitted.fn.__code__).break_reasons]
    return stats


def newest(stats):
    return stats["entries"][0]


def floats(n, seed=0):
    return [float(v) for v in np.random.default_rng(seed + n).normal(size=n)]


X = np.linspace(-1.0, 1.0, 33)


# ---------------------------------------------------------------------------------------------
# Library-style uses: one dynamic entry, no break.

def scaled_by_mean(x, vals):
    return np.sqrt(x * x + 1.0) * np.mean(vals)


def horner(coeffs, x):
    return np.polyval(coeffs, x)


def distance(p, q):
    d = np.asarray(p) - np.asarray(q)
    return np.sqrt(np.dot(d, d)) / len(p)


def normalized(vals):
    a = np.array(vals)
    return (a - a.mean()) / (a.std() + 1.0), len(vals)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn, make, ops", [
    (scaled_by_mean, lambda n: (X, floats(n)), ["asarray", "mean"]),
    (horner, lambda n: (floats(n), X), ["polyval"]),
    (distance, lambda n: (floats(n), floats(n, 7)), ["asarray", "dot", "len"]),
    (normalized, lambda n: (floats(n),), ["asarray", "len"]),
])
def test_library_uses_of_a_list_of_many_lengths_compile_once(fn, make, ops, level):
    s = run_lengths(fn, make, range(1, 41), level)
    assert s["break_count"] == 0 and s["eager_fallbacks"] == [], s
    assert s["compile_count"] == 2, s                 # the first length, then dynamic
    entry = newest(s)
    assert all(op in entry["ops"] for op in ops), entry
    assert not any("len(" in g or "[0]" in g for g in entry["guards"]), entry


def test_len_is_the_lists_length_at_run_time():
    def f(x, vals):
        return x * len(vals) + np.sum(vals)
    s = run_lengths(f, lambda n: (X, floats(n)), [3, 5, 0, 8, 1, 0, 12])
    assert s["break_count"] == 0, s
    assert "len" in newest(s)["ops"], newest(s)


def test_an_empty_list_gives_numpys_warning_and_nan():
    s = run_lengths(scaled_by_mean, lambda n: (X, floats(n)), [2, 3, 0, 4, 0])
    assert s["break_count"] == 0 and s["compile_count"] == 2, s


# ---------------------------------------------------------------------------------------------
# What the items tell: the dtype of each entry, guarded; items that tell nothing break.

KINDS = {
    "floats": lambda n: [0.5 * i - 1.0 for i in range(n)],
    "ints": lambda n: [3 * i - 7 for i in range(n)],
    "bools": lambda n: [i % 3 == 0 for i in range(n)],
    "mixed": lambda n: [i if i % 2 else i + 0.25 for i in range(n)],
    "np_float64": lambda n: [np.float64(i) / 3 for i in range(n)],
    "np_int64": lambda n: [np.int64(i) * 5 for i in range(n)],
    "np_bool": lambda n: [np.bool_(i % 2) for i in range(n)],
    "bools_and_ints": lambda n: [True] + list(range(n)),
    "int64_edges": lambda n: [2 ** 63 - 1, -2 ** 63] + [i for i in range(n)],
    "signed_zeros_nan": lambda n: [-0.0, float("nan"), float("inf")] + [0.0] * n,
}


def summary(x, vals):
    a = np.asarray(vals)
    return x[:1] * 0 + a.sum(), np.mean(vals), a, len(vals)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_item_kind_converts_as_numpy_does(kind, level):
    make = KINDS[kind]
    s = run_lengths(summary, lambda n: (X, make(n)), [1, 2, 5, 9, 17], level)
    assert s["break_count"] == 0, s
    dtype = np.asarray(make(3)).dtype
    assert f"np.asarray(vals): {dtype}[?] (by its items' types)" in newest(s)["guards"], s


def test_calls_alternating_item_kinds_get_an_entry_each():
    lists = [KINDS[k] for k in ("floats", "ints", "bools", "floats", "ints")]
    s = run_lengths(summary, lambda n: (X, lists[n % 5](n)), range(5, 60))
    assert s["break_count"] == 0, s
    # the first length static; then float64, int64 and bool entries, all hit again
    assert s["compile_count"] == 4, s
    guards = [g for e in s["entries"] for g in e["guards"] if g.startswith("np.asarray(")]
    assert sorted(guards) == sorted(f"np.asarray(vals): {d}[?] (by its items' types)"
                                    for d in ("float64", "int64", "bool")), guards


def test_an_empty_list_is_float64_whatever_the_items_were():
    ints = KINDS["ints"]
    s = run_lengths(summary, lambda n: (X, ints(n)), [3, 4, 0, 5, 0, 6])
    assert s["break_count"] == 0, s
    assert s["compile_count"] == 3, s          # static, int64, then float64 for []


@pytest.mark.parametrize("make", [
    lambda n: [2 ** 63] + [1] * n,                      # uint64 by its value
    lambda n: [-1, 2 ** 63] + [1] * n,                  # float64 by its values
    lambda n: [10 ** 30] + [1.0] * n,                   # object
    lambda n: [np.float32(i) for i in range(n + 1)],    # float32
    lambda n: [[1.0, 2.0]] * (n + 1),                   # nested: 2-D
    lambda n: [np.ones(3)] * (n + 1),                   # arrays: 2-D
    lambda n: [1.0, 1 + 2j] * (n + 1),                  # complex
], ids=["uint64", "int_and_huge", "object", "float32", "nested", "arrays", "complex"])
def test_items_that_do_not_tell_the_dtype_break_where_they_are_read(make):
    s = run_lengths(summary, lambda n: (X, make(n)), [1, 2, 3, 4])
    assert s["break_count"] >= 1, s
    assert not any(g.startswith("np.asarray(") for e in s["entries"] for g in e["guards"]), s


def test_a_list_of_huge_ints_after_floats_misses_the_entry():
    """The guard scans the items: an int past int64 in a list the entry saw as float64 is a
    miss (NumPy would make it float64 here, but not by a rule the guard knows)."""
    lists = {1: [1.0], 2: [1.0, 2.0], 3: [1.0, 2.0, 3.0], 4: [1.0, 2 ** 64, 3.0, 4.0]}
    s = run_lengths(summary, lambda n: (X, lists[n]), [1, 2, 3, 4])
    assert s["cache_misses"] == 3, s


# ---------------------------------------------------------------------------------------------
# Conversions: fresh arrays, NumPy's casts and errors.

def two_arrays(vals):
    a = np.asarray(vals)
    b = np.asarray(vals)
    a *= 2.0
    return a + b, b


def test_each_conversion_is_a_fresh_array():
    s = run_lengths(two_arrays, lambda n: (floats(n),), range(1, 12))
    assert s["break_count"] == 0, s
    assert newest(s)["ops"].count("asarray") == 2, newest(s)


def returned(vals):
    return np.array(vals), np.asarray(vals), vals


def test_a_returned_conversion_is_not_the_list_and_not_shared():
    s = run_lengths(returned, lambda n: (floats(n),), range(1, 12))
    assert s["break_count"] == 0, s


def cast(vals, dtype):
    return np.array(vals, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int8, np.bool_, np.float64])
def test_a_dtype_other_than_the_items_is_numpys_conversion_of_the_list(dtype):
    s = run_lengths(cast, lambda n: ([1.5 * i - 3.25 for i in range(n)], dtype), range(1, 9))
    assert s["break_count"] == 0, s
    assert ("array" if dtype is not np.float64 else "asarray") in newest(s)["ops"], newest(s)


def test_a_failing_conversion_raises_numpys_error_at_the_users_line():
    lists = {1: [1.0], 2: [1.0, 2.0], 3: [1.0, 2.0, 3.0], 4: [1.0, float("nan"), 3.0, 4.0]}
    s = run_lengths(cast, lambda n: (lists[n], np.int64), [1, 2, 3, 4])
    assert s["break_count"] == 0, s


# ---------------------------------------------------------------------------------------------
# Writes before the use: the use breaks, as before.

def appended_then_mean(x, vals):
    vals.append(1.5)
    return x * np.mean(vals)


def appended_other_then_mean(x, vals, other):
    other.append(1.5)
    return x * np.mean(vals)


def mean_then_appended(x, vals):
    m = np.mean(vals)
    vals.append(m)
    return x * m


def test_a_list_appended_to_before_its_use_breaks_there():
    """The append is captured (made after the graph); np.mean(vals), which the graph would
    run before it, breaks."""
    s = run_lengths(appended_then_mean, lambda n: (X, floats(n)), range(1, 8))
    assert s["break_count"] >= 1, s
    assert not any("asarray" in e["ops"] for e in s["entries"] if "ops" in e), s
    assert any("length changes between calls after an append to it" in r
               for r in s["reasons"]), s["reasons"]


def test_another_list_appended_to_may_be_the_same_list():
    def make(n):
        vals = floats(n)
        return (X, vals, vals if n % 2 else [])
    s = run_lengths(appended_other_then_mean, make, range(1, 8))
    assert s["break_count"] >= 1, s


def test_an_append_after_the_use_is_made_after_it():
    s = run_lengths(mean_then_appended, lambda n: (X, floats(n)), range(1, 10))
    assert s["break_count"] == 0, s
    assert "asarray" in newest(s)["ops"], newest(s)


# ---------------------------------------------------------------------------------------------
# Uses that stay breaks: Python's own functions of the list (sum of a float list is a node:
# tests/test_calls_without_rules.py).

def python_sum(vals):
    return sum(vals), abs(np.float64(len(vals)))


def test_pythons_sum_of_an_int_list_is_left_to_python():
    s = run_lengths(python_sum, lambda n: ([3 * i - 7 for i in range(n)],), range(0, 6))
    assert s["break_count"] >= 1, s


# ---------------------------------------------------------------------------------------------
# The C guard against its Python rule and NumPy.

POOL = [1.0, -0.0, float("nan"), 3, -5, 0, True, False, np.float64(2.5), np.int64(-7),
        np.bool_(True), 2 ** 63 - 1, -2 ** 63, 2 ** 63, -2 ** 63 - 1, np.float32(1.0),
        np.int32(4), [1.0], np.ones(2), "s", None, 1j]


class FloatSub(float):
    pass


def _lists(count):
    rng = np.random.default_rng(18)
    out = [[], [FloatSub(1.0)], [FloatSub(1.0), 2.0]]
    for _ in range(count):
        n = int(rng.integers(1, 5))
        out.append([POOL[int(i)] for i in rng.integers(0, len(POOL), n)])
    return out


def test_items_dtype_is_numpys_dtype_whenever_it_tells_one():
    told = 0
    for lst in _lists(3000):
        dtype = items_dtype(lst)
        if dtype is None:
            continue
        told += 1
        a = np.asarray(lst)
        assert (a.dtype, a.dtype.num, a.ndim) == (dtype, dtype.num, 1), lst
    assert told > 300


def test_the_c_items_check_is_the_python_rule():
    def f(x):
        return "plain"
    state = ef.mark(f.__code__)
    try:
        w = ef.Wrapper(f)
        for dtype in ("float64", "int64", "bool"):
            guard = Guard(LocalSource(0, "x"), "items", (np.dtype(dtype),))
            ef.add_entry(f.__code__, *to_program([guard]), lambda x, d=dtype: d)
        for lst in _lists(1000):
            want = items_dtype(lst)
            got = w(lst)
            assert got == ("plain" if want is None else str(want)), (lst, got, want)
        assert w((1.0,)) == "plain"             # a tuple is not a list
    finally:
        del state


def test_the_items_check_takes_no_references():
    def f(vals):
        return np.mean(vals)
    jitted = pijit.jit(f, jit_config={"jit_level": "O0"})
    lists = [floats(n) for n in range(1, 5)] + [[1, 2 ** 40, True]]
    for lst in lists:
        jitted(lst)
    before = [sys.getrefcount(lst) for lst in lists] + [sys.getrefcount(v) for v in lists[-1]]
    for _ in range(2000):
        for lst in lists:
            jitted(lst)
    after = [sys.getrefcount(lst) for lst in lists] + [sys.getrefcount(v) for v in lists[-1]]
    assert before == after
    assert pijit.stats(jitted)["break_count"] == 0


# ---------------------------------------------------------------------------------------------
# Calls without a rule get the list itself; an `out` argument is never a converted list.

def differences(vals, x):
    return np.diff(vals) * 2.0, np.median(vals) + x


def test_a_pure_call_without_a_rule_gets_the_list_and_any_result_size(monkeypatch):
    """np.diff(vals) is as long as vals minus one: the node's result dims are dynamic, so
    no length mismatches what the graph was compiled for (and runs plain)."""
    mismatches = []
    checked = OpaqueCall.checked

    def counting(self, result):
        try:
            return checked(self, result)
        except OpaqueMismatch:
            mismatches.append(self.name)
            raise
    monkeypatch.setattr(OpaqueCall, "checked", counting)
    s = run_lengths(differences, lambda n: (floats(n), X), range(1, 20))
    assert s["break_count"] == 0 and s["compile_count"] == 2, s
    assert {"diff", "median"} <= set(newest(s)["ops"]), newest(s)
    assert mismatches == []


def into_a_list(x, vals):
    return np.add(x, 1.0, vals), np.mean(x, None, None, vals)


def test_a_list_as_out_raises_as_numpy_does():
    s = run_lengths(into_a_list, lambda n: (X[:n], floats(n)), range(1, 6))
    assert not any(g.startswith("np.asarray(") for e in s["entries"] for g in e["guards"]), s


def dot_and_einsum(p, q):
    return np.dot(p, q), np.einsum("i,i->", p, q), np.maximum(p, 0.0)


def test_lists_as_operands_of_dot_einsum_and_ufuncs():
    s = run_lengths(dot_and_einsum, lambda n: (floats(n), floats(n, 3)), range(1, 12))
    assert s["break_count"] == 0, s
    assert newest(s)["ops"].count("asarray") == 5, newest(s)


# ---------------------------------------------------------------------------------------------
# Operators: a list beside an array is the array's ufunc on the converted list.

def operators(p, q):
    d = np.asarray(p)
    return d * q - q, q / (d + 2.0), d < q, d @ q, q ** d


@pytest.mark.parametrize("level", LEVELS)
def test_a_list_beside_an_array_in_an_operator(level):
    s = run_lengths(operators, lambda n: (floats(n), floats(n, 5)), range(1, 12), level)
    assert s["break_count"] == 0, s
    assert newest(s)["ops"].count("asarray") == 7, newest(s)


def list_operators(p, q):
    d = np.asarray(p)
    d += q                          # NumPy's in-place add of the list
    r = q + [1.0]                   # list concatenation
    return d, r, q * 2              # list repetition


def test_list_operators_stay_pythons():
    s = run_lengths(list_operators, lambda n: (floats(n), floats(n, 5)), range(1, 8))
    assert s["break_count"] >= 1, s


def scaled_list(q):
    return q * 2.0                  # TypeError, as in plain Python


def test_a_list_times_a_float_raises_typeerror():
    run_lengths(scaled_list, lambda n: (floats(n),), range(1, 5))


def scaled_by(q, x):
    c = float(x.sum())              # a Python float the graph computes
    return c * q                    # a float times a list: TypeError, as in plain Python


def test_a_list_beside_a_python_float_known_at_run_time_raises_typeerror():
    s = run_lengths(scaled_by, lambda n: (floats(n), X), range(1, 6))
    assert s["break_count"] >= 1, s


# ---------------------------------------------------------------------------------------------
# A list longer than MAX_LOOP_UNROLLING is read as a dynamic list from its first call.

def test_a_long_list_is_a_dynamic_list_from_the_first_call():
    s = run_lengths(scaled_by_mean, lambda n: (X, floats(n)), [500, 300, 101, 450])
    assert s["break_count"] == 0 and s["compile_count"] == 1, s
    assert "asarray" in newest(s)["ops"], newest(s)


def first_item(x, xs):
    return x * 2.0 + xs[0]


def test_reading_an_item_of_a_long_list_breaks_there():
    s = run_lengths(first_item, lambda n: (X, floats(n)), [500, 300])
    assert s["break_count"] == 1 and s["compile_count"] == 1, s
    assert any("its items are not guarded" in r for r in s["reasons"]), s["reasons"]
