"""NumPy float checks a later check covers, dropped: `b0 * x[i] + b1 * px - a1 * py` checks
once, at its last operation, instead of at each of its five.

A NumPy float add, subtract or multiply hands over when its result is not finite (Python
then computes it, and NumPy warns); a division also when its divisor is 0, whose quotient is
not finite either (inf, or nan for 0 / 0). Not finite goes on not finite through a later add,
subtract or multiply (either operand) and a division's numerator: inf + 1, inf * 0, nan / 2.
So in a straight run of the C kernel's blocks, an op whose result flows that way into a
later checked op needs no check of its own: that later check fails too, and its hand-over
resumes at the first op of the run, from which Python computes them all again and warns
where plain Python would. The later check may also be a call's that fails on a non-finite
argument (math.floor and int() of a float, which cannot convert it, and the math functions,
which hand over on one): `math.floor((v - lo) / width)` checks once, at the floor, which
resumes at the subtraction. abs() and unary minus keep a value not finite (abs(-inf) is inf,
-nan a nan), so the value they make stays covered as the op's own: in dtw_distance's
`abs(a[i - 1] - b[j - 1]) + min(...)` the sum's check covers the difference. min and max do
not: min(inf, 1.0) is 1.0, and min(1.0, nan) 1.0 (Python keeps the first item unless a later
one compares less). But a min or max of floats, which hands over in the IR (`Op.bails`) and
not in C (lower_c.compare_expr checks only an int operand's exactness), does not end a run.
That holds while Python, resuming there, sees what the first op saw: nothing in between
stores, hands over for another reason, or assigns a variable live at the first op's block.
A run ends before any of those, and after such a call; an op whose result is not covered by
the run's end keeps its check.
"""
from __future__ import annotations

from dataclasses import replace

from pijit.loopnest import types as T
from pijit.loopnest.ir import Const, predecessors

# operand positions through which a non-finite value makes the result non-finite
_PROPAGATES = {"add": (0, 1), "sub": (0, 1), "mul": (0, 1), "truediv": (0,)}
# call domains whose check fails on a non-finite argument (lower_c: `tof` converts a float
# only in (-2**63, 2**63), `math` hands over on a non-finite argument or result)
_COVERING_CALLS = ("tof", "math")
# float ops whose result is not finite when their operand is not
_PASSES = (("call", "abs"), ("unop", "neg"), ("unop", "pos"))


def _checked_float(op, types: dict) -> bool:
    """A NumPy float op whose only hand-over is a non-finite result (truediv: also a zero
    divisor), computed without converting a Python int."""
    if op.kind != "binop" or op.op not in _PROPAGATES or not op.checked \
            or op.domain[:1] != ("f",) or "py" in op.domain:
        return False
    if op.domain[1] == T.F32:
        return not any(_int_beyond_f32(x, types) for x in op.args)
    return True


def _covering_call(op) -> bool:
    """A call whose check fails whenever its argument is not finite (its own check kept)."""
    return op.kind == "call" and op.domain[:1] in [(d,) for d in _COVERING_CALLS] \
        and op.bails and len(op.args) == 1 and isinstance(op.args[0], str)


def _passes(op) -> bool:
    """abs(x), -x or +x of a float, whose value is not finite when x is not."""
    return (op.kind, op.op) in _PASSES and op.domain[:1] == ("f",) \
        and isinstance(op.args[0], str)


def _float_min_max(op, types: dict) -> bool:
    """min or max in floating point of operands with no int member: C compares them as they
    are (no int to check exact), so it does not hand over."""
    return op.kind == "call" and op.op in ("min", "max") and op.domain[:1] == ("cf",) \
        and not any(T.kind(m) == "i" for x in op.args
                    for m in ((x.type,) if isinstance(x, Const) else types[x]))


