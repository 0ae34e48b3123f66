"""The fused-kernel build and launch path under threads, processes, signals, damaged files,
foreign directories, a slow or missing compiler and failed allocations (issues 14, 16, 23).

Whatever can crash or hang runs in a subprocess with a timeout; cache tests damage real
files. Each subprocess runs SCRIPT_HEAD first: pijit's kernel log on stderr, and `fused()`,
which tells how the last call ran (a kernel module built or loaded, no NumPy fallback).
"""
from __future__ import annotations

import glob
import hashlib
import io
import logging
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

import pijit
from pijit import config
from pijit.backends.cfused import build, diskcache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT_HEAD = textwrap.dedent("""
    import logging, os, signal, sys
    # Ctrl-C raises KeyboardInterrupt, as in a terminal, even when the test run was started
    # in the background (nohup, `&`): such a shell hands SIGINT down ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import numpy as np, pijit
    from pijit.backends.cfused import build
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    logging.getLogger("pijit.kernels").setLevel(logging.DEBUG)
    RECORDS = []
    _h = logging.Handler()
    _h.emit = lambda r: RECORDS.append(r.getMessage())
    logging.getLogger("pijit.kernels").addHandler(_h)

    def fused():
        '''Since the last call of fused(): a graph was fused and its module built or loaded,
        and nothing fell back to NumPy.'''
        msgs = RECORDS[:]
        RECORDS.clear()
        return (any("fused group" in m for m in msgs)
                and not any("NumPy backend" in m for m in msgs))
""")


def run_script(body: str, cache, timeout=120, env=None, **kw):
    full = dict(os.environ, PIJIT_CACHE_DIR=str(cache), **(env or {}))
    return subprocess.run([sys.executable, "-c", SCRIPT_HEAD + textwrap.dedent(body)],
                          env=full, capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, **kw)


def start_script(body: str, cache, env=None):
    full = dict(os.environ, PIJIT_CACHE_DIR=str(cache), **(env or {}))
    return subprocess.Popen([sys.executable, "-c", SCRIPT_HEAD + textwrap.dedent(body)],
                            env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)


def alive(pid: int) -> bool:
    """Whether process pid runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] not in "ZX"
    except OSError:
        return False


def wait_for(predicate, timeout=30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def slow_compiler(tmp_path):
    """(CC, pid file, switch) of a compiler that answers --version at once and, while the
    switch file exists, never finishes: it records its pid and that of a child it starts (as
    gcc starts cc1), then waits for the child. Without the switch it is gcc."""
    pids, switch = tmp_path / "cc.pids", tmp_path / "cc.slow"
    switch.write_text("")
    cc = tmp_path / "slowcc"
    cc.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        case "$1" in --version) echo "slowcc 1.0"; exit 0;; esac
        [ -e {switch} ] || exec gcc "$@"
        echo $$ >> {pids}
        echo "$TMPDIR" > {pids}.tmpdir
        sleep 300 &
        echo $! >> {pids}
        wait
    """))
    cc.chmod(0o755)
    return str(cc), pids, switch


def recorded_pids(pids) -> list:
    return [int(p) for p in pids.read_text().split()] if pids.exists() else []


# one kernel built or loaded, its result checked; K (environment) makes it another module
_CACHE_SCRIPT = """
    K = float(os.environ.get("K", "0.25"))
    f = pijit.jit(lambda a, b: np.exp(a * b) + K * a - b)
    a = np.linspace(0, 1, 50); b = a[::-1].copy()
    assert np.array_equal(f(a, b), np.exp(a * b) + K * a - b)
    assert fused(), RECORDS
    print("ok")
"""


# -- 1. no process-global state changed by a build (issue 14.1) -----------------------------

