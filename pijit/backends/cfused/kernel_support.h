/* kernel_support.h -- the table of routines pijit._C compiles once for every fused-kernel
 * module (csrc/kernel_support.c). A kernel module's init takes it from the capsule
 * pijit._eval_frame.kernel_support(); the capsule's name carries the layout's version.
 * Needs numpy/ndarraytypes.h (npy_intp) first. */
#ifndef PIJIT_KERNEL_SUPPORT_H
#define PIJIT_KERNEL_SUPPORT_H

#define PJ_SUPPORT_CAPSULE "pijit.kernel_support.v1"

typedef struct {
    /* NumPy's pairwise summation of n contiguous values, to the bit */
    double (*pairwise_d)(const double *a, npy_intp n);
    float (*pairwise_f)(const float *a, npy_intp n);
} pj_support;

#endif
