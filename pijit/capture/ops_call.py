"""Handlers for calls (PUSH_NULL, KW_NAMES, PRECALL, CALL, CALL_KW, CALL_FUNCTION_EX,
LOAD_SUPER_ATTR) and the call dispatch: NumPy calls become nodes, pure calls on constants are
folded, the rest stop capture.
"""
from __future__ import annotations

import functools
import inspect
import math
import operator
import sys
import types

import numpy as np

from pijit import _compat, eval_frame
from pijit.capture import call_table, dynamic_lists, numpy_rules
from pijit.capture.generators import container_call
from pijit.capture.graph_break import GraphBreak, Reason
from pijit.capture.inline import inline_call, inline_made, is_library
from pijit.capture.ops_arith import apply_operator, fold, py_int
from pijit.capture.ops_build import dict_get, own_list, sequence_items
from pijit.capture.registry import handler
from pijit.capture.sources import AttrSource
from pijit.capture.ops_load_store import load_local, push_attr, shape_dim_value
from pijit.capture.loop_node import symbolic_range
from pijit.capture.moments import var_or_std
from pijit.capture.opaque import opaque_call
from pijit.capture.ops_loop import iterator_call
from pijit.capture.values import (NULL, BoundValue, ConstValue, DictValue, FunctionValue,
                                  GraphValue, ListValue, SuperValue,
                                  MethodValue, NullValue, TupleValue, contains_graph_value, describe)
from pijit.capture.wrap import LazyListValue, ObjectValue, class_attribute
from pijit.capture.writes import ufunc_at
from pijit.graph.ir import Meta
from pijit.loopnest import appends
from pijit.quiet import warnings_as

# Builtins that are pure functions of their (constant) arguments.
PURE_BUILTINS = frozenset({abs, min, max, len, int, float, bool, complex, round, divmod, pow,
                           isinstance, issubclass, tuple, list, str, sum, range, type, hash,
                           all, any, repr, slice, sorted})
# Scalar conversions captured as graph nodes on scalar graph values.
SCALAR_CONVERSIONS = {float: float, int: int, bool: bool, complex: complex}
# Immutable types whose methods are pure (e.g. "{}".format, (1, 2).index).
PURE_METHOD_TYPES = (str, bytes, tuple, int, float, complex, bool, np.dtype, np.generic)


@handler("PUSH_NULL")
def PUSH_NULL(cap, instr):
    cap.push(NULL)


@handler("KW_NAMES")
def KW_NAMES(cap, instr):
    cap.kw_names = instr.arg


@handler("PRECALL")
def PRECALL(cap, instr):
    """3.11 splits a call in PRECALL + CALL; the call happens at CALL."""


@handler("CALL")
def CALL(cap, instr):
    args = cap.popn(instr.arg)
    fn, self_arg = pop_callable(cap)
    if self_arg is not None:
        args = [self_arg] + args
    kw_names, cap.kw_names = cap.kw_names, ()
    nkw = len(kw_names)
    kwargs = dict(zip(kw_names, args[len(args) - nkw:])) if nkw else {}
    positional = args[:len(args) - nkw]
    cap.push(call_value(cap, fn, positional, kwargs))


@handler("CALL_KW")
def CALL_KW(cap, instr):
    """3.13: a call whose keyword names (a constant tuple) are pushed last."""
    cap.kw_names = cap.pop().value
    CALL(cap, instr)


def pop_callable(cap) -> tuple:
    """Pop what a call's arguments sit on: (callable, None) from the NULL form, on the side
    this version puts the NULL (pijit._compat.BYTECODE.null_first), or (method, self)."""
    second, first = cap.pop(), cap.pop()
    null, fn = (first, second) if _compat.BYTECODE.null_first else (second, first)
    if isinstance(null, NullValue):
        return fn, None
    return first, second


