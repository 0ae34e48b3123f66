"""More graph-break scenarios (see test_graph_breaks.py): loops with breaks, early returns,
closures and globals rebound between calls, `self` mutation, *args forwarding, containers,
run-time exceptions after a break, try/with/assert, `del`, unpacking, f-strings, `global`
and `nonlocal`, generators and aliasing. Each runs plain and jitted via `assert_same`
with the graph and break counts it must make."""
import numpy as np
import pytest

import pijit
from differential import assert_same

X = np.linspace(-1.0, 2.0, 12).reshape(3, 4)
V = np.arange(1.0, 7.0)
G_ARR = np.ones(4)
G_COUNTER = 0


def _breaks_here(report):
    assert all(b["filename"] == __file__ for b in report.break_reasons), report


# -- loops --------------------------------------------------------------------------------
def print_in_loop_then_code(x):
    y = x * 2
    for i in range(3):
        print("i", i)
        y = y + i
    z = y.sum(axis=0)
    return z * 3


def nested_loop_inner_break(x):
    y = x + 1
    for i in range(2):
        for j in range(3):
            y = y * 0.5 + j
            print(i, j)
    return y - 1


def for_zip_arrays(x):
    xs = [x, x * 2, x + 1]
    ws = [0.5, 1.5, 2.5]
    acc = x * 0
    for a, w in zip(xs, ws):
        acc = acc + a * w
    return acc


def for_enumerate_arrays(x):
    xs = [x[0], x[1], x[2]]
    acc = np.zeros(4)
    for i, row in enumerate(xs):
        acc = acc + row * i
    return acc


def data_if_in_loop(x):
    y = x * 1.5
    for i in range(3):
        if y.sum() > 10:
            y = y - 1
        else:
            y = y + 2
    return y * 2


def early_return_in_loop(x, limit):
    y = x * 2
    for i in range(5):
        y = y + i
        if i == limit:
            return y
    return -y


def early_return_in_loop_on_data(x):
    y = x * 2
    for i in range(4):
        y = y + 1
        if y.max() > 5:
            return y, i
    return y, -1


def while_true_break(x):
    y = x + 0
    n = 0
    while True:
        y = y * 2
        n += 1
        if n >= 3:
            break
    return y, n


def while_true_break_on_data(x):
    y = x + 0
    n = 0
    while True:
        y = y * 2
        n += 1
        if np.abs(y).max() > 50 or n > 20:
            break
    return y, n


def list_comp_rows(x):
    rows = [r * 2 + 1 for r in x]
    return np.stack(rows), len(rows)


def generator_function_called(x):
    def gen(a):
        for k in range(3):
            yield a * k
    return sum(gen(x))


def gen_module(a):
    yield a + 1
    yield a * 2


def calls_module_generator(x):
    parts = list(gen_module(x))
    return parts[0] - parts[1]


@pytest.mark.parametrize("fn, args, graphs, breaks", [
    # graph (mul), the loop residual (1 break: print in its body), graph after it (sum, mul);
    # the body is outlined: its print breaks it, its resume graph (add) compiles twice (the
    # loop index is a constant the first time, then dynamic)
    (print_in_loop_then_code, (X,), 4, 2),
    # the inner loop breaks, so the outer loop (which contains it) runs as residual code; the
    # outer body (outlined) runs the inner loop as residual code, whose outlined body breaks
    # at the print
    (nested_loop_inner_break, (X,), 4, 4),
    (for_zip_arrays, (X,), 1, 0),
    (for_enumerate_arrays, (X,), 1, 0),
    (while_true_break, (X,), 1, 0),
    (list_comp_rows, (X,), 1, 0),
], ids=lambda v: getattr(v, "__name__", None) or "")
def test_loops(fn, args, graphs, breaks):
    report = assert_same(fn, *args, graphs=graphs, breaks=breaks)
    _breaks_here(report)


def test_print_in_loop_code_after_loop_captured():
    report = assert_same(print_in_loop_then_code, X, graphs=4, breaks=2)
    assert ["sum", "mul"] in report.ops_per_graph


def test_data_dependent_if_in_unrolled_loop():
    # the data-dependent if makes the whole loop residual: graph (mul), loop, graph (mul)
    # ... and the outlined body: graph (sum, gt), a data-dependent break, and a resume graph
    # per branch taken over the iterations (both for X, one for X * 10)
    for x, graphs in ((X, 5), (X * 10, 4)):
        report = assert_same(data_if_in_loop, x, graphs=graphs, breaks=2)
        _breaks_here(report)


