"""Nest -> C: one kernel function running the whole nest, built like fused groups.

The kernel takes the node's arguments (arrays, then the scalar inputs), checks each (an
unexpected type, dtype, layout or an int beyond int64 hands the whole call to Python), runs
the blocks as labels and gotos, and returns the outputs as a tuple of Python objects of
their exact types. An op that cannot go on exactly (see types.py: overflow, a bound, a zero
divisor, a non-finite float, an int too big to compare with a float exactly) jumps to `bail`
with the number of its block, which boxes every variable and calls the nest's Python form
(lower_py.py) from that block: plain Python then does that operation and the rest.
Floats are computed in Python's order, one rounding per operation (the module is compiled
with -ffp-contract=off; no vectorization, so no libmvec, but for vectorize.py's passes, whose
lanes are iterations apart: each rounds as the scalar code), math functions by libm as CPython.
Loops are unrolled (gcc's unroll-loops: the same operations in the same order).
"""
from __future__ import annotations

import struct

import numpy as np

from pijit.backends.cfused import render
from pijit.loopnest import (appends, bounds, calls, cse, exit_checks, float_checks, forward,
                            hoist, ifconvert, lanes, ranges, rows, slices, vectorize)
from pijit.loopnest import types as T
from pijit.loopnest.ir import Block, Const, Nest, reverse_postorder, successors

_C = {"bool": ("npy_bool", "Bool"), "int8": ("npy_int8", "Byte"),
      "int16": ("npy_int16", "Short"), "int32": ("npy_int32", "Int"),
      "int64": ("npy_int64", "Long"), "uint8": ("npy_uint8", "UByte"),
      "uint16": ("npy_uint16", "UShort"), "uint32": ("npy_uint32", "UInt"),
      "float32": ("npy_float32", "Float"), "float64": ("npy_float64", "Double")}
_NPY = {"bool": "NPY_BOOL", "int8": "NPY_INT8", "int16": "NPY_INT16", "int32": "NPY_INT32",
        "int64": "NPY_INT64", "uint8": "NPY_UINT8", "uint16": "NPY_UINT16",
        "uint32": "NPY_UINT32", "float32": "NPY_FLOAT32", "float64": "NPY_FLOAT64"}
_CMP = {"lt": "<", "le": "<=", "eq": "==", "ne": "!=", "gt": ">", "ge": ">="}

HELPERS = r"""
#define PJ_BAIL(k) goto bail_##k
/* Ctrl-C.  Plain Python stops a loop at its next instruction; a kernel polls on its loops'
 * back edges (NestKernel.function says which) and, if SIGINT came, hands over there with
 * the signal still pending: Python then raises KeyboardInterrupt (or runs the program's
 * handler) in the nest's Python form, with every earlier write done.  Without this a long
 * or endless nest could not be interrupted at all.  PyOS_InterruptOccurred answers only in
 * the main thread, where alone Python runs signal handlers, and clears the flag, which
 * PyErr_SetInterrupt sets again. */
#define PJ_POLL_EVERY 65536
#define PJ_POLL_OUTER_EVERY 64
/* An innermost for loop runs its range in blocks of PJ_POLL_EVERY iterations, polling
 * between them: its loop test compares with the block's end instead of the range's stop, so
 * a pass costs what it did (a counted poll in such a loop cost 30-90% of a short body). */
static inline int64_t pj_block_end(int64_t cur, int64_t stop, int64_t step)
{
    int64_t span, end;
    if (__builtin_mul_overflow(step, (int64_t)PJ_POLL_EVERY, &span) ||
            __builtin_add_overflow(cur, span, &end) || (step > 0 ? end > stop : end < stop))
        return stop;
    return end;
}
/* the same for a step of 1 (the usual range), in fewer instructions: a short loop entered
 * often pays it at each entry */
#define PJ_BLOCK_END_1(cur, stop) ((cur) < (stop) && (uint64_t)(stop) - (uint64_t)(cur) > \
                                   PJ_POLL_EVERY ? (cur) + PJ_POLL_EVERY : (stop))
#define PJ_POLL() (__builtin_expect(--pj_poll == 0, 0) \
                   && (pj_poll = PJ_POLL_EVERY, pj_interrupted()))
#define PJ_POLL_OUTER() (__builtin_expect(--pj_poll_outer == 0, 0) \
                         && (pj_poll_outer = PJ_POLL_OUTER_EVERY, pj_interrupted()))
static __attribute__((noinline)) int pj_interrupted(void)
{
    if (!PyOS_InterruptOccurred())
        return 0;
    PyErr_SetInterrupt();
    return 1;
}
/* None into the slots of a hand-over's vector whose variables are not live there, out of
 * line and by a table: a line per slot was half of cholesky_loops' C (41 of its 76 KB), and
 * 3.12's inlined Py_INCREF (its test for an immortal object) in each of those thousands made
 * gcc's PRE pass take 10 of the 17.5 s a nest of 58 stores compiled in. */
static __attribute__((noinline, cold)) void pj_nones(PyObject **vec, const int *slots, int n)
{
    int k;
    for (k = 0; k < n; k++)
        vec[slots[k]] = Py_NewRef(Py_None);
}
#define PJ_I53(x) ((x) > 9007199254740992LL || (x) < -9007199254740992LL)
#define PJ_I24(x) ((x) > 16777216LL || (x) < -16777216LL)
/* a double of these bits (a NaN constant with its sign and payload) */
static inline double pj_f64_bits(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}
/* Python's (and NumPy's) floor division and modulo of doubles (CPython's float_divmod) */
static inline double pj_fmod(double vx, double wx)
{
    double mod = fmod(vx, wx);
    if (mod) {
        if ((wx < 0) != (mod < 0))
            mod += wx;
    } else
        mod = copysign(0.0, wx);
    return mod;
}
static inline double pj_ffloordiv(double vx, double wx)
{
    double mod = fmod(vx, wx), div = (vx - mod) / wx, floordiv;
    if (mod && ((wx < 0) != (mod < 0)))
        div -= 1.0;
    if (div) {
        floordiv = floor(div);
        if (div - floordiv > 0.5)
            floordiv += 1.0;
    } else
        floordiv = copysign(0.0, vx / wx);
    return floordiv;
}
static inline float pj_fmodf(float vx, float wx)
{
    float mod = fmodf(vx, wx);
    if (mod) {
        if ((wx < 0) != (mod < 0))
            mod += wx;
    } else
        mod = copysignf(0.0f, wx);
    return mod;
}
static inline float pj_ffloordivf(float vx, float wx)
{
    float mod = fmodf(vx, wx), div = (vx - mod) / wx, floordiv;
    if (mod && ((wx < 0) != (mod < 0)))
        div -= 1.0f;
    if (div) {
        floordiv = floorf(div);
        if (div - floordiv > 0.5f)
            floordiv += 1.0f;
    } else
        floordiv = copysignf(0.0f, vx / wx);
    return floordiv;
}
static inline int64_t pj_ifloordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q -= 1;
    return q;
}
static inline int64_t pj_imod(int64_t a, int64_t b)
{
    int64_t m = a % b;
    if (m != 0 && ((m < 0) != (b < 0)))
        m += b;
    return m;
}
/* x + c in [0, n) for a length n >= 0 (bounds.py's checks at a versioned loop's entry):
   a sum past int64 is out of it; one unsigned comparison, c = 0 folding the overflow test
   away (a 128-bit sum cost four instructions per comparison at each inner loop's entry) */
static inline int pj_in_bounds(int64_t x, int64_t c, int64_t n)
{
    int64_t v;
    return !__builtin_add_overflow(x, c, &v) && (uint64_t)v < (uint64_t)n;
}
/* every element the range iterator (cur, stop, step) has left, plus c, in [0, n); 0 when
   its span overflows (the loop then runs checked). Step 1 and -1 need no division. */
static inline int pj_range_in_bounds(int64_t cur, int64_t stop, int64_t step, int64_t c,
                                     int64_t n)
{
    int64_t last, span;
    if (step > 0 ? cur >= stop : cur <= stop)
        return 1;
    if (step == 1)
        last = stop - 1;
    else if (step == -1)
        last = stop + 1;
    else if (__builtin_sub_overflow(stop, cur, &span))
        return 0;
    else
        last = cur + (span - (step > 0 ? 1 : -1)) / step * step;
    return pj_in_bounds(cur, c, n) && pj_in_bounds(last, c, n);
}
/* arrays a and b (of the kernel's arguments) span bytes apart: neither can see the other's
   stores (bounds.py's unit-stride copies); an array without elements spans none */
static inline int pj_disjoint(PyObject *a, PyObject *b)
{
    char *lo[2], *hi[2];
    PyArrayObject *x[2] = {(PyArrayObject *)a, (PyArrayObject *)b};
    int k, j;
    for (k = 0; k < 2; k++) {
        lo[k] = hi[k] = PyArray_BYTES(x[k]);
        for (j = 0; j < PyArray_NDIM(x[k]); j++) {
            npy_intp n = PyArray_DIM(x[k], j), s = PyArray_STRIDE(x[k], j);
            if (n == 0)
                return 1;
            if (s < 0)
                lo[k] += s * (n - 1);
            else
                hi[k] += s * (n - 1);
        }
        hi[k] += PyArray_ITEMSIZE(x[k]);
    }
    return hi[0] <= lo[1] || hi[1] <= lo[0];
}
/* pow(v, w) for w == 2 (hidden from gcc), as CPython's float ** and NumPy's scalar math
   compute it: glibc's pow, within 0.54 ulp (powf: 0.82), is not always v*v. Where the
   exact square (v*v plus its fma error; for floats, the square in double) is within 0.45
   ulp of v*v (powf: 0.15), and v*v is not a power of two (whose lower neighbour is half an
   ulp away), every other value is more than the bound away from it: pow returns v*v
   (pj_square_ok, branch-free: vectorize.py's SIMD passes take v*v in every lane and
   compute the lanes it fails again by pj_square). Elsewhere (near the midpoint between two
   values, or out of the normal range) pow is called: for random values, 1 in 10 (glibc
   2.36's pow differed from v*v only beyond 0.48 ulp, in 400k values). */
static inline int pj_square_ok(double v, double r)
{
    double e = fma(v, v, -r), u;
    uint64_t bits, ub;
    memcpy(&bits, &r, sizeof bits);
    ub = (bits & 0x7ff0000000000000ULL) - (52ULL << 52);        /* ulp of r */
    memcpy(&u, &ub, sizeof u);
    return (r > 0x1p-960) & (r < 0x1p1000) & (fabs(e) <= 0.45 * u)
           & ((bits & 0xfffffffffffffULL) != 0);
}
static inline double pj_square(double v, double w)
{
    double r = v * v;
    return pj_square_ok(v, r) ? r : pow(v, w);
}
static inline float pj_squaref(float v, float w)
{
    double d = (double)v * v, u;
    float r = (float)d;
    uint64_t bits;
    uint32_t rb;
    memcpy(&bits, &d, sizeof bits);
    memcpy(&rb, &r, sizeof rb);
    bits = (bits & 0x7ff0000000000000ULL) - (23ULL << 52);      /* ulp of d in float */
    memcpy(&u, &bits, sizeof u);
    if (r > 0x1p-100f && r < 0x1p100f && fabs(d - (double)r) <= 0.15 * u && (rb & 0x7fffffU))
        return r;
    return powf(v, w);
}
/* a ** b for 0 <= b; 0 on overflow (the caller bails) */
static inline int pj_ipow(int64_t a, int64_t b, int64_t *out)
{
    int64_t r = 1;
    while (b > 0) {
        if (b & 1) {
            if (__builtin_mul_overflow(r, a, &r))
                return 0;
        }
        b >>= 1;
        if (b && __builtin_mul_overflow(a, a, &a))
            return 0;
    }
    *out = r;
    return 1;
}
"""


