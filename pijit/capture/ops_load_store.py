"""Handlers for loads and stores: fast locals, constants, globals, closure cells, attributes.

Stores the caller can see (attributes, globals, the jitted function's closure cells) are
recorded in the capture's SideEffects and replayed after the graph; loads see them first.
"""
from __future__ import annotations

import builtins
import dataclasses
import sys
import types

import numpy as np

from pijit import _compat
from pijit.capture import call_table, numpy_rules
from pijit.capture.graph_break import GraphBreak, Reason
from pijit.capture.ops_stack import push_with_null
from pijit.capture.inline import inline_call
from pijit.capture.registry import handler
from pijit.capture.side_effects import plain_instance_attribute, plain_store_check
from pijit.capture.sources import AttrSource, ConstSource, GlobalSource, ItemSource
from pijit.capture.values import (NULL, BoundValue, CellRef, ConstValue, FunctionValue,
                                  GraphValue, MethodValue, NullValue, SuperValue, TupleValue,
                                  is_immutable, describe)
from pijit.capture.wrap import MISSING, ObjectValue, class_attribute
from pijit.graph.ir import Meta
from pijit.graph.purity import is_inplace

# Library modules whose attributes are constants of the graph (a ufunc, np.float32, math.pi),
# each guarded by identity where the module has a source: a test that monkeypatches np.sin
# or math.sqrt between calls must not run the old one (the C guard reads it from the
# module's dict, cached while the dict keeps its version).
TRUSTED_MODULES = ("numpy", "math", "builtins", "operator")

# Attributes of an array that are known from its Meta.
STATIC_ATTRS = frozenset({"shape", "ndim", "dtype", "size", "itemsize", "nbytes"})

# What a deleted local holds until it is stored again (`del x`).
DELETED = object()


@handler("LOAD_FAST", "LOAD_FAST_CHECK")
def LOAD_FAST(cap, instr):
    name = instr.arg
    if not isinstance(name, str) or name in cap.code.co_cellvars:
        LOAD_CLOSURE(cap, instr)            # 3.13: the cell, for a closure
        return
    cap.push(load_local(cap, name))


@handler("LOAD_FAST_AND_CLEAR")
def LOAD_FAST_AND_CLEAR(cap, instr):
    """3.12+: an inlined comprehension saves a local it reuses (NULL when unbound); the
    STORE_FAST after it restores it."""
    name = instr.arg
    if not isinstance(name, str) or name in cap.code.co_cellvars:
        cap.unsupported(Reason.CLOSURE_CREATION, f"comprehension variable {name} in a closure")
    value = cap.locals.get(name)
    if value is None and cap.parent is None and \
            name in cap.code.co_varnames[:len(cap.builder.args)]:
        value = load_local(cap, name)
    cap.push(NULL if value is None or value is DELETED else value)
    cap.locals[name] = DELETED


@handler("STORE_FAST")
def STORE_FAST(cap, instr):
    cap.store(instr.arg, cap.pop())


@handler("DELETE_FAST")
def DELETE_FAST(cap, instr):
    load_local(cap, instr.arg)          # plain Python raises UnboundLocalError first
    if cap.bodies:
        cap.unsupported(Reason.CONTROL_FLOW, f"`del {instr.arg}` in a loop node's body")
    cap.locals[instr.arg] = DELETED


@handler("LOAD_CONST")
def LOAD_CONST(cap, instr):
    cap.push(ConstValue(instr.arg))


@handler("LOAD_GLOBAL")
def LOAD_GLOBAL(cap, instr):
    push_null, name = instr.arg
    value = _global(cap, name)
    if push_null:
        push_with_null(cap, value)
    else:
        cap.push(value)


