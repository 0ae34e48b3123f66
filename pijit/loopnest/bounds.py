"""Bounds checks a loop's C code can skip, by versioning: where every index of an element
access in a loop is provably `base + c` for a base the loop cannot change (a variable it
never assigns, or the element of a range it iterates, set up before it), the loop's entry
checks once that each such index stays in [0, n) for every value the base can take there;
when it does the loop runs as a copy whose accesses are unchecked, else as it was.

An innermost loop has a second unchecked copy, entered when the arrays it accesses also have
a last-axis stride of their itemsize (checked at the entry too): it addresses that axis by a
constant (scaled-index addressing, no multiply per access); other strides (a column, a[::2],
a[::-1], F order) run the first copy. Its accesses by an index it cannot prove in range
(hist_floor's `counts[k]`, csr_matvec's `x[col[j]]`) keep their bounds checks there and
address by the itemsize as well, their arrays' strides checked at the entry like the others'
(-4% of hist_floor's kernel instructions, -3% of csr_matvec's); such an array of another
stride (a lookup table that is a column) then sends the loop to the first copy with the
others. The unit-stride copy's entry also checks that the memory each array it stores into
spans is apart from every other array's it accesses, and its stores say so (Op.apart): an
element of another array it loaded stays valid across them (cse.py), where two arrays could
otherwise be views of one buffer (`y[i] = ...; prev = x[i]` reads x[i] once). Arrays that do
overlap (the same array twice, views shifted by an element) run the first copy.

An outer loop's unchecked copy holds its inner loops' gates; there they leave out the checks
of indices the outer loop's entry already proved for every iteration (an index the outer loop
never assigns, or its element plus a constant, on the same array and axis), and of an inner
range of step 1 whose start and last element those proved indices bound (`for k in range(j)`
under `L[j, j]`: 0 <= k < j < n). The outer loop's entry also checks, once, what its inner
loops' entries would check at each of its passes from values it never changes: an index
held in a variable it never assigns (`A[r + 1, k]`), and the stop of an inner range whose
start its own checks bound below (lu_nopivot's `range(k + 1, n)`: n - 1 < n of the axis).

A failed check changes nothing: the checked loop hands over to Python at the access that
goes out of bounds (an IndexError there, or a negative index Python wraps), with the writes
before it done, as without versioning. The copies' hand-overs name the blocks they were
copied from, so the Python form (which never sees the copies) resumes where plain Python
would be. Loops are versioned innermost first; an outer loop's copy holds its inner loops'
two versions. The copies are bounded (MAX_BLOCKS) so a deep nest cannot blow up the C.
"""
from __future__ import annotations

from dataclasses import replace

from pijit.loopnest import types as T
from pijit.loopnest.ir import Block, Const, predecessors, successors

MAX_GROWTH = 4                 # versioned blocks at most 4x the nest's, ...
MIN_BLOCKS = 256               # ... or this many


def dominators(blocks: dict, entry: int) -> dict:
    """Block id -> the set of blocks dominating it (reachable blocks only)."""
    reach, stack = set(), [entry]
    while stack:
        k = stack.pop()
        if k not in reach:
            reach.add(k)
            stack.extend(successors(blocks[k].term))
    preds = predecessors(blocks)
    dom = {k: set(reach) for k in reach}
    dom[entry] = {entry}
    changed = True
    while changed:
        changed = False
        for k in reach - {entry}:
            ps = [dom[p] for p in preds[k] if p in reach]
            new = set.intersection(*ps) | {k} if ps else {k}
            if new != dom[k]:
                dom[k] = new
                changed = True
    return dom


def natural_loops(blocks: dict, dom: dict) -> dict:
    """Loop header -> the blocks of its natural loop (its back edges' sources merged)."""
    preds = predecessors(blocks)
    loops = {}
    for k in dom:
        for s in successors(blocks[k].term):
            if s in dom[k]:                     # k -> s is a back edge
                body = loops.setdefault(s, {s})
                stack = [k]
                while stack:
                    x = stack.pop()
                    if x not in body:
                        body.add(x)
                        stack.extend(p for p in preds[x] if p in dom)
    return loops


