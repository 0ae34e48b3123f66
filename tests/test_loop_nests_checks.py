"""Checks a loop nest's C kernel skips (pijit/loopnest/cse.py, bounds.py): repeated loads and
arithmetic computed once, bounds checked once at a loop's entry. Each case runs plain and
jitted (results, partial writes, the exception at the same iteration; one loop_nest node,
explain), and looks at the kernel's blocks to see the rule applied, or not where it must not."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.workloads import lcs_table
from pijit.loopnest import node as nest_node
from pijit.loopnest.lower_c import NestKernel
from tests.differential import assert_same
from tests.test_loop_nests import resumes  # noqa: F401 - a fixture

LEVELS = ["O0", "O1"]


@pytest.fixture
def kernels(monkeypatch):
    """The NestKernel of each nest whose C kernel is built."""
    seen = []
    original = nest_node.NestOp.kernel

    def spy(self, *args, **kw):
        seen.append(NestKernel(self.nest))
        return original(self, *args, **kw)

    monkeypatch.setattr(nest_node.NestOp, "kernel", spy)
    return seen


def same(fn, *args, level="O1", breaks=0):
    return assert_same(fn, *args, ops=["loop_nest"], breaks=breaks,
                       jit_kwargs={"jit_config": {"jit_level": level}})


def ops_of(kernel, kind, checked=None) -> list:
    """The ops of a kind in the blocks as bounds.py and cse.py left them (not in the select
    blocks ifconvert.py adds: copies of a branch's two sides, whose original stays as the
    fallback; tests/test_loop_nests_ifconvert.py looks at those)."""
    return [op for b in kernel.blocks if b.term[0] != "select" for op in b.ops
            if op.kind == kind and (checked is None or op.checked == checked)]


def gates(kernel) -> list:
    return [b for b in kernel.blocks if b.term[0] == "version"]


# -- common subexpressions -----------------------------------------------------------------
def branch_reloads(a):
    pos = neg = 0.0
    for i in range(a.shape[0]):
        if a[i] > 0.5:
            pos += a[i]
        else:
            neg -= a[i] * (i - 1) + a[i - 1]
    return pos, neg


@pytest.mark.parametrize("level", LEVELS)
def test_repeated_loads_and_arithmetic_run_once(level, resumes, kernels):
    same(branch_reloads, np.random.default_rng(0).random(64), level=level, breaks=1)
    if level == "O1":
        assert resumes == []
        (k,) = kernels
        # per version of the loop: a[i] once (its two reloads are copies), a[i - 1] once
        assert len(ops_of(k, "load")) == 2 * (1 + len(gates(k)))
        copies = [op for op in ops_of(k, "copy") if op.args[0].startswith("t")]
        assert len(copies) >= 4


def store_between(a, b):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i]
        b[i] = s            # b may be a itself or a view of it
        s += a[i] * 0.5
    return s


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("view", ["same", "reversed", "apart"])
def test_a_store_into_any_array_reloads(level, view, resumes, kernels):
    a = np.arange(1.0, 9.0)
    b = {"same": a, "reversed": a[::-1], "apart": np.zeros(8)}[view]
    same(store_between, a, b, level=level, breaks=1)
    if level == "O1":
        assert resumes == []
        (k,) = kernels
        # a[i] twice in the checked and the strided versions of the loop: the store between
        # may have changed it; once in the unit-stride one, whose entry checks that b's
        # memory is apart from a's (the same array or its reversed view fail that check at
        # run time and run another version)
        loads = ops_of(k, "load")
        assert len([op for op in loads if not op.unit]) == 2 * len(gates(k))
        assert len([op for op in loads if op.unit]) == 1


def rebound_index(a, out):
    j = 0
    for i in range(a.shape[0] - 1):
        x = a[j]
        j = i + 1
        out[i] = x + a[j]
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_an_index_assigned_between_loads_reloads(level, resumes):
    same(rebound_index, np.arange(6.0) ** 2, np.zeros(6), level=level)
    if level == "O1":
        assert resumes == []


def signed_zero_constants(a, out):
    for i in range(a.shape[0]):
        out[i] = a[i] * 0.0 + a[i] * -0.0
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_constants_differing_in_sign_only_stay_apart(level, resumes, kernels):
    a = np.array([1.0, -1.0, 0.0, -0.0, 2.0])
    same(signed_zero_constants, a, np.zeros(5), level=level)
    if level == "O1":
        assert resumes == []
        (k,) = kernels
        assert len(ops_of(k, "binop")) == 3 * (1 + len(gates(k)))


# -- bounds checks -------------------------------------------------------------------------
def shifted(a, out, start, stop, step):
    for i in range(start, stop, step):
        out[i] = a[i - 1] + 2.0 * a[i]
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_an_in_range_loop_runs_unchecked(level, resumes, kernels):
    a = np.arange(10.0)
    same(shifted, a, np.zeros(10), 1, 10, 1, level=level)
    if level == "O1":
        assert resumes == []
        (k,) = kernels
        # an innermost loop: two unchecked copies, the second for unit strides
        assert len(gates(k)) == 2
        assert len(ops_of(k, "load", checked=False)) == 4
        assert len(ops_of(k, "store", checked=False)) == 2
        assert sum(op.unit for op in ops_of(k, "load", checked=False)) == 2


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("bounds", [
    (1, 12, 1),         # IndexError at i = 10, out[0..9] written
    (0, 10, 1),         # a[-1] at i = 0: Python wraps it, the check fails, nothing bails
    (-3, 10, 1),        # negative indices Python wraps, the rest in range
    (9, 0, -1),         # downwards, in range
    (12, 0, -1),        # downwards, IndexError at the first iteration
    (9, -1, -4),        # downwards by 4: 9, 5, 1
    (9, -2, -4),        # 9, 5, 1, -3: negative indices Python wraps
    (1, 10, 3),         # last element 7
    (1, 11, 3),         # last element 10: IndexError there
    (1, 10, 9),         # one trip
    (5, 5, 1),          # no trips
    (2**62, 2**63 - 1, 2**61),    # far out: IndexError at once, no overflow in the check
])
def test_a_loop_out_of_bounds_raises_where_python_does(level, bounds, resumes):
    a = np.arange(11.0)[:10]
    same(shifted, a, np.zeros(10), *bounds, level=level)


def unit_gates(kernel) -> set:
    """The arrays a versioned loop's entry checks for unit strides (bounds.py)."""
    return {c[2] for g in gates(kernel) for c in g.term[1] if c[0] == ("unit",)}


