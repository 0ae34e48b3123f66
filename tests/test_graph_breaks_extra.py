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
    # graph (mul), loop residual (1 break: print in the body), graph after the loop (sum, mul)
    (print_in_loop_then_code, (X,), 2, 1),
    # the inner loop breaks, so the outer loop (which contains it) runs as residual code
    (nested_loop_inner_break, (X,), 2, 1),
    (for_zip_arrays, (X,), 1, 0),
    (for_enumerate_arrays, (X,), 1, 0),
    (while_true_break, (X,), 1, 0),
    (list_comp_rows, (X,), 1, 0),
], ids=lambda v: getattr(v, "__name__", None) or "")
def test_loops(fn, args, graphs, breaks):
    report = assert_same(fn, *args, graphs=graphs, breaks=breaks)
    _breaks_here(report)


def test_print_in_loop_code_after_loop_captured():
    report = assert_same(print_in_loop_then_code, X, graphs=2, breaks=1)
    assert report.ops_per_graph[-1] == ["sum", "mul"]


def test_data_dependent_if_in_unrolled_loop():
    # the data-dependent if makes the whole loop residual: graph (mul), loop, graph (mul)
    for x in (X, X * 10):
        report = assert_same(data_if_in_loop, x, graphs=2, breaks=1)
        _breaks_here(report)


def test_early_return_in_loop_scalar_arg():
    # `i == limit` is known at capture: pruned, the loop unrolls up to the return
    assert_same(early_return_in_loop, X, 2, graphs=1, breaks=0)
    assert_same(early_return_in_loop, X, 9, graphs=1, breaks=0)


def test_early_return_in_loop_on_data():
    report = assert_same(early_return_in_loop_on_data, X, graphs=2, breaks=1)
    _breaks_here(report)
    assert_same(early_return_in_loop_on_data, X * 0.01, graphs=2, breaks=1)


def test_while_true_break_on_data():
    assert_same(while_true_break_on_data, X, graphs=2, breaks=1)


def test_generators():
    assert_same(generator_function_called, X, graphs=1, breaks=1)
    assert_same(calls_module_generator, X, graphs=1, breaks=1)


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
        G_ARR = np.arange(6.0)                 # new shape: guard fails
        np.testing.assert_array_equal(f(V), V + np.arange(6.0) * 2)
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
    # self.count += 1 (break), self.state = ... (break); the counter is re-read every call
    assert_same(Counter.step, Counter(), V[:3], graphs=2, breaks=2)
    assert_same(Counter.step_many, Counter(), V[:3], graphs=3, breaks=2)


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
    pijit.reset(JIT_INNER)
    assert_same(calls_jitted_in_residual_loop, X, graphs=1, breaks=1)
    info = pijit.code_info(JIT_INNER)
    assert info["compile_count"] >= 1 and info["call_count"] >= 3


# -- containers -----------------------------------------------------------------------------
def dict_building(x):
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
    return a + sum(rest), len(rest)


def test_dicts_and_unpacking():
    assert_same(dict_building, X, graphs=1, breaks=0)
    assert_same(unpack_star, X, graphs=1, breaks=0)


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


def assert_fails(x):
    s = x.sum()
    assert x.shape[0] == 4, f"rows={x.shape[0]}"
    return s


def assert_fails_data(x):
    s = x * 2
    assert s.min() > 0, "negative values"
    return s


def test_runtime_index_error_after_break():
    report = assert_same(index_error_after_break, X, np.array([0, 7]), graphs=1, breaks=1)
    _breaks_here(report)


def test_zero_division_after_break():
    assert_same(zero_division_after_break, X, 0, graphs=1, breaks=1)


def test_try_catches_callee_error():
    # y = x * 2 is captured; from the try block on, everything is residual
    assert_same(catches_callee_error, X, graphs=1, breaks=1)


def test_assert_failures():
    assert_same(assert_fails, X, graphs=1, breaks=0)
    assert_same(assert_fails_data, X, graphs=1, breaks=1)


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
    assert_same(chained_array, X, graphs=2, breaks=1)


def test_del_and_fstring():
    assert_same(del_locals, X, graphs=2, breaks=2)
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
    for _ in range(3):
        np.testing.assert_array_equal(f(V, add_jit), calls_nonlocal(V, add_plain))


# -- aliasing -------------------------------------------------------------------------------
def same_array_twice(a, b):
    c = a * 2
    a += 1
    return b + c


def test_same_array_twice():
    x = V.copy()
    assert_same(same_array_twice, x, x, graphs=2, breaks=1)
