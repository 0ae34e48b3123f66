"""Every invalid argument of the public API raises the right exception type at once, with a
message that names the argument and lists the valid choices where there are choices.

Convention checked here (Python's and NumPy's): a value of the wrong type raises TypeError,
a value of the right type that is out of range or not one of the choices raises ValueError."""
from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
import sys

import numpy as np
import pytest

import pijit
from pijit import config as config_mod


def _f(x):
    return x + 1


ALL_OPTIONS = [f.name for f in dataclasses.fields(pijit.JitConfig)]


@pytest.fixture(autouse=True)
def _graph_mode():
    yield
    pijit.set_context(mode=pijit.GRAPH_MODE)


# -- mode ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["XJit", "pijit", "psjit", "", "PIJit "])
def test_unknown_mode(mode):
    with pytest.raises(ValueError) as info:
        pijit.jit(_f, mode=mode)
    msg = str(info.value)
    assert "mode" in msg and "'PIJit'" in msg and "'PSJit'" in msg and repr(mode) in msg


@pytest.mark.parametrize("mode", [1, None, b"PIJit", ["PIJit"]])
def test_mode_not_a_str_message(mode):
    with pytest.raises((TypeError, ValueError)) as info:
        pijit.jit(_f, mode=mode)
    msg = str(info.value)
    assert "mode" in msg and "'PIJit'" in msg and "'PSJit'" in msg


@pytest.mark.parametrize("mode", [1, None])
def test_mode_not_a_str_is_type_error(mode):
    with pytest.raises(TypeError):
        pijit.jit(_f, mode=mode)


def test_mode_checked_in_decorator_form_too():
    with pytest.raises(ValueError, match="mode"):
        pijit.jit(mode="nope")


# -- jit_config -----------------------------------------------------------------------------------
@pytest.mark.parametrize("config", [[("fullgraph", True)], "fullgraph", 1, ("a",), {1, 2}])
def test_jit_config_wrong_type(config):
    with pytest.raises(TypeError) as info:
        pijit.jit(_f, jit_config=config)
    msg = str(info.value)
    assert "jit_config" in msg and "dict" in msg and "JitConfig" in msg


@pytest.mark.parametrize("key", ["nope", "fullGraph", "print_after", "limit_graph"])
def test_jit_config_unknown_key_lists_options(key):
    with pytest.raises(ValueError) as info:
        pijit.jit(_f, jit_config={key: True})
    msg = str(info.value)
    assert "jit_config" in msg and repr(key) in msg
    for name in ALL_OPTIONS:
        assert name in msg, (name, msg)


def test_jit_config_non_str_key():
    with pytest.raises(TypeError, match="jit_config keys"):
        pijit.jit(_f, jit_config={1: True})


@pytest.mark.parametrize("key,value,expected", [
    ("fullgraph", 1, "bool"),
    ("fullgraph", "yes", "bool"),
    ("print_after_all", None, "bool"),
    ("specialize_scalar", 0, "bool"),
    ("enable_dynamic_shape", np.bool_(True), "bool"),
    ("limit_graph_count", 2.0, "int"),
    ("limit_graph_count", True, "int"),
    ("limit_graph_count", "8", "int"),
    ("jit_level", 1, "str"),
    ("jit_syntax_level", None, "str"),
])
def test_jit_config_wrong_value_type(key, value, expected):
    with pytest.raises(TypeError) as info:
        pijit.jit(_f, jit_config={key: value})
    msg = str(info.value)
    assert f"jit_config[{key!r}]" in msg and expected in msg and type(value).__name__ in msg


@pytest.mark.parametrize("key,value,choices", [
    ("jit_level", "O3", ("'O0'", "'O1'", "'O2'")),
    ("jit_level", "o1", ("'O0'", "'O1'", "'O2'")),
    ("jit_syntax_level", "strict", ("'STRICT'", "'LAX'")),
    ("jit_syntax_level", "", ("'STRICT'", "'LAX'")),
])
def test_jit_config_bad_choice_lists_choices(key, value, choices):
    with pytest.raises(ValueError) as info:
        pijit.jit(_f, jit_config={key: value})
    msg = str(info.value)
    assert f"jit_config[{key!r}]" in msg and repr(value) in msg
    for c in choices:
        assert c in msg