@handler("CALL_FUNCTION_EX")
def CALL_FUNCTION_EX(cap, instr):
    kwargs = cap.pop() if instr.arg & 0x01 else DictValue({})
    star = cap.pop()
    fn, self_arg = pop_callable(cap)
    if self_arg is not None:
        cap.unsupported(Reason.UNSUPPORTED_OPCODE, "CALL_FUNCTION_EX without NULL")
    if not isinstance(kwargs, DictValue):
        cap.unsupported(Reason.UNSUPPORTED_VALUE, "** of something that is not a known dict")
    cap.push(call_value(cap, fn, sequence_items(cap, star), dict(kwargs.items)))


@handler("LOAD_SUPER_ATTR")
def LOAD_SUPER_ATTR(cap, instr):
    """3.12+: `super().name` in one instruction over [super, __class__, self]: captured as
    3.11's code is, a call of super, then the attribute (or method) load."""
    method, _, name = instr.arg
    self_arg, cls, sup = cap.pop(), cap.pop(), cap.pop()
    push_attr(cap, call_value(cap, sup, [cls, self_arg], {}), name, method)


def call_value(cap, fn, args: list, kwargs: dict):
    """The value of `fn(*args, **kwargs)` where every part is an abstract value."""
    if isinstance(fn, MethodValue):
        return _call_method(cap, fn, args, kwargs)
    if isinstance(fn, ObjectValue):
        return _call_object(cap, fn, args, kwargs)
    if isinstance(fn, FunctionValue):
        return inline_made(cap, fn, args, kwargs)
    if isinstance(fn, BoundValue):
        return call_value(cap, fn.func, [fn.obj, *args], kwargs)
    if not isinstance(fn, ConstValue):
        cap.unsupported(Reason.UNSUPPORTED_CALL, f"calling a {describe(fn)}")
    target = fn.value
    _check_forbidden(cap, target)
    if _listed(target, cap.config.pijit_constexpr):
        return _constexpr_call(cap, target, args, kwargs)
    kind = call_table.kind(target)
    if isinstance(target, types.FunctionType) and numpy_rules.lookup_call(target) is None \
            and not (kind == "pure" and _not_inlined_library(cap, target)):
        _follow_original(cap, target, fn.source)
        return inline_call(cap, target, fn.source, args, kwargs)
    name = getattr(target, "__name__", type(target).__name__)
    if _is_introspection(target):
        cap.unsupported(Reason.FRAME_INTROSPECTION, f"{_qualname(target)}()")
    if dynamic_lists.among(args, kwargs):
        value = dynamic_lists.special(cap, target, args, kwargs)
        if value is not None:
            return value
        args, kwargs = dynamic_lists.substitute(cap, target, args, kwargs,
                                                kind == "pure") or (args, kwargs)
    if target is super and not kwargs:
        return _super(cap, args)
    if target in (zip, enumerate, reversed, iter):
        return iterator_call(cap, target, args, kwargs)
    made = container_call(cap, target, args, kwargs)
    if made is not None:
        return made
    if target is range and cap.config.loop_nodes and \
            any(isinstance(a, GraphValue) for a in args):
        return symbolic_range(cap, args, kwargs)
    if target is len and len(args) == 1 and isinstance(args[0], (TupleValue, ListValue, DictValue)):
        return ConstValue(len(args[0].items))      # lengths of containers are guarded
    if kind == "random":
        return opaque_call(cap, target, args, kwargs, kind)
    has_graph = any(contains_graph_value(v) for v in list(args) + list(kwargs.values()))
    owner = getattr(target, "__self__", None)
    if has_graph and isinstance(owner, np.ufunc) and name == "at":
        return ufunc_at(cap, owner, args, kwargs)       # at = np.add.at; at(a, i, v)
    if not has_graph:
        if _is_pure(target) or kind == "pure":
            return _fold_call(cap, target, name, args, kwargs)
        cap.unsupported(Reason.UNSUPPORTED_CALL, f"{_qualname(target)}")
    special = appends.on_graph(cap, target, args, kwargs) or \
        _builtin_on_graph(cap, target, args, kwargs)
    if special is not None:
        return special
    rule = numpy_rules.lookup_call(target)
    if rule is None:    # (an opaque call breaks on a positional out: writes_argument)
        if kind == "pure":
            return opaque_call(cap, target, args, kwargs, kind)
        cap.unsupported(Reason.UNSUPPORTED_CALL, f"{_qualname(target)} with values known only at run time")
    args, kwargs = _out_by_keyword(cap, target, args, kwargs)
    if target is np.var or target is np.std:
        value = var_or_std(cap, rule.name, list(args), kwargs)
        if value is not None:
            return value
    if kind != "pure":
        return cap.add_op(rule, tuple(args), kwargs)
    try:
        return cap.add_op(rule, tuple(args), kwargs)
    except GraphBreak as e:
        if e.reason is not Reason.UNSUPPORTED_OP or e.would_raise:
            raise
    # A rule that cannot be exact here (np.unique, np.where(cond): shapes that depend on
    # the data; an axis known only at run time): the real function as an opaque node.
    return opaque_call(cap, target, args, kwargs, kind)


