/* wrapper.c -- what pijit.jit returns: a C callable (Wrapper) that runs its function with
 * the hook active on the calling thread, or (from 3.12: compat.h's PJ_FUNCTION_VECTORCALL)
 * a function object whose vectorcall does the same.
 *
 * A Wrapper owns the CodeState of its function's code (marked before the Wrapper is made),
 * so the entries compiled for the function live as long as the jitted function does (and
 * are freed with it, cycles included).  When the function's __code__ is replaced (IPython's
 * autoreload, a debugger's edit), the next call asks the code-changed callback for the new
 * code's state.  It pickles, copies and is weakly referenced like the function it wraps:
 * the reduce callback decides how.
 *
 * A jitted function object is a copy of the user's function whose __dict__ holds, under
 * "__pijit__", a Wrapper of the copy itself (which owns the state as above; the function
 * reaches it through its dict, so the garbage collector sees the cycle), and whose
 * vectorcall (function_vectorcall) makes the Wrapper's call.  A call of a Wrapper, from
 * Python code, is a C call: a new C frame and a new evaluation loop, about 500
 * instructions more than CPython's inlined call of a Python function (the cost of a
 * jitted one-line function called in a loop, measured by benchmarks/call_floor.py).  So
 * once every call of the function's code runs plain (its code is left to plain Python, or
 * frozen with entries that all run plain) the function is given back to CPython: its
 * vectorcall becomes CPython's again, and calls from plain code are inlined and
 * specialized as if pijit were not there.  (Inside a jitted call the hook is set, so
 * CPython inlines no call and the hook still sees the function's frames.)  Anything that
 * may give pijit work again (reset, a state change, a new entry: rearm_inlined; a new
 * __code__: a function watcher) arms it again.
 */
#include "pijit.h"

static PyObject *code_changed_callback = NULL;    /* strong or NULL */
static PyObject *reduce_callback = NULL;          /* strong or NULL */
static PyObject *source_callback = NULL;          /* strong or NULL */

typedef struct {
    PyObject_HEAD
    PyObject *fn;
    CodeState *state;       /* of fn.__code__ when it was last called or made */
    PyObject *dict;
    PyObject *weakreflist;
    vectorcallfunc vectorcall;
    /* Of a jitted function object: the user's function it is a copy of, and that function's
     * __code__, __defaults__ and __kwdefaults__ when the copy last took them (a Wrapper
     * calls the user's function, so it sees their changes: the copy takes them). */
    PyObject *orig;
    PyObject *orig_code, *orig_defaults, *orig_kwdefaults;
    /* 3.11: the prefixed code of the jitted function object while it is given back
     * (call_prefix.c), or NULL. */
    PyObject *armed_code;
    /* 3.11: given back while someone else holds the user's function: its prefix only checks
     * that the function is unchanged (call_prefix.c's prefix_answer). */
    int following;
    /* A Wrapper kept for an __init__ (3.13: compat's VECTORCALL_SKIPPED_BY): the plain copy
     * of its function (set_init_copy) put in its class's __dict__ in its place while it is
     * given back, and that class then (init_give_back), else NULL. */
    PyObject *init_copy, *init_class;
    /* Of a copy jitted under other options than its code was (api.py's _variant): the
     * user's function its function (`orig`, else `fn`) is a private copy of, and that
     * function's __code__, __defaults__ and __kwdefaults__ when the copy last took them.
     * The copy takes their changes before its own Wrapper follows it (set_source). */
    PyObject *source, *source_code, *source_defaults, *source_kwdefaults;
} Wrapper;

static inline int
source_changed(Wrapper *w)
{
    PyFunctionObject *s = (PyFunctionObject *)w->source;
    return s != NULL && (s->func_code != w->source_code || s->func_defaults != w->source_defaults
                         || s->func_kwdefaults != w->source_kwdefaults);
}

/* Give w's private copy what its user's function changed since (the source callback sets
 * its __defaults__, __kwdefaults__ and, for a new __code__, a copy of that code jitted with
 * the copy's options).  -1 with an exception. */
static int
follow_source(Wrapper *w)
{
    PyFunctionObject *s = (PyFunctionObject *)w->source;
    PyObject *copy = w->orig != NULL ? w->orig : w->fn;
    if (source_callback == NULL || copy == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "pijit: a jitted copy cannot follow its function");
        return -1;
    }
    PyObject *code = Py_XNewRef(s->func_code), *defaults = Py_XNewRef(s->func_defaults);
    PyObject *kwdefaults = Py_XNewRef(s->func_kwdefaults);
    PyObject *cb = Py_NewRef(source_callback), *source = Py_NewRef(w->source);
    Py_INCREF(copy);
    PyObject *res = PyObject_CallFunctionObjArgs(cb, copy, source, NULL);
    Py_DECREF(copy);
    Py_DECREF(source);
    Py_DECREF(cb);
    if (res != NULL) {
        Py_DECREF(res);
        Py_XSETREF(w->source_code, code);
        Py_XSETREF(w->source_defaults, defaults);
        Py_XSETREF(w->source_kwdefaults, kwdefaults);
        return 0;
    }
    Py_XDECREF(code);
    Py_XDECREF(defaults);
    Py_XDECREF(kwdefaults);
    return -1;
}

