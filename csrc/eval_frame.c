/* eval_frame.c -- pijit's PEP 523 frame evaluation hook (CPython 3.11).
 *
 * The hook looks at every frame while it is installed.  Frames of codes that
 * were mark()ed get their cache entries walked in C (guards.c); a hit calls
 * the entry's transformed function with the frame's argument slots and
 * returns its result as the frame's result (the caller, _PyEval_Vector, then
 * clears and pops the unevaluated frame).  A miss calls the Python callback
 * that compiles a new entry.  Anything else is evaluated by the previously
 * installed eval function.
 *
 * The hook is installed only while a Wrapper call (or install()) is active,
 * because any installed hook stops 3.11 from inlining Python-to-Python calls.
 *
 * Everything here runs with the GIL held; the only cffi entry point is
 * pijit_init_module(), which creates the real extension module
 * `pijit._eval_frame`.
 */
#include "pijit.h"

/* ---- global state (protected by the GIL) ------------------------------- */

static Py_ssize_t extra_index = -1;
static PyObject *compile_callback = NULL;         /* strong or NULL */
static int wrapper_enabled = 1;
static Py_ssize_t hook_depth = 0;
static _PyFrameEvalFunction prev_eval = NULL;     /* chained to when plain */
static _Thread_local int tls_compiling = 0;

static PyObject *pijit_hook(PyThreadState *, _PyInterpreterFrame *, int);

/* Mirror of CPython 3.11's private _PyCodeObjectExtra (Objects/codeobject.c),
 * read directly so the hot path does not pay for _PyCode_GetExtra's checks. */
typedef struct {
    Py_ssize_t ce_size;
    void *ce_extras[1];
} CodeExtraArray;

static inline CodeExtra *
get_extra(PyCodeObject *code)
{
    CodeExtraArray *x = (CodeExtraArray *)code->co_extra;
    if (x == NULL || extra_index < 0 || extra_index >= x->ce_size)
        return NULL;
    return (CodeExtra *)x->ce_extras[extra_index];
}

static Py_ssize_t
code_nargs(PyCodeObject *co)
{
    return co->co_argcount + co->co_kwonlyargcount
        + ((co->co_flags & CO_VARARGS) ? 1 : 0)
        + ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
}

/* Detach and release every entry.  Releasing may run arbitrary code, so the
 * array is detached first. */
static void
extra_clear_entries(CodeExtra *ex)
{
    Entry **arr = ex->entries;
    Py_ssize_t n = ex->nentries;
    ex->entries = NULL;
    ex->nentries = ex->capacity = 0;
    ex->version++;
    for (Py_ssize_t i = 0; i < n; i++)
        entry_decref(arr[i]);
    PyMem_Free(arr);
}

/* freefunc of the code extra: the code object is being deallocated. */
static void
extra_free(void *p)
{
    CodeExtra *ex = (CodeExtra *)p;
    if (ex == NULL)
        return;
    extra_clear_entries(ex);
    PyMem_Free(ex);
}

static int
ensure_extra_index(void)
{
    if (extra_index < 0) {
        extra_index = _PyEval_RequestCodeExtraIndex(extra_free);
        if (extra_index < 0) {
            PyErr_SetString(PyExc_RuntimeError, "no code extra index left");
            return -1;
        }
    }
    return 0;
}

/* Accept a code object or a function (its __code__); borrowed result. */
static PyCodeObject *
as_code(PyObject *o)
{
    if (PyCode_Check(o))
        return (PyCodeObject *)o;
    if (PyFunction_Check(o))
        return (PyCodeObject *)PyFunction_GET_CODE(o);
    PyErr_Format(PyExc_TypeError, "expected a code object, got %.100s", Py_TYPE(o)->tp_name);
    return NULL;
}