def _int_beyond_f32(x, types: dict) -> bool:
    """Whether operand x may be a Python int float32 does not hold exactly (a variable with
    an int member, a constant beyond 2**24): the C kernel hands over at such an op whatever
    its float check (lower_c.py), so its check cannot be dropped, nor cover the unchecked
    ops before it (the hand-over would resume after them)."""
    if isinstance(x, Const):
        return x.type is T.INT and abs(x.value) > 2**24
    return any(m is T.INT for m in types[x])


def _chains(blocks: dict) -> list:
    """Runs of blocks each ending in a jump to the next, the next having no other
    predecessor."""
    preds = predecessors(blocks)

    def follows(k):
        (p,) = preds[k] if len(preds[k]) == 1 else (None,)
        return p is not None and blocks[p].term == ("jump", k) and p != k

    chains = []
    for k in sorted(blocks):
        if follows(k):
            continue
        chain = [k]
        while blocks[chain[-1]].term[0] == "jump":
            nxt = blocks[chain[-1]].term[1]
            if not follows(nxt) or nxt in chain:
                break
            chain.append(nxt)
        chains.append(chain)
    return chains


class _Run:
    """The checked float ops of one run from its first op (at `start`), and which of their
    results are not covered yet (class: the op producing it -> the variables holding it)."""

    def __init__(self, start: int):
        self.start = start
        self.members = []           # (block, op index) of the checked float ops
        self.open = {}              # producer (block, op index) -> variables holding it

    def holders(self, x):
        return [p for p, held in self.open.items() if x in held]

    def assign(self, var):
        for held in self.open.values():
            held.discard(var)


def defer(blocks: list, types: dict, origin: dict, live_in: dict) -> list:
    """blocks (the C kernel's, any ids) with the checks later ones cover dropped
    (op.checked False) and the kept checks of such a run resuming at its first op's block
    (op.resume); origin: kernel block -> the nest block a hand-over there resumes at;
    live_in: the nest's Nest.live_in()."""
    by_id = {b.id: b for b in blocks}
    ops = {b.id: list(b.ops) for b in blocks}

    def finish(run):
        if run is None:
            return
        covered = [m for m in run.members if m not in run.open
                   and _checked_float(ops[m[0]][m[1]], types)]
        if not covered:
            return
        resume = origin.get(run.start, run.start)
        for bid, j in run.members:
            op = ops[bid][j]
            ops[bid][j] = replace(op, checked=False) if (bid, j) in covered else \
                replace(op, resume=resume)

    for chain in _chains(by_id):
        run = None
        for bid in chain:
            for j, op in enumerate(ops[bid]):
                if _checked_float(op, types):
                    live = live_in[origin.get(bid, bid)]
                    if run is not None and op.dst in live_in[origin.get(run.start,
                                                                        run.start)]:
                        finish(run)
                        run = None
                    if run is None:
                        if op.dst in live:
                            continue
                        run = _Run(bid)
                    for pos in _PROPAGATES[op.op]:
                        for p in run.holders(op.args[pos]):
                            del run.open[p]             # covered by this op's check
                    run.assign(op.dst)
                    run.members.append((bid, j))
                    run.open[(bid, j)] = {op.dst}
                    continue
                if run is None:
                    continue
                if _covering_call(op) and op.dst not in live_in[origin.get(run.start,
                                                                            run.start)]:
                    for p in run.holders(op.args[0]):
                        del run.open[p]
                    run.members.append((bid, j))        # kept, resuming at the run's start
                    finish(run)
                    run = None
                    continue
                if op.kind in ("store", "range") or op.bails and not _float_min_max(op, types) \
                        or op.dst in live_in[origin.get(run.start, run.start)]:
                    finish(run)
                    run = None
                    continue
                if op.dst is not None:
                    copied = run.holders(op.args[0]) if op.kind == "copy" \
                        and isinstance(op.args[0], str) or _passes(op) else []
                    run.assign(op.dst)
                    for p in copied:
                        run.open[p].add(op.dst)
        finish(run)
    return [type(b)(b.id, ops[b.id], b.term) for b in blocks]
