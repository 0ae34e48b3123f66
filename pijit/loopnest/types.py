"""Scalar types of loop nests and their promotion rules: operand types -> result type + domain.

A static type is a Python scalar type ("int", "float", "bool": exact Python semantics) or a
NumPy scalar dtype (NEP 50: a Python scalar beside a NumPy one is weak). A variable's type
(a VT) is a tuple of one static type, or of two whose values one C type holds exactly
(`carrier`: of one *family*, Python float / np.float64, Python int / np.int64, Python bool /
np.bool_; or int64 for two integer types, double for a float beside a float or a narrow int):
`s = 0.0` then `s += x[j]` makes s a float or an np.float64 depending on the trip count, so
the C variable carries a tag saying which.

Each rule also names a *domain*: the C computation. For every combination of member types an
op must map to one domain, whose results agree with Python and with NumPy wherever the C
code does not bail; where they could differ (overflow, division by zero, huge ints beside
floats, non-finite float results) the kernel bails and Python does that operation itself.
"""
from __future__ import annotations

import numpy as np



class PyScalar:
    """A Python scalar type. Not a string: NumPy dtypes compare equal to strings such as
    "float", so types are compared by identity."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return self.name


INT, FLOAT, BOOL = PyScalar("int"), PyScalar("float"), PyScalar("bool")
PY = (INT, FLOAT, BOOL)

DTYPES = tuple(np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64,
                                     np.uint8, np.uint16, np.uint32, np.float32, np.float64))
F64, F32, I64, NPBOOL = (np.dtype(t) for t in (np.float64, np.float32, np.int64, np.bool_))

_FAMILY = {INT: "i64", I64: "i64", FLOAT: "f64", F64: "f64", BOOL: "b", NPBOOL: "b"}

ARITH = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift",
         "and", "or", "xor")
BITWISE = ("lshift", "rshift", "and", "or", "xor")
COMPARE = ("lt", "le", "eq", "ne", "gt", "ge")


class Unsupported(Exception):
    """The nest uses a type or an operation the compiler does not handle: not compiled."""


def of_value(value):
    """The static type of a Python or NumPy scalar value, or None."""
    t = type(value)
    if t is bool:
        return BOOL
    if t is int:
        return INT if -2**63 <= value < 2**63 else None
    if t is float:
        return FLOAT
    if isinstance(value, np.generic) and value.dtype in DTYPES and type(value) is \
            value.dtype.type:
        return value.dtype
    return None


def of_pytype(pytype, dtype):
    """The static type of a capture Meta's scalar (pytype, dtype), or None."""
    if pytype is bool:
        return BOOL
    if pytype is int:
        return INT
    if pytype is float:
        return FLOAT
    if isinstance(pytype, type) and issubclass(pytype, np.generic) and dtype in DTYPES \
            and pytype is dtype.type:
        return dtype
    return None


def is_np(t) -> bool:
    return isinstance(t, np.dtype)


def vt(*members) -> tuple:
    """A variable type from its members (sorted, unique); Unsupported when they do not
    share one C value. Sorted by name(), which tells every static type apart (str() does not:
    bool and np.bool_ both print "bool", and a tie kept the order of the set, which follows
    PyScalar's id-based hash, so a bool-or-np.bool_ union was one tuple in one process and
    the other in the next, and the type walks never settled)."""
    ms = tuple(sorted(set(members), key=name))
    families = {_FAMILY.get(m) for m in ms}
    if len(ms) > 1 and (len(families) != 1 or None in families) and _across(ms) is None:
        raise Unsupported(f"a value is {' or '.join(map(name, ms))}")
    return ms


def _across(ms: tuple):
    """The C value of two scalar types of two families (`s = 0` then `s += x[i]` of an int32
    or a float64 array; `best = -np.inf` then `best = x[i]` of an int32 one; `s = b[i]` of
    float32 then `s -= L[i, j] * x[j]` of float64): int64 for two integer or bool types,
    double where it holds every value of both exactly (a Python int only up to 2**53:
    recognise.py lets no other int reach such a variable, and the entry checks the one it
    is given); None otherwise (np.int64 beside a float)."""
    if len(ms) != 2:
        return None
    if all(kind(m) in "bi" for m in ms):
        return I64
    if all(not is_np(m) or m.kind in "fb" or m.itemsize <= 4 for m in ms):
        return F64
    return None


def carrier(v: tuple) -> np.dtype:
    """The dtype of a variable's C value: its members' (one family), or _across's (as in
    vt: two NumPy dtypes of no family, an int8 and a uint8, are two families)."""
    families = {_FAMILY.get(m) for m in v}
    if len(v) > 1 and (len(families) != 1 or None in families):
        return _across(v)
    return dtype_of(v[0])


def int_in_double(v: tuple):
    """The int or bool member of a variable whose C value is a double and that also holds
    a float (its C value then is not an int64), else None."""
    if len(v) > 1 and carrier(v) == F64:
        return next((m for m in v if kind(m) != "f"), None)
    return None


