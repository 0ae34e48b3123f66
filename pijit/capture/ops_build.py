"""Handlers that build and take apart containers: tuples, lists, dicts, slices, strings,
subscripts and unpacking."""
from __future__ import annotations

import operator

from pijit.capture import numpy_rules, writes
from pijit.capture.graph_break import Reason
from pijit.capture.index_facts import index_key
from pijit.capture.ops_arith import apply_operator, dict_key, fold
from pijit.capture.opaque import index_helper
from pijit.capture.registry import handler
from pijit.capture.values import (ConstValue, DictValue, GraphValue, ListValue, SliceValue,
                                  TupleValue, describe)
from pijit.capture.wrap import ObjectValue


def make_tuple(items) -> TupleValue | ConstValue:
    """A tuple of values; all-constant tuples stay constants so rules see plain tuples."""
    if all(isinstance(v, ConstValue) for v in items):
        return ConstValue(tuple(v.value for v in items))
    return TupleValue(list(items))


def sequence_items(cap, value) -> list:
    """The items of a value iterated at capture time: tuples and lists known item by item,
    and the rows of an array whose first dimension is static."""
    if isinstance(value, (TupleValue, ListValue)):
        return list(value.items)
    if isinstance(value, ConstValue) and type(value.value) in (tuple, list):
        return [ConstValue(v) for v in value.value]
    if isinstance(value, GraphValue) and value.meta.is_array and value.meta.ndim >= 1 \
            and value.meta.shape[0] is not None:
        getitem = numpy_rules.lookup_operator("getitem")
        return [cap.add_op(getitem, (value, ConstValue(i)), {})
                for i in range(value.meta.shape[0])]
    cap.unsupported(Reason.UNSUPPORTED_VALUE, f"unpacking a {describe(value)}")


@handler("BUILD_TUPLE")
def BUILD_TUPLE(cap, instr):
    cap.push(make_tuple(cap.popn(instr.arg)))


@handler("BUILD_LIST")
def BUILD_LIST(cap, instr):
    cap.push(new_list(cap, cap.popn(instr.arg)))


@handler("LIST_EXTEND")
def LIST_EXTEND(cap, instr):
    items = sequence_items(cap, cap.pop())
    own_list(cap, cap.stack[-instr.arg]).items.extend(items)


@handler("LIST_APPEND")
def LIST_APPEND(cap, instr):
    item = cap.pop()
    own_list(cap, cap.stack[-instr.arg]).items.append(item)


def new_list(cap, items: list) -> ListValue:
    """A list this frame builds (a display, a slice of its own list, list() of items capture
    knows, a consumed generator's items): own_list lets it change in the loop body it was
    built in."""
    return ListValue(items, frame=cap, body=cap.bodies[-1] if cap.bodies else None)


def own_list(cap, target) -> ListValue:
    """A list this frame built: the only kind capture may mutate (others are side effects).
    In a loop node's body, only a list built in that body (it changes once per iteration)."""
    if not isinstance(target, ListValue) or target.frame is not cap:
        cap.unsupported(Reason.SIDE_EFFECT, "changing a list the function did not create")
    if cap.bodies and target.body is not cap.bodies[-1]:
        cap.unsupported(Reason.SIDE_EFFECT, "changing a list built before the loop")
    return target


@handler("LIST_TO_TUPLE")
def LIST_TO_TUPLE(cap, instr):
    cap.push(make_tuple(sequence_items(cap, cap.pop())))


@handler("CALL_INTRINSIC_1")
def CALL_INTRINSIC_1(cap, instr):
    """3.12+: the operations CPython moved out of the instruction set; those capture
    follows are handled like the 3.11 instructions they replace."""
    run = INTRINSICS.get(instr.arg.name)
    if run is None:
        cap.unsupported(Reason.UNSUPPORTED_OPCODE, f"{instr.name} {instr.arg.name}")
    run(cap, instr)


INTRINSICS = {
    "INTRINSIC_LIST_TO_TUPLE": LIST_TO_TUPLE,                   # f(*args), (*a, *b)
    "INTRINSIC_UNARY_POSITIVE": lambda cap, instr: cap.push(
        apply_operator(cap, "pos", operator.pos, (cap.pop(),))),
}


