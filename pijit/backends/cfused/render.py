"""C source of one graph's fused groups: list of FusionGroups -> one C translation unit.

Each group becomes a CPython function `g<k>(*inputs)` (METH_FASTCALL) returning its outputs
(one object, or a tuple when there are several). It reads data pointers, shapes and strides
from the ndarray objects, broadcasts at run time, allocates outputs through NumPy (huge pages
for big arrays; 4 MiB and up from the buffer pool, csrc/pool.c) and runs one loop nest: an
odometer over the outer axes; per row, one loop per stage of the group (a row reduction
finishes in one stage and is read as a per-row constant by the next, so softmax reads its row
three times from cache, not from memory); a full value a later stage needs again is kept in a
row-sized scratch buffer. When every array input is dense with the full shape (or of size 1)
and the group has no row values, the rows are chunks of the flat arrays instead. Each stage loop is one
contiguous `omp simd` loop (inputs broadcast along the row hoisted out of it); a strided row is
first gathered into a scratch row, so gcc compiles each loop once.

With num_threads > 1 (compiled with -fopenmp), big kernels share rows or flat chunks among
threads, each with its own scratch and FP flags; groups with a whole-array reduction stay on
one thread, so results never depend on the thread count.

An input the kernel cannot take (unexpected dtype, unaligned, byte-swapped, non-broadcastable)
makes it call the group's NumPy fallback instead. A group ending in a write
(fuse.direct_write) computes it into its destination, an input, row by row (direct_checks,
commit; outer axes that continue the rows join them, long rows go in segments of PJ_CHUNK). Values are computed in each node's dtype,
exactly as NumPy would: same promotion (from the node Metas), NaN-propagating maximum/minimum/
clip/max/min; transcendentals through libmvec; sums by pairwise summation over blocks
(accumulated in double; reductions.py says how long a block is).
"""
from __future__ import annotations

import math
import re

import numpy as np

from pijit.backends.cfused import reductions
from pijit.graph.fuse import BOOL, COMPARE, FLOAT, INEXACT, FusionGroup, compute_dtype
from pijit.graph.ir import Ref, node_refs

_TYPES = [(np.float32, "float", "NPY_FLOAT"), (np.float64, "double", "NPY_DOUBLE"),
          (np.bool_, "npy_bool", "NPY_BOOL"), (np.int8, "int8_t", "NPY_INT8"),
          (np.int16, "int16_t", "NPY_INT16"), (np.int32, "int32_t", "NPY_INT32"),
          (np.int64, "int64_t", "NPY_INT64"), (np.uint8, "uint8_t", "NPY_UINT8"),
          (np.uint16, "uint16_t", "NPY_UINT16"), (np.uint32, "uint32_t", "NPY_UINT32"),
          (np.uint64, "uint64_t", "NPY_UINT64")]
CTYPE = {np.dtype(t): c for t, c, _ in _TYPES}
NPYTYPE = {np.dtype(t): n for t, _, n in _TYPES}

# Math functions vectorized through libmvec when declared `omp declare simd` (those of
# fuse.LIBMVEC_235 are used only where libmvec has them).
_MATH = {"exp": "exp", "log": "log", "sqrt": "sqrt", "sin": "sin", "cos": "cos",
         "tanh": "tanh", "abs": "fabs", "expm1": "expm1", "log1p": "log1p", "log2": "log2",
         "log10": "log10", "exp2": "exp2", "sinh": "sinh", "cosh": "cosh", "tan": "tan",
         "arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh",
         "arccosh": "acosh", "arctanh": "atanh", "cbrt": "cbrt"}
_MATH2 = {"arctan2": "atan2", "hypot": "hypot"}
VECTOR_MATH = tuple(f for op, f in _MATH.items() if op not in ("sqrt", "abs"))
VECTOR_MATH2 = ("pow", *_MATH2.values())
# C's < <= > >= on floats raise FE_INVALID on NaN: float orderings go through PJ_QCMP (compare()).
_BINOP = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">",
          "ge": ">=", "eq": "==", "ne": "!="}

CONTRACT = '#pragma GCC optimize ("fp-contract=fast")\n'
PRELUDE = r"""
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <Python.h>
#include <numpy/arrayobject.h>
#include <numpy/arrayscalars.h>
#include <fenv.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kernel_support.h"
"""

VECTOR_DECLS = "".join(
    f"#pragma omp declare simd notinbranch\n"
    f"extern {t} {f}{s}({t}{', ' + t if f in VECTOR_MATH2 else ''});\n"
    for f in VECTOR_MATH + VECTOR_MATH2 for t, s in (("double", ""), ("float", "f")))

HELPERS = r"""
/* Argument checks run once per call and per input: out of line, they cost a call each but
   no longer get inlined into every kernel (a quarter of gcc's time per kernel). */
#define PJ_COLD __attribute__((noinline))

/* Scratch memory from libc, with PyMem_RawMalloc's promise that 0 bytes is not a failure:
   kernels are compiled against the limited C API of 3.11 (toolchain.py), which has no
   PyMem_Raw* functions. */
#define PJ_MALLOC(n) malloc((n) > 0 ? (size_t)(n) : 1)

/* A module split into PJ_PARTS parts (module_source) is compiled once per part with
   -DPJ_PART=k and linked: the state the module's functions set is defined in part 0 and
   shared, hidden from other modules; each part has its own NumPy API table (_import_array). */
#define PJ_HIDDEN __attribute__((visibility("hidden")))
#if !defined(PJ_PARTS)
#define PJ_SHARED static
#define PJ_GROUP static
#elif PJ_PART == 0
#define PJ_SHARED PJ_HIDDEN
#define PJ_GROUP PJ_HIDDEN
#else
#define PJ_SHARED extern PJ_HIDDEN
#define PJ_GROUP PJ_HIDDEN
#endif

/* A NaN's bits as NumPy computes them (c_neg, c_hidden): gcc takes the sign and payload of
   a NaN that arithmetic returns as unspecified, so it folds x * -1.0 into -x (flipping it),
   (-x) * (-y) into x * y, x - (-y) into x + y, x + -nan into x - nan, x * 2.0 into the
   negation of an x * -2.0 it has, and x * 1.0 into x (a signalling NaN then stays
   signalling and raises no invalid flag), where NumPy's operation returns its NaN operand
   (-fsignaling-nans stops the first and the last only). It cannot fold what it does not
   know: each kernel function starts with PJ_K_INIT, pj_k = 0 through an empty asm, and
   negations and such constants are computed from pj_k. Loops compute them once, before they
   start (vectorized as before); a weak const would not do: gcc 12 folds those it defines. */
#define PJ_K_INIT uint64_t pj_k = 0; __asm__("" : "+r"(pj_k))
static inline double pj_hide_d(uint64_t bits, uint64_t k)
{
    double d;
    bits ^= k;
    memcpy(&d, &bits, sizeof d);
    return d;
}
static inline float pj_hide_f(uint32_t bits, uint64_t k)
{
    float f;
    bits ^= (uint32_t)k;
    memcpy(&f, &bits, sizeof f);
    return f;
}
/* -x as NumPy's negative computes it: the sign bit flipped, a NaN's too */
static inline double pj_neg_d(double x, uint64_t k)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    u ^= (uint64_t)1 << 63 ^ k;
    memcpy(&x, &u, sizeof u);
    return x;
}
static inline float pj_neg_f(float x, uint64_t k)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u ^= (uint32_t)1 << 31 ^ (uint32_t)k;
    memcpy(&x, &u, sizeof u);
    return x;
}

/* Pairwise summation: a binary counter of partial sums (level k holds 2^k blocks). */
typedef struct { double v[64]; uint64_t mask; } pj_pw;

static inline void pj_pw_push(pj_pw *s, double x)
{
    int k = 0;
    while (s->mask & ((uint64_t)1 << k)) {
        x = s->v[k] + x;
        s->mask &= ~((uint64_t)1 << k);
        k++;
    }
    s->v[k] = x;
    s->mask |= (uint64_t)1 << k;
}

static inline double pj_pw_total(const pj_pw *s)
{
    uint64_t m = s->mask;
    if (m == 0)
        return 0.0;
    int k = __builtin_ctzll(m);
    double t = s->v[k];
    for (m &= m - 1; m; m &= m - 1)
        t = s->v[__builtin_ctzll(m)] + t;
    return t;
}

/* Floating-point errors, as NumPy reports them: a kernel that raised divide-by-zero,
   overflow or invalid (bit 1 of fperr), or underflow (bit 2) while np.errstate does not ignore
   it, hands its group to NumPy, which reports it exactly (a warning, or an error). */
#define PJ_FE_ERR (FE_DIVBYZERO | FE_OVERFLOW | FE_INVALID)
/* One fetestexcept for both bits: a kernel folds twice around each call of a NumPy loop,
   per row (four library calls per 1024-element row of softmax were 2.4% of its time). */
static inline int pj_fe_bits(void)
{
    const int f = fetestexcept(PJ_FE_ERR | FE_UNDERFLOW);
    return ((f & PJ_FE_ERR) ? 1 : 0) | ((f & FE_UNDERFLOW) ? 2 : 0);
}
#define PJ_FE_FOLD(e) ((e) |= pj_fe_bits())

/* pijit's buffer pool (a NumPy memory handler, csrc/pool.c; set from Python): outputs of 4 MiB
   or more are allocated from it, on huge-page boundaries, and reuse the pages of outputs that
   died (glibc would map many of them afresh and fault them in on every call). */
PJ_SHARED PyObject *pj_pool;
#define PJ_POOL_MIN ((npy_intp)4 << 20)

/* Installs the pool as NumPy's allocator for an output of `bytes`; returns what to restore. */
static PJ_COLD PyObject *pj_pool_on(npy_intp bytes)
{
    if (pj_pool == NULL || bytes < PJ_POOL_MIN)
        return NULL;
    PyObject *old = PyDataMem_SetHandler(pj_pool);
    if (old == NULL)
        PyErr_Clear();
    return old;
}

static PJ_COLD void pj_pool_off(PyObject *old)
{
    if (old == NULL)
        return;
    PyObject *ours = PyDataMem_SetHandler(old);
    if (ours == NULL)
        PyErr_Clear();
    Py_XDECREF(ours);
    Py_DECREF(old);
}

/* Ordered float comparisons that raise no FP flag on NaN, like NumPy's: C's < > <= >= are
   signaling (and gcc turns a compare-and-select into vmaxps, which signals too), so an
   invalid flag would hand every call with a NaN to the NumPy fallback. The operands are
   compared as integers whose order is the floats' order (x + 0 makes -0.0 equal to +0.0),
   after checking both are ordered (== is quiet). */
static inline int32_t pj_key_f(float x)
{
    float z = x + 0.0f;
    int32_t b;
    memcpy(&b, &z, sizeof b);
    return b ^ ((b >> 31) & INT32_MAX);
}

static inline int64_t pj_key_d(double x)
{
    double z = x + 0.0;
    int64_t b;
    memcpy(&b, &z, sizeof b);
    return b ^ ((b >> 63) & INT64_MAX);
}

#define PJ_QCMP(key, x, op, y) ((x) == (x) && (y) == (y) && key(x) op key(y))

/* np.where(c, a, b) as a select of bits, never `c ? a : b`: gcc turns a vector `c ? x / y : b`
   into a masked division (IFN_COND_DIV) that raises no floating-point flag in the lanes c
   leaves out, where NumPy computes every element of both operands and warns of each. */
#define PJ_WHERE_BITS(name, T, U)                                                   \
static inline T name(npy_bool c, T a, T b)                                          \
{                                                                                   \
    U x, y, m = (U)0 - (U)(c != 0);                                                 \
    memcpy(&x, &a, sizeof x);                                                       \
    memcpy(&y, &b, sizeof y);                                                       \
    x = (x & m) | (y & ~m);                                                         \
    memcpy(&a, &x, sizeof a);                                                       \
    return a;                                                                       \
}
PJ_WHERE_BITS(pj_where_d, double, uint64_t)
PJ_WHERE_BITS(pj_where_f, float, uint32_t)

#define PJ_WHERE_INT(T, c, a, b) ((T)(((a) & ((T)0 - (T)((c) != 0))) | ((b) & ~((T)0 - (T)((c) != 0)))))

/* a / b, correctly rounded as NumPy's division, for a row value b that a whole row divides by:
   y = 1/b once per row, then per element q = a*y and Markstein's correction q + (a - b*q)*y
   by two FMAs, which is a/b rounded to nearest when y is 1/b rounded (P. Markstein, IBM J.
   Res. Dev. 34(1), 1990; checked here on every float32 a in [1, 4) over 1500 divisors,
   where a*y alone was off for a third). A vector division took as long as the rest of a
   softmax row. The theorem needs a - b*q exact, which it is (a multiple of ulp(a) * 2^-p)
   while |a| >= 2^-969 (float32: 2^-102), and no underflow: pj_rdiv_ok takes a b with
   2^-1022 <= |b| < 2^60 (float32: 2^-126, 2^20; else the row divides, rdiv_or_divide),
   so that the quotient of an |a| >= 2^-960 (float32: 2^-100; SMALL) is normal. A lane
   with a smaller a != 0 computes with y = +-inf instead: inf - inf in the correction, whose
   invalid flag hands the group to NumPy as any other flag does. An infinite a does the
   same. Where b*q == a exactly (a == +-0 too) or a is NaN, q is the quotient (a +0
   remainder would turn -0 into +0; q is a's NaN, as the division returns it). Magnitudes
   compare as integers (pj_mag): gcc 12 vectorizes isless into a signaling compare, which
   a NaN would make raise invalid, where NumPy's division raises nothing. */
#define PJ_RDIV(s, T, U, MANT, BIAS, TOP, SMALL)                                    \
static inline U pj_mag_##s(T x)     /* |x|'s bits, ordered as |x| is (a NaN's last) */ \
{                                                                                   \
    U u;                                                                            \
    memcpy(&u, &x, sizeof u);                                                       \
    return u & (((U)1 << (8 * sizeof(U) - 1)) - 1);                                 \
}                                                                                   \
static inline int pj_rdiv_ok_##s(T b)                                               \
{                                                                                   \
    const U m = pj_mag_##s(b);                                                      \
    return m >= ((U)1 << MANT) && m < ((U)(BIAS + TOP) << MANT);                    \
}                                                                                   \
static inline T pj_rdiv_##s(T a, T b, T y, T yinf)                                  \
{                                                                                   \
    const int off = pj_mag_##s(a) - 1 < ((U)(BIAS - SMALL) << MANT) - 1;            \
    const T q = a * (off ? yinf : y);                                               \
    const T r = PJ_FMA_##s(-q, b, a);                                               \
    const T qc = PJ_FMA_##s(r, y, q);                                               \
    return (r == 0) | (r != r) ? q : qc;                                            \
}
#define PJ_FMA_d fma
#define PJ_FMA_f fmaf
PJ_RDIV(d, double, uint64_t, 52, 1023, 60, 960)
PJ_RDIV(f, float, uint32_t, 23, 127, 20, 100)

/* Routines compiled once in pijit._C (csrc/kernel_support.c), set by the module's init:
   NumPy's pairwise recursion, so an exact kernel's sum is NumPy's to the bit, and what a
   kernel does around its loops (below). */
PJ_SHARED const pj_support *pj_sup;

/* What a kernel does once per call around its loops: accept, broadcast and order its
   operands, test overlaps, read NumPy's error modes, hand the rest of a write to NumPy.
   Compiled once in pijit._C (csrc/kernel_entry.c says what each does and why), not in each
   module, where they were a third of gcc's time on a one-kernel module. */
#define pj_array(o, type, nd) (pj_sup->array((o), (type), (nd)))
#define pj_double(o, out) (pj_sup->as_double((o), (out)))
#define pj_int(o, out) (pj_sup->as_int((o), (out)))
#define pj_bcast(a, shape, nd) (pj_sup->bcast((a), (shape), (nd)))
#define pj_strides(a, shape, nd, st) (pj_sup->strides((a), (shape), (nd), (st)))
#define pj_dense(st, shape, nd, itemsize) (pj_sup->dense((st), (shape), (nd), (itemsize)))
#define pj_perm(a, p, nd) (pj_sup->perm((a), (p), (nd)))
#define pj_agrees(st, shape, p, nd) (pj_sup->agrees((st), (shape), (p), (nd)))
#define pj_permute(v, p, nd) (pj_sup->permute((v), (p), (nd)))
#define pj_gather(dst, src, n, st, size) (pj_sup->gather((dst), (src), (n), (st), (size)))
#define pj_overlap(a, b) (pj_sup->overlap((a), (b)))
#define pj_internal_overlap(a) (pj_sup->internal_overlap(a))
#define pj_underflow_reported() (pj_sup->underflow_reported())
#define pj_direct_ok(under) (pj_sup->direct_ok(under))

/* NumPy's eight accumulators of a leaf as the lanes of one vector (two or four registers
   where vectors are shorter), combined as NumPy combines them, ((r[0]+r[1])+(r[2]+r[3]))+
   ((r[4]+r[5])+(r[6]+r[7])), by adds of the vector: lane k of a is r[k]+r[k^1], lane k of
   b is a[k]+a[k^2], and the result b[0]+b[4]. The other lanes add the same values (in the
   other order), so raise no other flag. gcc made of the scalar form 8 shuffles and 7
   scalar adds, a third of a leaf of np.sum(x * x) in cache (perf); this is 2 shuffles, 2
   vector adds, an extract and an add. */
#define PJ_VEC(s, T)                                                            \
typedef T pj_v##s __attribute__((vector_size(8 * sizeof(T))));                  \
static inline __attribute__((unused)) pj_v##s pj_vload_##s(const T *a)         \
{                                                                               \
    pj_v##s v;                                                                  \
    memcpy(&v, a, sizeof v);                                                    \
    return v;                                                                   \
}                                                                               \
static inline __attribute__((unused)) T pj_comb_##s(pj_v##s r)                 \
{                                                                               \
    pj_v##s a = r + (pj_v##s){r[1], r[0], r[3], r[2], r[5], r[4], r[7], r[6]};  \
    pj_v##s b = a + (pj_v##s){a[2], a[3], a[0], a[1], a[6], a[7], a[4], a[5]};  \
    return b[0] + b[4];                                                         \
}
PJ_VEC(d, double)
PJ_VEC(f, float)

/* NumPy's sum of one leaf of its pairwise recursion (n <= 128 values): under 8 in order
   from +0.0, else eight accumulators r[k] (values k, k + 8, ... in order) combined as
   ((r[0]+r[1])+(r[2]+r[3]))+((r[4]+r[5])+(r[6]+r[7])), then the rest in order. Here, not in
   pijit._C: with the kernel's flags the accumulators are the lanes of vector registers. An
   exact kernel computes a leaf's values (in L1) and sums them at once, leaf after leaf, so
   its reads from memory never pause for long. Measured here on 10M float64 (a C model of
   the kernel): the values of a 2048-value chunk summed by pijit._C's copy (SSE2) 6.7-10 ms,
   by a -march=native copy 3.8-4.8 ms, leaf by leaf 2.8-3.0 ms, NumPy's loop over a itself
   2.5 ms. Only adds: no contraction can change it. */
#define PJ_LEAF(name, s, T)                                                     \
static inline __attribute__((unused)) T name(const T *a, npy_intp n)          \
{                                                                               \
    if (n < 8) {                                                                \
        T res = 0;                                                              \
        for (npy_intp i = 0; i < n; i++)                                        \
            res += a[i];                                                        \
        return res;                                                             \
    }                                                                           \
    pj_v##s r = pj_vload_##s(a);                                                \
    npy_intp i;                                                                 \
    for (i = 8; i < n - (n % 8); i += 8)                                        \
        r += pj_vload_##s(a + i);                                               \
    T res = pj_comb_##s(r);                                                     \
    for (; i < n; i++)                                                          \
        res += a[i];                                                            \
    return res;                                                                 \
}
PJ_LEAF(pj_leaf_d, d, double)
PJ_LEAF(pj_leaf_f, f, float)

/* The signs of the zeros among n values (none a NaN): bit 0 for +0.0, bit 1 for -0.0. A
   max or min of zero is one of the values, so with zeros of one sign it is that zero. */
#define PJ_ZSIGNS(name, T)                                                      \
static inline __attribute__((unused)) int name(const T *a, npy_intp n)        \
{                                                                               \
    int s = 0;                                                                  \
    for (npy_intp i = 0; i < n; i++)                                            \
        if (a[i] == 0)                                                          \
            s |= signbit(a[i]) ? 2 : 1;                                         \
    return s;                                                                   \
}
PJ_ZSIGNS(pj_zsigns_d, double)
PJ_ZSIGNS(pj_zsigns_f, float)

/* The leaves of the recursion over a chunk of n values (pj_sup->tree_leaves), for the last
   few chunk lengths met: a row's or an array's chunks have two or three lengths, in turns. */
#define PJ_LEAVES (PJ_CHUNK / 64 + 2)
typedef struct { npy_intp n, count, at[PJ_LEAVES + 1]; unsigned char pops[PJ_LEAVES]; } pj_leafplan;
typedef struct { pj_leafplan p[4]; int next; } pj_leafplans;
/* Most partial sums an exact sum holds at once (the recursion's depth over a chunk, + 1). */
#define PJ_DEPTH 32

static inline __attribute__((unused)) void pj_plans_init(pj_leafplans *c)
{
    for (int k = 0; k < 4; k++)
        c->p[k].n = -1;
    c->next = 0;
}

static inline __attribute__((unused)) const pj_leafplan *pj_plan(pj_leafplans *c, npy_intp n)
{
    for (int k = 0; k < 4; k++)
        if (c->p[k].n == n)
            return &c->p[k];
    pj_leafplan *p = &c->p[c->next];
    c->next = (c->next + 1) & 3;
    p->n = n;
    p->count = pj_sup->tree_leaves(n, p->at, p->pops);
    return p;
}










"""