static int wrapper_follow_code(Wrapper *w);

/* Give the jitted function object `fn` what w's original function changed since fn last
 * took it (its __code__, __defaults__, __kwdefaults__, each set as an assignment would),
 * and w the state of a new code (3.11's prefix runs a code whose state is not w's plain).
 * -1 with an exception. */
static int
follow_original(Wrapper *w, PyObject *fn)
{
    if (source_changed(w) && follow_source(w) < 0)
        return -1;
    PyFunctionObject *o = (PyFunctionObject *)w->orig;
    struct { const char *name; PyObject *now; PyObject **seen; } parts[] = {
        {"__code__", o->func_code, &w->orig_code},
        {"__defaults__", o->func_defaults, &w->orig_defaults},
        {"__kwdefaults__", o->func_kwdefaults, &w->orig_kwdefaults},
    };
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        PyObject *now = Py_XNewRef(parts[i].now);
        if (now != *parts[i].seen) {
            /* 3.11: the copy runs its code behind pijit's prefix (call_prefix.c). */
            PyObject *set = i == 0 && now ? prefixed_code(now) : Py_XNewRef(now);
            if (set == NULL && now != NULL) {
                Py_DECREF(now);
                return -1;
            }
            int failed = PyObject_SetAttrString(fn, parts[i].name, set ? set : Py_None) < 0;
            Py_XDECREF(set);
            if (failed) {
                Py_XDECREF(now);
                return -1;
            }
            Py_XSETREF(*parts[i].seen, Py_XNewRef(now));
        }
        Py_XDECREF(now);
    }
    if (w->state != NULL && w->fn == fn
        && original_code((PyCodeObject *)PyFunction_GET_CODE(fn)) != w->state->code)
        return wrapper_follow_code(w);
    return 0;
}

static inline int
original_changed(Wrapper *w)
{
    PyFunctionObject *o = (PyFunctionObject *)w->orig;
    return o != NULL && (o->func_code != w->orig_code || o->func_defaults != w->orig_defaults
                         || o->func_kwdefaults != w->orig_kwdefaults || source_changed(w));
}

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
        st = (PyObject *)code_state_mark(original_code((PyCodeObject *)PyFunction_GET_CODE(w->fn)));
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

/* Call `fn` as CPython would call it (a jitted function object: by CPython's own
 * vectorcall, not pijit's, which is making this call). */
static inline PyObject *
call_as_cpython(PyObject *fn, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_Function(fn) == function_vectorcall)
        return cpython_function_vc(fn, args, nargsf, kwnames);
    return PyObject_Vectorcall(fn, args, nargsf, kwnames);
}

static void give_back(PyObject *func, CodeState *st);
static void init_give_back(Wrapper *w, PyObject *self);

/* A jitted call of `fn`, the function of `w` (`own`: a jitted function object, whose
 * vectorcall is pijit's). */
static PyObject *
jit_call(Wrapper *w, PyObject *fn, int own, PyObject *const *args, size_t nargsf,
         PyObject *kwnames)
{
    if (fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "pijit wrapper was cleared");
        return NULL;
    }
    if (own ? original_changed(w) && follow_original(w, fn) < 0
        : source_changed(w) && follow_source(w) < 0)
        return NULL;
    if (!jit_enabled)
        return call_as_cpython(fn, args, nargsf, kwnames);
    if (w->state != NULL && (PyCodeObject *)PyFunction_GET_CODE(fn) == w->state->code) {
        if (own && nothing_to_do(w->state))
            give_back(fn, w->state);
        else if (w->init_copy != NULL && w->init_class == NULL && PyVectorcall_NARGS(nargsf)
                 && nothing_to_do(w->state))
            init_give_back(w, args[0]);
        /* Calls that run plain (adapt.c) run outside this thread's jitted calls: called
         * from inside one, the hook would otherwise still see this call's frame. */
        PyObject *res = wrapper_plain_call(w->state, fn, args, nargsf, kwnames, NULL);
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
    PyObject *res = call_as_cpython(fn, args, nargsf, kwnames);
    Py_DECREF(fn);
    hook_leave(t);
    return res;
}

static PyObject *
wrapper_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Wrapper *w = (Wrapper *)self;
#if !PJ_FUNCTION_VECTORCALL
    if (w->orig != NULL && w->fn != NULL)   /* 3.11: the jitted copy's prefix does it all */
        return PyObject_Vectorcall(w->fn, args, nargsf, kwnames);
#endif
    return jit_call(w, w->fn, 0, args, nargsf, kwnames);
}

