"""Common-subexpression elimination: Graph -> Graph where a pure node identical to an earlier
one (same fn, same arguments) is replaced by it.

Skipped entirely when the graph mutates arrays in place, directly or in a loop node's body
(sharing a value could then expose a mutation), and never applied to a node that is itself a graph output (two outputs that are
one object would alias where NumPy returns two arrays), nor to one read by a node that is
not pure and may keep it or a view of it (`t2 = 0 + a; return 0 + a, t2.T`: the view would
be of the first, returned, array; np.stack and the like copy), nor to a node that may warn
(NumPy would warn once per evaluation).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from pijit.graph.dce import replace_nodes
from pijit.graph.ir import Graph, Ref, map_refs, node_refs
from pijit.graph.purity import is_pure, may_warn, mutates


# Ops that are not pure but return a new array holding copies of their operands.
_COPIES = frozenset(id(f) for f in (np.stack, np.concatenate, np.hstack, np.vstack, np.copy,
                                    np.ndarray.copy, np.ndarray.flatten))


class _Unhashable(Exception):
    pass


def _key(arg):
    """A hashable key telling apart values that compare equal (1, 1.0, True, -0.0, 0.0)."""
    if isinstance(arg, Ref):
        return ("ref", arg.index)
    if type(arg) in (tuple, list):
        return (type(arg).__name__,) + tuple(_key(a) for a in arg)
    if type(arg) is float:
        return ("float", arg.hex())
    if type(arg) in (int, bool, str, type(None)) or isinstance(arg, (type, np.dtype)):
        return (type(arg).__name__, arg)
    if isinstance(arg, np.generic) and arg.dtype.kind in "biuf":
        return (type(arg).__name__, arg.tobytes())
    raise _Unhashable


def cse(graph: Graph) -> Graph:
    if any(mutates(n) for n in graph.nodes):
        return graph
    outputs = {r.index for r in graph.outputs}
    kept = outputs | {r.index for n in graph.nodes
                      if not is_pure(n) and id(n.fn) not in _COPIES for r in node_refs(n)}
    seen: dict = {}
    rename: dict = {}
    nodes = []
    for node in graph.nodes:
        if rename:
            node = dataclasses.replace(
                node, args=map_refs(node.args, lambda r: Ref(rename.get(r.index, r.index))),
                kwargs=tuple((k, map_refs(v, lambda r: Ref(rename.get(r.index, r.index))))
                             for k, v in node.kwargs))
        if is_pure(node) and not may_warn(graph, node):
            try:
                key = (id(node.fn), _key(node.args), _key(node.kwargs), node.meta)
            except _Unhashable:
                key = None
            if key is not None:
                if key in seen and node.out not in kept:
                    rename[node.out] = seen[key]
                    continue
                seen.setdefault(key, node.out)
        nodes.append(node)
    outs = [Ref(rename.get(r.index, r.index)) for r in graph.outputs]
    return replace_nodes(graph, nodes, outs)
