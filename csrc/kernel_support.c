/* kernel_support.c -- routines every fused-kernel module calls, compiled once, here.
 *
 * Why: kernel modules are compiled by gcc on first call, and a routine copied into every
 * module is compiled again each time (NumPy's whole pairwise summation, one copy per dtype,
 * was ~0.2 s of the ~0.45 s gcc spent on an exact softmax module, measured here). Kernels
 * call these once per row or chunk through the pj_support table
 * (pijit/backends/cfused/kernel_support.h), so the indirect call costs nothing measurable.
 *
 * An exact sum follows NumPy's pairwise recursion (its @TYPE@_pairwise_sum; what NumPy
 * does along a row, and over all n values of a C-contiguous operand) without holding the
 * values: the kernel computes them chunk by chunk, the chunks being the recursion's nodes
 * of at most `block` values (tree_chunks); within a chunk, leaf by leaf (tree_leaves: the
 * nodes of at most 128 values), each leaf summed by the kernel's own pj_leaf_* (compiled
 * with the kernel's flags, so vectorized) right after its values are computed, and added
 * to the others as the recursion adds them; the chunk sums then add as the levels above
 * them do (tree_total). The order of every add is NumPy's.
 */
#include "pijit.h"
#include "kernel_support.h"

/* NumPy's split of n > 128 values: the first half rounded down to a multiple of 8. */
static npy_intp
pairwise_split(npy_intp n)
{
    npy_intp n2 = n / 2;
    return n2 - n2 % 8;
}

static void
chunks_from(npy_intp off, npy_intp n, npy_intp block, npy_intp *bounds, npy_intp *count)
{
    if (n <= block) {
        bounds[++*count] = off + n;
        return;
    }
    npy_intp n2 = pairwise_split(n);
    chunks_from(off, n2, block, bounds, count);
    chunks_from(off + n2, n - n2, block, bounds, count);
}

/* The leaves of the recursion over n values (its nodes of at most 128 values; one node of
   under 8 when n is) from leaf k on: offsets into at, and in pops[l] how many of the
   recursion's adds complete after leaf l (one per node whose last leaf it is). */
static npy_intp
leaves_from(npy_intp off, npy_intp n, npy_intp *at, unsigned char *pops, npy_intp k)
{
    if (n <= 128) {
        at[k + 1] = off + n;
        pops[k] = 0;
        return k + 1;
    }
    npy_intp n2 = pairwise_split(n);
    k = leaves_from(off, n2, at, pops, k);
    k = leaves_from(off + n2, n - n2, at, pops, k);
    pops[k - 1]++;
    return k;
}

static npy_intp
support_tree_leaves(npy_intp n, npy_intp *at, unsigned char *pops)
{
    at[0] = 0;
    return leaves_from(0, n, at, pops, 0);
}

static npy_intp
support_tree_chunks(npy_intp n, npy_intp block, npy_intp *bounds)
{
    npy_intp count = 0;
    bounds[0] = 0;
    chunks_from(0, n, block, bounds, &count);
    return count;
}

/* The recursion above the chunks; `next` walks the chunk sums in order (left before right). */
#define TREE_TOTAL(name, T)                                                                   \
static T name##_from(npy_intp n, npy_intp block, const T *sums, npy_intp *next)             \
{                                                                                            \
    if (n <= block)                                                                          \
        return sums[(*next)++];                                                              \
    npy_intp n2 = pairwise_split(n);                                                         \
    T left = name##_from(n2, block, sums, next);                                             \
    T right = name##_from(n - n2, block, sums, next);                                        \
    return left + right;                                                                     \
}                                                                                            \
static T name(npy_intp n, npy_intp block, const T *sums)                                     \
{                                                                                            \
    npy_intp next = 0;                                                                       \
    return name##_from(n, block, sums, &next);                                               \
}
TREE_TOTAL(support_tree_total_d, double)
TREE_TOTAL(support_tree_total_f, float)
#undef TREE_TOTAL

static const pj_support kernel_support = {
    .tree_leaves = support_tree_leaves,
    .tree_chunks = support_tree_chunks,
    .tree_total_d = support_tree_total_d,
    .tree_total_f = support_tree_total_f,
    .array = entry_array,
    .as_double = entry_double,
    .as_int = entry_int,
    .bcast = entry_bcast,
    .strides = entry_strides,
    .dense = entry_dense,
    .perm = entry_perm,
    .agrees = entry_agrees,
    .permute = entry_permute,
    .gather = entry_gather,
    .overlap = entry_overlap,
    .internal_overlap = entry_internal_overlap,
    .underflow_reported = entry_underflow_reported,
    .direct_ok = entry_direct_ok,
    .repair = entry_repair,
};

static PyObject *
m_kernel_support(PyObject *m, PyObject *unused)
{
    if (PyArray_API == NULL && _import_array() < 0)     /* kernel_entry.c calls NumPy's API */
        return NULL;
    return PyCapsule_New((void *)&kernel_support, PJ_SUPPORT_CAPSULE, NULL);
}

#define KERNEL_SUPPORT_METHODS \
    {"kernel_support", m_kernel_support, METH_NOARGS, "capsule of the fused kernels' pj_support table"},
