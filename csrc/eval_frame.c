/* eval_frame.c -- pijit's PEP 523 frame evaluation hook.
 *
 * The hook is installed (per interpreter, as PEP 523 has it) while at least one thread is
 * inside a jitted call (a Wrapper call), and acts only for frames of such threads: a frame
 * of a thread that is not inside a jitted call is evaluated exactly as without pijit.
 * Frames of marked codes get their cache entries walked in C (guards.c); a hit calls the
 * entry's transformed function with the frame's argument slots and returns its result as
 * the frame's result (the frame itself is released unevaluated: compat.h says by whom).
 * A miss calls the Python callback that compiles a new entry.  A call pijit decides to run
 * as plain Python runs outside the hook (eval_outside), at plain Python's speed.  A frame
 * being traced (sys.settrace; a sys.monitoring tool other than a profiler: coverage,
 * debuggers) runs its original bytecode, so tracers see the user's code.
 *
 * C stack.  While any hook is installed the interpreter stops inlining Python-to-Python
 * calls, so every Python call recurses in C.  A recursion that plain Python runs inline
 * (up to sys.getrecursionlimit()) would then overflow the C stack long before the limit.
 * So when this thread's C stack runs low (or, from 3.12, its C recursion budget: compat.h),
 * the hook evaluates the frame with the hook removed: its calls are inlined again and the
 * recursion ends as in plain Python.  (Other
 * threads' jitted calls run plain meanwhile; that costs speed, never correctness.)  A
 * jitted function object calling itself recurses through pijit's vectorcall, in C: from
 * 3.12 it is given back to CPython for the deep part of the recursion (wrapper.c
 * deep_call).  What recurses through C anyway (a Wrapper calling itself: 3.11, 3.13's
 * __init__) raises RecursionError before the stack is exhausted, as CPython 3.12's C
 * recursion limit does.
 *
 * Everything here runs with the GIL held.
 */
#include "pijit.h"

#include <pthread.h>

/* ---- global and per-thread state (the GIL protects the globals) ----------------------- */

static PyObject *compile_callback = NULL;         /* strong or NULL */
static int jit_enabled = 1;                       /* set_context(GRAPH_MODE / PYNATIVE_MODE) */
static Py_ssize_t active_threads = 0;             /* threads with depth > 0 */
static _PyFrameEvalFunction prev_eval = NULL;     /* chained to when plain */
static uint64_t fork_epoch = 1;                   /* bumped in a forked child */

typedef struct {
    Py_ssize_t depth;       /* jitted calls in progress on this thread */
    int compiling;          /* inside the compile callback: the compiler's calls run plain */
    int timed_plain;        /* timed plain runs in progress (adapt.c) */
    double compile_seconds; /* compiling inside them, in all (adapt.c's compile_clock) */
    double share;           /* CPU seconds per wall second, 0: not known yet (adapt.c) */
    double share_wall, share_cpu;   /* the share's window began at these clock readings */
    int stack_probed;
    char *stack_lo;         /* lowest address of this thread's C stack, NULL if unknown */
    size_t stack_size;
    /* 3.11: the frame whose prefix is being answered (call_prefix.c), its CallPrefix (the
     * answer "go on") and the user's function of its code (borrowed, or NULL). */
    _PyInterpreterFrame *prefix_frame;
    PyObject *prefix, *prefix_fn;
    /* A StopIteration the answer raised, which the prefix raises (strong, or NULL). */
    PyObject *stop_type, *stop_value, *stop_tb;
} ThreadHook;

static _Thread_local ThreadHook tls;

/* This thread's &tls.  Each reading of a _Thread_local in this shared library is a call of
 * __tls_get_addr (11 instructions), and gcc computes the address again at each use rather
 * than keep it in a register (it counts as a constant): the empty asm makes it a value the
 * compiler must keep, so the hot paths, which take it once and pass it down, pay one call
 * (measured: 5 calls of it on a hit through the Wrapper, 55 instructions). */
static inline ThreadHook *
this_thread(void)
{
    ThreadHook *t = &tls;
    __asm__("" : "+r"(t));
    return t;
}

static PyObject *pijit_hook(PyThreadState *, _PyInterpreterFrame *, int);

/* ---- the C stack ------------------------------------------------------------------------ */

/* Below SOFT bytes of stack left, frames run with the hook removed; below HARD bytes, a
 * jitted call raises RecursionError (enough is left to raise and unwind it). */
