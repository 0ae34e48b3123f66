"""Graph breaks, resume functions, control flow, inlining and side effects: each scenario runs
plain and jitted (results, prints, mutated inputs, exceptions) and asserts how many graphs
and breaks the call made, so a silent fallback to plain Python cannot pass."""
import functools
import gc
import math
import sys
import traceback

import numpy as np
import pytest

import pijit
from differential import assert_same
from pijit._compat import BYTECODE
from pijit.explain import stats as code_stats

X = np.linspace(-1.0, 2.0, 12).reshape(3, 4)
V = np.arange(1.0, 7.0)
G_SCALE = 2.0
G_LIST = [1.0, 2.0]


# -- breaks between NumPy blocks ----------------------------------------------------------
def print_between(x):
    a = x * 2
    print("a sum", float(a.sum()))
    return a + 1


def two_prints(x):
    a = x + 1
    print(a.shape)
    b = a * 3
    print(b.dtype)
    return b - a


def unknown_call_between(x):
    a = np.exp(x)
    r = str(a)
    return a * len(r)


def print_inside_expression(x):
    return x * 2 + len(str(x))


def print_at_start(x):
    print("start")
    return x * 2


def print_at_end(x):
    y = x * 2
    print("end", y.shape)


def break_with_live_stack(x):
    return (x + 1, print("mid"), x * 2)


def dead_values_not_passed(x):
    big = x * 100
    small = big.sum()
    print("after")
    return small


