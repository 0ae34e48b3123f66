"""Model code (issue 20, item 3): calls of objects with a Python __call__ inlined like
methods (the class's __call__ guarded), from attributes, tuple/list attributes unrolled,
closures; class hierarchies, properties and class attributes read inside `construct`; a
MindSpore-tutorial layer stack as one graph. Plain vs jitted on copies, and how it ran."""
import numpy as np

import pijit
from differential import assert_same, assert_equal_values

X = np.random.default_rng(3).standard_normal((5, 4, 4))


class Cell:
    """The base of every layer: calling a cell runs its construct (MindSpore's nn.Cell)."""
    scale = 1.0

    def __init__(self):
        self.training = False

    def __call__(self, x):
        return self.construct(x)


class Flatten(Cell):
    def construct(self, x):
        return x.reshape(x.shape[0], -1)


class Dense(Cell):
    def __init__(self, n_in, n_out, seed):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.weight = rng.standard_normal((n_in, n_out))
        self.bias = rng.standard_normal(n_out)

    @property
    def out_features(self):
        return self.weight.shape[1]

    def construct(self, x):
        return x @ self.weight * self.scale + self.bias


class ScaledDense(Dense):
    scale = 0.5                     # a class attribute overriding the base's


class Residual(Dense):
    def __init__(self, n, seed):
        super().__init__(n, n, seed)

    def construct(self, x):
        return super().construct(x) + x         # the base class's construct, inlined


class ReLU(Cell):
    def construct(self, x):
        return np.maximum(x, 0)


class Sequential(Cell):
    def __init__(self, *layers):
        super().__init__()
        self.layers = list(layers)

    def construct(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Network(Cell):
    def __init__(self):
        super().__init__()
        self.flatten = Flatten()
        self.stack = Sequential(Dense(16, 8, 0), ReLU(), ScaledDense(8, 8, 1), ReLU(),
                                Residual(8, 3), Dense(8, 4, 2))

    def construct(self, x):
        x = self.flatten(x)
        return self.stack(x), self.stack.layers[-1].out_features


class JitNetwork(Network):
    @pijit.jit
    def construct(self, x):
        x = self.flatten(x)
        return self.stack(x)


def test_layer_stack_is_one_graph():
    report = assert_same(Network.construct, Network(), X, graphs=1, breaks=0)
    assert report.ops_per_graph[0].count("matmul") == 4
    assert "reshape" in report.ops_per_graph[0] and "maximum" in report.ops_per_graph[0]


def test_jitted_construct_method():
    net = JitNetwork()
    want = Network.construct(net, X)[0]
    for _ in range(2):
        assert_equal_values(net.construct(X), want)
    report = pijit.explain(net.construct, X)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    assert any("__call__" in g for g in report.guards), report.guards


class Twice:
    def __init__(self, layers):
        self.layers = tuple(layers)         # a tuple attribute

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x) + layer(x)
        return x


def from_tuple_attribute(model, x):
    return model(x)


def test_callable_from_tuple_attribute_and_closure():
    model = Twice([ReLU(), Flatten()])
    assert_same(from_tuple_attribute, model, X, graphs=1, breaks=0)
    layer = Dense(16, 3, 5)

    def closure(x):
        return layer(x.reshape(5, 16)) * 2
    assert_same(closure, X, graphs=1, breaks=0)


def test_call_guard_follows_the_class():
    class Op:
        def __call__(self, x):
            return x + 1

    def f(op, x):
        return op(x) * 2
    g = pijit.jit(f)
    pijit.reset(g)
    op = Op()
    assert_equal_values(g(op, X), (X + 1) * 2)
    Op.__call__ = lambda self, x: x - 1
    assert_equal_values(g(op, X), (X - 1) * 2)
    assert any("__call__" in r for r in pijit.stats(g)["recompile_reasons"])


class WithState(Cell):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.inner = Dense(16, 4, 9)

    def construct(self, x):
        self.calls += 1                     # a store inside an inlined __call__
        return self.inner(x.reshape(5, 16)) + self.calls


def calls_stateful(layer, x):
    return layer(x) + layer(x)


def test_stateful_layer_called_twice():
    assert_same(calls_stateful, WithState(), X, graphs=1, breaks=0)


def test_uninlinable_call_still_breaks():
    class Native:
        __call__ = staticmethod(len)        # not a Python function: a break, as before

    def f(op, x):
        return x * op(x)
    report = assert_same(f, Native(), X, graphs=1, breaks=1)
    assert "calling a Native" in report.break_reasons[0]["reason"]


class RunningMean(Cell):
    """A layer updating its own state on every call (as batch norm's running statistics)."""

    def __init__(self, n):
        super().__init__()
        self.mean = np.zeros(n)
        self.seen = 0

    def construct(self, x):
        self.seen += 1
        self.mean = 0.9 * self.mean + 0.1 * x.mean(axis=0)
        return x - self.mean


def run_flat(net, x):
    return net(x.reshape(5, 16))


def test_layers_updating_their_own_state():
    # each layer's stores are replayed; reading the next layer's .mean is guarded to be
    # another object than the ones stored into
    net = Sequential(Dense(16, 8, 0), RunningMean(8), ReLU(), Dense(8, 8, 1), RunningMean(8))
    report = assert_same(run_flat, net, X, graphs=1, breaks=0)
    assert any(" is not " in g for g in report.guards), report.guards


# -- inlined properties and super() follow their classes (mutants stores_*) --------------------
def test_property_guard_follows_the_class():
    class Layer:
        def __init__(self):
            self.w = np.arange(3.0)

        @property
        def scaled(self):
            return self.w * 2.0

    def f(layer, x):
        return x + layer.scaled
    g = pijit.jit(f)
    pijit.reset(g)
    layer, x = Layer(), np.ones(3)
    assert_equal_values(g(layer, x), f(layer, x))
    Layer.scaled = property(lambda self: self.w - 1.0)      # the inlined getter is stale
    assert_equal_values(g(layer, x), f(layer, x))
    reasons = pijit.stats(g)["recompile_reasons"]
    assert any("layer.__class__.scaled:" in r for r in reasons), reasons


def test_super_call_guard_follows_the_base_class():
    class Base:
        def construct(self, x):
            return x * 2.0

    class Child(Base):
        def construct(self, x):
            return super().construct(x) + 1.0

    def f(layer, x):
        return layer.construct(x)
    g = pijit.jit(f)
    pijit.reset(g)
    layer, x = Child(), np.arange(3.0)
    assert_equal_values(g(layer, x), f(layer, x))
    Base.construct = lambda self, x: x - 5.0          # the function super() inlined is stale
    assert_equal_values(g(layer, x), f(layer, x))
    reasons = pijit.stats(g)["recompile_reasons"]
    assert any("__mro__[1].construct:" in r for r in reasons), reasons