def _global(cap, name):
    globs = cap.func.__globals__
    if globs is _top(cap).func.__globals__ and name in cap.effects.globals:
        return cap.effects.globals[name]
    if name in globs:
        return cap.builder.wrap(globs[name], cap.global_source(name))
    # The builtins LOAD_GLOBAL reads are the function's own (its globals' __builtins__, as
    # exec(code, {"__builtins__": {...}}) gives), which the guard reads in the frame.
    own = cap.func.__builtins__
    if type(own) is not dict or own is not _top(cap).func.__builtins__:
        cap.unsupported(Reason.UNSUPPORTED_VALUE,
                        f"builtin {name!r} read from builtins other than the jitted function's")
    if name not in own:
        cap.unsupported(Reason.UNSUPPORTED_VALUE, f"global {name!r} is not defined")
    source = GlobalSource(name)
    if cap.global_source(name) != source:
        # A builtin seen from an inlined callee of another module: it stays a builtin only
        # while that module does not define the name.
        cap.builder.guard(cap.global_source(name).base, "call",
                          lambda g, name=name: name not in g, f"no global {name!r} in")
    return cap.builder.wrap(own[name], source)


@handler("STORE_GLOBAL")
def STORE_GLOBAL(cap, instr):
    """A global of the jitted function's module: recorded, replayed after the graph."""
    name = instr.arg
    effects = cap.effects
    effects.check(cap, f"global store to {name!r}")
    if cap.func.__globals__ is not _top(cap).func.__globals__:
        cap.unsupported(Reason.SIDE_EFFECT, f"global store to {name!r} in another module")
    value = cap.pop()
    effects.record(cap, "global", None, name, value)
    effects.globals[name] = value


def _top(cap):
    while cap.parent is not None:
        cap = cap.parent
    return cap


@handler("LOAD_DEREF")
def LOAD_DEREF(cap, instr):
    name = instr.arg.name
    code = cap.code
    if name not in code.co_freevars:
        cap.push(load_local(cap, name))     # a cell variable of this frame
        return
    index = code.co_freevars.index(name)
    if cap.closure is not None:             # a function made during capture
        ref = cap.closure[index]
        cap.push(load_local(ref.frame, ref.name))
        return
    if cap.parent is None and index in cap.effects.cells:
        cap.push(cap.effects.cells[index])
        return
    if cap.parent is not None and cap.effects.cells:
        cap.unsupported(Reason.SIDE_EFFECT, f"reads free variable {name!r}, which may be a "
                        "cell stored into")
    cell = cap.func.__closure__[index]
    try:
        obj = cell.cell_contents
    except ValueError:
        cap.unsupported(Reason.UNSUPPORTED_VALUE, f"free variable {name!r} is empty")
    cap.push(cap.builder.wrap(obj, cap.cell_source(index, name)))


@handler("STORE_DEREF")
def STORE_DEREF(cap, instr):
    name = instr.arg.name
    if cap.bodies:          # cells are not loop-carried values (liveness sees fast locals)
        cap.unsupported(Reason.SIDE_EFFECT, f"store to the cell variable {name!r} in a loop")
    if name in cap.code.co_freevars:
        if cap.closure is None:
            _store_cell(cap, name)
            return
        ref = cap.closure[cap.code.co_freevars.index(name)]
        ref.frame.locals[ref.name] = cap.pop()
        return
    cap.locals[name] = cap.pop()


def _store_cell(cap, name):
    """`nonlocal name; name = v` in the jitted function: recorded, replayed after the graph
    (an inlined function's cells are reached through its source: that store breaks)."""
    effects = cap.effects
    effects.check(cap, f"nonlocal store to {name!r}")
    if cap.parent is not None:
        cap.unsupported(Reason.SIDE_EFFECT, f"nonlocal store to {name!r} in an inlined call")
    index = cap.code.co_freevars.index(name)
    value = cap.pop()
    effects.record(cap, "cell", None, (index, name), value)
    effects.cells[index] = value


@handler("STORE_ATTR")
def STORE_ATTR(cap, instr):
    """obj.name = value on an object read from a source whose class stores it in the
    instance dict (guarded): recorded, replayed after the graph."""
    name = instr.arg
    obj, value = cap.pop(), cap.pop()
    effects = cap.effects
    effects.check(cap, f"store to attribute {name!r}")
    if not isinstance(obj, ObjectValue) or not plain_instance_attribute(obj.obj, name):
        cap.unsupported(Reason.SIDE_EFFECT, f"store to attribute {name!r} of a {describe(obj)}")
    cap.builder.guard(AttrSource(obj.source, "__class__"), "call", plain_store_check(name),
                      f"plain store of .{name} into instances of")
    if not _stores_back(cap, obj, name, value):
        effects.store_attr(cap, obj, name, value)


