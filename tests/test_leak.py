"""No leaks on the hot paths: cache hits, alternating entries, recompiles and guarded
plain-Python entries leave the refcounts of arguments and function unchanged, and the
process's resident memory (RSS) does not grow."""
from __future__ import annotations

import gc
import io
import os
import pathlib
import re
import sys

import numpy as np
import pytest

import pijit

PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 1 << 20


# Under AddressSanitizer (`make asan`) freed memory sits in ASan's quarantine, so RSS grows
# without a leak; refcounts are still checked exactly there.
RSS_LIMIT = 4 * 1024 * 1024 if "libasan" not in os.environ.get("LD_PRELOAD", "") else 64 * 1024 * 1024


def rss() -> int:
    """Resident set size in bytes, from /proc/self/statm."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/statm"),
                                reason="needs /proc/self/statm")


def refcounts(*objs):
    """Refcounts of objs. Call it outside `assert`: pytest's assertion rewriting keeps the
    evaluated arguments alive in temporaries, which would show up as +1s."""
    gc.collect()
    return [sys.getrefcount(o) for o in objs]


def _mul_add(x, y):
    return x * y + 1


def test_million_cache_hits_do_not_leak():
    f = pijit.jit(_mul_add)
    pijit.reset(f)
    x, y = np.arange(3.0), np.full(3, 2.0)
    expected = _mul_add(x, y)
    for _ in range(10_000):                     # warm up: compile, allocator pools, caches
        r = f(x, y)
    del r
    assert np.array_equal(f(x, y), expected)
    before_refs = refcounts(x, y, f, f.fn, f.fn.__code__)
    before_rss = rss()
    for _ in range(1_000_000):
        f(x, y)
    after_rss = rss()
    after_refs = refcounts(x, y, f, f.fn, f.fn.__code__)
    assert after_refs == before_refs
    assert after_rss - before_rss < RSS_LIMIT, f"RSS grew by {(after_rss - before_rss) / MB:.1f} MB"
    s = pijit.stats(f)
    assert s["compile_count"] == 1
    assert s["cache_hits"] >= 1_010_000
    assert s["cache_misses"] == 1


def _mul_add_2(x, y):
    return x * y + 1


def test_alternating_dtypes_do_not_leak():
    f = pijit.jit(_mul_add_2)
    pijit.reset(f)
    a64, b64 = np.arange(3.0), np.ones(3)
    a32, b32 = a64.astype(np.float32), b64.astype(np.float32)
    for _ in range(5_000):
        f(a64, b64)
        f(a32, b32)
    assert f(a32, b32).dtype == np.float32 and f(a64, b64).dtype == np.float64
    before_refs = refcounts(a64, b64, a32, b32, f, f.fn)
    before_rss = rss()
    for _ in range(50_000):                     # 100k calls, every one switching entry
        f(a64, b64)
        f(a32, b32)
    after_rss = rss()
    after_refs = refcounts(a64, b64, a32, b32, f, f.fn)
    assert after_refs == before_refs
    assert after_rss - before_rss < RSS_LIMIT, f"RSS grew by {(after_rss - before_rss) / MB:.1f} MB"
    s = pijit.stats(f)
    assert s["compile_count"] == 2
    assert s["cache_misses"] == 2
    assert len(s["recompile_reasons"]) == 1 and "float32" in s["recompile_reasons"][0]


def _mul_add_3(x, y):
    return x * y + 1


def test_repeated_recompiles_do_not_leak():
    """reset + compile + recompile + hits, many times: compiled entries are freed."""
    f = pijit.jit(_mul_add_3)
    a64 = np.arange(3.0)
    a32 = a64.astype(np.float32)

    def cycle():
        pijit.reset(f)
        f(a64, a64)                              # compile
        f(a32, a32)                              # recompile (dtype)
        f(a64, a64)                              # hit
        f(a32, a32)                              # hit

    for _ in range(200):
        cycle()
    before_refs = refcounts(a64, a32, f, f.fn, f.fn.__code__)
    before_rss = rss()
    for _ in range(2_000):
        cycle()
    after_rss = rss()
    after_refs = refcounts(a64, a32, f, f.fn, f.fn.__code__)
    assert after_refs == before_refs
    assert after_rss - before_rss < RSS_LIMIT, f"RSS grew by {(after_rss - before_rss) / MB:.1f} MB"
    s = pijit.stats(f)
    assert (s["compile_count"], s["cache_hits"], s["cache_misses"]) == (2, 2, 2)


def _falls_back(x, y):
    print(end="")                               # not captured: plain Python (or a break)
    return x * y + 1


def test_plain_python_entry_does_not_leak():
    f = pijit.jit(_falls_back)
    pijit.reset(f)
    x, y = np.arange(3.0), np.ones(3)
    for _ in range(1_000):
        f(x, y)
    report = pijit.explain(f, x, y)
    assert any("print" in r["reason"] for r in report.break_reasons), report
    pijit.reset(f)
    for _ in range(1_000):
        f(x, y)
    before_refs = refcounts(x, y, f, f.fn, f.fn.__code__)
    before_rss = rss()
    for _ in range(10_000):
        f(x, y)
    after_rss = rss()
    after_refs = refcounts(x, y, f, f.fn, f.fn.__code__)
    assert after_refs == before_refs
    assert after_rss - before_rss < RSS_LIMIT
    s = pijit.stats(f)
    assert s["compile_count"] <= 1
    assert s["cache_hits"] == 11_000 - 1


def _raises(x, i):
    return x[i] + 1


def test_exceptions_on_hits_do_not_leak():
    f = pijit.jit(_raises)
    pijit.reset(f)
    x, bad = np.arange(3.0), np.array([5])
    for _ in range(100):
        with pytest.raises(IndexError):
            f(x, bad)
    before_refs = refcounts(x, bad, f, f.fn)
    before_rss = rss()
    for _ in range(10_000):
        try:
            f(x, bad)
        except IndexError:
            pass
    after_rss = rss()
    after_refs = refcounts(x, bad, f, f.fn)
    assert after_refs == before_refs
    assert after_rss - before_rss < RSS_LIMIT
    s = pijit.stats(f)
    assert s["compile_count"] == 1 and s["cache_hits"] == 10_099


def _kernel_shapes(x, w, n):
    """Fused kernels of every shape: two outputs, a row group with scratch, a 0-d
    reduction, a loop kernel, a group that hands itself back to NumPy (0 / 0), NumPy's own
    loops called per row, and an underflow (np.geterr asked, ignored)."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    soft = e / e.sum(axis=-1, keepdims=True)
    both = (x * 2.0, x - 1.0)
    total = (x * w).sum()
    for i in range(n):
        w = w * 0.5 + 1.0
    nan = (x - x) / (w - w)
    loops = np.logaddexp(x, 0.5) + np.log1p(np.abs(x))
    tiny = x * 1e-300 * 1e-300
    return soft, both, total, w, nan, loops, tiny


