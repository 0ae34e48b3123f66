/* pool.c -- a NumPy memory handler that keeps big freed buffers for reuse.
 *
 * Why: glibc serves a block above its mmap threshold with a fresh mmap and unmaps it on free,
 * so every big array a kernel returns is page-faulted in again (measured here: writing a
 * fresh 80 MB array takes 17 ms, a reused one 9 ms). The threshold starts at 128 KiB and
 * rises (to 32 MiB at most) only after such a block is freed, so whether an output of a few
 * MiB is fresh memory on each call depends on what the process did before. A fused kernel's
 * output dies and is reallocated at the same size on every call of a loop; this handler keeps
 * such blocks after they die and hands them to the next big output of the same size class.
 * Kernels install the handler only around the allocation of their own outputs of 4 MiB or
 * more (PyDataMem_SetHandler), so the arrays a user makes never see it; an array remembers
 * its handler, so its free and realloc come back here.
 *
 * Blocks are allocated and finally released through NumPy's default handler (which asks the
 * kernel for huge pages), with a 64-byte header recording the size class: NumPy's realloc
 * passes no old size. The pool holds at most `pool_limit` bytes (set_pool_limit; 0 disables
 * keeping anything) and gives it all back on release_pool() (pijit.reset()).
 *
 * The data of a block starts on a huge-page boundary (the block is a huge page longer), so
 * all of it can be backed by huge pages. NumPy's own 16 MiB array starts anywhere in a huge
 * page, and its two partial huge pages take 4 KiB pages: measured here, ~490 page faults per
 * fresh 16 MiB output and 0.3-0.5 ms, against 8 faults when aligned. Blocks below 32 MiB
 * were once not kept, on the theory that glibc's heap reuses them; but the huge page added
 * makes a 30.5 MiB output (4M float64) a 32.5 MiB request, mmapped and faulted in on every
 * call even at glibc's highest threshold: poly_eval on 4M float64 took 4.7 ms, 2.4 ms kept.
 */
#include "pijit.h"

#include <numpy/arrayobject.h>
#include <pthread.h>
#include <stdint.h>

#define POOL_HEADER 64                  /* keeps NumPy's 16-byte (and cache-line) alignment */
#define POOL_CLASS ((size_t)2 << 20)    /* size classes: multiples of a huge page */
#define POOL_BIG ((size_t)4 << 20)      /* kept, huge-page aligned: the kernels' outputs */
#define POOL_SLOTS 64

typedef struct {
    size_t size;                        /* the size class: bytes after the header */
    void *raw;                          /* what NumPy's handler returned */
} PoolHeader;

static PyDataMem_Handler *pool_base;     /* NumPy's default handler (its capsule is kept) */
static PyObject *pool_base_capsule;
static PyObject *pool_capsule;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static PoolHeader *pool_free_blocks[POOL_SLOTS];     /* oldest first */
static size_t pool_free_sizes[POOL_SLOTS];
static int pool_count;
static size_t pool_held, pool_limit = (size_t)512 << 20;
static Py_ssize_t pool_hits, pool_misses;

/* Big blocks in huge-page classes; a small one (a pooled array resized down) as it is. */
static size_t
pool_class(size_t size)
{
    size_t unit = size >= POOL_BIG ? POOL_CLASS : POOL_HEADER;
    return (size + unit - 1) / unit * unit;
}

static void *
pool_base_malloc(size_t size)
{
    return pool_base->allocator.malloc(pool_base->allocator.ctx, size);
}

static void
pool_base_free(void *raw, size_t size)
{
    pool_base->allocator.free(pool_base->allocator.ctx, raw, size);
}

/* Bytes asked of NumPy's handler for a block of class cls (a big one: a huge page more). */
static size_t
block_bytes(size_t cls)
{
    return cls + POOL_HEADER + (cls >= POOL_BIG ? POOL_CLASS : 0);
}

/* A new block of class cls (its data follows the header), or NULL. */
static PoolHeader *
block_new(size_t cls)
{
    char *raw = pool_base_malloc(block_bytes(cls));
    if (raw == NULL)
        return NULL;
    char *data = raw + POOL_HEADER;
    if (cls >= POOL_BIG)
        data = (char *)(((uintptr_t)data + POOL_CLASS - 1) & ~(uintptr_t)(POOL_CLASS - 1));
    PoolHeader *h = (PoolHeader *)(data - POOL_HEADER);
    h->size = cls;
    h->raw = raw;
    return h;
}

static void
block_free(PoolHeader *h)
{
    pool_base_free(h->raw, block_bytes(h->size));
}

/* Takes a kept block of exactly this class, or NULL. */
static PoolHeader *
pool_take(size_t cls)
{
    PoolHeader *block = NULL;
    pthread_mutex_lock(&pool_lock);
    for (int k = pool_count - 1; k >= 0; k--) {
        if (pool_free_sizes[k] == cls) {
            block = pool_free_blocks[k];
            memmove(pool_free_blocks + k, pool_free_blocks + k + 1,
                    (pool_count - k - 1) * sizeof(PoolHeader *));
            memmove(pool_free_sizes + k, pool_free_sizes + k + 1,
                    (pool_count - k - 1) * sizeof(size_t));
            pool_count--;
            pool_held -= cls;
            break;
        }
    }
    if (block != NULL)
        pool_hits++;
    else
        pool_misses++;
    pthread_mutex_unlock(&pool_lock);
    return block;
}

