/* adapt.c -- adaptive execution: compile what pays, keep what is faster.
 *
 * Three decisions, each made with counters the hook keeps anyway (so a call pays a few
 * compares for them):
 *
 *   hot signatures  An input signature (the arguments' types, and dtype and ndim of arrays:
 *                   not shapes or values, which automatic dynamic dims absorb) compiles once
 *                   its calls have run plain for the code's `budget` of seconds, however
 *                   big their arrays; until then it runs plain, timed (its first calls,
 *                   then a sample: slot_sample_weight).  Time spent compiling inside a
 *                   timed plain run (a callee's capture) does not count: it says nothing
 *                   of what the signature's own calls cost.
 *                   Library code called with hundreds of small signatures a few times each
 *                   then pays for capture only where it is hot, and a program that runs a
 *                   few ms in all never pays for one.
 *   varied values   While a signature is not hot, whether each of its int and float
 *                   arguments took more than one value is noted (hashes of the first
 *                   call's values, a bit per argument; on the calls that are timed, and
 *                   the one that finds it hot): when it becomes hot, the runtime
 *                   reads the bits (take_varied) and captures those arguments dynamic at
 *                   once, instead of specialising on the value of the call that happened to
 *                   be the hot one and recompiling at the next.
 *   promotion       An entry may ask to be rebuilt from its `promote_at`-th hit once its hits
 *                   took `promote_after` seconds in all (timed while the promotion is
 *                   pending): the runtime first compiles a cheap version (no C compiler) and
 *                   promotes entries whose calls have cost as much as a C compile to fused
 *                   kernels.  The adapt callback returns the new function, None (never), or
 *                   a number of hits after which to ask again (a C compile running in the
 *                   background: the entry keeps its function meanwhile).
 *   trials          An entry may ask for a timed trial (after its promotion, if it asked for
 *                   one): its next hits alternate plain Python and the entry's function, and
 *                   the faster one (the fastest run of each side, plain only when clearly
 *                   faster: the entry's margin) runs from then on (MindSpore's
 *                   perf_statistics, made to compare the graph with plain Python).
 *   plain calls     A signature whose calls run plain for good (it hit an entry that runs
 *                   plain: nothing to compile, or capture gave up) is remembered; the
 *                   Wrapper then calls the function outside the hook for calls of that
 *                   signature that pass positional arguments (all parameters, or all but
 *                   trailing ones with defaults), so the calls inside it are inlined as in
 *                   plain Python.  (Running plain is always right; this only saves the hook.)
 *
 * Every plain run (a signature not hot yet, an entry that runs plain, a trial's plain side)
 * is evaluated outside this thread's jitted calls (eval_frame.c's eval_outside): no hook
 * for its frames, so plain Python at plain Python's speed.
 *
 * Budgets count CPU time: the wall time of timed runs scaled by this thread's CPU share
 * (cpu_seconds); trials compare wall times, both sides timed alike.
 *
 * The adapt callback hears of promotions and of trial results (for stats and logs); a
 * test may replace the clocks (set_perf_clock, set_cpu_clock) to make decisions
 * deterministic.
 */
#include "pijit.h"

#include <time.h>

static PyObject *adapt_callback = NULL;       /* strong or NULL */
static PyObject *perf_clock = NULL;           /* strong or NULL: time.monotonic's stand-in */
static PyObject *cpu_clock = NULL;            /* strong or NULL: time.thread_time's stand-in */

/* ---- the clock and the callback ---------------------------------------------------------- */

/* Seconds of clock `id`, or of the stand-in clock a test set in its place; -1 with an
 * exception (a failing stand-in). */
static double
clock_seconds(PyObject *standin, clockid_t id)
{
    if (standin == NULL) {
        struct timespec ts;
        clock_gettime(id, &ts);
        return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }
    PyObject *r = PyObject_CallNoArgs(standin);
    double t = r ? PyFloat_AsDouble(r) : -1.0;
    Py_XDECREF(r);
    return t;
}

static double
perf_now(void)
{
    return clock_seconds(perf_clock, CLOCK_MONOTONIC);
}

/* This thread's CPU seconds (CLOCK_THREAD_CPUTIME_ID, time.thread_time). */
static double
cpu_now(void)
{
    return clock_seconds(cpu_clock, CLOCK_THREAD_CPUTIME_ID);
}

/* The budgets (compile_after_ms, promote_after_ms) are meant as the CPU a signature's or an
 * entry's calls cost; the perf clock is wall time, which on a loaded machine counts the
 * time other processes ran too (two busy processes on two cores made every budget run out
 * in about half the work).  Reading this thread's CPU clock is a system call (vDSO serves
 * only wall clocks), too dear for each timed run of a one-line function, and it advances
 * in 4 ms ticks on this project's machines (a busy loop under a load average of 10 on two
 * cores: 0.026 s of it in 0.22 s of wall time), so the wall time
 * of a timed run is scaled by this thread's CPU share: CPU seconds over wall seconds,
 * measured over windows of at least SHARE_PERIOD between timed runs (the CPU clock is read
 * once a window), at least SHARE_MIN.  A window longer than SHARE_STALE (the thread idle,
 * or waiting: its share then says nothing of its calls) starts again with the share it
 * had; before the first window ends, the share is 1. */
