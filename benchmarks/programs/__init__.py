"""The program corpus: small programs written the way people write them (sorts, sieves,
Monte Carlo loops, string and dict work, classes, list-of-lists matrices, small NumPy image
and matrix code), each a module with a `main(n)` and its `SIZES`.

`load(name, jitted)` imports a fresh copy of one program (its own code objects), and with
`jitted` wraps every top-level function and every method of its classes in `pijit.jit`
with default options, as a user who jits a whole program does (benchmarks/corpus.py times
plain against jitted; tests/test_corpus.py checks they agree).
"""
from __future__ import annotations

import importlib.util
import inspect
import itertools
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = sorted(f[:-3] for f in os.listdir(HERE) if f.endswith(".py") and f != "__init__.py")
_fresh = itertools.count()


def load(name, jitted=False, jit_config=None):
    """A new module object for program `name`; jitted: every function and method wrapped."""
    if name not in NAMES:
        raise KeyError(f"no program {name!r}; choose from {', '.join(NAMES)}")
    modname = f"_pijit_corpus_{name}_{next(_fresh)}"
    spec = importlib.util.spec_from_file_location(modname, os.path.join(HERE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module           # classes and pickling look their module up
    spec.loader.exec_module(module)
    if jitted:
        jit_all(module, jit_config)
    return module


def jit_all(module, jit_config=None):
    """Wrap every function defined in `module` and every method of its classes in
    pijit.jit (staticmethods and classmethods through their function)."""
    import pijit

    def wrap(fn):
        return pijit.jit(fn, jit_config=jit_config) if jit_config else pijit.jit(fn)

    for attr, obj in list(vars(module).items()):
        if inspect.isfunction(obj) and obj.__module__ == module.__name__:
            setattr(module, attr, wrap(obj))
        elif inspect.isclass(obj) and obj.__module__ == module.__name__:
            for name, member in list(vars(obj).items()):
                if inspect.isfunction(member):
                    setattr(obj, name, wrap(member))
                elif isinstance(member, (staticmethod, classmethod)) and \
                        inspect.isfunction(member.__func__):
                    setattr(obj, name, type(member)(wrap(member.__func__)))
    return module


def unload(module):
    sys.modules.pop(module.__name__, None)
