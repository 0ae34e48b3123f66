"""Graph IR: what capture records and backends lower.

A Graph is an ordered list of Nodes in SSA form. Node arguments are nested Python structures
(tuples, lists, dicts, slices) whose leaves are either constants or `Ref`s to earlier values.
Printing gives one node per line with shape and dtype, the form `print_after_all` shows.
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

    def add_node(self, name, fn, args, kwargs, meta, lineno=None) -> Ref:
        out = self.num_values
        self._metas[out] = meta
        self.nodes.append(Node(out, name, fn, tuple(args), tuple(kwargs.items()), meta, lineno))
        return Ref(out)

    def op_names(self) -> list:
        return [n.name for n in self.nodes]

    def __str__(self) -> str:
        lines = []
        for ref, name, meta in zip(self.inputs, self.input_names, self.input_metas):
            lines.append(f"  {ref!r} = input {name}  : {meta}")
        for node in self.nodes:
            parts = [format_arg(a) for a in node.args]
            parts += [f"{k}={format_arg(v)}" for k, v in node.kwargs]
            line = f"  # line {node.lineno}" if node.lineno is not None else ""
            lines.append(f"  %{node.out} = {node.name}({', '.join(parts)})  : {node.meta}{line}")
        lines.append(f"  return ({', '.join(map(repr, self.outputs))})")
        return "\n".join(lines)


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
    """Rebuild a nested argument with every Ref replaced by fn(ref)."""
    if isinstance(arg, Ref):
        return fn(arg)
    if type(arg) is tuple:
        return tuple(map_refs(a, fn) for a in arg)
    if type(arg) is list:
        return [map_refs(a, fn) for a in arg]
    if type(arg) is dict:
        return {k: map_refs(v, fn) for k, v in arg.items()}
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
