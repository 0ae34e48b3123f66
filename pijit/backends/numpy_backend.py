"""The reference backend (O0): Graph -> a generated straight-line Python function.

Nodes become expression trees: a value used exactly once is inlined into its user when that
keeps the original evaluation order (see `plan_inlining`), so temporaries die as soon as their
user has run and NumPy can elide them (`a*b + c` adds into the `a*b` buffer: it only does so
for operands with refcount 1 reached through real interpreter operators, so Python operators
are written with operator syntax). Remaining values get locals, deleted after their last use.

Every expression carries the user's file name and the line of the node it computes, so an
error raised at run time shows the user's line.
"""
from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from typing import Callable

from pijit.graph.ir import Graph, Ref, node_refs

# Constants written as literals in the generated source; everything else is bound by name.
_LITERAL_TYPES = (bool, int, str, type(None))

# Looked up by id(): node.fn may be unhashable (a bound method of an ndarray, ...).
_BINARY = {id(f): s for f, s in [
    (operator.add, "+"), (operator.sub, "-"), (operator.mul, "*"), (operator.truediv, "/"),
    (operator.floordiv, "//"), (operator.mod, "%"), (operator.pow, "**"),
    (operator.matmul, "@"), (operator.lshift, "<<"), (operator.rshift, ">>"),
    (operator.and_, "&"), (operator.or_, "|"), (operator.xor, "^"), (operator.lt, "<"),
    (operator.le, "<="), (operator.eq, "=="), (operator.ne, "!="), (operator.gt, ">"),
    (operator.ge, ">=")]}
_UNARY = {id(operator.neg): "-", id(operator.pos): "+", id(operator.invert): "~"}
_INPLACE = frozenset(id(f) for f in (
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
    operator.imod, operator.ipow, operator.imatmul, operator.ilshift, operator.irshift,
    operator.iand, operator.ior, operator.ixor))
_INLINE_PREFIX = "__pijit_inline_"
# Deepest nesting of inlined nodes in one statement (code generation recurses per level).
MAX_TREE_DEPTH = 32


@dataclass(frozen=True)
class CompiledGraph:
    """A graph ready to run: fn(*inputs) -> tuple of outputs. `source` is for dumps."""
    fn: Callable
    source: str
    backend: str = "numpy"


def is_inplace(node) -> bool:
    """An in-place operator node (`a += b` on a fresh array): it mutates its first argument."""
    return id(node.fn) in _INPLACE


def plan_inlining(graph: Graph) -> set:
    """Value numbers of the nodes written inline in their single user.

    A candidate is a non-in-place node used exactly once. Inlining moves its evaluation to its
    user's, so it is done only when nothing is reordered: walking the nodes in order, pending
    candidates form a stack, and a user takes the longest top of that stack whose items it
    evaluates in the same order. Pending nodes that cannot be taken become statements at their
    own position, and so do all pending nodes below them; a statement node (in-place, multi-use
    or unused) turns every pending node into a statement. In particular nothing is moved past
    an in-place update, so no read can observe mutated data. Trees are at most
    MAX_TREE_DEPTH nodes deep.
    """
    uses: dict = {}
    for node in graph.nodes:
        for r in node_refs(node):
            uses[r.index] = uses.get(r.index, 0) + 1
    for r in graph.outputs:
        uses[r.index] = uses.get(r.index, 0) + 1

    inlined: set = set()
    pending: list = []
    depth: dict = {}   # value number -> nesting depth of its expression tree

    def consume(refs) -> int:
        pos = {r.index: i for i, r in enumerate(refs)}   # candidates occur once
        t, last = len(pending), len(refs)
        while t and pending[t - 1] in pos and pos[pending[t - 1]] < last:
            t -= 1
            last = pos[pending[t]]
        taken = pending[t:]
        inlined.update(taken)
        del pending[t:]
        # An operand left pending becomes a statement, with everything evaluated before it.
        for k in range(len(pending) - 1, -1, -1):
            if pending[k] in pos:
                del pending[:k + 1]
                break
        return 1 + max((depth[i] for i in taken), default=0)

    for node in graph.nodes:
        depth[node.out] = consume(node_refs(node))
        if (uses.get(node.out, 0) == 1 and not is_inplace(node)
                and depth[node.out] < MAX_TREE_DEPTH):
            pending.append(node.out)
        else:
            pending.clear()
    consume(graph.outputs)
    return inlined