#define SHARE_PERIOD 0.05
#define SHARE_STALE 1.0
#define SHARE_MIN 0.05

/* `dt` seconds of wall time of a timed run that ended at `now` (on the perf clock), as
 * the CPU time they stand for.  With a stand-in perf clock alone, unscaled (tests of the
 * other decisions run on fake wall time, which the real CPU clock cannot be compared to). */
static double
cpu_seconds(double dt, double now)
{
    if (perf_clock != NULL && cpu_clock == NULL)
        return dt;
    ThreadHook *t = this_thread();
    double since = now - t->share_wall;
    if (cpu_clock != NULL && PyErr_Occurred())
        ;                           /* the run raised: no Python stand-in called now */
    else if (t->share_wall <= 0 || since < 0 || since > SHARE_STALE) {
        double cpu = cpu_now();
        if (cpu < 0)
            PyErr_Clear();          /* a failing stand-in: no window */
        else {
            t->share_wall = now;
            t->share_cpu = cpu;
        }
    }
    else if (since >= SHARE_PERIOD) {
        double cpu = cpu_now();
        if (cpu < 0)
            PyErr_Clear();
        else {
            double share = (cpu - t->share_cpu) / since;
            t->share = share < SHARE_MIN ? SHARE_MIN : share > 1 ? 1 : share;
            t->share_wall = now;
            t->share_cpu = cpu;
        }
    }
    return t->share > 0 ? dt * t->share : dt;
}

/* adapt_callback(event, code, fn, *details) -> its result (new reference), or None when no
 * callback is set; NULL with an exception. */
static PyObject *
tell(const char *event, CodeState *st, Entry *e, const char *fmt, ...)
{
    PyObject *cb = adapt_callback;
    if (cb == NULL)
        return Py_NewRef(Py_None);
    va_list va;
    va_start(va, fmt);
    PyObject *details = Py_VaBuildValue(fmt, va);
    va_end(va);
    if (details == NULL)
        return NULL;
    Py_INCREF(cb);
    PyObject *res = PyObject_CallFunction(cb, "sOOO", event, (PyObject *)st->code,
                                          e->fn ? e->fn : Py_None, details);
    Py_DECREF(cb);
    Py_DECREF(details);
    return res;
}

/* ---- time spent compiling inside timed plain runs ---------------------------------------- */

/* The clock at the start of a compile inside a timed plain run; -1 outside one (then the
 * clock is not read: a stand-in clock sees only the reads of timed runs). */
static double
compile_began(void)
{
    if (tls.timed_plain == 0)
        return -1;
    double t = perf_now();
    if (t < 0)
        PyErr_Clear();              /* a failing stand-in clock: the timed run says so */
    return t;
}

/* Adds the compile that began at `began` to this thread's compile_seconds (not read when
 * the compile raised: its exception stays the one set). */
static void
compile_ended(double began)
{
    if (began < 0 || PyErr_Occurred())
        return;
    double t = perf_now();
    if (t < 0)
        PyErr_Clear();
    else if (t > began)
        tls.compile_seconds += t - began;
}

/* ---- hot signatures ----------------------------------------------------------------------- */

static inline uint64_t
mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

/* What a signature holds of an exact array besides its type: its dtype's number and its
 * ndim (read at each call: `a.shape = ...` changes the ndim of the same object). */
static inline uint64_t
array_word(PyObject *v)
{
    PyArrayObject_fields *a = (PyArrayObject_fields *)v;
    return ((uint64_t)(a->descr ? a->descr->type_num : -1) << 8) | (uint64_t)a->nd;
}

static inline uint64_t
mix_arg(uint64_t h, PyObject *v)
{
    PyTypeObject *t = v ? Py_TYPE(v) : NULL;
    h = mix(h, (uint64_t)(uintptr_t)t);
    if (t != NULL && t == pijit_array_type)
        h = mix(h, array_word(v));
    return h;
}

/* The input signature of a frame: types of its argument slots, dtype and ndim of arrays. */
static uint64_t
frame_signature(_PyInterpreterFrame *frame, Py_ssize_t nargs)
{
    uint64_t h = (uint64_t)nargs;
    for (Py_ssize_t i = 0; i < nargs; i++)
        h = mix_arg(h, frame->localsplus[i]);
    return h;
}

/* The slot of signature `key` in the table of st's signatures not hot yet: its own, else
 * the least run one, taken over. */
static int
signature_slot(CodeState *st, uint64_t key)
{
    int slot = 0;
    for (int i = 0; i < PJ_SIGNATURES; i++) {
        if (st->sig_time[i] >= 0 && st->sig_key[i] == key)
            return i;
        if (st->sig_time[i] < st->sig_time[slot])
            slot = i;
    }
    st->sig_key[slot] = key;
    st->sig_time[slot] = 0;
    st->sig_calls[slot] = 0;
    st->sig_varied[slot] = PJ_UNSEEN;
    return slot;
}

