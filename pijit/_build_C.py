"""cffi builder of ``pijit._C``, the extension holding pijit's PEP 523 hook.

The C sources live in ``csrc/``; they are compiled as one translation unit, in the
order of ``_UNITS`` (``compat.h``: the CPython-version facts; ``guards.c``: guard
programs; ``code_state.c``: per-code state; ``pool.c``: the kernels' buffer pool;
``kernel_entry.c``: what every kernel does around its loops; ``kernel_support.c``: the
table of routines the kernels share; ``eval_frame.c``: the hook; ``adapt.c``: hot
signatures, promotion and timed trials; ``wrapper.c``: what ``pijit.jit`` returns;
``call_prefix.c``: 3.11's prefix of a jitted function's code; ``module.c``: the module).  The only
cffi-visible function is ``pijit_init_module``, which creates the real
extension module ``pijit._eval_frame`` (see ``pijit/eval_frame.py``).

``PIJIT_ASAN=1`` builds with AddressSanitizer (run Python with
``LD_PRELOAD=$(gcc -print-file-name=libasan.so)``; see ``make asan``).
"""
import os

import numpy
from cffi import FFI

_HERE = os.path.dirname(os.path.abspath(__file__))
_CSRC = os.path.join(os.path.dirname(_HERE), "csrc")
_CFUSED = os.path.join(_HERE, "backends", "cfused")
_UNITS = ("guards.c", "code_state.c", "pool.c", "kernel_entry.c", "kernel_support.c",
          "eval_frame.c", "adapt.c", "wrapper.c", "call_prefix.c", "module.c")
_FILES = ("compat.h", "pijit.h") + _UNITS

_compile_args = ["-std=gnu11", "-Wall", "-Wno-unused-function", "-Wno-missing-field-initializers"]
_link_args = []
if os.environ.get("PIJIT_ASAN") == "1":
    _asan = ["-fsanitize=address", "-fno-omit-frame-pointer", "-g", "-O1"]
    _compile_args += _asan
    _link_args += _asan

ffibuilder = FFI()
ffibuilder.cdef("int pijit_init_module(void);")
ffibuilder.set_source(
    "pijit._C",
    "".join(f'#include "{unit}"\n' for unit in _UNITS),
    define_macros=[("_CFFI_NO_LIMITED_API", None)],
    include_dirs=[_CSRC, _CFUSED, numpy.get_include()],
    depends=[os.path.join(_CSRC, f) for f in _FILES] + [os.path.join(_CFUSED, "kernel_support.h")],
    extra_compile_args=_compile_args,
    extra_link_args=_link_args,
    py_limited_api=False,
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
