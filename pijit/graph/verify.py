"""Graph verifier: checks the invariants every pass must keep (run between passes in tests).

Graph -> None, or AssertionError naming the first broken invariant.
"""
from __future__ import annotations

from pijit.graph.ir import Graph, Ref, node_refs


def verify(graph: Graph) -> None:
    """SSA: each value defined once, before its uses; metas known; outputs defined."""
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
        defined.add(node.out)
    for r in graph.outputs:
        assert isinstance(r, Ref) and r.index in defined, f"output {r!r} is not defined"
