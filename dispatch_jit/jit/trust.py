"""What the disk cache (diskcache.py) trusts before it loads a kernel, and the per-user key
that authenticates every entry.

A cache entry is Numba's compile result, pickled: loading one runs whatever its bytes say.
So an entry is loaded only when nobody but the current user could have written it, and when
it carries a MAC made with a key that only the current user can read.  The checks are those
ssh makes before it reads ``authorized_keys``, done once per process and cache directory:

1. The cache directory (its real path: a symlinked ``DISPATCH_JIT_CACHE_DIR`` is resolved
   once, and the resolved path is used from then on) belongs to the user, and neither the
   group nor others may write it.  Each directory above it belongs to the user or to root,
   and nobody else may write it unless it is sticky (``/tmp``: others may add files there,
   but not rename or remove the user's).  A group-writable directory passes when the group
   is the user's private one (a group whose only member is the user, as Debian's umask 002
   setups make them), as in Debian's OpenSSH.
2. Its ``cpu/`` subdirectory passes the same test, and is no symlink: the cache never
   follows a link out of its root.
3. Each entry is opened without following a link, and is a regular file of the user's that
   neither the group nor others may write (checked on the open file, so it cannot be swapped
   between the check and the read).
4. The key: ``DISPATCH_JIT_CACHE_KEY_FILE``, by default ``$XDG_CONFIG_HOME/dispatch_jit/cache.key``
   or ``~/.config/dispatch_jit/cache.key``, never inside the cache directory.  It is 32 random
   bytes, made on first use (mode 0600, published with ``link``, so that two processes making
   it at once agree on one), in a directory that passes test 1, and it is used only while it
   is a regular file of the user's that nobody else may read or write.

A directory or key that fails is refused: a warning, once, names the path, why and the fix,
and kernels are compiled and kept in memory.  An entry that fails test 3 is skipped the same
way (and replaced by the kernel compiled instead).  Directories the cache creates are 0700.

On a system without user ids (Windows) only the link and MAC checks apply.
"""

from __future__ import annotations

import functools
import os
import secrets
import stat
import threading
import warnings
from pathlib import Path
from typing import NamedTuple

__all__ = ["Store", "Untrusted", "store", "key_path", "read_entry", "make_dirs", "warn_once"]

KEY_BYTES = 32
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_READ_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_stores: dict = {}          # (cache dir, key file) as configured -> Store, or None when refused
_lock = threading.Lock()
_warned: set = set()
_UNCHECKED = object()


class Store(NamedTuple):
    """A cache directory that passed the checks (its real path) and the key of its entries."""
    root: Path
    key: bytes


class Untrusted(Exception):
    """A path the cache refuses: ``why`` it could have been written by someone else, and the fix."""

    def __init__(self, path, why: str, fix: str):
        super().__init__(f"{path}: {why}")
        self.path, self.why, self.fix = str(path), why, fix


def warn_once(root, kind: str, what: str, fix: str) -> None:
    """Say, once per cache directory and ``kind`` of problem, that ``what`` happened and ``fix``."""
    if (str(root), kind) not in _warned:
        _warned.add((str(root), kind))
        warnings.warn(f"dispatch_jit disk cache: {what}; kernels are compiled and kept in memory instead. "
                      f"To fix: {fix}", RuntimeWarning, stacklevel=3)


def _uid() -> int | None:
    return os.geteuid() if hasattr(os, "geteuid") else None


@functools.lru_cache(maxsize=None)
def _private_group(gid: int, uid: int) -> bool:
    """Is ``gid`` the private group of user ``uid``: the user is its one member, as primary
    group or listed, and no other account has it as primary group."""
    import grp
    import pwd
    try:
        group, user = grp.getgrgid(gid), pwd.getpwuid(uid)
    except KeyError:
        return False
    if any(name != user.pw_name for name in group.gr_mem):
        return False
    # the whole account list: slow where it is a directory service, so once a process per group
    if any(p.pw_gid == gid and p.pw_uid != uid for p in pwd.getpwall()):
        return False
    return user.pw_gid == gid or user.pw_name in group.gr_mem


def _others_may_write(st: os.stat_result, uid: int) -> str | None:
    """Who besides ``uid`` may write what ``st`` describes, or None."""
    if st.st_mode & stat.S_IWOTH:
        return "every user"
    if st.st_mode & stat.S_IWGRP and not _private_group(st.st_gid, uid):
        return f"group {st.st_gid}"
    return None


def _check_dir(path: str, uid: int, setting: str) -> None:
    """Raise Untrusted unless only ``uid`` (or root, above it) can change what ``path``, a
    resolved directory, holds: the test of the module's docstring, ``path`` and each directory
    above it.  ``setting`` is the variable that chose ``path``, for the fix."""
    leaf = True
    while True:
        st = os.lstat(path)
        mode = f"mode {stat.filemode(st.st_mode)}"
        if stat.S_ISLNK(st.st_mode):
            raise Untrusted(path, f"it is a symlink (to {os.readlink(path)}), and the cache follows no links "
                            "out of its directory", f"remove the link (rm {path}); the cache makes its own directory")
        if not stat.S_ISDIR(st.st_mode):
            raise Untrusted(path, "it is not a directory", f"remove {path}, or set {setting} elsewhere")
        if st.st_uid != uid and (leaf or st.st_uid != 0):
            raise Untrusted(path, f"it belongs to user {st.st_uid}, not to you (user {uid})",
                            f"set {setting} to a directory of your own: a cache serves one user")
        who = _others_may_write(st, uid)
        if who is not None and (leaf or not st.st_mode & stat.S_ISVTX):
            raise Untrusted(path, f"{who} may write it ({mode})",
                            f"chmod go-w {path}, and delete what you did not put in it; or set "
                            f"{setting} to a directory only you can write")
        parent = os.path.dirname(path)
        if parent == path:
            return
        path, leaf = parent, False


