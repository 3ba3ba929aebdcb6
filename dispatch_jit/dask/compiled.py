"""Compiled mode on Dask tensors: a fused region becomes one task per chunk.

Each Dask tensor that an elementwise op or a reduction made remembers how
(``DaskTensor._origin``: the op, its argument template, its input tensors),
so the tensors of a computation form a graph of their own, alongside Dask's.
``fuse(t)`` walks it back from ``t`` and lowers each maximal elementwise
region (optionally ending in a reduction) to a *program*: straight-line
Python source calling the same ops, which ``dj.compile`` turns into one
generated Numba loop.  The region becomes one ``blockwise`` task per output
chunk running that program on the chunk's blocks (for a reduction: the loop
with its reduction epilogue per chunk, then Dask's tree combine with
dispatch_jit's kernel), so the graph's size does not grow with the chain's
length.  Anything else (matmul, views, argmax, ...) is a leaf: its graph
stays as the eager kernels built it, and the regions above it fuse over it.

The program travels in the task as its source (a few hundred bytes); each
process compiles it once (``_PROGRAMS``, keyed by the source) and its loop
once per signature, or loads the loop from the compiled mode's disk cache.

Where a value cannot be written into a program (an argument of a type the
program cannot carry), the region keeps the eager graph: slower, never wrong.
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from ..tensor import wrap
from .blocks import ARRAY, reduce_blocks
from .tensor import DaskTensor, wrap_dask

__all__ = ["fuse", "run_program", "program_info", "DaskEntry", "build_entry"]

_LITERALS = (type(None), bool, int, str)
_PROGRAMS: dict = {}          # program source -> its compiled function, in this process
_LOCK = threading.Lock()


# -- on the workers: run a program on a chunk's blocks -----------------------------------------
def _compiled(src: str):
    f = _PROGRAMS.get(src)
    if f is None:
        with _LOCK:
            f = _PROGRAMS.get(src)
            if f is None:
                from ..compiler import compile as dj_compile
                from ..jit.source import define
                from ..ops import ops
                f = _PROGRAMS[src] = dj_compile(define(src, "chunk", {"aten": ops.aten}, "<dispatch_jit dask chunk program>"))
    return f


def run_program(src: str, consts: tuple, *blocks) -> np.ndarray:
    """The program ``src`` on one chunk: its blocks (CPU tensors over them, no copy), then ``consts``."""
    args = [wrap(b if isinstance(b, np.ndarray) else np.asarray(b)) for b in blocks]
    args += [wrap(c) if isinstance(c, np.ndarray) else c for c in consts]
    return _compiled(src)(*args).numpy()


def program_info() -> dict:
    """``{program source: its compiled function's cache_info()}`` in this process (a worker's, with
    ``client.run(program_info)``): how often each program traced and compiled here."""
    return {src: f.cache_info() for src, f in list(_PROGRAMS.items())}


def _identity(x, axis=None, keepdims=None, computing_meta=False):
    return x     # the partial results are already reduced per chunk: da.reduction's chunk step


# -- lowering: the tensors' graph -> programs -> one blockwise per region ---------------------------
class _Opaque(Exception):
    """A value the program cannot carry: the region keeps its eager graph."""


class _Region:
    def __init__(self):
        self.lines: list[str] = []
        self.leaves: list = []         # Dask arrays, in argument order
        self.consts: list = []
        self.names: dict = {}          # id(tensor) -> its variable in the program
        self.ops = 0

    def value(self, t) -> str:
        var = self.names.get(id(t))
        if var is not None:
            return var
        o = t._origin
        if o is None or o[0] != "ew":
            var = f"x{len(self.leaves)}"
            self.leaves.append(_lowered(t))
        else:
            _, name, template, kwargs, inputs = o
            it = iter(inputs)
            args = [self.value(next(it)) if a is ARRAY else self.const(a) for a in template]
            args += [f"{k}={self.const(v)}" for k, v in kwargs.items()]
            var = f"v{len(self.lines)}"
            self.lines.append(f"    {var} = {_handle(name)}({', '.join(args)})")
            self.ops += 1
        self.names[id(t)] = var
        return var

    def const(self, v) -> str:
        if type(v) in _LITERALS:       # a float is an argument: the loop takes it at run time
            return repr(v)
        if isinstance(v, (list, tuple)) and all(type(x) in (int, bool) for x in v):
            return repr(v)
        if isinstance(v, (list, tuple, dict, set)):
            raise _Opaque(f"a {type(v).__name__} argument")
        self.consts.append(v)
        return f"k{len(self.consts) - 1}"

    def source(self, result: str) -> str:
        params = [f"x{i}" for i in range(len(self.leaves))] + [f"k{i}" for i in range(len(self.consts))]
        return "\n".join([f"def chunk({', '.join(params)}):"] + self.lines + [f"    return {result}", ""])


def _handle(name: str) -> str:
    packet, _, overload = name.split("::", 1)[1].partition(".")
    return f"aten.{packet}.{overload or 'default'}"


def _pairs(leaves: list, ndim: int) -> list:
    out_ind = tuple(range(ndim))
    pairs = []
    for a in leaves:
        pairs += [a, out_ind[ndim - a.ndim:]]
    return pairs


def _region_array(ndim: int, region: _Region, result: str, dtype, **blockwise_kw):
    """One blockwise task per output chunk, running the region's program on the chunk's blocks."""
    import dask.array as da
    from dask.base import tokenize
    src = region.source(result)
    fn = functools.partial(run_program, src, tuple(region.consts))
    return da.blockwise(fn, tuple(range(ndim)), *_pairs(region.leaves, ndim), dtype=dtype,
                        meta=np.empty((0,) * ndim, dtype), name="dj-fused-" + tokenize(src, region.consts,
                                                                                        *region.leaves),
                        **blockwise_kw)


def _lowered(t: DaskTensor):
    """``t``'s Dask array with the regions below it fused (memoized on the tensor)."""
    fused = t._fused
    if fused is None:
        try:
            fused = _lower(t)
        except _Opaque:
            fused = t._data
        t._fused = fused
    return fused


