"""Draws from MT19937 generators (NumPy's global RandomState behind np.random.*, any
RandomState, Generator(MT19937)) followed by pure opaque calls in one graph (issue 22).

A pure opaque call may mismatch at run time (a result whose size depends on the data); the
call then restarts as plain Python, with the generators drawn from before it put back. An
MT19937 state is put back by copying its raw struct (graph/opaque.py raw_state), so such
draws no longer break the graph; a RandomState's cached Gaussian is not in that struct, so
after its normal/standard_normal/gamma... draws a pure opaque call still breaks. Each test
compares against plain NumPy under the same seeds, and asserts through explain how it ran.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import pijit
from differential import assert_equal_values
from pijit.explain import report as explain_report
from pijit.graph.opaque import GAUSS_FREE

LEVELS = [{"jit_config": {"jit_level": "O0"}}, {"jit_config": {"jit_level": "O1"}}]

MT = np.random.Generator(np.random.MT19937(0))
LEGACY = np.random.RandomState(0)

# One call of each GAUSS_FREE method (size 3).
GAUSS_FREE_CALLS = {
    "random_sample": (3,), "random": (3,), "rand": (3,), "randint": (0, 10, 3),
    "random_integers": (1, 10, 3), "tomaxint": (3,), "uniform": (0, 1, 3), "choice": (5, 3),
    "permutation": (5,), "exponential": (1.0, 3), "standard_exponential": (3,),
    "binomial": (10, 0.3, 3), "poisson": (3.0, 3), "geometric": (0.3, 3),
    "hypergeometric": (5, 5, 3, 3), "logseries": (0.5, 3), "zipf": (2.0, 3),
    "laplace": (0, 1, 3), "gumbel": (0, 1, 3), "logistic": (0, 1, 3), "rayleigh": (1, 3),
    "pareto": (2.0, 3), "weibull": (2.0, 3), "power": (2.0, 3), "triangular": (0, 1, 2, 3),
}


@pytest.mark.parametrize("name", sorted(GAUSS_FREE))
def test_gauss_free_methods_leave_the_cached_gaussian(name):
    """What raw_state relies on, checked against this NumPy: these draws change nothing of
    a RandomState but its MT19937 struct (a cached Gaussian survives them)."""
    assert set(GAUSS_FREE_CALLS) == GAUSS_FREE
    rs = np.random.RandomState(1)
    rs.normal()                                         # leaves a Gaussian cached
    before = rs.get_state(legacy=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        getattr(rs, name)(*GAUSS_FREE_CALLS[name])
    after = rs.get_state(legacy=False)
    assert (before["has_gauss"], before["gauss"]) == (after["has_gauss"], after["gauss"]) \
        == (1, before["gauss"])


def global_draws_then_pure_calls(X):
    noise = np.random.randint(0, 3, size=X.shape)       # np.random's global RandomState
    pick = np.random.choice(X.shape[0], 2)
    u = np.unique(np.floor(X * 3.0) + noise)            # data-sized: checked, may mismatch
    lst = np.linalg.lstsq(X, noise[:, 0] * 1.0, rcond=None)[1]   # () or (1,): mismatches
    return u * 2.0, lst, pick, np.random.uniform(size=2) + 1.0


def generator_draws_then_pure_calls(X):
    noise = MT.normal(size=X.shape)                     # Generator(MT19937): all its state
    lst = np.linalg.lstsq(X, noise[:, 0], rcond=None)[1]
    return np.cov(X + noise) * 2.0, lst, MT.integers(0, 9, size=3)


def legacy_draws_then_pure_calls(X):
    noise = LEGACY.random_sample(X.shape)
    lst = np.linalg.lstsq(X, noise[:, 0], rcond=None)[1]
    return np.linalg.solve(X.T @ X + np.eye(3), noise.sum(axis=0)), lst, LEGACY.rand(2)


def _seed():
    np.random.seed(7)
    MT.bit_generator.state = np.random.Generator(np.random.MT19937(3)).bit_generator.state
    LEGACY.seed(11)


def _observed(fn, X):
    """fn(X) and the next numbers of each generator: they must be where NumPy leaves them."""
    return fn(X), np.random.random(), MT.random(), LEGACY.random_sample()


@pytest.mark.parametrize("jit_kwargs", LEVELS, ids=["O0", "O1"])
@pytest.mark.parametrize("fn", [global_draws_then_pure_calls, generator_draws_then_pure_calls,
                                legacy_draws_then_pure_calls])
def test_mt19937_draws_then_pure_calls_in_one_graph(fn, jit_kwargs):
    """Same numbers as NumPy under the same seeds, calls that mismatch (lstsq of a rank-1
    matrix: its residuals are empty) included: the restart puts the generators back. One
    entry serves every call, with no break."""
    full = np.random.default_rng(5).random((6, 3))
    low = np.ones((6, 3))
    jitted = pijit.jit(fn, **jit_kwargs)
    pijit.reset(jitted)
    for X in (full, full, low, full, low):
        _seed()
        expected = _observed(fn, X)
        _seed()
        assert_equal_values(_observed(jitted, X), expected)
    report = explain_report(jitted.fn.__code__)
    assert report.graph_count == 1 and report.graph_break_count == 0, report
    assert "linalg.lstsq" in report.opaque_calls[0]
    assert pijit.code_info(jitted)["compile_count"] == 1


def sizes_change(x):
    keep = np.random.random_sample(x.shape) < 0.5       # a new count every call
    u = np.unique(x[keep])
    return u * 2.0 + 1.0, np.random.randint(0, 5, size=2)


@pytest.mark.parametrize("jit_kwargs", LEVELS, ids=["O0", "O1"])
def test_result_sizes_changing_between_calls_reuse_the_entry(jit_kwargs):
    jitted = pijit.jit(sizes_change, **jit_kwargs)
    pijit.reset(jitted)
    x = np.arange(40.0) % 13
    np.random.seed(3)
    expected = [sizes_change(x) for _ in range(5)]
    np.random.seed(3)
    got = [jitted(x) for _ in range(5)]
    assert_equal_values(got, expected)
    assert len({e[0].shape for e in expected}) > 1
    assert pijit.code_info(jitted)["compile_count"] == 1
    assert pijit.stats(jitted)["cache_hits"] == 4
    report = explain_report(jitted.fn.__code__)
    assert report.graph_count == 1 and report.graph_break_count == 0, report


def gaussian_then_mismatch(X):
    noise = np.random.normal(size=5)        # an odd count: leaves a Gaussian cached
    lst = np.linalg.lstsq(X, noise * 1.0, rcond=None)[1]
    return lst, np.random.normal(size=3)


def test_a_cached_gaussian_still_breaks_before_a_pure_call():
    """After a Gaussian draw from a RandomState over MT19937, a pure opaque call breaks the
    graph: its cached Gaussian could not be put back cheaply on a mismatch."""
    full = np.random.default_rng(5).random((5, 3))
    low = np.ones((5, 3))                   # rank 1: lstsq's residuals are empty
    jitted = pijit.jit(gaussian_then_mismatch)
    pijit.reset(jitted)
    for X in (full, low, full, low):
        np.random.seed(9)
        expected = (gaussian_then_mismatch(X), np.random.normal())
        np.random.seed(9)
        assert_equal_values((jitted(X), np.random.normal()), expected)
    report = explain_report(jitted.fn.__code__)
    assert report.graph_break_count == 1, report
    assert "random.normal from an MT19937 RandomState" in report.break_reasons[0]["reason"]
