"""Calls of user functions in a loop nest: the callee's bytecode -> a CFG of its own (a
Callee), expanded into the C kernel at each call; the nest's Python form calls the function.

The callee (a plain function of the user's: no closure, generator, *args, keyword-only
parameters or recursion) is walked like a nest (recognise._Walk) from its first instruction,
with its parameters typed by the call's arguments (positional; trailing defaults that are
Python scalars fill the rest) until its types settle; each `return` copies into `rv` and
leaves. The call is one op, ("call", dst, args, "u_<name>", ("inline", callee)), that may
hand over like any other: the C kernel runs the callee's blocks in place, and an operation
there that cannot go on (an overflow, a zero divisor, a warning NumPy would give) hands the
nest over at the call, so Python calls the function from its start (it writes nothing, so
running it again is running it once) and the exception or warning comes from the user's own
frame and line. What the expansion assumed is guarded (`guard`): the function's code, the
defaults it used, and the globals the callee read.
"""
from __future__ import annotations

import builtins
import inspect
import re
from dataclasses import dataclass, field

from pijit._compat import GENERATOR_LIKE
from pijit.capture.inline import is_library
from pijit.capture.instructions import read_instructions
from pijit.capture.sources import AttrSource, ConstSource, DictItemSource, ItemSource
from pijit.loopnest import calls
from pijit.loopnest import types as T
from pijit.loopnest.ir import Const, Nest, Op
from pijit.loopnest.recognise import (MAX_WALKS, RETURN, Entry, _Walk,
                                      check_ints_in_doubles)
from pijit.loopnest.types import Unsupported

MAX_DEPTH = 4           # calls inlined within calls inlined...: deeper stays Unsupported


@dataclass(eq=False)
class Callee:
    """A user function inlined at one call: its blocks (0 the entry; an exit block ends
    every return) over its own variables (`types`), its parameters' variables in order,
    the trailing defaults the call used (Consts), and the globals it read (name, object,
    found in its module rather than in builtins)."""
    func: object
    blocks: list
    types: dict
    params: list
    defaults: list
    reads: list = field(default_factory=list)
    module_attrs: dict = field(default_factory=dict)    # as Nest.module_attrs

    def __str__(self):
        return self.func.__qualname__

    def listing(self) -> str:
        code = self.func.__code__
        nest = Nest(self.blocks, self.types, {}, self.params, [RETURN], set(), {})
        body = str(nest).split("\n", 1)[1]
        head = (f"inlined {self.func.__qualname__}(" +
                ", ".join(f"{p}: {T.vt_name(self.types[p])}" for p in self.params) +
                f") -> {T.vt_name(self.types[RETURN])}  [{code.co_filename}:"
                f"{code.co_firstlineno}]")
        return head + "\n" + body         # (the functions it inlines in turn listed after)


def call(walk, block, stack, pos, fn, operands):
    """The walk's call of user function fn with operands: the call op emitted, its result
    pushed; Unsupported when fn cannot be inlined."""
    chain = getattr(walk, "chain", ())
    _check(fn, chain)
    code = fn.__code__
    nparams = code.co_argcount
    defaults = fn.__defaults__ or ()
    missing = nparams - len(operands)
    if missing < 0 or missing > len(defaults):
        raise Unsupported(f"{fn.__qualname__}() called with {len(operands)} arguments")
    used = []
    for d in defaults[len(defaults) - missing:]:
        t = T.of_value(d)
        if t is None:
            raise Unsupported(f"{fn.__qualname__}() with a default {d!r}")
        used.append(Const(d, t))
    callee = build(fn, [walk.type(x) for x in operands] + [(c.type,) for c in used], used,
                   chain + (fn,))
    fname = _register(walk, fn)
    dst = f"t{pos}"
    walk.define(dst, callee.types[RETURN])
    block = walk.emit(block, Op("call", dst, tuple(operands), fname, ("inline", callee)))
    stack.append(("v", dst))
    return block


