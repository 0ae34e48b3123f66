"""Stores the caller can see (attributes, globals, nonlocals, list.append, dict items) are
recorded during capture and replayed after the graph in program order (issue 20, item 2):
plain vs jitted, twice, on copies (results, object state, printed output, exceptions), and
how each call ran (one graph, or the break where a store cannot be deferred)."""
import contextlib
import types
import io

import numpy as np
import pytest

import pijit
from differential import assert_same, assert_equal_values

X = np.linspace(-1.0, 2.0, 6)
IDX_BAD = np.array([0, 7])


class State:
    def __init__(self):
        self.steps = 0
        self.avg = np.zeros(6)
        self.a = np.ones(6)
        self.b = -np.ones(6)
        self.hist = []
        self.cache = {"a": 1.0}


def interleaved(s, x):
    s.steps += 1
    s.avg = 0.9 * s.avg + 0.1 * x
    y = s.avg * s.steps                 # reads both stored values
    s.avg = s.avg + y                   # a second store of the same attribute
    s.hist.append(y)
    s.hist.append(len(s.hist))          # sees its own append
    s.cache["a"] = s.cache["a"] + 1.0
    s.cache["b"] = s.cache["a"] * 2     # a new key, read back
    return y + s.avg, s.cache["b"]


def swaps(s, x):
    s.a, s.b = s.b, s.a                 # both reloaded before either is stored
    s.a = s.a * x
    return s.a - s.b


def stored_object_read_back(s, other, x):
    s.child = other
    s.child.steps += 2                  # through the stored object
    return x * s.child.steps


def test_stores_replayed_in_order_with_interleaved_reads():
    report = assert_same(interleaved, State(), X, graphs=1, breaks=0)
    assert "mul" in report.ops_per_graph[0]
    assert_same(swaps, State(), X, graphs=1, breaks=0)
    assert_same(stored_object_read_back, State(), State(), X, graphs=1, breaks=0)


def stores_back(s, x):
    w = s.a
    s.a = w                             # the object it holds already: nothing to replay
    return x * s.a


def test_store_of_the_object_held_is_not_replayed():
    # (`self.w -= g` ends the same way: the in-place update, then a store of self.w itself)
    report = assert_same(stores_back, State(), X, graphs=1, breaks=0)
    assert "STORE_ATTR" not in report.bytecode


def test_unrolled_loop_of_stores():
    def f(s, x):
        for i in range(4):
            s.steps += i
            s.hist.append(x * s.steps)
        return s.steps
    assert_same(f, State(), X, graphs=1, breaks=0)


# -- a break, a resume function or an exception after the store -----------------------------
def store_then_print(s, x):
    s.steps += 1
    s.avg = x * 2
    print("steps", s.steps, float(s.avg[1]))       # the break sees both stores
    s.avg = s.avg + s.steps                         # the resume function stores again
    return s.avg


def store_then_raise(s, x, fail):
    s.steps += 1
    s.avg = x * 3
    if fail:
        raise ValueError(f"failed at {s.steps}")
    s.steps += 10
    return x


def store_then_graph_error(s, x, idx):
    s.steps += 1
    s.avg = x + 1
    return x[idx]                       # IndexError at run time, after the stores


def raises_in_callee():
    return int("not a number")


def store_then_residual_error(s, x):
    s.steps += 1
    s.hist.append(x * 2)
    raises_in_callee()
    s.steps += 100


def test_store_followed_by_a_break():
    report = assert_same(store_then_print, State(), X, graphs=2, breaks=1)
    assert "print" in report.break_reasons[0]["reason"]


def test_store_followed_by_an_exception():
    # a raise statement breaks (at the exception's call, then at the raise in the resume
    # function): the stores before it are replayed, none after
    assert_same(store_then_raise, State(), X, True, graphs=1, breaks=2)
    assert_same(store_then_raise, State(), X, False, graphs=1, breaks=0)
    # the graph's indexing may raise: the stores before it run where they stand
    report = assert_same(store_then_graph_error, State(), X, IDX_BAD, graphs=2, breaks=2)
    assert all("may raise" in b["reason"] for b in report.break_reasons), report
    # the call breaks (and the callee, jitted on its own, at int()): replayed before it
    report = assert_same(store_then_residual_error, State(), X, graphs=1, breaks=2)
    assert "raises_in_callee" in report.break_reasons[0]["reason"]


# -- what capture assumed is guarded ---------------------------------------------------------
class WithProperty(State):
    @property
    def steps(self):
        return self._steps

    @steps.setter
    def steps(self, value):
        self._steps = value * 2


