"""A failed graph, run again as the user's frame: captured graph + bindings -> replay function.

When a graph raises (a FloatingPointError in a fused kernel under np.errstate(all="raise"),
an IndexError from a run-time index), the frame a debugger should land in is the user's
function at the line that failed, holding the user's locals; the compiled graph keeps none of
them (a fused group never materializes the values it computes). A graph that writes into no
array can be run again without effect. Its replay function takes the transformed function's
arguments, computes each captured node in program order by calling the node's NumPy function,
and stores each value into the local the user's code stored it in (capture's Bindings), at
the user's lines, under the name, file and free variables of the user's function. So it
raises where plain Python raises, in a frame holding what plain Python's would; that
exception replaces the original (pijit.tracebacks then drops the transformed frame it
continues). Values the user never named stay on the stack, as in the user's expressions; a
loop node runs as the user's `for` loop (its index and carried values in the user's locals,
stored back after each iteration), so a failing iteration is found with its locals; and an
inlined call of a user function runs as a call of a function standing for the callee's
frame (capture's InlineCall records), so an error in a helper shows both frames.
"""
from __future__ import annotations

import dataclasses
import inspect
import operator
import sys
import types

from bytecode import FreeVar, Instr, Label

from pijit import config
from pijit._compat import arg_slot_count
from pijit.backends import creation
from pijit.backends.numpy_backend import plan_inlining
from pijit.bytecode_gen import forms
from pijit.bytecode_gen.copy import assemble, prologue
from pijit.bytecode_gen.reconstruct import INTERNAL_PREFIX, TEMP_NAME, emit_load
from pijit.capture.sources import (AttrSource, ConstSource, DictItemSource, GlobalSource,
                                   ItemSource, LocalSource)
from pijit.capture.values import ConstValue, GraphValue, NullValue, TupleValue, Value
from pijit.graph.ir import Graph, LoopOp, Node, Ref, arg_refs, node_refs
from pijit.graph.purity import mutates
from pijit.quiet import warnings_as, warnings_unshown


# Running out of memory or stack: running the graph again would only need more of it.
_NOT_REPLAYED = (MemoryError, RecursionError)


class Replay:
    """The graph handler's callback in a transformed function of `code` (the user's code, or
    a resume function's): replay(exc) -> the exception plain Python raises there, or None
    to re-raise exc (a graph that writes into arrays, an exception that is not an ordinary
    error such as KeyboardInterrupt, or is MemoryError or RecursionError, a replay that does
    not fail)."""

    def __init__(self, code, capture, register):
        self.code = code
        self.graph = capture.graph
        self.sources = {ref.index: source for ref, source in
                        zip(capture.graph.inputs, capture.input_sources)}
        # What an entry keeps (for as long as it lives): values by how to rebuild them,
        # never the user's objects that capture saw (a model `self`, its arrays).
        self.bindings = [dataclasses.replace(b, value=_kept(b.value))
                         for b in capture.bindings or ()]
        self.inlines = [dataclasses.replace(c, args={k: _kept(v) for k, v in c.args.items()},
                                            ret=_kept(c.ret),
                                            bindings=[dataclasses.replace(b, value=_kept(b.value))
                                                      for b in c.bindings])
                        for c in capture.inlines or ()]
        self.register = register        # register(code): the replay code stands for `code`
        self.replayable = not any(mutates(n) or any(k == "out" for k, _ in n.kwargs)
                                  for n in self.graph.nodes)
        self._code = None

    def __call__(self, exc):
        if not self.replayable or not isinstance(exc, Exception) or \
                isinstance(exc, _NOT_REPLAYED) or config.env_full_tracebacks():
            return None
        frame = sys._getframe(1)        # the transformed function's, in its handler
        try:
            fn, args = self._function(frame)
        except Exception:               # noqa: BLE001 - no replay: the original stands
            return None
        finally:
            del frame
        try:
            # The run that failed gave the warnings plain Python gives up to the error: the
            # replay, which redoes that work, must not give them twice (process-wide: another
            # thread's warning during a replay is not shown). A warning the user's filters made
            # the error goes through those filters again, to raise at its line.
            with warnings_unshown() if isinstance(exc, Warning) else warnings_as("ignore"):
                fn(*args)
        except Exception as replayed:   # what plain Python raises there
            if type(replayed) is not type(exc):
                return None
            replayed.__traceback__ = replayed.__traceback__.tb_next    # this frame's entry
            replayed.__context__ = exc.__context__
            replayed.__suppress_context__ = exc.__suppress_context__
            return replayed
        return None

    def _function(self, frame):
        """The replay function made with the frame's globals and free variables, and the
        frame's arguments."""
        if self._code is None:
            self._code = replay_code(self.code, self.graph, self.sources, self.bindings,
                                     self.inlines)
            self.register(self._code)
        local = frame.f_locals
        cells = tuple(types.CellType(local[n]) if n in local else types.CellType()
                      for n in self.code.co_freevars)
        args = [local[n] for n in self.code.co_varnames[:arg_slot_count(self.code)]]
        fn = types.FunctionType(self._code, frame.f_globals, self.code.co_name, None,
                                cells or None)
        return fn, args


