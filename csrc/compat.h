/* compat.h -- the CPython-version facts of pijit's C hook, and nothing else.
 *
 * Supported: CPython 3.11, 3.12 and 3.13 with the GIL.  Every difference between them
 * that the hook depends on is named here once (the frame layout, who releases a frame
 * the hook answers without evaluating it, the code-extra API, recursion counters and how
 * a tracer announces itself); the rest of csrc/ uses only these names.  pijit/_compat.py
 * is the Python side of the same facts.
 */
#ifndef PIJIT_COMPAT_H
#define PIJIT_COMPAT_H

#include <Python.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "pijit's frame hook supports CPython 3.11, 3.12 and 3.13"
#endif
#ifdef Py_GIL_DISABLED
#error "pijit's frame hook does not support the free-threaded build"
#endif

#define PJ_PY312 (PY_VERSION_HEX >= 0x030C0000)
#define PJ_PY313 (PY_VERSION_HEX >= 0x030D0000)

/* Can pijit.jit return a function object whose calls pijit sees (pijit's vectorcall), and
 * give it back to CPython's inlined calls once pijit has nothing to do for it?  From 3.12:
 * PyFunction_SetVectorcall is public, a function whose vectorcall is not CPython's gets no
 * func_version (so no call site specializes it: CALL_PY_EXACT_ARGS and the other inlining
 * specializations check the version), and the generic CALL inlines a Python function only
 * when no PEP 523 hook is set and its vectorcall is CPython's.  3.11 specializes any
 * function (it versions functions whatever their vectorcall) and its generic CALL inlines
 * any function when no hook is set: calls from plain code would skip pijit's vectorcall
 * (tests/test_inline.py shows it), so 3.11 returns the Wrapper. */
#define PJ_FUNCTION_VECTORCALL PJ_PY312

#define Py_BUILD_CORE 1
/* Python.h defines the pre-3.9 spelling of _PyGC_FINALIZED that pycore_gc.h redefines. */
#undef _PyGC_FINALIZED
#include <internal/pycore_frame.h>
#if PJ_PY312
#include <internal/pycore_interp.h>     /* interp->monitors: sys.monitoring's global events */
#endif
#undef Py_BUILD_CORE

/* ---- the frame ----------------------------------------------------------------------- */

/* 3.13 replaced f_code by f_executable (a code object for every frame the hook sees). */
#if PJ_PY313
#define PJ_FRAME_CODE(f) ((PyCodeObject *)(f)->f_executable)
#else
#define PJ_FRAME_CODE(f) ((f)->f_code)
#endif

/* The frame's function, or NULL.  3.12 renamed f_func to f_funcobj (a PyObject*). */
static inline PyFunctionObject *
pj_frame_func(_PyInterpreterFrame *f)
{
#if PJ_PY312
    PyObject *fn = f->f_funcobj;
    return fn != NULL && PyFunction_Check(fn) ? (PyFunctionObject *)fn : NULL;
#else
    return f->f_func;
#endif
}

/* Has the frame not run a single instruction yet?  3.11 and 3.12 keep the instruction
 * before the next one (prev_instr, one before the first at the start); 3.13 keeps the
 * next one (instr_ptr). */
static inline int
pj_frame_at_start(_PyInterpreterFrame *f, PyCodeObject *code)
{
#if PJ_PY313
    return f->instr_ptr == _PyCode_CODE(code);
#else
    return f->prev_instr == _PyCode_CODE(code) - 1;
#endif
}

#if PJ_PY312 && !PJ_PY313
/* 3.12's _PyThreadState_PopFrame (Python/pystate.c), which 3.12 does not export. */
static inline void
pj_pop_frame(PyThreadState *ts, _PyInterpreterFrame *f)
{
    PyObject **base = (PyObject **)f;
    _PyStackChunk *chunk = ts->datastack_chunk;
    if (base == &chunk->data[0]) {
        _PyStackChunk *previous = chunk->previous;
        PyObjectArenaAllocator arena;
        ts->datastack_top = &previous->data[previous->top];
        ts->datastack_chunk = previous;
        PyObject_GetArenaAllocator(&arena);
        arena.free(arena.ctx, chunk, chunk->size);
        ts->datastack_limit = (PyObject **)((char *)previous + previous->size);
    }
    else {
        ts->datastack_top = base;
    }
}
#elif PJ_PY313
#define pj_pop_frame _PyThreadState_PopFrame
#endif