static PyObject *
wrapper_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *fn, *orig = NULL;
    if (kwds && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Wrapper(fn) takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "Wrapper", 1, 2, &fn, &orig))
        return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "Wrapper needs a callable, got %R", fn);
        return NULL;
    }
    if (orig != NULL && !(PyFunction_Check(orig) && PyFunction_Check(fn))) {
        PyErr_Format(PyExc_TypeError, "Wrapper(fn, original): two functions, got %R", orig);
        return NULL;
    }
    Wrapper *w = (Wrapper *)type->tp_alloc(type, 0);
    if (w == NULL)
        return NULL;
    w->fn = Py_NewRef(fn);
    w->vectorcall = wrapper_vectorcall;
    if (orig != NULL) {
        PyFunctionObject *o = (PyFunctionObject *)orig;
        w->orig = Py_NewRef(orig);
        w->orig_code = Py_XNewRef(o->func_code);
        w->orig_defaults = Py_XNewRef(o->func_defaults);
        w->orig_kwdefaults = Py_XNewRef(o->func_kwdefaults);
    }
    if (PyFunction_Check(fn))
        w->state = (CodeState *)Py_XNewRef(
            code_state(original_code((PyCodeObject *)PyFunction_GET_CODE(fn))));
    return (PyObject *)w;
}

static int
wrapper_traverse(Wrapper *w, visitproc visit, void *arg)
{
    Py_VISIT(w->fn);
    Py_VISIT(w->state);
    Py_VISIT(w->dict);
    Py_VISIT(w->orig);
    Py_VISIT(w->orig_code);
    Py_VISIT(w->orig_defaults);
    Py_VISIT(w->orig_kwdefaults);
    Py_VISIT(w->armed_code);
    Py_VISIT(w->init_copy);
    Py_VISIT(w->init_class);
    Py_VISIT(w->source);
    Py_VISIT(w->source_code);
    Py_VISIT(w->source_defaults);
    Py_VISIT(w->source_kwdefaults);
    return 0;
}

static void fn_cache_forget(Wrapper *w);

static int
wrapper_clear(Wrapper *w)
{
    fn_cache_forget(w);
    Py_CLEAR(w->fn);
    Py_CLEAR(w->state);
    Py_CLEAR(w->dict);
    Py_CLEAR(w->orig);
    Py_CLEAR(w->orig_code);
    Py_CLEAR(w->orig_defaults);
    Py_CLEAR(w->orig_kwdefaults);
    Py_CLEAR(w->armed_code);
    Py_CLEAR(w->init_copy);
    Py_CLEAR(w->init_class);
    Py_CLEAR(w->source);
    Py_CLEAR(w->source_code);
    Py_CLEAR(w->source_defaults);
    Py_CLEAR(w->source_kwdefaults);
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
    {"original", T_OBJECT, offsetof(Wrapper, orig), READONLY,
     "of a jitted function object's Wrapper: the user's function it is a copy of, or None"},
    {"source", T_OBJECT, offsetof(Wrapper, source), READONLY,
     "of a copy jitted under other options: the user's function it follows, or None"},
    {NULL},
};

/* A function attribute the Wrapper has as its function has it (3.11: what pijit.jit returns
 * is a Wrapper, and code that reads or sets `jitted.__defaults__` or `.__code__` must find
 * the function's, as from 3.12 on the jitted function object; an assignment stored in the
 * Wrapper's __dict__ would change nothing its calls run). */
static PyObject *
wrapper_get_fn_attr(Wrapper *w, void *name)
{
    if (w->fn == NULL) {
        PyErr_Format(PyExc_AttributeError, "Wrapper has no function, so no %s", (char *)name);
        return NULL;
    }
    return PyObject_GetAttrString(w->fn, (const char *)name);
}

static int
wrapper_set_fn_attr(Wrapper *w, PyObject *value, void *name)
{
    if (w->fn == NULL) {
        PyErr_Format(PyExc_AttributeError, "Wrapper has no function, so no %s", (char *)name);
        return -1;
    }
    return value == NULL ? PyObject_DelAttrString(w->fn, (const char *)name)
                         : PyObject_SetAttrString(w->fn, (const char *)name, value);
}

static PyGetSetDef wrapper_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"__code__", (getter)wrapper_get_fn_attr, (setter)wrapper_set_fn_attr, NULL, "__code__"},
    {"__defaults__", (getter)wrapper_get_fn_attr, (setter)wrapper_set_fn_attr, NULL,
     "__defaults__"},
    {"__kwdefaults__", (getter)wrapper_get_fn_attr, (setter)wrapper_set_fn_attr, NULL,
     "__kwdefaults__"},
    {"__globals__", (getter)wrapper_get_fn_attr, NULL, NULL, "__globals__"},
    {"__closure__", (getter)wrapper_get_fn_attr, NULL, NULL, "__closure__"},
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

/* ---- jitted function objects ---------------------------------------------------------- */

static PyObject *handle_key = NULL;        /* "__pijit__", interned */

/* The Wrapper in a jitted function's __dict__ (borrowed), or NULL (with an exception if
 * the lookup raised). */
