"""Calls without a rule in the op table -> opaque call nodes (pijit.graph.opaque).

A call of a function the purity table (call_table.py) knows to be pure, or a draw from a
NumPy random generator, becomes one node that calls the real function at run time, at its
place in program order. Capture calls it once on the first call's real values (evaluate.py)
to learn the result's structure, types, dtypes and shapes; the node checks them at run time.
Anything capture cannot learn that way (an unknown function, a result of another type, a
call that raises, writes into an argument or is handed a Python callable) is a graph break,
as before.
"""
from __future__ import annotations


import numpy as np

from pijit.capture import call_table
from pijit.capture.evaluate import NotKnown, capture_values, quietly
from pijit.capture.graph_break import Reason
from pijit.capture.values import (ConstValue, DictValue, GraphValue, ListValue, SliceValue,
                                  TupleValue, Value, describe, node_arg)
from pijit.capture.wrap import SUPPORTED_DTYPE_KINDS
from pijit.graph.ir import PY_SCALARS, Meta
from pijit.graph.opaque import OpaqueCall, cached_gaussian_draw
from pijit.graph.purity import mutates


def opaque_call(cap, target, args: list, kwargs: dict, kind: str, name: str | None = None,
                data_dependent: bool = False):
    """The value of target(*args, **kwargs) as an opaque node; kind: "pure" or "random".
    data_dependent: the result's dims are dynamic (its size depends on the data)."""
    name = name or op_name(target)
    why = call_table.writes_argument(target, len(args), kwargs)
    if why is not None:
        cap.unsupported(Reason.SIDE_EFFECT, f"{name}: {why}")
    rng = call_table.random_generator(target) if kind == "random" else None
    if rng is None and cap.bodies:
        cap.unsupported(Reason.UNSUPPORTED_CALL, f"{name} in a loop node's body (a result "
                        "that does not match could not restart the call)")
    if rng is None and any(mutates(n) for n in cap.graph.nodes):
        # A result that does not match at run time restarts the call as plain Python: only
        # sound while nothing the user can see has happened yet (random generators drawn
        # from before are put back: pijit.graph.opaque.restartable).
        cap.unsupported(Reason.UNSUPPORTED_CALL, f"{name} after a write in the same graph")
    gaussian = cached_gaussian_draw(cap.graph) if rng is None else None
    if gaussian is not None:
        cap.unsupported(Reason.UNSUPPORTED_CALL, f"{name} after {gaussian} from an MT19937 "
                        "RandomState in the same graph (its cached Gaussian is too costly to "
                        "put back on a mismatch)")
    values = capture_values(cap)
    try:
        real_args = [_real(cap, values, a) for a in args]
        real_kwargs = {k: _real(cap, values, v) for k, v in kwargs.items()}
        if rng is not None:
            result = values.draw(rng, target, real_args, real_kwargs)
        else:
            result = quietly(target, real_args, real_kwargs)
    except NotKnown as e:
        cap.unsupported(Reason.UNSUPPORTED_CALL, f"{name}: {e}")
    dynamic = data_dependent or call_table.data_dependent_shape(
        target, real_args, real_kwargs) or any(
        None in m.shape or m.pytype is list      # (a list input: any length)
        for m in _metas(args) + _metas(list(kwargs.values())))
    expected = _expected(cap, name, result, dynamic)
    fn = OpaqueCall(target, expected, name, stateful=rng is not None, rng=rng,
                    where=f"{cap.code.co_filename}:{cap.lineno}", result_type=type(result))
    ref = cap.graph.add_node(name, fn, tuple(node_arg(a) for a in args),
                             {k: node_arg(v) for k, v in kwargs.items()}, expected, cap.lineno)
    values.remember(ref, result)
    if isinstance(expected, tuple):
        items = []
        for i, meta in enumerate(expected):
            item = cap._tuple_item(ref, i, meta)
            values.remember(item.ref, result[i])
            items.append(item)
        return TupleValue(items, cls=None if type(result) is tuple else type(result))
    return GraphValue(ref, expected)