/* Release a frame that the hook answered without evaluating it.  On 3.11 the caller
 * (_PyEval_Vector) clears and pops the frame after the eval function returns.  From 3.12
 * the evaluator does it (ceval.c's clear_thread_frame), so the hook must: the frame never
 * ran and was never linked into the thread's frame chain (the evaluator links it), so it
 * has no frame object, and its stack holds only its locals. */
static inline void
pj_frame_release(PyThreadState *ts, _PyInterpreterFrame *f)
{
#if PJ_PY312
    PyObject *code = (PyObject *)PJ_FRAME_CODE(f);
    for (int i = 0; i < f->stacktop; i++)
        Py_CLEAR(f->localsplus[i]);
    f->stacktop = 0;
    Py_CLEAR(f->f_locals);
    Py_DECREF(f->f_funcobj);
    Py_DECREF(code);
    pj_pop_frame(ts, f);
#else
    (void)ts;
    (void)f;
#endif
}

/* Only a frame without a frame object can be released by pj_frame_release. */
#define PJ_FRAME_RELEASABLE(f) ((f)->frame_obj == NULL)

/* ---- functions ------------------------------------------------------------------------- */

/* 3.11 has no PyFunction_SetVectorcall (tests/test_inline.py sets one there only to show
 * that 3.11's calls skip it). */
static inline void
pj_function_set_vectorcall(PyFunctionObject *f, vectorcallfunc vc)
{
#if PJ_PY312
    PyFunction_SetVectorcall(f, vc);
#else
    f->vectorcall = vc;
#endif
}

/* A function given back to CPython's calls (wrapper.c) takes the version of the user's
 * function it is a copy of, when it has that function's code and defaults (what a version
 * stands for).  PyFunction_SetVectorcall left it 0: 3.12 versions such a function again at
 * its next specialization (its vectorcall is CPython's again); 3.13 versions a function
 * only when MAKE_FUNCTION makes it (types.FunctionType's copies get 0), so without this
 * its calls were never specialized (fib: 1.23x plain instead of 1.00x, callgrind).
 * 3.13's _PyFunction_SetVersion (exported) also files it in the version cache, as making
 * a function does. */
#if PJ_PY313
#define Py_BUILD_CORE 1
#include <internal/pycore_function.h>
#undef Py_BUILD_CORE
#endif

static inline void
pj_function_version_of(PyFunctionObject *f, PyFunctionObject *original)
{
#if PJ_PY313
    _PyFunction_SetVersion(f, original->func_version);
#else
    (void)f;
    (void)original;
#endif
}

/* A dict's version (PEP 509): a number unique among all dicts' versions, given at its creation
 * and anew at each change of its contents, on 3.11-3.13 (3.12 deprecated the field for dict
 * watchers and 3.14 removes it; until then every insert, update and delete still sets it). */
static inline uint64_t
pj_dict_version(PyObject *d)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    return ((PyDictObject *)d)->ma_version_tag;
#pragma GCC diagnostic pop
}

/* The object a weak reference points at (new reference), or NULL when it is dead.  3.13
 * deprecated PyWeakref_GET_OBJECT for PyWeakref_GetRef. */
static inline PyObject *
pj_weakref_get(PyObject *ref)
{
#if PJ_PY313
    PyObject *o = NULL;
    if (PyWeakref_GetRef(ref, &o) < 0)
        PyErr_Clear();
    return o;
#else
    PyObject *o = PyWeakref_GET_OBJECT(ref);
    return o == Py_None ? NULL : Py_NewRef(o);
#endif
}

/* ---- code extras ---------------------------------------------------------------------- */

#if PJ_PY312
#define pj_request_extra_index PyUnstable_Eval_RequestCodeExtraIndex
#define pj_set_code_extra PyUnstable_Code_SetExtra
#else
#define pj_request_extra_index _PyEval_RequestCodeExtraIndex
#define pj_set_code_extra _PyCode_SetExtra
#endif

/* Mirror of CPython's private _PyCodeObjectExtra (Objects/codeobject.c, the same in 3.11,
 * 3.12 and 3.13), read directly so the hot path does not pay for _PyCode_GetExtra's
 * checks. */
typedef struct {
    Py_ssize_t ce_size;
    void *ce_extras[1];
} PjCodeExtraArray;

/* ---- recursion and tracing ----------------------------------------------------------- */

/* Python frames this thread may still push before RecursionError.  3.11 counts Python
 * and C recursion together; 3.12 split them. */
