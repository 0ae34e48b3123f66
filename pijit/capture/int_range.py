"""Python ints computed in the graph, which may leave int64 where their Meta says int64.

A graph int that is an input is guarded to [-2**63, 2**63) (wrap.fits_int64); anything
computed in the graph (`n ** 5`, `n * n * n`, a loop's running product) is exact at run
time, a Python int of any size, but its Meta is int's: int64. Most NumPy operations treat
a Python int as weak (NEP 50: `a + m` has `a`'s dtype whatever m is, or raises
OverflowError as plain NumPy does), but some type the result by the int's value:
`np.asarray(m)` is int64, uint64 or object, so are `np.array([m, 1])`, `np.full(3, m)` and
`np.sum(m)`. Capture folds what it reads of a result's Meta (`.dtype`, a branch on it) into
the code: such an operation on an int that may leave int64 is refused (an opaque call then
checks its result's type at run time), unless the rule answers the same for ints past int64
or raises for them, as NumPy then does at run time.
"""
from __future__ import annotations

from pijit.capture.values import GraphValue, map_graph_values

# Ints past int64 as NumPy types them: uint64, and object on either side.
_PAST_INT64 = (2 ** 63, 2 ** 64, -2 ** 63 - 1)


def may_leave_int64(cap, value) -> bool:
    """Whether `value` is a graph Python int not known to lie in int64's range."""
    return (isinstance(value, GraphValue) and value.meta.pytype is int
            and value.ref not in cap.graph.inputs)


def typed_by_value(cap, rule, args: tuple, kwargs: dict, metas) -> str | None:
    """Why the NumPy result `metas` of rule(*args, **kwargs) may not hold for the values of
    its graph ints at run time; None when it holds for any."""
    if all(m.is_pyscalar for m in (metas if isinstance(metas, tuple) else (metas,))):
        return None     # Python arithmetic on ints: exact at run time, typed int anyway
    wide = []

    def collect(v):
        if may_leave_int64(cap, v):
            wide.append(v)
        return v.meta
    for a in (*args, *kwargs.values()):
        map_graph_values(a, collect)
    if not wide:
        return None
    for big in _PAST_INT64:
        def leaf(v):
            return big if any(v is w for w in wide) else v.meta
        try:
            other = rule.infer(tuple(map_graph_values(a, leaf) for a in args),
                               {k: map_graph_values(v, leaf) for k, v in kwargs.items()})
        except Exception:       # noqa: BLE001 - NumPy raises for such an int too, at run time
            continue
        if other != metas:
            return f"{rule.name} types a Python int computed in the graph by its value " \
                   f"(int64 here, {_typed(other)} for {big})"
    return None


def _typed(metas) -> str:
    if isinstance(metas, tuple):
        return ", ".join(_typed(m) for m in metas)
    return str(metas.dtype) if metas.is_array else metas.pytype.__name__