class Slotted:
    __slots__ = ("steps",)

    def __init__(self):
        self.steps = 0

    def __eq__(self, other):            # for the differential helper (no __dict__)
        return type(other) is Slotted and other.steps == self.steps


class Logged(State):
    def __setattr__(self, name, value):
        object.__setattr__(self, "last", name)
        object.__setattr__(self, name, value)


def bump(s, x):
    s.steps += 1
    return x * 2


def test_stores_that_are_not_plain_break():
    # (a slot is read through its descriptor too: the read breaks before the store does)
    for obj, breaks in ((WithProperty(), 1), (Slotted(), 2), (Logged(), 1)):
        report = assert_same(bump, obj, X, graphs=1, breaks=breaks)
        assert "store to attribute 'steps'" in report.break_reasons[-1]["reason"], report


def test_class_guard_on_store():
    class Plain:
        def __init__(self):
            self.steps = 0
    f = pijit.jit(bump)
    pijit.reset(f)
    s = Plain()
    f(s, X)
    f(s, X)
    assert s.steps == 2
    Plain.__setattr__ = lambda self, name, value: object.__setattr__(self, name, value + 10)
    f(s, X)                     # the class changed: the store is no longer replayed plainly
    assert s.steps == 13
    assert any("plain store of .steps" in r for r in pijit.stats(f)["recompile_reasons"])


def reads_other(a, b, x):
    a.steps = 5
    return x * b.steps


def appends_then_reads_other(l1, l2, x):
    l1.append(x)
    return x * len(l2)


def test_aliased_objects():
    s = State()
    report = assert_same(reads_other, s, s, X, graphs=1, breaks=1)
    assert "stored into through another path" in report.break_reasons[0]["reason"]
    report = assert_same(reads_other, State(), State(), X, graphs=1, breaks=0)
    assert "b is not a" in report.guards
    # the entry made for two objects is not used for one object passed twice
    f = pijit.jit(reads_other)
    pijit.reset(f)
    a, b = State(), State()
    assert_equal_values(f(a, b, X), X * 0)
    assert_equal_values(f(a, a, X), X * 5)
    assert any("is now the same object" in r for r in pijit.stats(f)["recompile_reasons"])
    lst = [1]
    for args in ((lst, lst), ([1], [2, 3])):
        report = assert_same(appends_then_reads_other, *args, X, graphs=1, breaks=1)
        assert "may be one appended to" in report.break_reasons[0]["reason"]


# -- globals and nonlocals --------------------------------------------------------------------
G_STEPS = 0
G_LOG = []


def global_stores(x):
    global G_STEPS
    G_STEPS += 1
    G_LOG.append(G_STEPS)
    y = x * G_STEPS
    G_STEPS = G_STEPS * 10
    return y + G_STEPS


def test_global_stores_match_plain():
    global G_STEPS
    f = pijit.jit(global_stores)
    pijit.reset(f)
    runs = []
    for fn in (global_stores, f):
        G_STEPS = 0
        G_LOG.clear()
        runs.append([(fn(X), G_STEPS, list(G_LOG)) for _ in range(3)])
    for (got, steps, log), (want, steps_p, log_p) in zip(runs[1], runs[0]):
        assert_equal_values(got, want)
        assert (steps, log) == (steps_p, log_p)
    report = pijit.explain(f, X)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report


def make_counter():
    count = 0

    def step(x):
        nonlocal count
        count += 1
        return x * count, count
    return step


def same_counts(make, calls):
    """Calls a counter made by `make` plain and another jitted, `calls` times each: the
    results and the counts they return agree at every call."""
    plain, jitted = make(), pijit.jit(make())
    for _ in range(calls):
        (y, n), (y_p, n_p) = jitted(X), plain(X)
        assert_equal_values(y, y_p)
        assert n == n_p


def test_nonlocal_store_matches_plain():
    same_counts(make_counter, 4)
    report = pijit.explain(make_counter(), X)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report


# -- a training loop ---------------------------------------------------------------------------
class MLP:
    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        self.w1 = rng.standard_normal((8, 16)) * 0.3
        self.w2 = rng.standard_normal((16, 1)) * 0.3
        self.steps = 0
        self.losses = []

    def forward(self, x):
        h = np.maximum(x @ self.w1, 0.0)
        return h, h @ self.w2

    def step(self, x, y, lr):
        """Forward, hand-written gradients, out-of-place SGD updates, a counter."""
        h, out = self.forward(x)
        err = out - y
        loss = (err * err).mean()
        g_out = 2.0 * err / err.shape[0]
        g_w2 = h.T @ g_out
        g_h = (g_out @ self.w2.T) * (h > 0)
        g_w1 = x.T @ g_h
        self.w1 = self.w1 - lr * g_w1
        self.w2 = self.w2 - lr * g_w2
        self.steps += 1
        self.losses.append(loss)
        return loss

    def step_inplace(self, x, y, lr):
        """The same step with in-place SGD updates (`self.w -= lr * g`)."""
        h, out = self.forward(x)
        err = out - y
        loss = (err * err).mean()
        g_out = 2.0 * err / err.shape[0]
        g_w2 = h.T @ g_out
        g_h = (g_out @ self.w2.T) * (h > 0)
        g_w1 = x.T @ g_h
        self.w1 -= lr * g_w1
        self.w2 -= lr * g_w2
        self.steps += 1
        self.losses.append(loss)
        return loss


