"""Test session set-up: compiled kernels go to a cache directory of this session, not the
user's (PIJIT_CACHE_DIR is read at each build)."""
import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def kernel_cache_dir(tmp_path_factory):
    old = os.environ.get("PIJIT_CACHE_DIR")
    os.environ["PIJIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("pijit-cache"))
    yield
    if old is None:
        os.environ.pop("PIJIT_CACHE_DIR", None)
    else:
        os.environ["PIJIT_CACHE_DIR"] = old
