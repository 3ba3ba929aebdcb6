"""``dj.compile``: trace once per signature, run the fused plan afterwards.

The hot path of a compiled function builds its key (dispatch state, default
dtype, each tensor's signature int, each other argument's type and value),
makes one dict lookup, and calls the entry.  A miss traces, optimizes, plans
and (lazily, per loop variant) compiles or loads the loop from the disk
cache (diskcache.py); or, when the call cannot be compiled, caches an eager
entry that says why.  Sizes are not in the key.  An entry whose arguments
are all positional tensors and whose plan is one fused loop runs, once that
loop is compiled, through straight-line generated code (fastpath.py).
Outputs that the passes merged (``x * 2, x * 2`` after cse) are given
separate memory again, as eager mode gives them.

CUDA tensors: the device is part of each tensor's signature, so CPU and
CUDA calls of one function are separate entries; a fused region on CUDA
tensors is one ``numba.cuda.jit`` grid-stride kernel (compiler/cuda.py),
and everything else runs through the eager dispatcher's CUDA kernels.

Autograd: when grad mode is on and a tensor input requires grad, the fused
plan runs with no graph recorded and its outputs get one node
(``CompiledBackward``, from a ``dj.autograd.Function``) whose backward
re-runs the function eagerly on detached inputs and differentiates it: the
gradients are eager mode's, the backward is not fused yet.
"""

from __future__ import annotations

import functools
import inspect
import math
import warnings
from collections import namedtuple

import numpy as np

from dispatch_jit import autograd as _autograd
from dispatch_jit.autograd import enable_grad, is_grad_enabled
from dispatch_jit.bufferpool import pool_info
from dispatch_jit.dispatcher import tls
from dispatch_jit.dtypes import get_default_dtype
from dispatch_jit.signature import decode
from dispatch_jit.tensor import Tensor, share_view, wrap_like_sig

from .codegen import last_outcome
from .fastpath import NEVER, NOT_YET, fast_runner
from .passes import optimize
from .plan import Plan, Stats
from .ir import Var
from .trace import TraceAbort, _state, install_tracer_fallback, trace
from .views import is_view, view_copies

__all__ = ["compile", "CompiledFunction", "CacheInfo"]

CacheInfo = namedtuple("CacheInfo", "calls hits traces compiles disk_hits eager_calls entries")
CacheInfo.__doc__ = """Counters of a compiled function: ``calls``; ``hits`` (signature found in the
cache); ``traces``; ``compiles`` (fused loops compiled by Numba); ``disk_hits``
(fused loops loaded from the disk cache instead); ``eager_calls`` (calls run
eagerly); ``entries`` (signatures cached)."""
_AUTOGRAD_SIG_BITS = 0b111 << (16 + 9)   # AutogradOther, AutogradCPU, AutogradCUDA
_FLOATS = frozenset([float, np.float16, np.float32, np.float64])


class _Report(str):
    """A string that shows as text at the REPL."""

    def __repr__(self):
        return str(self)


_new_tensor = object.__new__


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
    if x.__class__ in _FLOATS and not (x and x == x):
        # -0.0 == 0.0 and hashes alike, but x * -0.0 differs from x * 0.0; a NaN is unequal even to
        # itself, so as a key it would never hit
        return (type(x), "nan" if x != x else math.copysign(1.0, x))
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


def _replace_tensors(x, it):
    """``x`` with its tensors replaced, in ``_tensors`` order, by the next ones of ``it``."""
    if isinstance(x, Tensor):
        return next(it)
    if isinstance(x, (list, tuple)):
        return type(x)(_replace_tensors(y, it) for y in x)
    if isinstance(x, dict):
        return {k: _replace_tensors(v, it) for k, v in x.items()}
    return x


class _Stats(Stats):
    """``Stats`` plus ``disk_hits``.  The plan adds ``compile_source``'s "compiled"
    flag to ``compiles`` right after each call; that call's outcome tells a
    load from the disk cache."""

    def __init__(self):
        super().__init__()
        self.disk_hits = 0      # after: the base class's ``compiles = 0`` went through the setter

    @property
    def compiles(self):
        return self._compiles

    @compiles.setter
    def compiles(self, value):
        if last_outcome() == "disk":
            self.disk_hits += 1
        self._compiles = value