def test_early_return_in_loop_scalar_arg():
    # `i == limit` is known at capture: pruned, the loop unrolls up to the return
    assert_same(early_return_in_loop, X, 2, graphs=1, breaks=0)
    assert_same(early_return_in_loop, X, 9, graphs=1, breaks=0)


def test_early_return_in_loop_on_data():
    # graph (mul); the data-dependent `if` makes the whole loop residual (1 break), and the
    # code after the loop (`return y, -1`) has no ops, so no second graph
    for x in (X, X * 0.01):          # returns from inside the loop / falls through
        report = assert_same(early_return_in_loop_on_data, x, graphs=1, breaks=1)
        _breaks_here(report)
        assert "depends on array data" in report.break_reasons[0]["reason"]


def test_while_true_break_on_data():
    # graph (add); the loop with its data-dependent break is residual; `return y, n` has no ops
    assert_same(while_true_break_on_data, X, graphs=1, breaks=1)


def test_generators():
    # a generator function cannot be inlined: break at the call; `sum(...)` of the generator
    # runs with it, and no NumPy op is left to capture
    report = assert_same(generator_function_called, X, graphs=0, breaks=1)
    assert "cannot inline" in report.break_reasons[0]["reason"]
    # break at the call; the resume graph (sub) runs after the list is built
    report = assert_same(calls_module_generator, X, graphs=1, breaks=1)
    assert "generator" in report.break_reasons[0]["reason"]
    assert report.ops_per_graph == [["sub"]]


# -- early returns in branches ----------------------------------------------------------------
def early_return_scalar(x, flag):
    y = x * 2
    if flag:
        return y + 1
    z = y - 1
    return z * z


def early_return_data(x):
    y = x * 2
    if y.mean() > 0.5:
        return y + 1
    z = y - 1
    return z * z


def test_early_return_scalar_vs_data():
    assert_same(early_return_scalar, X, True, graphs=1, breaks=0)
    assert_same(early_return_scalar, X, False, graphs=1, breaks=0)
    # graph (mul, mean, gt) | break at the jump | one resume graph per taken branch
    assert_same(early_return_data, X, graphs=2, breaks=1)
    assert_same(early_return_data, -X, graphs=2, breaks=1)


# -- closures, globals, self --------------------------------------------------------------
def factory(k):
    def inner(x):
        return x * k + 1
    return inner


def test_two_closures_same_code():
    f2, f3 = factory(2.0), factory(3.0)
    j2, j3 = pijit.jit(f2), pijit.jit(f3)
    pijit.reset(j2)
    for _ in range(2):
        np.testing.assert_array_equal(j2(X), X * 2.0 + 1)
        np.testing.assert_array_equal(j3(X), X * 3.0 + 1)
    # same code object: one entry per cell value, both correct, neither stale
    assert pijit.code_info(j2)["compile_count"] == 2
    assert_same(f2, X, graphs=1, breaks=0)
    assert_same(f3, X, graphs=1, breaks=0)


def uses_global_array(x):
    return x + G_ARR * 2


def test_global_array_rebound_recompiles():
    global G_ARR
    f = pijit.jit(uses_global_array)
    pijit.reset(f)
    old = G_ARR
    try:
        np.testing.assert_array_equal(f(V[:4]), V[:4] + 2)
        G_ARR = np.arange(4.0)                 # same shape/dtype: new values read, no recompile
        np.testing.assert_array_equal(f(V[:4]), V[:4] + np.arange(4.0) * 2)
        G_ARR = np.arange(8.0).reshape(2, 4)   # new shape (x unchanged): the G_ARR guard fails
        np.testing.assert_array_equal(f(V[:4]), V[:4] + np.arange(8.0).reshape(2, 4) * 2)
        np.testing.assert_array_equal(f(V[:4]), V[:4] + np.arange(8.0).reshape(2, 4) * 2)
        stats = pijit.stats(f)
        assert stats["compile_count"] == 2, stats
        assert any("G_ARR" in r for r in stats["recompile_reasons"]), stats
    finally:
        G_ARR = old


class Counter:
    def __init__(self):
        self.count = 0
        self.state = np.zeros(3)

    def step(self, x):
        self.count += 1
        self.state = x * 2
        return self.state + self.count

    def step_many(self, x):
        y = x + 1
        self.count += 1
        self.state = self.state + y
        return y * self.count