STRIDED = {
    "contiguous": lambda: (np.arange(10.0), np.zeros(10)),
    "column": lambda: (np.arange(30.0).reshape(10, 3)[:, 1], np.zeros((10, 2))[:, 0]),
    "every other": lambda: (np.arange(20.0)[::2], np.zeros(20)[1::2]),
    "reversed": lambda: (np.arange(10.0)[::-1], np.zeros(10)[::-1]),
    "F order": lambda: (np.asfortranarray(np.arange(20.0).reshape(10, 2))[:, 0],
                        np.zeros(10)),
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("layout", sorted(STRIDED))
def test_unit_strides_are_checked_at_the_loops_entry(level, layout, resumes, kernels):
    # the unchecked copy addresses the last axis by the itemsize: an array of another
    # stride runs the checked copy, in C (no hand-over), with plain Python's values
    a, out = STRIDED[layout]()
    same(shifted, a, out, 1, 10, 1, level=level)
    if level == "O1":
        assert resumes == []
        (k,) = kernels
        assert unit_gates(k) == {"a_a", "a_out"}
        # and a copy for other strides, unchecked too (they ran 2x slower checked)
        unchecked = ops_of(k, "load", checked=False)
        assert {op.unit for op in unchecked} == {True, False}


def tally(idx, counts):
    for i in range(idx.shape[0]):
        counts[idx[i]] += 1         # an index read from data: checked at every access
    return counts


TALLIED = {
    "contiguous": lambda: np.zeros(6, dtype=np.int64),
    "column": lambda: np.zeros((6, 2), dtype=np.int64)[:, 1],
    "every other": lambda: np.zeros(12, dtype=np.int64)[::2],
    "reversed": lambda: np.zeros(6, dtype=np.int64)[::-1],
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("layout", sorted(TALLIED))
@pytest.mark.parametrize("idx", [[0, 5, 2, 2, -1, -6, 3], [1, 2, 6, 0], [4, -7]],
                         ids=["in range and wrapped", "IndexError", "IndexError below"])
def test_a_checked_index_of_the_unit_stride_copy_is_addressed_by_the_itemsize(
        level, layout, idx, resumes, kernels):
    # hist_floor's counts[k]: the unit-stride copy's entry checks counts' stride too, and
    # the checked access addresses it by the itemsize there (no multiply by the stride);
    # another stride runs the other copy, with plain Python's counts and IndexError
    same(tally, np.array(idx, dtype=np.int64), TALLIED[layout](), level=level)
    if level == "O1":
        assert resumes.count(-1) == 0
        (k,) = kernels
        assert unit_gates(k) == {"a_idx", "a_counts"}
        counts = [op for kind in ("load", "store") for op in ops_of(k, kind)
                  if op.args[0] == "a_counts"]
        # counts[idx[i]] in the loop as it was, its copy for any stride and its unit-stride
        # copy: checked in all three, addressed by the itemsize in the last
        assert all(op.checked for op in counts)
        assert sorted(op.unit for op in counts) == [False] * 4 + [True] * 2


def rows_and_columns(A, B):
    s = 0.0
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            s += A[i, j] * B[j, i]
    return s


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("order", ["CC", "CF", "FF"])
def test_unit_strides_of_2d_arrays(level, order, resumes):
    A = np.arange(12.0).reshape(3, 4)
    B = np.arange(12.0).reshape(4, 3) * 0.5
    A, B = (np.asfortranarray(x) if o == "F" else x for x, o in zip((A, B), order))
    same(rows_and_columns, A, B, level=level, breaks=1)
    assert level == "O0" or resumes == []


def rows(A, out, r):
    for i in range(A.shape[0]):
        for j in range(1, A.shape[1]):
            out[i, j] = A[r, j - 1] + A[i, j]
    return out


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("r", [2, -1, 4])
def test_an_index_the_loop_never_assigns_is_checked_at_its_entry(level, r, resumes, kernels):
    A = np.arange(12.0).reshape(4, 3)
    same(rows, A, np.zeros((4, 3)), r, level=level)       # r = 4: IndexError at (0, 1)
    if level == "O1" and r != 4:
        (k,) = kernels
        assert gates(k) and ops_of(k, "load", checked=False)


def reassigned_index(a, out):
    k = 0
    for i in range(a.shape[0]):
        out[k] = a[i]
        k = k + 2           # k is not i + c: its accesses stay checked
    return out


def doubled(a, out):
    for i in range(a.shape[0]):
        j = i * 2
        out[i] = a[j]
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_other_indices_stay_checked(level, resumes, kernels):
    same(reassigned_index, np.arange(8.0), np.zeros(10), level=level)     # IndexError k=10
    same(doubled, np.arange(8.0), np.zeros(8), level=level)               # IndexError j=8
    if level == "O1":
        for k in kernels:
            assert not [op for op in ops_of(k, "store", checked=False)
                        if op.args[1] == "l_k"]
            assert not [op for op in ops_of(k, "load", checked=False) if op.args[1] == "l_j"]


def zipped(a, b, out):
    for k, (x, y) in enumerate(zip(a, b)):
        out[k] = x * y
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_nested_and_zipped_loops(level, resumes, kernels):
    rng = np.random.default_rng(1)
    same(lcs_table, rng.integers(0, 3, 9), rng.integers(0, 3, 7), level=level)
    same(zipped, np.arange(5.0), np.arange(7.0), np.zeros(5), level=level)
    same(zipped, np.arange(5.0), np.arange(7.0), np.zeros(3), level=level)   # IndexError
    if level == "O1":
        assert resumes.count(-1) == 0
        lcs_kernel, zip_kernel = kernels[0], kernels[1]
        # the inner loop's loads and stores, the element loads of zip (innermost loops: in
        # two unchecked copies, the second addressing by the itemsize)
        assert len(ops_of(lcs_kernel, "load", checked=False)) == 10
        assert len(ops_of(zip_kernel, "load", checked=False)) == 4


def nested_copy(A, out, m):
    for i in range(A.shape[0]):
        for j in range(m):
            out[i, j] = A[i, j] * 2.0
    return out


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("m", [3, 4])
def test_an_inner_range_is_checked_at_the_inner_loops_entry(level, m, resumes, kernels):
    # m = 4: IndexError at (0, 3); the outer loop cannot check the inner range, which it
    # sets up at each of its iterations
    A = np.arange(12.0).reshape(4, 3)
    same(nested_copy, A, np.zeros((4, 3)), m, level=level)
    if level == "O1":
        (k,) = kernels
        assert len(gates(k)) == 2           # the inner loop's two unchecked copies
