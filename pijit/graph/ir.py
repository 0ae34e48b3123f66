"""Graph IR: what capture records and backends lower.

A Graph is an ordered list of Nodes in SSA form. Node arguments are nested Python structures
(tuples, lists, dicts, slices) whose leaves are either constants or `Ref`s to earlier values.
A loop node's fn is a LoopOp holding its body as a Graph of its own. Printing gives one node
per line with shape and dtype (loop bodies indented under their node), the form
`print_after_all` shows.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

# Python scalar types a graph value may have; their `dtype` is NumPy's default for the type.
PY_SCALARS = (bool, int, float, complex)


@dataclass(frozen=True)
class Meta:
    """What capture knows about a value without its data.

    pytype: np.ndarray for arrays, a NumPy scalar type (np.float64, ...) for NumPy scalars,
    or one of PY_SCALARS. shape: () for scalars; a None dim is dynamic (known only at run time).
    """
    pytype: type
    dtype: np.dtype
    shape: tuple = ()

    @property
    def is_array(self) -> bool:
        return self.pytype is np.ndarray

    @property
    def is_pyscalar(self) -> bool:
        return self.pytype in PY_SCALARS

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @staticmethod
    def array(shape, dtype) -> "Meta":
        return Meta(np.ndarray, np.dtype(dtype), tuple(shape))

    @staticmethod
    def of(value) -> "Meta":
        """The Meta of a concrete value (ndarray, NumPy scalar or Python scalar)."""
        if type(value) is np.ndarray:
            return Meta(np.ndarray, value.dtype, value.shape)
        if isinstance(value, np.generic):
            return Meta(type(value), value.dtype, ())
        if type(value) in PY_SCALARS:
            return Meta(type(value), np.dtype(type(value)), ())
        raise TypeError(f"no Meta for {type(value).__name__}")

    def __str__(self) -> str:
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        if self.is_array:
            return f"{self.dtype}[{dims}]"
        return f"{self.pytype.__name__}"


@dataclass(frozen=True)
class Ref:
    """A use of graph value number `index` (an input or a node output)."""
    index: int

    def __repr__(self) -> str:
        return f"%{self.index}"


@dataclass(frozen=True)
class Node:
    """One operation: `fn(*args, **kwargs)`; its result is graph value `out`.

    name: the op's short name (printing, explain's ops_per_graph).
    lineno: the user's source line, so run-time errors point there.
    """
    out: int
    name: str
    fn: Callable
    args: tuple
    kwargs: tuple  # ((key, value), ...) so a Node stays hashable and ordered
    meta: Meta
    lineno: int | None = None

    def at_line(self, lineno) -> "Node":
        """dataclasses.replace(self, lineno=lineno) at a tenth of its cost: capture moves every
        node of an inlined call to the call's line, once per inlining level."""
        node = object.__new__(Node)
        node.__dict__.update(self.__dict__, lineno=lineno)
        return node