static CodeExtra *
mark_code(PyCodeObject *code)
{
    if (ensure_extra_index() < 0)
        return NULL;
    CodeExtra *ex = get_extra(code);
    if (ex != NULL)
        return ex;
    ex = PyMem_Calloc(1, sizeof(CodeExtra));
    if (ex == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    ex->state = ST_CANDIDATE;
    ex->nargs = code_nargs(code);
    ex->nfree = code->co_nfreevars;
    if (_PyCode_SetExtra((PyObject *)code, extra_index, ex) < 0) {
        PyMem_Free(ex);
        return NULL;
    }
    return ex;
}

/* ---- installing the hook ----------------------------------------------- */

static void
hook_acquire(void)
{
    if (hook_depth++ == 0) {
        PyInterpreterState *interp = PyInterpreterState_Get();
        _PyFrameEvalFunction cur = _PyInterpreterState_GetEvalFrameFunc(interp);
        if (cur != pijit_hook) {
            prev_eval = cur ? cur : _PyEval_EvalFrameDefault;
            _PyInterpreterState_SetEvalFrameFunc(interp, pijit_hook);
        }
    }
}

static void
hook_release(void)
{
    if (--hook_depth == 0) {
        PyInterpreterState *interp = PyInterpreterState_Get();
        /* If someone replaced us meanwhile, leave their function alone. */
        if (_PyInterpreterState_GetEvalFrameFunc(interp) == pijit_hook)
            _PyInterpreterState_SetEvalFrameFunc(interp, prev_eval);
    }
}

/* ---- the hook ---------------------------------------------------------- */

static inline PyObject *
eval_plain(PyThreadState *ts, _PyInterpreterFrame *frame, int throwflag)
{
    return prev_eval(ts, frame, throwflag);
}

static int
same_closure(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    if (a == NULL || b == NULL || PyTuple_GET_SIZE(a) != PyTuple_GET_SIZE(b))
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(a); i++)
        if (PyTuple_GET_ITEM(a, i) != PyTuple_GET_ITEM(b, i))
            return 0;
    return 1;
}

/* The callable to run for `frame` on a hit of `e` (new reference), NULL
 * with an exception on error.  When the frame's function has other globals
 * or closure cells than the entry's function (one code shared by several
 * closures), a function with the frame's globals and cells replaces the
 * entry's.  A transformed code without free variables ignores the closure. */
static PyObject *
fn_for_frame(Entry *e, PyFunctionObject *func)
{
    PyObject *fn = e->fn;
    if (func == NULL || !PyFunction_Check(fn))
        return Py_NewRef(fn);
    PyFunctionObject *g = (PyFunctionObject *)fn;
    int nfree = ((PyCodeObject *)g->func_code)->co_nfreevars;
    if (g->func_globals == func->func_globals
        && (nfree == 0 || same_closure(g->func_closure, func->func_closure)))
        return Py_NewRef(fn);
    Py_ssize_t ncells = func->func_closure ? PyTuple_GET_SIZE(func->func_closure) : 0;
    if (nfree != 0 && nfree != ncells) {
        PyErr_Format(PyExc_RuntimeError,
                     "pijit: entry function %R has %d free variables but %R has %zd cells",
                     fn, nfree, (PyObject *)func, ncells);
        return NULL;
    }
    PyObject *nf = PyFunction_New(g->func_code, func->func_globals);
    if (nf == NULL)
        return NULL;
    if (nfree && PyFunction_SetClosure(nf, func->func_closure) < 0) {
        Py_DECREF(nf);
        return NULL;
    }
    PyFunctionObject *n = (PyFunctionObject *)nf;
    Py_XSETREF(n->func_name, Py_XNewRef(g->func_name));
    Py_XSETREF(n->func_qualname, Py_XNewRef(g->func_qualname));
    e->fn = Py_NewRef(nf);
    Py_DECREF(fn);      /* may run arbitrary code; e is kept alive by caller */
    return nf;
}

/* Move `e` (at index i, if still there) to the front of the entry array. */
static void
move_to_front(CodeExtra *ex, Entry *e, Py_ssize_t i)
{
    if (i >= ex->nentries || ex->entries[i] != e) {
        for (i = 0; i < ex->nentries && ex->entries[i] != e; i++)
            ;
        if (i == ex->nentries)
            return;     /* removed by a reset meanwhile */
    }
    if (i == 0)
        return;
    memmove(&ex->entries[1], &ex->entries[0], i * sizeof(Entry *));
    ex->entries[0] = e;
    ex->version++;
}

static PyObject *
call_with_slots(PyObject *fn, _PyInterpreterFrame *frame, Py_ssize_t n)
{
    return PyObject_Vectorcall(fn, frame->localsplus, (size_t)n, NULL);
}

