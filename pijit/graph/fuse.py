"""Fusion grouping: Graph -> list of FusionGroups, and a schedule of groups and other nodes.

A group is a maximal set of elementwise nodes over float32/float64 (and bool, for masks) with
one static iteration shape, optionally closed by one reduction (sum/mean/max/min over all axes
or the last axis) of one of its values. Inputs broadcast to the iteration shape. Values used
only inside the group are never materialized; a value used outside becomes a group output.
Merging is refused when it would create a cycle through nodes outside the group, and an
in-place node (a write) closes every open group, so reads never move across writes.
"""
from __future__ import annotations

import builtins
import heapq
import operator
from dataclasses import dataclass, field

import numpy as np

from pijit.graph.ir import Graph, Ref
from pijit.graph.purity import is_pure
from pijit.graph.ir import node_refs

FLOAT = (np.dtype(np.float32), np.dtype(np.float64))
VALUE_DTYPES = FLOAT + (np.dtype(np.bool_),)

# fn -> (op code, number of positional args). Keyed by id(): some callables are unhashable.
_EW = {}
for _fns, _op, _n in [
        ((operator.add, np.add), "add", 2), ((operator.sub, np.subtract), "sub", 2),
        ((operator.mul, np.multiply), "mul", 2), ((operator.truediv, np.divide), "div", 2),
        ((operator.neg, np.negative), "neg", 1), ((operator.pos, np.positive), "pos", 1),
        ((operator.lt, np.less), "lt", 2), ((operator.le, np.less_equal), "le", 2),
        ((operator.gt, np.greater), "gt", 2), ((operator.ge, np.greater_equal), "ge", 2),
        ((operator.eq, np.equal), "eq", 2), ((operator.ne, np.not_equal), "ne", 2),
        ((np.exp,), "exp", 1), ((np.log,), "log", 1), ((np.sqrt,), "sqrt", 1),
        ((np.sin,), "sin", 1), ((np.cos,), "cos", 1), ((np.tanh,), "tanh", 1),
        ((np.absolute, builtins.abs), "abs", 1), ((np.square,), "square", 1),
        ((np.maximum,), "maximum", 2), ((np.minimum,), "minimum", 2),
        ((np.where,), "where", 3), ((np.clip, np.ndarray.clip), "clip", 3),
        ((operator.pow,), "pow", 2), ((np.power,), "power", 2),
        ((np.ndarray.astype,), "astype", 2)]:
    for _f in _fns:
        _EW[id(_f)] = (_op, _n)
ARITH = frozenset(("add", "sub", "mul", "div", "neg", "pos", "exp", "log", "sqrt", "sin",
                   "cos", "tanh", "abs", "square", "maximum", "minimum", "clip", "pow",
                   "power"))
COMPARE = frozenset(("lt", "le", "gt", "ge", "eq", "ne"))
# Ops whose C results may differ from NumPy's in the last bits (libmvec: <= 4 ulp).
INEXACT = frozenset(("exp", "log", "sin", "cos", "tanh"))

_REDUCE = {}
for _fns, _op in [((np.sum, np.ndarray.sum), "sum"), ((np.mean, np.ndarray.mean), "mean"),
                  ((np.max, np.amax, np.ndarray.max), "max"),
                  ((np.min, np.amin, np.ndarray.min), "min")]:
    for _f in _fns:
        _REDUCE[id(_f)] = _op


def is_const(arg) -> bool:
    """A constant the C code can spell exactly: Python or NumPy bool/int/float scalars."""
    if type(arg) in (bool, float):
        return True
    if type(arg) is int:
        return abs(arg) < 2 ** 53
    if isinstance(arg, (np.floating, np.bool_)) and arg.dtype in VALUE_DTYPES:
        return True
    return isinstance(arg, np.integer) and abs(int(arg)) < 2 ** 53


def static_array(meta) -> bool:
    return None not in meta.shape and meta.dtype in VALUE_DTYPES and (
        meta.is_array or meta.ndim == 0)


