"""The on-disk store of compiled kernels, so that a fresh process does not recompile.

It holds the compiler's fused loops and every eager CPU kernel: generated
source (``compile_cached``) and ``numba.njit`` functions defined in a file
(``attach``, which makes the store Numba's cache slot of that dispatcher, so
its compiles, including those of its ordinary type-dispatching calls, load
from and save to here).  Each kernel and argument types is one file,
``<cache dir>/cpu/<name>_<hash>.nbx``, named by a hash of everything its
machine code depends on:

1. the source of the kernel and of everything it calls, the values of the
   globals it reads, its compile options (fingerprint.py), the argument types;
2. the Numba and llvmlite versions, Python's version, and the CPU target
   (host CPU name and features, as LLVM sees them).

The file holds Numba's compile result serialized as Numba's own ``cache=True``
does it (``CompileResult._reduce``/``_rebuild``), but in one authenticated
file instead of Numba's index, data files and ``__pycache__`` next to a
source file: that layout needs the generated source on disk (which Numba
re-reads while saving, so a file changed under it raised ``TokenError``), puts
Numba's files wherever its cache locator chooses (``NUMBA_CACHE_DIR``,
``~/.cache``), is two files that a concurrent reader can see out of step,
keys a file-defined function by its file's timestamp but not by the callees'
sources, and its load first runs ``targetctx.refresh()`` (~0.3 s a process,
as much as compiling the first kernel; figures in ``_rebuild``'s comment).

Trust nothing on disk.  An entry is::

    dispatch_jit kernel v4\n
    <HMAC-SHA256, under the user's key, of everything after this line>\n
    <JSON: key, name, argument types, payload size>\n
    <payload: the pickled compile result>

Unpickling runs code, so nothing is unpickled that has not been authenticated.
Before its first load a process checks the cache directory and reads the
user's key (trust.py: a directory or entry that someone else could have
written, a symlink out of the root, a key others can read, is refused with a
warning, once, and kernels are compiled in memory).  A load opens the entry
without following links, checks its owner and mode on the open file, reads it
whole, and uses it only if the MAC, the full key and the argument types all
match; anything else (missing, deleted while listing, truncated, bit-flipped,
garbage, unreadable, made with another key or forged, another key's entry
under this name, a payload Numba cannot rebuild) is a miss: the kernel is
compiled and the entry rewritten, with a debug-level log only.  Writes go to a
temporary name in the same directory, made with mode 0644 less the user's
umask (0600 under ``umask 077``), and are published with ``os.replace``, so a
concurrent reader sees the old entry, the new one, or none, never part of one.
A directory that cannot be written (read-only, a file in the way) warns once;
kernels are then compiled and kept in memory.

The directory: ``DISPATCH_JIT_CACHE_DIR``; unset, ``$XDG_CACHE_HOME/dispatch_jit``
or ``~/.cache/dispatch_jit``; empty, ``0``, ``off``, ``false`` or ``no``
turns the disk cache off (kernels are then cached in memory only).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import pickle
import sys
import secrets
import types
from pathlib import Path

import llvmlite
import numba
from numba.core.caching import NullCache

from . import fingerprint, source, trust, vectors

__all__ = ["cache_dir", "compile_cached", "source_key", "attach", "entry_path", "target_tag", "DiskSlot"]

_FORMAT = 4                 # bump when the file layout, the key or the compile flags change
_MAGIC = b"dispatch_jit kernel v4"
_SUFFIX = ".nbx"
_OFF = {"", "0", "off", "false", "no"}
_tag: list = []             # [target tag], computed once
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_log = logging.getLogger(__name__)


def cache_dir() -> Path | None:
    """The directory of the on-disk cache, or None when it is turned off.

    >>> import os
    >>> os.environ["DISPATCH_JIT_CACHE_DIR"] = "off"
    >>> cache_dir() is None
    True
    >>> del os.environ["DISPATCH_JIT_CACHE_DIR"]
    """
    env = os.environ.get("DISPATCH_JIT_CACHE_DIR")
    if env is not None:
        if env.strip().lower() in _OFF:
            return None
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dispatch_jit"


def target_tag() -> str:
    """What besides the kernel's fingerprint the machine code depends on (computed once per process)."""
    if not _tag:
        import llvmlite.binding as llvm
        cpu = numba.config.CPU_NAME or llvm.get_host_cpu_name()
        features = numba.config.CPU_FEATURES or llvm.get_host_cpu_features().flatten()
        _tag.append(f"format={_FORMAT} numba={numba.__version__} llvmlite={llvmlite.__version__} "
                    f"python={sys.version_info[:3]} cpu={cpu} features={features}")
    return _tag[0]