/* Cache miss of a CANDIDATE/CALLABLE code: ask the Python callback. */
static PyObject *
on_miss(PyThreadState *ts, _PyInterpreterFrame *frame, CodeExtra *ex, Py_ssize_t n)
{
    PyObject *cb = Py_XNewRef(compile_callback);
    if (cb == NULL)
        return eval_plain(ts, frame, 0);
    PyObject *args = PyTuple_New(n);
    if (args == NULL) {
        Py_DECREF(cb);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = frame->localsplus[i];
        PyTuple_SET_ITEM(args, i, Py_NewRef(v ? v : Py_None));
    }
    PyObject *func = frame->f_func ? (PyObject *)frame->f_func : Py_None;
    ex->state = ST_BUILDING;
    int was = tls_compiling;
    tls_compiling = 1;
    PyObject *res = PyObject_CallFunctionObjArgs(cb, func, args, NULL);
    tls_compiling = was;
    Py_DECREF(args);
    Py_DECREF(cb);
    if (ex->state == ST_BUILDING)
        ex->state = ex->nentries ? ST_CALLABLE : ST_CANDIDATE;
    if (res == NULL)
        return NULL;
    if (res == Py_None) {
        Py_DECREF(res);
        return eval_plain(ts, frame, 0);
    }
    PyObject *out = call_with_slots(res, frame, n);
    Py_DECREF(res);
    return out;
}

static PyObject *
dispatch(PyThreadState *ts, _PyInterpreterFrame *frame, CodeExtra *ex)
{
    Py_ssize_t n = ex->nargs;
    uint64_t version = ex->version;
    for (Py_ssize_t i = 0; i < ex->nentries; i++) {
        Entry *e = ex->entries[i];
        e->refcnt++;
        int ok = entry_check(e, frame);
        int changed = ex->version != version;
        if (!ok) {
            entry_decref(e);
            if (changed)        /* entries changed under us: be safe */
                return eval_plain(ts, frame, 0);
            continue;
        }
        ex->hits++;
        move_to_front(ex, e, i);
        if (e->fn == NULL) {            /* "run plain when these guards pass" */
            entry_decref(e);
            return eval_plain(ts, frame, 0);
        }
        PyObject *fn = fn_for_frame(e, frame->f_func);
        entry_decref(e);
        if (fn == NULL)
            return NULL;
        PyObject *res = call_with_slots(fn, frame, n);
        Py_DECREF(fn);
        return res;
    }
    ex->misses++;
    if (ex->state == ST_FROZEN)
        return eval_plain(ts, frame, 0);
    return on_miss(ts, frame, ex, n);
}

#define SKIP_FLAGS (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)

static PyObject *
pijit_hook(PyThreadState *ts, _PyInterpreterFrame *frame, int throwflag)
{
    PyCodeObject *code = frame->f_code;
    CodeExtra *ex = get_extra(code);
    if (ex == NULL || throwflag || (code->co_flags & SKIP_FLAGS)
        || frame->prev_instr != _PyCode_CODE(code) - 1)
        return eval_plain(ts, frame, throwflag);
    ex->calls++;
    if (tls_compiling || ex->state == ST_NEVER_COMPILE || ex->state == ST_BUILDING)
        return eval_plain(ts, frame, throwflag);
    return dispatch(ts, frame, ex);
}

/* ---- Wrapper: a C callable that installs the hook around a call -------- */

typedef struct {
    PyObject_HEAD
    PyObject *fn;
    PyObject *dict;
    vectorcallfunc vectorcall;
} Wrapper;

static PyObject *
wrapper_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *fn = ((Wrapper *)self)->fn;
    if (fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "pijit wrapper was cleared");
        return NULL;
    }
    if (!wrapper_enabled)
        return PyObject_Vectorcall(fn, args, nargsf, kwnames);
    Py_INCREF(fn);
    hook_acquire();
    PyObject *res = PyObject_Vectorcall(fn, args, nargsf, kwnames);
    hook_release();
    Py_DECREF(fn);
    return res;
}