@pytest.mark.parametrize("value", [0, -1, -100])
def test_jit_config_out_of_range(value):
    with pytest.raises(ValueError) as info:
        pijit.jit(_f, jit_config={"limit_graph_count": value})
    msg = str(info.value)
    assert "limit_graph_count" in msg and ">= 1" in msg and str(value) in msg


def test_jit_config_checked_at_decoration_time():
    with pytest.raises(ValueError, match="unknown option 'nope'"):
        pijit.jit(jit_config={"nope": 1})              # before any function is given
    with pytest.raises(TypeError, match="fullgraph"):
        @pijit.jit(jit_config={"fullgraph": "yes"})
        def g(x):
            return x


def test_valid_configs_accepted():
    assert pijit.api.is_jitted(pijit.jit(_f, jit_config={"limit_graph_count": 1}))
    assert pijit.api.is_jitted(pijit.jit(_f, jit_config=pijit.JitConfig(jit_level="O0")))
    assert pijit.api.is_jitted(pijit.jit(_f, jit_config={}))
    assert pijit.jit(_f)(np.ones(2)).tolist() == [2.0, 2.0]


# -- input_signature ----------------------------------------------------------------------------
SPEC = pijit.ArraySpec((None, 4), "float64")


@pytest.mark.parametrize("sig", ["abc", 1, (1,), [SPEC, "x"], {"x": SPEC}, (np.float64,),
                                 ((None, 4),)])
def test_input_signature_wrong_type(sig):
    with pytest.raises(TypeError) as info:
        pijit.jit(_f, input_signature=sig)
    msg = str(info.value)
    assert "input_signature" in msg and "ArraySpec" in msg


@pytest.mark.parametrize("n", [2, 3])
def test_input_signature_too_long(n):
    with pytest.raises(TypeError) as info:
        pijit.jit(_f, input_signature=(SPEC,) * n)
    msg = str(info.value)
    assert "input_signature" in msg and str(n) in msg and "_f" in msg and "1" in msg


def test_input_signature_too_long_decorator_form():
    with pytest.raises(TypeError, match="input_signature has 3 specs"):
        @pijit.jit(input_signature=(SPEC, SPEC, SPEC))
        def g(x, y):
            return x + y


@pytest.mark.parametrize("sig,checked", [(SPEC, True), ([SPEC], True), ((None,), False),
                                         (None, False)])
def test_input_signature_ok_forms(sig, checked):
    """A spec, a list of specs, None per parameter, no signature: the call that matches runs
    (dynamic first dim: one entry for both sizes); one that does not raises TypeError only
    where a spec is given."""
    jitted = pijit.jit(_f, input_signature=sig)
    pijit.reset(jitted)
    for rows in (3, 5):
        x = np.ones((rows, 4))
        assert np.array_equal(jitted(x), x + 1)
    assert pijit.code_info(jitted)["compile_count"] == (1 if checked else 2)
    bad = np.ones((3, 5))
    if checked:
        with pytest.raises(TypeError, match="does not match input_signature"):
            jitted(bad)
    else:
        assert np.array_equal(jitted(bad), bad + 1)


# -- fn -----------------------------------------------------------------------------------------
class _Klass:
    def __call__(self, x):
        return x


@pytest.mark.parametrize("fn,words", [
    (_Klass, ("class", "_Klass", "methods")),
    (len, ("builtin", "len")),
    (np.add, ("Python function",)),
    (3, ("int",)),
    ("f", ("str",)),
    (functools.partial(_f), ("partial",)),
    (_Klass(), ("_Klass",)),
])
def test_fn_not_a_python_function(fn, words):
    with pytest.raises(TypeError) as info:
        pijit.jit(fn)
    msg = str(info.value)
    assert "pijit.jit expects a Python function" in msg
    for w in words:
        assert w in msg, (w, msg)


