/* guards.c -- compile a cache entry's guard program from Python tuples and
 * run it against a frame that has not started yet.
 *
 * A guard program is a list of sources (how to fetch a value: a local slot,
 * a global, a closure cell, an attribute or item of an earlier source) and a
 * list of checks (predicates on one source each).  Sources are evaluated
 * lazily, at most once per check of an entry.  Any failure to fetch a value
 * (missing global, empty cell, attribute error, index out of range) makes the
 * entry fail; it is never an error of the call, except for an exception that is not an
 * Exception (KeyboardInterrupt raised by a signal handler that ran inside a guard's Python
 * code, SystemExit): that is the program's business and propagates, as plain Python would
 * raise it at the start of the function.
 */
#include "pijit.h"

/* ---- building ---------------------------------------------------------- */

static int
as_index(PyObject *o, Py_ssize_t *out, const char *what)
{
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s",
                     what, Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = PyLong_AsSsize_t(o);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int
as_int(PyObject *o, int *out, const char *what)
{
    Py_ssize_t v;
    if (as_index(o, &v, what) < 0)
        return -1;
    if (v < INT_MIN || v > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "%s out of range", what);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Check that `t` is a tuple of length `n` whose first item is a str; return
 * that str as a C string, or NULL with TypeError. */
static const char *
tuple_kind(PyObject *t, Py_ssize_t n, const char *what)
{
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 1
        || !PyUnicode_Check(PyTuple_GET_ITEM(t, 0))) {
        PyErr_Format(PyExc_TypeError, "%s must be a tuple (kind, ...), got %R",
                     what, t);
        return NULL;
    }
    if (n >= 0 && PyTuple_GET_SIZE(t) != n) {
        PyErr_Format(PyExc_TypeError, "%s %R must have %zd items", what, t, n);
        return NULL;
    }
    return PyUnicode_AsUTF8(PyTuple_GET_ITEM(t, 0));
}

static Py_ssize_t
expected_len(const char *kind, const char *const *names, const Py_ssize_t *lens)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(kind, names[i]) == 0)
            return lens[i];
    return -1;
}

static int
build_source(Source *s, PyObject *t, Py_ssize_t index, Py_ssize_t nargs,
             Py_ssize_t nfree)
{
    static const char *const names[] = {"local", "global", "cell", "attr", "item", "const",
                                         "dictitem", NULL};
    static const Py_ssize_t lens[] = {2, 2, 2, 3, 3, 2, 3};
    const char *kind = tuple_kind(t, -1, "source");
    if (kind == NULL)
        return -1;
    Py_ssize_t want = expected_len(kind, names, lens);
    if (want < 0) {
        PyErr_Format(PyExc_ValueError, "unknown source kind %R", PyTuple_GET_ITEM(t, 0));
        return -1;
    }
    if (PyTuple_GET_SIZE(t) != want) {
        PyErr_Format(PyExc_TypeError, "source %R must have %zd items", t, want);
        return -1;
    }
    PyObject *a1 = PyTuple_GET_ITEM(t, 1);
    if (strcmp(kind, "const") == 0) {   /* an object held by the guard (hash_args) */
        s->kind = SRC_CONST;
        s->name = Py_NewRef(a1);
        return 0;
    }
    if (strcmp(kind, "global") == 0) {
        if (!PyUnicode_Check(a1)) {
            PyErr_Format(PyExc_TypeError, "global name must be a str in %R", t);
            return -1;
        }
        s->kind = SRC_GLOBAL;
        s->name = Py_NewRef(a1);
        PyUnicode_InternInPlace(&s->name);
        return 0;
    }
    if (as_index(a1, &s->arg, "source index") < 0)
        return -1;
    if (strcmp(kind, "local") == 0) {
        s->kind = SRC_LOCAL;
        if (s->arg < 0 || s->arg >= nargs) {
            PyErr_Format(PyExc_ValueError, "local slot %zd out of range (%zd argument slots)",
                         s->arg, nargs);
            return -1;
        }
        return 0;
    }
    if (strcmp(kind, "cell") == 0) {
        s->kind = SRC_CELL;
        if (s->arg < 0 || s->arg >= nfree) {
            PyErr_Format(PyExc_ValueError, "cell index %zd out of range (%zd free vars)",
                         s->arg, nfree);
            return -1;
        }
        return 0;
    }
    /* attr / item: arg is the parent source index */
    if (s->arg < 0 || s->arg >= index) {
        PyErr_Format(PyExc_ValueError, "parent index %zd of source %zd must refer to an earlier source",
                     s->arg, index);
        return -1;
    }
    PyObject *a2 = PyTuple_GET_ITEM(t, 2);
    if (strcmp(kind, "dictitem") == 0) {   /* value of key a2 in an exact dict */
        s->kind = SRC_DICTITEM;
        s->name = Py_NewRef(a2);
        return 0;
    }
    if (strcmp(kind, "attr") == 0) {
        if (!PyUnicode_Check(a2)) {
            PyErr_Format(PyExc_TypeError, "attribute name must be a str in %R", t);
            return -1;
        }
        s->kind = SRC_ATTR;
        s->name = Py_NewRef(a2);
        PyUnicode_InternInPlace(&s->name);
        return 0;
    }
    s->kind = SRC_ITEM;
    return as_index(a2, &s->index, "item index");
}

