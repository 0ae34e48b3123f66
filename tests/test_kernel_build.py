"""The kernel build (pijit/backends/cfused/build.py) and its precompiled header of the part
every module shares (cffi's prologue, Python.h, NumPy's headers): the header may be missing,
corrupt, stale or made for another toolchain or flag set, and every build must still give a
working module."""
from __future__ import annotations

import logging
import subprocess
import threading

import pytest

from pijit.backends.cfused import build

# A module in the shape render.py writes: the shared #include lines, then code of its own.
SOURCE = r"""
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <Python.h>
#include <numpy/arrayobject.h>

static PyObject *answer(PyObject *self, PyObject *noargs)
{
    (void)self; (void)noargs;
    return PyLong_FromLong(@VALUE@);
}

static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "k", NULL, -1, methods};
static char module_name[256];

int pijit_kernels_init(const char *name)
{
    PyGILState_STATE g = PyGILState_Ensure();
    strncpy(module_name, name, sizeof(module_name) - 1);
    def.m_name = module_name;
    PyObject *m = PyModule_Create(&def);
    int rc = m == NULL ? -1 : PyDict_SetItemString(PyImport_GetModuleDict(), name, m);
    Py_XDECREF(m);
    PyGILState_Release(g);
    return rc;
}
"""


def source(value: int) -> str:
    return SOURCE.replace("@VALUE@", str(value))


def answer(tmp_path, value: int, **kwargs) -> int:
    """Build and call a module, then wait for the header its build may have started."""
    result = build.load_kernels(source(value), str(tmp_path), **kwargs).answer()
    build.wait_precompiled()
    return result


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(build, "_loaded", {})


@pytest.fixture
def used_header(monkeypatch):
    """For each compile, whether it included the precompiled header."""
    calls = []
    real = build._gcc

    def spy(cmd, c_path, so_path):
        calls.append("-iquote" in cmd)
        return real(cmd, c_path, so_path)
    monkeypatch.setattr(build, "_gcc", spy)
    return calls


def headers(cache) -> list:
    return sorted(p.name for p in cache.glob("_pijit_pch_*"))


def test_split_head_takes_the_leading_includes():
    src = "\n#define A 1\n#include <x.h>\n\n#define M(a) \\\n    (a)\nint f;\n"
    head, rest = build.split_head("prologue\n" + src + "epilogue\n", src)
    assert head == "prologue\n\n#define A 1\n#include <x.h>\n\n"
    assert rest == "#define M(a) \\\n    (a)\nint f;\nepilogue\n"


def test_header_is_made_by_the_first_build_and_used_by_the_next(tmp_path, used_header):
    assert answer(tmp_path, 1) == 1
    h, gch = headers(tmp_path)
    assert gch == h + ".gch"
    assert answer(tmp_path, 2) == 2
    assert used_header == [False, True]
    assert headers(tmp_path) == [h, gch]


@pytest.mark.parametrize("damage", ["truncated", "garbage", "missing"])
def test_damaged_precompiled_header_only_costs_time(tmp_path, used_header, damage, caplog):
    answer(tmp_path, 1)
    h, gch = headers(tmp_path)
    path = tmp_path / gch
    if damage == "truncated":           # gcc fails reading it: built again without it
        path.write_bytes(path.read_bytes()[:100_000])
    elif damage == "garbage":           # gcc would quietly parse the .h instead
        path.write_bytes(b"not a precompiled header" * 100)
    else:
        path.unlink()
    with caplog.at_level(logging.WARNING, logger="pijit.kernels"):
        assert answer(tmp_path, 2) == 2
    assert ("without it" in caplog.text) == (damage == "truncated")
    assert used_header[1:] == ([True, False] if damage == "truncated" else [False])
    assert headers(tmp_path) == [h, gch]        # made again beside that build
    assert path.read_bytes()[:4] == b"gpch"
    assert answer(tmp_path, 3) == 3
    assert used_header[-1]


def test_damaged_header_text_is_rewritten(tmp_path, used_header):
    """The .h is what gcc reads when it rejects the .gch: it must be the real head."""
    answer(tmp_path, 1)
    h, gch = headers(tmp_path)
    text = (tmp_path / h).read_text()
    (tmp_path / h).write_text(text[:len(text) // 2])
    assert answer(tmp_path, 2) == 2
    assert not used_header[-1]                  # made again beside this build
    assert (tmp_path / h).read_text() == text
    assert answer(tmp_path, 3) == 3
    assert used_header[-1]


def test_header_rejected_by_gcc_is_ignored(tmp_path, used_header):
    """A .gch gcc will not use (here: made with other target flags, as another compiler's
    would be) is skipped by gcc itself, which parses the .h instead."""
    answer(tmp_path, 1)
    h, gch = headers(tmp_path)
    subprocess.run([*build._compile_cmd(False), "-mno-avx", "-x", "c-header",
                    str(tmp_path / h), "-o", str(tmp_path / gch)], check=True)
    assert answer(tmp_path, 2) == 2
    assert used_header[-1]


def test_header_of_another_toolchain_is_not_used(tmp_path, used_header, monkeypatch):
    answer(tmp_path, 1)
    old = headers(tmp_path)
    monkeypatch.setattr(build, "_toolchain_id", lambda: "gcc 99.1\nflags: none\n")
    assert answer(tmp_path, 2) == 2
    assert not used_header[-1]
    new = [name for name in headers(tmp_path) if name not in old]
    assert len(new) == 2 and new[1] == new[0] + ".gch"


def test_openmp_builds_have_their_own_header(tmp_path, used_header):
    answer(tmp_path, 1)
    assert answer(tmp_path, 2, openmp=True) == 2
    assert len(headers(tmp_path)) == 4
    assert answer(tmp_path, 3, openmp=True) == 3
    assert used_header == [False, False, True]


def test_concurrent_first_builds(tmp_path):
    """Threads that each find no header both make one; both modules work."""
    results = {}

    def work(v):
        results[v] = answer(tmp_path, v)
    threads = [threading.Thread(target=work, args=(v,)) for v in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {1: 1, 2: 2}
    assert len(headers(tmp_path)) == 2
