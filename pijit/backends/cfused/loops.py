"""Loop nodes whose body is elementwise run as one C kernel: per element, the whole loop.

`for i in range(start, stop, step): x = x * 0.9 + 0.1` updates every element of x on its own,
so the loop may run inside the element loop: each element is loaded once, iterated `trip`
times in registers and stored once, instead of one pass over memory per iteration. The body
qualifies when all its nodes are fusable elementwise ops of the carried values' shape
(invariants may broadcast; the index may appear as a number), the loop writes into no array
and binds no new locals. A loop that runs no iteration, a step of 0, or
floating-point flags hand the call to the loop node itself (its reference semantics: the same
objects back, the same errors and warnings).
"""
from __future__ import annotations

import dataclasses

from pijit.backends.cfused import render
from pijit.graph.fuse import FusionGroup, elementwise_op, unused_values
from pijit.graph.ir import LoopOp, node_refs

LB = 64     # elements per block of the trip loop


def loop_group(node, exact: bool):
    """The FusionGroup of an elementwise loop node's body (all of it, one stage), or None."""
    op = node.fn
    if not isinstance(op, LoopOp) or op.mutates or op.n_last or not op.n_carried:
        return None
    body = op.body
    carried, nexts = body.inputs[:op.n_carried], body.outputs[:op.n_carried]
    shape = body.meta(carried[0]).shape
    if unused_values(body):        # (kept for their warnings: NumPy must compute them)
        return None
    ops = {}
    for n in body.nodes:
        ops[n.out] = elementwise_op(body, n, exact)
        if ops[n.out] is None or n.meta.shape != shape:
            return None
    inputs = []
    for n in body.nodes:
        inputs += [r for r in node_refs(n) if r in body.inputs and r not in inputs]
    for inp, nxt in zip(carried, nexts):
        m = body.meta(inp)
        if nxt.index not in ops or inp not in inputs or not m.is_array or body.meta(nxt) != m:
            return None
    return FusionGroup(0, shape, nodes=list(body.nodes), ops=ops, inputs=inputs,
                       outputs=list(nexts), stage={n.out: 0 for n in body.nodes})


class LoopKernel(render.GroupKernel):
    """Renders a loop node: args (start, stop, step, *initial carried, *invariants)."""

    def __init__(self, node, grp, gid: int):
        op = node.fn
        grp = dataclasses.replace(grp, id=gid)
        super().__init__(op.body, grp)
        body = op.body
        position = {r.index: p for p, r in enumerate(body.inputs)}
        index = body.inputs[op.n_carried].index
        self.argpos = [3 + position[r.index] - (position[r.index] > op.n_carried)
                       for r in grp.inputs]
        self.nargs = 3 + len(body.inputs) - 1
        for i, r in enumerate(grp.inputs):
            if r.index == index:
                self.kinds[i] = "index"
        # input i of carried value k, and the body value that replaces it each iteration
        carried = {r.index: k for k, r in enumerate(body.inputs[:op.n_carried])}
        self.carried_inputs = {carried[r.index]: i for i, r in enumerate(grp.inputs)
                               if r.index in carried}
        self.nexts = body.outputs[:op.n_carried]
        self.tuple_result = True    # like the loop node: the tuple of carried values

    def name(self, ref):
        i = self.index.get(ref.index)
        if i is not None and self.kinds[i] == "index":
            return "it"
        return super().name(ref)

    def prologue(self) -> list:
        L = ["    long long r0, r1, r2;",
             "    if (nargs < 3 || pj_int(args[0], &r0) < 0 || pj_int(args[1], &r1) < 0",
             "            || pj_int(args[2], &r2) < 0 || r2 == 0)",
             "        return pj_fallback(gk, args, nargs);",
             "    const long long trip = r2 > 0 ? (r1 > r0 ? (r1 - r0 + r2 - 1) / r2 : 0)",
             "                                  : (r0 > r1 ? (r0 - r1 - r2 - 1) / -r2 : 0);",
             "    if (trip <= 0)     /* the loop node returns its initial values themselves */",
             "        return pj_fallback(gk, args, nargs);"]
        return L + super().prologue()

    def loop(self, t: int) -> list:
        """Blocks of LB elements: the carried values of a block live in small arrays (L1)
        while the trip loop runs over them, each trip an `omp simd` loop over the block, so
        the vector lanes and independent vectors overlap the latency of the body."""
        lines = []
        for i in self.used_in(t)[0]:
            ct = render.CTYPE[self.dtype(self.grp.inputs[i])]
            lines.append(f"const {ct} *p{i} = (const {ct} *)b{i};")

        carried = [(k, self.carried_inputs[k], render.CTYPE[self.dtype(nxt)])
                   for k, nxt in enumerate(self.nexts)]
        inner = [f"const {ct} x{i} = bk{k}[jj];" for k, i, ct in carried]
        for i in self.used_in(t)[0]:
            if i not in self.carried_inputs.values():
                ct = render.CTYPE[self.dtype(self.grp.inputs[i])]
                inner.append(f"const {ct} x{i} = p{i}[j0 + jj];")
        for node in self.full[t]:
            inner += self.node_stmts(node, self.grp.ops[node.out])
        inner += [f"bk{k}[jj] = v{self.nexts[k].index};" for k, _, _ in carried]
        lines += [f"for (npy_intp j0 = 0; j0 < n; j0 += {LB}) {{",
                  f"    const npy_intp jn = n - j0 < {LB} ? n - j0 : {LB};"]
        for k, i, ct in carried:
            lines += [f"    {ct} bk{k}[{LB}];",
                      "    for (npy_intp jj = 0; jj < jn; jj++)",
                      f"        bk{k}[jj] = p{i}[j0 + jj];"]
        lines += ["    long long it = r0;",
                  "    for (long long tk = 0; tk < trip; tk++, it += r2) {",
                  "        #pragma omp simd",
                  "        for (npy_intp jj = 0; jj < jn; jj++) {",
                  *["            " + s for s in inner],
                  "        }",
                  "    }"]
        for k, _, _ in carried:
            lines += ["    for (npy_intp jj = 0; jj < jn; jj++)",
                      f"        q{k}[j0 + jj] = bk{k}[jj];"]
        return lines + ["}"]
