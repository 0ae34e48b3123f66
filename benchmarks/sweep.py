"""The size sweep (`python -m benchmarks --sizes`): a few workloads over sizes from cache-resident
to memory-bound, one workload per size, through the same runner as the suite.

Why: a speedup measured at one size hides where it dips. pijit's advantage over NumPy was
3.5x at 10^2 elements and 3.0x at 10^7 on the chain below but 1.60x at 10^4, where the data
sits in the caches and what is left is per-call setup, per-row calls into NumPy's loops and
passes fusion did not remove. Each point is an ordinary workload (named `base@size`), so it
is checked against NumPy and timed interleaved like every other.
"""
from __future__ import annotations

import numpy as np

from benchmarks.workloads import Workload

DEFAULT_SIZES = (100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000)
SOFTMAX_COLUMNS = 1024
TAG = "size sweep"


def chain(x):
    return np.tanh(x * 0.5) * 2.0 + np.sqrt(np.abs(x)) - x * x


def row_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def sum_squares(x):
    return np.sum(x * x)


def _vector(n, rng):
    return [((rng.random(n) - 0.5) * 8.0,)]


def _rows(n, rng):
    """n elements as rows of SOFTMAX_COLUMNS (one shorter row below that)."""
    cols = min(n, SOFTMAX_COLUMNS)
    return [((rng.random((max(1, n // cols), cols)) - 0.5) * 8.0,)]


SWEEP = {
    "chain": (chain, _vector, "tanh(x*0.5)*2 + sqrt(abs(x)) - x*x, float64"),
    "row_softmax": (row_softmax, _rows,
                    f"row softmax over rows of {SOFTMAX_COLUMNS} columns, float64"),
    "sum_squares": (sum_squares, _vector, "np.sum(x*x), float64"),
}


def parse_sizes(text: str | None) -> list:
    """'1e3,1e5,4096' -> [1000, 100000, 4096]; None or '' -> the default sizes."""
    if not text:
        return list(DEFAULT_SIZES)
    sizes = []
    for part in text.split(","):
        part = part.strip()
        try:
            value = float(part)
        except ValueError:
            raise SystemExit(f"--sizes: {part!r} is not a number (expected a comma-separated "
                             f"list of element counts such as 1e3,1e5)") from None
        if value != int(value) or value < 1:
            raise SystemExit(f"--sizes: {part!r} is not a positive whole number of elements")
        sizes.append(int(value))
    return sizes


def workloads(sizes, only: str | None = None) -> list:
    names = [n.strip() for n in only.split(",") if n.strip()] if only else list(SWEEP)
    unknown = [n for n in names if n not in SWEEP]
    if unknown:
        raise SystemExit(f"unknown sweep workload(s): {', '.join(unknown)}; "
                         f"choose from: {', '.join(SWEEP)}")
    out = []
    for name in names:
        fn, make, description = SWEEP[name]
        for n in sizes:
            out.append(Workload(f"{name}@{n}", fn, make, {"tiny": n, "quick": n, "full": n},
                                f"{description}, {n} elements", memory_bound=True,
                                jax=True, tags=(TAG,)))
    return out


def series(results, backend: str = "pijit") -> dict:
    """{base workload: [(elements, speedup, q1, q3) of the backend]} from a sweep's results."""
    out = {}
    for w in results["workloads"]:
        base, _, n = w["name"].partition("@")
        rec = w["variants"].get(backend) or {}
        if n and rec.get("speedup"):
            out.setdefault(base, []).append(
                (int(n), rec["speedup"], rec.get("speedup_q1"), rec.get("speedup_q3")))
    return out