/* Note the values of the int and float arguments `args[0..n)` of a call of `slot`: the
 * first call's are remembered (hashed), a later call's different ones set their bits in
 * sig_varied.  (Hashing an exact int or float cannot fail.)  Only the calls that are timed
 * (slot_sample_weight) and the one that finds the signature hot are noted: a value that
 * varies varies among them too, and the others are the calls the Wrapper makes for one-line
 * functions by the million, where a hash per argument was a fifth of its cost. */
static void
note_values(CodeState *st, int slot, PyObject *const *args, Py_ssize_t n)
{
    uint64_t varied = st->sig_varied[slot];
    int first = (varied & PJ_UNSEEN) != 0;
    if (n > PJ_VALUE_ARGS)
        n = PJ_VALUE_ARGS;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = args[i];
        if (v == NULL || !(PyLong_CheckExact(v) || PyFloat_CheckExact(v)))
            continue;
        Py_hash_t h = PyObject_Hash(v);     /* ints and floats: never fails */
        if (first)
            st->sig_value[slot][i] = h;
        else if (st->sig_value[slot][i] != h)
            varied |= (uint64_t)1 << i;
    }
    st->sig_varied[slot] = varied & ~PJ_UNSEEN;
}

/* `slot` has run plain for the budget: it leaves the table, its signature compiles. */
static void
slot_goes_hot(CodeState *st, int slot)
{
    st->sig_time[slot] = -1;
    st->hot_varied = st->sig_varied[slot] & ~PJ_UNSEEN;
}

/* Plain runs of a signature not hot yet are timed to tell when it is hot; but two clock
 * reads cost more than a whole call of a one-line function (measured: 40 ns more a call,
 * 3x what the call itself costs), and such functions are called the most.  So the first
 * SAMPLE_ALL runs of a signature are timed, then one in SAMPLE_EVERY, counted for
 * SAMPLE_EVERY runs (its untimed neighbours).  The weight of this run of `slot`: 0 for
 * one left untimed. */
#define SAMPLE_ALL 16
#define SAMPLE_EVERY 16

static inline double
slot_sample_weight(CodeState *st, int slot)
{
    uint64_t k = st->sig_calls[slot]++;
    if (k < SAMPLE_ALL)
        return 1.0;
    return k % SAMPLE_EVERY == 0 ? (double)SAMPLE_EVERY : 0.0;
}

/* A timed plain run begins: its start on the perf clock (-1 with an exception when a
 * stand-in clock failed) and, in *compiled, this thread's compile seconds so far. */
static double
timed_plain_begin(double *compiled)
{
    tls.timed_plain++;
    *compiled = tls.compile_seconds;
    return perf_now();
}

/* Add a timed plain run [t0, t1] of `weight` runs to `slot`, less the time spent compiling
 * in it (this thread's compile seconds were `compiled` at t0); NULL (res released) when a
 * stand-in clock failed. */
static PyObject *
slot_ran(CodeState *st, int slot, double weight, double t0, double compiled, double t1,
         PyObject *res, int outer)
{
    tls.timed_plain--;
    st->deferred++;
    double dt = t1 - t0 - (tls.compile_seconds - compiled);
    if (outer)
        st->timing = 0;
    if (t0 >= 0 && t1 >= t0) {
        double spent = weight * (dt > 0 ? cpu_seconds(dt, t1) : 0);
        st->sig_time[slot] += spent;
        if (outer)
            st->plain_seconds += spent;
    }
    else if (PyErr_Occurred() && res != NULL)      /* a failing stand-in clock */
        Py_CLEAR(res);
    return res;
}

/* A miss: NULL (without an exception) when it should compile now; else runs the frame plain,
 * timed, and returns its result.  A signature compiles once its calls have run plain for
 * the code's budget in all; the least run of the remembered signatures makes room for a
 * new one. */
static PyObject *
run_until_hot(PyThreadState *ts, _PyInterpreterFrame *frame, CodeState *st)
{
    if (st->budget <= 0)
        return NULL;
    int slot = signature_slot(st, frame_signature(frame, st->nargs));
    if (st->sig_time[slot] >= st->budget) {
        note_values(st, slot, (PyObject *const *)frame->localsplus, st->nargs);
        slot_goes_hot(st, slot);
        return NULL;
    }
    double weight = slot_sample_weight(st, slot);
    if (weight == 0) {
        st->deferred++;
        return frame_plain(ts, frame, 1);
    }
    note_values(st, slot, (PyObject *const *)frame->localsplus, st->nargs);
    int outer = !st->timing;
    st->timing = 1;
    double compiled, t0 = timed_plain_begin(&compiled);
    PyObject *res = frame_plain_timed(ts, frame, st);
    return slot_ran(st, slot, weight, t0, compiled, perf_now(), res, outer);
}

/* The Wrapper's view of a call of `fn` (of st's code): when it passes positional arguments
 * only, all of the code's parameters or all but trailing ones that have defaults, its
 * argument slots are the arguments then those defaults, and 1 is returned with the
 * signature the hook would compute from them in *key; else 0 (keywords, *args, **kwargs,
 * keyword-only parameters). */
