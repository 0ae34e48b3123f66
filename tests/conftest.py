"""Test session set-up: compiled kernels go to a cache directory of this session, not the
user's (PIJIT_CACHE_DIR is read at each build; PIJIT_TEST_KERNEL_CACHE names one that outlives
the session, as `make mutants` shares one across its runs); every signature compiles at its
first call (PIJIT_ADAPTIVE=0), so that a test sees the compiled code run at once (tests of the
adaptive decisions themselves turn it back on); every graph is verified after each stage that
makes one (PIJIT_VERIFY_GRAPHS, also inherited by the subprocesses tests start)."""
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
