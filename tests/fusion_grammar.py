"""Short programs over the node kinds pijit/graph/fuse.py groups differently, enumerated (not
drawn): each pair and triple of kinds, each kind applied to the previous value, each
program over one shape class and dtype (SHAPES, DTYPES: what the grouping and render.py's
loops tell apart) taken in turn by a seeded generator.

A kind is one statement template. Its class (CLASSES) is what find_groups tells apart: a
full elementwise node (reading a Python scalar, a 0-d array, a row (1, n), a column (m, 1),
a full operand), a float -> int cast (a member no other member reads), another cast, a
comparison, np.where, a float op computed by NumPy's own loop at O1, a reduction by op
family and mode (whole, last axis, outer axes; with and without keepdims), a reduction's
result read elementwise by full nodes (softmax), a view, and a write a kernel computes into
its destination (a store, `+=`, `out=`). test_fusion_grammar runs them jitted against plain
NumPy; `python tests/fusion_grammar.py LENGTH [PER [LEVELS [PART/PARTS [SHAPE]]]]` (say `3 1 O1,O2
0/2`) runs the programs of LENGTH kinds (PER per sequence of kinds, the share PART of
PARTS, all over the shape class SHAPE if given) as a script, printing each failure.
"""
from __future__ import annotations

import itertools
import logging
import os
import random
import sys
import warnings
import zlib

import numpy as np

if __name__ == "__main__":      # as the suite does: compile at the first call
    os.environ.setdefault("PIJIT_ADAPTIVE", "0")

import pijit
from differential import (assert_same_outcome, clone, inputs_tol, level_tol, run_observed,
                          run_plain)
from pijit.explain import report as explain_report

# class -> statement templates; {x} is the operand, {t} the new value's name. Inputs: a (the
# program's array), b (a's shape and dtype), r (a row: (1, n)), c (a column: (m, 1)),
# z (a 0-d array), o (a's shape and dtype, written into).
KINDS = {
    "ew_scalar": ["{t} = {x} * 3", "{t} = -{x}", "{t} = abs({x})", "{t} = {x} / 2",
                  "{t} = {x} - 1"],
    "ew_0d": ["{t} = {x} + z", "{t} = np.maximum({x}, z)"],
    "ew_row": ["{t} = {x} * r", "{t} = {x} - r"],
    "ew_col": ["{t} = {x} - c", "{t} = np.minimum({x}, c)"],
    "ew_full": ["{t} = {x} + b", "{t} = np.maximum({x}, b)", "{t} = {x} * {x}"],
    "cast_f2i": ["{t} = {x}.astype(np.int32)", "{t} = {x}.astype(np.int8)"],
    "cast": ["{t} = {x}.astype(np.float64)", "{t} = {x}.astype(np.bool_)",
             "{t} = {x}.astype(np.float32)"],
    "compare": ["{t} = {x} > 1", "{t} = {x} == b"],
    "where": ["{t} = np.where({x} > 1, {x}, 0)", "{t} = np.where(c > 0, {x}, b)"],
    "numpy_loop": ["{t} = np.exp({x})", "{t} = np.tanh({x})", "{t} = np.log({x})",
                   "{t} = np.sin({x})"],
    "red_all": ["{t} = {x}.%s()", "{t} = {x}.%s(keepdims=True)"],
    "red_last": ["{t} = {x}.%s(-1)", "{t} = {x}.%s(-1, keepdims=True)"],
    "red_cols": ["{t} = {x}.%s(0)", "{t} = {x}.%s(0, keepdims=True)"],
    "row_use": ["{t} = {x} - {x}.max(-1, keepdims=True)",
                "{t} = {x} / {x}.sum(-1, keepdims=True)",
                "{t} = {x} - {x}.mean(axis=-1)[:, None]",
                "{t} = {x} * {x}.min(-1, keepdims=True)"],
    "whole_use": ["{t} = {x} - {x}.sum()", "{t} = {x} * {x}.max(0)",
                  "{t} = {x} / {x}.mean(0, keepdims=True)"],
    "view": ["{t} = {x}.T", "{t} = {x}[1:]", "{t} = {x}[..., ::2]", "{t} = {x}.reshape(-1)"],
    "store": ["a[...] = {x}\n    {t} = a", "{t} = o\n    {t}[:] = {x}",
              "{t} = o\n    {t}[1:] = {x}[1:] * 2"],
    "iadd": ["a += {x}\n    {t} = a", "{t} = {x} * 2\n    {t} += b", "o -= {x}\n    {t} = o"],
    "out": ["{t} = np.add({x}, 1, out=o)", "{t} = np.multiply({x}, b, out=o)"],
}
REDUCTIONS = ("sum", "mean", "prod", "max", "min", "any", "all", "argmax")
CLASSES = tuple(KINDS)


def templates(cls: str) -> list:
    """The statements of a class (reductions: one per op)."""
    if cls.startswith("red_"):
        return [t % op for t in KINDS[cls] for op in REDUCTIONS
                if not (op == "argmax" and "keepdims" in t)]
    return KINDS[cls]


