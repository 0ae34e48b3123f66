"""A loop accumulating a NumPy float checks it once, at the loop's exit: the C kernel's
blocks -> the same blocks, the accumulator's check moved out of the loop.

`s += L[i, j] * x[j]` checks that each new s is finite (NumPy warns where a finite sum
overflows, and the kernel hands over there so Python warns). But a non-finite s stays
non-finite through every later `s + t`, `s - t` and `s * t` (inf + 1, nan * 0, inf - inf),
so when the loop ends with s finite, no iteration made it non-finite. The check then
runs once at the exit; when it fails, the variables the loop assigned get back the values
they had at its start (saved where its iterator is set up) and the kernel hands over there:
Python runs the whole loop again and warns at the iteration plain Python does.

That is exact when running the loop again from its start does what running it once did: the
loop stores nothing (memory is as it was at the start), has no inner loop and no exit but
its head's (a `break` or a `raise` would leave it past the check), its iterator
cannot overflow, and its only float check left (after float_checks.py) is the accumulator's.
Branches in the body may skip the accumulator's op (`if j != i: s -= A[i, j] * x[j]`): a
path that does leaves it as it was, non-finite or not. Any
other hand-over in the loop (an index out of bounds, `x[indices[k]]`) restores the saved
variables and hands over at the loop's start too: Python then warns for the sum where plain
Python does, then fails where the kernel did.

The same restart covers the loop's calls of NumPy's scalar ufunc loops (calls.py), which
otherwise read the floating-point flags after each call (a flag read costs more than a libm
sin): in such a loop they leave the flags unread, and the exit reads them once (sticky, they
hold what every call of every iteration raised); a flag that NumPy would warn or raise for
makes Python run the loop again from its start, calling each ufunc itself.
"""
from __future__ import annotations

from dataclasses import replace

from pijit.loopnest import calls
from pijit.loopnest.bounds import dominators, natural_loops
from pijit.loopnest.float_checks import _checked_float
from pijit.loopnest.ir import Block, Op, reverse_postorder, successors

_ABSORBING = {"add": (0, 1), "sub": (0, 1), "mul": (0, 1)}


def defer(blocks: list, types: dict, origin: dict, live_in: dict, advances) -> tuple:
    """(blocks with each accumulator's check moved to its loop's exit (a "finite" op),
    {block of such a loop: its finite op}, whose hand-overs restore and resume as it does).
    advances(it, var): a foriter advancing iterator `it` cannot overflow (ranges.py); origin
    and live_in as for float_checks.defer; `types` gets the saved variables."""
    by_id = {b.id: b for b in blocks}
    restarts = {}
    dom = dominators(by_id, 0)
    loops = natural_loops(by_id, dom)
    for head, body in sorted(loops.items()):
        found = _accumulator(by_id, head, body, loops, dom, types, advances)
        if found is None:
            continue
        (k, j), acc, setup = found
        it = by_id[head].term[1]
        resume = origin.get(setup, setup)
        steps = [x for x in body if by_id[x].term[0] == "foriter"]   # the head, a zip's
        assigned = {op.dst for x in body for op in by_id[x].ops if op.dst is not None}
        assigned.update(by_id[x].term[2] for x in steps)
        saved = sorted(v for v in assigned if v in live_in[resume])
        pairs = []
        for v in saved:
            types[f"{v}__at{head}"] = types[v]
            pairs += [v, f"{v}__at{head}"]
        # the op runs unchecked; the exit checks the accumulator
        b = by_id[k]
        ops = list(b.ops)
        ops[j] = replace(ops[j], checked=False)
        by_id[k] = Block(b.id, ops, b.term)
        sb = by_id[setup]
        at = next(n for n, op in enumerate(sb.ops) if op.kind == "range" and op.dst == it)
        saves = [Op("copy", f"{v}__at{head}", (v,), lineno=sb.ops[at].lineno) for v in saved]
        by_id[setup] = Block(sb.id, sb.ops[:at + 1] + saves + sb.ops[at + 1:], sb.term)
        term = by_id[head].term
        check = max(by_id) + 1
        # its NumPy calls' flags are read here too (op "flags"), once for the whole loop
        flags = "flags" if calls.raise_flags([by_id[x] for x in body]) else ""
        finite = Op("finite", None, (acc, *pairs), op=flags, lineno=ops[j].lineno,
                    resume=resume)
        by_id[check] = Block(check, [finite], ("jump", term[4]))
        for x in steps:
            by_id[x] = Block(x, by_id[x].ops, by_id[x].term[:4] + (check,))
        restarts.update({x: finite for x in body if x != head})
    return [by_id[k] for k in sorted(by_id)], restarts


