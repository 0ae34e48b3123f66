"""C source -> loaded kernel module, through a disk cache of compiled shared objects.

The source, with the module's entry point PyInit_<name> written after it, is compiled by the
C compiler (CC, default gcc; a module in parts, see render.split_parts, by one compiler process
per part side by side, then linked) and cached by a hash of source (and kernel_support.h,
which it includes), flags, compiler identity, CPU flags and NumPy's major version: not the
Python version, since kernels use only the stable ABI (one cache for 3.11-3.13). The disk
cache's rules (a private directory, a checksum beside each module, one build per module
across processes, its size) are in diskcache.py. The .so is loaded with importlib as an extension module (multi-phase
init) of METH_FASTCALL kernel functions. (cffi wrapped it once: its wrapper, type tables and
module init cost gcc about a sixth of a small module's time, and its parser ~40 ms a process.)

A build never leaves a compiler running: each runs in a process group of its own, killed at
PIJIT_BUILD_TIMEOUT or when the call is interrupted (KeyboardInterrupt or any other
BaseException).

Background builds (`background()`, what an adaptive promotion uses): a module that is
neither loaded nor in the disk cache is built by a thread of its own (the compiler is a
subprocess: the thread only waits for it), and load_kernels raises KernelPending at once;
the caller tries again once `finished(key)`, and then gets the module from this process (or
KernelBuildFailed). At exit the compilers of builds still running are killed and their
threads joined (the build folder goes with them; the cache only ever receives a complete
module, renamed into place); a forked child forgets its parent's builds.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import numpy

from pijit import config
from pijit.backends.cfused import diskcache, toolchain

log = logging.getLogger("pijit.kernels")

LOCK_MARGIN = 30.0          # seconds a process waits for another's build beyond its timeout

_loaded: dict = {}          # key -> kernel module (one load per process)
_forked = False             # this process was made by fork (see _in_forked_child)


class BuildError(Exception):
    pass


class SourceError(BuildError):
    """The compiler rejected the generated source itself (a diagnostic at a line of it): a
    bug of the renderer, not of the machine."""


class KernelPending(BaseException):
    """Under background(): the kernel module `key` is being built by a thread. A
    BaseException, so that no fallback on the way (a backend's "build failed: use NumPy")
    takes it for a failure: the caller keeps what it runs and tries again later."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


class KernelBuildFailed(BaseException):
    """Under background(): the background build of a module this process needs failed (the
    caller keeps what it runs; a build outside background() would try again)."""


class _Background:
    """A background build: its thread, and the exception that ended it (None: built)."""

    def __init__(self, thread):
        self.thread, self.error = thread, None


_mode = threading.local()           # .background: this thread's load_kernels may not wait
_builds: dict = {}                  # key -> _Background
_running: set = set()               # compiler processes running (for _stop_builds)
_stopping = False                   # the interpreter is exiting: start no compiler


@contextlib.contextmanager
def background(on: bool = True):
    """Within it (when `on`), load_kernels builds a module it does not have in a thread and
    raises KernelPending (see the module's docstring)."""
    was = getattr(_mode, "background", False)
    _mode.background = on
    try:
        yield
    finally:
        _mode.background = was


def finished(key: str) -> bool:
    """Is no background build of module `key` running (done, failed, or never started)?"""
    build = _builds.get(key)
    return build is None or not build.thread.is_alive()


def pending_builds() -> int:
    """Background builds still running."""
    return sum(1 for b in list(_builds.values()) if b.thread.is_alive())


def _in_background(key: str, source: str, cache_dir, openmp: bool):
    """load_kernels under background(): KernelPending while the thread builds `key`,
    KernelBuildFailed once it failed; a thread started for it when none ran."""
    build = _builds.get(key)
    if build is not None and build.thread.is_alive():
        raise KernelPending(key)
    if build is not None and build.error is not None:
        raise KernelBuildFailed(f"{type(build.error).__name__}: {build.error}")
    # (a build that ended well whose module is not loaded: forget_loaded; build it again)
    build = _Background(None)

    def run():
        try:
            load_kernels(source, cache_dir, openmp)
        except BaseException as e:      # noqa: BLE001 - reported to the caller's next try
            build.error = e
    build.thread = threading.Thread(target=run, name=f"pijit-build-{key}", daemon=True)
    _builds[key] = build
    build.thread.start()
    raise KernelPending(key)


@atexit.register
def _stop_builds():
    """At exit: kill the compilers of background builds (their threads then remove their
    build folders) and wait for those threads, so that no compiler outlives the process."""
    global _stopping
    _stopping = True
    for p in list(_running):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)
    for build in list(_builds.values()):
        build.thread.join(timeout=LOCK_MARGIN)


