/* kernel_support.c -- routines every fused-kernel module calls, compiled once, here.
 *
 * Why: kernel modules are compiled by gcc on first call, and a routine copied into every
 * module is compiled again each time. NumPy's pairwise summation, one copy per dtype, was
 * ~0.2 s of the ~0.45 s gcc spent on an exact softmax module (measured here). Kernels call
 * these once per row through the pj_support table (pijit/backends/cfused/kernel_support.h),
 * so the indirect call costs nothing measurable.
 */
#include "pijit.h"
#include "kernel_support.h"

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
    npy_intp n2 = n / 2;                                                                     \
    n2 -= n2 % 8;                                                                            \
    return name(a, n2) + name(a + n2, n - n2);                                               \
}
PAIRWISE(support_pairwise_d, double)
PAIRWISE(support_pairwise_f, float)
#undef PAIRWISE

static const pj_support kernel_support = {
    .pairwise_d = support_pairwise_d,
    .pairwise_f = support_pairwise_f,
};

static PyObject *
m_kernel_support(PyObject *m, PyObject *unused)
{
    return PyCapsule_New((void *)&kernel_support, PJ_SUPPORT_CAPSULE, NULL);
}

#define KERNEL_SUPPORT_METHODS \
    {"kernel_support", m_kernel_support, METH_NOARGS, "capsule of the fused kernels' pj_support table"},