# Shape classes: (name, shape, layout) - layouts as users pass them.
SHAPES = (("0d", (), "C"), ("1d", (5,), "C"), ("2d", (3, 4), "C"), ("row", (1, 4), "C"),
          ("col", (3, 1), "C"), ("3d", (2, 3, 4), "C"), ("T", (3, 4), "T"),
          ("strided", (3, 4), "strided"),
          # past a flat chunk of 16384 values, a row sum's chunk of 2048 and the 64 rows of
          # a lookahead share (render.CHUNK, SUM_CHUNK, AHEAD_ROWS)
          ("long", (66, 2100), "C"))
DTYPES = ("bool", "int8", "uint8", "int32", "int64", "float32", "float64")


def values(shape, dtype: str, seed: int, calm: bool = False) -> np.ndarray:
    """Small values of `dtype` with zeros, negatives and (floats) a -0.0 and a half; calm:
    values from 1 to 7 instead, on which no op here warns and no max or min is a zero."""
    n = int(np.prod(shape, dtype=np.int64))
    k = (np.arange(n) * 5 + seed) % 7 - (-1 if calm else 3)
    if dtype == "bool":
        return (k > 0).reshape(shape)
    if dtype.startswith("float"):
        v = k.astype(dtype) + np.where(k % 2 == 0, 0.5, 0.0).astype(dtype)
        v[k == 0] = -0.0
        return v.reshape(shape)
    with np.errstate(all="ignore"):
        return k.astype(dtype).reshape(shape)


def laid_out(a: np.ndarray, how: str) -> np.ndarray:
    """`a`'s values laid out `how`: C, a transposed C array (F order), every other column."""
    if how == "T":
        return np.ascontiguousarray(a.T).T
    if how == "strided":
        buf = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        buf[..., ::2] = a
        return buf[..., ::2]
    return a


def inputs(shape_name: str, dtype: str, calm: bool = False) -> list:
    """a, b, r, c, z, o of one shape class and dtype (calm: see values)."""
    _, shape, how = next(s for s in SHAPES if s[0] == shape_name)
    last = shape[-1] if shape else 1
    rows = shape[-2] if len(shape) >= 2 else last
    a = laid_out(values(shape, dtype, 0, calm), how)
    b = laid_out(values(shape, dtype, 3, calm), how)
    return [a, b, values((1, last), dtype, 1, calm), values((rows, 1), dtype, 2, calm),
            values((), dtype, 4, calm), laid_out(values(shape, dtype, 5, calm), how)]


def program(statements: list, ret_prev: bool = False) -> str:
    """The source of `prog(a, b, r, c, z, o)`: statement k reads t{k-1} (the first one a);
    returns the last value (and the one before when ret_prev)."""
    lines = []
    for k, s in enumerate(statements):
        lines.append("    " + s.format(x=f"t{k - 1}" if k else "a", t=f"t{k}"))
    last = len(statements) - 1
    ret = f"t{last - 1}, t{last}" if ret_prev and last else f"t{last}"
    return "def prog(a, b, r, c, z, o):\n" + "\n".join(lines) + f"\n    return {ret}\n"


def build(src: str):
    namespace = {"np": np}
    exec(compile(src, "<grammar>", "exec"), namespace)
    return namespace["prog"]


