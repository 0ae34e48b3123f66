"""Nest -> a Python function running it from any block: the nest's reference semantics.

`run(block, *arrays, *variables)` executes the IR with Python's own operators on Python and
NumPy objects, exactly what the loop's bytecode does (each op is the operation of one
instruction), from the start of `block` with every variable given (None: not bound yet), and
returns the outputs. It runs the whole nest at O0, and the rest of it after the C kernel
bailed (an int leaving int64, an index out of bounds, a zero divisor...): the failing
operation then happens here, raising or warning exactly as plain Python would.
The code is compiled with the user's file name and each op's line number, so tracebacks
point at the user's lines, and the user's locals and arrays keep the user's names (the nest's
own temporaries are named as pijit's), so a debugger there shows the user's variables.
"""
from __future__ import annotations

import ast
import struct

from pijit.bytecode_gen.reconstruct import INTERNAL_PREFIX
from pijit.loopnest import appends, raises, slices
from pijit.loopnest.ir import Const, Nest, successors
from pijit.quiet import registry_sync, warning_scope

_BINOP = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
          "pow": "**", "lshift": "<<", "rshift": ">>", "and": "&", "or": "|", "xor": "^"}
_CMP = {"lt": "<", "le": "<=", "eq": "==", "ne": "!=", "gt": ">", "ge": ">="}
_UNOP = {"neg": "-", "pos": "+", "invert": "~", "not": "not "}


def signature(nest: Nest) -> list:
    """The run function's parameters after the block: arrays, then every variable."""
    return list(nest.arrays) + nest.variables()


def _operand(x) -> str:
    if not isinstance(x, Const):
        return x
    if type(x.value) is float and x.value in (float("inf"), float("-inf")):
        return "1e999" if x.value > 0 else "(-1e999)"       # repr gives `inf`, a name
    if type(x.value) is float and x.value != x.value:
        # repr gives `nan`, a name, and no literal keeps a NaN's sign and payload: its bits
        return f"_f_float_bits({struct.unpack('<Q', struct.pack('<d', x.value))[0]:#x})"
    text = repr(x.value)
    # A negative literal is a unary minus: `-2 ** 200` is -(2 ** 200) (the base of a `**`
    # CPython did not fold, its result being too large)
    return f"({text})" if text.startswith("-") else text


