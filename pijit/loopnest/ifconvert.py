"""Data-dependent branches of a nest's C code made branch-free: both sides of a small `if`
run, and the side the condition picks is kept by selects.

A branch whose two sides are short chains of blocks meeting at one block (a diamond, or a
triangle when a side is empty) becomes one block running both sides' ops, each side into
variables of its own, then `x = select(c, x of the true side, x of the false side)` for
every variable a side assigns. A branch on data (`if a[i] > 0.5`, `if crc & 0x8000`)
mispredicts about every other time on random data; the selects cost a few cycles instead.
A branch on loop indices and inputs alone stays a branch: it is predictable.

Running a side the condition does not pick must change nothing and must never hand over:
the ops that can fail (an overflow, a zero divisor, an index out of bounds, a non-finite
NumPy float...) check before they compute, and a failed check in the merged block jumps to
a copy of the original branch instead of handing over. Nothing is written before that
jump (the sides write only their own variables, a store both sides end with, to the same
element, is sunk after every other check, and the selects, which cannot fail, come last), so
the original branch then runs the side the condition picks from the same state, and hands
over exactly where it did. Ops with other effects (stores before a side's end, range
setups), and loops or branches inside a side, keep the branch as it is.
"""
from __future__ import annotations

from dataclasses import replace

from pijit.loopnest import types as T
from pijit.loopnest.ir import Block, Op, predecessors

MAX_OPS = 16            # ops of both sides together: beyond that, a mispredict is cheaper
_PURE = ("copy", "binop", "unop", "cmp", "load", "shape")


def _speculable(op: Op) -> bool:
    """Whether op may run when its side is not taken: no effect but its destination (every
    check it makes comes before what it computes), and cheap (no libm call, NumPy loop or
    inlined function)."""
    if op.kind in _PURE:
        return True
    return op.kind == "call" and op.domain[0] not in ("math", "ufunc", "inline")


def _side(blocks: dict, preds: dict, start: int) -> tuple:
    """(blocks of the chain from start, the block it ends at): blocks with one predecessor
    each, ending in a plain jump; the first other block ends the chain."""
    chain, k = [], start
    while len(preds[k]) == 1 and blocks[k].term[0] == "jump" and k not in chain \
            and len(chain) < MAX_OPS:
        chain.append(k)
        k = blocks[k].term[1]
    return chain, k


def _sunk_store(t_ops: list, f_ops: list, types: dict):
    """(true side's ops, false side's ops, (the stores both end with, the type of the value
    stored)) when both end with a store into the same element (same array, index operands
    neither side assigns, values one C variable can hold); else (t_ops, f_ops, None)."""
    if not t_ops or not f_ops:
        return t_ops, f_ops, None
    st, sf = t_ops[-1], f_ops[-1]
    if st.kind != "store" or sf.kind != "store" or st.op != sf.op \
            or st.args[:-1] != sf.args[:-1] or st.reuse != sf.reuse:
        return t_ops, f_ops, None
    assigned = {op.dst for op in t_ops + f_ops}
    if any(x in assigned for x in st.args[1:-1]):
        return t_ops, f_ops, None
    if any(op.kind == "load" and op.args[0] == st.args[0] for op in t_ops + f_ops):
        # a side reading the array it stores into: a table each element of which is
        # computed from those before (lcs_table's dp[i, j] from dp[i, j - 1]); the select
        # would put every iteration on the chain of store, reload and compare through
        # memory, which the branch cuts on the side that does not read the previous element
        # (measured: lcs_table 1.5-2x slower with the selects; and still 1.7x slower when
        # forward.py keeps dp[i, j - 1] in a variable: 0.165 ms against 0.098 ms, the
        # branch predicted well enough on this machine)
        return t_ops, f_ops, None
    try:
        vtype = T.vt(*_type(types, st.args[-1]), *_type(types, sf.args[-1]))
    except T.Unsupported:           # an np.int64 on one side, a float on the other...
        return t_ops, f_ops, None
    if len(vtype) > 1 and T.carrier(vtype) != T.dtype_of(vtype[0]):
        return t_ops, f_ops, None   # two families (a Python int, an int32): kept a branch
    return t_ops[:-1], f_ops[:-1], (st, sf, vtype)


class _Renamer:
    """One side's ops writing variables of its own (`x` -> `x__s<block>t`)."""

    def __init__(self, types: dict, suffix: str):
        self.types, self.suffix, self.names = types, suffix, {}

    def arg(self, x):
        return self.names.get(x, x) if isinstance(x, str) else x

    def op(self, op: Op) -> Op:
        args = tuple(self.arg(x) for x in op.args)
        dst = op.dst
        if dst is not None:
            new = f"{dst}__{self.suffix}"
            self.types[new] = self.types[dst]
            self.names[dst] = new
            dst = new
        return replace(op, dst=dst, args=args)


