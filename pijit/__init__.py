"""pijit: a bytecode-capturing JIT frame evaluator for NumPy programs.

Pipeline, in processing order:
  csrc/eval_frame.c       PEP 523 hook: marked code -> walk cache entries in C -> hit or callback
  pijit/api.py            jit decorator, set_context, reports (arguments: interface.py,
                          options: config.py; unsupported.py where no hook is built)
  pijit/runtime.py        the callback on a miss: policy, limits, fallbacks, recompile reasons
  pijit/compile_frame.py  capture -> backend -> bytecode_gen -> guards
  pijit/capture/          bytecode + arguments -> graph, guards, and the break point (if any)
  pijit/graph/            the graph IR (and passes)
  pijit/backends/         graph -> callable
  pijit/bytecode_gen/     the transformed function, residual bytecode, resume functions
  pijit/guards.py         facts -> C guard program and readable failure reasons
  pijit/cache.py          per-code records for reports
  pijit/explain.py        explain, code_info, stats, dumps, PIJIT_LOG channels
  pijit/tracebacks.py     exceptions leaving a jitted call read as the user's
"""
from pijit import _compat
from pijit.config import JitConfig
from pijit.interface import GRAPH_MODE, PYNATIVE_MODE, ArraySpec, GraphBreakError

if _compat.SUPPORTED:
    from pijit.api import code_info, explain, get_context, jit, reset, set_context, stats
else:       # no C extension here: jit warns once and returns functions unchanged
    from pijit.unsupported import (code_info, explain, get_context, jit, reset,  # noqa: F401
                                   set_context, stats)

__all__ = ["jit", "JitConfig", "ArraySpec", "GraphBreakError", "set_context", "get_context",
           "GRAPH_MODE", "PYNATIVE_MODE", "explain", "code_info", "stats", "reset"]
