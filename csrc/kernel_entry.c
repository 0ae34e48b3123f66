/* kernel_entry.c -- what a fused kernel does once per call before and after its loops, for
 * every kernel module, compiled once, here: accepting its operands (dtype, alignment, byte
 * order), broadcasting them, their strides and iteration order as NumPy's iterator would
 * take them, overlap between inputs and outputs, NumPy's error modes when a flag was raised,
 * and handing the rest of a write to NumPy.
 *
 * Why here and not in each module: each kernel module is compiled by gcc at its first call,
 * and these routines, copied into every module, were a third of gcc's time on a one-kernel
 * module (0.19 -> 0.12 s of CPU measured here, with the precompiled header). They run once
 * per call (pj_gather: once per strided row), out of line already, so reaching them through
 * the pj_support table costs nothing measurable. Reached as pj_<name> in the kernels' C
 * (render.HELPERS' macros).
 *
 * Needs NumPy's C API: the table is handed out (kernel_support.c) only once it is imported.
 */
#include "pijit.h"

#include <numpy/arrayobject.h>
#include <numpy/arrayscalars.h>

static int
entry_underflow_reported(void)
{
    static PyObject *geterr;
    if (geterr == NULL) {
        PyObject *np = PyImport_ImportModule("numpy");
        geterr = np == NULL ? NULL : PyObject_GetAttrString(np, "geterr");
        Py_XDECREF(np);
    }
    PyObject *modes = geterr == NULL ? NULL : PyObject_CallNoArgs(geterr);
    PyObject *under = modes == NULL ? NULL : PyDict_GetItemString(modes, "under");
    int ignored = under != NULL && PyUnicode_Check(under)
        && PyUnicode_CompareWithASCIIString(under, "ignore") == 0;
    if (modes == NULL)
        PyErr_Clear();      /* cannot tell: let NumPy decide */
    Py_XDECREF(modes);
    return !ignored;
}

/* A kernel writing straight into its destination (fuse.direct_write) commits each row only
   when it raised no flag, so where one did, NumPy can still compute the rest and report the
   flags as the whole operation's (pj_repair). It does so while NumPy's error modes and the
   warnings filters make every report a warning (ignore, warn, print; no "error" filter of
   RuntimeWarning): an error raised by NumPy's rest would come after rows the kernel wrote,
   where NumPy raises before writing any. Sets *under: underflow is reported. */
static int
entry_direct_ok(int *under)
{
    static PyObject *geterr, *warnings;
    static const char *const cats[] = {"divide", "over", "under", "invalid"};
    if (geterr == NULL) {
        PyObject *np = PyImport_ImportModule("numpy");
        geterr = np == NULL ? NULL : PyObject_GetAttrString(np, "geterr");
        Py_XDECREF(np);
    }
    if (warnings == NULL)
        warnings = PyImport_ImportModule("warnings");
    PyObject *modes = geterr == NULL || warnings == NULL ? NULL : PyObject_CallNoArgs(geterr);
    if (modes == NULL || !PyDict_Check(modes)) {
        PyErr_Clear();
        Py_XDECREF(modes);
        return 0;
    }
    int ok = 1;
    for (int k = 0; k < 4 && ok; k++) {
        PyObject *m = PyDict_GetItemString(modes, cats[k]);
        ok = m != NULL && PyUnicode_Check(m)
            && (PyUnicode_CompareWithASCIIString(m, "ignore") == 0
                || PyUnicode_CompareWithASCIIString(m, "warn") == 0
                || PyUnicode_CompareWithASCIIString(m, "print") == 0);
        if (ok && k == 2)
            *under = PyUnicode_CompareWithASCIIString(m, "ignore") != 0;
    }
    Py_DECREF(modes);
    PyObject *filters = ok ? PyObject_GetAttrString(warnings, "filters") : NULL;
    if (filters == NULL || !PyList_Check(filters)) {
        PyErr_Clear();
        Py_XDECREF(filters);
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(filters) && ok; i++) {
        PyObject *f = PyList_GET_ITEM(filters, i);
        if (!PyTuple_Check(f) || PyTuple_GET_SIZE(f) < 3) {
            ok = 0;
            break;
        }
        PyObject *action = PyTuple_GET_ITEM(f, 0), *cat = PyTuple_GET_ITEM(f, 2);
        if (!PyUnicode_Check(action) || PyUnicode_CompareWithASCIIString(action, "error") != 0)
            continue;
        int sub = PyType_Check(cat) ? PyObject_IsSubclass(PyExc_RuntimeWarning, cat) : 1;
        if (sub != 0) {
            PyErr_Clear();
            ok = 0;
        }
    }
    Py_DECREF(filters);
    return ok;
}

