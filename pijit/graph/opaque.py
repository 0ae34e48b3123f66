"""Opaque call nodes: a graph node that calls a real function pijit has no rule for (np.cov,
np.linalg.solve, a Generator's normal...) and checks that its result has the structure, types,
dtypes and shapes capture learned from calling it on the first call's values.

A result that does not match raises OpaqueMismatch; `restartable` wraps a compiled graph so
that the transformed function then runs the whole call as plain Python (capture only makes a
node that may mismatch where no effect the user can see has happened before it in the graph).
"""
from __future__ import annotations

import logging

import numpy as np

from pijit.graph.ir import Meta


class OpaqueMismatch(Exception):
    """An opaque call's result differs from what the graph after it was compiled for."""


class OpaqueCall:
    """The fn of an opaque node: `target(*args, **kwargs)`, its result checked.

    expected: the Meta (or tuple of Metas, for a tuple result) capture learned; a None dim
    matches any size. stateful: the call advances a random generator's state (`rng`): it is
    an effect, kept in program order. name: the op name shown in dumps and explain.
    """
    opaque = True

    def __init__(self, target, expected, name, *, stateful=False, rng=None, where="",
                 result_type=None):
        self.target = target
        self.expected = expected
        self.name = name
        self.stateful = stateful
        self.rng = rng
        self.where = where          # the user's file:line, for the mismatch log
        self._check = _checker(expected, result_type or tuple)

    @property
    def writes_nothing(self) -> bool:
        """A pure call: fused groups may move across it (a random draw is an effect)."""
        return not self.stateful

    def __call__(self, *args, **kwargs):
        return self.checked(self.target(*args, **kwargs))

    def checked(self, result):
        """`result` when it has the expected structure; backends call the target from the
        graph's own frame, then this."""
        if not self._check(result):
            what = (f"{self.name} at {self.where} returned {describe(result)}, the graph was "
                    f"compiled for {_expected_text(self.expected)}")
            if self.stateful:
                # The draw has happened: the call cannot start again. Capture makes random
                # nodes only where their result's meta follows from the arguments' (NumPy's
                # size= and broadcasting rules), so this is a bug in pijit.
                raise RuntimeError(f"pijit internal error: {what}")
            raise OpaqueMismatch(what)
        return result

    def __repr__(self) -> str:
        return f"<opaque call {self.name}>"


def describe(result) -> str:
    if isinstance(result, tuple):
        return "(" + ", ".join(describe(r) for r in result) + ")"
    try:
        return str(Meta.of(result))
    except TypeError:
        return type(result).__name__


def _expected_text(expected) -> str:
    if isinstance(expected, tuple):
        return "(" + ", ".join(_expected_text(e) for e in expected) + ")"
    return str(expected)


def _checker(expected, tuple_type=tuple):
    """A fast predicate: does a result match `expected` exactly (type, dtype, static dims)?
    tuple_type: the exact type of a tuple result (tuple, or a namedtuple class)."""
    if isinstance(expected, tuple):
        checks = tuple(_checker(e) for e in expected)
        n = len(checks)
        return lambda r: type(r) is tuple_type and len(r) == n and all(
            c(x) for c, x in zip(checks, r))
    if expected.is_array:
        dtype, ndim = expected.dtype, expected.ndim
        dims = tuple((i, d) for i, d in enumerate(expected.shape) if d is not None)
        if len(dims) == ndim:
            shape = expected.shape
            return lambda r: type(r) is np.ndarray and r.dtype == dtype and r.shape == shape
        return lambda r: (type(r) is np.ndarray and r.dtype == dtype and r.ndim == ndim
                          and all(r.shape[i] == d for i, d in dims))
    pytype = expected.pytype
    return lambda r: type(r) is pytype


def is_opaque(node) -> bool:
    return isinstance(node.fn, OpaqueCall)


def may_mismatch(graph) -> bool:
    """The graph has a pure opaque node, whose result is checked (see restartable)."""
    return any(is_opaque(n) and not n.fn.stateful for n in graph.nodes)


def draws(graph) -> bool:
    """The graph, or a loop body in it, draws from a random generator."""
    for node in graph.nodes:
        if is_opaque(node) and node.fn.stateful:
            return True
        body = getattr(node.fn, "body", None)
        if body is not None and draws(body):
            return True
    return False


def generators(graph) -> list:
    """The random generators the graph (or a loop body in it) draws from, each once."""
    found = {}
    for node in graph.nodes:
        for rng in _drawn(node):
            found.setdefault(id(rng), rng)
    return list(found.values())


def drawn_before_checks(graph) -> list:
    """The generators drawn from before the graph's last checked opaque call: those a
    mismatch must put back."""
    found, pending = {}, {}
    for node in graph.nodes:
        for rng in _drawn(node):
            pending.setdefault(id(rng), rng)
        if is_opaque(node) and not node.fn.stateful:
            found.update(pending)
            pending = {}
    return list(found.values())


def _drawn(node) -> list:
    if is_opaque(node) and node.fn.stateful:
        return [node.fn.rng]
    body = getattr(node.fn, "body", None)
    return generators(body) if body is not None else []


def costly_state(rng) -> bool:
    """MT19937 (np.random's global RandomState, any RandomState, Generator(MT19937)): taking
    its state copies 624 words into a dict, hundreds of microseconds measured here, against
    under 10 for PCG64: too much to take at every run of a graph."""
    return isinstance(rng, np.random.RandomState) or \
        isinstance(rng.bit_generator, np.random.MT19937)


def get_state(rng):
    """The state of a np.random.Generator or RandomState, to put back with set_state."""
    if isinstance(rng, np.random.Generator):
        return rng.bit_generator.state
    return rng.get_state(legacy=False)


def set_state(rng, state):
    if isinstance(rng, np.random.Generator):
        rng.bit_generator.state = state
    else:
        rng.set_state(state)


def restartable(graph_fn, name: str, rngs=()):
    """`graph_fn` returning None instead of raising OpaqueMismatch: the transformed function
    then calls the original code as plain Python. The random generators `rngs` the graph
    draws from are put back first, so the plain run draws the same numbers (capture lets
    nothing else the user can see happen before a node that may mismatch). After a mismatch
    the entry's data no longer fits what it was compiled for (a result whose size depends on
    the data): its later calls go straight to plain Python, without running the graph up to
    the mismatch again."""
    mismatched = False

    def run(*inputs):
        nonlocal mismatched
        if mismatched:
            return None
        states = [get_state(rng) for rng in rngs]
        try:
            return graph_fn(*inputs)
        except OpaqueMismatch as e:
            for rng, state in zip(rngs, states):
                set_state(rng, state)
            mismatched = True
            logging.getLogger("pijit.recompiles").info(
                "%s: %s; this entry runs as plain Python from now on", name, e)
            return None
    return run