static int
call_signature(CodeState *st, PyObject *fn, PyObject *const *args, size_t nargsf,
               PyObject *kwnames, uint64_t *key)
{
    if (kwnames != NULL)
        return 0;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf), argcount = st->code->co_argcount;
    if (st->nargs != argcount || n > argcount)
        return 0;
    PyObject *defaults = n < argcount ? PyFunction_GET_DEFAULTS(fn) : NULL;
    Py_ssize_t first_default = argcount - (defaults ? PyTuple_GET_SIZE(defaults) : 0);
    if (n < first_default)
        return 0;
    uint64_t h = (uint64_t)argcount;
    for (Py_ssize_t i = 0; i < argcount; i++) {
        PyObject *v = i < n ? args[i] : PyTuple_GET_ITEM(defaults, i - first_default);
        h = mix_arg(h, v);
    }
    *key = h;
    return 1;
}

/* Does `key` run plain for good (a signature remembered by remember_plain_key)? */
static inline int
is_plain_key(CodeState *st, uint64_t key)
{
    for (int i = 0; i < st->nplain; i++)
        if (st->plain_key[i] == key)
            return 1;
    return 0;
}

/* The Wrapper's own run_until_hot, for a call of a code that has no entry yet (so the
 * hook's walk could only miss) of signature `key`: runs `fn` plain, outside the hook (timed
 * as slot_sample_weight says), and returns its result; NULL without an exception when the
 * call should go through the hook (to compile).  Saves a plain call of a function not hot
 * yet the hook's install, walk and removal. */
static PyObject *
wrapper_run_until_hot(ThreadHook *t, CodeState *st, uint64_t key, PyObject *fn,
                      PyObject *const *args, size_t nargsf, PyObject *kwnames, PyObject *go_on)
{
    int slot = signature_slot(st, key);
    if (st->sig_time[slot] >= st->budget)
        return NULL;            /* the hook's run_until_hot finds it hot: compiles */
    st->calls++;
    st->misses++;
    double weight = slot_sample_weight(st, slot);
    /* A timed run is a call from C: with `go_on` (3.11's prefix) a second frame of the
     * level, on top of the prefixed frame that asked.  Inside a timed run of the same code
     * (a recursion: that run's time counts its levels) the frame goes on untimed, else a
     * recursion plain Python finishes under its limit would run out of it (g(950) under
     * the default limit of 1000 raised RecursionError 927 levels deep). */
    if (weight == 0 || (go_on != NULL && st->timing)) {
        st->deferred++;
        return go_on ? Py_NewRef(go_on) : call_outside(t, fn, args, nargsf, kwnames);
    }
    note_values(st, slot, args, PyVectorcall_NARGS(nargsf));    /* defaults do not vary */
    int outer = !st->timing;
    st->timing = 1;
    double compiled, t0 = timed_plain_begin(&compiled);
    st->user_calls += go_on != NULL;
    PyObject *res = call_outside(t, fn, args, nargsf, kwnames);
    st->user_calls -= go_on != NULL;
    return slot_ran(st, slot, weight, t0, compiled, perf_now(), res, outer);  /* NULL: exc. */
}

/* Does every call of st's code run plain, whatever its arguments?  A code left to plain
 * Python (a static fallback, an internal error), or one frozen past its entry limit whose
 * entries all run plain: a miss of a frozen code runs plain too. */
static inline int
all_calls_plain(CodeState *st)
{
    if (st->state == ST_NEVER_COMPILE)
        return 1;
    if (st->state != ST_FROZEN)
        return 0;
    for (Py_ssize_t i = 0; i < st->nentries; i++)
        if (st->entries[i]->fn != NULL && !st->entries[i]->plain)
            return 0;
    return 1;
}

/* Is this call of the signature of the last call whose signature the Wrapper hashed (then
 * its signature is st->fast_key)?  As many positional arguments, and every argument slot,
 * the defaults filled in included (fn.__defaults__ is read again: it may have been
 * replaced, or an array in it reshaped), holds what it held then: the same type, and an
 * exact array the same array_word (the slots of st->fast_arrays: their types matched). */
static inline int
fast_match(CodeState *st, PyObject *fn, PyObject *const *args, size_t nargsf,
           PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (n != st->fast_nargs || kwnames != NULL)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (Py_TYPE(args[i]) != st->fast_types[i])
            return 0;
    Py_ssize_t argcount = st->nargs, first_default = argcount;
    PyObject *defaults = NULL;
    if (n < argcount) {
        defaults = PyFunction_GET_DEFAULTS(fn);
        first_default -= defaults ? PyTuple_GET_SIZE(defaults) : 0;
        if (n < first_default)
            return 0;
        for (Py_ssize_t i = n; i < argcount; i++)
            if (Py_TYPE(PyTuple_GET_ITEM(defaults, i - first_default)) != st->fast_types[i])
                return 0;
    }
    for (unsigned arrays = st->fast_arrays; arrays != 0; arrays &= arrays - 1) {
        int i = __builtin_ctz(arrays);
        PyObject *v = i < n ? args[i] : PyTuple_GET_ITEM(defaults, i - first_default);
        if (array_word(v) != st->fast_words[i])
            return 0;
    }
    return 1;
}

