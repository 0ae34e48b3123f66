"""Opaque call nodes (issue 22): calls of NumPy/SciPy functions without an op-table rule, and
draws from NumPy random generators, stay in the graph as nodes calling the real function.

Each test compares plain and jitted runs (tests/differential.py: results bit for bit, mutated
inputs, printed output, exceptions) and asserts through explain that the call ran in one
graph without a break.
"""
from __future__ import annotations

import contextlib
import io
import sys
import traceback
import warnings

import numpy as np
import pytest

import pijit
from pijit.explain import report as explain_report
from tests.differential import assert_equal_values, assert_same

LEVELS = [{"jit_config": {"jit_level": "O0"}}, {"jit_config": {"jit_level": "O1"}}]


def _spd(n, seed=0):
    a = np.random.default_rng(seed).random((n, n))
    return a @ a.T + n * np.eye(n)


def linalg_solve(A, b, x):
    y = np.linalg.solve(A, b)
    return x * 0.5 + y * 2.0


def linalg_family(A, x):
    L = np.linalg.cholesky(A)
    inv = np.linalg.inv(A)
    d = np.linalg.det(A)
    return (L * 2.0 + 1.0).sum() + d, inv @ x - x


def fft_family(x):
    f = np.fft.rfft(x)
    g = np.fft.irfft(f * 0.5, n=x.shape[0])
    return np.abs(f) * 2.0, g + x


def histogram_binning(x):
    counts, edges = np.histogram(x, bins=16, range=(0.0, 1.0))
    centres = (edges[1:] + edges[:-1]) * 0.5
    return counts * 2 + 1, (centres * counts).sum()


def covariance_normalised(X):
    c = np.cov(X)
    d = np.sqrt(np.diag(c))
    return c / d[:, None] / d[None, :]


def matrix_helpers(a, v):
    return np.triu(a, 1) * 2.0 + np.tril(a) - np.kron(v, v)[:a.shape[0], None]


def ufunc_methods(a, b):
    o = np.add.outer(a, b) * 2.0
    r = np.maximum.reduce(o, axis=1)
    c = np.add.accumulate(a)
    return o - r[:, None], c * c


FAMILIES = [
    (linalg_solve, lambda: (_spd(6), np.arange(6.0), np.ones(6)), ["linalg.solve"]),
    (linalg_family, lambda: (_spd(5, 1), np.arange(5.0)),
     ["linalg.cholesky", "linalg.inv", "linalg.det"]),
    (fft_family, lambda: (np.random.default_rng(2).random(32),), ["fft.rfft", "fft.irfft"]),
    (histogram_binning, lambda: (np.random.default_rng(3).random(200),), ["histogram"]),
    (covariance_normalised, lambda: (np.random.default_rng(4).random((4, 50)),),
     ["cov", "diag"]),
    (matrix_helpers, lambda: (np.arange(16.0).reshape(4, 4), np.arange(3.0)),
     ["triu", "tril", "kron"]),
    (ufunc_methods, lambda: (np.arange(5.0), np.linspace(0, 1, 3)),
     ["add.outer", "maximum.reduce", "add.accumulate"]),
]


@pytest.mark.parametrize("jit_kwargs", LEVELS, ids=["O0", "O1"])
@pytest.mark.parametrize("fn,make,ops", FAMILIES, ids=[f[0].__name__ for f in FAMILIES])
def test_family_in_one_graph(fn, make, ops, jit_kwargs):
    report = assert_same(fn, *make(), graphs=1, breaks=0, ops=ops, jit_kwargs=jit_kwargs)
    assert sorted(report.opaque_calls[0]) == sorted(ops)


def scipy_calls(A, b, x):
    import scipy.linalg
    import scipy.special
    y = scipy.linalg.solve(A, b)
    return scipy.special.erf(x) * 2.0 + y


def test_scipy_functions_are_opaque_nodes():
    pytest.importorskip("scipy")
    import scipy.linalg  # noqa: F401  (the purity table covers SciPy once it is imported)
    assert_same(scipy_calls, _spd(4), np.ones(4), np.linspace(-1, 1, 4), graphs=1, breaks=0,
                ops=["scipy.linalg._basic.solve"])


def fortran_result(a):
    f = np.asfortranarray(a)
    return f * 2.0 + 1.0, (f - 1.0).sum(axis=0)


