"""C source -> loaded kernel module, through a disk cache of compiled shared objects.

The source is wrapped by cffi (`emit_c_code`), compiled with gcc and cached under the cache
dir by a hash of source, flags, compiler version, CPU flags and Python/NumPy versions; writes
are atomic (temp file in the same dir + os.replace) so processes can share the cache. The .so
is loaded with importlib; its cffi entry point creates the real extension module of METH_FASTCALL
kernel functions, so calls never cross cffi.

Precompiled header: every module starts with the same head (cffi's prologue, which includes
Python.h, then the source's leading #include lines: NumPy's headers), and parsing it is about a
fifth of gcc's work for a two-kernel module. After a build that found none, a gcc in the
background (it may outlive the process) compiles the head into `_pijit_pch_<key>.h.gch` in the
cache dir, keyed by head, flags and toolchain; later builds include it instead. Not waiting for
it keeps the first build as fast as before (making the header takes more than the parsing it
saves). It can only cost time: gcc skips a .gch it cannot use (another compiler or flags) and
parses the .h beside it, and a build that fails with the .gch is redone without it.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import io
import logging
import os
import subprocess
import sys
import sysconfig
import tempfile

import numpy

from pijit import config

log = logging.getLogger("pijit.kernels")

CC = "gcc"
# -ffp-contract=off: no FMA contraction, so a*b+c rounds twice exactly like NumPy.
CFLAGS = ("-O3", "-march=native", "-fno-math-errno", "-ffp-contract=off", "-fopenmp-simd",
          "-fPIC", "-std=gnu11", "-w", "-D_CFFI_NO_LIMITED_API")
LDFLAGS = ("-shared", "-lm")

_loaded: dict = {}          # key -> kernel module (one load per process)
_precompiling: dict = {}    # header path -> the background gcc making its .gch


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
    return "\n".join((cc, flags, sys.version, numpy.__version__))


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in (*parts, _toolchain_id()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def cache_key(source: str) -> str:
    return _digest(source, " ".join(CFLAGS + LDFLAGS))


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
        except Exception as e:      # corrupt or foreign file: rebuild it
            log.warning("kernel cache file %s is unusable (%s); rebuilding", path, e)
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
    _loaded[key] = mod
    return mod


def forget_loaded():
    """Forget the kernel modules loaded in this process, so the next load reads the disk
    cache (the benchmark runner measures a warm-disk-cache first call with it)."""
    _loaded.clear()


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
        with open(c_path) as f:
            code = f.read()
        so_tmp = os.path.join(tmp, name + ".so")
        cmd = _compile_cmd(openmp)
        head, body = split_head(code, source)
        header = os.path.join(target, f"_pijit_pch_{_digest(head, ' '.join(cmd))}.h")
        log.info("compiling %s", name)
        if _header_ready(header, head):
            with open(c_path, "w") as f:
                f.write(f'#include "{os.path.basename(header)}"\n{body}')
            if _gcc([*cmd, "-iquote", target], c_path, so_tmp) is None:
                os.replace(so_tmp, final)       # atomic within the directory
                return final
            log.warning("build with precompiled header %s failed; building without it", header)
            with open(c_path, "w") as f:
                f.write(code)
        error = _gcc(cmd, c_path, so_tmp)
        if error is not None:
            raise BuildError(error)
        _precompile(cmd, header, head, tmp)
        os.replace(so_tmp, final)
    return final


def _compile_cmd(openmp: bool) -> list:
    """gcc and its flags, for the modules and for their precompiled header alike."""
    return [CC, *CFLAGS, *(["-fopenmp"] if openmp else []),
            "-I", sysconfig.get_paths()["include"], "-I", numpy.get_include()]


def split_head(code: str, source: str) -> tuple:
    """(head, rest) of the emitted C: the head is cffi's prologue (source follows it verbatim)
    plus the leading #include/#define lines of `source`, the same for every graph."""
    end = code.index(source)
    for line in source.splitlines(keepends=True):
        directive = line.startswith(("#include", "#define")) and not line.endswith("\\\n")
        if line.strip() and not directive:
            break
        end += len(line)
    return code[:end], code[end:]


def _header_ready(header: str, head: str) -> bool:
    """Its .gch looks like one (gcc would silently parse the .h beside a file of garbage, and
    fails on a truncated one) and the .h, what gcc reads instead of a .gch it rejects, is
    intact."""
    try:
        with open(header + ".gch", "rb") as f:
            magic = f.read(4)
        with open(header) as f:
            return magic == b"gpch" and f.read() == head
    except OSError:
        return False


def _precompile(cmd: list, header: str, head: str, tmp: str):
    """Start compiling `head` into header.gch in the background (replacing a bad one)."""
    running = _precompiling.get(header)
    if running is not None and running.poll() is None:
        return
    gch = header + ".gch"
    with contextlib.suppress(OSError):
        os.remove(gch)
    h_tmp = os.path.join(tmp, "head.h")
    with open(h_tmp, "w") as f:
        f.write(head)
    os.replace(h_tmp, header)       # atomic: other processes may be reading it
    fd, gch_tmp = tempfile.mkstemp(dir=os.path.dirname(header), prefix=".pch-")
    os.close(fd)
    script = 'tmp=$1 gch=$2; shift 2; "$@" -o "$tmp" && mv -f "$tmp" "$gch"; rm -f "$tmp"'
    _precompiling[header] = subprocess.Popen(
        ["/bin/sh", "-c", script, "sh", gch_tmp, gch, *cmd, "-x", "c-header", header],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)


def wait_precompiled():
    """Wait for the precompiled headers this process is making (for tests, and for timings
    that must not run beside a compile)."""
    while _precompiling:
        _precompiling.popitem()[1].wait()


def _gcc(cmd: list, c_path: str, so_path: str) -> str | None:
    """Compile and link; None on success, else gcc's complaint."""
    proc = subprocess.run([*cmd, c_path, "-o", so_path, *LDFLAGS], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        return f"gcc failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return None


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:
        raise BuildError(f"cannot load {path}")
    cffi_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cffi_mod)
    if cffi_mod.lib.pijit_kernels_init(name.encode()) != 0:
        raise BuildError(f"{path}: kernel module init failed")
    return sys.modules.pop(name)
