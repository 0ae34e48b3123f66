"""Graph nodes -> the array elements they touch per call: what a compile can gain on them.

An estimate for adaptive decisions, not a cost model: views and copies count like math.
Reading one element (a getitem with a scalar result) touches one, not the array; a loop node
repeats its body, and a size known only at run time may be anything: both are unbounded.
"""
from __future__ import annotations

import math

from pijit.graph.ir import LoopOp, Ref


def nodes_work(graph, nodes) -> float:
    """Elements the array-valued arguments and results of `nodes` (of `graph`) hold."""
    total = 0
    for node in nodes:
        work = _node_work(graph, node)
        if work == math.inf:
            return work
        total += work
    return total


def graph_work(graph) -> float:
    return nodes_work(graph, graph.nodes)


def has_work(graph) -> bool:
    """graph_work(graph) > 0, decided at the first node with work: capture asks it every 32
    steps once its pure-Python time is up, and summing the whole graph each time was a seventh
    of a long capture's instructions."""
    return any(_node_work(graph, node) for node in graph.nodes)


def _node_work(graph, node) -> float:
    if _repeats(node):
        return math.inf
    outs = node.meta if isinstance(node.meta, tuple) else (node.meta,)
    arrays = [m for m in outs if m.is_array]
    if arrays or node.name != "getitem":
        for ref in _refs((node.args, node.kwargs)):
            meta = graph.meta(ref)      # a tuple for a node with several results
            arrays += meta if isinstance(meta, tuple) else [meta]
    total = 0
    for meta in arrays:
        if meta.is_array:
            if any(d is None for d in meta.shape):
                return math.inf
            total += math.prod(meta.shape)
    return total


def has_loop(graph) -> bool:
    """Does `graph` run a loop (a loop node, a loop nest)?"""
    return any(_repeats(node) for node in graph.nodes)


def _repeats(node) -> bool:
    return isinstance(node.fn, LoopOp) or getattr(node.fn, "repeats", False)


def _refs(arg):
    if isinstance(arg, Ref):
        yield arg
    elif isinstance(arg, (tuple, list)):
        for a in arg:
            yield from _refs(a)
    elif isinstance(arg, dict):
        for a in arg.values():
            yield from _refs(a)
    elif isinstance(arg, slice):
        yield from _refs((arg.start, arg.stop, arg.step))