@pytest.mark.parametrize("jit_kwargs", LEVELS, ids=["O0", "O1"])
def test_fortran_order_result_feeds_fused_kernels(jit_kwargs):
    a = np.arange(12.0).reshape(3, 4) - 5.5
    assert_same(fortran_result, a, graphs=1, breaks=0, jit_kwargs=jit_kwargs)


def unique_then_math(x):
    u = np.unique(x)
    return u * 2.0 + 1.0


def test_result_shape_changing_between_calls_runs_plain():
    jitted = pijit.jit(unique_then_math)
    pijit.reset(jitted)
    inputs = [np.array([3.0, 1.0, 3.0, 2.0]), np.array([1.0, 1.0, 1.0, 5.0]),
              np.array([4.0, 3.0, 2.0, 1.0]), np.array([3.0, 1.0, 3.0, 2.0])]
    for x in inputs:
        assert_equal_values(jitted(x.copy()), unique_then_math(x.copy()))
    report = explain_report(jitted.fn.__code__)
    assert report.graph_count == 1 and report.graph_break_count == 0
    assert report.opaque_calls == [["unique"]]
    assert pijit.stats(jitted)["compile_count"] == 1 if "compile_count" in pijit.stats(jitted) \
        else True


def dynamic_sizes(A, b):
    return np.linalg.solve(A, b) * 3.0 - b


def test_dynamic_dims_reach_opaque_results():
    jitted = pijit.jit(dynamic_sizes)
    pijit.reset(jitted)
    for n in (3, 4, 5, 6):
        A, b = _spd(n, n), np.arange(float(n))
        assert_equal_values(jitted(A, b), dynamic_sizes(A, b))
    report = explain_report(jitted.fn.__code__)
    assert report.graph_break_count == 0
    assert pijit.code_info(jitted)["compile_count"] == 2      # the second is dynamic


def solve_line(A, b):
    y = b * 2.0
    x = np.linalg.solve(A, y)  # the line the traceback must show
    return x + 1.0


def _raised(fn, *args):
    try:
        fn(*args)
    except Exception as e:
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == __file__]
        return type(e), str(e), frames[-1].lineno      # the graph's frame has its own name
    raise AssertionError("did not raise")


def test_raising_inside_the_graph_same_exception_same_line():
    singular = np.ones((3, 3))
    jitted = pijit.jit(solve_line)
    pijit.reset(jitted)
    jitted(_spd(3), np.ones(3))                       # compiles with a solvable system
    expected = _raised(solve_line, singular, np.ones(3))
    assert _raised(jitted, singular, np.ones(3)) == expected
    assert expected[2] == solve_line.__code__.co_firstlineno + 2
    report = explain_report(jitted.fn.__code__)
    assert report.graph_count == 1 and report.graph_break_count == 0


def global_random(x):
    a = np.random.normal(0.0, 1.0, size=x.shape)
    y = x * a + 1.0
    b = np.random.uniform(size=3)
    return y.sum() + b, np.random.randint(0, 10, size=4) * 2


rng = np.random.default_rng(0)


def generator_random(x):
    rng.normal(size=2)                # a discarded draw still advances the generator
    a = rng.normal(size=x.shape)
    y = np.exp(x * 0.5) + a
    return y * rng.random(), rng.integers(0, 5, size=3)


def _seeded_runs(fn, seed, x, calls):
    out = []
    for _ in range(calls):
        seed()
        out.append((fn(x.copy()), np.random.random(), rng.random()))
    return out


@pytest.mark.parametrize("jit_kwargs", LEVELS, ids=["O0", "O1"])
@pytest.mark.parametrize("fn", [global_random, generator_random])
def test_random_draws_same_numbers_as_numpy(fn, jit_kwargs):
    start = np.random.default_rng(99).bit_generator.state

    def seed():
        np.random.seed(1234)
        rng.bit_generator.state = start          # the same Generator: its id is guarded

    x = np.linspace(0.0, 1.0, 7)
    expected = _seeded_runs(fn, seed, x, 1)[0]
    jitted = pijit.jit(fn, **jit_kwargs)
    pijit.reset(jitted)
    # The first run captures (calling the draws on the real values) and must still give
    # NumPy's numbers and leave the generators where NumPy leaves them; so must the others.
    for got in _seeded_runs(jitted, seed, x, 3):
        assert_equal_values(got, expected)
    report = explain_report(jitted.fn.__code__)
    assert report.graph_count == 1 and report.graph_break_count == 0, report
    assert all(name.startswith("random.") for name in report.opaque_calls[0])