def c_const(value, dtype) -> str:
    """An exact C literal of a constant, converted to `dtype` as NumPy converts it (a NaN
    with its sign and payload, which C's NAN has not)."""
    ct = CTYPE[dtype]
    if dtype == BOOL:
        return "1" if value else "0"
    if dtype.kind in "iu":
        v = int(value)
        text = f"{v}ULL" if v > 0 else f"(-{-v - 1}LL - 1)" if v < 0 else "0"
        return f"(({ct}){text})"
    v = float(value)
    if math.isnan(v):
        return c_hidden(value, dtype)
    if math.isinf(v):
        text = "INFINITY" if v > 0 else "(-INFINITY)"
    else:
        text = v.hex()
        text = f"({text})" if text.startswith("-") else text
    return f"(({ct}){text})"


def hides(value, op: str) -> bool:
    """Whether a float constant operand of `op` (add, sub, mul, div or truediv) must be
    hidden from gcc (c_hidden), which would otherwise move a NaN's bits (see PJ_K_INIT in
    HELPERS): any factor or divisor (x * -1.0 becomes -x; x * c and x * -c in one function
    become one product and its negation), a zero or NaN term (x - 0.0 becomes x, x + -nan
    becomes x - nan)."""
    return op in ("mul", "div", "truediv") or value != value or value == 0


def reciprocal(value, dtype):
    """1 / value in float `dtype` when it is exact (value a power of two whose reciprocal
    the dtype holds), else None. x / value is then x * (1 / value) bit for bit, flags too:
    one rounding of the same exact result (gcc makes that change itself for constants it
    knows; a hidden divisor would be a division)."""
    c = np.array(value, dtype)
    if not np.isfinite(c) or c == 0 or math.frexp(float(c))[0] not in (0.5, -0.5):
        return None
    with np.errstate(all="ignore"):
        r = np.divide(np.array(1, dtype), c)
    return r if np.isfinite(r) and r != 0 and r * c == 1 else None


def twice(x, y):
    """The operand of x * y that the other, a constant 2, doubles (x * 2 is x + x bit for bit,
    and an add is quicker than a multiply by a hidden 2), else None."""
    for a, b in ((x, y), (y, x)):
        if not isinstance(b, (str, Ref)) and type(b) is not bool and b == 2:
            return a
    return None


def c_neg(x: str, dtype) -> str:
    """-x of a float: its sign bit flipped, which gcc does not merge into the operations
    around it (see PJ_K_INIT in HELPERS)."""
    return f"pj_neg_{'f' if dtype == np.float32 else 'd'}({x}, pj_k)"


def c_hidden(value, dtype) -> str:
    """`value` converted to float `dtype`, read through pj_hide_*: its exact bits, unknown to
    gcc."""
    if dtype == np.float32:
        return f"pj_hide_f({int(np.array(value, np.float32).view(np.uint32)):#x}U, pj_k)"
    return f"pj_hide_d({int(np.array(value, np.float64).view(np.uint64)):#x}ULL, pj_k)"


def wide(dtype) -> str:
    """The unsigned C type integer arithmetic of `dtype` wraps around in (no signed overflow,
    no promotion of small unsigned types to int)."""
    return "uint64_t" if dtype.itemsize == 8 else "uint32_t"