def test_fn_not_a_function_in_decorator_form():
    with pytest.raises(TypeError, match="Python function"):
        pijit.jit(jit_config={})(3)


# -- JitConfig --------------------------------------------------------------------------------------
def test_jitconfig_unknown_field():
    with pytest.raises(TypeError, match="nope"):
        pijit.JitConfig(nope=1)


@pytest.mark.parametrize("kw,words", [
    ({"fullgraph": "yes"}, ("fullgraph", "bool", "str")),
    ({"limit_graph_count": 1.5}, ("limit_graph_count", "int", "float")),
    ({"jit_level": 2}, ("jit_level", "str", "int")),
])
def test_jitconfig_wrong_type(kw, words):
    with pytest.raises(TypeError) as info:
        pijit.JitConfig(**kw)
    for w in words:
        assert w in str(info.value)


@pytest.mark.parametrize("kw,words", [
    ({"jit_level": "O9"}, ("jit_level", "'O0'", "'O1'", "'O2'", "'O9'")),
    ({"jit_syntax_level": "lax"}, ("jit_syntax_level", "'STRICT'", "'LAX'")),
    ({"limit_graph_count": 0}, ("limit_graph_count", ">= 1")),
])
def test_jitconfig_bad_value(kw, words):
    with pytest.raises(ValueError) as info:
        pijit.JitConfig(**kw)
    for w in words:
        assert w in str(info.value)


def test_jitconfig_is_frozen():
    cfg = pijit.JitConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.fullgraph = True


# -- ArraySpec ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [3, "3", None, 3.0, np.int64(3)])
def test_arrayspec_shape_not_a_tuple(shape):
    with pytest.raises(TypeError) as info:
        pijit.ArraySpec(shape, "float64")
    msg = str(info.value)
    assert "ArraySpec shape" in msg and "tuple" in msg and type(shape).__name__ in msg


@pytest.mark.parametrize("shape", [(-1,), (2, -3), (None, -1)])
def test_arrayspec_negative_dim(shape):
    with pytest.raises(ValueError) as info:
        pijit.ArraySpec(shape, "float64")
    msg = str(info.value)
    assert "ArraySpec shape" in msg and "non-negative" in msg and "-" in msg


@pytest.mark.parametrize("shape", [(2.0,), (None, 1.5), ("3",)])
def test_arrayspec_float_dim_rejected(shape):
    with pytest.raises((TypeError, ValueError)) as info:
        pijit.ArraySpec(shape, "float64")
    msg = str(info.value)
    assert "ArraySpec shape" in msg and repr(shape[-1]) in msg


def test_arrayspec_float_dim_is_type_error():
    with pytest.raises(TypeError):
        pijit.ArraySpec((2.0,), "float64")


@pytest.mark.parametrize("dtype", ["U5", object, "S3", "datetime64[s]", "timedelta64", "V8",
                                   [("a", "f8")]])
def test_arrayspec_non_numeric_dtype(dtype):
    with pytest.raises(ValueError) as info:
        pijit.ArraySpec((2,), dtype)
    msg = str(info.value)
    assert "ArraySpec dtype" in msg and "numeric" in msg
    for kind in ("bool", "int", "uint", "float", "complex"):
        assert kind in msg


@pytest.mark.parametrize("dtype", ["float65", "nonsense", "f3"])
def test_arrayspec_invalid_dtype_string(dtype):
    with pytest.raises(TypeError) as info:
        pijit.ArraySpec((2,), dtype)
    msg = str(info.value)
    assert "ArraySpec dtype" in msg and repr(dtype) in msg


def test_arrayspec_dtype_none_rejected():
    with pytest.raises((TypeError, ValueError)):
        pijit.ArraySpec((2,), None)


@pytest.mark.parametrize("shape,dtype", [((None, 4), "float32"), ((), "bool"), ([2, None], np.int64),
                                         ((0,), "complex128"), ((3,), np.dtype("uint8"))])
