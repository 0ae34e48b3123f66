"""C text of the reductions a stage loop computes (render.GroupKernel.loop places it).

A stage loop runs over its row (or all elements) in blocks: each block reduces into
block-local variables inside an `omp simd` loop (`block_init`, `clauses`, `update`), then
folds them into the reduction's state (`merge`), declared per row or per kernel (`state`);
`result` is the final value. A block is as long as the stage's reductions allow (`leaf`):
BLOCK where the block is the leaf of a pairwise float64 sum (NumPy's leaf size) or of a
product, LONG_BLOCK where blocks do not change the result (integers, max/min) or only in
bits far below the result's precision (float32 values summed in double): every block ends
with a horizontal reduction of the vector lanes, which at 128 elements was a fifth of a
float32 softmax. Results follow NumPy: sums of integers wrap around in 64 bits, float sums
are pairwise over blocks in double (O2) or NumPy's own pairwise summation of the row or of
all values (O1: ExactRowSum, ExactWholeSum), NaN wins in max/min and is the first index in
argmax/argmin, any/all test `!= 0` (NaN is true).
"""
from __future__ import annotations

import numpy as np

from pijit.graph.fuse import BOOL, FLOAT

BLOCK = 128         # leaf size of the pairwise summation (NumPy's)
LONG_BLOCK = 2048   # divides the flat chunk (render.CHUNK), so chunks keep the same blocks


class Reduction:
    leaf = LONG_BLOCK       # the longest block that keeps the result's accuracy
    row_buffer = False      # keeps the row's values in rs<out> (ExactRowSum)

    def __init__(self, node, op: str, value: str, ctype: str, const):
        self.o, self.op, self.v, self.ct = node.out, op, value, ctype
        self.dtype = node.meta.dtype
        self.const = const          # (value, dtype) -> C literal

    def check(self) -> list:
        """Statements after the result v<out> is known (setting fperr hands the group back)."""
        return []

    def state(self) -> list:
        raise NotImplementedError

    def block_init(self) -> list:
        return []

    def clauses(self) -> list:
        return []

    def update(self) -> list:
        return []

    def merge(self) -> list:
        return []

    def chunk_end(self) -> list:
        """Statements after each chunk of NumPy's pairwise recursion (exact float sums)."""
        return []

    def result(self, count: str) -> str:
        raise NotImplementedError


class FloatSum(Reduction):
    """sum/mean of floats (or mean of integers): pairwise over blocks, in double."""
    def __init__(self, node, op, value, ctype, const, src_dtype):
        super().__init__(node, op, value, ctype, const)
        # float32 values in a double accumulator: lanes of 128 serial adds still err far below
        # float32's precision; float64 (or integer) values keep NumPy's leaf
        self.leaf = LONG_BLOCK if src_dtype == np.float32 else BLOCK

    def state(self):
        return [f"pj_pw pw{self.o};", f"pw{self.o}.mask = 0;"]

    def block_init(self):
        return [f"double a{self.o} = 0.0;"]

    def clauses(self):
        return [f"reduction(+:a{self.o})"]

    def update(self):
        return [f"a{self.o} += (double){self.v};"]

    def merge(self):
        return [f"pj_pw_push(&pw{self.o}, a{self.o});"]

    def result(self, count):
        total = f"pj_pw_total(&pw{self.o})"
        return f"({self.ct})({total} / (double){count})" if self.op == "mean" else \
            f"({self.ct}){total}"


