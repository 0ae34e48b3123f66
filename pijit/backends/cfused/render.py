"""C source of one graph's fused groups: list of FusionGroups -> one C translation unit.

Each group becomes a CPython function `g<k>(*inputs)` (METH_FASTCALL) returning its outputs
(one object, or a tuple when there are several). It reads data pointers, shapes and strides
from the ndarray objects, broadcasts at run time, allocates outputs with PyArray_SimpleNew
(NumPy's allocator: huge pages for big arrays) and runs one of three loops:

- flat: every array input C-contiguous with the full shape (or of size 1): one `omp simd` loop;
- rows, contiguous inner axis: an odometer over the outer axes, an `omp simd` loop per row
  (inputs broadcast along the inner axis are hoisted out of it);
- rows, strided inner axis: the same with byte strides (transposed, sliced, any layout).

An input the kernel cannot take (unexpected dtype, unaligned, byte-swapped, non-broadcastable)
makes it call the group's NumPy fallback instead. Values are computed in each node's dtype,
exactly as NumPy would: same promotion (from the node Metas), NaN-propagating maximum/minimum/
clip/max/min, sums by pairwise summation over blocks of 128 (accumulated in double).
"""
from __future__ import annotations

import math

import numpy as np

from pijit.graph.fuse import COMPARE, FusionGroup
from pijit.graph.ir import Ref

CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
         np.dtype(np.bool_): "npy_bool"}
NPYTYPE = {np.dtype(np.float32): "NPY_FLOAT", np.dtype(np.float64): "NPY_DOUBLE",
           np.dtype(np.bool_): "NPY_BOOL"}
BLOCK = 128     # leaf size of the pairwise summation (NumPy's)

# Math functions vectorized through libmvec when declared `omp declare simd`.
VECTOR_MATH = ("exp", "log", "sin", "cos", "tanh", "pow")
_MATH = {"exp": "exp", "log": "log", "sqrt": "sqrt", "sin": "sin", "cos": "cos",
         "tanh": "tanh", "abs": "fabs"}
_BINOP = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">",
          "ge": ">=", "eq": "==", "ne": "!="}

PRELUDE = r"""
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <Python.h>
#include <numpy/arrayobject.h>
#include <numpy/arrayscalars.h>
#include <fenv.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
"""

VECTOR_DECLS = "".join(
    f"#pragma omp declare simd notinbranch\nextern {t} {f}{s}({t}{', ' + t if f == 'pow' else ''});\n"
    for f in VECTOR_MATH for t, s in (("double", ""), ("float", "f")))

HELPERS = r"""
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
    double t = 0.0;
    int first = 1;
    for (int k = 0; k < 64; k++) {
        if (s->mask & ((uint64_t)1 << k)) {
            t = first ? s->v[k] : s->v[k] + t;
            first = 0;
        }
    }
    return t;
}

/* An ndarray the kernel can read: exact dtype, native byte order, aligned, ndim <= nd. */
static PyArrayObject *pj_array(PyObject *o, int type, int nd)
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
static int pj_double(PyObject *o, double *out)
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

static int pj_bcast(PyArrayObject *a, npy_intp *shape, int nd)
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
static void pj_strides(PyArrayObject *a, const npy_intp *shape, int nd, npy_intp *st)
{
    int an = PyArray_NDIM(a);
    for (int d = 0; d < nd; d++) {
        int k = d - (nd - an);
        st[d] = (k < 0 || PyArray_DIM(a, k) == 1) ? 0 : PyArray_STRIDE(a, k);
    }
}

/* C-contiguous with exactly `shape`. */
static int pj_flat(PyArrayObject *a, const npy_intp *shape, int nd)
{
    if (!PyArray_IS_C_CONTIGUOUS(a) || PyArray_NDIM(a) != nd)
        return 0;
    for (int d = 0; d < nd; d++)
        if (PyArray_DIM(a, d) != shape[d])
            return 0;
    return 1;
}
"""


def c_float(value, ctype: str) -> str:
    """An exact C literal of a constant, converted to `ctype` as NumPy converts it."""
    if ctype == "npy_bool":
        return "1" if value else "0"
    v = float(value)
    if math.isnan(v):
        text = "NAN"
    elif math.isinf(v):
        text = "INFINITY" if v > 0 else "(-INFINITY)"
    else:
        text = v.hex()
        text = f"({text})" if text.startswith("-") else text
    return f"(({ctype}){text})"