static Wrapper *
wrapper_of_function(PyObject *func)
{
    PyObject *d = ((PyFunctionObject *)func)->func_dict;
    if (d == NULL || handle_key == NULL)
        return NULL;
    PyObject *w = PyDict_GetItemWithError(d, handle_key);
    return w != NULL && Py_IS_TYPE(w, &WrapperType) ? (Wrapper *)w : NULL;
}

/* The Wrappers of the jitted function objects called last, by the function's address: a
 * dict lookup per call cost about 150 instructions (benchmarks/call_floor.py).  An entry
 * is used only while its Wrapper's function is the one called (a Wrapper holds its
 * function, so the address is not reused meanwhile) and is forgotten when the Wrapper is
 * cleared; a function whose __dict__ was given another Wrapper since keeps running with
 * the one it had, which is as right. */
#define FN_CACHE 64
static struct { PyObject *func; Wrapper *w; } fn_cache[FN_CACHE];

static inline size_t
fn_cache_slot(PyObject *func)
{
    return ((uintptr_t)func >> 4) & (FN_CACHE - 1);
}

static void
fn_cache_forget(Wrapper *w)
{
    for (size_t k = 0; k < FN_CACHE; k++)
        if (fn_cache[k].w == w)
            fn_cache[k].func = NULL, fn_cache[k].w = NULL;
}

/* The Wrapper of the jitted function object `func` (borrowed), or NULL (with an
 * exception if the lookup raised). */
static inline Wrapper *
jitted_wrapper(PyObject *func)
{
    size_t k = fn_cache_slot(func);
    Wrapper *w = fn_cache[k].func == func ? fn_cache[k].w : NULL;
    if (w == NULL || w->fn != func) {
        w = wrapper_of_function(func);
        if (w != NULL && w->fn == func)
            fn_cache[k].func = func, fn_cache[k].w = w;
    }
    return w;
}

#if PJ_FUNCTION_VECTORCALL
/* A recursion through pijit's vectorcall recurses in C (a C call and an evaluation loop a
 * level), where plain Python runs it inline in one loop as deep as sys.getrecursionlimit()
 * allows: 3.12's C recursion budget (1500) ran out at a depth of about 800, so a recursion
 * plain Python finishes raised RecursionError.  Past half the budget the function is given
 * back to CPython for the rest of this call: its calls inside it are inlined (and the hook
 * steps aside there too, eval_frame.c), running plain Python, which is always right.  It is
 * armed again when the call returns (nothing else gives it back meanwhile: its calls no
 * longer come here).  (3.11's prefixed copies recurse in one evaluation loop already.) */
static PyObject *
deep_call(PyObject *func, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyFunctionObject *f = (PyFunctionObject *)func;
    pj_function_set_vectorcall(f, cpython_function_vc);
    PyObject *res = cpython_function_vc(func, args, nargsf, kwnames);
    if (f->vectorcall == cpython_function_vc)
        pj_function_set_vectorcall(f, function_vectorcall);
    return res;
}
#endif

/* The vectorcall of a jitted function object.  A function whose Wrapper left its __dict__
 * runs as CPython runs it. */
static PyObject *
function_vectorcall(PyObject *func, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
#if PJ_FUNCTION_VECTORCALL
    if (pj_c_recursion_left(PyThreadState_GET()) < 0.5)
        return deep_call(func, args, nargsf, kwnames);
#endif
    Wrapper *w = jitted_wrapper(func);
    if (w == NULL)
        return PyErr_Occurred() ? NULL : cpython_function_vc(func, args, nargsf, kwnames);
    /* The caller owns func, not w (a borrowed item of func's __dict__, which the call may
     * change): held for the call. */
    Py_INCREF(w);
    PyObject *res = jit_call(w, func, 1, args, nargsf, kwnames);
    Py_DECREF(w);
    return res;
}

#if PJ_FUNCTION_VECTORCALL
static int function_watcher = -1;
static PyObject *init_key = NULL;          /* "__init__", interned */

static int on_function_event(PyFunction_WatchEvent event, PyFunctionObject *func,
                             PyObject *new_value);

/* The watcher that sees a new __code__ of a function given back: 0, or -1 (no watcher
 * left: then nothing is given back, as a change would go unseen). */
static int
watch_functions(void)
{
    if (function_watcher < 0 && (function_watcher = PyFunction_AddWatcher(on_function_event)) < 0) {
        PyErr_Clear();
        return -1;
    }
    return 0;
}

/* Does init_class's __dict__ hold w's plain copy, put there by init_give_back? */
static int
init_given_back(Wrapper *w)
{
    if (w->init_class == NULL || w->init_copy == NULL)
        return 0;
    PyObject *d = ((PyTypeObject *)w->init_class)->tp_dict;
    return d != NULL && PyDict_GetItemWithError(d, init_key) == w->init_copy;
}