/* Remember what the argument slots of a call whose signature is `key` (call_signature told
 * it: positional arguments, then defaults) hold, for fast_match (`plain`: a signature that
 * runs plain for good).  Only a call passing every parameter, none of them an array, counts
 * toward plain_streak (nothing_to_do's rule, which times calls of exactly those).  (Counting
 * calls that take defaults too gave dice_numpy_scalar's roll(rng) back on 3.12+ as 3.11's
 * prefix does, but made the jitted polynomial suite of benchmarks/library.py ~10% dearer in
 * CPU on 3.12, cause not found yet.) */
static void
remember_fast(CodeState *st, PyObject *fn, PyObject *const *args, size_t nargsf, uint64_t key,
              int plain)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf), argcount = st->nargs;
    if (argcount > PJ_FAST_ARGS)
        return;
    PyObject *defaults = PyFunction_GET_DEFAULTS(fn);
    Py_ssize_t first_default = argcount - (defaults ? PyTuple_GET_SIZE(defaults) : 0);
    unsigned arrays = 0;
    for (Py_ssize_t i = 0; i < argcount; i++) {
        PyObject *v = i < n ? args[i] : PyTuple_GET_ITEM(defaults, i - first_default);
        PyTypeObject *t = Py_TYPE(v);
        st->fast_types[i] = t;
        if (t == pijit_array_type) {
            st->fast_words[i] = array_word(v);
            arrays |= 1u << i;
        }
    }
    st->fast_nargs = (int)n;
    st->fast_arrays = arrays;
    st->fast_key = key;
    st->fast_plain = plain;
    st->fast_streak = n == argcount && arrays == 0;
}

/* A call of `fn` (of `st`'s code) the Wrapper makes plain by itself, outside the hook:
 * one of a code whose every call runs plain, or one whose signature call_signature can
 * tell and that runs plain for good (bypassed), or one of a code with no entry yet whose
 * signature is not hot (wrapper_run_until_hot).  The call's result, or NULL without an
 * exception when it should go through the hook.  These are the calls a program of small
 * functions makes most, each paying this on top of a plain call: a call whose argument
 * slots hold what the last hashed one's did (types; dtypes and ndims of arrays) is told its
 * signature by a few compares, others hash it (measured with benchmarks/call_floor.py:
 * hashing two arrays and a float cost ~130 instructions a call).  With `go_on` (3.11: a
 * call answered from its frame's prefix, call_prefix.c, its arguments being that frame's
 * slots), an untimed plain run is that answer: the frame goes on into its own code. */
static PyObject *
wrapper_plain_call(CodeState *st, PyObject *fn, PyObject *const *args, size_t nargsf,
                   PyObject *kwnames, PyObject *go_on)
{
    /* this_thread() only where needed: a TLS read is a call in a shared library, and 3.11's
     * prefix (go_on) runs a bypassed call in its own frame, with no call_outside. */
    int known = fast_match(st, fn, args, nargsf, kwnames);
    st->plain_streak = known && st->fast_streak ? st->plain_streak + 1 : 0;
    if ((known && st->fast_plain) || all_calls_plain(st)) {
        st->calls += st->state == ST_NEVER_COMPILE;     /* as the hook counted them */
        st->bypassed++;
        return go_on ? Py_NewRef(go_on) : call_outside(this_thread(), fn, args, nargsf,
                                                       kwnames);
    }
    int may_defer = st->budget > 0 && st->nentries == 0 && st->state == ST_CANDIDATE;
    uint64_t key = st->fast_key;
    if (!known) {
        if ((st->nplain == 0 && !may_defer)
            || !call_signature(st, fn, args, nargsf, kwnames, &key))
            return NULL;        /* (plain_streak is 0) */
        int plain = is_plain_key(st, key);
        remember_fast(st, fn, args, nargsf, key, plain);
        if (plain) {
            st->bypassed++;
            return go_on ? Py_NewRef(go_on) : call_outside(this_thread(), fn, args, nargsf,
                                                           kwnames);
        }
    }
    ThreadHook *t = may_defer ? this_thread() : NULL;
    PyObject *res = !may_defer || t->compiling ? NULL
        : wrapper_run_until_hot(t, st, key, fn, args, nargsf, kwnames, go_on);
    if (res == NULL && !PyErr_Occurred())
        st->plain_streak = 0;   /* through the hook */
    return res;
}

/* When a code's calls stay plain without pijit knowing they must: INLINE_STREAK calls in a
 * row that the Wrapper ran plain by itself, each passing the argument types of the last
 * one it hashed, every parameter and no array (remember_fast), while the code has no entry
 * that runs a compiled function, and either that signature runs plain for good (it got
 * hot, and capture found nothing to win: the calls were bypassed), or its calls not hot
 * yet have cost less than INLINE_CALL_S each in plain Python (what one call of a kernel
 * costs: nothing to win; plain_seconds over deferred: timed runs inside a timed run of the
 * same code, as the levels of a recursion, are counted in that one only).
 * Measured with benchmarks/call_floor.py and the corpus: the calls such codes make by the
 * hundred thousand (a sort's key function, a recursive scalar function, a small method)
 * each paid the Wrapper's C call, ~500 instructions, until then; a signature whose calls
 * cost more (dice_numpy_scalar's roll on 3.11: a draw of np.random, ~3 us) paid it for
 * each of its bypassed calls after its capture had found no array work. */