def test_concurrent_first_calls_leave_stdout_alone(tmp_path):
    """8 threads each make the first call of a different jitted function (8 builds at once).
    Nothing is printed by a build, and sys.stdout is never replaced: the build once wrapped
    cffi's code emission in contextlib.redirect_stdout (process-global, not thread-safe),
    which could leave a StringIO in place for good and lose every later print."""
    res = run_script("""
        import threading
        stdout = sys.stdout
        fns = [pijit.jit(eval(f"lambda x: np.tanh(x * {k}.5) + x * x - {k}")) for k in range(8)]
        x = np.linspace(-1, 1, 33)
        results = [None] * 8
        barrier = threading.Barrier(8)
        def first_call(k):
            barrier.wait()
            results[k] = fns[k](x)
        threads = [threading.Thread(target=first_call, args=(k,)) for k in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        assert sys.stdout is stdout, sys.stdout
        for k in range(8):
            assert np.array_equal(results[k], np.tanh(x * (k + 0.5)) + x * x - k)
        assert sum("compiling" in m for m in RECORDS) == 8, RECORDS
        print("printed after the builds")
    """, tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "printed after the builds\n"


# -- 1b. the module name (cache key) changes with whatever the built module depends on ----------
@pytest.fixture
def fresh_toolchain_id():
    build._toolchain_id.cache_clear()
    yield
    build._toolchain_id.cache_clear()


def _another_python(mp, tmp_path):
    mp.setattr(sys, "version", sys.version + " (another build)")


def _another_numpy_release(mp, tmp_path):
    major, minor = np.__version__.split(".")[:2]
    mp.setattr(np, "__version__", f"{major}.{int(minor) + 1}.0")


def _another_numpy(mp, tmp_path):
    mp.setattr(np, "__version__", f"{int(np.__version__.split('.')[0]) + 1}.0.0")


def _another_support_table(mp, tmp_path):
    from pijit.backends.cfused import toolchain
    header = tmp_path / "kernel_support.h"
    header.write_text(open(toolchain.SUPPORT_HEADER).read() + "\n/* one more routine */\n")
    mp.setattr(toolchain, "SUPPORT_HEADER", str(header))


def _other_flags(mp, tmp_path):
    from pijit.backends.cfused import toolchain
    mp.setattr(toolchain, "CFLAGS", (*toolchain.CFLAGS, "-fno-tree-vectorize"))


def _another_cpu(mp, tmp_path):
    real = open

    def fake(path, *args, **kwargs):
        if path == "/proc/cpuinfo":
            return io.StringIO("processor\t: 0\nflags\t\t: fpu sse2\n")
        return real(path, *args, **kwargs)
    mp.setattr(build, "open", fake, raising=False)


def _another_compiler_version(mp, tmp_path):
    (tmp_path / "version").write_text("mycc 2.0\n")


@pytest.mark.parametrize("change", [_another_numpy, _another_support_table,
                                    _other_flags, _another_cpu, _another_compiler_version])
def test_the_cache_key_changes_with_what_the_module_was_built_for(
        tmp_path, monkeypatch, fresh_toolchain_id, change):
    """A kernel module is found by the key of its source, flags and toolchain: a module
    built by another major version of NumPy, support table, flag set, CPU or compiler
    version (one cache dir, <tmp>/pijit-<uid>, serves them all) must never be the one
    loaded."""
    (tmp_path / "version").write_text("mycc 1.0\n")
    cc = tmp_path / "mycc"
    cc.write_text(f'#!/bin/sh\ncat {tmp_path / "version"}\n')
    cc.chmod(0o755)
    source = "/* a kernel */\n"
    before = build.cache_key(source, [str(cc)])
    assert build.cache_key(source, [str(cc)]) == before          # the same one: a cache hit
    assert build.cache_key(source + " ", [str(cc)]) != before
    build._toolchain_id.cache_clear()
    change(monkeypatch, tmp_path)
    assert build.cache_key(source, [str(cc)]) != before


@pytest.mark.parametrize("change", [_another_python, _another_numpy_release])
def test_every_python_and_numpy_release_of_one_major_version_share_a_module(
        tmp_path, monkeypatch, fresh_toolchain_id, change):
    """Kernels use only CPython's stable ABI and NumPy's headers at their default target
    (the next test checks the first), so a module built under 3.11 is the one 3.12 and 3.13
    load, and one built with NumPy 2.4 the one 2.5 loads: .ci/run's three suites share one
    cache, as a user's Pythons share ~/.cache/pijit."""
    cc = tmp_path / "mycc"
    cc.write_text("#!/bin/sh\necho mycc 1.0\n")
    cc.chmod(0o755)
    before = build.cache_key("/* a kernel */\n", [str(cc)])
    build._toolchain_id.cache_clear()
    change(monkeypatch, tmp_path)
    assert build.cache_key("/* a kernel */\n", [str(cc)]) == before


def test_kernel_modules_use_only_the_stable_abi(tmp_path, monkeypatch):
    """What a module needs from the interpreter: every CPython symbol it leaves undefined
    must be declared by Python.h under Py_LIMITED_API=3.11, else the module loads in the
    Python that built it but not in another one sharing the cache (an implicit declaration,
    hidden by -w, compiles a macro's name or a newer function into a symbol: a
    PyObject_Vectorcall exported by 3.12 is not by 3.11). The kernels built here take the
    paths whose API the limited one lacks in its fast form: a tuple of outputs, a fallback
    call, NumPy scalars boxed for a list and unboxed from an argument, a float argument."""
    from pijit.backends.cfused import toolchain
    # macros and inline functions leave no symbol: only the flag keeps them the stable ABI's
    assert f"-DPy_LIMITED_API={toolchain.LIMITED_API}" in toolchain.CFLAGS
    monkeypatch.setenv("PIJIT_CACHE_DIR", str(tmp_path / "cache"))
    build.forget_loaded()

    @pijit.jit(jit_config={"jit_level": "O1"})
    def fused(x, y):
        return np.sum(x * y), x + y

    @pijit.jit(jit_config={"jit_level": "O1"})
    def nest(a, t, s):
        out = []
        for i in range(a.shape[0]):
            if a[i] > t:
                out.append(a[i] * np.float32(2))
            s += float(a[i])
        return out, s

    x = np.arange(6.0)
    fused(x, x)
    nest(x.astype(np.float32), np.float32(1.5), 0.25)
    symbols = set()
    for so in glob.glob(str(tmp_path / "cache" / "*.so")):
        nm = subprocess.run(["nm", "-D", "--undefined-only", so], capture_output=True,
                            text=True, check=True).stdout
        symbols |= {line.split()[-1] for line in nm.splitlines()
                    if line.split()[-1].startswith(("Py", "_Py"))}
    assert {"PyTuple_SetItem", "PyObject_Call", "PyList_Append",
            "PyFloat_AsDouble"} <= symbols, symbols
    check = tmp_path / "limited.c"
    check.write_text(f"#define Py_LIMITED_API {toolchain.LIMITED_API}\n#include <Python.h>\n"
                     "void *refs[] = {" + ", ".join(f"(void *)&{s}" for s in sorted(symbols))
                     + "};\n")
    res = subprocess.run(["gcc", "-fsyntax-only", *toolchain.include_dirs(np.get_include()),
                          str(check)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


# -- 2. a damaged cached module is rebuilt, never loaded (issue 14.3) --------------------------

def _damage(so, how: str):
    data = so.read_bytes()
    if how == "truncated":          # SIGBUS in every process that loaded it
        so.write_bytes(data[:len(data) // 2])
    elif how == "flipped":          # 16 bytes of its code flipped: SIGSEGV
        mid = len(data) // 2
        so.write_bytes(data[:mid] + bytes(b ^ 0xFF for b in data[mid:mid + 16])
                       + data[mid + 16:])
    else:                           # its checksum lost
        os.unlink(str(so) + ".sha256")


@pytest.mark.parametrize("how", ["truncated", "flipped", "no checksum"])
def test_damaged_cached_module_is_rebuilt(tmp_path, how):
    first = run_script(_CACHE_SCRIPT, tmp_path)
    assert first.returncode == 0 and first.stdout == "ok\n", first.stderr
    (so,) = tmp_path.glob("_pijit_k_*.so")
    good = so.read_bytes()
    assert (tmp_path / (so.name + ".sha256")).read_text().strip() == hashlib.sha256(
        good).hexdigest()
    _damage(so, how)
    again = run_script(_CACHE_SCRIPT, tmp_path, timeout=60)
    assert again.returncode == 0 and again.stdout == "ok\n", (again.returncode, again.stderr)
    problem = ("has no checksum file" if how == "no checksum"
               else "does not match its checksum (damaged or replaced)")
    assert f"kernel cache file {so} {problem}; rebuilding" in again.stderr
    assert "compiling" in again.stderr
    assert so.read_bytes()[:4] == b"\x7fELF" and diskcache.problem(str(so)) is None
    third = run_script(_CACHE_SCRIPT, tmp_path)        # and the rebuilt one is reused
    assert third.returncode == 0 and "cache hit" in third.stderr, third.stderr
    assert "compiling" not in third.stderr


# -- 3. no module loaded from a directory another user can write (issue 14.4) ------------------

def test_new_cache_dir_is_private(tmp_path):
    cache = tmp_path / "a" / "cache"
    res = run_script(_CACHE_SCRIPT, cache)
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700


def _foreign_module(tmp_path):
    """(path, name, marker) of code another user could place in a cache dir: a shared object
    whose constructor (run by dlopen, before Python looks for the module's init function)
    creates `marker`, to go under `name`, the name of the kernel module _CACHE_SCRIPT needs."""
    want = tmp_path / "want"
    assert run_script(_CACHE_SCRIPT, want).returncode == 0
    (name,) = [p.name for p in want.glob("_pijit_k_*.so")]
    marker = tmp_path / "foreign code ran"
    src, foreign = tmp_path / "foreign.c", tmp_path / "foreign.so"
    src.write_text('#include <stdio.h>\n__attribute__((constructor)) static void ran(void)\n'
                   f'{{ FILE *f = fopen("{marker}", "w"); if (f) fclose(f); }}\n')
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(foreign), str(src)], check=True)
    return foreign, name, marker


def _plant(directory, foreign, name):
    """Puts `foreign` into directory as module `name`, with the checksum of its bytes."""
    directory.mkdir(exist_ok=True)
    data = foreign.read_bytes()
    (directory / name).write_bytes(data)
    (directory / (name + ".sha256")).write_text(hashlib.sha256(data).hexdigest() + "\n")


@pytest.mark.parametrize("who", ["mode 777", "another owner"])
def test_cache_dir_writable_by_others_is_not_trusted(tmp_path, who):
    foreign, name, marker = _foreign_module(tmp_path)
    shared = tmp_path / "shared"
    _plant(shared, foreign, name)
    if who == "mode 777":
        shared.chmod(0o777)
        expect = "is writable by group or others (mode 777)"
    else:
        if os.geteuid() != 0:
            pytest.skip("chown to another user needs root")
        import pwd
        os.chown(shared, pwd.getpwnam("nobody").pw_uid, -1)
        shared.chmod(0o755)
        expect = "is owned by another user"
    before = sorted(os.listdir(shared))
    tmpdir = tmp_path / "tmp"           # where the fallback dir goes
    tmpdir.mkdir()
    res = run_script(_CACHE_SCRIPT, shared, env={"TMPDIR": str(tmpdir)})
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr
    assert not marker.exists()
    assert f"kernel cache dir {shared} {expect}" in res.stderr
    assert "cache hit" not in res.stderr and "compiling" in res.stderr
    assert sorted(os.listdir(shared)) == before
    assert len(list((tmpdir / f"pijit-{os.geteuid()}").glob("_pijit_k_*.so"))) == 1


def test_foreign_fallback_dir_is_not_trusted(tmp_path):
    """The cache dir is not usable and <tmpdir>/pijit-<uid> (a predictable name) was made by
    someone else: kernels go to a fresh private dir of the process, removed at exit."""
    foreign, name, marker = _foreign_module(tmp_path)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    fallback = tmpdir / f"pijit-{os.geteuid()}"
    _plant(fallback, foreign, name)
    fallback.chmod(0o777)
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache dir should be")
    res = run_script(_CACHE_SCRIPT + """
    tmp = os.environ["TMPDIR"]
    (private,) = [d for d in os.listdir(tmp) if d.startswith("pijit-kernels-")]
    print(oct(os.stat(os.path.join(tmp, private)).st_mode & 0o777))
    """, blocker / "cache", env={"TMPDIR": str(tmpdir)})
    assert res.returncode == 0 and res.stdout == "ok\n0o700\n", res.stderr
    assert not marker.exists()
    assert f"{fallback} is writable by group or others (mode 777)" in res.stderr
    assert "cache hit" not in res.stderr
    assert sorted(os.listdir(tmpdir)) == [fallback.name]       # the private dir went at exit


# -- 4. the compiler: a timeout, CC, interrupts, leftovers (issue 14.7) -------------------------

def test_build_timeout_kills_the_compiler_and_runs_numpy(tmp_path):
    cc, pids, _ = slow_compiler(tmp_path)
    start = time.monotonic()
    res = run_script("""
        f = pijit.jit(lambda a: np.sqrt(a) * 2.0 + 1.0)
        a = np.linspace(0, 1, 40)
        assert np.array_equal(f(a), np.sqrt(a) * 2.0 + 1.0)
        assert not fused()
        print("ok")
    """, tmp_path / "cache", env={"CC": cc, "PIJIT_BUILD_TIMEOUT": "1.5"}, timeout=100)
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr
    assert time.monotonic() - start < 60        # not the compiler's 300 s
    assert "did not finish within PIJIT_BUILD_TIMEOUT=1.5 s" in res.stderr
    assert "using the NumPy backend" in res.stderr
    recorded = recorded_pids(pids)
    assert len(recorded) == 2 and not any(alive(p) for p in recorded)
    # its temporary files went to the build folder, which is gone
    assert (tmp_path / "cc.pids.tmpdir").read_text().startswith(str(tmp_path / "cache" / ".build-"))
    assert not glob.glob(str(tmp_path / "cache" / ".build-*"))


def test_cc_is_used_and_is_part_of_the_cache_key(tmp_path):
    log = tmp_path / "cc.log"
    cc = tmp_path / "mycc"
    cc.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec gcc "$@"\n')
    cc.chmod(0o755)
    cache = tmp_path / "cache"
    assert run_script(_CACHE_SCRIPT, cache).returncode == 0
    before = set(cache.glob("_pijit_k_*.so"))
    res = run_script(_CACHE_SCRIPT, cache, env={"CC": f"{cc} -DPIJIT_TEST_CC=1"})
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr
    assert "compiling" in res.stderr                   # not gcc's module from the cache
    assert len(set(cache.glob("_pijit_k_*.so")) - before) == 1
    calls = log.read_text().splitlines()
    assert calls[0] == "-DPIJIT_TEST_CC=1 --version"
    assert any(c.startswith("-DPIJIT_TEST_CC=1 ") and " -o " in c for c in calls[1:])


def test_build_settings_are_checked(monkeypatch, caplog):
    monkeypatch.delenv("PIJIT_BUILD_TIMEOUT", raising=False)
    assert config.env_build_timeout() == 300.0
    monkeypatch.setenv("PIJIT_BUILD_TIMEOUT", "2.5")
    assert config.env_build_timeout() == 2.5
    for bad in ("0", "-1", "soon", "inf", "nan"):
        monkeypatch.setenv("PIJIT_BUILD_TIMEOUT", bad)
        with pytest.raises(ValueError, match=f"PIJIT_BUILD_TIMEOUT must be a number of "
                                             f"seconds > 0, got '{bad}'"):
            config.env_build_timeout()
    monkeypatch.delenv("PIJIT_BUILD_TIMEOUT")
    monkeypatch.delenv("CC", raising=False)
    assert config.env_cc() == ["gcc"]
    monkeypatch.setenv("CC", "ccache gcc -m64")
    assert config.env_cc() == ["ccache", "gcc", "-m64"]
    monkeypatch.setenv("CC", "'gcc")
    with pytest.raises(ValueError, match="CC must be a command"):
        config.env_cc()
    # in a call: the graph runs on NumPy, and the warning names the setting
    monkeypatch.setattr(build, "_loaded", {})
    f = lambda a: a * 5.5 - 0.75          # noqa: E731
    a = np.linspace(0, 1, 9)
    with caplog.at_level(logging.WARNING, logger="pijit.kernels"):
        assert np.array_equal(pijit.jit(f)(a), f(a))
    assert any("CC must be a command" in r.getMessage() for r in caplog.records)


def test_interrupted_build_kills_the_compiler_then_builds_again(tmp_path):
    """SIGINT while the compiler runs: KeyboardInterrupt in the caller, the compiler and its
    child killed, the build folder removed; the same function then compiles and runs fused."""
    cc, pids, switch = slow_compiler(tmp_path)
    cache = tmp_path / "cache"
    proc = start_script("""
        f = pijit.jit(lambda a: np.sqrt(a) * 3.0 - 1.0)
        a = np.linspace(0, 1, 40)
        try:
            f(a)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        os.unlink(os.environ["SWITCH"])     # the compiler is gcc again
        RECORDS.clear()
        assert np.array_equal(f(a), np.sqrt(a) * 3.0 - 1.0)
        assert fused(), RECORDS
        print("ok")
    """, cache, env={"CC": cc, "SWITCH": str(switch)})
    try:
        assert wait_for(lambda: len(recorded_pids(pids)) == 2), proc.communicate(timeout=5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0 and out == "interrupted\nok\n", err
    assert not any(alive(p) for p in recorded_pids(pids))
    assert not glob.glob(str(cache / ".build-*"))


def test_killed_builder_leaves_no_lock_and_its_folder_is_removed(tmp_path):
    """SIGKILL during a build leaves its .build-* folder (and the module's lock file); the
    next process building the same module neither waits for the dead builder's lock nor keeps
    its folder."""
    cc, pids, switch = slow_compiler(tmp_path)
    cache = tmp_path / "cache"
    proc = start_script(_CACHE_SCRIPT, cache, env={"CC": cc})
    try:
        assert wait_for(lambda: len(recorded_pids(pids)) == 2), proc.communicate(timeout=5)
        proc.kill()
        proc.communicate(timeout=30)
    finally:
        for pid in recorded_pids(pids):     # the dead builder's compiler, orphaned
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    (left,) = glob.glob(str(cache / ".build-*"))
    assert glob.glob(str(cache / "_pijit_k_*.so.lock"))
    switch.unlink()                             # the same CC (the same module), now fast
    start = time.monotonic()
    res = run_script(_CACHE_SCRIPT, cache, env={"CC": cc}, timeout=100)
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr
    assert time.monotonic() - start < 60        # not the lock's wait of 330 s
    assert not os.path.exists(left)
    assert f"removed the stale build folder {left}" in res.stderr


def test_eviction_counts_live_build_folders_and_removes_stale_ones(tmp_path):
    def module(name, size, age):
        path = tmp_path / f"_pijit_k_{name}.so"
        path.write_bytes(b"x" * size)
        (tmp_path / f"_pijit_k_{name}.so.sha256").write_text("0\n")
        (tmp_path / f"_pijit_k_{name}.so.lock").write_text("")
        t = time.time() - age
        os.utime(path, (t, t))
        return path

    def folder(prefix, size, age=0.0):
        path = tmp_path / (prefix + "abcd1234")
        path.mkdir()
        (path / "part0.o").write_bytes(b"y" * size)
        t = time.time() - age
        os.utime(path, (t, t))
        return path

    old, new = module("old", 1000, 20), module("new", 1000, 10)
    live = folder(diskcache.build_prefix(), 1500)                 # this process: building
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = socket.gethostname()
    gone = folder(f".build-{host}-{dead.pid}-", 10_000)            # its process has ended
    remote = folder(".build-elsewhere-1-", 10)                     # another host's: kept...
    ancient = folder(".build-elsewhere-2-", 10, age=diskcache.STALE_AGE + 60)   # ...unless old
    keep = module("keep", 10, 30)
    very_old = time.time() - diskcache.STALE_AGE - 60
    os.utime(tmp_path / "_pijit_k_new.so.lock", (very_old, very_old))   # its module is there
    orphans = [tmp_path / "_pijit_k_gone.so.lock", tmp_path / "_pijit_k_gone.so.sha256"]
    for orphan in orphans:
        orphan.write_text("")
        os.utime(orphan, (very_old, very_old))
    young = tmp_path / "_pijit_k_going.so.sha256"          # being published, perhaps
    young.write_text("")
    diskcache.evict(str(tmp_path), str(keep), 2600, 300.0)
    assert young.exists() and not any(p.exists() for p in orphans)
    assert (tmp_path / "_pijit_k_new.so.lock").exists()
    assert live.exists() and remote.exists()
    assert not gone.exists() and not ancient.exists()
    # 1000 + 1000 + 10 of modules and 1510 of live folders: the oldest module goes, with its
    # checksum and lock files; the one to keep stays although it is older
    assert not old.exists() and new.exists() and keep.exists()
    assert sorted(p.name for p in tmp_path.glob("_pijit_k_old*")) == []
    assert (tmp_path / "_pijit_k_new.so.sha256").exists()


# -- 5. one build per module across processes (issue 14.10, issue 23) ---------------------------

def test_processes_building_the_same_kernels_at_once_build_each_once(tmp_path):
    cache = tmp_path / "cache"
    go = tmp_path / "go"
    # a compiler 0.5 s slower than gcc: without the lock every process would build each module
    cc = tmp_path / "slowgcc"
    cc.write_text('#!/bin/sh\ncase "$1" in --version) ;; *) sleep 0.5;; esac\nexec gcc "$@"\n')
    cc.chmod(0o755)
    body = f"""
        import time
        while not os.path.exists({str(go)!r}):
            time.sleep(0.01)
        f = pijit.jit(lambda a: np.tanh(a) * 2.0 + a)
        g = pijit.jit(lambda a: np.sqrt(a) - a * 0.5)
        a = np.linspace(0, 1, 64)
        compiled = 0
        for fn, want in ((f, np.tanh(a) * 2.0 + a), (g, np.sqrt(a) - a * 0.5)):
            assert np.array_equal(fn(a), want)
            compiled += sum(m.startswith("compiling") for m in RECORDS)
            assert fused(), RECORDS
        print(compiled, "compiled")
    """
    procs = [start_script(body, cache, env={"CC": str(cc)}) for _ in range(4)]
    time.sleep(1.0)             # all four imported pijit and wait
    go.write_text("")
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=180))
    finally:
        for p in procs:
            p.kill()
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    compiled = [int(out.split()[0]) for out, _ in outs]
    assert sum(compiled) == 2, (compiled, [err for _, err in outs])
    assert len(list(cache.glob("_pijit_k_*.so"))) == 2


def test_lock_held_too_long_is_given_up(tmp_path, caplog):
    module = str(tmp_path / "_pijit_k_x.so")
    with diskcache.locked(module, wait=5.0):
        done = []

        def other():
            with diskcache.locked(module, wait=0.3):
                done.append(time.monotonic())
        t = threading.Thread(target=other)
        with caplog.at_level(logging.WARNING, logger="pijit.kernels"):
            start = time.monotonic()
            t.start()
            t.join(30)
        assert done and done[0] - start >= 0.3
    assert any("still held after" in r.getMessage() for r in caplog.records)


# -- 6. interrupted first calls leave nothing half-built (issue 23.3) ---------------------------

@pytest.mark.parametrize("where", [
    "backends.cfused.render:module_source", "backends.cfused.build:_compile",
    "backends.cfused.build:_load", "backends.cfused.diskcache:publish",
    "capture.interpreter:capture_frame",
])
def test_interrupt_during_first_call_then_it_compiles(tmp_path, where):
    """A KeyboardInterrupt raised (as a signal handler would) at the first call into `where`
    during a first call: the next call compiles and runs fused. (When builds went through
    cffi, an interrupted import of pycparser left it half-initialized for good, and every
    later graph ran on NumPy.) The function is replaced wherever pijit's modules bind it: a
    profile hook would do, but a profiled call runs plain on 3.11 (README: debuggers)."""
    res = run_script(f"""
        import importlib
        where_module, where_name = {where!r}.split(":")
        module = importlib.import_module("pijit." + where_module)
        real = getattr(module, where_name)
        fired = []
        def interrupt(*args, **kwargs):
            if not fired:
                fired.append(True)
                raise KeyboardInterrupt
            return real(*args, **kwargs)
        bound = [m for m in list(sys.modules.values())
                 if m is not None and m.__name__.startswith("pijit")
                 and vars(m).get(where_name) is real]
        for m in bound:
            setattr(m, where_name, interrupt)
        f = pijit.jit(lambda x: np.tanh(x * 2.0) + x)
        x = np.linspace(-1, 1, 10)
        try:
            f(x)
        except KeyboardInterrupt:
            pass
        for m in bound:
            setattr(m, where_name, real)
        RECORDS.clear()
        for _ in range(2):
            assert np.array_equal(f(x), np.tanh(x * 2.0) + x)
        assert fused(), RECORDS
        g = pijit.jit(lambda x: np.sqrt(x * x + 1.0))           # and a new graph too
        assert np.array_equal(g(x), np.sqrt(x * x + 1.0))
        assert fused(), RECORDS
        print("fired" if fired else "not reached")
    """, tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "fired\n"


# -- 7. out of memory in a kernel: MemoryError, no double free (issue 16.7) ----------------------

def test_kernel_out_of_memory_raises_memory_error(tmp_path):
    """A row too long for the kernel's row scratch (an address-space limit makes the
    allocation fail, the input is a broadcast view of one value): MemoryError, as NumPy
    raises, where the kernel used to free its buffers twice and crash."""
    res = run_script("""
        import resource
        def softmax_sum(x):
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            return e.sum(axis=-1)
        def two(x):             # one kernel, a tuple of its two outputs
            e = np.exp(x)
            return e.sum(axis=-1), (e * x).sum(axis=-1)
        cases = []
        for fn in (softmax_sum, two):
            j = pijit.jit(fn)
            for n in (8, 9):            # the second size makes the last dim dynamic
                x = np.broadcast_to(np.float64(0.5), (1, n))
                got, want = j(x), fn(x)
                assert all(map(np.array_equal, got if isinstance(got, tuple) else (got,),
                               want if isinstance(want, tuple) else (want,)))
            assert fused(), RECORDS
            cases.append((fn, j))
        huge = np.broadcast_to(np.float64(0.5), (1, 1 << 28))     # 2 GiB a row
        with open("/proc/self/status") as fh:
            vm = [int(l.split()[1]) for l in fh if l.startswith("VmSize")][0] << 10
        resource.setrlimit(resource.RLIMIT_AS, (vm + (256 << 20), resource.RLIM_INFINITY))
        for fn, j in cases:
            count = pijit.code_info(j)["compile_count"]
            try:
                j(huge)
            except MemoryError as e:
                print(f"jitted: MemoryError{e.args}")     # the kernel's: no message
            try:
                fn(huge)
            except MemoryError:
                print("plain: MemoryError")
            assert pijit.code_info(j)["compile_count"] == count    # the kernel ran
    """, tmp_path, timeout=120)
    assert res.returncode == 0, (res.returncode, res.stderr)
    assert res.stdout == "jitted: MemoryError()\nplain: MemoryError\n" * 2


# -- 8. a forked child runs kernels on one thread, no hang (issue 16.8) --------------------------

def test_fork_pool_with_threads_does_not_hang(tmp_path):
    res = run_script("""
        import multiprocessing as mp
        f = pijit.jit(lambda x: np.sqrt(x * 2.0 + 1.0))
        x = np.linspace(0, 1, 1 << 18)      # big enough for two threads
        assert np.array_equal(f(x), np.sqrt(x * 2.0 + 1.0))
        assert fused(), RECORDS
        def work(k):
            got = f(x + k)
            return bool(np.array_equal(got, np.sqrt((x + k) * 2.0 + 1.0)))
        with mp.get_context("fork").Pool(2) as pool:
            print(pool.map(work, range(4)))
        assert np.array_equal(f(x), np.sqrt(x * 2.0 + 1.0))    # the parent keeps its threads
        print("ok")
    """, tmp_path, env={"PIJIT_NUM_THREADS": "2"}, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "[True, True, True, True]\nok\n"


@pytest.mark.internal_errors
def test_generated_c_that_does_not_compile_is_an_internal_error(monkeypatch, caplog):
    """A compiler diagnostic at a line of the generated source is a bug of the renderer: it is
    logged as an error with its traceback (so the suite's no_internal_errors check fails every
    test that meets one), and the graph runs on NumPy; a compiler the machine lacks is not."""
    from pijit.backends.cfused import render
    source = render.module_source
    monkeypatch.setattr(render, "module_source",
                        lambda *a, **k: (lambda s, own: (s + "\nint pj_broken = ;\n", own))(
                            *source(*a, **k)))
    monkeypatch.setattr(build, "_loaded", {})
    f = lambda a: a * 6.5 - 0.25          # noqa: E731
    a = np.linspace(0, 1, 11)
    with caplog.at_level(logging.WARNING, logger="pijit.kernels"):
        jitted = pijit.jit(f)
        pijit.reset(jitted)
        assert np.array_equal(jitted(a), f(a))
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is not None, caplog.records
    assert isinstance(errors[0].exc_info[1], build.SourceError)
    assert "does not compile" in errors[0].getMessage()
    # a compiler that is not there: a warning, no traceback
    caplog.clear()
    monkeypatch.setattr(render, "module_source", source)
    monkeypatch.setenv("CC", "/nonexistent/pijit-cc")
    monkeypatch.setattr(build, "_loaded", {})
    g = lambda a: a * 7.5 - 0.125         # noqa: E731
    with caplog.at_level(logging.WARNING, logger="pijit.kernels"):
        jitted = pijit.jit(g)
        pijit.reset(jitted)
        assert np.array_equal(jitted(a), g(a))
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.records
    assert any("kernel build failed" in r.getMessage() for r in caplog.records)


def test_starting_a_compiler_leaves_the_warnings_shown_once_alone(monkeypatch, tmp_path):
    """Popen's search of PATH enters warnings.catch_warnings, which makes every module
    forget the warnings the "default" action showed once, so a user's warning would show
    again after each kernel build: the build starts the compiler by its full path."""
    from pijit.backends.cfused import build
    mutated = []
    original = warnings._filters_mutated
    monkeypatch.setattr(warnings, "_filters_mutated", lambda: (mutated.append(1), original()))
    build._toolchain_id.__wrapped__(("gcc",))
    assert build._run([["true"]], time.monotonic() + 60, str(tmp_path)) is None
    assert mutated == []