def make_dirs(path: str) -> None:
    """Create ``path`` and its missing parents, each 0700 (a concurrent process may make one first)."""
    missing = []
    while not os.path.lexists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass


def key_path() -> Path:
    """The file of the per-user key that authenticates cache entries.

    >>> import os
    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"DISPATCH_JIT_CACHE_KEY_FILE": "/somewhere/mine.key"}):
    ...     print(key_path())
    /somewhere/mine.key
    """
    env = os.environ.get("DISPATCH_JIT_CACHE_KEY_FILE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "dispatch_jit" / "cache.key"


def _open_checked(path: str, uid: int | None, private: bool) -> int:
    """An open descriptor of ``path``, a regular file (not a link) of ``uid``'s that no one else
    may write (nor, when ``private``, read); Untrusted otherwise."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        if os.path.islink(path):        # ELOOP, as O_NOFOLLOW answers a link
            raise Untrusted(path, f"it is a symlink (to {os.readlink(path)}), and the cache follows no links",
                            f"delete it (rm {path})") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Untrusted(path, "it is not a regular file", f"delete it (rm {path})")
        if uid is not None:
            if st.st_uid != uid:
                raise Untrusted(path, f"it belongs to user {st.st_uid}, not to you (user {uid})",
                                f"delete it (rm {path}); what it held is recompiled")
            loose = st.st_mode & (0o077 if private else 0o022)
            if loose:
                what = "others may read or write it" if private else "others may write it"
                raise Untrusted(path, f"{what} (mode {stat.filemode(st.st_mode)})",
                                f"chmod {'600' if private else 'go-w'} {path}")
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_entry(path: Path) -> bytes:
    """The bytes of the cache entry ``path``, read whole from a file that passed test 3;
    Untrusted when it did not, OSError (FileNotFoundError when it is gone) when unreadable."""
    fd = _open_checked(os.fspath(path), _uid(), private=False)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _new_key(path: str) -> None:
    """Make the key file ``path``, unless another process makes it first: written whole under a
    temporary name, then linked into place (link fails where a file exists, so all agree on the
    first key)."""
    tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, _CREATE_FLAGS, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:             # a file system without hard links: the rename races, but only at birth
            if not os.path.lexists(path):
                os.replace(tmp, path)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def _user_key(path: str, uid: int | None) -> bytes:
    real = os.path.realpath(path)
    folder = os.path.dirname(real)
    make_dirs(folder)
    if uid is not None:
        _check_dir(folder, uid, "DISPATCH_JIT_CACHE_KEY_FILE")
    try:
        fd = _open_checked(real, uid, private=True)
    except FileNotFoundError:
        _new_key(real)
        fd = _open_checked(real, uid, private=True)
    with os.fdopen(fd, "rb") as f:
        key = f.read(KEY_BYTES + 1)
    if len(key) != KEY_BYTES:
        raise Untrusted(path, f"it holds {len(key)} bytes, not a key of {KEY_BYTES}",
                        f"delete it (rm {path}): a new key is made, and the cache's entries are compiled again once")
    return key


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:              # another drive
        return False


def _check(root: Path, key_file: Path) -> Store | None:
    real = os.path.realpath(root)
    cpu = os.path.join(real, "cpu")
    uid = _uid()
    try:
        make_dirs(cpu)
        if uid is not None:
            _check_dir(real, uid, "DISPATCH_JIT_CACHE_DIR")
            _check_dir(cpu, uid, "DISPATCH_JIT_CACHE_DIR")
        if _inside(os.path.realpath(key_file), real):
            raise Untrusted(key_file, "the key file is inside the cache directory, where whoever gets a copy "
                            "of the cache gets the key", f"set DISPATCH_JIT_CACHE_KEY_FILE to a path outside {real} "
                            "(by default it lives in ~/.config/dispatch_jit)")
    except Untrusted as e:
        warn_once(root, "directory", f"not using {e.path}: {e.why}", e.fix)
        return None
    except OSError as e:
        warn_once(root, "directory", f"cannot write to {root} ({e})",
                  "set DISPATCH_JIT_CACHE_DIR to a writable directory, or to 'off' to silence this")
        return None
    try:
        key = _user_key(os.fspath(key_file), uid)
    except Untrusted as e:
        warn_once(root, "key", f"not using the key file {e.path}: {e.why}", e.fix)
        return None
    except OSError as e:
        warn_once(root, "key", f"cannot read or create the key file {key_file} ({e})",
                  "set DISPATCH_JIT_CACHE_KEY_FILE to a file in a directory of yours")
        return None
    return Store(Path(real), key)


def store(root: Path) -> Store | None:
    """The checked store at cache directory ``root`` (created 0700 when missing), or None when
    it (or the key) is refused: checked once a process per directory and key file."""
    key_file = key_path()
    tag = (os.fspath(root), os.fspath(key_file))
    got = _stores.get(tag, _UNCHECKED)
    if got is not _UNCHECKED:
        return got
    with _lock:
        if tag not in _stores:
            _stores[tag] = _check(root, key_file)
        return _stores[tag]
