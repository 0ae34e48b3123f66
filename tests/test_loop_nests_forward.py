"""An element a loop stored in its previous iteration, read again from a variable instead of
memory (pijit/loopnest/forward.py). Each case runs plain and jitted (results, partial writes,
the exception at the same iteration; one loop_nest node, explain), the near misses where
the element must come from memory (a path without the store, a store into another array
that may be the same, a store before the load, another step, a self-overlapping array), and
looks at the kernel's blocks to see the load marked, or not."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.workloads import lcs_table
from tests.test_loop_nests import resumes, same  # noqa: F401 - resumes: a fixture
from tests.test_loop_nests_checks import kernels  # noqa: F401 - a fixture

LEVELS = ["O0", "O1"]


def forwarded(kernel) -> list:
    """The kernel's loads that take the previous iteration's store."""
    return [op for b in kernel.blocks for op in b.ops
            if op.kind == "load" and op.reuse and op.reuse[0] == "fw"]


@pytest.mark.parametrize("level", LEVELS)
def test_a_table_reads_its_left_neighbour_from_a_variable(level, resumes, kernels):
    rng = np.random.default_rng(0)
    same(lcs_table, rng.integers(0, 4, 23), rng.integers(0, 4, 17), level=level)
    same(lcs_table, rng.integers(0, 4, 1), rng.integers(0, 4, 0), level=level)
    if level == "O1":
        assert resumes == []
        k = kernels[0]
        assert forwarded(k)


def prefix(a, out, start, stop):
    for i in range(start, stop):
        out[i] = out[i - 1] + a[i]
    return out


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("start, stop", [
    (1, 8),
    (0, 8),             # out[-1] first: the last element, read from memory
    (1, 11),            # IndexError at i = 8, out[1..7] written
    (3, 3),             # no trips
])
def test_a_running_sum(level, start, stop, resumes, kernels):
    a = np.arange(1.0, 9.0)
    same(prefix, a, np.full(8, 0.5), start, stop, level=level)
    if level == "O1":
        assert forwarded(kernels[0])


def into_float32(out):
    for i in range(1, out.shape[0]):
        out[i] = float(out[i - 1]) * 0.1 + 1.0 / 3.0      # a double rounded by the store
    return out


def into_int8(out):
    for i in range(1, out.shape[0]):
        out[i] = int(out[i - 1]) + 50                     # 150 does not fit: OverflowError
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_the_value_is_what_memory_holds(level, resumes, kernels):
    same(into_float32, np.full(9, 3.0, dtype=np.float32), level=level)
    same(into_int8, np.zeros(5, dtype=np.int8), level=level)
    if level == "O1":
        assert all(forwarded(k) for k in kernels)


def row_prefix(A):
    for i in range(A.shape[0]):
        for j in range(1, A.shape[1]):
            A[i, j] += A[i, j - 1]
    return A


@pytest.mark.parametrize("level", LEVELS)
def test_each_run_of_the_loop_starts_from_memory(level, resumes, kernels):
    same(row_prefix, np.arange(20.0).reshape(4, 5) - 7.0, level=level)
    if level == "O1":
        assert resumes == []
        assert forwarded(kernels[0])


def skipping(a, out):
    for i in range(1, a.shape[0]):
        if a[i] < 0:
            continue            # out[i] keeps its value: the next iteration reads memory
        out[i] = out[i - 1] + a[i]
    return out


def two_arrays(a, out, other):
    for i in range(1, a.shape[0]):
        out[i] = out[i - 1] * 2.0 + a[i]
        other[i] = -1.0         # other may be out: out[i] is then -1 at the next iteration
    return out, other


def one_side_each(a, out, other):
    for i in range(1, a.shape[0]):
        x = other[i - 1] + out[i - 1]   # each element stored on one side only
        if a[i] > 0:
            out[i] = x
        else:
            other[i] = x
    return out, other


def store_first(a, out):
    s = 0.0
    for i in range(1, a.shape[0]):
        out[i] = a[i]
        s += out[i - 1]         # out with stride 0: this is a[i]
    return s


def by_two(a, out):
    for i in range(2, a.shape[0], 2):
        out[i] = out[i - 1] + out[i - 2] + a[i]    # out[i - 2] was stored, out[i - 1] not
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_near_misses_read_memory(level, resumes, kernels):
    a = np.array([1.0, 2.0, -1.0, 4.0, -2.0, -3.0, 5.0, 6.0])
    same(skipping, a, np.arange(8.0) * 10, level=level)
    out = np.zeros(8)
    same(two_arrays, a, out, out, level=level)
    same(two_arrays, a, np.zeros(8), np.zeros(8), level=level)
    same(store_first, a, np.zeros(8), level=level, breaks=1)
    same(by_two, a, np.arange(8.0), level=level)
    same(one_side_each, a, np.arange(8.0), np.arange(8.0) * 3, level=level)
    if level == "O1":
        k_skip, k_same, k_apart, k_first, k_two, k_sides = kernels
        for k in (k_skip, k_same, k_apart, k_first, k_sides):
            assert not forwarded(k)
        # out[i - 2] is the element stored one step of 2 back; out[i - 1] never stored
        assert forwarded(k_two)


def overlapping(a, out):
    for i in range(1, a.shape[0]):
        out[i] = out[i - 1] * 0.5 + a[i]
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_a_self_overlapping_array(level, resumes, kernels):
    # every out[i] is one element: out[i - 1] is what the previous iteration stored, as
    # forwarded; store_first's load after the store would read this iteration's
    a = np.arange(1.0, 7.0)
    base = np.zeros(1)
    out = np.lib.stride_tricks.as_strided(base, shape=(6,), strides=(0,))
    same(overlapping, a, out, level=level)
    base2 = np.zeros(1)
    out2 = np.lib.stride_tricks.as_strided(base2, shape=(8,), strides=(0,))
    same(store_first, np.arange(1.0, 9.0), out2, level=level, breaks=1)


def prefix_then_halve(out, a):
    for j in range(1, out.shape[0]):
        out[j] = out[j - 1] + a[j]
        out[:j + 1] *= 0.5      # a slice write (slices.py's vstore) rewrites out[j] too
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_a_slice_write_in_the_loop_stops_forwarding(level, resumes, kernels):
    """The element stored one iteration before is read from memory when a slice write of
    the loop may have rewritten it since."""
    same(prefix_then_halve, np.full(9, 1.0), np.arange(9.0), level=level)
    if level == "O1":
        assert resumes == []
        assert not forwarded(kernels[0])
