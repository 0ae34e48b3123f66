"""Bytecode of one loop nest -> its typed IR (ir.Nest), or Unsupported.

The instructions of the region [start, end] (a `for` loop from its GET_ITER, with the range
or array it iterates on the stack, or from its iterable's first instruction when that is
not a range, or a `while` loop from its head) are walked block by block with a simulated stack, on 3.11, 3.12 and 3.13
alike: the differences that matter (where a call's NULL sits, LOAD_ATTR's method bit, what an
exhausted FOR_ITER leaves) come from pijit._compat.BYTECODE; jumps are read by their target
and condition, whatever their name (3.11's FORWARD/BACKWARD forms included). Types are
inferred flow-insensitively: a variable's type joins every value stored into it, and the
walk repeats until no type changes (types.join fails when a carried value changes type in a
way C cannot carry).

Iterables: `range(...)`, a 1-D array (its elements), a 2-D array (its rows: a local bound to
a row is an alias of the array and the row's index, read only as `row[j]`, `len(row)` or
iterated), `enumerate(x[, start])` and `zip(x, y[, z])` of those. Each is set up at GET_ITER
as range iterators (one per range or array, the leaves); its FOR_ITER is a chain of
`foriter` terms, one per leaf in the order Python calls their `next`, so the first exhausted
one leaves the loop as zip does, then the body loads the elements from the leaves' indices
(a write into the array earlier in the loop is seen, as Python's array iterator reads
`a[i]` at each step) and counts enumerate's index.
"""
from __future__ import annotations

import builtins
import dataclasses
import math
import struct

from bytecode import BinaryOp, Compare, Instr, Label, SetLineno, TryBegin, TryEnd

from pijit import _compat
from pijit.loopnest import appends, calls, flags, raises, slices, views
from pijit.loopnest import types as T
from pijit.loopnest.ir import Block, Const, Nest, Op
from pijit.loopnest.types import Unsupported

_BINARY = {"ADD": "add", "SUBTRACT": "sub", "MULTIPLY": "mul", "TRUE_DIVIDE": "truediv",
           "FLOOR_DIVIDE": "floordiv", "REMAINDER": "mod", "POWER": "pow",
           "LSHIFT": "lshift", "RSHIFT": "rshift", "AND": "and", "OR": "or", "XOR": "xor"}
_UNARY = {"UNARY_NEGATIVE": "neg", "UNARY_POSITIVE": "pos", "UNARY_INVERT": "invert",
          "UNARY_NOT": "not"}
# math functions of one float argument whose CPython implementation calls the libm
# function of that name on a finite argument with a finite result (math_1 in mathmodule.c)
MATH1 = ("sqrt", "exp", "log", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
         "tanh", "log2", "log10", "log1p", "expm1", "fabs")
# math functions rounding a float to a Python int: floor(x) by C's floor, then an int64 that
# holds it (a NaN, an infinity or a huge float hands over: Python raises or makes a big int)
ROUNDING = ("floor", "ceil", "trunc")
_CALLS = {builtins.abs: "abs", builtins.min: "min", builtins.max: "max", builtins.int: "int",
          builtins.float: "float", builtins.bool: "bool", builtins.len: "len",
          builtins.range: "range", builtins.enumerate: "enumerate", builtins.zip: "zip",
          **{getattr(math, f): f for f in MATH1 + ROUNDING}}
_JUMPS = ("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP",
          "JUMP_NO_INTERRUPT")
MAX_WALKS = 8
RETURN = "rv"           # the variable a return copies its value into (a nest's, a callee's)


class Entry:
    """What capture knows of a local at the loop's start: an array (dtype, ndim) or a scalar
    of a static type, and its value when the graph's guards fix it (flags.py); or a list
    the loop may only append scalars to (`is_list`: appends.py)."""

    def __init__(self, array=None, type=None, value=flags.UNKNOWN, is_list=False):
        self.array = array
        self.type = type
        self.value = value
        self.is_list = is_list


def recognise(instrs, start: int, end: int, entries: dict, range_args: list | None,
              resolve, live_after, iterated: str | None = None) -> tuple:
    """(Nest, exit position) of the loop at [start, end].

    entries: local name -> Entry, for the locals bound at the loop's start.
    range_args: the static types of the range's (start, stop, step) at a `for` loop's
    GET_ITER (inputs r0-r2), or None for a `while` loop.
    iterated: the entry of the array on the stack at a `for` loop's GET_ITER, if any.
    resolve(name): the object a global name refers to (raises Unsupported).
    live_after(exit position): local names read after the loop.
    A loop that returns from inside is walked again with the code after it up to its return
    (_tail_return): the nest then hands back the function's result.
    """
    try:
        return _recognise(instrs, start, end, entries, range_args, resolve, live_after,
                          iterated, False)
    except _Returns:
        return _recognise(instrs, start, _tail_return(instrs, end), entries, range_args,
                          resolve, live_after, iterated, True)


class _Returns(Unsupported):
    """A return inside a loop walked as one that only leaves at its exit."""