class ExactRowSum(Reduction):
    """sum/mean of a float row, bit-identical to NumPy's: NumPy's pairwise recursion over the
    row (csrc/kernel_support.c), added to +0.0; a mean's sum divided by its count in double
    and rounded to the dtype, as NumPy's true_divide by the np.intp count promotes a float32
    to float64 (NEP 50: the quotient of a float32 division only where the count is exact in
    float32, below 2**24 values and some above). The row loop
    runs in chunks, the recursion's nodes of at most PJ_SUM_CHUNK values (rb, tree_chunks),
    and each chunk leaf by leaf (render.GroupKernel.leaf_blocks): a leaf's values, once
    computed, are summed by pj_leaf_* (`leaf_end`) into ls<out>[lf], added up after the
    chunk's leaves as the recursion adds them (partial sums ps<out>, `leaf_pops`); a
    chunk's sum goes to tsum<out>[ci], and the result adds those as the levels above do
    (tree_total_*). The values are read where the row already is (`values`: an input's
    row, a row buffer), else kept in rs<out>, a leaf long, first. A row of fewer than 8
    values is its one leaf, summed without the loops (`short_end`)."""
    leaf = BLOCK                # its blocks are the recursion's leaves, of at most BLOCK
    chunk = "PJ_SUM_CHUNK"      # the recursion's chunks: at most this many values

    def __init__(self, node, op, value, ctype, const, values: str | None = None):
        super().__init__(node, op, value, ctype, const)
        self.values = values
        self.row_buffer = values is None

    def update(self):
        return [f"rs{self.o}[j - j0] = {self.v};"] if self.row_buffer else []

    def state(self):
        return []

    def _total(self, count) -> str:
        fn = "tree_total_f" if self.dtype == np.float32 else "tree_total_d"
        # one chunk (the recursion's root) is the whole sum: no call per short row
        total = (f"(({self.ct})0 + ({count} <= {self.chunk} ? tsum{self.o}[0] : "
                 f"pj_sup->{fn}({count}, {self.chunk}, tsum{self.o})))")
        return f"({self.ct})((double){total} / (double){count})" if self.op == "mean" \
            else total

    def chunk_init(self) -> list:
        """Before a chunk's leaves: no partial sums; the leaves' sums, ls<out>."""
        o = self.o
        return [f"{self.ct} ps{o}[PJ_DEPTH], ls{o}[PJ_LEAVES];", f"int psn{o} = 0;"]

    def leaf_end(self) -> list:
        """After leaf lf ([j0, j1) of plan lp): its sum."""
        o = self.o
        leaf = "pj_leaf_f" if self.dtype == np.float32 else "pj_leaf_d"
        values = f"rs{o}" if self.row_buffer else f"{self.values} + j0"
        return [f"ls{o}[lf] = {leaf}({values}, j1 - j0);"]

    def leaf_pops(self) -> list:
        """After the chunk's leaves, for each leaf lf in order: its sum onto the partial
        sums ps<out>, then the recursion's adds it completes."""
        o = self.o
        return [f"ps{o}[psn{o}++] = ls{o}[lf];",
                f"for (int k = lp->pops[lf]; k > 0; k--, psn{o}--)",
                f"    ps{o}[psn{o} - 2] = ps{o}[psn{o} - 2] + ps{o}[psn{o} - 1];"]

    # A leaf of 8 values or more summed as its values are computed (render.lanes): NumPy's
    # eight accumulators, the lanes of one vector ra<out> (lane k adds values k, k + 8, ...
    # in order), combined as pj_comb_* combines them, then the last n % 8 values added in
    # order; no buffer between computing a value and adding it but its group of 8, va<out>.
    def _vec(self) -> str:
        return "f" if self.dtype == np.float32 else "d"

    def lanes_decl(self) -> list:
        return [f"pj_v{self._vec()} ra{self.o};"]

    def lanes_values(self) -> list:
        """Before the loop over a group of 8 values (j from i)."""
        return [f"{self.ct} va{self.o}[8];"]

    def lanes_value(self) -> list:
        """In the loop over the group."""
        return [f"va{self.o}[j - i] = {self.v};"]

    def lanes_first(self) -> list:
        """After the loop over the leaf's first group."""
        return [f"ra{self.o} = pj_vload_{self._vec()}(va{self.o});"]

    def lanes_add(self) -> list:
        """After the loop over each next group: lane k adds value k of the group."""
        return [f"ra{self.o} += pj_vload_{self._vec()}(va{self.o});"]

    def lanes_end(self) -> list:
        return [f"ls{self.o}[lf] = pj_comb_{self._vec()}(ra{self.o});"]

    def lanes_rest(self) -> list:
        """In the loop over the leaf's last (j1 - j0) % 8 values, after lanes_end."""
        return [f"ls{self.o}[lf] += {self.v};"]

    def chunk_end(self) -> list:
        """After chunk ci ([cb0, cb1)) of the row: its sum."""
        return [f"tsum{self.o}[ci] = ps{self.o}[0];"]

    def short_end(self) -> list:
        """After a row of fewer than 8 values, one leaf (render.GroupKernel.short_row): the
        row's one chunk sum is the leaf's."""
        return [f"tsum{self.o}[0] = ls{self.o}[0];"]

    def result(self, count):
        return self._total(count)