def _out_by_keyword(cap, target, args, kwargs, method=None):
    """call_table.out_by_keyword, breaking where it cannot say the call with out=."""
    said = call_table.out_by_keyword(target, args, kwargs, method)
    if said is None:
        cap.unsupported(Reason.SIDE_EFFECT, f"{method or _qualname(target)}: an output "
                        "array given by position")
    return said


def _listed(target, callables) -> bool:
    """`target` is one of `callables` (a jit_config tuple), by identity."""
    return any(target is c for c in callables)


def _check_forbidden(cap, target):
    """pijit_forbidden: capture never calls, inlines or folds these; the call runs as plain
    Python."""
    if _listed(target, cap.config.pijit_forbidden):
        cap.unsupported(Reason.UNSUPPORTED_CALL, f"{_qualname(target)} is in pijit_forbidden")


def _constexpr_call(cap, target, args, kwargs):
    """pijit_constexpr: called once at capture on constants (guarded through their
    sources); an array result is copied at run time (the caller may change it)."""
    name = _qualname(target)
    try:
        result = target(*[_const(cap, v) for v in args],
                        **{k: _const(cap, v) for k, v in kwargs.items()})
    except _NotConstant:
        cap.unsupported(Reason.UNSUPPORTED_CALL,
                        f"pijit_constexpr {name} with values known only at run time")
    except Exception as e:
        cap.unsupported(Reason.UNSUPPORTED_CALL, f"{name} raises {type(e).__name__}: {e}")
    if type(result) is np.ndarray and result.dtype.kind in "biufc":
        kept = result.copy(order="K")         # np.array copies it again at each call
        ref = cap.graph.add_node(name, np.array, (kept,), {}, Meta.of(kept), cap.lineno)
        return GraphValue(ref, Meta.of(kept))
    return fold(cap, lambda: result, ())


def _not_inlined_library(cap, target) -> bool:
    """A library function inlining refuses (its module is not in allowed_inline_modules)."""
    if not is_library(target):
        return False
    module = getattr(target, "__module__", "") or ""
    return not any(module == m or module.startswith(m + ".")
                   for m in cap.config.allowed_inline_modules)