def _check(fn, chain):
    code = fn.__code__
    name = fn.__qualname__
    if fn in chain:
        raise Unsupported(f"a recursive call of {name}")
    if len(chain) >= MAX_DEPTH:
        raise Unsupported(f"{name}: calls nested deeper than {MAX_DEPTH}")
    if code.co_flags & (GENERATOR_LIKE | inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) or \
            code.co_kwonlyargcount:
        raise Unsupported(f"{name} is a generator or takes *args, **kwargs or keywords")
    if code.co_freevars or code.co_cellvars:
        raise Unsupported(f"{name} has a closure")
    if is_library(fn):
        raise Unsupported(f"{name} is library code")


def _register(walk, fn) -> str:
    """The name the Python form calls fn by (`_f_u_<name>`), unique in the nest: an
    identifier whatever fn's __name__ (`<lambda>`, or any string a decorator set)."""
    base = "u_" + re.sub(r"[^0-9A-Za-z_]", "_", fn.__name__)
    fname, k = base, 1
    while walk.funcs.get(fname, fn) is not fn:
        k += 1
        fname = f"{base}{k}"
    walk.funcs[fname] = fn
    return fname


class _CalleeWalk(_Walk):
    """recognise's walk over a whole function: a return copies its value into `rv` and
    leaves; calls in it are inlined in turn (`chain`: the functions being inlined)."""

    def __init__(self, instrs, entries, types, resolve, chain):
        super().__init__(instrs, 0, len(instrs) - 1, entries, types, resolve, True)
        self.chain = chain


def build(fn, arg_types: list, defaults: list, chain: tuple) -> Callee:
    """fn's Callee for parameters of these types (Unsupported if its body is not one a
    nest can run: the same rules as a nest's, arrays and loops over them excepted)."""
    code = fn.__code__
    params = list(code.co_varnames[:code.co_argcount])
    instrs = read_instructions(code)
    reads = []

    def resolve(gname):
        if gname in fn.__globals__:
            obj, found = fn.__globals__[gname], True
        elif hasattr(builtins, gname):
            obj, found = getattr(builtins, gname), False
        else:
            raise Unsupported(f"global {gname!r} is not defined")
        reads.append((gname, obj, found))
        return obj

    entries = {p: Entry() for p in params}
    types = {"l_" + p: t for p, t in zip(params, arg_types)}
    for _ in range(MAX_WALKS):
        reads.clear()
        walk = _CalleeWalk(instrs, entries, types, resolve, chain)
        walk.run(None, None)
        if not walk.changed:
            break
    else:
        raise Unsupported(f"types of {fn.__qualname__}'s values did not settle")
    if RETURN not in types:
        raise Unsupported(f"{fn.__qualname__} never returns")
    check_ints_in_doubles(walk.blocks, types)
    callee = Callee(fn, walk.blocks, dict(types), ["l_" + p for p in params], defaults,
                    list({r[0]: r for r in reads}.values()), walk.module_attrs)
    nest = Nest(callee.blocks, callee.types, {}, callee.params, [RETURN], set(), {})
    # (a local: temporaries are set before they are read, a loop's index by its FOR_ITER)
    unbound = {v for v in nest.live_in()[0] if v.startswith("l_")} - set(callee.params)
    if unbound:
        raise Unsupported(f"{fn.__qualname__}: {', '.join(sorted(unbound))} may be unbound")
    return callee


def guard_module_attrs(cap, module_attrs: dict):
    """Each module attribute a nest or a callee read is the object it took (a test may
    monkeypatch math.sqrt between calls); the modules are guarded where they are read."""
    for (module, name), obj in module_attrs.items():
        cap.builder.guard(AttrSource(ConstSource(module, module.__name__), name), "id", obj)


def callees(blocks) -> list:
    """The Callees of the inline calls in blocks (not those nested in them), in order."""
    out = []
    for b in blocks:
        for op in b.ops:
            if op.domain[:1] == ("inline",) and op.domain[1] not in out:
                out.append(op.domain[1])
    return out


def all_ops(blocks):
    """Every op of blocks and of the callees inlined into them, at any depth."""
    for b in blocks:
        yield from b.ops
    for c in callees(blocks):
        yield from all_ops(c.blocks)


