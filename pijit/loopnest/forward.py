"""An element a loop stored in its previous iteration and reads again, kept in a variable:
the C kernel's blocks -> the same blocks with such loads and stores marked (Op.reuse).

`dp[i, j] = max(dp[i - 1, j], dp[i, j - 1])` reads at j the element it stored at j - 1. Read
back through memory, every iteration waits for the previous one's store to reach the load;
kept in a register, the chain is a few cycles. The store also puts the value it wrote (in the
array's C type, so exactly what memory holds) in a variable and sets a flag; the load takes
that variable when the flag is set, else reads memory. The flag is cleared where the loop's
iterator is set up, so each run of the loop reads its first element from memory.

The load reads the stored element when, in an innermost range loop of a constant step:
- every store in the loop is into that array at the same index (bounds.Loop's affine forms:
  an invariant base plus a constant on every axis, the loop's own element on one), so
  nothing else is written between the store and the next iteration's load;
- every path around the loop passes such a store, so the previous iteration stored;
- no store comes before the load in an iteration;
- the load's index is the store's with the element one step back: at iteration t + 1 it is
  the index stored at iteration t (a negative index wraps alike, the same element).
A hand-over to Python at any op leaves the variable behind: memory holds the same value.
"""
from __future__ import annotations

from dataclasses import replace

from pijit.loopnest import types as T
from pijit.loopnest.bounds import Loop, dominators, natural_loops
from pijit.loopnest.ir import Const, Op, successors


def forward(blocks: list, types: dict, arrays: dict, known: dict) -> list:
    """blocks with the loads of a previous iteration's store marked ("fw", value, valid)
    and the stores setting those; `types` gets the new variables. known: Nest.known (a
    range's step may be an input of known value)."""
    by_id = {b.id: b for b in blocks}
    assigned = {op.dst for b in blocks for op in b.ops}
    known = {v: x for v, x in known.items() if v not in assigned}
    dom = dominators(by_id, 0)
    loops = natural_loops(by_id, dom)
    resets = {}                 # iterator -> the valid flags its setups clear
    for head, body in sorted(loops.items()):
        term = by_id[head].term
        if term[0] != "foriter" or any(h != head and h in body for h in loops):
            continue            # not an innermost range loop
        it = term[1]
        step = _step(by_id, it, known)
        if step is None:
            continue
        loop = Loop(by_id, head, body, dom, types, at_entry=False)
        if it not in loop.outer:
            continue
        found = _accesses(loop, by_id, body, arrays, it)
        if found is None:
            continue
        arr, stores, forms, loads = found
        if not _every_iteration_stores(by_id, head, body, {k for k, _ in stores}):
            continue
        fw, ok = f"fw{head}", f"ok{head}"
        marked = []
        for k, j, lforms in loads:
            if _after_a_store(by_id, head, body, stores, k, j):
                continue
            if _one_step_back(lforms, forms, it, step):
                marked.append((k, j, ("fw", fw, ok)))
        if not marked:
            continue
        types[fw] = (arrays[arr][0],)
        types[ok] = (T.BOOL,)
        resets.setdefault(it, []).append(ok)
        for k, j, reuse in marked + [(k, j, ("fw", fw, ok)) for k, j in stores]:
            b = by_id[k]
            ops = list(b.ops)
            ops[j] = replace(ops[j], reuse=reuse)
            by_id[k] = type(b)(b.id, ops, b.term)
    for k in sorted(by_id):
        b = by_id[k]
        if not any(op.kind == "range" and op.dst in resets for op in b.ops):
            continue
        ops = []
        for op in b.ops:
            ops.append(op)
            if op.kind == "range" and op.dst in resets:
                ops += [Op("copy", ok, (Const(False, T.BOOL),), lineno=op.lineno)
                        for ok in resets[op.dst]]
        by_id[k] = type(b)(b.id, ops, b.term)
    return [by_id[b.id] for b in blocks]


def _step(by_id: dict, it: str, known: dict):
    """The constant step of every setup of iterator `it`, or None."""
    steps = set()
    for b in by_id.values():
        for op in b.ops:
            if op.kind == "range" and op.dst == it:
                x = op.args[2] if len(op.args) == 3 else Const(1, T.INT)
                value = x.value if isinstance(x, Const) else known.get(x)
                if type(value) is not int:
                    return None
                steps.add(value)
    return steps.pop() if len(steps) == 1 else None


def _accesses(loop, by_id, body, arrays, it):
    """(array, [(block, op index)] of its stores, their index forms, [(block, op index,
    index forms)] of its loads) when every store of the loop is into one array at one
    index; else None."""
    stores, forms, arr = [], None, None
    for k in sorted(body):
        for j, op in enumerate(by_id[k].ops):
            if op.kind == "vstore":
                return None     # a slice's elements written (slices.py), any array's
            if op.kind != "store":
                continue
            ndim = arrays[op.args[0]][1]
            f = tuple(loop.affine(x, (k, j)) for x in op.args[1:1 + ndim])
            if arr not in (None, op.args[0]) or None in f or forms not in (None, f):
                return None
            arr, forms = op.args[0], f
            stores.append((k, j))
    if not stores or sum(1 for base, _ in forms if base == ("iter", it)) != 1:
        return None
    loads = []
    for k in sorted(body):
        for j, op in enumerate(by_id[k].ops):
            if op.kind == "load" and op.args[0] == arr:
                f = tuple(loop.affine(x, (k, j)) for x in op.args[1:])
                if None not in f:
                    loads.append((k, j, f))
    return arr, stores, forms, loads


def _every_iteration_stores(by_id, head, body, store_blocks) -> bool:
    """No path from the loop's body back to its head misses the store blocks."""
    start = by_id[head].term[3]
    seen, stack = set(), [start]
    while stack:
        k = stack.pop()
        if k == head:
            return False
        if k in seen or k in store_blocks or k not in body:
            continue
        seen.add(k)
        stack.extend(successors(by_id[k].term))
    return True


def _after_a_store(by_id, head, body, stores, k, j) -> bool:
    """Some path of one iteration reaches the load at (k, j) after a store."""
    if any(sk == k and sj < j for sk, sj in stores):
        return True
    seen = set()
    stack = [s for sk, _ in stores for s in successors(by_id[sk].term)]
    while stack:
        x = stack.pop()
        if x == k:
            return True
        if x in seen or x == head or x not in body:
            continue
        seen.add(x)
        stack.extend(successors(by_id[x].term))
    return False


def _one_step_back(lforms, sforms, it, step) -> bool:
    for (lb, lc), (sb, sc) in zip(lforms, sforms):
        if lb != sb:
            return False
        if lb == ("iter", it):
            if lc + step != sc:
                return False
        elif lc != sc:
            return False
    return True

