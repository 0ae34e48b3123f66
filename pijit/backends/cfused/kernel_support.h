/* kernel_support.h -- the table of routines pijit._C compiles once for every fused-kernel
 * module (csrc/kernel_support.c). A kernel module's init takes it from the capsule
 * pijit._eval_frame.kernel_support(); the capsule's name carries the layout's version.
 * Needs numpy/ndarraytypes.h (npy_intp) first. */
#ifndef PIJIT_KERNEL_SUPPORT_H
#define PIJIT_KERNEL_SUPPORT_H

#define PJ_SUPPORT_CAPSULE "pijit.kernel_support.v3"

/* Room for tree_chunks' bounds: its chunks are longer than block / 4 (for block >= 64). */
#define PJ_TREE_BOUNDS(n, block) ((n) / ((block) / 4) + 3)

typedef struct {
    /* NumPy's pairwise summation of n values (kernel_support.c) in pieces. tree_leaves
       writes the count + 1 offsets of the recursion's leaves (its nodes of at most 128
       values) into at, and into pops[l] how many adds of the recursion complete after leaf
       l; returns count (at most n / 64 + 1). The pairwise summation of n values in chunks:
       the nodes of its recursion of at most `block` values (block >= 128) whose parent is
       longer, in order. tree_chunks writes count + 1 offsets into bounds and returns count;
       tree_total_* adds the chunks' pairwise sums as the recursion above them does. */
    npy_intp (*tree_leaves)(npy_intp n, npy_intp *at, unsigned char *pops);
    npy_intp (*tree_chunks)(npy_intp n, npy_intp block, npy_intp *bounds);
    double (*tree_total_d)(npy_intp n, npy_intp block, const double *sums);
    float (*tree_total_f)(npy_intp n, npy_intp block, const float *sums);
} pj_support;

#endif