def _lower(t: DaskTensor):
    o = t._origin
    if o is None:
        return t._data
    if o[0] == "ew":
        region = _Region()
        result = region.value(t)
        return _region_array(t.ndim, region, result, t._data.dtype)
    return _lower_reduction(t, *o[1:])


def _lower_reduction(t: DaskTensor, name: str, axes: list, keepdims: bool, extra: dict, x: DaskTensor):
    """The region under the reduction, with the reduction per chunk as its epilogue (keepdims, so a
    chunk's partial result keeps its place), then Dask's tree combine with our kernel."""
    import dask.array as da
    if x._origin is None or x._origin[0] != "ew":
        return t._data                       # nothing to fuse under it: the eager graph is the same
    region = _Region()
    v = region.value(x)
    kw = "".join(f", {k}={region.const(val)}" for k, val in extra.items())
    result = f"{_handle(name)}({v}, {list(axes)!r}, True{kw})"
    dt = t._data.dtype
    partials = _region_array(x.ndim, region, result, dt, adjust_chunks={a: 1 for a in axes})
    combine = functools.partial(reduce_blocks, name, {})
    return da.reduction(partials, _identity, combine, combine=combine, axis=tuple(axes), keepdims=keepdims,
                        dtype=dt, concatenate=True, meta=t._data._meta, name=f"dj-fused-{name.split('::')[1]}")


def fuse(out):
    """``out`` (a tensor, or a tuple/list of them) with each Dask tensor's regions fused."""
    if isinstance(out, DaskTensor):
        return wrap_dask(_lowered(out)) if out._origin is not None else out
    if isinstance(out, (tuple, list)) and any(isinstance(o, DaskTensor) for o in out):
        return type(out)(fuse(o) for o in out)
    return out


DaskTensor._fuse = staticmethod(fuse)


# -- the compiled function's entry for calls on Dask tensors (compiler/backends.py) -----------------
class DaskEntry:
    """A signature with Dask tensors: the function runs on them eagerly, which builds the graph
    (metadata only: dtypes, shapes and errors are eager mode's), then its regions are fused."""

    stale = None
    reason = "Dask tensors: each elementwise region (+ reduction) is one blockwise task per chunk"

    def __init__(self):
        self.calls = 0

    def __call__(self, fn, args, kwargs, caps=()):
        self.calls += 1
        return fuse(fn(*args, **kwargs))


def build_entry(compiled_function) -> DaskEntry:
    return DaskEntry()