def _key(fp: str, argtypes: tuple) -> str:
    return hashlib.sha256("\0".join([fp, repr(tuple(argtypes)), target_tag()]).encode()).hexdigest()


def entry_path(root: Path, name: str, key: str) -> Path:
    """The file of the kernel ``name`` with full key ``key`` under the cache directory ``root``."""
    return root / "cpu" / f"{name}_{key[:24]}{_SUFFIX}"


# --- the entry file format ---------------------------------------------------------------------------

def _mac(mac_key: bytes, body: bytes) -> bytes:
    return hmac.new(mac_key, body, hashlib.sha256).hexdigest().encode()


def _pack(mac_key: bytes, key: str, name: str, argtypes: tuple, payload: bytes) -> bytes:
    meta = json.dumps({"key": key, "name": name, "argtypes": repr(tuple(argtypes)), "size": len(payload)})
    body = meta.encode() + b"\n" + payload
    return _MAGIC + b"\n" + _mac(mac_key, body) + b"\n" + body


def _unpack(blob: bytes, mac_key: bytes, key: str, argtypes: tuple) -> tuple[bytes | None, str]:
    """(payload, "") if ``blob`` is a whole entry written for ``key`` with ``mac_key``; else (None, why not)."""
    magic, _, rest = blob.partition(b"\n")
    if magic != _MAGIC:
        return None, "not a dispatch_jit entry of this format"
    digest, _, body = rest.partition(b"\n")
    if not hmac.compare_digest(_mac(mac_key, body), digest):
        return None, "authentication failed (truncated, corrupt, made with another key, or forged)"
    meta, _, payload = body.partition(b"\n")
    try:
        meta = json.loads(meta)
    except ValueError:
        return None, "unreadable header"
    # the MAC only says the user wrote it: the key says it is this kernel's
    if not isinstance(meta, dict) or meta.get("key") != key or meta.get("argtypes") != repr(tuple(argtypes)):
        return None, "written for another key"
    if meta.get("size") != len(payload):
        return None, "payload size mismatch"
    return payload, ""