def _executable(name: str, env) -> str | None:
    """The path of the program `name` on env's PATH (None: Popen's own search fails). Popen
    searches PATH through os.get_exec_path, which enters warnings.catch_warnings: that resets
    every module's record of the warnings shown once (pijit/quiet.py), so a user's warning
    shown before a compile would be shown again after it."""
    return shutil.which(name, path=env.get("PATH", os.defpath))


@functools.lru_cache(maxsize=None)
def _toolchain_id(cc: tuple) -> str:
    """What the cache key knows of the compiler and the machine: the command, where it
    resolves to and what it says its version is, the CPU flags (-march=native), NumPy's
    major version and the support table's header. Not the Python version: kernels are
    compiled for the stable ABI (toolchain.LIMITED_API), so 3.11, 3.12 and 3.13 share them;
    nor NumPy's minor version, since NumPy keeps a module built against its headers loadable
    by every later release of that major version and by earlier ones down to the headers'
    default target (1.25)."""
    version = "unknown"
    try:
        p = subprocess.Popen([*cc, "--version"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, process_group=0,
                             executable=_executable(cc[0], os.environ))
    except OSError:
        pass
    else:
        try:
            version = (p.communicate(timeout=30)[0].splitlines() or [version])[0]
        except subprocess.TimeoutExpired:
            pass
        finally:
            if p.returncode is None:
                _kill(p)
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line
                    break
    except OSError:
        pass
    with open(toolchain.SUPPORT_HEADER) as f:     # kernels include it: part of their source
        support = f.read()
    return "\n".join((" ".join(cc), str(shutil.which(cc[0])), version, flags,
                      f"NumPy {numpy.__version__.split('.')[0]}", support))


def cache_key(source: str, cc: list) -> str:
    h = hashlib.sha256()
    flags = " ".join(toolchain.CFLAGS + toolchain.LDFLAGS)
    for part in (source, flags, _toolchain_id(tuple(cc))):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def load_kernels(source: str, cache_dir: str | None = None, openmp: bool = False):
    """The kernel module of `source`: from this process, the disk cache, or a new build.

    openmp: link OpenMP (the source uses threads); its threads sleep when idle
    (OMP_WAIT_POLICY=PASSIVE unless set: spinning threads collapse on a shared machine).
    """
    # bad settings say so before any build
    limit, timeout, cc = config.env_cache_bytes(), config.env_build_timeout(), config.env_cc()
    key = cache_key(source + ("\n/* -fopenmp */" if openmp else ""), cc)
    if openmp:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    mod = _loaded.get(key)
    if mod is not None:
        return mod
    name = f"_pijit_k_{key}"
    cache = diskcache.directory(cache_dir or config.cache_dir())
    path = os.path.join(cache, name + ".so")
    mod = _from_disk(path, name, warn=True)
    if mod is None and getattr(_mode, "background", False):
        _in_background(key, source, cache_dir, openmp)
    if mod is None:
        with diskcache.locked(path, timeout + LOCK_MARGIN):
            mod = _loaded.get(key) or _from_disk(path, name, warn=False)   # built meanwhile?
            if mod is None:
                mod = _build(source, name, cache, openmp, cc, time.monotonic() + timeout)
            _loaded[key] = mod
        diskcache.evict(cache, path, limit, timeout)
    _loaded[key] = mod
    return mod


def _from_disk(path: str, name: str, warn: bool):
    """The cached module at path when its bytes are the ones built (else None: rebuild it,
    saying why when warn)."""
    problem = diskcache.problem(path)
    if problem is None:
        try:
            mod = _load(path, name)
        except Exception as e:      # noqa: BLE001 - intact but unloadable: rebuild it
            problem = f"cannot be loaded ({e})"
        else:
            log.debug("kernel cache hit %s", path)
            diskcache.touch(path)
            return mod
    if problem == "is missing":
        log.debug("kernel cache: no %s; building it", path)
    elif warn:
        log.warning("kernel cache file %s %s; rebuilding", path, problem)
    return None


def forget_loaded():
    """Forget the kernel modules loaded in this process, so the next load reads the disk
    cache (the benchmark runner measures a warm-disk-cache first call with it)."""
    _loaded.clear()


def _in_forked_child():
    """GNU OpenMP is not fork-safe: a child forked after its parent ran a parallel region
    waits forever on the parent's thread pool, which the child does not have. Kernels of a
    forked child (multiprocessing's default start method on Linux) run on one thread. The
    parent's background builds are not the child's."""
    global _forked
    _forked = True
    for mod in _loaded.values():
        mod.single_thread()
    _builds.clear()         # their threads are the parent's: a later promotion builds anew
    _running.clear()


os.register_at_fork(after_in_child=_in_forked_child)


def _build(source: str, name: str, target: str, openmp: bool, cc: list, deadline: float):
    """Builds module `name` in a build folder of `target`, loads it, and then publishes it
    into the cache (a module that fails to load is never cached)."""
    final = os.path.join(target, name + ".so")
    with tempfile.TemporaryDirectory(dir=target, prefix=diskcache.build_prefix()) as tmp:
        c_path = os.path.join(tmp, name + ".c")
        with open(c_path, "w") as f:
            f.write(source)
            f.write(_init_function(name))
        so_tmp = os.path.join(tmp, name + ".so")
        parts = source_parts(source)
        log.info("compiling %s%s", name, f" in {parts} parts" if parts > 1 else "")
        # the precompiled header is gcc's: another CC reads the headers itself
        pch = toolchain.pch_flags() if cc == [toolchain.CC] else []
        error = _compile(cc, c_path, so_tmp, openmp, pch, parts, deadline)
        if error is not None and pch:
            # gcc ignores a .gch made for other flags, but stops at a damaged one
            log.warning("compiling %s with the precompiled header %s failed; compiling "
                        "without it", name, toolchain.PCH_HEADER + ".gch")
            error = _compile(cc, c_path, so_tmp, openmp, [], parts, deadline)
        if error is not None:
            raise (SourceError if re.search(r"\.c:\d+:\d+: error:", error) else BuildError)(error)
        mod = _load(so_tmp, name)
        diskcache.publish(so_tmp, final)
    return mod


def _init_function(name: str) -> str:
    """The module's PyInit_<name> (CPython's name for an extension module's entry point; in
    part 0 of a module in parts). Written beside the source, not into it: `name` is a hash
    of the source (load_kernels)."""
    return (f"\n#if !defined(PJ_PARTS) || PJ_PART == 0\n"
            f"PyMODINIT_FUNC PyInit_{name}(void)\n{{\n"
            f"    return PyModuleDef_Init(&pj_module_def);\n}}\n#endif\n")


def source_parts(source: str) -> int:
    """How many parts the module's source is compiled in (render.module_source's PJ_PARTS)."""
    m = re.search(r"^#define PJ_PARTS (\d+)$", source, re.MULTILINE)
    return int(m.group(1)) if m else 1


def _compile(cc: list, c_path: str, out: str, openmp: bool, pch: list,
             parts: int, deadline: float) -> str | None:
    """Compiles c_path (the module's source and entry point) into the shared object `out`: in
    one compiler run, or, for a module in parts, each part from c_path with -DPJ_PART=k in a
    process of its own, side by side, then linked. None when done, else what the compiler
    said."""
    omp = ["-fopenmp"] if openmp else []
    compile_cmd = [*cc, *toolchain.CFLAGS, *omp, *pch, *toolchain.include_dirs(numpy.get_include())]
    folder = os.path.dirname(out)
    if parts == 1:
        return _run([[*compile_cmd, c_path, "-o", out, *toolchain.LDFLAGS]], deadline, folder)
    objs = [os.path.join(folder, f"part{k}.o") for k in range(parts)]
    error = _run([[*compile_cmd, f"-DPJ_PART={k}", "-c", c_path, "-o", objs[k]]
                  for k in range(parts)], deadline, folder)
    if error is not None:
        return error
    return _run([[*cc, *omp, *objs, "-o", out, *toolchain.LDFLAGS]], deadline, folder)


def _run(cmds: list, deadline: float, folder: str) -> str | None:
    """Runs the commands side by side: None when all succeeded, else the first failure's exit
    code and stderr. Raises BuildError at the deadline (time.monotonic()); a command that
    cannot start raises OSError. Whatever ends the wait (the deadline, a KeyboardInterrupt),
    the commands still running are killed with their children (cc1, as, ld: each command runs
    in a process group of its own) before this returns. Their temporary files go to the
    build folder (TMPDIR), which is removed with whatever a killed compiler left there."""
    env = dict(os.environ, TMPDIR=folder)
    procs = []
    try:
        for cmd in cmds:
            if _stopping:
                raise BuildError("the interpreter is exiting")
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                          text=True, process_group=0, env=env,
                                          executable=_executable(cmd[0], env)))
            _running.add(procs[-1])
        errors = []
        for p in procs:
            try:
                err = p.communicate(timeout=max(deadline - time.monotonic(), 0.0))[1]
            except subprocess.TimeoutExpired:
                raise BuildError(f"{cmds[0][0]} did not finish within PIJIT_BUILD_TIMEOUT="
                                 f"{config.env_build_timeout():g} s; stopped it") from None
            if p.returncode != 0:
                errors.append(f"{cmds[0][0]} failed ({p.returncode}):\n{err[-4000:]}")
        return errors[0] if errors else None
    finally:
        for p in procs:
            if p.returncode is None:
                _kill(p)
            _running.discard(p)


def _kill(p: subprocess.Popen):
    """Kills p's process group (p and its children) and reaps p."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.communicate()


def _load(path: str, name: str):
    """The kernel module `name` made from the shared object at path (not put in sys.modules:
    nothing imports it by name)."""
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    if spec is None:
        raise BuildError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    if _forked:
        mod.single_thread()
    return mod
