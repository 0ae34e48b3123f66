"""Build and install pijit (the C hook is built by cffi from csrc/)."""
from setuptools import find_packages, setup

# find_packages needs pijit/__init__.py; list "pijit" explicitly so the
# cffi module pijit._C always has its package.
_packages = find_packages(exclude=["tests", "tests.*", "benchmarks", "benchmarks.*"])
if "pijit" not in _packages:
    _packages.insert(0, "pijit")

setup(
    name="pijit",
    version="0.1.0",
    description="A PEP 523 JIT frame evaluator for NumPy code",
    packages=_packages,
    python_requires=">=3.11",
    setup_requires=["cffi>=1.15", "numpy"],
    install_requires=["numpy", "bytecode", "cffi>=1.15"],
    extras_require={"test": ["pytest", "hypothesis"]},
    cffi_modules=["pijit/_build_C.py:ffibuilder"],
    zip_safe=False,
)