def _recognise(instrs, start, end, entries, range_args, resolve, live_after, iterated,
               returns: bool) -> tuple:
    types = {}
    for name, e in entries.items():
        if e.array is None and not e.is_list:
            types["l_" + name] = (e.type,)
    if range_args is not None:
        for k, t in enumerate(range_args):
            types[f"r{k}"] = (t,)
    for _ in range(MAX_WALKS):
        walk = _Walk(instrs, start, end, entries, types, resolve, returns)
        walk.run(range_args, iterated)
        if not walk.changed:
            break
    else:
        raise Unsupported("types of the loop's values did not settle")
    exit_pos = walk.exit_pos
    if exit_pos is None:
        raise Unsupported("the loop never exits")
    read_after = set(live_after(exit_pos)) if not returns else set()
    if walk.returned is not None and RETURN in types:
        raise Unsupported(f"the loop returns the list {walk.returned} or another value")
    if returns and walk.returned is None and len(types[RETURN]) > 1:
        raise Unsupported("the loop may return a Python or a NumPy scalar")
    for row in walk.aliases:
        if row in read_after:
            raise Unsupported(f"the row {row} is read after the loop")
    stored = {v[2:] for b in walk.blocks for op in b.ops if op.dst and op.dst.startswith("l_")
              for v in [op.dst]}
    outputs = sorted("l_" + n for n in stored & read_after) if not returns else \
        [RETURN] if walk.returned is None else []
    arrays = {"a_" + n: (e.array[0], e.array[1]) for n, e in entries.items()
              if e.array is not None and n in walk.arrays_used}
    # the lists it appends to pass as arrays do (the object itself, after the arrays)
    arrays.update({"a_" + n: appends.LIST for n, e in entries.items()
                   if e.is_list and n in walk.arrays_used})
    inputs = [f"r{k}" for k in range(len(range_args))] if range_args is not None else []
    inputs += sorted("l_" + n for n, e in entries.items() if e.array is None and not e.is_list)
    exact_ints = check_ints_in_doubles(walk.blocks, types, inputs)
    nest = Nest(walk.blocks, {v: t for v, t in types.items()}, arrays, inputs, outputs,
                walk.written, walk.funcs, returns=returns, returned=walk.returned,
                narrow=float32_carried(walk.blocks, types), exact_ints=exact_ints,
                module_attrs=walk.module_attrs)
    return nest, exit_pos


def _tail_return(instrs, end: int) -> int:
    """The position of the return ending the code after a loop that returns from inside:
    that code (`return -1`, `return best`) joins the region, so that every path out of it
    returns and the nest hands back one value, the function's result. Unsupported when the
    code after the loop branches before it returns."""
    for pos in range(end + 1, min(end + 41, len(instrs))):
        item = instrs[pos]
        if isinstance(item, Instr) and item.has_jump():
            break
        if isinstance(item, Instr) and item.name in _compat.RETURNS:
            return pos
    raise Unsupported("a return in the loop, and code after it that does not just return")


def check_ints_in_doubles(blocks, types, inputs=()) -> frozenset:
    """Unsupported when a Python int may reach a variable whose C value is a double (a
    float beside it: `s = 0` then `s += x[i]` of a float array) other than as a constant a
    double holds exactly, from another such variable, or from a Python-int input the nest
    never assigns (`best = n`, also through an inlined helper returning that parameter
    unchanged): a computed int, past 2**53, would lose bits there. (The entry values of
    such variables and inputs are checked by the C kernel: the inputs returned.)"""
    defs = {}
    for b in blocks:
        for op in b.ops:
            if op.dst is not None:
                defs.setdefault(op.dst, []).append(op)
        if b.term[0] == "foriter":
            defs.setdefault(b.term[2], []).append(None)
    # Python ints that are one of those inputs wherever they are read: variable -> the inputs
    roots = {v: {v} for v in inputs if types.get(v) == (T.INT,) and v not in defs}

    def source(op):
        """The operand an assignment copies a Python int from, unchanged, or None."""
        if op is None:
            return None
        if op.kind == "copy":
            return op.args[0]
        if op.domain[:1] == ("inline",):
            return _passed_through(op.domain[1], op.args)
        return None
    changed = True
    while changed:
        changed = False
        for v, ops in defs.items():
            if v in roots or types.get(v) != (T.INT,):
                continue
            srcs = [source(op) for op in ops]
            if all(isinstance(x, str) and x in roots for x in srcs):
                roots[v] = set().union(*(roots[x] for x in srcs))
                changed = True
    checked = set()

    def exact(x):
        if isinstance(x, Const):
            return x.type is not T.INT or abs(x.value) <= 2**53
        if x in roots:
            checked.update(roots[x])
            return True
        return T.INT not in types[x] or T.int_in_double(types[x]) is T.INT
    for b in blocks:
        for op in b.ops:
            if op.dst is None or T.int_in_double(types.get(op.dst, ())) is not T.INT:
                continue
            if op.kind == "copy" or op.kind == "call" and op.op in ("min", "max"):
                ok = all(exact(x) for x in op.args)
            elif op.domain[:1] == ("inline",):
                arg = _passed_through(op.domain[1], op.args)
                ok = T.INT not in op.domain[1].types[RETURN] or \
                    T.int_in_double(op.domain[1].types[RETURN]) is T.INT or \
                    arg is not None and exact(arg)
            else:
                ok = T.INT not in op.results.values() if op.results else \
                    T.INT not in types[op.dst]
            if not ok:
                raise Unsupported(f"a Python int may reach {op.dst}, which holds floats too")
    return frozenset(checked)


def _passed_through(callee, args):
    """The argument an inlined callee returns unchanged on every path (each return copies
    one parameter it never assigns), or None."""
    rets = [op for b in callee.blocks for op in b.ops if op.dst == RETURN]
    if not rets or any(op.kind != "copy" or op.args != rets[0].args for op in rets):
        return None
    p = rets[0].args[0]
    if p not in callee.params or any(op.dst == p for b in callee.blocks for op in b.ops):
        return None
    return (tuple(args) + tuple(callee.defaults))[callee.params.index(p)]


def float32_carried(blocks, types) -> frozenset:
    """The variables of a Python float and np.float32 (`total = 0.0` then `total += x * y`
    of float32) whose every float value is a float32's: the C kernel carries them in a float
    rather than a double, so the loop's float32 arithmetic is not widened and narrowed again
    at each step. Such a variable is only assigned float32 values, constants a float32 holds
    exactly (bit for bit) and other such variables; its entry value is checked there."""
    pair = T.vt(T.FLOAT, T.F32)
    narrow = {v for v, t in types.items() if t == pair}

    def fits(x):
        if isinstance(x, Const):
            return x.type is T.FLOAT and _in_float32(x.value)
        return x in narrow or types[x] == (T.F32,)
    changed = True
    while changed:
        changed = False
        for b in blocks:
            for op in b.ops:
                if op.dst not in narrow:
                    continue
                ok = all(fits(x) for x in op.args) if op.kind == "copy" else \
                    op.kind != "call" and bool(op.results) and \
                    T.FLOAT not in op.results.values()
                if not ok:
                    narrow.discard(op.dst)
                    changed = True
    return frozenset(narrow)


