"""Abstract values -> instructions that rebuild them in residual code.

Graph outputs are read from temporaries, objects that came from a source are reloaded from
it (so they keep their identity), constants are loaded, and containers the function built
are rebuilt; one referenced twice is built once, so identity and aliasing survive.
"""
from __future__ import annotations

import collections

from bytecode import FreeVar, Instr

from pijit.bytecode_gen import forms
from pijit.capture.graph_break import GraphBreak, Reason
from pijit.capture.sources import (AttrSource, CellSource, ConstSource, DictItemSource,
                                   GlobalSource, ItemSource, LocalSource)
from pijit.capture.values import (ConstValue, DictValue, FunctionValue, GraphValue,
                                  IteratorValue, ListValue, MethodValue, NullValue, SliceValue,
                                  TruthValue, TupleValue, distinct)

# Names of generated code's own locals; the user's code never has them.
INTERNAL_PREFIX = "__pijit_"
OUT_NAME = INTERNAL_PREFIX + "out{}"
TEMP_NAME = INTERNAL_PREFIX + "tmp{}"


def is_internal(name: str) -> bool:
    return name.startswith(INTERNAL_PREFIX)


def emit_load(source, lineno) -> list:
    """Instructions that push the value of `source` (the residual-code twin of Source.read)."""
    if isinstance(source, LocalSource):
        return [Instr("LOAD_FAST", source.local, lineno=lineno)]
    if isinstance(source, GlobalSource):
        return [Instr("LOAD_GLOBAL", (False, source.global_name), lineno=lineno)]
    if isinstance(source, CellSource):
        return [Instr("LOAD_DEREF", FreeVar(source.var), lineno=lineno)]
    if isinstance(source, AttrSource):
        return emit_load(source.base, lineno) + [forms.load_attr(source.attr, lineno=lineno)]
    if isinstance(source, ItemSource):
        return emit_load(source.base, lineno) + [Instr("LOAD_CONST", source.index, lineno=lineno),
                                                 Instr("BINARY_SUBSCR", lineno=lineno)]
    if isinstance(source, DictItemSource):
        return emit_load(source.base, lineno) + [Instr("LOAD_CONST", source.key, lineno=lineno),
                                                 Instr("BINARY_SUBSCR", lineno=lineno)]
    if isinstance(source, ConstSource):
        return [Instr("LOAD_CONST", source.obj, lineno=lineno)]
    raise TypeError(f"cannot reload {source!r}")


def keep_rebuildable_dead(bp):
    """Drop from a BreakPoint the dead locals residual code cannot rebuild (they are then
    not in the frame, nor passed on as untouched)."""
    lost = set()
    for name, value in list(bp.dead.items()):
        try:
            Emitter(collections.defaultdict(int), None).emit(value)
        except GraphBreak:
            lost.add(name)
            del bp.dead[name]
    bp.untouched = tuple(name for name in bp.untouched if name not in lost)


def graph_outputs(roots) -> dict:
    """{Ref: output index} of the graph values the roots need, in first-use order.
    Graph inputs that have a source are reloaded instead, so they are not outputs."""
    found = {}

    def visit(value):
        if isinstance(value, GraphValue):
            if value.source is None:
                found.setdefault(value.ref, len(found))
        elif value.source is None:
            for item in distinct(_children(value)):
                visit(item)

    for root in roots:
        visit(root)
    return found


def _children(value):
    if isinstance(value, (TupleValue, ListValue)):
        return value.items
    if isinstance(value, DictValue):
        return value.items.values()
    if isinstance(value, SliceValue):
        return (value.start, value.stop, value.step)
    if isinstance(value, MethodValue):
        return (value.obj,)
    if isinstance(value, TruthValue):
        return (value.value,)
    if isinstance(value, IteratorValue):
        if value.origin is not None:
            return (value.origin,)
        if value.call is not None:
            return list(value.call[1]) + list(value.call[2].values())
    if isinstance(value, FunctionValue):
        return list(value.defaults) + ([value.kwdefaults] if value.kwdefaults else [])
    return ()


