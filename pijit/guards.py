"""Guards: facts capture relied on -> a C guard program and readable failure reasons.

Each Guard names a Source and one check. The same list is compiled into the tuples the C hook
walks on every call (`to_program`) and checked in Python only on a miss, to say which fact
changed (`first_failure`), for recompile reasons and the `guards` log channel.
"""
from __future__ import annotations

import types
from dataclasses import dataclass

import numpy as np

from pijit.capture.sources import ConstSource, Source, SourceMissing

# ndarray flags the array guard checks (NPY_ARRAY_C_CONTIGUOUS, NPY_ARRAY_F_CONTIGUOUS).
C_CONTIGUOUS = 0x1
F_CONTIGUOUS = 0x2


@dataclass(frozen=True, eq=False)
class Guard:
    """One check on one source. kind: type, id, eq, len, array, call, distinct, items (see
    csrc/guards.c).

    params: for "array" (dtype, shape with None for dynamic dims, layout flags); for "call"
    (predicate, description); for "distinct" (the Source whose object this one is not); for
    "items" (the dtype np.asarray gives the list: items_dtype); otherwise the expected
    type/object/value/length.
    """
    source: Source
    kind: str
    params: tuple

    def key(self):
        params = self.params
        if self.kind in ("id", "call"):
            params = tuple(id(p) for p in params)
        elif self.kind == "eq":
            params = (type(params[0]), repr(params[0]))
        return (self.source, self.kind, params)

    def __str__(self) -> str:
        name = self.source.name()
        p = self.params
        if self.kind == "type":
            return f"type({name}) is {p[0].__qualname__}"
        if self.kind == "id":
            return f"{name} is {_describe(p[0])}"
        if self.kind == "eq":
            return f"{name} == {p[0]!r}"
        if self.kind == "len":
            return f"len({name}) == {p[0]}"
        if self.kind == "array":
            return f"{name}: ndarray {_array_text(p[0], p[1], p[2])}"
        if self.kind == "distinct":
            return f"{name} is not {p[0].name()}"
        if self.kind == "items":
            return f"np.asarray({name}): {p[0]}[?] (by its items' types)"
        return f"{p[1]}({name})"

    def failure(self, func, args):
        """None when the guard holds for this call, else why not (old vs new value)."""
        name = self.source.name()
        try:
            value = self.source.read(func, args)
        except SourceMissing as e:
            return str(e)
        p = self.params
        if self.kind == "type":
            if type(value) is not p[0]:
                return f"type({name}): expected {p[0].__qualname__}, got {type(value).__qualname__}"
        elif self.kind == "id":
            if value is not p[0]:
                return f"{name}: expected {_describe(p[0])}, got {_describe(value)}"
        elif self.kind == "eq":
            if not same_scalar(value, p[0]):
                return f"{name}: expected {p[0]!r}, got {value!r}"
        elif self.kind == "len":
            if type(value) not in (tuple, list, dict) or len(value) != p[0]:
                return f"len({name}): expected {p[0]}, got {_len_text(value)}"
        elif self.kind == "array":
            if type(value) is not np.ndarray:
                return f"{name}: expected ndarray, got {type(value).__qualname__}"
            if not array_matches(value, *p):
                got = _array_text(value.dtype, value.shape, layout_flags(value))
                return f"{name}: expected {_array_text(*p)}, got {got}"
        elif self.kind == "items":
            got = items_dtype(value) if type(value) is list else None
            if got != p[0]:
                what = f"np.asarray of it {got}" if got is not None else \
                    "items of other types (or ints past int64)"
                return f"{name}: expected a list whose np.asarray is {p[0]}, got {what}"
        elif self.kind == "call":
            if not p[0](value):
                return f"{name}: {p[1]} no longer holds"
        elif self.kind == "distinct":
            try:
                other = p[0].read(func, args)
            except SourceMissing as e:
                return str(e)
            if value is other:
                return f"{name} is now the same object as {p[0].name()}"
        return None


def same_scalar(value, expected) -> bool:
    """The "eq" check: same exact type and equal; floats compare bitwise (NaN == NaN, -0.0 != 0.0)."""
    if type(value) is not type(expected):
        return False
    if type(value) is float:
        return np.float64(value).tobytes() == np.float64(expected).tobytes()
    if type(value) is complex:
        return np.complex128(value).tobytes() == np.complex128(expected).tobytes()
    try:
        return bool(value == expected)
    except Exception:
        return False


# The scalar types an "items" guard knows besides Python's float, int and bool (the C check
# compares types by identity: subclasses, np.float32 or np.longlong are other types).
ITEM_TYPES = (np.float64, np.int64, np.bool_)
_ITEMS_KIND = {np.dtype(np.float64): "f", np.dtype(np.int64): "i", np.dtype(np.bool_): "b"}


def items_dtype(lst: list):
    """The dtype np.asarray(lst) has, told from the items' exact types without converting,
    or None when they do not tell it: float64 when a float or np.float64 is among them (or
    the list is empty), else int64 when an int within int64 or np.int64 is, else bool (only
    bools and np.bool_). An int past int64 (NumPy picks uint64, float64 or object by the
    values) or any other item (np.float32, a list, an array, a subclass) tells nothing.
    The "items" guard (csrc/guards.c check_items) is this rule in C."""
    has_float, has_int = not lst, False
    for item in lst:
        t = type(item)
        if t is float or t is np.float64:
            has_float = True
        elif t is int and -2 ** 63 <= item < 2 ** 63 or t is np.int64:
            has_int = True
        elif t is not bool and t is not np.bool_:
            return None
    return np.dtype(np.float64 if has_float else np.int64 if has_int else np.bool_)