def _create_temp(path: Path) -> tuple[int, str]:
    """A new file beside ``path`` to write its next version into: mode 0644 less the umask (the
    kernel applies it, so ``umask 077`` gives 0600), never writable by the group or others."""
    tmp = os.path.join(path.parent, f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    return os.open(tmp, _TEMP_FLAGS, 0o644), tmp


def _write_atomic(path: Path, blob: bytes) -> None:
    """Publish ``blob`` at ``path`` all at once: readers see the old file, the new one, or none."""
    trust.make_dirs(os.fspath(path.parent))        # removed since the process checked it: remade 0700
    fd, tmp = _create_temp(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# --- loading, saving ------------------------------------------------------------------------------------

_FAST_LOAD_NUMBA = "0.68."


def _rebuild(ctx, payload: bytes):
    """Numba's compile result from ``payload``, as ``cache=True`` would load it.

    Numba's own load first calls ``targetctx.refresh()``, which installs every
    lazy typing and lowering registry (it imports ``numba.np.arraymath``, which
    imports SciPy to find BLAS): about 0.3-0.4 s a process that a compile needs,
    not the loading of finished object code, which needs only the NRT symbols.
    Measured in fresh processes, first call of a float32 add loop defined in a
    file, after ``import dispatch_jit`` (min of 7, 2-core machine shared with
    other jobs, load average ~9): from Numba's ``cache=True`` index 0.49 s,
    from this store 24 ms, compiled 0.44 s.  That shortcut is why this store, not Numba's
    index, serves the eager kernels too.  It is taken only on the
    Numba series it was checked with: a missing setup step in another version
    could crash rather than raise."""
    from numba.core.compiler import CompileResult
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.runtime import rtsys
    with global_compiler_lock:
        if numba.__version__.startswith(_FAST_LOAD_NUMBA):
            rtsys.initialize(ctx)
        else:
            ctx.refresh()
        return CompileResult._rebuild(ctx, *pickle.loads(payload))


def _load(store: trust.Store, path: Path, key: str, ctx, argtypes: tuple):
    """The compile result loaded from ``path``, or None on any kind of miss."""
    try:
        blob = trust.read_entry(path)
    except FileNotFoundError:
        return None
    except trust.Untrusted as e:
        trust.warn_once(store.root, "entry", f"not loading {e.path}: {e.why}", e.fix)
        return None
    except OSError as e:
        _log.debug("disk cache entry %s unreadable (%s): recompiling", path, e)
        return None
    payload, why = _unpack(blob, store.key, key, argtypes)
    if payload is None:
        _log.debug("disk cache entry %s ignored: %s; recompiling", path, why)
        return None
    try:
        cres = _rebuild(ctx, payload)
    except Exception as e:          # authenticated bytes Numba cannot use (a changed Numba internal): a miss
        _log.debug("disk cache entry %s could not be loaded (%s: %s); recompiling", path, type(e).__name__, e)
        return None
    if cres.objectmode or tuple(cres.signature.args) != tuple(argtypes):
        _log.debug("disk cache entry %s rebuilt as %s, not %s; recompiling", path, cres.signature, argtypes)
        return None
    return cres


def _save(store: trust.Store, path: Path, key: str, name: str, cres, argtypes: tuple) -> None:
    if cres.objectmode or cres.library.has_dynamic_globals or cres.lifted:
        # what Numba itself refuses to cache: a dynamic global is a Python object's or a C
        # function's address in this process (numba.get_num_threads() inside a kernel is one)
        _log.debug("disk cache: kernel %s not saved: it embeds addresses of this process (dynamic globals), "
                   "object mode or lifted loops; compiled in every process", name)
        return
    try:
        from numba.core.serialize import dumps
        payload = dumps(cres._reduce())
    except Exception as e:          # an unpicklable constant, say: the kernel still runs, uncached
        _log.debug("disk cache: kernel %s not saved (%s: %s)", name, type(e).__name__, e)
        return
    try:
        _write_atomic(path, _pack(store.key, key, name, argtypes, payload))
    except OSError as e:
        trust.warn_once(store.root, "directory", f"cannot write to {store.root} ({e})",
                        "set DISPATCH_JIT_CACHE_DIR to a writable directory, or to 'off' to silence this")


# --- Numba's cache slot of one dispatcher, answered from this store ---------------------------------------

class DiskSlot(NullCache):
    """A dispatcher's ``_cache`` (the slot Numba's ``cache=True`` fills with its own file
    cache): ``Dispatcher.compile`` asks it before compiling and hands it what it compiled, so
    every compile of that dispatcher (``disp.compile(sig)`` or a call with new argument types)
    goes memory -> disk -> compile.

    ``outcome(argtypes)`` says, once, how the last compile of ``argtypes`` was answered
    ("disk" or "compiled"); ``on_outcome(how)``, when given, is told each time.  The
    fingerprint is computed when a compile asks (never at import); a kernel whose
    fingerprint cannot be computed (fingerprint.py) is compiled, never loaded or saved."""

    def __init__(self, name: str, fingerprint_of, on_outcome=None):
        self.name, self._fingerprint_of, self.on_outcome = name, fingerprint_of, on_outcome
        self._outcomes: dict = {}

    def _where(self, sig):
        """(argument types, store, key, entry path); all but the types are None when nothing is
        stored: the cache is off or refused (trust.py), or the kernel has no fingerprint."""
        from numba.core import sigutils
        args = tuple(sigutils.normalize_signature(sig)[0])
        root = cache_dir()
        # computed at every compile, not once: a global the kernel reads may have been rebound since
        fp = None if root is None else self._fingerprint_of()
        if fp is None:
            if root is not None:
                _log.debug("disk cache: %s reads a value with no fingerprint; compiled in every process", self.name)
            return args, None, None, None
        store = trust.store(root)
        if store is None:
            return args, None, None, None
        key = _key(fp, args)
        return args, store, key, entry_path(store.root, self.name, key)

    def _note(self, args: tuple, how: str) -> None:
        self._outcomes[args] = how
        if self.on_outcome is not None:
            self.on_outcome(how)

    def load_overload(self, sig, target_context):
        args, store, key, path = self._where(sig)
        cres = None if path is None else _load(store, path, key, target_context, args)
        if cres is not None:
            self._note(args, "disk")
        return cres

    def save_overload(self, sig, cres):
        args, store, key, path = self._where(sig)
        self._note(args, "compiled")
        if path is not None:
            _save(store, path, key, self.name, cres, args)

    def outcome(self, argtypes) -> str | None:
        return self._outcomes.pop(tuple(argtypes), None)


def attach(disp, name: str | None = None, on_outcome=None) -> DiskSlot:
    """Make this store ``disp``'s cache slot (once; a second call returns the first slot).

    >>> import numba
    >>> f = numba.njit(lambda x: x + 1)
    >>> attach(f) is attach(f)
    True
    """
    slot = disp._cache
    if not isinstance(slot, DiskSlot):
        slot = disp._cache = DiskSlot(name or disp.py_func.__name__.strip("<>"),
                                      lambda: fingerprint.of_dispatcher(disp), on_outcome)
    return slot


# --- generated source -------------------------------------------------------------------------------------

def _define(src: str, name: str, glb: dict, options: dict, stem: str):
    """The Numba dispatcher of ``src``'s function ``name``, defined in a module of its own.

    Numba pickles a kernel's environment by its module's name and imports that
    module again on load, so the module is registered in ``sys.modules``.  The
    source lives in ``linecache`` under a name that is no file: Numba reads it
    back while pickling, and a file on disk could change under it."""
    mod = types.ModuleType(f"_dispatch_jit_loop_{stem}")
    mod.__dict__.update(glb)
    sys.modules[mod.__name__] = mod
    return numba.njit(**options)(source.define(src, name, mod.__dict__, f"<dispatch_jit {stem}>"))


def _source_fingerprint(src: str, options: dict, glb: dict) -> str | None:
    fp = fingerprint.of_source(src, glb)
    return None if fp is None else f"{fp}\0{fingerprint.of_options(options)}"


def source_key(src: str, name: str, argtypes: tuple, options: dict, glb: dict) -> str | None:
    """The full disk key of generated source (``compile_cached``'s arguments), or None when
    what it reads has no fingerprint (then it is never stored)."""
    src, glb = vectors.widen(src, name, glb)
    fp = _source_fingerprint(src, options, glb)
    return None if fp is None else _key(fp, argtypes)


def compile_cached(src: str, name: str, argtypes: tuple, options: dict, glb: dict):
    """Compile ``src``'s function ``name`` with ``numba.njit(**options)`` for ``argtypes``,
    through the disk cache, ``glb`` being its globals.

    Returns ``(entry point, how)``: how is ``"disk"`` (loaded from the disk
    cache), ``"compiled"`` (compiled, and saved when the cache is on and
    writable).  Where the CPU has AVX-512 its loops are compiled for 512-bit vectors (vectors.py).
    """
    src, glb = vectors.widen(src, name, glb)
    fp = _source_fingerprint(src, options, glb)
    stem = f"{name}_{_key(fp or src, argtypes)[:24]}"
    disp = _define(src, name, glb, options, stem)
    slot = disp._cache = DiskSlot(name, lambda: fp)
    ep = disp.compile(tuple(argtypes))
    return ep, slot.outcome(argtypes) or "compiled"
