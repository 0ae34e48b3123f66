"""A restarted loop's NumPy ufunc calls run over chunks of iterations (pijit/loopnest/
lanes.py): the body runs in phases, each stopping the lanes at one call, which one call of
NumPy's loop then computes for all of them. Each case runs plain and jitted at O0 and O1
(results bit for bit, warnings, errors; one loop_nest node), across chunk boundaries, with
values that warn or raise at a middle lane, and the loops the rule must leave alone (a value
carried from one iteration into a call, a branch, a store); the premise (NumPy's loop gives
each element of a contiguous run what it gives one element) is checked per ufunc."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.workloads import route_length
from pijit.loopnest import lanes
from tests.test_loop_nests import resumes, same  # noqa: F401 - resumes: a fixture
from tests.test_loop_nests_checks import kernels  # noqa: F401 - a fixture

LEVELS = ["O0", "O1"]
UNARY = sorted({name for name in dir(np) if isinstance(getattr(np, name), np.ufunc)
                and getattr(np, name).nin == 1 and getattr(np, name).nout == 1
                and {"f->f", "d->d"} & set(getattr(np, name).types)})


def special(dtype) -> np.ndarray:
    info = np.finfo(dtype)
    rng = np.random.default_rng(7)
    values = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-300, -1e-300, info.tiny, -info.tiny,
              info.smallest_subnormal, info.max, -info.max, np.inf, -np.inf, np.nan, -np.nan,
              np.pi / 2, np.pi, 1e5, 1e22, 710.0, -745.0, 89.0, -104.0]
    with np.errstate(all="ignore"):
        return np.concatenate([np.array(values, dtype=dtype),
                               rng.uniform(-4, 4, 300).astype(dtype),
                               rng.uniform(-1, 1, 300).astype(dtype),
                               np.exp(rng.uniform(-700, 700, 300)).astype(dtype)])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", UNARY)
def test_numpys_loop_gives_each_element_what_it_gives_one(name, dtype):
    # the premise of lanes.py: a contiguous call over up to LANES elements, as the kernel
    # makes it, computes each element as np.<ufunc>(scalar) does (its loop on n = 1)
    ufunc = getattr(np, name)
    x = special(dtype)
    if (np.dtype(dtype).char * 2)[:1] + "->" + np.dtype(dtype).char not in ufunc.types:
        pytest.skip(f"no {dtype.__name__} loop")
    with np.errstate(all="ignore"):
        one = np.array([ufunc(v) for v in x], dtype=dtype)
        for n in (1, 3, 8, 13, lanes.LANES):
            for start in range(0, x.shape[0], n):
                many = ufunc(x[start:start + n].copy())
                assert many.dtype == one.dtype
                assert many.view(np.uint8).tobytes() == one[start:start + n].view(
                    np.uint8).tobytes(), (name, n, start)


def arc_length(a, b):
    s = a[0] * 0.0
    for j in range(1, a.shape[0]):
        s = s + np.arcsin(a[j]) * np.exp(-b[j - 1])
    return s


def libm_after_numpy(a, b):
    s = a[0] * 0.0
    for j in range(a.shape[0]):
        s = s + np.sin(np.arcsin(a[j])) * np.cos(b[j])
    return s


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("bad", [None, 1.5, np.inf])
def test_libm_calls_after_a_numpy_one(level, bad, resumes, kernels):
    # sin and cos come after arcsin's stop: the lanes compute them in the second phase
    rng = np.random.default_rng(3)
    a, b = rng.uniform(-1, 1, 150), rng.uniform(-9, 9, 150)
    if bad is not None:         # arcsin(1.5) or cos(inf): invalid, at iteration 90
        (a if bad == 1.5 else b)[90] = bad
    same(libm_after_numpy, a, b, level=level)
    if level == "O1":
        assert (resumes == []) == (bad is None)
        assert all(ln.stops == (0,) and ln.phase(1) == ln.phase(2) == 1
                   for ln in lane_loops(kernels)) and lane_loops(kernels)


def carried(a):
    s = a[0] * 0.0
    p = a[0]
    for j in range(a.shape[0]):
        s = s + np.arcsin(p)
        p = a[j]                # the next iteration's call reads it
    return s


def branchy(a):
    s = a[0] * 0.0
    for j in range(a.shape[0]):
        if j % 3 == 0:
            s = s + np.arcsin(a[j])
        else:
            s = s + a[j]
    return s


def stores(a, out):
    s = a[0] * 0.0
    for j in range(a.shape[0]):
        out[j] = np.arcsin(a[j])
        s = s + out[j]
    return s, out


def lane_loops(kernels) -> list:
    return [ln for k in kernels for ln in k.lanes.values()]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", [40, lanes.LANES, lanes.LANES + 1, lanes.LANES + 2,
                               2 * lanes.LANES + 7, 300])
def test_chunks_of_every_size(level, n, resumes, kernels):
    rng = np.random.default_rng(n)
    a, b = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    same(arc_length, a, b, level=level)
    if level == "O1":
        assert resumes == [] and lane_loops(kernels)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("bad", [None, 1.5, np.inf, np.nan, -0.0])
@pytest.mark.parametrize("at", [1, 70, 129])
def test_a_value_that_warns_at_a_middle_lane(level, dtype, bad, at, resumes, kernels):
    # arcsin(1.5) and arcsin(inf) warn at iteration `at` (lane 6 of the second chunk...):
    # the loop runs again in Python, which warns there; NaN only makes the sum NaN
    a = np.linspace(-0.9, 0.9, 130).astype(dtype)
    b = np.ones(130, dtype=dtype)
    if bad is not None:
        a[at] = bad
    same(arc_length, a, b, level=level)
    with np.errstate(invalid="raise"):
        same(arc_length, a, b, level=level)
    if level == "O1":
        assert lane_loops(kernels)
        assert (resumes == []) == (bad is None or bad == 0)


@pytest.mark.parametrize("level", LEVELS)
def test_route_length_runs_its_calls_over_lanes(level, resumes, kernels):
    rng = np.random.default_rng(5)
    lat, lon = rng.uniform(-1.0, 1.0, 300), rng.uniform(-3.0, 3.0, 300)
    same(route_length, lat, lon, level=level, breaks=1)
    if level == "O1":
        assert resumes == []
        found = lane_loops(kernels)         # each copy bounds.py versioned
        # sin, sin, cos, cos by libm in the first phase, arcsin by NumPy's loop after it
        assert found and all(len(ln.sites) == 5 and ln.stops == (4,) for ln in found)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("fn", [carried, branchy])
def test_loops_left_alone(level, fn, resumes, kernels):
    a = np.linspace(-0.9, 0.9, 150)
    same(fn, a, level=level)
    if level == "O1":
        assert resumes == [] and not lane_loops(kernels)


@pytest.mark.parametrize("level", LEVELS)
def test_a_loop_storing_is_left_alone(level, resumes, kernels):
    a = np.linspace(-0.9, 0.9, 150)
    same(stores, a, np.zeros(150), level=level)
    if level == "O1":
        assert not lane_loops(kernels)