def _derived(later: list, at: int, op, acc):
    """The ops before later[at] (op) through which an operand of op comes from acc by
    float +, - and * alone (`p = p * x + c`: a non-finite p makes p * x, then the sum,
    non-finite), each read only by the next; [] when acc is op's operand itself; None when
    no operand comes from acc so."""
    before = {o.dst: o for o in later[:at] if o.dst is not None}
    chain, x = [], op
    while not any(x.args[p] == acc for p in _ABSORBING[x.op]):
        nxt = [before.get(x.args[p]) for p in _ABSORBING[x.op]]
        nxt = [o for o in nxt if o is not None and o.kind == "binop" and
               o.op in _ABSORBING and o.domain[:1] == ("f",)]
        if len(nxt) != 1 or sum(nxt[0].dst in o.args for o in later) != 1 or nxt[0] in chain:
            return None
        x = nxt[0]
        chain.append(x)
    return chain


def _zip_step(by_id, k, head, body, dom, setup, advances) -> bool:
    """Whether block k is a later step of the head's zip (recognise's chain of foriters, one
    per leaf): no ops, leaving to the head's exit, its iterator set up between the head's
    setup and the head (so a restart at that setup sets it up again) and unable to
    overflow. Its exhaustion then ends the loop as the head's does, through the check."""
    b, exit_ = by_id[k], by_id[head].term[4]
    t = b.term
    if b.ops or t[4] != exit_ or t[3] not in body or not advances(t[1], t[2]):
        return False
    setups = [x.id for x in by_id.values() for op in x.ops if op.kind == "range" and
              op.dst == t[1]]
    return len(setups) == 1 and setups[0] not in body and setups[0] in dom[head] and \
        setup in dom[setups[0]]


def _accumulator(by_id, head, body, loops, dom, types, advances):
    """((block, op index) of the accumulator's op, the accumulator, the block setting up
    the loop's iterator) of a loop whose check can move to its exit, else None."""
    term = by_id[head].term
    if term[0] != "foriter" or by_id[head].ops or any(h != head and h in body for h in loops):
        return None
    it = term[1]
    if not advances(it, term[2]):
        return None
    # the setup of this copy of the loop (bounds.py copies an outer loop's body with it)
    setups = [b.id for b in by_id.values() for op in b.ops
              if op.kind == "range" and op.dst == it and b.id in dom[head]]
    if len(setups) != 1 or setups[0] in body:
        return None
    # blocks from the body's entry back to the head, in an order where each follows its
    # predecessors (no inner loop: the body is acyclic), joined by jumps and branches
    seen = [k for k in reverse_postorder(by_id, term[3]) if k in body and k != head]
    if set(seen) | {head} != body:
        return None
    for k in seen:
        t = by_id[k].term
        if t[0] == "foriter":
            if not _zip_step(by_id, k, head, body, dom, setups[0], advances):
                return None
        elif t[0] not in ("jump", "branch") or any(s not in body for s in successors(t)):
            return None         # a break or a raise leaves the loop past the exit's check
    checked = []
    for x in seen:
        for n, op in enumerate(by_id[x].ops):
            if op.kind in ("store", "vstore", "range", "finite", "append"):
                return None
            if _checked_float(op, types):
                checked.append((x, n, op))
    if len(checked) != 1:
        return None
    x, n, op = checked[0]
    if op.op not in ("add", "sub", "mul"):
        return None
    # acc = op(acc, ...) or t = op(acc, ...); ...; acc = t, acc assigned nowhere else
    dsts = {o.dst: (y, m) for y in seen for m, o in enumerate(by_id[y].ops)}
    later = [o for y in seen for o in by_id[y].ops]
    at = later.index(op)
    acc = op.dst
    for o in later[at + 1:]:
        if o.kind == "copy" and o.args == (op.dst,):
            acc = o.dst
            break
    chain = _derived(later, at, op, acc) if acc is not None else None
    if chain is None:
        return None
    defs = [o for o in later if o.dst == acc]
    if len(defs) != 1 or acc not in dsts:
        return None
    if any(acc in o.args for o in later[:at] if o not in chain) or any(
            acc in o.args for o in later[at + 1:] if o is not defs[0]) or any(
            by_id[y].term[:2] == ("branch", acc) for y in seen):
        return None             # read before the op, or after it: a later read sees inf
    return (x, n), acc, setups[0]