class Loop:
    """The index forms of one loop's accesses (affine); forward.py reads them too."""

    def __init__(self, blocks, head, body, dom, types, at_entry=True):
        """at_entry: an ("iter", it) base only for iterators set up once, in a block
        dominating the loop (their range is checked there); else for any set up outside it."""
        self.blocks, self.body, self.dom, self.types = blocks, body, dom, types
        self.defs = {}                  # variable -> [(block, op index or None: terminator)]
        # iterators set up (by range ops) only before the loop, on every path into it
        setups = {}
        for b in blocks.values():
            for op in b.ops:
                if op.kind == "range":
                    setups.setdefault(op.dst, set()).add(b.id)
        self.outer = {it for it, ks in setups.items() if not ks & body and
                      (not at_entry or len(ks) == 1 and ks <= dom.get(head, set()))}
        for k in body:
            b = blocks[k]
            for j, op in enumerate(b.ops):
                if op.dst is not None and op.kind != "range":
                    self.defs.setdefault(op.dst, []).append((k, j))
            if b.term[0] == "foriter":
                self.defs.setdefault(b.term[2], []).append((k, None))
        self.preds = predecessors(blocks)

    def before(self, d, at) -> bool:
        """Def position d runs before position `at` on every path to it."""
        (bd, jd), (bu, ju) = d, at
        if bd == bu:
            return jd is not None and (ju is None or jd < ju)
        return bd in self.dom[bu]

    def affine(self, x, at):
        """(base, c): x at position `at` (block, op index) is base + c, base a Const 0, an
        ("var", v) the loop never assigns or an ("iter", it) range's element; else None."""
        if isinstance(x, Const):
            if x.type is not T.INT or isinstance(x.value, bool):
                return None
            return ("const",), int(x.value)
        if any(T.kind(m) != "i" for m in self.types[x]):
            return None
        defs = self.defs.get(x, [])
        if not defs:
            return ("var", x), 0
        if len(defs) != 1 or not self.before(defs[0], at):
            return None
        bd, jd = defs[0]
        if jd is None:                  # the element a foriter binds on its body edge
            term = self.blocks[bd].term
            body = term[3]
            if term[1] not in self.outer or self.preds[body] != [bd] \
                    or body not in self.dom[at[0]]:
                return None
            return ("iter", term[1]), 0
        op = self.blocks[bd].ops[jd]
        if op.kind == "copy":
            return self.affine(op.args[0], (bd, jd))
        if op.kind == "binop" and op.op in ("add", "sub") and op.domain[0] in ("i64", "int"):
            x0, x1 = op.args
            if isinstance(x1, Const) and x1.type is T.INT:
                inner = self.affine(x0, (bd, jd))
                if inner is not None:
                    return inner[0], inner[1] + (x1.value if op.op == "add" else -x1.value)
            if op.op == "add" and isinstance(x0, Const) and x0.type is T.INT:
                inner = self.affine(x1, (bd, jd))
                if inner is not None:
                    return inner[0], inner[1] + x0.value
        return None


def _checks(loop: Loop, arrays: dict) -> tuple:
    """({(block, op index)} of the accesses provably in bounds, the checks proving them:
    (base, c, array, axis), and the checks (("unit",), 0, array, last axis) that each array
    accessed, provably in bounds or not, has a last-axis stride of its itemsize)."""
    proven, checks, units = set(), set(), set()
    for k in loop.body:
        for j, op in enumerate(loop.blocks[k].ops):
            if op.kind not in ("load", "store") or not op.checked:
                continue
            ndim = arrays[op.args[0]][1]
            units.add((("unit",), 0, op.args[0], ndim - 1))
            forms = [loop.affine(x, (k, j)) for x in op.args[1:1 + ndim]]
            if any(f is None or abs(f[1]) >= 2**62 for f in forms):
                continue
            proven.add((k, j))
            checks.update((base, c, op.args[0], axis) for axis, (base, c) in enumerate(forms))
    return proven, tuple(sorted(checks, key=str)), tuple(sorted(units, key=str))