class _CompiledEntry:
    def __init__(self, graph, optimized, plan, notes, direct: bool = False):
        self.graph, self.optimized, self.plan, self.notes = graph, optimized, plan, notes
        self.reason = ""
        self.aliases = _aliases(graph, optimized)
        # the key says every argument is a positional tensor: they are the plan's inputs as they are,
        # and a plan of one fused loop gets a generated runner (fastpath.py) once its loop is compiled
        self.direct = direct
        self.fast = NOT_YET if direct and not self.aliases else NEVER

    def run(self, tensors):
        out = self.plan.run(tensors)
        return _unalias(out, self.aliases) if self.aliases else out

    def __call__(self, fn, args, kwargs):
        fast = self.fast
        if fast:
            return fast(*args)
        out = self.run(args if self.direct else _tensors((args, kwargs), []))
        if fast is NOT_YET:
            self.fast = fast_runner(self.plan)
        return out


def _aliases(graph, optimized) -> tuple:
    """Output positions (in ``_tensors`` order) that the passes made the same value as an
    earlier output although the function returned two different tensors (``x * 2, x * 2``
    after cse): eager mode gives those separate memory, or for views separate view
    tensors, and so must a compiled call.  ``(position, is a view)`` each."""
    traced, opt = _flat_vars(graph.outputs, []), _flat_vars(optimized.outputs, [])
    if len(set(opt)) == len(opt) or len(traced) != len(opt):
        return ()
    made_by = {v: n for n in optimized.nodes for v in n.outs}
    first, out = {}, []
    for i, (t, o) in enumerate(zip(traced, opt)):
        j = first.setdefault(o, i)
        if j != i and traced[j] != t:
            n = made_by.get(o)
            out.append((i, n is not None and is_view(n)))
    return tuple(out)


def _unalias(out, aliases):
    flat = _tensors(out, [])
    for i, view in aliases:
        t = flat[i]
        if view:
            c = _new_tensor(Tensor)
            c._data, c._sig = t._data.view(), t._sig
            share_view(c, t)                     # the version counter and base it shares
        else:
            c = wrap_like_sig(t._data.copy(), t._sig)
        flat[i] = c
    return _replace_tensors(out, iter(flat))


class Compiled(_autograd.Function):
    """One autograd node for a whole compiled call (its node reads ``CompiledBackward``).

    ``apply(entry, fn, args, kwargs, *tensors)``: forward runs the fused plan
    (grad recording is off) and returns its tensors flat; backward re-runs
    ``fn`` eagerly on detached copies of the inputs under ``enable_grad`` and
    returns ``dj.autograd.grad`` of the outputs."""

    @staticmethod
    def forward(ctx, entry, fn, args, kwargs, *tensors):
        ctx.fn, ctx.args, ctx.kwargs = fn, args, kwargs
        ctx.save_for_backward(*tensors)
        return tuple(_tensors(entry.run(list(tensors)), []))

    @staticmethod
    def backward(ctx, *grads):
        tensors = ctx.saved_tensors
        needs = ctx.needs_input_grad[4:]
        with enable_grad():
            xs = [t.detach().requires_grad_(True) if need else t.detach() for t, need in zip(tensors, needs)]
            it = iter(xs)
            out = ctx.fn(*_replace_tensors(ctx.args, it), **_replace_tensors(ctx.kwargs, it))
            pairs = [(o, g) for o, g in zip(_tensors(out, []), grads) if g is not None and o.requires_grad]
            wrt = [x for x, need in zip(xs, needs) if need]
            res = iter(_autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs], allow_unused=True)
                       if pairs and wrt else [None] * len(wrt))
        return (None, None, None, None) + tuple(next(res) if need else None for need in needs)


class _GradEntry(_CompiledEntry):
    """A compiled signature whose inputs require grad: fused forward, one autograd node."""

    reason = ""

    def __call__(self, fn, args, kwargs):
        flat = Compiled.apply(self, fn, args, kwargs, *_tensors((args, kwargs), []))
        return _fill(self.plan.outputs, iter(flat))


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
        return {"dtype": m.dtype.name, "ndim": m.ndim, "contiguous": m.contiguous, "device": m.device,
                "requires_grad": bool(s & _AUTOGRAD_SIG_BITS)}
    return {"value": s}


def _grad_obstacle(graph) -> str:
    """Why one autograd node cannot stand for the whole graph ('' if it can)."""
    outs = _flat_vars(graph.outputs, [])
    consts = {v for n in graph.nodes if n.op == "const" for v in n.outs}
    if any(v in graph.inputs for v in outs):
        return "the function returns an input tensor itself"
    if any(v in consts for v in outs):
        return "the function returns a captured tensor"
    if len(set(outs)) != len(outs):
        return "the function returns one tensor twice"
    return ""


