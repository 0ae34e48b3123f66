/* module.c -- the extension module pijit._eval_frame: its functions and its creation.
 *
 * The only cffi entry point is pijit_init_module(), which creates the module and puts it
 * in sys.modules; Python then imports it, and the hot path never crosses cffi.
 */
#include "pijit.h"

static PyObject *
m_set_callback(PyObject *m, PyObject *cb)
{
    return set_callable(&compile_callback, cb, "callback") ? NULL : Py_NewRef(Py_None);
}

static PyObject *
m_set_code_changed_callback(PyObject *m, PyObject *cb)
{
    return set_callable(&code_changed_callback, cb, "code-changed callback")
        ? NULL : Py_NewRef(Py_None);
}

static PyObject *
m_set_reduce_callback(PyObject *m, PyObject *cb)
{
    return set_callable(&reduce_callback, cb, "reduce callback") ? NULL : Py_NewRef(Py_None);
}

static PyObject *
m_set_source_callback(PyObject *m, PyObject *cb)
{
    return set_callable(&source_callback, cb, "source callback") ? NULL : Py_NewRef(Py_None);
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
m_mark(PyObject *m, PyObject *o)
{
    PyCodeObject *code = as_code(o);
    return code ? (PyObject *)code_state_mark(code) : NULL;
}

static PyObject *
m_state_of(PyObject *m, PyObject *o)
{
    CodeState *st = state_of(o);
    if (st == NULL && PyErr_Occurred())
        return NULL;
    return Py_NewRef(st ? (PyObject *)st : Py_None);
}

static PyObject *
m_all_states(PyObject *m, PyObject *unused)
{
    return code_state_all();
}

static PyObject *
m_reset(PyObject *m, PyObject *o)
{
    CodeState *st = state_of(o);
    if (st == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    Py_INCREF(st);
    code_state_clear_entries(st);
    st->calls = st->hits = st->misses = st->deferred = st->bypassed = st->plain_streak = 0;
    st->nplain = 0;
    st->fast_nargs = -1;
    for (int i = 0; i < PJ_SIGNATURES; i++)
        st->sig_time[i] = -1;
    st->hot_varied = 0;
    st->plain_seconds = 0;
    st->state = ST_CANDIDATE;
    rearm_inlined(st);
    Py_DECREF(st);
    Py_RETURN_NONE;
}

static PyObject *
m_set_state(PyObject *m, PyObject *args)
{
    PyObject *o;
    int state;
    if (!PyArg_ParseTuple(args, "Oi:set_state", &o, &state))
        return NULL;
    if (state < ST_NEVER_COMPILE || state > ST_FROZEN) {
        PyErr_Format(PyExc_ValueError, "invalid state %d", state);
        return NULL;
    }
    CodeState *st = state_of(o);
    if (st == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "set_state: %R is not marked", o);
        return NULL;
    }
    if (st->state == ST_FROZEN && state != ST_FROZEN) {
        /* Signatures remembered as plain by frozen misses (adapt.c) would compile now. */
        st->nplain = 0;
        st->fast_nargs = -1;
    }
    st->state = state;
    st->build_epoch = fork_epoch;
    rearm_inlined(st);
    Py_RETURN_NONE;
}

static PyObject *
m_get_state(PyObject *m, PyObject *o)
{
    CodeState *st = state_of(o);
    if (st == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    return PyLong_FromLong(st->state);
}

static PyObject *
m_add_entry(PyObject *m, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"code", "sources", "checks", "fn", "promote_at", "trial",
                             "margin", "plain_args", "promote_after", "plain_until_promoted",
                             NULL};
    PyObject *o, *sources, *checks, *fn, *plain_args = NULL;
    Py_ssize_t promote_at = 0;
    int trial = 0;
    int plain_until_promoted = 0;
    double margin = 0.97, promote_after = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOO|$nidOdp:add_entry", kwlist, &o,
                                     &sources, &checks, &fn, &promote_at, &trial, &margin,
                                     &plain_args, &promote_after, &plain_until_promoted))
        return NULL;
    if (plain_args == Py_None)
        plain_args = NULL;
    if (plain_args != NULL && !PyTuple_Check(plain_args)) {
        PyErr_Format(PyExc_TypeError, "add_entry: plain_args must be a tuple or None, got %R",
                     plain_args);
        return NULL;
    }
    if (promote_at < 0 || trial < 0 || !(margin > 0) || !(promote_after >= 0)) {
        PyErr_SetString(PyExc_ValueError,
                        "add_entry: promote_at, trial and promote_after must be >= 0, margin > 0");
        return NULL;
    }
    CodeState *st = state_of(o);
    if (st == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "add_entry: %R is not marked", o);
        return NULL;
    }
    Py_INCREF(st);
    Entry *e = entry_new(st->code, st->nargs, sources, checks, fn);
    if (e != NULL) {
        e->promote_at = promote_at;
        e->promote_after = promote_after;
        e->plain_pending = plain_until_promoted;
        e->trial_runs = e->fn != NULL ? trial : 0;
        e->trial_left = promote_at ? 0 : e->trial_runs;
        e->margin = margin;
    }
    int rc = e == NULL ? -1 : code_state_add_entry(st, e);
    if (rc == 0) {
        st->plain_streak = 0;
        rearm_inlined(st);
    }
    if (rc == 0 && plain_args != NULL && fn == Py_None)
        remember_plain_slots(st, plain_args);
    if (e != NULL && rc < 0)
        entry_decref(e);
    Py_DECREF(st);
    return rc < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *
m_entry_count(PyObject *m, PyObject *o)
{
    CodeState *st = state_of(o);
    if (st == NULL && PyErr_Occurred())
        return NULL;
    return PyLong_FromSsize_t(st ? st->nentries : 0);
}

/* [(sources, checks, fn)], most recently hit first.  Building a tuple can run a finalizer
 * that resets the code: every entry is held while the list is built. */
static PyObject *
m_entries(PyObject *m, PyObject *o)
{
    CodeState *st = state_of(o);
    if (st == NULL)
        return PyErr_Occurred() ? NULL : PyList_New(0);
    Py_ssize_t n = st->nentries;
    Entry **held = PyMem_Malloc((n ? n : 1) * sizeof(Entry *));
    if (held == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        held[i] = st->entries[i];
        held[i]->refcnt++;
    }
    PyObject *out = PyList_New(0);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        Entry *e = held[i];
        PyObject *t = Py_BuildValue("(OOO)", e->orig_sources, e->orig_checks,
                                    e->fn ? e->fn : Py_None);
        if (t == NULL || PyList_Append(out, t) < 0)
            Py_CLEAR(out);
        Py_XDECREF(t);
    }
    for (Py_ssize_t i = 0; i < n; i++)
        entry_decref(held[i]);
    PyMem_Free(held);
    return out;
}