def random_then_unique(X):
    noise = rng.integers(0, 3, size=X.shape)
    u = np.unique(np.floor(X * 3.0) + noise)     # data-dependent size: checked, may mismatch
    lst = np.linalg.lstsq(X, noise[:, 0] * 1.0, rcond=None)[1]   # () or (1,): mismatches
    return u * 2.0, lst, np.random.normal(size=2)


def test_mismatch_after_draws_puts_the_generators_back():
    full = np.random.default_rng(5).random((6, 3))
    low = np.ones((6, 3))                          # rank 1: lstsq's residuals are empty
    jitted = pijit.jit(random_then_unique)
    pijit.reset(jitted)
    start = np.random.default_rng(3).bit_generator.state

    def seed():
        np.random.seed(7)
        rng.bit_generator.state = start         # the same Generator: its id is guarded

    for X in (full, low, full, low):
        seed()
        expected = (random_then_unique(X), np.random.random(), rng.random())
        seed()
        got = (jitted(X), np.random.random(), rng.random())
        assert_equal_values(got, expected)
    report = explain_report(jitted.fn.__code__)
    assert report.graph_count == 1 and report.graph_break_count == 0, report
    assert report.opaque_calls == [["random.integers", "unique", "linalg.lstsq",
                                    "random.normal"]]


def global_draw_then_cov(X):
    noise = np.random.normal(size=X.shape)
    return np.cov(X + noise)


def test_pure_opaque_call_after_a_global_draw_breaks():
    np.random.seed(7)
    X = np.random.random((3, 20))
    expected = [global_draw_then_cov(X) for _ in range(2)]
    jitted = pijit.jit(global_draw_then_cov)
    pijit.reset(jitted)
    np.random.seed(7)
    np.random.random((3, 20))
    assert_equal_values([jitted(X) for _ in range(2)], expected)
    report = explain_report(jitted.fn.__code__)
    assert report.graph_break_count == 1
    assert "MT19937" in report.break_reasons[0]["reason"]


def writes_then_cov(X):
    Y = X * 1.0
    Y += 1.0
    return np.cov(Y)


def test_pure_opaque_call_after_a_write_breaks():
    report = assert_same(writes_then_cov, np.random.default_rng(5).random((3, 20)),
                         graphs=1, breaks=1)
    assert "after a write" in report.break_reasons[0]["reason"]


def with_out(a, b, o):
    np.add.outer(a, b, out=o)
    return o * 2.0


def fft_with_out(x, o):
    np.fft.fft(x, out=o)
    return o + 1.0


@pytest.mark.parametrize("fn,args", [
    (with_out, (np.arange(3.0), np.arange(4.0), np.zeros((3, 4)))),
    (fft_with_out, (np.arange(8.0), np.zeros(8, complex))),
])
def test_out_argument_is_a_write_and_breaks(fn, args):
    report = assert_same(fn, *args, graphs=1, breaks=1)
    assert "out=" in report.break_reasons[0]["reason"]


def warns(x):
    c = np.corrcoef(x)          # a constant row: RuntimeWarning (invalid value)
    return c * 2.0


def test_capture_does_not_repeat_warnings_or_output():
    x = np.vstack([np.ones(5), np.arange(5.0)])
    with warnings.catch_warnings(record=True) as plain:
        warnings.simplefilter("always")
        expected = warns(x)
    jitted = pijit.jit(warns)
    pijit.reset(jitted)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            result = jitted(x)
    assert_equal_values(result, expected)
    assert [str(w.message) for w in got] == [str(w.message) for w in plain]
    assert out.getvalue() == ""
    assert explain_report(jitted.fn.__code__).graph_break_count == 0


def forbidden(X):
    return np.cov(X) * 2.0


def test_pijit_forbidden_breaks_at_the_call():
    X = np.random.default_rng(8).random((3, 10))
    report = assert_same(forbidden, X, graphs=1, breaks=1,
                         jit_kwargs={"jit_config": {"pijit_forbidden": (np.cov,)}})
    assert "pijit_forbidden" in report.break_reasons[0]["reason"]


CALLS = []


def table(n):
    CALLS.append(n)
    return np.arange(n) * 0.5


def uses_constexpr(x):
    return x + table(4)


