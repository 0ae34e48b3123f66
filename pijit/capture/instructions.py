"""A code object -> the abstract instructions capture walks and residual code copies.

The `bytecode` package's instructions, with 3.13's superinstructions (LOAD_FAST_LOAD_FAST,
STORE_FAST_STORE_FAST, STORE_FAST_LOAD_FAST) split into the two instructions each stands
for: handlers, liveness and copied code then see one local access per instruction.
"""
from __future__ import annotations

from bytecode import Bytecode, Instr

from pijit._compat import SUPERINSTRUCTIONS


def read_instructions(code) -> list:
    """The abstract instructions of `code` (Labels, TryBegin/TryEnd and SetLineno included)."""
    out = []
    for item in Bytecode.from_code(code):
        parts = SUPERINSTRUCTIONS.get(getattr(item, "name", None))
        if parts is None:
            out.append(item)
            continue
        for name, arg in zip(parts, item.arg):
            out.append(Instr(name, arg, location=item.location))
    return out