def _held_by_float32(walk, x, y) -> bool:
    """Whether one operand of a comparison is a Python float or an np.float32 (`total > 30.0`
    of a `total = 0.0` summing float32s) and the other a float constant a float32 holds:
    NumPy compares the float32 member in float32, Python the float member in double, and
    both give the double comparison's answer (every operand exact in either)."""
    c, v = (x, y) if isinstance(x, Const) else (y, x)
    return isinstance(c, Const) and c.type is T.FLOAT and _in_float32(c.value) and \
        not isinstance(v, Const) and set(walk.type(v)) == {T.FLOAT, T.F32}


def _compare_in_double(a, b):
    r, d = T.compare(a, b)
    return r, ("cf", T.F64) if d == ("cf", T.F32) else d


def _in_float32(v: float) -> bool:
    """Whether a float32 holds v bit for bit (its sign too; no NaN)."""
    try:
        back = struct.unpack("<f", struct.pack("<f", v))[0]
    except OverflowError:
        return False
    return back == v and math.copysign(1.0, back) == math.copysign(1.0, v)


class _Walk:
    """One walk over the region: builds blocks; `changed` when a variable's type grew."""

    def __init__(self, instrs, start, end, entries, types, resolve, returns=False):
        self.instrs, self.start, self.end = instrs, start, end
        self.returns = returns      # the region ends in returns (_tail_return)
        self.returned = None        # the list entry its returns return (`return out`)
        self.entries, self.types, self.resolve = entries, types, resolve
        self.label_pos = {item: p for p, item in enumerate(instrs) if isinstance(item, Label)}
        self.blocks = []
        self.at = {}                # position -> (block id, stack layout)
        self.work = []
        self.changed = False
        self.exit_pos = None
        self.arrays_used = set()
        self.written = set()
        self.funcs = {}
        self.lineno = None
        self.aliases = {}           # local -> ("row", array, index variable) it is bound to
        self.module_attrs = {}      # (module, name) -> the object the nest took it for
        self.assigned = None        # the locals the region stores (flags.py)

    # -- types -------------------------------------------------------------------------
    def type(self, operand) -> tuple:
        if isinstance(operand, Const):
            return (operand.type,)
        t = self.types.get(operand)
        if t is None:
            raise Unsupported(f"{operand} is read before a value is known")
        return t

    def define(self, var: str, vtype: tuple):
        new = T.join(self.types.get(var), vtype)
        if new != self.types.get(var):
            self.types[var] = new
            self.changed = True

    # -- blocks ------------------------------------------------------------------------
    def new_block(self) -> Block:
        b = Block(len(self.blocks))
        self.blocks.append(b)
        return b

    def edge(self, block: Block, pos: int, stack: list) -> int:
        """The block id control reaches at `pos` with `stack`; values on the stack move into
        the target's stack variables (copies at the end of `block`)."""
        while pos < len(self.instrs) and isinstance(self.instrs[pos], (SetLineno,)):
            pos += 1
        if not self.start <= pos <= self.end:
            if stack:
                raise Unsupported("the loop exits with values on the stack")
            if self.exit_pos is not None and self.exit_pos != pos:
                raise Unsupported("the loop exits to more than one place")
            self.exit_pos = pos
            if "exit" not in self.at:
                self.at["exit"] = self.new_block().id
            return self.at["exit"]
        layout = []
        for d, item in enumerate(stack):
            if item[0] == "v":
                var = f"s{pos}_{d}"
                self.define(var, self.type(item[1]))
                block.ops.append(Op("copy", var, (item[1],), lineno=self.lineno))
                layout.append(("v", var))
            elif item[0] in ("iter", "null", "arr", "obj"):     # an iter keeps its leaves
                layout.append(item if item[0] != "obj" else ("obj", id(item[1]), item[1]))
            else:
                raise Unsupported(f"a {item[0]} on the stack across a jump")
        if pos in self.at:
            bid, known = self.at[pos]
            if [x[:2] for x in known] != [x[:2] for x in layout]:
                raise Unsupported("different stacks meet at a jump target")
            return bid
        b = self.new_block()
        self.at[pos] = (b.id, layout)
        self.work.append((pos, b, layout))
        return b.id

    def run(self, range_args, iterated):
        entry = self.new_block()
        self.at[self.start] = (entry.id, [])
        stack = [] if range_args is None else [("range", [f"r{k}" for k in
                                                          range(len(range_args))])]
        if iterated is not None:
            self.arrays_used.add(iterated)
            stack = [("arr", iterated)]
        self.block(self.start, entry, stack)
        while self.work:
            pos, block, layout, *nxt = self.work.pop(0)
            stack = [x if x[0] != "obj" else ("obj", x[2]) for x in layout]
            if nxt:                 # a loop body: the item FOR_ITER pushed comes first
                block, item = self.next_item(block, nxt[0])
                stack.append(item)
            self.block(pos, block, stack)

    def emit(self, block: Block, op: Op) -> Block:
        """Append op; an op that may bail starts a block of its own."""
        op.lineno = self.lineno
        if op.bails and block.ops:
            nxt = self.new_block()
            block.term = ("jump", nxt.id)
            block = nxt
        block.ops.append(op)
        return block

    # -- the walk of one block -----------------------------------------------------------
    def block(self, first: int, block: Block, stack: list):
        """Walk from position `first` (where `block` starts) to the block's terminator."""
        pos = first
        while True:
            if not stack and not self.returns and self.start <= pos <= self.end and \
                    self.tail_copy(pos):
                block.term = ("jump", self.edge(block, self.end + 1, stack))
                return
            if not self.start <= pos <= self.end or (pos != first and pos in self.at):
                block.term = ("jump", self.edge(block, pos, stack))
                return
            item = self.instrs[pos]
            if isinstance(item, Label) and pos != first:
                block.term = ("jump", self.edge(block, pos, stack))     # a jump target
                return
            if isinstance(item, SetLineno):
                self.lineno = item.lineno
            elif isinstance(item, (TryBegin, TryEnd)):
                raise Unsupported("exception handling in the loop")
            elif isinstance(item, Instr):
                if item.location is not None and item.location.lineno is not None:
                    self.lineno = item.location.lineno
                result = self.instr(item, pos, block, stack)
                if result is True:
                    return          # the block's terminator is set
                if isinstance(result, Block):
                    block = result
            pos += 1

    def tail_copy(self, pos: int) -> bool:
        """Whether the code at `pos` is a copy of the code after the loop up to its return
        (3.12+ copies a short function tail into each `break` path): running either from
        the same locals does the same, so the path leaves the loop there."""
        here, there = self._straight(pos), self._straight(self.end + 1)
        return here is not None and here == there

    def _straight(self, pos):
        """(name, arg) of the instructions from pos to a return, with no jump; else None."""
        seq = []
        for item in self.instrs[pos:pos + 40]:
            if isinstance(item, Instr):
                if item.has_jump():
                    return None
                seq.append((item.name, item.arg))
                if item.name in _compat.RETURNS:
                    return seq
            elif isinstance(item, Label):
                return None
        return None

    def target(self, instr) -> int:
        return self.label_pos[instr.arg]

    def instr(self, ins: Instr, pos: int, block: Block, stack: list):
        """Simulate one instruction: None (next), a Block (continue in it) or True (the
        block ended)."""
        name = ins.name
        facts = _compat.BYTECODE
        if name in ("NOP", "RESUME", "PRECALL", "TO_BOOL", "CACHE", "EXTENDED_ARG"):
            return None
        # locals bound to views; views and their array ops; raise statements
        for part in (views, slices, raises):
            result = part.instr(self, ins, pos, block, stack)
            if result is not slices.PASS:
                return result
        if name in ("LOAD_FAST", "LOAD_FAST_CHECK"):
            stack.append(self.local(ins.arg))
            return None
        if name == "STORE_FAST":
            item = stack.pop()
            if item[0] == "row":
                self.alias(ins.arg, item)
                return None
            if item[0] != "v":
                raise Unsupported(f"storing a {item[0]} in {ins.arg}")
            if ins.arg in self.entries and (self.entries[ins.arg].array is not None or
                                            self.entries[ins.arg].is_list):
                raise Unsupported(f"assigning to array or list {ins.arg}")
            var = "l_" + ins.arg
            block = self.keep_loaded(block, stack, var, pos)
            self.define(var, self.type(item[1]))
            return self.emit(block, Op("copy", var, (item[1],)))
        if name == "LOAD_CONST":
            t = T.of_value(ins.arg)
            if t is None:
                raise Unsupported(f"the constant {ins.arg!r}")
            stack.append(("v", Const(ins.arg, t)))
            return None
        if name == "LOAD_GLOBAL":
            push_null, gname = ins.arg if isinstance(ins.arg, tuple) else (False, ins.arg)
            obj = self.resolve(gname)
            const = calls.global_constant(obj)      # a module's R = 6371.0 (guarded by value)
            if const is not None and not push_null:
                stack.append(("v", const))
                return None
            self.push_callable(stack, ("obj", obj), push_null)
            return None
        if name in ("LOAD_ATTR", "LOAD_METHOD"):
            method, attr = ins.arg if facts.attr_pair and name == "LOAD_ATTR" else \
                (name == "LOAD_METHOD", ins.arg)
            obj = stack.pop()
            if obj[0] == "list" and attr == "append" and method:
                self.push_callable(stack, ("append", obj[1]), True)
                return None
            if obj[0] == "arr" and attr == "shape" and not method:
                stack.append(("shape", obj[1]))
                return None
            if obj[0] == "obj" and obj[1] is math and attr in MATH1 + ROUNDING:
                fn = self.module_attrs[math, attr] = getattr(math, attr)
                self.push_callable(stack, ("obj", fn), method)
                return None
            fn = calls.module_callable(obj[1], attr) if obj[0] == "obj" else None
            if fn is not None:
                self.module_attrs[obj[1], attr] = fn
                self.push_callable(stack, ("obj", fn), method)
                return None
            const = calls.module_constant(obj[1], attr) if obj[0] == "obj" else None
            if const is not None and not method:
                self.module_attrs[obj[1], attr] = getattr(obj[1], attr)
                stack.append(("v", const))
                return None
            raise Unsupported(f"attribute {attr}")
        if name == "PUSH_NULL":
            stack.append(("null",))
            return None
        if name == "POP_TOP":
            stack.pop()
            return None
        if name == "COPY":
            stack.append(stack[-ins.arg])
            return None
        if name == "SWAP":
            stack[-1], stack[-ins.arg] = stack[-ins.arg], stack[-1]
            return None
        if name == "END_FOR":
            for _ in range(-ins.stack_effect()):
                stack.pop()
            return None
        if name == "BUILD_TUPLE":
            items = stack[len(stack) - ins.arg:]
            del stack[len(stack) - ins.arg:]
            stack.append(("tuple", items))
            return None
        if name == "UNPACK_SEQUENCE":
            seq = stack.pop()
            if seq[0] == "tuple" and len(seq[1]) == ins.arg:
                stack.extend(reversed(seq[1]))
                return None
            if seq[0] == "shape" and self.entries[seq[1]].array[1] == ins.arg:
                dims = []
                for k in range(ins.arg):
                    block = self.shape(block, seq[1], k, pos, dims)
                stack.extend(reversed(dims))
                return block
            raise Unsupported(f"unpacking a {seq[0]}")
        if name == "BINARY_SUBSCR":
            index, obj = stack.pop(), stack.pop()
            if obj[0] == "shape" and index[0] == "v" and isinstance(index[1], Const):
                out = []
                block = self.shape(block, obj[1], index[1].value, pos, out)
                stack.append(out[0])
                return block
            if obj[0] == "row":         # row[j] is A[i][j]
                idx = (obj[2],) + self.indices(obj[1], index, 1)
            elif obj[0] == "arr":
                idx = self.indices(obj[1], index)
            else:
                raise Unsupported(f"subscript of a {obj[0]}")
            dst = f"t{pos}"
            dtype = self.entries[obj[1]].array[0]
            self.define(dst, (dtype,))
            stack.append(("v", dst))
            return self.emit(block, Op("load", dst, ("a_" + obj[1],) + idx,
                                       "row" if obj[0] == "row" else ""))
        if name == "STORE_SUBSCR":
            index, obj, value = stack.pop(), stack.pop(), stack.pop()
            if obj[0] not in ("arr", "row") or value[0] != "v":
                raise Unsupported(f"item assignment to a {obj[0]}")
            idx = self.indices(obj[1], index) if obj[0] == "arr" else \
                (obj[2],) + self.indices(obj[1], index, 1)
            self.check_store(obj[1], self.type(value[1]))
            self.written.add("a_" + obj[1])
            return self.emit(block, Op("store", None, ("a_" + obj[1],) + idx + (value[1],),
                                       "row" if obj[0] == "row" else ""))
        if name == "BINARY_OP":
            b, a = stack.pop(), stack.pop()
            op = _BINARY.get(BinaryOp(ins.arg).name.removeprefix("INPLACE_"))
            if op is None or a[0] != "v" or b[0] != "v":
                raise Unsupported(f"operator {BinaryOp(ins.arg).name}")
            if op == "pow":
                self.check_pow(a[1], b[1])
            return self.compute(block, stack, pos, "binop", op,
                                lambda x, y: T.binop(op, x, y), (a[1], b[1]))
        if name == "COMPARE_OP":
            b, a = stack.pop(), stack.pop()
            cmp = Compare(ins.arg if not isinstance(ins.arg, Compare) else ins.arg.value)
            op = cmp.name.removesuffix("_CAST").lower()
            if a[0] != "v" or b[0] != "v":
                raise Unsupported("comparison of non-scalars")
            rule = _compare_in_double if _held_by_float32(self, a[1], b[1]) else T.compare
            return self.compute(block, stack, pos, "cmp", op, rule, (a[1], b[1]))
        if name in _UNARY:
            a = stack.pop()
            if a[0] != "v":
                raise Unsupported("unary operator on a non-scalar")
            op = _UNARY[name]
            return self.compute(block, stack, pos, "unop", op, lambda x: T.unop(op, x), (a[1],))
        if name == "CALL_INTRINSIC_1" and str(ins.arg).endswith("UNARY_POSITIVE"):
            a = stack.pop()
            return self.compute(block, stack, pos, "unop", "pos", lambda x: T.unop("pos", x),
                                (a[1],))
        if name == "CALL":
            return self.call(block, stack, pos, ins.arg)
        if name in _compat.RETURNS:
            if not self.returns:        # (3.12+'s copies of the code after the loop aside)
                raise _Returns("a return in the loop")
            return self.ret(block, stack, ins)
        if name == "GET_ITER":
            rng = stack.pop()
            if rng[0] != "range":
                leaves = []
                block, desc = self.iterable(block, rng, pos, leaves)
                stack.append(("iter", f"it{pos}", desc))
                return block
            it = f"it{pos}"
            for part in ("cur", "stop", "step"):
                self.define(f"{it}_{part}", (T.INT,))
            stack.append(("iter", it))
            return self.emit(block, Op("range", it, tuple(rng[1]), "range"))
        if name == "FOR_ITER":
            # no iterator on the stack: a loop over one made before the region (a generator
            # expression's `for x in .0`)
            if not stack or stack[-1][0] != "iter" or any(x[0] == "v" for x in stack):
                raise Unsupported("FOR_ITER over a non-range, or with values on the stack")
            it = stack[-1]
            exit_stack = stack + [("null",)] if facts.for_iter_exit else stack[:-1]
            exit_id = self.edge(block, self.target(ins), exit_stack)
            if len(it) == 3:
                return self.next_chain(block, it[2], pos, stack, exit_id)
            # the body: the next index is stored straight into its stack variable
            var = f"s{pos + 1}_{len(stack)}"
            self.define(var, (T.INT,))
            layout = [x if x[0] != "obj" else ("obj", id(x[1]), x[1]) for x in stack]
            layout.append(("v", var))
            if pos + 1 in self.at:
                raise Unsupported("a jump into a for loop's first instruction")
            body = self.new_block()
            self.at[pos + 1] = (body.id, layout)
            self.work.append((pos + 1, body, layout))
            block.term = ("foriter", it[1], var, body.id, exit_id)
            return True
        if name in _JUMPS:
            block.term = ("jump", self.edge(block, self.target(ins), stack))
            return True
        if name.startswith("POP_JUMP") and (name.endswith("_TRUE") or name.endswith("_FALSE")):
            cond = stack.pop()
            if cond[0] != "v":
                raise Unsupported("a branch on a non-scalar")
            known = flags.truth(self, cond[1])
            if known is not None:       # the same arm on every iteration: the other is dead
                jumps = known == name.endswith("_TRUE")
                block.term = ("jump", self.edge(block, self.target(ins) if jumps else pos + 1,
                                                stack))
                return True
            block, c = self.truth(block, cond[1], pos)
            taken = self.edge(block, self.target(ins), stack)
            fall = self.edge(block, pos + 1, stack)
            block.term = ("branch", c, taken, fall) if name.endswith("_TRUE") else \
                ("branch", c, fall, taken)
            return True
        if name in ("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP"):
            cond = stack[-1]
            if cond[0] != "v":
                raise Unsupported("and/or of non-scalars")
            block, c = self.truth(block, cond[1], pos)
            taken = self.edge(block, self.target(ins), stack)
            fall = self.edge(block, pos + 1, stack[:-1])
            block.term = ("branch", c, taken, fall) if name == "JUMP_IF_TRUE_OR_POP" else \
                ("branch", c, fall, taken)
            return True
        raise Unsupported(f"instruction {name}")

    # -- helpers ---------------------------------------------------------------------------
    def ret(self, block: Block, stack: list, ins: Instr):
        """A return (3.11's RETURN_VALUE; 3.12+'s RETURN_CONST too): its value into RETURN,
        then the nest's exit. The iterators under it (3.11-3.13 pop them first; a 3.12+
        RETURN_CONST leaves none either) end with the nest."""
        if ins.name == "RETURN_CONST":
            t = T.of_value(ins.arg)
            if t is None:
                raise Unsupported(f"returning {ins.arg!r}")
            item = ("v", Const(ins.arg, t))
        else:
            item = stack.pop()
        if item[0] == "list" and self.returns and self.returned in (None, item[1]):
            self.returned = item[1]     # the list itself: capture returns its graph value
            block.term = ("jump", self.edge(block, self.end + 1, []))
            return True
        if item[0] != "v":
            raise Unsupported(f"returning a {item[0]}")
        self.define(RETURN, self.type(item[1]))
        block = self.emit(block, Op("copy", RETURN, (item[1],)))
        block.term = ("jump", self.edge(block, self.end + 1, []))
        return True

    def keep_loaded(self, block: Block, stack: list, var: str, pos: int) -> Block:
        """Before `var` is stored: stack items that stand for it (a LOAD_FAST pushes the
        variable, read where the item is used) get the value it has now. CPython 3.11+ drops
        the SWAP of `a, b = b, a + b` by storing b first (apply_static_swaps): the `b` still on
        the stack for a is the value b had when it was loaded."""
        if not any(_reads(item, var) for item in stack):
            return block
        old = f"o{pos}_{var}"
        self.define(old, self.type(var))
        block = self.emit(block, Op("copy", old, (var,)))
        stack[:] = [_renamed(item, var, old) for item in stack]
        return block

    def local(self, name):
        if name in self.aliases:
            return self.aliases[name]
        e = self.entries.get(name)
        if e is not None and e.array is not None:
            self.arrays_used.add(name)
            return ("arr", name)
        if e is not None and e.is_list:
            self.arrays_used.add(name)
            return ("list", name)
        return ("v", "l_" + name)

    def push_callable(self, stack, item, with_null: bool):
        if not with_null:
            stack.append(item)
        elif _compat.BYTECODE.null_first:
            stack += [("null",), item]
        else:
            stack += [item, ("null",)]

    def shape(self, block, arr, k, pos, out):
        dst = f"t{pos}_{k}" if k else f"t{pos}"
        if not 0 <= k < self.entries[arr].array[1]:
            raise Unsupported("shape index out of range")
        self.define(dst, (T.INT,))
        block = self.emit(block, Op("shape", dst, ("a_" + arr, Const(k, T.INT))))
        out.append(("v", dst))
        return block

    def indices(self, arr, index, taken: int = 0) -> tuple:
        """The index operands of arr[index]; `taken`: leading dimensions already indexed
        (1 for a row of a 2-D array)."""
        items = index[1] if index[0] == "tuple" else [index]
        if len(items) != self.entries[arr].array[1] - taken:
            raise Unsupported("an index that is not one integer per dimension")
        idx = []
        for it in items:
            if it[0] != "v" or any(T.kind(m) != "i" for m in self.type(it[1])):
                raise Unsupported("an index that is not an integer")
            idx.append(it[1])
        return tuple(idx)

    # -- iterators -------------------------------------------------------------------------
    def iterable(self, block, item, pos, leaves):
        """Set up the iterator of `item` at GET_ITER: (block, its description). Each range
        or array iterated gets a range iterator (a leaf, named in `leaves`); enumerate's
        counter starts at its start."""
        kind = item[0]
        n = len(leaves)
        if kind == "enumerate":
            block, inner = self.iterable(block, item[1], pos, leaves)
            count = f"c{pos}_{n}"
            self.define(count, (T.INT,))
            block = self.emit(block, Op("copy", count, (item[2],)))
            return block, ("enum", count, inner, _ordinal(inner), item[2])
        if kind == "zip":
            parts = []
            for x in item[1]:
                block, d = self.iterable(block, x, pos, leaves)
                parts.append(d)
            return block, ("zip", parts)
        it = f"it{pos}_{n}"
        leaves.append(it)
        for part in ("cur", "stop", "step"):
            self.define(f"{it}_{part}", (T.INT,))
        if kind == "range":
            return self.emit(block, Op("range", it, tuple(item[1]), "range")), ("range", it)
        if kind == "arr" and self.entries[item[1]].array[1] in (1, 2) or kind == "row":
            arr = item[1]
            dim = int(kind == "row")
            size = f"n{pos}_{n}"
            self.define(size, (T.INT,))
            block = self.emit(block, Op("shape", size, ("a_" + arr, Const(dim, T.INT))))
            block = self.emit(block, Op("range", it, (Const(0, T.INT), size, Const(1, T.INT)),
                                        "range"))
            if kind == "row":                      # for x in row: A[i][k]
                return block, ("elem", it, arr, item[2])
            if self.entries[arr].array[1] == 2:    # for row in A
                return block, ("rows", it, arr)
            return block, ("elem", it, arr, None)
        if kind == "view":
            size = f"n{pos}_{n}"
            self.define(size, (T.INT,))
            return views.iterate(self, block, item[1], pos, it, size)
        raise Unsupported(f"iterating over a {kind}")

    def next_chain(self, block, desc, pos, stack, exit_id):
        """FOR_ITER of an iterator set up by `iterable`: a foriter per leaf, each leaving
        the loop when exhausted; the body (at pos + 1) starts with the item they make."""
        layout = [x if x[0] != "obj" else ("obj", id(x[1]), x[1]) for x in stack]
        if pos + 1 in self.at:
            raise Unsupported("a jump into a for loop's first instruction")
        for it in _leaves(desc):
            var = f"{it}_k"
            self.define(var, (T.INT,))
            nxt = self.new_block()
            block.term = ("foriter", it, var, nxt.id, exit_id)
            block = nxt
        self.at[pos + 1] = (block.id, layout + [("item",)])
        self.work.append((pos + 1, block, layout, desc))
        return True

    def next_item(self, block, desc):
        """(block, the stack item) of one step of an iterator: its elements loaded at the
        leaves' indices, enumerate's counter read then advanced (an exact Python int: the
        add hands over to Python past int64)."""
        kind = desc[0]
        if kind == "range":
            return block, ("v", f"{desc[1]}_k")
        if kind == "rows":
            return block, ("row", desc[2], f"{desc[1]}_k")
        if kind == "velem":
            return views.element(self, block, desc)
        if kind == "elem":
            it, arr, row = desc[1:]
            dst = f"{it}_x"
            self.define(dst, (self.entries[arr].array[0],))
            idx = (f"{it}_k",) if row is None else (row, f"{it}_k")
            block = self.emit(block, Op("load", dst, ("a_" + arr,) + idx,
                                        "" if row is None else "row"))
            return block, ("v", dst)
        if kind == "zip":
            items = []
            for d in desc[1]:
                block, x = self.next_item(block, d)
                items.append(x)
            return block, ("tuple", items)
        count, _, ordinal, start = desc[1:]     # enum
        block, inner = self.next_item(block, desc[2])
        value = f"{count}_v"
        self.define(value, (T.INT,))
        _, domain = T.binop("add", T.INT, T.INT)
        if ordinal is not None and start == Const(0, T.INT):
            block = self.emit(block, Op("copy", value, (ordinal,)))
        elif ordinal is not None:
            # start + the index of an array's element: one induction variable (bounds.py
            # and ranges.py see an index, gcc one counter), exact past int64 (hands over)
            addend = start if isinstance(start, Const) else count
            block = self.emit(block, Op("binop", value, (ordinal, addend), "add", domain))
        else:
            block = self.emit(block, Op("copy", value, (count,)))
            block = self.emit(block, Op("binop", count, (count, Const(1, T.INT)), "add",
                                        domain))
        return block, ("tuple", [("v", value), inner])

    def alias(self, name, item):
        """`row` bound to a row of a 2-D array: an alias of (array, index), valid while the
        loop's index is the row's, so the local must be bound by that loop only. A read
        the loop may not have bound it for (before the loop, after zero trips) makes it
        live at the nest's start, so an entry (rejected here) or unbound (capture.py
        rejects the nest); a read after the nest is rejected by `recognise`."""
        stores = sum(1 for i in self.instrs[self.start:self.end + 1]
                     if isinstance(i, Instr) and i.name in ("STORE_FAST", "DELETE_FAST")
                     and i.arg == name)
        if name in self.entries or stores != 1:
            raise Unsupported(f"{name} is a row and bound elsewhere too")
        self.aliases[name] = item

    def check_store(self, arr, vtype):
        dtype = self.entries[arr].array[0]
        for m in vtype:
            k = T.kind(m)
            ok = (m == dtype or
                  dtype.kind in "iu" and k == "i" or
                  dtype.kind == "f" and k in "if" or
                  dtype.kind == "b" and k == "b")
            if not ok:
                raise Unsupported(f"storing a {T.name(m)} into a {dtype} array")

    def check_pow(self, base, exponent):
        """`**` whose result type is the inferred one on every path: Python's int ** -1 is a
        float and float ** 0.5 of a negative float a complex, so the exponent must be a
        constant, a non-negative int for int bases and an integral one for Python floats."""
        if not isinstance(exponent, Const):
            raise Unsupported("** with an exponent known only at run time")
        kinds = {T.kind(m) for m in self.type(base) if not T.is_np(m)}
        e = exponent.value
        if kinds & {"i", "b"} and not (T.kind(exponent.type) in "ib" and e >= 0):
            raise Unsupported("int ** a negative or float exponent")
        if "f" in kinds and float(e) != int(e):
            raise Unsupported("float ** a non-integral exponent")

    def compute(self, block, stack, pos, kind, op, rule, operands):
        vtype, domain, results = T.combine(rule, *(self.type(o) for o in operands))
        if domain[0] == "f" and not any(T.is_np(m) for o in operands for m in self.type(o)):
            domain += ("py",)       # Python floats: inf and nan come silently, no warning
        dst = f"t{pos}"
        self.define(dst, vtype)
        block = self.emit(block, Op(kind, dst, tuple(operands), op, domain,
                                    results=results if len(vtype) > 1 else {}))
        stack.append(("v", dst))
        return block

    def truth(self, block, operand, pos):
        """A branch condition: a bool variable as it is, else bool(operand)."""
        if isinstance(operand, str) and set(self.type(operand)) <= {T.BOOL, T.NPBOOL}:
            return block, operand
        dst = f"c{pos}"
        self.define(dst, (T.BOOL,))
        block = self.emit(block, Op("call", dst, (operand,), "bool", ("truth",)))
        return block, dst

    def call(self, block, stack, pos, nargs):
        if isinstance(nargs, tuple):
            raise Unsupported("a call with keyword arguments")
        args = stack[len(stack) - nargs:]
        del stack[len(stack) - nargs:]
        a, b = stack.pop(), stack.pop()
        if ("null",) in (a, b) and "append" in (a[0], b[0]):
            target = a if a[0] == "append" else b
            return appends.append(self, block, stack, pos, target[1], args)
        fn = a if a[0] == "obj" else b if b[0] == "obj" else None
        if fn is None or ("null",) not in (a, b):
            raise Unsupported("a call of a method or an unknown object")
        try:
            fname = _CALLS.get(fn[1])
        except TypeError:
            fname = None
        if fname is None:       # NumPy's ufuncs and scalar types, the user's functions
            return calls.call(self, block, stack, pos, fn[1], args)
        self.funcs[fname] = fn[1]
        if fname == "range":
            if not 1 <= nargs <= 3 or any(x[0] != "v" or any(T.kind(m) not in "ib" for m in
                                                             self.type(x[1])) for x in args):
                raise Unsupported("range() of these arguments")
            stack.append(("range", [x[1] for x in args]))
            return None
        if fname == "len":
            if nargs != 1 or args[0][0] not in ("arr", "row"):
                raise Unsupported("len() of a non-array")
            out = []
            block = self.shape(block, args[0][1], int(args[0][0] == "row"), pos, out)
            stack.append(out[0])
            return block
        if fname == "enumerate":
            if nargs == 1:
                start = Const(0, T.INT)
            elif nargs == 2 and args[1][0] == "v" and self.type(args[1][1]) == (T.INT,):
                start = args[1][1]
            else:
                raise Unsupported("enumerate() of these arguments")
            stack.append(("enumerate", args[0], start))
            return None
        if fname == "zip":
            if not 2 <= nargs <= 3:
                raise Unsupported(f"zip() of {nargs} iterables")
            stack.append(("zip", args))
            return None
        if any(x[0] != "v" for x in args):
            raise Unsupported(f"{fname}() of a non-scalar")
        operands = tuple(x[1] for x in args)
        if fname in ("min", "max"):
            if nargs < 2:
                raise Unsupported(f"{fname}() of {nargs} arguments")
            # min(a, b, c) is min(min(a, b), c): Python's min keeps the item it holds unless
            # a later one compares less, which is what each two-operand op does
            first = operands[0]
            for k, other in enumerate(operands[1:], 2):
                ta, tb = self.type(first), self.type(other)
                vtype = T.vt(*ta, *tb)
                _, domain, _ = T.combine(T.compare, ta, tb)
                dst = f"t{pos}" if k == nargs else f"t{pos}m{k}"
                self.define(dst, vtype)
                block = self.emit(block, Op("call", dst, (first, other), fname, domain))
                first = dst
            stack.append(("v", first))
            return block
        if nargs != 1:
            raise Unsupported(f"{fname}() of {nargs} arguments")
        return self.compute(block, stack, pos, "call", fname, lambda x: _call_rule(fname, x),
                            operands)


