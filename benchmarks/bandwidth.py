"""This machine's memory bandwidth: STREAM-style copy and triad kernels, and a read kernel.

The kernels are C compiled with cffi (`gcc -O3 -march=native`, one thread), so the number
is what a fused loop can reach, not what NumPy's op-by-op passes reach. Bytes are counted
the STREAM way: copy moves 2 x 8 bytes per element (read a, write b), triad 3 x 8
(read b and c, write a); write-allocate traffic is not counted, and the workloads' "bytes
that must move" are counted the same way (every input read once, every output written once).
If the C kernel cannot be built, NumPy's `copyto` and a two-pass triad are timed instead
(marked `"method": "numpy"`), which underestimates the bandwidth.

The read kernel (sum of the words of one array, 8 bytes per element) is the limit of a
workload that writes nothing (a whole-array reduction): one core here reads at ~13 GB/s alone,
while glibc's memcpy behind `copy` moves ~21 GB/s of reads plus non-temporal writes.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
import time

import numpy as np

_C_SRC = r"""
void bw_copy(double *restrict b, const double *restrict a, long n) {
    for (long i = 0; i < n; i++) b[i] = a[i];
}
void bw_triad(double *restrict a, const double *restrict b, const double *restrict c,
              double s, long n) {
    for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}
long bw_read(const long *a, long n) {      /* integer sum: vectorized, no FP dependency */
    long s = 0;
    for (long i = 0; i < n; i++) s += a[i];
    return s;
}
"""


def _build_c():
    from cffi import FFI
    ffi = FFI()
    ffi.cdef("void bw_copy(double *b, const double *a, long n);"
             "void bw_triad(double *a, const double *b, const double *c, double s, long n);"
             "long bw_read(const long *a, long n);")
    ffi.set_source("_pijit_bench_bw", _C_SRC, extra_compile_args=["-O3", "-march=native"])
    tmp = tempfile.mkdtemp(prefix="pijit_bw_")
    try:
        path = ffi.compile(tmpdir=tmp, verbose=False)
        spec = importlib.util.spec_from_file_location("_pijit_bench_bw", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)           # loaded: the file can go
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return mod.ffi, mod.lib


def measure(n: int = 1 << 24, trials: int = 5) -> dict:
    """Best-of-`trials` copy and triad bandwidth in bytes/s over arrays of n float64."""
    a = np.empty(n)
    b = np.empty(n)
    c = np.empty(n)
    a.fill(1.0)
    b.fill(2.0)
    c.fill(0.5)
    method, error = "c", None
    try:
        ffi, lib = _build_c()
        pa, pb, pc = (ffi.cast("double *", x.ctypes.data) for x in (a, b, c))
        copy = lambda: lib.bw_copy(pb, pa, n)               # noqa: E731
        triad = lambda: lib.bw_triad(pa, pb, pc, 3.0, n)    # noqa: E731
        read = lambda: lib.bw_read(ffi.cast("long *", pa), n)  # noqa: E731
        triad_bytes = 3 * 8 * n
    except Exception as exc:  # no compiler, no cffi: fall back, and say so
        method, error = "numpy", f"{type(exc).__name__}: {exc}"
        copy = lambda: np.copyto(b, a)                     # noqa: E731

        def triad():
            np.multiply(c, 3.0, out=a)
            np.add(a, b, out=a)

        def read():
            a.view(np.int64).sum()
        triad_bytes = 5 * 8 * n                             # two passes really move 5 words
    best = {}
    for name, kernel, nbytes in (("copy", copy, 2 * 8 * n), ("triad", triad, triad_bytes),
                                 ("read", read, 8 * n)):
        kernel()                                            # touch pages, warm up
        times = []
        for _ in range(trials):
            t0 = time.perf_counter()
            kernel()
            times.append(time.perf_counter() - t0)
            time.sleep(0.002)
        best[name] = nbytes / min(times)
    return {"method": method, "error": error, "elements": n, "array_bytes": 8 * n,
            "trials": trials, "copy_bytes_per_s": best["copy"], "triad_bytes_per_s": best["triad"],
            "read_bytes_per_s": best["read"],
            "bytes_per_s": max(best["copy"], best["triad"])}


def floor_s(bandwidth: dict, in_bytes: int, out_bytes: int) -> float:
    """The least time to move the bytes: a workload that writes (almost) nothing is bound by
    reading alone, the others by the best of copy and triad."""
    if out_bytes * 100 < in_bytes:
        return in_bytes / bandwidth["read_bytes_per_s"]
    return (in_bytes + out_bytes) / bandwidth["bytes_per_s"]


if __name__ == "__main__":
    r = measure()
    print(f"copy {r['copy_bytes_per_s'] / 1e9:.1f} GB/s, triad {r['triad_bytes_per_s'] / 1e9:.1f} "
          f"GB/s, read {r['read_bytes_per_s'] / 1e9:.1f} GB/s ({r['method']})", file=sys.stdout)
    os._exit(0)
