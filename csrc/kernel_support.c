/* kernel_support.c -- routines every fused-kernel module calls, compiled once, here.
 *
 * Why: kernel modules are compiled by gcc on first call, and a routine copied into every
 * module is compiled again each time. NumPy's pairwise summation, one copy per dtype, was
 * ~0.2 s of the ~0.45 s gcc spent on an exact softmax module (measured here). Kernels call
 * these once per row or chunk through the pj_support table
 * (pijit/backends/cfused/kernel_support.h), so the indirect call costs nothing measurable.
 *
 * An exact whole-array sum follows NumPy's pairwise recursion over all n values (what NumPy
 * does for a C-contiguous operand) without holding them: the kernel computes the values
 * chunk by chunk, the chunks being the recursion's nodes of at most `block` values, sums
 * each chunk by the same recursion (which depends only on the chunk's length), and adds the
 * chunk sums as the levels above them do.
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

/* NumPy's pairwise summation (its @TYPE@_pairwise_sum): under 8 values in order from 0, up
   to 128 in eight accumulators combined as ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)) then the rest
   in order, else the two halves split at a multiple of 8. Only additions: no contraction can
   change it, whatever the flags. */
#define PAIRWISE(name, T)                                                                     \
static T name(const T *a, npy_intp n)                                                        \
{                                                                                            \
    if (n < 8) {                                                                             \
        T res = 0;                                                                           \
        for (npy_intp i = 0; i < n; i++)                                                     \
            res += a[i];                                                                     \
        return res;                                                                          \
    }                                                                                        \
    if (n <= 128) {                                                                          \
        T r[8];                                                                              \
        for (int k = 0; k < 8; k++)                                                          \
            r[k] = a[k];                                                                     \
        npy_intp i;                                                                          \
        for (i = 8; i < n - (n % 8); i += 8)                                                 \
            for (int k = 0; k < 8; k++)                                                      \
                r[k] += a[i + k];                                                            \
        T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));           \
        for (; i < n; i++)                                                                   \
            res += a[i];                                                                     \
        return res;                                                                          \
    }                                                                                        \
    npy_intp n2 = pairwise_split(n);                                                         \
    return name(a, n2) + name(a + n2, n - n2);                                               \
}
PAIRWISE(support_pairwise_d, double)
PAIRWISE(support_pairwise_f, float)
#undef PAIRWISE

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
    .pairwise_d = support_pairwise_d,
    .pairwise_f = support_pairwise_f,
    .tree_chunks = support_tree_chunks,
    .tree_total_d = support_tree_total_d,
    .tree_total_f = support_tree_total_f,
};

static PyObject *
m_kernel_support(PyObject *m, PyObject *unused)
{
    return PyCapsule_New((void *)&kernel_support, PJ_SUPPORT_CAPSULE, NULL);
}

#define KERNEL_SUPPORT_METHODS \
    {"kernel_support", m_kernel_support, METH_NOARGS, "capsule of the fused kernels' pj_support table"},