class Emitter:
    """Emits values for one residual code object, remembering built mutable containers."""

    def __init__(self, out_index: dict, lineno):
        self.out_index = out_index
        self.lineno = lineno
        self.built = {}        # id(value) -> temp name, for the values built once (_once)

    def emit(self, value) -> list:
        at = self.lineno
        if isinstance(value, GraphValue) and value.source is None:
            return [Instr("LOAD_FAST", OUT_NAME.format(self.out_index[value.ref]), lineno=at)]
        if value.source is not None:          # an object passed through: same identity
            return emit_load(value.source, at)
        if isinstance(value, ConstValue):
            return [Instr("LOAD_CONST", value.value, lineno=at)]
        if isinstance(value, NullValue):
            return [Instr("PUSH_NULL", lineno=at)]
        if isinstance(value, TruthValue):
            return self.emit(value.value) + [Instr("TO_BOOL", lineno=at)]
        if self.built.get(id(value)) is not None:
            return self._once(value, [])
        if isinstance(value, TupleValue):
            built = self._items(value.items) + [Instr("BUILD_TUPLE", len(value.items), lineno=at)]
            if value.cls is not None:
                built = forms.call([Instr("LOAD_CONST", value.cls._make, lineno=at)], [built],
                                   lineno=at)
            return self._once(value, built)
        if isinstance(value, SliceValue):
            return self._items([value.start, value.stop, value.step]) + \
                [Instr("BUILD_SLICE", 3, lineno=at)]
        if isinstance(value, MethodValue):      # a bound method: a new object at each load
            return self._once(value, self.emit(value.obj) + [forms.load_attr(value.name,
                                                                             lineno=at)])
        if isinstance(value, (ListValue, DictValue)):
            return self._mutable(value)
        if isinstance(value, FunctionValue) and not value.closure:
            return self._once(value, self._function(value))
        if isinstance(value, IteratorValue) and value.index == 0:
            if value.origin is not None:
                return self._once(value, self.emit(value.origin) + [Instr("GET_ITER",
                                                                          lineno=at)])
            if value.call is not None:
                return self._once(value, self._call(*value.call))
        raise GraphBreak(Reason.UNSUPPORTED_VALUE,
                         f"a {type(value).__name__} cannot be rebuilt in residual code", at)

    def _function(self, value) -> list:
        """MAKE_FUNCTION again (a new function object, as the original code makes)."""
        at, flags, code = self.lineno, 0, []
        if value.defaults:
            code += self._items(value.defaults) + [Instr("BUILD_TUPLE", len(value.defaults),
                                                         lineno=at)]
            flags |= 0x01
        if value.kwdefaults is not None:
            code += self.emit(value.kwdefaults)
            flags |= 0x02
        return code + [Instr("LOAD_CONST", value.code, lineno=at)] + \
            forms.make_function(flags, lineno=at)

    def _call(self, fn, args, kwargs) -> list:
        """Call fn again (zip, enumerate, ...: a fresh iterator, as the original code makes)."""
        at = self.lineno
        return forms.call([Instr("LOAD_CONST", fn, lineno=at)],
                          [self.emit(v) for v in list(args) + list(kwargs.values())],
                          tuple(kwargs), lineno=at)

    def _items(self, items) -> list:
        return [i for v in items for i in self.emit(v)]

    def _mutable(self, value) -> list:
        at = self.lineno
        if isinstance(value, ListValue):
            code = self._items(value.items) + [Instr("BUILD_LIST", len(value.items), lineno=at)]
        else:
            code = []
            for key, item in value.items.items():
                code.append(Instr("LOAD_CONST", key, lineno=at))
                code += self.emit(item)
            code.append(Instr("BUILD_MAP", len(value.items), lineno=at))
        return self._once(value, code)

    def _once(self, value, code) -> list:
        """`code` building `value` the first time (kept in a temporary), a load of that
        temporary after: a list, dict, tuple, function, bound method or iterator referenced
        twice (`it = iter(a)` on the stack as next's argument and in a local; `g = f` of a
        lambda) is one object, as in plain Python."""
        at = self.lineno
        temp = self.built.get(id(value))
        if temp is not None:
            return [Instr("LOAD_FAST", temp, lineno=at)]
        temp = TEMP_NAME.format(len(self.built))
        self.built[id(value)] = temp
        return code + [Instr("COPY", 1, lineno=at), Instr("STORE_FAST", temp, lineno=at)]