def _stores_back(cap, obj, name, value) -> bool:
    """True when `obj.name = value` stores back the array obj.name held when the call began,
    after in-place operators updated it (`self.w -= g` ends with a store of self.w itself):
    plain Python's store changes nothing then, and a replay would store the graph's output
    for the in-place node, which need not be that very object."""
    if cap.effects.attr(cap, obj, name) is not None:
        return False                    # stored before in this capture: not the input's
    current = cap.builder.cached(AttrSource(obj.source, name))
    if not isinstance(value, GraphValue) or not isinstance(current, GraphValue):
        return False
    ref = value.ref
    while ref != current.ref:
        node = next((n for n in reversed(cap.graph.nodes) if n.out == ref.index), None)
        if node is None or not is_inplace(node):
            return False
        ref = node.args[0]
    return True


@handler("IMPORT_NAME")
def IMPORT_NAME(cap, instr):
    """`import m` / `from m import x` of a module already imported: no side effect left."""
    fromlist, level = cap.pop(), cap.pop()
    name = instr.arg
    module = sys.modules.get(name)
    if module is None or not isinstance(level, ConstValue) or level.value != 0 or \
            _builtins_dict(cap.func).get("__import__") is not _ORIGINAL_IMPORT:
        cap.unsupported(Reason.SIDE_EFFECT, f"import {name}")
    if not (isinstance(fromlist, ConstValue) and fromlist.value):
        module = sys.modules[name.partition(".")[0]]    # `import a.b` binds the top package
    # A source, so that the module's attributes are read guarded (a setting of the module
    # may change between calls) as they are through a global naming the module.
    cap.push(ConstValue(module, source=ConstSource(module, module.__name__)))


@handler("IMPORT_FROM")
def IMPORT_FROM(cap, instr):
    module = cap.stack[-1]
    cap.push(_const_attr(cap, module, instr.arg))


_ORIGINAL_IMPORT = builtins.__import__


def _builtins_dict(func) -> dict:
    """The builtins IMPORT_NAME finds __import__ in: the function's, when a dict."""
    own = func.__builtins__
    return own if type(own) is dict else {}


@handler("LOAD_CLOSURE")
def LOAD_CLOSURE(cap, instr):
    name = getattr(instr.arg, "name", instr.arg)       # 3.13's LOAD_FAST of an argument cell
    if name in cap.code.co_freevars:        # passing one of our own free variables on
        if cap.closure is None:
            cap.unsupported(Reason.CLOSURE_CREATION, f"closure over free variable {name!r}")
        cap.push(cap.closure[cap.code.co_freevars.index(name)])
        return
    cap.push(CellRef(cap, name))


@handler("MAKE_FUNCTION")
def MAKE_FUNCTION(cap, instr):
    """A function of the code on top; 3.11 and 3.12 pop the attributes its flags name
    (closure first), 3.13 sets each with SET_FUNCTION_ATTRIBUTE."""
    code = cap.pop()
    if not isinstance(code, ConstValue):
        cap.unsupported(Reason.CLOSURE_CREATION, "MAKE_FUNCTION of an unknown code object")
    fn = FunctionValue(code.value)
    if _compat.BYTECODE.make_function_flags:
        for flag in (0x08, 0x04, 0x02, 0x01):
            if instr.arg & flag:
                fn = _with_attribute(cap, fn, flag, cap.pop())
    cap.push(fn)


@handler("SET_FUNCTION_ATTRIBUTE")
def SET_FUNCTION_ATTRIBUTE(cap, instr):
    fn = cap.pop()
    cap.push(_with_attribute(cap, fn, instr.arg, cap.pop()))


