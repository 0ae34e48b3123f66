"""Views of the same geometry at every iteration (`for c in coef[::-1]` inside `for k in
range(n)`): checked and measured once, at the C kernel's entry, not once per outer iteration.

A view's check (vcheck) and its length with the first item and stride kept (vlen) have no
effect; when all their operands are constants or variables the nest never assigns, they give
the same at every iteration, so making them once before the kernel's first block gives what
making them at each iteration gives. If one fails there (an index out of range, a zero
step), the kernel hands the whole call to Python (`goto entry`), nothing having run: Python
then raises where the loop does, or not at all after zero trips. So only views that cannot
fail are worth hoisting (every index a slice, whose start and stop Python clamps, with a
nonzero constant step): a failing one would send every call to Python. poly_horner made its
8-coefficient view at each of its points (two slice computations a point, mostly folded by
gcc: 50.3 -> 49.4 instructions a point). Only the C kernel's blocks change: the Python form
makes the view where the loop does, and a hand-over there passes the variables the hoisted
ops set, which hold what the loop's own ops would have set.
"""
from __future__ import annotations

from pijit.loopnest.ir import Block, Const
from pijit.loopnest.slices import Leaf, Slice


def hoist(blocks: list) -> tuple:
    """(blocks without the invariant view ops, those ops once each, in the order met)."""
    assigned = set()
    for b in blocks:
        for op in b.ops:
            if op.kind == "range":
                assigned.update(f"{op.dst}_{p}" for p in ("cur", "stop", "step"))
            elif op.dst is not None:
                assigned.add(op.dst)
        if b.term[0] == "foriter":
            assigned.add(b.term[2])
    hoisted, seen, out = [], set(), []
    for b in blocks:
        keep = []
        for op in b.ops:
            if _invariant(op, assigned):
                key = (op.kind, op.dst, op.kept, str(op))
                if key not in seen:
                    seen.add(key)
                    hoisted.append(op)
            else:
                keep.append(op)
        out.append(Block(b.id, keep, b.term) if len(keep) != len(b.ops) else b)
    if hoisted and any(op.dst is not None and sum(h.dst == op.dst for h in hoisted) > 1
                       for op in hoisted):
        return blocks, []       # one variable set by two different views: left in place
    return out, hoisted


def _invariant(op, assigned: set) -> bool:
    if op.kind not in ("vcheck", "vlen") or op.array is None:
        return False
    (leaf,) = op.array.trees
    if not isinstance(leaf, Leaf) or not all(isinstance(p, Slice) for p in leaf.view.index):
        return False
    for part in leaf.view.index:
        if part.step is not None:
            step = op.args[part.step]
            if not isinstance(step, Const) or step.value == 0:
                return False
    return all(isinstance(x, Const) or x not in assigned for x in op.args)
