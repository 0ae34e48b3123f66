"""Code swapped in place (what IPython's %autoreload does to edited functions): an entry that
inlined a callable must not run the callable's old body. Each step compares with plain Python."""
import functools
import sys
import types

import numpy as np
import pytest

import pijit

X = np.arange(3.0)


def _plus_one(x):
    return x + 1


def _times_two_plus_one(x):
    return x * 2 + 1


def _minus_ten(x):
    return x - 10


def _swap_steps(user, plain, swaps):
    """Call the jitted `user` and the plain `plain` after each swap; every result equal."""
    jitted = pijit.jit(user)
    pijit.reset(jitted)
    assert np.array_equal(jitted(X), plain(X))
    for swap in swaps:
        swap()
        assert np.array_equal(jitted(X), plain(X)), f"stale result after {swap.__doc__}"
        assert np.array_equal(jitted(X), plain(X))
    report = pijit.explain(jitted, X)
    assert report.graph_count == 1 and report.fallback is None, report
    return jitted


def _code_swapper(fn, *bodies):
    """One swap per body: fn.__code__ = body.__code__."""
    swaps = []
    for body in bodies:
        def swap(body=body):
            fn.__code__ = body.__code__
        swap.__doc__ = f"{fn.__name__}.__code__ = {body.__name__}.__code__"
        swaps.append(swap)
    return swaps


def test_function_code_swapped():
    def helper(x):
        return x + 1

    def user(x):
        return helper(x) * 2

    _swap_steps(user, user, _code_swapper(helper, _times_two_plus_one, _minus_ten, _plus_one))


def test_guard_names_the_code():
    def helper(x):
        return x + 1

    def user(x):
        return helper(x) * 2

    report = pijit.explain(pijit.jit(user), X)
    assert f"helper.__code__ is <code {helper.__qualname__}>" in report.guards


def test_method_code_swapped_on_the_class():
    class Model:
        def __init__(self):
            self.w = 3.0

        def step(self, x):
            return x * self.w

        def run(self, x):
            return self.step(x) + 1

    def faster(self, x):
        return x * self.w * 10

    m = Model()
    plain = Model.run
    jitted = pijit.jit(Model.run)
    assert np.array_equal(jitted(m, X), plain(m, X))
    Model.step.__code__ = faster.__code__
    assert np.array_equal(jitted(m, X), plain(m, X))
    assert np.array_equal(jitted(m, X), X * 30.0 + 1)


def test_closure_code_swapped():
    def make(k):
        def scaled(x):
            return x * k
        return scaled

    def shifted(x):
        return x + k     # noqa: F821 - the swapped-in body reads the same free variable

    k = 5.0             # noqa: F841 - bound in `shifted`'s closure
    helper = make(3.0)

    def user(x):
        return helper(x) - 1

    def swap():
        """helper.__code__ = shifted.__code__"""
        helper.__code__ = shifted.__code__

    _swap_steps(user, user, [swap])


def test_nested_helper_code_swapped():
    def inner(x):
        return x + 1

    def outer(x):
        return inner(x) * 3

    def user(x):
        return outer(x) - 2

    _swap_steps(user, user, _code_swapper(inner, _times_two_plus_one, _minus_ten))


def test_jitted_callee_code_swapped():
    def callee(x):
        return x + 1

    jitted_callee = pijit.jit(callee)

    def user(x):
        return jitted_callee(x) * 2

    def plain(x):
        return callee(x) * 2

    _swap_steps(user, plain, _code_swapper(callee, _times_two_plus_one))


def test_partial_code_swapped():
    def add(x, y):
        return x + y

    def mul(x, y):
        return x * y

    part = functools.partial(add, y=4.0)

    def user(x):
        return part(x) + 1

    _swap_steps(user, user, _code_swapper(add, mul))


@pytest.mark.parametrize("defaults", [(7.0,), (1.0, 2.0)])
def test_defaults_swapped(defaults):
    """A used default guarded by position must also see the tuple's length change (which
    moves every default to another parameter)."""
    def helper(x, b=1.0):
        return x * b

    def user(x):
        return helper(x)

    def swap():
        """helper.__defaults__ changed"""
        helper.__defaults__ = defaults

    _swap_steps(user, user, [swap])


def test_function_attribute_changed():
    """A setting hung on a function is read guarded by value: a new value recompiles."""
    def helper(x):
        return x

    helper.scale = 2.0

    def user(x):
        return x * helper.scale + helper.__name__.count("e")

    swaps = []
    for scale in (3.0, -0.0, 2.0):
        def swap(scale=scale):
            helper.scale = scale
        swap.__doc__ = f"helper.scale = {scale}"
        swaps.append(swap)
    jitted = _swap_steps(user, user, swaps)
    assert "helper.scale == 2.0" in pijit.explain(jitted, X).guards


def test_function_attribute_counted_by_the_function():
    """A function counting its calls in an attribute of its own (`count.calls += 1`, a store
    that breaks the graph) and then reading it: every call sees the new count."""
    def count(x):
        count.calls = getattr(count, "calls", 0) + 1
        return x * count.calls

    want = [count(X) for _ in range(4)]
    del count.calls
    jitted = pijit.jit(count)
    pijit.reset(jitted)
    for call, w in enumerate(want):
        assert np.array_equal(jitted(X), w), f"call {call + 1}: stale count"
    report = pijit.explain(jitted, X)
    assert report.graph_count == 1 and report.graph_break_count == 2, report


