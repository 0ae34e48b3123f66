"""C source -> loaded kernel module, through a disk cache of compiled shared objects.

The source is wrapped by cffi (`emit_c_code`), compiled with gcc (a module in parts, see
render.split_parts, by one gcc process per part side by side, then linked) and cached under
the cache dir by a hash of source (and kernel_support.h, which it includes), flags, compiler
version, CPU flags and Python/NumPy versions; writes are atomic (temp file in the same dir +
os.replace) so processes can share the cache. The .so is loaded with importlib; its cffi
entry point creates the real extension module of METH_FASTCALL kernel functions, so calls
never cross cffi.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import io
import logging
import os
import re
import subprocess
import sys
import tempfile

import numpy

from pijit import config
from pijit.backends.cfused import toolchain

log = logging.getLogger("pijit.kernels")

CC = toolchain.CC
CFLAGS = toolchain.CFLAGS
LDFLAGS = toolchain.LDFLAGS

_loaded: dict = {}          # key -> kernel module (one load per process)
_forked = False             # this process was made by fork (see _in_forked_child)


class BuildError(Exception):
    pass


@functools.lru_cache(maxsize=None)
def _toolchain_id() -> str:
    try:
        cc = subprocess.run([CC, "--version"], capture_output=True, text=True,
                            timeout=30).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        cc = "unknown"
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
    return "\n".join((cc, flags, sys.version, numpy.__version__, support))


def cache_key(source: str) -> str:
    h = hashlib.sha256()
    for part in (source, " ".join(CFLAGS + LDFLAGS), _toolchain_id()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def _writable_dir(path: str) -> str | None:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None
    return path if os.access(path, os.W_OK | os.X_OK) else None


def load_kernels(source: str, cache_dir: str | None = None, openmp: bool = False):
    """The kernel module of `source`: from this process, the disk cache, or a new build.

    openmp: link OpenMP (the source uses threads); its threads sleep when idle
    (OMP_WAIT_POLICY=PASSIVE unless set: spinning threads collapse on a shared machine).
    """
    limit = config.env_cache_bytes()       # a bad PIJIT_CACHE_MB says so before any build
    key = cache_key(source + ("\n/* -fopenmp */" if openmp else ""))
    if openmp:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    mod = _loaded.get(key)
    if mod is not None:
        return mod
    name = f"_pijit_k_{key}"
    cache = cache_dir or config.cache_dir()
    path = os.path.join(cache, name + ".so")
    if os.path.exists(path):
        try:
            mod = _load(path, name)
            log.debug("kernel cache hit %s", path)
            _touch(path)
        except Exception as e:      # corrupt or foreign file: rebuild it
            if os.path.exists(path):
                log.warning("kernel cache file %s is unusable (%s); rebuilding", path, e)
            else:                   # evicted by another process meanwhile
                log.debug("kernel cache file %s went away; rebuilding", path)
            mod = None
    if mod is None:
        target = _writable_dir(cache)
        if target is None:
            target = _writable_dir(os.path.join(tempfile.gettempdir(), f"pijit-{os.getuid()}"))
            log.warning("kernel cache dir %s is not writable; using %s", cache, target)
        if target is None:
            raise BuildError("no writable directory for compiled kernels")
        path = _build(source, name, target, openmp)
        mod = _load(path, name)
        evict(target, path, limit)
    _loaded[key] = mod
    return mod


def _touch(path: str):
    """Marks a cached module as just used (its mtime), for evict; a read-only cache stays as
    it is."""
    try:
        os.utime(path)
    except OSError:
        pass


def evict(cache: str, keep: str, limit: int):
    """Deletes the least recently used kernel modules of `cache` (by mtime: set when built
    or loaded) until they take at most `limit` bytes (0: no limit), never `keep`. A module
    another process has loaded stays loaded there (the file is only unlinked); one it was
    about to load is rebuilt."""
    if not limit:
        return
    modules = []
    try:
        with os.scandir(cache) as entries:
            for e in entries:
                if e.name.startswith("_pijit_k_") and e.name.endswith(".so") and e.is_file():
                    st = e.stat()
                    modules.append((st.st_mtime_ns, st.st_size, e.path))
    except OSError:
        return
    total = sum(size for _, size, _ in modules)
    for _, size, path in sorted(modules):
        if total <= limit:
            break
        if path == keep:
            continue
        try:
            os.unlink(path)
            total -= size
            log.debug("kernel cache: evicted %s", path)
        except OSError:         # gone already (another process evicted it)
            pass


def forget_loaded():
    """Forget the kernel modules loaded in this process, so the next load reads the disk
    cache (the benchmark runner measures a warm-disk-cache first call with it)."""
    _loaded.clear()


def _in_forked_child():
    """GNU OpenMP is not fork-safe: a child forked after its parent ran a parallel region
    waits forever on the parent's thread pool, which the child does not have. Kernels of a
    forked child (multiprocessing's default start method on Linux) run on one thread."""
    global _forked
    _forked = True
    for mod in _loaded.values():
        mod.single_thread()


os.register_at_fork(after_in_child=_in_forked_child)


def _build(source: str, name: str, target: str, openmp: bool) -> str:
    from cffi import FFI
    final = os.path.join(target, name + ".so")
    with tempfile.TemporaryDirectory(dir=target, prefix=".build-") as tmp:
        ffi = FFI()
        ffi.cdef("int pijit_kernels_init(const char *name);")
        ffi.set_source(name, source)
        c_path = os.path.join(tmp, name + ".c")
        with contextlib.redirect_stdout(io.StringIO()):     # cffi prints 'generating'
            ffi.emit_c_code(c_path)
        so_tmp = os.path.join(tmp, name + ".so")
        parts = source_parts(source)
        log.info("compiling %s%s", name, f" in {parts} parts" if parts > 1 else "")
        pch = toolchain.pch_flags()
        error = _compile(source, c_path, so_tmp, openmp, pch, parts)
        if error is not None and pch:
            # gcc ignores a .gch made for other flags, but stops at a damaged one
            log.warning("compiling %s with the precompiled header %s failed; compiling "
                        "without it", name, toolchain.HEADER + ".gch")
            error = _compile(source, c_path, so_tmp, openmp, [], parts)
        if error is not None:
            raise BuildError(error)
        os.replace(so_tmp, final)       # atomic within the directory
    return final


def source_parts(source: str) -> int:
    """How many parts the module's source is compiled in (render.module_source's PJ_PARTS)."""
    m = re.search(r"^#define PJ_PARTS (\d+)$", source, re.MULTILINE)
    return int(m.group(1)) if m else 1


def _compile(source: str, c_path: str, out: str, openmp: bool, pch: list,
             parts: int) -> str | None:
    """Compiles c_path (cffi's wrapping of source) into the shared object `out`: in one gcc
    run, or, for a module in parts, part 0 from c_path and the others from source, each with
    -DPJ_PART=k in a gcc process of its own, side by side, then linked. None when done, else
    what gcc said."""
    omp = ["-fopenmp"] if openmp else []
    cc = [CC, *CFLAGS, *omp, *pch, *toolchain.include_dirs(numpy.get_include())]
    if parts == 1:
        return _run([[*cc, c_path, "-o", out, *LDFLAGS]])
    raw = os.path.join(os.path.dirname(out), "parts.c")
    with open(raw, "w") as f:
        f.write(source)
    objs = [os.path.join(os.path.dirname(out), f"part{k}.o") for k in range(parts)]
    error = _run([[*cc, f"-DPJ_PART={k}", "-c", c_path if k == 0 else raw, "-o", objs[k]]
                  for k in range(parts)])
    if error is not None:
        return error
    return _run([[CC, *omp, *objs, "-o", out, *LDFLAGS]])


def _run(cmds: list) -> str | None:
    """Runs the commands side by side: None when all succeeded, else the first failure's exit
    code and stderr. A command that cannot start raises (after the others are stopped)."""
    procs = []
    try:
        for cmd in cmds:
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True))
    except OSError:
        for p in procs:
            p.kill()
            p.communicate()
        raise
    errors = []
    for p in procs:
        err = p.communicate()[1]
        if p.returncode != 0:
            errors.append(f"gcc failed ({p.returncode}):\n{err[-4000:]}")
    return errors[0] if errors else None


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:
        raise BuildError(f"cannot load {path}")
    cffi_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cffi_mod)
    if cffi_mod.lib.pijit_kernels_init(name.encode()) != 0:
        raise BuildError(f"{path}: kernel module init failed")
    mod = sys.modules.pop(name)
    if _forked:
        mod.single_thread()
    return mod
