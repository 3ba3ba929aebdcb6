"""``CompiledFunction.explain()``'s report (api.py): what the last call did, why the last
recompile happened, the compiled plan's loops and eager steps, what ran eagerly and why (every
graph break: trace/breaks.py tells each once as it happens), what the function captured, and the
process's output pool."""

from __future__ import annotations

from dispatch_jit.bufferpool import pool_info
from dispatch_jit.tensor import Tensor

from .graph.views import view_copies
from .run.cached import CompiledEntry, EagerEntry
from .trace.guards import make_reader

__all__ = ["explain_lines"]


def explain_lines(cf) -> list:
    """The report's lines for compiled function ``cf``."""
    info = cf.cache_info()
    lines = [f"{cf.__name__}: {info.calls} calls, {info.hits} cache hits, {info.traces} traces, "
             f"{info.compiles} loop compiles, {info.disk_hits} loops from the disk cache, "
             f"{info.eager_calls} eager calls, {info.entries} signatures"]
    lines.append(f"last recompile: {cf._last_recompile}")
    if cf._sized:
        lines.append("keyed by input sizes: the function reads sizes (.shape, .size(), len()), so each set of "
                     "sizes is traced and compiled once (as torch.compile's static shapes)")
    if isinstance(cf._last, EagerEntry):
        lines.append(f"last call ran eagerly: {cf._last.reason}")
    e = cf._entry()
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
    if isinstance(cf._last, CompiledEntry):
        lines += cf._last.explain_lines()
    with cf._lock:
        entries = list(cf._cache.values())
    for ent in entries:
        if isinstance(ent, EagerEntry):
            lines.append(f"eager signature ({ent.calls} calls): {ent.reason}")
    if cf._limit.calls:
        lines.append(f"calls past the recompile limit ({cf._limit.calls}) ran eagerly")
    for c in cf._captures:
        kind = "an implicit input, read at every call" if isinstance(_peek(c), Tensor) else \
            "guarded: a change retraces"
        lines.append(f"captured {c.label}: {kind}")
    for (where, k), why in cf._by_value.items():
        name = cf._arg_name(k) if where == "a" else f"'{k}'"
        lines.append(f"scalar argument {name} is keyed by value: {why}")
    pool = pool_info()
    lines.append(f"output pool (process-wide): {pool.hits} hits, {pool.misses} misses, "
                 f"{pool.free_bytes / 2**20:.1f} of {pool.bytes / 2**20:.1f} MiB free for reuse")
    if cf._stats.region_eager_runs:
        lines.append(f"fused regions run eagerly {cf._stats.region_eager_runs} time(s); last: "
                     f"{cf._stats.region_eager_reason}")
    return lines


def _peek(c):
    try:
        return make_reader([c])(())[1][0]
    except Exception:          # an argument's attribute, or gone since: nothing to show
        return None