class ExactWholeSum(ExactRowSum):
    """sum/mean of all of a float array's values, bit-identical to NumPy's for operands in C
    order: the same recursion over all N values, whose chunks are the kernel's flat chunks
    (tb): chunk r, of n values, is summed leaf by leaf into tsum<out>[r]."""
    chunk = "PJ_CHUNK"

    def chunk_end(self) -> list:
        """After flat chunk r."""
        return [f"tsum{self.o}[r] = ps{self.o}[0];"]


class Accumulate(Reduction):
    """sum/prod of integers (exact modulo 2**64, like NumPy's int64 accumulation), prod of
    floats (in double), any/all."""
    _SYM = {"sum": "+", "prod": "*", "any": "|", "all": "&"}

    @property
    def leaf(self):
        return BLOCK if self.dtype in FLOAT and self.op == "prod" else LONG_BLOCK

    def _acc(self):
        if self.op in ("any", "all"):
            return "int", "1" if self.op == "all" else "0", f"({self.v} != 0)"
        if self.dtype in FLOAT:
            return "double", "1.0", f"(double){self.v}"
        return "uint64_t", "1" if self.op == "prod" else "0", f"(uint64_t)(int64_t){self.v}"

    def state(self):
        ty, init, _ = self._acc()
        return [f"{ty} s{self.o} = {init};"]

    def block_init(self):
        ty, init, _ = self._acc()
        return [f"{ty} a{self.o} = {init};"]

    def clauses(self):
        return [f"reduction({self._SYM[self.op]}:a{self.o})"]

    def update(self):
        sym, (_, _, x) = self._SYM[self.op], self._acc()
        return [f"a{self.o} {sym}= {x};"]

    def merge(self):
        return [f"s{self.o} {self._SYM[self.op]}= a{self.o};"]

    def result(self, count):
        return f"({self.ct})s{self.o}"


class MaxMin(Reduction):
    def __init__(self, node, op, value, ctype, const, values: str | None = None):
        super().__init__(node, op, value, ctype, const)
        self.values = values        # the row's values in memory (check), if they are

    def identity(self) -> str:
        t = self.dtype
        if t in FLOAT:
            return "-INFINITY" if self.op == "max" else "INFINITY"
        lo, hi = (0, 1) if t == BOOL else (np.iinfo(t).min, np.iinfo(t).max)
        return self.const(lo if self.op == "max" else hi, t)

    def state(self):
        return [f"{self.ct} m{self.o} = {self.identity()};", f"int z{self.o} = 0;"]

    def block_init(self):
        return [f"{self.ct} bm{self.o} = {self.identity()};", f"int bz{self.o} = 0;"]

    def clauses(self):
        return [f"reduction({self.op}:bm{self.o})", f"reduction(|:bz{self.o})"]

    def update(self):
        o, v, cmp = self.o, self.v, ">" if self.op == "max" else "<"
        if self.dtype not in FLOAT:
            return [f"bm{o} = {v} {cmp} bm{o} ? {v} : bm{o};"]
        # a NaN is noted in bz and compared as the identity: C's compare (or the vmaxps gcc
        # makes of it) would raise the invalid flag, which sends the call to NumPy. Only
        # whether one was met: gcc 12 reported a loop also noting its sign bit (by a shift or
        # a mask) vectorized, then emitted the scalar loop (a float64 row max: 4.4 ns per
        # element, 0.4 noting NaN alone)
        return [f"const {self.ct} mq{o} = {v} == {v} ? {v} : {self.identity()};",
                f"bm{o} = mq{o} {cmp} bm{o} ? mq{o} : bm{o};",
                f"bz{o} |= ({v} != {v});"]

    def merge(self):
        cmp = ">" if self.op == "max" else "<"
        return [f"if (bm{self.o} {cmp} m{self.o}) m{self.o} = bm{self.o};",
                f"z{self.o} |= bz{self.o};"]

    def result(self, count):
        if self.dtype in FLOAT:     # NaN wins, as in NumPy (check: NumPy's own NaN then)
            return f"z{self.o} ? ({self.ct})NAN : m{self.o}"
        return f"m{self.o}"

    def check(self):
        # which zero NumPy's max of -0.0 and 0.0 returns depends on its lanes' order, and
        # the kernel's lanes combine in another: a zero result goes to NumPy (at O2 too)
        # when the row has zeros of both signs, or when its values are not in memory to
        # look (the row is scanned only when the result is a zero: softmax of a row of
        # ReLU outputs or of non-positive values, logsumexp of log-probabilities). So does
        # a NaN: NumPy returns one of the NaNs it met or its default +nan, by position and
        # loop (a -nan of x86's invalid operations may keep its sign or not), and the
        # kernel notes no sign (update).
        if self.dtype not in FLOAT or isinstance(self, ArgMaxMin):
            return []
        o = self.o
        if self.values is None:
            return [f"if (v{o} == 0 || v{o} != v{o})", "    fperr |= 1;"]
        signs = "pj_zsigns_f" if self.dtype == np.float32 else "pj_zsigns_d"
        return [f"if (v{o} != v{o}) {{",
                "    fperr |= 1;",
                f"}} else if (v{o} == 0) {{",
                f"    const int zs{o} = {signs}({self.values}, n);",
                f"    if (zs{o} == 3)",
                "        fperr |= 1;",
                f"    v{o} = zs{o} == 2 ? -({self.ct})0 : ({self.ct})0;",
                "}"]


