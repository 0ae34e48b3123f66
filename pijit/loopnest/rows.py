"""Row pointers of the C kernel's innermost loops: an unchecked element access `A[i, k]` whose
leading indices the loop never assigns addresses its row from a pointer computed once before
the loop, then made opaque to gcc by an empty asm.

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
from pijit.loopnest.ir import Const, predecessors


class Rows:
    """pointers: preheader block id -> [(name, array, leading index operands)]; at:
    (block id, op index) -> the name of the row pointer that access addresses from."""

    def __init__(self, blocks: list, target: dict, arrays: dict, skip: set):
        self.pointers, self.at = {}, {}
        to = lambda k: target.get(k, k)                                 # noqa: E731
        by_id = {b.id: b for b in blocks if b.id not in target}
        graph = {k: _Term(k, b.term, to) for k, b in by_id.items()}
        dom = bounds.dominators(graph, to(0))
        loops = bounds.natural_loops(graph, dom)
        preds = predecessors(graph)
        for head, body in sorted(loops.items()):
            if body & skip or any(h != head and h in body for h in loops):
                continue
            # the pointers are set before the preheader's terminator: not a foriter's,
            # which assigns its element on the way in
            outside = [p for p in preds[head] if p not in body]
            if len(outside) != 1 or outside[0] in skip or \
                    by_id[outside[0]].term[0] not in ("jump", "version", "branch"):
                continue
            assigned = {op.dst for k in body for op in by_id[k].ops if op.dst} | \
                {by_id[k].term[2] for k in body if by_id[k].term[0] == "foriter"}
            names = {}
            for k in sorted(body):
                for j, op in enumerate(by_id[k].ops):
                    if op.kind not in ("load", "store") or op.checked or op.array is not None:
                        continue
                    ndim = arrays[op.args[0]][1]
                    lead = op.args[1:ndim]
                    if ndim < 2 or any(not isinstance(x, Const) and x in assigned
                                       for x in lead):
                        continue
                    key = (op.args[0], tuple(str(x) for x in lead))
                    if key not in names:
                        names[key] = f"pj_row{head}_{len(names)}"
                        self.pointers.setdefault(outside[0], []).append(
                            (names[key], op.args[0], lead))
                    self.at[(k, j)] = names[key]

    def names(self) -> list:
        return [name for rows in self.pointers.values() for name, _, _ in rows]


class _Term:
    """A block seen through lower_c's threading of jump-only blocks."""

    def __init__(self, k, term, to):
        self.id = k
        self.term = (term[0],) + tuple(to(x) if isinstance(x, int) else x for x in term[1:])


def lower(kernel, rows: list) -> list:
    """C: the row pointers a preheader sets (each block's last ops run before its
    terminator), opaque to gcc."""
    out = []
    for name, arr, lead in rows:
        offs = [f"(int64_t){kernel.val(x)} * s_{arr}_{j}" for j, x in enumerate(lead)]
        out += [f"    {name} = d_{arr} + {' + '.join(offs)};",
                f"    __asm__(\"\" : \"+r\"({name}));"]
    return out
