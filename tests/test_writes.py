"""Writes into arrays in the graph (capture/writes.py): item assignment with every index kind
and in-place operators, on every place an array can live, differential against plain Python
(results, every mutated input, exceptions; twice, on layout-preserving copies) and captured
as one graph with no break; aliasing and overlap; casting and errors at the same point; a
write followed by a break, an exception, a return of the view."""
from __future__ import annotations

import numpy as np
import pytest

import pijit
from differential import assert_equal_values, assert_same, clone, run_captured

LEVELS = ["O0", "O1"]


def jit_kwargs(level, **options):
    return {"jit_config": {"jit_level": level, **options}}


class Box:
    def __init__(self, arr):
        self.arr = arr


def build(src: str, namespace: dict | None = None):
    """The function f defined by src, with `namespace` (kept: tests change it) as globals."""
    ns = {} if namespace is None else namespace
    ns["np"] = np
    exec(compile(src, "<writes>", "exec"), ns)
    return ns["f"]


# -- where the written array lives: (parameters, how T is bound, how the args are made) ------
def _arg_t():
    return np.arange(24.0).reshape(4, 6) - 7.5


PLACES = {
    "argument": ("t, b, u, idx", "T = t", lambda: (_arg_t(),)),
    # a strided view with a negative stride, of an argument the caller also sees
    "view": ("t, b, u, idx", "T = t[::-1, 1:]",
             lambda: (np.arange(28.0).reshape(4, 7) - 9.5,)),
    "attribute": ("box, b, u, idx", "T = box.arr", lambda: (Box(_arg_t()),)),
    "list_item": ("lst, b, u, idx", "T = lst[1]", lambda: ([np.ones(2), _arg_t()],)),
    "dict_item": ("d, b, u, idx", "T = d['w']", lambda: ({"w": _arg_t()},)),
    "tuple_item": ("tup, b, u, idx", "T = tup[0]", lambda: ((_arg_t(), 3),)),
    "temporary": ("t, b, u, idx", "T = t * 2.0", lambda: (_arg_t(),)),
}


def _rest():
    """b (4, 6), u (6,), idx: an integer array with a repeated index."""
    return (np.linspace(-1.0, 2.0, 24).reshape(4, 6), np.arange(6.0) * 0.5,
            np.array([3, 0, 3, 1]))


INDEX_WRITES = {
    "int": "T[2] = u",
    "negative_ints": "T[-1, 3] = 2.5",
    "slice": "T[1:3] = b[:2]",
    "steps": "T[::2, ::3] = 7",
    "negative_step": "T[::-1] = b",
    "none": "T[None, 1] = u",
    "ellipsis": "T[..., 2] = b[:, 0]",
    "int_list_repeats": "T[[0, 2, 0]] = b[:3]",
    "int_array_repeats": "T[idx] = b",
    "int_array_scalar": "T[idx, 1] = -4.0",
    "mask": "T[T > 0.5] = 0",
    "mask_rows": "T[b[:, 0] > 0.0] = u",
    "slice_inplace": "T[1:3, ::2] += b[:2, ::2]",
    "fancy_inplace": "T[[0, 0, 1]] += 1.0",       # NumPy: index 0 incremented once
    "mask_inplace": "T[T < 0] *= -2.0",
    "python_list_value": "T[0, :3] = [1, 2, 3]",
}


def write_fn(place, write):
    params, bind, _ = PLACES[place]
    return build(f"def f({params}):\n    {bind}\n    {write}\n"
                 f"    return T.sum(), T * 1.0, b.sum()\n")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("kind", list(INDEX_WRITES))
@pytest.mark.parametrize("place", list(PLACES))
def test_item_assignment(place, kind, level):
    fn = write_fn(place, INDEX_WRITES[kind])
    assert_same(fn, *PLACES[place][2](), *_rest(), jit_kwargs=jit_kwargs(level))


FLOAT_OPS = {"+=": "b", "-=": "b", "*=": "b", "/=": "(b + 3.0)", "//=": "0.75", "%=": "1.5",
             "**=": "2"}
INT_OPS = {"+=": "3", "-=": "c", "*=": "c", "//=": "3", "%=": "c", "**=": "2", "&=": "c",
           "|=": "c", "^=": "c", "<<=": "2", ">>=": "1"}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("op", list(FLOAT_OPS))
