"""The C-free part of the user's API: the modes, ArraySpec, GraphBreakError and the checks of
jit's arguments, shared by api.py and unsupported.py (the API where no C extension is built)."""
from __future__ import annotations

import numpy as np

from pijit.config import JitConfig

GRAPH_MODE = 0
PYNATIVE_MODE = 1
MODES = ("PIJit", "PSJit")


class GraphBreakError(RuntimeError):
    """Raised in strict mode (mode="PSJit", fullgraph, jit_syntax_level="STRICT") when the
    function cannot be captured as one graph; names the reason and the user's file:line
    (also as attributes `filename`, `lineno`)."""

    def __init__(self, message, filename=None, lineno=None):
        super().__init__(message)
        self.filename, self.lineno = filename, lineno


class ArraySpec:
    """The expected shape and dtype of one array argument (`input_signature`).

    shape: a tuple of ints and Nones (None: any size, compiled as a dynamic dimension).
    dtype: anything np.dtype accepts, of a numeric kind (bool, int, uint, float, complex).

    Specs are values: equal shape and dtype make equal specs, and a spec cannot change once
    made. jit() tells its options apart by equality, so a library that jits the same function
    in a loop with a new but equal spec each time gets the first jit's cache, not a copy of
    the function's code per call.
    """

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        if not isinstance(shape, (tuple, list)):
            raise TypeError(f"ArraySpec shape must be a tuple of ints or None, got "
                            f"{type(shape).__name__} {shape!r}")
        for d in shape:
            if d is not None and type(d) is not int:
                raise TypeError(f"ArraySpec shape entries must be ints or None, got "
                                f"{type(d).__name__} {d!r} in {tuple(shape)!r}")
            if d is not None and d < 0:
                raise ValueError(f"ArraySpec shape entries must be non-negative, got {d!r} "
                                 f"in {tuple(shape)!r}")
        if dtype is None:
            raise TypeError("ArraySpec dtype is required (np.dtype(None) would mean float64)")
        try:
            dt = np.dtype(dtype)
        except TypeError as e:
            raise TypeError(f"ArraySpec dtype {dtype!r} is not a NumPy dtype: {e}") from None
        if dt.kind not in "biufc":
            raise ValueError(f"ArraySpec dtype must be numeric (bool, int, uint, float, "
                             f"complex), got {dt}")
        object.__setattr__(self, "shape", tuple(shape))
        object.__setattr__(self, "dtype", dt)

    def __setattr__(self, name, value):
        raise AttributeError(f"ArraySpec is immutable: make a new one instead of setting "
                             f"{name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"ArraySpec is immutable: cannot delete {name!r}")

    def __eq__(self, other):
        if not isinstance(other, ArraySpec):
            return NotImplemented
        return self.shape == other.shape and self.dtype == other.dtype

    def __hash__(self):
        return hash((self.shape, self.dtype))

    def __reduce__(self):
        return ArraySpec, (self.shape, self.dtype)

    def mismatch(self, value):
        """None when value fits this spec, else what differs."""
        if type(value) is not np.ndarray:
            return f"expected ndarray {self}, got {type(value).__name__}"
        if value.dtype != self.dtype or value.ndim != len(self.shape) or any(
                d is not None and d != s for d, s in zip(self.shape, value.shape)):
            return f"expected {self}, got {value.dtype}{list(value.shape)}"
        return None

    def __repr__(self) -> str:
        return f"ArraySpec(shape={self.shape!r}, dtype={str(self.dtype)!r})"

    def __str__(self) -> str:
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.dtype}[{dims}]"


def check_mode(mode) -> int:
    """set_context's mode, checked."""
    if type(mode) is not int:
        raise TypeError(f"set_context mode must be pijit.GRAPH_MODE or pijit.PYNATIVE_MODE "
                        f"(an int), got {type(mode).__name__} {mode!r}")
    if mode not in (GRAPH_MODE, PYNATIVE_MODE):
        raise ValueError(f"set_context mode must be pijit.GRAPH_MODE ({GRAPH_MODE}) or "
                         f"pijit.PYNATIVE_MODE ({PYNATIVE_MODE}); got {mode!r}")
    return mode


def check_context_key(key):
    if key != "mode":
        raise ValueError(f"get_context: unknown key {key!r}; valid keys are: 'mode'")


def options(input_signature, jit_config, mode) -> tuple:
    """jit's arguments checked: (the input signature as a tuple or None, the JitConfig)."""
    if not isinstance(mode, str):
        raise TypeError(f"jit mode must be a str, one of {', '.join(map(repr, MODES))}; "
                        f"got {type(mode).__name__} {mode!r}")
    if mode not in MODES:
        raise ValueError(f"jit mode must be one of {', '.join(map(repr, MODES))}; got {mode!r}")
    config = JitConfig.of(jit_config)
    if mode == "PSJit":
        config = config.replace(fullgraph=True)
    return _signature(input_signature), config


def _signature(input_signature):
    if input_signature is None:
        return None
    if isinstance(input_signature, ArraySpec):
        return (input_signature,)
    if isinstance(input_signature, (tuple, list)) and all(
            s is None or isinstance(s, ArraySpec) for s in input_signature):
        return tuple(input_signature)
    raise TypeError("input_signature must be an ArraySpec or a tuple/list of ArraySpec or None, "
                    f"got {input_signature!r}")
