"""Every jit_config option changes what it says it changes: a behaviour test per option
(values compared with plain Python, and how the call ran), here or in the test file named by
OPTION_TESTS; test_every_option_has_a_behaviour_test keeps that table complete."""
from __future__ import annotations

import ast
import logging
import os
import pathlib
import sysconfig

import numpy as np
import pytest

import pijit
from differential import assert_equal_values, assert_same
from pijit.config import OPTIONS

TESTS = pathlib.Path(__file__).resolve().parent
X = np.linspace(-1.0, 2.0, 12).reshape(3, 4)

# option -> tests (file::name) that assert its effect; those of this file are below
OPTION_TESTS = {
    "print_after_all": ["test_explain.py::test_print_after_all"],
    "print_bb": ["test_explain.py::test_print_guard_and_print_bb_alone"],
    "print_guard": ["test_explain.py::test_print_guard_and_print_bb_alone"],
    "LOG_GRAPH_BREAK": ["test_options.py::test_log_graph_break"],
    "compile_with_try": ["test_options.py::test_compile_with_try"],
    "specialize_scalar": ["test_hook.py::test_specialize_scalar_false_does_not_recompile"],
    "limit_graph_count": ["test_hook.py::test_limit_graph_count"],
    "enable_dynamic_shape": ["test_hook.py::test_shape_change_dynamic_shape_on",
                             "test_hook.py::test_shape_change_dynamic_shape_off"],
    "loop_unrolling": ["test_graph_breaks.py::test_loop_unrolling_option"],
    "MAX_LOOP_UNROLLING": ["test_graph_breaks.py::test_loop_unrolling_option"],
    "loop_nodes": ["test_loop_nodes.py::test_loop_nodes_off"],
    "loop_nests": ["test_loop_nests.py::test_loop_nests_option"],
    "MAX_INLINE_DEPTH": ["test_graph_breaks.py::test_recursive_calls_inline_to_the_depth_limit"],
    "allowed_inline_modules": ["test_options.py::test_allowed_inline_modules"],
    "print_last_frame_if_break_graph": ["test_graph_breaks.py::test_print_last_frame_if_break_graph"],
    "fullgraph": ["test_options.py::test_strict_capture"],
    "jit_syntax_level": ["test_options.py::test_strict_capture"],
    "jit_level": ["test_cfused.py::test_o2_contracts_multiply_adds",
                  "test_differential.py::test_max_min_of_signed_zeros_are_numpys"],
    "num_threads": ["test_threads.py::test_two_threads_are_built_for_and_run",
                    "test_threads.py::test_one_thread_starts_no_thread"],
    "adaptive": ["test_adaptive.py::test_adaptive_off_compiles_at_the_first_call_at_jit_level"],
    "compile_after_ms": [
        "test_adaptive.py::test_a_signature_compiles_once_its_plain_calls_took_compile_after_ms"],
    "promote_after": ["test_adaptive.py::test_a_small_graph_climbs_from_numpy_to_fused_kernels"],
    "promote_after_ms": [
        "test_adaptive.py::test_a_big_graph_is_promoted_once_its_hits_took_promote_after_ms"],
    "background_compile": [
        "test_compile_policy.py::test_without_background_compile_the_promotion_waits_for_the_compiler"],
    "perf_statistics": ["test_adaptive.py::test_perf_statistics_keeps_the_faster_path"],
    "inline_plain": ["test_inline.py::test_inline_plain_off_keeps_every_call"],
    "PERF_STATISTICS_COUNT": ["test_adaptive.py::test_perf_statistics_keeps_the_faster_path"],
    "PERF_STATISTICS_SCALE_10000X": [
        "test_adaptive.py::test_perf_statistics_scale_is_the_margin_plain_python_must_beat"],
    "pijit_forbidden": ["test_opaque_calls.py::test_pijit_forbidden_breaks_at_the_call"],
    "pijit_constexpr": ["test_opaque_calls.py::test_pijit_constexpr_folds_the_call_once"],
}


def test_every_option_has_a_behaviour_test():
    """Each option has a test, and each named test exists and uses the option by name."""
    assert set(OPTION_TESTS) == {o.name for o in OPTIONS}
    for option, tests in OPTION_TESTS.items():
        for ref in tests:
            filename, name = ref.split("::")
            source = (TESTS / filename).read_text()
            fn = next((n for n in ast.parse(source).body
                       if isinstance(n, ast.FunctionDef) and n.name == name), None)
            assert fn is not None, f"{ref} (for {option}) does not exist"
            first = min([d.lineno for d in fn.decorator_list] + [fn.lineno])
            text = "\n".join(source.splitlines()[first - 1:fn.end_lineno])
            assert option in text or option in ast.get_docstring(ast.parse(source)), \
                f"{ref} does not use {option}"


