"""The spine: one frame's function and arguments -> a cache entry.

capture (bytecode -> graph + guards) -> backend (graph -> callable) -> bytecode_gen
(transformed function) -> guards (C program). Raises GraphBreak when capture stops.
"""
from __future__ import annotations

import re

from pijit import explain
from pijit.backends import numpy_backend
from pijit.bytecode_gen.transform import build_transformed, graph_outputs
from pijit.cache import EntryInfo
from pijit.capture.graph_break import GraphBreak
from pijit.capture.interpreter import capture_frame


def compile_frame(func, args, config, dynamic_dims, extra_guards=()):
    """Capture and compile one call; returns (EntryInfo, transformed function)."""
    code = func.__code__
    try:
        capture = capture_frame(func, args, config, dynamic_dims)
    except GraphBreak as e:
        e.filename = code.co_filename
        raise
    graph = capture.graph
    graph.outputs = list(graph_outputs(capture.ret, {}))
    name = "__pijit_graph_" + re.sub(r"\W", "_", code.co_name)     # <lambda>, <genexpr>
    compiled = numpy_backend.compile_graph(graph, name,
                                           code.co_filename, code.co_firstlineno)
    fn = build_transformed(func, capture, compiled.fn, capture.return_lineno)
    info = EntryInfo(guards=list(capture.guards) + list(extra_guards), graph=graph,
                     graph_source=compiled.source, dynamic_dims=dict(dynamic_dims),
                     bytecode=explain.bytecode_text(fn.__code__))
    if config.print_after_all or config.print_bb:
        explain.dump("original bytecode", explain.bytecode_text(code))
    if config.print_after_all:
        explain.dump("captured graph", str(graph))
    if config.print_after_all or config.print_guard:
        explain.dump("guards", "\n".join(f"  {g}" for g in info.guards))
    if config.print_after_all:
        explain.dump("transformed bytecode", info.bytecode)
    return info, fn