def guard(cap, nest):
    """Guard what the nest's inlined calls assumed: each function's code, the number of
    its defaults and those it used, and the globals it read (the callee's module may be
    another than the caller's: read through its `__globals__`)."""
    seen = set()
    todo = callees(nest.blocks)
    while todo:
        callee = todo.pop()
        fn = callee.func
        todo += callees(callee.blocks)
        if id(callee) in seen:
            continue
        seen.add(id(callee))
        source = ConstSource(fn, fn.__qualname__)
        cap.builder.guard(AttrSource(source, "__code__"), "id", fn.__code__)
        if callee.defaults:
            defaults = AttrSource(source, "__defaults__")
            cap.builder.guard(defaults, "type", tuple)
            cap.builder.guard(defaults, "len", len(fn.__defaults__))
            first = len(fn.__defaults__) - len(callee.defaults)
            for i, c in enumerate(callee.defaults, start=first):
                cap.builder.guard(ItemSource(defaults, i), "eq", c.value)
        guard_module_attrs(cap, callee.module_attrs)
        globs = AttrSource(source, "__globals__")
        for name, obj, found in callee.reads:
            if found and calls.global_constant(obj) is not None:
                cap.builder.guard(DictItemSource(globs, name), "eq", obj)
            elif found:
                cap.builder.wrap(obj, DictItemSource(globs, name))
            else:
                cap.builder.guard(globs, "call", lambda g, name=name: name not in g,
                                  f"no global {name!r} in")


def lower(kernel, op, bail) -> list:
    """The C of an inline call: the callee's blocks in a block of their own (their variables
    declared there, prefixed by a number unique in the kernel: a call copied into versioned
    loops expands once per copy), every hand-over in them going where the call's would
    (`bail`), then dst = the returned value."""
    from pijit.loopnest.lower_c import ctype
    callee = op.domain[1]
    k = kernel.inlined = getattr(kernel, "inlined", -1) + 1
    p = f"i{k}_"
    code = callee.func.__code__
    lines = [f"{{   /* {callee.func.__qualname__} inlined ({code.co_filename}:"
             f"{code.co_firstlineno}) */"]
    for v in sorted(callee.types):
        kernel.vtypes[p + v] = callee.types[v]
        lines.append(f"    {ctype(T.carrier(callee.types[v]))} v_{p}{v} = 0;")
        if len(callee.types[v]) > 1:
            lines.append(f"    unsigned char g_{p}{v} = 0;")
    for param, x in zip(callee.params, op.args + tuple(callee.defaults)):
        lines += ["    " + s for s in kernel.op(Op("copy", p + param, (x,)), 0, bail)]
    for b in callee.blocks:
        lines.append(f"{p}b{b.id}: ;")
        for inner in b.ops:
            lines += ["    " + s for s in kernel.op(_renamed(inner, p), 0, bail)]
        lines += ["    " + s for s in _term(b.term, p, bail)]
    lines.append(f"{p}ret: ;")
    lines += ["    " + s for s in kernel.op(Op("copy", op.dst, (p + RETURN,)), 0, bail)]
    for v in callee.types:
        del kernel.vtypes[p + v]
    return lines + ["}"]


def _renamed(op, p) -> Op:
    def r(x):
        return p + x if isinstance(x, str) else x
    return Op(op.kind, r(op.dst) if op.dst is not None else None, tuple(map(r, op.args)),
              op.op, op.domain, op.lineno, op.results)


def _term(t, p, bail) -> list:
    if t[0] == "jump":
        return [f"goto {p}b{t[1]};"]
    if t[0] == "branch":
        return [f"if (v_{p}{t[1]}) goto {p}b{t[2]}; else goto {p}b{t[3]};"]
    if t[0] == "foriter":
        it = f"v_{p}{t[1]}"
        return [f"if ({it}_step > 0 ? {it}_cur < {it}_stop : {it}_cur > {it}_stop) {{",
                "    int64_t nx;",
                f"    if (__builtin_add_overflow({it}_cur, {it}_step, &nx)) {bail}",
                f"    v_{p}{t[2]} = {it}_cur; {it}_cur = nx;",
                f"    goto {p}b{t[3]};",
                "}",
                f"goto {p}b{t[4]};"]
    return [f"goto {p}ret;"]