def _ordinal(desc):
    """The variable counting an iterator's steps from 0 (the index of an array's element or
    row: every array leaf of a zip steps with it), or None (a range's element is not)."""
    if desc[0] in ("elem", "rows", "velem"):
        return f"{desc[1]}_k"
    if desc[0] == "zip":
        return next((x for x in map(_ordinal, desc[1]) if x is not None), None)
    return None


def _leaves(desc) -> list:
    """The range iterators of an iterator description, in the order their `next` runs."""
    if desc[0] == "enum":
        return _leaves(desc[2])
    if desc[0] == "zip":
        return [it for d in desc[1] for it in _leaves(d)]
    return [desc[1]]


def _call_rule(fname, t):
    """(result type, domain) of abs/int/float/bool/math.f of a static type."""
    k = T.kind(t)
    if fname == "abs":
        if k == "b":
            raise Unsupported("abs of a bool")
        if k == "f":
            return t, ("f", T.dtype_of(t))
        if T.is_np(t) and t.kind == "u":
            return t, ("int", t)
        return t, ("i64",) if not T.is_np(t) or t == T.I64 else ("int", t)
    if fname == "int":
        return T.INT, ("tof",) if k == "f" else ("toi",)
    if fname in ROUNDING:
        if t not in (T.FLOAT, T.F64):       # np.float32 has no __trunc__; ints: themselves
            raise Unsupported(f"math.{fname} of a {T.name(t)}")
        return T.INT, ("tof", fname)
    if fname == "float":
        return T.FLOAT, ("f", T.F64)
    if fname == "bool":
        return T.BOOL, ("truth",)
    return T.FLOAT, ("math",)


# Stack items whose operands (variable names, constants) a later store may change: a value,
# a built tuple, range() arguments, and slices.py's slices, views and view expressions.
_OPERAND_ITEMS = ("v", "tuple", "range", "slice", "view", "vexpr", "vupdate", "vmethod")
# Fields of slices.py's records that name no operand.
_NOT_OPERANDS = frozenset(("array", "op", "dtype", "domain", "type"))


def _reads(item, var: str) -> bool:
    """Whether a stack item reads the variable var (where it is used)."""
    found = []
    _renamed(item, var, var, found)
    return bool(found)


def _renamed(item, var: str, new: str, found=None):
    """The item with its operand var renamed new (found: appended to at each one)."""
    if not (isinstance(item, tuple) and item and item[0] in _OPERAND_ITEMS):
        return item

    def rename(x):
        if isinstance(x, str):
            if x != var:
                return x
            if found is not None:
                found.append(x)
            return new
        if isinstance(x, (tuple, list)):
            return type(x)(rename(y) for y in x)
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return dataclasses.replace(x, **{f.name: rename(getattr(x, f.name))
                                             for f in dataclasses.fields(x)
                                             if f.name not in _NOT_OPERANDS})
        return x
    return (item[0],) + tuple(rename(x) for x in item[1:])