static PyObject *
wrapper_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *fn;
    if (kwds && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Wrapper(fn) takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "Wrapper", 1, 1, &fn))
        return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "Wrapper needs a callable, got %R", fn);
        return NULL;
    }
    Wrapper *w = (Wrapper *)type->tp_alloc(type, 0);
    if (w == NULL)
        return NULL;
    w->fn = Py_NewRef(fn);
    w->vectorcall = wrapper_vectorcall;
    return (PyObject *)w;
}

static int
wrapper_traverse(Wrapper *w, visitproc visit, void *arg)
{
    Py_VISIT(w->fn);
    Py_VISIT(w->dict);
    return 0;
}

static int
wrapper_clear(Wrapper *w)
{
    Py_CLEAR(w->fn);
    Py_CLEAR(w->dict);
    return 0;
}

static void
wrapper_dealloc(Wrapper *w)
{
    PyObject_GC_UnTrack(w);
    wrapper_clear(w);
    Py_TYPE(w)->tp_free((PyObject *)w);
}

static PyObject *
wrapper_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *
wrapper_repr(Wrapper *w)
{
    PyObject *name = NULL;
    if (w->fn) {
        name = PyObject_GetAttrString(w->fn, "__qualname__");
        if (name == NULL || !PyUnicode_Check(name)) {
            PyErr_Clear();
            Py_XDECREF(name);
            name = PyObject_Repr(w->fn);
        }
    }
    if (name == NULL) {
        PyErr_Clear();
        return PyUnicode_FromString("<pijit.jit wrapper>");
    }
    PyObject *r = PyUnicode_FromFormat("<pijit.jit wrapper of %U>", name);
    Py_DECREF(name);
    return r;
}

static PyMemberDef wrapper_members[] = {
    {"fn", T_OBJECT, offsetof(Wrapper, fn), READONLY, "the wrapped callable"},
    {NULL},
};

static PyGetSetDef wrapper_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL},
};

static PyTypeObject WrapperType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pijit._eval_frame.Wrapper",
    .tp_basicsize = sizeof(Wrapper),
    .tp_dealloc = (destructor)wrapper_dealloc,
    .tp_vectorcall_offset = offsetof(Wrapper, vectorcall),
    .tp_repr = (reprfunc)wrapper_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
                | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "Wrapper(fn): call fn with pijit's frame hook installed.",
    .tp_traverse = (traverseproc)wrapper_traverse,
    .tp_clear = (inquiry)wrapper_clear,
    .tp_members = wrapper_members,
    .tp_getset = wrapper_getset,
    .tp_descr_get = wrapper_descr_get,
    .tp_dictoffset = offsetof(Wrapper, dict),
    .tp_new = wrapper_new,
};

/* ---- module functions -------------------------------------------------- */

static CodeExtra *
extra_of(PyObject *o, int create)
{
    PyCodeObject *code = as_code(o);
    if (code == NULL)
        return NULL;
    if (create)
        return mark_code(code);
    return get_extra(code);
}

static PyObject *
m_set_callback(PyObject *m, PyObject *cb)
{
    if (cb != Py_None && !PyCallable_Check(cb)) {
        PyErr_SetString(PyExc_TypeError, "callback must be callable or None");
        return NULL;
    }
    Py_XSETREF(compile_callback, cb == Py_None ? NULL : Py_NewRef(cb));
    Py_RETURN_NONE;
}

static PyObject *
m_set_array_type(PyObject *m, PyObject *t)
{
    if (!PyType_Check(t)) {
        PyErr_SetString(PyExc_TypeError, "set_array_type needs a type");
        return NULL;
    }
    Py_INCREF(t);
    Py_XSETREF(pijit_array_type, (PyTypeObject *)t);
    Py_RETURN_NONE;
}

static PyObject *
m_mark(PyObject *m, PyObject *code)
{
    return extra_of(code, 1) ? Py_NewRef(Py_None) : NULL;
}

static PyObject *
m_reset(PyObject *m, PyObject *code)
{
    if (as_code(code) == NULL)
        return NULL;
    CodeExtra *ex = extra_of(code, 0);
    if (ex != NULL) {
        Py_INCREF(code);
        extra_clear_entries(ex);
        ex->calls = ex->hits = ex->misses = 0;
        ex->state = ST_CANDIDATE;
        Py_DECREF(code);
    }
    Py_RETURN_NONE;
}