def test_self_mutation_across_calls():
    plain, jit_obj = Counter(), Counter()
    f = pijit.jit(Counter.step)
    pijit.reset(f)
    for k in range(3):
        x = V[:3] * k
        np.testing.assert_array_equal(f(jit_obj, x), Counter.step(plain, x))
        assert jit_obj.count == plain.count == k + 1
        np.testing.assert_array_equal(jit_obj.state, plain.state)
    # self.count += 1 and self.state = ... are replayed after the graph, which reads them
    assert_same(Counter.step, Counter(), V[:3], graphs=1, breaks=0)
    assert_same(Counter.step_many, Counter(), V[:3], graphs=1, breaks=0)


# -- calls ----------------------------------------------------------------------------------
def breaking_callee(a, b=1.0, *, c=0.0):
    y = a * b
    print("callee", y.shape, c)
    return y + c


def forwards_to_breaking(x, *args, **kwargs):
    z = x - 1
    return breaking_callee(z, *args, **kwargs) * 2


def test_star_args_forwarded_to_breaking_callee():
    # caller graph (sub), break at the call; callee alone: graph (mul), print break, resume
    # graph (add); caller resume graph (mul)
    assert_same(forwards_to_breaking, X, 3.0, kwargs={"c": 0.5}, graphs=4, breaks=2)
    assert_same(forwards_to_breaking, X, graphs=4, breaks=2)


def jitted_in_residual_loop_inner(a):
    return a * 3 + 1


JIT_INNER = pijit.jit(jitted_in_residual_loop_inner)


def calls_jitted_in_residual_loop(x):
    y = x + 0
    for i in range(3):
        print("it", i)
        y = JIT_INNER(y)
    return y


def test_jitted_function_called_from_residual_loop():
    # graph (add), the loop with its print is residual (1 break), `return y` has no op; the
    # outlined body breaks at the print and its resume inlines JIT_INNER (mul, add)
    pijit.reset(JIT_INNER)
    report = assert_same(calls_jitted_in_residual_loop, X, graphs=2, breaks=2)
    assert ["mul", "add"] in report.ops_per_graph
    info = pijit.stats(JIT_INNER)
    # the jitted runs inline it, and the plain reference runs it as plain Python: its own
    # frame is never compiled
    assert info["compile_count"] == 0 and info["cache_hits"] == 0, info


# -- containers -----------------------------------------------------------------------------
def dict_literal(x):
    d = {"a": x * 2, "b": x + 1}
    e = {**d, "c": d["a"] - d["b"]}
    return e, e["c"].sum()


def dict_methods(x):
    d = {"a": x * 2, "b": x + 1}
    d["c"] = d["a"] - d["b"]
    e = d.get("e", x * 0)
    total = e
    for k, v in d.items():
        total = total + v
    return d, total, d.get("a")


def unpack_star(x):
    parts = [x[0], x[1], x[2]]
    a, *rest = parts
    return a + rest[0] * rest[1], len(rest)


def test_dicts_and_unpacking():
    assert_same(dict_literal, X, graphs=1, breaks=0)
    # UNPACK_EX (a, *rest = ...) is not captured: graph (3 x getitem), break, graph (mul, add)
    report = assert_same(unpack_star, X, graphs=2, breaks=1)
    assert "UNPACK_EX" in report.break_reasons[0]["reason"]


def next_of_an_iterator(x):
    it = iter(x)
    first = next(it)            # next: a break; `it` is on the stack and in a local
    second = next(it)
    return first * 2, second, np.fromiter(it, x.dtype)


def zip_consumed_after_a_break(x):
    pairs = zip(x, x[::-1])
    head = next(pairs)
    return head, [a - b for a, b in pairs]


def function_named_twice(x):
    f = lambda v: v * 2
    g = f
    print("break")
    f.tag = 1
    return f is g, getattr(g, "tag", None), g(x)


def tuple_named_twice(x):
    t = (x, 1)
    u = t
    print("break")
    return t is u, u[0] * 2


def method_named_twice(x):
    m = (x * 2).sum
    n = m
    print("break")
    return m is n, n()


