"""Handlers for operators: BINARY_OP, COMPARE_OP, IS_OP, CONTAINS_OP and the unary ops.

Operators on constants are evaluated at capture time (Python semantics); operators on graph
values become nodes through the op table. In-place operators on arrays are writes
(capture/writes.py).
"""
from __future__ import annotations

import operator

import numpy as np
from bytecode import BinaryOp, Compare

from pijit.capture import dynamic_lists, numpy_rules, writes
from pijit.capture.evaluate import NotKnown, capture_values
from pijit.capture.graph_break import Reason
from pijit.capture.registry import handler
from pijit.capture.ops_stack import to_bool, truth
from pijit.capture.values import (ConstValue, DictValue, GraphValue, ListValue, TupleValue,
                                  describe, is_immutable, node_arg)
from pijit.graph.ir import Meta
from pijit.capture.wrap import ObjectValue
from pijit.quiet import warnings_as

# BinaryOp member -> (op table name, Python operator)
BINARY = {
    "ADD": ("add", operator.add), "SUBTRACT": ("sub", operator.sub),
    "MULTIPLY": ("mul", operator.mul), "TRUE_DIVIDE": ("truediv", operator.truediv),
    "FLOOR_DIVIDE": ("floordiv", operator.floordiv), "REMAINDER": ("mod", operator.mod),
    "POWER": ("pow", operator.pow), "MATRIX_MULTIPLY": ("matmul", operator.matmul),
    "LSHIFT": ("lshift", operator.lshift), "RSHIFT": ("rshift", operator.rshift),
    "AND": ("and", operator.and_), "OR": ("or", operator.or_), "XOR": ("xor", operator.xor),
}
COMPARE = {
    "LT": ("lt", operator.lt), "LE": ("le", operator.le), "EQ": ("eq", operator.eq),
    "NE": ("ne", operator.ne), "GT": ("gt", operator.gt), "GE": ("ge", operator.ge),
}
UNARY_OPS = {
    "UNARY_NEGATIVE": ("neg", operator.neg), "UNARY_POSITIVE": ("pos", operator.pos),
    "UNARY_INVERT": ("invert", operator.invert),
}


@handler("BINARY_OP")
def BINARY_OP(cap, instr):
    right, left = cap.pop(), cap.pop()
    member = BinaryOp(instr.arg).name
    inplace = member.startswith("INPLACE_")
    name, fn = BINARY[member.removeprefix("INPLACE_")]
    if inplace and isinstance(left, GraphValue) and left.meta.is_array:
        cap.push(writes.inplace(cap, name, left, right))
    elif inplace and isinstance(left, ListValue):
        cap.push(_list_inplace(cap, name, left, right))
    else:
        cap.push(apply_operator(cap, name, fn, (left, right)))


@handler("COMPARE_OP")
def COMPARE_OP(cap, instr):
    right, left = cap.pop(), cap.pop()
    member = Compare(instr.arg).name
    name, fn = COMPARE[member.removesuffix("_CAST")]
    result = apply_operator(cap, name, fn, (left, right))
    # 3.13's bool bit (a jump follows): the result made a bool, as TO_BOOL does.
    cap.push(to_bool(cap, result) if member.endswith("_CAST") else result)


@handler("UNARY_NEGATIVE", "UNARY_POSITIVE", "UNARY_INVERT")
def UNARY(cap, instr):
    name, fn = UNARY_OPS[instr.name]
    cap.push(apply_operator(cap, name, fn, (cap.pop(),)))


@handler("UNARY_NOT")
def UNARY_NOT(cap, instr):
    cap.push(ConstValue(not truth(cap, cap.pop())))


@handler("IS_OP")
def IS_OP(cap, instr):
    right, left = cap.pop(), cap.pop()
    cap.push(ConstValue(same_object(cap, left, right) != bool(instr.arg)))


@handler("CONTAINS_OP")
def CONTAINS_OP(cap, instr):
    container, item = cap.pop(), cap.pop()
    if isinstance(container, ConstValue) and isinstance(item, ConstValue):
        result = fold(cap, operator.contains, (container.value, item.value))
        cap.push(ConstValue(result.value != bool(instr.arg)))
        return
    if isinstance(container, DictValue):        # its keys are known: guarded or built here
        cap.push(ConstValue((dict_key(cap, item) in container.items) != bool(instr.arg)))
        return
    if isinstance(container, (TupleValue, ListValue)) and \
            all(isinstance(v, ConstValue) for v in container.items):
        # (axes given as a tuple: `i not in axes`) the items' own `in`: identity, then ==
        items = tuple(dict_key(cap, v) for v in container.items)
        cap.push(ConstValue((dict_key(cap, item) in items) != bool(instr.arg)))
        return
    cap.unsupported(Reason.UNSUPPORTED_OP, "`in` on values known only at run time")


# Key types whose hash and == run no user code, so a lookup in a DictValue's items (a real
# dict keyed by the same objects: its hashing, 1 == True included) is the lookup the
# program makes.
_PLAIN_KEYS = (str, int, bool, bytes, type(None))


def dict_key(cap, key):
    """The constant behind a key looked up in a dict capture knows key by key (its keys are
    guarded, or the function built it) or in a tuple or list it knows item by item, else a
    break: a run-time key, or one whose hash or == may run user code."""
    if isinstance(key, ConstValue) and (type(key.value) in _PLAIN_KEYS or (
            type(key.value) is tuple and all(type(k) in _PLAIN_KEYS for k in key.value))):
        return key.value
    cap.unsupported(Reason.UNSUPPORTED_OP, f"dict lookup of a {describe(key)} key")


