"""np.outer as the broadcast product it is: Graph -> Graph where `np.outer(u, v)` of two 1-D
arrays is `np.multiply(u[:, None], v[None, :])`, so fusion can take it.

That is NumPy's own definition of outer (`multiply(a.ravel()[:, newaxis],
b.ravel()[newaxis, :])`; ravel of a 1-D array is the array itself), so values, dtype and
layout are NumPy's bit for bit. Used by the fused backend, where a rank-k update
`A += np.outer(u1, v1) + np.outer(u2, v2)` then becomes one pass that reads the vectors.
"""
from __future__ import annotations

import dataclasses
import operator

import numpy as np

from pijit.graph.ir import Graph, Meta, Node, Ref

_COLUMN = (slice(None), None)
_ROW = (None, slice(None))


def expand_outer(graph: Graph) -> Graph:
    if not any(_is_outer(graph, n) for n in graph.nodes):
        return graph
    metas = dict(graph._metas)
    next_value = max(metas) + 1
    nodes = []
    for node in graph.nodes:
        if not _is_outer(graph, node):
            nodes.append(node)
            continue
        refs = []
        for arg, key in zip(node.args, (_COLUMN, _ROW)):
            meta = graph.meta(arg)
            shape = (meta.shape[0], 1) if key is _COLUMN else (1, meta.shape[0])
            metas[next_value] = Meta.array(shape, meta.dtype)
            nodes.append(Node(next_value, "getitem", operator.getitem, (arg, key), (),
                              metas[next_value], node.lineno))
            refs.append(Ref(next_value))
            next_value += 1
        nodes.append(Node(node.out, "multiply", np.multiply, tuple(refs), (), node.meta,
                          node.lineno))
    return dataclasses.replace(graph, inputs=list(graph.inputs),
                               input_metas=list(graph.input_metas),
                               input_names=list(graph.input_names), nodes=nodes,
                               outputs=list(graph.outputs), _metas=metas)


def _is_outer(graph: Graph, node) -> bool:
    return node.fn is np.outer and not node.kwargs and len(node.args) == 2 and all(
        isinstance(a, Ref) and graph.meta(a).is_array and graph.meta(a).ndim == 1
        for a in node.args)
