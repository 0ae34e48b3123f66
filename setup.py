"""Build and install pijit (the C hook is built by cffi from csrc/)."""
from setuptools import find_packages, setup


setup(
    name="pijit",
    version="0.1.0",
    description="A PEP 523 JIT frame evaluator for NumPy code",
    packages=find_packages(exclude=["tests", "tests.*", "benchmarks", "benchmarks.*"]),
    python_requires=">=3.11",
    setup_requires=["cffi>=1.15", "numpy"],
    install_requires=["numpy>=1.26", "bytecode>=0.16", "cffi>=1.15"],
    extras_require={
        "test": ["pytest==9.0.3", "hypothesis==6.155.2"],
        # optional: progress bar, BLAS report, plots, and a peer for the benchmark runner
        "bench": ["tqdm==4.67.1", "threadpoolctl==3.8.0", "matplotlib==3.11.2", "numexpr==2.14.2"],
    },
    cffi_modules=["pijit/_build_C.py:ffibuilder"],
    zip_safe=False,
)