def test_pijit_constexpr_folds_the_call_once():
    x = np.ones(4)
    jitted = pijit.jit(uses_constexpr, jit_config={"pijit_constexpr": [table]})
    pijit.reset(jitted)
    CALLS.clear()
    for _ in range(3):
        assert_equal_values(jitted(x), x + np.arange(4) * 0.5)
    assert CALLS == [4]                       # folded at capture, never called again
    report = explain_report(jitted.fn.__code__)
    assert report.graph_count == 1 and report.graph_break_count == 0


@pytest.mark.parametrize("key", ["pijit_forbidden", "pijit_constexpr"])
def test_callable_options_validated(key):
    with pytest.raises(TypeError, match=key):
        pijit.jit(forbidden, jit_config={key: ("np.cov",)})
    with pytest.raises(TypeError, match=key):
        pijit.jit(forbidden, jit_config={key: np.cov})


def test_print_after_all_marks_opaque_calls():
    err = io.StringIO()
    jitted = pijit.jit(covariance_normalised, jit_config={"print_after_all": True})
    pijit.reset(jitted)
    with contextlib.redirect_stderr(err):
        jitted(np.random.default_rng(4).random((3, 9)))
    marked = [line for line in err.getvalue().splitlines() if "[opaque call]" in line]
    assert any(" cov(" in line for line in marked) and any(" diag(" in line for line in marked)
    text = str(pijit.explain(covariance_normalised, np.ones((3, 9)) * np.arange(9)))
    assert "opaque calls: cov, diag" in text


# -- ufunc methods and helpers (issue 22.2) ------------------------------------------------

def index_helpers(a):
    y, x = np.mgrid[0:4, 0:5]
    oy, ox = np.ogrid[0:4, 0:5]
    row = np.r_[a[0], a[1:3] * 2.0, 7.0]
    col = np.c_[a[:3], a[1:4]]
    return a[:4, None] * x + y, (oy * ox) * 1.5, row + 1.0, col * 2


def helpers_with_run_time_bounds(a, n):
    y, x = np.mgrid[0:n, 0:3]
    return (x + y) * a[0]


def ndarray_constructor(buf):
    v = np.ndarray((2, 3), dtype=np.float64, buffer=buf)
    return v * 2.0 + 1.0


def triu_run_time_k(a, k):
    return np.triu(a, k) * 2.0 + np.tril(a, -k)


def int_power(b, e, x):
    return x * (b ** e) + 1.0


@pytest.mark.parametrize("jit_kwargs", LEVELS, ids=["O0", "O1"])
def test_index_helpers_in_one_graph(jit_kwargs):
    report = assert_same(index_helpers, np.arange(6.0), graphs=1, breaks=0,
                         jit_kwargs=jit_kwargs)
    assert sorted(report.opaque_calls[0]) == ["c_[]", "mgrid[]", "ogrid[]", "r_[]"]


def test_helpers_with_values_known_only_at_run_time():
    cfg = {"jit_config": {"specialize_scalar": False}}
    assert_same(helpers_with_run_time_bounds, np.arange(3.0), 4, graphs=1, breaks=0,
                jit_kwargs=cfg)
    assert_same(triu_run_time_k, np.arange(16.0).reshape(4, 4), 1, graphs=1, breaks=0,
                jit_kwargs=cfg, ops=["triu", "tril"])


def test_ndarray_constructor_on_a_buffer():
    report = assert_same(ndarray_constructor, np.arange(6.0), graphs=1, breaks=0)
    assert report.opaque_calls == [["ndarray"]]


@pytest.mark.parametrize("e", [3, -2, 0, 41])
def test_int_power_with_a_guarded_exponent_sign(e):
    cfg = {"jit_config": {"specialize_scalar": False}}
    for level in ("O0", "O1"):
        assert_same(int_power, 3, e, np.arange(4.0), graphs=1, breaks=0, ops=["pow"],
                    jit_kwargs={"jit_config": {**cfg["jit_config"], "jit_level": level}})


def test_int_power_recompiles_when_the_exponent_changes_sign():
    jitted = pijit.jit(int_power, jit_config={"specialize_scalar": False})
    pijit.reset(jitted)
    x = np.arange(3.0)
    for e in (2, 5, -1, -3, 4):
        assert_equal_values(jitted(2, e, x), int_power(2, e, x))
    assert pijit.code_info(jitted)["compile_count"] == 2


# -- data-dependent shapes (issue 22.3) -----------------------------------------------------

def masked_clamp_sum(a, t):
    s = a[a > t]
    return np.clip(s * 2.0, 0.5, 1.5).sum(), s.shape[0]