static PyObject *
m_set_state(PyObject *m, PyObject *args)
{
    PyObject *code;
    int state;
    if (!PyArg_ParseTuple(args, "Oi:set_state", &code, &state))
        return NULL;
    if (state < ST_NEVER_COMPILE || state > ST_FROZEN) {
        PyErr_Format(PyExc_ValueError, "invalid state %d", state);
        return NULL;
    }
    CodeExtra *ex = extra_of(code, 1);
    if (ex == NULL)
        return NULL;
    ex->state = state;
    Py_RETURN_NONE;
}

static PyObject *
m_get_state(PyObject *m, PyObject *code)
{
    if (as_code(code) == NULL)
        return NULL;
    CodeExtra *ex = extra_of(code, 0);
    if (ex == NULL)
        Py_RETURN_NONE;
    return PyLong_FromLong(ex->state);
}

static PyObject *
m_add_entry(PyObject *m, PyObject *args)
{
    PyObject *code, *sources, *checks, *fn;
    if (!PyArg_ParseTuple(args, "OOOO:add_entry", &code, &sources, &checks, &fn))
        return NULL;
    PyCodeObject *co = as_code(code);
    if (co == NULL)
        return NULL;
    Py_INCREF(co);
    CodeExtra *ex = mark_code(co);
    Entry *e = ex ? entry_new(co, ex->nargs, sources, checks, fn) : NULL;
    if (e == NULL) {
        Py_DECREF(co);
        return NULL;
    }
    if (ex->nentries == ex->capacity) {
        Py_ssize_t cap = ex->capacity ? 2 * ex->capacity : 4;
        Entry **arr = PyMem_Realloc(ex->entries, cap * sizeof(Entry *));
        if (arr == NULL) {
            entry_decref(e);
            Py_DECREF(co);
            return PyErr_NoMemory();
        }
        ex->entries = arr;
        ex->capacity = cap;
    }
    ex->entries[ex->nentries++] = e;
    ex->version++;
    Py_DECREF(co);
    Py_RETURN_NONE;
}

static PyObject *
m_entry_count(PyObject *m, PyObject *code)
{
    if (as_code(code) == NULL)
        return NULL;
    CodeExtra *ex = extra_of(code, 0);
    return PyLong_FromSsize_t(ex ? ex->nentries : 0);
}

static PyObject *
m_entries(PyObject *m, PyObject *code)
{
    if (as_code(code) == NULL)
        return NULL;
    CodeExtra *ex = extra_of(code, 0);
    PyObject *out = PyList_New(0);
    for (Py_ssize_t i = 0; out && ex && i < ex->nentries; i++) {
        Entry *e = ex->entries[i];
        PyObject *t = Py_BuildValue("(OOO)", e->orig_sources, e->orig_checks,
                                    e->fn ? e->fn : Py_None);
        if (t == NULL || PyList_Append(out, t) < 0)
            Py_CLEAR(out);
        Py_XDECREF(t);
    }
    return out;
}

static PyObject *
m_counters(PyObject *m, PyObject *code)
{
    if (as_code(code) == NULL)
        return NULL;
    CodeExtra *ex = extra_of(code, 0);
    if (ex == NULL)
        Py_RETURN_NONE;
    return Py_BuildValue("{s:n,s:n,s:n,s:i}", "calls", ex->calls, "hits", ex->hits,
                         "misses", ex->misses, "state", ex->state);
}

static PyObject *
m_set_enabled(PyObject *m, PyObject *flag)
{
    int v = PyObject_IsTrue(flag);
    if (v < 0)
        return NULL;
    wrapper_enabled = v;
    Py_RETURN_NONE;
}

static PyObject *
m_is_enabled(PyObject *m, PyObject *unused)
{
    return PyBool_FromLong(wrapper_enabled);
}

static PyObject *
m_install(PyObject *m, PyObject *unused)
{
    hook_acquire();
    Py_RETURN_NONE;
}

static PyObject *
m_uninstall(PyObject *m, PyObject *unused)
{
    if (hook_depth == 0) {
        PyErr_SetString(PyExc_RuntimeError, "pijit hook is not installed");
        return NULL;
    }
    hook_release();
    Py_RETURN_NONE;
}

