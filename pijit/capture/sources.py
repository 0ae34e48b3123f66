"""Sources: where a captured value came from, so guards can re-read it and residual code reload it.

A source is read at call time from the function object and its argument slots, in Python
(`read`, used to explain a guard failure) or in C (the guard program, see guards.py).
"""
from __future__ import annotations

from dataclasses import dataclass


class SourceMissing(Exception):
    """The source cannot be read for this call (unbound global, empty cell, missing attribute)."""


@dataclass(frozen=True)
class Source:
    def read(self, func, args):
        raise NotImplementedError

    def name(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class LocalSource(Source):
    """Argument slot `slot` of the frame (3.11 localsplus order), named `local`."""
    slot: int
    local: str

    def read(self, func, args):
        return args[self.slot]

    def name(self) -> str:
        return self.local


@dataclass(frozen=True)
class GlobalSource(Source):
    """A name looked up in the function's globals, then builtins (LOAD_GLOBAL)."""
    global_name: str

    def read(self, func, args):
        try:
            return func.__globals__[self.global_name]
        except KeyError:
            pass
        try:
            return func.__builtins__[self.global_name]
        except (KeyError, TypeError):
            raise SourceMissing(f"global {self.global_name!r} is not defined") from None

    def name(self) -> str:
        return self.global_name


@dataclass(frozen=True)
class CellSource(Source):
    """The contents of closure cell `index` of the function (a free variable)."""
    index: int
    var: str

    def read(self, func, args):
        try:
            return func.__closure__[self.index].cell_contents
        except ValueError:
            raise SourceMissing(f"free variable {self.var!r} is empty") from None

    def name(self) -> str:
        return self.var


@dataclass(frozen=True)
class AttrSource(Source):
    base: Source
    attr: str

    def read(self, func, args):
        obj = self.base.read(func, args)
        try:
            return getattr(obj, self.attr)
        except AttributeError:
            raise SourceMissing(f"{self.name()} does not exist") from None

    def name(self) -> str:
        return f"{self.base.name()}.{self.attr}"


@dataclass(frozen=True)
class ItemSource(Source):
    """Item `index` of a tuple or list source."""
    base: Source
    index: int

    def read(self, func, args):
        seq = self.base.read(func, args)
        if type(seq) not in (tuple, list) or not -len(seq) <= self.index < len(seq):
            raise SourceMissing(f"{self.name()} does not exist")
        return seq[self.index]

    def name(self) -> str:
        return f"{self.base.name()}[{self.index}]"


@dataclass(frozen=True)
class DictItemSource(Source):
    """The value of constant key `key` in a dict source (e.g. `**kwargs`)."""
    base: Source
    key: object

    def read(self, func, args):
        d = self.base.read(func, args)
        if type(d) is not dict or self.key not in d:
            raise SourceMissing(f"{self.name()} does not exist")
        return d[self.key]

    def name(self) -> str:
        return f"{self.base.name()}[{self.key!r}]"


@dataclass(frozen=True)
class ConstSource(Source):
    """An object held by the guard itself (hash_args): its value is re-checked on every call."""
    obj: object
    label: str

    def read(self, func, args):
        return self.obj

    def name(self) -> str:
        return self.label

    def __hash__(self):
        return hash((ConstSource, id(self.obj), self.label))

    def __eq__(self, other):
        return type(other) is ConstSource and other.obj is self.obj and other.label == self.label
