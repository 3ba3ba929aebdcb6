"""``dj.compile``: trace once per signature, run the fused plan afterwards.

The hot path of a compiled function builds its key (dispatch state, default
dtype, each tensor's signature int, each other argument's type and value),
makes one dict lookup, and calls the entry.  A miss traces, optimizes, plans
and (lazily, per loop variant) compiles; or, when the call cannot be
compiled, caches an eager entry that says why.  Sizes are not in the key.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections import namedtuple

from dispatch_jit.autograd import is_grad_enabled
from dispatch_jit.dispatcher import tls
from dispatch_jit.dtypes import get_default_dtype
from dispatch_jit.signature import decode
from dispatch_jit.tensor import Tensor

from .passes import optimize
from .plan import Plan, Stats
from .trace import TraceAbort, _state, install_tracer_fallback, trace

__all__ = ["compile", "CompiledFunction", "CacheInfo"]

CacheInfo = namedtuple("CacheInfo", "calls hits traces compiles eager_calls entries")
_AUTOGRAD_SIG_BITS = 0b111 << (16 + 9)   # AutogradOther, AutogradCPU, AutogradCUDA


class _Report(str):
    """A string that shows as text at the REPL."""

    def __repr__(self):
        return str(self)


class _Unhashable(Exception):
    pass


def _leaf_key(x):
    if x.__class__ is Tensor or isinstance(x, Tensor):
        return x._sig
    if isinstance(x, (list, tuple)):
        return (type(x),) + tuple(_leaf_key(y) for y in x)
    if isinstance(x, dict):
        return (dict,) + tuple((k, _leaf_key(v)) for k, v in x.items())
    try:
        hash(x)
    except TypeError:
        raise _Unhashable(type(x).__name__) from None
    return (type(x), x)


def _tensors(x, out: list) -> list:
    if isinstance(x, Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            _tensors(y, out)
    elif isinstance(x, dict):
        for y in x.values():
            _tensors(y, out)
    return out


class _CompiledEntry:
    def __init__(self, graph, optimized, plan, notes):
        self.graph, self.optimized, self.plan, self.notes = graph, optimized, plan, notes
        self.reason = ""

    def __call__(self, fn, args, kwargs):
        return self.plan.run(_tensors((args, kwargs), []))


class _EagerEntry:
    def __init__(self, reason: str):
        self.reason = reason
        self.calls = 0

    def __call__(self, fn, args, kwargs):
        self.calls += 1
        return fn(*args, **kwargs)


def _describe_sig(s) -> dict:
    if isinstance(s, int) and s >= 0:
        m = decode(s)
        return {"dtype": m.dtype.name, "ndim": m.ndim, "contiguous": m.contiguous,
                "requires_grad": bool(s & _AUTOGRAD_SIG_BITS)}
    return {"value": s}


class CompiledFunction:
    """A function compiled per input signature; see ``compile``."""

    def __init__(self, fn, *, parallel: bool = True, max_recompiles: int = 8):
        functools.update_wrapper(self, fn)
        self.fn, self.parallel, self.max_recompiles = fn, parallel, max_recompiles
        self._cache: dict = {}
        self._calls = self._hits = self._traces = 0
        self._stats = Stats()
        self._last = None
        self._last_recompile = "no recompile yet"
        self._warned = False
        try:
            self._params = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            self._params = []

    # -- hot path ------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        self._calls += 1
        if _state.tracer is not None:     # called inside another trace: inline it
            return self.fn(*args, **kwargs)
        try:
            key = (tls.k, get_default_dtype(), tuple(a._sig if a.__class__ is Tensor else _leaf_key(a) for a in args),
                   tuple((k, _leaf_key(v)) for k, v in kwargs.items()) if kwargs else ())
        except _Unhashable as e:
            return self._eager_once(f"an argument of type {e} is not hashable (not part of a cache key)",
                                    args, kwargs)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._miss(key, args, kwargs)
        else:
            self._hits += 1
        self._last = entry
        return entry(self.fn, args, kwargs)

    # -- miss path -----------------------------------------------------------------------
    def _eager_once(self, reason, args, kwargs):
        entry = _EagerEntry(reason)
        self._last = entry
        return entry(self.fn, args, kwargs)

    def _miss(self, key, args, kwargs):
        if self._cache:
            self._last_recompile = self._diff(key)
        entry = self._build(key, args, kwargs)
        self._cache[key] = entry
        return entry

    def _build(self, key, args, kwargs):
        tensors = _tensors((args, kwargs), [])
        if is_grad_enabled():
            for i, t in enumerate(tensors):
                if t.requires_grad:
                    return _EagerEntry(f"input tensor {i} requires grad: compiled mode has no autograd yet, "
                                       f"so the call runs eagerly to keep gradients correct")
        compiled = sum(isinstance(e, _CompiledEntry) for e in self._cache.values())
        if compiled >= self.max_recompiles:
            if not self._warned:
                self._warned = True
                warnings.warn(f"{self.__name__}: recompile limit ({self.max_recompiles}) reached; new signatures "
                              f"run eagerly. Last change: {self._last_recompile}", RuntimeWarning, stacklevel=4)
            return _EagerEntry(f"recompile limit ({self.max_recompiles}) reached")
        self._traces += 1
        try:
            graph = trace(self.fn, args, kwargs)
        except TraceAbort as e:
            return _EagerEntry(f"trace aborted: {e.reason}")
        optimized, notes = optimize(graph)
        return _CompiledEntry(graph, optimized, Plan(optimized, self._stats, self.parallel), notes)

    def _arg_name(self, i) -> str:
        return f"'{self._params[i]}'" if i < len(self._params) else f"#{i}"

    def _diff(self, key) -> str:
        """Which part of the key differs from the closest cached key."""
        best = None
        for old in self._cache:
            changes = []
            if old[0] != key[0]:
                changes.append("dispatch state (grad mode, included/excluded keys) changed")
            if old[1] != key[1]:
                changes.append(f"default dtype {old[1].name} -> {key[1].name}")
            if len(old[2]) != len(key[2]) or [k for k, _ in old[3]] != [k for k, _ in key[3]]:
                changes.append("argument count or keyword names changed")
            else:
                pairs = [(self._arg_name(i), a, b) for i, (a, b) in enumerate(zip(old[2], key[2]))]
                pairs += [(f"'{k}'", a, b) for (k, a), (_, b) in zip(old[3], key[3])]
                for name, a, b in pairs:
                    if a == b:
                        continue
                    da, db = _describe_sig(a), _describe_sig(b)
                    parts = [f"{f} {da.get(f)} -> {db.get(f)}" for f in sorted(set(da) | set(db))
                             if da.get(f) != db.get(f)]
                    changes.append(f"argument {name}: {', '.join(parts)}")
            if best is None or len(changes) < len(best):
                best = changes
        return "; ".join(best) if best else "same key"

    # -- introspection -------------------------------------------------------------------
    def cache_info(self) -> CacheInfo:
        eager = sum(e.calls for e in self._cache.values() if isinstance(e, _EagerEntry))
        return CacheInfo(self._calls, self._hits, self._traces, self._stats.compiles, eager, len(self._cache))

    def _entry(self):
        last = self._last
        if isinstance(last, _CompiledEntry):
            return last
        for e in reversed(list(self._cache.values())):
            if isinstance(e, _CompiledEntry):
                return e
        return None

    def graph(self) -> _Report:
        """The IR of the last compiled signature, before and after the passes."""
        e = self._entry()
        if e is None:
            return _Report("no compiled signature yet")
        return _Report(f"-- traced --\n{e.graph}\n-- after dce, cse, fusion --\n{e.optimized}")

    def code(self, flat: bool = True) -> str:
        """The generated source of every fused loop of the last compiled signature."""
        e = self._entry()
        if e is None:
            return ""
        return "\n".join(f.source(flat) for f in e.plan.fused)

    def show_code(self, flat: bool = True) -> None:
        print(self.code(flat) or "# no fused loops")

    def explain(self) -> _Report:
        """What the last call did, why the last recompile happened, and what ran eagerly."""
        info = self.cache_info()
        lines = [f"{self.__name__}: {info.calls} calls, {info.hits} cache hits, {info.traces} traces, "
                 f"{info.compiles} loop compiles, {info.eager_calls} eager calls, {info.entries} signatures"]
        lines.append(f"last recompile: {self._last_recompile}")
        if isinstance(self._last, _EagerEntry):
            lines.append(f"last call ran eagerly: {self._last.reason}")
        e = self._entry()
        if e is not None:
            lines.append(f"compiled plan: {len(e.plan.fused)} fused loop(s), "
                         f"{sum(1 for n in e.optimized.nodes if n.op not in ('fused', 'const'))} eager step(s)")
            for name, why in e.notes:
                lines.append(f"  eager step {name}: {why}")
        for k, ent in self._cache.items():
            if isinstance(ent, _EagerEntry):
                lines.append(f"eager signature ({ent.calls} calls): {ent.reason}")
        if self._stats.region_eager_runs:
            lines.append(f"fused regions run eagerly {self._stats.region_eager_runs} time(s); last: "
                         f"{self._stats.region_eager_reason}")
        return _Report("\n".join(lines))

    def __repr__(self):
        return f"<compiled {self.__name__}>"


def compile(fn=None, *, parallel: bool = True, max_recompiles: int = 8):
    """Compile ``fn``: trace it once per input signature (dtypes, ndim,
    contiguity; never sizes), fuse its elementwise ops into Numba loops, and
    run everything else through the eager dispatcher.

    Args:
        fn: the function; its tensor arguments may be positional, keyword,
            or nested in lists/tuples/dicts.  Other arguments are part of the
            key by value.
        parallel: use ``prange`` for large outputs.
        max_recompiles: signatures to compile before new ones run eagerly.

    >>> import dispatch_jit as dj
    >>> from dispatch_jit.compiler import compile
    >>> @compile
    ... def f(a, b):
    ...     return dj.maximum(a * b + 1.0, 0.0)
    >>> f(dj.tensor([1.0, -2.0]), dj.tensor([3.0, 4.0]))
    tensor([4., 0.])
    >>> f.cache_info().traces
    1
    """
    if fn is None:
        return lambda f: CompiledFunction(f, parallel=parallel, max_recompiles=max_recompiles)
    return CompiledFunction(fn, parallel=parallel, max_recompiles=max_recompiles)


install_tracer_fallback()
