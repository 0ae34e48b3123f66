/* pijit.h -- shared declarations of the pijit C hook.
 *
 * The extension is one translation unit: pijit/_build_C.py hands cffi a source that
 * includes guards.c, code_state.c, pool.c, kernel_entry.c, kernel_support.c, eval_frame.c,
 * adapt.c, wrapper.c and module.c in that order (each includes this header first), so
 * everything here is static.
 *
 * Objects:
 *   CodeState    per-code state, a garbage-collected object: the state machine value,
 *                counters, the ordered (MRU) entry array and the Python-side record.  The
 *                code's co_extra slot points at it without owning it; its owners are the
 *                jit Wrapper of the function and the records of the codes it was made for.
 *   Entry        one cache entry: a compiled guard program + the function to call on a
 *                hit (NULL = "run the frame plain").
 *   Source/Check the compiled guard program (see guards.c).
 */
#ifndef PIJIT_H
#define PIJIT_H

#include "compat.h"

#include <structmember.h>
#include <stdint.h>
#include <string.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/ndarraytypes.h>

/* Code states (exported as module constants). */
enum {
    ST_NEVER_COMPILE = 0,
    ST_CANDIDATE = 1,
    ST_BUILDING = 2,
    ST_CALLABLE = 3,
    ST_FROZEN = 4,
};

/* Guard sources: where a guarded value comes from. */
enum { SRC_LOCAL, SRC_GLOBAL, SRC_CELL, SRC_ATTR, SRC_ITEM, SRC_CONST, SRC_DICTITEM };

typedef struct {
    int kind;
    Py_ssize_t arg;    /* slot / closure index / parent source index */
    Py_ssize_t index;  /* SRC_ITEM: item index */
    PyObject *name;    /* SRC_GLOBAL, SRC_ATTR: str; SRC_CONST: the object; SRC_DICTITEM: key (strong) */
    /* SRC_GLOBAL: the value the last lookup found, or NULL, and the versions of the globals
     * and builtins dicts it looked in then (guards.c fetch_global); SRC_ATTR: of a module's
     * dict (fetch_attr); borrowed: a dict whose version is still that one holds it. */
    PyObject *found;
    uint64_t versions[2];
} Source;

/* Guard checks: predicates on one source value (CHK_DISTINCT: on two). */
enum { CHK_TYPE, CHK_ID, CHK_EQ, CHK_LEN, CHK_ARRAY, CHK_CALL, CHK_DISTINCT, CHK_ITEMS };

typedef struct {
    int kind;
    Py_ssize_t src;
    PyObject *obj;       /* type / object / value / callable; CHK_ITEMS: NumPy's scalar
                            types (float64, int64, bool_) (strong) */
    Py_ssize_t n;        /* CHK_LEN: length; CHK_ARRAY: ndim; CHK_DISTINCT: the other source;
                            CHK_ITEMS: the item kind ('f', 'i', 'b') */
    int type_num;        /* CHK_ARRAY */
    int flags_mask;      /* CHK_ARRAY */
    int flags_value;     /* CHK_ARRAY */
    npy_intp *shape;     /* CHK_ARRAY: ndim dims, -1 = dynamic (malloc'ed) */
} Check;

typedef struct {
    Py_ssize_t refcnt;   /* owners: the entry array + walkers in progress */
    Py_ssize_t nsources;
    Source *sources;
    Py_ssize_t nchecks;
    Check *checks;
    PyObject *fn;        /* strong, or NULL = run plain on hit */
    PyObject *orig_sources; /* as passed to add_entry, for introspection */
    PyObject *orig_checks;
    /* What the entry learned since it was added (adapt.c). */
    Py_ssize_t hits;
    Py_ssize_t promote_at;  /* from this hit, ask the promote callback for a better fn (0: never) */
    double promote_after;   /* ... once the entry's hits took this many seconds in all */
    double spent;           /* seconds of the entry's hits while a promotion is pending */
    int plain_pending;      /* hits run plain Python (timed) until a promotion replaces fn */
    int trial_runs;         /* timed runs of a trial (0: none); after promotion if promote_at */
    int trial_left;         /* timed runs left, alternately plain Python and fn */
    double margin;          /* plain wins a trial when its best run < margin * fn's best */
    int plain;              /* the trial found plain Python faster: hits run plain */
    int n_fn, n_plain;      /* timed runs of each */
    double best_fn, best_plain;     /* the fastest of each, in seconds */
} Entry;

#define PJ_SIGNATURES 8
#define PJ_VALUE_ARGS 16        /* argument slots whose int/float values a signature tracks */
#define PJ_UNSEEN ((uint64_t)1 << 63)   /* sig_varied: no call of the slot noted yet */
#define PJ_FAST_ARGS 8          /* parameters of a signature the Wrapper tells by compares */

