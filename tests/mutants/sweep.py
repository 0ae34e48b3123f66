"""Automatic mutation sweep (the faults nobody thought to plant): every small mutation site
of a module, found with `ast`, applied ONE at a time to a scratch copy of the tree, with the
tests that execute its statement run there.

Which tests execute which statement: coverage's tracer cannot say (a traced thread runs jitted
functions as plain Python, so pijit's capture would never run), so `probe` builds a copy of the
tree where every statement inside a function of pijit/ first records itself for the current
test, runs the whole suite there once (`--workers` xdist workers, 2 by default: about as long
as the suite; 1 on a shared machine; `--tests`: only some test files) and keeps the map. A
site whose statement no test executes survives the whole suite: `uncovered` lists them;
`sweep` runs the others against exactly their tests.

    python tests/mutants/sweep.py probe [--work DIR] [--workers N] [--tests T ...]  # the map
    python tests/mutants/sweep.py uncovered pijit/x.py ...        # sites no test reaches
    python tests/mutants/sweep.py sweep pijit/x.py --n 10 [--max-tests 15] [--seed 1]
    python tests/mutants/sweep.py list pijit/x.py [--only ID ...]
    python tests/mutants/sweep.py sweep pijit/backends/cfused/render.py --kinds c \
        --fallback-tests tests/test_cfused.py ...       # the C text of a generator's strings

Sites: compare operators swapped (< <=, == !=, is, in), and/or, + -, * //, & |, << >>, an int
constant +-1, True/False, `not` dropped, an `if` made always/never, a return value replaced
(None, or a neighbouring return's name or constant), a call's first two arguments swapped, a
statement replaced by `pass` (not logging, raising or asserting ones, not docstrings). `sweep`
appends one JSON line per site to DIR/results.jsonl (status SURVIVED / killed / crashed /
timeout / UNCOVERED, the first failing test, search/replace lines ready for a *.toml here).
The map is of this Python's code paths: a 3.12-only branch is "uncovered" on 3.11.

C text sites (--kinds c; the only kind of a csrc/*.c module, which each site rebuilds): most of
the kernels' semantics is C written as Python strings, which the sites above never touch. In
the string literals of a module (f-strings' literal parts; not docstrings, raise/assert/log
statements or C comments): a binary operator between blanks swapped (< <=, > >=, == !=, + -,
* /, && ||, & |; also a string that is only an operator, as in an operator table), an integer
+-1, a (double)/(float)/(int64_t)/... cast changed, fmin/fmax, min/max swapped. A C site
outside any probed statement (a module-level template, a csrc file) runs --fallback-tests, as
does every site when there is no map (no probe run).
"""
from __future__ import annotations

import argparse
import ast
import glob
import io
import json
import os
import pathlib
import random
import re
import shlex
import shutil
import subprocess
import sys
import time
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[2]
SKIP = {".git", "build", "__pycache__", ".pytest_cache", ".hypothesis", "dist", "scratch"}
NOT_A_TEST = {"<import>", "<between>"}

SWAP_CMP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
            ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
            ast.In: ast.NotIn, ast.NotIn: ast.In}
SWAP_BIN = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.FloorDiv: ast.Mult, ast.Mult: ast.FloorDiv,
            ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd, ast.LShift: ast.RShift,
            ast.RShift: ast.LShift, ast.Mod: ast.FloorDiv}
QUIET_CALLS = {"log", "debug", "info", "warning", "_log", "note", "explain", "dump", "record"}


class Source:
    def __init__(self, text):
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno, col):
        """Character offset of (1-based line, UTF-8 byte column)."""
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode()[:col].decode())

    def span(self, node):
        return (self.offset(node.lineno, node.col_offset),
                self.offset(node.end_lineno, node.end_col_offset))

    def seg(self, node):
        a, b = self.span(node)
        return self.text[a:b]


