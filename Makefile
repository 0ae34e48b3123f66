# pijit developer targets.
PYTHON ?= python3
# More pytest options for `make test` and `make asan`, e.g. PYTEST_ARGS="-n 2" (pytest-xdist,
# in the test extras).
PYTEST_ARGS ?=
ASAN_LIB := $(shell gcc -print-file-name=libasan.so)
# The compiler of fused kernels under `make asan` (pijit reads CC; gcc by default).
KERNEL_CC ?= gcc

.PHONY: install build test golden mutants bench asan clean

install:
	$(PYTHON) -m pip install -e '.[test]'

# Rebuild pijit/_C*.so in place (what `make asan` uses).
build:
	$(PYTHON) setup.py -q build_ext --inplace --force

test: install
	$(PYTHON) -m pytest -q $(PYTEST_ARGS) tests

# Rewrite tests/golden/ from the current dumps (after a codegen change that is meant).
golden:
	PIJIT_UPDATE_GOLDEN=1 $(PYTHON) -m pytest -q tests/test_golden.py

# Planted faults (tests/mutants/*.toml): each applied to a scratch copy of the tree, where the
# tests that must catch it run; fails when one survives or no longer applies (stale).
# `make mutants MUTANTS="name ..."` runs some of them.
mutants:
	$(PYTHON) tests/mutants/run.py $(MUTANTS)

bench: install
	@if [ -f benchmarks/__main__.py ]; then $(PYTHON) -m benchmarks; \
	else echo "no benchmarks yet"; fi

# Build with AddressSanitizer, run the tests under it, then rebuild normally
# whatever happened, and exit with the tests' status. allocator_may_return_null: a failed
# malloc returns NULL, as without ASan (the out-of-memory tests need MemoryError, not an abort).
# The C compiler pijit runs for its kernels runs without the ASan preload (CC below): under it,
# gcc itself ran intercepted and the kernel-heavy tests took 1.7x as long, for nothing (gcc is
# not what is under test).
asan:
	PIJIT_ASAN=1 $(PYTHON) setup.py -q build_ext --inplace --force
	CC="env -u LD_PRELOAD $(KERNEL_CC)" LD_PRELOAD=$(ASAN_LIB) ASAN_OPTIONS=detect_leaks=0:quarantine_size_mb=16:allocator_may_return_null=1 PYTHONMALLOC=malloc \
	    $(PYTHON) -m pytest -q -x $(PYTEST_ARGS) tests; \
	status=$$?; \
	$(PYTHON) setup.py -q build_ext --inplace --force; \
	exit $$status

clean:
	rm -rf build dist *.egg-info pijit/_C.c pijit/_C.o pijit/_C*.so pijit/backends/cfused/pch .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
