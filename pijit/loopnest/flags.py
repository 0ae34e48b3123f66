"""Branches on values constant for the whole nest (`if verbose:`, `if DEBUG:`) -> one arm.

A flag the entry of the graph guards by value (a bool argument, a Python scalar under
specialize_scalar, a global number: capture.py guards it) and the loop never assigns is the
same on every iteration of every call that reaches the node, so the walk follows only the
arm the flag selects: the other is never walked, and a `print` or any call the nest cannot
compile there does not stop the nest. A call with the other value misses the guard and
captures again, with that arm live.
"""
from __future__ import annotations

from bytecode import Instr

from pijit.loopnest.ir import Const

UNKNOWN = object()          # Entry.value of a local whose value is not known at capture


def truth(walk, operand):
    """bool(operand) when it is the same for the whole nest, else None."""
    if isinstance(operand, Const):
        return bool(operand.value)
    if not (isinstance(operand, str) and operand.startswith("l_")):
        return None
    name = operand[2:]
    entry = walk.entries.get(name)
    if entry is None or entry.array is not None or entry.value is UNKNOWN or \
            name in _assigned(walk):
        return None
    return bool(entry.value)


def _assigned(walk) -> set:
    """The locals the loop's instructions store or delete (in any arm, walked or not)."""
    if walk.assigned is None:
        walk.assigned = {i.arg for i in walk.instrs[walk.start:walk.end + 1]
                         if isinstance(i, Instr) and i.name in ("STORE_FAST", "DELETE_FAST")}
    return walk.assigned
