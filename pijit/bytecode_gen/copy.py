"""Copying abstract instructions between code objects, with fresh labels and try blocks.

Residual bytecode and resume functions reuse the original function's instructions; each
copy needs its own Label, TryBegin and TryEnd objects, and jumps may be retargeted.
"""
from __future__ import annotations

from bytecode import Instr, Label, TryBegin, TryEnd


def copy_instructions(items, retarget: dict):
    """Copy `items`; a jump or handler to an original label goes to its copy, or to
    retarget[label] when given. Returns (copies, {original label: copied label})."""
    labels = {item: Label() for item in items if isinstance(item, Label)}
    labels.update(retarget)
    try_blocks = {}
    out = []
    for item in items:
        if isinstance(item, Label):
            out.append(labels[item])
        elif isinstance(item, TryBegin):
            copied = TryBegin(labels.get(item.target, item.target), item.push_lasti,
                              item.stack_depth)
            try_blocks[id(item)] = copied
            out.append(copied)
        elif isinstance(item, TryEnd):
            out.append(TryEnd(try_blocks.get(id(item.entry), item.entry)))
        elif isinstance(item, Instr):
            copied = item.copy()
            if isinstance(item.arg, Label):
                copied.arg = labels[item.arg]
            out.append(copied)
        else:
            out.append(item)
    return out, labels


def line_at(instrs, pos, default) -> int:
    """The user's line of the first instruction at or after `pos`."""
    for item in instrs[pos:]:
        if isinstance(item, Instr) and item.location is not None and item.location.lineno:
            return item.location.lineno
    return default