def _call_method(cap, method: MethodValue, args, kwargs):
    obj = method.obj
    if isinstance(obj, GraphValue):
        if obj.meta.is_array:
            args, kwargs = _out_by_keyword(cap, None, args, kwargs, method.name)
        rule = numpy_rules.lookup_method(obj.meta, method.name)
        pure = method.name in call_table.PURE_ARRAY_METHODS and not obj.meta.is_pyscalar
        if rule is None and not pure:
            cap.unsupported(Reason.UNSUPPORTED_OP, f"method {method.name!r} of {obj.meta}")
        if method.name in ("var", "std") and obj.meta.is_array:
            value = var_or_std(cap, method.name, [obj, *args], kwargs)
            if value is not None:
                return value
        if rule is not None:
            try:
                return cap.add_op(rule, (obj, *args), kwargs)
            except GraphBreak as e:
                if not pure or e.reason is not Reason.UNSUPPORTED_OP:
                    raise
        # a.nonzero(), a.item(), a.searchsorted(v): the method itself as an opaque node
        target = getattr(obj.meta.pytype, method.name)
        return opaque_call(cap, target, [obj, *args], kwargs, "pure", name=method.name,
                          data_dependent=method.name in call_table.DATA_DEPENDENT_METHODS)
    if isinstance(obj, ConstValue) and isinstance(obj.value, PURE_METHOD_TYPES) and \
            not any(contains_graph_value(v) for v in list(args) + list(kwargs.values())):
        bound = getattr(obj.value, method.name)
        return _fold_call(cap, bound, method.name, args, kwargs)
    if isinstance(obj, DictValue) and method.name == "get":
        return dict_get(cap, obj, args, kwargs)
    if isinstance(obj, ListValue) and method.name == "append" and len(args) == 1 and not kwargs:
        if isinstance(obj, LazyListValue):    # a list the caller can see
            cap.effects.check(cap, "list.append")
            cap.effects.check_list_read(obj)
            cap.effects.append(cap, obj, args[0])
            obj.append(args[0])
        else:
            own_list(cap, obj).items.append(args[0])
        return ConstValue(None)
    if isinstance(obj, ConstValue) and isinstance(obj.value, np.ufunc) and \
            method.name == "at" and any(contains_graph_value(v) for v in args):
        return ufunc_at(cap, obj.value, args, kwargs)   # np.add.at(a, idx, v): a write
    if isinstance(obj, ConstValue) and isinstance(obj.value, np.ufunc):
        # np.add.outer(a, b), np.maximum.reduce(a): a bound method made per access
        target = getattr(obj.value, method.name, None)
        if target is not None and call_table.kind(target) == "pure" and \
                any(contains_graph_value(v) for v in list(args) + list(kwargs.values())):
            _check_forbidden(cap, target)
            return opaque_call(cap, target, args, kwargs, "pure")
    if isinstance(obj, ObjectValue) and call_table.is_generator(obj.obj) and \
            call_table.random_generator(getattr(obj.obj, method.name, None)) is not None:
        # rng.normal(...): the draw is made on the very generator the entry was compiled
        # for (guarded by identity), in program order
        target = getattr(obj.obj, method.name)
        cap.builder.guard(obj.source, "id", obj.obj)
        _check_forbidden(cap, target)
        return opaque_call(cap, target, args, kwargs, "random")
    if isinstance(obj, ObjectValue):
        func, takes_self = _class_function(type(obj.obj), method.name)
        if func is not None:         # obj.method(...): the class's function, self = obj
            if isinstance(getattr(obj.obj, "__dict__", None), dict):
                # An instance attribute of that name (`obj.method = ...`) would shadow it.
                cap.builder.guard(AttrSource(obj.source, "__dict__"), "call",
                                  lambda d, name=method.name: name not in d,
                                  f"no instance attribute {method.name!r} in")
            source = AttrSource(AttrSource(obj.source, "__class__"), method.name)
            fn = cap.builder.wrap(func, source)      # guards the class attribute's identity
            return inline_call(cap, func, fn.source, [obj, *args] if takes_self else args, kwargs)
    cap.unsupported(Reason.UNSUPPORTED_CALL, f"method {method.name!r} of a {describe(obj)}")


def _super(cap, args):
    """super(cls, obj), or super() in a method (its __class__ cell and first argument)."""
    if not args and "__class__" in cap.code.co_freevars and cap.code.co_argcount:
        index = cap.code.co_freevars.index("__class__")
        cell = cap.func.__closure__[index] if cap.closure is None else None
        if cell is not None:
            args = [cap.builder.wrap(cell.cell_contents, cap.cell_source(index, "__class__")),
                    load_local(cap, cap.code.co_varnames[0])]
    if len(args) == 2 and isinstance(args[0], ConstValue) and args[0].source is not None \
            and isinstance(args[0].value, type) and isinstance(args[1], ObjectValue) \
            and isinstance(args[1].obj, args[0].value):
        return SuperValue(args[0], args[1])
    cap.unsupported(Reason.UNSUPPORTED_CALL, "super() of values pijit does not know")


