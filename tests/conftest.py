"""Test session set-up: compiled kernels go to a cache directory of this session, not the
user's (PIJIT_CACHE_DIR is read at each build; PIJIT_TEST_KERNEL_CACHE names one that outlives
the session, as `make mutants` shares one across its runs and .ci/run across its Python
versions); every signature compiles at its
first call (PIJIT_ADAPTIVE=0), so that a test sees the compiled code run at once (tests of the
adaptive decisions themselves turn it back on); every graph is verified after each stage that
makes one (PIJIT_VERIFY_GRAPHS, also inherited by the subprocesses tests start)."""
import logging
import os

os.environ["PIJIT_ADAPTIVE"] = "0"
os.environ["PIJIT_VERIFY_GRAPHS"] = "1"

import pytest
from hypothesis import Phase, settings


@pytest.fixture(autouse=True, scope="session")
def kernel_cache_dir(tmp_path_factory):
    old = os.environ.get("PIJIT_CACHE_DIR")
    os.environ["PIJIT_CACHE_DIR"] = (os.environ.get("PIJIT_TEST_KERNEL_CACHE")
                                     or str(tmp_path_factory.mktemp("pijit-cache")))
    yield
    if old is None:
        os.environ.pop("PIJIT_CACHE_DIR", None)
    else:
        os.environ["PIJIT_CACHE_DIR"] = old


# Hypothesis replays a failing example under sys.settrace to explain it (its explain phase);
# a traced thread runs jitted functions as plain Python, so such a replay would not test
# pijit at all and a real failure would be reported as flaky.
settings.register_profile("pijit", phases=[p for p in Phase if p is not Phase.explain])
settings.load_profile("pijit")


class _InternalErrors(logging.Handler):
    """Records what pijit logs with a traceback: a bug of its own that it caught so that the
    user's code still runs (loop-nest recognition, the fused backend's graph passes)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []

    def emit(self, record):
        if record.exc_info:
            self.records.append(record)


@pytest.fixture(autouse=True)
def no_internal_errors(request):
    """A test fails when pijit caught one of its own exceptions during it, though the results
    were right: capture fell back silently where it should have said why in words (a test
    that plants such an error marks itself `internal_errors`)."""
    handler = _InternalErrors()
    logger = logging.getLogger("pijit")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
    if request.node.get_closest_marker("internal_errors") is None:
        first = handler.records[0] if handler.records else None
        assert first is None, (f"pijit caught an internal error: {first.getMessage()}\n"
                               f"{logging.Formatter().formatException(first.exc_info)}")


@pytest.fixture
def cheap_plain_runs():
    """Plain runs timed on the stand-in clock of clocks.py for the whole test."""
    from clocks import cheap_plain_runs
    with cheap_plain_runs():
        yield


@pytest.fixture
def adaptive(monkeypatch):
    """The suite compiles at the first call (PIJIT_ADAPTIVE=0): a test asking for this turns
    adaptive execution on, and the stand-in clocks it may set are the real ones again after."""
    from pijit import eval_frame
    monkeypatch.delenv("PIJIT_ADAPTIVE")
    yield
    eval_frame.set_perf_clock(None)
    eval_frame.set_cpu_clock(None)


def pytest_configure(config):
    config.addinivalue_line("markers", "internal_errors: the test plants an error pijit "
                            "catches and logs (no_internal_errors then lets it pass)")
