/* call_prefix.c -- 3.11: what the prefix of a jitted function object's code calls.
 *
 * 3.11's CALL inlines any Python function without reading its vectorcall, so pijit.jit
 * returns a copy of the user's function whose code begins with a call of a CallPrefix
 * (pijit/call_prefix.py builds it): the prefix runs in the caller's evaluation loop, in
 * the function's own frame, before the frame's first traceable instruction.  The
 * CallPrefix answers for that frame what the hook answers for a frame at its start
 * (dispatch, run with the frame as it stands): the result of the call (a compiled entry's,
 * the frame then returns it unevaluated) or itself, "go on" (the frame runs the user's
 * code: plain Python at plain Python's speed, with no C call and no evaluation loop of
 * its own).  Giving the function back to CPython is setting its __code__ to the user's
 * code (no prefix at all); arming it again, setting the prefixed code back.
 *
 * A jitted function object is a copy of the user's function that follows it (wrapper.c's
 * follow_original).  A frame is bound before its prefix runs: when the user's function
 * changed since, the copy follows, and this call is made again with the frame's arguments
 * when they bind as the caller's would have; when they might not (a default the frame
 * may have taken was replaced), RuntimeError: pijit does not guess what was passed.
 */
#include "pijit.h"

/* Call `fn` with what `frame` (of `code`'s layout, at its start) was bound: its positional
 * slots, the items of its *args, its keyword-only slots and the items of its **kwargs by
 * name.  Every parameter is passed, so fn's defaults play no part.  `t`: outside this
 * thread's jitted calls (call_outside), or NULL: a call from here. */
