"""Build and install pijit (the C hook is built by cffi from csrc/; the fused kernels'
precompiled header is built beside it, see pijit/backends/cfused/toolchain.py).

On an interpreter pijit does not support (pijit/_compat.py: before 3.11, after 3.13, the
free-threaded build) nothing is compiled: pijit installs as plain Python, and `jit` runs
functions unchanged there."""
import importlib.util
import os
import subprocess

from setuptools import find_packages, setup
from setuptools.command.build_ext import build_ext

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name, *path):
    """A module of the source tree, without importing pijit (which needs what this builds)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(_HERE, *path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _toolchain():
    return _load("_pijit_toolchain", "pijit", "backends", "cfused", "toolchain.py")


# dask[distributed] pins distributed to the same release
DASK = ["dask[array,distributed]==2026.8.0"]


class BuildExtWithKernelHeader(build_ext):
    """build_ext, then the kernels' precompiled header next to the built pijit package.
    Without it kernels still compile (reading the headers each time): a failure here is a
    warning, not a failed install."""

    def run(self):
        super().run()
        import numpy
        toolchain = _toolchain()
        pkg = os.path.dirname(self.get_ext_fullpath("pijit._C"))
        # PCH_HEADER's place in the package being built (the tree itself when editable)
        header = os.path.join(pkg, os.path.relpath(toolchain.PCH_HEADER,
                                                   os.path.join(_HERE, "pijit")))
        os.makedirs(os.path.dirname(header), exist_ok=True)
        self.copy_file(toolchain.HEADER, header)
        cmd = toolchain.pch_command(numpy.get_include(), header)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            self.warn("pijit: no precompiled kernel header (kernels compile slower): "
                      + proc.stderr[-2000:])


SUPPORTED = _load("_pijit_compat", "pijit", "_compat.py").SUPPORTED
_SUPPORTED_MARKER = "python_version >= '3.11' and python_version < '3.14'"
# What the C hook and its build need; nothing of it where it is not built.
_C_BUILD = dict(
    setup_requires=["cffi>=1.15", "numpy"],
    cffi_modules=["pijit/_build_C.py:ffibuilder"],
    cmdclass={"build_ext": BuildExtWithKernelHeader},
) if SUPPORTED else {}


setup(
    name="pijit",
    version="0.1.0",
    description="A PEP 523 JIT frame evaluator for NumPy code",
    packages=find_packages(exclude=["tests", "tests.*", "benchmarks", "benchmarks.*"]),
    package_data={"pijit.backends.cfused": ["kernel_prelude.h", "kernel_support.h"]},
    # Installs (as plain Python, see above) wherever numpy>=1.26 does.
    python_requires=">=3.9",
    install_requires=["numpy>=1.26"] + [f"{req}; {_SUPPORTED_MARKER}"
                                        for req in ("bytecode>=0.16", "cffi>=1.15")],
    extras_require={
        # coverage: the tracing tests; cloudpickle, joblib: the pickling tests; pytest-xdist:
        # CI's two workers (.ci/run); dask: the Dask tests and examples (map_blocks, a
        # LocalCluster); setuptools: `make mutants` rebuilds the C extension of its scratch
        # copy for a mutant of csrc/; IPython, nbclient, nbformat, ipykernel: notebooks
        # (their tests skip without them)
        "test": ["pytest==9.0.3", "hypothesis==6.155.2", "coverage==7.17.4", "cloudpickle==3.1.3",
                 "joblib==1.6.0", "pytest-xdist==3.8.0", "setuptools>=61", "ipython==8.12.3",
                 "nbclient==0.11.0", "nbformat==5.11.1", "ipykernel==7.4.0", *DASK],
        # optional: jitted block functions on Dask arrays and dask.distributed workers
        "dask": DASK,
        # optional: progress bar, BLAS report, plots, and a peer for the benchmark runner
        "bench": ["tqdm==4.67.1", "threadpoolctl==3.8.0", "matplotlib==3.11.2", "numexpr==2.14.2"],
    },
    zip_safe=False,
    **_C_BUILD,
)