@pytest.mark.parametrize("place", list(PLACES))
def test_inplace_float(place, op, level):
    fn = write_fn(place, f"T {op} {FLOAT_OPS[op]}")
    assert_same(fn, *PLACES[place][2](), *_rest(), jit_kwargs=jit_kwargs(level))


def int_inplace(t, c, op):
    return {"+=": t.__iadd__, "-=": t.__isub__, "*=": t.__imul__, "//=": t.__ifloordiv__,
            "%=": t.__imod__, "**=": t.__ipow__, "&=": t.__iand__, "|=": t.__ior__,
            "^=": t.__ixor__, "<<=": t.__ilshift__, ">>=": t.__irshift__}[op]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("op", list(INT_OPS))
@pytest.mark.parametrize("view", [False, True])
def test_inplace_int(op, view, level):
    fn = build(f"def f(t, c):\n    T = t[:, ::2] if {view} else t\n    T {op} {INT_OPS[op]}\n"
               f"    return T.sum(), t * 1\n")
    t = np.arange(-12, 12, dtype=np.int64).reshape(4, 6)
    c = np.arange(1, 7, dtype=np.int64)[:3 if view else 6]
    assert_same(fn, t, c, jit_kwargs=jit_kwargs(level))


@pytest.mark.parametrize("level", LEVELS)
def test_ufunc_out(level):
    def f(a, b):
        np.add(a, b, out=a)
        r = np.multiply(a, 2.0, out=(a,))
        np.sqrt(np.abs(b[:-1]), out=b[1:])
        return r, a.sum(), b
    rep = assert_same(f, np.arange(5.0), np.linspace(-2, 2, 5), jit_kwargs=jit_kwargs(level))
    assert "add" in rep.ops_per_graph[0]


# -- globals and closure cells: the caller sees them, so they are compared after each call --
def test_global_and_closure_arrays():
    src = ("def f(x):\n    G[1:] += x[:-1]\n    G[0] = 9.0\n    return G.sum()\n")
    for level in LEVELS:
        ns_plain, ns_jit = {"G": None}, {"G": None}
        plain, jitted = build(src, ns_plain), pijit.jit(build(src, ns_jit),
                                                       **jit_kwargs(level))
        for call in range(3):
            ns_plain["G"] = np.arange(6.0) + call
            ns_jit["G"] = np.arange(6.0) + call
            x = np.linspace(0, 1, 6)
            assert_equal_values(jitted(x.copy()), plain(x.copy()))
            assert_equal_values(ns_jit["G"], ns_plain["G"])
        report = pijit.explain(jitted, x)
        assert (report.graph_count, report.graph_break_count) == (1, 0), report

    def outer(level):
        cell = np.zeros(5)

        def g(x):
            cell[::2] = x[:3]
            cell[1:] *= 2.0
            return cell.sum()
        return cell, g
    for level in LEVELS:
        cell_plain, g_plain = outer(level)
        cell_jit, g = outer(level)
        g_jit = pijit.jit(g, **jit_kwargs(level))
        for _ in range(3):
            x = np.arange(5.0)
            assert_equal_values(g_jit(x), g_plain(x))
            assert_equal_values(cell_jit, cell_plain)
        report = pijit.explain(g_jit, np.arange(5.0))
        assert (report.graph_count, report.graph_break_count) == (1, 0), report


# -- aliasing and overlap -----------------------------------------------------------------
def overlap_shift(A):
    A[1:] += A[:-1]
    return A


def overlap_assign(A):
    A[:-1] = A[1:]
    A[::-1] += A
    return A.sum()


def overlap_transpose(A):
    A += A.T
    return A


def aliased_args(a, b):
    a += b
    a[1:] = b[:-1] * 2.0
    return a.sum() + b.sum()


def view_and_base(A, V):
    A[:-1] += V
    V *= 0.5
    return A


def write_then_read_other_view(A):
    v, w = A[::2], A[1::2]
    v += w
    return w * 1.0, A.sum()


def iterated_while_written(a, A):
    t = 0.0
    for x in a[::-1]:                   # each element read when the loop reaches it
        t = t * 0.5 + x
        a[0] = t
    for k, row in enumerate(A):         # and each row
        if k + 1 < len(A):
            A[k + 1] += row
    for x, y in zip(reversed(a), A[:, 0]):
        a[-1] = x + y
    return t, a, A