/* A class calls its Python __init__ without a vectorcall on 3.13 (CALL_ALLOC_AND_ENTER_INIT
 * pushes its frame; it specializes only for a function in the class's __dict__), so a
 * jitted __init__ stays a Wrapper there, and each construction took CPython's generic
 * class call and the Wrapper's (call_floor's init: ~1,000 instructions more than plain).
 * Once pijit has nothing to do for its calls, the class that holds the Wrapper (the first
 * of self's MRO whose __dict__ does, as super().__init__ finds it) is given the plain
 * copy of its function instead, by type.__setattr__ (so the type's version, and with it
 * every specialization and attribute cache of it and its subclasses, changes); the copy's
 * __dict__ holds the Wrapper, so the class keeps it (and its code's state) alive.  A class
 * whose metaclass sets attributes its own way, or a call whose self has no such class,
 * never gives back (init_copy dropped). */
static void
init_give_back(Wrapper *w, PyObject *self)
{
    PyFunctionObject *fn = (PyFunctionObject *)w->fn, *g = (PyFunctionObject *)w->init_copy;
    PyObject *mro = Py_TYPE(self)->tp_mro;
    PyTypeObject *cls = NULL;
    for (Py_ssize_t i = 0; mro != NULL && PyTuple_Check(mro) && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *t = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (t->tp_dict != NULL && PyDict_GetItemWithError(t->tp_dict, init_key) == (PyObject *)w) {
            cls = t;
            break;
        }
    }
    if (cls == NULL || !(cls->tp_flags & Py_TPFLAGS_HEAPTYPE)
        || (cls->tp_flags & Py_TPFLAGS_IMMUTABLETYPE)
        || Py_TYPE(cls)->tp_setattro != PyType_Type.tp_setattro || !PyFunction_Check(fn)) {
        Py_CLEAR(w->init_copy);
        return;
    }
    /* The copy runs what the function runs now (a Wrapper follows its function). */
    if ((g->func_code != fn->func_code
         && PyObject_SetAttrString((PyObject *)g, "__code__", fn->func_code) < 0)
        || (g->func_defaults != fn->func_defaults && PyObject_SetAttrString(
                (PyObject *)g, "__defaults__", fn->func_defaults ? fn->func_defaults : Py_None) < 0)
        || (g->func_kwdefaults != fn->func_kwdefaults && PyObject_SetAttrString(
                (PyObject *)g, "__kwdefaults__",
                fn->func_kwdefaults ? fn->func_kwdefaults : Py_None) < 0)
        || watch_functions() < 0) {
        PyErr_Clear();
        return;
    }
    CodeState *st = w->state;
    PyObject *ref = PyWeakref_NewRef((PyObject *)w, NULL);
    if (ref == NULL || (st->inlined == NULL && (st->inlined = PyList_New(0)) == NULL)
        || PyList_Append(st->inlined, ref) < 0) {
        Py_XDECREF(ref);
        PyErr_Clear();          /* stays a Wrapper: always right */
        return;
    }
    Py_DECREF(ref);
    w->init_class = Py_NewRef((PyObject *)cls);
    if (PyType_Type.tp_setattro((PyObject *)cls, init_key, (PyObject *)g) < 0) {
        PyErr_Clear();
        Py_CLEAR(w->init_class);
    }
}

/* Put the Wrapper back in the class it was given back to (init_given_back(w): the class
 * still holds the copy pijit put there; else the user's assignment stays). */
static void
init_restore(Wrapper *w)
{
    PyObject *cls = w->init_class;
    w->init_class = NULL;
    if (PyType_Type.tp_setattro(cls, init_key, (PyObject *)w) < 0)
        PyErr_WriteUnraisable(cls);         /* the copy stays: plain Python, always right */
    Py_DECREF(cls);
}
#else
static void
init_give_back(Wrapper *w, PyObject *self)
{
}
#endif

#if PJ_FUNCTION_VECTORCALL
/* A new __code__ of a function given back to CPython may have work for pijit: arm it
 * (the next call follows the code, as a Wrapper's does).  Every function event of the
 * interpreter comes here once a function was given back; all but code changes of
 * functions with a Wrapper return at once. */