def convert(blocks: list, types: dict) -> list:
    """blocks (the C kernel's, after bounds.py and cse.py) with every small data-dependent
    branch made selects; `types` gets the variables of the sides. New blocks: the merged one
    (terminator ("select", join, fallback)) and the fallback (the original branch)."""
    by_id = {b.id: b for b in blocks}
    # a branch on indices alone (`if j != i`) is predictable: kept, so a select does not
    # lengthen a chain through the variables it picks (and exit_checks.py may apply)
    data = on_data(blocks)
    done = {b.id for b in blocks if b.term[0] == "branch" and b.term[1] not in data}
    while True:
        preds = predecessors(by_id)
        found = None
        for k in sorted(by_id):
            b = by_id[k]
            if b.term[0] != "branch" or k in done:
                continue
            found = _diamond(by_id, preds, b, types)
            done.add(k)
            if found is not None:
                break
        if found is None:
            break
        head, t_chain, f_chain, join = found
        done.add(_merge(by_id, types, head, t_chain, f_chain, join))
    return [by_id[k] for k in sorted(by_id)]


def on_data(blocks: list) -> set:
    """The variables whose value may depend on array data (an element loaded, a slice's dot
    or sum, a call's result but a truth test's), through any chain of assignments."""
    data, changed = set(), True
    while changed:
        changed = False
        for b in blocks:
            for op in b.ops:
                if op.dst is None or op.dst in data:
                    continue
                source = op.kind in ("load", "vdot", "vsum") or \
                    op.kind == "call" and op.domain[:1] != ("truth",)
                if source or any(isinstance(x, str) and x in data for x in op.args):
                    data.add(op.dst)
                    changed = True
    return data


def _diamond(by_id: dict, preds: dict, head: Block, types: dict):
    """(head, true chain, false chain, join) of a branch both of whose sides can be run
    together, or None."""
    _, cond, t0, f0 = head.term
    t_chain, t_end = _side(by_id, preds, t0)
    f_chain, f_end = _side(by_id, preds, f0)
    if t_end != f_end or t_end == head.id or not (t_chain or f_chain):
        return None
    t_ops = [op for k in t_chain for op in by_id[k].ops]
    f_ops = [op for k in f_chain for op in by_id[k].ops]
    if len(t_ops) + len(f_ops) > MAX_OPS:
        return None
    t_ops, f_ops, _ = _sunk_store(t_ops, f_ops, types)
    if not all(_speculable(op) for op in t_ops + f_ops):
        return None
    return head, t_chain, f_chain, t_end


def _merge(by_id: dict, types: dict, head: Block, t_chain: list, f_chain: list,
           join: int) -> int:
    """Replace head's branch by the merged block; the fallback's id."""
    _, cond, t0, f0 = head.term
    base = max(by_id) + 1
    merged, fallback = base, base + 1
    t_ops, f_ops, store = _sunk_store([op for k in t_chain for op in by_id[k].ops],
                                      [op for k in f_chain for op in by_id[k].ops], types)
    ops = []
    if any(op.dst == cond for op in t_ops + f_ops):
        # a side assigns the condition (`if flag: flag = False`): its select would change
        # it before the selects after it (and its own tag's) read it; they pick by a copy
        held = f"{cond}__s{merged}c"
        types[held] = types[cond]
        ops.append(Op("copy", held, (cond,), lineno=head.ops[-1].lineno if head.ops else None))
        cond = held
    sides = _Renamer(types, f"s{merged}t"), _Renamer(types, f"s{merged}f")
    ops += [sides[0].op(op) for op in t_ops] + [sides[1].op(op) for op in f_ops]
    if store is not None:
        # before the selects: its check failing runs the branch again from the state it
        # ran from (after them, `s = s + x; out[i] = s` added x twice)
        st, sf, vtype = store
        vt, vf = sides[0].arg(st.args[-1]), sides[1].arg(sf.args[-1])
        value = f"sv__s{merged}"
        types[value] = vtype
        ops.append(Op("select", value, (cond, vt, vf), lineno=st.lineno))
        ops.append(replace(st, args=st.args[:-1] + (value,),
                           checked=st.checked or sf.checked))
    for x in sorted(set(sides[0].names) | set(sides[1].names)):
        ops.append(Op("select", x, (cond, sides[0].arg(x), sides[1].arg(x)),
                      lineno=head.ops[-1].lineno if head.ops else None))
    by_id[merged] = Block(merged, ops, ("select", join, fallback))
    by_id[fallback] = Block(fallback, [], head.term)
    by_id[head.id] = Block(head.id, head.ops, ("jump", merged))
    return fallback


def _type(types: dict, x) -> tuple:
    return (x.type,) if not isinstance(x, str) else types[x]