@pytest.mark.parametrize("level", LEVELS)
def test_overlap(level):
    kw = jit_kwargs(level)
    assert_same(overlap_shift, np.arange(8.0), jit_kwargs=kw)
    assert_same(overlap_assign, np.arange(8.0), jit_kwargs=kw)
    assert_same(overlap_transpose, np.arange(16.0).reshape(4, 4), jit_kwargs=kw)
    assert_same(write_then_read_other_view, np.arange(8.0), jit_kwargs=kw)


@pytest.mark.parametrize("level", LEVELS)
def test_an_array_written_while_a_loop_iterates_it(level):
    """Unrolled (loop nests off), a loop over an array reads each element or row when it
    reaches it, after the writes of the iterations before, as plain Python's iterator."""
    kw = jit_kwargs(level, loop_nests=False)
    assert_same(iterated_while_written, np.arange(5.0), np.arange(12.0).reshape(3, 4),
                jit_kwargs=kw)


@pytest.mark.parametrize("level", LEVELS)
def test_aliased_arguments(level):
    kw = jit_kwargs(level)
    a = np.arange(6.0)
    assert_same(aliased_args, a, a, jit_kwargs=kw)        # clone keeps them one array
    assert_same(aliased_args, np.arange(6.0), np.ones(6), jit_kwargs=kw)
    base = np.arange(7.0)
    assert_same(view_and_base, base, base[1:], jit_kwargs=kw)
    # The entry compiled for distinct arrays runs on aliased ones (no guard on identity).
    jitted = pijit.jit(aliased_args, **kw)
    for args in ((np.arange(6.0), np.ones(6)), None, None):
        if args is None:
            x = np.arange(6.0)
            args = (x, x)
        pa, ja = clone(args), clone(args)
        assert_equal_values(jitted(*ja), aliased_args(*pa))
        assert_equal_values(list(ja), list(pa))


# -- casting and errors at the same point ---------------------------------------------------
def cast_store(a):
    a[...] = 2.7
    a[1] = -3.9
    return a


def same_kind_error(a):
    a[0] = 5
    a += 1.5
    return a


def bounds_error(a, idx):
    a[0] = 5
    a[idx] = 1
    return a


def store_then_raise(a):
    a[0] = 1.0
    a *= 2.0
    raise ValueError("after the writes")


@pytest.mark.parametrize("level", LEVELS)
def test_casting_and_errors(level):
    kw = jit_kwargs(level)
    assert_same(cast_store, np.zeros(3, dtype=np.int32), jit_kwargs=kw)
    # NumPy's UFuncTypeError, raised after the item assignment before it
    assert_same(same_kind_error, np.zeros(3, dtype=np.int64), jit_kwargs=kw, graphs=1,
                breaks=1)
    # an index array out of bounds: IndexError from the graph, after a[0] = 5
    assert_same(bounds_error, np.zeros(4), np.array([1, 7]), jit_kwargs=kw)
    assert_same(bounds_error, np.zeros(4), np.array([1, 2]), jit_kwargs=kw)
    # the writes run in the graph; the raise (and the call making the error) break after it
    assert_same(store_then_raise, np.arange(3.0), jit_kwargs=kw, graphs=1, breaks=2)


@pytest.mark.parametrize("level", LEVELS)
def test_read_only_target(level):
    def f(a, b):
        b[0] = 1.0
        a[1:] = 2.0
        return a
    jitted = pijit.jit(f, **jit_kwargs(level))
    for writeable in (True, False, True, False):
        results = []
        for fn in (f, jitted):
            a, b = np.arange(4.0), np.zeros(2)
            a.flags.writeable = writeable
            results.append((run_captured(fn, (a, b), {}), b))
        (r_plain, e_plain, _), b_plain = results[0]
        (r_jit, e_jit, _), b_jit = results[1]
        assert type(e_jit) is type(e_plain) and str(e_jit) == str(e_plain)
        assert_equal_values(b_jit, b_plain)
        if e_plain is None:
            assert_equal_values(r_jit, r_plain)
    assert pijit.stats(jitted)["compile_count"] == 1


# -- a write followed by a break, an exception, a return of the view -------------------------
def write_then_break(a):
    a[0] = 7.0
    print("sum", a.sum())
    a[1:] += 1.0
    return a


def return_view(a):
    v = a[1:]
    v[0] = 7.0
    v *= 3.0
    return v


