"""What happened, for people and tests: reports (explain, code_info, stats), dumps
(print_after_all) and the PIJIT_LOG logging channels."""
from __future__ import annotations

import dis
import html
import io
import logging
import sys
from dataclasses import dataclass, field

from pijit import cache, config as config_mod, eval_frame
from pijit.graph.opaque import is_opaque

STATE_NAMES = {eval_frame.NEVER_COMPILE: "never_compile", eval_frame.CANDIDATE: "candidate",
               eval_frame.BUILDING: "building", eval_frame.CALLABLE: "callable",
               eval_frame.FROZEN: "frozen"}


# -- logging channels ---------------------------------------------------------------------
def _setup_channels():
    for channel in config_mod.env_log_channels():
        logger = logging.getLogger(f"pijit.{channel}")
        logger.setLevel(logging.DEBUG)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        logger.addHandler(handler)


_setup_channels()


def log(channel: str, message, *, warn: bool = False):
    """Log on channel `pijit.<channel>`; `warn` forces WARNING level (LOG_GRAPH_BREAK).
    `message`: a string, or a function making it, called only when someone listens (a
    graph's or a disassembly's text costs milliseconds an entry)."""
    logger = logging.getLogger(f"pijit.{channel}")
    level = logging.WARNING if warn else logging.INFO
    if logger.isEnabledFor(level):
        logger.log(level, message() if callable(message) else message)


def dump(title: str, text: str):
    print(f"=== pijit: {title} ===\n{text}", file=sys.stderr)


def bytecode_text(code) -> str:
    out = io.StringIO()
    dis.dis(code, file=out, depth=0)
    return out.getvalue()


def where(filename: str, lineno) -> str:
    """A user's source location for people: `file:line`, or IPython's own name of a
    notebook cell ("Cell In[17], line 4") when the file is one IPython compiled a cell to."""
    shell = sys.modules.get("IPython") and _ipython()
    if shell is not None:
        try:
            label = shell.compile.format_code_name(filename)
        except Exception:       # noqa: BLE001 - an older or replaced compiler: plain form
            label = None
        if label is not None:
            return f"{label[0]} {label[1]}, line {lineno}"
    return f"{filename}:{lineno}"


def _ipython():
    try:
        return sys.modules["IPython"].get_ipython()
    except Exception:           # noqa: BLE001 - IPython half imported, or not the real one
        return None


# -- reports ------------------------------------------------------------------------------
@dataclass
class ExplainOutput:
    """How one call ran, with TorchDynamo's field names.

    Printed (`str`, IPython's text display) it reads as sections; in Jupyter it displays
    as HTML tables (`_repr_html_`)."""
    graph_count: int = 0
    graph_break_count: int = 0
    break_reasons: list = field(default_factory=list)   # dicts: reason, filename, lineno
    op_count: int = 0
    ops_per_graph: list = field(default_factory=list)   # op names per graph
    opaque_calls: list = field(default_factory=list)    # per graph: its opaque calls' names
    guards: list = field(default_factory=list)          # readable strings
    bytecode: str = ""                                  # transformed code, as text
    graphs: list = field(default_factory=list)          # graph text per graph
    fallback: str | None = None                         # why it ran as plain Python
    function: str = ""                                  # qualified name of the function
    graph_rows: list = field(default_factory=list, repr=False)   # GraphRows per graph

    def __repr__(self) -> str:
        return (f"<pijit ExplainOutput of {self.function or '?'}: "
                f"{self.graph_count} graph(s), {self.graph_break_count} break(s), "
                f"{self.op_count} op(s)" + (", ran as plain Python>" if self.fallback else ">"))

    def __str__(self) -> str:
        lines = [f"pijit.explain: {self.function}"] if self.function else []
        lines += [f"Graph count: {self.graph_count}",
                  f"Graph break count: {self.graph_break_count}",
                  f"Op count: {self.op_count}"]
        if self.fallback:
            lines.append(f"Ran as plain Python: {self.fallback}")
        for i, reason in enumerate(self.break_reasons, 1):
            lines.append(f"Break reason {i}: {reason['reason']}\n"
                         f"  at {where(reason['filename'], reason['lineno'])}")
        for i, (ops, opaque, text) in enumerate(
                zip(self.ops_per_graph, self.opaque_calls, self.graphs), 1):
            calls = f"; opaque calls: {', '.join(opaque)}" if opaque else ""
            lines.append(f"Graph {i} ({len(ops)} ops{calls}):\n{text}")
        if self.guards:
            lines.append("Guards:\n" + "\n".join(f"  {g}" for g in self.guards))
        if self.bytecode:
            lines.append("Transformed bytecode:\n" + self.bytecode)
        return "\n".join(lines)

    def _repr_pretty_(self, printer, cycle):
        """IPython's text display: the printed form, not the dataclass repr."""
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str:
        """Jupyter's display: a summary, then the break reasons, each graph and the guards
        as tables, and the transformed bytecode folded."""
        summary = [("function", self.function), ("graphs", self.graph_count),
                   ("graph breaks", self.graph_break_count), ("ops", self.op_count)]
        if self.fallback:
            summary.append(("ran as plain Python", self.fallback))
        parts = ["<div class='pijit-explain'>", _html_table(None, summary)]
        if self.break_reasons:
            parts.append("<h4>Graph breaks</h4>")
            parts.append(_html_table(("#", "reason", "where"), [
                (i, r["reason"], where(r["filename"], r["lineno"]))
                for i, r in enumerate(self.break_reasons, 1)]))
        for i, (ops, opaque, rows) in enumerate(
                zip(self.ops_per_graph, self.opaque_calls, self.graph_rows), 1):
            calls = f"; opaque calls: {', '.join(opaque)}" if opaque else ""
            parts.append(f"<h4>Graph {i} ({len(ops)} ops{html.escape(calls)})</h4>")
            parts.append(_html_table(("value", "operation", "type", "line"), [
                (r.value, ("&nbsp;" * 4 * r.depth,
                           r.operation + (" [opaque call]" if r.opaque else "")), r.type,
                 "" if r.lineno is None else r.lineno) for r in rows]))
        if self.guards:
            parts.append("<h4>Guards</h4>")
            parts.append(_html_table(("#", "guard"), list(enumerate(self.guards, 1))))
        if self.bytecode:
            parts.append("<details><summary>Transformed bytecode</summary><pre>"
                         f"{html.escape(self.bytecode)}</pre></details>")
        return "\n".join(parts + ["</div>"])


