/* code_state.c -- CodeState: the per-code state of a marked code object.
 *
 * The hook finds it through the code's co_extra slot, which points at it without owning
 * it.  Its owners are garbage-collected objects: the jit Wrapper of the function, and the
 * Python records (pijit.cache.CodeRecord) of the codes a resume function or callee was made
 * for.  Everything a cache entry holds (the transformed function, and with it the user's
 * globals; objects guarded by identity) is reachable from the state and visited by its
 * tp_traverse, so a module, an exec namespace or a closure that holds a jitted function is
 * freed by the garbage collector like any other cycle.  (Code objects are not tracked by
 * the collector: an edge from the code to its entries would be invisible to it, and such a
 * cycle would live for ever.)  When the last owner goes, the state leaves the code, which
 * then runs as plain Python.
 */
#include "pijit.h"

static Py_ssize_t extra_index = -1;
static CodeState live_states = {.live_prev = &live_states, .live_next = &live_states};

static int
ensure_extra_index(void)
{
    if (extra_index < 0) {
        /* No free function: a state holds a reference to its code, so a code with a state
         * in its slot is never deallocated. */
        extra_index = pj_request_extra_index(NULL);
        if (extra_index < 0) {
            PyErr_SetString(PyExc_RuntimeError, "no code extra index left");
            return -1;
        }
    }
    return 0;
}

/* The state of `code` (borrowed), or NULL. */
static inline CodeState *
code_state(PyCodeObject *code)
{
    PjCodeExtraArray *x = (PjCodeExtraArray *)code->co_extra;
    if (x == NULL || extra_index < 0 || extra_index >= x->ce_size)
        return NULL;
    return (CodeState *)x->ce_extras[extra_index];
}

static Py_ssize_t
code_nargs(PyCodeObject *co)
{
    return co->co_argcount + co->co_kwonlyargcount
        + ((co->co_flags & CO_VARARGS) ? 1 : 0)
        + ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
}

/* The state of `code`, made if it has none (new reference), or NULL with an exception. */
static CodeState *
code_state_mark(PyCodeObject *code)
{
    if (ensure_extra_index() < 0)
        return NULL;
    CodeState *st = code_state(code);
    if (st != NULL)
        return (CodeState *)Py_NewRef(st);
    st = PyObject_GC_New(CodeState, &CodeStateType);
    if (st == NULL)
        return NULL;
    st->code = (PyCodeObject *)Py_NewRef(code);
    st->record = NULL;
    st->weakreflist = NULL;
    st->state = ST_CANDIDATE;
    st->nargs = code_nargs(code);
    st->version = 0;
    st->calls = st->hits = st->misses = 0;
    st->nentries = st->capacity = 0;
    st->entries = NULL;
    st->build_epoch = 0;
    st->budget = 0;
    st->deferred = 0;
    st->hot_varied = 0;
    for (int i = 0; i < PJ_SIGNATURES; i++)
        st->sig_time[i] = -1;
    st->nplain = 0;
    st->fast_nargs = -1;
    st->bypassed = 0;
    st->inlined = NULL;
    st->plain_streak = 0;
    st->inline_plain = 1;
    st->user_calls = 0;
    st->timing = 0;
    st->plain_seconds = 0;
    if (pj_set_code_extra((PyObject *)code, extra_index, st) < 0) {
        st->live_prev = st->live_next = st;
        Py_DECREF(st);
        return NULL;
    }
    st->live_prev = live_states.live_prev;
    st->live_next = &live_states;
    live_states.live_prev->live_next = st;
    live_states.live_prev = st;
    PyObject_GC_Track(st);
    return st;
}

/* Detach and release every entry.  Releasing may run arbitrary code, so the array is
 * detached first. */
static void
code_state_clear_entries(CodeState *st)
{
    Entry **arr = st->entries;
    Py_ssize_t n = st->nentries;
    st->entries = NULL;
    st->nentries = st->capacity = 0;
    st->version++;
    for (Py_ssize_t i = 0; i < n; i++)
        entry_decref(arr[i]);
    PyMem_Free(arr);
}

static int
code_state_add_entry(CodeState *st, Entry *e)
{
    if (st->nentries == st->capacity) {
        Py_ssize_t cap = st->capacity ? 2 * st->capacity : 4;
        Entry **arr = PyMem_Realloc(st->entries, cap * sizeof(Entry *));
        if (arr == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        st->entries = arr;
        st->capacity = cap;
    }
    st->entries[st->nentries++] = e;
    st->version++;
    return 0;
}

static int
code_state_traverse(CodeState *st, visitproc visit, void *arg)
{
    Py_VISIT(st->record);
    Py_VISIT(st->inlined);
    for (Py_ssize_t i = 0; i < st->nentries; i++) {
        int r = entry_traverse(st->entries[i], visit, arg);
        if (r)
            return r;
    }
    return 0;
}

static int
code_state_clear(CodeState *st)
{
    code_state_clear_entries(st);
    Py_CLEAR(st->record);
    Py_CLEAR(st->inlined);
    return 0;
}

static void
code_state_dealloc(CodeState *st)
{
    PyObject_GC_UnTrack(st);
    if (st->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)st);
    if (code_state(st->code) == st && pj_set_code_extra((PyObject *)st->code, extra_index, NULL) < 0)
        PyErr_WriteUnraisable((PyObject *)st);
    st->live_prev->live_next = st->live_next;
    st->live_next->live_prev = st->live_prev;
    code_state_clear(st);
    Py_DECREF(st->code);
    PyObject_GC_Del(st);
}

static PyObject *
code_state_repr(CodeState *st)
{
    return PyUnicode_FromFormat("<pijit CodeState of %U, %zd entries>", st->code->co_qualname,
                                st->nentries);
}

static PyObject *
code_state_get_record(CodeState *st, void *closure)
{
    return Py_NewRef(st->record ? st->record : Py_None);
}

static int
code_state_set_record(CodeState *st, PyObject *v, void *closure)
{
    Py_XSETREF(st->record, v == NULL || v == Py_None ? NULL : Py_NewRef(v));
    return 0;
}

static PyMemberDef code_state_members[] = {
    {"code", T_OBJECT, offsetof(CodeState, code), READONLY, "the code object"},
    {NULL},
};

static PyGetSetDef code_state_getset[] = {
    {"record", (getter)code_state_get_record, (setter)code_state_set_record,
     "the Python-side record (pijit.cache.CodeRecord), or None", NULL},
    {NULL},
};

static PyTypeObject CodeStateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pijit._eval_frame.CodeState",
    .tp_basicsize = sizeof(CodeState),
    .tp_dealloc = (destructor)code_state_dealloc,
    .tp_repr = (reprfunc)code_state_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The per-code state of a code object marked by pijit (made by mark()).",
    .tp_traverse = (traverseproc)code_state_traverse,
    .tp_clear = (inquiry)code_state_clear,
    .tp_weaklistoffset = offsetof(CodeState, weakreflist),
    .tp_members = code_state_members,
    .tp_getset = code_state_getset,
};

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

/* The state of a code or function (borrowed), NULL without an exception if it has none,
 * NULL with one if `o` is neither. */
static CodeState *
state_of(PyObject *o)
{
    PyCodeObject *code = as_code(o);
    return code ? code_state(code) : NULL;
}

/* Every live state (new list). */
static PyObject *
code_state_all(void)
{
    PyObject *out = PyList_New(0);
    for (CodeState *st = live_states.live_next; out && st != &live_states; st = st->live_next)
        if (PyList_Append(out, (PyObject *)st) < 0)
            Py_CLEAR(out);
    return out;
}