def elementwise_op(graph: Graph, node, exact: bool = False):
    """The op code of a fusable elementwise node, or None.

    exact: only ops whose C result is bit-identical to NumPy's (correctly rounded IEEE ops).
    """
    spec = _EW.get(id(node.fn))
    if spec is None or node.kwargs or len(node.args) != spec[1]:
        return None
    op = spec[0]
    meta = node.meta
    if not static_array(meta) or not (meta.is_array or isinstance(meta.pytype, type)
                                      and issubclass(meta.pytype, np.generic)):
        return None
    refs = [a for a in node.args if isinstance(a, Ref)]
    if not refs:
        return None
    for a in node.args:
        if isinstance(a, Ref):
            m = graph.meta(a)
            if m.dtype not in VALUE_DTYPES or None in m.shape:
                return None
        elif not (is_const(a) or (op == "clip" and a is None)
                  or (op == "astype" and a in FLOAT)):
            return None
    if op in ARITH and meta.dtype not in FLOAT:
        return None
    if op in COMPARE:
        if meta.dtype != np.bool_:
            return None
        # bool arrays against weak Python numbers compare as int/float in NumPy: not here.
        strong = [graph.meta(a) for a in node.args
                  if isinstance(a, Ref) and not graph.meta(a).is_pyscalar]
        weak = [a for a in node.args
                if not (isinstance(a, Ref) and not graph.meta(a).is_pyscalar)
                and not (isinstance(a, (bool, np.bool_))
                         or isinstance(a, Ref) and graph.meta(a).dtype == np.bool_)]
        if strong and all(m.dtype == np.bool_ for m in strong) and weak:
            return None
    if op in ("pow", "power") and not (isinstance(node.args[0], Ref)
                                       and type(node.args[1]) in (int, float)):
        return None
    if op == "astype" and not (isinstance(node.args[0], Ref) and np.dtype(node.args[1]) == meta.dtype):
        return None
    if op == "clip" and not isinstance(node.args[0], Ref):
        return None
    if exact and (op in INEXACT or op in ("pow", "power")
                  and float(node.args[1]) not in (2.0, 1.0, 0.5, -1.0)):
        return None
    return op


def reduction_op(graph: Graph, node):
    """(op, mode, keepdims) of a fusable reduction (mode "all" or "last"), or None."""
    op = _REDUCE.get(id(node.fn))
    if op is None or not node.args or not isinstance(node.args[0], Ref) or len(node.args) > 2:
        return None
    kw = dict(node.kwargs)
    if set(kw) - {"axis", "keepdims"} or (len(node.args) == 2 and "axis" in kw):
        return None
    axis = node.args[1] if len(node.args) == 2 else kw.get("axis")
    keepdims = kw.get("keepdims", False)
    src = graph.meta(node.args[0])
    if (not src.is_array or src.ndim == 0 or None in src.shape or src.dtype not in FLOAT
            or node.meta.dtype != src.dtype or type(keepdims) is not bool):
        return None
    nd = src.ndim
    if type(axis) is tuple and sorted(a % nd if type(a) is int else -1 for a in axis) == list(range(nd)):
        axis = None
    if axis is None:
        mode = "all"
    elif type(axis) is int and axis in (-1, nd - 1):
        mode = "all" if nd == 1 else "last"
    else:
        return None
    if op in ("max", "min") and (src.shape[-1] == 0 if mode == "last" else 0 in src.shape):
        return None     # NumPy raises; leave it to NumPy
    return op, mode, keepdims


@dataclass
class FusionGroup:
    """Elementwise `nodes` over iteration `shape`, then an optional `reduction` node."""
    id: int
    shape: tuple
    nodes: list = field(default_factory=list)
    reduction: object = None            # the reduction Node, or None
    reduce: tuple = None                # (op, mode, keepdims)
    inputs: list = field(default_factory=list)    # Refs read from outside, first use first
    outputs: list = field(default_factory=list)   # Refs used outside (reduction last)
    ops: dict = field(default_factory=dict)       # node.out -> op code

    def members(self) -> list:
        return self.nodes + ([self.reduction] if self.reduction is not None else [])

    def __str__(self) -> str:
        dims = ",".join(map(str, self.shape))
        red = f" -> {self.reduce[0]}({self.reduce[1]}{', keepdims' if self.reduce[2] else ''})" \
            if self.reduction is not None else ""
        body = "; ".join(f"%{n.out}={self.ops[n.out]}" for n in self.nodes)
        return (f"group {self.id} [{dims}] in ({', '.join(map(repr, self.inputs))}) "
                f"out ({', '.join(map(repr, self.outputs))}): {body}{red}")


