"""Recomputation of broadcast differences: Graph -> Graph where a cheap elementwise value much
bigger than its operands (`d = pos[None, :, :] - pos[:, None, :]`), read by several fusable
nodes, is computed again for each reader after the first, from its small operands.

Why: the readers then fall into different fusion groups without the big value between them
(nbody_step's all-pairs differences d, N*N*3 values read by d*d's group and by the group
summing d*w: stored by one kernel and loaded by the next, twice the size of everything else
it moves). The copy is the same IEEE operation on the same operands, so its value is the
original's bit for bit; it gives no warnings (Recompute: the original gives NumPy's, once),
and fuse.schedule runs it after the original, so a fallback's warnings keep NumPy's order.
"""
from __future__ import annotations

import dataclasses
import math
import operator

import numpy as np

from pijit.graph.ir import Graph, Node, Ref, node_refs
from pijit.graph.purity import writes_nothing

# The ops worth recomputing: one correctly rounded operation per element.
_CHEAP = {id(operator.add): np.add, id(np.add): np.add,
          id(operator.sub): np.subtract, id(np.subtract): np.subtract,
          id(operator.mul): np.multiply, id(np.multiply): np.multiply}
# A value is recomputed only when it has at least this many times its operands' elements.
EXPANSION = 4


class Recompute:
    """The ufunc of node `of`, called again where a later reader needs its value, with
    NumPy's floating-point warnings off (the node `of` gives them). Graph passes treat it as
    that ufunc (`recomputes`: fuse._EW, render); purity as pure and quiet."""
    writes_nothing = True

    def __init__(self, ufunc, of: int):
        self.recomputes, self.of = ufunc, of
        self.__name__ = f"recompute_{ufunc.__name__}"

    def __call__(self, *args):
        with np.errstate(all="ignore"):
            return self.recomputes(*args)

    def __repr__(self) -> str:
        return f"{self.__name__}(of %{self.of})"


def recompute(graph: Graph, fusable) -> Graph:
    """Each reader after the first of a broadcast value (see the module doc) reads a copy of
    it made just before the reader. fusable(graph, node): whether a reader can join a fusion
    group (else the value is stored anyway, and copies would only add work)."""
    readers = {}
    for node in graph.nodes:
        for value in dict.fromkeys(r.index for r in node_refs(node)):
            readers.setdefault(value, []).append(node)
    outputs = {r.index for r in graph.outputs}
    position = {n.out: k for k, n in enumerate(graph.nodes)}
    copies = {}         # reader's out -> [(value, its copy)]
    metas = dict(graph._metas)
    next_value = max(metas) + 1 if metas else 0
    for node in graph.nodes:
        users = readers.get(node.out, [])
        if len(users) < 2 or node.out in outputs or not _worth(graph, node):
            continue
        if not all(fusable(graph, u) and Ref(node.out) in u.args for u in users):
            continue
        last = max(position[u.out] for u in users)
        if not all(writes_nothing(n) for n in graph.nodes[position[node.out] + 1:last]):
            continue    # an operand may change before a reader: it needs this value
        for u in users[1:]:
            metas[next_value] = node.meta
            copy = Node(next_value, f"recompute_{node.name}",
                        Recompute(_CHEAP[id(node.fn)], node.out), node.args, (), node.meta,
                        node.lineno)
            copies.setdefault(u.out, []).append((node.out, copy))
            next_value += 1
    if not copies:
        return graph
    nodes = []
    for node in graph.nodes:
        made = copies.get(node.out, [])
        nodes += [c for _, c in made]
        swap = {value: Ref(c.out) for value, c in made}
        if swap:
            node = dataclasses.replace(node, args=tuple(
                swap.get(a.index, a) if isinstance(a, Ref) else a for a in node.args))
        nodes.append(node)
    return dataclasses.replace(graph, inputs=list(graph.inputs),
                               input_metas=list(graph.input_metas),
                               input_names=list(graph.input_names), nodes=nodes,
                               outputs=list(graph.outputs), _metas=metas)


def _worth(graph: Graph, node) -> bool:
    """A cheap op on static shapes whose value has EXPANSION times its operands' elements."""
    if id(node.fn) not in _CHEAP or node.kwargs or len(node.args) != 2:
        return False
    if not node.meta.is_array or None in node.meta.shape:
        return False
    sizes = []
    for a in node.args:
        if isinstance(a, Ref):
            m = graph.meta(a)
            if None in getattr(m, "shape", (None,)):
                return False
            sizes.append(math.prod(m.shape))
    return math.prod(node.meta.shape) >= EXPANSION * max(1, sum(sizes))
