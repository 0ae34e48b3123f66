"""Item assignment into a basic slice as a write into its view: Graph -> Graph where
`X[key] = v` (key of ints, slices, None and `...`; X of any shape) becomes
`d = X[key]; StoreInto(setitem)(d, v)`, so fusion can make v's kernel write straight into d
(fuse.direct_write) instead of a temporary that setitem then copies.

For such keys NumPy's `X[key] = v` is `X[key][...] = v`: the same view, the same unsafe cast,
broadcast and read-only ValueError. The view itself cannot raise: `_view_shape` keeps the
setitem of a key that could (an int on a dynamic axis, or out of a static axis' bounds).
Used by the fused backend only, and only when v is computed by an elementwise node.
"""
from __future__ import annotations

import dataclasses
import operator

from pijit.graph.ir import Graph, Meta, Node, Ref, arg_refs, node_refs


class StoreInto:
    """`dest[...] = value`: the fn of the write node split_setitem makes (its value: dest),
    holding the setitem node it replaces (join_setitem puts that back)."""
    writes_arrays = True        # purity.mutates: it writes into an array

    def __init__(self, setitem):
        self.setitem = setitem

    def __call__(self, dest, value):
        dest[...] = value
        return dest


def split_setitem(graph: Graph, fusable) -> Graph:
    """fusable(graph, node): whether a node computing the assigned value may be fused."""
    producers = {n.out: n for n in graph.nodes}
    read = {r.index for r in graph.outputs}
    for n in graph.nodes:
        read.update(r.index for r in node_refs(n))
    todo = [n for n in graph.nodes if n.out not in read and _view_meta(graph, n) is not None
            and n.args[2].index in producers
            and fusable(graph, producers[n.args[2].index])]
    if not todo:
        return graph
    metas = dict(graph._metas)
    next_value = max(metas) + 1
    split = {n.out for n in todo}
    nodes = []
    for node in graph.nodes:
        if node.out not in split:
            nodes.append(node)
            continue
        view = _view_meta(graph, node)
        target, key, value = node.args
        metas[next_value] = view
        nodes.append(Node(next_value, "getitem", operator.getitem, (target, key), (), view,
                          node.lineno))
        metas[node.out] = view
        nodes.append(Node(node.out, "store_into", StoreInto(node), (Ref(next_value), value),
                          (), view, node.lineno))
        next_value += 1
    return dataclasses.replace(graph, inputs=list(graph.inputs),
                               input_metas=list(graph.input_metas),
                               input_names=list(graph.input_names), nodes=nodes,
                               outputs=list(graph.outputs), _metas=metas)


def join_setitem(graph: Graph, fused) -> Graph:
    """split_setitem undone for the stores no kernel computes (outs not in `fused`): the
    setitem nodes capture made, so NumPy's setitem runs as before (and dumps say so)."""
    back = {n.out: n.fn.setitem for n in graph.nodes
            if isinstance(n.fn, StoreInto) and n.out not in fused}
    if not back:
        return graph
    views = {n.args[0].index for n in graph.nodes if n.out in back}
    metas = {k: m for k, m in graph._metas.items() if k not in views}
    metas.update({out: node.meta for out, node in back.items()})
    nodes = [back.get(n.out, n) for n in graph.nodes if n.out not in views]
    return dataclasses.replace(graph, inputs=list(graph.inputs),
                               input_metas=list(graph.input_metas),
                               input_names=list(graph.input_names), nodes=nodes,
                               outputs=list(graph.outputs), _metas=metas)


def _basic(key) -> bool:
    if type(key) is tuple:
        return all(_basic(k) and type(k) is not tuple for k in key)
    if type(key) is slice:
        return all(type(p) in (int, type(None)) for p in (key.start, key.stop, key.step))
    return type(key) is int or key is None or key is Ellipsis


def _view_meta(graph: Graph, node):
    """The Meta of the view `X[key]` of a setitem node of an array value into a basic key,
    when that is an array (not one item) and cannot raise; else None."""
    if node.fn is not operator.setitem or node.kwargs or len(node.args) != 3:
        return None
    target, key, value = node.args
    if not (isinstance(target, Ref) and isinstance(value, Ref)) or list(arg_refs(key)) \
            or not _basic(key):
        return None
    tm, vm = graph.meta(target), graph.meta(value)
    if not (tm.is_array and vm.is_array):
        return None
    shape = _view_shape(tm.shape, key)
    if not shape:
        return None
    return Meta.array(shape, tm.dtype)


def _view_shape(shape: tuple, key):
    """The shape of X[key] for X of `shape` (None: a dynamic length), or None when that is
    not an array of one or more axes or could raise: an int on a dynamic axis (out of bounds
    only at run time, where NumPy would raise after computing the value, not before), more
    indices than axes, a zero step."""
    entries = key if type(key) is tuple else (key,)
    used = sum(k is not None and k is not Ellipsis for k in entries)
    if sum(k is Ellipsis for k in entries) > 1 or used > len(shape):
        return None
    full = []
    for k in entries:
        full += [slice(None)] * (len(shape) - used) if k is Ellipsis else [k]
    if not any(k is Ellipsis for k in entries):
        full += [slice(None)] * (len(shape) - used)
    out, axis = [], 0
    for k in full:
        if k is None:
            out.append(1)
            continue
        n = shape[axis]
        axis += 1
        if type(k) is slice:
            if k.step == 0:
                return None
            out.append(None if n is None else len(range(*k.indices(n))))
        elif n is None or not -n <= k < n:
            return None
    return tuple(out) if out else None
