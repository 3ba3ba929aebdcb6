"""The one compile cache: generated source (or a Numba function) plus its signature and
options -> the compiled entry point.

Staged as Numba's own dispatcher is: an entry already in memory? -> on disk
(every CPU kernel, when the disk cache is on; see diskcache.py)? -> compile.
The stage that answers is the call's outcome, "memory", "disk" or
"compiled", decided and counted here, once, per *kind* (who asked: "loop"
for the compiler's fused loops, "cuda" for ``numba.cuda.jit`` kernels,
"elementwise", "reduction", "linalg", "quantized", "sparse" for the eager CPU
kernels).  Kernels that Numba's own type dispatch calls (``on_disk``) count
their disk loads and compiles here too; their calls from memory are Numba's.

A first use that races in several threads compiles once: the miss path
takes the kind's lock and looks again.  A hit is one dict lookup and takes
no lock; its "memory" count is a plain increment (exact while the GIL
serializes it, as it does for an ``int`` attribute update in CPython).

>>> import numba
>>> src = "def twice(x):\\n    return x * 2\\n"
>>> ep, how = njit_source("doctest", src, "twice", (numba.types.int64,), {})
>>> ep(21), how, njit_source("doctest", src, "twice", (numba.types.int64,), {})[1]
(42, 'compiled', 'memory')
>>> counts("doctest")
{'memory': 1, 'disk': 0, 'compiled': 1}
"""

from __future__ import annotations

import threading

import numba

from . import diskcache, source, vectors

__all__ = ["lookup", "njit_source", "njit_function", "on_disk", "signatures", "entries", "counts", "totals", "size", "keys",
           "last_outcome"]

_ENTRIES: dict = {}          # kind -> {key: entry point}
_COUNTS: dict = {}           # kind -> {"memory": n, "disk": n, "compiled": n}
_LOCKS: dict = {}            # kind -> its lock (only the miss path takes it)
_SIGNATURES: dict = {}       # kind -> {function name: [compiled Numba signatures, in order]}


class _Outcome(threading.local):
    def __init__(self):
        self.last = {}


_outcome = _Outcome()


def _kind(kind: str) -> dict:
    entries = _ENTRIES.get(kind)
    if entries is None:
        # setdefault is atomic: two threads making a kind's tables end up sharing one
        _LOCKS.setdefault(kind, threading.RLock())
        _COUNTS.setdefault(kind, {"memory": 0, "disk": 0, "compiled": 0})
        entries = _ENTRIES.setdefault(kind, {})
    return entries


def lookup(kind: str, key, build):
    """``(entry point, how)`` for ``key``: from memory, else ``build()``, which returns
    ``(entry point, "disk" | "compiled")``, called once per key even when threads race.

    ``key`` must determine the entry point completely (source, argument types,
    options, and any globals the source reads)."""
    entries = _kind(kind)
    ep = entries.get(key)
    if ep is None:
        with _LOCKS[kind]:
            ep = entries.get(key)
            if ep is None:
                ep, how = build()
                entries[key] = ep
                _COUNTS[kind][how] += 1
                _outcome.last[kind] = how
                return ep, how
    _COUNTS[kind]["memory"] += 1
    _outcome.last[kind] = "memory"
    return ep, "memory"


def njit_source(kind: str, src: str, name: str, argtypes: tuple, glb: dict, *, parallel: bool = False,
                options: dict | None = None, key=(), disk: bool = False, filename: str = ""):
    """``(entry point, how)``: ``numba.njit`` of the function ``name`` that ``src`` defines,
    with ``glb`` as its globals (or what ``glb()`` returns, built only on a miss), compiled
    for ``argtypes``.

    Options default to the generated loops' ``parallel=parallel, error_model="numpy",
    nogil=parallel`` (nogil only where the loop is long: releasing the GIL costs
    ~100 ns a call).  ``key`` adds what ``glb`` varies by; ``disk`` looks the kernel up
    in the disk cache (diskcache.py, keyed by the source, the values of the globals it
    names, the options and the argument types) before compiling it, and saves it there."""
    opts = options if options is not None else {"parallel": parallel, "error_model": "numpy", "nogil": parallel}
    full_key = (src, name, argtypes, tuple(sorted(opts.items(), key=lambda kv: kv[0])), key)

    def build():
        g = dict(glb() if callable(glb) else glb)
        if disk:
            return diskcache.compile_cached(src, name, argtypes, opts, g)
        wide, g = vectors.widen(src, name, g)
        fn = source.define(wide, name, g, filename or f"<dispatch_jit {kind} {name}>")
        return numba.njit(**opts)(fn).compile(argtypes), "compiled"

    return lookup(kind, full_key, build)


