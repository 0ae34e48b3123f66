"""explain's report as people read it: text (str, IPython's pretty printer), HTML for Jupyter,
and explain leaving the explained function's own cache and counters alone."""
import html.parser

import numpy as np
import pytest

import pijit
from ipython_session import run_cells

X = np.ones((2, 3))


def _breaks(x):
    y = np.exp(x) * 2.0
    print(y.shape)
    return y + x.sum(axis=0)


BREAK_LINE = _breaks.__code__.co_firstlineno + 2


def test_text_form_reads_as_sections():
    report = pijit.explain(pijit.jit(_breaks), X)
    text = str(report)
    assert text.startswith("pijit.explain: _breaks\nGraph count: 2\nGraph break count: 1\n")
    assert f"Break reason 1: call to a function pijit cannot capture: print\n  at {__file__}:" \
           f"{BREAK_LINE}\n" in text
    assert "Graph 1 (2 ops):\n  %0 = input x  : float64[2,3]\n  %1 = exp(%0)" in text
    assert "Guards:\n  np is <module numpy>\n" in text
    # The repr is one short line, not the dataclass of every field with its \n escaped.
    assert repr(report) == "<pijit ExplainOutput of _breaks: 2 graph(s), 1 break(s), 4 op(s)>"


def test_ipython_pretty_printer_shows_the_text_form():
    pretty = pytest.importorskip("IPython.lib.pretty", reason="IPython is not installed")
    report = pijit.explain(pijit.jit(_breaks), X)
    assert pretty.pretty(report) == str(report)


class _Tables(html.parser.HTMLParser):
    """The text of every cell, per table, and the headings."""

    def __init__(self):
        super().__init__()
        self.tables, self.headings, self._cell, self._in = [], [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "h4":
            self._in = []

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "h4":
            self.headings.append("".join(self._in))
            self._in = None

    def handle_data(self, data):
        for part in (self._cell, self._in):
            if part is not None:
                part.append(data)


def test_html_form_has_tables_of_breaks_graphs_and_guards():
    report = pijit.explain(pijit.jit(_breaks), X)
    parser = _Tables()
    parser.feed(report._repr_html_())
    summary, breaks, graph1, graph2, guards = parser.tables
    assert ["graph breaks", "1"] in summary and ["function", "_breaks"] in summary
    assert breaks == [["#", "reason", "where"],
                      ["1", "call to a function pijit cannot capture: print",
                       f"{__file__}:{BREAK_LINE}"]]
    assert graph1[0] == ["value", "operation", "type", "line"]
    assert ["%1", "exp(%0)", "float64[2,3]", str(BREAK_LINE - 1)] in graph1
    assert graph2[-1][1] == "return (%3)"
    assert ["1", "np is <module numpy>"] in guards
    assert parser.headings == ["Graph breaks", "Graph 1 (2 ops)", "Graph 2 (2 ops)", "Guards"]


def test_html_escapes_what_it_shows():
    def lt(x):
        return x < 1.0

    text = pijit.explain(pijit.jit(lt), X)._repr_html_()
    assert "lt(%0, 1.0)" in text and "<module numpy>" not in text


def test_explain_leaves_the_functions_counters_alone():
    jitted = pijit.jit(_breaks)
    pijit.reset(jitted)
    jitted(X)
    jitted(X)
    before = pijit.stats(jitted)
    report = pijit.explain(jitted, X)
    assert report.graph_count == 2
    assert pijit.stats(jitted) == before
    assert before["cache_hits"] == 1 and before["compile_count"] == 1


def test_explain_of_a_plain_function_does_not_jit_it():
    def plain(x):
        return x * 2.0

    assert pijit.explain(plain, X).ops_per_graph == [["mul"]]
    assert pijit.cache.record(plain.__code__) is None


def test_explain_of_a_method_keeps_self():
    class Model:
        def __init__(self):
            self.w = 3.0

        @pijit.jit
        def forward(self, x):
            return x * self.w

    m = Model()
    m.forward(X)
    m.forward(X)
    before = pijit.stats(m.forward)
    assert before["cache_hits"] == 1
    assert pijit.explain(m.forward, X).ops_per_graph == [["mul"]]
    assert pijit.stats(m.forward) == before


def test_notebook_cell_locations_read_as_cells():
    """In IPython, a break in a cell is located as IPython names the cell."""
    out = run_cells([
        "import numpy as np, pijit",
        "def f(x):\n    y = x + 1\n    print(y.shape)\n    return y",
        "r = pijit.explain(pijit.jit(f), np.ones(3))\n"
        "print('BREAK', r.break_reasons[0]['lineno'], str(r).split('  at ')[1].splitlines()[0])",
    ])
    assert "BREAK 3 Cell In[2], line 3" in out, out