def layout_flags(a: np.ndarray) -> int:
    return (C_CONTIGUOUS if a.flags.c_contiguous else 0) | (F_CONTIGUOUS if a.flags.f_contiguous else 0)


def array_matches(a: np.ndarray, dtype, shape, flags) -> bool:
    # the type number too, as the C guard: int64 as C long and as C long long compare equal
    # but give results of their own type (dtype.char)
    if (a.dtype != dtype or a.dtype.num != np.dtype(dtype).num or a.ndim != len(shape)
            or not a.dtype.isnative):
        return False
    if any(d is not None and d != s for d, s in zip(shape, a.shape)):
        return False
    return layout_flags(a) & flags == flags


def first_failure(guards, func, args):
    """The reason of the first guard that fails for this call, or None if all hold."""
    for guard in guards:
        why = guard.failure(func, args)
        if why is not None:
            return why
    return None


def to_program(guards):
    """Guards -> (sources, checks): the tuples `pijit.eval_frame.add_entry` compiles into C."""
    index = {}
    sources = []

    def source_index(src):
        if src in index:
            return index[src]
        kind = type(src).__name__
        if kind == "LocalSource":
            entry = ("local", src.slot)
        elif kind == "GlobalSource":
            entry = ("global", src.global_name)
        elif kind == "CellSource":
            entry = ("cell", src.index)
        elif kind == "AttrSource":
            entry = ("attr", source_index(src.base), src.attr)
        elif kind == "ItemSource":
            entry = ("item", source_index(src.base), src.index)
        elif kind == "DictItemSource":
            entry = ("dictitem", source_index(src.base), src.key)
        elif kind == "ConstSource":
            entry = ("const", src.obj)
        else:
            raise TypeError(f"no C form for source {src!r}")
        index[src] = len(sources)
        sources.append(entry)
        return index[src]

    checks = []
    for g in guards:
        i = source_index(g.source)
        if g.kind == "array":
            dtype, shape, flags = g.params
            dims = tuple(-1 if d is None else d for d in shape)
            # Only the layouts the first array had are required: an array of a size-0/1
            # dim is both C and F contiguous, and a strided one promises nothing.
            checks.append(("array", i, dtype.num, len(shape), dims, flags, flags))
        elif g.kind == "call":
            checks.append(("call", i, g.params[0]))
        elif g.kind == "distinct":
            checks.append(("distinct", i, source_index(g.params[0])))
        elif g.kind == "items":
            checks.append(("items", i, _ITEMS_KIND[g.params[0]], ITEM_TYPES))
        else:
            checks.append((g.kind, i, g.params[0]))
    return tuple(sources), tuple(checks)


def hash_args_guard(objs) -> Guard:
    """A guard that the `hash_args` objects still have the value they had at compile time."""
    source = ConstSource(objs, "hash_args")
    frozen = freeze(objs)
    return Guard(source, "call", (lambda value: freeze(value) == frozen, "hash_args value"))


def freeze(obj):
    """A hashable, comparable fingerprint of obj's value (containers and arrays by content).
    Scalars are told apart as the "eq" guard tells them (same_scalar): by exact type, since
    1, 1.0 and True are equal but give results of other dtypes, and floats by their bits,
    since 0.0 == -0.0 gives other signs and NaN != NaN would recompile at every call."""
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, tuple(freeze(o) for o in obj))
    if isinstance(obj, dict):
        return ("dict", tuple(sorted((repr(k), freeze(v)) for k, v in obj.items())))
    if isinstance(obj, np.ndarray):
        return ("ndarray", obj.dtype.str, obj.shape, obj.tobytes())
    if isinstance(obj, (float, complex, np.generic)):
        return (type(obj), np.asarray(obj).tobytes())
    try:
        hash(obj)
        return (type(obj), obj)
    except TypeError:
        return ("repr", repr(obj))


def _array_text(dtype, shape, flags) -> str:
    dims = ",".join("?" if d is None else str(d) for d in shape)
    layout = {C_CONTIGUOUS | F_CONTIGUOUS: "C/F", C_CONTIGUOUS: "C", F_CONTIGUOUS: "F"}.get(flags, "any layout")
    dtype = np.dtype(dtype)
    if np.dtype(dtype.str).num != dtype.num:      # e.g. int64 as C long long, not long
        return f"{dtype} (type {dtype.char!r})[{dims}] {layout}"
    return f"{dtype}[{dims}] {layout}"


def _describe(obj) -> str:
    if isinstance(obj, types.CodeType):
        return f"<code {obj.co_qualname}>"
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if name is not None:
        return f"<{type(obj).__name__} {name}>"
    return repr(obj) if len(repr(obj)) < 60 else f"<{type(obj).__name__} object>"


def _len_text(value) -> str:
    try:
        return str(len(value))
    except TypeError:
        return f"{type(value).__name__} (no len)"