/* Whether the bytes two arrays span may overlap (np.may_share_memory's bounds test). */
static int
entry_overlap(PyArrayObject *a, PyArrayObject *b)
{
    char *lo[2], *hi[2];
    PyArrayObject *ab[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        lo[k] = hi[k] = PyArray_BYTES(ab[k]);
        for (int d = 0; d < PyArray_NDIM(ab[k]); d++) {
            npy_intp dim = PyArray_DIM(ab[k], d), s = PyArray_STRIDE(ab[k], d);
            if (dim == 0)
                return 0;
            if (s < 0)
                lo[k] += s * (dim - 1);
            else
                hi[k] += s * (dim - 1);
        }
        hi[k] += PyArray_ITEMSIZE(ab[k]);
    }
    return lo[0] < hi[1] && lo[1] < hi[0];
}

/* Whether two elements of `a` may share bytes (a stride-0 axis of a broadcast view, rows
   laid over each other by as_strided): NumPy buffers a write into such an array, where a
   kernel writing row after row would read what it wrote. Sufficient: taken by increasing
   |stride|, each axis longer than 1 steps past all that the axes before it span. */
static int
entry_internal_overlap(PyArrayObject *a)
{
    npy_intp st[NPY_MAXDIMS], dim[NPY_MAXDIMS];
    int m = 0;
    for (int d = 0; d < PyArray_NDIM(a); d++) {
        npy_intp n = PyArray_DIM(a, d), s = PyArray_STRIDE(a, d);
        if (n == 0)
            return 0;
        if (n == 1)
            continue;
        int k = m++;
        for (; k > 0 && st[k - 1] > (s < 0 ? -s : s); k--) {
            st[k] = st[k - 1];
            dim[k] = dim[k - 1];
        }
        st[k] = s < 0 ? -s : s;
        dim[k] = n;
    }
    npy_intp span = PyArray_ITEMSIZE(a);
    for (int k = 0; k < m; k++) {
        if (st[k] < span)
            return 1;
        span += st[k] * (dim[k] - 1);
    }
    return 0;
}

/* Copies a strided row into a contiguous one (one function for all kernels: a
   copy loop per kernel and input cost gcc time for no speed). */
static void
entry_gather(void *dst, const char *src, npy_intp n, npy_intp st, int size)
{
    char *d = (char *)dst;      /* memcpy: the row is read back as any type (no aliasing UB) */
    switch (size) {
    case 8:
        for (npy_intp j = 0; j < n; j++)
            memcpy(d + j * 8, src + j * st, 8);
        break;
    case 4:
        for (npy_intp j = 0; j < n; j++)
            memcpy(d + j * 4, src + j * st, 4);
        break;
    case 2:
        for (npy_intp j = 0; j < n; j++)
            memcpy(d + j * 2, src + j * st, 2);
        break;
    default:
        for (npy_intp j = 0; j < n; j++)
            d[j] = src[j * st];
    }
}

/* An ndarray the kernel can read: exact dtype, native byte order, aligned, ndim <= nd. */
static PyArrayObject *
entry_array(PyObject *o, int type, int nd)
{
    if (!PyArray_Check(o))
        return NULL;
    PyArrayObject *a = (PyArrayObject *)o;
    if (PyArray_TYPE(a) != type || PyArray_NDIM(a) > nd || !PyArray_ISALIGNED(a)
            || !PyArray_ISNOTSWAPPED(a))
        return NULL;
    return a;
}

/* A Python or NumPy scalar as a double; -1 (no exception set) if it is not one. */
static int
entry_double(PyObject *o, double *out)
{
    if (PyFloat_Check(o)) {
        *out = PyFloat_AS_DOUBLE(o);
        return 0;
    }
    if (PyArray_IsScalar(o, Float)) {
        *out = (double)PyArrayScalar_VAL(o, Float);
        return 0;
    }
    if (PyBool_Check(o)) {
        *out = o == Py_True;
        return 0;
    }
    if (PyArray_IsScalar(o, Bool)) {
        *out = PyArrayScalar_VAL(o, Bool);
        return 0;
    }
    return -1;
}

/* A Python or NumPy integer (or bool) as int64 bits (a uint64 above INT64_MAX keeps its
   bits); -1 (no exception set) if it is not one or does not fit: a Python int is an int64
   operand, so one past INT64_MAX (10**20 // 7, computed by Python in the graph) is not a
   uint64's bits (NumPy takes it as a float, or raises). */
static int
entry_int(PyObject *o, long long *out)
{
    if (PyBool_Check(o)) {
        *out = o == Py_True;
        return 0;
    }
    PyObject *v = PyNumber_Index(o);
    if (v == NULL) {
        PyErr_Clear();
        return -1;
    }
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow > 0 && PyLong_Check(o))
        overflow = -1;
    else if (overflow > 0)
        x = (long long)PyLong_AsUnsignedLongLong(v);
    Py_DECREF(v);
    if (overflow < 0 || PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    *out = x;
    return 0;
}