def nonzero_unique_where(a):
    (i,) = np.nonzero(a > 0.5)
    u = np.unique(np.round(a * 4.0))
    w = np.where(a < 0.25)[0]
    return i * 2 + 1, u * 0.5 - 1.0, w.sum(), np.flatnonzero(a > 0.9) + 1


def auto_bins(a):
    counts, edges = np.histogram(a, bins="auto")
    widths = edges[1:] - edges[:-1]         # slices of a data-sized result: dynamic too
    return counts * 2, edges * 0.5 + edges.sum(), (counts * widths).sum()


@pytest.mark.parametrize("jit_kwargs", LEVELS, ids=["O0", "O1"])
@pytest.mark.parametrize("fn,args", [
    (masked_clamp_sum, (0.3,)), (nonzero_unique_where, ()), (auto_bins, ()),
])
def test_data_dependent_sizes_stay_in_one_entry(fn, args, jit_kwargs):
    jitted = pijit.jit(fn, **jit_kwargs)
    pijit.reset(jitted)
    gen = np.random.default_rng(11)
    for n in (50, 50, 50, 50):
        a = gen.random(n) ** 2          # a new number of selected elements each call
        assert_equal_values(jitted(a.copy(), *args), fn(a.copy(), *args))
    report = explain_report(jitted.fn.__code__)
    assert report.graph_count == 1 and report.graph_break_count == 0, report
    assert pijit.code_info(jitted)["compile_count"] == 1
    assert pijit.stats(jitted)["cache_hits"] == 3
    assert_same(fn, gen.random(40), *args, graphs=1, breaks=0, jit_kwargs=jit_kwargs)


def warns_at_its_line(x):
    y = x * 2.0
    c = np.cov(y)  # one observation: NumPy warns here, pointing at this line
    return c + 1.0


@pytest.mark.parametrize("jit_kwargs", LEVELS, ids=["O0", "O1"])
def test_run_time_warning_points_at_the_users_line(jit_kwargs):
    x = np.ones((2, 1))
    jitted = pijit.jit(warns_at_its_line, **jit_kwargs)
    pijit.reset(jitted)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jitted(x)                                  # compiles (and warns as it runs)
    places = []
    for fn in (warns_at_its_line, jitted):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            fn(x)
        places.append([(w.filename, w.lineno, str(w.message)) for w in got])
    assert places[1] == places[0]
    assert (__file__, warns_at_its_line.__code__.co_firstlineno + 2) in [p[:2] for p in places[0]]


def test_tuple_results_under_the_adaptive_planner(monkeypatch):
    """The planner weighs the work of a graph whose node has a tuple result (np.histogram;
    np.divmod before this too): that crashed the compile (graph/work.py)."""
    def divmod_then(x):
        q, r = np.divmod(x, 3.0)
        counts, edges = np.histogram(x, bins=4)
        return q + r, counts * 2, edges
    monkeypatch.delenv("PIJIT_ADAPTIVE")          # the suite turns adaptive off
    x = np.arange(20000.0)
    jitted = pijit.jit(divmod_then, jit_config={"adaptive": True, "compile_with_try": False,
                                                "compile_after_ms": 0})
    pijit.reset(jitted)
    for _ in range(3):
        assert_equal_values(jitted(x), divmod_then(x))


SEEN = []


def _python_product(v, w):
    SEEN.append((v, w))      # a side effect capture must not repeat
    return v * w


py_ufunc = np.frompyfunc(_python_product, 2, 1)


def hands_python_code(a):
    return np.apply_along_axis(lambda r: r * 2.0, 0, a) + 1.0, py_ufunc.outer(a, a).astype(float)


def test_calls_running_python_code_are_not_called_by_capture():
    a = np.arange(3.0)
    SEEN.clear()
    expected = hands_python_code(a)
    plain_seen = list(SEEN)
    jitted = pijit.jit(hands_python_code)
    pijit.reset(jitted)
    SEEN.clear()
    got = jitted(a)
    assert_equal_values(got[0], expected[0])
    assert SEEN == plain_seen                 # the Python function ran once per element
    report = explain_report(jitted.fn.__code__)
    assert report.graph_break_count >= 1 and not any(report.opaque_calls)


