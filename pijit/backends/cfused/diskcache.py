"""The kernel disk cache: which directory is trusted, which module file is intact, one build
of a module at a time across processes, and the cache's size.

configured dir -> directory() -> a private dir; built .so -> publish() -> <name>.so beside
<name>.so.sha256; <name>.so -> problem() -> None when its bytes are the ones built; locked()
(<name>.so.lock) around a build; evict() after it.

Why each step: a module in the cache is code this process will run, so it is loaded only
from a directory no other user can write (one made for us, 0700), and only when its bytes
hash to the value written beside it (a file truncated or damaged on disk crashed every later
process with SIGBUS or SIGSEGV). Processes that need the same module wait for the one that
builds it instead of each running gcc.
"""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import socket
import stat
import tempfile
import threading
import time

log = logging.getLogger("pijit.kernels")

MODULE_PREFIX = "_pijit_k_"
HASH_SUFFIX = ".sha256"
LOCK_SUFFIX = ".lock"
BUILD_PREFIX = ".build-"
STALE_AGE = 3600.0      # seconds after which any build folder is stale (see stale())

_warned: set = set()
_private: tuple | None = None       # (this process's own fallback dir, the pid that made it)
_private_lock = threading.Lock()


# -- which directory ------------------------------------------------------------------------
def directory(configured: str) -> str:
    """The directory this process loads and builds kernel modules in: `configured` when it is
    usable and private (ours, not writable by group or others; made 0700 when missing), else
    <tmpdir>/pijit-<uid> on the same terms, else a fresh private dir of this process (removed
    at exit: kernels still run fused, but later processes build them again). Each refusal is
    a warning (once per process)."""
    problems = []
    for path in (configured, os.path.join(tempfile.gettempdir(), f"pijit-{os.geteuid()}")):
        real, problem = _usable(path)
        if problem is None:
            break
        problems.append(f"{path} {problem}")
    else:
        real = _private_dir()
    if problems and (tuple(problems), real) not in _warned:
        _warned.add((tuple(problems), real))
        log.warning("kernel cache dir %s; using %s", "; ".join(problems), real)
    return real