static int
build_array_check(Check *c, PyObject *t)
{
    PyObject *shape = PyTuple_GET_ITEM(t, 4);
    Py_ssize_t ndim;
    if (as_int(PyTuple_GET_ITEM(t, 2), &c->type_num, "type_num") < 0
        || as_index(PyTuple_GET_ITEM(t, 3), &ndim, "ndim") < 0
        || as_int(PyTuple_GET_ITEM(t, 5), &c->flags_mask, "flags_mask") < 0
        || as_int(PyTuple_GET_ITEM(t, 6), &c->flags_value, "flags_value") < 0)
        return -1;
    if (ndim < 0 || ndim > 64) {
        PyErr_Format(PyExc_ValueError, "bad ndim %zd", ndim);
        return -1;
    }
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) != ndim) {
        PyErr_Format(PyExc_ValueError, "shape must be a tuple of %zd ints, got %R", ndim, shape);
        return -1;
    }
    c->n = ndim;
    c->shape = PyMem_Malloc(sizeof(npy_intp) * (ndim ? ndim : 1));
    if (c->shape == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < ndim; i++) {
        Py_ssize_t d;
        if (as_index(PyTuple_GET_ITEM(shape, i), &d, "dimension") < 0)
            return -1;
        if (d < -1) {
            PyErr_Format(PyExc_ValueError, "dimension %zd must be >= -1", d);
            return -1;
        }
        c->shape[i] = (npy_intp)d;
    }
    return 0;
}

/* ("items", i, kind, (float64, int64, bool_)): see check_items. */
static int
build_items_check(Check *c, PyObject *kind, PyObject *types)
{
    Py_UCS4 k = PyUnicode_Check(kind) && PyUnicode_GET_LENGTH(kind) == 1
                ? PyUnicode_READ_CHAR(kind, 0) : 0;
    c->kind = CHK_ITEMS;
    if (k != 'f' && k != 'i' && k != 'b') {
        PyErr_Format(PyExc_ValueError, "items check needs kind 'f', 'i' or 'b', got %R", kind);
        return -1;
    }
    if (!PyTuple_Check(types) || PyTuple_GET_SIZE(types) != 3
        || !PyType_Check(PyTuple_GET_ITEM(types, 0)) || !PyType_Check(PyTuple_GET_ITEM(types, 1))
        || !PyType_Check(PyTuple_GET_ITEM(types, 2))) {
        PyErr_Format(PyExc_TypeError, "items check needs 3 scalar types, got %R", types);
        return -1;
    }
    c->n = (Py_ssize_t)k;
    c->obj = Py_NewRef(types);
    return 0;
}

