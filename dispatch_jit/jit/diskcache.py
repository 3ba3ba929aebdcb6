"""The on-disk cache of fused loops, so that a fresh process does not recompile.

Each loop is one file, ``<cache dir>/cpu/<name>_<hash>.nbx``, named by a hash
of everything its machine code depends on:

1. the generated source, the argument types and the ``parallel`` flag;
2. the Numba and llvmlite versions, Python's version, and the CPU target
   (host CPU name and features, as LLVM sees them);
3. the source files of the scalar helpers the loops call (``_jit_where``,
   ...), since Numba does not track a callee's changes.

The file holds Numba's compile result serialized as Numba's own ``cache=True``
does it (``CompileResult._reduce``/``_rebuild``), but in one self-checking
file instead of Numba's index, data files and ``__pycache__`` next to a
source file: that layout needs the generated source on disk (which Numba
re-reads while saving, so a file changed under it raised ``TokenError``), puts
Numba's files wherever its cache locator chooses (``NUMBA_CACHE_DIR``,
``~/.cache``), and is two files that a concurrent reader can see out of step.

Trust nothing on disk.  An entry is::

    dispatch_jit fused loop v2\\n
    <SHA-256 of everything after this line>\\n
    <JSON: key, name, argument types, payload size>\\n
    <payload: the pickled compile result>

A load reads the whole file in one go and uses it only if the checksum, the
full key and the argument types all match; anything else (missing, deleted
while listing, truncated, bit-flipped, garbage, unreadable, another key's
entry under this name, a payload Numba cannot rebuild) is a miss: the loop is
compiled and the entry rewritten, with a debug-level log only.  Writes go to a
temporary name in the same directory and are published with ``os.replace``,
so a concurrent reader sees the old entry, the new one, or none, never part
of one.  A directory that cannot be written (read-only, a file in the way)
warns once; loops are then compiled and kept in memory.

The directory: ``DISPATCH_JIT_CACHE_DIR``; unset, ``$XDG_CACHE_HOME/dispatch_jit``
or ``~/.cache/dispatch_jit``; empty, ``0``, ``off``, ``false`` or ``no``
turns the disk cache off (loops are then cached in memory only).
"""

from __future__ import annotations

import hashlib
import json
import linecache
import logging
import os
import pickle
import sys
import tempfile
import types
import warnings
from pathlib import Path

import llvmlite
import numba

__all__ = ["cache_dir", "compile_cached", "entry_path", "target_tag"]

_FORMAT = 2                 # bump when the file layout or the compile flags change
_MAGIC = b"dispatch_jit fused loop v2"
_SUFFIX = ".nbx"
_OFF = {"", "0", "off", "false", "no"}
_tag: list = []             # [target tag], computed once
_warned_unusable: set = set()
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


def _helper_files(helpers: dict) -> list[str]:
    files = set()
    for d in helpers.values():
        code = getattr(getattr(d, "py_func", None), "__code__", None)
        if code is not None:
            files.add(code.co_filename)
    return sorted(files)


def target_tag(helpers: dict) -> str:
    """What besides the source the machine code depends on (computed once per process)."""
    if not _tag:
        import llvmlite.binding as llvm
        cpu = numba.config.CPU_NAME or llvm.get_host_cpu_name()
        features = numba.config.CPU_FEATURES or llvm.get_host_cpu_features().flatten()
        h = hashlib.sha256()
        for f in _helper_files(helpers):
            try:
                h.update(Path(f).read_bytes())
            except OSError:
                h.update(f.encode())
        _tag.append(f"format={_FORMAT} numba={numba.__version__} llvmlite={llvmlite.__version__} "
                    f"python={sys.version_info[:3]} cpu={cpu} features={features} helpers={h.hexdigest()}")
    return _tag[0]


def _key(src: str, argtypes: tuple, parallel: bool, helpers: dict) -> str:
    return hashlib.sha256("\0".join([src, repr(argtypes), repr(parallel), target_tag(helpers)]).encode()).hexdigest()


def entry_path(root: Path, name: str, key: str) -> Path:
    """The file of the loop ``name`` with full key ``key`` under the cache directory ``root``."""
    return root / "cpu" / f"{name}_{key[:24]}{_SUFFIX}"


# --- the entry file format ---------------------------------------------------------------------------

def _pack(key: str, name: str, argtypes: tuple, payload: bytes) -> bytes:
    meta = json.dumps({"key": key, "name": name, "argtypes": repr(argtypes), "size": len(payload)})
    body = meta.encode() + b"\n" + payload
    return _MAGIC + b"\n" + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def _unpack(blob: bytes, key: str, argtypes: tuple) -> tuple[bytes | None, str]:
    """(payload, "") if ``blob`` is a whole entry written for ``key``; else (None, why not)."""
    magic, _, rest = blob.partition(b"\n")
    if magic != _MAGIC:
        return None, "not a dispatch_jit entry of this format"
    digest, _, body = rest.partition(b"\n")
    if hashlib.sha256(body).hexdigest().encode() != digest:
        return None, "checksum mismatch (truncated or corrupt)"
    meta, _, payload = body.partition(b"\n")
    try:
        meta = json.loads(meta)
    except ValueError:
        return None, "unreadable header"
    # the checksum only says the file is whole: the key says it is this loop's
    if not isinstance(meta, dict) or meta.get("key") != key or meta.get("argtypes") != repr(argtypes):
        return None, "written for another key"
    if meta.get("size") != len(payload):
        return None, "payload size mismatch"
    return payload, ""