def test_an_iterator_at_a_break_is_one_iterator():
    """iter(x) referenced twice at a break (next's argument, and the local it) is made once
    in residual code (reconstruct.Emitter._once): made twice, next(it) consumed a copy and
    the second next read x[0] again."""
    for fn in (next_of_an_iterator, zip_consumed_after_a_break):
        report = assert_same(fn, V, graphs=None, breaks=None)
        assert report.graph_break_count >= 1 and "next" in report.break_reasons[0]["reason"]


@pytest.mark.parametrize("fn", [function_named_twice, tuple_named_twice, method_named_twice])
def test_a_function_or_tuple_at_a_break_is_one_object(fn):
    """A lambda, a tuple or a bound method two locals name at a break is made once in
    residual code: made twice, `f is g` was False and an attribute set through f was not
    seen through g."""
    report = assert_same(fn, V, graphs=None, breaks=None)
    assert report.graph_count >= 1 and "print" in report.break_reasons[0]["reason"]


def test_dict_methods():
    # Stores into a dict the function built and its .items method are not captured (yet):
    # each is a break. graph 1 (mul, add); d["c"] = ... (STORE_SUBSCR), d.items(), the loop
    # over the dict_items; the resumes have graphs of their own: 5 graphs (the d.get calls
    # are captured: the dict's keys are known)
    report = assert_same(dict_methods, X, graphs=5, breaks=3)
    _breaks_here(report)


# -- exceptions -----------------------------------------------------------------------------
def index_error_after_break(x, idx):
    y = x * 2
    print("before")
    return y[idx]


def zero_division_after_break(x, n):
    y = x + 1
    print("before")
    k = 10 // n
    return y * k


def callee_raises(a):
    if a.shape[0] > 2:
        raise ValueError("too many rows: %d" % a.shape[0])
    return a


def catches_callee_error(x):
    y = x * 2
    try:
        z = callee_raises(y)
    except ValueError as e:
        print("caught", e)
        z = y[:2]
    return z + 1


# pytest rewrites `assert` in test modules into calls of its own helpers; compile these
# from source so that they are plain Python `assert` statements
_ASSERT_SRC = """
def assert_fails(x):
    s = x.sum()
    assert x.shape[0] == 4, f"rows={x.shape[0]}"
    return s


def assert_fails_data(x):
    s = x * 2
    assert s.min() > 0, "negative values"
    return s
"""
_assert_ns = {"np": np}
exec(compile(_ASSERT_SRC, "<assert_scenarios>", "exec"), _assert_ns)
assert_fails = _assert_ns["assert_fails"]
assert_fails_data = _assert_ns["assert_fails_data"]


def test_runtime_index_error_after_break():
    # graph (mul) | print | resume graph (the indexing), which raises IndexError when it runs
    report = assert_same(index_error_after_break, X, np.array([0, 7]), graphs=2, breaks=1)
    _breaks_here(report)


def test_zero_division_after_break():
    # graph (add) | print | `10 // n` with the guarded constant n == 0 is known to raise: a
    # second break, the division runs as residual bytecode and raises there
    report = assert_same(zero_division_after_break, X, 0, graphs=1, breaks=2)
    assert "ZeroDivisionError" in report.break_reasons[1]["reason"]
    assert_same(zero_division_after_break, X, 3, graphs=2, breaks=1)


def test_try_catches_callee_error():
    # y = x * 2 is captured; from the try block on, everything is residual
    assert_same(catches_callee_error, X, graphs=1, breaks=1)


def test_assert_failures():
    # The failing path of an assert is three breaks on its line (LOAD_ASSERTION_ERROR, the
    # AssertionError(msg) call, RAISE_VARARGS); the message is built in between. A passing
    # assert on a guarded shape is pruned.
    report = assert_same(assert_fails, X, graphs=1, breaks=3)
    assert {b["lineno"] for b in report.break_reasons} == {4}
    assert_same(assert_fails, np.ones((4, 2)), graphs=1, breaks=0)
    # on array data: one break at the jump, plus the three of the failing path
    report = assert_same(assert_fails_data, X, graphs=1, breaks=4)
    assert {b["lineno"] for b in report.break_reasons} == {10}
    assert all(b["filename"] == "<assert_scenarios>" for b in report.break_reasons)
    assert_same(assert_fails_data, X + 5, graphs=1, breaks=1)


def with_block(x, log):
    y = x + 1
    with open("/dev/null") as fh:
        log.append(fh.name)
        z = y * 2
    return z - 1


