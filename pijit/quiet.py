"""Warnings ignored (or made errors) while pijit runs code of its own: probes of NumPy on
stand-in values, constant folding, the replay of a failed graph.

Not `warnings.catch_warnings()` + `simplefilter()`: both bump the filters' version, which
empties every module's `__warningregistry__` at its next warning, so a warning that the
"default" action shows once per line (a RuntimeWarning of the user's `a / b`) is shown
again after each compile, and plain Python shows it once. An entry put in front of the
filter list, and taken out again, is what the interpreter reads at each warning, without
touching the version; "ignore" and "error" record nothing in any registry.
"""
from __future__ import annotations

import ast
import contextlib
import sys
import warnings


@contextlib.contextmanager
def warnings_as(action: str):
    """Every warning inside gets `action` ("ignore" or "error")."""
    entry = (action, None, Warning, None, 0)
    filters = warnings.filters
    filters.insert(0, entry)
    try:
        yield
    finally:
        for i, f in enumerate(filters):
            if f is entry:
                del filters[i]
                break


@contextlib.contextmanager
def warnings_unshown():
    """Warnings inside meet the filters as they are (one the user's filters make an error
    raises) but none is shown: for running again work whose warnings were shown already.
    showwarning is a module attribute, which the filters' version does not cover. (Process-
    wide: another thread's warning meanwhile is not shown either.)"""
    show = warnings.showwarning
    warnings.showwarning = _unshown
    try:
        yield
    finally:
        warnings.showwarning = show


def _unshown(*args, **kwargs):
    return None


def warning_scope(module_globals: dict | None) -> dict:
    """What code pijit generates for a function of the module whose globals these are needs
    in its own globals, so that a warning raised in it (NumPy's RuntimeWarnings name the
    frame running) is the module's: `__name__`, which filters match (`filterwarnings(
    "ignore", module="mypkg")`), and the module's `__warningregistry__` (the same dict), in
    which the "default" action records the lines that warned once."""
    if module_globals is None:
        return {}
    scope = {"__warningregistry__": module_globals.setdefault("__warningregistry__", {})}
    main = sys.modules.get("__main__")
    if getattr(main, "__dict__", None) is module_globals:
        scope[_MODULE] = main               # for registry_sync
    if "__name__" in module_globals:    # absent: "<string>" (None would silence them all)
        scope["__name__"] = module_globals["__name__"]
    return scope


_MODULE = "__pijit_module"


def registry_sync(scope: dict) -> list:
    """Statements that begin a function run in `scope` (warning_scope's): its registry made
    the module's again when the module's entry was replaced or deleted since. IPython deletes
    its namespace's entry before each cell, so that a line warns again in the next cell: the
    registry the scope took at compile time would keep it silent. Only for `__main__` (an
    IPython namespace, a script), whose registry someone may drop: a check at every call of
    a library module's code would pay for what nothing there does. The scope holds the
    module, not its globals: the entries of a function of it hold the scope from its code's
    state, which the collector does not see, and at exit CPython clears the globals of a
    module still alive (a script's open files are then flushed, its objects finalized), not
    those of a dict whose module is gone."""
    if _MODULE not in scope:
        return []
    return ast.parse(
        "global __warningregistry__\n"
        f"if {_MODULE}.__dict__.get('__warningregistry__') is not __warningregistry__:\n"
        f"    __warningregistry__ = {_MODULE}.__dict__.setdefault('__warningregistry__', {{}})"
        "\n").body
