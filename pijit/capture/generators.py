"""A generator expression that tuple() or list() consumes at once -> the list of its items,
captured as the consumer pulls them.

`tuple(s for i, s in enumerate(x.shape) if i not in axes)`: library code builds shapes,
axes and keys this way. The genexpr's call makes a generator and the very next instruction
calls the consumer on it, which pulls every item before it returns: nothing runs between
the generator's steps but the consumer's appends, so running the body to its end at the
genexpr's call (each YIELD_VALUE appending its value, then resumed with None, as next()
resumes it) makes the same values, effects and errors in the same order. A generator used
any other way (stored, iterated by a loop that runs code between items, passed to any(),
which may stop early) is not inlined: a break at its call, as before.
"""
from __future__ import annotations

import inspect

from bytecode import Instr

from pijit import _compat
from pijit.capture.graph_break import Reason
from pijit.capture.registry import handler
from pijit.capture.ops_build import make_tuple, new_list, sequence_items
from pijit.capture.values import (ConstValue, FunctionValue, ListValue, NullValue,
                                  TupleValue)

# Consumers that pull every item and run nothing of the program's between two of them.
CONSUMERS = (tuple, list)


def consumed_at_once(cap, fv) -> bool:
    """fv (being called with no NULL of its own on top: its arguments popped) makes a plain
    generator, and the instruction after this call calls one of CONSUMERS on its result."""
    if not isinstance(fv, FunctionValue) or \
            fv.code.co_flags & _compat.GENERATOR_LIKE != inspect.CO_GENERATOR:
        return False
    below = cap.stack[-2:]
    if len(below) != 2 or cap.kw_names:
        return False
    null, consumer = below if _compat.BYTECODE.null_first else below[::-1]
    if not isinstance(null, NullValue) or not isinstance(consumer, ConstValue) or \
            not any(consumer.value is c for c in CONSUMERS):
        return False
    following = [item for item in cap.instrs[cap.pc + 1:cap.pc + 4] if isinstance(item, Instr)]
    want = [("PRECALL", 1), ("CALL", 1)] if _compat.BYTECODE.precall else [("CALL", 1)]
    return [(i.name, i.arg) for i in following[:len(want)]] == want


def container_call(cap, target, args: list, kwargs: dict):
    """tuple(items) and list(items) of a tuple or list capture knows item by item (a
    consumed generator's items among them), else None."""
    if kwargs or len(args) != 1 or not isinstance(args[0], (TupleValue, ListValue)) or \
            not any(target is c for c in CONSUMERS):
        return None
    items = sequence_items(cap, args[0])
    if target is tuple:
        return make_tuple(items)
    return new_list(cap, items)


def _collecting(cap) -> list:
    """The items of the consumed generator whose frame cap walks (inline.inline_made)."""
    if cap.yielded is None:
        cap.unsupported(Reason.UNSUPPORTED_OPCODE, "a generator's own frame")
    return cap.yielded


@handler("RETURN_GENERATOR")
def RETURN_GENERATOR(cap, instr):
    """The generator made; its first resumption pushes the value sent, None (POP_TOP)."""
    _collecting(cap)
    cap.push(ConstValue(None))


@handler("YIELD_VALUE")
def YIELD_VALUE(cap, instr):
    """One item for the consumer, which resumes the generator with None (next())."""
    _collecting(cap).append(cap.pop())
    cap.push(ConstValue(None))
