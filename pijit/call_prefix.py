"""3.11's jitted function objects: the user's code behind a prefix that asks pijit first.

3.11's CALL inlines any Python function (it never reads a function's vectorcall), so a
function object whose calls pijit must see has to say so in its own bytecode. Its code is
the user's with, before everything else (before COPY_FREE_VARS, MAKE_CELL and RESUME):

    LOAD_CONST P; FOR_ITER (to the user's code)     next(P): pijit's answer for this frame,
                                                    none: "go on" (FOR_ITER pops P, jumps)
    SWAP 2; POP_TOP; COPY 1; LOAD_CONST P; IS_OP 0  else the answer, unless it is P:
    POP_JUMP_FORWARD_IF_TRUE 1; RETURN_VALUE        the frame returns it
    GET_ITER                                        iter(P) raises the StopIteration the
                                                    call raised (FOR_ITER would swallow it)

P (eval_frame.CallPrefix of the user's code, csrc/call_prefix.c) reads the calling frame:
its argument slots are as the hook sees a frame's at its start. Two instructions of no
more than a C call each are all a call that goes on pays in the evaluation loop (a CALL of
P cost ~240 instructions more: measured with callgrind). Before RESUME the frame is
incomplete for CPython (code._co_firsttraceable is the first RESUME): tracebacks,
sys._getframe, f_back and tracers skip it, so a compiled call shows no frame of its own,
and a call that goes on is the user's frame from RESUME on: its lines, its events. Jumps
are relative on 3.11 and keep their targets; the exception table moves by the prefix, which
has no location (so no line of its own) and no handler.
"""
from __future__ import annotations

import dis
import opcode

from pijit import _compat, eval_frame

# (name, argument) of the prefix's instructions (None: P's index in co_consts); 3.11 gives
# none of them CACHE entries. FOR_ITER jumps past the prefix, GET_ITER never completes.
_PREFIX = (("LOAD_CONST", None), ("FOR_ITER", 8), ("SWAP", 2), ("POP_TOP", 0), ("COPY", 1),
           ("LOAD_CONST", None), ("IS_OP", 0), ("POP_JUMP_FORWARD_IF_TRUE", 1),
           ("RETURN_VALUE", 0), ("GET_ITER", 0))
# Stack slots the prefix uses: P and the answer, then the answer, a copy and P.
_PREFIX_STACK = 3
# A location-table entry with no location (3.11's code 15) covers at most 8 code units.
_NO_LOCATION = 0x80 | (15 << 3)


def _prefix_bytes(const_index: int) -> bytes:
    out = bytearray()
    for name, arg in _PREFIX:
        op = opcode.opmap[name]
        out += bytes((op, const_index if arg is None else arg))
        out += bytes(2 * dis._inline_cache_entries[op])
    return bytes(out)


def _varint(value: int, first: bool) -> bytes:
    """3.11's exception-table number: 6-bit groups, most significant first, bit 6 telling
    that more follow, bit 7 marking the first number of an entry."""
    groups = [value & 63]
    value >>= 6
    while value:
        groups.append(value & 63)
        value >>= 6
    groups.reverse()
    out = bytes((g | (64 if i < len(groups) - 1 else 0)) for i, g in enumerate(groups))
    return bytes((out[0] | 128,)) + out[1:] if first else out


def _moved_exception_table(code, units: int) -> bytes:
    out = bytearray()
    for e in dis._parse_exception_table(code):
        start, length = e.start // 2 + units, (e.end - e.start) // 2
        out += _varint(start, True) + _varint(length, False)
        out += _varint(e.target // 2 + units, False) + _varint(e.depth << 1 | e.lasti, False)
    return bytes(out)


def prefixed(code):
    """The user's `code` behind pijit's prefix (see the module's docstring); a generator's
    (its frames resume mid-code) or a prefixed one as it is."""
    if code.co_flags & _compat.GENERATOR_LIKE or eval_frame.original_code(code) is not code:
        return code
    consts = code.co_consts + (eval_frame.CallPrefix(code),)
    body = _prefix_bytes(len(consts) - 1)
    units = len(body) // 2
    table = bytes((_NO_LOCATION | 7,)) * (units // 8)
    if units % 8:
        table += bytes((_NO_LOCATION | (units % 8 - 1),))
    return code.replace(co_code=body + code.co_code, co_consts=consts,
                        co_stacksize=max(code.co_stacksize, _PREFIX_STACK),
                        co_linetable=table + code.co_linetable,
                        co_exceptiontable=_moved_exception_table(code, units))