def _apart(loop: Loop) -> dict:
    """Array a loop stores into -> the other arrays it loads or stores (whose memory its
    unit-stride copy's entry checks to be apart from the first's)."""
    stored, seen = set(), set()
    for k in loop.body:
        for op in loop.blocks[k].ops:
            if op.kind in ("load", "store"):
                seen.add(op.args[0])
                if op.kind == "store":
                    stored.add(op.args[0])
    return {a: tuple(sorted(seen - {a})) for a in stored if seen - {a}}


def _disjoint(apart: dict) -> tuple:
    """The checks ((disjoint, a, b), 0, None, None) that arrays a and b span bytes apart,
    for each pair _apart relates."""
    pairs = {tuple(sorted((a, b))) for a, others in apart.items() for b in others}
    return tuple((("disjoint", a, b), 0, None, None) for a, b in sorted(pairs))


def _range_op(loop: Loop, k: int, it: str):
    """(block, op index) of the range op creating iterator `it` just before gate block k: the
    last op of the block that the chain of gates ending at k starts from; None when the gate
    is not entered that way (the iterator could then have moved)."""
    p = k
    while True:
        preds = loop.preds[p]
        if len(preds) != 1:
            return None
        p = preds[0]
        b = loop.blocks[p]
        if b.ops or b.term[0] != "version":
            break
    if b.term[0] != "jump" or not b.ops or b.ops[-1].kind != "range" or b.ops[-1].dst != it:
        return None
    return p, len(b.ops) - 1


def _range_needs(loop: Loop, k: int, it: str, c: int, arr: str, axis: int, made: set):
    """The checks `loop`'s entry must make for every element of the fresh range iterator
    `it`, plus c, to be in [0, n) of arr's axis: () when the checks it made already do, None
    when none it could make do. A step of 1 whose start + c is at or above an index that
    entry proved (or a constant >= 0) and whose stop - 1 + c is at or below one: cholesky_
    loops' `for k in range(j)` under `L[j, j]`. A stop the loop never changes (lu_nopivot's
    `range(k + 1, n)`: n) is checked there, once, as the index stop - 1 + c: a range of no
    elements accesses nothing; else start <= last keeps both ends in [0, n). Such a check
    failing only runs the loop checked."""
    at = _range_op(loop, k, it)
    if at is None:
        return None
    args = loop.blocks[at[0]].ops[at[1]].args
    if len(args) == 3 and not (isinstance(args[2], Const) and args[2].type is T.INT
                               and args[2].value == 1 and not isinstance(args[2].value, bool)):
        return None
    start = loop.affine(args[0], at) if len(args) > 1 else (("const",), 0)
    stop = loop.affine(args[1] if len(args) > 1 else args[0], at)
    if start is None or stop is None:
        return None
    low = start[1] + c >= 0 if start[0] == ("const",) else \
        any(m[0] == start[0] and m[1] <= start[1] + c and m[2:] == (arr, axis) for m in made)
    if not low:
        return None
    if any(m[0] == stop[0] and m[1] >= stop[1] - 1 + c and m[2:] == (arr, axis)
           for m in made):
        return ()
    if stop[0][0] == "iter" or abs(stop[1] - 1 + c) >= 2**62:
        return None
    return ((stop[0], stop[1] - 1 + c, arr, axis),)


def _hoisted(loop: Loop, made: set) -> set:
    """Checks for `loop`'s entry that leave out checks its inner loops' entries make at
    every pass: an index the loop never changes (held in a variable it never assigns, or
    computed from one), and the stop of an inner range (_range_needs)."""
    out = set()
    for k in loop.body:
        term = loop.blocks[k].term
        if term[0] != "version":
            continue
        for base, c, arr, axis in term[1]:
            if base[0] == "var":
                form = loop.affine(base[1], (k, None))
                if form is not None and form[0][0] != "iter" and abs(form[1] + c) < 2**62:
                    out.add((form[0], form[1] + c, arr, axis))
            elif base[0] == "iter":
                out.update(_range_needs(loop, k, base[1], c, arr, axis, made) or ())
    return out - made