static int
entry_bcast(PyArrayObject *a, npy_intp *shape, int nd)
{
    int an = PyArray_NDIM(a);
    for (int k = 0; k < an; k++) {
        npy_intp dim = PyArray_DIM(a, k);
        int d = nd - an + k;
        if (dim != 1) {
            if (shape[d] == 1)
                shape[d] = dim;
            else if (shape[d] != dim)
                return -1;
        }
    }
    return 0;
}

/* Byte strides of `a` broadcast to `shape` (0 along broadcast axes). */
static void
entry_strides(PyArrayObject *a, const npy_intp *shape, int nd, npy_intp *st)
{
    int an = PyArray_NDIM(a);
    for (int d = 0; d < nd; d++) {
        int k = d - (nd - an);
        st[d] = (k < 0 || PyArray_DIM(a, k) == 1) ? 0 : PyArray_STRIDE(a, k);
    }
}

/* Byte strides `st` (of `shape`) lay the elements out densely in C order. */
static int
entry_dense(const npy_intp *st, const npy_intp *shape, int nd, npy_intp itemsize)
{
    npy_intp want = itemsize;
    for (int d = nd - 1; d >= 0; d--) {
        if (shape[d] != 1 && st[d] != want)
            return 0;
        want *= shape[d];
    }
    return 1;
}

/* The axes of `a` by stride, outer first (NumPy's stable sort: ties keep C order), with
   axes of length 1 left in their C places: their strides step nowhere (the (m, 1) view
   x[:, ::2] has a long one, v[None, :] a zero), so two operands that differ only there are
   in one order, and an operand in C order but for them is in C order. */
static void
entry_perm(PyArrayObject *a, int *perm, int nd)
{
    npy_stride_sort_item items[NPY_MAXDIMS];
    const npy_intp *dims = PyArray_DIMS(a);
    PyArray_CreateSortedStridePerm(nd, PyArray_STRIDES(a), items);
    for (int d = 0, k = 0; d < nd; d++) {
        if (dims[d] == 1) {
            perm[d] = d;
            continue;
        }
        while (dims[items[k].perm] == 1)
            k++;
        perm[d] = (int)items[k++].perm;
    }
}

/* No two axes longer than 1 that `st` (strides broadcast to `shape`, 0 where broadcast)
   both step along are ordered against `perm` (NULL: C order): NumPy's iterator orders a
   result's axes by its operands' strides, and by C order where operands disagree, so the
   kernel's order is NumPy's only when no operand disagrees with it. Equal strides keep
   C order, as NumPy's stable sort does. */
static int
entry_agrees(const npy_intp *st, const npy_intp *shape, const int *perm, int nd)
{
    for (int i = 0; i < nd; i++) {
        int d = perm ? perm[i] : i;
        if (shape[d] == 1 || st[d] == 0)
            continue;
        npy_intp outer = st[d] < 0 ? -st[d] : st[d];
        for (int j = i + 1; j < nd; j++) {
            int e = perm ? perm[j] : j;
            if (shape[e] == 1 || st[e] == 0)
                continue;
            npy_intp inner = st[e] < 0 ? -st[e] : st[e];
            if (outer < inner || (outer == inner && d > e))
                return 0;
        }
    }
    return 1;
}

static void
entry_permute(npy_intp *v, const int *perm, int nd)
{
    npy_intp tmp[NPY_MAXDIMS];
    for (int d = 0; d < nd; d++)
        tmp[d] = v[perm[d]];
    memcpy(v, tmp, nd * sizeof(npy_intp));
}

/* A writing kernel that met a flag at element `start` of its iteration order (C order over
   the destination's axes taken in the order `perm`, NULL: their own): NumPy computes from
   there (cfused._write_fallback): fn is the group's fallback. */
static PyObject *
entry_repair(PyObject *fn, PyObject *const *args, Py_ssize_t nargs, npy_intp start,
             const int *perm, int nd)
{
    PyObject *t = PyTuple_New(nargs + 2), *r = NULL;
    if (t == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++)
        PyTuple_SET_ITEM(t, i, Py_NewRef(args[i]));
    PyObject *s = PyLong_FromSsize_t(start), *m = PyTuple_New(nd);
    for (int d = 0; m != NULL && d < nd; d++) {
        PyObject *axis = PyLong_FromLong(perm == NULL ? d : perm[d]);
        if (axis == NULL)
            Py_CLEAR(m);
        else
            PyTuple_SET_ITEM(m, d, axis);
    }
    if (s != NULL)
        PyTuple_SET_ITEM(t, nargs, s);
    if (m != NULL)
        PyTuple_SET_ITEM(t, nargs + 1, m);
    if (s != NULL && m != NULL) {
        if (fn == NULL)
            PyErr_SetString(PyExc_RuntimeError, "pijit: kernel fallback not set");
        else
            r = PyObject_Call(fn, t, NULL);
    }
    Py_DECREF(t);
    return r;
}