#define INLINE_STREAK 1000
#define INLINE_CALL_S 2e-6

/* Does pijit have nothing to do for any call of st's code (so a jitted function object
 * of it can be given back to CPython's own calls, wrapper.c)?  Every call runs plain
 * (all_calls_plain), or they stay plain as far as pijit can tell (above); calls made
 * from inside a jitted call still reach the hook, and one that finds work (an entry
 * added) arms the function again. */
static int
nothing_to_do(CodeState *st)
{
    if (!st->inline_plain)
        return 0;
    if (all_calls_plain(st))
        return 1;
    if (st->plain_streak < INLINE_STREAK
        || (st->state != ST_CANDIDATE && st->state != ST_CALLABLE))
        return 0;
    for (Py_ssize_t i = 0; i < st->nentries; i++) {
        Entry *e = st->entries[i];
        if (e->fn != NULL && !e->plain)
            return 0;           /* it runs compiled code for some calls */
    }
    return st->fast_plain || st->plain_seconds <= INLINE_CALL_S * (double)st->deferred;
}

/* ---- promotion ------------------------------------------------------------------------------ */

/* Before a hit of an entry whose promotion is due (from its promote_at-th hit, once its hits
 * took promote_after seconds): ask for a better function and put it in the entry.  The
 * callback compiles (the hook stays off for this thread meanwhile) and answers a function,
 * None (no promotion, ever), or a number of hits after which to ask again (the compiler
 * is still at work).  -1 with an exception to propagate. */
static int
maybe_promote(CodeState *st, Entry *e)
{
    if (e->promote_at <= 0 || e->hits + 1 < e->promote_at || e->spent < e->promote_after
        || e->fn == NULL)
        return 0;
    int was = tls.compiling;
    tls.compiling = 1;
    double began = compile_began();
    PyObject *fn = tell("promote", st, e, "()");
    compile_ended(began);
    tls.compiling = was;
    if (fn == NULL) {
        e->promote_at = 0;
        return PyErr_ExceptionMatches(PyExc_Exception) ? (PyErr_WriteUnraisable(
            (PyObject *)st->code), 0) : -1;
    }
    Py_ssize_t later = PyLong_CheckExact(fn) ? PyLong_AsSsize_t(fn) : 0;
    if (later > 0) {
        e->promote_at = e->hits + 1 + later;
    }
    else {
        PyErr_Clear();              /* (an int too big: never again) */
        e->promote_at = 0;
        if (fn != Py_None && PyCallable_Check(fn) && e->fn != NULL) {
            Py_SETREF(e->fn, Py_NewRef(fn));
            e->plain_pending = 0;
            e->trial_left = e->trial_runs;      /* time the promoted function */
            e->n_fn = e->n_plain = 0;
        }
    }
    Py_DECREF(fn);
    return 0;
}

/* A hit of an entry that runs plain until a promotion gives it its function (fn: the
 * stand-in, a new reference, unused), for good if none does: plain Python, outside the
 * hook, timed into the entry's `spent` as its function's runs would be. */
static PyObject *
plain_until_promoted(PyThreadState *ts, _PyInterpreterFrame *frame, CodeState *st, Entry *e,
                     PyObject *fn)
{
    Py_XDECREF(fn);
    if (e->promote_at <= 0)
        return frame_plain(ts, frame, 1);   /* no promotion to come: plain for good */
    double t0 = perf_now();
    if (t0 < 0)
        return answer(ts, frame, NULL);
    PyObject *res = frame_plain_timed(ts, frame, st);
    if (res != NULL) {
        double t1 = perf_now();
        if (t1 < 0)
            Py_CLEAR(res);
        else if (t1 > t0)
            e->spent += cpu_seconds(t1 - t0, t1);
    }
    return res;
}

/* Call the entry's function `fn` (a new reference, released) for `frame`; its run is timed
 * into the entry's `spent` while a promotion is pending. */
static PyObject *
call_entry(PyThreadState *ts, _PyInterpreterFrame *frame, CodeState *st, Entry *e,
           PyObject *fn)
{
    double t0 = e->promote_at > 0 ? perf_now() : 0;
    if (t0 < 0) {
        Py_DECREF(fn);
        return answer(ts, frame, NULL);
    }
    PyObject *res = call_with_slots(fn, frame, st->nargs);
    Py_DECREF(fn);
    if (e->promote_at > 0 && res != NULL) {
        double t1 = perf_now();
        if (t1 < 0)
            Py_CLEAR(res);
        else if (t1 > t0)
            e->spent += cpu_seconds(t1 - t0, t1);
    }
    return answer(ts, frame, res);
}

