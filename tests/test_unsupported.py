"""The API on an interpreter pijit does not support (pijit/unsupported.py): `jit` checks its
arguments as everywhere, warns once and returns the function itself. Tested here on a
supported interpreter, where the module is importable too; .ci/run installs pijit on 3.10
(when the machine has it) and runs a jitted function there."""
from __future__ import annotations

import warnings

import pytest

import pijit
from pijit import unsupported


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(unsupported, "_warned", False)
    monkeypatch.setattr(unsupported, "_mode", pijit.GRAPH_MODE)
    return unsupported


def plain(x):
    return x * 2


def test_jit_warns_once_and_returns_the_function(fresh):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fresh.jit(plain) is plain
        assert fresh.jit(jit_config={"jit_level": "O2"})(plain) is plain
        assert fresh.jit(plain, mode="PSJit") is plain
    assert len(caught) == 1
    assert caught[0].category is RuntimeWarning
    assert "supports CPython 3.11-3.13" in str(caught[0].message)
    assert caught[0].filename == __file__          # points at the user's jit call


def test_arguments_are_checked_as_where_supported(fresh):
    with pytest.raises(ValueError, match="jit mode must be one of"):
        fresh.jit(plain, mode="fast")
    with pytest.raises(ValueError, match="unknown option"):
        fresh.jit(plain, jit_config={"no_such_option": 1})
    with pytest.raises(TypeError, match="input_signature must be"):
        fresh.jit(plain, input_signature=3)


def test_context_reset_and_reports(fresh):
    fresh.set_context(pijit.PYNATIVE_MODE)
    assert fresh.get_context("mode") == pijit.PYNATIVE_MODE
    with pytest.raises(ValueError):
        fresh.set_context(7)
    fresh.reset(plain)
    with pytest.raises(RuntimeError, match="nothing to report"):
        fresh.explain(plain, 1)
    with pytest.raises(RuntimeError, match="nothing to report"):
        fresh.stats(plain)