@dataclass
class Graph:
    """Inputs, nodes and outputs of one captured region.

    Inputs are found while capture walks the code, so they may be numbered after nodes:
    value numbers are unique across inputs and nodes, in creation order.
    """
    inputs: list = field(default_factory=list)        # Refs of the inputs, in call order
    input_metas: list = field(default_factory=list)   # Meta per input
    input_names: list = field(default_factory=list)   # readable source names
    nodes: list = field(default_factory=list)
    outputs: list = field(default_factory=list)       # Refs, in output order
    _metas: dict = field(default_factory=dict)        # value number -> Meta

    @property
    def num_values(self) -> int:
        return len(self._metas)

    def meta(self, ref: Ref) -> Meta:
        return self._metas[ref.index]

    def add_input(self, meta: Meta, name: str) -> Ref:
        ref = Ref(self.num_values)
        self._metas[ref.index] = meta
        self.inputs.append(ref)
        self.input_metas.append(meta)
        self.input_names.append(name)
        return ref

    def add_placeholder(self, meta: Meta) -> Ref:
        """A value number defined by nothing yet: what a loop body reads while capture walks
        it (carried values, the index), before the body is cut into a Graph of its own.
        Numbers are never reused, so its number stays allocated after the cut."""
        ref = Ref(self.num_values)
        self._metas[ref.index] = meta
        return ref

    def add_node(self, name, fn, args, kwargs, meta, lineno=None) -> Ref:
        out = self.num_values
        self._metas[out] = meta
        self.nodes.append(Node(out, name, fn, tuple(args), tuple(kwargs.items()), meta, lineno))
        return Ref(out)

    def op_names(self) -> list:
        return [n.name for n in self.nodes]

    def rows(self, depth: int = 0):
        """The printed form as GraphRows, one per line: inputs, nodes (a loop node's body
        under it, one level deeper), the returned values."""
        for ref, name, meta in zip(self.inputs, self.input_names, self.input_metas):
            yield GraphRow(depth, repr(ref), f"input {name}", str(meta))
        for node in self.nodes:
            if isinstance(node.fn, LoopOp):
                parts = node.fn.format_args(node.args)
            else:
                parts = [format_arg(a) for a in node.args]
            parts += [f"{k}={format_arg(v)}" for k, v in node.kwargs]
            yield GraphRow(depth, f"%{node.out}", f"{node.name}({', '.join(parts)})",
                           format_meta(node.meta), node.lineno,
                           opaque=getattr(node.fn, "opaque", False))
            nest = getattr(node.fn, "nest", None)       # a loop nest: its IR under it
            if nest is not None:
                for text in str(nest).splitlines():
                    yield GraphRow(depth + 1, "", text, header=True)
            if isinstance(node.fn, LoopOp):
                yield GraphRow(depth + 1, "", node.fn.head(), header=True)
                yield from node.fn.body.rows(depth + 1)
        yield GraphRow(depth, "", f"return ({', '.join(map(repr, self.outputs))})")

    def __str__(self) -> str:
        return "\n".join(row.text() for row in self.rows())


@dataclass(frozen=True)
class GraphRow:
    """One printed line of a graph: `value = operation  : type  # line N`, marked when the
    operation is an opaque call; the return line has only an operation, and so has the
    `header` of a loop node's body. depth: loop nesting."""
    depth: int
    value: str
    operation: str
    type: str = ""
    lineno: int | None = None
    header: bool = False
    opaque: bool = False

    def text(self) -> str:
        if self.header:
            return "    " * self.depth + self.operation
        pad = "  " + "    " * self.depth
        if not self.value:
            return pad + self.operation
        line = f"  # line {self.lineno}" if self.lineno is not None else ""
        if self.opaque:
            line += "  [opaque call]"
        return f"{pad}{self.value} = {self.operation}  : {self.type}{line}"


@dataclass(frozen=True, eq=False)
class LoopOp:
    """The fn of a loop node: `for index in range(start, stop, step)`, running `body` once
    per index.

    The node's args are (start, stop, step, *initial carried values, *invariant values); its
    value is the tuple (*final carried values, *last values). `body` is a Graph whose inputs
    are the n_carried carried values, the index, then the invariant values, and whose outputs
    are the next carried values, then the values of the n_last locals that the loop binds
    for the first time (only when it is known to run at least once). The index is an input
    like any other: a local bound to it is carried or a last value. `mutates`: the body writes
    into arrays (item assignment, in-place operators), so the node is an effect to keep in
    place. `names`: the local name of each carried value, then of each last value (dumps).
    """
    body: Graph
    n_carried: int
    n_last: int = 0
    mutates: bool = False
    names: tuple = ()

    @property
    def n_invariant(self) -> int:
        return len(self.body.inputs) - self.n_carried - 1

    def split_args(self, args) -> tuple:
        """(range args, initial carried values, invariant values) of a node's args."""
        return args[:3], args[3:3 + self.n_carried], args[3 + self.n_carried:]

    def __call__(self, start, stop, step, *values):
        """The reference semantics: interpret the body once per index (backends generate
        code for it instead)."""
        carried, invariant = values[:self.n_carried], values[self.n_carried:]
        last = None
        for index in range(start, stop, step):
            outs = run_graph(self.body, (*carried, index, *invariant))
            carried, last = outs[:self.n_carried], outs[self.n_carried:]
        if self.n_last and last is None:
            raise AssertionError("a loop with last values ran no iteration")
        return (*carried, *(last or ()))

    def format_args(self, args) -> list:
        bounds, init, invariant = self.split_args(args)
        return [f"range({', '.join(format_arg(a) for a in bounds)})",
                f"carried={format_arg(tuple(init))}", f"invariant={format_arg(tuple(invariant))}"]

    def head(self) -> str:
        """The first printed line: the local names of the carried and last values."""
        names = self.names or ("?",) * (self.n_carried + self.n_last)
        return (f"body: carried ({', '.join(names[:self.n_carried])}), "
                f"last ({', '.join(names[self.n_carried:])})"
                + (", writes into arrays" if self.mutates else ""))

    def __str__(self) -> str:
        return self.head() + "\n" + str(self.body)