/* ---- trials --------------------------------------------------------------------------------- */

/* The trial is over: keep the faster, and say so. */
static void
end_trial(CodeState *st, Entry *e)
{
    e->plain = e->best_plain < e->margin * e->best_fn;
    PyObject *r = tell("trial", st, e, "(ddO)", e->best_fn, e->best_plain,
                       e->plain ? Py_True : Py_False);
    if (r == NULL)
        PyErr_WriteUnraisable((PyObject *)st->code);
    Py_XDECREF(r);
}

/* One timed run of a trial: plain Python or fn, whichever has had fewer runs. */
static PyObject *
trial_run(PyThreadState *ts, _PyInterpreterFrame *frame, CodeState *st, Entry *e, PyObject *fn)
{
    int plain = e->n_plain <= e->n_fn;
    double t0 = perf_now();
    if (t0 < 0) {
        Py_DECREF(fn);
        return answer(ts, frame, NULL);
    }
    PyObject *res;
    if (plain) {
        Py_DECREF(fn);
        res = frame_plain_timed(ts, frame, st);
    }
    else {
        res = call_with_slots(fn, frame, st->nargs);
        Py_DECREF(fn);
        res = answer(ts, frame, res);
    }
    if (res == NULL)
        return NULL;            /* a raising run says nothing about speed */
    double dt = perf_now() - t0;
    if (dt < 0) {
        Py_DECREF(res);
        return NULL;
    }
    if (plain) {
        e->best_plain = e->n_plain++ ? (dt < e->best_plain ? dt : e->best_plain) : dt;
    }
    else {
        e->best_fn = e->n_fn++ ? (dt < e->best_fn ? dt : e->best_fn) : dt;
    }
    if (--e->trial_left == 0)
        end_trial(st, e);
    return res;
}

/* Run the hit of entry `e` (held by the caller) whose function for this frame is `fn`
 * (a new reference, or NULL for an entry that runs plain). */
/* Remember `key` as the signature of calls that run plain for good. */
static void
remember_plain_key(CodeState *st, uint64_t key)
{
    if (!is_plain_key(st, key) && st->nplain < PJ_SIGNATURES) {
        st->plain_key[st->nplain++] = key;
        st->fast_nargs = -1;        /* its fast_plain may be this key's, now out of date */
    }
}

static void
remember_plain(CodeState *st, _PyInterpreterFrame *frame)
{
    remember_plain_key(st, frame_signature(frame, st->nargs));
}

/* Does `c` (a check of `e`) fail for every call whose argument slots have the types (and,
 * for arrays, dtypes and ndims) of `frame`'s: 1; 0 if it may pass; -1 if it may raise
 * (it reads something else than an argument, or calls Python), so that a call would not
 * even get to the checks after it. */
static int
check_misses_signature(Entry *e, Check *c, _PyInterpreterFrame *frame, Py_ssize_t nargs)
{
    Source *s = &e->sources[c->src];
    if (s->kind != SRC_LOCAL || s->arg >= nargs || c->kind == CHK_CALL)
        return -1;
    PyObject *v = frame->localsplus[s->arg];
    if (v == NULL)
        return -1;
    switch (c->kind) {
    case CHK_TYPE:
        return (PyObject *)Py_TYPE(v) != c->obj;
    case CHK_ARRAY: {
        if (Py_TYPE(v) != pijit_array_type)
            return 1;
        PyArrayObject_fields *a = (PyArrayObject_fields *)v;
        return a->nd != c->n || a->descr == NULL || a->descr->type_num != c->type_num;
    }
    case CHK_EQ:
        if (Py_TYPE(v) != Py_TYPE(c->obj))
            return 1;
        return PyLong_CheckExact(v) || PyFloat_CheckExact(v) || PyBool_Check(v) ? 0 : -1;
    case CHK_DISTINCT:
        return e->sources[c->n].kind == SRC_LOCAL ? 0 : -1;
    default:                    /* CHK_ID, CHK_LEN, CHK_ITEMS: no Python code */
        return 0;
    }
}

/* A miss of a frozen code: remember its signature as one that runs plain for good when
 * every entry misses on a check of the arguments' types, dtypes or ndims that comes before
 * any check that could raise: then every call of the signature misses them all, and
 * (frozen) runs plain; the Wrapper bypasses the hook for such calls from then on.  An
 * entry whose guards the signature cannot decide (shapes, values) keeps the hook's walk. */
static void
remember_frozen_miss(CodeState *st, _PyInterpreterFrame *frame)
{
    if (st->nplain >= PJ_SIGNATURES)
        return;
    for (Py_ssize_t i = 0; i < st->nentries; i++) {
        Entry *e = st->entries[i];
        int decided = 0;
        for (Py_ssize_t k = 0; k < e->nchecks && !decided; k++) {
            int r = check_misses_signature(e, &e->checks[k], frame, st->nargs);
            if (r < 0)
                return;
            decided = r;
        }
        if (!decided)
            return;
    }
    remember_plain(st, frame);
}