static int
on_function_event(PyFunction_WatchEvent event, PyFunctionObject *func, PyObject *new_value)
{
    if (event != PyFunction_EVENT_MODIFY_CODE && event != PyFunction_EVENT_MODIFY_DEFAULTS
        && event != PyFunction_EVENT_MODIFY_KWDEFAULTS)
        return 0;
    if (event == PyFunction_EVENT_MODIFY_CODE && func->vectorcall == cpython_function_vc) {
        Wrapper *own = wrapper_of_function((PyObject *)func);
        if (own != NULL && own->fn == (PyObject *)func)
            pj_function_set_vectorcall(func, function_vectorcall);
    }
    /* The user's function of given-back copies (they share its code): they take the change
     * at their next call, armed.  A given-back __init__ whose function, or the copy in its
     * class, changes: its Wrapper goes back in the class (and takes a change of the copy,
     * as an assignment to the Wrapper's attribute would have). */
    CodeState *st = code_state((PyCodeObject *)func->func_code);
    for (Py_ssize_t i = 0; st != NULL && st->inlined != NULL && i < PyList_GET_SIZE(st->inlined);
         i++) {
        PyObject *f = pj_weakref_get(PyList_GET_ITEM(st->inlined, i));
        if (f != NULL && Py_IS_TYPE(f, &WrapperType)) {
            Wrapper *iw = (Wrapper *)f;
            if ((iw->fn == (PyObject *)func || iw->init_copy == (PyObject *)func)
                && init_given_back(iw)) {
                init_restore(iw);
                if (iw->init_copy == (PyObject *)func && iw->fn != NULL) {
                    const char *name = event == PyFunction_EVENT_MODIFY_CODE ? "__code__"
                        : event == PyFunction_EVENT_MODIFY_DEFAULTS ? "__defaults__"
                        : "__kwdefaults__";
                    (void)PyObject_SetAttrString(iw->fn, name, new_value ? new_value : Py_None);
                }
            }
            Py_DECREF(f);
            continue;
        }
        Wrapper *w = f != NULL ? wrapper_of_function(f) : NULL;
        if (w != NULL && w->orig == (PyObject *)func
            && ((PyFunctionObject *)f)->vectorcall == cpython_function_vc)
            pj_function_set_vectorcall((PyFunctionObject *)f, function_vectorcall);
        Py_XDECREF(f);
    }
    return PyErr_Occurred() ? -1 : 0;
}
#endif

#if !PJ_FUNCTION_VECTORCALL
/* Does nothing but pijit's jitted copy `func` hold its user's function (its Wrapper, and
 * its `fn` and `__wrapped__`, as pijit.jit made it, and the timed runs calling it, two
 * references each: call_outside's and its frame's)?  Then no one can change it unseen.
 * (An error is cleared by the caller.) */
static int
original_private(Wrapper *w, PyObject *func, CodeState *st)
{
    static PyObject *fn_key, *wrapped_key;      /* interned, kept */
    PyObject *d = ((PyFunctionObject *)func)->func_dict;
    /* Tried at every call while pijit has nothing to do: the count first, no lookup. */
    if (w->orig == NULL || d == NULL || Py_REFCNT(w->orig) != 3 + 2 * st->user_calls)
        return 0;
    if (fn_key == NULL && ((fn_key = PyUnicode_InternFromString("fn")) == NULL
                           || (wrapped_key = PyUnicode_InternFromString("__wrapped__")) == NULL))
        return 0;
    return PyDict_GetItemWithError(d, fn_key) == w->orig
        && PyDict_GetItemWithError(d, wrapped_key) == w->orig;
}
#endif

/* Every call of st's code runs plain: let CPython call `func` (a jitted function object of
 * that code) by itself, remembered in st->inlined to be armed again.  On 3.11 (no
 * PJ_FUNCTION_VECTORCALL) nothing: CPython would not call pijit's vectorcall again. */
static void
give_back(PyObject *func, CodeState *st)
{
    /* A private copy's calls are the only place it sees its user's function change. */
    Wrapper *own = wrapper_of_function(func);
    if (own != NULL && own->source != NULL)
        return;
    PyErr_Clear();
#if PJ_FUNCTION_VECTORCALL
    if (watch_functions() < 0)
        return;                 /* no watcher: a new __code__ would go unseen, so stay armed */
    PyObject *ref = PyWeakref_NewRef(func, NULL);
    if (ref == NULL || (st->inlined == NULL && (st->inlined = PyList_New(0)) == NULL)
        || PyList_Append(st->inlined, ref) < 0) {
        Py_XDECREF(ref);
        PyErr_Clear();          /* stays armed: always right */
        return;
    }
    Py_DECREF(ref);
    PyFunctionObject *f = (PyFunctionObject *)func;
    pj_function_set_vectorcall(f, cpython_function_vc);
    Wrapper *w = wrapper_of_function(func);
    PyErr_Clear();
    PyFunctionObject *o = w != NULL ? (PyFunctionObject *)w->orig : NULL;
    if (o != NULL && o->func_version != 0 && f->func_code == o->func_code
        && f->func_defaults == o->func_defaults && f->func_kwdefaults == o->func_kwdefaults)
        pj_function_version_of(f, o);
#else
    /* 3.11: the function runs the user's code, with no prefix (call_prefix.c), and so no
     * longer follows the user's function: only one nothing else holds is given back so.
     * One whose function someone holds keeps its prefix, which then only checks that the
     * function is as the copy took it (w->following: call_prefix.c's prefix_answer). */
    Wrapper *w = jitted_wrapper(func);
    PyCodeObject *code = (PyCodeObject *)PyFunction_GET_CODE(func);
    if (w != NULL && w->following)
        return;         /* its calls from inside jitted calls still come here */
    PyObject *ref = w != NULL && w->fn == func && original_code(code) != code
        ? PyWeakref_NewRef(func, NULL) : NULL;
    if (ref == NULL || (st->inlined == NULL && (st->inlined = PyList_New(0)) == NULL)
        || PyList_Append(st->inlined, ref) < 0) {
        Py_XDECREF(ref);
        PyErr_Clear();          /* stays armed: always right (asked again at the next call) */
        return;
    }
    Py_DECREF(ref);
    int private = original_private(w, func, st);
    PyErr_Clear();
    if (!private) {
        w->following = 1;
        return;
    }
    Py_XSETREF(w->armed_code, Py_NewRef((PyObject *)code));
    if (PyObject_SetAttrString(func, "__code__", (PyObject *)original_code(code)) < 0)
        PyErr_Clear();
#endif
}

