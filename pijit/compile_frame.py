"""The spine: one frame's function and arguments -> a cache entry.

capture (bytecode -> graph + guards, maybe a break point) -> plan (adaptive.py: plain Python,
or which backend) -> backend (graph -> callable) -> bytecode_gen (transformed function,
residual code, resume functions) -> guards (C program). Raises GraphBreak when the function
cannot be split (strict mode, frame introspection).
"""
from __future__ import annotations

import re

from pijit import adaptive, explain
from pijit.backends import cfused, numpy_backend
from pijit.bytecode_gen.reconstruct import graph_outputs, keep_rebuildable_dead
from pijit.bytecode_gen.transform import build_transformed
from pijit.cache import BreakInfo, EntryInfo
from pijit.capture.graph_break import GraphBreak
from pijit.capture.interpreter import capture_frame
from pijit.graph import opaque, verify


def compile_frame(func, args, config, dynamic_dims, extra_guards, resume_code_for,
                  body_code_for):
    """Capture and compile one call; returns (EntryInfo, transformed function, Plan). The
    function is None when the plan runs the call as plain Python.

    resume_code_for(instructions, position, depth, live) -> the resume code at a break exit.
    body_code_for(instructions, loop_body) -> the code of an outlined residual loop body.
    """
    code = func.__code__
    try:
        capture = capture_frame(func, args, config, dynamic_dims)
    except GraphBreak as e:
        e.filename = code.co_filename
        raise
    graph = capture.graph
    bp = capture.break_point
    if bp is not None:
        keep_rebuildable_dead(bp)
    roots = [capture.ret] if bp is None else \
        list(bp.stack) + list(bp.locals.values()) + list(bp.dead.values())
    stored = [v for s in capture.stores for v in (s.target, s.value) if v is not None]
    out_index = graph_outputs(roots + stored)
    graph.outputs = list(out_index)
    verify.after("capture", graph)
    plan = adaptive.plan_entry(config, graph, None if bp is None else
                               list(bp.stack) + list(bp.locals.values()) + stored)
    breaks = [BreakInfo(bp.where, code.co_filename, bp.lineno)] if bp is not None else []
    info = EntryInfo(guards=list(capture.guards) + list(extra_guards), graph=graph,
                     dynamic_dims=dict(dynamic_dims), breaks=breaks,
                     callee=bp.callee if bp is not None else None)
    if plan.plain is not None:
        info.fallback = BreakInfo(plan.plain, code.co_filename, code.co_firstlineno)
        return info, None, plan
    name = "__pijit_graph_" + re.sub(r"\W", "_", code.co_name)     # <lambda>, <genexpr>
    restart = opaque.may_mismatch(graph)

    def build(level):
        """The transformed function with the graph compiled at `level` (the entry's first
        build, and its promotion)."""
        compiled = (numpy_backend.compile_graph(graph, name, code.co_filename,
                                                code.co_firstlineno, module=func.__globals__)
                    if level == "O0" else
                    cfused.compile_graph(graph, name, code.co_filename, code.co_firstlineno,
                                         level=level, threads=config.threads,
                                         module=func.__globals__))
        graph_fn = compiled.fn
        if restart:
            graph_fn = opaque.restartable(graph_fn, f"{code.co_filename}:{code.co_name}",
                                          opaque.drawn_before_checks(graph))
        fn = build_transformed(func, capture, graph_fn, out_index,
                               lambda *exit_: resume_code_for(capture.instructions, *exit_),
                               lambda body: body_code_for(capture.instructions, body),
                               restart=restart)
        info.level, info.code, info.graph_source = level, fn.__code__, compiled.source
        if config.print_after_all:
            explain.dump(f"compiled graph ({compiled.backend} backend)", compiled.source)
            if compiled.kernels:
                explain.dump("fused kernels (C)", compiled.kernels)
        return fn

    # Kept for the promotion only: build's closure holds the capture, and with it every
    # object the function read (a model passed as self, its arrays).
    info.promote = build if plan.promote_at else None
    if config.print_after_all or config.print_bb:
        explain.dump("original bytecode", explain.bytecode_text(code))
    if config.print_after_all:
        explain.dump("captured graph", str(graph))
    fn = _stand_in(info) if plan.plain_until_promoted else build(plan.level)
    if config.print_after_all or config.print_guard:
        explain.dump("guards", "\n".join(f"  {g}" for g in info.guards))
    if config.print_after_all:
        explain.dump("transformed bytecode", info.bytecode)
    if bp is not None and config.print_last_frame_if_break_graph:
        explain.dump(f"frame at graph break ({code.co_filename}:{bp.lineno})",
                     explain.frame_text(bp))
    return info, fn, plan


def _stand_in(info):
    """The function of an entry whose hits run plain Python until its promotion builds the
    real one (adaptive.py): the hook never calls it, so the graph's NumPy-backend form is
    not generated. Its own code object tells the entry apart for the adapt callback."""
    def plain_until_promoted(*slots):
        raise AssertionError("pijit: the stand-in of an entry that runs plain was called")
    plain_until_promoted.__code__ = plain_until_promoted.__code__.replace()
    info.code = plain_until_promoted.__code__
    return plain_until_promoted
