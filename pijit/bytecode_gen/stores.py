"""Recorded stores (capture/side_effects.py) -> the instructions that perform them after the
graph call, in program order.

Every object and value the stores use is loaded into a temporary first, and only then are the
stores made: a store must not change what a later one reloads from a source (`self.a, self.b
= self.b, self.a` reloads both before storing either). The caller of `emit_stores` loads
them before it rebuilds the stack and locals of a break, or the returned value, and makes
the stores after.
"""
from __future__ import annotations

from bytecode import FreeVar, Instr

STORE_TEMP = "__pijit_store{}"


def emit_stores(emitter, stores, lineno) -> tuple:
    """(instructions loading every object and value `stores` (side_effects.Store) use into
    temporaries, instructions then making the stores, the temporaries' names). The loads
    come before the caller rebuilds the locals of a break: a value reloaded from a local's
    source must be the one the store saw, not what the local is rebound to after it
    (`out.append(t0); t0 = ...` in a loop body: the append took the new t0)."""
    at = lineno
    loads, temps = [], {}

    def temp(value):
        name = temps.get(id(value))
        if name is None:
            name = temps[id(value)] = STORE_TEMP.format(len(temps))
            loads.extend(emitter.emit(value) + [Instr("STORE_FAST", name, lineno=at)])
        return Instr("LOAD_FAST", name, lineno=at)

    used = [(temp(s.target) if s.target is not None else None, temp(s.value)) for s in stores]
    out = []
    for store, (target, value) in zip(stores, used):
        if store.kind == "attr":
            out += [value, target, Instr("STORE_ATTR", store.key, lineno=at)]
        elif store.kind == "global":
            out += [value, Instr("STORE_GLOBAL", store.key, lineno=at)]
        elif store.kind == "cell":
            out += [value, Instr("STORE_DEREF", FreeVar(store.key[1]), lineno=at)]
        elif store.kind == "append":        # the list's type is guarded: list.append itself
            out += [target, value, Instr("LIST_APPEND", 1, lineno=at),
                    Instr("POP_TOP", lineno=at)]
        elif store.kind == "setitem":
            out += [value, target, Instr("LOAD_CONST", store.key, lineno=at),
                    Instr("STORE_SUBSCR", lineno=at)]
        else:
            raise ValueError(f"unknown store kind {store.kind!r}")
    return loads, out, list(temps.values())
