"""CPython-version facts in one place: which interpreters pijit supports, and where the
bytecode of 3.11, 3.12 and 3.13 differs in ways capture and bytecode generation depend on.

The C hook's facts are in csrc/compat.h. Capture handlers are named after opcodes; an
opcode whose stack layout or argument changed between versions reads the difference from
`BYTECODE` here, never from `sys.version_info`. This module imports nothing of pijit's, so
setup.py can read SUPPORTED on any interpreter.
"""
import inspect
import sys
import sysconfig
from dataclasses import dataclass

VERSION = sys.version_info[:2]
# The free-threaded build (3.13t): the hook relies on the GIL.
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
SUPPORTED = (3, 11) <= VERSION <= (3, 13) and not FREE_THREADED

# pijit.jit returns a function object whose vectorcall is pijit's, given back to CPython's
# inlined calls once pijit has nothing to do for its calls (3.12+: PyFunction_SetVectorcall,
# and calls specialize or inline only a function whose vectorcall is CPython's); 3.11's calls
# would skip such a vectorcall. csrc/compat.h's
# PJ_FUNCTION_VECTORCALL is the C side of this fact.
FUNCTION_VECTORCALL = VERSION >= (3, 12)
# On 3.11 it returns a function object whose code begins with a call asking pijit first
# (pijit/call_prefix.py), given back by setting its __code__ to the user's code.
CALL_PREFIX = VERSION == (3, 11)
# Functions under these names are called by specializations that do not look at their
# vectorcall: 3.13's CALL_ALLOC_AND_ENTER_INIT pushes a class's Python __init__ as a frame
# of its own (tests/test_inline.py): a jitted __init__ stays a Wrapper there.
VECTORCALL_SKIPPED_BY = ("__init__",) if VERSION >= (3, 13) else ()

# Code flags whose frames the hook never intercepts (their frames resume mid-code).
GENERATOR_LIKE = (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
                  | inspect.CO_ITERABLE_COROUTINE)


@dataclass(frozen=True)
class BytecodeFacts:
    """How one CPython version's bytecode does what pijit reads and writes (references:
    each version's Lib/opcode.py and Python/bytecodes.c, and the `bytecode` package)."""
    # A call's stack: [NULL, callable, args...] (3.11, 3.12) or [callable, NULL, args...]
    # (3.13). LOAD_GLOBAL with its low bit and a method load push in the same order, the
    # method form being [method, self] on every version.
    null_first: bool
    # 3.11 precedes every CALL n by PRECALL n.
    precall: bool
    # Keyword names of a call: KW_NAMES (a constant tuple) before CALL (3.11, 3.12), or the
    # tuple pushed last and CALL_KW (3.13).
    call_kw: bool
    # A method load: LOAD_METHOD name (3.11), or LOAD_ATTR (True, name) (3.12+, where every
    # LOAD_ATTR's argument is (method bit, name)).
    attr_pair: bool
    # MAKE_FUNCTION takes flags for the defaults, kwdefaults, annotations and closure below
    # the code (3.11, 3.12); 3.13's takes none, and SET_FUNCTION_ATTRIBUTE flag sets each.
    make_function_flags: bool
    # The instructions at an exhausted FOR_ITER's target, which CPython jumps past (3.12:
    # END_FOR; 3.13: END_FOR, POP_TOP); the `bytecode` package models them as popping the
    # iterator and one more value that FOR_ITER leaves there.
    for_iter_exit: tuple
    # A load of a local that may be unbound, raising UnboundLocalError then: 3.12's
    # LOAD_FAST assumes a bound local (the compiler proves it), LOAD_FAST_CHECK checks.
    checked_load: str
    # Pushes a cell of this frame (for a closure): LOAD_CLOSURE, or LOAD_FAST of the cell or
    # free variable (3.13, where LOAD_CLOSURE is only a pseudo-instruction).
    cell_load: str
    # The prefix of a forward conditional jump popping the value on top (IF_NONE, IF_FALSE...):
    # 3.11 names each conditional jump's direction (POP_JUMP_FORWARD_IF_NONE), 3.12+ have
    # only forward ones and do not name it (POP_JUMP_IF_NONE).
    forward_jump: str
    # 3.13's conditional jumps take a bool, which TO_BOOL makes of any object; 3.11 and
    # 3.12's test the truth of any object themselves.
    to_bool: bool


_FACTS = {
    (3, 11): BytecodeFacts(null_first=True, precall=True, call_kw=False, attr_pair=False,
                           make_function_flags=True, for_iter_exit=(),
                           checked_load="LOAD_FAST", cell_load="LOAD_CLOSURE",
                           forward_jump="POP_JUMP_FORWARD_", to_bool=False),
    (3, 12): BytecodeFacts(null_first=True, precall=False, call_kw=False, attr_pair=True,
                           make_function_flags=True, for_iter_exit=("END_FOR",),
                           checked_load="LOAD_FAST_CHECK", cell_load="LOAD_CLOSURE",
                           forward_jump="POP_JUMP_", to_bool=False),
    (3, 13): BytecodeFacts(null_first=False, precall=False, call_kw=True, attr_pair=True,
                           make_function_flags=False, for_iter_exit=("END_FOR", "POP_TOP"),
                           checked_load="LOAD_FAST_CHECK", cell_load="LOAD_FAST",
                           forward_jump="POP_JUMP_", to_bool=True),
}
# None on an unsupported interpreter, where nothing is captured.
BYTECODE = _FACTS.get(VERSION) if SUPPORTED else None

# 3.13's superinstructions, each the two instructions it stands for (the argument is the
# pair of names, in order). Capture reads code with them split (capture/instructions.py),
# so one handler, liveness and residual code deal with each local access.
SUPERINSTRUCTIONS = {
    "LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
    "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
    "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
}

# Instructions that end a function normally (3.12 added RETURN_CONST).
RETURNS = frozenset({"RETURN_VALUE", "RETURN_CONST"})


def arg_slot_count(code) -> int:
    """Number of leading localsplus slots that hold arguments at frame start (the same
    layout on 3.11-3.13)."""
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & inspect.CO_VARARGS)
    n += bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return n