def test_with_block():
    assert_same(with_block, X, [], graphs=1, breaks=2)


# -- comparisons, del, f-strings ----------------------------------------------------------
def chained_scalar(x, a, b):
    if 0 < a < b <= 10:
        return x * a
    return x - b


def chained_array(x):
    m = x.mean()
    if -1 < m < 1:
        return x * 2
    return x


def del_locals(x):
    a = x * 2
    b = a + 1
    print("one")
    del a
    c = b * 3
    print("two")
    del b
    return c


def fstring_print(x):
    y = x.sum(axis=0)
    print(f"y={y} max={y.max():.3f} shape={y.shape}")
    return y * 2


def test_chained_comparisons():
    assert_same(chained_scalar, X, 2, 5, graphs=1, breaks=0)
    assert_same(chained_scalar, X, 6, 5, graphs=1, breaks=0)
    # each comparison of the chain is its own data-dependent jump: graph (mean, gt), break,
    # resume graph (lt), break, resume graph (mul)
    assert_same(chained_array, X, graphs=3, breaks=2)
    assert_same(chained_array, X * 5, graphs=2, breaks=2)


def test_del_locals_between_breaks():
    assert_same(del_locals, X, graphs=2, breaks=2)


def del_in_a_loop_body(x):
    y = x * 2
    t = x
    for i in range(3):
        print("i", i)
        t = t + y
        del y
    return t


def del_in_a_loop_body_maybe(x):
    s = x * 0.0
    y = x + 1.0
    for i in range(x.shape[0]):
        s = s + x[i] * y
        if x[i] > 2:            # data-dependent: the loop runs as residual code
            del y
    return s


@pytest.mark.parametrize("fn, arg", [(del_in_a_loop_body, X),
                                     (del_in_a_loop_body_maybe, np.arange(5.0)),
                                     (del_in_a_loop_body_maybe, np.zeros(5))])
def test_a_loop_body_deleting_a_local_runs_inline(fn, arg):
    # an outlined body would delete its own copy of y, the caller's staying bound: a later
    # iteration read it where Python raises UnboundLocalError (printing i 0, i 1)
    report = assert_same(fn, arg, graphs=1, breaks=1)
    assert report.ops_per_graph == [["mul"] if fn is del_in_a_loop_body else ["mul", "add"]]


def test_fstring_print():
    assert_same(fstring_print, X, graphs=2, breaks=1)


# -- global and nonlocal ------------------------------------------------------------------
def global_counter(x):
    global G_COUNTER
    G_COUNTER += 1
    return x * G_COUNTER


def test_global_counter():
    global G_COUNTER
    G_COUNTER = 0
    f = pijit.jit(global_counter)
    pijit.reset(f)
    for k in range(1, 4):
        np.testing.assert_array_equal(f(V), V * k)
    assert G_COUNTER == 3
    G_COUNTER = 0


def make_accumulator():
    total = 0

    def add(v):
        nonlocal total
        total += 1
        return v * total
    return add


def calls_nonlocal(x, add):
    return add(x) + add(x)


def test_nonlocal_closure():
    add_plain, add_jit = make_accumulator(), make_accumulator()
    f = pijit.jit(calls_nonlocal)
    pijit.reset(f)
    # the cell value changes every call: past limit_graph_count the resume runs plain
    for _ in range(12):
        np.testing.assert_array_equal(f(V, add_jit), calls_nonlocal(V, add_plain))


# -- aliasing -------------------------------------------------------------------------------
def same_array_twice(a, b):
    c = a * 2
    a += 1
    return b + c


def test_same_array_twice():
    # one graph: the write into a shows in b, which the graph reads after it
    x = V.copy()
    assert_same(same_array_twice, x, x)


def same_array_item_write(a, b):
    s = b.sum()
    a[0] = 100.0
    return b[0] + s, b


def test_same_array_twice_item_write():
    # one graph: b is returned as the input itself and sees the write
    x = V.copy()
    assert_same(same_array_item_write, x, x)


# -- global / nonlocal counts -----------------------------------------------------------------
def test_global_counter_counts():
    global G_COUNTER
    G_COUNTER = 0
    # the global store is replayed after the graph, which reads the new value (mul)
    report = pijit.explain(pijit.jit(global_counter), V)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    assert G_COUNTER == 1
    G_COUNTER = 0


