"""The loop-nest IR: a CFG of blocks over typed variables, printed one op per line.

Variables are named slots with one type each (types.vt): the nest's locals (`l_x`), the
temporaries of one instruction (`t<pos>`), values on the stack at block boundaries (`s<depth>`)
and range iterators (`it<pos>_cur/_stop/_step`); an iterator over arrays, enumerate or zip
(recognise.py) has range iterators `it<pos>_<n>` (their index `_k`, the element loaded
there `_x`, the array's length `n<pos>_<n>`) and enumerate's counter `c<pos>_<n>` (the
value it yields `_v`). An op that may have to hand over to Python
(overflow, an index out of bounds, a division by zero...: `Op.bails`) is always the first op
of its block, so the variables at a bail are exactly those at a block's start, and Python
resumes the nest there (lower_py.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pijit.loopnest import types as T


# ops on slices of arrays (slices.py): a dot or a sum of 1-D views, an elementwise update of
# one (or of one element: views.py's "put"), the check of a view a local is bound to, an
# element and the length of a view (views.py); each may hand over (a bound, a length
# mismatch, a non-finite float)
ARRAY_OPS = ("vdot", "vsum", "vstore", "vcheck", "vload", "vlen")


@dataclass(frozen=True)
class Const:
    value: object
    type: object            # a static type (types.INT ...)

    def __str__(self):
        return repr(self.value)


@dataclass
class Op:
    """dst = kind(args) in `domain`; kinds: copy, binop, cmp, unop, call, load, store, shape,
    range (dst: the iterator's name), truth; append (args[0].append(args[1]), or of the
    tuple of args[1:] when op is "tuple": appends.py); select (dst = args[1] if args[0]
    else args[2]: ifconvert.py, C kernel only); finite (args[0] is a finite float, else the pairs after it
    (variable, saved value) are restored and the kernel hands over at `resume`:
    exit_checks.py, C kernel only); vdot, vsum, vstore, vcheck, vload, vlen (ARRAY_OPS:
    `array` says what, over the operands in args)."""
    kind: str
    dst: str | None
    args: tuple
    op: str = ""            # operator or function name; "row" for a load/store of row[j]
    domain: tuple = ()
    lineno: int | None = None
    # {operand member types: result type}, for a result whose type has two members
    results: dict = field(default_factory=dict)
    # False: a load or store of the C kernel whose index bounds.py proved in range, or a
    # NumPy float op whose non-finite result a later op's check catches (float_checks.py)
    checked: bool = True
    # a load or store of bounds.py's unit-stride copy (unchecked, or checked by an index it
    # cannot prove): its array's last axis is addressed by the itemsize (the copy's entry
    # checked the stride)
    unit: bool = False
    # the block a hand-over at this op resumes at when not its own (float_checks.py: the
    # first op of the run its check covers; C kernel only)
    resume: int | None = None
    # an array op's views and expression (slices.ArrayOp, over positions in args)
    array: object = None
    # a store of bounds.py's unit-stride copy, whose entry checked that its array's memory
    # and these arrays' do not overlap: their loads stay valid across it (cse.py; C only)
    apart: tuple = ()
    # forward.py (C kernel only): ("fw", value, valid) on a store: it also sets `value` to
    # what it stored and `valid` to 1; on a load: the element is `value` when `valid`, the
    # previous iteration having stored it
    reuse: tuple | None = None
    # a vlen or vload of a view a loop iterates (views.iterate), named by the vlen's dst: the
    # vlen keeps the view's first item and stride in C (kp_<kept>, ks_<kept>), its loads
    # read from them by the loop's index, in range by the loop (C kernel only)
    kept: str | None = None

    @property
    def bails(self) -> bool:
        if self.kind in ARRAY_OPS:
            return not (self.kind == "vload" and self.kept)
        if self.kind == "load" or self.kind == "binop" and not self.checked:
            return self.checked
        if self.kind in ("store", "range", "finite", "raise", "append"):
            return True
        if self.kind not in ("binop", "unop", "cmp", "call"):
            return False
        d = self.domain[0]
        if d in ("b", "not", "truth", "toi", "ci"):
            return False
        if self.op == "fabs" or self.op == "float" and d == "f":
            return False
        if d == "i64" and self.op in ("and", "or", "xor", "invert", "pos"):
            return False
        if d == "f" and self.kind == "unop" or d == "f" and self.op == "abs":
            return False
        if d == "f" and "py" in self.domain and self.op in ("add", "sub", "mul"):
            return False
        return True

    def __str__(self):
        args = ", ".join(map(str, self.args))
        lhs = f"{self.dst} = " if self.dst else ""
        if self.array is not None:
            return f"{lhs}{self.kind} {self.array.text([str(x) for x in self.args])}"
        dom = f"  [{' '.join(map(str, self.domain))}]" if self.domain else ""
        return f"{lhs}{self.kind} {self.op} {args}{dom}".replace("  ", " ", 1) if not self.op \
            else f"{lhs}{self.kind}.{self.op}({args}){dom}"


@dataclass
class Block:
    id: int
    ops: list = field(default_factory=list)
    # ("jump", b) | ("branch", cond, b_true, b_false) | ("foriter", it, var, b_body, b_exit)
    # | ("exit",) | ("raise",) (after a raise op: no successor)
    # | ("version", checks, b_unchecked, b_checked) (bounds.py; C kernel only)
    # | ("select", b_join, b_fallback) (ifconvert.py; C kernel only: the block's ops run
    # both sides of a branch, a failed check goes to b_fallback, the original branch)
    term: tuple = ("exit",)


def successors(term) -> tuple:
    """A terminator's target blocks, the one to fall through to first (a loop's body, a
    branch's true side, a versioned loop's unchecked copy)."""
    return {"jump": term[1:], "branch": term[2:], "foriter": term[3:],
            "version": term[2:], "select": term[1:]}.get(term[0], ())


def predecessors(by_id: dict) -> dict:
    """Block id -> the ids of the blocks whose terminators go to it (one per edge)."""
    preds = {k: [] for k in by_id}
    for b in by_id.values():
        for s in successors(b.term):
            preds[s].append(b.id)
    return preds


def reverse_postorder(by_id: dict, entry: int, to=lambda k: k) -> list:
    """Block ids reachable from entry in reverse postorder (every block after its forward
    predecessors; a block's first successor placed last among them); `to` redirects an edge
    (lower_c threads jump-only blocks through it)."""
    post, seen, stack = [], set(), [(to(entry), False)]
    while stack:
        k, done = stack.pop()
        if done:
            post.append(k)
            continue
        if k in seen:
            continue
        seen.add(k)
        stack.append((k, True))
        for s in successors(by_id[k].term):
            stack.append((to(s), False))
    return post[::-1]


@dataclass
class Nest:
    """A loop nest: blocks (0 is the entry), variable types, the arrays it reads and writes
    (name -> (dtype, ndim)), its inputs (variables set from the node's arguments) and
    outputs (variables live after the loop)."""
    blocks: list
    types: dict             # variable -> VT
    arrays: dict            # array variable -> (dtype, ndim)
    inputs: list            # scalar variables bound at entry, in argument order
    outputs: list           # variables returned, in order
    written: set            # arrays the nest stores into
    funcs: dict             # call op name -> the Python callable (abs, math.sqrt, ...)
    lineno: int = 0
    # input -> its value, for inputs whose node argument is a constant (capture.py): the
    # same in every call of the node (ranges.py starts from it)
    known: dict = field(default_factory=dict)
    # every path out of the region returns (recognise._tail_return): the one output is the
    # value the function returns, or none when every path returns the list `returned` (the
    # name of a list it appends to: capture.py makes that list's graph value the result)
    returns: bool = False
    returned: str | None = None
    # variables of a Python float and np.float32 whose C value is a float
    # (recognise.float32_carried)
    narrow: frozenset = frozenset()
    # Python-int inputs copied into a variable whose C value is a double: the C kernel takes
    # them within 2**53 only (recognise.check_ints_in_doubles)
    exact_ints: frozenset = frozenset()
    # (module, name) -> the object read as module.name (math.sqrt, np.float32, math.pi):
    # guarded by identity (capture.py), as a graph guards a module's attributes
    module_attrs: dict = field(default_factory=dict)

    def variables(self) -> list:
        return sorted(self.types)

    def live_in(self) -> dict:
        """Block id -> the variables read before written on some path from its start (what a
        hand-over to Python at that block must pass; the others are dead there)."""
        uses, defs = {}, {}
        for b in self.blocks:
            u, d = set(), set()

            def use(x):
                if isinstance(x, str) and x in self.types and x not in d:
                    u.add(x)
            for op in b.ops:
                for x in op.args:
                    use(x)
                if op.kind == "range":
                    d.update(f"{op.dst}_{p}" for p in ("cur", "stop", "step"))
                elif op.dst is not None:
                    d.add(op.dst)
            t = b.term
            if t[0] == "branch":
                use(t[1])
            elif t[0] == "foriter":
                for p in ("cur", "stop", "step"):
                    use(f"{t[1]}_{p}")
            elif t[0] == "exit":
                for o in self.outputs:
                    use(o)
            uses[b.id], defs[b.id] = u, d
        succ = {b.id: successors(b.term) for b in self.blocks}
        live = {b.id: set() for b in self.blocks}
        changed = True
        while changed:
            changed = False
            for b in reversed(self.blocks):
                t = b.term
                # a for loop's element is set on the edge into its body: live there, it is
                # not live at the loop's head (counted live, it kept the last element of
                # every loop alive across its exit, and saved and boxed at each hand-over)
                out = set().union(*(live[s] - {t[2]} if t[0] == "foriter" and s == t[3]
                                    else live[s] for s in succ[b.id]))
                new = uses[b.id] | (out - defs[b.id])
                if new != live[b.id]:
                    live[b.id] = new
                    changed = True
        return live

    def __str__(self):
        lines = ["loop nest(" + ", ".join(
            [f"{a}: {d}[{n}d]" if n else f"{a}: {d}" for a, (d, n) in self.arrays.items()] +
            [f"{v}: {T.vt_name(self.types[v])}" for v in self.inputs]) +
            ") -> (" + ", ".join(self.outputs) + ")"]
        for b in self.blocks:
            lines.append(f"  b{b.id}:")
            lines += [f"    {op}" for op in b.ops]
            t = b.term
            if t[0] == "jump":
                lines.append(f"    jump b{t[1]}")
            elif t[0] == "branch":
                lines.append(f"    branch {t[1]} ? b{t[2]} : b{t[3]}")
            elif t[0] == "foriter":
                lines.append(f"    for {t[2]} in {t[1]} ? b{t[3]} : b{t[4]}")
            elif t[0] == "raise":
                lines.append("    raised")
            else:
                lines.append("    exit")
        inlined = []                # the functions inlined at calls (loopnest/inline.py)
        for b in self.blocks:
            inlined += [op.domain[1] for op in b.ops if op.domain[:1] == ("inline",)
                        and op.domain[1] not in inlined]
        return "\n".join(lines + [c.listing() for c in inlined])