static PyObject *
m_counters(PyObject *m, PyObject *o)
{
    CodeState *st = state_of(o);
    if (st == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    return Py_BuildValue("{s:n,s:n,s:n,s:i,s:n,s:n,s:n}", "calls", st->calls, "hits", st->hits,
                         "misses", st->misses, "state", st->state, "deferred", st->deferred,
                         "bypassed", st->bypassed, "inlined", inlined_count(st));
}

static PyObject *
m_set_enabled(PyObject *m, PyObject *flag)
{
    int v = PyObject_IsTrue(flag);
    if (v < 0)
        return NULL;
    jit_enabled = v;
    Py_RETURN_NONE;
}

static PyObject *
m_is_enabled(PyObject *m, PyObject *unused)
{
    return PyBool_FromLong(jit_enabled);
}

static PyObject *
m_install(PyObject *m, PyObject *unused)
{
    return hook_enter(&tls) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *
m_uninstall(PyObject *m, PyObject *unused)
{
    if (tls.depth == 0) {
        PyErr_SetString(PyExc_RuntimeError, "pijit hook is not installed on this thread");
        return NULL;
    }
    hook_leave(&tls);
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
    return PyLong_FromSsize_t(tls.depth);
}

static PyObject *
m_active_threads(PyObject *m, PyObject *unused)
{
    return PyLong_FromSsize_t(active_threads);
}

static PyObject *
m_set_compiling(PyObject *m, PyObject *flag)
{
    int v = PyObject_IsTrue(flag);
    if (v < 0)
        return NULL;
    int was = tls.compiling;
    tls.compiling = v;
    return PyBool_FromLong(was);
}

static PyObject *
m_after_fork_child(PyObject *m, PyObject *unused)
{
    hook_after_fork_child();
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"set_callback", m_set_callback, METH_O, "set_callback(cb): cb(func, args) on a cache miss"},
    {"set_code_changed_callback", m_set_code_changed_callback, METH_O,
     "set_code_changed_callback(cb): cb(wrapper) -> CodeState of wrapper.fn's new __code__"},
    {"set_source_callback", m_set_source_callback, METH_O,
     "set_source_callback(cb): cb(copy, function) gives a variant's copy the function's "
     "changes"},
    {"set_reduce_callback", m_set_reduce_callback, METH_O,
     "set_reduce_callback(cb): cb(wrapper) is Wrapper.__reduce__"},
    {"set_array_type", m_set_array_type, METH_O, "set_array_type(numpy.ndarray)"},
    {"mark", m_mark, METH_O,
     "mark(code) -> CodeState: the code's state, made if it has none; the code stays "
     "marked while the state is referenced"},
    {"state_of", m_state_of, METH_O, "state_of(code) -> CodeState, or None if unmarked"},
    {"all_states", m_all_states, METH_NOARGS, "all_states() -> [CodeState] of every marked code"},
    {"reset", m_reset, METH_O, "reset(code): drop entries and counters"},
    {"set_state", m_set_state, METH_VARARGS, "set_state(code, state)"},
    {"get_state", m_get_state, METH_O, "get_state(code) -> int, or None if unmarked"},
    {"add_entry", (PyCFunction)(void (*)(void))m_add_entry, METH_VARARGS | METH_KEYWORDS,
     "add_entry(code, sources, checks, fn, *, promote_at=0, trial=0, margin=0.97, "
     "plain_args=None, promote_after=0.0, plain_until_promoted=False): promote_at: the hit "
     "from which the adapt callback may replace fn, once the entry's hits took promote_after "
     "seconds (plain_until_promoted: fn is a stand-in never called; hits run plain Python "
     "until a promotion replaces it); trial: timed runs "
     "comparing fn with plain Python (after the promotion, if any); plain wins when its "
     "fastest run is under margin times fn's; plain_args (with fn None): the argument slots "
     "of a call whose signature runs plain for good, so the Wrapper skips the hook for it"},
    {"entry_count", m_entry_count, METH_O, "entry_count(code) -> int"},
    {"entries", m_entries, METH_O, "entries(code) -> [(sources, checks, fn)], MRU first"},
    {"counters", m_counters, METH_O, "counters(code) -> dict, or None if unmarked"},
    {"set_enabled", m_set_enabled, METH_O, "set_enabled(flag): jitted calls run jitted"},
    {"is_enabled", m_is_enabled, METH_NOARGS, "is_enabled() -> bool"},
    {"install", m_install, METH_NOARGS,
     "install(): this thread enters a jitted call (the hook is installed at the first)"},
    {"uninstall", m_uninstall, METH_NOARGS, "uninstall(): this thread leaves it"},
    {"is_installed", m_is_installed, METH_NOARGS, "is our hook the current eval function?"},
    {"depth", m_depth, METH_NOARGS, "depth() -> jitted calls in progress on this thread"},
    {"active_threads", m_active_threads, METH_NOARGS,
     "active_threads() -> threads inside a jitted call"},
    {"set_compiling", m_set_compiling, METH_O, "set_compiling(flag) -> previous flag (this thread)"},
    {"after_fork_child", m_after_fork_child, METH_NOARGS,
     "after_fork_child(): reset the hook's state in a forked child (os.register_at_fork)"},
    POOL_METHODS
    KERNEL_SUPPORT_METHODS
    ADAPT_METHODS
    FUNCTION_METHODS
    PREFIX_METHODS
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "pijit._eval_frame",
    .m_doc = "pijit's PEP 523 frame evaluation hook.",
    .m_size = -1,
    .m_methods = module_methods,
};

static PyObject *the_module = NULL;

static int
create_module(void)
{
    /* The hook, the code states and the per-thread depth are per process; NumPy refuses
     * subinterpreters anyway.  Say so instead of registering in the wrong interpreter. */
    if (PyInterpreterState_Get() != PyInterpreterState_Main()) {
        PyErr_SetString(PyExc_ImportError,
                        "pijit cannot be imported in a subinterpreter (only in the main one)");
        return -1;
    }
    if (the_module == NULL) {
        if (PyType_Ready(&WrapperType) < 0 || PyType_Ready(&CodeStateType) < 0
            || PyType_Ready(&ObservedType) < 0)
            return -1;
        resume_marker = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
        observed = PyType_GenericAlloc(&ObservedType, 0);
        resume_functions_key = PyUnicode_InternFromString("__pijit_resume_functions__");
        if (resume_marker == NULL || observed == NULL || resume_functions_key == NULL)
            return -1;
        PyObject *m = PyModule_Create(&module_def);
        if (m == NULL)
            return -1;
        if (PyModule_AddObjectRef(m, "Wrapper", (PyObject *)&WrapperType) < 0
            || PyModule_AddObjectRef(m, "CodeState", (PyObject *)&CodeStateType) < 0
            || PyModule_AddObjectRef(m, "RESUME", resume_marker) < 0
            || PyModule_AddObjectRef(m, "OBSERVED", observed) < 0
            || PyModule_AddIntConstant(m, "NEVER_COMPILE", ST_NEVER_COMPILE) < 0
            || PyModule_AddIntConstant(m, "CANDIDATE", ST_CANDIDATE) < 0
            || PyModule_AddIntConstant(m, "BUILDING", ST_BUILDING) < 0
            || PyModule_AddIntConstant(m, "CALLABLE", ST_CALLABLE) < 0
            || PyModule_AddIntConstant(m, "FROZEN", ST_FROZEN) < 0
            || PyModule_AddIntConstant(m, "FUNCTION_VECTORCALL", PJ_FUNCTION_VECTORCALL) < 0
            || ensure_extra_index() < 0 || functions_init() < 0 || prefix_init(m) < 0) {
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
