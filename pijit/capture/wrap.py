"""Real objects read from a source -> abstract values, recording the guards they rely on.

Arrays become graph inputs guarded by dtype, shape and layout (never by id); Python scalars
are constants guarded by value (or typed graph inputs when `specialize_scalar` is off);
modules and functions are constants guarded by identity; tuples and lists are unpacked item
by item; other objects are opaque and guarded by type.
"""
from __future__ import annotations

import types

import numpy as np

from pijit.capture.graph_break import GraphBreak, Reason
from pijit.capture.sources import AttrSource, DictItemSource, ItemSource, LocalSource, Source
from pijit.capture.values import (ConstValue, DictValue, GraphValue, ListValue, MethodValue,
                                  TupleValue, Value)
from pijit.graph.ir import PY_SCALARS, Meta
from pijit.guards import Guard, layout_flags
from pijit.loopnest.appends import LIST_META

# dtype kinds the graph can carry: bool, signed, unsigned, float, complex.
SUPPORTED_DTYPE_KINDS = "biufc"

# In a source's set of dynamic dims: the value of the Python scalar itself is dynamic (a
# typed graph input instead of a constant), after it changed between calls.
DYNAMIC_VALUE = -1

# Callables and types guarded by identity and used as constants.
IDENTITY_TYPES = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                  types.MethodDescriptorType, types.WrapperDescriptorType, np.ufunc, type,
                  type(None), type(Ellipsis), type(NotImplemented))


def fits_int64(value: int) -> bool:
    """Whether a Python int can be a graph value, which is an int64: NumPy makes one past
    that range a uint64 or object array, or raises OverflowError with an int64 array."""
    return -2 ** 63 <= value < 2 ** 63


class ObjectValue(Value):
    """An opaque object (e.g. `self`) guarded by type: its attributes may be read, nothing else."""

    def __init__(self, obj, source):
        super().__init__(source=source)
        self.obj = obj


class LazyListValue(ListValue):
    """A list read from a source, whose items are wrapped (and guarded) on first use. Reading
    them after an append to another list may read that one (side_effects.py)."""

    def __init__(self, load, source, effects):
        Value.__init__(self, source=source)
        self._load = load
        self._items = None
        self._appended = []
        self._effects = effects

    @property
    def items(self):
        self._effects.check_list_read(self)
        if self._items is None:
            self._items = self._load() + self._appended
        return self._items

    def append(self, value):
        """list.append(value) during capture: the items already there are read (and their
        length guarded) only if something reads them."""
        if self._items is None:
            self._appended.append(value)
        else:
            self._items.append(value)


class DynamicListValue(LazyListValue):
    """A list read from a source whose length changed between calls (or longer than
    MAX_LOOP_UNROLLING): neither its length nor its items are guarded, and reading its
    items breaks the graph. Handed to NumPy,
    it may be a graph input of its own (dynamic_lists.py). obj: the list of the call
    being captured."""

    def __init__(self, obj: list, source, effects):
        super().__init__(_varied_length, source, effects)
        self.obj = obj


def _varied_length():
    raise GraphBreak(Reason.UNSUPPORTED_VALUE, "reads a list whose length changes between calls "
                     "(or longer than MAX_LOOP_UNROLLING): its items are not guarded")