def _fill(x, it):
    """The plan's output structure with its values (Vars) taken in order from ``it``."""
    if isinstance(x, Var):
        return next(it)
    if isinstance(x, (list, tuple)):
        return type(x)(_fill(y, it) for y in x)
    if isinstance(x, dict):
        return {k: _fill(v, it) for k, v in x.items()}
    return x


def _flat_vars(x, out: list) -> list:
    if isinstance(x, Var):
        out.append(x.id)
    elif isinstance(x, (list, tuple)):
        for y in x:
            _flat_vars(y, out)
    elif isinstance(x, dict):
        for y in x.values():
            _flat_vars(y, out)
    return out


class CompiledFunction:
    """A function compiled per input signature; see ``compile``."""

    def __init__(self, fn, *, parallel: bool = True, max_recompiles: int = 8):
        functools.update_wrapper(self, fn)
        self.fn, self.parallel, self.max_recompiles = fn, parallel, max_recompiles
        self._cache: dict = {}
        self._calls = self._hits = self._traces = 0
        self._stats = _Stats()
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
            key = (tls.k, get_default_dtype(), tuple([a._sig if a.__class__ is Tensor else _leaf_key(a) for a in args]),
                   tuple([(k, _leaf_key(v)) for k, v in kwargs.items()]) if kwargs else ())
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
        grad = is_grad_enabled() and any(t.requires_grad for t in tensors)
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
        if grad:
            why = _grad_obstacle(graph)
            if why:
                return _EagerEntry(f"inputs require grad and {why}, so the call runs eagerly")
            return _GradEntry(graph, optimized, Plan(optimized, self._stats, self.parallel), notes)
        direct = not key[3] and all(s.__class__ is int for s in key[2])     # ints: tensor signatures
        return _CompiledEntry(graph, optimized, Plan(optimized, self._stats, self.parallel), notes, direct)

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
        return CacheInfo(self._calls, self._hits, self._traces, self._stats.compiles, self._stats.disk_hits, eager,
                         len(self._cache))

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
                 f"{info.compiles} loop compiles, {info.disk_hits} loops from the disk cache, "
                 f"{info.eager_calls} eager calls, {info.entries} signatures"]
        lines.append(f"last recompile: {self._last_recompile}")
        if isinstance(self._last, _EagerEntry):
            lines.append(f"last call ran eagerly: {self._last.reason}")
        e = self._entry()
        if e is not None:
            lines.append(f"compiled plan: {len(e.plan.fused)} fused loop(s), "
                         f"{sum(1 for n in e.optimized.nodes if n.op not in ('fused', 'const'))} eager step(s)")
            for f in e.plan.fused:
                if getattr(f, "device", "cpu") == "cuda":
                    from dispatch_jit.cuda.runtime import is_simulator
                    sim = " (Numba's CUDA simulator)" if is_simulator() else ""
                    red = f.region.reduce
                    epi = (f"; {red.kind} epilogue: block partials in shared memory, merged by a second "
                           f"one-block kernel" if red is not None else "")
                    lines.append(f"  fused#{f.region.index}: device cuda, one numba.cuda.jit grid-stride "
                                 f"kernel{sim}{epi}; {f.launches} launch(es)")
                else:
                    tiled = any(len(k) == 3 for k in f.loops)
                    lines.append(f"  fused#{f.region.index}: device cpu, numba.njit loop" +
                                 (" (tiled over the last two dims: an input is read crosswise)" if tiled else ""))
            for name, why in e.notes:
                lines.append(f"  eager step {name}: {why}")
            for name, n in view_copies(e.optimized):
                lines.append(f"  view step {name} copied its input {n} time(s): its strides cannot express the "
                             f"new shape (non-contiguous or broadcast), so NumPy copied it; the result is exact")
        if isinstance(self._last, _GradEntry):
            lines.append("autograd: an input requires grad; the fused forward ran with no graph recorded and its "
                         "outputs got one CompiledBackward node, whose backward re-runs the function "
                         "eagerly and differentiates it (the backward is not fused)")
        for k, ent in self._cache.items():
            if isinstance(ent, _EagerEntry):
                lines.append(f"eager signature ({ent.calls} calls): {ent.reason}")
        pool = pool_info()
        lines.append(f"output pool (process-wide): {pool.hits} hits, {pool.misses} misses, "
                     f"{pool.free_bytes / 2**20:.1f} of {pool.bytes / 2**20:.1f} MiB free for reuse")
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