def test_nonlocal_closure_counts():
    add = make_accumulator()
    # `add` stores into its cell: inlined, the store would go through the callee's closure,
    # so each of the two calls is a break in the caller, and `add` runs jitted on its own,
    # where the nonlocal store is replayed after its graph: 2 breaks. Graphs: `add` with
    # total constant, then dynamic (the value changed), and the caller's final add -> 3
    report = pijit.explain(pijit.jit(calls_nonlocal), V, add)
    assert (report.graph_count, report.graph_break_count) == (3, 2), report
    assert sum("nonlocal store" in b["reason"] for b in report.break_reasons) == 2
    _breaks_here(report)
    assert report.fallback is None


# -- more loops --------------------------------------------------------------------------------
def residual_loop_over_zip(x, out):
    xs = [x, x * 2]
    for a, w in zip(xs, (1.0, 3.0)):
        out.append(a * w)
        print(len(out))
    return x - 1


def residual_loop_over_list(x, out):
    xs = [x, x * 2]
    for a in xs:
        out.append(a * 3)
        print(len(out))
    return x - 1


def residual_loop_over_enumerate(x, out):
    xs = [x, x * 2]
    for i, a in enumerate(xs):
        out.append(a * i)
        print(len(out))
    return x - 1


def loop_body_breaks_then_returns(x):
    t = x + 1
    for i in range(2):
        print("once", i)
        return t * 2
    return t


@pytest.mark.parametrize("fn", [residual_loop_over_zip, residual_loop_over_enumerate],
                         ids=lambda f: f.__name__)
def test_residual_loop_over_zip_enumerate(fn):
    # graph (mul), residual loop (1 break), graph (sub); the outlined body (a * w and the
    # append, then the print breaks) compiles twice: its item is a tuple whose scalar
    # changes, constant the first time and dynamic after -> 4 graphs, 3 breaks
    report = assert_same(fn, X, [], graphs=4, breaks=3)
    assert report.fallback is None


def residual_loop_over_a_strict_zip(x, y):
    t = x * 2.0
    total = 0.0
    for a, b in zip(t, y, strict=True):
        print(float(a))             # a break: the rest of the loop runs as residual code
        total = total + a * b
    return total


def test_a_residual_iterator_is_rebuilt_with_its_keyword_arguments():
    """The zip rebuilt for the residual loop is called with strict=True by keyword: by
    position, True would be a third iterable (TypeError: 'bool' object is not iterable)."""
    report = assert_same(residual_loop_over_a_strict_zip, np.arange(3.0), np.ones(3),
                         graphs=4, breaks=2)
    assert report.fallback is None


def loop_break_then_pruned_return(x, n):
    t = x + 1
    for a in [x, t]:
        if n > 1:
            t = np.tanh(a)
        else:
            print("returns", n)
            return a * 2
    return t


@pytest.mark.parametrize("fn, args", [(loop_body_breaks_then_returns, (X,)),
                                      (loop_break_then_pruned_return, (X, 0))],
                         ids=["always_returns", "pruned_branch_returns"])
def test_loop_body_breaks_then_returns(fn, args):
    # graph (add), then the loop as residual code (1 break), which returns from inside it:
    # `* 2` runs there as plain Python, so the add is the only graph
    report = assert_same(fn, *args, graphs=1, breaks=1)
    assert report.ops_per_graph == [["add"]], report


def test_loop_break_then_pruned_return_other_branch():
    # n > 1: the else branch (and its return) is pruned; the unrolled loop has no break
    assert_same(loop_break_then_pruned_return, X, 2, graphs=1, breaks=0)


def appends_in_unrolled_loop(x, out):
    for i in range(3):
        out.append(x * i)
    return len(out)


def data_while_with_cap(x, bound):
    y = x * 4
    n = 0
    while np.abs(y).max() > bound and n < 50:
        y = y * 0.5
        n += 1
    return y + 0, n


def long_loop_then_code(x):
    acc = x * 0
    for i in range(150):
        acc = acc + i
    b = acc * 2
    return b.sum(axis=1)