def _threaded(blocks: list, keep=()) -> dict:
    """Block id -> where a jump to it really goes, past blocks that only jump on (the IR of
    3.12 and 3.13 has one more for END_FOR than 3.11's), except those in `keep`."""
    by_id = {b.id: b for b in blocks}
    out = {}
    for b in blocks:
        k, seen = b.id, set()
        while not by_id[k].ops and by_id[k].term[0] == "jump" and k not in seen \
                and k not in keep:
            seen.add(k)
            k = by_id[k].term[1]
        if k != b.id:
            out[b.id] = k
    return out


def _layout(blocks: list, keep=()) -> list:
    """The blocks in the C text: reachable ones (jump-only blocks threaded through) in
    reverse postorder, so the code gcc lays out is the same whatever order capture numbered
    the blocks in on each Python version (their order alone moved a branchy nest's time by
    16% between 3.11 and 3.12), and every block follows its forward predecessors."""
    by_id = {b.id: b for b in blocks}
    target = _threaded(blocks, keep)
    to = lambda k: target.get(k, k)                                 # noqa: E731
    # the fallbacks of select blocks (ifconvert.py: the original branches, run only when a
    # check fails) and what only they reach come after the rest
    hot = {k: Block(k, b.ops, ("jump", b.term[1])) if b.term[0] == "select" else b
           for k, b in by_id.items()}
    order = reverse_postorder(hot, 0, to)
    placed, j = set(order), 0
    while j < len(order):
        b = by_id[order[j]]
        if b.term[0] == "select":
            rest = [k for k in reverse_postorder(hot, b.term[2], to) if k not in placed]
            order += rest
            placed.update(rest)
        j += 1
    return [by_id[k] for k in order]


def _loop_bodies(blocks: list, where: dict, target: dict) -> dict:
    """{head: its body's block ids} of every loop (a back edge: an edge to a block no later
    in `where`, a reverse postorder)."""
    to = lambda k: target.get(k, k)                                 # noqa: E731
    preds = {}
    for b in blocks:
        for s in successors(b.term):
            preds.setdefault(to(s), []).append(b.id)
    back = {(b.id, to(s)) for b in blocks for s in successors(b.term)
            if where[to(s)] <= where[b.id]}
    heads = {}
    for head in {h for _, h in back}:
        body, todo = {head}, [p for p, h in back if h == head]
        while todo:
            k = todo.pop()
            if k not in body:
                body.add(k)
                todo += preds.get(k, [])
        heads[head] = body
    return heads


def _innermost_heads(bodies: dict) -> dict:
    """The loops of `bodies` (_loop_bodies) with no loop inside."""
    return {head: body for head, body in bodies.items()
            if not any(h in body and h != head for h in bodies)}


def _declaration_order(nest: Nest, types: dict, blocks: list) -> list:
    """The variables in the order the laid-out `blocks` first use them (gcc numbers its
    declarations in order: sorted by name, the declarations of one nest came in another order
    on each Python version, whose capture numbers temporaries differently)."""
    first = {}
    for v in nest.inputs:
        first.setdefault(v, len(first))
    for b in blocks:
        for op in b.ops:
            for x in (*op.args, op.dst):
                if isinstance(x, str) and x in types:
                    first.setdefault(x, len(first))
        for x in b.term[1:]:
            if isinstance(x, str) and x in types:
                first.setdefault(x, len(first))
    rest = [v for v in sorted(types) if v not in first]
    return sorted(first, key=first.get) + rest


def ctype(t) -> str:
    return _C[str(T.dtype_of(t))][0]