def _html_table(header, rows) -> str:
    """An HTML table of rows (cells escaped; a (raw prefix, text) pair keeps its prefix);
    header: column names, or None for a two-column name/value table."""
    def cell(value, tag="td"):
        if isinstance(value, tuple):
            prefix, text = value
            text = f"{prefix}<code>{html.escape(str(text))}</code>"
            return f"<{tag} style='text-align:left'>{text}</{tag}>"
        return f"<{tag} style='text-align:left'>{html.escape(str(value))}</{tag}>"

    out = ["<table>"]
    if header is not None:
        out.append("<tr>" + "".join(cell(h, "th") for h in header) + "</tr>")
    for row in rows:
        out.append("<tr>" + "".join(cell(v) for v in row) + "</tr>")
    return "\n".join(out + ["</table>"])


def report(code) -> ExplainOutput:
    """The report over every entry compiled since the last reset, for `code` and the resume
    functions made for it (a function with k graph breaks shows up to k + 1 graphs)."""
    out = ExplainOutput(function=code.co_qualname)
    for member in cache.family(code):
        rec = cache.record(member)
        if rec is None:
            continue
        for entry in rec.entries:
            _add_entry(out, entry, is_main=member is code)
        for fb in rec.eager_fallbacks:
            if out.fallback is None and member is code:
                out.fallback = str(fb)
    out.graph_count = len(out.ops_per_graph)
    out.graph_break_count = len(out.break_reasons)
    return out


def _breaks(entry) -> list:
    """The graph breaks an entry stands for: the fallback of a plain-Python entry, and the
    break that ended its graph."""
    return ([entry.fallback] if entry.fallback is not None else []) + list(entry.breaks)


def _add_entry(out: ExplainOutput, entry, is_main: bool):
    out.guards.extend(str(g) for g in entry.guards)
    for brk in _breaks(entry):
        out.break_reasons.append({"reason": brk.reason, "filename": brk.filename,
                                  "lineno": brk.lineno})
    if entry.fallback is not None:
        if is_main:
            out.fallback = str(entry.fallback)
        return
    ops = entry.graph.op_names()
    if ops:
        out.ops_per_graph.append(ops)
        out.opaque_calls.append([n.name for n in entry.graph.nodes if is_opaque(n)])
        out.graphs.append(str(entry.graph))
        out.graph_rows.append(list(entry.graph.rows()))
        out.op_count += len(ops)
    if is_main:
        out.bytecode = entry.bytecode


def frame_text(bp) -> str:
    """The simulated frame at a graph break: value stack and live locals."""
    lines = [f"  break: {bp.where} (line {bp.lineno})"]
    lines += [f"  stack[{i}] = {_value_text(v)}" for i, v in enumerate(bp.stack)]
    lines += [f"  {name} = {_value_text(v)}" for name, v in bp.locals.items()]
    return "\n".join(lines)


def _value_text(value) -> str:
    meta = getattr(value, "meta", None)
    if meta is not None:
        return f"{type(value).__name__} {meta}"
    if hasattr(value, "value"):
        return f"constant {value.value!r}"
    source = getattr(value, "source", None)
    return type(value).__name__ + (f" from {source.name()}" if source is not None else "")


def code_info(code) -> dict:
    """State, counts and entries of a jitted code object (MindSpore's get_code_extra)."""
    rec = cache.record(code)
    counters = eval_frame.counters(code)
    entries = []
    for entry in rec.entries if rec else ():
        entries.append({"guards": [str(g) for g in entry.guards],
                        "ops": entry.graph.op_names() if entry.graph is not None else None,
                        "fallback": str(entry.fallback) if entry.fallback else None,
                        "level": entry.level, "perf": entry.perf})
    return {
        "state": STATE_NAMES.get(counters["state"], "candidate"),
        "compile_count": rec.compile_count if rec else 0,
        # as explain counts them: over the code and its resume functions and callees
        "break_count": sum(len(_breaks(e)) for member in cache.family(code)
                           if (r := cache.record(member)) for e in r.entries),
        "call_count": counters["calls"],
        "entries": entries,
        # Jitted function objects of the code given back to CPython because pijit had
        # nothing to do for their calls (3.12+: jit_config's inline_plain); their calls are
        # CPython's own from then on, counted nowhere.
        "inlined": counters["inlined"],
    }


def stats(code) -> dict:
    """code_info plus cache hits and misses, recompile reasons and eager fallbacks (why calls
    of the code, or of the resume functions made for it, ran as plain Python)."""
    info = code_info(code)
    rec = cache.record(code)
    counters = eval_frame.counters(code)
    members = [cache.record(member) for member in cache.family(code)]
    info.update(cache_hits=counters["hits"], cache_misses=counters["misses"],
                deferred=counters["deferred"], bypassed=counters["bypassed"],
                recompile_reasons=list(rec.recompile_reasons) if rec else [],
                eager_fallbacks=[str(f) for m in members if m for f in list(m.eager_fallbacks)])
    return info
