"""Resident memory, for the tests that check it stays flat."""
import os


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def rss_allowance(base: int) -> int:
    """`base` bytes of growth, and under AddressSanitizer (make asan) also its quarantine:
    freed blocks it holds back to catch uses after free (with PYTHONMALLOC=malloc every
    freed Python object goes there), up to quarantine_size_mb of them, each held with its
    redzones and header (16 MB of small objects measured 24.4 MB of RSS, flat after)."""
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):
        return base
    options = dict(o.split("=", 1) for o in os.environ.get("ASAN_OPTIONS", "").split(":")
                   if "=" in o)
    return base + 2 * (int(options.get("quarantine_size_mb", 256)) << 20)