def replay_code(code, graph, sources: dict, bindings: list, inlines=()) -> types.CodeType:
    """The code of the replay function of `graph` (see the module docstring)."""
    first = code.co_firstlineno
    external = {index: (lambda lineno, s=source: emit_load(s, lineno))
                for index, source in sources.items()}
    frames = _CalleeFrames(graph, sources, bindings, inlines)
    nodes, positions = frames.level(list(graph.nodes), 0, 0)
    top = _Block(first, dataclasses.replace(graph, nodes=nodes, outputs=[]), bindings, external,
                 "", emit_load, positions=positions)
    end = graph.nodes[-1].lineno if graph.nodes and graph.nodes[-1].lineno else first
    body = top.instructions() + [Instr("LOAD_CONST", None, lineno=end),
                                 Instr("RETURN_VALUE", lineno=end)]
    return assemble(prologue(code, first) + body, code, code.co_varnames[:arg_slot_count(code)],
                    code.co_name, code.co_qualname)


class _Load:
    """A node argument of a call standing for an inlined call: an argument read from its
    source in the calling frame (`self` of a method, ...)."""
    __slots__ = ("source",)

    def __init__(self, source):
        self.source = source


class _CalleeFrames:
    """Inlined calls of user functions replayed as calls of functions standing for the
    callees' frames (their names, files, lines, globals, closures and locals), so that an
    error in a callee shows the callee's frame under the caller's, as in plain Python. A
    call whose values reach the caller other than through what it returns, or whose
    arguments or reads cannot be rebuilt in a frame of its own, stays inlined."""

    def __init__(self, graph, sources, bindings, inlines):
        self.sources = sources
        self.calls = [c for c in inlines if c.func is not None and c.first < c.last]
        self.next_value = graph.num_values
        # Where each value is read: node positions, and the bindings reading it.
        self.node_reads, self.binding_reads = {}, {}
        for pos, node in enumerate(graph.nodes):
            for ref in node_refs(node):
                self.node_reads.setdefault(ref.index, set()).add(pos)
        for binding in list(bindings) + [b for c in inlines for b in c.bindings]:
            for ref in _value_refs(binding.value):
                self.binding_reads.setdefault(ref, []).append(binding)

    def level(self, nodes, offset, depth) -> tuple:
        """(nodes, the graph position of each): nodes (at graph positions offset...), each
        call of depth + 1 among them replaced by a node calling its frame's function (at the
        call's first position), when it can have one."""
        out, pos = [], offset
        end = offset + len(nodes)
        for call in sorted((c for c in self.calls if c.depth == depth + 1 and
                            offset <= c.first and c.last <= end), key=lambda c: c.first):
            if call.first < pos:
                continue
            out += [(p, nodes[p - offset]) for p in range(pos, call.first)]
            own = nodes[call.first - offset:call.last - offset]
            frame = self._frame(call, own)
            out += [(call.first, n) for n in frame] if frame else \
                [(call.first + k, n) for k, n in enumerate(own)]
            pos = call.last
        out += [(p, nodes[p - offset]) for p in range(pos, end)]
        return [n for _, n in out], [p for p, _ in out]

    def _frame(self, call, nodes):
        """The node(s) calling the callee's frame function in place of its nodes, or None."""
        code = call.func.__code__
        if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
            return None
        params = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        if set(params) != set(call.args):
            return None
        args = [_as_arg(call.args[p]) for p in params]
        ret = _as_arg(call.ret)
        if any(a is _NO for a in args) or ret is _NO:
            return None
        produced = {n.out for n in nodes}
        returned = _returned_refs(call.ret, produced)
        own_bindings = {id(b) for c in self.calls if call.first <= c.first and
                        c.last <= call.last for b in c.bindings} | {id(b) for b in call.bindings}
        for ref in produced - set(returned):
            if any(not call.first <= p < call.last for p in self.node_reads.get(ref, ())) or \
                    any(id(b) not in own_bindings for b in self.binding_reads.get(ref, ())):
                return None         # a value of the callee reaches its caller otherwise
        load = _callee_loader(call)
        external, params_of = {}, {}
        for name, value in call.args.items():
            if isinstance(value, GraphValue):
                params_of.setdefault(value.ref.index, name)
        reads = {r.index for n in nodes for r in node_refs(n)} | set(_value_refs(call.ret)) | \
            {r for b in call.bindings for r in _value_refs(b.value)}
        for index in reads - produced:
            if index in params_of:
                external[index] = _local(params_of[index])
            elif index in self.sources and load(self.sources[index], 0) is not None:
                external[index] = lambda lineno, s=self.sources[index]: load(s, lineno)
            else:
                return None         # a value of the caller it does not get as an argument
        lined = [dataclasses.replace(n, lineno=line) for n, line in zip(nodes, call.lines)]
        inner, positions = self.level(lined, call.first, call.depth)
        first = code.co_firstlineno
        returns = Graph(nodes=inner, outputs=[Ref(r) for r in _value_refs(call.ret)])
        block = _Block(first, returns, call.bindings, external, f"c{call.first}_", load,
                       positions=positions)
        end = call.lines[-1] or first
        body = block.instructions() + block.operand(ret, end) + [Instr("RETURN_VALUE", lineno=end)]
        fn = types.FunctionType(assemble(prologue(code, first) + body, code, params,
                                         code.co_name, code.co_qualname),
                                call.func.__globals__, code.co_name, None, call.func.__closure__)
        line, meta = nodes[0].lineno, nodes[-1].meta
        if len(returned) == 1 and isinstance(call.ret, GraphValue):
            return [Node(returned[0], "call", fn, tuple(args), (), meta, line)]
        out = self.next_value
        self.next_value += 1
        items = [Node(index, "tuple_item", operator.getitem, (Ref(out), k), (), meta, line)
                 for k, index in enumerate(_tuple_refs(call.ret, produced)) if index is not None]
        return [Node(out, "call", fn, tuple(args), (), meta, line)] + items