#define STACK_SOFT_MIN ((size_t)512 << 10)
#define STACK_HARD ((size_t)128 << 10)

static void
probe_stack(ThreadHook *t)
{
    t->stack_probed = 1;
    pthread_attr_t attr;
    void *addr;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0 && size > 4 * STACK_HARD) {
        t->stack_lo = (char *)addr;
        t->stack_size = size;
    }
    pthread_attr_destroy(&attr);
}

/* Bytes of C stack left below the caller's frame, or SIZE_MAX if unknown; `t`: this
 * thread's this_thread(). */
static inline size_t
stack_left_of(ThreadHook *t)
{
    char here;
    if (!t->stack_probed)
        probe_stack(t);
    if (t->stack_lo == NULL)
        return SIZE_MAX;
    return &here > t->stack_lo ? (size_t)(&here - t->stack_lo) : 0;
}

static inline size_t
stack_left(void)
{
    return stack_left_of(&tls);
}

static inline size_t
stack_soft_limit_of(ThreadHook *t)
{
    size_t quarter = t->stack_size / 4;
    return quarter > STACK_SOFT_MIN ? quarter : STACK_SOFT_MIN;
}

/* ---- installing the hook ---------------------------------------------------------------- */

static void
hook_install(void)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    _PyFrameEvalFunction cur = _PyInterpreterState_GetEvalFrameFunc(interp);
    if (cur != pijit_hook) {
        prev_eval = cur ? cur : _PyEval_EvalFrameDefault;
        _PyInterpreterState_SetEvalFrameFunc(interp, pijit_hook);
    }
}

static void
hook_uninstall(void)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    /* If someone replaced us meanwhile, leave their function alone. */
    if (_PyInterpreterState_GetEvalFrameFunc(interp) == pijit_hook)
        _PyInterpreterState_SetEvalFrameFunc(interp, prev_eval);
}

/* This thread enters a jitted call.  -1 with RecursionError when the C stack is nearly
 * exhausted (a jitted recursion through its Wrapper). */
static int
hook_enter(ThreadHook *t)
{
    if (stack_left_of(t) < STACK_HARD) {
        PyErr_SetString(PyExc_RecursionError,
                        "maximum recursion depth exceeded (C stack, in a jitted call)");
        return -1;
    }
    if (t->depth++ == 0 && active_threads++ == 0)
        hook_install();
    return 0;
}

static void
hook_leave(ThreadHook *t)
{
    if (--t->depth == 0 && --active_threads == 0)
        hook_uninstall();
}

/* A forked child has one thread, the one that forked: only its own jitted calls are in
 * progress, and no other thread's compile will ever finish (fork_epoch). */
static void
hook_after_fork_child(void)
{
    fork_epoch++;
    active_threads = tls.depth > 0;
    if (active_threads)
        hook_install();
    else
        hook_uninstall();
}

/* ---- the hook --------------------------------------------------------------------------- */

static inline PyObject *
eval_plain(PyThreadState *ts, _PyInterpreterFrame *frame, int throwflag)
{
    return prev_eval(ts, frame, throwflag);
}

/* Evaluate `frame` with the hook removed (see the C stack note at the top). */
static PyObject *
eval_unhooked(PyThreadState *ts, _PyInterpreterFrame *frame, int throwflag)
{
    hook_uninstall();
    PyObject *res = prev_eval(ts, frame, throwflag);
    if (active_threads > 0)
        hook_install();
    return res;
}

/* Leave / re-enter the jitted calls of this thread around a plain run (see eval_outside):
 * `depth` keeps this thread's count meanwhile. */
static inline Py_ssize_t
outside_enter(ThreadHook *t)
{
    Py_ssize_t depth = t->depth;
    if (depth > 0) {
        t->depth = 0;
        if (--active_threads == 0)
            hook_uninstall();
    }
    return depth;
}

static inline void
outside_leave(ThreadHook *t, Py_ssize_t depth)
{
    if (depth > 0) {
        t->depth = depth;
        if (active_threads++ == 0)
            hook_install();
    }
}

