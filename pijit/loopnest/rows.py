"""Row pointers of the C kernel's innermost loops: an unchecked element access `A[i, k]` whose
leading indices are each a variable the loop never assigns (or a constant, as
bounds.Loop.affine reads them) addresses its row from a pointer computed once before the loop,
then made opaque to gcc by an empty asm.

Why opaque: in cholesky_loops' `t -= L[i, k] * L[j, k]` gcc's induction-variable pass saw
both rows derived from one base and addressed L[j, k] as L[i, k]'s pointer minus
(i - j) * stride, recomputed by a mov and a sub at every iteration: 6 instructions an
iteration where 3 do (a load, a multiply from memory, a subtract, the index advance shared by
the unrolled copies). Two unrelated pointers indexed by k give the 3. The addresses are the
same, only how gcc computes them changes; an opaque pointer only weakens what gcc may assume
about aliasing, never strengthens it.

A loop qualifies when it holds no other loop, has one predecessor outside it (the versioned
gate bounds.py puts there), and is run by the kernel's blocks (not lanes.py's or
vectorize.py's loops, lowered their own way).
"""
from __future__ import annotations

from pijit.loopnest import bounds
from pijit.loopnest.ir import Block, predecessors


class Rows:
    """pointers: preheader block id -> loop head -> [(name, array, leading indices as
    bounds.Loop.affine forms (base, c))], set on the preheader's edge to that head (a gate
    may enter two loops: its unit-stride copy and, when its other checks were all dropped,
    the strided one); at: (block id, op index) -> the name of the row pointer that access
    addresses from."""

    def __init__(self, blocks: list, target: dict, arrays: dict, types: dict, skip: set):
        self.pointers, self.at = {}, {}
        to = lambda k: target.get(k, k)                                 # noqa: E731
        by_id = {b.id: Block(b.id, b.ops, (b.term[0],) + tuple(
            to(x) if isinstance(x, int) else x for x in b.term[1:]))
            for b in blocks if b.id not in target}
        dom = bounds.dominators(by_id, to(0))
        loops = bounds.natural_loops(by_id, dom)
        preds = predecessors(by_id)
        for head, body in sorted(loops.items()):
            if body & skip or any(h != head and h in body for h in loops):
                continue
            # the pointers are set before the preheader's terminator: not a foriter's,
            # which assigns its element on the way in
            outside = [p for p in preds[head] if p not in body]
            if len(outside) != 1 or outside[0] in skip or \
                    by_id[outside[0]].term[0] not in ("jump", "version", "branch"):
                continue
            loop = bounds.Loop(by_id, head, body, dom, types)
            names = {}
            for k in sorted(body):
                for j, op in enumerate(by_id[k].ops):
                    if op.kind not in ("load", "store") or op.checked or op.array is not None:
                        continue
                    ndim = arrays[op.args[0]][1]
                    # each leading index a variable the loop never assigns (or a copy of
                    # one): its value before the loop. Not one plus a constant: dtw_distance's
                    # D[i - 1, j] from a pointer of its own took 5% more instructions
                    lead = [loop.affine(x, (k, j)) for x in op.args[1:ndim]]
                    if ndim < 2 or any(f is None or f[0][0] not in ("var", "const") or f[1]
                                       for f in lead):
                        continue
                    key = (op.args[0], tuple(lead))
                    if key not in names:
                        names[key] = f"pj_row{head}_{len(names)}"
                        self.pointers.setdefault(outside[0], {}).setdefault(head, []).append(
                            (names[key], op.args[0], tuple(lead)))
                    self.at[(k, j)] = names[key]

    def names(self) -> list:
        return [name for heads in self.pointers.values() for rows in heads.values()
                for name, _, _ in rows]


def lower(kernel, rows: list) -> list:
    """C: the row pointers set on a preheader's edge into its loop, opaque to gcc."""
    out = []
    for name, arr, lead in rows:
        # set on the edge into the loop only, where its gate (or an enclosing loop's, which
        # bounds.py's copy relies on) proved every such index in range: the product is one
        # the accesses would compute, no overflow (a select of 0 for an index out of range
        # cost cholesky_loops 10%)
        offs = [f"(int64_t)v_{base[1]} * s_{arr}_{j}"
                for j, (base, _) in enumerate(lead) if base[0] == "var"]
        out += [f"    {name} = d_{arr}{''.join(' + ' + o for o in offs)};",
                f"    __asm__(\"\" : \"+r\"({name}));"]
    return out