def find_groups(graph: Graph, exact: bool = False, reductions: bool = True) -> list:
    """Greedy grouping in node order (see the module docstring).

    exact: fuse only ops whose results equal NumPy's bit for bit; reductions: fuse reductions
    (their pairwise summation order differs from NumPy's, so sums may differ in the last bits).
    """
    parent: dict = {}             # group id -> merged-into id (union-find)
    groups: dict = {}             # root id -> FusionGroup
    gdeps: dict = {}              # root id -> group ids it reads from outside (direct)
    closed: set = set()           # roots that accept no new members
    member_of: dict = {}          # value number -> group id
    deps: dict = {}               # value number of non-members -> group ids it depends on

    def find(g):
        while parent[g] != g:
            g = parent[g]
        return g

    def value_deps(ref) -> set:
        g = member_of.get(ref.index)
        if g is not None:
            return {find(g)}
        return {find(x) for x in deps.get(ref.index, ())}

    def closure(ids) -> set:
        seen, todo = set(), [find(i) for i in ids]
        while todo:
            g = todo.pop()
            if g not in seen:
                seen.add(g)
                todo.extend(find(x) for x in gdeps[g])
        return seen

    def new_group(shape):
        gid = len(parent)
        parent[gid] = gid
        groups[gid] = FusionGroup(gid, shape)
        gdeps[gid] = set()
        return gid

    for node in graph.nodes:
        op = elementwise_op(graph, node, exact)
        red = None if op is not None or not reductions else reduction_op(graph, node)
        refs = node_refs(node)
        if op is None and red is None:
            if not is_pure(node):       # a write: nothing may move across it
                closed.update(find(g) for g in groups)
            deps[node.out] = set().union(*(value_deps(r) for r in refs)) if refs else set()
            continue
        shape = node.meta.shape if red is None else graph.meta(node.args[0]).shape
        cands = set()
        for r in refs:
            g = member_of.get(r.index)
            if g is not None:
                g = find(g)
                if g not in closed and groups[g].shape == shape:
                    cands.add(g)
        if red is not None:     # a reduction joins only the group of its operand
            g = member_of.get(node.args[0].index)
            cands = {find(g)} & cands if g is not None else set()
        outside = [r for r in refs if r.index not in member_of
                   or find(member_of[r.index]) not in cands]
        ext = set().union(*(gdeps[c] for c in cands)) if cands else set()
        for r in outside:
            ext |= value_deps(r)
        if cands and closure(ext) & cands:
            # Merging would need a cycle: keep the first candidate that is safe alone.
            cands = set()
            outside = refs
            ext = set().union(*(value_deps(r) for r in refs)) if refs else set()
        if cands:
            root = min(cands)
            for c in cands - {root}:
                parent[c] = root
                g = groups.pop(c)
                groups[root].nodes.extend(g.nodes)
                groups[root].ops.update(g.ops)
                gdeps.pop(c)
        else:
            root = new_group(shape)
        gdeps[root] = {find(x) for x in ext} - {root}
        member_of[node.out] = root
        grp = groups[root]
        if red is None:
            grp.nodes.append(node)
            grp.ops[node.out] = op
        else:
            grp.reduction, grp.reduce = node, red
            closed.add(root)

    # Members in node order; inputs and outputs.
    order = {n.out: k for k, n in enumerate(graph.nodes)}
    used_outside: set = {r.index for r in graph.outputs}
    result = []
    for root, grp in groups.items():
        grp.nodes.sort(key=lambda n: order[n.out])
        mine = {n.out for n in grp.members()}
        for other in graph.nodes:
            if other.out not in mine:
                used_outside.update(r.index for r in node_refs(other) if r.index in mine)
        result.append(grp)
    for k, grp in enumerate(sorted(result, key=lambda g: order[g.members()[0].out])):
        grp.id = k
        mine = {n.out for n in grp.members()}
        seen = set()
        for n in grp.members():
            for r in node_refs(n):
                if r.index not in mine and r.index not in seen:
                    seen.add(r.index)
                    grp.inputs.append(r)
        grp.outputs = [Ref(n.out) for n in grp.nodes if n.out in used_outside]
        if grp.reduction is not None:
            grp.outputs.append(Ref(grp.reduction.out))
    return sorted(result, key=lambda g: g.id)


def schedule(graph: Graph, groups: list) -> list:
    """Groups and remaining nodes in an order that respects data flow and effects.

    Each unit runs after the units producing its inputs; a node with effects runs after every
    unit that precedes it in the graph and before every unit that follows it.
    """
    owner = {}
    units = []
    for grp in groups:
        for n in grp.members():
            owner[n.out] = len(units)
        units.append(grp)
    order = {n.out: k for k, n in enumerate(graph.nodes)}
    for node in graph.nodes:
        if node.out not in owner:
            owner[node.out] = len(units)
            units.append(node)

    def span(u):
        outs = [n.out for n in u.members()] if isinstance(u, FusionGroup) else [u.out]
        return min(order[o] for o in outs), max(order[o] for o in outs)

    spans = [span(u) for u in units]
    succ = [set() for _ in units]
    for k, u in enumerate(units):
        members = u.members() if isinstance(u, FusionGroup) else [u]
        for n in members:
            for r in node_refs(n):
                src = owner.get(r.index)
                if src is not None and src != k:
                    succ[src].add(k)
    for k, u in enumerate(units):
        if not isinstance(u, FusionGroup) and not is_pure(u):
            for j, (lo, hi) in enumerate(spans):
                if hi < spans[k][0]:
                    succ[j].add(k)
                elif lo > spans[k][0]:
                    succ[k].add(j)
    indeg = [0] * len(units)
    for s in succ:
        for k in s:
            indeg[k] += 1
    ready = [(spans[k][0], k) for k in range(len(units)) if indeg[k] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, k = heapq.heappop(ready)
        out.append(units[k])
        for j in succ[k]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(ready, (spans[j][0], j))
    if len(out) != len(units):
        raise AssertionError("fusion produced a cycle")
    return out