# NumPy's index helpers: objects whose subscript builds arrays (np.mgrid[0:n, 0:m], np.r_[a, b]).
INDEX_HELPERS = {id(np.mgrid): "mgrid", id(np.ogrid): "ogrid", id(np.r_): "r_",
                 id(np.c_): "c_"}


def index_helper(cap, container, key):
    """`np.mgrid[...]` and the like (container: the helper's ObjectValue) as an opaque
    node calling its __getitem__, or None for another object."""
    obj = container.obj
    name = INDEX_HELPERS.get(id(obj))
    if name is None or getattr(np, name) is not obj:
        return None
    cap.builder.guard(container.source, "id", obj)
    return opaque_call(cap, obj.__getitem__, [key], {}, "pure", name=f"{name}[]")


def op_name(target) -> str:
    """np.linalg.solve -> "linalg.solve", np.cov -> "cov", rng.normal -> "random.normal",
    np.add.outer -> "add.outer", scipy.special.erf -> "scipy.special.erf"."""
    owner = getattr(target, "__self__", None)
    name = getattr(target, "__name__", type(target).__name__)
    if isinstance(owner, np.ufunc):
        return f"{owner.__name__}.{name}"
    if call_table.random_generator(target) is not None:
        return f"random.{name}"
    module = getattr(target, "__module__", None) or ""
    if module == "numpy" or module.startswith("numpy._"):
        return name
    if module.startswith("numpy."):
        return f"{module[6:]}.{name}"
    return f"{module}.{name}" if module else name


def _real(cap, values, value: Value):
    """The real object behind an argument Value (graph values evaluated)."""
    if isinstance(value, GraphValue):
        return values.value(value.ref)
    if isinstance(value, ConstValue):
        if call_table.runs_python_code(value.value):
            cap.unsupported(Reason.UNSUPPORTED_CALL, "a call handed a Python callable")
        return value.value
    if isinstance(value, TupleValue):
        return tuple(_real(cap, values, v) for v in value.items)
    if isinstance(value, ListValue):
        return [_real(cap, values, v) for v in value.items]
    if isinstance(value, DictValue):
        return {k: _real(cap, values, v) for k, v in value.items.items()}
    if isinstance(value, SliceValue):
        return slice(*(_real(cap, values, v) for v in (value.start, value.stop, value.step)))
    cap.unsupported(Reason.UNSUPPORTED_VALUE,
                    f"a {describe(value)} as an argument of a call without a rule")


def _metas(values) -> list:
    out = []
    for v in values:
        if isinstance(v, GraphValue):
            out.append(v.meta)
        elif isinstance(v, (TupleValue, ListValue)):
            out += _metas(v.items)
        elif isinstance(v, DictValue):
            out += _metas(list(v.items.values()))
    return out


def _flat_tuple(result) -> bool:
    """A non-empty tuple (or NumPy's namedtuple results: np.linalg.eigh's...) of non-tuples."""
    t = type(result)
    named = t is not tuple and issubclass(t, tuple) and hasattr(t, "_fields") and \
        hasattr(t, "_make") and t.__module__.split(".")[0] in ("numpy", "scipy")
    return (t is tuple or named) and result and all(not isinstance(r, tuple) for r in result)


def _expected(cap, name, result, dynamic: bool):
    """The Meta (tuple of Metas) a result must have at run time. With a dynamic dim (or a
    list graph input, dynamic_lists.py) among the arguments every dim of the result is left
    dynamic: its size may follow them."""
    if _flat_tuple(result):
        return tuple(_expected(cap, name, r, dynamic) for r in result)
    if type(result) is np.ndarray:
        if result.dtype.kind not in SUPPORTED_DTYPE_KINDS or not result.dtype.isnative:
            cap.unsupported(Reason.UNSUPPORTED_VALUE, f"{name} gives dtype {result.dtype}")
        shape = (None,) * result.ndim if dynamic else result.shape
        return Meta.array(shape, result.dtype)
    if (isinstance(result, np.generic) and result.dtype.kind in SUPPORTED_DTYPE_KINDS) or \
            type(result) in PY_SCALARS:
        return Meta.of(result)
    cap.unsupported(Reason.UNSUPPORTED_VALUE,
                    f"{name} gives a {type(result).__name__}, which a graph cannot hold")