/* The same for a call whose argument slots are the items of `slots` (a tuple). */
static void
remember_plain_slots(CodeState *st, PyObject *slots)
{
    Py_ssize_t n = PyTuple_GET_SIZE(slots);
    if (n != st->nargs)
        return;
    uint64_t h = (uint64_t)n;
    for (Py_ssize_t i = 0; i < n; i++)
        h = mix_arg(h, PyTuple_GET_ITEM(slots, i));
    remember_plain_key(st, h);
}

static PyObject *
run_hit(PyThreadState *ts, _PyInterpreterFrame *frame, CodeState *st, Entry *e, PyObject *fn)
{
    if (fn == NULL || e->plain) {
        if (fn == NULL)
            remember_plain(st, frame);
        Py_XDECREF(fn);
        return frame_plain(ts, frame, 1);
    }
    if (e->plain_pending)
        return plain_until_promoted(ts, frame, st, e, fn);
    if (e->trial_left > 0)
        return trial_run(ts, frame, st, e, fn);
    return call_entry(ts, frame, st, e, fn);
}

/* ---- module functions ------------------------------------------------------------------------- */

static PyObject *
m_set_adapt_callback(PyObject *m, PyObject *cb)
{
    return set_callable(&adapt_callback, cb, "adapt callback") ? NULL : Py_NewRef(Py_None);
}

static PyObject *
m_set_perf_clock(PyObject *m, PyObject *cb)
{
    return set_callable(&perf_clock, cb, "perf clock") ? NULL : Py_NewRef(Py_None);
}

/* set_cpu_clock(clock or None): this thread's CPU clock's stand-in; the share window
 * starts again. */
static PyObject *
m_set_cpu_clock(PyObject *m, PyObject *cb)
{
    if (set_callable(&cpu_clock, cb, "cpu clock") < 0)
        return NULL;
    tls.share_wall = tls.share = 0;
    Py_RETURN_NONE;
}

static PyObject *
m_set_compile_budget(PyObject *m, PyObject *args)
{
    PyObject *o;
    double seconds;
    if (!PyArg_ParseTuple(args, "Od:set_compile_budget", &o, &seconds))
        return NULL;
    if (!(seconds >= 0)) {
        PyErr_Format(PyExc_ValueError, "compile budget must be >= 0 seconds, got %R",
                     PyTuple_GET_ITEM(args, 1));
        return NULL;
    }
    CodeState *st = state_of(o);
    if (st == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "set_compile_budget: %R is not marked", o);
        return NULL;
    }
    st->budget = seconds;
    Py_RETURN_NONE;
}

/* take_varied(code) -> bits of the argument slots whose int or float values varied while
 * the signature that became hot last was not hot (0 once read). */
static PyObject *
m_take_varied(PyObject *m, PyObject *o)
{
    CodeState *st = state_of(o);
    if (st == NULL)
        return PyErr_Occurred() ? NULL : PyLong_FromLong(0);
    uint64_t varied = st->hot_varied;
    st->hot_varied = 0;
    return PyLong_FromUnsignedLongLong(varied);
}

/* [{hits, plain, plain_pending, trial_left, spent, best_fn, best_plain}] per entry, most
 * recently hit first. */
static PyObject *
m_entry_stats(PyObject *m, PyObject *o)
{
    CodeState *st = state_of(o);
    if (st == NULL)
        return PyErr_Occurred() ? NULL : PyList_New(0);
    PyObject *out = PyList_New(st->nentries);
    for (Py_ssize_t i = 0; out && i < st->nentries; i++) {
        Entry *e = st->entries[i];
        PyObject *d = Py_BuildValue(
            "{s:n,s:O,s:O,s:i,s:d,s:N,s:N}", "hits", e->hits,
            "plain", e->plain ? Py_True : Py_False,
            "plain_pending", e->plain_pending ? Py_True : Py_False,
            "trial_left", e->trial_left, "spent", e->spent,
            "best_fn", e->n_fn ? PyFloat_FromDouble(e->best_fn) : Py_NewRef(Py_None),
            "best_plain", e->n_plain ? PyFloat_FromDouble(e->best_plain) : Py_NewRef(Py_None));
        if (d == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, d);
    }
    return out;
}

#define ADAPT_METHODS \
    {"set_adapt_callback", m_set_adapt_callback, METH_O, \
     "set_adapt_callback(cb): cb(event, code, fn, details); 'promote' returns a new fn"}, \
    {"set_perf_clock", m_set_perf_clock, METH_O, "set_perf_clock(clock or None): trials' clock"}, \
    {"set_cpu_clock", m_set_cpu_clock, METH_O, \
     "set_cpu_clock(clock or None): this thread's CPU clock, which scales the budgets"}, \
    {"set_compile_budget", m_set_compile_budget, METH_VARARGS, \
     "set_compile_budget(code, seconds): plain run time of a signature before it compiles"}, \
    {"entry_stats", m_entry_stats, METH_O, "entry_stats(code) -> [dict] per entry, MRU first"}, \
    {"take_varied", m_take_varied, METH_O, \
     "take_varied(code) -> int: bit i: argument slot i's int/float value varied before the " \
     "signature that became hot last was hot (reset to 0)"},
