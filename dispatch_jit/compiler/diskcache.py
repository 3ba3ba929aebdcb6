"""The on-disk cache of fused loops, so that a fresh process does not recompile.

Numba can cache a function's machine code (``cache=True``), but only for a
function defined in a real file: it keys the cache by that file's path and
its modification time and size.  So each generated loop is written, once, to
its own file in the cache directory, named by a hash of everything the
machine code depends on:

1. the generated source, the argument types and the ``parallel`` flag;
2. the Numba and llvmlite versions, Python's version, and the CPU target
   (host CPU name and features, as LLVM sees them);
3. the source files of the scalar helpers the loops call (``_jit_where``,
   ...), since Numba does not track a callee's changes.

The loop is then defined by executing that file's text under its path and
njit-compiled with ``cache=True``: Numba loads its index (``.nbi``) and
object code (``.nbc``) from ``__pycache__`` next to the file, or compiles and
saves them.  An existing file is never rewritten under the same name (that
would make Numba's entry stale), except to replace a corrupt one.

Trust: after each save, a ``.sum`` file records the SHA-256 of Numba's files.
Before a load they are checked; a corrupt or truncated file (or a generated
source that differs from what it should be) is deleted with a warning and
the loop is recompiled, never loaded.  Numba files without a ``.sum`` are
unverified and deleted quietly (another process may have died mid-save).

The directory: ``DISPATCH_JIT_CACHE_DIR``; unset, ``$XDG_CACHE_HOME/dispatch_jit``
or ``~/.cache/dispatch_jit``; empty, ``0``, ``off``, ``false`` or ``no``
turns the disk cache off (loops are then cached in memory only).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import types
import warnings
from pathlib import Path

import llvmlite
import numba

__all__ = ["cache_dir", "compile_cached", "target_tag"]

_FORMAT = 1                 # bump when the file layout or the compile flags change
_OFF = {"", "0", "off", "false", "no"}
_tag: list = []             # [target tag], computed once
_warned_unusable: set = set()


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


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_new(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically; if another process got there first, keep its file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".py")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        try:
            os.link(tmp, path)              # fails if the name exists: never rewrite a live entry
        except FileExistsError:
            pass
        except OSError:                     # no hard links here
            if not path.exists():
                os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _write_replace(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class _Entry:
    """The files of one cached loop: ``<stem>.py``, ``<stem>.sum`` and Numba's ``__pycache__/<stem>.*``."""

    def __init__(self, root: Path, stem: str):
        self.py = root / f"{stem}.py"
        self.sum = root / f"{stem}.sum"
        self.stem = stem

    def numba_files(self, cache_path: Path) -> list[Path]:
        return sorted(p for p in cache_path.glob(f"{self.stem}.*") if p.suffix in (".nbi", ".nbc"))

    def clear(self, cache_path: Path | None) -> None:
        for p in [self.sum] + (self.numba_files(cache_path) if cache_path else []):
            try:
                p.unlink()
            except FileNotFoundError:
                pass

    def verify(self, cache_path: Path) -> str | None:
        """None if Numba's files may be loaded (or there are none); else why not."""
        files = self.numba_files(cache_path)
        if not files:
            return None
        try:
            recorded = json.loads(self.sum.read_text())
        except FileNotFoundError:
            self.clear(cache_path)          # unverified (a save was cut short): drop quietly
            return None
        except (OSError, ValueError) as e:
            return f"its checksum file is unreadable ({type(e).__name__})"
        for p in files:
            if p.name not in recorded:
                return f"{p.name} is not in its checksum file"
        for name, digest in recorded.items():
            p = cache_path / name
            try:
                if _sha(p) != digest:
                    return f"{name} does not match its checksum (corrupt or truncated)"
            except FileNotFoundError:
                return f"{name} is missing"
        return None

    def record(self, cache_path: Path) -> None:
        _write_replace(self.sum, json.dumps({p.name: _sha(p) for p in self.numba_files(cache_path)}))


def _warn(msg: str) -> None:
    warnings.warn(f"dispatch_jit disk cache: {msg}", RuntimeWarning, stacklevel=4)


def _njit(text: str, filename: str, name: str, glb: dict, parallel: bool, cache: bool, stem: str = ""):
    if stem:
        # a cached function must live in an importable module: Numba imports it by name on load
        mod = types.ModuleType(f"_dispatch_jit_loop_{stem}")
        mod.__file__ = filename
        sys.modules[mod.__name__] = mod
        g = mod.__dict__
        g.update(glb)
    else:
        g = dict(glb)
    exec(compile(text, filename, "exec"), g)
    return numba.njit(parallel=parallel, error_model="numpy", nogil=parallel, cache=cache)(g[name])