def njit_function(kind: str, key, name: str, func, sig: tuple):
    """The entry point of the ``numba.njit`` function ``func`` compiled for the Numba
    signature ``sig``, cached under ``key`` (which must determine ``sig``: a kernel's
    per-call path may key on what is cheaper to build, e.g. ``(name, dtype)``), in memory
    and on disk (``func``'s compiles go through the disk cache: diskcache.attach).  Each
    signature compiled or loaded is recorded under ``name`` for ``signatures(kind)``."""
    def build():
        slot = diskcache.attach(func, name)
        ep = func.compile(sig)
        _SIGNATURES.setdefault(kind, {}).setdefault(name, []).append(f"({', '.join(map(str, sig))})")
        # no outcome: Numba held the overload already (compiled as another kernel's callee)
        return ep, slot.outcome(sig) or "memory"
    return lookup(kind, key, build)[0]


def on_disk(kind: str, func):
    """``func`` (a ``numba.njit`` function called through Numba's own type dispatch), its
    compiles for new argument types going through the disk cache and counted under ``kind``
    as "disk" or "compiled" (its calls from memory are not counted: Numba's dispatch
    answers them).  Returns ``func``.

    >>> import numba
    >>> inc = on_disk("doctest_on_disk", numba.njit(lambda x: x + 1))
    >>> inc(1), sum(counts("doctest_on_disk").values())
    (2, 1)
    """
    _kind(kind)
    tally = _COUNTS[kind]

    def note(how):
        # called inside Dispatcher.compile, under Numba's global compiler lock: serialized already
        # (taking the kind's lock here would invert njit_function's lock order)
        tally[how] += 1
    diskcache.attach(func, on_outcome=note)
    return func


def signatures(kind: str) -> dict[str, list[str]]:
    """Function name -> the Numba signatures ``njit_function`` compiled for ``kind`` so far."""
    return {name: list(sigs) for name, sigs in _SIGNATURES.get(kind, {}).items()}


def entries(kind: str) -> dict:
    """``kind``'s entries, key -> entry point: the live table, for a kernel's per-call path
    to read with one ``.get`` before it falls back to ``lookup`` (such a hit is not counted).
    Never written to but by ``lookup``."""
    return _kind(kind)


def counts(kind: str) -> dict:
    """``{"memory": n, "disk": n, "compiled": n}``: how ``kind``'s lookups were answered."""
    _kind(kind)
    return dict(_COUNTS[kind])


def totals() -> dict:
    """``counts`` summed over every kind: how all lookups so far were answered.

    >>> set(totals()) == {"memory", "disk", "compiled"}
    True
    """
    out = {"memory": 0, "disk": 0, "compiled": 0}
    for c in list(_COUNTS.values()):
        for how, n in c.items():
            out[how] += n
    return out


def size(kind: str) -> int:
    """Entry points of ``kind`` held in memory (compiled or loaded from disk)."""
    return len(_kind(kind))


def keys(kind: str) -> list:
    """The keys of ``kind``'s entries, in the order they were made."""
    return list(_kind(kind))


def last_outcome(kind: str) -> str | None:
    """What this thread's last lookup of ``kind`` did ("memory", "disk", "compiled"), once:
    reading it clears it."""
    return _outcome.last.pop(kind, None)