typedef struct CodeState {
    PyObject_HEAD
    PyCodeObject *code;  /* strong: the code whose co_extra slot points here */
    PyObject *record;    /* the Python-side record (pijit.cache.CodeRecord) or NULL */
    PyObject *weakreflist;
    int state;
    Py_ssize_t nargs;    /* argument slots of the code */
    uint64_t version;    /* bumped on every change of the entry array */
    Py_ssize_t calls, hits, misses;
    Py_ssize_t nentries, capacity;
    Entry **entries;     /* entries[0] is the most recently hit */
    uint64_t build_epoch; /* fork epoch in which state became ST_BUILDING */
    /* A signature compiles once its calls ran plain for `budget` seconds (adapt.c). */
    double budget;       /* 0: at its first call */
    Py_ssize_t deferred; /* misses that ran plain because their signature was not hot yet */
    uint64_t sig_key[PJ_SIGNATURES];
    double sig_time[PJ_SIGNATURES];     /* plain seconds so far, -1: slot free */
    uint64_t sig_calls[PJ_SIGNATURES];  /* plain runs so far (which of them are timed) */
    /* Whether the int and float arguments of a signature not hot yet took more than one
     * value (adapt.c): bit i for argument slot i, from the hashes of the first call's. */
    uint64_t sig_varied[PJ_SIGNATURES];
    Py_hash_t sig_value[PJ_SIGNATURES][PJ_VALUE_ARGS];
    uint64_t hot_varied;    /* sig_varied of the signature that became hot last */
    /* Signatures of calls that run plain for good: the Wrapper calls the function without
     * the hook for them (calls passing exactly the positional parameters). */
    int nplain;
    uint64_t plain_key[PJ_SIGNATURES];
    /* What the argument slots of the last call whose signature the Wrapper hashed held
     * (its positional arguments, then defaults): types, and exact arrays' dtype numbers and
     * ndims; a call whose slots hold the same has that signature, told without hashing
     * (adapt.c's fast_match).  The types are compared by identity, never read (as in the
     * signature keys: a type freed and another made at its address then runs plain or waits
     * as that signature does, which is always right). */
    int fast_nargs;                         /* positional arguments of that call; -1: none */
    PyTypeObject *fast_types[PJ_FAST_ARGS];
    unsigned fast_arrays;                   /* bit i: slot i held an exact array, whose */
    uint64_t fast_words[PJ_FAST_ARGS];      /* dtype and ndim are adapt.c's array_word */
    uint64_t fast_key;
    int fast_plain;                         /* fast_key is one of plain_key */
    int fast_streak;                        /* its calls count toward plain_streak */
    Py_ssize_t bypassed; /* calls the Wrapper made without the hook */
    /* Jitted function objects given back to CPython's own calls because every call of
     * this code runs plain (wrapper.c): a list of weak references, or NULL.  A change that
     * may give pijit work again (reset, a state change, a new entry) arms them again. */
    PyObject *inlined;
    Py_ssize_t plain_streak;    /* calls in a row the Wrapper ran plain by itself (adapt.c) */
    int inline_plain;           /* jit_config's inline_plain (set_inline) */
    /* 3.11: timed plain runs in progress that call the user's function for a frame at its
     * prefix (each holds a reference to it: call_prefix.c's original_private). */
    Py_ssize_t user_calls;
    int timing;                 /* a timed plain run of a signature not hot yet is running */
    double plain_seconds;       /* such runs in all, those inside one not counted (adapt.c) */
    struct CodeState *live_prev, *live_next;   /* every live state, for reset() of all */
} CodeState;

/* guards.c */
static Entry *entry_new(PyCodeObject *code, Py_ssize_t nargs, PyObject *sources,
                        PyObject *checks, PyObject *fn);
static void entry_decref(Entry *e);
static int entry_traverse(Entry *e, visitproc visit, void *arg);
static int entry_check(Entry *e, _PyInterpreterFrame *frame);

/* code_state.c */
static PyTypeObject CodeStateType;
static Py_ssize_t extra_index;
static CodeState *code_state(PyCodeObject *code);
static CodeState *code_state_mark(PyCodeObject *code);
static void code_state_clear_entries(CodeState *st);
static CodeState *state_of(PyObject *o);

/* wrapper.c */
static void rearm_inlined(CodeState *st);
static PyObject *function_vectorcall(PyObject *func, PyObject *const *args, size_t nargsf,
                                     PyObject *kwnames);
/* call_prefix.c: the user's code of a jitted copy's prefixed code (3.11), else the code;
 * and the code a jitted copy runs for a user's code (a new reference, NULL on error). */
static PyCodeObject *original_code(PyCodeObject *code);
static PyObject *prefixed_code(PyObject *code);
/* CPython's vectorcall of Python functions (_PyFunction_Vectorcall, which 3.13 does not
 * export), read from the first function arm() is given; NULL before. */
static vectorcallfunc cpython_function_vc = NULL;

/* adapt.c */
static double compile_began(void);
static void compile_ended(double began);
static PyObject *run_until_hot(PyThreadState *ts, _PyInterpreterFrame *frame, CodeState *st);
static PyObject *wrapper_plain_call(CodeState *st, PyObject *fn, PyObject *const *args,
                                    size_t nargsf, PyObject *kwnames, PyObject *go_on);
static void remember_plain_slots(CodeState *st, PyObject *slots);
static void remember_frozen_miss(CodeState *st, _PyInterpreterFrame *frame);
static int maybe_promote(CodeState *st, Entry *e);
static PyObject *run_hit(PyThreadState *ts, _PyInterpreterFrame *frame, CodeState *st,
                         Entry *e, PyObject *fn);

/* Set a callback slot from a module function's argument: a callable, or None for none. */
static int
set_callable(PyObject **slot, PyObject *cb, const char *what)
{
    if (cb != Py_None && !PyCallable_Check(cb)) {
        PyErr_Format(PyExc_TypeError, "%s must be callable or None", what);
        return -1;
    }
    Py_XSETREF(*slot, cb == Py_None ? NULL : Py_NewRef(cb));
    return 0;
}

/* eval_frame.c */
static uint64_t fork_epoch;

/* Set by set_array_type(): exact numpy.ndarray type (strong), or NULL. */
static PyTypeObject *pijit_array_type = NULL;

#endif /* PIJIT_H */
