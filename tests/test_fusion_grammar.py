"""Programs of the fusion grammar (tests/fusion_grammar.py) jitted against plain NumPy: each
node kind fuse.find_groups treats differently, first in a pair and in a triple and after
others, over a shape class and dtype each; then the programs the enumeration found wrong.

Each must give NumPy's bits at O1 (O2: within its derived bounds), in one captured graph with
no break, with no pijit ERROR record (a kernel whose C does not compile, a pass that raised)
and no group handed to NumPy at run time on inputs where nothing warns; the outcomes the
design gives (fusion_grammar.check's "known ...") pass.

PIJIT_FUSION_GRAMMAR=2 (or 3, or 2,3) runs every pair (or triple) of node kinds instead,
three programs per pair, one per triple, at O1 and O2: an hour or more per Python.
"""
from __future__ import annotations

import os

import pytest

from fusion_grammar import (build, check, enumerate_programs, inputs, plain_ok, program,
                            representative)

# Programs the enumeration found wrong (each also has a test of its own in its area's file).
FOUND = [
    # a reduction of a whole reduction's result, reduced in the loop still computing it
    # (gcc failed on the kernel: test_reduction_edges)
    (["{t} = ({x} * 2).sum(keepdims=True)", "{t} = {x}.prod()"], "2d", "int32"),
    # an exact flat sum beside an operand broadcast along rows: every call handed back
    (["{t} = {x} * r", "{t} = {x} - {x}.sum()"], "2d", "float64"),
    (["{t} = {x} - c", "{t} = {x}.mean(keepdims=True)"], "3d", "float32"),
    (["{t} = np.where(c > 0, {x}, b)", "{t} = {x} - {x}.sum()"], "3d", "float32"),
    # a unit axis with a long stride made the operands' orders differ: handed back
    (["{t} = {x} / 2", "{t} = {x}[..., ::2]", "{t} = np.minimum({x}, c)"], "col", "int64"),
    # a store into a view of out='s destination, of a value read through out='s result
    # (test_direct_writes): the kernel met the overlap at every call and handed it back
    (["{t} = np.where({x} > 1, {x}, 0)", "{t} = np.multiply({x}, b, out=o)",
      "{t} = o\n    {t}[1:] = {x}[1:] * 2"], "2d", "float32"),
]


def _cases() -> list:
    lengths = os.environ.get("PIJIT_FUSION_GRAMMAR", "")
    if not lengths:
        return [pytest.param(src, shape, dtype, "O1", id="-".join(classes + (shape, dtype)))
                for classes, src, shape, dtype in representative()] + [
            pytest.param(program(stmts), shape, dtype, "O1", id=f"found{k}")
            for k, (stmts, shape, dtype) in enumerate(FOUND)]
    out = []
    for length in map(int, lengths.split(",")):
        per = 3 if length == 2 else 1
        for k, (classes, src, shape, dtype) in enumerate(enumerate_programs(length, 0, per)):
            for level in ("O1", "O2"):
                out.append(pytest.param(src, shape, dtype, level,
                                        id=f"{k}-{'-'.join(classes)}-{shape}-{dtype}-{level}"))
    return out


@pytest.mark.parametrize("src, shape, dtype, level", _cases())
def test_program_of_the_grammar_runs_as_numpy(src, shape, dtype, level):
    args = inputs(shape, dtype)
    if not plain_ok(build(src), args):
        pytest.skip("plain NumPy raises on this shape and dtype")
    why = check(src, args, level, inputs(shape, dtype, calm=True))
    assert not why or why.startswith("known "), f"{why}\n{src}"