def _follow_original(cap, func, source):
    """A jitted function object (3.12+) is a copy of the user's function, which takes the
    changes of the user's function (`__code__`, `__defaults__`, `__kwdefaults__`) at its
    next call: take them now, and guard the user's function's, so that a later change
    recompiles the inlined copy as it would change what the copy's call runs."""
    handle = vars(func).get("__pijit__")
    if not isinstance(handle, eval_frame.Wrapper) or handle.original is None:
        return
    eval_frame.follow_original(func)
    if source is None:
        return
    original = AttrSource(AttrSource(source, "__pijit__"), "original")
    cap.builder.guard(original, "id", handle.original)
    for attr in ("__code__", "__defaults__", "__kwdefaults__"):
        cap.builder.guard(AttrSource(original, attr), "id", getattr(handle.original, attr))


def _call_object(cap, fn: ObjectValue, args, kwargs):
    """Calls of callable objects capture can see through: jitted functions and partials."""
    obj = fn.obj
    if call_table.random_generator(obj) is not None:
        # np.random.normal: a bound method of NumPy's global RandomState
        cap.builder.guard(fn.source, "id", obj)
        _check_forbidden(cap, obj)
        return opaque_call(cap, obj, args, kwargs, "random")
    if isinstance(obj, eval_frame.Wrapper):
        inner = cap.builder.wrap(obj.fn, AttrSource(fn.source, "fn"))
        return call_value(cap, inner, args, kwargs)
    if type(obj) is functools.partial:
        inner = cap.builder.wrap(obj.func, AttrSource(fn.source, "func"))
        bound = cap.builder.wrap(obj.args, AttrSource(fn.source, "args"))
        keywords = cap.builder.wrap(obj.keywords, AttrSource(fn.source, "keywords"))
        if not isinstance(keywords, DictValue):
            cap.unsupported(Reason.UNSUPPORTED_CALL, "functools.partial with these keywords")
        return call_value(cap, inner, [*bound.items, *args], {**keywords.items, **kwargs})
    call = class_attribute(type(obj), "__call__")
    if isinstance(call, types.FunctionType):    # obj(...): its class's __call__, inlined
        source = AttrSource(AttrSource(fn.source, "__class__"), "__call__")
        inner = cap.builder.wrap(call, source)      # guards the class's __call__
        return inline_call(cap, call, inner.source, [fn, *args], kwargs)
    cap.unsupported(Reason.UNSUPPORTED_CALL, f"calling a {describe(fn)}")


def _class_function(cls, name):
    """(function, takes_self) behind `instance.name` for a plain method or a staticmethod
    defined on the class; (None, False) for anything else (classmethod, property, ...)."""
    attr = class_attribute(cls, name)
    if isinstance(attr, types.FunctionType):
        return attr, True
    if isinstance(attr, staticmethod) and isinstance(attr.__func__, types.FunctionType):
        return attr.__func__, False
    return None, False


def _fold_call(cap, target, name, args, kwargs):
    """Call a pure function on constants now; a fresh array result becomes a creation node.
    One that warns (np.float32(1e300) overflows) is left to run time, as fold does."""
    try:
        const_args = [_const(cap, v) for v in args]
        const_kwargs = {k: _const(cap, v) for k, v in kwargs.items()}
        with np.errstate(all="raise"), warnings_as("error"):
            result = target(*const_args, **const_kwargs)
    except _NotConstant:
        cap.unsupported(Reason.UNSUPPORTED_CALL, f"{name} of a value pijit cannot pass")
    except Exception as e:
        cap.unsupported(Reason.UNSUPPORTED_CALL, f"{name} raises {type(e).__name__}: {e}")
    if type(result) is np.ndarray:
        if result.dtype.kind not in "biufc":
            cap.unsupported(Reason.UNSUPPORTED_VALUE, f"{name} gives dtype {result.dtype}")
        rule = numpy_rules.lookup_call(target)
        op = rule.name if rule is not None else name
        ref = cap.graph.add_node(op, target, tuple(const_args), const_kwargs,
                                 Meta.of(result), cap.lineno)
        return GraphValue(ref, Meta.of(result))
    if isinstance(result, types.GeneratorType):
        cap.unsupported(Reason.UNSUPPORTED_VALUE, f"{name} gives an iterator")
    return fold(cap, lambda: result, ())