def join(a: tuple | None, b: tuple) -> tuple:
    return b if a is None else vt(*a, *b)


def name(t) -> str:
    return t.name if isinstance(t, PyScalar) else f"np.{t}"


def vt_name(v: tuple) -> str:
    return "|".join(name(t) for t in v)


def kind(t) -> str:
    """'b', 'i' (signed or unsigned int) or 'f' of a static type."""
    if isinstance(t, PyScalar):
        return {"bool": "b", "int": "i", "float": "f"}[t.name]
    return "b" if t.kind == "b" else "i" if t.kind in "iu" else "f"


def dtype_of(t) -> np.dtype:
    """The C value's dtype: Python ints are int64 in C (bailing when they would leave it)."""
    return {INT: I64, FLOAT: F64, BOOL: NPBOOL}.get(t, t)


def _weak(t):
    return {INT: 0, FLOAT: 0.0, BOOL: False}[t]


def np_result(a, b) -> np.dtype:
    """NumPy's result dtype of a binary op with at least one NumPy operand (NEP 50)."""
    return np.result_type(a if is_np(a) else _weak(a), b if is_np(b) else _weak(b))


def binop(op: str, a, b):
    """(result type, domain) of `a op b` for static types; Unsupported if not handled.

    Domains: ('i64',) Python-int arithmetic in int64; ('int', dtype) NumPy integer
    arithmetic computed in int64 and checked against dtype's range; ('idiv',) true division
    of ints; ('f', dtype) float arithmetic in float or double; ('b',) bitwise ops of bools.
    """
    ka, kb = kind(a), kind(b)
    if not is_np(a) and not is_np(b):
        if ka == kb == "b" and op in ("and", "or", "xor"):
            return BOOL, ("b",)
        if ka in "bi" and kb in "bi":
            if op == "truediv":
                return FLOAT, ("idiv",)
            return INT, ("i64",)
        if op in BITWISE:
            raise Unsupported(f"{op} of floats")
        return FLOAT, ("f", F64)
    if (ka == "b" or kb == "b") and not (ka == kb == "b" and op in ("and", "or", "xor")) \
            and (is_np(a) and ka == "b" or is_np(b) and kb == "b"):
        raise Unsupported(f"{op} of a NumPy bool")
    r = np_result(a, b)
    if r not in DTYPES:
        raise Unsupported(f"{op} giving {r}")
    if r.kind == "b":
        return r, ("b",)
    if r.kind in "iu":
        if op == "truediv":
            return F64, ("idiv",)
        if op == "pow":
            raise Unsupported("** of NumPy integers")
        return r, ("i64",) if r == I64 else ("int", r)
    if op in BITWISE:
        raise Unsupported(f"{op} of floats")
    return r, ("f", r)


def compare(a, b):
    """(result type, domain) of a comparison: ('ci',) exact integer comparison, or ('cf',
    dtype) comparison in float/double (Python's int-float exactness kept by bailing on ints
    beyond 2**53, or 2**24 for float32)."""
    res = BOOL if not is_np(a) and not is_np(b) else NPBOOL
    if kind(a) in "bi" and kind(b) in "bi":
        return res, ("ci",)
    if not is_np(a) and not is_np(b):
        return res, ("cf", F64)
    r = np_result(a, b)
    return res, ("cf", F32 if r == F32 else F64)


def unop(op: str, a):
    """(result type, domain) of -a, +a, ~a."""
    k = kind(a)
    if op == "not":
        return BOOL, ("not",)
    if k == "b":
        if op == "invert" and is_np(a):
            return a, ("b",)
        raise Unsupported(f"{op} of a bool")
    if op == "invert":
        if k != "i":
            raise Unsupported("~ of a float")
        return a, ("i64",) if not is_np(a) or a == I64 else ("int", a)
    if k == "f":
        return a, ("f", dtype_of(a))
    if is_np(a) and a.kind == "u" and op == "neg":
        raise Unsupported("- of an unsigned NumPy integer")
    return a, ("i64",) if not is_np(a) or a == I64 else ("int", a)


def combine(rule, *vts):
    """Apply a static rule to every combination of the operands' member types: (result VT,
    domain, {member combination: result type}). The domain must be one for all."""
    combos = [()]
    for v in vts:
        combos = [c + (m,) for c in combos for m in v]
    results, domains = {}, set()
    for c in combos:
        r, d = rule(*c)
        results[c] = r
        domains.add(d)
    if rule is compare and len(domains) == 2 and ("ci",) in domains:
        # ints compared in floating point where some member is a float (`x > best` of an
        # int32 x and a best that is -inf or an int32): the same for ints, each int operand
        # checked exact in it (lower_c.compare_expr)
        domains.discard(("ci",))
    if len(domains) != 1:
        raise Unsupported("an operation whose meaning depends on a value's run-time type")
    return vt(*results.values()), domains.pop(), results
