/* pijit.h -- shared declarations of the pijit C hook (CPython 3.11 only).
 *
 * The extension is one translation unit: pijit/_build_C.py hands cffi a
 * source that includes this header, guards.c and eval_frame.c in that order,
 * so everything here is static.
 *
 * Objects:
 *   CodeExtra   per-code state attached with _PyCode_SetExtra: the state
 *               machine value, counters and the ordered (MRU) entry array.
 *   Entry       one cache entry: a compiled guard program + the function to
 *               call on a hit (NULL = "run the frame plain").
 *   Source/Check the compiled guard program (see guards.c).
 */
#ifndef PIJIT_H
#define PIJIT_H

#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "pijit's frame hook supports CPython 3.11 only"
#endif

#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

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
} Source;

/* Guard checks: predicates on one source value. */
enum { CHK_TYPE, CHK_ID, CHK_EQ, CHK_LEN, CHK_ARRAY, CHK_CALL };

typedef struct {
    int kind;
    Py_ssize_t src;
    PyObject *obj;       /* type / object / value / callable (strong) */
    Py_ssize_t n;        /* CHK_LEN: length; CHK_ARRAY: ndim */
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
} Entry;

typedef struct {
    int state;
    Py_ssize_t nargs;    /* argument slots of the code */
    Py_ssize_t nfree;    /* co_nfreevars */
    uint64_t version;    /* bumped on every change of the entry array */
    Py_ssize_t calls, hits, misses;
    Py_ssize_t nentries, capacity;
    Entry **entries;     /* entries[0] is the most recently hit */
} CodeExtra;

/* guards.c */
static Entry *entry_new(PyCodeObject *code, Py_ssize_t nargs, PyObject *sources,
                        PyObject *checks, PyObject *fn);
static void entry_decref(Entry *e);
static int entry_check(Entry *e, _PyInterpreterFrame *frame);

/* Set by set_array_type(): exact numpy.ndarray type (strong), or NULL. */
static PyTypeObject *pijit_array_type = NULL;

#endif /* PIJIT_H */