/* Evaluate `frame` as plain Python with this thread outside its jitted calls, as if no
 * jitted call were in progress: the hook is removed (unless another thread is inside a
 * jitted call; it then passes this thread's frames straight on), so the frame's calls are
 * inlined again and frames of unjitted code cost nothing.  Used where pijit has decided to
 * run a call plain (a signature not hot yet, an entry that runs plain, a code left to plain
 * Python): calls it makes of jitted functions go through their Wrappers, which enter a
 * jitted call again.  Under the hook a plain run paid the hook at each of its frames and
 * lost CPython's inlined calls: a program of small functions, jitted whole, ran at 0.5x
 * plain before its functions were hot. */
static PyObject *
eval_outside(PyThreadState *ts, _PyInterpreterFrame *frame)
{
    ThreadHook *t = this_thread();
    Py_ssize_t depth = outside_enter(t);
    PyObject *res = prev_eval(ts, frame, 0);
    outside_leave(t, depth);
    return res;
}

/* Call `fn` outside this thread's jitted calls, as eval_outside runs a frame (the
 * Wrapper's plain calls; `t`: this thread's this_thread()).  Each such call recurses in C
 * through the Wrapper: past hook_enter's stack limit it raises RecursionError, as a jitted
 * call does. */
static PyObject *
call_outside(ThreadHook *t, PyObject *fn, PyObject *const *args, size_t nargsf,
             PyObject *kwnames)
{
    if (stack_left_of(t) < STACK_HARD) {
        PyErr_SetString(PyExc_RecursionError,
                        "maximum recursion depth exceeded (C stack, in a jitted call)");
        return NULL;
    }
    /* Straight through fn's own vectorcall: PyObject_Vectorcall would check the result
     * here too, as the caller's call of the Wrapper does anyway (30 instructions).  A
     * function's is read in place (PyVectorcall_Function is a call into libpython). */
    vectorcallfunc call = PyFunction_Check(fn) ? ((PyFunctionObject *)fn)->vectorcall
                                               : PyVectorcall_Function(fn);
    if (call == function_vectorcall)    /* a jitted function object: run it as CPython would */
        call = cpython_function_vc;
    Py_INCREF(fn);
    Py_ssize_t depth = outside_enter(t);
    PyObject *res = call ? call(fn, args, nargsf, kwnames)
                         : PyObject_Vectorcall(fn, args, nargsf, kwnames);
    outside_leave(t, depth);
    Py_DECREF(fn);
    return res;
}

/* The frame's result when the hook does not evaluate it: `res` (a new reference or NULL
 * with an exception), after releasing the frame.  A frame answered from its prefix (3.11,
 * call_prefix.c) returns the answer itself. */
static inline PyObject *
answer(PyThreadState *ts, _PyInterpreterFrame *frame, PyObject *res)
{
    if (frame != this_thread()->prefix_frame)
        pj_frame_release(ts, frame);
    return res;
}

/* Run `frame` as plain Python: outside this thread's jitted calls (eval_outside) or still
 * inside them (`outside` 0: eval_plain).  A frame answered from its prefix goes on into
 * its own code, where the caller's calls are (the answer is the CallPrefix). */
static PyObject *
frame_plain(PyThreadState *ts, _PyInterpreterFrame *frame, int outside)
{
    ThreadHook *t = this_thread();
    if (frame == t->prefix_frame)
        return Py_NewRef(t->prefix);
    return outside ? eval_outside(ts, frame) : eval_plain(ts, frame, 0);
}

static PyObject *call_frame_args(ThreadHook *t, PyObject *fn, _PyInterpreterFrame *frame,
                                 PyCodeObject *code);

/* A plain run of `frame` that is timed (adapt.c): one that goes on into its own code
 * would end after the timer, so a frame answered from its prefix runs as a call of the
 * user's function with its arguments instead (a sample of the calls pays that). */
