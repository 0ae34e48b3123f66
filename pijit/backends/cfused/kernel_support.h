/* kernel_support.h -- the table of routines pijit._C compiles once for every fused-kernel
 * module (csrc/kernel_support.c). A kernel module's init takes it from the capsule
 * pijit._eval_frame.kernel_support(); the capsule's name carries the layout's version.
 * Needs Python.h and numpy/ndarraytypes.h (npy_intp, PyArrayObject) first. */
#ifndef PIJIT_KERNEL_SUPPORT_H
#define PIJIT_KERNEL_SUPPORT_H

#define PJ_SUPPORT_CAPSULE "pijit.kernel_support.v4"

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

    /* What a kernel does once per call around its loops (csrc/kernel_entry.c says what each
       does and why), reached as pj_<name> (render.HELPERS). */
    PyArrayObject *(*array)(PyObject *o, int type, int nd);
    int (*as_double)(PyObject *o, double *out);
    int (*as_int)(PyObject *o, long long *out);
    int (*bcast)(PyArrayObject *a, npy_intp *shape, int nd);
    void (*strides)(PyArrayObject *a, const npy_intp *shape, int nd, npy_intp *st);
    int (*dense)(const npy_intp *st, const npy_intp *shape, int nd, npy_intp itemsize);
    void (*perm)(PyArrayObject *a, int *perm, int nd);
    int (*agrees)(const npy_intp *st, const npy_intp *shape, const int *perm, int nd);
    void (*permute)(npy_intp *v, const int *perm, int nd);
    void (*gather)(void *dst, const char *src, npy_intp n, npy_intp st, int size);
    int (*overlap)(PyArrayObject *a, PyArrayObject *b);
    int (*internal_overlap)(PyArrayObject *a);
    int (*underflow_reported)(void);
    int (*direct_ok)(int *under);
    PyObject *(*repair)(PyObject *fn, PyObject *const *args, Py_ssize_t nargs, npy_intp start,
                        const int *perm, int nd);
} pj_support;

#endif