def named_results(A, x):
    w, v = np.linalg.eigh(A)
    res = np.linalg.svd(A)
    sign, logdet = np.linalg.slogdet(A)
    q = np.linalg.qr(A).Q
    return (v * w) @ x + res.S.sum() + sign * logdet, q * 2.0, res, np.linalg.eigh(A * 2.0)


@pytest.mark.parametrize("jit_kwargs", LEVELS, ids=["O0", "O1"])
def test_namedtuple_results_keep_their_type_and_fields(jit_kwargs):
    report = assert_same(named_results, _spd(4, 9), np.arange(4.0), graphs=1, breaks=0,
                         jit_kwargs=jit_kwargs)
    assert sorted(report.opaque_calls[0]) == ["linalg.eigh", "linalg.eigh", "linalg.qr",
                                              "linalg.slogdet", "linalg.svd"]
    jitted = pijit.jit(named_results, **jit_kwargs)
    got, expected = jitted(_spd(4, 9), np.arange(4.0)), named_results(_spd(4, 9), np.arange(4.0))
    assert type(got[2]) is type(expected[2]) and type(got[3]) is type(expected[3])
    assert got[3]._fields == expected[3]._fields


def array_methods(a, v):
    (i,) = (a > 0.5).nonzero()
    k = a.searchsorted(v)
    return i * 2, k + 1, a.item(0) * 3.0, a.take([0, 2]) * 2.0


@pytest.mark.parametrize("jit_kwargs", LEVELS, ids=["O0", "O1"])
def test_pure_array_methods_are_opaque_nodes(jit_kwargs):
    a = np.sort(np.random.default_rng(12).random(20))
    report = assert_same(array_methods, a, np.array([0.2, 0.7]), graphs=1, breaks=0,
                         jit_kwargs=jit_kwargs)
    assert sorted(report.opaque_calls[0]) == ["item", "nonzero", "searchsorted", "take"]


def residual_count(X, v):
    r = np.linalg.lstsq(X, v, rcond=None)[1]       # shape (1,) at full rank, (0,) below
    return r.shape[0] * 10 + r.sum()                 # shape[0]: a constant in the graph


def eigvals_kind(A):
    w = np.linalg.eigvals(A)                         # float64 or complex128, by the data
    return w.dtype.kind, w * 2.0


@pytest.mark.parametrize("jit_kwargs", LEVELS, ids=["O0", "O1"])
def test_a_result_that_no_longer_matches_is_never_used(jit_kwargs):
    """What the graph after an opaque call assumed (a shape read as a constant, a dtype)
    is checked: a result of another shape or dtype runs the call as plain Python."""
    for fn, inputs in (
            (residual_count, [(np.random.default_rng(5).random((6, 3)), np.ones(6)),
                              (np.ones((6, 3)), np.ones(6))]),
            (eigvals_kind, [(np.diag([1.0, 2.0, 3.0]),),
                            (np.array([[0.0, -1.0], [1.0, 0.0]]),)])):
        jitted = pijit.jit(fn, **jit_kwargs)
        pijit.reset(jitted)
        for args in inputs + inputs:
            assert_equal_values(jitted(*args), fn(*args))
        report = explain_report(jitted.fn.__code__)
        assert report.graph_count >= 1 and report.graph_break_count == 0


def prints_around(X, v, k=2):
    print("start", k)
    r = np.linalg.lstsq(X, v, rcond=None)[1]
    s = r.shape[0] * 10 + r.sum()
    print("mid", s)
    return np.linalg.lstsq(X * 2.0, v, rcond=None)[1].shape[0] + s


def test_mismatch_in_resume_functions_reruns_only_their_part():
    """A graph after a break (in a resume function) restarts that function's code: the
    output printed before it is not printed again."""
    jitted = pijit.jit(prints_around)
    pijit.reset(jitted)
    full, low = np.random.default_rng(5).random((6, 3)), np.ones((6, 3))
    for X in (full, low, full, low):
        expected = _raised_or_printed(prints_around, X)
        assert _raised_or_printed(jitted, X) == expected
    report = explain_report(jitted.fn.__code__)
    assert report.opaque_calls == [["linalg.lstsq"], ["linalg.lstsq"]]


def _raised_or_printed(fn, X):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = fn(X, np.ones(6))
    return repr(result), out.getvalue()


def _sum_on_a_missing_axis(a):
    t = a + 0
    t += 1
    return t, np.sum(a, axis=1)