static PyObject *
frame_plain_timed(PyThreadState *ts, _PyInterpreterFrame *frame, CodeState *st)
{
    ThreadHook *t = this_thread();
    if (frame != t->prefix_frame)
        return eval_outside(ts, frame);
    st->user_calls++;
    PyObject *res = call_frame_args(t, t->prefix_fn, frame, st->code);
    st->user_calls--;
    return res;
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

/* The callable to run for a frame of `func` on a hit of `e` (new reference), NULL with an
 * exception on error.  When the frame's function has other globals or closure cells than
 * the entry's function (one code shared by several closures), a function with the frame's
 * globals and cells replaces the entry's.  A transformed code without free variables
 * ignores the closure.  Allocating can run the garbage collector and so any finalizer,
 * which may replace e->fn: everything read from the entry is held strongly. */
static PyObject *
fn_for_frame(Entry *e, PyFunctionObject *func)
{
    PyObject *fn = Py_NewRef(e->fn);
    if (func == NULL || !PyFunction_Check(fn))
        return fn;
    PyFunctionObject *g = (PyFunctionObject *)fn;
    int nfree = ((PyCodeObject *)g->func_code)->co_nfreevars;
    if (g->func_globals == func->func_globals
        && (nfree == 0 || same_closure(g->func_closure, func->func_closure)))
        return fn;
    Py_ssize_t ncells = func->func_closure ? PyTuple_GET_SIZE(func->func_closure) : 0;
    if (nfree != 0 && nfree != ncells) {
        PyErr_Format(PyExc_RuntimeError,
                     "pijit: entry function %R has %d free variables but %R has %zd cells",
                     fn, nfree, (PyObject *)func, ncells);
        Py_DECREF(fn);
        return NULL;
    }
    PyObject *nf = PyFunction_New(g->func_code, func->func_globals);
    if (nf == NULL || (nfree && PyFunction_SetClosure(nf, func->func_closure) < 0)) {
        Py_XDECREF(nf);
        Py_DECREF(fn);
        return NULL;
    }
    PyFunctionObject *n = (PyFunctionObject *)nf;
    Py_XSETREF(n->func_name, Py_XNewRef(g->func_name));
    Py_XSETREF(n->func_qualname, Py_XNewRef(g->func_qualname));
    Py_DECREF(fn);
    if (e->fn != NULL)          /* the entry may have been emptied meanwhile */
        Py_SETREF(e->fn, Py_NewRef(nf));
    return nf;
}

/* Move `e` (at index i, if still there) to the front of the entry array. */
static void
move_to_front(CodeState *st, Entry *e, Py_ssize_t i)
{
    if (i >= st->nentries || st->entries[i] != e) {
        for (i = 0; i < st->nentries && st->entries[i] != e; i++)
            ;
        if (i == st->nentries)
            return;     /* removed by a reset meanwhile */
    }
    if (i == 0)
        return;
    memmove(&st->entries[1], &st->entries[0], i * sizeof(Entry *));
    st->entries[0] = e;
    st->version++;
}

/* ---- resume requests -------------------------------------------------------------------- */

/* At a graph break a transformed function does not call the resume function: it returns
 * the tuple (resume_marker, resume function, its arguments...), a request that the hook
 * make the call once the transformed frame has returned.  The code after the break then
 * runs with one frame of the user's function on the stack, as in plain Python (what a
 * callee's sys._getframe(1) or inspect.stack() sees, the recursion depth, a debugger's
 * `next`), not two.  Only transformed code returns the marker (a private object), and only
 * the hook (call_with_slots) calls transformed code.  A tuple, not an object of a type of
 * its own: BUILD_TUPLE takes it from CPython's free list, where a call of a constructor
 * cost a break 40 instructions more.
 *
 * Without free variables the request names the resume function by its code, and the
 * function is made once per transformed function (kept in its __dict__, with its
 * globals), not at every break: MAKE_FUNCTION and the function's release cost a break
 * about 250 instructions. */
static PyObject *resume_marker = NULL;      /* strong, set at module creation */
static PyObject *observed = NULL;           /* OBSERVED (below): strong, likewise */
static PyObject *resume_functions_key = NULL;   /* "__pijit_resume_functions__", interned */

/* The function of resume code `code` with the globals of transformed function `owner` (a
 * new reference), made at its first request and kept in owner's __dict__. */
static PyObject *
resume_function(PyObject *owner, PyObject *code)
{
    if (!PyFunction_Check(owner)) {
        PyErr_SetString(PyExc_SystemError, "pijit: a resume request from a non-function");
        return NULL;
    }
    PyFunctionObject *o = (PyFunctionObject *)owner;
    if (o->func_dict == NULL && (o->func_dict = PyDict_New()) == NULL)
        return NULL;
    PyObject *made = PyDict_GetItemWithError(o->func_dict, resume_functions_key);
    if (made == NULL) {
        if (PyErr_Occurred())
            return NULL;
        made = PyList_New(0);
        if (made == NULL)
            return NULL;
        int rc = PyDict_SetItem(o->func_dict, resume_functions_key, made);
        Py_DECREF(made);    /* the dict holds it */
        if (rc < 0)
            return NULL;
    }
    if (!PyList_CheckExact(made)) {
        PyErr_SetString(PyExc_SystemError, "pijit: resume functions replaced");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(made); i++) {
        PyObject *f = PyList_GET_ITEM(made, i);
        if (PyFunction_GET_CODE(f) == code)
            return Py_NewRef(f);
    }
    PyObject *f = PyFunction_New(code, o->func_globals);
    if (f == NULL || PyList_Append(made, f) < 0) {
        Py_XDECREF(f);
        return NULL;
    }
    return f;
}

/* Answer `request` (a strong reference, released), returned by transformed function `fn`:
 * call the resume function it names.  Out of line: a call without a break pays only
 * call_with_slots' test. */
static PyObject * __attribute__((noinline))
answer_request(PyObject *fn, PyObject *request)
{
    PyObject **items = &PyTuple_GET_ITEM(request, 1);
    PyObject *callee = PyCode_Check(items[0]) ? resume_function(fn, items[0])
                                              : Py_NewRef(items[0]);
    PyObject *res = callee == NULL ? NULL
        : PyObject_Vectorcall(callee, items + 1, (size_t)(PyTuple_GET_SIZE(request) - 2), NULL);
    Py_XDECREF(callee);
    Py_DECREF(request);
    return res;
}

/* Call transformed code `fn` with the frame's argument slots, then the resume function it
 * asks for (a resume function runs through the hook, which answers its own requests). */
static inline PyObject *
call_with_slots(PyObject *fn, _PyInterpreterFrame *frame, Py_ssize_t n)
{
    PyObject *res = PyObject_Vectorcall(fn, frame->localsplus, (size_t)n, NULL);
    if (res != NULL && PyTuple_CheckExact(res) && PyTuple_GET_SIZE(res) >= 2
        && PyTuple_GET_ITEM(res, 0) == resume_marker)
        return answer_request(fn, res);
    return res;
}

/* A request is seen by whatever watches the thread: its frame returns (a tracer's or
 * profiler's `return`, sys.monitoring's PY_RETURN) and the resume function is called (a
 * second `call` of the user's function; pdb's `next` left the function there).  So at a
 * break transformed code first tests the constant OBSERVED (true while pj_observed: a
 * truth test, no call a profiler would see) and, watched, jumps to its plain copy of the
 * code it runs (transform._plain_rest): the rest of the call runs there as plain Python,
 * in the same frame, with the user's lines and locals. */
static int
observed_bool(PyObject *self)
{
    (void)self;
    return pj_observed(PyThreadState_GET());
}

static PyNumberMethods observed_as_number = {.nb_bool = observed_bool};

static PyTypeObject ObservedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pijit._eval_frame.Observed",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_as_number = &observed_as_number,
    .tp_doc = "true while a tracer, profiler or sys.monitoring tool watches this thread",
};