def _usable(path: str) -> tuple:
    """(real path, None) when `path` is (or is now made) a directory of ours that no other
    user can write, else (None, what is wrong with it)."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        real = os.path.realpath(path)       # checked and used as itself: no link to swap
        st = os.stat(real)
    except OSError as e:
        return None, f"cannot be made a directory ({e.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return None, "is not a directory"
    if st.st_uid != os.geteuid():
        return None, (f"is owned by another user (uid {st.st_uid}): not used, a module placed "
                      "there would run in this process")
    if st.st_mode & 0o022:
        return None, (f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):o}): "
                      "not used, a module placed there would run in this process")
    if not os.access(real, os.W_OK | os.X_OK):
        return None, "is not writable"
    return real, None


def _private_dir() -> str:
    global _private
    with _private_lock:
        if _private is None:
            _private = (tempfile.mkdtemp(prefix="pijit-kernels-"), os.getpid())   # 0700
            atexit.register(_remove_private)
        return _private[0]


def _remove_private():
    path, pid = _private
    if pid == os.getpid():          # not in a forked child that exits first
        shutil.rmtree(path, ignore_errors=True)


# -- which file ----------------------------------------------------------------------------
def problem(path: str) -> str | None:
    """None when the module file `path` holds the bytes whose hash was stored beside it when
    it was built; else what is wrong ("is missing" when there is no module file)."""
    try:
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    except FileNotFoundError:
        return "is missing"
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    try:
        with open(path + HASH_SUFFIX) as f:
            stored = f.read().strip()
    except OSError:
        return "has no checksum file"
    if stored != digest:
        return "does not match its checksum (damaged or replaced)"
    return None


def publish(built: str, final: str):
    """Moves the module file `built` (in a build folder of final's directory) to `final`,
    with the hash of its bytes beside it. Each file is replaced atomically, the hash first;
    a reader that sees one without the other finds a mismatch and waits for the lock
    (locked) held while this runs."""
    with open(built, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    tmp_hash = built + HASH_SUFFIX
    with open(tmp_hash, "w") as f:
        f.write(digest + "\n")
    os.replace(tmp_hash, final + HASH_SUFFIX)
    os.replace(built, final)


def touch(path: str):
    """Marks a cached module as just used (its mtime), for evict; a read-only cache stays as
    it is."""
    try:
        os.utime(path)
    except OSError:
        pass


# -- one build at a time -------------------------------------------------------------------
@contextlib.contextmanager
def locked(module: str, wait: float):
    """Holds <module>.lock (an flock, so a process that dies releases it: no stale lock can
    block) while building the module file `module`. After `wait` seconds without it (its
    holder stopped), or on a file system without locks, the build goes ahead unlocked: writes
    are atomic, so two builds of one module cost time, never correctness."""
    path = module + LOCK_SUFFIX
    fd = _lock(path, time.monotonic() + wait)
    if fd == -1:
        log.warning("kernel cache: %s still held after %.0f s; building unlocked", path, wait)
    if fd >= 0:
        _held.add(fd)
    try:
        yield
    finally:
        if fd >= 0:
            _held.discard(fd)
            os.close(fd)        # releases the flock


_held: set = set()          # descriptors of the locks this process holds


def _release_in_child():
    """A child forked while a build (a background one: another thread) held a lock would
    hold it too, as long as it lives: the child closes its copies (the parent's build still
    holds the lock, and releases it when done)."""
    for fd in _held:
        with contextlib.suppress(OSError):
            os.close(fd)
    _held.clear()


os.register_at_fork(after_in_child=_release_in_child)


def _lock(path: str, deadline: float) -> int:
    """A descriptor of the lock file `path`, locked; -1 when the deadline passed first; -2
    when it cannot be locked at all."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError as e:
            log.debug("kernel cache: cannot open the lock file %s (%s)", path, e)
            return -2
        try:
            if not _acquire(fd, deadline):
                os.close(fd)
                return -1
            # evict may have removed the file we locked: then lock the one now at path
            st, now = os.fstat(fd), os.stat(path)
            if (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino):
                return fd
            os.close(fd)
        except FileNotFoundError:
            os.close(fd)
        except OSError as e:
            os.close(fd)
            log.debug("kernel cache: cannot lock %s (%s)", path, e)
            return -2
        except BaseException:
            os.close(fd)
            raise


def _acquire(fd: int, deadline: float) -> bool:
    """Waits for the flock of fd until the deadline (time.monotonic()): whether it got it."""
    delay = 0.005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


# -- size and leftovers --------------------------------------------------------------------
def build_prefix() -> str:
    """The name prefix of this process's build folders: host and pid, so that evict can tell
    a folder whose builder died (SIGKILL leaves it behind) from one being written."""
    return f"{BUILD_PREFIX}{socket.gethostname()}-{os.getpid()}-"


def stale(name: str, mtime: float, max_age: float) -> bool:
    """Whether build folder `name` (made by build_prefix + a random suffix) belongs to no
    running build: its process, on this host, is gone; or it is older than max_age (a live
    builder stops gcc at its timeout and removes its folder)."""
    if time.time() - mtime > max_age:
        return True
    host, _, rest = name[len(BUILD_PREFIX):].rpartition("-")[0].rpartition("-")
    if host != socket.gethostname() or not rest.isdigit():
        return False
    try:
        os.kill(int(rest), 0)
    except ProcessLookupError:
        return True
    except OSError:             # another user's process: alive
        pass
    return False


def evict(cache: str, keep: str, limit: int, build_timeout: float):
    """Removes leftovers older than max_age (the larger of STALE_AGE and twice the build
    timeout: no build lasts that long): stale build folders (stale()), and checksum and lock
    files whose module is gone; then the least recently used kernel modules of `cache` (by
    mtime: set when built or loaded) until modules and live build folders take at most
    `limit` bytes (0: no limit), never `keep`. A module another process has loaded stays
    loaded there (the file is only unlinked); one it was about to load is rebuilt."""
    modules, building = [], 0
    max_age = max(STALE_AGE, 2 * build_timeout)
    try:
        with os.scandir(cache) as entries:
            found = list(entries)
    except OSError:
        return
    names = {e.name for e in found}
    for e in found:
        try:
            if e.name.startswith(BUILD_PREFIX) and e.is_dir(follow_symlinks=False):
                if stale(e.name, e.stat(follow_symlinks=False).st_mtime, max_age):
                    shutil.rmtree(e.path, ignore_errors=True)
                    log.info("kernel cache: removed the stale build folder %s", e.path)
                else:
                    building += _tree_size(e.path)
            elif not e.name.startswith(MODULE_PREFIX):
                continue
            elif e.name.endswith(".so") and e.is_file():
                st = e.stat()
                modules.append((st.st_mtime_ns, st.st_size, e.path))
            elif (e.name.endswith((HASH_SUFFIX, LOCK_SUFFIX))
                  and e.name.rpartition(".")[0] not in names
                  and time.time() - e.stat().st_mtime > max_age):
                os.unlink(e.path)
        except OSError:         # gone meanwhile
            continue
    if not limit:
        return
    total = building + sum(size for _, size, _ in modules)
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
            continue
        for suffix in (HASH_SUFFIX, LOCK_SUFFIX):
            with contextlib.suppress(OSError):
                os.unlink(path + suffix)


def _tree_size(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total