static PyObject *
m_is_installed(PyObject *m, PyObject *unused)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    return PyBool_FromLong(_PyInterpreterState_GetEvalFrameFunc(interp) == pijit_hook);
}

static PyObject *
m_depth(PyObject *m, PyObject *unused)
{
    return PyLong_FromSsize_t(hook_depth);
}

static PyObject *
m_set_compiling(PyObject *m, PyObject *flag)
{
    int v = PyObject_IsTrue(flag);
    if (v < 0)
        return NULL;
    int was = tls_compiling;
    tls_compiling = v;
    return PyBool_FromLong(was);
}

static PyMethodDef module_methods[] = {
    {"set_callback", m_set_callback, METH_O, "set_callback(cb): cb(func, args) on a cache miss"},
    {"set_array_type", m_set_array_type, METH_O, "set_array_type(numpy.ndarray)"},
    {"mark", m_mark, METH_O, "mark(code): attach pijit state (idempotent)"},
    {"reset", m_reset, METH_O, "reset(code): drop entries and counters"},
    {"set_state", m_set_state, METH_VARARGS, "set_state(code, state)"},
    {"get_state", m_get_state, METH_O, "get_state(code) -> int, or None if unmarked"},
    {"add_entry", m_add_entry, METH_VARARGS, "add_entry(code, sources, checks, fn)"},
    {"entry_count", m_entry_count, METH_O, "entry_count(code) -> int"},
    {"entries", m_entries, METH_O, "entries(code) -> [(sources, checks, fn)], MRU first"},
    {"counters", m_counters, METH_O, "counters(code) -> dict, or None if unmarked"},
    {"set_enabled", m_set_enabled, METH_O, "set_enabled(flag): Wrapper installs the hook"},
    {"is_enabled", m_is_enabled, METH_NOARGS, "is_enabled() -> bool"},
    {"install", m_install, METH_NOARGS, "install(): depth += 1 (installs at 0 -> 1)"},
    {"uninstall", m_uninstall, METH_NOARGS, "uninstall(): depth -= 1 (restores at 1 -> 0)"},
    {"is_installed", m_is_installed, METH_NOARGS, "is our hook the current eval function?"},
    {"depth", m_depth, METH_NOARGS, "depth() -> current install depth"},
    {"set_compiling", m_set_compiling, METH_O, "set_compiling(flag) -> previous flag (this thread)"},
    POOL_METHODS
    KERNEL_SUPPORT_METHODS
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "pijit._eval_frame",
    .m_doc = "pijit's PEP 523 frame evaluation hook (CPython 3.11).",
    .m_size = -1,
    .m_methods = module_methods,
};

static PyObject *the_module = NULL;

static int
create_module(void)
{
    if (the_module == NULL) {
        if (PyType_Ready(&WrapperType) < 0)
            return -1;
        PyObject *m = PyModule_Create(&module_def);
        if (m == NULL)
            return -1;
        if (PyModule_AddObjectRef(m, "Wrapper", (PyObject *)&WrapperType) < 0
            || PyModule_AddIntConstant(m, "NEVER_COMPILE", ST_NEVER_COMPILE) < 0
            || PyModule_AddIntConstant(m, "CANDIDATE", ST_CANDIDATE) < 0
            || PyModule_AddIntConstant(m, "BUILDING", ST_BUILDING) < 0
            || PyModule_AddIntConstant(m, "CALLABLE", ST_CALLABLE) < 0
            || PyModule_AddIntConstant(m, "FROZEN", ST_FROZEN) < 0) {
            Py_DECREF(m);
            return -1;
        }
        if (ensure_extra_index() < 0) {
            Py_DECREF(m);
            return -1;
        }
        prev_eval = _PyEval_EvalFrameDefault;
        the_module = m;
    }
    PyObject *modules = PyImport_GetModuleDict();
    return PyDict_SetItemString(modules, "pijit._eval_frame", the_module);
}

/* The only cffi entry point (cffi calls it without the GIL). */
int
pijit_init_module(void)
{
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = create_module();
    if (rc < 0)
        PyErr_Print();
    PyGILState_Release(g);
    return rc < 0 ? -1 : 0;
}