def write_in_branch_then_break(a, flag):
    a[::2] = -1.0
    if a.sum() > 0:         # data-dependent: breaks, the write is done before it
        a[1] = 100.0
    return a


@pytest.mark.parametrize("level", LEVELS)
def test_write_then_break_exception_view(level):
    kw = jit_kwargs(level)
    assert_same(write_then_break, np.arange(4.0), jit_kwargs=kw, graphs=2, breaks=1)
    assert_same(return_view, np.arange(4.0), jit_kwargs=kw)
    assert_same(write_in_branch_then_break, np.arange(6.0), True, jit_kwargs=kw, graphs=2,
                breaks=1)


def same_expression_around_writes(a, k):
    x = a * 1.0
    t = np.maximum(x, 2.0) + k          # (maximum never warns: cse may share it)
    x[0] = 100.0
    u = np.maximum(x, 2.0) + k          # not t: cse must not share it across the write
    x[1:3] = u[:2]
    w = np.maximum(x, 2.0) + k
    return t, u, w


@pytest.mark.parametrize("level", LEVELS)
def test_equal_expressions_across_item_writes(level):
    assert_same(same_expression_around_writes, np.arange(5.0), 0.5,
                jit_kwargs=jit_kwargs(level), ops=["setitem"])


def test_write_nodes_in_the_graph():
    """How writes appear: setitem and in-place nodes, kept by DCE although unused."""
    def f(a, b):
        a[1:] = b[:-1]
        a -= 1.0
        return None
    rep = assert_same(f, np.arange(4.0), np.ones(4))
    assert rep.ops_per_graph == [["getitem", "setitem", "isub"]]


# -- writes and stores replayed after the graph (capture/side_effects.py) --------------------
class Counter:
    def __init__(self):
        self.steps = 0
        self.last = None


def store_then_write(c, a, b):
    c.steps += 1            # a store before a write: the write may raise (read-only a)
    a += b
    return a


def write_then_store(c, a, b):
    a[1:] = b[:-1]
    c.last = a              # replayed after the graph: the same array, written
    c.steps += 1
    return a.sum()


def write_store_raise(c, a):
    a *= 2.0
    c.steps += 1
    raise KeyError("after a write and a store")


@pytest.mark.parametrize("level", LEVELS)
def test_stores_and_writes_keep_their_order(level):
    kw = jit_kwargs(level)
    # the store waits for no write that may raise: it runs where it stands (a break)
    rep = assert_same(store_then_write, Counter(), np.arange(3.0), np.ones(3), jit_kwargs=kw,
                      graphs=1, breaks=1)
    assert "before an operation that may raise" in rep.break_reasons[0]["reason"]
    assert_same(write_then_store, Counter(), np.arange(4.0), np.ones(4), jit_kwargs=kw,
                graphs=1, breaks=0, ops=["setitem"])
    # the write and the store (after the graph), then the raise: plain bytecode after a break
    assert_same(write_store_raise, Counter(), np.arange(3.0), jit_kwargs=kw, graphs=1,
                breaks=2)


@pytest.mark.parametrize("level", LEVELS)
def test_store_then_write_into_a_read_only_array(level):
    """A write that raises on the call's read-only array: the store before it is made, as
    plain Python makes it, and the write's ValueError is NumPy's."""
    jitted = pijit.jit(store_then_write, **jit_kwargs(level))
    pijit.reset(jitted)
    for writeable in (True, True, False, True):
        outcomes = []
        for fn in (store_then_write, jitted):
            c, a = Counter(), np.arange(3.0)
            a.flags.writeable = writeable
            outcomes.append((run_captured(fn, (c, a, np.ones(3)), {}), c.steps, a))
        (r_plain, e_plain, _), steps_plain, a_plain = outcomes[0]
        (r_jit, e_jit, _), steps_jit, a_jit = outcomes[1]
        assert type(e_jit) is type(e_plain) and str(e_jit) == str(e_plain)
        assert steps_jit == steps_plain == 1
        assert_equal_values(a_jit, a_plain)


def assign_with_leading_ones(a, v, w):
    a[0] = v                    # v of shape (1, 3) into a row: NumPy drops its leading 1s
    a[1:, :] = w                # w of shape (1, 1, 3)
    return a


def test_a_value_with_leading_ones_is_assigned():
    assert_same(assign_with_leading_ones, np.zeros((3, 3)), np.ones((1, 3)),
                np.full((1, 1, 3), 2.0), ops=["setitem"])