class ArgMaxMin(MaxMin):
    """The first index of the max (min), or of the first NaN. The simd loop keeps the block's
    values in a buffer; a block that improves on the best so far is scanned for the index."""
    leaf = BLOCK            # the buffer and its rescans stay small

    def __init__(self, node, op, value, ctype, const, src_dtype, src_ctype):
        super().__init__(node, op[3:], value, ctype, const)
        self.dtype, self.ct = src_dtype, src_ctype     # compares values of the source
        self.out_ct = ctype

    def state(self):
        return super().state() + [f"npy_intp i{self.o} = 0;"]

    def block_init(self):
        return super().block_init() + [f"{self.ct} ab{self.o}[{BLOCK}];"]

    def update(self):
        return [f"ab{self.o}[j - j0] = {self.v};"] + super().update()

    def merge(self):
        o, cmp = self.o, ">" if self.op == "max" else "<"
        nan = f"bz{o}" if self.dtype in FLOAT else "0"
        return [f"if (!z{o} && ({nan} || bm{o} {cmp} m{o})) {{",
                "    for (npy_intp k = 0; k < j1 - j0; k++) {",
                f"        if ({nan} ? ab{o}[k] != ab{o}[k] : ab{o}[k] == bm{o}) {{",
                f"            i{o} = ibase + j0 + k;",
                "            break;",
                "        }",
                "    }",
                f"    m{o} = bm{o};",
                f"    z{o} = {nan};",
                "}"]

    def result(self, count):
        return f"({self.out_ct})i{self.o}"


def reduction(node, op: str, value: str, ctypes: dict, const, src_dtype,
              exact: bool = False, row_values: str | None = None,
              whole: bool = False) -> Reduction:
    """row_values: where the row (or flat chunk) of `value` already is, contiguous (a C
    pointer), if anywhere; whole: a reduction over all values."""
    ct = ctypes[node.meta.dtype]
    if op in ("argmax", "argmin"):
        return ArgMaxMin(node, op, value, ct, const, src_dtype, ctypes[src_dtype])
    if op in ("max", "min"):
        return MaxMin(node, op, value, ct, const,
                      row_values if src_dtype == node.meta.dtype and not whole else None)
    if exact and op in ("sum", "mean") and node.meta.dtype in FLOAT:
        kind = ExactWholeSum if whole else ExactRowSum
        return kind(node, op, value, ct, const,
                    row_values if src_dtype == node.meta.dtype else None)
    if op == "mean" or op == "sum" and node.meta.dtype in FLOAT:
        return FloatSum(node, op, value, ct, const, src_dtype)
    return Accumulate(node, op, value, ct, const)