@pytest.mark.parametrize("fn, graphs, breaks", [
    (print_between, 2, 1),
    (two_prints, 3, 2),
    (unknown_call_between, 2, 1),
    (print_inside_expression, 2, 1),
    (print_at_start, 1, 1),
    (print_at_end, 1, 1),
    (break_with_live_stack, 2, 1),
    (dead_values_not_passed, 1, 1),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_breaks_between_blocks(fn, graphs, breaks):
    report = assert_same(fn, X, graphs=graphs, breaks=breaks)
    assert all(b["filename"] == __file__ for b in report.break_reasons)


def test_break_reason_line_and_resume_locals():
    report = assert_same(print_between, X, graphs=2, breaks=1)
    (brk,) = report.break_reasons
    assert brk["lineno"] == print_between.__code__.co_firstlineno + 2
    assert "print" in brk["reason"]
    assert report.ops_per_graph == [["mul", "sum", "float"], ["add"]]


def test_resume_takes_live_locals_then_the_other_locals_of_the_frame():
    """Dead locals still bound go to the resume function after the live ones, so its frame
    holds what plain Python's would (a debugger landing there finds `big`)."""
    jitted = pijit.jit(dead_values_not_passed)
    pijit.reset(jitted)
    jitted(X)
    rec = pijit.cache.record(dead_values_not_passed.__code__)
    (resume,) = rec.resumes.values()
    assert resume.co_varnames[:resume.co_argcount] == ("small", "big", "x")


# -- data-dependent control flow ----------------------------------------------------------
def data_if(x):
    if x.sum() > 0:
        y = x * 2
    else:
        y = x - 1
    return y + 1


def data_if_early_return(x):
    m = x.max()
    if m > 1.5:
        return x / m
    return x * 0


def data_while(x, tol):
    err = float(np.abs(x).max())
    while err > tol:
        x = x * 0.5
        err = float(np.abs(x).max())
    return x, err


def data_and_or(x):
    ok = (x.min() > -2) and (x.max() < 3)
    return x * 2 if ok else x


def branch_on_python_bool_of_array(x):
    if (x > 0).any():
        return x.clip(0, None)
    return x


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_data_dependent_if(sign):
    report = assert_same(data_if, X * sign, graphs=2, breaks=1)
    assert "depends on array data" in report.break_reasons[0]["reason"]


def test_data_dependent_early_return():
    assert_same(data_if_early_return, X, graphs=2, breaks=1)
    assert_same(data_if_early_return, X * 0.1, graphs=2, breaks=1)


def test_data_dependent_while():
    report = assert_same(data_while, V * 4, 0.5, graphs=1, breaks=2)
    assert report.ops_per_graph[0] == ["absolute", "max", "float", "gt"]


def test_data_dependent_and_or():
    assert_same(data_and_or, X, graphs=3, breaks=2)


def test_branch_on_any():
    assert_same(branch_on_python_bool_of_array, X, graphs=2, breaks=1)


def test_branch_resume_functions_are_shared_between_calls():
    f = pijit.jit(data_if)
    pijit.reset(f)
    for x in (X, -X, X, -X):
        np.testing.assert_array_equal(f(x), data_if(x))
    rec = pijit.cache.record(data_if.__code__)
    assert len(rec.resumes) == 2 and rec.compile_count == 1


# -- loops --------------------------------------------------------------------------------
def unrolled_range(x):
    for i in range(4):
        x = x * 0.9 + i
    return x


def unrolled_tuple_zip(x, ws=(1.0, 2.0, 3.0)):
    out = x
    for i, w in enumerate(ws):
        out = out + w * i
    for a, b in zip((1, 2), (3.0, 4.0)):
        out = out - a * b
    return out


def loop_over_rows(x):
    total = 0
    for row in x:
        total = total + row.sum()
    return total


def nested_loops(x):
    for i in range(2):
        for j in range(3):
            x = x + i * j
    return x


def long_loop(x):
    for _ in range(300):
        x = x * 0.99 + 0.01
    return x * 2


def loop_with_print(x):
    y = x * 2
    for i in range(3):
        y = y + i
        print("step", i)
    return y - 1


def loop_with_break_statement(x):
    for i in range(10):
        x = x + 1
        if i == 3:
            break
    return x


def loop_over_symbolic_range(x):
    n = x.shape[0]
    acc = x[0] * 0
    for i in range(n):
        acc = acc + x[i] * i
    return acc


def while_with_constant_counter(x):
    i = 0
    while i < 5:
        x = x + i
        i += 1
    return x


def list_comprehension(x):
    parts = [x * k for k in range(3)]
    return np.stack(parts)


def comprehension_over_rows(x):
    return [float(r.sum()) for r in x]


def generator_expression(x):
    return sum(v * 2 for v in (1, 2, 3)) * x


@pytest.mark.parametrize("fn, graphs, breaks", [
    (unrolled_range, 1, 0),
    (unrolled_tuple_zip, 1, 0),
    (loop_over_rows, 1, 0),
    (nested_loops, 1, 0),
    (loop_with_break_statement, 1, 0),
    (loop_over_symbolic_range, 1, 0),
    (while_with_constant_counter, 1, 0),
    (list_comprehension, 1, 0),
    (comprehension_over_rows, 1, 0),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_loops_unroll(fn, graphs, breaks):
    # loop nests off: loop_over_rows's `total = 0` then `+= row.sum()` is a loop nest
    # otherwise, whose total (int or np.float64 by the trip count) ends the graph after it
    assert_same(fn, X, graphs=graphs, breaks=breaks,
                jit_kwargs={"jit_config": {"loop_nests": False}})


def test_long_loop_becomes_one_loop_node():
    report = assert_same(long_loop, X, graphs=1, breaks=0)
    assert report.ops_per_graph == [["loop", "tuple_item", "mul"]]


def test_long_loop_runs_as_residual_bytecode_without_loop_nodes():
    gc.collect()        # an earlier test's wrapper of long_loop would give ours a code copy
    report = assert_same(long_loop, X, graphs=2, breaks=1,
                         jit_kwargs={"jit_config": {"loop_nodes": False}})
    assert "MAX_LOOP_UNROLLING" in report.break_reasons[0]["reason"]
    # the code after the loop, and the loop body outlined as its own jitted function
    assert report.ops_per_graph == [["mul"], ["mul", "add"]]
    stats = pijit.stats(pijit.jit(long_loop, jit_config={"loop_nodes": False}))
    assert stats["cache_misses"] == 1             # the body compiled once, hit 299 times
    body_code = next(c for c in pijit.cache.family(long_loop.__code__)
                     if ".<loop body at line " in c.co_qualname)
    body = code_stats(body_code)
    assert body["compile_count"] == 1 and body["cache_hits"] >= 299


def test_loop_unrolling_option():
    # The loop runs as residual bytecode; its body is one graph, called every iteration.
    report = assert_same(unrolled_range, X, graphs=1, breaks=1,
                         jit_kwargs={"jit_config": {"loop_unrolling": False,
                                                    "loop_nodes": False}})
    assert "loop_unrolling is off" in report.break_reasons[0]["reason"]
    assert report.ops_per_graph == [["mul", "add"]]
    report = assert_same(unrolled_range, X, graphs=1, breaks=1,
                         jit_kwargs={"jit_config": {"MAX_LOOP_UNROLLING": 2,
                                                    "loop_nodes": False}})
    assert "MAX_LOOP_UNROLLING=2" in report.break_reasons[0]["reason"]
    # with loop nodes (the default), neither unrolled nor residual: one loop node
    for options in ({"loop_unrolling": False}, {"MAX_LOOP_UNROLLING": 2}):
        report = assert_same(unrolled_range, X, graphs=1, breaks=0,
                             jit_kwargs={"jit_config": options})
        assert report.ops_per_graph == [["loop", "tuple_item"]]


def test_break_inside_loop_body_moves_to_the_loop():
    # graphs: before the loop, after it, and the outlined body up to its print (which
    # breaks the body's graph)
    report = assert_same(loop_with_print, X, graphs=3, breaks=2)
    assert report.ops_per_graph == [["mul"], ["sub"], ["add"]]


def test_generator_expression_runs_as_residual():
    assert_same(generator_expression, X, graphs=1, breaks=1)


# -- inlining -----------------------------------------------------------------------------
def helper(a, b=2.0):
    return a * b + 1


def helper_with_print(a):
    y = a + 1
    print("in helper", y.shape)
    return y * 2


def helper_deep(a, depth):
    if depth == 0:
        return a + 1
    return helper_deep(a * 2, depth - 1)


def make_closure(k):
    def inner(a):
        return a * k + G_SCALE
    return inner


CLOSURE = make_closure(3.0)
PARTIAL = functools.partial(helper, b=5.0)
JITTED_HELPER = pijit.jit(helper)


class Model:
    def __init__(self):
        self.w = np.full(4, 0.5)
        self.scale = 2.0

    def forward(self, x):
        return self.act(x @ self.w.reshape(4, 1)) * self.scale

    def act(self, h):
        return np.tanh(h)

    @staticmethod
    def square(v):
        return v * v

    def uses_static(self, x):
        return self.square(x) + Model.square(x)

    def forward_with_print(self, x):
        h = self.act(x)
        print("h", h.shape)
        return h * self.scale


def calls_helper(x):
    return helper(x) + helper(x, 3.0) + helper(x, b=4.0)


def calls_breaking_helper(x):
    a = x * 2
    return helper_with_print(a) + 1


def calls_closure_and_lambda(x):
    sq = lambda t: t ** 2  # noqa: E731
    return CLOSURE(x) + sq(x)


def calls_partial_and_jitted(x):
    return PARTIAL(x) - JITTED_HELPER(x)


def forwards_star_args(x, *args, **kwargs):
    return helper(x, *args, **kwargs)


def calls_recursive(x):
    return helper_deep(x, 3)


def calls_nested_breaking(x):
    return outer_breaking(x) * 2


def outer_breaking(x):
    return helper_with_print(x + 1) - 1


@pytest.mark.parametrize("fn, graphs, breaks", [
    (calls_helper, 1, 0),
    (calls_closure_and_lambda, 1, 0),
    (calls_partial_and_jitted, 1, 0),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_inlined(fn, graphs, breaks):
    report = assert_same(fn, X, graphs=graphs, breaks=breaks)
    assert report.op_count >= 3


def test_star_args_forwarded_to_inlined_callee():
    assert_same(forwards_star_args, X, 4.0, graphs=1, breaks=0)
    assert_same(forwards_star_args, X, kwargs={"b": 7.0}, graphs=1, breaks=0)


def test_break_inside_inlined_callee():
    # caller graph (mul), callee jitted alone: graph (add) + break + resume (mul), caller resume (add)
    report = assert_same(calls_breaking_helper, X, graphs=4, breaks=2)
    reasons = [b["reason"] for b in report.break_reasons]
    assert any("helper_with_print" in r for r in reasons)
    assert any("print" in r and "inlined" not in r for r in reasons)


def test_nested_breaks_in_inlined_callees():
    # graphs: outer's (add), its resume (sub), helper's (add), its resume (mul), caller's (mul)
    assert_same(calls_nested_breaking, X, graphs=5, breaks=3)


def test_recursive_calls_inline_to_the_depth_limit():
    assert_same(calls_recursive, X, graphs=1, breaks=0)
    # Too deep: the caller breaks at the call, the callee is jitted alone and breaks likewise.
    report = assert_same(calls_recursive, X, graphs=2, breaks=2,
                         jit_kwargs={"jit_config": {"MAX_INLINE_DEPTH": 2}})
    assert all("MAX_INLINE_DEPTH=2" in b["reason"] for b in report.break_reasons)
    # the recursion's repeated frame is said once, with its count
    first = report.break_reasons[0]["reason"]
    assert first.count("(inlined") == 1 and "helper_deep (inlined, 2 levels deep)" in first


def test_methods_inline_with_self_guards():
    m = Model()
    report = assert_same(Model.forward, m, X, graphs=1, breaks=0)
    assert report.ops_per_graph == [["reshape", "matmul", "tanh", "mul"]]
    assert any(g.startswith("self.__class__.act is") for g in report.guards)
    assert_same(Model.uses_static, m, X, graphs=1, breaks=0)


def test_method_with_break():
    assert_same(Model.forward_with_print, Model(), X, graphs=2, breaks=1)


def test_global_rebound_between_calls_recompiles():
    global G_SCALE
    f = pijit.jit(calls_closure_and_lambda)
    pijit.reset(f)
    first = f(X)
    old = G_SCALE
    try:
        G_SCALE = 10.0
        np.testing.assert_array_equal(f(X), calls_closure_and_lambda(X))
        assert not np.array_equal(first, f(X))
        stats = pijit.stats(f)
        assert stats["compile_count"] == 2
        assert "G_SCALE" in stats["recompile_reasons"][0]
    finally:
        G_SCALE = old


def test_closure_rebound_between_calls():
    def run(k):
        g = make_closure(k)
        return pijit.jit(g)(X), g(X)
    for k in (1.0, 2.0, 3.0):
        got, expected = run(k)
        np.testing.assert_array_equal(got, expected)
    info = pijit.code_info(make_closure(0.0))
    # k=1.0 compiles with k a constant; k=2.0 recompiles with k a graph input (it changed),
    # which k=3.0 then reuses.
    assert info["compile_count"] == 2


# -- side effects -------------------------------------------------------------------------
def appends_to_input_list(x, out):
    out.append(x * 2)
    out.append(float(x.sum()))
    return len(out)


def mutates_input_array(x):
    y = x * 2
    x += 1
    x[0] = y[1]
    return y


def slice_assign(x, v):
    x[1:] = v[:-1] * 2
    return x


def ufunc_out_argument(a, b, c):
    np.add(a, b, out=c)
    return c * 2


class Box:
    def __init__(self):
        self.value = np.zeros(3)
        self.count = 0


def attribute_store(box, x):
    box.value = x * 3
    box.count += 1
    return box.value.sum()


def global_store(x):
    global G_LIST
    G_LIST = [float(x.sum())]
    return x * len(G_LIST)


def returns_view_of_input(x):
    return x[1:], x.T, x.reshape(-1)


def prints_interleaved(x):
    print("first")
    a = x * 2
    print("second", a.shape)
    b = a + 1
    print("third", float(b.sum()))
    return b


def test_list_mutation():
    out = [1]
    assert_same(appends_to_input_list, V, out, graphs=1, breaks=0)


def test_inplace_on_inputs():
    # writes into inputs are write nodes of the graph (tests/test_writes.py has the rest)
    rep = assert_same(mutates_input_array, X.copy())
    assert rep.ops_per_graph[0][-3:] == ["iadd", "getitem", "setitem"]
    assert_same(slice_assign, V.copy(), V.copy())
    assert_same(ufunc_out_argument, V, V, np.zeros(6))


def eigh_result(a):
    r = np.linalg.eigh(a @ a.T + 1.0)
    return r


def slogdet_across_a_break(a):
    r = np.linalg.slogdet(a * 2.0)
    print("between")
    return r, r.logabsdet


def test_namedtuple_results_are_rebuilt_as_their_class():
    """NumPy's namedtuple results (EighResult, SlogdetResult) a graph computes are rebuilt
    in residual code by their class (returned, or live across a break), not as tuples."""
    a = np.arange(9.0).reshape(3, 3) / 7
    assert_same(eigh_result, a, graphs=1, breaks=0)
    assert_same(slogdet_across_a_break, a, graphs=1, breaks=1)


def test_attribute_and_global_stores():
    assert_same(attribute_store, Box(), V[:3], graphs=1, breaks=0)
    old = list(G_LIST)
    try:
        assert_same(global_store, V, graphs=1, breaks=0)
    finally:
        globals()["G_LIST"] = old


def test_views_returned_alias_inputs():
    assert_same(returns_view_of_input, X, graphs=1, breaks=0)


def test_prints_interleaved_in_order():
    assert_same(prints_interleaved, X, graphs=2, breaks=3)


# -- exceptions and context managers ------------------------------------------------------
def try_except_after_graph(x):
    y = x * 2
    try:
        z = y.reshape(5, 7)
    except ValueError:
        z = y + 1
    return z


def try_finally(x, log):
    y = x + 1
    try:
        return y * 2
    finally:
        log.append("done")


def with_block(x):
    y = x * 2
    with np.errstate(divide="ignore"):
        z = 1.0 / (y - y)
    return z


def raises_after_break(x):
    a = x * 2
    print("before error")
    return a.reshape(7, 5)


def assert_statement(x):
    assert x.ndim == 2, "need a matrix"
    s = x.sum()
    assert s > -100
    return s * 2


def exception_caught_across_break(x):
    try:
        r = raises_after_break(x)
    except ValueError as e:
        r = str(e)
    return r


def test_try_except():
    report = assert_same(try_except_after_graph, X, graphs=1, breaks=1)
    assert "exception handling" in report.break_reasons[0]["reason"]


def test_try_finally_and_with():
    assert_same(try_finally, X, [], graphs=1, breaks=1)
    # np.errstate(...) is a call pijit does not capture, then the with block stays residual
    assert_same(with_block, X, graphs=1, breaks=2)


def test_exception_raised_after_break_has_user_line():
    f = pijit.jit(raises_after_break)
    with pytest.raises(ValueError) as info:
        f(X)
    last = info.traceback[-1]
    assert last.path == __import__("pathlib").Path(__file__)
    assert last.lineno + 1 == raises_after_break.__code__.co_firstlineno + 3
    assert_same(raises_after_break, X, graphs=1, breaks=2)


def test_assert_statements():
    assert_same(assert_statement, X, graphs=2, breaks=1)


def test_exception_caught_across_break():
    # the try block starts the function: all of it is residual bytecode
    assert_same(exception_caught_across_break, X, graphs=0, breaks=1)


# -- what the code after a break sees of the stack ---------------------------------------
def _callers():
    """[(name, line)] of this file's frames from the caller out, innermost first, as
    sys._getframe and traceback.extract_stack show them to a callee."""
    walked, frame = [], sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        walked.append((frame.f_code.co_name, frame.f_lineno))
        frame = frame.f_back
    extracted = [(s.name, s.lineno) for s in traceback.extract_stack(sys._getframe(1))
                 if s.filename == __file__]
    return walked, extracted[::-1]


def stack_after_breaks(x):
    a = x * 2
    print("a", float(a.sum()))
    seen = [_callers()]
    b = a + 1
    print("b", float(b.sum()))
    seen.append(_callers())
    return b, seen


def stack_in_a_loop_body(x):
    s = x * 0
    seen = []
    for i in range(2):
        s = s + x
        print(i)
        seen.append(_callers())
    return s, seen


def test_a_callee_after_a_break_sees_one_frame_of_the_function():
    """The hook calls a resume function once the transformed frame has returned
    (transform._call_resume): a callee sees one frame of the user's function, at its
    line, as in plain Python (it saw the transformed frame too, one more per break)."""
    report = assert_same(stack_after_breaks, X, graphs=None, breaks=None)
    assert report.graph_break_count >= 2


def _stack_after_a_break_in_a_closure(k):
    def stack_after_a_break_in_a_closure(x):
        a = x * k
        print("a", float(a.sum()))
        seen = _callers()
        return a + k, seen
    return stack_after_a_break_in_a_closure


def test_a_callee_after_a_break_in_a_closure_sees_one_frame_of_the_function():
    """A resume function of code with free variables is made at the break (with the
    frame's cells), and called by the hook all the same."""
    report = assert_same(_stack_after_a_break_in_a_closure(2.0), X, graphs=None, breaks=None)
    assert report.graph_break_count >= 1


def test_a_resume_function_is_made_once_per_transformed_function(capsys):
    """Without free variables a break's request names the resume code; the hook makes its
    function at the first request and keeps it in the transformed function's __dict__."""
    from pijit import eval_frame
    f = pijit.jit(print_between)
    pijit.reset(f)
    for _ in range(3):
        np.testing.assert_array_equal(f(X), X * 2 + 1)
    (_, _, fn), = eval_frame.entries(print_between.__code__)
    made = fn.__dict__["__pijit_resume_functions__"]
    rec = pijit.cache.record(print_between.__code__)
    assert [g.__code__ for g in made] == list(rec.resumes.values())
    assert pijit.stats(f)["cache_hits"] == 2


@pytest.mark.xfail(strict=True, reason="an outlined loop body is called by the frame running "
                                        "the loop: a callee in it sees that frame too")
def test_a_callee_in_an_outlined_loop_body_sees_one_frame_of_the_function():
    report = assert_same(stack_in_a_loop_body, X, graphs=None, breaks=None)
    assert report.graph_break_count >= 1


# -- constructs that run as residual code -------------------------------------------------
def uses_exec(x):
    exec("pass")
    return x * 2


def uses_getframe(x):
    import sys
    return x * sys._getframe().f_lineno


def deletes_global(x):
    global _TEMP_GLOBAL
    _TEMP_GLOBAL = 1
    del _TEMP_GLOBAL
    return x + 1


def inner_generator(x):
    def gen():
        yield 1
        yield 2
    return x * sum(gen())


def test_frame_introspection_runs_plain():
    for fn in (uses_exec, uses_getframe):
        report = assert_same(fn, X, graphs=0, breaks=1)
        assert report.fallback is not None


def test_del_global_and_inner_generator():
    assert_same(deletes_global, X, graphs=1, breaks=1)    # the store replayed, del breaks
    assert_same(inner_generator, X, graphs=1, breaks=1)


def test_strict_mode_raises_at_first_break():
    for fn in (print_between, data_if, loop_with_print):
        with pytest.raises(pijit.GraphBreakError, match=fn.__name__):
            pijit.jit(fn, mode="PSJit")(X.copy())


def test_print_last_frame_if_break_graph(capsys):
    f = pijit.jit(print_between, jit_config={"print_last_frame_if_break_graph": True})
    pijit.reset(f)
    f(X)
    err = capsys.readouterr().err
    line = print_between.__code__.co_firstlineno + 2
    dump = err.split(f"=== pijit: frame at graph break ({__file__}:{line}) ===\n")[1]
    # a call's NULL is below the callable on 3.11 and 3.12, above it on 3.13
    call = ["NullValue", "constant <built-in function print>"]
    if not BYTECODE.null_first:
        call.reverse()
    assert dump.splitlines()[1:6] == [
        f"  stack[0] = {call[0]}", f"  stack[1] = {call[1]}",
        "  stack[2] = constant 'a sum'", "  stack[3] = GraphValue float",
        "  a = GraphValue float64[3,4]"], dump
    assert dump.splitlines()[0].startswith(f"  break: call to a function pijit cannot capture: "
                                           f"print") and dump.splitlines()[0].endswith(
        f"(line {line})")


def test_math_and_scalars_through_breaks():
    def f(x, n):
        s = math.sqrt(n)
        print(s)
        return x * s
    assert_same(f, X, 9, graphs=1, breaks=1)


LETTERS = "xyzae" * 2000       # 10000 items, far past MAX_LOOP_UNROLLING: the loop leaves early


def first_vowel_weight(x):
    n = 0
    for ch in LETTERS:
        n += 1
        if ch in "aeiou":
            break
    for k in range(10 ** 15):
        if k * k > 50:
            break
    return x * n + k


def test_a_loop_over_a_long_constant_leaving_early_unrolls():
    """Capture makes the items of a constant range, tuple, list or str as the loop reaches
    them (a range of 10**15 could not be listed)."""
    report = assert_same(first_vowel_weight, X, graphs=1, breaks=0)
    assert report.ops_per_graph == [["mul", "add"]]


def test_constant_items_are_made_as_they_are_reached():
    from pijit.capture.ops_loop import const_items
    items = const_items(range(10, 10010))
    assert len(items) == 10000 and items.made == {}
    assert items[3].value == 13 and items[-1].value == 10009 and items[3] is items[3]
    assert [v.value for v in items[2:5]] == [12, 13, 14]
    assert sorted(items.made) == [2, 3, 4, 9999]
    with pytest.raises(IndexError):
        items[10000]
    letters = const_items(list("abc"))
    assert [v.value for v in reversed(letters)] == ["c", "b", "a"]