/* Was `f` (a jitted function object) given back to CPython, and not armed since? */
static int
given_back(PyObject *f)
{
#if PJ_FUNCTION_VECTORCALL
    if (Py_IS_TYPE(f, &WrapperType))        /* an __init__'s, given back to its class */
        return init_given_back((Wrapper *)f);
#endif
    if (!PyFunction_Check(f))
        return 0;
    Wrapper *w = wrapper_of_function(f);
    PyErr_Clear();
#if PJ_FUNCTION_VECTORCALL
    return w != NULL && w->fn == f && ((PyFunctionObject *)f)->vectorcall == cpython_function_vc;
#else
    return w != NULL && w->fn == f && (w->following || (w->armed_code != NULL
        && PyFunction_GET_CODE(f) == (PyObject *)original_code((PyCodeObject *)w->armed_code)));
#endif
}

/* Arm the given-back function `f` again. */
static void
arm_again(PyObject *f)
{
#if PJ_FUNCTION_VECTORCALL
    if (Py_IS_TYPE(f, &WrapperType))
        init_restore((Wrapper *)f);
    else
        pj_function_set_vectorcall((PyFunctionObject *)f, function_vectorcall);
#else
    Wrapper *w = wrapper_of_function(f);
    if (w != NULL && w->following)
        w->following = 0;
    else if (w != NULL && PyObject_SetAttrString(f, "__code__", w->armed_code) < 0)
        PyErr_Clear();
#endif
}

/* Arm again the functions of st's code given back to CPython (something may have given
 * pijit work for their calls). */
static void
rearm_inlined(CodeState *st)
{
    PyObject *refs = st->inlined;
    if (refs == NULL)
        return;
    st->inlined = NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(refs); i++) {
        PyObject *f = pj_weakref_get(PyList_GET_ITEM(refs, i));
        if (f != NULL && given_back(f))
            arm_again(f);
        Py_XDECREF(f);
    }
    Py_DECREF(refs);
}

/* Functions of st's code given back to CPython, still alive and not armed again. */
static Py_ssize_t
inlined_count(CodeState *st)
{
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; st->inlined != NULL && i < PyList_GET_SIZE(st->inlined); i++) {
        PyObject *f = pj_weakref_get(PyList_GET_ITEM(st->inlined, i));
        n += f != NULL && given_back(f);
        Py_XDECREF(f);
    }
    return n;
}

/* given_back(func): was the jitted function object given back to CPython (and not armed
 * again since)? */
static PyObject *
m_given_back(PyObject *m, PyObject *f)
{
    return PyBool_FromLong(given_back(f));
}

/* arm(func): give `func` pijit's vectorcall (jit puts its Wrapper in its __dict__ first).
 * TypeError for a function whose vectorcall is another's (another JIT's). */
static PyObject *
m_arm(PyObject *m, PyObject *f)
{
    if (!PyFunction_Check(f)) {
        PyErr_Format(PyExc_TypeError, "arm() needs a function, got %R", f);
        return NULL;
    }
    vectorcallfunc vc = ((PyFunctionObject *)f)->vectorcall;
    if (vc != function_vectorcall && vc != cpython_function_vc) {
        PyErr_Format(PyExc_TypeError, "%R has a vectorcall of its own", f);
        return NULL;
    }
    pj_function_set_vectorcall((PyFunctionObject *)f, function_vectorcall);
    Py_RETURN_NONE;
}

/* vectorcall_of(func) -> "pijit", "cpython" or "other": whose vectorcall calls func (3.11:
 * "pijit" for one whose code is behind pijit's prefix, call_prefix.c). */
static PyObject *
m_vectorcall_of(PyObject *m, PyObject *f)
{
    if (!PyFunction_Check(f)) {
        PyErr_Format(PyExc_TypeError, "vectorcall_of() needs a function, got %R", f);
        return NULL;
    }
    vectorcallfunc vc = ((PyFunctionObject *)f)->vectorcall;
#if !PJ_FUNCTION_VECTORCALL
    /* 3.11: the calls of a jitted function object armed with pijit's prefix are pijit's. */
    PyCodeObject *code = (PyCodeObject *)PyFunction_GET_CODE(f);
    if (vc == cpython_function_vc && original_code(code) != code)
        return PyUnicode_FromString("pijit");
#endif
    return PyUnicode_FromString(vc == function_vectorcall ? "pijit"
                                : vc == cpython_function_vc ? "cpython" : "other");
}