def _with_attribute(cap, fn: FunctionValue, flag: int, value) -> FunctionValue:
    """fn with the defaults (0x01), kwdefaults (0x02), annotations (0x04, no effect on
    calls) or closure (0x08) `value`."""
    if flag == 0x08:
        closure = tuple(sequence_of(cap, value))
        if any(not isinstance(c, CellRef) for c in closure):
            cap.unsupported(Reason.CLOSURE_CREATION, "a closure of unknown cells")
        return dataclasses.replace(fn, closure=closure)
    if flag == 0x02:
        return dataclasses.replace(fn, kwdefaults=value)
    if flag == 0x01:
        return dataclasses.replace(fn, defaults=tuple(sequence_of(cap, value)))
    return fn


def sequence_of(cap, value):
    if isinstance(value, TupleValue):
        return value.items
    if isinstance(value, ConstValue) and type(value.value) is tuple:
        return [ConstValue(v) for v in value.value]
    cap.unsupported(Reason.CLOSURE_CREATION, "function defaults or closure not known")


@handler("LOAD_ATTR")
def LOAD_ATTR(cap, instr):
    method, name = instr.arg if _compat.BYTECODE.attr_pair else (False, instr.arg)
    push_attr(cap, cap.pop(), name, method)


@handler("LOAD_METHOD")
def LOAD_METHOD(cap, instr):
    push_attr(cap, cap.pop(), instr.arg, method=True)


def push_attr(cap, obj, name, method):
    """Push obj.name; a method load (3.11's LOAD_METHOD, LOAD_ATTR's method bit) pushes
    [method, self] or the attribute and a NULL. Capture always simulates the second form:
    the call handler sees the same callable and arguments either way."""
    value = load_attr(cap, obj, name, method=method)
    if method:
        push_with_null(cap, value)
    else:
        cap.push(value)


def load_local(cap, name):
    value = cap.locals.get(name)
    if value is not None and value is not DELETED:
        return value
    code = cap.code
    nargs = len(cap.builder.args)
    if value is None and cap.parent is None and name in code.co_varnames[:nargs]:
        value = cap.builder.argument(code.co_varnames.index(name), name)
        cap.locals[name] = value
        return value
    cap.unsupported(Reason.UNSUPPORTED_VALUE, f"local {name!r} is unbound here")


def load_attr(cap, obj, name, method):
    if isinstance(obj, ConstValue):
        return _const_attr(cap, obj, name)
    if isinstance(obj, GraphValue):
        if name in STATIC_ATTRS:
            return _static_attr(cap, obj, name)
        rule = numpy_rules.lookup_attr(obj.meta, name)
        if rule is not None:
            return cap.add_op(rule, (obj,), {})
        if numpy_rules.lookup_method(obj.meta, name) is not None or (
                name in call_table.PURE_ARRAY_METHODS and not obj.meta.is_pyscalar):
            return MethodValue(obj, name)
        cap.unsupported(Reason.UNSUPPORTED_OP, f"attribute {name!r} of {obj.meta}")
    if isinstance(obj, SuperValue):
        return super_attr(cap, obj, name)
    if isinstance(obj, ObjectValue):
        stored = cap.effects.attr(cap, obj, name)
        if stored is not None:
            return stored
        prop = cap.builder.property_getter(obj, name)
        if prop is not None:            # a property with a Python getter: inlined
            fget, source = prop
            return inline_call(cap, fget, source, [obj], {})
        return cap.builder.attribute(obj, name)
    if isinstance(obj, TupleValue) and obj.cls is not None and name in obj.cls._fields:
        return obj.items[obj.cls._fields.index(name)]       # a namedtuple's field
    if method:
        return MethodValue(obj, name)
    cap.unsupported(Reason.UNSUPPORTED_VALUE, f"attribute {name!r} of a {describe(obj)}")


def super_attr(cap, sup: SuperValue, name):
    """`super().name`: a function defined on a class after sup.cls in the object's MRO,
    bound to the object (the function guarded through the MRO tuple of the guarded class)."""
    cls, obj = sup.cls.value, sup.obj.obj
    mro = type(obj).__mro__
    for k in range(mro.index(cls) + 1, len(mro)):
        if name in mro[k].__dict__:
            attr = mro[k].__dict__[name]
            if not isinstance(attr, types.FunctionType):
                break
            source = AttrSource(ItemSource(AttrSource(AttrSource(sup.obj.source, "__class__"),
                                                      "__mro__"), k), name)
            return BoundValue(cap.builder.wrap(attr, source), sup.obj)
    cap.unsupported(Reason.UNSUPPORTED_CALL, f"super().{name}")