def test_a_call_whose_rule_finds_it_raises_breaks_before_it():
    """A rule that finds the real call raises (np.sum over an axis a 1-D array lacks) breaks
    there, so plain Python raises it: the call is not tried as an opaque node (which, after
    a write, broke for another reason)."""
    a = np.arange(3.0)
    jitted = pijit.jit(_sum_on_a_missing_axis)
    pijit.reset(jitted)
    for _ in range(2):
        with pytest.raises(np.exceptions.AxisError) as plain:
            _sum_on_a_missing_axis(a)
        with pytest.raises(np.exceptions.AxisError) as got:
            jitted(a)
        assert str(got.value) == str(plain.value)
    (brk,) = explain_report(_sum_on_a_missing_axis.__code__).break_reasons
    assert "sum would raise AxisError" in brk["reason"]


# -- gaps found by the planted faults (tests/mutants/calls_*.toml) ---------------------------

def real_if_close_kind(z):
    w = np.real_if_close(z)                          # float64 or complex128, by the data
    return w.dtype.kind, w * 2.0


def test_a_result_of_another_dtype_and_the_same_shape_runs_plain():
    """np.real_if_close gives float64 for complex values with no imaginary part, complex128
    otherwise, of one shape: the node checks the dtype (read as a constant after it), not
    only the shape."""
    for level in ("O0", "O1"):
        jitted = pijit.jit(real_if_close_kind, jit_config={"jit_level": level})
        pijit.reset(jitted)
        for z in (np.array([1.0 + 0j, 2.0]), np.array([1.0 + 1j, 2.0])) * 2:
            assert_equal_values(jitted(z), real_if_close_kind(z))
        report = explain_report(jitted.fn.__code__)
        assert report.graph_count == 1 and report.graph_break_count == 0, report
        assert report.opaque_calls == [["real_if_close"]]


def fft_out_positional(x, o):
    np.fft.fft(x, None, -1, None, o)        # out is fft's fifth parameter
    first = o.real * 1.0
    np.fft.fft(x * 2.0, None, -1, None, o)
    return first + o.real


@pytest.mark.parametrize("jit_kwargs", LEVELS, ids=["O0", "O1"])
def test_out_passed_positionally_is_a_write_and_breaks(jit_kwargs):
    # as a pure node, the read of o between the calls could move across the second one
    report = assert_same(fft_out_positional, np.arange(8.0), np.zeros(8, complex), graphs=2,
                         breaks=2, jit_kwargs=jit_kwargs)
    assert all("out=" in b["reason"] for b in report.break_reasons), report


def halved(a):
    return a * 0.5 + 1.0


def uses_constexpr_on_an_array(x):
    return x + halved(x)


def test_pijit_constexpr_with_an_array_argument_breaks():
    """An array argument is known only at run time: the call is not folded with the first
    call's values."""
    x = np.arange(4.0)
    cfg = {"jit_config": {"pijit_constexpr": (halved,)}}
    report = assert_same(uses_constexpr_on_an_array, x, graphs=1, breaks=1, jit_kwargs=cfg)
    assert "values known only at run time" in report.break_reasons[0]["reason"]
    jitted = pijit.jit(uses_constexpr_on_an_array, **cfg)
    pijit.reset(jitted)
    for arg in (x, np.ones(4)):
        assert_equal_values(jitted(arg), uses_constexpr_on_an_array(arg))


@pytest.mark.parametrize("jit_kwargs", LEVELS, ids=["O0", "O1"])
def test_a_mismatching_result_runs_plain_for_the_caller(jit_kwargs):
    """Compared call by call with plain Python (results, output, exceptions): a result that
    no longer matches what capture saw restarts the call as plain Python, never reaches the
    caller as pijit's own OpaqueMismatch."""
    from tests.differential import assert_same_outcome, clone, run_observed, run_plain
    jitted = pijit.jit(residual_count, **jit_kwargs)
    pijit.reset(jitted)
    full, low = np.random.default_rng(5).random((6, 3)), np.ones((6, 3))
    for X in (full, low, full, low):
        args = (X, np.ones(6))
        want_args, got_args = clone(args), clone(args)
        assert_same_outcome(run_observed(jitted, got_args, {}),
                            run_plain(residual_count, want_args, {}), got_args, want_args,
                            f"rank {np.linalg.matrix_rank(X)}")
    report = explain_report(jitted.fn.__code__)
    assert report.graph_count == 1 and report.graph_break_count == 0, report
    assert report.opaque_calls == [["linalg.lstsq"]], report