/* follow_original(func): a jitted function object takes what its user's function changed
 * since (as its next call would); capture calls it before inlining one. */
static PyObject *
m_follow_original(PyObject *m, PyObject *f)
{
    Wrapper *w = PyFunction_Check(f) ? wrapper_of_function(f) : NULL;
    if (w == NULL && PyErr_Occurred())
        return NULL;
    if (w != NULL && original_changed(w) && follow_original(w, f) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* set_init_copy(wrapper, copy): the plain copy of a Wrapper's __init__ (its __dict__
 * holding the Wrapper) that its class may hold in its place while pijit has nothing to do
 * for its calls (init_give_back); None: never. */
static PyObject *
m_set_init_copy(PyObject *m, PyObject *args)
{
    PyObject *w, *g;
    if (!PyArg_ParseTuple(args, "O!O:set_init_copy", &WrapperType, &w, &g))
        return NULL;
    if (g != Py_None && !(PyFunction_Check(g) && PJ_FUNCTION_VECTORCALL
                          && wrapper_of_function(g) == (Wrapper *)w)) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "set_init_copy: %R is not a copy holding %R", g, w);
        return NULL;
    }
    Py_XSETREF(((Wrapper *)w)->init_copy, g == Py_None ? NULL : Py_NewRef(g));
    Py_RETURN_NONE;
}

/* set_source(wrapper, function): the user's function that the Wrapper's function (or the
 * function its jitted function object is a copy of) is a private copy of, jitted under
 * other options (api.py's _variant); it follows the function's changes. */
static PyObject *
m_set_source(PyObject *m, PyObject *args)
{
    PyObject *w, *s;
    if (!PyArg_ParseTuple(args, "O!O!:set_source", &WrapperType, &w, &PyFunction_Type, &s))
        return NULL;
    Wrapper *wr = (Wrapper *)w;
    PyFunctionObject *f = (PyFunctionObject *)s;
    Py_XSETREF(wr->source, Py_NewRef(s));
    Py_XSETREF(wr->source_code, Py_XNewRef(f->func_code));
    Py_XSETREF(wr->source_defaults, Py_XNewRef(f->func_defaults));
    Py_XSETREF(wr->source_kwdefaults, Py_XNewRef(f->func_kwdefaults));
    Py_RETURN_NONE;
}

/* set_inline(code, flag): may jitted functions of the code be given back to CPython
 * (jit_config's inline_plain)?  False arms those given back. */
static PyObject *
m_set_inline(PyObject *m, PyObject *args)
{
    PyObject *o;
    int flag;
    if (!PyArg_ParseTuple(args, "Op:set_inline", &o, &flag))
        return NULL;
    CodeState *st = state_of(o);
    if (st == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "set_inline: %R is not marked", o);
        return NULL;
    }
    st->inline_plain = flag;
    if (!flag)
        rearm_inlined(st);
    Py_RETURN_NONE;
}

/* CPython's vectorcall of Python functions, read from a function made here, and the key. */
static int
functions_init(void)
{
    handle_key = PyUnicode_InternFromString("__pijit__");
#if PJ_FUNCTION_VECTORCALL
    if ((init_key = PyUnicode_InternFromString("__init__")) == NULL)
        return -1;
#endif
    PyCodeObject *code = PyCode_NewEmpty("<pijit>", "probe", 0);
    PyObject *globals = PyDict_New();
    PyObject *f = code && globals ? PyFunction_New((PyObject *)code, globals) : NULL;
    if (f != NULL)
        cpython_function_vc = ((PyFunctionObject *)f)->vectorcall;
    Py_XDECREF(f);
    Py_XDECREF(globals);
    Py_XDECREF(code);
    return handle_key != NULL && f != NULL ? 0 : -1;
}

#define FUNCTION_METHODS \
    {"arm", m_arm, METH_O, \
     "arm(func): func's calls go through pijit (its __dict__['__pijit__'] is its Wrapper)"}, \
    {"set_init_copy", m_set_init_copy, METH_VARARGS, \
     "set_init_copy(wrapper, copy): what a class holds in place of a given-back __init__"}, \
    {"set_source", m_set_source, METH_VARARGS, \
     "set_source(wrapper, function): the user's function a variant's copy follows"}, \
    {"set_inline", m_set_inline, METH_VARARGS, \
     "set_inline(code, flag): may its jitted functions be given back to CPython's calls"}, \
    {"follow_original", m_follow_original, METH_O, \
     "follow_original(func): a jitted function object takes its user's function's changes"}, \
    {"given_back", m_given_back, METH_O, \
     "given_back(func): was the jitted function object given back to CPython's calls"}, \
    {"vectorcall_of", m_vectorcall_of, METH_O, \
     "vectorcall_of(func) -> 'pijit', 'cpython' or 'other'"},