class GroupKernel:
    """Renders one FusionGroup as a kernel function (the C text of `function()`)."""

    def __init__(self, graph, grp: FusionGroup):
        self.graph, self.grp = graph, grp
        self.nd = len(grp.shape)
        self.ndi = max(self.nd, 1)
        shape = grp.shape if grp.shape else (1,)
        self.kinds = []
        for ref in grp.inputs:
            m = graph.meta(ref)
            if not m.is_array:
                kind = "scalar"
            elif None not in m.shape + shape and math.prod(m.shape) == 1 and math.prod(shape):
                kind = "one"
            elif m.shape == grp.shape:
                kind = "full"
            elif shape[-1] != 1 and (m.ndim == 0 or m.shape[-1] == 1):
                kind = "inner"
            else:
                kind = "other"
            self.kinds.append(kind)
        self.index = {ref.index: i for i, ref in enumerate(grp.inputs)}
        # the input a write member (fuse.direct_write) is computed into, and that member
        self.write = next(iter(grp.into), None)
        self.dest = None if self.write is None else self.index[grp.into[self.write].index]
        self.dest_read = self.dest is not None and any(
            r == grp.inputs[self.dest] for n in grp.nodes for r in node_refs(n))
        self.argpos = list(range(len(grp.inputs)))     # where each input is in args
        self.nargs = len(grp.inputs)
        self.tuple_result = False   # one output is returned as itself, not in a tuple
        self.numpy_slot = {}        # node out -> its NumPy loop's slot in the module's table
        self.plan()
        # A NumPy loop whose value is itself an output writes its row there, not into a row
        # buffer copied out after (np.exp(x) alone on 1M float64: the copy was 30% of the
        # kernel, which ran at 0.55x NumPy)
        self.direct = {}
        for k, ref in enumerate(grp.outputs):
            if ref.index in grp.numpy_loops and ref.index != self.write and \
                    ref.index not in self.direct and self.out_kind(ref) == "full":
                self.direct[ref.index] = f"q{k}"
        self.in_place()
        # the input whose memory order the outputs take (elementwise groups only: a
        # reduction's axes are in the original order; see c_born)
        full = [i for i, kd in enumerate(self.kinds) if kd == "full"]
        self.proto = full[0] if full and self.nd >= 2 and not grp.reductions \
            and not self.c_born() else None

    def in_place(self) -> None:
        """A NumPy loop whose operand's row buffer nothing else reads writes its result over
        that row, as np.exp(a, out=a) does: one scratch row fewer. NumPy's loops take an
        output exactly on an input as no overlap (nomemoverlap, loops_utils.h), so they run
        the same SIMD path, bit for bit. Why: softmax's row of x - max, its exp, the output
        row and the next input row then fill L1 with no fifth row beside them (6-7% faster
        at 10^4 and 10^5 elements, interleaved A/B)."""
        g = self.grp
        reads = {}
        for n in g.nodes:
            for r in node_refs(n):
                reads[r.index] = reads.get(r.index, 0) + 1
        outs = {ref.index for ref in g.outputs}
        for n in g.nodes:
            if n.out not in g.numpy_loops or n.out in self.direct:
                continue
            for r in node_refs(n):
                # (carried: a value this group computes; an output's row is the output's)
                if reads[r.index] == 1 and r in self.carried and r.index not in outs and \
                        self.dtype(r) == n.meta.dtype:
                    self.direct[n.out] = self.row_buf(r.index)
                    break

    # -- expressions -------------------------------------------------------------------------
    def dtype(self, ref):
        return self.graph.meta(ref).dtype

    def name(self, ref):
        i = self.index.get(ref.index)
        if i is None:
            return f"v{ref.index}"
        return f"x{i}" if self.kinds[i] in ("full", "other") else f"c{i}"

    def arg(self, a, want) -> str:
        """Argument text converted to dtype `want` (to bool: nonzero, as NumPy casts)."""
        if not isinstance(a, Ref):
            return c_const(a, want)
        text = self.name(a)
        if self.dtype(a) == want:
            return text
        if want == BOOL:
            return f"({text} != 0)"
        if self.dtype(a) == BOOL:       # a select: gcc does not vectorize char -> double
            return f"({text} ? ({CTYPE[want]})1 : ({CTYPE[want]})0)"
        return f"(({CTYPE[want]}){text})"

    def node_stmts(self, node, op) -> list:
        t = node.meta.dtype
        expr = self.expr(node, op, t) if t in FLOAT else self.int_expr(node, op, t)
        if isinstance(expr, list):
            return expr
        return [f"const {CTYPE[t]} v{node.out} = {expr};"]

    def expr(self, node, op, t):
        """The C expression of a node whose result is float (or a list of statements)."""
        ct, f = CTYPE[t], "f" if t == np.float32 else ""
        a = node.args
        if op == "div" and isinstance(a[1], Ref) and a[1].index in self.recip:
            x, b = self.arg(a[0], t), a[1].index
            if not self.grp.exact:
                return f"({x} * r{b})"
            if not self.dividing:
                return f"pj_rdiv_{f or 'd'}({x}, v{b}, r{b}, ri{b})"
        if op in _BINOP:
            x, y = a
            r = reciprocal(y, t) if op == "div" and not isinstance(y, Ref) else None
            if r is not None:
                op, y = "mul", r
            d = twice(x, y) if op == "mul" else None
            if d is not None:                               # (which gcc would have done)
                op, x, y = "add", d, d
            x, y = (c_hidden(v, t) if not isinstance(v, Ref) and hides(v, op)
                    else self.arg(v, t) for v in (x, y))
            return f"({x} {_BINOP[op]} {y})"
        if op == "neg":
            return c_neg(self.arg(a[0], t), t)
        if op in _MATH:
            return f"{_MATH[op]}{f}({self.arg(a[0], t)})"
        if op in _MATH2:
            return f"{_MATH2[op]}{f}({self.arg(a[0], t)}, {self.arg(a[1], t)})"
        if op in ("logaddexp", "logaddexp2"):
            return self.logaddexp(node, op, t)
        if op == "square":
            x = self.arg(a[0], t)
            return f"({x} * {x})"
        if op in ("pow", "power"):
            x, e = self.arg(a[0], t), float(a[1])
            if e == 2.0:
                return f"({x} * {x})"
            if e == 1.0:
                return x
            if e == 0.5:          # NumPy's power takes sqrt here too (sqrt(-0.) is -0.)
                return f"sqrt{f}({x})"
            if e == -1.0:
                return f"({c_hidden(1.0, t)} / {x})"
            return f"pow{f}({x}, {c_const(e, t)})"
        return self.any_expr(node, op, t)

    def logaddexp(self, node, op, t) -> list:
        """NumPy's npy_logaddexp(2): x + ln 2 (x + 1) where x == y, else the larger plus
        log1p(exp(-|x - y|)) (times log2(e) for base 2). The operands are zeroed where x == y
        before subtracting: inf - inf would raise invalid, which NumPy does not. A NaN operand
        makes `x - y > 0` raise invalid, in NumPy too: the group goes to NumPy, which warns."""
        ct, f, o = CTYPE[t], "f" if t == np.float32 else "", f"v{node.out}"
        x, y = self.arg(node.args[0], t), self.arg(node.args[1], t)
        two = op == "logaddexp2"
        same = c_const(1.0 if two else math.log(2.0), t)
        tail = (f"{c_hidden(1 / math.log(2.0), t)} * log1p{f}(exp2{f}(-fabs{f}({o}_d)))" if two
                else f"log1p{f}(exp{f}(-fabs{f}({o}_d)))")
        return [f"const {ct} {o}_x = {x}, {o}_y = {y};",
                f"const int {o}_s = {o}_x == {o}_y;",
                f"const {ct} {o}_d = ({o}_s ? ({ct})0 : {o}_x) - ({o}_s ? ({ct})0 : {o}_y);",
                f"const {ct} {o} = {o}_s ? {o}_x + {same} : "
                f"({o}_d > ({ct})0 ? {o}_x : {o}_y) + {tail};"]

    def reciprocal(self, node) -> list:
        """r<out>: 1 / a row value full nodes divide by; exact (O1): k<out>, whether
        pj_rdiv takes it (rdiv_or_divide; r then 1 / 1 where it does not, raising no flag),
        and ri<out>, infinity of r's sign (pj_rdiv's y where it hands over)."""
        if node.out not in self.recip:
            return []
        ct, o, t = CTYPE[node.meta.dtype], f"v{node.out}", node.meta.dtype
        if not self.grp.exact:
            return [f"const {ct} r{node.out} = ({ct})1 / {o};"]
        s = "f" if t == np.float32 else "d"
        return [f"const int k{node.out} = pj_rdiv_ok_{s}({o});",
                f"const {ct} r{node.out} = ({ct})1 / (k{node.out} ? {o} : ({ct})1);",
                f"const {ct} ri{node.out} = r{node.out} * {c_hidden(math.inf, t)};"]

    def rdiv_or_divide(self, t: int, render) -> list:
        """Loop t as render() gives it; in an exact group whose loop t divides by row values,
        twice: with pj_rdiv where every such value of the row is in its range (k<out>), else
        dividing, as NumPy does (a NaN, zero or infinite row value: the row as before). One
        loop choosing per element kept gcc from vectorizing it (a division may trap)."""
        g = self.grp
        ks = sorted({n.args[1].index for n in self.full[t] if g.ops.get(n.out) == "div"
                     and isinstance(n.args[1], Ref) and n.args[1].index in self.recip})
        if not g.exact or not ks:
            return render()
        fast = render()
        self.dividing = True
        try:
            slow = render()
        finally:
            self.dividing = False
        return [f"if ({' && '.join(f'k{b}' for b in ks)}) {{", *["    " + s for s in fast],
                "} else {", *["    " + s for s in slow], "}"]

    def numpy_call(self, node) -> list:
        """C text calling NumPy's loop of `node`'s ufunc on this row: from its operands' rows
        (an input's, or a buffer; a value per row or a constant repeats: stride 0) into the
        node's row buffer (and its output row)."""
        t, ct = node.meta.dtype, CTYPE[node.meta.dtype]
        slot = self.numpy_slot[node.out]
        call, ops = [], []
        for k, arg in enumerate(node.args):
            i = self.index.get(arg.index) if isinstance(arg, Ref) else None
            if not isinstance(arg, Ref):            # a constant, as a 0-d operand
                call.append(f"const {ct} e{node.out}_{k} = {c_const(arg, t)};")
                ops.append((f"&e{node.out}_{k}", "0"))
            elif i is None and arg.index in self.grp.rows:
                ops.append((f"&v{arg.index}", "0"))
            elif i is None:
                ops.append((self.row_buf(arg.index), f"sizeof({ct})"))
            elif self.kinds[i] in ("one", "scalar", "inner"):
                ops.append((f"&c{i}", "0"))
            else:
                ops.append((f"b{i}", f"sizeof({ct})"))
        so = f"sizeof({ct})"
        args = ", ".join(f"{p}, {st}" for p, st in ops)
        # NumPy's loops may clear the FP flags (after their own spurious ones): fold what was
        # raised before the call into fperr first
        call = ["PJ_FE_FOLD(fperr);", *call,
                f"if (pj_ufunc{len(ops)}({slot}, {args}, {self.row_buf(node.out)}, {so}, n) < 0)",
                "    fperr |= 1;", "PJ_FE_FOLD(fperr);"]
        for k, ref in enumerate(self.grp.outputs):
            if ref.index == node.out and self.out_kind(ref) == "full" and \
                    self.direct.get(node.out) != f"q{k}":
                call.append(f"memcpy(q{k}, {self.row_buf(node.out)}, n * sizeof({ct}));")
        return ["{", *["    " + c for c in call], "}"]

    @staticmethod
    def compare(x: str, op: str, y: str, t) -> str:
        """C text of `x op y` for values of dtype t (quiet on NaN for floats)."""
        if t in FLOAT and op in ("lt", "le", "gt", "ge"):
            key = "pj_key_f" if t == np.float32 else "pj_key_d"
            return f"PJ_QCMP({key}, {x}, {_BINOP[op]}, {y})"
        return f"{x} {_BINOP[op]} {y}"

    def int_expr(self, node, op, t):
        """The C expression of a node whose result is an integer or bool: arithmetic wraps
        around like NumPy's (computed unsigned, so C never overflows a signed type)."""
        ct, a = CTYPE[t], node.args
        u = wide(t)
        if op in ("add", "sub", "mul"):
            return f"(({ct})(({u}){self.arg(a[0], t)} {_BINOP[op]} ({u}){self.arg(a[1], t)}))"
        if op == "neg":
            return f"(({ct})(-({u}){self.arg(a[0], t)}))"
        if op == "abs":
            x = self.arg(a[0], t)
            return x if t.kind in "ub" else f"(({ct})({x} < 0 ? -({u}){x} : ({u}){x}))"
        if op in ("square", "pow", "power"):
            x = self.arg(a[0], t)
            k = 2 if op == "square" else a[1]
            return f"(({ct})({' * '.join([f'({u}){x}'] * k) or '1'}))"
        if op in ("and", "or", "xor"):
            sym = {"and": "&", "or": "|", "xor": "^"}[op]
            return f"(({ct})({self.arg(a[0], t)} {sym} {self.arg(a[1], t)}))"
        if op == "invert":
            x = self.arg(a[0], t)
            return f"(!{x})" if t == BOOL else f"(({ct})~{x})"
        return self.any_expr(node, op, t)

    def any_expr(self, node, op, t):
        """Ops of any result dtype: comparisons, casts, where, maximum/minimum/clip (which
        propagate NaN like NumPy's)."""
        ct, a, out = CTYPE[t], node.args, f"v{node.out}"
        if op in COMPARE:
            cd = compute_dtype(self.graph, node)
            return f"({self.compare(self.arg(a[0], cd), op, self.arg(a[1], cd), cd)})"
        if op in ("pos", "astype", "expand"):
            return self.arg(a[0], t)
        if op in ("maximum", "minimum"):
            # NumPy's: the first operand if it is NaN or strictly bigger (smaller), else the
            # second (so maximum(-0.0, 0.0) is 0.0 and maximum(0.0, -0.0) is -0.0)
            x, y = self.arg(a[0], t), self.arg(a[1], t)
            cmp = "gt" if op == "maximum" else "lt"
            wins = self.compare(f"{out}_a", cmp, f"{out}_b", t)
            return [f"const {ct} {out}_a = {x}, {out}_b = {y};",
                    f"const {ct} {out} = ({wins} || {out}_a != {out}_a) ? {out}_a : {out}_b;"]
        if op == "clip":            # minimum(maximum(x, lo), hi)
            # NumPy: with two bounds that are both broadcast (scalars, rows...), x wins a
            # tie (clip(-0.0, 0.0, 1.0) is -0.0); otherwise the bound does (maximum(-0.0,
            # 0.0) is 0.0); a NaN wins either way
            scalars = all(b is not None and not (isinstance(b, Ref) and self.graph.meta(
                b).shape == node.meta.shape) for b in a[1:3])
            stmts = [f"{ct} {out}_t = {self.arg(a[0], t)};"]
            for k, (bound, cmp) in enumerate(((a[1], "gt"), (a[2], "lt"))):
                if bound is None:
                    continue
                b = f"{out}_{k}"
                stmts.append(f"const {ct} {b} = {self.arg(bound, t)};")
                if scalars:
                    beats = self.compare(b, cmp, f"{out}_t", t)
                    stmts.append(f"{out}_t = ({beats} || {b} != {b}) ? {b} : {out}_t;")
                else:
                    wins = self.compare(f"{out}_t", cmp, b, t)
                    stmts.append(f"{out}_t = ({wins} || {out}_t != {out}_t) ? {out}_t : {b};")
            return stmts + [f"const {ct} {out} = {out}_t;"]
        if op == "where":
            c, x, y = self.arg(a[0], BOOL), self.arg(a[1], t), self.arg(a[2], t)
            if t == BOOL:
                return f"{c} ? {x} : {y}"
            if t in FLOAT:
                return f"pj_where_{'f' if t == np.float32 else 'd'}({c}, {x}, {y})"
            return f"PJ_WHERE_INT({ct}, {c}, {x}, {y})"
        raise AssertionError(f"no C rendering for {op} -> {t}")

    # -- stages ------------------------------------------------------------------------------
    def plan(self):
        """Which loop computes each full node and reduction, which row nodes precede each
        loop, and which full values later loops read again (kept in a row-sized scratch)."""
        g = self.grp
        self.loops = g.loops
        self.full = [[] for _ in range(self.loops)]
        self.reds = [[] for _ in range(self.loops)]
        self.row_nodes = [[] for _ in range(self.loops + 1)]
        self.numpy_calls = [[] for _ in range(self.loops)]    # before loop t, per row
        # row values full nodes divide by: multiplied by their reciprocal instead, at O2 (a
        # division per element was a fifth of layernorm), corrected to the quotient at O1
        # (pj_rdiv)
        self.recip = {
            n.args[1].index for n in g.nodes
            if g.ops.get(n.out) == "div" and n.out not in g.rows and isinstance(n.args[1], Ref)
            and n.out not in g.numpy_loops and n.args[1].index in g.rows
            and self.graph.meta(n.args[1]).dtype == n.meta.dtype in FLOAT}
        self.dividing = False       # rendering rdiv_or_divide's loop that divides
        self.carried = []
        loop = {}
        for n in g.nodes:
            if n.out in g.numpy_loops:
                # computed between loops into a row buffer (like a carried value) from its
                # operand's row: an input's, or a member's kept in a row buffer too
                self.numpy_calls[g.stage[n.out]].append(n)
                loop[n.out] = g.stage[n.out] - 1
                for r in [*node_refs(n), Ref(n.out)]:
                    if (r.index in loop or r.index == n.out) and r not in self.carried:
                        self.carried.append(r)
                continue
            if n.out in g.reduce:
                self.reds[g.loop_of(n)].append(n)
            elif n.out in g.rows:
                self.row_nodes[g.stage[n.out]].append(n)
                continue
            else:
                self.full[g.loop_of(n)].append(n)
                loop[n.out] = g.loop_of(n)
            for r in node_refs(n):
                if loop.get(r.index, g.loop_of(n)) < g.loop_of(n) and r not in self.carried:
                    self.carried.append(r)

    @property
    def arrays(self) -> list:
        """Positions of the inputs the kernel reads as ndarrays (a{i})."""
        return [i for i, kd in enumerate(self.kinds) if kd not in ("scalar", "index")]

    def row_reduce(self, node) -> bool:
        return node.out in self.grp.rows

    def cols_axes(self, node):
        """The reduced (outer) axes of a column reduction, else None."""
        mode = self.grp.reduce.get(node.out, (None, None))[1]
        return mode if isinstance(mode, tuple) else None

    def used_in(self, t: int):
        """(inputs loaded, carried values reloaded) by loop t."""
        refs = [r for n in self.full[t] + self.reds[t] for r in node_refs(n)]
        inputs = sorted({self.index[r.index] for r in refs if r.index in self.index
                         and self.kinds[self.index[r.index]] in ("full", "other")})
        carried = [r for r in self.carried if r in refs and r not in
                   [Ref(n.out) for n in self.full[t]]]
        return inputs, carried

    def body(self, t: int, ptr: str = "p") -> list:
        """Statements computing loop t's full nodes at index j (inputs read through
        <ptr><i>)."""
        lines = []
        inputs, carried = self.used_in(t)
        for i in inputs:
            ct = CTYPE[self.dtype(self.grp.inputs[i])]
            lines.append(f"const {ct} x{i} = {ptr}{i}[j];")
        for r in carried:
            lines.append(f"const {CTYPE[self.dtype(r)]} v{r.index} = {self.row_buf(r.index)}[j];")
        for node in self.full[t]:
            lines += self.node_stmts(node, self.grp.ops[node.out])
            if Ref(node.out) in self.carried:
                lines.append(f"w{node.out}[j] = v{node.out};")
            if node.out == self.write:
                lines.append(f"dw[j] = v{node.out};")
        for k, ref in enumerate(self.grp.outputs):
            if self.out_kind(ref) == "full" and any(n.out == ref.index for n in self.full[t]):
                lines.append(f"q{k}[j] = v{ref.index};")
        for red in self.reds[t]:
            if self.cols_axes(red) is not None:
                lines.append(self.cols_update(red))
        return lines

    # -- column reductions: each row accumulates elementwise into ac<out>[co<out> + j] -------
    def cols_acc(self, red):
        """(C type, identity) of a column reduction's accumulator. Exact groups sum floats
        in the result's dtype, from +0.0 and row after row, as NumPy does; O2 sums in
        double."""
        op, t = self.grp.reduce[red.out][0], red.meta.dtype
        if op in ("any", "all"):
            return "npy_bool", "1" if op == "all" else "0"
        if t in FLOAT:
            if op in ("max", "min"):
                return CTYPE[t], "-INFINITY" if op == "max" else "INFINITY"
            acc = CTYPE[t] if self.grp.exact else "double"
            return acc, "1.0" if op == "prod" else "0.0"
        if op in ("max", "min"):
            lo, hi = (0, 1) if t == BOOL else (np.iinfo(t).min, np.iinfo(t).max)
            return CTYPE[t], c_const(lo if op == "max" else hi, t)
        return "uint64_t", "1" if op == "prod" else "0"

    def cols_update(self, red) -> str:
        op, o, v = self.grp.reduce[red.out][0], red.out, self.name(red.args[0])
        acc, a = self.cols_acc(red)[0], f"ac{o}[co{o} + j]"
        if op in ("any", "all"):
            return f"{a} {'|' if op == 'any' else '&'}= ({v} != 0);"
        if op in ("max", "min"):
            # NumPy's maximum(acc, v): acc if NaN or strictly bigger, else v (ties: v)
            keep = self.compare(a, "gt" if op == "max" else "lt", v, red.meta.dtype)
            if red.meta.dtype in FLOAT:
                keep = f"{a} != {a} || {keep}"
            return f"{a} = ({keep}) ? {a} : {v};"
        x = f"(uint64_t)(int64_t){v}" if acc == "uint64_t" else f"({acc}){v}"
        return f"{a} = {a} {'*' if op == 'prod' else '+'} {x};"

    def cols_state(self, red) -> list:
        o, axes = red.out, self.cols_axes(red)
        acc, init = self.cols_acc(red)
        kept = " * ".join(f"shape[{d}]" for d in range(self.nd) if d not in axes)
        return [f"M{o} = {kept or '1'};",
                *heap_array(f"ac{o}", acc, f"(M{o} > 0 ? M{o} : 1)"),
                f"for (npy_intp k = 0; k < M{o}; k++)",
                f"    ac{o}[k] = {init};"]

    def cols_offset(self, red) -> list:
        """This row's offset into the accumulator: the kept outer indices, times n."""
        o, axes = red.out, self.cols_axes(red)
        terms = [d for d in range(self.ndi - 1) if d not in axes]
        lines = [f"npy_intp co{o} = 0;"]
        lines += [f"co{o} = co{o} * shape[{d}] + idx[{d}];" for d in terms]
        return lines + [f"co{o} *= n;"]

    def cols_result(self, red) -> list:
        o, op = red.out, self.grp.reduce[red.out][0]
        ct = CTYPE[red.meta.dtype]
        count = f"(M{o} ? N / M{o} : 0)"
        value = f"ac{o}[k]"
        if op == "mean":        # NumPy: true_divide by an np.intp count, in float64
            value = f"((double){value} / (double){count})"
        (j,) = [k for k, ref in enumerate(self.grp.outputs) if ref.index == o] or [None]
        if j is None:
            return []
        return [f"for (npy_intp k = 0; k < M{o}; k++)",
                f"    o{j}[k] = ({ct}){value};"]

    def loop(self, t: int, prefetch=None) -> list:
        """Loop t over one contiguous row of n elements (pointer setup included).
        prefetch: (sub-block length, condition, prefetch lines) of the loop prefetching the
        next row (prefetch_plan); otherwise the loop streams ahead (stream_ahead)."""
        lines = []
        if prefetch is None:
            prefetch = self.stream_ahead(t)
        for i in self.used_in(t)[0]:
            ct = CTYPE[self.dtype(self.grp.inputs[i])]
            lines.append(f"const {ct} *p{i} = (const {ct} *)b{i};")
        body = self.body(t)
        reds = [r for r in self.reds[t] if self.cols_axes(r) is None]
        if not reds:
            return lines + self.simd_loop("", body, "0", "n", prefetch)
        rs = [self.reduction(red) for red in reds]
        update = [u for r in rs for u in r.update()]
        cols = any(self.cols_axes(r) is not None for r in self.reds[t])
        work = self.full[t] or update or cols       # else only sums of values already there
        if any(isinstance(r, reductions.ExactRowSum) for r in rs):
            return lines + self.leaf_blocks(rs, body if work else None, update, prefetch)
        blocks = self.blocks(rs, body + update, "0", "n", prefetch) if work else []
        return lines + ["{", *["    " + s for s in blocks], "}"]

    def leaf_blocks(self, reds: list, body, update: list, prefetch=None) -> list:
        """The loop over the row in NumPy's pairwise recursion, for its exact sums: in the
        recursion's chunks (a row's, rb; the flat row, a whole sum's chunk, as one), each
        leaf by leaf (pj_plan): a block of the loop per leaf (none when `body` is None: the
        sums read values already there), after which each exact sum adds the leaf's values
        (leaf_end); the other reductions of the loop (order-free: max/min, integers,
        argmax...) reduce per leaf as per block. `update`: the reductions' statements
        after `body`.

        A full leaf of a loop whose only reductions are exact sums of values it computes
        adds each group of 8 values into NumPy's eight accumulators (the lanes of a vector,
        lanes_*) right away, instead of storing the leaf's values and summing them after: a
        C model of np.sum(x * x) on 1e5 float64 took 15-25% less time (the sum of a leaf is
        a chain of 16 dependent adds per lane; computing the values overlaps it).

        Each leaf's sum goes to ls<out>[lf], and the recursion's adds above the leaves run
        after the chunk's last leaf (leaf_pops), not after each leaf: each add waited on the
        leaf's sum through the stack of partial sums, in the way of the next leaf's loads
        (np.sum(x * x) at O1, in cache: 1e5 float64 14.2 -> 13.7 us, 1e6 120 -> 114 us)."""
        exact = [r for r in reds if isinstance(r, reductions.ExactRowSum)]
        others = [r for r in reds if r not in exact]
        whole = {isinstance(r, reductions.ExactWholeSum) for r in exact}
        assert len(whole) == 1, "rows and whole reductions never share a group (fuse)"
        clauses = " ".join(c for r in others for c in r.clauses())
        loop = [] if body is None else [
            *[s for r in others for s in r.block_init()],
            *self.simd_loop(clauses, body + update, "j0", "j1", prefetch),
            *[s for r in others for s in r.merge()]]
        sums = [*loop, *[s for r in exact for s in r.leaf_end()]]
        if body is not None and not others and all(r.row_buffer for r in exact):
            sums = ["if (j1 - j0 >= 8) {",
                    *["    " + s for s in self.lanes(exact, body, prefetch)],
                    "} else {", *["    " + s for s in sums], "}"]
        leaf = ["const npy_intp j0 = cb0 + lp->at[lf], j1 = cb0 + lp->at[lf + 1];", *sums]
        chunk = ["const pj_leafplan *lp = pj_plan(&plans, cb1 - cb0);",
                 *[s for r in exact for s in r.chunk_init()],
                 "for (npy_intp lf = 0; lf < lp->count; lf++) {",
                 *["    " + s for s in leaf],
                 "}",
                 "for (npy_intp lf = 0; lf < lp->count; lf++) {",
                 *["    " + s for r in exact for s in r.leaf_pops()],
                 "}",
                 *[s for r in exact for s in r.chunk_end()]]
        if whole.pop():
            return ["{", "    const npy_intp cb0 = 0, cb1 = n;", *["    " + s for s in chunk],
                    "}"]
        loop = ["for (npy_intp ci = 0; ci < nrc; ci++) {",
                "    const npy_intp cb0 = rb[ci], cb1 = rb[ci + 1];",
                *["    " + s for s in chunk], "}"]
        length = self.grp.shape[-1]     # the row's, when static
        if length is not None and length >= 8:
            return loop
        short = self.short_row(exact, sums)
        if length is not None:
            return ["{", *["    " + s for s in short], "}"]
        return ["if (n < 8) {", *["    " + s for s in short], "} else {",
                *["    " + s for s in loop], "}"]

    @staticmethod
    def short_row(exact: list, sums: list) -> list:
        """A row of fewer than 8 values is one chunk of one leaf, which NumPy adds in order
        from +0.0 (pj_leaf_*): the leaf's block alone, without the chunk and leaf loops, their
        plan and the recursion's adds (np.sum(x * x, axis=-1) + 1 over 666,666 rows of 3:
        50 -> 3.3 ms; rows of 5: 27 -> 2.7 ms). Rows of 8 to 128 values are one leaf too, but
        the general loop adds them into lanes as it computes them."""
        return ["const npy_intp j0 = 0, j1 = n, lf = 0;",
                *[s for r in exact for s in r.chunk_init()],
                *sums,
                *[s for r in exact for s in r.short_end()]]

    @staticmethod
    def lanes(exact: list, body: list, prefetch=None) -> list:
        """A leaf [j0, j1) of 8 values or more computed by `body` in groups of 8, each group
        added to its exact sums' lanes as NumPy's leaf sum adds it (lanes_*), the last
        j1 - j0 mod 8 values one by one after combining them; the leaf's prefetch lines
        first."""
        pf = [] if prefetch is None else [
            "{", "    const npy_intp jj = j0, je = j1;", f"    if ({prefetch[1]}) {{",
            *["        " + s for s in prefetch[2]], "    }", "}"]

        def group(into) -> list:
            return [*[s for r in exact for s in r.lanes_values()],
                    "for (npy_intp j = i; j < i + 8; j++) {",
                    *["    " + s for s in body + [u for r in exact for u in r.lanes_value()]],
                    "}",
                    *[s for r in exact for s in into(r)]]
        return [*pf,
                "const npy_intp jr = j1 - (j1 - j0) % 8;",
                *[s for r in exact for s in r.lanes_decl()],
                "{", "    const npy_intp i = j0;",
                *["    " + s for s in group(lambda r: r.lanes_first())],
                "}",
                "for (npy_intp i = j0 + 8; i < jr; i += 8) {",
                *["    " + s for s in group(lambda r: r.lanes_add())],
                "}",
                *[s for r in exact for s in r.lanes_end()],
                "for (npy_intp j = jr; j < j1; j++) {",
                *["    " + s for s in body + [u for r in exact for u in r.lanes_rest()]],
                "}"]

    @classmethod
    def blocks(cls, reds: list, body: list, lo: str, hi: str, prefetch=None) -> list:
        """A loop over [lo, hi) in the longest blocks reductions `reds` allow: each block
        reduces into their block variables in an omp simd loop over `body` (their updates
        included), then merges them."""
        block = min(r.leaf for r in reds)
        clauses = " ".join(c for r in reds for c in r.clauses())
        return [f"for (npy_intp j0 = {lo}; j0 < {hi}; j0 += {block}) {{",
                f"    const npy_intp j1 = {hi} - j0 < {block} ? {hi} : j0 + {block};",
                *["    " + s for r in reds for s in r.block_init()],
                *["    " + s for s in cls.simd_loop(clauses, body, "j0", "j1", prefetch)],
                *["    " + s for r in reds for s in r.merge()],
                "}"]

    @staticmethod
    def simd_loop(clauses: str, body: list, lo: str, hi: str, prefetch=None) -> list:
        """An omp simd loop of `body` over [lo, hi); with prefetch = (sub, cond, lines), in
        sub-blocks of `sub` elements each issuing its share of the prefetch `lines` (C lines
        over [jj, je)) first when `cond`. A sub-block's length depends on n only, so an O2
        sum adds in the same order in every row of a length whether or not it prefetches."""
        loop = [f"#pragma omp simd {clauses}".rstrip()]
        if prefetch is None:
            return loop + [f"for (npy_intp j = {lo}; j < {hi}; j++) {{",
                           *["    " + s for s in body], "}"]
        sub, cond, lines = prefetch
        return [f"for (npy_intp jj = {lo}; jj < {hi}; jj += {sub}) {{",
                f"    const npy_intp je = {hi} - jj < {sub} ? {hi} : jj + {sub};",
                f"    if ({cond}) {{", *["        " + s for s in lines], "    }",
                *["    " + s for s in loop],
                "    for (npy_intp j = jj; j < je; j++) {",
                *["        " + s for s in body],
                "    }",
                "}"]

    def odometer(self, row: str, idx: str, rest: str) -> list:
        """C lines: idx[d], the outer-axis coordinates of row `row`."""
        ndi = self.ndi
        return [f"npy_intp {idx}[{ndi}];",
                f"npy_intp {rest} = {row};",
                f"for (int d = {ndi} - 2; d >= 0; d--) {{",
                f"    {idx}[d] = {rest} % shape[d];",
                f"    {rest} /= shape[d];",
                "}"]

    def odometer_step(self, row: str) -> list:
        """C lines: idx[d] for row `row`, stepped from the thread's last row (idx_at) when it
        is the next one, as under schedule(static) it nearly always is: the division per
        outer axis of `odometer` cost more than the row's work in rows of a few elements
        (nbody_step's sums over 3 coordinates: 4M rows, a third of a kernel's samples)."""
        ndi = self.ndi
        return [f"if ({row} == idx_at + 1) {{",
                f"    for (int d = {ndi} - 2; d >= 0; d--) {{",
                "        if (++idx[d] < shape[d])",
                "            break;",
                "        idx[d] = 0;",
                "    }",
                f"}} else if ({row} != idx_at) {{",
                f"    npy_intp rest = {row};",
                f"    for (int d = {ndi} - 2; d >= 0; d--) {{",
                "        idx[d] = rest % shape[d];",
                "        rest /= shape[d];",
                "    }",
                "}",
                f"idx_at = {row};"]

    def row_pointer(self, dst: str, i: int, idx: str) -> list:
        """C lines: dst = where input i's row at coordinates idx starts."""
        return [f"{dst} = PyArray_BYTES(a{i});",
                f"for (int d = 0; d < {self.ndi} - 1; d++) {dst} += {idx}[d] * st{i}[d];"]

    def lookahead(self, whole, flat_ok: bool) -> bool:
        """Whether the last loop of row r also runs loop 0 of row r + 1 (one loop reading
        the next row while it writes this one: 10-17% off float32 softmax and layernorm here,
        whose loops otherwise stream memory one at a time). Loop 0 must only reduce what it
        reads (row max/min and sums kept in variables: nothing written, no buffer, no value
        per row read); the last loop may reduce so too (logsumexp's sum of exps).

        A row whose loop 0 ran ahead may differ in the last bits from one whose loop 0 ran
        alone (an O2 float sum adds in the order of its loop's vector lanes). So which rows run
        it alone is fixed: rows r % PJ_AHEAD_ROWS == 0, and threads take PJ_AHEAD_ROWS rows
        at a time, so results do not depend on the thread count."""
        last = self.loops - 1
        if whole or flat_ok or last < 1 or not self.reds[0] or not self.full[last] or \
                self.numpy_calls[0] or self.row_nodes[0]:
            return False
        if any(not self.row_reduce(red) or type(self.reduction(red)) not in (
                reductions.MaxMin, reductions.FloatSum, reductions.Accumulate)
               for red in self.reds[0] + self.reds[last]):
            return False
        outs = {ref.index for ref in self.grp.outputs}
        if any(Ref(n.out) in self.carried or n.out in outs for n in self.full[0]):
            return False
        refs = [r for n in self.full[0] + self.reds[0] for r in node_refs(n)]
        return all(self.kinds[self.index[r.index]] != "inner" for r in refs
                   if r.index in self.index)

    def first_reductions(self) -> list:
        """Loop 0 of a lookahead kernel: its row values were computed by the last loop of
        the row before (nv<out>, when this thread ran it: ahead_r) or are computed now."""
        reds = self.reds[0]
        L = [f"{CTYPE[red.meta.dtype]} v{red.out};" for red in reds]
        own = [s for red in reds for s in self.red_state(red)]
        own += ["{", *["    " + s for s in self.loop(0)], "}"]
        own += [f"v{red.out} = {self.reduction(red).result('n')};" for red in reds]
        L += ["if (ahead_r == r) {", *[f"    v{red.out} = nv{red.out};" for red in reds],
              "} else {", *["    " + s for s in own], "}"]
        for red in reds:
            L += self.reduction(red).check() + self.store_row(red.out, "r")
            L += self.reciprocal(red)
        return L

    def next_row(self) -> list:
        """bn<i>: where loop 0's inputs have row r + 1 (ahead: whether that row is read;
        otherwise bn<i> is this row, read again harmlessly)."""
        ins = self.used_in(0)[0]
        inner = self.odometer("r + 1", "idxn", "restn") + [
            s for i in ins for s in self.row_pointer(f"bn{i}", i, "idxn")]
        return [*[f"const char *bn{i} = b{i};" for i in ins],
                "const int ahead = contig && r + 1 < nrows && (r + 1) % PJ_AHEAD_ROWS != 0;",
                "if (ahead) {", *["    " + s for s in inner], "}"]

    def ahead_loop(self) -> list:
        """The last loop of row r with loop 0 of row r + 1 in its iterations, in blocks both
        loops' reductions allow; the next row's values go to nv<out>. (The last loop's own
        reductions have their state declared before and their results taken after.)"""
        last = self.loops - 1
        reds, mine = ([self.reduction(red) for red in self.reds[t]] for t in (0, last))
        L = []
        for ptr, row, t in (("p", "b", last), ("pn", "bn", 0)):
            for i in self.used_in(t)[0]:
                ct = CTYPE[self.dtype(self.grp.inputs[i])]
                L.append(f"const {ct} *{ptr}{i} = (const {ct} *){row}{i};")
        L += [s for r in reds for s in r.state()]
        L += self.blocks(reds + mine, [
            "{", *["    " + s for s in self.body(last) + [u for r in mine for u in r.update()]],
            "}",
            "{", *["    " + s for s in self.body(0, "pn") + [u for r in reds for u in r.update()]],
            "}"], "0", "n")
        L += [f"nv{red.out} = {r.result('n')};" for red, r in zip(self.reds[0], reds)]
        return L + ["ahead_r = ahead ? r + 1 : -1;"]

    def simd_body(self, t: int) -> bool:
        """Whether loop t has an omp simd loop (not only chunk sums of a buffer)."""
        return bool(self.full[t]) or any(
            self.cols_axes(red) is not None or self.reduction(red).update()
            for red in self.reds[t])

    def prefetch_plan(self):
        """(loop, inputs, outputs): the loop before the last that, in a row short enough,
        prefetches the next row of the inputs of the group's shape, and, when it calls a
        vector math function, this row's outputs the later loops write; or None.

        Why: loop 0 (or the lookahead) and the last loop stream memory while the loops
        between them compute on rows already in L1, and a row of 4 KiB is one page, across
        which the hardware prefetchers do not run: each row began with misses. Measured here
        (float32 4096x1024, NumPy's call before each): O2 softmax 3.05 -> 2.52 ms (both
        streams; the next row alone 2.96, the output alone 2.8), O2 layernorm 1.96 -> 1.71
        (its next row), O1 softmax 4.1 -> 3.8 ms (its next row). Prefetching the output too
        where the loop is light made it slower (O2 layernorm 1.71 -> 1.96 ms, O1 softmax
        3.8 -> 4.3): the prefetches then come in a burst and wait for fill buffers."""
        last = self.loops - 1
        t = next((t for t in range(last - 1, 0, -1) if self.simd_body(t)), None)
        if t is None:
            return None
        ins = [i for i in self.arrays if self.kinds[i] == "full"]
        later = {n.out for u in range(t + 1, self.loops) for n in self.full[u]}
        heavy = any(self.grp.ops[n.out] in INEXACT for n in self.full[t])
        outs = [k for k, ref in enumerate(self.grp.outputs)
                if heavy and self.out_kind(ref) == "full" and ref.index in later]
        return (t, ins, outs) if ins or outs else None

    def prefetch(self, ins: list, outs: list):
        """(setup, (sub, condition, lines)) of the prefetching loop: pf says whether this row
        prefetches (not the last row, rows contiguous, all streams' rows together at most
        PJ_PF_ROW bytes: beyond, they would not stay in L1/L2 until read); pf<i> is input
        i's next row; each sub-block of PF_BLOCK bytes of the widest stream prefetches its
        part of every stream, so the prefetches spread over the loop (all at once, they
        waited for fill buffers and gained nothing)."""
        streams = [(f"pf{i}", self.dtype(self.grp.inputs[i]).itemsize, 0) for i in ins] + [
            (f"(const char *)q{k}", self.dtype(self.grp.outputs[k]).itemsize, 1) for k in outs]
        sub, row = stream_sizes(streams)
        setup = [f"const npy_intp pfs = n * ({row}) <= PJ_PF_ROW ? {sub} : PJ_PF_ALL;",
                 f"const int pf = !flat && contig && pfs == {sub} && r + 1 < nrows;",
                 *[f"const char *pf{i} = b{i};" for i in ins]]
        if ins:
            nxt = self.odometer("r + 1", "idxp", "restp") + [
                s for i in ins for s in self.row_pointer(f"pf{i}", i, "idxp")]
            setup += ["if (pf) {", *["    " + s for s in nxt], "}"]
        return setup, ("pfs", "pf", prefetch_lines(streams, ""))

    def stream_ahead(self, t: int):
        """(sub, condition, lines) for loop t to prefetch PJ_PF_AHEAD bytes ahead of where it
        reads the inputs of the group's shape that no loop before it read in this chunk, when
        the kernel runs over flat chunks of dense inputs big enough to come from memory
        (PJ_PF_STREAM bytes), or None. The hardware prefetchers stop at each 4 KiB page;
        measured here, a*b + c*d - exp(e)*0.5 at O2 on 10M float64: 35.1 -> 31.2 ms, 4M:
        14.4 -> 13.4 ms, np.sum(a*a) at O1 7.2 -> 6.5 ms; on arrays that stay in the caches
        (2M and less) the prefetches gained nothing or cost up to 10%, and on the stencil's
        rows (four views of one array) 5%."""
        if not self.simd_body(t):
            return None
        before = {i for u in range(t) for i in self.used_in(u)[0]}
        ins = [i for i in self.used_in(t)[0] if self.kinds[i] == "full" and i not in before]
        if not ins:
            return None
        streams = [(f"(const char *)p{i}", self.dtype(self.grp.inputs[i]).itemsize, 0)
                   for i in ins]
        sub, row = stream_sizes(streams)
        lines = prefetch_lines(streams, " + PJ_PF_AHEAD")
        return sub, f"flat && N * ({row}) >= PJ_PF_STREAM", lines

    def reduction(self, red) -> reductions.Reduction:
        src = red.args[0]
        return reductions.reduction(red, self.grp.reduce[red.out][0], self.name(src), CTYPE,
                                    c_const, self.dtype(src), self.grp.exact,
                                    self.row_values(src), whole=not self.row_reduce(red)
                                    and self.grp.reduce[red.out][1] == "all")

    @property
    def tree(self) -> list:
        """The group's exact whole-array float sums (flat chunks follow NumPy's recursion)."""
        return [r for r in self.grp.reductions
                if isinstance(self.reduction(r), reductions.ExactWholeSum)]

    @property
    def exact_rows(self) -> list:
        """The group's exact float row sums (their row loops run in the recursion's chunks)."""
        return [r for r in self.grp.reductions if self.row_reduce(r) and type(
            self.reduction(r)) is reductions.ExactRowSum]

    def row_values(self, ref):
        """A contiguous row of ref's values that exists anyway (the input's row, gathered if
        strided; a row buffer kept for later loops), or None."""
        i = self.index.get(ref.index)
        if i is not None and self.kinds[i] in ("full", "other"):
            return f"(const {CTYPE[self.dtype(ref)]} *)b{i}"
        return self.row_buf(ref.index) if ref in self.carried else None

    def row_buf(self, index: int) -> str:
        """The contiguous row a carried value or a NumPy loop's result is kept in."""
        return self.direct.get(index, f"w{index}")

    def in_loop(self, red) -> bool:
        """Whether reduction red has work in its stage loop (an exact sum of values that
        are already there only sums their leaves)."""
        r = self.reduction(red)
        return self.cols_axes(red) is not None or bool(r.update()) or \
            isinstance(r, reductions.ExactRowSum)

    def red_state(self, red) -> list:
        return self.reduction(red).state()

    def red_result(self, red, count: str) -> list:
        """The reduction's value v<out> once its loop ran over `count` elements."""
        r = self.reduction(red)
        return [f"{CTYPE[red.meta.dtype]} v{red.out} = {r.result(count)};", *r.check(),
                *self.store_row(red.out, "0" if count == "N" else "r")]

    def store_row(self, out: int, row: str) -> list:
        return [f"o{k}[{row}] = v{out};" for k, ref in enumerate(self.grp.outputs)
                if ref.index == out]

    def out_kind(self, ref) -> str:
        if ref.index in self.grp.rows:
            return "row"
        if ref.index in self.grp.reduce:
            return "all" if self.grp.reduce[ref.index][1] == "all" else "cols"
        return "full"

    def out_dims(self, ref) -> tuple:
        """(ndim, C expressions of the dims) of an output, from the run-time `shape`."""
        kind, ndim = self.out_kind(ref), self.graph.meta(ref).ndim
        if kind == "full":
            return self.nd, None
        if kind == "all":
            return ndim, ["1"] * ndim
        if kind == "cols":
            axes = self.grp.reduce[ref.index][1]
            return ndim, [("1" if d in axes else f"shape[{d}]") for d in range(self.nd)
                          if d not in axes or ndim == self.nd]
        dims = [f"shape[{d}]" for d in range(self.nd - 1)]
        return ndim, dims + ["1"] * (ndim - len(dims))

    def function(self) -> str:
        """The kernel's body, pj_body(gk, args, nargs) (gk: the group whose NumPy fallback
        it calls); module_source names it and emits it once for groups rendered alike."""
        g = self.grp
        L = ["static PyObject *",
             "pj_body(int gk, PyObject *const *args, Py_ssize_t nargs)",
             "{",
             f"    PyObject *out[{len(g.outputs)}] = {{NULL}}, *result = NULL;",
             "    int fperr = 0, oom = 0;",
             "    PJ_K_INIT;"]
        cols = [r for r in g.reductions if self.cols_axes(r) is not None]
        for red in cols:
            L.append(f"    {self.cols_acc(red)[0]} *ac{red.out} = NULL;")
            L.append(f"    npy_intp M{red.out} = 0;")
        tree = self.tree
        for red in tree:
            L.append(f"    {CTYPE[red.meta.dtype]} *tsum{red.out} = NULL;")
        if tree:
            L.append("    npy_intp *tb = NULL, ntb = 0;")
        if self.exact_rows:
            L.append("    npy_intp *rb = NULL, nrc = 0;")
        # (several loops without row values: the stages NumPy's loops need)
        flat_ok = not g.rows and not cols and all(
            kd in ("scalar", "one", "full") for kd in self.kinds)
        L += self.prologue()
        if tree:
            L += self.tree_chunks(tree, flat_ok)
        if self.exact_rows:
            L += ["    " + s for s in heap_array("rb", "npy_intp", "PJ_TREE_BOUNDS(n, PJ_SUM_CHUNK)")]
            L.append("    nrc = pj_sup->tree_chunks(n, PJ_SUM_CHUNK, rb);")
        L += self.allocate_outputs()
        whole = [r for r in g.reductions if not self.row_reduce(r)]
        for red in whole:
            state = self.red_state(red) if red not in cols else self.cols_state(red)
            L += ["    " + s for s in state]
        # NumPy reports divide-by-zero, overflow and invalid results (a warning, or an error
        # under np.errstate): when the kernel raised one of those flags (in any thread), the
        # group runs again in NumPy, which reports it exactly as plain NumPy would.
        L.append("    PyThreadState *ts = N > 32768 ? PyEval_SaveThread() : NULL;")
        # Threads only where each one writes its own rows or chunks (no whole reduction, whose
        # result would then depend on the thread count).
        # (and not when writing into the destination: rows are committed in order)
        L.append(f"    const int par = {0 if whole or self.write else 1} && PJ_THREADS > 1 "
                 "&& N >= PJ_PAR_MIN;")
        if self.write is not None:
            L += ["    npy_intp bail = -1, rstart = 0;",
                  "    const int femask = PJ_FE_ERR | (under ? FE_UNDERFLOW : 0);"]
        L += ["    {", *["        " + s for s in self.rows_path(whole, flat_ok)], "    }"]
        if whole:
            # their results' flags too (the mean of no values: 0/0, which NumPy reports)
            L.append("    feclearexcept(PJ_FE_ERR | FE_UNDERFLOW);")
        for red in whole:
            result = self.red_result(red, "N") if red not in cols else self.cols_result(red)
            L += ["    " + s for s in result]
        if whole:
            L.append("    PJ_FE_FOLD(fperr);")
        L += self.epilogue(cols)
        return "\n".join(L) + "\n"

    def tree_chunks(self, tree, flat_ok: bool) -> list:
        """The flat chunks of an exact whole-array sum: NumPy's pairwise recursion's nodes
        (kernel_support.h). Only for dense C-order operands in a group that runs flat: NumPy
        sums other layouts in other orders, and a group with column reductions or operands
        broadcast along rows runs row by row; those calls are handed back."""
        L = [f"if (!({self.dense() if flat_ok else '0'}))",
             "    return pj_fallback(gk, args, nargs);",
             *heap_array("tb", "npy_intp", "PJ_TREE_BOUNDS(N, PJ_CHUNK)"),
             "ntb = pj_sup->tree_chunks(N, PJ_CHUNK, tb);"]
        for red in tree:
            L += heap_array(f"tsum{red.out}", CTYPE[red.meta.dtype], "ntb")
        return ["    " + s for s in L]

    def dense(self) -> str:
        """C test: every full-shape input is dense in C order (the flat path's condition)."""
        return " && ".join([f"pj_dense(st{i}, shape, {self.ndi}, "
                            f"{self.dtype(self.grp.inputs[i]).itemsize})"
                            for i in self.arrays if self.kinds[i] == "full"] or ["1"])

    def prologue(self) -> list:
        """Read the arguments (a kernel that cannot take them calls the NumPy fallback),
        broadcast their shapes and strides."""
        g, ndi = self.grp, self.ndi
        L = [f"    if (nargs != {self.nargs})",
             "        return pj_fallback(gk, args, nargs);",
             f"    npy_intp shape[{ndi}];",
             f"    for (int d = 0; d < {ndi}; d++)",
             "        shape[d] = 1;"]
        for i, ref in enumerate(g.inputs):
            m, pos = self.graph.meta(ref), self.argpos[i]
            if self.kinds[i] == "index":
                continue
            if self.kinds[i] == "scalar":
                ty, parse = ("long long", "pj_int") if m.dtype.kind in "iu" else (
                    "double", "pj_double")
                L += [f"    {ty} d{i};",
                      f"    if ({parse}(args[{pos}], &d{i}) < 0)",
                      "        return pj_fallback(gk, args, nargs);"]
            else:
                L += [f"    PyArrayObject *a{i} = pj_array(args[{pos}], {NPYTYPE[m.dtype]}, {ndi});",
                      f"    if (a{i} == NULL || pj_bcast(a{i}, shape, {ndi}) < 0)",
                      "        return pj_fallback(gk, args, nargs);"]
        # Dynamic dims (None): a value's shape is its static shape with each None replaced
        # by the iteration's length there, as the group's values assume, when no input
        # broadcasts along a dynamic dim of its own; inputs that do go to NumPy (with
        # u[?] + v[?] called as u[1] + v[3], a value of u alone would have another shape).
        dyn = [f"PyArray_DIM(a{i}, {k}) != shape[{ndi - len(m.shape) + k}]"
               for i in self.arrays for m in [self.graph.meta(g.inputs[i])]
               for k, dim in enumerate(m.shape) if dim is None]
        if dyn:
            L += [f"    if ({' || '.join(dyn)})", "        return pj_fallback(gk, args, nargs);"]
        for i in self.arrays:
            L.append(f"    npy_intp st{i}[{ndi}];")
            L.append(f"    pj_strides(a{i}, shape, {ndi}, st{i});")
        L += self.direct_checks()
        # NumPy's SIMD loops (SVML arctan2, ...) run only over positive strides; over an
        # operand walked backwards NumPy calls libm, whose last bit may differ. The kernel
        # hands NumPy's loop rows in memory order, so such operands go to NumPy.
        backwards = [f"st{i}[d] < 0" for i in self.numpy_loop_inputs()]
        if backwards:
            L += [f"    for (int d = 0; d < {ndi}; d++)",
                  f"        if ({' || '.join(backwards)})",
                  "            return pj_fallback(gk, args, nargs);"]
        if self.proto is not None:
            L += self.keep_order()
        elif self.allocates_layout():
            L += self.agree_with(None)
        L += self.collapse()
        if self.grp.exact and any(
                r.meta.dtype in FLOAT and (self.cols_axes(r) is not None
                                           or g.reduce[r.out][0] in ("sum", "mean"))
                for r in g.reductions) or self.layout_bound():
            # NumPy sums over outer axes row after row, and along rows (or all values)
            # pairwise, only for operands in C order; and lays out outputs in its operands'
            # memory order, where the kernel writes C order
            for i in self.arrays:
                if self.kinds[i] == "full":
                    L += ["    {",
                          f"        int perm[{ndi}];",
                          f"        pj_perm(a{i}, perm, {ndi});",
                          f"        for (int d = 0; d < {ndi}; d++)",
                          "            if (perm[d] != d)",
                          "                return pj_fallback(gk, args, nargs);",
                          "    }"]
            L += self.agree_with(None)
        L += ["    npy_intp N = 1, rows = 1;",
              f"    for (int d = 0; d < {ndi}; d++)",
              "        N *= shape[d];",
              f"    for (int d = 0; d < {ndi} - 1; d++)",
              "        rows *= shape[d];",
              f"    const npy_intp n = shape[{ndi} - 1];"]
        # NumPy warns of a mean of no values even where the result is empty (rows of none)
        empty = set()
        for red in g.reductions:
            op, mode = g.reduce[red.out][:2]
            if op == "mean":
                axes = range(ndi) if mode == "all" else [ndi - 1] if mode == "last" else mode
                empty.add(" * ".join(f"shape[{d}]" for d in axes))
        if empty:
            L += [f"    if ({' || '.join(f'({e}) == 0' for e in sorted(empty))})",
                  "        return pj_fallback(gk, args, nargs);"]
        # NumPy adds a column's values row after row only when it keeps more than one value:
        # keeping one (an (n, 1) array summed over axis 0), its inner loop runs along the
        # reduced axes, pairwise
        single = {" * ".join(f"shape[{d}]" for d in range(ndi) if d not in axes) or "1"
                  for red in g.reductions if (axes := self.cols_axes(red)) is not None
                  and g.reduce[red.out][0] in ("sum", "mean") and red.meta.dtype in FLOAT}
        if self.grp.exact and single:
            L += [f"    if ({' || '.join(f'({e}) == 1' for e in sorted(single))})",
                  "        return pj_fallback(gk, args, nargs);"]
        for i, ref in enumerate(g.inputs):
            ct = CTYPE[self.dtype(ref)]
            if self.kinds[i] == "scalar":
                L.append(f"    const {ct} c{i} = ({ct})d{i};")
            elif self.kinds[i] == "one":
                L.append(f"    const {ct} c{i} = *(const {ct} *)PyArray_DATA(a{i});")
        return L

    def layout_bound(self) -> bool:
        """A group with reductions (so its outputs are written in C order, proto is None)
        and an output of two or more axes that may be longer than 1 (a full value, or a
        reduction keeping several axes): NumPy lays that out in its operands' memory order,
        so operands in another order go to NumPy."""
        return bool(self.grp.reductions) and any(
            sum(d is None or d > 1 for d in self.graph.meta(r).shape) >= 2
            for r in self.grp.outputs)

    def numpy_loop_inputs(self) -> list:
        """Positions of the array inputs a node computed by NumPy's loop reads directly (in
        plain NumPy, with their own strides; members are fresh arrays there, walked forwards)."""
        return sorted({self.index[r.index] for n in self.grp.nodes if n.out in self.grp.numpy_loops
                       for r in node_refs(n) if r.index in self.index
                       and self.kinds[self.index[r.index]] in ("full", "other")})

    def collapse(self) -> list:
        """C lines (a writing group of 2 or more axes): the outer axes that continue the
        rows in every array (stride: the row's stride times its length) join the rows, so
        rows are as long as the layout allows (`X[::2] += ...` of a 3-D X: rows of its last
        two axes). The iteration order stays C order over the (permuted) axes, the order
        the repair of a flag counts in (pj_repair)."""
        if self.write is None or self.nd < 2:
            return []
        nd = self.nd
        same = " && ".join(f"st{i}[d] == st{i}[{nd} - 1] * shape[{nd} - 1]"
                           for i in self.arrays)
        return [f"    for (int d = {nd} - 2; d >= 0; d--) {{",
                "        if (shape[d] == 1)",
                "            continue;",
                f"        if (!({same}))",
                "            break;",
                f"        shape[{nd} - 1] *= shape[d];",
                "        shape[d] = 1;",
                "    }"]

    def allocates_layout(self) -> bool:
        """An elementwise group that allocates an output of two or more axes that may be
        longer than 1: its layout is NumPy's choice, from its operands' strides."""
        return self.nd >= 2 and not self.grp.reductions and any(
            self.out_kind(r) == "full" and r.index != self.write and
            sum(d is None or d > 1 for d in self.graph.meta(r).shape) >= 2
            for r in self.grp.outputs)

    def c_born(self) -> bool:
        """A member of two or more axes that may be longer than 1 whose operands are all
        broadcast (`b[None, :] + c[:, None]`): NumPy lays it out in C order whatever the
        full inputs' order, and where that order and theirs disagree, NumPy's next
        operation takes C order again. Such a group keeps C order, or goes to NumPy."""
        ordered = {self.grp.inputs[i].index for i in self.arrays if self.kinds[i] == "full"}
        for n in self.grp.nodes:
            if any(r.index in ordered for r in node_refs(n)):
                ordered.add(n.out)
            elif sum(d is None or d > 1 for d in self.graph.meta(Ref(n.out)).shape) >= 2:
                return True
        return False

    def agree_with(self, perm) -> list:
        """C lines: every array's strides agree with the axis order `perm` (a C array
        name; None: C order), else the call goes to NumPy (pj_agrees)."""
        if self.nd < 2:
            return []
        arg = perm or "NULL"
        return [f"    if (!pj_agrees(st{i}, shape, {arg}, {self.nd}))\n"
                "        return pj_fallback(gk, args, nargs);"
                for i in self.arrays if self.kinds[i] != "one"]

    def keep_order(self) -> list:
        """Iterate in the memory order of the full-shape inputs, as NumPy's ufuncs do, so
        outputs get their layout (a transposed input gives a transposed result, and an
        order-dependent op after the kernel sees what it would see in NumPy). Inputs with
        different orders, or a per-row input that varies along the new inner axis, go to
        NumPy. So does a prototype broadcast along an axis (`np.broadcast_to(row, (m, n))`):
        its zero stride sorts innermost in pj_perm and in PyArray_NewLikeArray, while
        NumPy's iterator takes no order from it (the result of `row * 2.0` is C order).
        (An empty array's strides are all 0 in NumPy 2: its layout does not matter.)"""
        nd, p = self.nd, self.proto
        L = [f"    for (int d = 0; d < {nd} && PyArray_SIZE(a{p}) > 0; d++)",
             f"        if (shape[d] > 1 && st{p}[d] == 0)",
             "            return pj_fallback(gk, args, nargs);",
             f"    int perm[{nd}];",
             f"    pj_perm(a{p}, perm, {nd});"]
        for i in self.arrays:
            if self.kinds[i] == "full" and i != p:
                L += ["    {",
                      f"        int other[{nd}];",
                      f"        pj_perm(a{i}, other, {nd});",
                      "        if (memcmp(other, perm, sizeof(perm)) != 0)",
                      "            return pj_fallback(gk, args, nargs);",
                      "    }"]
        L += self.agree_with("perm")
        L.append(f"    pj_permute(shape, perm, {nd});")
        for i in self.arrays:
            L.append(f"    pj_permute(st{i}, perm, {nd});")
            if self.kinds[i] == "inner":
                L += [f"    if (st{i}[{nd} - 1] != 0)",
                      "        return pj_fallback(gk, args, nargs);"]
        return L

    def allocate_outputs(self) -> list:
        L = ["    PyObject *pool;"]
        for j, ref in enumerate(self.grp.outputs):
            ct, npy = CTYPE[self.dtype(ref)], NPYTYPE[self.dtype(ref)]
            ndim, dims = self.out_dims(ref)
            if dims is None:        # full shape: big ones come from the buffer pool
                L.append(f"    pool = pj_pool_on(N * (npy_intp)sizeof({ct}));")
                if self.proto is not None:
                    L.append(f"    out[{j}] = PyArray_NewLikeArray(a{self.proto}, NPY_KEEPORDER, "
                             f"PyArray_DescrFromType({npy}), 0);")
                else:
                    L.append(f"    out[{j}] = PyArray_SimpleNew({self.nd}, shape, {npy});")
                L.append("    pj_pool_off(pool);")
            else:
                L.append(f"    npy_intp oshape{j}[{max(ndim, 1)}] = {{{', '.join(dims) or '1'}}};")
                L.append(f"    out[{j}] = PyArray_SimpleNew({ndim}, oshape{j}, {npy});")
            L += [f"    if (out[{j}] == NULL)",
                  "        goto fail;",
                  f"    {ct} *const {'q' if dims is None else 'o'}{j}{'base' if dims is None else ''}"
                  f" = ({ct} *)PyArray_DATA((PyArrayObject *)out[{j}]);"]
        return L

    def flat_chunk(self) -> str:
        """How many elements a flat chunk has: PJ_CALL_CHUNK in a group that calls NumPy's
        loops and has neither reductions nor a write, else PJ_CHUNK. Why: each stage of a
        chunk writes a scratch row that the next one reads; at PJ_CHUNK (128 KiB of float64)
        the rows of x * 0.5, its tanh and the chunk of x and of the output sit in L2, at
        PJ_CALL_CHUNK in L1 (tanh(x*0.5)*2 + sqrt(abs(x)) - x*x: ~4% faster at 10^5 and 10^6
        elements, interleaved A/B). A reduction's blocks and a whole sum's chunks follow PJ_CHUNK (NumPy's
        order of additions), a write's segments too: those groups keep it."""
        g = self.grp
        if any(self.numpy_calls) and not g.reductions and self.write is None:
            return "PJ_CALL_CHUNK"
        return "PJ_CHUNK"

    def rows_path(self, whole, flat_ok: bool) -> list:
        """An odometer over the outer axes; per row, one loop per stage (rows shared by the
        threads when there is no whole reduction; each thread has its own scratch).

        flat_ok: when every full input is dense, the rows are instead chunks of PJ_CHUNK
        elements of the flat arrays (a multiple of the reductions' block, so a sum adds the
        same blocks in the same order as one loop would). A row of a strided input is first
        gathered into a scratch row, so every stage loop exists once, for contiguous rows
        (each copy of a vectorized loop costs gcc about 60 ms)."""
        g, ndi = self.grp, self.ndi
        # A writing group (no reductions, no row values) splits long rows into segments of
        # PJ_CHUNK, so its scratch rows stay that short (a 1-D strided destination is one row)
        seg = self.write is not None
        strided = [i for i in self.arrays if self.kinds[i] in ("full", "other")
                   and (i != self.dest or self.dest_read)]
        contig = " && ".join([f"(n <= 1 || st{i}[{ndi} - 1] == (npy_intp)sizeof({CTYPE[self.dtype(g.inputs[i])]}))"
                              for i in strided] or ["1"])
        tree = bool(self.tree) and flat_ok
        ck = self.flat_chunk()
        chunks = "ntb" if tree else f"(N + {ck} - 1) / {ck}"
        L = [f"const int flat = {self.dense() if flat_ok else '0'};"]
        if seg:
            L += ["const npy_intp nrow = n;",
                  "const npy_intp nseg = flat || n <= PJ_CHUNK ? 1 : (n + PJ_CHUNK - 1) / PJ_CHUNK;",
                  f"const npy_intp nrows = flat ? {chunks} : rows * nseg;"]
        else:
            L += [f"const npy_intp nrows = flat ? {chunks} : rows, nrow = n;"]
        L += ["(void)nrow;",
             f"const int contig = flat || ({contig});",
             "#pragma omp parallel num_threads(PJ_THREADS) if(par) reduction(|:fperr) "
             "reduction(|:oom)",
             "{",
             "    feclearexcept(PJ_FE_ERR | FE_UNDERFLOW);"]
        row = "(flat || n > PJ_CHUNK ? PJ_CHUNK : n > 0 ? n : 1)" if seg else \
            f"(flat ? {ck} : n > 0 ? n : 1)"
        scratch = [(f"w{r.index}", CTYPE[self.dtype(r)], "1", row) for r in self.carried
                   if r.index not in self.direct] + [
            (f"gb{i}", CTYPE[self.dtype(g.inputs[i])], "!contig", row) for i in strided] + [
            (f"rs{red.out}", CTYPE[red.meta.dtype], "1", str(reductions.BLOCK))
            for red in self.exact_rows + self.tree if self.reduction(red).row_buffer] + [
            (f"tsum{red.out}", CTYPE[red.meta.dtype], "1", "PJ_TREE_BOUNDS(n, PJ_SUM_CHUNK)")
            for red in self.exact_rows]
        if self.write is not None:
            scratch.append(("dw", CTYPE[self.dtype(g.inputs[self.dest])], "1", row))
        for buf, ct, when, size in scratch:
            L.append(f"    {ct} *{buf} = {when} ? ({ct} *)PJ_MALLOC({size}"
                     f" * sizeof({ct})) : NULL;")
        if scratch:
            L.append("    oom = " + " || ".join(f"({when} && {buf} == NULL)"
                                                for buf, _, when, _ in scratch) + ";")
        if self.exact_rows or self.tree:        # (each thread its own)
            L += ["    pj_leafplans plans;", "    pj_plans_init(&plans);"]
        ahead = self.lookahead(whole, flat_ok)
        prefetch = self.prefetch_plan()
        if ahead:
            L += ["    npy_intp ahead_r = -1;",
                  *[f"    {CTYPE[red.meta.dtype]} nv{red.out} = 0;" for red in self.reds[0]]]
        L += [f"    npy_intp idx[{ndi}], idx_at = -2;"]
        L += [f"    #pragma omp for schedule(static{', PJ_AHEAD_ROWS' if ahead else ''})",
              "    for (npy_intp r = 0; r < nrows; r++) {"]
        R = [f"if ({'oom' if scratch else '0'})", "    continue;"]
        # segment r % nseg of row r / nseg: its first element and length
        part = "(r % nseg) * PJ_CHUNK"
        rowlen = f"(nrow - {part} < PJ_CHUNK ? nrow - {part} : PJ_CHUNK)" if seg else "nrow"
        if flat_ok and tree:
            R += ["const npy_intp n = flat ? tb[r + 1] - tb[r] : nrow;"]
        elif flat_ok:
            R += [f"const npy_intp n = flat ? (N - r * {ck} < {ck} ? N - r * {ck} "
                  f": {ck}) : {rowlen};"]
        elif seg:
            R += [f"const npy_intp n = {rowlen};"]
        R += [f"const char *b[{max(len(self.arrays), 1)}];",
              f"{'npy_intp' if flat_ok else 'const npy_intp'} ibase = {'r * n' if whole else '0'};",
              "(void)ibase;",
              f"npy_intp row_at = {f'(r / nseg) * nrow + {part}' if seg else 'r * n'};"]
        if flat_ok:
            R += ["if (flat) {",
                  f"    ibase = row_at = {'tb[r]' if tree else f'r * {ck}'};",
                  *[f"    b[{k}] = PyArray_BYTES(a{i}) + (st{i}[{ndi} - 1] ? row_at * "
                    f"(npy_intp)sizeof({CTYPE[self.dtype(g.inputs[i])]}) : 0);"
                    for k, i in enumerate(self.arrays)],
                  "} else {"]
        O = self.odometer_step("r / nseg" if seg else "r")
        for red in self.grp.reductions:
            if self.cols_axes(red) is not None:
                O += self.cols_offset(red)
        for k, i in enumerate(self.arrays):
            O += self.row_pointer(f"b[{k}]", i, "idx")
            if seg:
                O.append(f"b[{k}] += {part} * st{i}[{ndi} - 1];")
        R += ["    " + s for s in O] + ["}"] if flat_ok else O
        for k, i in enumerate(self.arrays):
            ct = CTYPE[self.dtype(g.inputs[i])]
            R.append(f"const char *b{i} = b[{k}];")
            if self.kinds[i] == "inner":
                R.append(f"const {ct} c{i} = *(const {ct} *)b{i};")
            if i in strided:
                R += [f"if (!contig && n > 1 && st{i}[{ndi} - 1] != (npy_intp)sizeof({ct})) {{",
                      f"    pj_gather(gb{i}, b{i}, n, st{i}[{ndi} - 1], sizeof({ct}));",
                      f"    b{i} = (const char *)gb{i};",
                      "}"]
        for j, ref in enumerate(g.outputs):
            if self.out_kind(ref) == "full":
                R.append(f"{CTYPE[self.dtype(ref)]} *const q{j} = q{j}base + row_at;")
        for t in range(self.loops + 1):
            for node in self.row_nodes[t]:
                R += self.node_stmts(node, g.ops[node.out]) + self.store_row(node.out, "r")
                R += self.reciprocal(node)
            if t == self.loops:
                break
            for node in self.numpy_calls[t]:
                R += self.numpy_call(node)
            if ahead and t == 0:
                R += self.first_reductions()
                continue
            if ahead and t == self.loops - 1:
                R += [s for red in self.reds[t] for s in self.red_state(red)]
                R += ["{", *["    " + s for s in self.next_row()
                             + self.rdiv_or_divide(t, self.ahead_loop)], "}"]
                for red in self.reds[t]:
                    R += self.red_result(red, "n") + self.reciprocal(red)
                continue
            for red in self.reds[t]:
                if self.row_reduce(red):
                    R += self.red_state(red)
            if self.full[t] or any(self.in_loop(red) for red in self.reds[t]):
                if prefetch is not None and t == prefetch[0]:
                    setup, lines = self.prefetch(*prefetch[1:])
                    loop = self.rdiv_or_divide(t, lambda: self.loop(t, lines))
                    R += ["{", *["    " + s for s in setup + loop], "}"]
                else:
                    R += ["{", *["    " + s for s in self.rdiv_or_divide(t, lambda: self.loop(t))],
                          "}"]
            for red in self.reds[t]:
                if self.row_reduce(red):
                    R += self.red_result(red, "n") + self.reciprocal(red)
        R += self.commit()
        L += ["        " + s for s in R]
        L += ["    }",
              *[f"    free({buf});" for buf, _, _, _ in scratch],
              "    PJ_FE_FOLD(fperr);",
              "}"]
        if seg:     # the first element not written, in the iteration's order
            L += ["if (bail >= 0)",
                  "    rstart = flat ? bail * PJ_CHUNK : (bail / nseg) * nrow "
                  "+ (bail % nseg) * PJ_CHUNK;"]
        return L

    def direct_checks(self) -> list:
        """C lines: a group writing into its destination hands the call to NumPy (which
        computes a temporary, casts, raises) unless the destination is a writable array of
        the iteration's shape (not broadcast) that shares no memory with any other input
        (extent test) and pj_direct_ok. Reading the destination itself, at the index it
        writes, is fine: the kernel writes a row after reading it."""
        if self.write is None:
            return []
        d, nd = self.dest, self.nd
        fb = "        return pj_fallback(gk, args, nargs);"
        dims = " || ".join(f"PyArray_DIM(a{d}, {k}) != shape[{k}]" for k in range(nd))
        L = [f"    if (!PyArray_ISWRITEABLE(a{d}) || PyArray_NDIM(a{d}) != {nd} || {dims}",
             f"            || pj_internal_overlap(a{d}))", fb]
        others = [f"pj_overlap(a{d}, a{i})" for i in self.arrays if i != d]
        if others:
            L += [f"    if ({' || '.join(others)})", fb]
        return L + ["    int under = 0;", "    if (!pj_direct_ok(&under))", fb]

    def commit(self) -> list:
        """C lines ending a row: the destination's row computed into dw is written into it
        unless a flag was raised (since the call began: then nothing more is written, and
        NumPy computes from this row on, pj_repair)."""
        if self.write is None:
            return []
        d, k = self.dest, self.arrays.index(self.dest)
        ct = CTYPE[self.dtype(self.grp.inputs[d])]
        return ["if (bail < 0) {",
                "    if (fetestexcept(femask)) {",
                "        bail = r;",
                f"    }} else if (flat || n == 1 || st{d}[{self.ndi} - 1] == "
                f"(npy_intp)sizeof({ct})) {{",
                f"        memcpy((char *)b[{k}], dw, (size_t)n * sizeof({ct}));",
                "    } else {",
                "        for (npy_intp j = 0; j < n; j++)",
                f"            *({ct} *)((char *)b[{k}] + j * st{d}[{self.ndi} - 1]) = dw[j];",
                "    }",
                "}"]

    def epilogue(self, cols) -> list:
        """Back to the GIL, then the result: the outputs, NumPy's (on a floating-point flag),
        or NULL with the error set. Every path leaves through `done:`, where the buffers the
        function allocated are freed, once."""
        g, nout = self.grp, len(self.grp.outputs)
        L = ["    if (ts != NULL)",
             "        PyEval_RestoreThread(ts);",
             "    if (oom) {",
             "        PyErr_NoMemory();",
             "        goto fail;",
             "    }",
             *([] if self.write is None else [
                 "    if (bail >= 0) {",
                 "        PyObject *rest = pj_repair(gk, args, nargs, rstart, "
                 f"{'perm' if self.proto is not None else 'NULL'}, {self.nd});",
                 "        if (rest == NULL)",
                 "            goto fail;",
                 "        Py_DECREF(rest);",
                 "    } else"]),
             "    if ((fperr & 1) || ((fperr & 2) && pj_underflow_reported())) {",
             f"        for (int j = 0; j < {nout}; j++)",
             "            Py_CLEAR(out[j]);",
             "        result = pj_fallback(gk, args, nargs);",
             "        goto done;",
             "    }"]
        for j, ref in enumerate(g.outputs):
            if not self.graph.meta(ref).is_array:
                L.append(f"    out[{j}] = PyArray_Return((PyArrayObject *)out[{j}]);")
                L.append(f"    if (out[{j}] == NULL) goto fail;")
        if nout == 1 and not self.tuple_result:
            L.append("    result = out[0];")
        else:
            L.append(f"    result = PyTuple_New({nout});")
            L.append("    if (result == NULL) goto fail;")
            # each output handed to the tuple (which owns it even when setting fails)
            L += [f"    for (int j = 0; j < {nout}; j++) {{",
                  "        PyObject *o = out[j];",
                  "        out[j] = NULL;",
                  "        if (PyTuple_SetItem(result, j, o) < 0) {",
                  "            Py_CLEAR(result);",
                  "            goto fail;",
                  "        }",
                  "    }"]
        return L + ["    goto done;",
                    "fail:",
                    f"    for (int j = 0; j < {nout}; j++)",
                    "        Py_XDECREF(out[j]);",
                    "done:",
                    *[f"    free(ac{red.out});" for red in cols],
                    *[f"    free(tsum{red.out});" for red in self.tree],
                    *(["    free(tb);"] if self.tree else []),
                    *(["    free(rb);"] if self.exact_rows else []),
                    "    return result;",
                    "}"]


