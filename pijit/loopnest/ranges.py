"""Integer value ranges of a nest's C kernel: the checks that can never fail, found before
they are emitted. Blocks + types + what is known of the inputs -> variable -> (lo, hi).

A Python int in the kernel is an int64 that hands over to Python when an operation would
leave int64; a narrow NumPy integer hands over when NumPy would wrap (and warn). Where every
value an operand can hold keeps the result in range, that check cannot fire, and lower_c
leaves it out: `crc = ((crc << 1) ^ 0x1021) & 0xFFFF` keeps crc in [0, 0xFFFF], so `crc << 1`
cannot leave int64. Dropping a check that cannot fire changes nothing the kernel computes.

The ranges are flow-insensitive (one per variable, the hull of every value any assignment in
the kernel can give it: the analysis needs no SSA form, and it holds after bounds.py's
copies and ifconvert.py's selects alike), a least fixed point from the inputs: an input known
at capture (a constant node argument: `crc = 0xFFFF` before the loop) is that value, any
other is its type's whole range, and a variable the kernel may read before assigning it holds
its C initial value, 0. An assignment whose check may fire gives its variable only the values
that pass the check (the kernel hands over instead of assigning the others). A bound of a
variable that moved WIDEN times goes to its type's limit (a loop's index then keeps its
lower bound, and the element stays below its stop), so the iteration ends.
"""
from __future__ import annotations

from collections import deque

from pijit.loopnest import types as T
from pijit.loopnest.ir import Const

INT64 = (-2**63, 2**63 - 1)
WIDEN = 3                       # growths of one variable's range before it is widened
NARROW = 3                      # rounds of narrowing after the widened fixed point
_BOOL = (0, 1)


def _limit(vtype: tuple):
    """The values a variable's C value may hold: int64 for Python ints, the dtype's range
    for NumPy integers, 0..1 for bools; None for floats (not tracked)."""
    lo, hi = None, None
    for m in vtype:
        k = T.kind(m)
        if k == "f":
            return None
        r = _BOOL if k == "b" else INT64 if not T.is_np(m) else _dtype_range(m)
        lo, hi = (r if lo is None else (min(lo, r[0]), max(hi, r[1])))
    return lo, hi


def _dtype_range(dtype) -> tuple:
    if dtype.kind == "b":
        return _BOOL
    if dtype.kind not in "iu":
        return None
    bits = dtype.itemsize * 8
    return (0, 2**bits - 1) if dtype.kind == "u" else (-2**(bits - 1), 2**(bits - 1) - 1)