static PyObject *
call_frame_args(ThreadHook *t, PyObject *fn, _PyInterpreterFrame *frame, PyCodeObject *code)
{
    PyObject **slots = frame->localsplus;
    Py_ssize_t argc = code->co_argcount, kwonly = code->co_kwonlyargcount;
    int flags = code->co_flags;
    if (kwonly == 0 && !(flags & (CO_VARARGS | CO_VARKEYWORDS)))
        return t ? call_outside(t, fn, slots, (size_t)argc, NULL)
                 : PyObject_Vectorcall(fn, slots, (size_t)argc, NULL);
    Py_ssize_t at = argc + kwonly;
    PyObject *star = flags & CO_VARARGS ? slots[at++] : NULL;
    PyObject *starstar = flags & CO_VARKEYWORDS ? slots[at] : NULL;
    Py_ssize_t npos = argc + (star ? PyTuple_GET_SIZE(star) : 0);
    Py_ssize_t nkw = kwonly + (starstar ? PyDict_GET_SIZE(starstar) : 0);
    PyObject **items = PyMem_Malloc((npos + nkw + 1) * sizeof(PyObject *));
    PyObject *names = PyTuple_New(nkw), *res = NULL;
    if (items == NULL || names == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t n = 0, k = 0;
    for (Py_ssize_t i = 0; i < argc; i++)
        items[n++] = slots[i];
    for (Py_ssize_t i = 0; star != NULL && i < PyTuple_GET_SIZE(star); i++)
        items[n++] = PyTuple_GET_ITEM(star, i);
    for (Py_ssize_t i = 0; i < kwonly; i++, k++) {
        items[n++] = slots[argc + i];
        PyTuple_SET_ITEM(names, k, Py_NewRef(PyTuple_GET_ITEM(code->co_localsplusnames,
                                                              argc + i)));
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (starstar != NULL && k < nkw && PyDict_Next(starstar, &pos, &key, &value)) {
        items[n++] = value;
        PyTuple_SET_ITEM(names, k++, Py_NewRef(key));
    }
    if (k != nkw) {
        PyErr_SetString(PyExc_RuntimeError, "pijit: **kwargs changed size during a call");
        goto done;
    }
    /* The items are borrowed from the frame, which outlives the call. */
    res = t ? call_outside(t, fn, items, (size_t)npos, nkw ? names : NULL)
            : PyObject_Vectorcall(fn, items, (size_t)npos, nkw ? names : NULL);
done:
    PyMem_Free(items);
    Py_XDECREF(names);
    return res;
}

#if !PJ_FUNCTION_VECTORCALL
#include <opcode.h>

static PyTypeObject CallPrefixType;

typedef struct {
    PyObject_HEAD
    PyCodeObject *code;     /* the user's code the prefix goes before (strong) */
} CallPrefix;

/* Where the prefix (pijit/call_prefix.py) loads its CallPrefix and asks it (FOR_ITER). */
#define PREFIX_LOAD_AT 0
#define PREFIX_ASK_AT 1

static PyObject *prefix_callback = NULL;          /* strong or NULL */

/* The CallPrefix a code begins with (borrowed), or NULL. */
static CallPrefix *
prefix_of(PyCodeObject *code)
{
    _Py_CODEUNIT *c = _PyCode_CODE(code);
    if (Py_SIZE(code) <= PREFIX_ASK_AT || _Py_OPCODE(c[PREFIX_ASK_AT]) != FOR_ITER)
        return NULL;
    int k = _Py_OPARG(c[PREFIX_LOAD_AT]);
    if (k >= PyTuple_GET_SIZE(code->co_consts))
        return NULL;
    PyObject *p = PyTuple_GET_ITEM(code->co_consts, k);
    return Py_IS_TYPE(p, &CallPrefixType) ? (CallPrefix *)p : NULL;
}

static PyCodeObject *
original_code(PyCodeObject *code)
{
    CallPrefix *p = prefix_of(code);
    return p != NULL ? p->code : code;
}

/* The code a jitted function object runs for the user's `code` (new reference): the
 * prefixed one (the Python callback builds it), or `code` itself when none is made. */
static PyObject *
prefixed_code(PyObject *code)
{
    PyObject *cb = prefix_callback;
    if (cb == NULL || !PyCode_Check(code) || prefix_of((PyCodeObject *)code) != NULL)
        return Py_NewRef(code);
    Py_INCREF(cb);
    PyObject *res = PyObject_CallOneArg(cb, code);
    Py_DECREF(cb);
    if (res != NULL && !PyCode_Check(res)) {
        PyErr_Format(PyExc_TypeError, "pijit: prefix callback returned %R, not a code", res);
        Py_CLEAR(res);
    }
    return res;
}

/* Does the default `d` (at `i` of the tuple `was`) stay what a slot holding it would take
 * under the defaults `now`?  A slot holding the old default object may have been filled by
 * it or passed it: the new defaults must give it there too. */
static int
default_kept(PyObject *was, PyObject *now, Py_ssize_t from_end, PyObject *slot)
{
    Py_ssize_t nw = was ? PyTuple_GET_SIZE(was) : 0, nn = now ? PyTuple_GET_SIZE(now) : 0;
    if (from_end > nw || PyTuple_GET_ITEM(was, nw - from_end) != slot)
        return 1;               /* not the old default: it was passed */
    return from_end <= nn && PyTuple_GET_ITEM(now, nn - from_end) == slot;
}

/* Would the caller's arguments have bound as `frame`'s did (under `code`, with the
 * defaults `defaults` and `kwdefaults`) under `now`'s code and defaults? */
static int
binds_alike(_PyInterpreterFrame *frame, PyCodeObject *code, PyObject *defaults,
            PyObject *kwdefaults, PyFunctionObject *now)
{
    PyCodeObject *c = (PyCodeObject *)now->func_code;
    const int star = CO_VARARGS | CO_VARKEYWORDS;
    if (c->co_argcount != code->co_argcount || c->co_kwonlyargcount != code->co_kwonlyargcount
        || c->co_posonlyargcount != code->co_posonlyargcount
        || (c->co_flags & star) != (code->co_flags & star))
        return 0;
    Py_ssize_t nparams = code->co_argcount + code->co_kwonlyargcount
        + !!(code->co_flags & CO_VARARGS) + !!(code->co_flags & CO_VARKEYWORDS);
    for (Py_ssize_t i = 0; i < nparams; i++) {
        int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(c->co_localsplusnames, i),
                                            PyTuple_GET_ITEM(code->co_localsplusnames, i),
                                            Py_EQ);
        if (same <= 0)
            return same;
    }
    PyObject **slots = frame->localsplus;
    for (Py_ssize_t i = 0; defaults != now->func_defaults && i < code->co_argcount; i++)
        if (!default_kept(defaults, now->func_defaults, code->co_argcount - i, slots[i]))
            return 0;
    for (Py_ssize_t i = 0; kwdefaults != now->func_kwdefaults && i < code->co_kwonlyargcount;
         i++) {
        Py_ssize_t s = code->co_argcount + i;
        PyObject *name = PyTuple_GET_ITEM(code->co_localsplusnames, s);
        PyObject *d = kwdefaults ? PyDict_GetItemWithError(kwdefaults, name) : NULL;
        PyObject *e = d && now->func_kwdefaults
            ? PyDict_GetItemWithError(now->func_kwdefaults, name) : NULL;
        if (PyErr_Occurred())
            return -1;
        if (d == slots[s] && e != d)
            return 0;
    }
    return 1;
}

/* The user's function changed since `func` (its jitted copy, whose frame this is) took it:
 * func follows it, and this call is made again when its arguments bind alike. */
static PyObject *
follow_and_call_again(Wrapper *w, PyFunctionObject *func, _PyInterpreterFrame *frame,
                      CallPrefix *p)
{
    PyObject *defaults = Py_XNewRef(func->func_defaults);
    PyObject *kwdefaults = Py_XNewRef(func->func_kwdefaults);
    PyObject *res = NULL;
    if (follow_original(w, (PyObject *)func) < 0)
        goto done;
    int alike = binds_alike(frame, p->code, defaults, kwdefaults,
                            (PyFunctionObject *)w->orig);
    if (alike > 0)
        res = call_frame_args(NULL, (PyObject *)func, frame, p->code);
    else if (alike == 0)
        PyErr_Format(PyExc_RuntimeError,
                     "pijit: %R changed its parameters or defaults after this call of its "
                     "jitted copy bound its arguments; call it again", w->orig);
done:
    Py_XDECREF(defaults);
    Py_XDECREF(kwdefaults);
    return res;
}

/* The hook's part of the answer (pijit_hook's checks, then dispatch) for a frame of st's
 * code at its prefix, `fn` the user's function, not traced. */
static PyObject *
prefix_dispatch(PyThreadState *ts, ThreadHook *t, _PyInterpreterFrame *frame, CodeState *st,
                CallPrefix *p, PyObject *fn)
{
    if (t->compiling || stack_left_of(t) < stack_soft_limit_of(t))
        return Py_NewRef(p);
    st->calls++;
    if (st->state == ST_NEVER_COMPILE || being_built(st))
        return Py_NewRef(p);
    if (hook_enter(t) < 0)
        return NULL;
    _PyInterpreterFrame *was_frame = t->prefix_frame;
    PyObject *was_prefix = t->prefix, *was_fn = t->prefix_fn;
    t->prefix_frame = frame;
    t->prefix = (PyObject *)p;
    t->prefix_fn = fn;
    Py_INCREF(st);
    PyObject *res = dispatch(ts, frame, st);
    Py_DECREF(st);
    t->prefix_frame = was_frame;
    t->prefix = was_prefix;
    t->prefix_fn = was_fn;
    hook_leave(t);
    return res;
}

/* prefix_answer's run of `frame` (of st's code, the copy `func` of the user's function
 * `fn`): plain, through the hook or by a call.  The caller holds st and the Wrapper that
 * owns fn: the run may drop the Wrapper from func's __dict__ (and with it st). */
static PyObject *
prefix_run(PyThreadState *ts, _PyInterpreterFrame *frame, CallPrefix *p,
           PyFunctionObject *func, CodeState *st, PyObject *fn)
{
    /* A profiler is told when the frame returns, the answer too (its RETURN_VALUE), but not
     * of its call, which is RESUME's: its return ended the caller's entry instead (cProfile
     * lost the caller of every jitted call).  Profiled, the frame goes on into the user's
     * code, as plain Python, whose call and return it sees. */
    if (ts->c_profilefunc != NULL)
        return Py_NewRef(p);
    /* A tracer (a debugger, coverage) sees the user's function run its own code object. */
    if (pj_traced(ts, st->code))
        return call_frame_args(NULL, fn, frame, p->code);
    if (nothing_to_do(st))
        give_back((PyObject *)func, st);
    ThreadHook *t;              /* this_thread() when needed: a TLS read is a call here */
    PyObject *res = NULL;
    if (st->nargs == p->code->co_argcount) {
        /* Positional parameters only: the slots are what a call passing each one would
         * pass, and the Wrapper's plain calls take them so. */
        res = wrapper_plain_call(st, fn, frame->localsplus, (size_t)st->nargs, NULL,
                                 (PyObject *)p);
    }
    if (res == NULL && !PyErr_Occurred())
        res = prefix_dispatch(ts, t = this_thread(), frame, st, p, fn);
    if (res == (PyObject *)p && active_threads > 0 && (t = this_thread())->depth > 0) {
        /* Inside a jitted call a plain run goes on outside it (as eval_outside runs a
         * frame), so the hook does not see, and slow, the frames it makes: by a call. */
        Py_DECREF(res);
        st->user_calls++;
        res = call_frame_args(t, fn, frame, p->code);
        st->user_calls--;
    }
    return res;
}

/* The answer for `frame`, at its prefix P (a new reference: P to go on, or the result). */
static PyObject *
prefix_answer(PyThreadState *ts, _PyInterpreterFrame *frame, CallPrefix *p)
{
    PyFunctionObject *func = frame->f_func;
    Wrapper *w = jitted_wrapper((PyObject *)func);
    if (w == NULL)          /* a function made of the code by someone else: plain */
        return PyErr_Occurred() ? NULL : Py_NewRef(p);
    if (!jit_enabled)
        return Py_NewRef(p);
    if (original_changed(w)) {
        w->following = 0;           /* the change may give pijit work */
        Py_INCREF(w);
        PyObject *res = follow_and_call_again(w, func, frame, p);
        Py_DECREF(w);
        return res;
    }
    /* Given back, its function held by someone (wrapper.c's give_back): the user's code
     * runs in this frame, as if the copy's code were the user's, but a call from inside a
     * jitted call or a traced one takes the armed path, as a given-back one would reach
     * the hook or run its own code object. */
    if (w->following && (active_threads == 0 || this_thread()->depth == 0)
        && !pj_traced(ts, p->code))
        return Py_NewRef(p);
    CodeState *st = w->state;
    PyObject *fn = w->orig;
    /* The copy runs the user's code it was made of (a __code__ assigned to the copy
     * itself runs as it is, plain). */
    if (st == NULL || st->code != p->code || PyFunction_GET_CODE(fn) != (PyObject *)p->code)
        return Py_NewRef(p);
    /* Held: the Wrapper (its `orig` is fn: a reference to fn itself would count against
     * original_private's count) and st (the Wrapper may take another code's state). */
    Py_INCREF(w);
    Py_INCREF(st);
    PyObject *res = prefix_run(ts, frame, p, func, st, fn);
    Py_DECREF(st);
    Py_DECREF(w);
    return res;
}

/* next(P): the answer for the frame that asked it at its prefix (see the top); NULL
 * without an exception: go on.  An exception propagates from the frame, but FOR_ITER would
 * take a StopIteration for "go on": the prefix raises that one itself (prefix_iter). */
static PyObject *
prefix_next(CallPrefix *p)
{
    PyThreadState *ts = PyThreadState_GET();
    _PyInterpreterFrame *frame = ts->cframe->current_frame;
    if (frame == NULL || prefix_of(frame->f_code) != p
        || frame->prev_instr != _PyCode_CODE(frame->f_code) + PREFIX_ASK_AT) {
        PyErr_SetString(PyExc_TypeError, "a CallPrefix is asked by the code it begins");
        return NULL;
    }
    PyObject *res = prefix_answer(ts, frame, p);
    if (res == (PyObject *)p) {
        Py_DECREF(res);
        return NULL;
    }
    if (res == NULL && PyErr_ExceptionMatches(PyExc_StopIteration)) {
        ThreadHook *t = this_thread();
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        Py_XSETREF(t->stop_type, type);
        Py_XSETREF(t->stop_value, value);
        Py_XSETREF(t->stop_tb, tb);
        return Py_NewRef(p);
    }
    return res;
}

/* iter(P): raise the StopIteration prefix_next kept (only the prefix calls it, at once). */
static PyObject *
prefix_iter(CallPrefix *p)
{
    ThreadHook *t = this_thread();
    if (t->stop_type == NULL) {
        PyErr_SetString(PyExc_TypeError, "a CallPrefix is not iterable");
        return NULL;
    }
    PyErr_Restore(t->stop_type, t->stop_value, t->stop_tb);
    t->stop_type = t->stop_value = t->stop_tb = NULL;
    return NULL;
}

static PyObject *
prefix_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *code;
    if ((kwds && PyDict_GET_SIZE(kwds)) || !PyArg_UnpackTuple(args, "CallPrefix", 1, 1, &code))
        return NULL;
    if (!PyCode_Check(code)) {
        PyErr_Format(PyExc_TypeError, "CallPrefix(code) needs a code object, got %R", code);
        return NULL;
    }
    CallPrefix *p = (CallPrefix *)type->tp_alloc(type, 0);
    if (p == NULL)
        return NULL;
    p->code = (PyCodeObject *)Py_NewRef(code);
    return (PyObject *)p;
}