def stream_sizes(streams: list):
    """(sub-block length in elements, C sum of the streams' element sizes) of prefetched
    streams (pointer expression, element size, 1 if written): a sub-block is PF_BLOCK bytes
    of the widest stream."""
    return (PF_BLOCK // max(size for _, size, _ in streams),
            " + ".join(str(size) for _, size, _ in streams))


def prefetch_lines(streams: list, ahead: str) -> list:
    """C lines prefetching the bytes of sub-block [jj, je) (plus `ahead`) of each stream
    (pointer expression, element size, 1 if to be written), a line of 64 bytes at a time."""
    lines = []
    for size in sorted({size for _, size, _ in streams}):
        fetch = [f"    __builtin_prefetch({ptr} + l, {rw}, 3);"
                 for ptr, sz, rw in streams if sz == size]
        head = f"for (npy_intp l = jj * {size}{ahead}; l < je * {size}{ahead}; l += 64)"
        lines += [head, *fetch] if len(fetch) == 1 else [head + " {", *fetch, "}"]
    return lines


def heap_array(var: str, ctype: str, count: str) -> list:
    """C lines allocating `count` ctype values into var, or failing the call with MemoryError
    (fail: frees what the function allocated)."""
    return [f"{var} = ({ctype} *)PJ_MALLOC({count} * sizeof({ctype}));",
            f"if ({var} == NULL) {{",
            "    PyErr_NoMemory();",
            "    goto fail;",
            "}"]