_FAST_LOAD_NUMBA = "0.68."


def _fast_load(disp, argtypes):
    """Load a verified entry as ``Dispatcher.compile`` would, minus its ``targetctx.refresh()``.

    The refresh installs every lazy typing and lowering registry of Numba
    (it imports ``numba.np.arraymath``, which imports SciPy to find BLAS): about
    0.4 s that only a compile needs, not the loading of finished object code.
    Internal Numba API, so any failure returns None and the caller takes the
    ordinary path.  Only on the Numba series it was checked with: a missing
    setup step in another version could crash rather than raise."""
    if not numba.__version__.startswith(_FAST_LOAD_NUMBA):
        return None
    try:
        from numba.core.compiler_lock import global_compiler_lock
        from numba.core.runtime import rtsys
        with global_compiler_lock:
            rtsys.initialize(disp.targetctx)     # the part of refresh() that loaded code needs: NRT symbols
            cres = disp._cache._load_overload(argtypes, disp.targetctx)
        if cres is None or cres.objectmode:
            return None
        disp.add_overload(cres)
        return cres.entry_point
    except Exception:
        return None


def compile_cached(src: str, name: str, argtypes: tuple, parallel: bool, glb: dict, helpers: dict):
    """Compile ``src``'s function ``name`` for ``argtypes``, through the disk cache.

    Returns ``(entry point, how)``: how is ``"disk"`` (loaded from the disk
    cache), ``"compiled"`` (compiled, and saved when the cache is on).
    """
    root = cache_dir()
    if root is None:
        disp = _njit(src, f"<dispatch_jit {name}>", name, glb, parallel, cache=False)
        return disp.compile(argtypes), "compiled"
    key = hashlib.sha256("\0".join([src, repr(argtypes), repr(parallel), target_tag(helpers)]).encode())
    stem = f"{name}_{key.hexdigest()[:24]}"
    text = (f"# dispatch_jit generated loop; do not edit (the name is a hash of this text and its target)\n"
            f"# {target_tag(helpers)[:200]}\n" + src)
    try:
        root = root / "cpu"
        root.mkdir(parents=True, exist_ok=True)
        entry = _Entry(root, stem)
        try:
            on_disk = entry.py.read_text()
        except FileNotFoundError:
            on_disk = None
        except (OSError, UnicodeDecodeError):
            on_disk = ""
        if on_disk is None:
            _write_new(entry.py, text)
        elif on_disk != text:
            _warn(f"{entry.py} is corrupt; recompiling")
            entry.py.unlink()
            _write_new(entry.py, text)
        disp = _njit(text, str(entry.py), name, glb, parallel, cache=True, stem=stem)
        cache_path = Path(disp._cache._cache_path)
        if on_disk is not None and on_disk != text:
            entry.clear(cache_path)
        why = entry.verify(cache_path)
        if why is not None:
            _warn(f"entry {stem}: {why}; recompiling")
            entry.clear(cache_path)
            disp = _njit(text, str(entry.py), name, glb, parallel, cache=True, stem=stem)
        loading = bool(entry.numba_files(cache_path))
    except OSError as e:
        if str(root) not in _warned_unusable:
            _warned_unusable.add(str(root))
            _warn(f"cannot use {root} ({e}); compiling in memory only")
        disp = _njit(src, f"<dispatch_jit {name}>", name, glb, parallel, cache=False)
        return disp.compile(argtypes), "compiled"
    if loading:
        ep = _fast_load(disp, argtypes)
        if ep is not None:
            return ep, "disk"
    try:
        ep = disp.compile(argtypes)
    except Exception as e:           # a load that failed in Numba itself: drop the entry, compile afresh
        if not loading:
            raise
        _warn(f"entry {stem} could not be loaded ({type(e).__name__}: {e}); recompiling")
        entry.clear(cache_path)
        disp = _njit(text, str(entry.py), name, glb, parallel, cache=True, stem=stem)
        ep = disp.compile(argtypes)
    if sum(disp.stats.cache_hits.values()):
        return ep, "disk"
    try:
        entry.record(cache_path)
    except OSError:
        pass
    return ep, "compiled"
