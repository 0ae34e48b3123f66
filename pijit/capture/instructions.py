"""A code object -> the abstract instructions capture walks and residual code copies.

The `bytecode` package's instructions, with 3.13's superinstructions (LOAD_FAST_LOAD_FAST,
STORE_FAST_STORE_FAST, STORE_FAST_LOAD_FAST) split into the two instructions each stands
for: handlers, liveness and copied code then see one local access per instruction.
"""
from __future__ import annotations

import weakref

from bytecode import Bytecode, Instr

from pijit._compat import SUPERINSTRUCTIONS
from pijit.capture.flow import Flow

# code -> (its instructions, their Flow). A capture inlines a helper at every call site (an
# unrolled loop calling f(x) reads f's code hundreds of times), and reading the bytecode was
# most of such a capture's time (60% of simpson's).
_READ = weakref.WeakKeyDictionary()


def read_instructions(code) -> tuple:
    """The abstract instructions of `code` (Labels, TryBegin/TryEnd and SetLineno included),
    read once per code object and shared: a tuple, and callers copy an Instr they change."""
    return instructions_and_flow(code)[0]


def instructions_and_flow(code) -> tuple:
    """(read_instructions(code), the Flow of those instructions), shared like them: a Flow
    only caches facts about its instructions."""
    try:
        return _READ[code]
    except KeyError:
        pass
    instrs = _read(code)
    _READ[code] = found = (instrs, Flow(instrs))
    return found


def _read(code) -> tuple:
    out = []
    for item in Bytecode.from_code(code):
        parts = SUPERINSTRUCTIONS.get(getattr(item, "name", None))
        if parts is None:
            out.append(item)
            continue
        for name, arg in zip(parts, item.arg):
            out.append(Instr(name, arg, location=item.location))
    return tuple(out)