static void
prefix_dealloc(CallPrefix *p)
{
    Py_CLEAR(p->code);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

/* A prefixed code pickles (cloudpickle sends codes by value) with its CallPrefix. */
static PyObject *
prefix_reduce(CallPrefix *p, PyObject *unused)
{
    return Py_BuildValue("(O(O))", (PyObject *)Py_TYPE(p), (PyObject *)p->code);
}

static PyObject *
prefix_repr(CallPrefix *p)
{
    return PyUnicode_FromFormat("<pijit call prefix of %U>", p->code->co_qualname);
}

static PyMethodDef prefix_methods[] = {
    {"__reduce__", (PyCFunction)prefix_reduce, METH_NOARGS, "pickle with its code"},
    {NULL},
};

static PyMemberDef prefix_members[] = {
    {"code", T_OBJECT, offsetof(CallPrefix, code), READONLY, "the user's code"},
    {NULL},
};

static PyTypeObject CallPrefixType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pijit._eval_frame.CallPrefix",
    .tp_basicsize = sizeof(CallPrefix),
    .tp_dealloc = (destructor)prefix_dealloc,
    .tp_repr = (reprfunc)prefix_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "CallPrefix(code): what the prefix of a jitted copy of code asks (3.11).",
    .tp_iter = (getiterfunc)prefix_iter,
    .tp_iternext = (iternextfunc)prefix_next,
    .tp_methods = prefix_methods,
    .tp_members = prefix_members,
    .tp_new = prefix_new,
};

