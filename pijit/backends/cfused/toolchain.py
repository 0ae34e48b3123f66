"""The C compiler's flags, and the precompiled header of the kernels' includes.

Kept free of pijit imports: setup.py loads this file by path to build the precompiled header
at install time, with the very flags the kernels are compiled with at run time. Kernels are
compiled by CC (config.env_cc, default gcc); the header is precompiled by gcc and used only
when CC is gcc.

Why a precompiled header: parsing Python.h and NumPy's headers was ~0.1 s of the ~0.3 s gcc
spends on a one-kernel module (measured here); loaded from a .gch it is ~0.01 s. gcc checks that
the .gch matches the compiler and flags, and otherwise reads the header itself; it stops at a
damaged one, and build.py then compiles again without it: a stale, missing or damaged .gch
costs time, never correctness.
"""
from __future__ import annotations

import os
import sys
import sysconfig

CC = "gcc"          # the compiler of the precompiled header (install time)
# -ffp-contract=off: no FMA contraction, so a*b+c rounds twice exactly like NumPy.
# Py_LIMITED_API: kernels use only the stable ABI of CPython 3.11, so one compiled module
# loads in every supported Python and one disk cache serves them all (build.cache_key); the
# NumPy headers' default target keeps them loadable by every NumPy of the same major version.
LIMITED_API = "0x030B0000"
CFLAGS = ("-O3", "-march=native", "-fno-math-errno", "-ffp-contract=off", "-fopenmp-simd",
          "-fPIC", "-std=gnu11", "-w", "-DPy_LIMITED_API=" + LIMITED_API)
LDFLAGS = ("-shared", "-lm")

# What every kernel module includes first; kernel sources include the same headers again
# (guarded no-ops after it), so they also compile without it.
HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernel_prelude.h")


# The table of routines compiled once in pijit._C that kernels call (csrc/kernel_support.c).
SUPPORT_HEADER = os.path.join(os.path.dirname(HEADER), "kernel_support.h")

# The copy of HEADER whose .gch kernels use: one per interpreter (pch/cpython-312/...), since
# gcc takes a .gch made from another version's Python.h without a word (it checks flags and
# macros, not which headers the include path finds) when several are installed from one tree.
PCH_HEADER = os.path.join(os.path.dirname(HEADER), "pch", sys.implementation.cache_tag,
                          os.path.basename(HEADER))


def include_dirs(numpy_include: str) -> list:
    return ["-I", sysconfig.get_paths()["include"], "-I", numpy_include,
            "-I", os.path.dirname(SUPPORT_HEADER)]


def pch_command(numpy_include: str, header: str) -> list:
    """gcc command precompiling HEADER into header + ".gch" (`header`: where PCH_HEADER is in
    the package being built, a copy of HEADER)."""
    return [CC, *CFLAGS, *include_dirs(numpy_include), "-x", "c-header", HEADER,
            "-o", header + ".gch"]


def pch_flags() -> list:
    """Flags that make gcc use the precompiled header when it was built (install time)."""
    if os.path.exists(PCH_HEADER + ".gch"):
        return ["-include", PCH_HEADER]
    return []


def compile_jobs() -> int:
    """How many gcc processes may compile one kernel module side by side: the CPUs this
    process may run on, at most MAX_JOBS."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_JOBS))


MAX_JOBS = 4
