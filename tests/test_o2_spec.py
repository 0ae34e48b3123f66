"""tests/o2_spec.py, the O2 error bounds, against what it is derived from: NumPy's own accuracy
data (the installed NumPy's validation sets) and the README's table of the same bounds."""
from __future__ import annotations

import csv
import pathlib
import re

import numpy as np
import pytest

import o2_spec

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = pathlib.Path(np.__file__).parent / "_core" / "tests" / "data"


def numpy_validation_ulps(name: str) -> tuple:
    """(float32, float64) max ulperror of NumPy's accuracy data for ufunc `name`."""
    worst = {}
    with open(DATA / f"umath-validation-set-{name}.csv") as f:
        for row in csv.reader(line for line in f if line.strip() and line[0] != "$"
                              and not line.startswith("dtype")):
            if len(row) == 4 and row[0].startswith("np.float"):
                worst[row[0]] = max(worst.get(row[0], 0), int(row[3]))
    return worst["np.float32"], worst["np.float64"]


@pytest.mark.skipif(not DATA.is_dir(), reason="this NumPy has no accuracy data")
@pytest.mark.parametrize("name", sorted(o2_spec.NUMPY_ULP))
def test_numpy_bounds_are_numpys_own(name):
    assert o2_spec.NUMPY_ULP[name] == numpy_validation_ulps(name)


def test_readme_table_is_the_spec():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## O2 error bounds", 1)[1].split("\n## ", 1)[0]
    rows = {m[0]: (float(m[1]), float(m[2]))
            for m in re.findall(r"^\| (\w+) \| ([\d.]+) \| ([\d.]+) \|$", section, re.M)}
    assert rows == o2_spec.readme_rows()
    for op, bound in o2_spec.LOGADDEXP.items():
        assert re.search(rf"`{op}`[^`]*?{bound.k:g}", section), op


def test_every_inexact_op_of_the_backend_has_a_bound():
    from pijit.graph import fuse
    for op in fuse.INEXACT | {"pow", "power"}:
        assert o2_spec.tolerance(op, "O2") != o2_spec.EXACT, op
        assert o2_spec.tolerance(op, "O1") == o2_spec.EXACT, op


def test_sum_bound_follows_the_depths():
    """A sum of n values: NumPy's depth n at worst, the kernel's 128 + log2 blocks + 1."""
    assert o2_spec.kernel_sum_depth(21) == 21 + 0 + 1
    assert o2_spec.kernel_sum_depth(40009) == 128 + 9 + 1
    k = o2_spec.SUM.factor(np.float64, 1000)
    u = np.finfo(np.float64).eps / 2
    assert k == pytest.approx((1000 + 128 + 3 + 1) * u / np.finfo(np.float64).eps, rel=1e-9)


def test_a_scalar_plus_equals_an_array_carries_a_new_value():
    """`s = x.sum(); s += y`: s is a NumPy scalar, so += makes a new array (plain NumPy
    does; a 0-d array could not take it). carry held s 0-d and wrote into it, and raised
    (found by tests/fusion_grammar.py at O2)."""
    def f(x, y):
        s = x.sum()
        s += y * 0.5
        return s
    x, y = np.arange(6.0).reshape(2, 3), np.ones((2, 3))
    bound = o2_spec.carry(f, x, y)[0]
    assert np.shape(bound) == (2, 3) and np.all(np.asarray(bound) > 0)