static inline int
pj_py_recursion_remaining(PyThreadState *ts)
{
#if PJ_PY312
    return ts->py_recursion_remaining;
#else
    return ts->recursion_remaining;
#endif
}

/* C recursion this thread may still use, as a fraction of what it starts with: 1 when
 * only the C stack bounds it (3.11).  From 3.12 every frame a C call evaluates (each one
 * while a PEP 523 hook is installed, which stops the interpreter inlining Python calls)
 * costs two units of a fixed budget (3.12: C_RECURSION_LIMIT, 1500; 3.13:
 * Py_C_RECURSION_LIMIT, 10000), far below sys.getrecursionlimit(). */
static inline double
pj_c_recursion_left(PyThreadState *ts)
{
#if PJ_PY313
    return (double)ts->c_recursion_remaining / Py_C_RECURSION_LIMIT;
#elif PJ_PY312
    return (double)ts->c_recursion_remaining / C_RECURSION_LIMIT;
#else
    (void)ts;
    return 1.0;
#endif
}

/* Is a tracer, debugger or monitoring tool watching `code`?  sys.settrace sets
 * c_tracefunc on every version.  From 3.12 sys.monitoring tools ask for events globally or
 * for one code; a frame the hook answers runs none of the code's instructions, so it gives
 * none of its events (PY_START, LINE, CALL, RAISE, PY_RETURN ...), and a tool may turn local
 * events on for a code only when it first sees it start (coverage's sysmon core).  So any
 * event a tool asks for on this code, and any global event of a tool other than a
 * profiler, makes the frame run its original bytecode.  Profilers (sys.setprofile,
 * cProfile, the PROFILER_ID tool) are not tracers: they time the jitted code. */
static inline int
pj_traced(PyThreadState *ts, PyCodeObject *code)
{
    if (ts->c_tracefunc != NULL)
        return 1;
#if PJ_PY312
    /* The events a profiler asks for (PY_START, CALL, PY_RETURN, PY_UNWIND ...). */
    static const uint32_t timing = (1 << PY_MONITORING_EVENT_PY_START) |
        (1 << PY_MONITORING_EVENT_PY_RESUME) | (1 << PY_MONITORING_EVENT_PY_RETURN) |
        (1 << PY_MONITORING_EVENT_PY_YIELD) | (1 << PY_MONITORING_EVENT_CALL) |
        (1 << PY_MONITORING_EVENT_PY_UNWIND) | (1 << PY_MONITORING_EVENT_PY_THROW);
    const uint8_t profilers = (1 << PY_MONITORING_PROFILER_ID) |
                              (1 << PY_MONITORING_SYS_PROFILE_ID);
    const _Py_GlobalMonitors *g = &ts->interp->monitors;
    for (int i = 0; i < _PY_MONITORING_UNGROUPED_EVENTS; i++) {
        if (g->tools[i] & (((timing >> i) & 1) ? (uint8_t)~profilers : 0xff))
            return 1;
    }
    const _PyCoMonitoringData *local = code->_co_monitoring;
    if (local != NULL) {
        for (int i = 0; i < _PY_MONITORING_LOCAL_EVENTS; i++) {
            if (local->local_monitors.tools[i])
                return 1;
        }
    }
#else
    (void)code;
#endif
    return 0;
}

/* Does anything watch this thread's frames run: a tracer or a profiler (sys.settrace,
 * sys.setprofile), or, from 3.12, a sys.monitoring tool asking for any event of every code,
 * or any tool in use at all (one may ask for the events of this frame's code only, as a
 * debugger does with set_local_events on frame.f_code: a resume function's are not)?
 * A transformed frame asks at a graph break (eval_frame.c's Observed): watched, it goes on
 * in its own frame as plain Python instead of handing the rest to a resume function, whose
 * return and call a tracer or profiler would see. */
static inline int
pj_observed(PyThreadState *ts)
{
    if (ts->c_tracefunc != NULL || ts->c_profilefunc != NULL)
        return 1;
#if PJ_PY312
    const _Py_GlobalMonitors *g = &ts->interp->monitors;
    for (int event = 0; event < _PY_MONITORING_UNGROUPED_EVENTS; event++) {
        if (g->tools[event])
            return 1;
    }
    for (int tool = 0; tool < PY_MONITORING_TOOL_IDS; tool++) {
        if (ts->interp->monitoring_tool_names[tool] != NULL)
            return 1;
    }
#endif
    return 0;
}

#endif /* PIJIT_COMPAT_H */