def _batches(n):
    rng = np.random.default_rng(7)
    xs = rng.standard_normal((n, 32, 8))
    return xs, np.sin(xs.sum(axis=2, keepdims=True))


def _train(step, model, steps=50):
    xs, ys = _batches(steps)
    out = []
    for x, y in zip(xs, ys):
        loss = step(model, x, y, 0.05)
        out.append((loss, model.w1.copy(), model.w2.copy(), model.steps, len(model.losses)))
    return out


@pytest.mark.parametrize("level", ["O0", "O1"])
@pytest.mark.parametrize("method", ["step", "step_inplace"])
def test_training_loop_matches_plain_step_by_step(method, level):
    fn = getattr(MLP, method)
    plain = _train(fn, MLP())
    jitted = pijit.jit(fn, jit_config={"jit_level": level})
    pijit.reset(jitted)
    model = MLP()
    got = _train(jitted, model)
    for step, (g, p) in enumerate(zip(got, plain)):
        for a, b in zip(g, p):
            assert_equal_values(a, b, f"step {step}")
    assert all(type(v) is np.float64 for v in model.losses)


def test_training_step_is_one_graph():
    xs, ys = _batches(1)
    assert_same(MLP.step, MLP(), xs[0], ys[0], 0.05, graphs=1, breaks=0)


def test_inplace_training_step_is_one_graph():
    """`self.w -= lr * g` is an in-place write node into the attribute's array
    (capture/writes.py); the store of that same array back into the attribute is not
    replayed, the step counter's is."""
    xs, ys = _batches(1)
    assert_same(MLP.step_inplace, MLP(), xs[0], ys[0], 0.05, graphs=1, breaks=0,
                ops=["isub"])


def appends_then_rebinds(a, b, out):
    t0 = np.tanh(b)
    for u in [a, a]:
        out.append(t0)
        t0 = u + 1.0
        print("step")              # a break in the loop body: the body is outlined
    return t0


def test_a_store_takes_the_value_before_its_local_is_rebound():
    """The loop body's append is made after its graph, where the body's locals are rebuilt
    first: the appended t0 is the one before `t0 = u + 1.0` (the rebound t0 was appended,
    and a later call appended the first call's value; found by the random control-flow
    programs)."""
    jitted = pijit.jit(appends_then_rebinds)
    for b in (0.0, 1.0, 2.0):
        want, got = [], []
        with contextlib.redirect_stdout(io.StringIO()):
            expected = appends_then_rebinds(np.zeros(2), np.full(2, b), want)
            result = jitted(np.zeros(2), np.full(2, b), got)
        assert_equal_values((result, got), (expected, want), f"b={b}")
    report = pijit.explain(jitted, np.zeros(2), np.ones(2), [])
    assert report.graph_count == 2 and report.graph_break_count == 2
    assert "add" in report.ops_per_graph[1]


# -- aliasing checked at capture and guarded at run time (mutants stores_*) --------------------
def dict_store_then_read_other(d1, d2, x):
    d1["a"] = 5.0
    return x * d2["a"]


def test_dict_read_after_an_item_store_into_another():
    # one dict passed twice: reading d2 must see the item stored through d1 (the store is
    # deferred, so capture breaks rather than read the dict as it was)
    d = {"a": 1.0}
    for args in ((d, d), ({"a": 1.0}, {"a": 2.0})):
        report = assert_same(dict_store_then_read_other, *args, X, graphs=1, breaks=1)
        assert "may be one stored into" in report.break_reasons[0]["reason"], report


def test_entry_for_two_objects_is_not_used_for_one_passed_twice():
    # the entry compiled for two objects reads b.steps (0, guarded) as it was before the
    # store into a; one fresh object passed twice must read the stored 5 instead
    f = pijit.jit(reads_other)
    pijit.reset(f)
    assert_equal_values(f(State(), State(), X), reads_other(State(), State(), X))
    one, plain_one = State(), State()
    assert_equal_values(f(one, one, X), reads_other(plain_one, plain_one, X))
    assert one.steps == plain_one.steps == 5
    assert pijit.code_info(f)["compile_count"] == 2