def _implied_dropped(loop: Loop, k: int, term: tuple, checks: tuple) -> tuple:
    """The terminator of an inner loop's gate (block k) in the unchecked copy of `loop`, less
    the checks `loop`'s entry made: an index the outer loop does not change, or its iterator's
    element, checked again at every entry of the inner loop (cholesky_loops' L[i, k] checked
    i at each (i, j)), and an inner range whose ends those checks bound (_range_needs); no
    check left, a jump to the unchecked copy."""
    made = set(checks)
    kept = []
    for check in term[1]:
        base, c, arr, axis = check
        if base[0] == "var":
            form = loop.affine(base[1], (k, None))
            if form is not None and (form[0], form[1] + c, arr, axis) in made:
                continue
        elif base[0] == "const" and check in made:
            continue
        elif base[0] == "iter" and _range_needs(loop, k, base[1], c, arr, axis, made) == ():
            continue
        kept.append(check)
    return ("version", tuple(kept)) + term[2:] if kept else ("jump", term[2])


def version(nest) -> tuple:
    """(blocks, origin): the nest's blocks with its loops versioned, and new block id -> the
    nest's block a hand-over there resumes at (copies only)."""
    blocks = {b.id: b for b in nest.blocks}
    origin = {}
    done = set()
    limit = max(MIN_BLOCKS, MAX_GROWTH * len(blocks))
    while True:
        dom = dominators(blocks, 0)
        loops = natural_loops(blocks, dom)
        todo = [h for h in loops if origin.get(h, h) not in done]
        if not todo:
            break
        head = min(todo, key=lambda h: (len(loops[h]), h))     # innermost first
        done.add(origin.get(head, head))
        body = loops[head]
        if head == 0:                   # no edge into the loop to put its check on
            continue
        loop = Loop(blocks, head, body, dom, nest.types)
        proven, checks, units = _checks(loop, nest.arrays)
        innermost = not any(h != head and h in body for h in loops)
        copies = 2 if innermost else 1
        if not proven or len(blocks) + copies * (len(body) + 1) > limit:
            continue
        # (a loop with no access of its own to prove is not copied for these alone)
        checks = tuple(sorted(set(checks) | _hoisted(loop, set(checks)), key=str))
        entries = [p for p in predecessors(blocks)[head] if p not in body]
        # the unchecked copy; an innermost loop gets a second one, entered when the arrays
        # also have unit strides, which addresses their last axis by the itemsize, and when
        # the arrays it stores into are apart from the others (their loads then stay valid
        # across its stores)
        apart = _apart(loop) if innermost else {}
        units += _disjoint(apart)
        target = head
        for unit in ([False, True] if innermost else [False]):
            new = {k: n for n, k in enumerate(sorted(body), start=max(blocks) + 1)}
            gate = max(new.values()) + 1
            for k in sorted(body):
                b = blocks[k]
                ops = [replace(op, checked=False, unit=unit) if (k, j) in proven else
                       replace(op, unit=True) if unit and op.kind in ("load", "store")
                       and op.checked else op for j, op in enumerate(b.ops)]
                if unit:
                    ops = [replace(op, apart=apart[op.args[0]])
                           if op.kind == "store" and op.args[0] in apart else op for op in ops]
                term = tuple(new.get(x, x) if j > 0 and isinstance(x, int) else x
                             for j, x in enumerate(b.term))
                if term[0] == "version":
                    term = _implied_dropped(loop, k, term, checks)
                blocks[new[k]] = Block(new[k], ops, term)
                origin[new[k]] = origin.get(k, k)
            blocks[gate] = Block(gate, [], ("version", checks + units if unit else checks,
                                            new[head], target))
            origin[gate] = origin.get(head, head)
            target = gate
        # every entry into the loop goes through the (last) gate
        for k in entries:
            b = blocks[k]
            blocks[k] = Block(b.id, b.ops, tuple(target if j > 0 and x == head else x
                                                 for j, x in enumerate(b.term)))
    return [blocks[k] for k in sorted(blocks)], origin
