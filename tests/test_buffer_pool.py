"""The kernels' buffer pool (csrc/pool.c): big fused outputs (>= 4 MiB) are allocated through
pijit's NumPy memory handler, which keeps dead blocks and hands them to the next output of
the same size class. The arrays must behave exactly like NumPy's own (owning their data,
resizable), nothing else may be allocated from the pool, kept memory stays under the limit,
and pijit.reset() gives it back."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numpy._core.multiarray import get_handler_name as handler_name

import pijit
from pijit import eval_frame

BIG = 5_000_000             # 40 MB of float64: above the pool's 4 MiB threshold
MB = 1 << 20


def address(a) -> int:
    return a.__array_interface__["data"][0]


def scale(a):
    return a * 2.0 + 1.0


@pytest.fixture
def fresh_pool():
    eval_frame.release_pool()
    eval_frame.set_pool_limit(512 * MB)
    yield
    eval_frame.set_pool_limit(512 * MB)
    eval_frame.release_pool()


def test_big_outputs_come_from_the_pool_and_reuse_dead_blocks(fresh_pool):
    f = pijit.jit(scale)
    a = np.arange(BIG, dtype=np.float64)
    assert pijit.explain(f, a).graph_count == 1
    eval_frame.release_pool()
    r = f(a)
    np.testing.assert_array_equal(r, scale(a))
    assert handler_name(r) == "pijit_buffer_pool"
    assert r.flags.owndata and r.base is None and r.flags.c_contiguous
    first = address(r)
    del r
    gc.collect()
    held = eval_frame.pool_stats()
    assert held["blocks"] == 1 and held["held"] >= BIG * 8
    hits = held["hits"]
    r = f(a + 1.0)                                  # the dead block is handed out again
    assert address(r) == first
    assert eval_frame.pool_stats()["hits"] == hits + 1
    np.testing.assert_array_equal(r, scale(a + 1.0))


def test_outputs_of_4_mib_and_more_start_on_a_huge_page_and_are_kept(fresh_pool):
    """So that huge pages can back all of them (NumPy's start anywhere in one), and so that
    the next call does not fault them in again: glibc maps a block above its mmap threshold
    afresh on every call, and a 30.5 MiB output plus its alignment is above the highest."""
    def halve(a):               # (its own code: other tests' shapes stay out of its cache)
        return a * 0.5 - 1.0
    for n in (MB // 2, 2 * MB + 3, 4_000_000):          # 4, 16 and 30.5 MiB of float64
        f = pijit.jit(halve)
        pijit.reset(f)              # (a new shape would recompile with a symbolic length)
        a = np.arange(n, dtype=np.float64)
        assert pijit.explain(f, a).graph_count == 1
        eval_frame.release_pool()                   # (what explain's call left)
        r = f(a)
        np.testing.assert_array_equal(r, halve(a))
        assert handler_name(r) == "pijit_buffer_pool"
        assert r.flags.owndata and r.base is None
        assert address(r) % (2 * MB) == 0
        first = address(r)
        del r
        gc.collect()
        assert eval_frame.pool_stats()["blocks"] == 1
        r = f(a + 1.0)                                          # the kept block again
        assert address(r) == first and eval_frame.pool_stats()["blocks"] == 0
        r.resize(n + MB // 8, refcheck=False)                   # moves to another block
        np.testing.assert_array_equal(r[:n], halve(a + 1.0))
        assert address(r) % (2 * MB) == 0 and not r[n:].any()
        del r
        gc.collect()
        eval_frame.release_pool()
    pijit.reset(f)
    small = np.ones(MB // 2 - 8)                                # under 4 MiB
    assert handler_name(f(small)) != "pijit_buffer_pool"
    assert pijit.explain(f, small).graph_count == 1


def test_small_outputs_and_user_arrays_do_not_use_the_pool(fresh_pool):
    f = pijit.jit(scale)
    small = f(np.ones(1000))
    assert handler_name(small) != "pijit_buffer_pool"
    f(np.ones(BIG))                                 # a pooled kernel call has run...
    mine = np.empty(BIG)                            # ...and NumPy's handler is back
    assert handler_name(mine) != "pijit_buffer_pool"
    assert handler_name(np.ones(BIG) * 2.0) != "pijit_buffer_pool"


def test_pooled_arrays_resize_like_numpy_arrays(fresh_pool):
    f = pijit.jit(scale)
    a = np.arange(BIG, dtype=np.float64)
    r = f(a)
    assert handler_name(r) == "pijit_buffer_pool"
    r.resize(BIG + 3 * MB, refcheck=False)          # grows into another size class
    np.testing.assert_array_equal(r[:BIG], scale(a))
    assert not r[BIG:].any()                        # NumPy zero-fills what resize adds
    r.resize(10, refcheck=False)                    # shrinks below the pool threshold
    np.testing.assert_array_equal(r, scale(a[:10]))
    r.resize(BIG, refcheck=False)
    np.testing.assert_array_equal(r[:10], scale(a[:10]))
    # a block resized below the pool's threshold is given back when it dies, not kept
    small = f(a)
    small.resize(10, refcheck=False)
    kept = eval_frame.pool_stats()["blocks"]
    del small
    gc.collect()
    assert eval_frame.pool_stats()["blocks"] == kept


def test_the_limit_bounds_kept_memory_and_reset_releases_it(fresh_pool):
    f = pijit.jit(scale)
    eval_frame.set_pool_limit(100 * MB)             # room for two 40 MB blocks, not three
    outs = [f(np.full(BIG, float(k))) for k in range(3)]
    del outs
    gc.collect()
    stats = eval_frame.pool_stats()
    assert stats["blocks"] == 2 and stats["held"] <= 100 * MB
    pijit.reset()
    assert eval_frame.pool_stats()["held"] == 0 and eval_frame.pool_stats()["blocks"] == 0
    eval_frame.set_pool_limit(0)                    # 0: nothing is kept
    r = f(np.ones(BIG))
    del r
    gc.collect()
    assert eval_frame.pool_stats()["blocks"] == 0
    with pytest.raises(ValueError, match="set_pool_limit"):
        eval_frame.set_pool_limit(-1)


def test_pool_calls_do_not_leak_handler_references(fresh_pool):
    f = pijit.jit(scale)
    a = np.ones(BIG)
    f(a)
    handler = eval_frame.pool_handler()
    gc.collect()
    before = sys.getrefcount(handler)
    for _ in range(20):
        f(a)
    gc.collect()
    after = sys.getrefcount(handler)
    assert after == before


def run(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=300)


def test_pijit_pool_mb_env(tmp_path):
    code = """
        import numpy as np, pijit
        from numpy._core.multiarray import get_handler_name
        r = pijit.jit(lambda a: a * 2.0 + 1.0)(np.ones(5_000_000))
        print(get_handler_name(r), pijit.eval_frame.pool_stats()["limit"] >> 20)
    """
    cache = str(tmp_path)
    assert run(code, PIJIT_CACHE_DIR=cache).stdout.split() == ["pijit_buffer_pool", "512"]
    assert run(code, PIJIT_CACHE_DIR=cache, PIJIT_POOL_MB="64").stdout.split() == [
        "pijit_buffer_pool", "64"]
    off = run(code, PIJIT_CACHE_DIR=cache, PIJIT_POOL_MB="0").stdout.split()
    assert off[0] != "pijit_buffer_pool" and off[1] == "0"
    bad = run(code, PIJIT_CACHE_DIR=cache, PIJIT_POOL_MB="lots")
    assert "PIJIT_POOL_MB must be an integer >= 0 (megabytes), got 'lots'" in bad.stderr