PAR_MIN = 1 << 16       # elements below which a kernel runs on one thread
CHUNK = 1 << 14         # elements per chunk of the flat loop shared by threads
CALL_CHUNK = 1 << 10    # elements per flat chunk of a group calling NumPy's loops (flat_chunk)
SUM_CHUNK = 1 << 11     # most values per chunk of an exact row sum (its buffer stays in L1)
AHEAD_ROWS = 64         # rows per thread's share of a lookahead kernel (GroupKernel.lookahead)
PF_ROW = 1 << 16        # most bytes per row of the streams a row kernel prefetches (prefetch)
PF_BLOCK = 1024         # bytes of the widest stream per prefetching sub-block
PF_AHEAD = 1024         # bytes ahead of its reads a streaming loop prefetches (stream_ahead)
PF_STREAM = 64 << 20    # fewest bytes of inputs a loop prefetches ahead in
PART_MIN = 3000         # fewest characters of C per part of a module split (split_parts)


def module_source(renderers: list, contract: bool, threads: int, jobs: int = 1) -> tuple:
    """(C source, its own part) of one module with a function g<id> per renderer (a
    GroupKernel or a subclass), each calling its body; a body is emitted once for groups
    whose C is the same (the groups of an unrolled loop: each copy cost gcc its full time).
    The own part, for dumps, is the bodies (every part of a module in parts) without the
    prelude every module shares and the module's functions.

    contract: let gcc fuse a*b+c into one FMA (one rounding instead of two: O2 only).
    threads: OpenMP threads for big loops (compiled with -fopenmp when > 1).
    jobs: how many gcc processes may compile the module side by side: with more than one
    and bodies enough, the bodies are shared out among parts (split_parts), each compiled
    from the same text with -DPJ_PART=k (build.py), and the source says `#define PJ_PARTS`.
    """
    slots = numpy_loop_slots(renderers)     # before the bodies, which name their slots
    bodies = {}         # canonical body text -> (its name, its text, its groups' wrappers)
    for r in renderers:
        text = r.function()
        key = _canonical(text)
        if key not in bodies:
            name = f"pj_body{r.grp.id}"
            bodies[key] = (name, text.replace("pj_body(", f"{name}(", 1), [])
        name, gid = bodies[key][0], r.grp.id
        bodies[key][2].append(f"/* {r.grp} */\n"
                              f"PJ_GROUP PyObject *\n"
                              f"pj_g{gid}(PyObject *self, PyObject *const *args, "
                              f"Py_ssize_t nargs)\n"
                              f"{{\n    (void)self;\n    return {name}({gid}, args, nargs);\n}}\n")
    units = [text + "".join(wrappers) for _, text, wrappers in bodies.values()]
    split = split_parts(units, jobs)
    parts = [CONTRACT if contract else "", PRELUDE, VECTOR_DECLS,
             f"#define PJ_THREADS (pj_one_thread ? 1 : {threads})\n#define PJ_PAR_MIN {PAR_MIN}\n"
             f"#define PJ_CHUNK {CHUNK}\n#define PJ_CALL_CHUNK {CALL_CHUNK}\n"
             f"#define PJ_SUM_CHUNK {SUM_CHUNK}\n"
             f"#define PJ_AHEAD_ROWS {AHEAD_ROWS}\n#define PJ_PF_ROW {PF_ROW}\n"
             f"#define PJ_PF_ALL ((npy_intp)1 << 40)\n#define PJ_PF_AHEAD {PF_AHEAD}\n"
             f"#define PJ_PF_STREAM ((npy_intp){PF_STREAM >> 20} << 20)\n"]
    if split:
        parts.append(f"#define PJ_PARTS {len(split)}\n")
    parts.append(HELPERS)
    # set by single_thread() in a forked child (build.py): GNU OpenMP is not fork-safe
    parts.append("PJ_SHARED int pj_one_thread;\n")
    # a loop nest's kernel (pijit/loopnest) numbers its own NumPy loops
    nslots = len(slots) + sum(getattr(r, "numpy_loop_count", 0) for r in renderers)
    parts.append(NUMPY_LOOPS.replace("@NSLOTS@", str(max(nslots, 1))))
    parts.append(f"PJ_SHARED PyObject *pj_fallbacks[{max(len(renderers), 1)}];\n")
    parts.append(FALLBACK)
    own = len(parts)
    if not split:
        parts += units
        init = ""
    else:
        for k, members in enumerate(split):
            parts.append(f"#if PJ_PART == {k}")
            parts += [units[u] for u in members]
            if k:
                parts.append(f"PJ_HIDDEN int pj_part_init{k}(void)\n{{\n"
                             f"    return _import_array();\n}}")
            parts.append("#endif")
        parts.append("#if PJ_PART == 0")
        parts += [f"PJ_HIDDEN PyObject *pj_g{r.grp.id}(PyObject *, PyObject *const *, "
                  f"Py_ssize_t);" for r in renderers]
        parts += [f"PJ_HIDDEN int pj_part_init{k}(void);" for k in range(1, len(split))]
        init = "".join(f" && pj_part_init{k}() >= 0" for k in range(1, len(split)))
    bodies_text = "\n".join(parts[own:]).rstrip() + "\n"
    methods = "".join(
        f'    {{"g{r.grp.id}", (PyCFunction)(void (*)(void))pj_g{r.grp.id}, METH_FASTCALL, '
        f'NULL}},\n' for r in renderers)
    parts.append(MODULE.replace("@METHODS@", methods).replace("@NGROUPS@", str(len(renderers)))
                 .replace("@PARTS_INIT@", init))
    if split:
        parts.append("#endif")
    return "\n".join(parts), bodies_text