def test_more_loops():
    # The print makes the loop body break: the loop runs as residual code with graphs
    # before (mul) and after (sub) it, and its outlined body: graph (a * 3, the append
    # replayed), then the print breaks; the body compiles again at its second call (the list
    # argument is guarded by length once len() read it, and it grew).
    assert_same(residual_loop_over_list, X, [], graphs=4, breaks=3)
    # the appends into the caller's list are replayed after the graph: one graph, no break
    report = assert_same(appends_in_unrolled_loop, V, [0], graphs=1, breaks=0)
    assert report.fallback is None
    # graph (mul, absolute, max, gt) and a break at the first test of the condition (it is
    # compiled before the loop body, at the jump into it); the resume function then meets
    # the loop head and runs the loop as residual code (second break); graph (add) after it.
    # Same shape as data_while in test_graph_breaks.py.
    report = assert_same(data_while_with_cap, X, 0.3, graphs=2, breaks=2)
    assert report.ops_per_graph == [["mul", "absolute", "max", "gt"], ["add"]]
    # loop > MAX_LOOP_UNROLLING without loop nodes: residual; code before it (mul), after it
    # (mul, sum), and the outlined body (add), compiled once for all 150 iterations
    report = assert_same(long_loop_then_code, X, graphs=3, breaks=1,
                         jit_kwargs={"jit_config": {"loop_nodes": False}})
    assert "MAX_LOOP_UNROLLING" in report.break_reasons[0]["reason"]
    assert ["mul", "sum"] in report.ops_per_graph and ["add"] in report.ops_per_graph
    # with loop nodes (the default): one graph around one loop node
    report = assert_same(long_loop_then_code, X, graphs=1, breaks=0)
    assert report.ops_per_graph == [["mul", "loop", "tuple_item", "mul", "sum"]]


# -- more calls --------------------------------------------------------------------------------
def callee_with_data_if(a):
    if a.sum() > 0:
        return a * 2
    return -a


def calls_callee_with_data_if(x):
    y = x + 1
    z = callee_with_data_if(y)
    return z - 3


class Stateful:
    def __init__(self):
        self.scale = 2.0
        self.log = []

    def helper(self, a):
        print("helper", a.shape)
        return a * self.scale

    def run(self, x):
        h = x + 1
        self.log.append("run")
        return self.helper(h) - 1


def test_callee_with_data_branch_and_method_breaks():
    # the callee cannot be captured whole (data-dependent if): break at the call, the
    # callee jitted alone (graph, break, branch resume graph), the caller's resume (sub)
    for x in (X, -X - 2):
        report = assert_same(calls_callee_with_data_if, x, graphs=4, breaks=2)
        _breaks_here(report)
    # h = x + 1, log.append (replayed) | call to helper breaks: helper alone (print break,
    # resume graph mul) | caller resume (sub)
    assert_same(Stateful.run, Stateful(), X, graphs=3, breaks=2)


def exception_in_inlined_callee(a, idx):
    return a[idx] * 2


def calls_raising_callee(x):
    y = x.reshape(-1)
    print("size", y.size)
    return exception_in_inlined_callee(y, np.array([1, 40]))


def try_finally_print(x, log):
    y = x * 2
    try:
        print("in try")
        return y + 1
    finally:
        log.append("finally")


def test_exceptions_in_callees_and_finally():
    # graph (reshape) | print | resume graph with the inlined callee's out-of-bounds take
    assert_same(calls_raising_callee, X, graphs=2, breaks=1)
    # graph (mul) | the try block on is residual
    assert_same(try_finally_print, X, [], graphs=1, breaks=1)


def elementwise_chain(x):
    m = (x > -0.5) & (x < 1.5)
    return np.where(m, x, 0.0), m.sum()


def test_elementwise_chain_no_break():
    assert_same(elementwise_chain, X, graphs=1, breaks=0)


# -- views, **kwargs, continue, nested defs -------------------------------------------------
def view_then_inplace(x):
    v = x[1:]
    w = v * 2
    x += 1
    return v, w


def inplace_on_view_arg(x):
    x[0] = 5.0
    return x.sum()


def kwargs_break(x, **kw):
    print(sorted(kw))
    return x * kw.get("s", 1.0)


def loop_with_continue(x):
    for i in range(4):
        if i % 2:
            continue
        x = x + i
    return x


def nested_def_breaks(x):
    def g(y):
        print("g")
        return y + 1
    return g(x) * 2