/* Is compiling now a bad idea?  Capture recurses in Python and in C; a frame close to
 * the recursion limit or to the end of the C stack runs plain this time (and compiles on
 * a later call), instead of failing inside the compiler. */
static inline int
too_deep_to_compile(PyThreadState *ts)
{
    return pj_py_recursion_remaining(ts) < 200 || stack_left() < 2 * stack_soft_limit_of(&tls)
        || pj_c_recursion_left(ts) < 0.5;
}

/* Cache miss of a CANDIDATE/CALLABLE code: ask the Python callback. */
static PyObject *
on_miss(PyThreadState *ts, _PyInterpreterFrame *frame, CodeState *st, Py_ssize_t n)
{
    PyObject *cb = compile_callback;
    if (cb == NULL || too_deep_to_compile(ts))
        return frame_plain(ts, frame, 0);
    Py_INCREF(cb);
    PyObject *args = PyTuple_New(n);
    if (args == NULL) {
        Py_DECREF(cb);
        return answer(ts, frame, NULL);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = frame->localsplus[i];
        PyTuple_SET_ITEM(args, i, Py_NewRef(v ? v : Py_None));
    }
    /* The function the code is the user's (a prefixed frame's is a copy of it). */
    PyObject *func = tls.prefix_frame == frame ? tls.prefix_fn : (PyObject *)pj_frame_func(frame);
    st->state = ST_BUILDING;
    st->build_epoch = fork_epoch;
    int was = tls.compiling;
    tls.compiling = 1;
    double began = compile_began();
    PyObject *res = PyObject_CallFunctionObjArgs(cb, func ? func : Py_None, args, NULL);
    compile_ended(began);
    tls.compiling = was;
    Py_DECREF(args);
    Py_DECREF(cb);
    if (st->state == ST_BUILDING)
        st->state = st->nentries ? ST_CALLABLE : ST_CANDIDATE;
    if (res == NULL)
        return answer(ts, frame, NULL);
    if (res == Py_None) {           /* plain Python for this call */
        Py_DECREF(res);
        return frame_plain(ts, frame, 1);
    }
    PyObject *out = call_with_slots(res, frame, n);
    Py_DECREF(res);
    return answer(ts, frame, out);
}