def docstring_nodes(tree):
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.body and isinstance(node.body[0], ast.Expr) \
                    and isinstance(node.body[0].value, ast.Constant):
                out.add(id(node.body[0]))
    return out


def quiet(node):
    """A statement whose only job is logging/explaining (its mutants change no result)."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        f = node.value.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        return name in QUIET_CALLS
    return isinstance(node, (ast.Raise, ast.Assert, ast.Import, ast.ImportFrom, ast.Pass,
                             ast.Global, ast.Nonlocal))


def sites(text):
    """Every mutation site: dicts of func, line, kind, desc, edits [(start, end, new)]."""
    src = Source(text)
    tree = ast.parse(text)
    docs = docstring_nodes(tree)
    out = []
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node

    def func_of(node):
        n = node
        while id(n) in parents:
            n = parents[id(n)]
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return n
        return None

    def in_quiet(node):
        n = node
        while id(n) in parents:
            if isinstance(n, ast.stmt) and quiet(n):
                return True
            if isinstance(n, ast.JoinedStr):
                return True
            n = parents[id(n)]
        return False

    def add(node, kind, desc, edits):
        f = func_of(node)
        if f is None:
            return
        out.append(dict(func=f.name if f else "<module>", line=node.lineno, kind=kind,
                        desc=desc, edits=edits))

    def replace_expr(node, new_node, kind, desc):
        a, b = src.span(node)
        add(node, kind, desc, [(a, b, "(" + ast.unparse(new_node) + ")")])

    returns_by_func = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and node.value is not None:
            returns_by_func.setdefault(id(func_of(node)), []).append(node)

    for node in ast.walk(tree):
        if not hasattr(node, "lineno") or in_quiet(node):
            continue
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in SWAP_CMP:
            new = ast.Compare(node.left, [SWAP_CMP[type(node.ops[0])]()], node.comparators)
            replace_expr(node, new, "cmp", f"{type(node.ops[0]).__name__} -> "
                         f"{SWAP_CMP[type(node.ops[0])].__name__}")
        elif isinstance(node, ast.BoolOp):
            op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            replace_expr(node, ast.BoolOp(op, node.values), "boolop",
                         f"{type(node.op).__name__} -> {type(op).__name__}")
        elif isinstance(node, ast.BinOp) and type(node.op) in SWAP_BIN:
            new_op = SWAP_BIN[type(node.op)]()
            replace_expr(node, ast.BinOp(node.left, new_op, node.right), "binop",
                         f"{type(node.op).__name__} -> {type(new_op).__name__}")
        elif isinstance(node, ast.AugAssign) and type(node.op) in SWAP_BIN:
            new_op = SWAP_BIN[type(node.op)]()
            new = ast.AugAssign(node.target, new_op, node.value)
            a, b = src.span(node)
            add(node, "binop", f"augassign {type(node.op).__name__} -> "
                f"{type(new_op).__name__}", [(a, b, ast.unparse(new))])
        elif isinstance(node, ast.Constant) and id(parents.get(id(node))) not in docs:
            v = node.value
            if isinstance(v, bool):
                replace_expr(node, ast.Constant(not v), "const", f"{v} -> {not v}")
            elif isinstance(v, int):
                delta = random.Random(node.lineno * 1000 + node.col_offset).choice((1, -1))
                replace_expr(node, ast.Constant(v + delta), "const", f"{v} -> {v + delta}")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            a, b = src.span(node)
            add(node, "not", "not dropped", [(a, b, "(" + src.seg(node.operand) + ")")])
        elif isinstance(node, ast.If):
            a, b = src.span(node.test)
            add(node, "if", "if always", [(a, b, "True")])
            add(node, "if", "if never", [(a, b, "False")])
        elif isinstance(node, ast.Return) and node.value is not None:
            mine = src.seg(node.value)
            others = [r for r in returns_by_func.get(id(func_of(node)), ())
                      if src.seg(r.value) != mine]
            a, b = src.span(node.value)
            if isinstance(node.value, ast.Constant) and node.value.value is None:
                continue
            if others:
                other = min(others, key=lambda r: abs(r.lineno - node.lineno))
                # the other value must only use names bound here: keep it when simple
                if isinstance(other.value, (ast.Constant, ast.Name)):
                    add(node, "return", f"return {src.seg(other.value)}",
                        [(a, b, src.seg(other.value))])
            if not isinstance(node.value, ast.Constant):
                add(node, "return", "return None", [(a, b, "None")])
        elif isinstance(node, ast.Call):
            pos = [x for x in node.args if not isinstance(x, ast.Starred)]
            if len(pos) >= 2 and len(pos) == len(node.args):
                (a1, b1), (a2, b2) = src.span(pos[0]), src.span(pos[1])
                s1, s2 = src.text[a1:b1], src.text[a2:b2]
                if s1 != s2:
                    add(node, "swap", "first two arguments swapped",
                        [(a2, b2, s1), (a1, b1, s2)])
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Expr, ast.AnnAssign)) \
                and id(node) not in docs and not quiet(node):
            a, b = src.span(node)
            add(node, "delete", "statement deleted", [(a, b, "pass")])
    return out


# ---- C text: the kernels' semantics live in C written as Python strings (and csrc/*.c) ----

C_SWAP_OP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "+": "-",
             "-": "+", "*": "/", "/": "*", "&&": "||", "||": "&&", "&": "|", "|": "&"}
C_CAST = {"double": "float", "float": "double", "int64_t": "int32_t", "int32_t": "int64_t",
          "uint64_t": "int64_t", "npy_intp": "int", "int": "npy_intp"}
C_MINMAX = {"fmin": "fmax", "fmax": "fmin", "fminf": "fmaxf", "fmaxf": "fminf", "min": "max",
            "max": "min", "MIN": "MAX", "MAX": "MIN"}
# a binary operator between blanks (the generators' style: `a < b`, so that `*p`, `&x`, `->`,
# `<<` and `#include <x.h>` are not taken), or a string holding nothing but an operator
# (_BINOP's "<" ...); integers not part of a name, a float, an escape or a % format
_C_OP = re.compile(r"(?:(?<=\s)|^)(<=|>=|==|!=|&&|\|\||[<>+\-*/&|])(?=\s|$)")
_C_INT = re.compile(r"(?<![\w.\\%#])(\d+)(?=[uUlL]*(?![\w.]))")
_C_CAST = re.compile(r"\((" + "|".join(C_CAST) + r")\)")
_C_MINMAX = re.compile(r"\b(" + "|".join(C_MINMAX) + r")(?=\s*\()")
_C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def _mask(body, f_string):
    """`body` with what is not C text (comments; an f-string's {expressions}) blanked by NULs,
    offsets kept."""
    out = list(body)
    if f_string:
        i, depth = 0, 0
        while i < len(body):
            c = body[i]
            if depth == 0 and body.startswith(("{{", "}}"), i):
                i += 2
                continue
            if c == "{":
                depth += 1
            if depth:
                out[i] = "\0"
            if c == "}" and depth:
                depth -= 1
            i += 1
    text = "".join(out)
    for m in _C_COMMENT.finditer(text):
        out[m.start():m.end()] = "\0" * (m.end() - m.start())
    return "".join(out)


def c_edits(body, at):
    """(kind, desc, [(start, end, new)]) of every C mutation in the masked text `body`, whose
    first character is at offset `at` of the module."""
    out = []
    whole = body.strip()
    for m in _C_OP.finditer(body):
        op = m.group(1)
        if whole != op and op in "+-" and re.search(r"[eE]\s*$", body[:m.start()]):
            continue
        out.append(("c-op", f"C {op} -> {C_SWAP_OP[op]}",
                    [(at + m.start(1), at + m.end(1), C_SWAP_OP[op])]))
    for m in _C_INT.finditer(body):
        v = int(m.group(1))
        new = v + 1 if v == 0 else v + random.Random(at + m.start()).choice((1, -1))
        out.append(("c-int", f"C {v} -> {new}", [(at + m.start(1), at + m.end(1), str(new))]))
    for m in _C_CAST.finditer(body):
        t = m.group(1)
        out.append(("c-cast", f"C ({t}) -> ({C_CAST[t]})",
                    [(at + m.start(1), at + m.end(1), C_CAST[t])]))
    for m in _C_MINMAX.finditer(body):
        f = m.group(1)
        out.append(("c-minmax", f"C {f} -> {C_MINMAX[f]}",
                    [(at + m.start(1), at + m.end(1), C_MINMAX[f])]))
    return out


def c_string_spans(text):
    """(start, end, f-string?) of the body (between the quotes) of every string literal."""
    src = Source(text)
    toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    spans, depth, start = [], 0, None
    for t in toks:
        name = tokenize.tok_name[t.type]
        if name == "FSTRING_START":          # 3.12+: an f-string is a run of tokens
            if depth == 0:
                start = t.start
            depth += 1
        elif name == "FSTRING_END":
            depth -= 1
            if depth == 0:
                spans.append((start, t.end))
        elif t.type == tokenize.STRING and depth == 0:
            spans.append((t.start, t.end))
    out = []
    for (l1, c1), (l2, c2) in spans:
        a = src.starts[l1 - 1] + c1
        b = src.starts[l2 - 1] + c2
        raw = text[a:b]
        prefix = re.match(r"[A-Za-z]*", raw).group(0)
        q = raw[len(prefix):len(prefix) + 3]
        q = q if q in ('"""', "'''") else q[0]
        out.append((a + len(prefix) + len(q), b - len(q), "f" in prefix.lower()))
    return out


def c_sites(text, py=True):
    """The C mutation sites of a module's strings (py) or of a C file (not py); in Python,
    not those in docstrings nor in raise/assert/log statements."""
    if not py:
        body = _mask(text, False)
        body = re.sub(r'"(?:\\.|[^"\\\n])*"', lambda m: "\0" * len(m.group(0)), body)
        body = re.sub(r"^\s*#\s*include[^\n]*", lambda m: "\0" * len(m.group(0)), body,
                      flags=re.M)
        found = [(None, e) for e in c_edits(body, 0)]
    else:
        src = Source(text)
        tree = ast.parse(text)
        docs = docstring_nodes(tree)
        skip, funcs = [], []
        for node in ast.walk(tree):
            if id(node) in docs or isinstance(node, ast.stmt) and quiet(node):
                skip.append(src.span(node))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                funcs.append((*src.span(node), node.name))
        found = []
        for a, b, f in c_string_spans(text):
            if any(x <= a < y for x, y in skip):
                continue
            inner = [fn for fn in funcs if fn[0] <= a < fn[1]]
            func = min(inner, key=lambda fn: fn[1] - fn[0])[2] if inner else "<module>"
            found += [(func, e) for e in c_edits(_mask(text[a:b], f), a)]
    out = []
    for func, (kind, desc, edits) in found:
        line = text.count("\n", 0, edits[0][0]) + 1
        out.append(dict(func=func or _c_function(text, edits[0][0]), line=line, kind=kind,
                        desc=desc, edits=edits))
    return out


def _c_function(text, at):
    """The name of the C function (or macro) holding offset `at` of a C file."""
    names = re.findall(r"^(?:static\s+)?[\w\s\*]*?\b(\w+)\s*\([^;]*?$|^#define\s+(\w+)",
                       text[:at], re.M)
    keywords = {"if", "for", "while", "switch", "return", "sizeof"}
    return next((a or b for a, b in reversed(names) if (a or b) not in keywords), "<file>")


def module_sites(module, text, kinds):
    """The sites of a module (kinds: py, c or all): a C file has C sites only."""
    if module.endswith((".c", ".h")):
        return c_sites(text, py=False)
    return (sites(text) if kinds != "c" else []) + (c_sites(text) if kinds != "py" else [])


def apply(text, edits):
    for a, b, new in sorted(edits, reverse=True):
        text = text[:a] + new + text[b:]
    return text


def snippet(text, edits):
    """(search, replace) lines around the edit: the whole lines it touches."""
    a = min(e[0] for e in edits)
    b = max(e[1] for e in edits)
    lo = text.rfind("\n", 0, a) + 1
    hi = text.find("\n", b)
    hi = len(text) if hi < 0 else hi
    mutated = apply(text, edits)
    delta = len(mutated) - len(text)
    return text[lo:hi], mutated[lo:hi + delta]


def spread(all_sites, n, seed):
    """n sites spread over the module's functions (round robin over functions, random kind)."""
    rng = random.Random(seed)
    by_func = {}
    for s in all_sites:
        by_func.setdefault(s["func"], []).append(s)
    for v in by_func.values():
        rng.shuffle(v)
    funcs = list(by_func)
    rng.shuffle(funcs)
    picked = []
    while len(picked) < n and any(by_func.values()):
        for f in funcs:
            if by_func[f] and len(picked) < n:
                picked.append(by_func[f].pop())
    return picked




PROBE_MODULE = '''
import atexit, json, os
current = ["<import>"]
hits = {}
def hit(n):
    s = hits.get(current[0])
    if s is None:
        s = hits[current[0]] = set()
    s.add(n)
def _dump():
    # a process killed mid-write must leave no half file behind: write aside, then rename
    path = os.path.join(os.environ["PIJIT_SWEEP_WORK"], f"hits-{os.getpid()}.json")
    with open(path + ".part", "w") as f:
        json.dump({k: sorted(v) for k, v in hits.items()}, f)
    os.replace(path + ".part", path)
atexit.register(_dump)
'''

PROBE_PLUGIN = '''
import pytest
from pijit import _probe
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _probe.current[0] = item.nodeid
    yield
    _probe.current[0] = "<between>"
'''


class Probe(ast.NodeTransformer):
    def __init__(self, module, table):
        self.module, self.table = module, table

    def _body(self, body, in_func):
        out = []
        for i, stmt in enumerate(body):
            self.visit(stmt)
            is_doc = i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            if in_func and not is_doc and not isinstance(stmt, (ast.Global, ast.Nonlocal)):
                n = len(self.table)
                self.table.append((self.module, stmt.lineno, stmt.end_lineno))
                out.append(ast.parse(f"_PH({n})").body[0])
            out.append(stmt)
        return out

    def generic_visit(self, node):
        in_func = getattr(self, "_in_func", False)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            saved, self._in_func = in_func, True
            node.body = self._body(node.body, True)
            self._in_func = saved
            for d in node.decorator_list:
                self.visit(d)
            return node
        for field in ("body", "orelse", "finalbody", "handlers"):
            val = getattr(node, field, None)
            if isinstance(val, list) and val and isinstance(val[0], ast.stmt):
                setattr(node, field, self._body(val, in_func))
            elif isinstance(val, list):
                for v in val:
                    if isinstance(v, ast.AST):
                        self.visit(v)
        if isinstance(node, ast.Match):
            for c in node.cases:
                c.body = self._body(c.body, in_func)
        return node




def read_hits(work: pathlib.Path):
    """({statement: {test ids}}, [(file, why)] for each hits file that does not parse): one
    worker's loss must not cost the map of all the others."""
    covered, unreadable = {}, []
    for f in sorted(glob.glob(str(work / "hits-*.json"))):
        try:
            with open(f) as fh:
                hits = json.load(fh)
        except (OSError, ValueError) as e:
            unreadable.append((f, str(e)[:120]))
            continue
        for test, ns in hits.items():
            for n in ns:
                covered.setdefault(n, set()).add(test)
    return covered, unreadable


def probe(work: pathlib.Path, workers=2, tests=("tests",)):
    """Build the probed tree in work/probe, run the suite (or `tests`) there, write
    work/covered.json: module -> [[first line, last line, [test ids]] per statement]. A map of
    some test files counts the others' statements as unreached."""
    tree = work / "probe"
    copy_tree(tree)
    table = []
    for path in sorted(tree.glob("pijit/**/*.py")):
        module = ast.parse(path.read_text())
        Probe(str(path.relative_to(tree)), table).visit(module)
        at = 0
        while at < len(module.body) and (
                isinstance(module.body[at], ast.ImportFrom) and module.body[at].module == "__future__"
                or at == 0 and isinstance(module.body[0], ast.Expr)):
            at += 1
        module.body.insert(at, ast.parse("from pijit._probe import hit as _PH").body[0])
        path.write_text(ast.unparse(ast.fix_missing_locations(module)))
    (tree / "pijit" / "_probe.py").write_text(PROBE_MODULE)
    (tree / "probeplugin.py").write_text(PROBE_PLUGIN)
    for f in glob.glob(str(work / "hits-*.json*")):
        os.remove(f)
    env = dict(os.environ, PYTHONPATH=str(tree), PIJIT_SWEEP_WORK=str(work),
               PIJIT_TEST_KERNEL_CACHE=str(work / "kernels"), PYTHONDONTWRITEBYTECODE="1")
    # (tests/test_mutants.py fails there: the probed files no longer hold the snippets)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", str(workers),
                    "-p", "no:cacheprovider", "-p", "probeplugin", *tests], cwd=tree, env=env)
    covered, unreadable = read_hits(work)
    for f, why in unreadable:
        print(f"unreadable, left out of the map (its tests' statements look unreached): "
              f"{f}: {why}")
    result = {}
    for n, (module, lo, hi) in enumerate(table):
        result.setdefault(module, []).append([lo, hi, sorted(covered.get(n, ()))])
    (work / "covered.json").write_text(json.dumps(result))
    print(f"{len(covered)} of {len(table)} statements executed by some test")