def test_views_kwargs_continue_nested_def():
    # one graph (getitem, mul, iadd); the returned view v sees the update
    assert_same(view_then_inplace, X.copy())
    # a write into a transposed (non-contiguous) input, then its sum: one graph
    assert_same(inplace_on_view_arg, X.T)
    # print (break), then kw.get of the **kwargs dict (its keys are known) and the mul in
    # the resume graph
    assert_same(kwargs_break, X, kwargs={"s": 3.0, "t": 1}, graphs=1, breaks=1)
    # `i % 2` on the loop counter is a constant: continue is pruned, the loop unrolls
    assert_same(loop_with_continue, X, graphs=1, breaks=0)
    # g (a fresh function each call) breaks inside: one break at the call, g runs as it
    # is; resume graph (mul)
    assert_same(nested_def_breaks, X, graphs=1, breaks=1)


# -- records of equal code objects -----------------------------------------------------------
_EQUAL_SRC = "def prog(x):\n    y = x * 2\n    print('hi')\n    return y + 1\n"


def _build_equal():
    namespace = {}
    exec(compile(_EQUAL_SRC, "<equal_code>", "exec"), namespace)
    return namespace["prog"]


def test_equal_code_objects_share_a_record(capsys):
    f1, f2 = _build_equal(), _build_equal()
    assert f1.__code__ == f2.__code__ and f1.__code__ is not f2.__code__
    j1 = pijit.jit(f1)
    pijit.reset(j1)
    pijit.jit(f2, mode="PSJit")                 # another function, strict
    np.testing.assert_array_equal(j1(V), V * 2 + 1)  # LAX: breaks at print, must not raise
    assert pijit.stats(j1)["compile_count"] == 1
    pijit.reset(pijit.jit(f2))                  # must not clear f1's record
    assert pijit.stats(j1)["compile_count"] == 1


def residual_loop_two_outs(x):
    s = x * 0.0
    t = x + 1.0
    for i in range(3):
        print("it", i)
        s = s + t
        t = t * 2.0
    return s, t


def test_residual_loop_body_returns_each_local_to_its_name():
    # graph (mul, add); the loop with its print is residual (1 break), its outlined body
    # breaks at the print (1 break) and its resume is a graph (add, mul) returning s and t,
    # which the loop must store back in that order (the values differ every iteration)
    report = assert_same(residual_loop_two_outs, X, graphs=2, breaks=2)
    assert report.ops_per_graph == [["mul", "add"], ["add", "mul"]], report


def lambda_with_a_keyword_only_default(x):
    g = lambda y, *, k=2.0: y * k        # noqa: E731 - made before the break, called after
    print("break")
    return g(x) + g(x, k=3.0)


def nested_def_with_a_keyword_only_default(x):
    def g(y, *, k=2.0):
        return y * k
    z = x + 1.0
    print("break")
    return g(z)


@pytest.mark.parametrize("fn", [lambda_with_a_keyword_only_default,
                                nested_def_with_a_keyword_only_default])
def test_a_function_rebuilt_at_a_break_keeps_its_keyword_only_defaults(fn):
    report = assert_same(fn, np.linspace(-1.0, 2.0, 6), graphs=None, breaks=1)
    assert "print" in report.break_reasons[0]["reason"], report


def nested_def_with_a_default(x):
    def g(y, k=2.0):
        return y * k
    z = x + 1.0
    print("break")
    return g(z) - g(z, 3.0)


def test_a_function_rebuilt_at_a_break_keeps_its_positional_defaults():
    """Residual code rebuilds the function with its positional defaults (3.13: set by
    SET_FUNCTION_ATTRIBUTE with their own flag)."""
    report = assert_same(nested_def_with_a_default, np.linspace(-1.0, 2.0, 6), graphs=None,
                         breaks=1)
    assert "print" in report.break_reasons[0]["reason"], report


def _scaled_by(x, **kw):
    return x * kw["s"]


def merges_a_repeated_keyword(x):
    y = x + 1.0
    a, b = {"s": 2.0}, {"s": 3.0}
    return _scaled_by(y, **a, **b)


def merges_two_keywords(x):
    y = x + 1.0
    a, b = {"s": 2.0}, {"t": 3.0}
    return _scaled_by(y, **a, **b)


def test_a_keyword_given_twice_by_two_mappings_raises():
    """f(**a, **b) with a key in both raises TypeError (DICT_MERGE), after the work before
    it; without a repeat the merged call is captured whole."""
    report = assert_same(merges_a_repeated_keyword, np.arange(3.0), graphs=1, breaks=1)
    assert "repeated keyword" in report.break_reasons[0]["reason"], report
    assert_same(merges_two_keywords, np.arange(3.0), ops=["add", "mul"])