def run_graph(graph: Graph, args) -> tuple:
    """Evaluate a graph by calling each node's fn: the reference interpreter (loop bodies)."""
    env = {ref.index: value for ref, value in zip(graph.inputs, args)}

    def value(ref):
        return env[ref.index]

    for node in graph.nodes:
        env[node.out] = node.fn(*map_refs(node.args, value),
                                **{k: map_refs(v, value) for k, v in node.kwargs})
    return tuple(env[r.index] for r in graph.outputs)


def format_meta(meta) -> str:
    """A node's Meta, or the tuple of Metas of a node with several results."""
    if isinstance(meta, tuple):
        return "(" + ", ".join(map(format_meta, meta)) + ("," if len(meta) == 1 else "") + ")"
    return str(meta)


def format_arg(arg: Any) -> str:
    """Readable text of a node argument (nested structures, refs, constants)."""
    if isinstance(arg, Ref):
        return repr(arg)
    if isinstance(arg, tuple):
        inner = ", ".join(format_arg(a) for a in arg)
        return f"({inner},)" if len(arg) == 1 else f"({inner})"
    if isinstance(arg, list):
        return "[" + ", ".join(format_arg(a) for a in arg) + "]"
    if isinstance(arg, dict):
        return "{" + ", ".join(f"{k!r}: {format_arg(v)}" for k, v in arg.items()) + "}"
    if isinstance(arg, slice):
        return f"slice({format_arg(arg.start)}, {format_arg(arg.stop)}, {format_arg(arg.step)})"
    if isinstance(arg, np.dtype):
        return f"dtype({str(arg)!r})"
    if isinstance(arg, type):
        return arg.__name__
    if isinstance(arg, np.ndarray):
        return f"array({arg.dtype}{list(arg.shape)})"
    return repr(arg)


def map_refs(arg: Any, fn: Callable) -> Any:
    """Rebuild a nested argument with every Ref replaced by fn(ref): dict keys too, as
    arg_refs yields them (a key is a value the program computed, like any other)."""
    if isinstance(arg, Ref):
        return fn(arg)
    if type(arg) is tuple:
        return tuple(map_refs(a, fn) for a in arg)
    if type(arg) is list:
        return [map_refs(a, fn) for a in arg]
    if type(arg) is dict:
        return {map_refs(k, fn): map_refs(v, fn) for k, v in arg.items()}
    if type(arg) is slice:
        return slice(map_refs(arg.start, fn), map_refs(arg.stop, fn), map_refs(arg.step, fn))
    return arg


def arg_refs(arg):
    """The Refs of a nested argument, in the order Python evaluates it when rendered."""
    if isinstance(arg, Ref):
        yield arg
    elif type(arg) in (tuple, list):
        for a in arg:
            yield from arg_refs(a)
    elif type(arg) is dict:
        for k, v in arg.items():
            yield from arg_refs(k)
            yield from arg_refs(v)
    elif type(arg) is slice:
        for a in (arg.start, arg.stop, arg.step):
            yield from arg_refs(a)


def node_refs(node) -> list:
    """Every Ref a node reads, args then kwargs."""
    return [r for a in (*node.args, *(v for _, v in node.kwargs)) for r in arg_refs(a)]