_NO = object()


class _Sourced(Value):
    """A value capture read from a source, kept by its source alone."""


def _kept(value):
    """value as a replay keeps it: graph values, constants and NULLs as they are, tuples item by
    item, anything else read from a source by its source (None: not rebuilt)."""
    if isinstance(value, (GraphValue, ConstValue, NullValue)):
        return value
    if isinstance(value, TupleValue):
        return TupleValue([_kept(v) for v in value.items], source=value.source)
    if getattr(value, "source", None) is not None:
        return _Sourced(source=value.source)
    return None


def _as_arg(value):
    """A Value as a node argument: a Ref, a constant, a _Load, a tuple of those; or _NO."""
    if isinstance(value, GraphValue):
        return Ref(value.ref.index)
    if isinstance(value, ConstValue):
        return value.value
    if isinstance(value, TupleValue):
        items = tuple(_as_arg(v) for v in value.items)
        return _NO if any(i is _NO for i in items) else items
    if getattr(value, "source", None) is not None:
        return _Load(value.source)
    return _NO


def _value_refs(value) -> list:
    if isinstance(value, GraphValue):
        return [value.ref.index]
    if isinstance(value, TupleValue):
        return [r for v in value.items for r in _value_refs(v)]
    return []


def _returned_refs(ret, produced) -> list:
    """The callee's values its caller receives: the returned value, or a tuple's items."""
    if isinstance(ret, GraphValue):
        return [ret.ref.index] if ret.ref.index in produced else []
    return [i for i in _tuple_refs(ret, produced) if i is not None]


