"""Innermost loops whose iterations touch disjoint elements, run as two SIMD passes: the C
kernel's blocks -> the same blocks with such loops' invariant loads read once before them,
and {pre-header: Vector}, which lower_c.py emits as a check pass and a store pass.

`A[i, j] -= A[i, k] * A[k, j]` over j (LU's update) checks every difference for a non-finite
value (a NumPy float's overflow warns: the kernel hands over before the store), so the loop
has an exit in every iteration, which gcc neither vectorizes nor lets it keep A[i, k] in a
register: the store into A[i, j] may hit it. Both are decided at run time, once per entry of
the loop, on the unit-stride copy bounds.py made of it (its entry already proved every index
in range): its body must run straight (no branch), assign no variable live at its head or
after it, read every element before it stores any, and store each element at an index
advancing with the loop's own element; then the entry checks, by address, that every load
and store of another form, and every two stores, touch bytes apart over the loop's remaining
iterations (any arrays: two arguments may be views of one buffer), and that each store moves
by at least its itemsize per iteration. Then no iteration reads what another writes:
- a load whose indices the loop never changes reads the same element in every iteration: it
  is read once, before the loop;
- the iterations may run in any order, so the body runs over chunks of CHUNK iterations in
  `#pragma omp simd` loops: the first pass computes every value and ORs together every check
  that would hand over (no store; nothing else is written: the body's variables are local to
  the pass), and when none fired, the second pass computes them again and stores them (the
  same operations on the same values: the same bits; each lane rounds as the scalar code,
  -ffp-contract=off). A check that fired runs that chunk and the rest of the loop as it was,
  from the chunk's first iteration, memory untouched: the hand-over then comes at the same
  iteration and op as in plain Python.
When a check fails the loop runs bounds.py's other unchecked copy, as it would without this.
A float `**` keeps the loop out (gcc would call libmvec's pow, 4 ulp), but for a float64
`v ** 2`: v*v in the passes, its lanes where that may not be pow's result run again in
scalar code calling pow, whose values the store pass stores (lower).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

from pijit.loopnest import types as T
from pijit.loopnest.bounds import Loop, dominators, natural_loops
from pijit.loopnest.ir import Block, Const, Op

CHUNK = 256                    # iterations per pair of passes: their values stay in L1
MIN_TRIPS = 8                  # fewer iterations left run the scalar loop (invariants read)
MAX_OFFSET = 2**20             # |c| of an index base + c the address checks handle
_KINDS = ("copy", "binop", "unop", "cmp", "load", "store", "shape")
_DOMAINS = ("f", "i64", "int", "ci", "b", "not", "truth")
SPEC = "PJ_SPEC;"              # the hand-over text of the passes' ops, rewritten by lower_c


def squares(op) -> bool:
    """`op` is a float64 `v ** 2`: lower_c computes it by pj_square, the passes by v*v where
    pj_square_ok holds, and the other lanes (about 1 in 10) again by pj_square. A float32's
    (pj_squaref: powf is within 0.82 ulp, so v*v is taken only within 0.15 ulp of the
    square) would call powf in most lanes: its loop stays scalar."""
    return op.kind == "binop" and op.op == "pow" and op.domain[:2] == ("f", T.F64) \
        and isinstance(op.args[1], Const) and float(op.args[1].value) == 2.0


@dataclass(frozen=True)
class Vector:
    head: int               # the unit-stride copy's loop head (a foriter)
    order: tuple            # its body's blocks, from the head's successor back to the head


def plan(blocks: list, types: dict, origin: dict, live_in: dict) -> tuple:
    """(blocks, {pre-header id: Vector}): every eligible loop's gate (bounds.py's version
    terminator) gets the address checks and goes to a new pre-header holding the loop's
    invariant loads (into new variables added to `types`; the loads in the body become
    copies of them), from which lower_c runs the passes."""
    by_id = {b.id: b for b in blocks}
    dom = dominators(by_id, 0)
    loops = natural_loops(by_id, dom)
    out = {}
    # bounds.py copies an inner loop with each outer loop it versions: the passes go to
    # one unit-stride copy of each loop, the one inside the fewest checked accesses (the
    # outer loops' unchecked copies, where it runs), so gcc vectorizes it once
    chosen = {}
    for gate in sorted(by_id):
        term = by_id[gate].term
        if term[0] != "version" or not any(c[0] == ("unit",) for c in term[1]):
            continue
        found = _eligible(by_id, term[2], loops, dom, types, origin, live_in)
        if found is not None:
            outer = set().union(*(b for h, b in loops.items() if gate in b))
            checked = sum(1 for k in outer for op in by_id[k].ops
                          if op.kind in ("load", "store") and op.checked)
            key = origin.get(term[2], term[2])
            if key not in chosen or checked <= chosen[key][0]:
                chosen[key] = (checked, gate, found)
    for _, gate, found in sorted(chosen.values(), key=lambda c: c[1]):
        term = by_id[gate].term
        head = term[2]
        order, hoist, checks = found
        pre = max(by_id) + 1
        loads = []
        for n, (k, j) in enumerate(hoist):
            b = by_id[k]
            op = b.ops[j]
            h = f"h{pre}_{n}"
            types[h] = types[op.dst]
            loads.append(replace(op, dst=h))
            ops = list(b.ops)
            ops[j] = Op("copy", op.dst, (h,), lineno=op.lineno)
            by_id[k] = Block(k, ops, b.term)
        by_id[pre] = Block(pre, loads, ("jump", head))
        origin[pre] = origin.get(head, head)
        by_id[gate] = Block(gate, by_id[gate].ops,
                            ("version", term[1] + checks, pre, term[3]))
        out[pre] = Vector(head, order)
    # the blocks in their order (later passes walk them in it), the pre-headers last
    return [by_id[b.id] for b in blocks] + [by_id[k] for k in sorted(out)], out


def _eligible(by_id, head, loops, dom, types, origin, live_in):
    """(body order, [(block, op index)] of invariant loads, address checks) of the loop at
    `head` when its iterations may run as passes, else None."""
    body = loops.get(head)
    term = by_id[head].term
    if body is None or term[0] != "foriter" or by_id[head].ops \
            or any(h != head and h in body for h in loops):
        return None
    it = term[1]
    order, k = [], term[3]
    while k != head and k in body and k not in order and by_id[k].term[0] == "jump":
        order.append(k)
        k = by_id[k].term[1]
    if k != head or set(order) != body - {head}:
        return None
    # the iterator's elements left at the gate: set up anywhere before the loop
    loop = Loop(by_id, head, body, dom, types, at_entry=False)
    if it not in loop.outer:
        return None
    defined = {term[2]}
    loads, stores, hoist = [], [], []
    for k in order:
        for j, op in enumerate(by_id[k].ops):
            if op.kind not in _KINDS or op.array is not None or op.reuse is not None:
                return None
            if op.kind in ("binop", "unop", "cmp") and op.domain[0] not in _DOMAINS:
                return None
            if op.kind == "binop" and op.op == "pow" and op.domain[0] == "f" \
                    and not squares(op):
                return None     # gcc would call a SIMD pow (libmvec: 4 ulp), not C's pow
            if op.dst is not None:
                defined.add(op.dst)
            if op.kind not in ("load", "store"):
                continue
            if op.checked or not op.unit:
                return None
            ndim = len(op.args) - (2 if op.kind == "store" else 1)
            forms = tuple(loop.affine(x, (k, j)) for x in op.args[1:1 + ndim])
            if any(f is None or abs(f[1]) >= MAX_OFFSET
                   or f[0][0] == "iter" and f[0][1] != it for f in forms):
                return None
            access = (op.args[0], forms)
            if op.kind == "store":
                if all(f[0][0] != "iter" for f in forms):
                    return None         # the same element in every iteration
                stores.append(access)
            elif stores:
                return None             # a load after a store
            else:
                loads.append(access)
                # read before the loop: indices it never changes, held by variables it
                # never assigns (kk = k + 1 in the body is invariant, but set there)
                if all(f[0][0] != "iter" for f in forms) and all(
                        not isinstance(x, str) or x not in loop.defs
                        for x in op.args[1:1 + ndim]):
                    hoist.append((k, j))
    if not stores or any(len(types[v]) != 1 for v in defined):
        return None
    # a value carried to the next iteration or read after the loop
    after, at = origin.get(term[4], term[4]), origin.get(head, head)
    if at not in live_in or after not in live_in \
            or defined & (live_in[at] | live_in[after]):
        return None
    checks = [(("advance", s, it), 0, None, None) for s in sorted(set(stores), key=str)]
    pairs = {(a, b) for n, a in enumerate(stores) for b in stores[n + 1:] + loads if a != b}
    checks += [(("apart", a, b, it), 0, None, None) for a, b in sorted(pairs, key=str)]
    return tuple(order), hoist, tuple(checks)


C_HELPERS = r"""
/* 1 and the last element of the range iterator (cur, stop, step) in *last; 0 when it has
   none left; -1 when its span overflows (step 1 needs no division) */