def test_kernels_do_not_leak():
    f = pijit.jit(_kernel_shapes, jit_config={"jit_level": "O2", "specialize_scalar": False})
    pijit.reset(f)
    x, w = np.random.default_rng(0).standard_normal((4, 9)), np.ones(9)
    with np.errstate(all="ignore"):
        for _ in range(2_000):
            r = f(x, w, 3)
        del r
        before_refs = refcounts(x, w, f)
        before_rss = rss()
        for _ in range(50_000):
            f(x, w, 3)
        after_rss = rss()
    after_refs = refcounts(x, w, f)
    assert after_refs == before_refs
    assert after_rss - before_rss < RSS_LIMIT, f"RSS grew by {(after_rss - before_rss) / MB:.1f} MB"
    assert pijit.stats(f)["compile_count"] == 1


def _scaled_sum(x):
    return (x * 0.5).sum(axis=-1)


def test_kernel_support_capsule_and_module_inits_do_not_leak(tmp_path, monkeypatch):
    """pijit._eval_frame.kernel_support() makes a new capsule of a static table each call;
    a kernel module's init (run by every load) takes it and drops its references: neither
    leaks."""
    import glob
    from pijit import eval_frame
    from pijit.backends.cfused import build, toolchain
    ef = sys.modules["pijit._eval_frame"]
    capsule = re.search(r'#define PJ_SUPPORT_CAPSULE "([^"]+)"',
                        pathlib.Path(toolchain.SUPPORT_HEADER).read_text()).group(1)
    assert f'"{capsule}"' in repr(eval_frame.kernel_support())
    monkeypatch.setenv("PIJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build, "_loaded", {})
    f = pijit.jit(_scaled_sum)
    pijit.reset(f)
    f(np.ones((3, 4)))
    (path,) = glob.glob(str(tmp_path / "_pijit_k_*.so"))
    name = os.path.basename(path)[:-3]
    for _ in range(1_000):
        eval_frame.kernel_support()
        build._load(path, name)
    before_refs = refcounts(ef)
    before_rss = rss()
    for _ in range(200_000):
        eval_frame.kernel_support()
    for _ in range(20_000):
        build._load(path, name)
    after_rss = rss()
    after_refs = refcounts(ef)
    assert after_refs == before_refs
    assert after_rss - before_rss < RSS_LIMIT, f"RSS grew by {(after_rss - before_rss) / MB:.1f} MB"


_SINK = io.StringIO()


def _breaks_twice(x, y, z):
    a = x * y
    print(end="", file=_SINK)       # a break: the rest runs in a resume function
    b = a + z
    print(end="", file=_SINK)
    return b, y


def test_resume_requests_do_not_leak():
    """At a break the transformed code returns (marker, resume function, arguments) and the
    hook calls the resume function (csrc/eval_frame.c, call_with_slots): the request, its
    arguments and the result are released, on returns and on raises."""
    x, y = np.arange(3.0), np.full(3, 2.0)
    assert pijit.explain(_breaks_twice, x, y, y).graph_break_count == 2
    f = pijit.jit(_breaks_twice)
    pijit.reset(f)
    for _ in range(100):
        r = f(x, y, y)
    assert r[1] is y and np.array_equal(r[0], _breaks_twice(x, y, y)[0])
    del r
    bad = np.ones(4)                            # a + bad raises after the first break
    before_refs = refcounts(x, y, bad, f, f.fn)
    before_rss = rss()
    for _ in range(20_000):
        f(x, y, y)
        try:
            f(x, y, bad)
        except ValueError:
            pass
    after_rss = rss()
    after_refs = refcounts(x, y, bad, f, f.fn)
    assert after_refs == before_refs
    assert after_rss - before_rss < RSS_LIMIT
    assert pijit.stats(f)["cache_hits"] >= 40_000


def _no_profile(frame, event, arg):
    pass


def _profiled_after_a_break(x, y, z):
    a = x * y
    sys.setprofile(_no_profile)     # a break; watched from here: the rest runs plain
    b = a + z
    sys.setprofile(None)
    return b, y


def test_a_break_watched_by_a_profiler_does_not_leak():
    """Watched at a break, transformed code tests eval_frame.OBSERVED and goes on in its
    plain copy (transform._plain_rest): nothing held, on returns and on raises."""
    from pijit import eval_frame
    x, y = np.arange(3.0), np.full(3, 2.0)
    report = pijit.explain(_profiled_after_a_break, x, y, y)
    assert report.graph_break_count >= 1
    f = pijit.jit(_profiled_after_a_break)
    for _ in range(100):
        r = f(x, y, y)
    assert r[1] is y and np.array_equal(r[0], x * y + y)
    del r
    bad = np.ones(4)                            # a + bad raises in the plain copy
    counts = []
    for _ in range(3):              # OBSERVED: also held by entries compiled (promoted) meanwhile
        for _ in range(10_000):
            f(x, y, y)
            try:
                f(x, y, bad)
            except ValueError:
                pass
            finally:
                sys.setprofile(None)
        counts.append(refcounts(x, y, bad, f, eval_frame.OBSERVED))
    assert counts[0] == counts[1] == counts[2]
    assert pijit.stats(f)["cache_hits"] >= 60_000
