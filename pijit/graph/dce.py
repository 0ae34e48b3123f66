"""Dead-code elimination: Graph -> Graph without pure nodes whose values nobody uses.

In-place operator nodes (`iadd`, ...) mutate their first argument and are always kept, and so
is everything they read; so are loop nodes (one opaque node each: their bodies are not
entered), and nodes that may warn (`t = a / a` unused still warns of 0 / 0 in NumPy).
"""
from __future__ import annotations

import dataclasses

from pijit.graph.ir import Graph
from pijit.graph.ir import node_refs
from pijit.graph.purity import is_pure, may_warn


def dce(graph: Graph) -> Graph:
    live = {r.index for r in graph.outputs}
    kept = []
    for node in reversed(graph.nodes):
        if node.out in live or not is_pure(node) or may_warn(graph, node):
            kept.append(node)
            live.update(r.index for r in node_refs(node))
    kept.reverse()
    return replace_nodes(graph, kept)


def replace_nodes(graph: Graph, nodes: list, outputs=None) -> Graph:
    """A copy of `graph` with another node list (metas of removed values are dropped)."""
    keep = {r.index for r in graph.inputs} | {n.out for n in nodes}
    return dataclasses.replace(
        graph, inputs=list(graph.inputs), input_metas=list(graph.input_metas),
        input_names=list(graph.input_names), nodes=list(nodes),
        outputs=list(graph.outputs if outputs is None else outputs),
        _metas={k: v for k, v in graph._metas.items() if k in keep})