static inline int pj_range_last(int64_t cur, int64_t stop, int64_t step, int64_t *last)
{
    int64_t span;
    if (step > 0 ? cur >= stop : cur <= stop)
        return 0;
    if (step == 1) {
        *last = stop - 1;
        return 1;
    }
    if (__builtin_sub_overflow(stop, cur, &span))
        return -1;
    *last = cur + (span - (step > 0 ? 1 : -1)) / step * step;
    return 1;
}
/* the bytes of p + t * mp (psz each) and of q + t * mq (qsz each), t over the iterator's
   elements left, are apart (their hulls do not meet); every such address is one of an
   element in range (the gate checked the indices first), so int64 holds them */
static inline int pj_apart(intptr_t p, int64_t mp, int64_t psz, intptr_t q, int64_t mq,
                           int64_t qsz, int64_t cur, int64_t stop, int64_t step)
{
    int64_t last;
    int n = pj_range_last(cur, stop, step, &last);
    if (n <= 0)
        return n == 0;
    int64_t p0 = p + cur * mp, p1 = p + last * mp, q0 = q + cur * mq, q1 = q + last * mq;
    int64_t plo = p0 < p1 ? p0 : p1, phi = p0 < p1 ? p1 : p0;
    int64_t qlo = q0 < q1 ? q0 : q1, qhi = q0 < q1 ? q1 : q0;
    return phi + psz <= qlo || qhi + qsz <= plo;
}
/* p + t * mp moves by at least size bytes from one element of the iterator to the next */
static inline int pj_advances(int64_t mp, int64_t step, int64_t size)
{
    __int128 d = (__int128)mp * step;
    return d >= size || d <= -size;
}
"""


def _address(k, access) -> tuple:
    """C (address of the access at the iterator's element 0, bytes per element, itemsize)."""
    arr, forms = access
    fixed, per = ["(intptr_t)d_" + arr], []
    for axis, (base, c) in enumerate(forms):
        s = f"(int64_t)s_{arr}_{axis}"
        if base[0] == "iter":
            per.append(s)
            fixed.append(f"INT64_C({c}) * {s}")
        elif base[0] == "var":
            fixed.append(f"((int64_t)v_{base[1]} + INT64_C({c})) * {s}")
        else:
            fixed.append(f"INT64_C({c}) * {s}")
    size = f"(int64_t)sizeof(npy_{k.nest.arrays[arr][0]})"
    return " + ".join(fixed), " + ".join(per) or "INT64_C(0)", size


def check_c(k, base) -> str:
    """C condition of an address check of plan's (a gate's extra checks; `k`: the NestKernel,
    after the gate's bounds checks in the same &&, so every index is in range)."""
    it = "v_" + base[-1]
    rng = f"{it}_cur, {it}_stop, {it}_step"
    if base[0] == "advance":
        _, per, size = _address(k, base[1])
        return f"pj_advances({per}, {it}_step, {size})"
    a, b = _address(k, base[1]), _address(k, base[2])
    return f"pj_apart({a[0]}, {a[1]}, {a[2]}, {b[0]}, {b[1]}, {b[2]}, {rng})"


_SPEC = re.compile(r"if \((.*)\) " + re.escape(SPEC))
# lower_c's pj_square call of a `v ** 2`, in the SIMD passes v*v with its lane's test
_SQUARE = re.compile(r"double r = pj_square\(v, w\);")


def lower(k, vec: Vector, target: dict) -> list:
    """The C of the passes after a pre-header's loads: chunks of the iterator's elements
    left, each checked (when some op of the body checks) and then stored; a chunk whose check
    fired goes to the loop as it was, from its first element.

    A body with a float `v ** 2` (pj_square: pow where v*v may not be its result, a call
    gcc cannot vectorize) takes v*v in the check pass and marks the lanes pj_square_ok
    fails; those alone run again as scalar code calling pj_square (its checks ORed in
    too). The check passes keep the values to store (pj_sv*), which the store pass writes:
    every lane's value is then pow's, and its checks ran on pow's result."""
    head = k.blocks_by_id[vec.head]
    _, it, elem, _, exit_ = head.term
    exit_ = target.get(exit_, exit_)
    itv = "v_" + it
    ops = [op for x in vec.order for op in k.blocks_by_id[x].ops]
    local = [elem] + [op.dst for op in ops if op.dst is not None]
    decls = " ".join(f"npy_{T.carrier(k.vtypes[v])} v_{v};" for v in dict.fromkeys(local))
    # the check pass's flag as wide as the lanes of the values stored (their checks'
    # masks): an int flag cost each vector of double checks four shuffles to narrow
    # (lu_nopivot's update: 593k -> 525k instructions a call)
    flag = "int64_t" if any(np.dtype(k.nest.arrays[op.args[0]][0]).itemsize == 8
                            for op in ops if op.kind == "store") else "int32_t"
    square = any(squares(op) for op in ops)
    # the stored values the check passes keep, by store op: those the body computes (a
    # constant or a value set before the loop is the same in every pass)
    kept = {n: op.args[-1] for n, op in enumerate(ops)
            if square and op.kind == "store" and op.args[-1] in local}

    def body(store: bool, fast: bool = True) -> tuple:
        """(the pass's lines, whether any op checks something); `fast`: squares by v*v"""
        lines = []
        for n, op in enumerate(ops):
            if op.kind == "store" and not store:
                dtype = k.nest.arrays[op.args[0]][0]
                lines += ["{"] + k.store_value(op.args[-1], dtype, SPEC) + ["    (void)sv;", "}"]
                if n in kept:
                    lines.append(f"pj_sv{n}[pj_q] = {k.val(kept[n])};")
            else:
                if n in kept:
                    lines.append(f"v_{kept[n]} = pj_sv{n}[pj_q];")
                lines += k.op(op, vec.head, SPEC)
        out, checks = [], False
        for s in lines:
            s, n = _SPEC.subn(r"(void)(\1);" if store else rf"pj_bad |= -({flag})(\1);", s)
            if SPEC in s:
                raise AssertionError(f"a hand-over the passes cannot take: {s}")
            if fast:        # the store pass's squares are dead: it stores pj_sv*
                s = _SQUARE.sub("double r = v * v;" if store else
                                f"double r = v * v; pj_slow |= -({flag})!pj_square_ok(v, r);", s)
                if "pj_square" in s.replace("pj_square_ok(", ""):
                    raise AssertionError(f"a square the passes cannot take: {s}")
            checks = checks or n > 0
            out.append("            " + s)
        return out, checks

    out = ["    {", "    int64_t pj_n, pj_m, pj_q, pj_last;",
           f"    switch (pj_range_last({itv}_cur, {itv}_stop, {itv}_step, &pj_last)) {{",
           f"    case 0: goto b{exit_};", f"    case -1: goto b{vec.head};", "    }",
           f"    pj_n = ({itv}_step == 1 ? pj_last - {itv}_cur : "
           f"(pj_last - {itv}_cur) / {itv}_step) + 1;",
           f"    if (pj_n < {MIN_TRIPS}) goto b{vec.head};"]
    if square:
        out += [f"    {flag} pj_slows[{CHUNK}];"]
        out += [f"    npy_{T.carrier(k.vtypes[x])} pj_sv{n}[{CHUNK}];" for n, x in kept.items()]
    # the check pass runs when some op's C checks something (whatever Op.bails says)
    check, checks = body(False)
    if square and not checks:
        raise AssertionError("a square's pass without checks")
    slow, stored = (body(False, fast=False)[0] if square else []), body(True)[0]

    def chunks(step: str) -> list:
        """The loop over chunks, the iterator advancing by `step` (C)."""
        start = f"v_{elem} = {itv}_cur + pj_q * {step};"
        out = ["    for (;;) {", f"        pj_m = pj_n < {CHUNK} ? pj_n : {CHUNK};"]
        if checks:
            # pj_any: some lane's square is computed again by pow (its flag in pj_slow)
            ored = ["pj_bad", "pj_any"] if square else ["pj_bad"]
            lane = f" {flag} pj_slow = 0;" if square else ""
            out += [f"        {flag} " + ", ".join(f"{v} = 0" for v in ored) + ";",
                    f"        #pragma omp simd reduction(|:{', '.join(ored)})",
                    "        for (pj_q = 0; pj_q < pj_m; pj_q++) {",
                    f"            {decls}{lane}", f"            {start}"] + check
            if square:
                out += ["            pj_slows[pj_q] = pj_slow; pj_any |= pj_slow;", "        }",
                        "        if (pj_any && !pj_bad)",
                        "        for (pj_q = 0; pj_q < pj_m; pj_q++) {",
                        "            if (!pj_slows[pj_q]) continue;",
                        f"            {decls}", f"            {start}"] + slow
            out += ["        }", f"        if (pj_bad) goto b{vec.head};"]
        return out + ["        #pragma omp simd",
                      "        for (pj_q = 0; pj_q < pj_m; pj_q++) {",
                      f"            {decls}", f"            {start}"] + stored + \
                     ["        }",
                      f"        if (pj_n == pj_m) goto b{exit_};",
                      f"        pj_n -= pj_m; {itv}_cur += pj_m * {step};",
                      "    }"]

    # a step of 1 (range(n) hands its step to the kernel as a value) in a copy of its own:
    # its elements' addresses are then contiguous to gcc, which loads them as vectors
    # instead of element by element (out[i] = x[i] ** 2 over exact squares: 18.4 -> 17.3
    # instructions an element, callgrind, -march=x86-64-v3); gcc drops the copy a
    # constant step never enters
    out += [f"    if ({itv}_step == 1)"] + chunks("INT64_C(1)") + chunks(f"{itv}_step") + ["    }"]
    return out