def split_parts(units: list, jobs: int) -> list:
    """The module's bodies (C texts, in order) shared out among at most `jobs` parts, longest
    first onto the part with the least text so far: each part's indices in order, or [] when
    the module stays one part (one job, one body, or a part that would have less than
    PART_MIN characters: gcc's fixed cost per process, ~40 ms here, and the link, ~20 ms,
    would eat its gain).

    Why: gcc's time grows with the bodies (~70 ms each here), and a graph's first call waits
    for it. Measured here with both cores free, first call cold: kmeans_step (6 groups)
    667 -> 409 ms, moments (4) 627 -> 481, nbody_step (4) 487 -> 320, two one-op groups
    around a matmul (~4600 characters each) 286 -> 234-273 ms."""
    if jobs < 2 or len(units) < 2:
        return []
    parts = [[] for _ in range(min(jobs, len(units)))]
    size = [0] * len(parts)
    for u in sorted(range(len(units)), key=lambda u: -len(units[u])):
        k = size.index(min(size))
        parts[k].append(u)
        size[k] += len(units[u])
    if min(size) < PART_MIN:
        return []
    return [sorted(p) for p in sorted(parts, key=min)]


# The kernels' numbered locals (v<value>, w<value>, x<input>, q<output>, ...: the prefixes the
# renderers number, also with a suffix after "_" as in v<value>_a; no global of the module is
# named so, which test_cfused checks).
_LOCALS = re.compile(r"\b(M|a|ab|ac|b|bk|bm|bn|bz|c|co|d|gb|i|k|m|mq|nv|o|oshape|p|pf|pn|pw|q|r|"
                     r"ri|rs|ps|psn|ra|s|st|tsum|v|w|x|z|zs)(\d+)(?![0-9A-Za-z])")