def _tuple_refs(ret, produced) -> list:
    if not isinstance(ret, TupleValue):
        return []
    return [v.ref.index if isinstance(v, GraphValue) and v.ref.index in produced else None
            for v in ret.items]


def _callee_loader(call):
    """load(source, lineno) -> instructions reading a source (relative to the captured
    function, as capture made them) in the callee's frame, or None."""
    code = call.func.__code__
    arg_sources = {v.source: name for name, v in call.args.items()
                   if getattr(v, "source", None) is not None}

    def load(source, lineno):
        if source in arg_sources:
            return [Instr("LOAD_FAST", arg_sources[source], lineno=lineno)]
        if isinstance(source, DictItemSource) and source.base == \
                AttrSource(call.fn_source, "__globals__"):
            return [Instr("LOAD_GLOBAL", (False, source.key), lineno=lineno)]
        if isinstance(source, AttrSource) and source.attr == "cell_contents" and \
                isinstance(source.base, ItemSource) and \
                source.base.base == AttrSource(call.fn_source, "__closure__"):
            return [Instr("LOAD_DEREF", FreeVar(code.co_freevars[source.base.index]),
                          lineno=lineno)]
        if isinstance(source, (GlobalSource, ConstSource)):
            return emit_load(source, lineno)
        if isinstance(source, (AttrSource, ItemSource, DictItemSource)):
            base = load(source.base, lineno)
            if base is not None:
                return base + emit_load(source, lineno)[len(emit_load(source.base, lineno)):]
        return None
    return load