class ValueBuilder:
    """Wraps objects read during capture; one graph input per source, guards deduplicated."""

    def __init__(self, graph, config, func, args, dynamic_dims, effects, budget=None):
        self.graph = graph          # not the FrameCapture: no reference cycle keeps args alive
        self.effects = effects      # the capture's stores: containers read after one
        self.config = config
        self.func = func
        self.args = args
        self.dynamic_dims = dynamic_dims     # Source -> set of dims to treat as dynamic
        self.guards: list[Guard] = []
        self._guard_keys = set()
        self.input_sources: list[Source] = []
        self._by_source: dict[Source, Value] = {}
        self._lists: dict[Source, GraphValue] = {}     # dynamic lists as graph inputs
        self.budget = budget        # interpreter.PureBudget: a read counts like a step

    def guard(self, source: Source, kind: str, *params):
        g = Guard(source, kind, params)
        key = g.key()
        if key not in self._guard_keys:
            self._guard_keys.add(key)
            self.guards.append(g)

    def wrap(self, obj, source: Source) -> Value:
        """The abstract value of `obj`, read from `source` (cached: a source wraps once)."""
        cached = self._by_source.get(source)
        if cached is None:
            if self.budget is not None:
                self.budget.spent += 1
            cached = self._wrap(obj, source)
            self._by_source[source] = cached
        return cached

    def _wrap(self, obj, source: Source) -> Value:
        t = type(obj)
        if t is np.ndarray:
            return self._wrap_array(obj, source)
        if t in PY_SCALARS:
            if self.pins_value(obj, source):
                self.guard(source, "eq", obj)
                return ConstValue(obj, source=source)
            self.guard(source, "type", t)
            if t is int:
                self.guard(source, "call", fits_int64, "-2**63 <= value < 2**63")
            return self._input(Meta.of(obj), source)
        if isinstance(obj, np.generic) and obj.dtype.kind in SUPPORTED_DTYPE_KINDS:
            # Like a 0-d array: a graph input guarded by type (so by dtype), not by value,
            # since NumPy scalars usually come from reductions and change every call.
            self.guard(source, "type", t)
            return self._input(Meta.of(obj), source)
        if t in (str, bytes) or isinstance(obj, np.dtype):
            self.guard(source, "eq", obj)
            return ConstValue(obj, source=source)
        if isinstance(obj, IDENTITY_TYPES):
            self.guard(source, "id", obj)
            return ConstValue(obj, source=source)
        if t in (tuple, list) and len(obj) > self.config.MAX_LOOP_UNROLLING:
            # Too long to unroll a loop over: its items would be wrapped and guarded one by
            # one for nothing (quicksort's 3000-item list: 12k guards, 1.1 s of capture),
            # and a new value in any item would capture again. Opaque: reading its items
            # breaks the graph, and residual code reloads it; a list is read as one whose
            # length changes between calls (its uses by NumPy stay in the graph).
            self.guard(source, "type", t)
            if t is list:
                return DynamicListValue(obj, source, self.effects)
            return ObjectValue(obj, source)
        if t is tuple:
            self.guard(source, "type", t)
            self.guard(source, "len", len(obj))
            return TupleValue([self.wrap(item, ItemSource(source, i))
                               for i, item in enumerate(obj)], source=source)
        if t is list and DYNAMIC_VALUE in self.dynamic_dims.get(source, ()):
            # Its length changed between calls (collected indices, values): guarding it
            # would capture an entry per length. Appends to it are still captured, and
            # its uses by NumPy (dynamic_lists.py); reading its items breaks the graph
            # there, and the rest is captured once.
            self.guard(source, "type", t)
            return DynamicListValue(obj, source, self.effects)
        if t is list:
            # A list's length and items are guarded only once capture reads them: a list the
            # function only appends to (a side effect, residual code) may grow between calls.
            self.guard(source, "type", t)
            return LazyListValue(lambda: self._list_items(obj, source), source, self.effects)
        if t is dict and all(type(k) is str for k in obj):
            self.effects.check_dict_read()
            keys = tuple(obj)
            self.guard(source, "call", lambda d, keys=keys: type(d) is dict and tuple(d) == keys,
                       f"dict keys {list(keys)!r}")
            return DictValue({k: self.wrap(v, DictItemSource(source, k)) for k, v in obj.items()},
                             source=source)
        # Anything else is opaque: it can be passed to residual code (reloaded from its
        # source), and using it in a way capture does not know breaks the graph there.
        self.guard(source, "type", t)
        return ObjectValue(obj, source)

    def _list_items(self, obj: list, source: Source) -> list:
        self.guard(source, "len", len(obj))
        return [self.wrap(item, ItemSource(source, i)) for i, item in enumerate(obj)]

    def _wrap_array(self, obj: np.ndarray, source: Source) -> Value:
        if obj.dtype.kind not in SUPPORTED_DTYPE_KINDS or not obj.dtype.isnative:
            self.guard(source, "type", np.ndarray)
            return ObjectValue(obj, source)
        dynamic = self.dynamic_dims.get(source, ())
        shape = tuple(None if i in dynamic else d for i, d in enumerate(obj.shape))
        self.guard(source, "array", obj.dtype, shape, layout_flags(obj))
        return self._input(Meta.array(shape, obj.dtype), source)

    def _input(self, meta: Meta, source: Source) -> GraphValue:
        self.input_sources.append(source)
        ref = self.graph.add_input(meta, source.name())
        return GraphValue(ref, meta, source=source)

    def list_input(self, source: Source) -> GraphValue:
        """The list read from source as a graph input (one per source), which nodes may
        read: its type is guarded already."""
        value = self._lists.get(source)
        if value is None:
            value = self._lists[source] = self._input(LIST_META, source)
        return value

    def cached(self, source: Source):
        """The Value `source` was wrapped as, or None when it was not read."""
        return self._by_source.get(source)

    def wrapped(self):
        """The Values of every source read so far."""
        return self._by_source.values()

    # -- reads that create sources -------------------------------------------------------
    def pins_value(self, obj, source: Source) -> bool:
        """Whether wrapping the Python scalar obj read from source guards its value (a
        ConstValue): bools and ints past int64 always, other ints and floats under
        specialize_scalar unless the source was made dynamic."""
        dynamic = DYNAMIC_VALUE in self.dynamic_dims.get(source, ())
        return type(obj) is bool or (type(obj) is int and not fits_int64(obj)) or (
            self.config.specialize_scalar and not dynamic)

    def argument(self, slot: int, name: str) -> Value:
        return self.wrap(self.args[slot], LocalSource(slot, name))

    def attribute(self, obj_value: ObjectValue, name: str) -> Value:
        """`obj.name` for an opaque object. Plain data attributes are read now (and guarded);
        anything else (methods, properties, missing names) stays a deferred attribute
        access that residual code performs."""
        obj = obj_value.obj
        inst = getattr(obj, "__dict__", None)
        cls_attr = class_attribute(type(obj), name)
        # a data descriptor of the class (a slot, a validating field) wins over the instance
        # dict, even one holding the same name
        data = hasattr(type(cls_attr), "__set__") or hasattr(type(cls_attr), "__delete__")
        if isinstance(inst, dict) and name in inst and not data and \
                type(obj).__getattribute__ is object.__getattribute__:
            value = inst[name]
        else:
            if cls_attr is MISSING or hasattr(type(cls_attr), "__get__") or \
                    type(obj).__getattribute__ is not object.__getattribute__:
                return MethodValue(obj_value, name)
            value = cls_attr
        return self.wrap(value, AttrSource(obj_value.source, name))

    def property_getter(self, obj_value: ObjectValue, name: str):
        """(fget, its source) when `obj.name` is a property with a Python getter, the class
        attribute guarded by identity; else None."""
        obj = obj_value.obj
        prop = class_attribute(type(obj), name)
        if type(prop) is not property or not isinstance(prop.fget, types.FunctionType) or \
                type(obj).__getattribute__ is not object.__getattribute__:
            return None
        source = AttrSource(AttrSource(obj_value.source, "__class__"), name)
        self.guard(source, "id", prop)
        return prop.fget, AttrSource(source, "fget")


MISSING = object()


def class_attribute(cls, name):
    """The raw attribute `name` found along cls's MRO (descriptors not applied), or MISSING."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return MISSING