def store_raise_store(s, x, idx):
    s.steps += 1
    y = x[idx]                          # may raise, between two stores
    s.avg = y * 2
    return y


def test_store_before_a_node_that_may_raise_then_another_store():
    # the first store runs where it stands (the graph's indexing raises after it), not
    # only the last store is checked for a later node that may raise
    for idx in (IDX_BAD, np.array([0, 1])):
        report = assert_same(store_raise_store, State(), X, idx, graphs=1, breaks=1)
        assert "'steps' before an operation that may raise" in \
            report.break_reasons[0]["reason"], report


def store_then_int_of_data(s, x):
    s.steps = 1
    return int(x.sum())             # int(nan) raises ValueError, int(inf) OverflowError


def test_store_before_int_of_a_float_that_may_raise():
    """int() of a float may raise at run time: the store before it runs where it stands,
    also for an entry compiled on data that did not raise."""
    from differential import assert_same_outcome, clone, run_observed, run_plain
    jitted = pijit.jit(store_then_int_of_data)
    pijit.reset(jitted)
    for x in (np.ones(3), np.array([1.0, np.nan]), np.array([np.inf]), np.ones(3)):
        args = (State(), x)
        plain_args, jit_args = clone(args), clone(args)
        want = run_plain(store_then_int_of_data, plain_args, {})
        got = run_observed(jitted, jit_args, {})
        assert_same_outcome(got, want, jit_args, plain_args, f"x={x}")
        assert jit_args[0].steps == plain_args[0].steps == 1
    report = pijit.explain(store_then_int_of_data, State(), np.ones(3))
    assert report.graph_count == 1 and "int" in report.ops_per_graph[0], report
    assert "before an operation that may raise" in report.break_reasons[0]["reason"], report


def store_then_add(s, a, b):
    s.steps = 1
    return a + b                    # dynamic lengths: may not broadcast


def test_store_before_a_node_of_a_dynamic_shape():
    """With a dynamic dim every node may raise (its shapes meet only at run time): the store
    before it runs where it stands, also for an entry compiled on shapes that broadcast."""
    from differential import assert_same_outcome, clone, run_observed, run_plain
    spec = pijit.ArraySpec((None,), "float64")
    report = assert_same(store_then_add, State(), X, X, graphs=1, breaks=1,
                         jit_kwargs={"input_signature": (None, spec, spec)})
    assert "before an operation that may raise" in report.break_reasons[0]["reason"], report
    jitted = pijit.jit(store_then_add, input_signature=(None, spec, spec))
    for b in (X, X[:4]):
        args = (State(), X, b)
        plain_args, jit_args = clone(args), clone(args)
        want = run_plain(store_then_add, plain_args, {})
        assert_same_outcome(run_observed(jitted, jit_args, {}), want, jit_args, plain_args,
                            f"b={b}")
    assert pijit.code_info(jitted)["compile_count"] == 1, pijit.code_info(jitted)


def make_counter_with_a_helper():
    count = 0
    w = 2.0

    def helper(x):
        return x * w            # helper's free variable 0 (w); the caller's 0 is count

    def step(x):
        nonlocal count
        count += 1
        return helper(x) + count, count
    return step


def test_an_inlined_closure_reads_its_own_cell_after_a_nonlocal_store():
    same_counts(make_counter_with_a_helper, 3)
    report = pijit.explain(make_counter_with_a_helper(), X)
    # the helper's cell may be the one stored into: its read breaks, never a guess
    assert report.graph_count == 2 and report.graph_break_count == 1, report
    assert "may be a cell stored into" in report.break_reasons[0]["reason"], report


G_SCALE = 1.0
# A helper of "another module": its globals are a dict of its own, with a G_SCALE of its own.
scaled_elsewhere = types.FunctionType(
    compile("def scaled(x):\n    return x * G_SCALE\n", __file__, "exec").co_consts[0],
    {"G_SCALE": 3.0}, "scaled")


def global_store_then_a_helper_of_another_module(x):
    global G_SCALE
    G_SCALE = 5.0
    return scaled_elsewhere(x) + G_SCALE


def test_a_global_store_is_not_seen_by_a_helper_of_another_module():
    global G_SCALE
    try:
        assert_same(global_store_then_a_helper_of_another_module, X, ops=["mul", "add"])
    finally:
        G_SCALE = 1.0


def append_then_read(x, lst):
    lst.append(x * 2)           # appended before the list's own items are read
    return lst[0] + 1, lst[-1], len(lst)


def test_a_list_appended_to_then_read_keeps_its_order():
    assert_same(append_then_read, X, [X + 10.0], ops=["mul", "add"])
