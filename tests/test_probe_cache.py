"""The probe cache of elementwise ops (capture/meta_rules.probe_cached): one process captures
the same op for many argument kinds, and each must get NumPy's own answer for its kind. A key
missing a component would hand one kind's dtype to another: these tests run the kinds one
after the other in one process and compare with plain NumPy."""
from __future__ import annotations

import numpy as np
import pytest

from differential import assert_same
from pijit.capture import meta_rules
from pijit.capture.meta_rules import probe, probe_cached, probe_key
from pijit.graph.ir import Meta

EAGER = {"jit_config": {"adaptive": False}}


def scale_shift(x):
    return x * 2 + 1


def add_small(x):
    return x + 1


def add_big(x):
    return x + 1000


def test_one_op_over_dtypes_in_turn_gets_each_dtype():
    for dtype in (np.float32, np.int16, np.uint8, np.bool_, np.float64, np.complex64):
        report = assert_same(scale_shift, np.arange(6).astype(dtype), ops=["mul", "add"],
                             jit_kwargs=EAGER)
        assert str(np.dtype(dtype)) in str(report), (dtype, report)


def test_one_op_over_a_row_then_a_0d_array_gets_a_scalar():
    """x * 2 of a 0-d array is a NumPy scalar, of a 1-d array an array: the ndim is keyed."""
    assert_same(scale_shift, np.arange(4.0), ops=["mul", "add"], jit_kwargs=EAGER)
    assert_same(scale_shift, np.array(3.0), ops=["mul", "add"], jit_kwargs=EAGER)


def test_a_python_int_that_does_not_fit_breaks_after_one_that_fits():
    """NEP 50: int8 + 1 is int8, int8 + 1000 raises OverflowError; the cached answer for 1
    must not answer 1000 (capture breaks there, as the real op would raise)."""
    assert_same(add_small, np.arange(5, dtype=np.int8), ops=["add"], jit_kwargs=EAGER)
    report = assert_same(add_big, np.arange(5, dtype=np.int8), graphs=0, breaks=1,
                         jit_kwargs=EAGER)
    assert "OverflowError" in str(report)


def _stand(shape, dtype):
    return Meta.array(shape, dtype)


@pytest.mark.parametrize("a, b", [
    (0.0, -0.0), (1, True), (1, 1.0), ((1, 2), [1, 2]), (None, 0), ("a", "b"),
    (_stand((3,), np.float32), _stand((3,), np.float64)),
    (_stand((3,), np.float32), _stand((3, 1), np.float32)),
    (_stand((3,), ">f8"), _stand((3,), "<f8")),
    (Meta(float, np.dtype(float)), Meta(np.float64, np.dtype(float))),
    (np.float32, np.float64), (slice(1, 2), slice(1, 3)), ({"k": 1}, {"k": 2}),
])
def test_probe_keys_tell_apart_what_probes_tell_apart(a, b):
    assert probe_key(a) != probe_key(b)


def test_probe_keys_ignore_a_dims_value():
    assert probe_key(_stand((3, 4), np.int32)) == probe_key(_stand((7, None), np.int32))


@pytest.mark.parametrize("obj", [np.arange(3), np.float32(1.0), np.dtype("f8"), object()])
def test_what_probe_key_cannot_key_raises(obj):
    with pytest.raises(meta_rules._Unkeyed):
        probe_key(obj)


def test_an_unkeyed_argument_is_probed_and_not_kept():
    meta_rules._PROBED.clear()
    got = probe_cached(np.add, (_stand((2,), np.int8), np.float32(1.0)), {})
    assert np.result_type(got) == np.float32 and not meta_rules._PROBED


def test_cached_answers_are_the_probes():
    meta_rules._PROBED.clear()
    args = [(_stand((2,), np.int8), 3), (_stand((2,), np.uint16), -0.0),
            (Meta(int, np.dtype(int)), _stand((), np.float32)), (_stand((2, 2), bool), True)]
    for fn in (np.add, np.multiply, np.true_divide, np.maximum):
        for a in args:
            want = probe(fn, a, {})
            for _ in range(2):
                got = probe_cached(fn, a, {})
                assert (type(got), np.result_type(got), np.ndim(got)) == \
                    (type(want), np.result_type(want), np.ndim(want))
