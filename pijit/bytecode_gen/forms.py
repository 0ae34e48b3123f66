"""Instruction forms that depend on the CPython version: calls, attribute loads,
function creation, loads of locals that may be unbound, closure cells, jumps.

Generated code (transformed functions, residual spans, resume functions) builds these
through here; the differences themselves are declared in pijit._compat.BYTECODE.
"""
from __future__ import annotations

from bytecode import FreeVar, Instr

from pijit import _compat


def call(fn: list, args: list, kw_names: tuple = (), *, lineno) -> list:
    """Call what `fn` pushes with the values `args` push (a list of instruction lists, the
    last len(kw_names) of them passed by keyword); the result is left on the stack."""
    facts = _compat.BYTECODE
    out = with_null(fn, lineno=lineno)
    for arg in args:
        out += arg
    n = len(args)
    if kw_names and facts.call_kw:
        return out + [Instr("LOAD_CONST", tuple(kw_names), lineno=lineno),
                      Instr("CALL_KW", n, lineno=lineno)]
    if kw_names:
        out.append(Instr("KW_NAMES", tuple(kw_names), lineno=lineno))
    if facts.precall:
        out.append(Instr("PRECALL", n, lineno=lineno))
    return out + [Instr("CALL", n, lineno=lineno)]


def with_null(fn: list, *, lineno) -> list:
    """`fn` (instructions pushing a callable) with the NULL a call of it needs beside it."""
    null = [Instr("PUSH_NULL", lineno=lineno)]
    return null + fn if _compat.BYTECODE.null_first else fn + null


def load_attr(name: str, *, lineno) -> Instr:
    """`TOS.name` (not the method form)."""
    return Instr("LOAD_ATTR", (False, name) if _compat.BYTECODE.attr_pair else name,
                 lineno=lineno)


def make_function(flags: int, *, lineno) -> list:
    """Make a function of the code on top of the stack, with the attributes below it that
    `flags` names (0x01 defaults, 0x02 kwdefaults, 0x04 annotations, 0x08 closure, pushed
    in that order before the code)."""
    if _compat.BYTECODE.make_function_flags:
        return [Instr("MAKE_FUNCTION", flags, lineno=lineno)]
    # 3.13: the attribute pushed last is set first.
    return [Instr("MAKE_FUNCTION", lineno=lineno)] + [
        Instr("SET_FUNCTION_ATTRIBUTE", flag, lineno=lineno)
        for flag in (0x08, 0x04, 0x02, 0x01) if flags & flag]


def load_checked(name: str, *, lineno) -> Instr:
    """Push local `name`, raising UnboundLocalError when it is unbound (on 3.12+ a plain
    LOAD_FAST of an unbound local would push NULL)."""
    return Instr(_compat.BYTECODE.checked_load, name, lineno=lineno)


def load_cell(name: str, *, lineno) -> Instr:
    """Push the cell of this code's free variable `name` (to build a closure)."""
    return Instr(_compat.BYTECODE.cell_load, FreeVar(name), lineno=lineno)


def jump_forward(condition: str, target, *, lineno) -> Instr:
    """Pop TOS and jump forward to `target` when it is `condition` ("NONE", "NOT_NONE",
    "FALSE", "TRUE")."""
    return Instr(f"{_compat.BYTECODE.forward_jump}IF_{condition}", target, lineno=lineno)


def jump_if_truthy(target, *, lineno) -> list:
    """Pop TOS (any object) and jump forward to `target` when it is true."""
    truth = [Instr("TO_BOOL", lineno=lineno)] if _compat.BYTECODE.to_bool else []
    return truth + [jump_forward("TRUE", target, lineno=lineno)]


def for_exit(*, lineno) -> list:
    """What follows the target of a FOR_ITER (a `for` loop's exit): nothing on 3.11; the
    END_FOR (3.12; 3.13: END_FOR, POP_TOP) that an exhausted FOR_ITER jumps past."""
    return [Instr(name, lineno=lineno) for name in _compat.BYTECODE.for_iter_exit]