class _NotConstant(Exception):
    pass


def _const(cap, value):
    """A Value as a concrete Python object, when it is fully known at capture time."""
    if isinstance(value, ConstValue):
        return value.value
    if isinstance(value, TupleValue):
        return tuple(_const(cap, v) for v in value.items)
    if isinstance(value, ListValue):
        return [_const(cap, v) for v in value.items]
    if isinstance(value, DictValue):
        return {k: _const(cap, v) for k, v in value.items.items()}
    raise _NotConstant


def _builtin_on_graph(cap, target, args, kwargs):
    """Builtins with graph arguments whose result capture knows or can compute in the graph."""
    if target is len and len(args) == 1 and isinstance(args[0], GraphValue):
        meta = args[0].meta
        if meta.ndim == 0:
            cap.unsupported(Reason.UNSUPPORTED_OP, "len() of a 0-d array")
        if meta.shape[0] is None:
            return shape_dim_value(cap, args[0], 0)
        return ConstValue(meta.shape[0])
    if target in (isinstance, type) and args and isinstance(args[0], GraphValue):
        pytype = args[0].meta.pytype
        if target is type and len(args) == 1:
            return ConstValue(pytype)
        if target is isinstance and len(args) == 2 and isinstance(args[1], ConstValue):
            return ConstValue(issubclass(pytype, args[1].value))
    if target is divmod and len(args) == 2 and not kwargs and all(py_int(v) for v in args):
        # Python ints: (a // b, a % b) exactly, and a zero divisor raises from the // with
        # divmod's own message (floats' differ: "float divmod()")
        return TupleValue([apply_operator(cap, "floordiv", operator.floordiv, tuple(args)),
                           apply_operator(cap, "mod", operator.mod, tuple(args))])
    if target in SCALAR_CONVERSIONS and len(args) == 1 and not kwargs \
            and isinstance(args[0], GraphValue):
        meta = args[0].meta
        if meta.ndim != 0:
            cap.unsupported(Reason.DATA_DEPENDENT, f"{target.__name__}() of an array")
        out = Meta.of(target(1))
        ref = cap.graph.add_node(target.__name__, target, (args[0].ref,), {}, out, cap.lineno)
        return GraphValue(ref, out)
    return None


def _is_introspection(target) -> bool:
    """Calls that read the caller's frame, which would be the transformed one."""
    try:
        return target in _INTROSPECTION
    except TypeError:
        return False


_INTROSPECTION = frozenset({locals, vars, exec, eval, dir, sys._getframe, inspect.currentframe,
                            inspect.stack, breakpoint})


def _is_pure(target) -> bool:
    if isinstance(target, type) and issubclass(target, np.generic):
        return True          # np.float32(2.0), np.int64(3)
    if target is np.dtype:
        return True
    try:
        if target in PURE_BUILTINS:
            return True
    except TypeError:        # unhashable callables
        return False
    module = getattr(target, "__module__", None)
    if module == "math" or getattr(math, getattr(target, "__name__", ""), None) is target:
        return True
    if getattr(operator, getattr(target, "__name__", ""), None) is target:
        return True
    return numpy_rules.lookup_call(target) is not None


def _qualname(target) -> str:
    module = getattr(target, "__module__", None)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) \
        or type(target).__name__
    return f"{module}.{name}" if module and module != "builtins" else name