# -- LOG_GRAPH_BREAK ------------------------------------------------------------------------
def _prints(x):
    y = x * 2.0
    print("between")
    return y + 1.0


@pytest.mark.parametrize("on", [True, False])
def test_log_graph_break(on, caplog, monkeypatch):
    """On: every break is a WARNING on pijit.graph_breaks (PIJIT_LOG not naming the channel);
    off: the break is logged at INFO only. The values and the break are the same."""
    monkeypatch.delenv("PIJIT_LOG", raising=False)
    with caplog.at_level(logging.INFO, logger="pijit.graph_breaks"):
        assert_same(_prints, X, graphs=2, breaks=1,
                    jit_kwargs={"jit_config": {"LOG_GRAPH_BREAK": on}})
    records = [r for r in caplog.records if r.name == "pijit.graph_breaks"
               and "graph break in _prints" in r.getMessage()]
    assert records, caplog.text
    levels = {r.levelno for r in records}
    assert levels == ({logging.WARNING} if on else {logging.INFO}), levels
    assert all(f"{__file__}:" in r.getMessage() for r in records)


# -- compile_with_try ---------------------------------------------------------------------------
def _plain_math(x):
    return x * 3.0 - 1.0


def test_compile_with_try(monkeypatch, caplog):
    """An internal error while compiling: on (the default) the call runs as plain Python,
    with the same result, logged and counted; off, the error reaches the caller."""
    from pijit import runtime

    def broken(*args, **kwargs):
        raise RuntimeError("internal compile error (injected)")
    monkeypatch.setattr(runtime, "compile_frame", broken)
    jitted = pijit.jit(_plain_math)
    pijit.reset(jitted)
    with caplog.at_level(logging.WARNING, logger="pijit.graph_breaks"):
        got = jitted(X)
    assert_equal_values(got, _plain_math(X))
    assert "internal compile error (injected)" in caplog.text
    stats = pijit.stats(jitted)
    line = _plain_math.__code__.co_firstlineno
    assert stats["eager_fallbacks"] == [
        f"internal error: RuntimeError: internal compile error (injected) ({__file__}:{line})"]
    assert pijit.code_info(jitted)["state"] == "never_compile"
    strict = pijit.jit(_plain_math, jit_config={"compile_with_try": False})
    pijit.reset(strict)
    with pytest.raises(RuntimeError, match="injected"):
        strict(X)


# -- allowed_inline_modules -----------------------------------------------------------------------
def _library_function():
    """A function whose code lives in site-packages (an installed library's, for
    pijit), in module `fakelib.ops`."""
    path = os.path.join(sysconfig.get_paths()["purelib"], "fakelib", "ops.py")
    ns = {"__name__": "fakelib.ops", "np": np}
    exec(compile("def scale(x):\n    return x * 2.0 + 1.0\n", path, "exec"), ns)
    return ns["scale"]


SCALE = _library_function()


def _calls_library(x):
    return SCALE(x) - 0.5


@pytest.mark.parametrize("allowed,inlined", [((), False), (("fakelib",), True),
                                            (("fakelib.ops",), True), (("fake",), False),
                                            (("numpy", "fakelib"), True)])
def test_allowed_inline_modules(allowed, inlined):
    """Library code is inlined only from the modules (and submodules) listed; otherwise the
    call is a graph break naming the option."""
    config = {"jit_config": {"allowed_inline_modules": allowed}}
    if inlined:
        assert_same(_calls_library, X, jit_kwargs=config, ops=["mul", "add", "sub"])
    else:
        report = assert_same(_calls_library, X, graphs=1, breaks=1, jit_kwargs=config)
        assert "not in allowed_inline_modules" in report.break_reasons[0]["reason"]
        assert report.ops_per_graph == [["sub"]], report


# -- fullgraph, jit_syntax_level ---------------------------------------------------------------
def _breaks_at_print(x):
    y = x + 1.0
    print(float(y.sum()))
    return y * 2.0


@pytest.mark.parametrize("config", [{"fullgraph": True}, {"jit_syntax_level": "STRICT"}])
def test_strict_capture(config):
    """Strict: a break raises GraphBreakError naming the reason and the user's file:line,
    before anything runs; a function without breaks runs as one graph. LAX (the default)
    breaks the graph and runs."""
    strict = pijit.jit(_breaks_at_print, jit_config=config)
    pijit.reset(strict)
    line = _breaks_at_print.__code__.co_firstlineno + 2
    with pytest.raises(pijit.GraphBreakError, match=rf"_breaks_at_print: .*{__file__}:{line}"):
        strict(X)
    assert_same(_plain_math, X, jit_kwargs={"jit_config": config})
    assert_same(_breaks_at_print, X, graphs=2, breaks=1,
                jit_kwargs={"jit_config": {**{k: False for k in config if k == "fullgraph"},
                                           **{k: "LAX" for k in config if k != "fullgraph"}}})