static int
build_check(Check *c, PyObject *t, Py_ssize_t nsources)
{
    static const char *const names[] = {"type", "id", "eq", "len", "array", "call",
                                        "distinct", "items", NULL};
    static const Py_ssize_t lens[] = {3, 3, 3, 3, 7, 3, 3, 4};
    const char *kind = tuple_kind(t, -1, "check");
    if (kind == NULL)
        return -1;
    Py_ssize_t want = expected_len(kind, names, lens);
    if (want < 0) {
        PyErr_Format(PyExc_ValueError, "unknown check kind %R", PyTuple_GET_ITEM(t, 0));
        return -1;
    }
    if (PyTuple_GET_SIZE(t) != want) {
        PyErr_Format(PyExc_TypeError, "check %R must have %zd items", t, want);
        return -1;
    }
    if (as_index(PyTuple_GET_ITEM(t, 1), &c->src, "check source index") < 0)
        return -1;
    if (c->src < 0 || c->src >= nsources) {
        PyErr_Format(PyExc_ValueError, "check %R refers to source %zd of %zd", t, c->src, nsources);
        return -1;
    }
    PyObject *a2 = PyTuple_GET_ITEM(t, 2);
    if (strcmp(kind, "items") == 0)
        return build_items_check(c, a2, PyTuple_GET_ITEM(t, 3));
    switch (kind[0]) {
    case 't':
        if (!PyType_Check(a2)) {
            PyErr_Format(PyExc_TypeError, "type check needs a type, got %R", a2);
            return -1;
        }
        c->kind = CHK_TYPE;
        break;
    case 'i': c->kind = CHK_ID; break;
    case 'e': c->kind = CHK_EQ; break;
    case 'l':
        c->kind = CHK_LEN;
        if (as_index(a2, &c->n, "length") < 0)
            return -1;
        if (c->n < 0) {
            PyErr_SetString(PyExc_ValueError, "length must be >= 0");
            return -1;
        }
        return 0;
    case 'a':
        c->kind = CHK_ARRAY;
        return build_array_check(c, t);
    case 'd':   /* ("distinct", i, j): source i is not the object source j is */
        c->kind = CHK_DISTINCT;
        if (as_index(a2, &c->n, "other source index") < 0)
            return -1;
        if (c->n < 0 || c->n >= nsources) {
            PyErr_Format(PyExc_ValueError, "check %R refers to source %zd of %zd", t, c->n,
                         nsources);
            return -1;
        }
        return 0;
    case 'c':
        if (!PyCallable_Check(a2)) {
            PyErr_Format(PyExc_TypeError, "call check needs a callable, got %R", a2);
            return -1;
        }
        c->kind = CHK_CALL;
        break;
    }
    c->obj = Py_NewRef(a2);
    return 0;
}

static void
entry_free(Entry *e)
{
    for (Py_ssize_t i = 0; i < e->nsources; i++)
        Py_XDECREF(e->sources[i].name);
    for (Py_ssize_t i = 0; i < e->nchecks; i++) {
        Py_XDECREF(e->checks[i].obj);
        PyMem_Free(e->checks[i].shape);
    }
    PyMem_Free(e->sources);
    PyMem_Free(e->checks);
    Py_XDECREF(e->fn);
    Py_XDECREF(e->orig_sources);
    Py_XDECREF(e->orig_checks);
    PyMem_Free(e);
}

static void
entry_decref(Entry *e)
{
    if (--e->refcnt == 0)
        entry_free(e);
}

/* Visit every object the entry owns (its CodeState's tp_traverse). */
static int
entry_traverse(Entry *e, visitproc visit, void *arg)
{
    for (Py_ssize_t i = 0; i < e->nsources; i++)
        Py_VISIT(e->sources[i].name);
    for (Py_ssize_t i = 0; i < e->nchecks; i++)
        Py_VISIT(e->checks[i].obj);
    Py_VISIT(e->fn);
    Py_VISIT(e->orig_sources);
    Py_VISIT(e->orig_checks);
    return 0;
}

/* New entry with refcnt 1, or NULL with an exception. */
static Entry *
entry_new(PyCodeObject *code, Py_ssize_t nargs, PyObject *sources,
          PyObject *checks, PyObject *fn)
{
    if (!PyTuple_Check(sources) || !PyTuple_Check(checks)) {
        PyErr_SetString(PyExc_TypeError, "sources and checks must be tuples");
        return NULL;
    }
    if (fn != Py_None && !PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "entry fn must be a function or None, got %R", fn);
        return NULL;
    }
    Entry *e = PyMem_Calloc(1, sizeof(Entry));
    if (e == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    e->refcnt = 1;
    Py_ssize_t ns = PyTuple_GET_SIZE(sources), nc = PyTuple_GET_SIZE(checks);
    e->sources = PyMem_Calloc(ns ? ns : 1, sizeof(Source));
    e->checks = PyMem_Calloc(nc ? nc : 1, sizeof(Check));
    if (e->sources == NULL || e->checks == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < ns; i++) {
        e->nsources = i + 1;   /* so entry_free releases what was built */
        if (build_source(&e->sources[i], PyTuple_GET_ITEM(sources, i), i,
                         nargs, code->co_nfreevars) < 0)
            goto fail;
    }
    for (Py_ssize_t i = 0; i < nc; i++) {
        e->nchecks = i + 1;
        if (build_check(&e->checks[i], PyTuple_GET_ITEM(checks, i), ns) < 0)
            goto fail;
    }
    e->fn = fn == Py_None ? NULL : Py_NewRef(fn);
    e->orig_sources = Py_NewRef(sources);
    e->orig_checks = Py_NewRef(checks);
    return e;
fail:
    entry_free(e);
    return NULL;
}

