"""The fused C backend (O1/O2): Graph -> CompiledGraph whose fused groups run as C kernels.

passes (np.outer as a broadcast product, dce, simplify, cse, broadcast differences
recomputed per reader) -> fusion groups
(pijit.graph.fuse) -> C source of all groups of the graph (render.py) -> one compiled module
(build.py), disk-cached (diskcache.py) -> a rewritten graph where each group is one call of
its kernel, compiled by the NumPy backend into straight-line Python (so every node that is
not fused runs exactly as in the NumPy backend, with the user's line numbers).

Anything not handled falls back to NumPy: unfusable nodes individually, the whole graph when
the build fails (logged on `pijit.kernels`, never an error for the user).
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import operator

import numpy as np

from pijit import config, eval_frame
from pijit.backends import numpy_backend
from pijit.backends.cfused import build, loops, render, toolchain
from pijit.graph.cse import cse
from pijit.graph.dce import dce
from pijit.graph.simplify import simplify
from pijit.graph.fuse import (INEXACT, NUMPY_ONLY, FusionGroup, elementwise_op, find_groups,
                              reduction_op, schedule)
from pijit.graph.ir import Graph, Meta, Node, Ref, node_refs
from pijit.graph.outer import expand_outer
from pijit.graph.remat import recompute
from pijit.graph.stores import join_setitem, split_setitem
from pijit.graph.verify import GraphInvariantError, after

log = logging.getLogger("pijit.kernels")

_TUPLE_META = Meta(tuple, np.dtype(object), ())


def optimize(graph: Graph) -> Graph:
    """The graph passes run before fusion (each result verified in tests)."""
    for name, graph_pass in (("outer", expand_outer), ("dce", dce), ("simplify", simplify),
                             ("cse", cse), ("dce", dce), ("setitem", _split_setitem),
                             ("recompute", _recompute)):
        graph = after(name, graph_pass(graph))
    return graph


def _split_setitem(graph: Graph) -> Graph:
    return split_setitem(graph, lambda g, n: elementwise_op(g, n) is not None)


def _recompute(graph: Graph) -> Graph:
    return recompute(graph, lambda g, n: elementwise_op(g, n) is not None
                     or reduction_op(g, n) is not None)


def _target(dest):
    """What a write a kernel computed into `dest` evaluates to: the destination itself
    (`A += v` is A)."""
    return dest


def compile_graph(graph: Graph, name: str, filename: str, firstlineno: int, *,
                  level: str = "O1", threads: int = 1, cache_dir: str | None = None,
                  module: dict | None = None):
    # loop bodies (graphs of their own) are fused the same way
    body = functools.partial(compile_graph, level=level, threads=threads, cache_dir=cache_dir)

    def on_numpy(g):
        g, nest_c = nest_kernels(g, cache_dir)
        compiled = numpy_backend.compile_graph(g, name, filename, firstlineno,
                                               compile_body=body, module=module)
        return dataclasses.replace(compiled, kernels=compiled.kernels + nest_c)

    try:
        optimized = optimize(graph)
        # O1 equals NumPy bit for bit: NumPy's own loops instead of libmvec, float
        # reductions only in NumPy's own order (see DESIGN 5 and the jit_level option).
        groups = find_groups(optimized, exact=level == "O1", numpy_loops=numpy_loop_ops())
        optimized = after("setitem", join_setitem(
            optimized, {out for grp in groups for out in grp.written}))
    except GraphInvariantError:
        raise
    except Exception:       # a pass bug must not reach the user
        log.exception("graph passes failed; using the NumPy backend")
        return on_numpy(graph)
    loop_nodes = [(node, grp) for node in optimized.nodes
                  if (grp := loops.loop_group(node, exact=level == "O1")) is not None]
    if not groups and not loop_nodes:
        return on_numpy(optimized)
    renderers = [render.GroupKernel(optimized, grp) for grp in groups] + [
        loops.LoopKernel(node, grp, len(groups) + k) for k, (node, grp) in enumerate(loop_nodes)]
    source, own = render.module_source(renderers, level == "O2", threads,
                                       jobs=toolchain.compile_jobs())
    if log.isEnabledFor(logging.INFO):
        log.info("%s: %d fused group(s)\n%s", name, len(groups) + len(loop_nodes),
                 "\n".join([f"  {g}" for g in groups] + [
                     f"  loop %{node.out}: {grp}" for node, grp in loop_nodes]))
        log.debug("C source of %s:\n%s", name, source)
    try:
        kernels = build.load_kernels(source, cache_dir, openmp=threads > 1)
    except build.SourceError:
        log.error("the generated C of %s does not compile; using the NumPy backend", name,
                  exc_info=True)
        return on_numpy(graph)
    except Exception as e:
        log.warning("kernel build failed for %s (%s); using the NumPy backend", name, e)
        return on_numpy(graph)
    kernels.set_pool(pool_handler())
    try:
        for k, (op, dtype, nargs) in enumerate(render.numpy_loop_slots(renderers)):
            kernels.set_ufunc(k, numpy_loop(op, dtype, nargs))
    except Exception as e:      # the kernels would hand every call back: run NumPy directly
        log.warning("NumPy loops unavailable for %s (%s); using the NumPy backend", name, e)
        return on_numpy(graph)
    for grp in groups:
        kernels.set_fallback(grp.id, group_fallback(optimized, grp, filename, firstlineno,
                                                          module=module))
    in_c = {}
    for k, (node, _) in enumerate(loop_nodes):
        kernels.set_fallback(len(groups) + k, node.fn)     # the loop's reference semantics
        in_c[node.out] = getattr(kernels, f"g{len(groups) + k}")
    lowered = after("fusion", lower(optimized, groups, kernels))
    lowered.nodes = [dataclasses.replace(n, fn=in_c[n.out]) if n.out in in_c else n
                     for n in lowered.nodes]
    compiled = on_numpy(lowered)
    text = compiled.source + "\n/* fused groups */\n" + "\n".join(
        [f"/* {g} */" for g in groups] + [f"/* loop %{n.out}: {g} */" for n, g in loop_nodes])
    return dataclasses.replace(compiled, source=text, backend="cfused",
                               kernels=own + compiled.kernels)


def nest_kernels(graph: Graph, cache_dir) -> tuple:
    """(the graph with each loop-nest node (pijit.loopnest) calling its C kernel, the C of
    those kernels for dumps)."""
    nodes, sources = [], []
    for n in graph.nodes:
        kernel = n.fn.kernel(cache_dir) if hasattr(n.fn, "kernel") and \
            getattr(n.fn, "repeats", False) else None
        if kernel is not None:
            sources.append(f"/* loop nest %{n.out} */\n{n.fn.c_source}")
        nodes.append(n if kernel is None else dataclasses.replace(n, fn=kernel))
    return dataclasses.replace(graph, nodes=nodes), "".join(sources)


_NUMPY_LOOP_UFUNCS = {"pow": np.power, "power": np.power,
                      **{op: getattr(np, op) for op in NUMPY_ONLY | INEXACT}}


@functools.lru_cache(maxsize=None)
def numpy_loop_ops() -> frozenset:
    """The ops kernels compute by calling NumPy's own loops (ufunc._get_strided_loop, an API
    NumPy calls unstable; at O1, and NUMPY_ONLY ops at every level): all of them when the
    float64 loop of exp can be had here; none otherwise."""
    try:
        numpy_loop("exp", np.dtype(np.float64), 1)
    except Exception:       # noqa: BLE001 - any failure: O1 leaves these ops to NumPy
        log.info("ufunc._get_strided_loop unavailable: O1 does not fuse transcendentals")
        return frozenset()
    return frozenset(_NUMPY_LOOP_UFUNCS)


def numpy_loop(op: str, dtype, nargs: int):
    """The call-info capsule of NumPy's loop of op (exp, ..., logaddexp) over `dtype`: for
    contiguous operands when unary, any strides when binary (an operand may repeat one value
    per row)."""
    ufunc = _NUMPY_LOOP_UFUNCS[op]
    _, info = ufunc._resolve_dtypes_and_context((dtype,) * (nargs + 1))
    size = dtype.itemsize
    ufunc._get_strided_loop(info, fixed_strides=(size, size) if nargs == 1 else None)
    return info


@functools.lru_cache(maxsize=None)
def pool_handler():
    """The buffer pool, with its limit set from PIJIT_POOL_MB once per process (later
    set_pool_limit calls stand); None when that is 0: big outputs then come from NumPy."""
    limit = config.env_pool_bytes()
    eval_frame.set_pool_limit(limit)
    return eval_frame.pool_handler() if limit else None


def lower(graph: Graph, groups: list, kernels) -> Graph:
    """The graph with each group replaced by a call of its kernel (plus tuple items)."""
    metas = dict(graph._metas)
    nodes = []
    next_value = max(metas) + 1 if metas else 0
    read = {r.index for r in graph.outputs} | {
        r.index for n in graph.nodes for r in node_refs(n)}
    for unit in schedule(graph, groups):
        if not isinstance(unit, FusionGroup):
            nodes.append(unit)
            continue
        fn = getattr(kernels, f"g{unit.id}")
        lineno = unit.members()[-1].lineno
        label = f"fused{unit.id}"
        if len(unit.outputs) == 1:
            out = unit.outputs[0].index
            nodes.append(Node(out, label, fn, tuple(unit.inputs), (), metas[out], lineno))
        else:
            tup = next_value
            next_value += 1
            metas[tup] = _TUPLE_META
            nodes.append(Node(tup, label, fn, tuple(unit.inputs), (), _TUPLE_META, lineno))
            for k, ref in enumerate(unit.outputs):
                nodes.append(Node(ref.index, "tuple_item", operator.getitem, (Ref(tup), k), (),
                                  metas[ref.index], lineno))
        for out, dest in unit.into.items():
            if out in read:
                nodes.append(Node(out, "target", _target, (dest,), (), metas[out], lineno))
    live = {r.index for r in graph.inputs} | {n.out for n in nodes}
    return dataclasses.replace(graph, nodes=nodes, outputs=list(graph.outputs),
                               inputs=list(graph.inputs), input_metas=list(graph.input_metas),
                               input_names=list(graph.input_names),
                               _metas={k: v for k, v in metas.items() if k in live})


def group_fallback(graph: Graph, grp: FusionGroup, filename: str, firstlineno: int,
                   module: dict | None = None):
    """The group as a NumPy function of its inputs (for inputs its kernel does not take)."""
    sub = Graph()
    sub.inputs = list(grp.inputs)
    sub.input_metas = [graph.meta(r) for r in grp.inputs]
    sub.input_names = [f"v{r.index}" for r in grp.inputs]
    sub.nodes = [grp.written.get(n.out, n) for n in grp.members()]
    sub.outputs = list(grp.outputs)
    sub._metas = {r.index: graph.meta(r) for r in grp.inputs}
    sub._metas.update({n.out: n.meta for n in sub.nodes})
    fn = numpy_backend.compile_graph(sub, f"__pijit_group{grp.id}", filename, firstlineno,
                                     module=module).fn
    if grp.into:
        return functools.partial(_write_fallback, fn, len(grp.inputs), len(grp.outputs) == 1,
                                 grp.inputs.index(next(iter(grp.into.values()))))
    if len(grp.outputs) == 1:
        return lambda *args: fn(*args)[0]
    return fn


def _write_fallback(fn, nargs: int, single: bool, dest: int, *args):
    """The NumPy fallback of a group that writes into its destination (input `dest`).

    Called with the group's inputs: the whole group (the kernel did not write). Called with
    two more, (start, perm), by a kernel that met a floating-point flag (render.py): it wrote
    the elements before `start` of its iteration order (C order over the destination's axes
    taken in the order `perm`), where nothing raised a flag. NumPy then computes the rest in
    one call of the group over the flat rest of every operand, with the warnings (or errors)
    it gives there, which are the whole operation's; the kernel's own outputs stand. Where
    the destination's axes do not collapse into one (a view with gaps, a 3-D array iterated
    by rows), its rest is computed in a copy and copied back."""
    if len(args) == nargs:
        out = fn(*args)
        return out[0] if single else out
    *args, start, perm = args
    target = args[dest]
    cut, flat = [], None
    for k, a in enumerate(args):
        if isinstance(a, np.ndarray):
            a = (a if k == dest else np.broadcast_to(a, target.shape)).transpose(perm)
            a = a.reshape(-1)       # (a copy when the axes do not collapse)
            flat = a if k == dest else flat
            a = a[start:]
        cut.append(a)
    fn(*cut)
    if flat.size and not np.may_share_memory(flat, target):
        target.transpose(perm)[...] = flat.reshape(target.transpose(perm).shape)
    return None