def _float_bits(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def _op_line(op) -> str:
    if op.array is not None:
        return slices.python_line(op, _operand)
    if op.kind == "raise":
        return raises.python_line(op, _operand)
    if op.kind == "append":
        return appends.python_line(op, _operand)
    a = [_operand(x) for x in op.args]
    if op.kind == "copy":
        return f"{op.dst} = {a[0]}"
    if op.kind == "binop":
        return f"{op.dst} = {a[0]} {_BINOP[op.op]} {a[1]}"
    if op.kind == "cmp":
        return f"{op.dst} = {a[0]} {_CMP[op.op]} {a[1]}"
    if op.kind == "unop":
        return f"{op.dst} = {_UNOP[op.op]}{a[0]}"
    if op.kind == "call" and op.op == "bool" and op.domain == ("truth",):
        return f"{op.dst} = not not {a[0]}"          # bool(x) without a call
    if op.kind == "call":
        return f"{op.dst} = _f_{op.op}({', '.join(a)})"
    if op.kind == "load":
        return f"{op.dst} = {a[0]}{_index(op, a[1:])}"
    if op.kind == "store":
        return f"{a[0]}{_index(op, a[1:-1])} = {a[-1]}"
    if op.kind == "shape":
        return f"{op.dst} = {a[0]}.shape[{a[1]}]"
    if op.kind == "range":
        it = op.dst
        return (f"_r = _f_range({', '.join(a)}); "
                f"{it}_cur, {it}_stop, {it}_step = _r.start, _r.stop, _r.step")
    raise AssertionError(op.kind)


def _index(op, idx) -> str:
    """[i, j], or [i][j] for an element of a row (`row[j]` of `for row in A`), whose
    IndexError names axis 0 as the user's `row[j]` does."""
    if op.op == "row":
        return f"[{idx[0]}][{', '.join(idx[1:])}]"
    return f"[{', '.join(idx)}]"


def source(nest: Nest, name: str) -> tuple:
    """(source text, {line in the text: the user's line}) of the run function.

    Every block is an entry (`if _b == k`), and each entry runs on through the blocks its
    unconditional jumps reach when they have no other predecessor, or have no ops (a loop's
    FOR_ITER test): the blocks split at every op that may hand over then cost no dispatch
    (measured: 2.6-3.3x plain Python with one dispatch per block, see lower_py's tests)."""
    preds = {b.id: 0 for b in nest.blocks}
    for b in nest.blocks:
        for t in successors(b.term):
            preds[t] += 1
    by_id = {b.id: b for b in nest.blocks}
    lines = [f"def {name}(_b, {', '.join(signature(nest))}):", "    while True:"]
    where = {}

    def case(b, pad):
        chain, cur = [b.id], b
        while True:
            for op in cur.ops:
                where[len(lines) + 1] = op.lineno
                lines.append(pad + _op_line(op))
            t = cur.term
            if t[0] == "jump" and t[1] not in chain and (
                    preds[t[1]] == 1 or not by_id[t[1]].ops):
                cur = by_id[t[1]]
                chain.append(cur.id)
                continue
            break
        lines.extend(pad + row for row in _term_lines(nest, cur.term))

    def dispatch(blocks, pad):
        """A binary search over block ids: log2(blocks) tests per transition."""
        if len(blocks) == 1:
            case(blocks[0], pad)
            return
        mid = len(blocks) // 2
        lines.append(f"{pad}if _b < {blocks[mid].id}:")
        dispatch(blocks[:mid], pad + "    ")
        lines.append(f"{pad}else:")
        dispatch(blocks[mid:], pad + "    ")

    dispatch(sorted(nest.blocks, key=lambda b: b.id), "        ")
    return "\n".join(lines) + "\n", where


def _term_lines(nest: Nest, t) -> list:
    if t[0] == "jump":
        return [f"_b = {t[1]}"]
    if t[0] == "branch":
        return [f"_b = {t[2]} if {t[1]} else {t[3]}"]
    if t[0] == "foriter":
        it = t[1]
        return [f"if {it}_cur < {it}_stop if {it}_step > 0 else {it}_cur > {it}_stop:",
                f"    {t[2]} = {it}_cur",
                f"    {it}_cur += {it}_step",
                f"    _b = {t[3]}",
                "else:",
                f"    _b = {t[4]}"]
    if t[0] == "raise":
        return []
    return [f"return ({''.join(o + ', ' for o in nest.outputs)})"]


def compile_run(nest: Nest, name: str, filename: str, module: dict | None = None):
    """(the run function, its source). Each op's statement carries the user's line number
    (set in the AST), so a traceback through the nest's Python form points at the user's
    line; the scaffolding around ops carries the loop's first line."""
    text, where = source(nest, name)
    tree = ast.parse(text, filename)
    first = nest.lineno or 1
    for node in ast.walk(tree):
        if hasattr(node, "lineno"):
            line = where.get(node.lineno) or first
            node.lineno = node.end_lineno = line
            node.col_offset, node.end_col_offset = 0, 0
    _UserNames(nest).visit(tree)
    namespace = warning_scope(module)
    sync = registry_sync(namespace)
    for node in (n for stmt in sync for n in ast.walk(stmt) if hasattr(n, "lineno")):
        node.lineno = node.end_lineno = first
        node.col_offset, node.end_col_offset = 0, 0
    tree.body[0].body[:0] = sync
    namespace.update({f"_f_{k}": v for k, v in nest.funcs.items()})
    namespace["_f_range"] = range
    namespace["_f_bool"] = bool
    namespace["_f_float_bits"] = _float_bits
    exec(compile(tree, filename, "exec"), namespace)
    return namespace[name], text


class _UserNames(ast.NodeTransformer):
    """Variables of the IR -> names in the run function: a user local `l_x` or array `a_x` is
    `x` (an array whose name is also a local's stays internal), anything else is internal;
    the functions the namespace provides (`_f_*`) stay, so a user's name of that form stays
    internal (a local `_f_range` would shadow the range the nest calls)."""

    def __init__(self, nest: Nest):
        self.names = {}
        for v in signature(nest):
            if v.startswith("l_") and not v[2:].startswith("_f_"):
                self.names[v] = v[2:]
        taken = set(self.names.values())
        for a in nest.arrays:
            if a.startswith("a_") and a[2:] not in taken and not a[2:].startswith("_f_"):
                self.names[a] = a[2:]

    def _name(self, name: str) -> str:
        if name.startswith("_f_"):
            return name
        return self.names.get(name) or INTERNAL_PREFIX + name

    def visit_Name(self, node):
        node.id = self._name(node.id)
        return node

    def visit_arg(self, node):
        node.arg = self._name(node.arg)
        return node