def compile_graph(graph: Graph, name: str, filename: str, firstlineno: int) -> CompiledGraph:
    env: dict = {}
    inlined = plan_inlining(graph)
    by_out = {node.out: node for node in graph.nodes}

    def const(obj) -> str:
        if type(obj) in _LITERAL_TYPES or obj is Ellipsis:
            text = repr(obj)
        elif type(obj) is float and obj == obj and obj not in (float("inf"), float("-inf")):
            text = repr(obj)
        else:
            key = f"c{len(env)}"
            env[key] = obj
            return key
        return f"({text})" if text.startswith("-") else text

    def text(arg) -> str:
        if isinstance(arg, Ref):
            return f"{_INLINE_PREFIX}{arg.index}" if arg.index in inlined else f"v{arg.index}"
        if type(arg) is tuple:
            inner = ", ".join(text(a) for a in arg)
            return f"({inner},)" if len(arg) == 1 else f"({inner})"
        if type(arg) is list:
            return "[" + ", ".join(text(a) for a in arg) + "]"
        if type(arg) is dict:
            return "{" + ", ".join(f"{text(k)}: {text(v)}" for k, v in arg.items()) + "}"
        if type(arg) is slice:
            return f"slice({text(arg.start)}, {text(arg.stop)}, {text(arg.step)})"
        return const(arg)

    def node_text(node) -> str:
        key, args = id(node.fn), node.args
        if not node.kwargs:
            if len(args) == 2 and key in _BINARY:
                return f"({text(args[0])} {_BINARY[key]} {text(args[1])})"
            if len(args) == 1 and key in _UNARY:
                return f"({_UNARY[key]}{text(args[0])})"
            if len(args) == 2 and node.fn is operator.getitem:
                return f"{text(args[0])}[{text(args[1])}]"
        fn_name = f"f{node.out}"
        env[fn_name] = node.fn
        parts = [text(a) for a in args] + [f"{k}={text(v)}" for k, v in node.kwargs]
        return f"{fn_name}({', '.join(parts)})"

    def tree(source: str, lineno: int) -> ast.expr:
        """Parse an expression, line it, and splice in the inlined nodes it names."""
        expr = ast.parse(source, mode="eval").body
        set_position(expr, lineno)
        return _Splice(lambda index: node_expr(by_out[index])).visit(expr)

    def node_expr(node) -> ast.expr:
        return tree(node_text(node), node.lineno or firstlineno)

    # Statements: (ast statement, value numbers it reads by name).
    body, reads = [], []
    outputs = {r.index for r in graph.outputs}
    used = {r.index for node in graph.nodes for r in node_refs(node)} | outputs
    for node in graph.nodes:
        if node.out in inlined:
            continue
        lineno = node.lineno or firstlineno
        value = node_expr(node)
        if node.out in used:
            stmt = ast.Assign([ast.Name(f"v{node.out}", ast.Store())], value)
        else:
            stmt = ast.Expr(value)
        body.append(set_position(stmt, lineno, deep=False))
        reads.append(named_reads(value))
    lineno = (graph.nodes[-1].lineno if graph.nodes else None) or firstlineno
    outs = ", ".join(text(r) for r in graph.outputs) + ("," if len(graph.outputs) == 1 else "")
    ret = ast.Return(tree(f"({outs})", lineno))
    body.append(set_position(ret, lineno, deep=False))
    reads.append(named_reads(ret.value))

    # `del` each local after its last read (inputs belong to the caller; outputs are returned).
    last_read = {}
    for k, names in enumerate(reads):
        for index in names:
            last_read[index] = k
    dead: dict = {}
    for index, k in last_read.items():
        if index in by_out and index not in outputs:
            dead.setdefault(k, []).append(index)
    stmts = []
    for k, stmt in enumerate(body):
        stmts.append(stmt)
        if k in dead and k < len(body) - 1:
            targets = [ast.Name(f"v{i}", ast.Del()) for i in sorted(dead[k])]
            stmts.append(set_position(ast.Delete(targets), stmt.lineno))

    params = [ast.arg(f"v{r.index}") for r in graph.inputs]
    func = ast.FunctionDef(name, ast.arguments([], params, None, [], [], None, []), stmts, [],
                           None, type_comment=None)
    module = ast.fix_missing_locations(
        ast.Module([set_position(func, firstlineno, deep=False)], []))
    source = ast.unparse(module) + "\n"
    code = compile(module, filename, "exec")
    exec(code, env)
    return CompiledGraph(env[name], source)


class _Splice(ast.NodeTransformer):
    """Replaces the placeholder names of inlined nodes by their expressions."""

    def __init__(self, build):
        self.build = build

    def visit_Name(self, node):
        if node.id.startswith(_INLINE_PREFIX):
            return self.build(int(node.id[len(_INLINE_PREFIX):]))
        return node


def named_reads(expr: ast.expr) -> set:
    """Value numbers read through `vN` names in an expression."""
    return {int(n.id[1:]) for n in ast.walk(expr)
            if isinstance(n, ast.Name) and n.id[:1] == "v" and n.id[1:].isdigit()}


def set_position(node, lineno: int, deep: bool = True):
    """Put the user's line on a generated AST node (and its children when `deep`).

    Columns would refer to the generated text, not the user's line, so they are dropped
    (-1: no column information), which keeps tracebacks from underlining unrelated text.
    """
    for n in (ast.walk(node) if deep else (node,)):
        if "lineno" in n._attributes:
            n.lineno = n.end_lineno = lineno
            n.col_offset = n.end_col_offset = -1
    return node