def _range(dtype) -> tuple:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def not_finite(r: str) -> str:
    """C condition: float variable r is inf or nan, as `r - r` is nan then and 0 otherwise
    (the toolchain never lets gcc assume finite math). One subtraction against a zero
    register, where isfinite(r) masks r's sign off with one constant and compares it with
    another: iir_filter's recurrence, latency-bound, ran 8% faster so (434 -> 401 us a
    call, 0.90x -> 0.98x numba's). inf - inf sets FE_INVALID, which isfinite did not: after
    a failed check the kernel hands over, except on a side of an if-converted branch that
    did not run (ifconvert.py), where a later read of the flags for a NumPy call
    (calls.py) may then hand over too: Python computes the same from there."""
    return f"__builtin_expect(!({r} - {r} == 0), 0)"


class NestKernel:
    """Renders one nest as a module function for render.module_source (which wants a `grp`
    with an id and no NumPy-loop nodes, and `function()` defining pj_body)."""

    def __init__(self, nest: Nest, gid: int = 0):
        self.nest = nest
        self.grp = _Group(gid)
        # the blocks the C runs: loops versioned for their bounds checks, common
        # subexpressions copied, float checks later ones cover dropped, then small branches
        # made selects (whose sides' variables join the nest's in vtypes); a hand-over in a
        # copied block resumes at its origin
        blocks, self.origin = bounds.version(nest)
        # views of one geometry at every iteration: made once, before the first block
        blocks, self.hoisted = hoist.hoist(blocks)
        self.vtypes = dict(nest.types)
        blocks = cse.eliminate(blocks, nest.types)
        blocks = forward.forward(blocks, self.vtypes, nest.arrays, nest.known)
        blocks = float_checks.defer(blocks, nest.types, self.origin, nest.live_in())
        blocks = ifconvert.convert(blocks, self.vtypes)
        # innermost loops whose iterations touch disjoint elements: invariant loads read
        # before them, their bodies run as SIMD passes (vectorize.py)
        self.blocks, self.vectors = vectorize.plan(blocks, self.vtypes, self.origin,
                                                   nest.live_in())
        # integer checks that cannot fail are left out (ranges.py)
        self.ranges = ranges.Ranges(self.blocks + [Block(-1, self.hoisted)], self.vtypes,
                                    nest.arrays, nest.inputs,
                                    nest.known, nest.live_in()[0] - set(nest.inputs))
        # then an accumulator's float check moves to its loop's exit (restored variables
        # hold values they held before: the ranges stay true)
        self.blocks, self.restarts = exit_checks.defer(
            self.blocks, self.vtypes, self.origin, nest.live_in(), self.ranges.advances)
        # NumPy loops the kernel calls: slots 0.. of its module's table (it is alone there)
        self.ufunc_slots = calls.slots(nest.blocks)
        self.numpy_loop_count = len(self.ufunc_slots)
        # while a block of such a loop is lowered: its NumPy calls leave the flags unread
        self.flags_at_exit = False
        # such loops whose calls run over chunks of iterations (lanes.py); while one's body
        # is lowered, lane = [its head, the number of calls lowered so far]
        self.lanes = lanes.plan(self.blocks, self.restarts, self.origin, nest.live_in())
        self.blocks_by_id = {b.id: b for b in self.blocks}
        self.lane = None
        # innermost loops' row pointers (rows.py); `at` is (block, op index) while
        # block_ops lowers that op
        in_lanes = {x for ln in self.lanes.values() for x in ln.order}
        self.rows = rows.Rows(self.blocks, _threaded(self.blocks, self.vectors), nest.arrays,
                              self.vtypes, in_lanes | set(self.vectors))
        self.at = None

    # -- values --------------------------------------------------------------------------
    def val(self, x) -> str:
        if isinstance(x, Const):
            if T.is_np(x.type) and x.type.kind == "f":
                # a NumPy float (an inlined callee's default): its value, of its own C type
                return f"(({ctype(x.type)}){self.val(Const(float(x.value), T.FLOAT))})"
            if x.type is T.FLOAT:
                if np.isnan(x.value):       # its sign and payload kept: C's NAN has neither
                    bits = struct.unpack("<Q", struct.pack("<d", x.value))[0]
                    return f"pj_f64_bits({bits:#x}ULL)"
                return f"({float(x.value).hex()})" if np.isfinite(x.value) else \
                    ("(INFINITY)" if x.value > 0 else "(-INFINITY)")
            if x.type is T.BOOL:
                return str(int(x.value))
            return f"INT64_C({int(x.value)})" if x.value != -2**63 else "INT64_MIN"
        return "v_" + x

    def types(self, x) -> tuple:
        return (x.type,) if isinstance(x, Const) else self.vtypes[x]

    def ival(self, x) -> str:
        """x as an int64 for the range checks of its int members: 0 (in every range) while a
        variable whose C value is a double holds its float member, which is no int64."""
        v = self.val(x)
        member = None if isinstance(x, Const) else T.int_in_double(self.vtypes[x])
        if member is None:
            return f"(int64_t){v}"
        return f"({self.is_np_cond(x, member)} ? (int64_t){v} : INT64_C(0))"

    def is_np_cond(self, x, member) -> str:
        """C condition: operand x currently holds a value of static type `member` (the tag
        g_x of a variable of two types is the index of its current one in the sorted pair:
        a Python scalar's 0, a NumPy scalar's 1, np.float32's 0 beside np.float64)."""
        vt = self.types(x)
        if member not in vt:
            return "0"
        if len(vt) == 1:
            return "1"
        return f"(g_{x} == {vt.index(member)})"

    def set_tag(self, dst, results: dict, operands: tuple) -> list:
        vt = self.vtypes[dst]
        if len(vt) == 1:
            return []
        terms = []
        for combo, r in results.items():
            if vt.index(r):
                conds = [self.is_np_cond(x, m) for x, m in zip(operands, combo)]
                terms.append(" && ".join(conds) or "1")
        return [f"g_{dst} = {' || '.join(f'({t})' for t in terms) or '0'};"]

    def tag_of(self, dst, src) -> str:
        """C expression: dst's tag for the value src holds."""
        vt, into = self.types(src), self.vtypes[dst]
        if len(vt) == 1:
            return str(into.index(vt[0]))
        if vt == into:
            return f"g_{src}"
        return f"(g_{src} ? {into.index(vt[1])} : {into.index(vt[0])})"

    def copy_tag(self, dst, src) -> list:
        if len(self.vtypes[dst]) == 1:
            return []
        return [f"g_{dst} = {self.tag_of(dst, src)};"]

    def select_tag(self, dst, args) -> list:
        if len(self.vtypes[dst]) == 1:
            return []
        tags = [self.tag_of(dst, x) for x in args[1:]]
        return [f"g_{dst} = {self.val(args[0])} ? {tags[0]} : {tags[1]};"]

    # -- ops -----------------------------------------------------------------------------
    def op(self, op, bid: int, bail: str | None = None) -> list:
        """op's C; a failed check hands over at block `bid`, or runs `bail` when given."""
        k = op.kind
        bail = bail or f"PJ_BAIL({bid});"
        if op.array is not None:
            return slices.lower_c(self, op, bail)
        a = [self.val(x) for x in op.args]
        d = f"v_{op.dst}" if op.dst else None
        if k == "copy":
            return [f"{d} = {a[0]};"] + self.copy_tag(op.dst, op.args[0])
        if k == "raise":            # Python raises it (raises.py)
            return [bail]
        if k == "append":
            return appends.lower_c(self, op, bail)
        if k == "finite":           # exit_checks.py
            flags = " || pj_exit_flags()" if op.op == "flags" else ""
            return [f"if (!isfinite({a[0]}){flags}) {self.restart(op)}"]
        if k == "select":
            return [f"{d} = {a[0]} ? {a[1]} : {a[2]};"] + self.select_tag(op.dst, op.args)
        if k == "shape":
            return [f"{d} = n_{op.args[0]}_{op.args[1].value};"]
        if k in ("load", "store"):
            arr = op.args[0]
            dtype, ndim = self.nest.arrays[arr]
            idx = op.args[1:1 + ndim]
            out = ["{"]
            offs = []
            row = self.rows.at.get(self.at)
            for j, x in enumerate(idx):
                if row is not None and j < ndim - 1:
                    continue
                out.append(f"    int64_t i{j} = (int64_t){self.val(x)};")
                if op.checked:
                    out += [f"    if (i{j} < 0) i{j} += n_{arr}_{j};",
                            f"    if ((uint64_t)i{j} >= (uint64_t)n_{arr}_{j}) {bail}"]
                if op.unit and j == ndim - 1:
                    # a versioned loop's unit-stride copy: its entry checked this axis'
                    # stride is the itemsize (bounds.py), a constant gcc folds into the address
                    offs.append(f"i{j} * (npy_intp)sizeof({ctype(dtype)})")
                else:
                    offs.append(f"i{j} * s_{arr}_{j}")
            base = row or f"d_{arr}"
            ptr = f"(({ctype(dtype)} *)({base} + {' + '.join(offs) or '0'}))"
            fw = op.reuse if op.reuse and op.reuse[0] == "fw" else None
            if k == "load":
                out.append(f"    {d} = *{ptr};")
                if fw:          # the previous iteration's store (forward.py)
                    return [f"if (v_{fw[2]}) {d} = v_{fw[1]}; else"] + out + ["}"]
            else:
                out += self.store_value(op.args[-1], dtype, bail)
                out.append(f"    *{ptr} = sv;")
                if fw:
                    out.append(f"    v_{fw[1]} = sv; v_{fw[2]} = 1;")
            return out + ["}"]
        if k == "range":
            it = op.dst
            if len(a) == 1:
                a = ["0", a[0], "1"]
            elif len(a) == 2:
                a = a + ["1"]
            zero = [] if self.ranges.excludes(f"{it}_step", 0) else \
                [f"if ((int64_t){a[2]} == 0) {bail}"]
            return zero + [f"v_{it}_cur = (int64_t){a[0]}; v_{it}_stop = (int64_t){a[1]}; "
                           f"v_{it}_step = (int64_t){a[2]};"]
        if k in ("binop", "unop", "cmp") or k == "call":
            return self.compute(op, a, d, bail)
        raise AssertionError(k)

    def block_end(self, it) -> str:
        """C: the end of the next block of range iterator `it`'s loop (run in blocks)."""
        if self.ranges.of(f"{it}_step") == (1, 1):
            return f"pj_lim_{it} = PJ_BLOCK_END_1(v_{it}_cur, v_{it}_stop);"
        return f"pj_lim_{it} = pj_block_end(v_{it}_cur, v_{it}_stop, v_{it}_step);"

    def block_ops(self, b, target) -> list:
        """The C of block b's ops (not its terminator)."""
        resume = self.origin.get(b.id, b.id)
        # the ops of a select block (both sides of a branch) go to the original branch
        # when a check fails: nothing is written before (ifconvert.py)
        spec = f"goto b{target.get(b.term[2], b.term[2])};" if b.term[0] == "select" \
            else None
        if b.id in self.restarts:      # a loop whose sum exit_checks.py checks at its exit
            spec = self.restart(self.restarts[b.id])
        self.flags_at_exit = b.id in self.restarts and self.restarts[b.id].op == "flags"
        out = []
        for k, op in enumerate(b.ops):
            self.at = (b.id, k)
            text = self.op(op, resume if op.resume is None else op.resume, spec)
            self.at = None
            if any("PJ_BAIL" in s for s in text) and (k or not op.bails):
                # a hand-over resumes at the block's start: only its first op may bail
                raise AssertionError(f"op {op} bails in the middle of block {b.id}")
            out += ["    " + s for s in text]
        return out

    def lane_loop(self, head, target) -> list:
        """The C of a loop lanes.py runs over chunks of iterations: take up to LANES of the
        iterator's elements, run the body over them once per call of a NumPy loop (phase q
        stops each lane at the q-th, then one call computes it for every lane) and once more
        to the end."""
        h, t = head.id, head.term
        ln = self.lanes[h]
        it = "v_" + t[1]
        restart = self.restart(self.restarts[ln.order[0]])
        out = [f"    pj_nb{h} = 0;",
               f"    while (pj_nb{h} < {lanes.LANES} && ({self.foriter_test(t[1])})) {{",
               f"        pj_it{h}[pj_nb{h}++] = {it}_cur; {it}_cur += {it}_step;", "    }",
               f"    if (pj_nb{h} == 0) goto b{target.get(t[4], t[4])};",
               f"    for (pj_ph{h} = 0; pj_ph{h} <= {len(ln.stops)}; pj_ph{h}++) {{",
               f"    for (pj_ln{h} = 0; pj_ln{h} < pj_nb{h}; pj_ln{h}++) {{",
               f"    v_{t[2]} = pj_it{h}[pj_ln{h}];"]
        self.lane = [h, 0]
        for x in ln.order:
            out.append(f"b{x}: ;")
            out += self.block_ops(self.blocks_by_id[x], target)
        if self.lane[1] != len(ln.sites):       # calls.lower numbered the calls as plan did
            raise AssertionError(f"loop {h}: {self.lane[1]} lane calls, {len(ln.sites)} planned")
        self.lane = None
        out += [f"    pj_lane_end{h}: ;", "    }", f"    switch (pj_ph{h}) {{"]
        for q, j in enumerate(ln.stops):
            dom = ln.sites[j]
            (tin,), tout = calls._sig_dtypes(dom[2])
            li, lo = f"pj_li{h}_{j}", f"pj_lo{h}_{j}"
            slot = self.ufunc_slots.index(dom[1:])
            out += [f"    case {q}:", "        {",
                    f"            char *ud[2] = {{(char *){li}, (char *){lo}}};",
                    f"            npy_intp us[2] = {{sizeof({ctype(tin)}), "
                    f"sizeof({ctype(tout)})}};",
                    f"            if (pj_nest_ufunc_n({slot}, ud, us, pj_nb{h}) < 0) {restart}",
                    "        }", "        break;"]
        out += ["    }", "    }", f"    goto b{h};"]
        return out

    def restart(self, finite) -> str:
        """C: the hand-over of a loop exit_checks.py checks at its exit, from its start (the
        variables it assigned restored)."""
        restore = []
        for v, saved in zip(finite.args[1::2], finite.args[2::2]):
            restore += [f"v_{v} = v_{saved};"] + self.copy_tag(v, saved)
        return f"{{ {' '.join(restore)} PJ_BAIL({finite.resume}); }}"

    def foriter_test(self, name, stop=None) -> str:
        """C condition: range iterator `name` has an element left before `stop` (its own
        stop by default; one comparison where its step's sign is known)."""
        it = "v_" + name
        stop = stop or f"{it}_stop"
        step = self.ranges.of(f"{name}_step")
        if step is not None and (step[0] > 0 or step[1] < 0):
            return f"{it}_cur {'<' if step[0] > 0 else '>'} {stop}"
        return f"{it}_step > 0 ? {it}_cur < {stop} : {it}_cur > {stop}"

    def bound_check(self, base, c, arr, axis) -> str:
        """C condition: base + c is in [0, n) on axis of arr (for every element a range
        iterator has left); for base ("unit",): arr's last axis has a stride of its
        itemsize."""
        if base[0] in ("advance", "apart"):
            return vectorize.check_c(self, base)
        if base[0] == "disjoint":
            return f"dj_{base[1]}__{base[2]}"
        if base == ("unit",):
            return f"s_{arr}_{axis} == (npy_intp)sizeof({ctype(self.nest.arrays[arr][0])})"
        n = f"n_{arr}_{axis}"
        if base[0] == "iter":
            it = "v_" + base[1]
            return f"pj_range_in_bounds({it}_cur, {it}_stop, {it}_step, INT64_C({c}), {n})"
        x = "INT64_C(0)" if base[0] == "const" else f"(int64_t)v_{base[1]}"
        return f"pj_in_bounds({x}, INT64_C({c}), {n})"

    def store_value(self, x, dtype, bail) -> list:
        ct = ctype(dtype)
        v = self.val(x)
        if dtype.kind in "iu" and dtype != T.I64:
            lo, hi = _range(dtype)
            if self.ranges.within(x, lo, hi):
                return [f"    {ct} sv = ({ct}){v};"]
            iv = self.ival(x)
            return [f"    if ({iv} < {lo}LL || {iv} > {hi}LL) {bail}",
                    f"    {ct} sv = ({ct}){v};"]
        if dtype == T.F32 and any(T.kind(m) == "f" and T.dtype_of(m) == T.F64
                                  for m in self.types(x)):
            return [f"    {ct} sv = ({ct}){v};",
                    f"    if (isinf(sv) && !isinf({v})) {bail}"]
        if dtype == T.F32 and any(T.kind(m) == "i" for m in self.types(x)) \
                and not self.ranges.within(x, -2**24, 2**24):
            return [f"    if (PJ_I24({self.ival(x)})) {bail}", f"    {ct} sv = ({ct}){v};"]
        return [f"    {ct} sv = ({ct}){v};"]

    def compute(self, op, a, d, bail) -> list:
        dom = op.domain
        kind = dom[0]
        if kind in calls.DOMAINS:       # NumPy's ufuncs and scalar types, inlined functions
            return calls.lower(self, op, a, d, bail)
        ops = op.args
        out = []
        tag = self.set_tag(op.dst, op.results, ops) if op.results else \
            ([] if len(self.vtypes[op.dst]) == 1 else None)
        if op.kind == "call" and op.op in ("min", "max"):
            x, y = ops
            rel = "<" if op.op == "min" else ">"
            cond = self.compare_expr(rel, y, x, kind, dom, bail, out)
            out.append(f"if ({cond}) {{ {d} = {a[1]}; {' '.join(self.copy_tag(op.dst, y))} }}"
                       f" else {{ {d} = {a[0]}; {' '.join(self.copy_tag(op.dst, x))} }}")
            if kind == "ci":
                # in a general register: gcc's scalar-to-vector pass (-mstv) otherwise makes
                # an int64 max a vpmaxsq, whose moves between register files cost 6 cycles
                # on a loop-carried chain (lcs_table's dp[i, j] from dp[i, j - 1])
                out.append(f'__asm__("" : "+r"({d}));')
            return out
        if tag is None:
            raise AssertionError("a union result without its rule")
        if op.kind == "cmp":
            cond = self.compare_expr(_CMP[op.op], ops[0], ops[1], kind, dom, bail, out)
            out.append(f"{d} = {cond};")
            return out + tag
        name = op.op
        if kind == "b":
            expr = {"and": "&", "or": "|", "xor": "^"}
            if name == "invert":
                return out + [f"{d} = !{a[0]};"] + tag
            return out + [f"{d} = {a[0]} {expr[name]} {a[1]};"] + tag
        if kind == "not":
            return [f"{d} = !({a[0]} != 0);"] + tag
        if kind == "truth":
            return [f"{d} = ({a[0]} != 0);"] + tag
        if kind == "toi":
            return [f"{d} = (int64_t){a[0]};"] + tag
        if kind == "tof":
            x = f"{dom[1]}((double){a[0]})" if len(dom) > 1 else f"(double){a[0]}"
            # in (-2**63, 2**63), where the conversion is exact; not NaN (one comparison:
            # the double nearest -2**63 - 1 is -2**63)
            return [f"if (!(fabs({x}) < 9223372036854775808.0)) {bail}",
                    f"{d} = (int64_t){x};"] + tag
        if kind == "math" and op.op == "fabs":
            # math_1 raises only for a finite argument whose result is not: fabs never does
            # (and Op.bails says so)
            return [f"{d} = fabs((double){a[0]});"] + tag
        if kind == "math":
            f = op.op
            return [f"{{ double x = (double){a[0]}, r = {f}(x);",
                    f"  if (!isfinite(x) || !isfinite(r)) {bail}",
                    f"  {d} = r; }}"] + tag
        if kind == "idiv":
            fails = [c for c, ok in (("y == 0", self.ranges.excludes(ops[1], 0)),
                                     ("PJ_I53(x)", self.ranges.within(ops[0], -2**53, 2**53)),
                                     ("PJ_I53(y)", self.ranges.within(ops[1], -2**53, 2**53)))
                     if not ok]
            check = [f"  if ({' || '.join(fails)}) {bail}"] if fails else []
            return [f"{{ int64_t x = (int64_t){a[0]}, y = (int64_t){a[1]};", *check,
                    f"  {d} = (double)x / (double)y; }}"] + tag
        if kind == "f":
            ct = "double" if dom[1] == T.F64 else "float"
            suffix = "" if ct == "double" else "f"
            dt = T.F64 if ct == "double" else T.F32
            r = render.reciprocal(ops[1].value, dt) if name == "truediv" and \
                isinstance(ops[1], Const) else None
            if r is not None:
                name, ops = "mul", (ops[0], Const(r, T.FLOAT))
            if name == "mul" and render.twice(*(x.value if isinstance(x, Const) else x
                                                for x in ops)) is not None:
                name = "add"
                ops = (ops[1], ops[1]) if isinstance(ops[0], Const) else (ops[0], ops[0])
            xs = []
            for j, x in enumerate(ops):
                if ct == "float" and any(T.kind(m) == "i" and not T.is_np(m)
                                         for m in self.types(x)) \
                        and not self.ranges.within(x, -2**24, 2**24):
                    out.append(f"if (PJ_I24({self.ival(x)})) {bail}")
                # a constant gcc would fold, moving a NaN (x * -1.0 into -x, where CPython
                # and NumPy multiply): render.hides; and an exponent: gcc makes pow(x, 2.0)
                # x*x and pow(x, -1.0) 1/x, where CPython and NumPy's scalar math call pow,
                # which is not correctly rounded (within 0.52 ulp)
                xs.append(render.c_hidden(x.value, dt) if isinstance(x, Const) and
                          op.kind == "binop" and (render.hides(x.value, name) or
                                                  name == "pow" and j == 1)
                          else f"(({ct}){self.val(x)})")
            if op.kind == "call":          # abs, float()
                expr = f"fabs{suffix}({xs[0]})" if name == "abs" else xs[0]
                return out + [f"{d} = {expr};"] + tag
            if op.kind == "unop":
                return out + [f"{d} = {render.c_neg(xs[0], dt) if name == 'neg' else xs[0]};"] \
                    + tag
            x, y = xs
            if name in ("add", "sub", "mul") and ("py" in dom or not op.checked):
                # Python floats: an overflow is inf and an invalid op nan, silently; a NumPy
                # float whose non-finite result a later check catches (float_checks.py)
                sym = {"add": "+", "sub": "-", "mul": "*"}[name]
                return out + [f"{d} = {x} {sym} {y};"] + tag
            if name == "truediv" and "py" in dom:
                # a Python float raises ZeroDivisionError whether or not a check follows
                return out + [f"{{ {ct} w = {y}; if (w == 0) {bail}",
                              f"  {d} = {x} / w; }}"] + tag
            if name == "truediv" and not op.checked:
                # a zero divisor's quotient is not finite: the later check catches it
                return out + [f"{d} = {x} / {y};"] + tag
            if name in ("add", "sub", "mul"):
                sym = {"add": "+", "sub": "-", "mul": "*"}[name]
                return out + [f"{{ {ct} r = {x} {sym} {y};", f"  if ({not_finite('r')}) {bail}",
                              f"  {d} = r; }}"] + tag
            if name == "truediv":
                return out + [f"{{ {ct} w = {y}; if (w == 0) {bail}",
                              f"  {ct} r = {x} / w; if ({not_finite('r')}) {bail}",
                              f"  {d} = r; }}"] + tag
            if name in ("floordiv", "mod"):
                fn = {"floordiv": "pj_ffloordiv", "mod": "pj_fmod"}[name] + suffix
                return out + [f"{{ {ct} v = {x}, w = {y};",
                              f"  if (w == 0 || !isfinite(v) || !isfinite(w)) {bail}",
                              f"  {d} = {fn}(v, w); }}"] + tag
            if name == "pow":
                # a negative base with an integral exponent (x ** 2, L[j, k] ** 3): CPython
                # and NumPy call pow as C's does (CPython: of |x|, negated for an odd
                # exponent: what C's pow returns); a zero base hands over (r == 0 below)
                integral = isinstance(ops[1], Const) and float(ops[1].value).is_integer()
                base = "" if integral else "!(v > 0) || "
                square = isinstance(ops[1], Const) and float(ops[1].value) == 2.0
                return out + [f"{{ {ct} v = {x}, w = {y};",
                              f"  if ({base}!isfinite(v) || !isfinite(w)) {bail}",
                              f"  {ct} r = {'pj_square' if square else 'pow'}{suffix}(v, w);",
                              f"  if (!isfinite(r) || r == 0) {bail}",
                              f"  {d} = r; }}"] + tag
            raise AssertionError(name)
        if kind in ("i64", "int"):
            return out + self.int_op(op, name, a, d, dom, bail) + tag
        raise AssertionError(kind)

    def int_op(self, op, name, a, d, dom, bail) -> list:
        """Integer arithmetic in int64: Python ints exactly (bailing past int64), NumPy
        integers of a narrower dtype checked against its range (NumPy would wrap and warn,
        or raise for a Python int it cannot hold)."""
        out = ["{"]
        xs = [f"x{j}" for j in range(len(a))]
        for j, v in enumerate(a):
            out.append(f"    int64_t x{j} = (int64_t){v};")
        lo_hi = None
        rg = self.ranges
        if dom[0] == "int":
            lo_hi = _range(dom[1])
            for j, x in enumerate(op.args):
                if any(not T.is_np(m) for m in self.types(x)) and not rg.within(x, *lo_hi):
                    out.append(f"    if (x{j} < {lo_hi[0]}LL || x{j} > {lo_hi[1]}LL) {bail}")
        out.append("    int64_t r;")
        if op.kind == "call":           # abs
            if not rg.excludes(op.args[0], ranges.INT64[0]):
                out.append(f"    if (x0 == INT64_MIN) {bail}")
            out.append("    r = x0 < 0 ? -x0 : x0;")
        elif op.kind == "unop":
            if name == "neg":
                if not rg.excludes(op.args[0], ranges.INT64[0]):
                    out.append(f"    if (x0 == INT64_MIN) {bail}")
                out.append("    r = -x0;")
            elif name == "pos":
                out.append("    r = x0;")
            else:
                out.append("    r = ~x0;")
                if dom[0] == "int" and dom[1].kind == "u":
                    out.append(f"    r &= {lo_hi[1]}LL;")
        else:
            x, y = xs
            if name in ("add", "sub", "mul") and rg.fits(op, *ranges.INT64):
                out.append(f"    r = {x} {({'add': '+', 'sub': '-', 'mul': '*'})[name]} {y};")
            elif name in ("add", "sub", "mul"):
                out.append(f"    if (__builtin_{name}_overflow({x}, {y}, &r)) {bail}")
            elif name in ("floordiv", "mod"):
                if not rg.divides(op):
                    out.append(f"    if ({y} == 0 || ({x} == INT64_MIN && {y} == -1)) {bail}")
                fn = "pj_ifloordiv" if name == "floordiv" else "pj_imod"
                out.append(f"    r = {fn}({x}, {y});")
            elif name == "pow":
                out.append(f"    if ({y} < 0 || !pj_ipow({x}, {y}, &r)) {bail}")
            elif name == "lshift":
                if not rg.within(op.args[1], 0, 62):
                    out.append(f"    if ({y} < 0 || {y} > 62) {bail}")
                out.append(f"    r = (int64_t)((uint64_t){x} << {y});")
                if not rg.fits(op, *ranges.INT64):
                    out.append(f"    if ((r >> {y}) != {x}) {bail}")
            elif name == "rshift":
                if not rg.within(op.args[1], 0, 63):
                    out.append(f"    if ({y} < 0 || {y} > 63) {bail}")
                out.append(f"    r = {x} >> {y};")
            else:
                out.append(f"    r = {x} {({'and': '&', 'or': '|', 'xor': '^'})[name]} {y};")
        if lo_hi is not None and not rg.fits(op, *lo_hi):
            out.append(f"    if (r < {lo_hi[0]}LL || r > {lo_hi[1]}LL) {bail}")
        out += [f"    {d} = r;", "}"]
        return out

    def compare_expr(self, rel, x, y, kind, dom, bail, out) -> str:
        a, b = self.val(x), self.val(y)
        if kind == "ci":
            return f"((int64_t){a} {rel} (int64_t){b})"
        ct = "double" if dom[1] == T.F64 else "float"
        check, bound = ("PJ_I53", 2**53) if ct == "double" else ("PJ_I24", 2**24)
        for t, z in ((self.types(x), x), (self.types(y), y)):
            if any(T.kind(m) == "i" for m in t) and not self.ranges.within(z, -bound, bound):
                out.append(f"if ({check}({self.ival(z)})) {bail}")
        return f"(({ct}){a} {rel} ({ct}){b})"

    # -- boxing ----------------------------------------------------------------------------
    def box(self, var, dst: str) -> list:
        vt = self.vtypes[var]
        if len(vt) == 1:
            return self.box_as(vt[0], f"v_{var}", dst)
        return ([f"if (g_{var}) {{"] + ["    " + s for s in self.box_as(vt[1], f"v_{var}", dst)]
                + ["} else {"] + ["    " + s for s in self.box_as(vt[0], f"v_{var}", dst)]
                + ["}"])

    @staticmethod
    def box_as(t, v, dst) -> list:
        if t is T.INT:
            return [f"{dst} = PyLong_FromLongLong((long long){v});"]
        if t is T.FLOAT:
            return [f"{dst} = PyFloat_FromDouble({v});"]
        if t is T.BOOL:
            return [f"{dst} = PyBool_FromLong({v});"]
        cls = _C[str(t)][1]
        if t == T.NPBOOL:
            return [f"{dst} = Py_NewRef(PyArrayScalar_FromLong({v}));"]
        # NumPy makes the scalar from the value's bytes (PyArrayScalar_New reads the type's
        # tp_alloc, which the limited C API kernels are compiled with does not show)
        ctype, npy = _C[str(t)][0], _NPY[str(t)]
        return ["{", f"    {ctype} pj_v = {v};",
                f"    PyArray_Descr *pj_d = PyArray_DescrFromType({npy});",
                f"    {dst} = pj_d == NULL ? NULL : PyArray_Scalar(&pj_v, pj_d, NULL);",
                "    Py_XDECREF(pj_d);", "}"]

    def unbox(self, var, src: str) -> list:
        vt = self.vtypes[var]
        out = []
        for m in vt:
            tag = f" g_{var} = {vt.index(m)};" if len(vt) > 1 else ""
            if m is T.INT and (T.carrier(vt) == T.F64 or var in self.nest.exact_ints):
                # exact in a double up to 2**53 (an int input too, copied into a double)
                out.append(f"if (PyLong_CheckExact({src})) {{ int ov; long long w = "
                           f"PyLong_AsLongLongAndOverflow({src}, &ov); if (ov || PJ_I53(w)) "
                           f"goto entry; v_{var} = w;{tag} }}")
            elif m is T.INT:
                out.append(f"if (PyLong_CheckExact({src})) {{ int ov; v_{var} = "
                           f"PyLong_AsLongLongAndOverflow({src}, &ov); if (ov) goto entry;{tag} }}")
            elif m is T.FLOAT and var in self.nest.narrow:
                # a float32 must hold it bit for bit (range first: no overflow or underflow
                # flag raised by the conversion)
                out.append(f"if (PyFloat_CheckExact({src})) {{ double d = PyFloat_AsDouble("
                           f"{src}), b; if (isfinite(d) && d != 0 && !(fabs(d) >= 0x1p-126 && "
                           f"fabs(d) <= 0x1.fffffep+127)) goto entry; b = (double)(float)d; if "
                           f"(memcmp(&b, &d, sizeof d)) goto entry; v_{var} = (float)d;{tag} }}")
            elif m is T.FLOAT:
                out.append(f"if (PyFloat_CheckExact({src})) {{ v_{var} = "
                           f"PyFloat_AsDouble({src});{tag} }}")
            elif m is T.BOOL:
                out.append(f"if (PyBool_Check({src})) {{ v_{var} = ({src} == Py_True);{tag} }}")
            else:
                ctype, cls = _C[str(m)]
                out.append(f"if (Py_IS_TYPE({src}, &Py{cls}ArrType_Type)) {{ {ctype} pj_s; "
                           f"PyArray_ScalarAsCtype({src}, &pj_s); v_{var} = pj_s;{tag} }}")
        return [" else ".join(out) + " else goto entry;"]

    # -- the function ------------------------------------------------------------------------
    def function(self) -> str:
        nest = self.nest
        # unroll-loops: gcc -O3 does not unroll by default; a nest's innermost loops are
        # short bodies whose compare, advance and jump per iteration then cost less
        # (forward_subst 40 -> 33 us, iir_filter 417 -> 324, csr_matvec 237 -> 202,
        # mandelbrot 727 -> 616, gauss_seidel 46 -> 40; lcs_table unchanged; its gcc
        # time grows 0-40%, paid once per kernel on disk)
        L = ["static PyObject *__attribute__((optimize(\"no-tree-vectorize\", "
             "\"unroll-loops\")))",
             "pj_body(int gk, PyObject *const *args, Py_ssize_t nargs)", "{",
             "    int blk = -1, pj_poll = PJ_POLL_EVERY, pj_poll_outer = PJ_POLL_OUTER_EVERY;",
             "    Py_ssize_t k;",
             "    PyObject *res = NULL;",
             f"    PyObject *vec[{1 + len(nest.arrays) + len(nest.variables())}];",
             "    PJ_K_INIT;"]
        for arr, (dtype, ndim) in nest.arrays.items():
            L.append(f"    {'PyObject' if (dtype, ndim) == appends.LIST else 'char'} *d_{arr};")
            for j in range(ndim):
                L.append(f"    npy_intp n_{arr}_{j}, s_{arr}_{j};")
        blocks = _layout(self.blocks, self.vectors)
        target = _threaded(self.blocks, self.vectors)
        nest_ids = {b.id for b in nest.blocks}
        fallbacks = {target.get(b.term[2], b.term[2]) for b in blocks if b.term[0] == "select"}
        in_lanes = {x for ln in self.lanes.values() for x in ln.order}
        # back edges by a reverse postorder of every edge (the layout puts select
        # fallbacks last: their jumps back into the hot path are no loops)
        where = {k: j for j, k in enumerate(reverse_postorder(
            {b.id: b for b in self.blocks}, 0, lambda k: target.get(k, k)))}
        bodies = _loop_bodies(blocks, where, target)
        innermost = _innermost_heads(bodies)
        kinds = {b.id: b.term[0] for b in blocks}
        appending = {h for h, body in innermost.items()
                     if any(op.kind == "append" for b in blocks if b.id in body for op in b.ops)}
        # an innermost for loop that does not append, in no other loop, polls between
        # blocks of its range (inside one, each entry paid the block's end: csr_matvec's
        # kernel +15% instructions; the loop around polls); not one whose head a SIMD pass
        # or lanes jump to (they enter it at b<id>, r<id> is its only entry: it sets the
        # block's end)
        iterator = lambda h: self.blocks_by_id[h].term[1]                 # noqa: E731
        blocked = {iterator(h) for h in innermost
                   if kinds[h] == "foriter" and h not in appending and
                   not any(h in body for head, body in bodies.items() if head != h)} - \
            {iterator(v.head) for v in self.vectors.values()} - \
            {iterator(h) for h in self.lanes} - \
            {b.term[1] for b in blocks if b.id in in_lanes and b.term[0] == "foriter"}
        for it in sorted(blocked):
            L.append(f"    int64_t pj_lim_{it} = 0;")
        for var in _declaration_order(nest, self.vtypes, blocks):
            carrier = T.F32 if var in nest.narrow else T.carrier(self.vtypes[var])
            L.append(f"    {ctype(carrier)} v_{var} = 0;")
            if len(self.vtypes[var]) > 1:
                L.append(f"    unsigned char g_{var} = 0;")
        for name in self.rows.names():
            L.append(f"    char *{name} = NULL;")
        for kept in sorted({op.kept for b in blocks for op in b.ops + self.hoisted if op.kept}):
            L.append(f"    char *kp_{kept} = NULL; npy_intp ks_{kept} = 0;")
        for head, ln in self.lanes.items():
            L.append(f"    int64_t pj_it{head}[{lanes.LANES}]; int pj_nb{head}, pj_ph{head}, "
                     f"pj_ln{head};")
            for j, dom in enumerate(ln.sites):
                (tin,), tout = calls._sig_dtypes(dom[2])
                L.append(f"    {ctype(tout)} pj_lo{head}_{j}[{lanes.LANES}];")
                if j in ln.stops:
                    L.append(f"    {ctype(tin)} pj_li{head}_{j}[{lanes.LANES}];")
        nin = len(nest.arrays) + len(nest.inputs)
        L.append(f"    if (nargs != {nin}) goto entry;")
        for k, (arr, (dtype, ndim)) in enumerate(nest.arrays.items()):
            if (dtype, ndim) == appends.LIST:       # borrowed: the call's argument
                L += [f"    if (!PyList_CheckExact(args[{k}])) goto entry;",
                      f"    d_{arr} = args[{k}];"]
                continue
            flags = "NPY_ARRAY_ALIGNED" + (" | NPY_ARRAY_WRITEABLE" if arr in nest.written else "")
            L += [f"    if (!PyArray_CheckExact(args[{k}])) goto entry;",
                  "    {",
                  f"        PyArrayObject *a = (PyArrayObject *)args[{k}];",
                  f"        if (PyArray_TYPE(a) != {_NPY[str(dtype)]} || PyArray_NDIM(a) != {ndim}"
                  f" || !PyArray_ISNOTSWAPPED(a) || !PyArray_CHKFLAGS(a, {flags})) goto entry;",
                  f"        d_{arr} = PyArray_BYTES(a);"]
            for j in range(ndim):
                L.append(f"        n_{arr}_{j} = PyArray_DIM(a, {j}); "
                         f"s_{arr}_{j} = PyArray_STRIDE(a, {j});")
            L.append("    }")
        for k, var in enumerate(nest.inputs, start=len(nest.arrays)):
            L += ["    " + s for s in self.unbox(var, f"args[{k}]")]
        # arrays' memory apart (bounds.py's gates): the same for the whole call, so tested
        # once here (inlined at a gate, the test changed how gcc allocated the loop's
        # registers: iir_filter 8% slower)
        names = list(nest.arrays)
        for a, b in sorted({c[0][1:] for b in self.blocks if b.term[0] == "version"
                            for c in b.term[1] if c[0][0] == "disjoint"}):
            L.append(f"    int dj_{a}__{b} = pj_disjoint(args[{names.index(a)}], "
                     f"args[{names.index(b)}]);")
        if any(f.op == "flags" for f in self.restarts.values()):
            # flags some code left before the kernel would make such a loop's exit run it
            # again in Python (right, but slow)
            L.append("    feclearexcept(PJ_FE_ERR | FE_UNDERFLOW);")
        for op in self.hoisted:         # hoist.py: they cannot fail; if one did, Python
            L += ["    " + s for s in self.op(op, 0, "goto entry;")]  # run the call anew
        polled = set()

        def goto(frm, to) -> str:
            """A jump; a loop's back edge (to a block no later in reverse postorder) polls
            for Ctrl-C and hands over at its target: every PJ_POLL_OUTER_EVERY passes when
            loops run inside it (a poll every pass cost csr_matvec 9%), every PJ_POLL_EVERY
            passes in an innermost while loop, never in an innermost for loop (a counted
            poll there cost 30-90% of a short body's time: running_max, iir_filter; it
            polls between blocks of its range instead, at its head) unless it appends to a
            list (an allocation a pass dwarfs the count; unpolled, `for i in range(n):
            out.append(i)` ran to n, the list growing, where Python stopped at Ctrl-C)."""
            resume = self.origin.get(to, to)
            if where[to] > where[frm] and kinds.get(to) == "foriter" and \
                    self.blocks_by_id[to].term[1] in blocked:
                return f"goto r{to};"           # entering a loop run in blocks
            if where[to] > where[frm] or resume not in nest_ids or \
                    to in innermost and kinds[to] == "foriter" and to not in appending:
                return f"goto b{to};"
            polled.add(resume)
            poll = "PJ_POLL()" if to in innermost else "PJ_POLL_OUTER()"
            return f"{{ if ({poll}) PJ_BAIL({resume}); goto b{to}; }}"

        def jump(frm, to) -> str:
            """goto(frm, to), after setting the row pointers of a loop the edge enters."""
            heads = self.rows.pointers.get(frm, {})
            if to not in heads:
                return goto(frm, to)
            set_rows = " ".join(s.strip() for s in rows.lower(self, heads[to]))
            return f"{{ {set_rows} {goto(frm, to)} }}"
        for b in blocks:
            if b.id in in_lanes:
                continue
            if b.term[0] == "foriter" and b.term[1] in blocked and b.id not in self.lanes:
                # a loop run in blocks is entered (and goes on after a block) here: the
                # outer loop's (over blocks) head, apart from the inner loop's, whose trip
                # count gcc then knows (a refill jumping back to b<id> made one loop of
                # both, not unrolled: running_max 2.4x the instructions)
                L += [f"r{b.id}:", f"    {self.block_end(b.term[1])}"]
            # a fallback is reached only when a speculated op's check fails
            L.append(f"b{b.id}:" + (" __attribute__((cold));" if b.id in fallbacks else ""))
            if b.id in self.lanes:
                L += self.lane_loop(b, target)
                continue
            L += self.block_ops(b, target)
            if b.id in self.vectors:
                L += vectorize.lower(self, self.vectors[b.id], target)
                continue
            resume = self.origin.get(b.id, b.id)
            t = tuple(target.get(x, x) if j > 0 and isinstance(x, int) else x
                      for j, x in enumerate(b.term))
            if t[0] in ("jump", "select"):
                L.append(f"    {jump(b.id, t[1])}")
            elif t[0] == "branch":
                L.append(f"    if (v_{t[1]}) {jump(b.id, t[2])} else {jump(b.id, t[3])}")
            elif t[0] == "version":
                cond = " && ".join(self.bound_check(*c) for c in t[1])
                L.append(f"    if ({cond}) {jump(b.id, t[2])} else {jump(b.id, t[3])}")
            elif t[0] == "foriter":
                it = "v_" + t[1]
                # an advance ranges.py proves within int64 is unchecked (that once laid
                # running_argmax out 2x slower: enumerate's counter was a second induction
                # variable gcc related to the iterator through this check; recognise.py
                # now makes it the iterator's index)
                lim = f"pj_lim_{t[1]}" if t[1] in blocked else None
                L += [f"    if ({self.foriter_test(t[1], lim)}) {{"]
                if self.ranges.advances(t[1], t[2]):
                    L.append(f"        int64_t nx = {it}_cur + {it}_step;")
                else:
                    L += ["        int64_t nx;",
                          f"        if (__builtin_add_overflow({it}_cur, {it}_step, &nx))",
                          f"            PJ_BAIL({resume});"]
                L += [f"        v_{t[2]} = {it}_cur; {it}_cur = nx;",
                      f"        {jump(b.id, t[3])}",
                      "    }"]
                if t[1] in blocked:        # the block's end: poll, take the next
                    polled.add(resume)
                    L += [f"    if (__builtin_expect({self.foriter_test(t[1])}, 0)) {{",
                          f"        if (pj_interrupted()) PJ_BAIL({resume});",
                          f"        goto r{b.id};",
                          "    }"]
                L.append(f"    {jump(b.id, t[4])}")
            else:
                L.append("    goto done;")
        L += ["done:", f"    res = PyTuple_New({len(nest.outputs)});",
              "    if (res == NULL) return NULL;"]
        for k, var in enumerate(nest.outputs):
            L += ["    {", "        PyObject *o;"]
            L += ["        " + s for s in self.box(var, "o")]
            L += ["        if (o == NULL) { Py_DECREF(res); return NULL; }",
                  f"        if (PyTuple_SetItem(res, {k}, o) < 0) {{ Py_DECREF(res); return NULL; }}",
                  "    }"]
        L.append("    return res;")
        # a hand-over at block b: (b, arrays..., the variables live there, None for the
        # others) to the Python form; each block boxes only its live variables, so only
        # those stay live up to its checks
        nvars = len(nest.variables())
        total = 1 + len(nest.arrays) + nvars
        live = nest.live_in()
        for b in nest.blocks:
            if not any(op.bails for op in b.ops) and b.term[0] != "foriter" \
                    and b.id not in polled:
                continue
            L += [f"bail_{b.id}: __attribute__((cold));", f"    blk = {b.id};"]
            dead = []
            for k, var in enumerate(nest.variables(), start=1 + len(nest.arrays)):
                if var in live[b.id]:
                    L += ["    " + s for s in self.box(var, f"vec[{k}]")]
                else:
                    dead.append(str(k))
            if dead:
                L += ["    {", f"        static const int dead[] = {{{', '.join(dead)}}};",
                      f"        pj_nones(vec, dead, {len(dead)});", "    }"]
            L.append("    goto bail;")
        L += ["bail: __attribute__((cold));", "    {", "        vec[0] = PyLong_FromLong(blk);"]
        for k in range(len(nest.arrays)):
            L.append(f"        vec[{1 + k}] = Py_NewRef(args[{k}]);")
        L += [f"        for (k = 0; k < {total}; k++)",
              "            if (vec[k] == NULL) goto bail_free;",
              f"        res = pj_fallback(gk, vec, {total});",
              "    bail_free:",
              f"        for (k = 0; k < {total}; k++)",
              "            Py_XDECREF(vec[k]);",
              "        return res;",
              "    }",
              "entry: __attribute__((cold));",
              "    {",
              f"        PyObject *vec[{nin} + 1];",
              "        vec[0] = PyLong_FromLong(-1);",
              "        if (vec[0] == NULL) return NULL;",
              "        for (k = 0; k < nargs && k < " + str(nin) + "; k++)",
              "            vec[k + 1] = args[k];",
              "        res = pj_fallback(gk, vec, nargs + 1);",
              "        Py_DECREF(vec[0]);",
              "        return res;",
              "    }",
              "}"]
        return HELPERS + calls.C_HELPERS + slices.c_helpers(nest) + \
            (vectorize.C_HELPERS if self.vectors else "") + "\n".join(L) + "\n"


class _Group:
    """What module_source reads of a renderer's group."""

    def __init__(self, gid: int):
        self.id = gid
        self.nodes = []
        self.numpy_loops = set()

    def __str__(self):
        return f"loop nest {self.id}"
