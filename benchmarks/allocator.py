"""Pin glibc malloc's thresholds so a workload's timing does not depend on what ran before it.

glibc serves a block above its mmap threshold (128 KiB at start) with a fresh mmap and gives
it back on free, so every call of a NumPy function on megabyte arrays page-faults its
temporaries in again. Freeing such a block raises the threshold to its size (up to 32 MiB)
and the trim threshold to twice that: from then on temporaries come from the heap, already
resident. So the same workload ran twice as fast late in a suite as alone (plain NumPy
logsumexp on 2000x1000: 10.3 ms alone, 4.6 ms after other workloads), and a variant that
allocates less (pijit's buffer pool) gained or lost depending on its place in the suite.

Pinning both thresholds at the values a long-running process reaches (the dynamic maximum)
gives every workload and every variant the same allocator, wherever it runs. It also turns
the dynamic adjustment off, so nothing later moves them.
"""
from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1       # glibc malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20   # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit targets
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD   # what a free at the dynamic maximum sets


def pin():
    """Set the thresholds; returns what was set (for the run's environment record), or why
    nothing was (not glibc)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return {"pinned": False, "reason": "no mallopt (not glibc)"}
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    ok = (mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
          and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1)
    if not ok:
        return {"pinned": False, "reason": "mallopt refused the thresholds"}
    return {"pinned": True, "mmap_threshold": MMAP_THRESHOLD,
            "trim_threshold": TRIM_THRESHOLD}