def py_int(value) -> bool:
    if isinstance(value, GraphValue):
        return value.meta.pytype in (int, bool)
    return isinstance(value, ConstValue) and type(value.value) in (int, bool)


def int_power(cap, base, exponent):
    """int ** int: an int for an exponent >= 0, a float for a negative one. The sign of an
    exponent read from a source (an argument, a global) is guarded; an exponent computed in
    the graph breaks it, as before."""
    if exponent.source is None:
        cap.unsupported(Reason.UNSUPPORTED_OP, "int ** int of a computed exponent: the "
                        "result type depends on the exponent's sign")
    try:
        nonneg = capture_values(cap).value(exponent.ref) >= 0
    except NotKnown as e:
        cap.unsupported(Reason.UNSUPPORTED_OP, f"int ** int: {e}")
    cap.builder.guard(exponent.source, "call",
                      (lambda v: v >= 0) if nonneg else (lambda v: v < 0),
                      "exponent >= 0" if nonneg else "exponent < 0")
    meta = Meta.of(1 if nonneg else 1.0)
    ref = cap.graph.add_node("pow", operator.pow, (node_arg(base), node_arg(exponent)), {},
                             meta, cap.lineno)
    return GraphValue(ref, meta)


def apply_operator(cap, name, fn, operands):
    if all(isinstance(v, ConstValue) for v in operands):
        return fold(cap, fn, tuple(v.value for v in operands))
    if any(isinstance(v, GraphValue) for v in operands):
        operands = dynamic_lists.operands(cap, operands)
        if any(isinstance(v, ObjectValue) for v in operands):
            cap.unsupported(Reason.UNSUPPORTED_VALUE, f"operator {name} with an opaque object")
        if name == "pow" and py_int(operands[0]) and py_int(operands[1]) and \
                isinstance(operands[1], GraphValue):
            return int_power(cap, *operands)
        result = cap.add_op(numpy_rules.lookup_operator(name), operands, {})
        cap.facts.note_operator(name, operands, result)
        return result
    seq = _sequence_op(cap, name, operands)
    if seq is not None:
        return seq
    cap.unsupported(Reason.UNSUPPORTED_OP,
                    f"operator {name} on {', '.join(describe(v) for v in operands)}")


def _sequence_op(cap, name, operands):
    """tuple/list concatenation and repetition with values inside (`x.shape + (1,)` etc.)."""
    if len(operands) != 2:
        return None
    left, right = operands
    if name == "add" and type(left) is type(right) and isinstance(left, (TupleValue, ListValue)):
        return _like(left)(list(left.items) + list(right.items))
    if name == "add" and isinstance(left, TupleValue) and isinstance(right, ConstValue) \
            and type(right.value) is tuple:
        return TupleValue(list(left.items) + [ConstValue(v) for v in right.value])
    if name == "add" and isinstance(left, ConstValue) and type(left.value) is tuple \
            and isinstance(right, TupleValue):
        return TupleValue([ConstValue(v) for v in left.value] + list(right.items))
    if name == "mul" and isinstance(left, (TupleValue, ListValue)) and \
            isinstance(right, ConstValue) and type(right.value) is int:
        return _like(left)(list(left.items) * right.value)
    return None


def _like(seq):
    """The Value class of a new tuple or list like `seq` (a list read from a source is a
    LazyListValue, which a new list made from its items is not)."""
    return TupleValue if isinstance(seq, TupleValue) else ListValue


def _list_inplace(cap, name, left, right):
    """`lst += it`, `lst *= n`: list.__iadd__ and __imul__ change the list itself, which
    every name and container holding it then sees (a new list would leave `kept = lst`
    as it was). Only a list this frame built is changed at capture (own_list); any other
    operator, or another's list, is left to Python."""
    from pijit.capture.ops_build import own_list, sequence_items    # ops_build imports us
    if name == "add":
        items = sequence_items(cap, right)
        own_list(cap, left).items.extend(items)
        return left
    if name == "mul" and isinstance(right, ConstValue) and type(right.value) is int:
        lst = own_list(cap, left)
        lst.items[:] = lst.items * right.value
        return left
    cap.unsupported(Reason.UNSUPPORTED_OP, f"in-place operator {name} on a list")


def fold(cap, fn, args):
    """Evaluate fn on constants at capture time; the result must be immutable or a fresh list.
    Under np.errstate(all="raise") with warnings as errors, as graph folding (simplify.py): a
    fold that warns (np.int8(100) + 100 overflows) would warn at capture only, not at every
    call, so it is left to run time."""
    try:
        with np.errstate(all="raise"), warnings_as("error"):
            result = fn(*args)
    except Exception as e:
        cap.unsupported(Reason.UNSUPPORTED_OP, f"{getattr(fn, '__name__', fn)} raises "
                                               f"{type(e).__name__}: {e}")
    if type(result) is list and all(is_immutable(v) for v in result):
        return ListValue([ConstValue(v) for v in result])
    if not is_immutable(result):
        cap.unsupported(Reason.UNSUPPORTED_VALUE,
                        f"{getattr(fn, '__name__', fn)} gives a mutable {type(result).__name__}")
    return ConstValue(result)


def same_object(cap, left, right) -> bool:
    if isinstance(left, ConstValue) and isinstance(right, ConstValue):
        return left.value is right.value
    if left is right:
        return True
    kinds = (GraphValue, TupleValue, ListValue, ObjectValue)
    if isinstance(left, ConstValue) and left.value is None and isinstance(right, kinds):
        return False
    if isinstance(right, ConstValue) and right.value is None and isinstance(left, kinds):
        return False
    cap.unsupported(Reason.UNSUPPORTED_OP, "`is` between values known only at run time")