/* Walk the entries of `st` for `frame`: call the first whose guards pass, else miss. */
static PyObject *
dispatch(PyThreadState *ts, _PyInterpreterFrame *frame, CodeState *st)
{
    /* Signals pending now are delivered here, as plain Python would at the function's
     * first instruction, not inside a guard's Python code where they could be lost. */
    if (PyErr_CheckSignals() < 0)
        return answer(ts, frame, NULL);
    Py_ssize_t n = st->nargs;
    uint64_t version = st->version;
    for (Py_ssize_t i = 0; i < st->nentries; i++) {
        Entry *e = st->entries[i];
        e->refcnt++;
        int ok = entry_check(e, frame);
        if (ok < 0) {
            entry_decref(e);
            return answer(ts, frame, NULL);
        }
        if (!ok) {
            entry_decref(e);
            if (st->version != version)     /* entries changed under us: be safe */
                return frame_plain(ts, frame, 0);
            continue;
        }
        /* fn NULL: "run plain when these guards pass".  A hit is counted (and its entry
         * moved first) only once what it runs is ready. */
        if (maybe_promote(st, e) < 0) {
            entry_decref(e);
            return answer(ts, frame, NULL);
        }
        PyObject *fn = e->fn == NULL ? NULL : fn_for_frame(e, pj_frame_func(frame));
        if (fn == NULL && e->fn != NULL) {
            entry_decref(e);
            return answer(ts, frame, NULL);
        }
        st->hits++;
        e->hits++;
        move_to_front(st, e, i);
        PyObject *res = run_hit(ts, frame, st, e, fn);
        entry_decref(e);
        return res;
    }
    st->misses++;
    if (st->state == ST_FROZEN) {
        remember_frozen_miss(st, frame);
        return frame_plain(ts, frame, 1);
    }
    PyObject *res = run_until_hot(ts, frame, st);
    if (res != NULL || PyErr_Occurred())
        return res;
    return on_miss(ts, frame, st, n);
}

#define SKIP_FLAGS (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)

/* Is another thread compiling this code right now?  (A compile started before a fork
 * belongs to a thread the child does not have.) */
static inline int
being_built(CodeState *st)
{
    if (st->state != ST_BUILDING)
        return 0;
    if (st->build_epoch == fork_epoch)
        return 1;
    st->state = st->nentries ? ST_CALLABLE : ST_CANDIDATE;
    return 0;
}

static PyObject *
pijit_hook(PyThreadState *ts, _PyInterpreterFrame *frame, int throwflag)
{
    /* Every thread's frames pass here while any thread is inside a jitted call. */
    ThreadHook *t = this_thread();
    if (stack_left_of(t) < stack_soft_limit_of(t) || pj_c_recursion_left(ts) < 0.25)
        return eval_unhooked(ts, frame, throwflag);
    if (t->depth == 0 || t->compiling || throwflag || !jit_enabled)
        return eval_plain(ts, frame, throwflag);
    PyCodeObject *code = PJ_FRAME_CODE(frame);
    CodeState *st = code_state(code);
    if (st == NULL || (code->co_flags & SKIP_FLAGS) || !pj_frame_at_start(frame, code)
        || !PJ_FRAME_RELEASABLE(frame))
        return eval_plain(ts, frame, throwflag);
    st->calls++;
    if (st->state == ST_NEVER_COMPILE)
        return eval_outside(ts, frame);
    if (being_built(st) || pj_traced(ts, code))
        return eval_plain(ts, frame, throwflag);
    /* Running the entry or the compiler may drop every other owner of the state. */
    Py_INCREF(st);
    PyObject *res = dispatch(ts, frame, st);
    Py_DECREF(st);
    return res;
}