def _write_atomic(path: Path, blob: bytes) -> None:
    """Publish ``blob`` at ``path`` all at once: readers see the old file, the new one, or none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file 0600: an entry is as readable as any cache file, so that one cache
        # directory can serve several users
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# --- defining, loading, saving -----------------------------------------------------------------------

def _define(src: str, name: str, glb: dict, parallel: bool, stem: str):
    """The Numba dispatcher of ``src``'s function ``name``, defined in a module of its own.

    Numba pickles a loop's environment by its module's name and imports that
    module again on load, so the module is registered in ``sys.modules``.  The
    source lives in ``linecache`` under a name that is no file: Numba reads it
    back while pickling, and a file on disk could change under it."""
    filename = f"<dispatch_jit {stem}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    mod = types.ModuleType(f"_dispatch_jit_loop_{stem}")
    mod.__dict__.update(glb)
    sys.modules[mod.__name__] = mod
    exec(compile(src, filename, "exec"), mod.__dict__)
    return numba.njit(parallel=parallel, error_model="numpy", nogil=parallel)(mod.__dict__[name])


_FAST_LOAD_NUMBA = "0.68."


def _rebuild(disp, payload: bytes):
    """Numba's compile result from ``payload``, as ``cache=True`` would load it.

    Numba's own load first calls ``targetctx.refresh()``, which installs every
    lazy typing and lowering registry (it imports ``numba.np.arraymath``, which
    imports SciPy to find BLAS): about 0.4 s that a compile needs, not the
    loading of finished object code, which needs only the NRT symbols.  That
    shortcut is taken only on the Numba series it was checked with: a missing
    setup step in another version could crash rather than raise."""
    from numba.core.compiler import CompileResult
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.runtime import rtsys
    ctx = disp.targetctx
    with global_compiler_lock:
        if numba.__version__.startswith(_FAST_LOAD_NUMBA):
            rtsys.initialize(ctx)
        else:
            ctx.refresh()
        return CompileResult._rebuild(ctx, *pickle.loads(payload))


def _load(path: Path, key: str, disp, argtypes: tuple):
    """The entry point loaded from ``path``, or None on any kind of miss."""
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        _log.debug("disk cache entry %s unreadable (%s): recompiling", path, e)
        return None
    payload, why = _unpack(blob, key, argtypes)
    if payload is None:
        _log.debug("disk cache entry %s ignored: %s; recompiling", path, why)
        return None
    try:
        cres = _rebuild(disp, payload)
        if cres.objectmode or tuple(cres.signature.args) != tuple(argtypes):
            raise ValueError(f"rebuilt signature {cres.signature} is not {argtypes}")
        disp.add_overload(cres)
    except Exception as e:          # verified bytes Numba cannot use (a changed Numba internal): a miss
        _log.debug("disk cache entry %s could not be loaded (%s: %s); recompiling", path, type(e).__name__, e)
        return None
    return cres.entry_point


def _payload(disp, argtypes: tuple) -> bytes | None:
    """The serialized compile result, or None when Numba says it cannot be cached."""
    from numba.core.serialize import dumps
    cres = disp.overloads.get(tuple(argtypes))
    if cres is None or cres.objectmode or cres.library.has_dynamic_globals or cres.lifted:
        return None
    return dumps(cres._reduce())


def _warn_unusable(root: Path, e: OSError) -> None:
    if str(root) not in _warned_unusable:
        _warned_unusable.add(str(root))
        warnings.warn(f"dispatch_jit disk cache: cannot write to {root} ({e}); fused loops are compiled "
                      f"and kept in memory only. Set DISPATCH_JIT_CACHE_DIR to a writable directory, or to "
                      f"'off' to silence this.", RuntimeWarning, stacklevel=5)


def _save(root: Path, path: Path, key: str, name: str, disp, argtypes: tuple) -> None:
    try:
        payload = _payload(disp, argtypes)
    except Exception as e:          # an unpicklable constant, say: the loop still runs, uncached
        _log.debug("disk cache: loop %s not saved (%s: %s)", name, type(e).__name__, e)
        return
    if payload is None:
        return
    try:
        _write_atomic(path, _pack(key, name, argtypes, payload))
    except OSError as e:
        _warn_unusable(root, e)


def compile_cached(src: str, name: str, argtypes: tuple, parallel: bool, glb: dict, helpers: dict):
    """Compile ``src``'s function ``name`` for ``argtypes``, through the disk cache.

    Returns ``(entry point, how)``: how is ``"disk"`` (loaded from the disk
    cache), ``"compiled"`` (compiled, and saved when the cache is on and
    writable).
    """
    root = cache_dir()
    key = _key(src, argtypes, parallel, helpers)
    disp = _define(src, name, glb, parallel, f"{name}_{key[:24]}")
    if root is None:
        return disp.compile(argtypes), "compiled"
    path = entry_path(root, name, key)
    ep = _load(path, key, disp, argtypes)
    if ep is not None:
        return ep, "disk"
    ep = disp.compile(argtypes)
    _save(root, path, key, name, disp, argtypes)
    return ep, "compiled"