@pytest.mark.parametrize("form", ["import", "from"])
def test_setting_of_a_module_imported_inside(monkeypatch, form):
    """A module imported inside the function (`import settings`, `from settings import
    SCALE`) has its attributes read guarded, as through a global naming the module: a new
    setting, or a helper replaced, recompiles."""
    settings = types.ModuleType("pijit_test_settings")
    settings.SCALE = 2.0
    settings.shift = _plus_one
    monkeypatch.setitem(sys.modules, settings.__name__, settings)

    def by_import(x):
        import pijit_test_settings
        return pijit_test_settings.shift(x) * pijit_test_settings.SCALE

    def by_from(x):
        from pijit_test_settings import SCALE, shift
        return shift(x) * SCALE

    user = by_import if form == "import" else by_from
    swaps = []
    for scale, shift in ((3.0, _plus_one), (3.0, _minus_ten), (-0.0, _times_two_plus_one)):
        def swap(scale=scale, shift=shift):
            settings.SCALE, settings.shift = scale, shift
        swap.__doc__ = f"settings.SCALE = {scale}, settings.shift = {shift.__name__}"
        swaps.append(swap)
    jitted = _swap_steps(user, user, swaps)
    assert "pijit_test_settings.SCALE == -0.0" in pijit.explain(jitted, X).guards


def _sines(x):
    return np.sin(x) * 2.0 + 1.0


def _as_short(x):
    return x.astype(np.int16) * np.int16(3)


@pytest.mark.parametrize("user, name, patched, guard", [
    (_sines, "sin", np.cos, "np.sin is <ufunc sin>"),
    (_as_short, "int16", np.int64, "np.int16 is <type int16>")])
def test_numpy_attribute_monkeypatched(monkeypatch, user, name, patched, guard):
    """np.sin is a constant of the graph, guarded by identity: a test that monkeypatches
    it (or a scalar type) between calls runs the new one, and the old one again once the
    patch is undone. (pijit's own code reads np.float32: a patch of that one makes a C
    renderer fail, and the function runs plain.)"""
    jitted = pijit.jit(user)
    pijit.reset(jitted)
    for step in ("first", "patched", "undone"):
        if step == "patched":
            monkeypatch.setattr(np, name, patched)
        elif step == "undone":
            monkeypatch.undo()
        for _ in range(2):
            got, want = jitted(X), user(X)
            assert (got.dtype, got.tobytes()) == (want.dtype, want.tobytes()), step
    report = pijit.explain(jitted, X)
    assert report.graph_count == 1 and report.fallback is None, report
    assert guard in report.guards


def test_method_shadowed_by_an_instance_attribute():
    class Model:
        def __init__(self):
            self.w = 3.0

        def step(self, x):
            return x * self.w

    def run(m, x):
        return m.step(x) + 1

    m = Model()
    jitted = pijit.jit(run)
    assert np.array_equal(jitted(m, X), run(m, X))
    m.step = lambda x: x - 100
    assert np.array_equal(jitted(m, X), run(m, X))
    del m.step
    assert np.array_equal(jitted(m, X), run(m, X))


# -- IPython's %autoreload 2 over a module edited between calls ---------------------------
_MODULE = '''
import numpy as np
import pijit


def helper(x):
    return {helper}


@pijit.jit
def jitted(x):
    return {jitted}


class Model:
    @pijit.jit
    def forward(self, x):
        return {forward}
'''


def test_autoreload_refreshes_jitted_and_inlined_functions(tmp_path):
    """`from mod import jitted` (a jitted function), a helper inlined into it and into a
    cell's jitted function, and a jitted method: each edit of the module file shows in the
    next call, as it does for plain functions (a later mtime each time: autoreload compares
    them)."""
    from ipython_session import run_cells
    (tmp_path / "edit_module.py").write_text(_EDIT_MODULE)
    path = str(tmp_path / "reloaded_mod.py")
    out = run_cells([
        "from edit_module import edit\n"
        f"edit({path!r}, 1_000_000, helper='x + 1', jitted='helper(x) * 2', forward='x - 1')",
        "%load_ext autoreload",
        "%autoreload 2",
        "import numpy as np, pijit\n"
        "from reloaded_mod import jitted, helper, Model\n"
        "@pijit.jit\ndef in_cell(x):\n    return helper(x) + 100\n"
        "m = Model()\nx = np.arange(3.0)",
        "print('A', jitted(x), jitted(x), in_cell(x), m.forward(x))",
        f"edit({path!r}, 1_000_010, helper='x * 2 + 1', jitted='helper(x) * 2', "
        "forward='x - 1')",
        "print('B', jitted(x), jitted(x), in_cell(x), m.forward(x))",
        f"edit({path!r}, 1_000_020, helper='x * 2 + 1', jitted='helper(x) * 3', "
        "forward='x * 10')",
        "print('C', jitted(x), jitted(x), in_cell(x), m.forward(x))",
    ], cwd=tmp_path)
    lines = [line for line in out.splitlines() if line[:2] in ("A ", "B ", "C ")]
    assert lines == [
        "A [2. 4. 6.] [2. 4. 6.] [101. 102. 103.] [-1.  0.  1.]",
        "B [ 2.  6. 10.] [ 2.  6. 10.] [101. 103. 105.] [-1.  0.  1.]",
        "C [ 3.  9. 15.] [ 3.  9. 15.] [101. 103. 105.] [ 0. 10. 20.]",
    ], out


_EDIT_MODULE = f'''
import os
MODULE = {_MODULE!r}


def edit(path, stamp, **bodies):
    """Write the module with these bodies, dated `stamp`."""
    with open(path, "w") as f:
        f.write(MODULE.format(**bodies))
    os.utime(path, (stamp, stamp))
'''
