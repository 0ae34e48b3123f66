"""Graph verifier: checks the invariants every pass must keep.

Graph -> None, or AssertionError naming the first broken invariant. `after` runs it on the
result of each stage (capture, every graph pass, fusion's lowering) when PIJIT_VERIFY_GRAPHS
is on, as it is for the test suite (tests/conftest.py): a malformed graph then raises
GraphInvariantError naming the stage, which no fallback swallows.
"""
from __future__ import annotations

from pijit import config
from pijit.graph.ir import Graph, LoopOp, Ref, node_refs


class GraphInvariantError(AssertionError):
    """A stage produced a graph that breaks an invariant (a pijit bug)."""


def after(stage: str, graph: Graph) -> Graph:
    """`graph`, the result of `stage`, verified when PIJIT_VERIFY_GRAPHS is on."""
    if config.env_verify_graphs():
        try:
            verify(graph)
        except AssertionError as e:
            raise GraphInvariantError(f"after {stage}: {e}\n{graph}") from None
    return graph


def verify(graph: Graph) -> None:
    """SSA: each value defined once, before its uses; metas known; outputs defined. Loop
    nodes: arity, result metas and the fixed point of their bodies; bodies verified too."""
    defined = set()
    for ref, meta in zip(graph.inputs, graph.input_metas):
        assert ref.index not in defined, f"input %{ref.index} defined twice"
        assert graph._metas.get(ref.index) == meta, f"input %{ref.index}: meta mismatch"
        defined.add(ref.index)
    assert len(graph.inputs) == len(graph.input_names), "one name per input"
    for node in graph.nodes:
        for r in node_refs(node):
            assert r.index in defined, f"%{node.out} = {node.name} uses %{r.index} before definition"
        assert node.out not in defined, f"%{node.out} defined twice"
        assert graph._metas.get(node.out) == node.meta, f"%{node.out}: meta mismatch"
        if isinstance(node.fn, LoopOp):
            _verify_loop(node)
        defined.add(node.out)
    for r in graph.outputs:
        assert isinstance(r, Ref) and r.index in defined, f"output {r!r} is not defined"


def _verify_loop(node) -> None:
    op, body = node.fn, node.fn.body
    where = f"loop node %{node.out}"
    assert not node.kwargs, f"{where}: keyword arguments"
    assert op.n_invariant >= 0, f"{where}: body has fewer inputs than carried values + index"
    assert len(node.args) == 3 + op.n_carried + op.n_invariant, f"{where}: wrong arity"
    assert len(body.outputs) == op.n_carried + op.n_last, f"{where}: wrong number of body outputs"
    outs = tuple(body.meta(r) for r in body.outputs)
    assert node.meta == outs, f"{where}: result metas differ from the body's outputs"
    ins = tuple(body.input_metas[:op.n_carried])
    assert outs[:op.n_carried] == ins, f"{where}: carried metas are not a fixed point"
    assert body.input_metas[op.n_carried].pytype is int, f"{where}: the index is not an int"
    verify(body)
