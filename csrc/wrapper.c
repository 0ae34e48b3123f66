/* wrapper.c -- Wrapper: what pijit.jit returns, a C callable that runs its function with
 * the hook active on the calling thread.
 *
 * It owns the CodeState of its function's code (marked before the Wrapper is made), so
 * the entries compiled for the function live as long as the jitted function does (and are
 * freed with it, cycles included).  When the function's __code__ is replaced (IPython's
 * autoreload, a debugger's edit), the next call asks the code-changed callback for the new
 * code's state.  It pickles, copies and is
 * weakly referenced like the function it wraps: the reduce callback decides how.
 */
#include "pijit.h"

static PyObject *code_changed_callback = NULL;    /* strong or NULL */
static PyObject *reduce_callback = NULL;          /* strong or NULL */

typedef struct {
    PyObject_HEAD
    PyObject *fn;
    CodeState *state;       /* of fn.__code__ when it was last called or made */
    PyObject *dict;
    PyObject *weakreflist;
    vectorcallfunc vectorcall;
} Wrapper;

/* Make w->state the state of fn's current code: -1 with an exception on error.  A code
 * that replaced the one the state was made for is registered by the callback (with the
 * options of the old one). */
static int
wrapper_follow_code(Wrapper *w)
{
    PyObject *cb = code_changed_callback;
    PyObject *st;
    if (cb != NULL) {
        Py_INCREF(cb);
        st = PyObject_CallOneArg(cb, (PyObject *)w);
        Py_DECREF(cb);
    }
    else {
        st = (PyObject *)code_state_mark((PyCodeObject *)PyFunction_GET_CODE(w->fn));
    }
    if (st == NULL)
        return -1;
    if (!PyObject_TypeCheck(st, &CodeStateType)) {
        PyErr_Format(PyExc_TypeError, "pijit: code-changed callback returned %R, not a CodeState",
                     st);
        Py_DECREF(st);
        return -1;
    }
    Py_XSETREF(w->state, (CodeState *)st);
    return 0;
}

static PyObject *
wrapper_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Wrapper *w = (Wrapper *)self;
    PyObject *fn = w->fn;
    if (fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "pijit wrapper was cleared");
        return NULL;
    }
    if (!jit_enabled)
        return PyObject_Vectorcall(fn, args, nargsf, kwnames);
    if (w->state != NULL && (PyCodeObject *)PyFunction_GET_CODE(fn) == w->state->code) {
        /* Calls that run plain (adapt.c) run outside this thread's jitted calls: called
         * from inside one, the hook would otherwise still see this call's frame. */
        PyObject *res = wrapper_plain_call(w->state, fn, args, nargsf, kwnames);
        if (res != NULL || PyErr_Occurred())
            return res;
    }
    if (w->state != NULL && (PyCodeObject *)PyFunction_GET_CODE(fn) != w->state->code
        && wrapper_follow_code(w) < 0)
        return NULL;
    ThreadHook *t = this_thread();
    if (hook_enter(t) < 0)
        return NULL;
    Py_INCREF(fn);
    PyObject *res = PyObject_Vectorcall(fn, args, nargsf, kwnames);
    Py_DECREF(fn);
    hook_leave(t);
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
    if (PyFunction_Check(fn))
        w->state = (CodeState *)Py_XNewRef(code_state((PyCodeObject *)PyFunction_GET_CODE(fn)));
    return (PyObject *)w;
}

static int
wrapper_traverse(Wrapper *w, visitproc visit, void *arg)
{
    Py_VISIT(w->fn);
    Py_VISIT(w->state);
    Py_VISIT(w->dict);
    return 0;
}

static int
wrapper_clear(Wrapper *w)
{
    Py_CLEAR(w->fn);
    Py_CLEAR(w->state);
    Py_CLEAR(w->dict);
    return 0;
}

static void
wrapper_dealloc(Wrapper *w)
{
    PyObject_GC_UnTrack(w);
    if (w->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)w);
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

static PyObject *
wrapper_reduce(Wrapper *w, PyObject *unused)
{
    if (reduce_callback == NULL) {
        PyErr_Format(PyExc_TypeError, "cannot pickle %R", (PyObject *)w);
        return NULL;
    }
    return PyObject_CallOneArg(reduce_callback, (PyObject *)w);
}

static PyObject *
wrapper_get_state(Wrapper *w, void *closure)
{
    return Py_NewRef(w->state ? (PyObject *)w->state : Py_None);
}

static PyMemberDef wrapper_members[] = {
    {"fn", T_OBJECT, offsetof(Wrapper, fn), READONLY, "the wrapped callable"},
    {NULL},
};

static PyGetSetDef wrapper_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"code_state", (getter)wrapper_get_state, NULL,
     "the CodeState of the wrapped function's code (None before a function is wrapped)", NULL},
    {NULL},
};

static PyMethodDef wrapper_methods[] = {
    {"__reduce__", (PyCFunction)wrapper_reduce, METH_NOARGS, "pickle by reference"},
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
    .tp_doc = "Wrapper(fn): call fn with pijit's frame hook active on this thread.",
    .tp_traverse = (traverseproc)wrapper_traverse,
    .tp_clear = (inquiry)wrapper_clear,
    .tp_weaklistoffset = offsetof(Wrapper, weakreflist),
    .tp_methods = wrapper_methods,
    .tp_members = wrapper_members,
    .tp_getset = wrapper_getset,
    .tp_descr_get = wrapper_descr_get,
    .tp_dictoffset = offsetof(Wrapper, dict),
    .tp_new = wrapper_new,
};