def _const_attr(cap, obj, name):
    value = obj.value
    if isinstance(value, types.ModuleType):
        if value.__dict__ is _top(cap).func.__globals__ and name in cap.effects.globals:
            return cap.effects.globals[name]      # this module's global, stored before
        try:
            attr = getattr(value, name)
        except AttributeError:
            cap.unsupported(Reason.UNSUPPORTED_VALUE, f"module {value.__name__} has no {name!r}")
        if value.__name__.split(".")[0] in TRUSTED_MODULES or obj.source is None:
            if isinstance(attr, types.ModuleType) or is_immutable(attr) or callable(attr):
                if obj.source is not None:
                    cap.builder.guard(AttrSource(obj.source, name), "id", attr)
                return ConstValue(attr)
        if obj.source is None:
            cap.unsupported(Reason.UNSUPPORTED_VALUE, f"{value.__name__}.{name}")
        return cap.builder.wrap(attr, AttrSource(obj.source, name))
    if isinstance(value, type) and value.__module__ not in ("builtins", "numpy") and \
            obj.source is not None:
        return _class_attr(cap, obj, name)
    if isinstance(value, types.FunctionType) and obj.source is not None:
        # a function is guarded by identity, but its attributes (`f.calls = ...`, a counter
        # or a setting hung on a function) may change between calls: read them guarded
        return _function_attr(cap, obj, name)
    if is_immutable(value) and type(value).__module__ in ("builtins", "numpy") or \
            isinstance(value, np.dtype):
        try:
            attr = getattr(value, name)
        except AttributeError:
            cap.unsupported(Reason.UNSUPPORTED_VALUE, f"{type(value).__name__} has no {name!r}")
        if callable(attr):
            return MethodValue(obj, name)
        if is_immutable(attr):
            return ConstValue(attr)
    cap.unsupported(Reason.UNSUPPORTED_VALUE, f"attribute {name!r} of {type(value).__name__}")


def _function_attr(cap, obj, name):
    try:
        attr = getattr(obj.value, name)
    except AttributeError:
        cap.unsupported(Reason.UNSUPPORTED_VALUE,
                        f"function {obj.value.__qualname__} has no {name!r}")
    return cap.builder.wrap(attr, AttrSource(obj.source, name))


def _class_attr(cap, obj, name):
    """`Cls.name` of a user class: functions, staticmethods and data attributes are read
    (and guarded); other descriptors are left to residual code."""
    attr = class_attribute(obj.value, name)
    if isinstance(attr, staticmethod):
        attr = attr.__func__
    if attr is not MISSING and (isinstance(attr, types.FunctionType) or
                                not hasattr(type(attr), "__get__")):
        return cap.builder.wrap(attr, AttrSource(obj.source, name))
    return MethodValue(obj, name)


def _static_attr(cap, value: GraphValue, name):
    """shape/ndim/dtype/... of a graph value; dynamic dims become graph scalars."""
    meta = value.meta
    if name == "shape" and None in meta.shape:
        return TupleValue([ConstValue(d) if d is not None else shape_dim_value(cap, value, i)
                           for i, d in enumerate(meta.shape)])
    if name in ("size", "nbytes") and None in meta.shape:
        cap.unsupported(Reason.UNSUPPORTED_OP, f".{name} of an array with dynamic shape")
    try:
        return ConstValue(numpy_rules.static_attr(meta, name))
    except numpy_rules.Unsupported as e:
        raise GraphBreak(Reason.UNSUPPORTED_OP, f".{name}: {e}") from None


def shape_dim_value(cap, value, axis):
    """`value.shape[axis]` of a dynamic dimension, as a graph scalar."""
    ref = cap.graph.add_node("dim", _shape_dim, (value.ref, axis), {},
                             Meta(int, np.dtype(int), ()), cap.lineno)
    return GraphValue(ref, Meta(int, np.dtype(int), ()))


def _shape_dim(a, axis):
    return a.shape[axis]

