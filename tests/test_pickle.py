"""Jitted functions pickle, copy and are weakly referenced like the functions they wrap:
by reference, so process pools, concurrent.futures, joblib and cloudpickle can send them to
other processes, where they run jitted with the same options."""
import concurrent.futures
import copy
import gc
import multiprocessing
import pickle
import re
import weakref

import numpy as np
import pytest

import pijit
import pickled_functions as pf


def test_a_decorated_function_pickles_to_itself():
    for fn in (pf.decorated, pf.Model.construct):
        assert pickle.loads(pickle.dumps(fn)) is fn
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            assert pickle.loads(pickle.dumps(fn, protocol)) is fn


@pytest.mark.xfail(strict=True, raises=pickle.PicklingError,
                   reason="jit returns a copy of the function, which pickle (by reference, "
                   "found by its name) cannot find when its module holds the original under that "
                   "name; cloudpickle pickles it by value (test_joblib_and_cloudpickle)")
def test_jit_of_a_module_function_pickles_with_its_options():
    clone = pickle.loads(pickle.dumps(pf.transformed))
    assert clone is not pf.transformed and clone.fn is pf.plain
    x = np.arange(4.0)
    assert np.array_equal(clone(x), pf.plain(x))
    info = pijit.explain(clone, x)
    assert info.graph_count == 1 and info.fallback is None
    assert pijit.cache.record(pf.plain.__code__).config.limit_graph_count == 3


def test_a_bound_jitted_method_pickles():
    model = pf.Model(np.eye(3))
    bound = pickle.loads(pickle.dumps(model.construct))
    x = np.ones((2, 3))
    assert np.array_equal(bound(x), x @ np.eye(3) + 1)


def test_what_cannot_be_pickled_raises_what_plain_pickling_raises():
    with pytest.raises(pickle.PicklingError) as plain_error:
        pickle.dumps(pf.lambda_jitted.fn)
    with pytest.raises(pickle.PicklingError) as jit_error:
        pickle.dumps(pf.lambda_jitted)
    # (3.12+: the jitted function is a copy of the lambda, at another address)
    assert re.sub(" at 0x[0-9a-f]+", "", str(jit_error.value)) == \
        re.sub(" at 0x[0-9a-f]+", "", str(plain_error.value))


def test_copies_are_the_function_and_weak_references_work():
    assert copy.copy(pf.decorated) is pf.decorated
    assert copy.deepcopy(pf.decorated) is pf.decorated
    assert copy.deepcopy({"f": pf.Model.construct})["f"] is pf.Model.construct
    ref = weakref.ref(pf.decorated)
    assert ref() is pf.decorated


@pytest.mark.parametrize("method", multiprocessing.get_all_start_methods())
def test_a_process_pool_maps_jitted_functions(method):
    chunks = [np.linspace(-1, 1, 5) * k for k in range(4)]
    with multiprocessing.get_context(method).Pool(2) as pool:
        for fn, plain in [(pf.decorated, pf.decorated.fn)]:      # (see the xfail above)
            got = pool.map(fn, chunks)
            for g, chunk in zip(got, chunks):
                assert np.array_equal(g, plain(chunk))
        infos = pool.map(_ran_jitted, [pf.decorated] * 2)
    assert infos == [True, True]


def _ran_jitted(fn):
    """In the worker: the unpickled function runs jitted (it compiles an entry)."""
    fn(np.ones(3))
    return pijit.stats(fn)["compile_count"] >= 1


def test_concurrent_futures_process_pool():
    x = np.linspace(0, 1, 6)
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context(
            "spawn")) as ex:
        assert np.array_equal(ex.submit(pf.decorated, x).result(), pf.decorated.fn(x))


def test_joblib_and_cloudpickle():
    cloudpickle = pytest.importorskip("cloudpickle")
    x = np.linspace(0, 1, 6)
    for fn in (pf.decorated, pf.transformed):
        assert np.array_equal(cloudpickle.loads(cloudpickle.dumps(fn))(x), fn(x))
    local = pijit.jit(lambda x: x * 3)           # by value, as cloudpickle does lambdas
    assert np.array_equal(cloudpickle.loads(cloudpickle.dumps(local))(x), x * 3)
    joblib = pytest.importorskip("joblib")
    got = joblib.Parallel(n_jobs=2, backend="loky")(joblib.delayed(pf.decorated)(x * k)
                                                      for k in range(3))
    for k, g in enumerate(got):
        assert np.array_equal(g, pf.decorated.fn(x * k))


def test_a_function_unpickled_by_value_again_runs_the_code_compiled_before():
    """cloudpickle sends functions of __main__ (a notebook, a script run by Dask's workers) by
    value, and Dask and joblib unpickle them for every task: each time a new code object."""
    cloudpickle = pytest.importorskip("cloudpickle")
    ns = {"__name__": "not_importable", "np": np, "SCALE": 2.0}     # pickled by value
    exec("def scaled(x):\n    return np.exp(x) * SCALE\n", ns)
    payload = cloudpickle.dumps(pijit.jit(ns["scaled"]))
    x = np.linspace(0, 1, 5)
    codes = []
    for _ in range(3):          # tasks, each unpickling the function, which then dies
        task = cloudpickle.loads(payload)
        assert np.array_equal(task(x), np.exp(x) * 2.0)
        codes.append(task.fn.__code__)
        stats = pijit.stats(task)
        del task
        gc.collect()
    assert all(code is codes[0] for code in codes)
    assert stats["compile_count"] == 1 and stats["call_count"] == 3
    ns["SCALE"] = 3.0           # the same code with another global: guarded, not reused blindly
    task = cloudpickle.loads(cloudpickle.dumps(pijit.jit(ns["scaled"])))
    assert task.fn.__code__ is codes[0] and np.array_equal(task(x), np.exp(x) * 3.0)
