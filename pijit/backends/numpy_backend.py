"""The reference backend (O0): Graph -> a generated straight-line Python function.

Each node becomes one statement calling the captured NumPy callable. Statements carry the
user's file name and line numbers, so an error raised at run time shows the user's line.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable

from pijit.graph.ir import Graph, Ref

# Constants written as literals in the generated source; everything else is bound by name.
_LITERAL_TYPES = (bool, int, str, type(None))


@dataclass(frozen=True)
class CompiledGraph:
    """A graph ready to run: fn(*inputs) -> tuple of outputs. `source` is for dumps."""
    fn: Callable
    source: str
    backend: str = "numpy"


def compile_graph(graph: Graph, name: str, filename: str, firstlineno: int) -> CompiledGraph:
    env: dict = {}
    lines, linenos = [], []

    def const(obj) -> str:
        if type(obj) in _LITERAL_TYPES or obj is Ellipsis:
            return repr(obj)
        if type(obj) is float and obj == obj and obj not in (float("inf"), float("-inf")):
            return repr(obj)
        key = f"c{len(env)}"
        env[key] = obj
        return key

    def expr(arg) -> str:
        if isinstance(arg, Ref):
            return f"v{arg.index}"
        if type(arg) is tuple:
            inner = ", ".join(expr(a) for a in arg)
            return f"({inner},)" if len(arg) == 1 else f"({inner})"
        if type(arg) is list:
            return "[" + ", ".join(expr(a) for a in arg) + "]"
        if type(arg) is dict:
            return "{" + ", ".join(f"{expr(k)}: {expr(v)}" for k, v in arg.items()) + "}"
        if type(arg) is slice:
            return f"slice({expr(arg.start)}, {expr(arg.stop)}, {expr(arg.step)})"
        return const(arg)

    params = ", ".join(f"v{r.index}" for r in graph.inputs)
    for node in graph.nodes:
        fn_name = f"f{node.out}"
        env[fn_name] = node.fn
        args = [expr(a) for a in node.args] + [f"{k}={expr(v)}" for k, v in node.kwargs]
        lines.append(f"    v{node.out} = {fn_name}({', '.join(args)})")
        linenos.append(node.lineno or firstlineno)
    outs = ", ".join(f"v{r.index}" for r in graph.outputs)
    lines.append(f"    return ({outs}{',' if len(graph.outputs) == 1 else ''})")
    linenos.append(linenos[-1] if linenos else firstlineno)
    source = f"def {name}({params}):\n" + "\n".join(lines) + "\n"

    tree = ast.parse(source)
    func_def = tree.body[0]
    func_def.lineno = func_def.end_lineno = firstlineno
    for stmt, lineno in zip(func_def.body, linenos):
        for node in ast.walk(stmt):
            if hasattr(node, "lineno"):
                node.lineno = node.end_lineno = lineno
    code = compile(tree, filename, "exec")
    exec(code, env)
    return CompiledGraph(env[name], source)
