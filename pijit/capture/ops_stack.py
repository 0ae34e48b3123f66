"""Handlers for frame set-up, stack shuffles, return, and jumps decided at capture time.

A conditional jump on a guarded constant is followed (the branch is pruned); one on array data
stops capture. Backward jumps are in ops_loop.py.
"""
from __future__ import annotations

from pijit import _compat
from pijit.capture.graph_break import GraphBreak, Reason
from pijit.capture.registry import handler
from pijit.capture.values import (NULL, ConstValue, DictValue, GraphValue, ListValue,
                                  NullValue, TruthValue, TupleValue, describe)
from pijit.capture.wrap import ObjectValue


@handler("RESUME", "NOP", "COPY_FREE_VARS", "MAKE_CELL")
def NOP(cap, instr):
    """Frame set-up: cells and free variables are read through sources, not frame slots."""


@handler("BEFORE_WITH")
def BEFORE_WITH(cap, instr):
    """A `with` block: its exit runs from the exception table, so it stays residual whole."""
    cap.unsupported(Reason.EXCEPTION_HANDLING, "with block")


@handler("POP_TOP")
def POP_TOP(cap, instr):
    cap.pop()


@handler("COPY")
def COPY(cap, instr):
    cap.push(cap.stack[-instr.arg])


@handler("SWAP")
def SWAP(cap, instr):
    i = instr.arg
    cap.stack[-1], cap.stack[-i] = cap.stack[-i], cap.stack[-1]


@handler("RETURN_VALUE")
def RETURN_VALUE(cap, instr):
    cap.ret = cap.pop()


@handler("RETURN_CONST")
def RETURN_CONST(cap, instr):
    cap.ret = ConstValue(instr.arg)


def push_with_null(cap, value):
    """Push a callable with the NULL its call needs, on the side this version's calls have
    it (LOAD_GLOBAL's low bit, a method load of something that is not a method)."""
    if _compat.BYTECODE.null_first:
        cap.push(NULL)
        cap.push(value)
    else:
        cap.push(value)
        cap.push(NULL)


def leave_for(cap):
    """The stack an exhausted FOR_ITER leaves at its target: 3.11 pops the iterator; 3.12+
    jumps past the END_FOR (3.13: END_FOR, POP_TOP) there, which capture walks as the
    `bytecode` package models them (as flow.py's depths do): popping the iterator and a
    value FOR_ITER left, a NULL here."""
    if _compat.BYTECODE.for_iter_exit:
        cap.push(NULL)
    else:
        cap.pop()


@handler("JUMP_FORWARD")
def JUMP_FORWARD(cap, instr):
    return instr.arg


@handler("POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_FORWARD_IF_FALSE",    # 3.11
         "POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE")                    # 3.12+ (all forward)
def POP_JUMP_FORWARD_IF(cap, instr):
    if truth(cap, cap.pop()) == instr.name.endswith("TRUE"):
        return instr.arg
    return None


@handler("POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_FORWARD_IF_NOT_NONE",  # 3.11
         "POP_JUMP_IF_NONE", "POP_JUMP_IF_NOT_NONE")                    # 3.12+
def POP_JUMP_FORWARD_IF_NONE(cap, instr):
    jump_if_none = instr.name.endswith("_IF_NONE")
    if is_none_value(cap, cap.pop()) == jump_if_none:
        return instr.arg
    return None


@handler("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP")
def JUMP_IF_OR_POP(cap, instr):
    if truth(cap, cap.stack[-1]) == (instr.name == "JUMP_IF_TRUE_OR_POP"):
        return instr.arg
    cap.pop()
    return None


@handler("TO_BOOL")
def TO_BOOL(cap, instr):
    """3.13: bool(TOS) for the jump or UNARY_NOT after it."""
    cap.push(to_bool(cap, cap.pop()))


def to_bool(cap, value):
    """bool(value) as a constant when capture knows it, else a TruthValue, on which the next
    instruction breaks the graph as 3.11's jump on the value itself does."""
    try:
        return ConstValue(truth(cap, value))
    except GraphBreak:
        return TruthValue(value)


def truth(cap, value) -> bool:
    """bool(value) when capture knows it: constants (guarded) and containers (length guarded)."""
    if isinstance(value, TruthValue):
        return truth(cap, value.value)
    if isinstance(value, ConstValue):
        try:
            return bool(value.value)
        except Exception as e:
            cap.unsupported(Reason.CONTROL_FLOW, f"bool() of {type(value.value).__name__} raises {e}")
    if isinstance(value, (TupleValue, ListValue)):
        return bool(value.items)
    if isinstance(value, DictValue):
        return bool(value.items)
    if isinstance(value, GraphValue):
        cap.unsupported(Reason.DATA_DEPENDENT, "branch on the value of an array or scalar")
    cap.unsupported(Reason.CONTROL_FLOW, f"branch on a {describe(value)}")


def is_none_value(cap, value) -> bool:
    if isinstance(value, ConstValue):
        return value.value is None
    if isinstance(value, (GraphValue, TupleValue, ListValue, DictValue, ObjectValue)):
        return False        # their types are guarded, and none is NoneType
    if isinstance(value, NullValue):
        cap.unsupported(Reason.CONTROL_FLOW, "NULL on the stack")
    cap.unsupported(Reason.CONTROL_FLOW, f"`is None` test of a {describe(value)}")
