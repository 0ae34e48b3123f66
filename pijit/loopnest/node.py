"""The graph node of a loop nest: NestOp runs the nest's Python form (O0, and after a bail)
or its C kernel (O1/O2: `kernel()`, built through the fused backend's build and disk cache).
"""
from __future__ import annotations

import logging

from pijit import tracebacks
from pijit.loopnest import appends
from pijit.loopnest.ir import Nest
from pijit.loopnest.lower_py import compile_run

log = logging.getLogger("pijit.kernels")


class NestOp:
    """A loop nest as a graph node's function: called with (arrays..., scalar inputs...),
    returns the tuple of the nest's outputs (the locals live after the loop)."""

    repeats = True              # graph/work.py: its work is unbounded, like a loop node

    def __init__(self, nest: Nest, origin, name: str, module: dict | None = None):
        """origin: the code object of the user's function the loop is in; module: that
        function's globals (quiet.warning_scope)."""
        self.nest = nest
        self.name = name
        # graph/purity.py: an effect in order, never run twice (a replay after an error
        # would append to its lists again: appends.py)
        self.writes_arrays = bool(nest.written) or appends.LIST in nest.arrays.values()
        self.run, self.python_source = compile_run(nest, name, origin.co_filename, module)
        # An error the Python form raises reads as the user's: its frame is named as the
        # user's function and continues that function's frame (pijit.tracebacks collapses
        # the two into one entry at the line of the loop's statement that failed).
        self.run.__code__ = self.run.__code__.replace(co_name=origin.co_name,
                                                      co_qualname=origin.co_qualname)
        tracebacks.register(self.run.__code__, origin, True)
        self.c_source = None
        self._slots = [None] * len(nest.variables())
        variables = nest.variables()
        self._where = [variables.index(v) for v in nest.inputs]
        self._narrays = len(nest.arrays)

    def __repr__(self):
        return f"<loop nest {self.name}>"

    def __call__(self, *args):
        """The nest from its start, in Python (plain Python's semantics by construction)."""
        values = list(self._slots)
        for k, v in zip(self._where, args[self._narrays:]):
            values[k] = v
        return self.run(0, *args[:self._narrays], *values)

    def resume(self, block, *state):
        """The C kernel's hand-over: block -1 means the arguments did not suit the kernel
        (run from the start); else every array and variable at the start of `block`."""
        if block < 0:
            return self(*state)
        return self.run(block, *state)

    def kernel(self, cache_dir=None):
        """The nest's C kernel (a METH_FASTCALL function taking the node's arguments), or
        None when it cannot be built (logged; the node then runs in Python)."""
        from pijit.backends.cfused import build, render
        from pijit.loopnest import calls
        from pijit.loopnest.lower_c import NestKernel
        try:
            renderer = NestKernel(self.nest)
            source, own = render.module_source([renderer], False, 1)
        except Exception:           # noqa: BLE001 - a bug of the lowering, not of the machine
            log.error("loop nest %s: lowering to C failed; it runs as Python", self.name,
                      exc_info=True)
            return None
        try:
            self.c_source = own
            kernels = build.load_kernels(source, cache_dir)
            calls.set_loops(kernels, renderer.ufunc_slots)
            kernels.set_fallback(0, self.resume)
            return kernels.g0
        except build.SourceError:   # a bug of lower_c: an error with its traceback, as cfused
            log.error("the generated C of loop nest %s does not compile; it runs as Python",
                      self.name, exc_info=True)
            return None
        except Exception as e:      # noqa: BLE001 - a build failure must not reach the user
            log.debug("loop nest %s: kernel build failed", self.name, exc_info=True)
            log.warning("loop nest %s: kernel build failed (%s); it runs as Python", self.name, e)
            return None
