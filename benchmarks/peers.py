"""Optional peers: numexpr, numba, torch.compile and jax.jit, each on the same workload.

None is required. A peer that is not importable is reported as "not installed"; a peer with
nothing to run for a workload (no numexpr expression, no jax port) as "not applicable"; a
peer that raises while compiling or running, or whose result differs from NumPy's, is
reported with its error or mismatch, never with a speed.

Each `prepare_*` returns `(callable, convert_inputs, to_numpy)`: the callable is what gets
timed (it includes waiting for the result: jax's `block_until_ready`), `convert_inputs`
turns the NumPy argument tuples into the peer's own (done outside timing), and `to_numpy`
turns a result back for the correctness check.
"""
from __future__ import annotations

import importlib
import os
import types

PEERS = ("numexpr", "numba", "torch", "jax")
# A peer's first call (its compile) is stopped after this long and reported as timed out:
# torch.compile unrolls a Python loop over array elements trip by trip, and on a 200k-trip
# loop it traced for over 20 minutes, which hung the whole run with no output.
FIRST_CALL_LIMIT_S = 60.0
_MODULES = {"numexpr": "numexpr", "numba": "numba", "torch": "torch", "jax": "jax"}


class NotApplicable(Exception):
    """The peer has nothing to run for this workload."""


def fresh_copy(fn, globals_=None):
    """A new function object with a new code object (so no JIT cache is shared)."""
    return types.FunctionType(fn.__code__.replace(), fn.__globals__ if globals_ is None else globals_,
                              fn.__name__, fn.__defaults__, fn.__closure__)


def availability() -> dict:
    """{peer: {"installed": bool, "version": str | None}} without raising."""
    out = {}
    for name in PEERS:
        try:
            mod = importlib.import_module(_MODULES[name])
            out[name] = {"installed": True, "version": getattr(mod, "__version__", "?")}
        except Exception as exc:  # ImportError, or a broken install
            out[name] = {"installed": False, "version": None,
                         "note": "not installed" if isinstance(exc, ImportError)
                         else f"import failed: {type(exc).__name__}: {exc}"}
    return out


def _identity(x):
    return x


def _inputs_identity(inputs):
    return inputs


def prepare(name: str, workload, threads: int):
    return {"numexpr": _numexpr, "numba": _numba, "torch": _torch, "jax": _jax}[name](
        workload, threads)


def _numexpr(workload, threads):
    if not workload.numexpr:
        raise NotApplicable("no numexpr expression for this workload")
    import numexpr as ne
    ne.set_num_threads(threads)
    names = workload.fn.__code__.co_varnames[:workload.fn.__code__.co_argcount]
    expr = workload.numexpr

    def run(*args):
        return ne.evaluate(expr, local_dict=dict(zip(names, args)))
    return run, _inputs_identity, _identity


def _numba(workload, threads):
    import numba
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    fn = workload.fn
    # the helpers it calls njit-ed too, as a numba user decorates them
    helpers = {name: numba.njit(obj) for name in fn.__code__.co_names
               if isinstance(obj := fn.__globals__.get(name), types.FunctionType)
               and obj.__module__ == fn.__module__}
    fn = fresh_copy(fn, dict(fn.__globals__, **helpers) if helpers else None)
    return numba.njit(fn), _inputs_identity, _identity


def _torch(workload, threads):
    import torch
    torch.set_num_threads(threads)
    return torch.compile(fresh_copy(workload.fn)), _inputs_identity, _identity


def _start_on_one_cpu(jax):
    """Starts jax's CPU backend with this thread pinned to one CPU: the backend runs ops on a
    pool of threads it creates as it starts, one per CPU, and they keep the CPUs they were
    created on. XLA_FLAGS (xla_cpu_multi_thread_eigen=false) did not confine it: measured
    here, 1.8-2 cores busy on the MLP, chain and reductions, and 1.0 once started so. A
    backend already started keeps its threads."""
    if not hasattr(os, "sched_setaffinity"):
        return
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})
    try:
        jax.devices()
    finally:
        os.sched_setaffinity(0, cpus)


def _jax(workload, threads):
    if not workload.jax:
        raise NotApplicable("no jax.numpy port for this workload")
    import jax
    if threads == 1:
        _start_on_one_cpu(jax)
    import jax.numpy as jnp
    import numpy as np
    jax.config.update("jax_enable_x64", True)       # keep float64 workloads in float64
    port_globals = dict(workload.fn.__globals__, np=jnp)   # the port: np bound to jax.numpy
    jitted = jax.jit(fresh_copy(workload.fn, port_globals))

    def run(*args):
        return jax.block_until_ready(jitted(*args))

    def convert(inputs):
        return [tuple(jnp.asarray(a) for a in args) for args in inputs]

    def to_numpy(out):
        return jax.tree_util.tree_map(np.asarray, out)
    return run, convert, to_numpy
