"""Common subexpressions of a nest's C code: an op computing what a variable already holds
on every path to it becomes a copy of that variable.

An op is a candidate when its result depends only on its operands' values (arithmetic,
comparisons, min/max/abs/math calls, shapes) or on its operands and the array's memory (an
element load). Its value is available at a point when, on every path there, the op ran into
its holder and since then neither the holder nor an operand was assigned, and, for a load,
nothing was stored into any array (two array arguments may be views of the same memory, so
a store into one kills the loads of every array, but those of the arrays the store's loop
checked at its entry to be apart from its array: bounds.py). The later op is then a copy: it cannot
bail where the earlier one did not (same operands, same result), so a hand-over skipped here
never happens in plain Python either, and every variable holds at each block's start what it
holds in the nest as recognised (the Python form resumes from those).
"""
from __future__ import annotations

import struct

import numpy as np

from pijit.loopnest.ir import Const, Op, predecessors, reverse_postorder

_PURE = ("binop", "unop", "cmp", "call", "load", "shape", "truth")


def _arg_key(x):
    if not isinstance(x, Const):
        return x
    # a float by its bits: repr keeps -0.0 apart from 0.0 (and a NaN equal to itself), but
    # gives every NaN as `nan` (x * -nan is not x * nan)
    v = x.value
    return ("const", type(v), struct.pack("<d", v) if isinstance(v, float) else
            v.tobytes() if isinstance(v, np.floating) else repr(v), x.type)


def _key(op: Op):
    return (op.kind, op.op, tuple(map(_arg_key, op.args)), op.domain,
            tuple(sorted(op.results.items(), key=str)))


def _defined(op: Op) -> tuple:
    if op.kind == "range":
        return tuple(f"{op.dst}_{p}" for p in ("cur", "stop", "step"))
    return (op.dst,) if op.dst is not None else ()


def _kill(avail: dict, names, store: bool, apart=()) -> None:
    """Forget the values held by `names` or computed from them; a store: also the loads,
    but those of arrays `apart` from the one it stores into."""
    for key, holder in list(avail.items()):
        if holder in names or any(a in names for a in key[2]) or store and key[0] == "load" \
                and key[2][0] not in apart:
            del avail[key]


def _step(avail: dict, op: Op, types: dict, rewrite: bool) -> Op:
    """Run op over the available values (updated in place); the op to emit."""
    key = _key(op) if op.kind in _PURE and op.dst is not None else None
    if rewrite and key is not None and key in avail and avail[key] != op.dst \
            and types[avail[key]] == types[op.dst]:
        op = Op("copy", op.dst, (avail[key],), lineno=op.lineno)
    _kill(avail, _defined(op), op.kind in ("store", "vstore"), op.apart)
    if key is not None and op.dst not in key[2]:
        avail[key] = op.dst
    return op


def _term_defs(term) -> tuple:
    if term[0] == "foriter":
        return (term[2], f"{term[1]}_cur")
    return ()


def eliminate(blocks: list, types: dict, entry: int = 0) -> list:
    """blocks (ir.Block, any ids) with every available recomputation made a copy; new
    Block objects, the same ids and terminators."""
    by_id = {b.id: b for b in blocks}
    preds = predecessors(by_id)
    out = {}                    # block id -> available at its end (absent: not yet known)

    def flow(b, rewrite):
        ins = [out[p] for p in preds[b.id] if p in out]
        if b.id == entry or not ins:
            avail = {}
        else:
            avail = {k: h for k, h in ins[0].items() if all(i.get(k) == h for i in ins[1:])}
        ops = [_step(avail, op, types, rewrite) for op in b.ops]
        _kill(avail, _term_defs(b.term), False)
        return avail, ops

    # optimistic iteration: a block's value is the meet of the predecessors known so far,
    # which only shrinks, until nothing changes
    order = reverse_postorder(by_id, entry)
    changed = True
    while changed:
        changed = False
        for k in order:
            avail, _ = flow(by_id[k], False)
            if out.get(k) != avail:
                out[k] = avail
                changed = True
    result = []
    for b in blocks:
        if b.id in out:
            _, ops = flow(b, True)
            result.append(type(b)(b.id, ops, b.term))
        else:
            result.append(b)
    return result
