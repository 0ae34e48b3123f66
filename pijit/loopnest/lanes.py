"""A restarted loop's calls of NumPy's scalar ufunc loops run over a chunk of iterations at
once: the C kernel's blocks and exit_checks.py's restarts -> {loop head: Lanes}, which
lower_c.py runs in phases.

NumPy's float loops of one operand (arcsin, exp, log... by SVML or NumPy's own SIMD code) pay
a whole vector call for one element: np.arcsin's took about 21 ns of route_length's 54 ns per
iteration (its loop with the call against one with a sqrt in its place); run over lanes,
route_length takes 38 ns per iteration. When exit_checks.py restarts the loop from its start
on any hand-over (it stores nothing), its iterations may run out of order, and more than once,
as long as the accumulator is summed once and in order. lower_c then takes up to LANES
iterations (lanes) at a time and runs the loop's straight body for each lane in phases: in
phase p the body stops each lane at its p-th call of a NumPy loop, recording the call's
operand; one call of NumPy's loop then computes that call for every lane (contiguous, n
lanes: its result for each element is the one it gives for one element, which
test_loop_nests_lanes.py checks per ufunc); phase p + 1 runs the body again, the calls before
it taking their results from there (libm's sin and cos, calls.LIBM, too: each lane computes
them in the first phase reaching them). The last phase runs every lane to its end, summing in
order. Everything else before a lane's stop is computed again in each phase, the same
operations on the same values: the same bits.

That holds when each iteration computes its calls' operands from the loop's inputs and its
index alone: the only variable the body assigns that is live at the loop's head is the
accumulator, assigned after the last call (no phase but the last reaches it), and the body,
with the functions inlined into it, runs straight (no branch: every lane meets every call, in
the same order in each phase). A hand-over in any phase restarts the loop, as exit_checks.py
does; the calls' flags are read at its exit.
"""
from __future__ import annotations

from dataclasses import dataclass

from pijit.loopnest import calls
from pijit.loopnest.bounds import dominators, natural_loops

LANES = 64
# the kinds of op a lane's body may hold (no store: exit_checks.py saw to that)
_KINDS = ("copy", "binop", "unop", "cmp", "load", "shape", "call")


@dataclass(frozen=True)
class Lanes:
    order: tuple            # the body's blocks, from the head's successor back to the head
    sites: tuple            # the domain of each call computed over the lanes, in body order

    @property
    def stops(self) -> tuple:
        """The sites NumPy's loop computes (the others are libm's, computed by each lane in
        the first phase reaching them and kept for the later ones): phase q stops the
        lanes at the q-th of these."""
        return tuple(j for j, d in enumerate(self.sites) if d[1:] not in calls.LIBM)

    def phase(self, j: int) -> int:
        """The first phase whose lanes reach site j."""
        return sum(1 for q in self.stops if q < j)


def site(op) -> bool:
    """A call lower_c runs over the lanes: a float ufunc of one float operand of its type, by
    NumPy's loop or libm."""
    if op.domain[:1] != ("ufunc",) or calls.is_direct(op.domain):
        return False
    ins, out = calls._sig_dtypes(op.domain[2])
    return ins == (out,) and out.kind == "f"


def plan(blocks: list, restarts: dict, origin: dict, live_in: dict) -> dict:
    """{head: Lanes} of the restarted loops whose NumPy calls can run over lanes."""
    by_id = {b.id: b for b in blocks}
    dom = dominators(by_id, 0)
    out = {}
    for head, body in natural_loops(by_id, dom).items():
        finite = restarts.get(next(iter(body - {head}), None))
        if finite is None or finite.op != "flags" or by_id[head].ops \
                or any(restarts.get(x) is not finite for x in body - {head}):
            continue
        term = by_id[head].term
        order, k = [], term[3]
        while k != head and k in body and k not in order and by_id[k].term[0] == "jump":
            order.append(k)
            k = by_id[k].term[1]
        if k != head or set(order) != body - {head}:
            continue
        ops = [op for x in order for op in by_id[x].ops]
        sites = []
        last = -1
        for n, op in enumerate(ops):
            found = _sites(op)
            if found is None:
                break
            sites += found
            if found:
                last = n
        else:
            live = live_in[origin.get(head, head)]
            carried = [n for n, op in enumerate(ops) if op.dst in live]
            if any(d[1:] not in calls.LIBM for d in sites) \
                    and all(n > last for n in carried) \
                    and {ops[n].dst for n in carried} <= {finite.args[0]}:
                out[head] = Lanes(tuple(order), tuple(sites))
    return out


def _sites(op):
    """The lane calls of op in the order it runs them (those of an inlined function's
    straight body), or None when the op rules the loop out."""
    if op.kind not in _KINDS or op.array is not None:
        return None
    if op.kind != "call":
        return []
    if op.domain[:1] == ("inline",):
        callee = op.domain[1]
        found = []
        k = callee.blocks[0].id if callee.blocks else None
        seen, walked = set(), []
        by_id = {b.id: b for b in callee.blocks}
        while k is not None:
            if k in seen:
                return None
            seen.add(k)
            walked.append(k)
            for inner in by_id[k].ops:
                more = _sites(inner)
                if more is None:
                    return None
                found += more
            term = by_id[k].term
            if term[0] == "jump":
                k = term[1]
            elif term[0] in ("return", "exit"):
                k = None
            else:
                return None
        # lower_c numbers the calls as inline.lower emits them: in the list's order
        if seen != set(by_id) or [b.id for b in callee.blocks] != walked:
            return None
        return found
    return [op.domain] if site(op) else []