/* Keeps a dead block, evicting the oldest ones beyond the limit; releases what it cannot keep. */
static void
pool_keep(PoolHeader *block)
{
    PoolHeader *evicted[POOL_SLOTS + 1];
    int nevicted = 0;
    size_t cls = block->size;
    pthread_mutex_lock(&pool_lock);
    if (cls + POOL_HEADER > pool_limit) {
        evicted[nevicted++] = block;
    }
    else {
        while (pool_count > 0 && (pool_count == POOL_SLOTS || pool_held + cls > pool_limit)) {
            evicted[nevicted++] = pool_free_blocks[0];
            pool_held -= pool_free_sizes[0];
            pool_count--;
            memmove(pool_free_blocks, pool_free_blocks + 1, pool_count * sizeof(PoolHeader *));
            memmove(pool_free_sizes, pool_free_sizes + 1, pool_count * sizeof(size_t));
        }
        pool_free_blocks[pool_count] = block;
        pool_free_sizes[pool_count++] = cls;
        pool_held += cls;
    }
    pthread_mutex_unlock(&pool_lock);
    for (int k = 0; k < nevicted; k++)
        block_free(evicted[k]);
}

static void *
pool_malloc(void *ctx, size_t size)
{
    (void)ctx;
    size_t cls = pool_class(size ? size : 1);
    PoolHeader *h = cls >= POOL_BIG ? pool_take(cls) : NULL;
    if (h == NULL && (h = block_new(cls)) == NULL)
        return NULL;
    return (char *)h + POOL_HEADER;
}

static void *
pool_calloc(void *ctx, size_t nelem, size_t elsize)
{
    if (elsize != 0 && nelem > SIZE_MAX / elsize)
        return NULL;
    void *p = pool_malloc(ctx, nelem * elsize);
    if (p != NULL)
        memset(p, 0, nelem * elsize);
    return p;
}

static void
pool_free(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    (void)size;                         /* the header knows the block's real size */
    if (ptr == NULL)
        return;
    PoolHeader *h = (PoolHeader *)((char *)ptr - POOL_HEADER);
    if (h->size < POOL_BIG)
        block_free(h);
    else
        pool_keep(h);
}

static void *
pool_realloc(void *ctx, void *ptr, size_t new_size)
{
    if (ptr == NULL)
        return pool_malloc(ctx, new_size);
    PoolHeader *h = (PoolHeader *)((char *)ptr - POOL_HEADER);
    if (pool_class(new_size ? new_size : 1) == h->size)
        return ptr;
    void *p = pool_malloc(ctx, new_size);
    if (p == NULL)
        return NULL;
    memcpy(p, ptr, h->size < new_size ? h->size : new_size);
    pool_free(ctx, ptr, 0);
    return p;
}

static PyDataMem_Handler pool_handler = {
    "pijit_buffer_pool",
    1,
    {NULL, pool_malloc, pool_calloc, pool_realloc, pool_free},
};

static int
pool_init(void)
{
    if (pool_capsule != NULL)
        return 0;
    if (PyArray_API == NULL && _import_array() < 0)
        return -1;
    PyDataMem_Handler *base = PyCapsule_GetPointer(PyDataMem_DefaultHandler, "mem_handler");
    if (base == NULL)
        return -1;
    pool_capsule = PyCapsule_New(&pool_handler, "mem_handler", NULL);
    if (pool_capsule == NULL)
        return -1;
    pool_base_capsule = Py_NewRef(PyDataMem_DefaultHandler);
    pool_base = base;
    return 0;
}

static PyObject *
m_pool_handler(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (pool_init() < 0)
        return NULL;
    return Py_NewRef(pool_capsule);
}

static PyObject *
m_set_pool_limit(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_ssize_t limit = PyLong_AsSsize_t(arg);
    if (limit == -1 && PyErr_Occurred())
        return NULL;
    if (limit < 0) {
        PyErr_SetString(PyExc_ValueError, "set_pool_limit: the limit must be >= 0 bytes");
        return NULL;
    }
    pthread_mutex_lock(&pool_lock);
    pool_limit = (size_t)limit;
    pthread_mutex_unlock(&pool_lock);
    Py_RETURN_NONE;
}

/* Gives every kept block back to NumPy's allocator. */
static PyObject *
m_release_pool(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PoolHeader *blocks[POOL_SLOTS];
    pthread_mutex_lock(&pool_lock);
    int n = pool_count;
    memcpy(blocks, pool_free_blocks, n * sizeof(PoolHeader *));
    pool_count = 0;
    pool_held = 0;
    pthread_mutex_unlock(&pool_lock);
    for (int k = 0; k < n; k++)
        block_free(blocks[k]);
    Py_RETURN_NONE;
}

static PyObject *
m_pool_stats(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    pthread_mutex_lock(&pool_lock);
    Py_ssize_t blocks = pool_count, hits = pool_hits, misses = pool_misses;
    size_t held = pool_held, limit = pool_limit;
    pthread_mutex_unlock(&pool_lock);
    return Py_BuildValue("{s:n,s:n,s:n,s:n,s:n}", "blocks", blocks, "held", (Py_ssize_t)held,
                         "limit", (Py_ssize_t)limit, "hits", hits, "misses", misses);
}

#define POOL_METHODS \
    {"pool_handler", m_pool_handler, METH_NOARGS, "the buffer pool's NumPy memory handler"}, \
    {"set_pool_limit", m_set_pool_limit, METH_O, "set_pool_limit(bytes): most bytes kept"}, \
    {"release_pool", m_release_pool, METH_NOARGS, "give every kept buffer back"}, \
    {"pool_stats", m_pool_stats, METH_NOARGS, "pool_stats() -> dict"},