static int
prefix_init(PyObject *m)
{
    if (PyType_Ready(&CallPrefixType) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "CallPrefix", (PyObject *)&CallPrefixType);
}

#else   /* 3.12+: jitted function objects have pijit's vectorcall, no prefix */

static int
prefix_init(PyObject *m)
{
    (void)m;
    return 0;
}

static PyCodeObject *
original_code(PyCodeObject *code)
{
    return code;
}

static PyObject *
prefixed_code(PyObject *code)
{
    return Py_NewRef(code);
}

#endif

/* original_code(code): the user's code of a prefixed one (3.11), else code itself. */
static PyObject *
m_original_code(PyObject *m, PyObject *code)
{
    if (!PyCode_Check(code)) {
        PyErr_Format(PyExc_TypeError, "original_code() needs a code object, got %R", code);
        return NULL;
    }
    return Py_NewRef(original_code((PyCodeObject *)code));
}

#if !PJ_FUNCTION_VECTORCALL
static PyObject *
m_set_prefix_callback(PyObject *m, PyObject *cb)
{
    return set_callable(&prefix_callback, cb, "prefix callback") ? NULL : Py_NewRef(Py_None);
}
#define PREFIX_SETTER \
    {"set_prefix_callback", m_set_prefix_callback, METH_O, \
     "set_prefix_callback(f): f(code) -> the code a jitted copy of a function of code runs"},
#else
#define PREFIX_SETTER
#endif

#define PREFIX_METHODS \
    PREFIX_SETTER \
    {"original_code", m_original_code, METH_O, \
     "original_code(code): the user's code of a jitted copy's prefixed code, else code"},