@handler("BUILD_MAP")
def BUILD_MAP(cap, instr):
    flat = cap.popn(2 * instr.arg)
    keys, values = flat[0::2], flat[1::2]
    cap.push(DictValue({const_key(cap, k): v for k, v in zip(keys, values)}))


@handler("BUILD_CONST_KEY_MAP")
def BUILD_CONST_KEY_MAP(cap, instr):
    keys = cap.pop()
    values = cap.popn(instr.arg)
    cap.push(DictValue(dict(zip(keys.value, values))))


@handler("DICT_MERGE", "DICT_UPDATE")
def DICT_MERGE(cap, instr):
    update = cap.pop()
    target = cap.stack[-instr.arg]
    if not isinstance(update, DictValue) or not isinstance(target, DictValue):
        cap.unsupported(Reason.UNSUPPORTED_VALUE, "** of something that is not a known dict")
    if instr.name == "DICT_MERGE" and set(update.items) & set(target.items):
        cap.unsupported(Reason.UNSUPPORTED_OP, "repeated keyword argument")
    target.items.update(update.items)


@handler("BUILD_SLICE")
def BUILD_SLICE(cap, instr):
    cap.push(make_slice(cap, cap.popn(instr.arg)))


def _int_bound(meta) -> bool:
    """A graph value a slice bound may be: a Python int or a NumPy integer scalar
    (np.searchsorted's, argmax's, an item of an int array), which Python takes by __index__."""
    return meta.is_pyscalar or not meta.is_array and meta.dtype.kind in "iu"


def make_slice(cap, parts):
    if len(parts) == 2:
        parts.append(ConstValue(None))
    if all(isinstance(p, ConstValue) for p in parts):
        return ConstValue(slice(*(p.value for p in parts)))
    if all(isinstance(p, ConstValue) or isinstance(p, GraphValue) and _int_bound(p.meta)
           for p in parts):
        return SliceValue(*parts)
    cap.unsupported(Reason.UNSUPPORTED_VALUE, "slice bound that is not an integer")


@handler("BINARY_SUBSCR")
def BINARY_SUBSCR(cap, instr):
    key, container = cap.pop(), cap.pop()
    cap.push(subscript(cap, container, key))


@handler("BINARY_SLICE")
def BINARY_SLICE(cap, instr):
    """3.12+: container[start:stop] without BUILD_SLICE."""
    stop, start, container = cap.pop(), cap.pop(), cap.pop()
    cap.push(subscript(cap, container, make_slice(cap, [start, stop])))


def subscript(cap, container, key):
    if isinstance(container, GraphValue):
        return cap.add_op(numpy_rules.lookup_operator("getitem"), (container, key), {},
                          infer_args=(container.meta, index_key(cap, container.meta, key)))
    if isinstance(container, ObjectValue):
        helper = index_helper(cap, container, key)
        if helper is not None:
            return helper
    if not isinstance(key, ConstValue):
        cap.unsupported(Reason.UNSUPPORTED_OP, "subscript of a container by a run-time value")
    if isinstance(container, ConstValue):
        return fold(cap, operator.getitem, (container.value, key.value))
    if isinstance(container, (TupleValue, ListValue)):
        try:
            item = container.items[key.value]
        except (IndexError, TypeError) as e:
            cap.unsupported(Reason.UNSUPPORTED_OP, f"subscript raises {type(e).__name__}")
        if type(key.value) is not slice:
            return item
        if isinstance(container, ListValue):      # a new list, this frame's to mutate
            return new_list(cap, list(item))
        return make_tuple(item)
    if isinstance(container, DictValue):
        if key.value not in container.items:
            cap.unsupported(Reason.UNSUPPORTED_OP, f"key {key.value!r} missing")
        return container.items[key.value]
    cap.unsupported(Reason.UNSUPPORTED_VALUE, f"subscript of a {describe(container)}")


def dict_get(cap, container: DictValue, args: list, kwargs: dict):
    """`d.get(key[, default])`: the item, or the default (None), as dict.get gives it. Other
    argument counts and keywords break (plain Python raises dict.get's TypeError)."""
    if kwargs or not 1 <= len(args) <= 2:
        cap.unsupported(Reason.UNSUPPORTED_CALL, "dict.get with these arguments")
    key = dict_key(cap, args[0])
    if key in container.items:
        return container.items[key]
    return args[1] if len(args) == 2 else ConstValue(None)


