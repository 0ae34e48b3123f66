"""Python face of pijit's C frame-evaluation hook (``csrc/eval_frame.c``).

``pijit._C`` is a cffi extension with a single entry point that creates the
real extension module ``pijit._eval_frame``; everything it offers is
re-exported here:

* ``set_callback(cb)``: ``cb(func, args)`` runs on a cache miss of a marked
  code and returns a function to call with the frame's argument slots, or
  None to evaluate the frame normally.
* ``mark(code) -> CodeState``: the per-code state (entries, counters, the
  Python-side ``record``); the code stays marked while its state is referenced
  (by a Wrapper, or a record). ``state_of(code)``, ``all_states()``,
  ``reset(code)``, ``set_state(code, s)``, ``get_state(code)``,
  ``add_entry(code, sources, checks, fn)``, ``entry_count(code)``,
  ``entries(code)``, ``counters(code)``: the per-code cache.
* States ``NEVER_COMPILE``, ``CANDIDATE``, ``BUILDING``, ``CALLABLE``, ``FROZEN``.
* ``Wrapper(fn)``: a C callable that runs ``fn`` with the hook active on the
  calling thread; it owns the CodeState of ``fn.__code__`` and follows a
  replaced ``__code__`` (``set_code_changed_callback``); ``__reduce__`` calls
  ``set_reduce_callback``'s function. ``set_enabled``/``is_enabled`` switch jit off.
* Adaptive execution (``csrc/adapt.c``): ``set_compile_budget(code, seconds)``,
  ``add_entry``'s ``promote_at``/``promote_after``/``plain_until_promoted``/``trial``/
  ``margin``,
  ``set_adapt_callback``, ``set_perf_clock``, ``set_cpu_clock`` (the budgets count CPU
  time: wall time scaled by the thread's CPU share), ``entry_stats(code)``,
  ``take_varied(code)``.
* ``install()``, ``uninstall()`` (this thread enters / leaves a jitted call),
  ``is_installed()``, ``depth()`` (this thread's), ``active_threads()``,
  ``set_compiling(flag)``, ``after_fork_child()``, ``set_array_type(numpy.ndarray)``.
* ``RESUME``: the marker leading a transformed function's resume request; ``OBSERVED``: true
  while a tracer, profiler or sys.monitoring tool watches this thread (transformed code
  tests it at a graph break: see ``transform._plain_rest``).
* The kernels' buffer pool (``csrc/pool.c``): ``pool_handler()``,
  ``set_pool_limit(bytes)``, ``release_pool()``, ``pool_stats()``.
* Jitted function objects (3.12+, ``csrc/wrapper.c``): ``arm(func)`` gives a function
  pijit's vectorcall (its ``__dict__["__pijit__"]`` is its ``Wrapper(func, original)``);
  ``vectorcall_of(func)`` ("pijit", "cpython" or "other"), ``follow_original(func)``,
  ``set_inline(code, flag)``, ``set_source(wrapper, func)`` (a variant's copy follows func:
  api.py's ``_variant``); ``counters(code)["inlined"]`` counts those given back to
  CPython. ``FUNCTION_VECTORCALL``: whether this build can do so.
* ``kernel_support()``: the capsule of routines fused-kernel modules call
  (``csrc/kernel_support.c``); their init takes it.
"""
try:
    from pijit._C import lib as _lib
except ImportError as exc:  # pragma: no cover - depends on the build
    raise ImportError(
        "pijit's C extension (pijit._C) is not built: run `pip install -e .` "
        "or `python setup.py build_ext --inplace`"
    ) from exc

if _lib.pijit_init_module() != 0:  # pragma: no cover
    raise ImportError("pijit._eval_frame failed to initialise (see the traceback above)")

from pijit._eval_frame import *  # noqa: E402,F401,F403
from pijit._eval_frame import (  # noqa: E402,F401
    BUILDING, CALLABLE, CANDIDATE, FROZEN, NEVER_COMPILE, CodeState, Wrapper,
    active_threads, add_entry, after_fork_child, all_states, counters, depth, entries,
    entry_count, get_state, install, is_enabled, is_installed, kernel_support, mark,
    pool_handler, pool_stats, release_pool, reset, set_array_type, set_callback,
    set_code_changed_callback, set_source_callback, set_compiling, set_enabled, set_pool_limit, set_reduce_callback,
    set_state, state_of, uninstall, set_adapt_callback, set_perf_clock, set_cpu_clock,
    set_compile_budget,
    entry_stats, take_varied, arm, vectorcall_of, follow_original, set_inline, original_code,
    given_back, set_source,
)
