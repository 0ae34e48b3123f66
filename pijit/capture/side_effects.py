"""Stores the caller can see: recorded during capture, replayed after the graph.

An attribute store into an object read from a source, a store to a global of the jitted
function's module or to one of its closure cells (`nonlocal`), `list.append` on a list and an
item store into a dict read from a source: capture records each here in program order
instead of breaking the graph, later loads in the same capture see the stored value, and
bytecode_gen/stores.py performs the stores after the graph call (before the residual code of
a break). TorchDynamo's side-effect buffer is the model.

The graph runs before the stores: a node that may raise at run time after a store (in
program order) would let plain Python do the store and pijit not. Such a store is captured
again as a graph break (`SideEffects.unsafe`, `eager`), so it runs where it stands.

Two sources may reach one object at run time. After a store into an attribute, reading the
same attribute of another object guards that the two are distinct objects (a break when
they are one at capture); reading the items of another list or dict read from a source
breaks the graph.
"""
from __future__ import annotations

import types
from dataclasses import dataclass

from pijit.capture.graph_break import GraphBreak, Reason
from pijit.capture.values import (ConstValue, DictValue, FunctionValue, GraphValue,
                                  ListValue, MethodValue, SliceValue, TupleValue, Value)
from pijit.graph.purity import may_raise


@dataclass(eq=False)
class Store:
    """One store. kind: "attr" (target.key = value), "global" (key = value in the module),
    "cell" (free variable `key[1]`, closure index `key[0]`), "append" (target.append(value)),
    "setitem" (target[key] = value). nodes: graph nodes recorded before it; where: (code,
    position) of the instruction, where a retry breaks instead."""
    kind: str
    target: Value | None
    key: object
    value: Value
    nodes: int
    where: tuple
    lineno: int


class SideEffects:
    """The stores of one capture (shared by its inlined frames) and what later loads see."""

    def __init__(self, eager: set):
        self.eager = eager          # (code, position) of stores to leave to residual code
        self.stores: list[Store] = []
        self.finished = False       # capture ended: reports may read lists freely
        self._attrs = {}            # (id of the object's Value, name) -> stored Value
        self._attr_names = {}       # name -> {id: object Value} of the objects stored into
        self.globals = {}           # name -> Value
        self.cells = {}             # closure index -> Value
        self._lists = set()         # ids of the list Values appended to
        self._dicts = set()         # ids of the dict Values stored into

    # -- recording --------------------------------------------------------------------
    def check(self, cap, what: str):
        """Stop where a store cannot be deferred: in a loop node's body (once per iteration),
        or where an earlier capture found a node after it that may raise."""
        if cap.bodies:
            cap.unsupported(Reason.SIDE_EFFECT, f"{what} in a loop node's body")
        if (cap.code, cap.pc) in self.eager:
            cap.unsupported(Reason.SIDE_EFFECT, f"{what} before an operation that may raise")

    def record(self, cap, kind, target, key, value):
        if not replayable(value):
            cap.unsupported(Reason.SIDE_EFFECT, "storing a value that cannot leave the graph")
        self.stores.append(Store(kind, target, key, value, len(cap.graph.nodes),
                                 (cap.code, cap.pc), cap.lineno))

    def store_attr(self, cap, obj, name, value):
        self.record(cap, "attr", obj, name, value)
        self._attrs[(id(obj), name)] = value
        self._attr_names.setdefault(name, {})[id(obj)] = obj

    def append(self, cap, lst, value):
        self.record(cap, "append", lst, None, value)
        self._lists.add(id(lst))

    def store_item(self, cap, dct, key, value):
        self.record(cap, "setitem", dct, key, value)
        self._dicts.add(id(dct))

    # -- loads ------------------------------------------------------------------------
    def attr(self, cap, obj, name):
        """The Value stored into obj.name, or None (read the object's own). The objects
        stored into `name` through other sources are guarded to be other objects; one
        that is this object at capture (two paths to it) breaks."""
        for other in self._attr_names.get(name, {}).values():
            if other is not obj:
                if other.obj is obj.obj:
                    cap.unsupported(Reason.SIDE_EFFECT, f"reads .{name} of an object stored "
                                    "into through another path")
                cap.builder.guard(obj.source, "distinct", other.source)
        return self._attrs.get((id(obj), name))

    def appended(self, lst) -> bool:
        """Whether an append to the list Value lst was recorded (made after the graph)."""
        return id(lst) in self._lists

    def check_list_read(self, lst):
        if self._lists and not self.finished and id(lst) not in self._lists:
            raise GraphBreak(Reason.SIDE_EFFECT, "reads a list that may be one appended to")

    def check_dict_read(self):
        """A dict read from a source after an item store into another may be that one."""
        if self._dicts and not self.finished:
            raise GraphBreak(Reason.SIDE_EFFECT, "reads a dict that may be one stored into")

    # -- breaks and retries -----------------------------------------------------------
    def snapshot(self) -> int:
        return len(self.stores)

    def truncate(self, count: int):
        """Forget the stores recorded past a break point (residual code runs them)."""
        del self.stores[count:]

    def unsafe(self, graph):
        """The first store followed by a graph node that may raise at run time, or None."""
        for store in self.stores:
            if any(may_raise(node, graph) for node in graph.nodes[store.nodes:]):
                return store
        return None


def replayable(value) -> bool:
    """A Value residual code can rebuild (bytecode_gen/reconstruct.py's Emitter)."""
    if value.source is not None or isinstance(value, (ConstValue, GraphValue)):
        return True
    if isinstance(value, (TupleValue, ListValue)):
        return all(replayable(v) for v in value.items)
    if isinstance(value, DictValue):
        return all(replayable(v) for v in value.items.values())
    if isinstance(value, SliceValue):
        return all(replayable(v) for v in (value.start, value.stop, value.step))
    if isinstance(value, MethodValue):
        return replayable(value.obj)
    if isinstance(value, FunctionValue):
        return not value.closure and all(replayable(v) for v in value.defaults)
    return False


def plain_instance_attribute(obj, name) -> bool:
    """obj.name = v stores into obj's __dict__ (see plain_store_check)."""
    return isinstance(getattr(obj, "__dict__", None), dict) and \
        not isinstance(obj, (type, types.ModuleType)) and plain_store_check(name)(type(obj))


_PLAIN_STORE_CHECKS = {}


def plain_store_check(name):
    """cls -> whether `instance.name = v` of cls stores into the instance dict and a later
    `instance.name` reads it back: object's __setattr__ and __getattribute__, and no data
    descriptor (property, slot) of that name. Also the guard on the class (one function per
    name, so that guard is made once per class and name)."""
    check = _PLAIN_STORE_CHECKS.get(name)
    if check is None:
        def check(cls, name=name):
            if cls.__setattr__ is not object.__setattr__ or \
                    cls.__getattribute__ is not object.__getattribute__:
                return False
            for klass in cls.__mro__:
                if name in klass.__dict__:
                    kind = type(klass.__dict__[name])
                    return not (hasattr(kind, "__set__") or hasattr(kind, "__delete__"))
            return True
        check = _PLAIN_STORE_CHECKS[name] = check
    return check