class _Group:
    """Renders one FusionGroup."""

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
            elif math.prod(m.shape) == 1 and math.prod(shape) != 0:
                kind = "one"
            elif m.shape == grp.shape:
                kind = "full"
            elif shape[-1] != 1 and (m.ndim == 0 or m.shape[-1] == 1):
                kind = "inner"
            else:
                kind = "other"
            self.kinds.append(kind)
        self.index = {ref.index: i for i, ref in enumerate(grp.inputs)}

    # -- expressions -------------------------------------------------------------------------
    def dtype(self, ref):
        return self.graph.meta(ref).dtype

    def name(self, ref):
        i = self.index.get(ref.index)
        if i is None:
            return f"v{ref.index}"
        return f"x{i}" if self.kinds[i] in ("full", "other") else f"c{i}"

    def arg(self, a, want) -> str:
        """Argument text converted to dtype `want`."""
        if isinstance(a, Ref):
            text = self.name(a)
            return text if self.dtype(a) == want else f"(({CTYPE[want]}){text})"
        return c_float(a, CTYPE[want])

    def compute_dtype(self, node):
        """The dtype an op computes in: the result's, or (comparisons) its operands'."""
        refs = [a for a in node.args if isinstance(a, Ref)]
        strong = [self.graph.meta(r) for r in refs if not self.graph.meta(r).is_pyscalar]
        return np.result_type(*[m.dtype for m in (strong or [self.graph.meta(r) for r in refs])])

    def node_stmts(self, node, op) -> list:
        t = node.meta.dtype
        ct, f = CTYPE[t], "f" if t == np.float32 else ""
        a = node.args
        out = f"v{node.out}"
        if op in COMPARE:
            cd = self.compute_dtype(node)
            x, y = self.arg(a[0], cd), self.arg(a[1], cd)
            return [f"const npy_bool {out} = ({x} {_BINOP[op]} {y});"]
        if op in _BINOP:
            return [f"const {ct} {out} = ({self.arg(a[0], t)} {_BINOP[op]} {self.arg(a[1], t)});"]
        if op == "neg":
            return [f"const {ct} {out} = (-{self.arg(a[0], t)});"]
        if op in ("pos", "astype"):
            return [f"const {ct} {out} = {self.arg(a[0], t)};"]
        if op in _MATH:
            return [f"const {ct} {out} = {_MATH[op]}{f}({self.arg(a[0], t)});"]
        if op == "square":
            x = self.arg(a[0], t)
            return [f"const {ct} {out} = ({x} * {x});"]
        if op in ("pow", "power"):
            x, e = self.arg(a[0], t), float(a[1])
            if e == 2.0:
                expr = f"({x} * {x})"
            elif e == 1.0:
                expr = x
            elif e == 0.5:          # NumPy's power takes sqrt here too (sqrt(-0.) is -0.)
                expr = f"sqrt{f}({x})"
            elif e == -1.0:
                expr = f"(({ct})1 / {x})"
            else:
                expr = f"pow{f}({x}, {c_float(e, ct)})"
            return [f"const {ct} {out} = {expr};"]
        if op in ("maximum", "minimum"):
            x, y = self.arg(a[0], t), self.arg(a[1], t)
            cmp = ">=" if op == "maximum" else "<="
            return [f"const {ct} {out}_a = {x}, {out}_b = {y};",
                    f"const {ct} {out} = ({out}_a {cmp} {out}_b || {out}_a != {out}_a) "
                    f"? {out}_a : {out}_b;"]
        if op == "clip":
            stmts = [f"{ct} {out}_t = {self.arg(a[0], t)};"]
            for bound, cmp in ((a[1], ">="), (a[2], "<=")):
                if bound is not None:
                    b = self.arg(bound, t)
                    stmts.append(f"{out}_t = ({out}_t {cmp} {b} || {out}_t != {out}_t) "
                                 f"? {out}_t : {b};")
            return stmts + [f"const {ct} {out} = {out}_t;"]
        if op == "where":
            c = a[0]
            if isinstance(c, Ref):
                cond = self.name(c) if self.dtype(c) == np.bool_ else f"({self.name(c)} != 0)"
            else:
                cond = "1" if c else "0"
            return [f"const {ct} {out} = {cond} ? {self.arg(a[1], t)} : {self.arg(a[2], t)};"]
        raise AssertionError(f"no C rendering for {op}")

    # -- loops -------------------------------------------------------------------------------
    def body(self, variant: str) -> list:
        """Statements computing every member at index j ("contig" or "strided" loads)."""
        lines = []
        for i, ref in enumerate(self.grp.inputs):
            if self.kinds[i] in ("full", "other"):
                ct = CTYPE[self.dtype(ref)]
                load = (f"p{i}[j]" if variant == "contig"
                        else f"*(const {ct} *)(b{i} + j * s{i})")
                lines.append(f"const {ct} x{i} = {load};")
        for node in self.grp.nodes:
            lines += self.node_stmts(node, self.grp.ops[node.out])
        for k, ref in enumerate(self.elem_outputs()):
            lines.append(f"q{k}[j] = v{ref.index};")
        return lines

    def elem_outputs(self) -> list:
        red = self.grp.reduction
        return [r for r in self.grp.outputs if red is None or r.index != red.out]

    def red_value(self) -> str:
        src = self.grp.reduction.args[0]
        return self.name(src)

    def inner(self, variant: str) -> list:
        """The loop over one row of n elements (pointer setup included)."""
        lines = []
        for i, ref in enumerate(self.grp.inputs):
            ct = CTYPE[self.dtype(ref)]
            if self.kinds[i] in ("full", "other") and variant == "contig":
                lines.append(f"const {ct} *p{i} = (const {ct} *)b{i};")
            elif self.kinds[i] == "inner":
                lines.append(f"const {ct} c{i} = *(const {ct} *)b{i};")
        body = ["    " + s for s in self.body(variant)]
        red = self.grp.reduce
        if red is None:
            lines += ["#pragma omp simd", "for (npy_intp j = 0; j < n; j++) {", *body, "}"]
        elif red[0] in ("sum", "mean"):
            lines += [f"for (npy_intp j0 = 0; j0 < n; j0 += {BLOCK}) {{",
                      f"    const npy_intp j1 = n - j0 < {BLOCK} ? n : j0 + {BLOCK};",
                      "    double acc = 0.0;",
                      "    #pragma omp simd reduction(+:acc)",
                      "    for (npy_intp j = j0; j < j1; j++) {",
                      *["    " + s for s in body],
                      f"        acc += (double){self.red_value()};",
                      "    }",
                      "    pj_pw_push(&pw, acc);",
                      "}"]
        else:
            ct = CTYPE[self.grp.reduction.meta.dtype]
            cmp = ">" if red[0] == "max" else "<"
            init = "-INFINITY" if red[0] == "max" else "INFINITY"
            v = self.red_value()
            lines += ["{",
                      f"    {ct} m = {init};",
                      "    int nan = 0;",
                      f"    #pragma omp simd reduction({red[0]}:m) reduction(|:nan)",
                      "    for (npy_intp j = 0; j < n; j++) {",
                      *body,
                      f"        m = {v} {cmp} m ? {v} : m;",
                      f"        nan |= {v} != {v};",
                      "    }",
                      f"    if (m {cmp} rm) rm = m;",
                      "    rnan |= nan;",
                      "}"]
        return lines

    def function(self) -> str:
        g, k, nd, ndi = self.grp, self.grp.id, self.nd, self.ndi
        nin = len(g.inputs)
        L = [f"/* {g} */",
             "static PyObject *",
             f"pj_g{k}(PyObject *self, PyObject *const *args, Py_ssize_t nargs)",
             "{",
             "    (void)self;",
             f"    if (nargs != {nin})",
             f"        return pj_fallback({k}, args, nargs);",
             f"    npy_intp shape[{ndi}];",
             f"    for (int d = 0; d < {ndi}; d++)",
             "        shape[d] = 1;"]
        arrays = []
        for i, ref in enumerate(g.inputs):
            m = self.graph.meta(ref)
            ct = CTYPE[m.dtype]
            if self.kinds[i] == "scalar":
                L += [f"    double d{i};",
                      f"    if (pj_double(args[{i}], &d{i}) < 0)",
                      f"        return pj_fallback({k}, args, nargs);"]
            else:
                arrays.append(i)
                L += [f"    PyArrayObject *a{i} = pj_array(args[{i}], {NPYTYPE[m.dtype]}, {ndi});",
                      f"    if (a{i} == NULL || pj_bcast(a{i}, shape, {ndi}) < 0)",
                      f"        return pj_fallback({k}, args, nargs);"]
        L.append("    npy_intp N = 1, rows = 1;")
        L.append(f"    for (int d = 0; d < {ndi}; d++)")
        L.append("        N *= shape[d];")
        L.append(f"    for (int d = 0; d < {ndi} - 1; d++)")
        L.append("        rows *= shape[d];")
        L.append(f"    const npy_intp n = shape[{ndi} - 1];")
        for i in arrays:
            L.append(f"    npy_intp st{i}[{ndi}];")
            L.append(f"    pj_strides(a{i}, shape, {ndi}, st{i});")
        for i, ref in enumerate(g.inputs):
            ct = CTYPE[self.dtype(ref)]
            if self.kinds[i] == "scalar":
                L.append(f"    const {ct} c{i} = ({ct})d{i};")
            elif self.kinds[i] == "one":
                L.append(f"    const {ct} c{i} = *(const {ct} *)PyArray_DATA(a{i});")
        # outputs
        outs = self.elem_outputs()
        L.append(f"    PyObject *out[{len(g.outputs)}] = {{NULL}};")
        for j, ref in enumerate(outs):
            t = self.graph.meta(ref).dtype
            L += [f"    out[{j}] = PyArray_SimpleNew({nd}, shape, {NPYTYPE[t]});",
                  f"    if (out[{j}] == NULL)",
                  "        goto fail;",
                  f"    {CTYPE[t]} *const q{j}base = ({CTYPE[t]} *)PyArray_DATA((PyArrayObject *)out[{j}]);"]
        red = g.reduce
        if red is not None:
            rt = g.reduction.meta.dtype
            rnd = (nd if red[2] else 0) if red[1] == "all" else (nd if red[2] else nd - 1)
            L.append(f"    npy_intp rshape[{max(rnd, 1)}];")
            if red[1] == "all":
                L.append(f"    for (int d = 0; d < {rnd}; d++) rshape[d] = 1;")
            else:
                L.append(f"    for (int d = 0; d < {nd - 1}; d++) rshape[d] = shape[d];")
                if red[2]:
                    L.append(f"    rshape[{nd - 1}] = 1;")
            j = len(outs)
            L += [f"    out[{j}] = PyArray_SimpleNew({rnd}, rshape, {NPYTYPE[rt]});",
                  f"    if (out[{j}] == NULL)",
                  "        goto fail;",
                  f"    {CTYPE[rt]} *const rout = ({CTYPE[rt]} *)PyArray_DATA((PyArrayObject *)out[{j}]);",
                  "    pj_pw pw = {{0}, 0};",
                  f"    {CTYPE[rt]} rm = {'-INFINITY' if red[0] == 'max' else 'INFINITY'};",
                  "    int rnan = 0;",
                  "    (void)pw; (void)rm; (void)rnan;"]
        # NumPy reports divide-by-zero, overflow and invalid results (a warning, or an error
        # under np.errstate): when the kernel raised one of those flags, the group runs again
        # in NumPy, which reports it exactly as plain NumPy would.
        L.append("    feclearexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_INVALID);")
        L.append("    PyThreadState *ts = N > 32768 ? PyEval_SaveThread() : NULL;")
        flat_ok = all(kd in ("scalar", "one", "full") for kd in self.kinds) and (
            red is None or red[1] == "all")
        if flat_ok:
            conds = " && ".join([f"pj_flat(a{i}, shape, {ndi})" for i in arrays
                                 if self.kinds[i] == "full"] or ["1"])
            L.append(f"    if ({conds}) {{")
            L.append("        {")
            L.append("            const npy_intp n = N;")
            for i in arrays:
                L.append(f"            const char *b{i} = PyArray_BYTES(a{i}); (void)b{i};")
            for j in range(len(outs)):
                L.append(f"            {CTYPE[self.graph.meta(outs[j]).dtype]} *const q{j} = q{j}base;")
            L += ["            " + s for s in self.inner("contig")]
            L.append("        }")
            L.append("    } else {")
        else:
            L.append("    {")
        # rows
        contig = " && ".join([f"(n <= 1 || st{i}[{ndi} - 1] == (npy_intp)sizeof({CTYPE[self.dtype(g.inputs[i])]}))"
                              for i in arrays if self.kinds[i] in ("full", "other")] or ["1"])
        L += [f"        const int contig = {contig};",
              f"        npy_intp idx[{ndi}] = {{0}};",
              "        for (npy_intp r = 0; r < rows; r++) {"]
        for i in arrays:
            L.append(f"            const char *b{i} = PyArray_BYTES(a{i});")
            L.append(f"            for (int d = 0; d < {ndi} - 1; d++) b{i} += idx[d] * st{i}[d];")
            L.append(f"            const npy_intp s{i} = st{i}[{ndi} - 1]; (void)s{i};")
        for j in range(len(outs)):
            L.append(f"            {CTYPE[self.graph.meta(outs[j]).dtype]} *const q{j} = q{j}base + r * n;")
        if red is not None and red[1] == "last":
            L.append("            pw.mask = 0; rm = " + ("-INFINITY" if red[0] == "max" else "INFINITY")
                     + "; rnan = 0;")
        L.append("            if (contig) {")
        L += ["                " + s for s in self.inner("contig")]
        L.append("            } else {")
        L += ["                " + s for s in self.inner("strided")]
        L.append("            }")
        if red is not None and red[1] == "last":
            L.append("            " + self.store_red("r", "n"))
        L += [f"            for (int d = {ndi} - 2; d >= 0; d--) {{",
              "                if (++idx[d] < shape[d])",
              "                    break;",
              "                idx[d] = 0;",
              "            }",
              "        }",
              "    }"]
        if red is not None and red[1] == "all":
            L.append("    " + self.store_red("0", "N"))
        L.append("    if (ts != NULL)")
        L.append("        PyEval_RestoreThread(ts);")
        L.append("    if (fetestexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_INVALID)) {")
        L.append(f"        for (int j = 0; j < {len(g.outputs)}; j++)")
        L.append("            Py_CLEAR(out[j]);")
        L.append(f"        return pj_fallback({k}, args, nargs);")
        L.append("    }")
        # results
        for j, ref in enumerate(g.outputs):
            if not self.graph.meta(ref).is_array:
                L.append(f"    out[{j}] = PyArray_Return((PyArrayObject *)out[{j}]);")
                L.append(f"    if (out[{j}] == NULL) goto fail;")
        if len(g.outputs) == 1:
            L.append("    return out[0];")
        else:
            L.append(f"    PyObject *tuple = PyTuple_New({len(g.outputs)});")
            L.append("    if (tuple == NULL) goto fail;")
            for j in range(len(g.outputs)):
                L.append(f"    PyTuple_SET_ITEM(tuple, {j}, out[{j}]);")
            L.append("    return tuple;")
        L += ["fail:",
              f"    for (int j = 0; j < {len(g.outputs)}; j++)",
              "        Py_XDECREF(out[j]);",
              "    return NULL;",
              "}"]
        return "\n".join(L) + "\n"

    def store_red(self, index: str, count: str) -> str:
        op = self.grp.reduce[0]
        ct = CTYPE[self.grp.reduction.meta.dtype]
        if op == "sum":
            return f"rout[{index}] = ({ct})pj_pw_total(&pw);"
        if op == "mean":
            return f"rout[{index}] = ({ct})(pj_pw_total(&pw) / (double){count});"
        return f"rout[{index}] = rnan ? ({ct})NAN : rm;"