class _Block:
    """The instructions computing one graph's nodes in order (the function's graph, or a
    loop node's body inside its `for`), with the bindings into the user's locals between
    them. external: value number -> instructions loading a value this graph does not
    compute (a graph input from its source; in a body, a local or the parent's value)."""

    def __init__(self, firstlineno, graph, bindings, external: dict, tag: str, load,
                 locals_=None, positions=None):
        self.first, self.external, self.tag, self.load = firstlineno, external, tag, load
        self.locals = locals_ or {}         # value number -> the user's local holding it
        named = {b.value.ref.index for b in bindings if self.node_ref(b.value) is not None}
        self.inlined = plan_inlining(graph, keep=named)
        self.by_out = {node.out: node for node in graph.nodes}
        self.steps = _steps(graph, positions or range(len(graph.nodes)), bindings, self.inlined)
        self.homes, self.skip, self.last_use = self._homes(graph.outputs)

    def node_ref(self, value):
        """The value number of the node computing a bound value, if a node does."""
        if isinstance(value, GraphValue) and value.source is None and \
                value.ref.index not in self.external:
            return value.ref.index
        return None

    def instructions(self) -> list:
        # An argument restored after being stored over (3.12+: a comprehension reusing its
        # name restores it) is reloaded from a copy made at the start, deleted once restored.
        stored, restores = set(), {}
        for i, (kind, item) in enumerate(self.steps):
            if kind == "bind":
                if _is_own_argument(item) and item.name in stored:
                    restores[item.name] = i
                stored.add(item.name)
        out = []
        for name in restores:
            out += [Instr("LOAD_FAST", name, lineno=self.first),
                    Instr("STORE_FAST", _ARG_COPY.format(name), lineno=self.first)]
        for i, (kind, item) in enumerate(self.steps):
            if kind == "node":
                lineno = item.lineno or self.first
                out += self.node_expr(item) + [Instr("STORE_FAST", self.homes[item.out],
                                                     lineno=lineno)]
            else:
                lineno = item.lineno
                ref = self.node_ref(item.value)
                load = [] if i in self.skip else \
                    _unbind(item.name, lineno) if isinstance(item.value, NullValue) else \
                    [Instr("LOAD_FAST", self.homes[ref], lineno=lineno)] if ref is not None \
                    else [Instr("LOAD_FAST", _ARG_COPY.format(item.name), lineno=lineno)] \
                    if item.name in restores and _is_own_argument(item) else \
                    self._load_value(item)
                if load:
                    out += load + [Instr("STORE_FAST", item.name, lineno=lineno)]
                if restores.get(item.name) == i:
                    out.append(Instr("DELETE_FAST", _ARG_COPY.format(item.name), lineno=lineno))
            out += [Instr("DELETE_FAST", self.homes[k], lineno=lineno)
                    for k, last in self.last_use.items()
                    if last == i and self.homes[k] == self.temp(k)]
        return out

    def temp(self, index) -> str:
        return TEMP_NAME.format(f"{self.tag}{index}")

    def operand(self, arg, lineno) -> list:
        if isinstance(arg, Ref):
            if arg.index in self.external:
                return self.external[arg.index](lineno)
            if arg.index in self.inlined:
                return self.node_expr(self.by_out[arg.index])
            return [Instr("LOAD_FAST", self.homes[arg.index], lineno=lineno)]
        if type(arg) in (tuple, list):
            build = "BUILD_TUPLE" if type(arg) is tuple else "BUILD_LIST"
            return [i for a in arg for i in self.operand(a, lineno)] + \
                [Instr(build, len(arg), lineno=lineno)]
        if type(arg) is dict:
            return [i for k, v in arg.items()
                    for i in self.operand(k, lineno) + self.operand(v, lineno)] + \
                [Instr("BUILD_MAP", len(arg), lineno=lineno)]
        if type(arg) is slice:
            return [i for a in (arg.start, arg.stop, arg.step) for i in self.operand(a, lineno)] \
                + [Instr("BUILD_SLICE", 3, lineno=lineno)]
        if isinstance(arg, _Load):
            return self.load(arg.source, lineno)
        return [Instr("LOAD_CONST", arg, lineno=lineno)]

    def _load_value(self, binding) -> list:
        """Instructions loading a bound value no node computes: from its source, or a
        constant; none for an argument still bound to itself or a value not rebuilt here."""
        value = binding.value
        if value is None:
            return []
        if value.source is not None:
            if isinstance(value.source, LocalSource) and value.source.local == binding.name:
                return []
            return self.load(value.source, binding.lineno) or []
        if isinstance(value, ConstValue):
            return [Instr("LOAD_CONST", value.value, lineno=binding.lineno)]
        return []

    def node_expr(self, node) -> list:
        """Instructions leaving the node's value on the stack."""
        if isinstance(node.fn, LoopOp):
            return self.loop(node)
        lineno = node.lineno or self.first
        args = [self.operand(arg, lineno) for arg in node.args] + \
            [self.operand(value, lineno) for _, value in node.kwargs]
        fn = creation.replacement(node.fn, node.args, node.kwargs)
        return forms.call([Instr("LOAD_CONST", fn, lineno=lineno)], args,
                          tuple(k for k, _ in node.kwargs), lineno=lineno)

    def loop(self, node) -> list:
        """A loop node as the user's `for` loop: the index and the carried values in the
        user's locals, the body's nodes at their lines, each iteration's results stored back;
        its value, the tuple of the final carried and last values, left on the stack."""
        op, lineno = node.fn, node.lineno or self.first
        bounds, init, invariant = op.split_args(node.args)
        body, n = op.body, op.n_carried
        carried, index = list(body.input_names[:n]), body.input_names[n]
        results = carried + list(op.names[n:])
        external = {ref.index: _local(name) for ref, name in zip(body.inputs, carried + [index])}
        for ref, arg in zip(body.inputs[n + 1:], invariant):
            external[ref.index] = lambda at, arg=arg: self.operand(arg, at)
        inner = _Block(self.first, body, [], external, f"{self.tag}{node.out}_", self.load,
                       {ref.index: name for ref, name in zip(body.inputs, carried + [index])})
        head, done = Label(), Label()
        out = []
        for name, arg in zip(carried, init):
            out += self.operand(arg, lineno) + [Instr("STORE_FAST", name, lineno=lineno)]
        out += forms.call([Instr("LOAD_CONST", range, lineno=lineno)],
                          [self.operand(arg, lineno) for arg in bounds], lineno=lineno)
        out += [Instr("GET_ITER", lineno=lineno), head, Instr("FOR_ITER", done, lineno=lineno),
                Instr("STORE_FAST", index, lineno=lineno)] + inner.instructions()
        out += [i for ref in body.outputs for i in inner.operand(ref, lineno)]
        out += [Instr("DELETE_FAST", inner.homes[k], lineno=lineno)
                for k, last in inner.last_use.items()
                if last == len(inner.steps) and inner.homes[k] == inner.temp(k)]
        out += [Instr("STORE_FAST", name, lineno=lineno) for name in reversed(results)]
        out += [Instr("JUMP_BACKWARD", head, lineno=lineno), done] + forms.for_exit(lineno=lineno)
        return out + [Instr("LOAD_FAST", name, lineno=lineno) for name in results] + \
            [Instr("BUILD_TUPLE", len(results), lineno=lineno)]

    def _homes(self, tail):
        """(local of each statement node, binding steps its node's store already does, step
        of each node's last read). A node's home is the user's local it is stored in right
        after it is computed, when that local keeps it until its last read; else a
        temporary. tail: values read after the last step (a loop body's results)."""
        by_out, inlined = self.by_out, self.inlined

        def reads(node) -> set:
            out = set()
            for ref in node_refs(node):
                if ref.index in inlined:
                    out |= reads(by_out[ref.index])
                elif ref.index not in self.external:
                    out.add(ref.index)
            return out

        last_use, stores, local_reads = {}, {}, {}
        for i, (kind, item) in enumerate(self.steps):
            if kind == "node":
                for k in reads(item):
                    last_use[k] = i
                for ref in node_refs(item):
                    if ref.index in self.locals:
                        local_reads.setdefault(self.locals[ref.index], []).append(i)
                if isinstance(item.fn, LoopOp):     # the loop stores its locals as it runs
                    op = item.fn
                    for name in list(op.body.input_names[:op.n_carried + 1]) + \
                            list(op.names[op.n_carried:]):
                        stores.setdefault(name, []).append(i)
            else:
                ref = self.node_ref(item.value)
                if ref is not None:
                    last_use[ref] = i
                stores.setdefault(item.name, []).append(i)
        homes, skip = {}, set()
        for i, (kind, item) in enumerate(self.steps):
            if kind != "node":
                continue
            homes[item.out] = self.temp(item.out)
            last_use.setdefault(item.out, i)        # never read: its temporary goes at once
            j = self._binding_of(i)
            if j is not None:
                binding = self.steps[j][1]
                later = [k for k in stores[binding.name] if k > i and k != j and
                         not self._starts_loop_with(k, item.out, binding.name)]
                if not later or last_use[item.out] < later[0]:
                    homes[item.out] = binding.name
                    skip.add(j)
            if homes[item.out] == self.temp(item.out):
                name = self._carried_init(item.out, i, last_use[item.out])
                if name is not None and not any(i < j <= last_use[item.out] for j in
                                                stores.get(name, []) + local_reads.get(name, [])
                                                if j != last_use[item.out]):
                    homes[item.out] = name
        for ref in tail:
            for k in reads(by_out[ref.index]) if ref.index in inlined else {ref.index}:
                if k in homes:
                    last_use[k] = len(self.steps)
        return homes, skip, {k: v for k, v in last_use.items() if k in homes}


    def _binding_of(self, i):
        """The step binding the value of the node at step i, when only steps that cannot
        fail come between (items of a tuple result, other bindings): the node can then be
        stored into that local at once."""
        node = self.steps[i][1]
        for j in range(i + 1, len(self.steps)):
            kind, item = self.steps[j]
            if kind == "bind":
                if self.node_ref(item.value) == node.out:
                    return j
            elif item.name != "tuple_item":
                return None
        return None

    def _carried_init(self, index, step, last):
        """The carried local of the loop at step `last` whose initial value alone is value
        `index` (computed at `step`, read nowhere else): the user's code stored it there."""
        kind, node = self.steps[last]
        if last == step or kind != "node" or not isinstance(node.fn, LoopOp):
            return None
        for name in node.fn.body.input_names[:node.fn.n_carried]:
            if self._starts_loop_with(last, index, name):
                return name
        return None

    def _starts_loop_with(self, step, index, name) -> bool:
        """The step is a loop node reading value `index` only as the initial value of its
        carried local `name` (the loop stores into that local after reading it)."""
        kind, node = self.steps[step]
        if kind != "node" or not isinstance(node.fn, LoopOp):
            return False
        op = node.fn
        bounds, init, invariant = op.split_args(node.args)
        carried = list(op.body.input_names[:op.n_carried])
        others = list(bounds) + list(invariant) + [a for n, a in zip(carried, init) if n != name]
        return name in carried and not any(r.index == index for a in others for r in arg_refs(a))