class Errors(logging.Handler):
    """pijit's ERROR records (a C compile failure, a pass that raised)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def plain_ok(fn, args) -> bool:
    """Plain NumPy runs the program without raising (programs that raise are not this
    enumeration's business: test_random_programs covers exceptions)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            fn(*clone(args))
        except Exception:   # noqa: BLE001 - an invalid combination of kind and shape
            return False
    return True


def check(src: str, args: list, level: str = "O1", calm=None) -> str:
    """'' when `src` jitted at `level` runs as plain NumPy does (assert_same_outcome: values
    by level_tol, warnings, aliasing, written inputs), in one captured graph with no break,
    no pijit ERROR record and no group handed to NumPy at run time on `calm` inputs (of
    args' shapes and dtypes: see values; a kernel meeting a warning or a zero's sign hands
    back by design); else what went wrong."""
    from pijit.backends import cfused
    fn = build(src)
    handed, fallback = [], cfused.group_fallback

    def counting(*spec, **kw):
        inner = fallback(*spec, **kw)

        def counted(*a):
            handed.append(spec[1].id)
            return inner(*a)
        return counted

    errors, logger = Errors(), logging.getLogger("pijit")
    logger.addHandler(errors)
    cfused.group_fallback = counting
    try:
        tol, scale = level_tol(fn, args, level)
        inputs_bound = inputs_tol(fn, args, level)
        want_args = clone(list(args))
        want = run_plain(fn, want_args, {})
        jitted = pijit.jit(fn, jit_config={"jit_level": level})
        pijit.reset(jitted)
        for call in range(2):
            got_args = clone(list(args))
            got = run_observed(jitted, got_args, {})
            try:
                assert_same_outcome(got, want, got_args, want_args, f"call {call + 1}", tol,
                                    scale, inputs_bound)
            except AssertionError as e:
                return f"mismatch: {e}"
        if calm is not None:
            handed.clear()
            if run_observed(jitted, clone(list(calm)), {}).warnings:
                handed.clear()      # the kernel met a flag: NumPy warns of it
    finally:
        cfused.group_fallback = fallback
        logger.removeHandler(errors)
    if errors.records:
        return "error: " + errors.records[0].getMessage()
    report = explain_report(fn.__code__)
    if report.fallback is not None or report.graph_count != 1 or report.graph_break_count:
        reasons = {b["reason"] for b in report.break_reasons}
        known = "known " if report.fallback is None and reasons and all(
            r.endswith(OUT_BREAK) for r in reasons) else ""
        return f"{known}not one graph: {report.graph_count} graphs, " \
               f"{report.graph_break_count} breaks {sorted(reasons)}, fallback {report.fallback}"
    if handed and calm is not None:
        in_c = all(not isinstance(x, np.ndarray) or x.flags.c_contiguous for x in args)
        return f"{'' if in_c else 'known '}handback: groups {sorted(set(handed))}"
    return ""


# Outcomes the design gives (check's "known ..."): a ufunc's out= that capture leaves to
# plain Python (a cast into the destination, a 0-d destination: graph/stores.py and
# fuse.direct_write take the rest); and inputs not in C order, which kernels hand to NumPy
# where NumPy would lay out a result, or sum, in their memory order (render.py prologue).
OUT_BREAK = ": out= writes into an existing array"


def enumerate_programs(length: int, seed: int = 0, per_pair: int = 1):
    """(src, shape, dtype) for every sequence of `length` classes, `per_pair` programs
    each, templates and shape/dtype classes taken in turn (seeded), programs plain NumPy
    cannot run skipped later."""
    rng = random.Random(seed)
    combos = [(s[0], d) for s in SHAPES for d in DTYPES]
    for classes in itertools.product(CLASSES, repeat=length):
        for _ in range(per_pair):
            stmts = [rng.choice(templates(c)) for c in classes]
            shape, dtype = rng.choice(combos)
            yield classes, program(stmts, rng.random() < 0.25), shape, dtype


def pick(classes, seed: str):
    """(src, shape, dtype): one program of `classes` (templates, shape class and dtype drawn
    by a generator seeded with `seed`) that plain NumPy runs, or None."""
    rng = random.Random(zlib.crc32(seed.encode()))
    stmts = [rng.choice(templates(c)) for c in classes]
    src = program(stmts, rng.random() < 0.25)
    combos = [(s[0], d) for s in SHAPES for d in DTYPES]
    rng.shuffle(combos)
    fn = build(src)
    for shape, dtype in combos:
        if plain_ok(fn, inputs(shape, dtype)):
            return src, shape, dtype
    return None


def representative() -> list:
    """(classes, src, shape, dtype): each class first in a pair and in a triple, and second
    and third after others (class i with i + 1; with i + 5 and i + 11)."""
    n, out = len(CLASSES), []
    for i, cls in enumerate(CLASSES):
        for classes in ((cls, CLASSES[(i + 1) % n]),
                        (cls, CLASSES[(i + 5) % n], CLASSES[(i + 11) % n])):
            got = pick(classes, "/".join(classes))
            if got is not None:
                out.append((classes, *got))
    return out


def main(argv) -> int:
    length = int(argv[1]) if len(argv) > 1 else 2
    per = int(argv[2]) if len(argv) > 2 else 1
    levels = argv[3].split(",") if len(argv) > 3 else ["O1"]
    part, parts = map(int, (argv[4] if len(argv) > 4 else "0/1").split("/"))
    only = argv[5] if len(argv) > 5 else None       # one shape class for every program
    programs = ran = failed = known = 0
    for k, (classes, src, shape, dtype) in enumerate(enumerate_programs(length, 0, per)):
        if k % parts != part:
            continue
        shape = only or shape
        args = inputs(shape, dtype)
        if not plain_ok(build(src), args):
            continue
        programs += 1
        for level in levels:
            ran += 1
            try:
                why = check(src, args, level, inputs(shape, dtype, calm=True))
            except Exception as e:      # noqa: BLE001 - the harness's own failure, printed
                why = f"harness raised {e!r}"
            if why:
                tag = "KNOWN" if why.startswith("known ") else "FAIL"
                known += tag == "KNOWN"
                failed += tag == "FAIL"
                print(f"{tag} #{k} {level} {'/'.join(classes)} {shape} {dtype}: {why}\n{src}",
                      flush=True)
        if programs % 100 == 0:
            print(f"-- #{k}: {programs} programs, {ran} runs, {failed} failed, {known} known",
                  flush=True)
    print(f"done: {programs} programs, {ran} runs, {failed} failed, {known} known", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
