"""What capture knows about loop indices, so that a slice by the index has a known length.

A loop node walks its body once for every iteration, with the index a graph int. Indexing
with the index (`A[i, :]`) has one result shape for every i, but a slice by it (`d[:, k:k+1]`)
in general does not, and is a graph break. When the loop's range is a constant (its bounds
are guarded), the index k lies in [lo, hi], and `k + c`, `c + k`, `k - c` (c a constant
int) are affine in k: a slice whose bounds are constants or affine in one index, with step
1, has the same length for every k iff it has the same length at k = lo and k = hi.

Why the two ends suffice: while a bound keeps its sign over the range, its position in the
axis (after Python's wrap-around of negative bounds and clipping) never decreases as k grows.
With both affine bounds of one sign class, length = stop - start (clipped at 0) is monotone
in k: constant inside, shrinking once the stop clips at the axis' end (non-negative bounds),
or growing while the start clips at 0 (negative ones). A monotone function equal at both
ends is constant. The graph keeps the slice symbolic; NumPy slices with the real k.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pijit.capture import numpy_rules
from pijit.capture.values import ConstValue, GraphValue, SliceValue, TupleValue, infer_arg
from pijit.graph.ir import Meta


@dataclass
class IndexFacts:
    ranges: dict = field(default_factory=dict)  # loop index Ref.index -> (lo, hi)
    affine: dict = field(default_factory=dict)  # int Ref.index -> (index Ref.index, offset)

    def add_index(self, value: GraphValue, indices: range) -> None:
        """The index of a loop over the constant, non-empty range `indices`."""
        ends = (indices[0], indices[-1])
        self.ranges[value.ref.index] = (min(ends), max(ends))
        self.affine[value.ref.index] = (value.ref.index, 0)

    def note_operator(self, name: str, operands: tuple, result) -> None:
        """Records result = index + c, c + index or index - c."""
        if name not in ("add", "sub") or not isinstance(result, GraphValue) or len(operands) != 2:
            return
        left, right = operands
        if name == "add" and _const_int(left) is not None:
            left, right = right, left
        c = _const_int(right)
        if c is None or not isinstance(left, GraphValue) or left.ref.index not in self.affine:
            return
        base, offset = self.affine[left.ref.index]
        self.affine[result.ref.index] = (base, offset + c if name == "add" else offset - c)

    def ends(self, key):
        """(key at every index's lo, key at every index's hi), as getitem's rule sees keys,
        when the key slices by loop indices in the supported form; else None."""
        items = key.items if isinstance(key, TupleValue) else [key]
        if not any(isinstance(it, SliceValue) for it in items):
            return None
        lo, hi = [], []
        for it in items:
            if not isinstance(it, SliceValue):
                lo.append(infer_arg(it))
                hi.append(lo[-1])
                continue
            pair = self._slice_ends(it)
            if pair is None:
                return None
            lo.append(pair[0])
            hi.append(pair[1])
        if isinstance(key, TupleValue):
            return tuple(lo), tuple(hi)
        return lo[0], hi[0]

    def _slice_ends(self, s: SliceValue):
        if not (isinstance(s.step, ConstValue) and s.step.value in (None, 1)):
            return None
        bases, signs, parts = set(), set(), []
        for part in (s.start, s.stop):
            if isinstance(part, ConstValue) and (part.value is None or
                                                 _const_int(part) is not None):
                parts.append((None, part.value))
                continue
            if not isinstance(part, GraphValue) or part.ref.index not in self.affine:
                return None
            base, offset = self.affine[part.ref.index]
            if base not in self.ranges:
                return None
            lo, hi = self.ranges[base]
            if lo + offset >= 0:
                signs.add("+")
            elif hi + offset < 0:
                signs.add("-")
            else:
                return None         # the bound changes sign: wraps around within the range
            bases.add(base)
            parts.append((base, offset))
        if len(bases) != 1 or len(signs) != 1:
            return None
        (base,) = bases
        lo, hi = self.ranges[base]

        def at(k):
            return slice(*(v if b is None else k + v for b, v in parts), s.step.value)
        return at(lo), at(hi)


def _const_int(value):
    if isinstance(value, ConstValue) and type(value.value) is int:
        return value.value
    return None


def index_key(cap, target: Meta, key):
    """The key as getitem's rule sees it. A slice by a loop index (`d[:, k:k+1]`) is given
    at the index's first value once its length is proved the same for every index
    (see above); other graph-valued slice bounds make the rule refuse."""
    ends = cap.facts.ends(key)
    if ends is not None:
        getitem = numpy_rules.lookup_operator("getitem")
        try:
            if getitem.infer((target, ends[0]), {}) == getitem.infer((target, ends[1]), {}):
                return ends[0]
        except Exception:       # noqa: BLE001 - not proved: the rule reports on the key itself
            pass
    return infer_arg(key)