@handler("STORE_SUBSCR")
def STORE_SUBSCR(cap, instr):
    """`a[key] = value`: into an array, a write node (capture/writes.py); into a dict read
    from a source, a store replayed after the graph (capture/side_effects.py)."""
    if isinstance(cap.stack[-2], DictValue):
        key, target, value = cap.pop(), cap.pop(), cap.pop()
        store_dict_item(cap, target, key, value)
        return
    key, target, value = cap.pop(), cap.pop(), cap.pop()
    writes.store_item(cap, target, key, value)


@handler("STORE_SLICE")
def STORE_SLICE(cap, instr):
    """3.12+: container[start:stop] = value without BUILD_SLICE (as STORE_SUBSCR)."""
    stop, start, target, value = cap.pop(), cap.pop(), cap.pop(), cap.pop()
    writes.store_item(cap, target, make_slice(cap, [start, stop]), value)


def store_dict_item(cap, target, key, value):
    """d[key] = value into a dict read from a source (str keys, as wrap reads dicts):
    recorded in the capture's side effects and seen by later reads."""
    effects = cap.effects
    effects.check(cap, "item store into a dict")
    if target.source is None or not isinstance(key, ConstValue) or type(key.value) is not str:
        cap.unsupported(Reason.SIDE_EFFECT, "item assignment into a dict the function built")
    if any(isinstance(v, DictValue) and v is not target for v in cap.builder.wrapped()):
        cap.unsupported(Reason.SIDE_EFFECT, "item store into a dict another dict read may be")
    effects.store_item(cap, target, key.value, value)
    target.items[key.value] = value


@handler("UNPACK_SEQUENCE")
def UNPACK_SEQUENCE(cap, instr):
    value = cap.pop()
    n = instr.arg
    items = sequence_items(cap, value)
    if len(items) != n:
        cap.unsupported(Reason.UNSUPPORTED_OP, f"unpacking {len(items)} values into {n}")
    for item in reversed(items):
        cap.push(item)


# f-string conversions by number: none, !s, !r, !a.
CONVERSIONS = {0: lambda v: v, 1: str, 2: repr, 3: ascii}


@handler("FORMAT_VALUE")
def FORMAT_VALUE(cap, instr):
    """3.11, 3.12: one f-string field, its conversion and format spec (flag 0x04) in one."""
    spec = cap.pop() if instr.arg & 0x04 else ConstValue("")
    value = cap.pop()
    cap.push(_format(cap, _convert(cap, value, instr.arg & 0x03), spec))


@handler("CONVERT_VALUE")
def CONVERT_VALUE(cap, instr):
    """3.13: an f-string field's !s, !r or !a."""
    cap.push(_convert(cap, cap.pop(), int(instr.arg)))


@handler("FORMAT_SIMPLE")
def FORMAT_SIMPLE(cap, instr):
    cap.push(_format(cap, cap.pop(), ConstValue("")))


@handler("FORMAT_WITH_SPEC")
def FORMAT_WITH_SPEC(cap, instr):
    spec = cap.pop()
    cap.push(_format(cap, cap.pop(), spec))


def _convert(cap, value, conversion: int):
    if not isinstance(value, ConstValue):
        cap.unsupported(Reason.DATA_DEPENDENT, "formatting a value known only at run time")
    return fold(cap, CONVERSIONS[conversion], (value.value,)) if conversion else value


def _format(cap, value, spec):
    if not isinstance(value, ConstValue) or not isinstance(spec, ConstValue):
        cap.unsupported(Reason.DATA_DEPENDENT, "formatting a value known only at run time")
    return fold(cap, format, (value.value, spec.value))


@handler("BUILD_STRING")
def BUILD_STRING(cap, instr):
    parts = cap.popn(instr.arg)
    cap.push(ConstValue("".join(p.value for p in parts)))


def const_key(cap, value):
    if not isinstance(value, ConstValue):
        cap.unsupported(Reason.UNSUPPORTED_VALUE, "dict key known only at run time")
    return value.value
