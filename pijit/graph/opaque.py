"""Opaque call nodes: a graph node that calls a real function pijit has no rule for (np.cov,
np.linalg.solve, a Generator's normal...) and checks that its result has the structure, types,
dtypes and shapes capture learned from calling it on the first call's values.

A result that does not match raises OpaqueMismatch; `restartable` wraps a compiled graph so
that the transformed function then runs the whole call as plain Python (capture only makes a
node that may mismatch where no effect the user can see has happened before it in the graph;
random generators drawn from before it are put back: MT19937's by its raw state struct).
"""
from __future__ import annotations

import ctypes
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


# RandomState methods that leave its cached Gaussian alone (the legacy has_gauss/gauss pair,
# which only its normal, standard_normal, gamma... draws fill and use): after draws of these
# only, its state at the start of a graph is its bit generator's alone. Checked against
# NumPy by tests/test_random_state.py.
GAUSS_FREE = frozenset({
    "random_sample", "random", "rand", "randint", "random_integers", "tomaxint", "uniform",
    "choice", "permutation", "exponential", "standard_exponential", "binomial", "poisson",
    "geometric", "hypergeometric", "logseries", "zipf", "laplace", "gumbel", "logistic",
    "rayleigh", "pareto", "weibull", "power", "triangular"})


def cached_gaussian_draw(graph) -> str | None:
    """The name of a draw in the graph (or a loop body) that may change the cached Gaussian
    of a RandomState over MT19937, else None. Its state at the graph's start could then be
    put back only through get_state, which copies MT19937's 624 words element by element
    (160 us measured here, against 1 us for PCG64's): too much to take at every run."""
    for node in graph.nodes:
        if is_opaque(node) and node.fn.stateful:
            rng = node.fn.rng
            if isinstance(rng, np.random.RandomState) and _mt19937(rng) is not None and \
                    getattr(node.fn.target, "__name__", "") not in GAUSS_FREE:
                return node.fn.name
        body = getattr(node.fn, "body", None)
        found = cached_gaussian_draw(body) if body is not None else None
        if found is not None:
            return found
    return None


# numpy/random/src/mt19937/mt19937.h: struct mt19937_state { uint32_t key[624]; int pos; }
_MT19937_BYTES = 624 * 4 + 4


def _mt19937(rng):
    """The MT19937 bit generator of a Generator or RandomState, else None."""
    bits = rng._bit_generator if isinstance(rng, np.random.RandomState) else rng.bit_generator
    return bits if isinstance(bits, np.random.MT19937) else None


def raw_state(rng):
    """A writable uint8 view of the MT19937 state struct of rng's bit generator (NumPy's
    documented ctypes interface, `state_address`), or None for another bit generator.
    Copying it takes a microsecond; it is all of a Generator's state, and all of a
    RandomState's while its cached Gaussian is left alone (GAUSS_FREE). The view is valid
    while rng lives: the graph holding it holds rng."""
    bits = _mt19937(rng)
    if bits is None:
        return None
    struct = (ctypes.c_uint8 * _MT19937_BYTES).from_address(bits.ctypes.state_address)
    return np.ctypeslib.as_array(struct)


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
    raw = [raw_state(rng) for rng in rngs]      # MT19937's: copied raw, not by get_state

    def run(*inputs):
        nonlocal mismatched
        if mismatched:
            return None
        states = [get_state(rng) if view is None else view.copy()
                  for rng, view in zip(rngs, raw)]
        try:
            return graph_fn(*inputs)
        except OpaqueMismatch as e:
            for rng, view, state in zip(rngs, raw, states):
                if view is None:
                    set_state(rng, state)
                else:
                    view[:] = state
            mismatched = True
            logging.getLogger("pijit.recompiles").info(
                "%s: %s; this entry runs as plain Python from now on", name, e)
            return None
    return run