def covering_tests(stmts, site):
    """The tests that execute the innermost statement holding the site (None: not probed).
    Functions run only at import count as not executed (NOT_A_TEST)."""
    inner = [st for st in stmts if st[0] <= site["line"] <= st[1]]
    if not inner:
        return None
    return sorted(set(min(inner, key=lambda st: st[1] - st[0])[2]) - NOT_A_TEST)


def copy_tree(dest: pathlib.Path):
    def ignore(_, names):
        return [x for x in names if x in SKIP or x.endswith(".egg-info")]
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(ROOT, dest, ignore=ignore, symlinks=True)


def rebuild(tree):
    """Build pijit._C in the scratch tree (a csrc site): whether it built."""
    proc = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree,
                          capture_output=True, text=True)
    return proc.returncode == 0


def run_tests(tree, tests, cache, timeout):
    """(status, first failing test or what stopped the run, seconds)."""
    env = dict(os.environ, PYTHONPATH=str(tree), PIJIT_TEST_KERNEL_CACHE=cache,
               PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
           "-p", "no:randomly", *tests]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", "", time.monotonic() - t0
    out, dt = proc.stdout + proc.stderr, time.monotonic() - t0
    if proc.returncode == 0:
        return "SURVIVED", "", dt
    failed = re.search(r"^(?:FAILED|ERROR) (\S+)", out, re.M)
    first = failed.group(1) if failed else out[-300:]
    if re.search(r"^E\s+(AssertionError|assert\b)", out, re.M):
        return "killed", first, dt
    return "crashed", first + " | " + (re.findall(r"^E\s+(.*)$", out, re.M) or [""])[0][:200], dt


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("probe", "uncovered", "sweep", "list"))
    p.add_argument("modules", nargs="*")
    p.add_argument("--work", default="/tmp/pijit-sweep", help="map, trees, kernels, results")
    p.add_argument("--n", type=int, default=10, help="sites per module (spread over functions)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-tests", type=int, default=0,
                   help="only sites whose statement at most this many tests execute")
    p.add_argument("--only", nargs="*", type=int, default=None, help="these site ids")
    p.add_argument("--timeout", type=float, default=240)
    p.add_argument("--workers", type=int, default=2, help="probe: pytest-xdist workers")
    p.add_argument("--tests", nargs="+", default=["tests"],
                   help="probe: these pytest arguments instead of the whole suite")
    p.add_argument("--kinds", choices=("all", "py", "c"), default="all",
                   help="Python AST sites, C text sites (in string literals; csrc files) or both")
    p.add_argument("--fallback-tests", nargs="+", default=[],
                   help="sweep: the tests of C sites outside any probed statement (module-level "
                        "templates, csrc/*.c); an argument holding blanks is split as a shell "
                        "would (\"tests/x.py -k 'sum or max'\")")
    args = p.parse_intermixed_args()
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.command == "probe":
        return probe(work, args.workers, args.tests)
    # without a map (no probe run), every site's tests are --fallback-tests
    cov = json.loads((work / "covered.json").read_text()) \
        if args.command != "list" and (work / "covered.json").exists() else {}
    tree = work / "tree"
    if args.command == "sweep":
        copy_tree(tree)
    for module in args.modules:
        text = (ROOT / module).read_text()
        all_sites = module_sites(module, text, args.kinds)
        for i, s in enumerate(all_sites):
            s["id"] = i
        stmts = cov.get(module, [])

        def tests_of(site):
            # a C site outside any probed statement (a module-level template, a csrc file)
            found = covering_tests(stmts, site)
            fallback = [t for arg in args.fallback_tests for t in shlex.split(arg)]
            return fallback if found is None and fallback else found
        if args.command == "uncovered":
            print(f"== {module}: {len(all_sites)} sites")
            for s in all_sites:
                if tests_of(s) == []:
                    search, replace = snippet(text, s["edits"])
                    print(f"  #{s['id']} {s['func']}:{s['line']} {s['kind']} {s['desc']}: "
                          f"{search.strip().splitlines()[0][:80]}")
            continue
        if args.max_tests:
            all_sites = [s for s in all_sites if 0 < len(tests_of(s) or ()) <= args.max_tests]
        picked = ([s for s in all_sites if s["id"] in args.only] if args.only is not None
                  else spread(all_sites, args.n, args.seed))
        if args.command == "list":
            for s in picked:
                search, replace = snippet(text, s["edits"])
                print(f"#{s['id']} {s['func']}:{s['line']} {s['kind']} {s['desc']}\n"
                      f"  - {search.strip()}\n  + {replace.strip()}")
            continue
        in_c = module.startswith("csrc/")
        with open(work / "results.jsonl", "a") as out:
            for s in picked:
                tests = tests_of(s)
                search, replace = snippet(text, s["edits"])
                if not tests:
                    status, first, dt = "UNCOVERED", "", 0.0
                else:
                    target = tree / module
                    target.write_text(apply(text, s["edits"]))
                    try:
                        if in_c and not rebuild(tree):
                            status, first, dt = "unbuilt", "", 0.0
                        else:
                            status, first, dt = run_tests(tree, tests, str(work / "kernels"),
                                                          args.timeout)
                    finally:
                        target.write_text(text)
                        if in_c:
                            rebuild(tree)
                out.write(json.dumps(dict(
                    module=module, id=s["id"], func=s["func"], line=s["line"], kind=s["kind"],
                    desc=s["desc"], status=status, first=first, secs=round(dt, 1),
                    ntests=len(tests or ()), search=search, replace=replace)) + "\n")
                out.flush()
                print(f"#{s['id']:<5} {status:9} {dt:6.1f}s {len(tests or ()):4}t "
                      f"{s['func']}:{s['line']} {s['kind']} {s['desc']} | {first[:100]}",
                      flush=True)


if __name__ == "__main__":
    main()