def test_arrayspec_valid(shape, dtype):
    spec = pijit.ArraySpec(shape, dtype)
    assert spec.shape == tuple(shape) and spec.dtype == np.dtype(dtype)


# -- set_context / get_context -------------------------------------------------------------------------
@pytest.mark.parametrize("mode", [2, -1, 5])
def test_set_context_bad_mode(mode):
    with pytest.raises(ValueError) as info:
        pijit.set_context(mode=mode)
    msg = str(info.value)
    assert "set_context mode" in msg and "GRAPH_MODE" in msg and "PYNATIVE_MODE" in msg
    assert pijit.get_context("mode") == pijit.GRAPH_MODE      # unchanged


@pytest.mark.parametrize("mode", ["GRAPH_MODE", None])
def test_set_context_mode_wrong_type_message(mode):
    with pytest.raises((TypeError, ValueError)) as info:
        pijit.set_context(mode=mode)
    msg = str(info.value)
    assert "set_context mode" in msg and "GRAPH_MODE" in msg and "PYNATIVE_MODE" in msg


def test_set_context_mode_str_is_type_error():
    with pytest.raises(TypeError):
        pijit.set_context(mode="GRAPH_MODE")


@pytest.mark.parametrize("mode", [0.0, 1.0, True, False])
def test_set_context_rejects_non_int_equal_values(mode):
    try:
        with pytest.raises((TypeError, ValueError)):
            pijit.set_context(mode=mode)
    finally:
        pijit.set_context(mode=pijit.GRAPH_MODE)


def test_set_context_unknown_keyword():
    with pytest.raises(TypeError, match="device"):
        pijit.set_context(device="CPU")


@pytest.mark.parametrize("key", ["device", "Mode", "", None])
def test_get_context_unknown_key(key):
    with pytest.raises(ValueError) as info:
        pijit.get_context(key)
    msg = str(info.value)
    assert "get_context" in msg and repr(key) in msg and "'mode'" in msg


def test_context_roundtrip():
    pijit.set_context(mode=pijit.PYNATIVE_MODE)
    assert pijit.get_context("mode") == pijit.PYNATIVE_MODE
    pijit.set_context(mode=pijit.GRAPH_MODE)
    assert pijit.get_context("mode") == pijit.GRAPH_MODE


# -- reports on things that are not jitted functions ----------------------------------------------
@pytest.mark.parametrize("api", [pijit.stats, pijit.code_info, pijit.reset])
@pytest.mark.parametrize("bad", [3, len, "f"])
def test_reports_reject_non_functions(api, bad):
    with pytest.raises(TypeError, match="expected a function made by pijit.jit"):
        api(bad)


# -- PIJIT_LOG ---------------------------------------------------------------------------------------
def _run_with_env(**env_vars):
    env = dict(os.environ)
    env.pop("PIJIT_LOG", None)
    env.pop("PIJIT_DISABLE", None)
    env.update(env_vars)
    return subprocess.run([sys.executable, "-c", "import pijit; print('imported')"], env=env,
                          capture_output=True, text=True, timeout=60)


def test_pijit_log_nonsense_raises_listing_channels():
    out = _run_with_env(PIJIT_LOG="nonsense")
    assert out.returncode != 0
    assert "imported" not in out.stdout
    err = out.stderr
    assert "ValueError" in err and "PIJIT_LOG" in err and "nonsense" in err
    for channel in config_mod.LOG_CHANNELS + ("all",):
        assert channel in err.split("PIJIT_LOG")[-1], (channel, err)


def test_pijit_log_one_bad_channel_among_good_ones():
    out = _run_with_env(PIJIT_LOG="guards,bogus")
    assert out.returncode != 0
    assert "bogus" in out.stderr and "PIJIT_LOG" in out.stderr


@pytest.mark.parametrize("value", ["graph_breaks,guards", "all", "", " recompiles , graph "])
def test_pijit_log_valid_values_import(value):
    out = _run_with_env(PIJIT_LOG=value)
    assert out.returncode == 0, out.stderr
    assert "imported" in out.stdout