def _canonical(text: str) -> str:
    """A body with its numbered locals renumbered per prefix in order of first appearance:
    two bodies with the same canonical text are the same C up to the names of their locals."""
    names, count = {}, {}

    def rename(m):
        token = m.group(0)
        if token not in names:
            prefix = m.group(1)
            names[token] = f"{prefix}@{count.get(prefix, 0)}"
            count[prefix] = count.get(prefix, 0) + 1
        return names[token]
    return _LOCALS.sub(rename, text)


def numpy_loop_slots(renderers: list) -> list:
    """Numbers the nodes computed by NumPy's loops across the module (each renderer's
    numpy_slot) and returns (op code, dtype, operand count) per slot, in slot order."""
    slots = []
    for r in renderers:
        for node in r.grp.nodes:
            if node.out in r.grp.numpy_loops:
                r.numpy_slot[node.out] = len(slots)
                slots.append((r.grp.ops[node.out], node.meta.dtype, len(node.args)))
    return slots


NUMPY_LOOPS = r"""
/* NumPy's own inner loops (the `numpy_1.24_ufunc_call_info` capsules of
   ufunc._resolve_dtypes_and_context + _get_strided_loop, set from Python): an exact kernel
   runs a transcendental over a row through the very loop np.exp would run, so it matches
   NumPy bit for bit. A slot not set, or a loop failing, hands the group to NumPy. */
typedef int (*pj_strided_loop)(void *context, char *const *data, const npy_intp *dimensions,
                               const npy_intp *strides, NpyAuxData *auxdata);
typedef struct {
    pj_strided_loop loop;
    void *context;
    NpyAuxData *auxdata;
    npy_bool requires_pyapi;
    npy_bool no_floatingpoint_errors;
} pj_ufunc_info;

PJ_SHARED pj_ufunc_info *pj_ufuncs[@NSLOTS@];
PJ_SHARED PyObject *pj_ufunc_capsules[@NSLOTS@];

static PJ_COLD int pj_ufunc1(int k, const void *a, npy_intp sa, void *out, npy_intp so,
                             npy_intp n)
{
    pj_ufunc_info *u = pj_ufuncs[k];
    if (u == NULL)
        return -1;
    char *data[2] = {(char *)a, (char *)out};
    npy_intp strides[2] = {sa, so};
    return u->loop(u->context, data, &n, strides, u->auxdata);
}

static PJ_COLD int pj_ufunc2(int k, const void *a, npy_intp sa, const void *b, npy_intp sb,
                             void *out, npy_intp so, npy_intp n)
{
    pj_ufunc_info *u = pj_ufuncs[k];
    if (u == NULL)
        return -1;
    char *data[3] = {(char *)a, (char *)b, (char *)out};
    npy_intp strides[3] = {sa, sb, so};
    return u->loop(u->context, data, &n, strides, u->auxdata);
}
"""


