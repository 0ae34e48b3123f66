"""Every case of the op-coverage corpus (tests/op_cases.py), plain vs jitted: same results,
dtypes, shapes and aliasing, captured as exactly one graph with no fallback."""
import warnings

import numpy as np
import pytest

from differential import assert_same
from op_cases import CASES


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_op_case(case):
    args = case.make_args(np.random.default_rng(0))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        # Python-scalar-only cases would fold to constants; make the scalars graph inputs.
        scalars_only = not any(isinstance(a, (np.ndarray, np.generic)) for a in args)
        config = {"specialize_scalar": False} if scalars_only else {}
        report = assert_same(case.fn, *args, jit_kwargs={"jit_config": config})
    assert report.op_count >= 1, f"{case.name} captured no op: {report}"