/* ---- checking ---------------------------------------------------------- */

/* A fetch or check that raised makes the entry fail (0), unless the exception is not an
 * Exception: then it stays set and the call raises it (-1). */
static int
guard_error(void)
{
    if (PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

/* Value cache of one entry check: vals[i] is a strong reference once
 * source i has been fetched; st[i] is 0 (not yet), 1 (ok) or 2 (failed). */
typedef struct {
    PyObject **vals;
    char *st;
} Values;

/* d[name] as LOAD_GLOBAL reads it: an exact dict directly, anything else (a dict subclass
 * with its own __getitem__ or __missing__) through its __getitem__. */
static PyObject *
dict_lookup(PyObject *d, PyObject *name)
{
    PyObject *v;
    if (PyDict_CheckExact(d)) {
        v = PyDict_GetItemWithError(d, name);
        Py_XINCREF(v);
    }
    else {
        v = PyObject_GetItem(d, name);
        if (v == NULL && PyErr_ExceptionMatches(PyExc_KeyError))
            PyErr_Clear();
    }
    return v;  /* new ref, or NULL (maybe with an exception) */
}

/* A global as LOAD_GLOBAL reads it (globals, then builtins): new reference, or NULL (maybe
 * with an exception).  Most guards of a call read globals (`np` in the module's globals, a
 * builtin `range` in the globals and then the builtins): 650 instructions of a 6x6
 * cholesky's 11,300 a call (3.11).  A dict's version is unique among dicts and new at each
 * change of its contents (pj_dict_version): when the exact dicts have the versions of the
 * last lookup, they are the dicts it looked in, as they were, and it would find what it
 * found then.  (A lookup runs no code of the user's in a dict of str keys; in another, a
 * key's __eq__ may change a dict: its version then tells, and nothing is kept.) */
static PyObject *
fetch_global(Source *s, PyObject *globals, PyObject *builtins)
{
    int exact = PyDict_CheckExact(globals) && PyDict_CheckExact(builtins);
    uint64_t gv = exact ? pj_dict_version(globals) : 0;
    uint64_t bv = exact ? pj_dict_version(builtins) : 0;
    if (exact && s->found != NULL && gv == s->versions[0] && bv == s->versions[1])
        return Py_NewRef(s->found);
    s->found = NULL;
    PyObject *v = dict_lookup(globals, s->name);
    if (v == NULL && !PyErr_Occurred())
        v = dict_lookup(builtins, s->name);
    if (v != NULL && exact && pj_dict_version(globals) == gv && pj_dict_version(builtins) == bv) {
        s->found = v;
        s->versions[0] = gv;
        s->versions[1] = bv;
    }
    return v;
}

/* An attribute: new reference, or NULL (maybe with an exception).  The attributes of a
 * module (np.sin, math.sqrt: an identity guard each, capture's TRUSTED_MODULES) are the items
 * of its dict: what the last lookup found is kept while the dict keeps its version, as for a
 * global.  Kept only when the lookup returned the dict's own item (not a module __getattr__'s
 * value, nor a descriptor of the module type): an exact module's type is fixed. */
static PyObject *
fetch_attr(Source *s, PyObject *parent)
{
    PyObject *d = PyModule_CheckExact(parent) ? PyModule_GetDict(parent) : NULL;
    int exact = d != NULL && PyDict_CheckExact(d);
    uint64_t dv = exact ? pj_dict_version(d) : 0;
    if (exact && s->found != NULL && dv == s->versions[0])
        return Py_NewRef(s->found);
    s->found = NULL;
    PyObject *v = PyObject_GetAttr(parent, s->name);
    if (v != NULL && exact && pj_dict_version(d) == dv) {
        PyObject *item = PyDict_GetItemWithError(d, s->name);   /* borrowed */
        if (item == NULL && PyErr_Occurred())
            PyErr_Clear();      /* only a cache probe: the value stands */
        if (item == v && pj_dict_version(d) == dv) {
            s->found = v;
            s->versions[0] = dv;
        }
    }
    return v;
}

/* Fetch source i: new reference, or NULL on failure (with an exception set only when it
 * must propagate: see guard_error). */
static PyObject *
fetch_source(Entry *e, Py_ssize_t i, _PyInterpreterFrame *frame, Values *vs);

static PyObject *
fetch_uncached(Entry *e, Source *s, _PyInterpreterFrame *frame, Values *vs)
{
    PyObject *v = NULL, *parent;
    switch (s->kind) {
    case SRC_LOCAL:
        v = frame->localsplus[s->arg];
        Py_XINCREF(v);
        return v;
    case SRC_CONST:
        return Py_NewRef(s->name);
    case SRC_GLOBAL:
        v = fetch_global(s, frame->f_globals, frame->f_builtins);
        break;
    case SRC_CELL: {
        PyFunctionObject *func = pj_frame_func(frame);
        PyObject *closure = func ? func->func_closure : NULL;
        if (closure == NULL || !PyTuple_Check(closure) || s->arg >= PyTuple_GET_SIZE(closure))
            return NULL;
        PyObject *cell = PyTuple_GET_ITEM(closure, s->arg);
        if (!PyCell_Check(cell))
            return NULL;
        v = PyCell_GET(cell);
        Py_XINCREF(v);
        return v;
    }
    case SRC_ATTR:
        parent = fetch_source(e, s->arg, frame, vs);
        if (parent == NULL)
            return NULL;
        v = fetch_attr(s, parent);
        break;
    case SRC_DICTITEM:
        parent = fetch_source(e, s->arg, frame, vs);
        if (parent == NULL || !PyDict_CheckExact(parent))
            return NULL;
        v = PyDict_GetItemWithError(parent, s->name);   /* borrowed */
        Py_XINCREF(v);
        break;
    case SRC_ITEM: {
        parent = fetch_source(e, s->arg, frame, vs);
        if (parent == NULL)
            return NULL;
        Py_ssize_t size, k = s->index;
        if (PyTuple_CheckExact(parent))
            size = PyTuple_GET_SIZE(parent);
        else if (PyList_CheckExact(parent))
            size = PyList_GET_SIZE(parent);
        else
            return NULL;
        if (k < 0)
            k += size;
        if (k < 0 || k >= size)
            return NULL;
        v = PyTuple_CheckExact(parent) ? PyTuple_GET_ITEM(parent, k)
                                       : PyList_GET_ITEM(parent, k);
        Py_INCREF(v);
        return v;
    }
    }
    if (v == NULL && PyErr_Occurred() && guard_error() == 0)
        return NULL;
    return v;
}

/* Returns a borrowed reference owned by `vs`, or NULL on failure (see fetch_uncached). */
static PyObject *
fetch_source(Entry *e, Py_ssize_t i, _PyInterpreterFrame *frame, Values *vs)
{
    if (vs->st[i] == 0) {
        PyObject *v = fetch_uncached(e, &e->sources[i], frame, vs);
        if (v == NULL && PyErr_Occurred())
            return NULL;        /* not cached: the check stops here anyway */
        vs->vals[i] = v;
        vs->st[i] = v ? 1 : 2;
    }
    return vs->st[i] == 1 ? vs->vals[i] : NULL;
}

/* 1 equal, 0 not, -1 an exception to propagate. */
static int
check_eq(PyObject *v, PyObject *want)
{
    if (Py_TYPE(v) != Py_TYPE(want))
        return 0;
    if (PyFloat_Check(v)) {
        double a = PyFloat_AS_DOUBLE(v), b = PyFloat_AS_DOUBLE(want);
        return memcmp(&a, &b, sizeof(double)) == 0;
    }
    if (PyComplex_Check(v)) {
        Py_complex a = PyComplex_AsCComplex(v), b = PyComplex_AsCComplex(want);
        return memcmp(&a.real, &b.real, sizeof(double)) == 0
            && memcmp(&a.imag, &b.imag, sizeof(double)) == 0;
    }
    int r = PyObject_RichCompareBool(v, want, Py_EQ);
    return r < 0 ? guard_error() : r;
}

static int
check_array(Check *c, PyObject *v)
{
    if (pijit_array_type == NULL || Py_TYPE(v) != pijit_array_type)
        return 0;
    PyArrayObject_fields *a = (PyArrayObject_fields *)v;
    if (a->nd != c->n || a->descr == NULL)
        return 0;
    if (a->descr->type_num != c->type_num || a->descr->byteorder == NPY_OPPBYTE)
        return 0;
    if ((a->flags & c->flags_mask) != c->flags_value)
        return 0;
    for (Py_ssize_t i = 0; i < c->n; i++)
        if (c->shape[i] != -1 && c->shape[i] != a->dimensions[i])
            return 0;
    return 1;
}

/* The dtype np.asarray gives the list v, foretold from its items' exact types, is the
 * check's kind: 'f' (float64: a float or np.float64 among them, or no item), 'i' (int64:
 * else an int or np.int64) or 'b' (bool: only bools and np.bool_).  Any other item (an int
 * past int64, whose dtype NumPy picks by value; another type, a list, an array) fails.
 * pijit/guards.py's items_dtype is the same rule in Python.  Runs no Python
 * code, so the list cannot change under it. */
static int
check_items(Check *c, PyObject *v)
{
    if (!PyList_CheckExact(v))
        return 0;
    PyObject *f64 = PyTuple_GET_ITEM(c->obj, 0), *i64 = PyTuple_GET_ITEM(c->obj, 1),
             *b = PyTuple_GET_ITEM(c->obj, 2);
    Py_ssize_t n = PyList_GET_SIZE(v);
    int has_float = n == 0, has_int = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyList_GET_ITEM(v, i);
        PyObject *t = (PyObject *)Py_TYPE(o);
        if (t == (PyObject *)&PyFloat_Type || t == f64)
            has_float = 1;
        else if (t == (PyObject *)&PyLong_Type) {
            int overflow;
            (void)PyLong_AsLongLongAndOverflow(o, &overflow);   /* an exact int: no error */
            if (overflow)
                return 0;
            has_int = 1;
        }
        else if (t == i64)
            has_int = 1;
        else if (t != (PyObject *)&PyBool_Type && t != b)
            return 0;
    }
    return (has_float ? 'f' : has_int ? 'i' : 'b') == c->n;
}

/* 1 pass, 0 fail, -1 an exception to propagate. */
static int
run_check(Check *c, PyObject *v)
{
    switch (c->kind) {
    case CHK_TYPE:
        return (PyObject *)Py_TYPE(v) == c->obj;
    case CHK_ID:
        return v == c->obj;
    case CHK_EQ:
        return check_eq(v, c->obj);
    case CHK_LEN:
        if (PyTuple_CheckExact(v))
            return PyTuple_GET_SIZE(v) == c->n;
        if (PyList_CheckExact(v))
            return PyList_GET_SIZE(v) == c->n;
        if (PyDict_CheckExact(v))
            return PyDict_GET_SIZE(v) == c->n;
        return 0;
    case CHK_ARRAY:
        return check_array(c, v);
    case CHK_ITEMS:
        return check_items(c, v);
    case CHK_CALL: {
        PyObject *r = PyObject_CallOneArg(c->obj, v);
        if (r == NULL)
            return guard_error();
        int t = PyObject_IsTrue(r);
        Py_DECREF(r);
        return t < 0 ? guard_error() : t;
    }
    }
    return 0;
}

/* 1 if every check of `e` passes for `frame`, else 0; -1 with an exception that must
 * propagate (see guard_error).  The caller holds a reference to `e`. */
static int
entry_check(Entry *e, _PyInterpreterFrame *frame)
{
    enum { NSTACK = 16 };
    PyObject *vbuf[NSTACK];
    char sbuf[NSTACK];
    Values vs = {vbuf, sbuf};
    Py_ssize_t ns = e->nsources;
    if (ns > NSTACK) {
        vs.vals = PyMem_Malloc(ns * sizeof(PyObject *));
        vs.st = PyMem_Malloc(ns);
        if (vs.vals == NULL || vs.st == NULL) {
            PyMem_Free(vs.vals);
            PyMem_Free(vs.st);
            PyErr_NoMemory();
            return -1;
        }
    }
    memset(vs.st, 0, ns);
    int ok = 1;
    for (Py_ssize_t i = 0; i < e->nchecks && ok == 1; i++) {
        Check *c = &e->checks[i];
        PyObject *v = fetch_source(e, c->src, frame, &vs);
        if (v != NULL && c->kind == CHK_DISTINCT) {
            PyObject *w = fetch_source(e, c->n, frame, &vs);
            ok = w != NULL ? v != w : PyErr_Occurred() ? -1 : 0;
        }
        else
            ok = v != NULL ? run_check(c, v) : PyErr_Occurred() ? -1 : 0;
    }
    for (Py_ssize_t i = 0; i < ns; i++)
        if (vs.st[i] == 1)
            Py_DECREF(vs.vals[i]);
    if (vs.vals != vbuf) {
        PyMem_Free(vs.vals);
        PyMem_Free(vs.st);
    }
    return ok;
}