_ARG_COPY = INTERNAL_PREFIX + "arg_{}"


def _is_own_argument(binding) -> bool:
    """The binding stores an argument's value back into that argument."""
    source = getattr(binding.value, "source", None)
    return isinstance(source, LocalSource) and source.local == binding.name


def _unbind(name, lineno) -> list:
    """With the STORE_FAST after it, unbind local `name`, bound or not (a NULL binding, 3.12+:
    an inlined comprehension restoring a local it found unbound): the local's value and a
    NULL are pushed (each LOAD_FAST_AND_CLEAR leaves it unbound), the value stored back and
    the NULL stored over it."""
    return [Instr("LOAD_FAST_AND_CLEAR", name, lineno=lineno),
            Instr("LOAD_FAST_AND_CLEAR", name, lineno=lineno),
            Instr("SWAP", 2, lineno=lineno), Instr("STORE_FAST", name, lineno=lineno)]


def _local(name):
    return lambda lineno: [Instr("LOAD_FAST", name, lineno=lineno)]


def _steps(graph, positions, bindings, inlined) -> list:
    """("node", node) for each node written as a statement and ("bind", binding), in the
    order the user's code ran them (positions: each node's position in the captured
    graph, which a binding's position counts in)."""
    steps, pending = [], list(bindings)
    pending.reverse()
    for k, node in zip(positions, graph.nodes):
        while pending and pending[-1].position <= k:
            steps.append(("bind", pending.pop()))
        if node.out not in inlined:
            steps.append(("node", node))
    steps += [("bind", b) for b in reversed(pending)]
    return steps