FALLBACK = r"""
/* Run group k by NumPy (set from Python): for inputs the kernel does not take. */
static PyObject *pj_fallback(int k, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *fn = pj_fallbacks[k];
    if (fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "pijit: kernel fallback not set");
        return NULL;
    }
    /* (PyObject_Vectorcall is not in the limited C API of 3.11: a tuple, on this slow path) */
    PyObject *tuple = PyTuple_New(nargs);
    if (tuple == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (PyTuple_SetItem(tuple, i, Py_NewRef(args[i])) < 0) {
            Py_DECREF(tuple);
            return NULL;
        }
    }
    PyObject *result = PyObject_Call(fn, tuple, NULL);
    Py_DECREF(tuple);
    return result;
}

/* A writing kernel that met a flag at element `start`: NumPy computes from there. */
#define pj_repair(k, args, nargs, start, p, nd) \
    (pj_sup->repair(pj_fallbacks[k], (args), (nargs), (start), (p), (nd)))
"""

MODULE = r"""
/* Py_XSETREF, which the limited C API (toolchain.py) does not have: dst takes src's
   reference, then the old value is released (its destructor may see dst set already). */
#define PJ_XSETREF(dst, src) \
    do { PyObject *pj_old = (PyObject *)(dst); (dst) = (src); Py_XDECREF(pj_old); } while (0)

static PyObject *pj_set_fallback(PyObject *self, PyObject *args)
{
    int k;
    PyObject *fn;
    (void)self;
    if (!PyArg_ParseTuple(args, "iO", &k, &fn))
        return NULL;
    if (k < 0 || k >= @NGROUPS@) {
        PyErr_SetString(PyExc_IndexError, "group index out of range");
        return NULL;
    }
    PJ_XSETREF(pj_fallbacks[k], Py_NewRef(fn));
    Py_RETURN_NONE;
}

static PyObject *pj_set_pool(PyObject *self, PyObject *handler)
{
    (void)self;
    if (handler == Py_None) {
        Py_CLEAR(pj_pool);
        Py_RETURN_NONE;
    }
    if (!PyCapsule_IsValid(handler, "mem_handler")) {
        PyErr_SetString(PyExc_TypeError, "set_pool: expected a NumPy mem_handler capsule or None");
        return NULL;
    }
    PJ_XSETREF(pj_pool, Py_NewRef(handler));
    Py_RETURN_NONE;
}

static PyObject *pj_set_ufunc(PyObject *self, PyObject *args)
{
    int k;
    PyObject *capsule;
    (void)self;
    if (!PyArg_ParseTuple(args, "iO", &k, &capsule))
        return NULL;
    if (k < 0 || k >= (int)(sizeof(pj_ufuncs) / sizeof(pj_ufuncs[0]))) {
        PyErr_SetString(PyExc_IndexError, "NumPy loop slot out of range");
        return NULL;
    }
    pj_ufunc_info *u = PyCapsule_GetPointer(capsule, "numpy_1.24_ufunc_call_info");
    if (u == NULL)
        return NULL;
    if (u->loop == NULL || u->requires_pyapi) {
        PyErr_SetString(PyExc_ValueError, "set_ufunc: no strided loop, or one needing the GIL");
        return NULL;
    }
    PJ_XSETREF(pj_ufunc_capsules[k], Py_NewRef(capsule));
    pj_ufuncs[k] = u;
    Py_RETURN_NONE;
}

static PyObject *pj_single_thread(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    pj_one_thread = 1;
    Py_RETURN_NONE;
}

static PyMethodDef pj_methods[] = {
@METHODS@    {"set_fallback", pj_set_fallback, METH_VARARGS, "set_fallback(k, fn)"},
    {"set_ufunc", pj_set_ufunc, METH_VARARGS, "set_ufunc(k, call_info): NumPy loop of slot k"},
    {"set_pool", pj_set_pool, METH_O, "set_pool(handler or None): NumPy mem handler of big outputs"},
    {"single_thread", pj_single_thread, METH_NOARGS, "single_thread(): no OpenMP threads from now on"},
    {NULL, NULL, 0, NULL},
};

/* Run when the module is made (multi-phase init: a module made again from the same shared
   object runs it again, setting the same values). */
static int pj_exec(PyObject *m)
{
    (void)m;
    PyObject *ef = PyImport_ImportModule("pijit._eval_frame");
    PyObject *sup = ef == NULL ? NULL : PyObject_CallMethod(ef, "kernel_support", NULL);
    pj_sup = sup == NULL ? NULL : (const pj_support *)PyCapsule_GetPointer(sup, PJ_SUPPORT_CAPSULE);
    Py_XDECREF(sup);        /* the table is static in pijit._C, loaded for good */
    Py_XDECREF(ef);
    return pj_sup != NULL && _import_array() >= 0@PARTS_INIT@ ? 0 : -1;
}

static PyModuleDef_Slot pj_slots[] = {{Py_mod_exec, pj_exec}, {0, NULL}};

/* The module's name comes from its spec (build.py), its PyInit_<name> from build.py too:
   the name is a hash of this source, which cannot hold it. */
static struct PyModuleDef pj_module_def = {
    PyModuleDef_HEAD_INIT, "pijit_kernels", "pijit fused kernels of one graph", 0, pj_methods,
    pj_slots,
};
"""