def _hull(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return min(a[0], b[0]), max(a[1], b[1])


def _meet(a, b):
    """a ∩ b for a result range and its variable's limit (both present)."""
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo <= hi else None


def _bits(r) -> int:
    """The k with every value of r in [-2**k, 2**k - 1]."""
    return max((v if v >= 0 else ~v).bit_length() for v in r)


def exact(op: str, a, b=None):
    """The range of Python's exact `a op b` (or `op a`) over operand ranges a, b; None when
    unbounded or not modelled. A divisor range holding 0 leaves the 0 out (the kernel hands
    over there)."""
    if op in ("add", "sub", "mul"):
        f = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y,
             "mul": lambda x, y: x * y}[op]
        vals = [f(x, y) for x in a for y in b]
        return min(vals), max(vals)
    if op == "neg":
        return -a[1], -a[0]
    if op == "pos":
        return a
    if op == "invert":
        return ~a[1], ~a[0]
    if op == "abs":
        if a[0] >= 0:
            return a
        if a[1] <= 0:
            return -a[1], -a[0]
        return 0, max(-a[0], a[1])
    if op in ("and", "or", "xor"):
        if a[0] >= 0 and b[0] >= 0:
            top = 2**_bits((a[1], b[1])) - 1
            if op == "and":
                return 0, min(a[1], b[1])
            return (max(a[0], b[0]) if op == "or" else 0), top
        if op == "and" and (a[0] >= 0 or b[0] >= 0):     # x & y of a non-negative y: 0..y
            return 0, a[1] if a[0] >= 0 else b[1]
        k = _bits(a + b)
        return -2**k, 2**k - 1
    if op in ("lshift", "rshift"):
        if b[0] < 0 or op == "lshift" and b[1] > 64:
            return None
        f = (lambda x, y: x << y) if op == "lshift" else (lambda x, y: x >> y)
        vals = [f(x, y) for x in a for y in b]
        return min(vals), max(vals)
    if op in ("floordiv", "mod"):
        if b[0] <= 0 <= b[1]:
            if b[0] == b[1]:
                return None
            if op == "floordiv":    # |a // y| <= |a| for y != 0
                m = max(abs(a[0]), abs(a[1]))
                return -m, m
            return min(b[0] + 1, 0), max(b[1] - 1, 0)
        if op == "mod":
            return (0, b[1] - 1) if b[0] > 0 else (b[0] + 1, 0)
        vals = [x // y for x in a for y in b]       # monotone in each operand: corners
        return min(vals), max(vals)
    return None


class Ranges:
    """The ranges of one kernel's integer variables (see the module docstring)."""

    def __init__(self, blocks: list, types: dict, arrays: dict, inputs: list,
                 known: dict, unset: set):
        """blocks: the C kernel's (any ids); types: variable -> VT; arrays: array ->
        (dtype, ndim); inputs: the variables set at entry; known: input -> its value where
        the node's argument is a constant; unset: variables the kernel may read before any
        assignment (their C initial value is 0)."""
        self.types, self.arrays = types, arrays
        self.env = {}
        uses = {}               # variable -> indices of the definitions reading it
        self.defs = []          # (variable, rule): rule(self) -> range or None
        for b in blocks:
            for op in b.ops:
                for dst, rule in self._rules(op):
                    self.defs.append((dst, rule))
            if b.term[0] == "foriter":
                self.defs += self._foriter(b.term[1], b.term[2])
        for k, (dst, rule) in enumerate(self.defs):
            for x in getattr(rule, "reads", ()):
                uses.setdefault(x, []).append(k)
        for v in inputs:
            lim = _limit(types[v])
            if lim is None:
                continue
            value = known.get(v)
            ok = type(value) in (int, bool) and lim[0] <= value <= lim[1]
            self.env[v] = (int(value), int(value)) if ok else lim
        for v in unset:
            if _limit(types[v]) is not None:
                self.env[v] = _hull(self.env.get(v), (0, 0))
        seeds = dict(self.env)
        grown = {}
        work = deque(range(len(self.defs)))       # in program order first
        queued = set(work)
        while work:
            k = work.popleft()
            queued.discard(k)
            dst, rule = self.defs[k]
            r = self._apply(dst, rule)
            if r is None:
                continue
            old = self.env.get(dst)
            new = _hull(old, r)
            if new == old:
                continue
            grown[dst] = grown.get(dst, 0) + 1
            if grown[dst] >= WIDEN and old is not None:     # widen the bound that moves
                lim = _limit(types[dst])
                new = (lim[0] if new[0] < old[0] else new[0],
                       lim[1] if new[1] > old[1] else new[1])
            self.env[dst] = new
            for j in uses.get(dst, ()):
                if j not in queued:
                    queued.add(j)
                    work.append(j)
        # narrowing: every variable again the hull of what its assignments give from the
        # ranges so far, which hold every value, so each round does too (a loop's element
        # widened with its iterator comes back below its stop)
        for _ in range(NARROW):
            env = dict(seeds)
            for dst, rule in self.defs:
                env[dst] = _hull(env.get(dst), self._apply(dst, rule))
            env = {v: r for v, r in env.items() if r is not None}
            if env == self.env:
                break
            self.env = env

    def _apply(self, dst, rule):
        """What one assignment gives its variable from the current ranges: None when
        nothing (an operand has no value yet, or no value passes its check)."""
        lim = _limit(self.types[dst])
        if lim is None:
            return None
        r = rule(self)
        if r is None:
            return None
        return _meet(lim if r is Ranges.ANY else r, lim)

    ANY = object()              # a rule's result: any value of the variable's type

    # -- queries ---------------------------------------------------------------------------
    def of(self, x):
        """(lo, hi) of an operand's integer value, or None (a float, or never assigned)."""
        if isinstance(x, Const):
            if T.kind(x.type) == "f":
                return None
            return int(x.value), int(x.value)
        return self.env.get(x)

    def within(self, x, lo: int, hi: int) -> bool:
        """Every value operand x can hold is in [lo, hi]."""
        r = self.of(x)
        return r is not None and lo <= r[0] and r[1] <= hi

    def excludes(self, x, value: int) -> bool:
        """Operand x never holds `value`."""
        r = self.of(x)
        return r is not None and not r[0] <= value <= r[1]

    def divides(self, op) -> bool:
        """Integer `a // b` or `a % b` never divides by 0, nor INT64_MIN by -1."""
        a, b = op.args
        return self.excludes(b, 0) and (self.excludes(b, -1) or self.excludes(a, INT64[0]))

    def advances(self, it: str, var: str) -> bool:
        """A foriter of range iterator `it` binding `var` computes cur + step within int64."""
        r = exact("add", self.of(var), self.of(f"{it}_step")) \
            if self.of(var) is not None and self.of(f"{it}_step") is not None else None
        return r is not None and INT64[0] <= r[0] and r[1] <= INT64[1]

    def result(self, op):
        """The exact range of an integer op's result over its operands' ranges, or None."""
        rs = [self.of(x) for x in op.args]
        if any(r is None for r in rs):
            return None
        if op.op == "invert" and op.domain[0] == "int" and op.domain[1].kind == "u":
            top = _dtype_range(op.domain[1])[1]     # ~x of an unsigned dtype: its mask
            return top - rs[0][1], top - rs[0][0]
        return exact("abs" if op.kind == "call" else op.op, *rs)

    def fits(self, op, lo: int, hi: int) -> bool:
        """The exact result of integer op is in [lo, hi] whatever its operands hold."""
        r = self.result(op)
        return r is not None and lo <= r[0] and r[1] <= hi

    # -- rules -----------------------------------------------------------------------------
    def _rules(self, op):
        """(variable, rule) of each assignment op makes."""
        k, a = op.kind, op.args
        if k == "range":
            args = list(a)
            if len(args) == 1:
                args = [Const(0, T.INT), args[0], Const(1, T.INT)]
            elif len(args) == 2:
                args.append(Const(1, T.INT))
            return [(f"{op.dst}_{p}", _Copy(x)) for p, x in zip(("cur", "stop", "step"), args)]
        if k == "store" and op.reuse:     # forward.py's value and flag
            return [(op.reuse[1], _Fixed(Ranges.ANY)), (op.reuse[2], _Fixed(_BOOL))]
        if op.dst is None:
            return []
        if k == "copy":
            return [(op.dst, _Copy(a[0]))]
        if k == "select":
            return [(op.dst, _Copy(a[1], a[2]))]
        if k == "load":
            r = _dtype_range(self.arrays[a[0]][0])
            return [(op.dst, _Fixed(r if r is not None else Ranges.ANY))]
        if k == "shape":
            return [(op.dst, _Fixed((0, INT64[1])))]
        if k == "cmp" or op.domain[:1] in (("b",), ("not",), ("truth",)):
            return [(op.dst, _Fixed(_BOOL))]
        if k == "call" and op.op in ("min", "max"):
            return [(op.dst, _MinMax(op.op, a))]
        if op.domain[:1] == ("toi",):
            return [(op.dst, _Copy(a[0]))]
        if op.domain[:1] in (("i64",), ("int",)):
            return [(op.dst, _Exact(op))]
        return [(op.dst, _Fixed(Ranges.ANY))]

    def _foriter(self, it, var):
        """A foriter assigns the element (cur, while cur has not passed stop) and cur + step."""
        cur, stop, step = (f"{it}_{p}" for p in ("cur", "stop", "step"))

        def element(r):
            c, s, st = r.of(cur), r.of(stop), r.of(step)
            if c is None or s is None or st is None:
                return None
            if st[0] > 0:
                return c[0], min(c[1], s[1] - 1)
            if st[1] < 0:
                return max(c[0], s[0] + 1), c[1]
            return c
        element.reads = (cur, stop, step)

        def advanced(r):
            e, st = r.of(var), r.of(step)
            if e is None or st is None:
                return None
            return exact("add", e, st)
        advanced.reads = (var, step)
        return [(var, element), (cur, advanced)]


class _Copy:
    def __init__(self, *xs):
        self.xs = xs
        self.reads = [x for x in xs if isinstance(x, str)]

    def __call__(self, r):
        out = None
        for x in self.xs:
            v = r.of(x)
            if v is None:
                if isinstance(x, str) and _limit(r.types[x]) is None:
                    return Ranges.ANY       # a float converted... not an integer: any
                return None
            out = _hull(out, v)
        return out


class _Fixed:
    reads = ()

    def __init__(self, r):
        self.r = r

    def __call__(self, _):
        return self.r


class _MinMax:
    def __init__(self, which, xs):
        self.which, self.xs = which, xs
        self.reads = [x for x in xs if isinstance(x, str)]

    def __call__(self, r):
        a, b = (r.of(x) for x in self.xs)
        if a is None or b is None:
            return None
        f = min if self.which == "min" else max
        return f(a[0], b[0]), f(a[1], b[1])


class _Exact:
    def __init__(self, op):
        self.op = op
        self.reads = [x for x in op.args if isinstance(x, str)]

    def __call__(self, r):
        if any(r.of(x) is None for x in self.op.args):
            return None
        res = r.result(self.op)
        return Ranges.ANY if res is None else res