def render_module(graph, groups: list, vector_math: bool = True) -> str:
    """The C source of the module holding every group's function."""
    parts = [PRELUDE]
    if vector_math:
        parts.append(VECTOR_DECLS)
    parts.append(HELPERS)
    parts.append(f"static PyObject *pj_fallbacks[{max(len(groups), 1)}];\n")
    parts.append(FALLBACK)
    for grp in groups:
        parts.append(_Group(graph, grp).function())
    methods = "".join(
        f'    {{"g{g.id}", (PyCFunction)(void (*)(void))pj_g{g.id}, METH_FASTCALL, NULL}},\n'
        for g in groups)
    parts.append(MODULE.replace("@METHODS@", methods).replace("@NGROUPS@", str(len(groups))))
    return "\n".join(parts)


FALLBACK = r"""
/* Run group k by NumPy (set from Python): for inputs the kernel does not take. */
static PyObject *pj_fallback(int k, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *fn = pj_fallbacks[k];
    if (fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "pijit: kernel fallback not set");
        return NULL;
    }
    return PyObject_Vectorcall(fn, args, (size_t)nargs, NULL);
}
"""

MODULE = r"""
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
    Py_INCREF(fn);
    Py_XSETREF(pj_fallbacks[k], fn);
    Py_RETURN_NONE;
}

static PyMethodDef pj_methods[] = {
@METHODS@    {"set_fallback", pj_set_fallback, METH_VARARGS, "set_fallback(k, fn)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef pj_module_def = {
    PyModuleDef_HEAD_INIT, "pijit_kernels", "pijit fused kernels of one graph", -1, pj_methods,
};
static char pj_module_name[256];

/* The cffi entry point (called without the GIL): registers sys.modules[name]. */
int pijit_kernels_init(const char *name)
{
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = -1;
    if (_import_array() >= 0) {
        strncpy(pj_module_name, name, sizeof(pj_module_name) - 1);
        pj_module_def.m_name = pj_module_name;
        PyObject *m = PyModule_Create(&pj_module_def);
        if (m != NULL) {
            rc = PyDict_SetItemString(PyImport_GetModuleDict(), name, m);
            Py_DECREF(m);
        }
    }
    if (rc < 0)
        PyErr_Print();
    PyGILState_Release(g);
    return rc;
}
"""
