"""Constant folding and exact algebraic simplification: Graph -> Graph.

Folding: a pure node whose arguments are all constants and whose value is an immutable scalar
is evaluated now and its uses read the constant. It is evaluated under
np.errstate(all="raise") with warnings as errors: a node that would warn or raise stays in
the graph, so it warns or raises at run time as in plain NumPy. Arrays are never folded:
every call must return fresh arrays.

Simplification: identities that hold bit for bit in IEEE arithmetic and keep type, dtype and
shape: x * 1, 1 * x, x / 1, x - (+0) (not x + 0: -0.0 + 0.0 is 0.0), +x, -(-x), x ** 1. The
node's uses then read x itself, which is sound only when nothing can tell: the value is not a
graph output (the caller would get x, not a copy), and neither it nor x is read by a node with
effects (which might write into one of them, or keep it). -(-x) of a NumPy integer scalar is
kept: where -x overflows (-np.int8(-128)) so does -(-x), and each negation warns in NumPy.
"""
from __future__ import annotations

import dataclasses
import math
import operator

import numpy as np

from pijit.graph.dce import replace_nodes
from pijit.graph.ir import Graph, Ref, map_refs, node_refs
from pijit.graph.purity import is_pure, may_warn
from pijit.quiet import warnings_as

_MUL = frozenset(id(f) for f in (operator.mul, np.multiply))
_DIV = frozenset(id(f) for f in (operator.truediv, np.divide))
_SUB = frozenset(id(f) for f in (operator.sub, np.subtract))
_POS = frozenset(id(f) for f in (operator.pos, np.positive))
_NEG = frozenset(id(f) for f in (operator.neg, np.negative))
_POW = frozenset(id(f) for f in (operator.pow, np.power))
_SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)


def simplify(graph: Graph) -> Graph:
    outputs = {r.index for r in graph.outputs}
    escaping = {r.index for n in graph.nodes if not is_pure(n) for r in node_refs(n)}
    subst: dict = {}            # value number -> constant, or the Ref it equals
    made: dict = {}             # value number -> its (rewritten) node
    nodes = []
    for node in graph.nodes:
        node = _rewrite(node, subst)
        made[node.out] = node
        if node.out in outputs or not is_pure(node):
            nodes.append(node)
            continue
        if not node_refs(node):
            folded = _fold(node)
            if folded is not None:
                subst[node.out] = folded[0]
                continue
        same = _identity(graph, node, made)
        if same is not None and node.out not in escaping and same.index not in escaping \
                and graph.meta(same) == node.meta:
            subst[node.out] = same
            continue
        nodes.append(node)
    return replace_nodes(graph, nodes)


def _rewrite(node, subst: dict):
    if not subst or not any(r.index in subst for r in node_refs(node)):
        return node

    def sub(ref):
        return subst.get(ref.index, ref)
    return dataclasses.replace(node, args=tuple(map_refs(a, sub) for a in node.args),
                               kwargs=tuple((k, map_refs(v, sub)) for k, v in node.kwargs))


def _fold(node):
    """(value,) of a constant node with an immutable scalar value, or None."""
    if node.meta.is_array:
        return None
    try:
        with np.errstate(all="raise"), warnings_as("error"):
            value = node.fn(*node.args, **dict(node.kwargs))
    except Exception:       # raises or warns: leave it to run time
        return None
    return (value,) if type(value) is node.meta.pytype else None


def _is(value, target: float) -> bool:
    """A scalar constant equal to `target` (0 only as +0: x - (-0.0) is x + 0.0)."""
    if isinstance(value, Ref) or not isinstance(value, _SCALARS):
        return False
    return value == target and (target != 0 or math.copysign(1.0, float(value)) > 0)


def _identity(graph: Graph, node, made: dict):
    """The Ref a node's value equals bit for bit, if it is an identity, else None."""
    fid, args = id(node.fn), node.args
    if node.kwargs:
        return None
    if len(args) == 1 and isinstance(args[0], Ref):
        if fid in _POS:
            return args[0]
        inner = made.get(args[0].index)
        if fid in _NEG and inner is not None and id(inner.fn) in _NEG and not inner.kwargs \
                and len(inner.args) == 1 and isinstance(inner.args[0], Ref) \
                and not may_warn(graph, node):
            return inner.args[0]
        return None
    if len(args) != 2:
        return None
    a, b = args
    if fid in _MUL:
        return a if isinstance(a, Ref) and _is(b, 1) else (
            b if isinstance(b, Ref) and _is(a, 1) else None)
    if isinstance(a, Ref) and (fid in _DIV and _is(b, 1) or fid in _SUB and _is(b, 0)
                               or fid in _POW and _is(b, 1)):
        return a
    return None
