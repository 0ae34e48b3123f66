"""Real values of graph values during capture: Ref -> the object it holds on the first call.

Opaque calls learn their result's structure by calling the real function on real arguments
(capture holds the first call's inputs). The graph up to the call is evaluated node by node,
on demand and memoized, on copies of the input arrays (a write node in the graph must not
change the caller's arrays twice), with warnings and floating-point errors silenced (the
real run reports them), and with every random generator put back as it was: capture must
not advance the user's generators.
"""
from __future__ import annotations


import numpy as np

from pijit.capture.sources import SourceMissing
from pijit.graph.ir import LoopOp, Ref, map_refs
from pijit.graph.opaque import OpaqueCall, draws, get_state, set_state
from pijit.quiet import warnings_as


class NotKnown(Exception):
    """The value cannot be computed at capture time (a loop body's placeholder, an error)."""


class CaptureValues:
    """Memoized real values of a capture's graph values (one per capture, shared by inlined
    frames)."""

    def __init__(self, builder):
        self.builder = builder
        self.memo: dict = {}
        self._node_at: dict = {}
        self._draws: dict = {}      # id(generator) -> its state as the graph left it

    def value(self, ref: Ref):
        if ref.index not in self.memo:
            self.memo[ref.index] = self._compute(ref)
        return self.memo[ref.index]

    def remember(self, ref: Ref, value):
        self.memo[ref.index] = value

    def _compute(self, ref: Ref):
        graph = self.builder.graph
        if ref in graph.inputs:
            source = self.builder.input_sources[graph.inputs.index(ref)]
            try:
                obj = source.read(self.builder.func, self.builder.args)
            except SourceMissing as e:
                raise NotKnown(str(e)) from None
            return obj.copy(order="K") if isinstance(obj, np.ndarray) else obj
        node = self._node(ref)
        args = map_refs(node.args, self.value)
        kwargs = {k: map_refs(v, self.value) for k, v in node.kwargs}
        if isinstance(node.fn, OpaqueCall) and node.fn.stateful:
            return self.draw(node.fn.rng, node.fn.target, args, kwargs)
        if isinstance(node.fn, LoopOp) and draws(node.fn.body):
            raise NotKnown("a loop that draws random numbers")
        return quietly(node.fn, args, kwargs)

    def _node(self, ref: Ref):
        node = self._node_at.get(ref.index)
        if node is None:
            for n in self.builder.graph.nodes:
                self._node_at[n.out] = n
            node = self._node_at.get(ref.index)
        if node is None:            # a loop body's carried value or index
            raise NotKnown("a value computed in a loop body")
        return node

    def draw(self, rng, target, args, kwargs):
        """target(*args, **kwargs) on generator `rng` as the graph so far left it; the
        user's generator is then put back as it was."""
        saved = get_state(rng)
        key = id(rng)
        if key in self._draws:
            set_state(rng, self._draws[key])
        try:
            result = quietly(target, args, kwargs)
            self._draws[key] = get_state(rng)
        finally:
            set_state(rng, saved)
        return result


def capture_values(cap) -> CaptureValues:
    """The capture's real values, shared by the frames of one capture."""
    top = cap
    while top.parent is not None:
        top = top.parent
    values = getattr(top, "real_values", None)
    if values is None:
        values = top.real_values = CaptureValues(cap.builder)
    return values


def quietly(fn, args, kwargs):
    """fn(*args, **kwargs) with warnings and floating-point error reports silenced."""
    with warnings_as("ignore"), np.errstate(all="ignore"):
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            raise NotKnown(f"raises {type(e).__name__}: {e}") from None
