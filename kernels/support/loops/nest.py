"""Loop nests: the one place that writes the ``for`` statements of a generated CPU kernel.

An eager elementwise kernel is a region of one node; a fused region of compiled
mode is many.  Both ask ``Nest`` for the loops around their per-element body, so
both walk the elements in the same order with the same parallel split, and read
their operands through the same ``read_cast``: a fused chain then stores the bits
eager mode stores, by construction rather than by mirrored code.

Shapes of a nest (``kind``):

* ``"flat"``: every operand C-contiguous and of the iteration shape: one 1-D loop
  over ``reshape(size)`` views, which LLVM vectorizes;
* ``"strided"``: one loop per dimension over NumPy broadcast views (zero strides
  where an operand is broadcast, so nothing is copied); 0-d is the body alone;
* ``"tiled"``: strided, the last two dimensions walked in ``TILE`` blocks, for an
  input read crosswise (a transposed view, see ``crosswise``).

The outermost loop is ``prange``; the generated function's globals bind
``prange`` to ``numba.prange`` or to ``range`` (``loop_globals``), so one source
serves the serial and the parallel compile.

>>> n = Nest("strided", 2, ["a0"], ["o0"])
>>> print("\\n".join(n.setup + n.loop(lambda at: [f"{at('o0')} = {at('a0')} + 1"])))
    n0, n1 = o0.shape
    for i0 in prange(n0):
        for i1 in range(n1):
            o0[i0, i1] = a0[i0, i1] + 1
"""

from __future__ import annotations

import cmath
import math
from typing import Callable

import numba
import numpy as np

from dispatch_jit.dtypes import ALL_DTYPES, bfloat16, float16

from ..numba_types import JIT_HELPERS
from ..sincos_f32 import GUARD_GLOBALS

__all__ = ["Nest", "read_cast", "store", "type_fn", "TYPE_FNS", "constant", "loop_globals", "crosswise", "GUARD_CHUNK", "TILE",
           "TILE_MIN_INNER", "PARALLEL_MIN", "MAX_LOOP_NDIM"]

# Below this many output elements one core is faster than waking the pool:
# a serial float32 add of 2**18 elements takes ~60-100 us, a parallel region
# costs 5-10 us to start on a quiet machine and far more on a busy one.
# Eager and fused elementwise loops go parallel from here.
PARALLEL_MIN = 1 << 18

# The strided loops nest one ``for`` per dimension, and Python compiles at most 20 nested blocks.
MAX_LOOP_NDIM = 16

# elements per guard scan of a fast form: a chunk's inputs stay in L1 between the scan and the loop
GUARD_CHUNK = 2048

# rows x columns of a block of the last two dimensions in the tiled nest: a transposed operand then
# reads 256 rows x 16 consecutive elements, whole cache lines, while the others read 16 rows of 256.
# Measured on (a * 2).T + b, float32, one core: a (2500, 4000): 43 ms untiled, 22 ms tiled; a (5000,
# 1000): 25 / 12 ms.  Where the inner dimension is short, the untiled nest's lines of the transposed
# operand stay cached from one outer step to the next and it wins (a (1000, 3000): 4.5 / 7 ms; about
# even at 2000): tiles only from TILE_MIN_INNER elements, and only with an input read crosswise
# (untiled is 1.5-2x faster for the others).
TILE = (16, 256)
TILE_MIN_INNER = 2048

# a dtype's constructor in generated source: _t_float32(x) converts x as NumPy's scalar type does
# (float16 and bfloat16 have none: they are stored as 16 bits and computed in float32)
# the field of a bfloat16 array's records: its 16-bit word
BF16_FIELD = bfloat16.np.names[0]

TYPE_FNS = {f"_t_{d.name}": d.np.type for d in ALL_DTYPES if d is not float16 and d is not bfloat16}


def type_fn(name: str) -> str:
    """The name generated source calls to convert a value to dtype ``name`` (``_t_float32``)."""
    return f"_t_{name}"


def read_cast(cast: str, src: str, ct: str, dtype=None, field: bool = True) -> str:
    """How a kernel reads an operand ``src`` for its op: ``"compute"``: converted to the compute
    dtype (``ct``, the name of its constructor); ``"bool"``: tested against 0; ``"none"``: as is.
    The one cast rule of eager and fused loops (which cast applies comes from the op's type rule).
    A bfloat16 operand (``dtype``; its array is stored as one-field records of its 16-bit word,
    passed as is: no view per call; ``field=False``: a uint16 view of the words, as CUDA kernels
    take it) is widened to float32 first, exactly, so every cast starts from its value."""
    if dtype is bfloat16:
        src = f"_bf16_load({src}.{BF16_FIELD})" if field else f"_bf16_load({src})"
    if cast == "compute":
        return f"{ct}({src})"
    if cast == "bool":
        return f"({src} != 0)"
    return src


def store(dst: str, value: str, dtype=None, field: bool = True) -> str:
    """The statement writing ``value`` (in the compute dtype) to the output element ``dst``: a
    bfloat16 output (records of its word) rounds the float32 value to nearest even, so an
    eager op and a fused chain round wherever eager mode rounds."""
    if dtype is bfloat16:
        return f"{dst}{'.' + BF16_FIELD if field else ''} = _bf16_store({value})"
    return f"{dst} = {value}"


def constant(value, ct: str) -> str:
    """``value`` (0, 1, a static such as alpha) in the compute dtype."""
    return f"{ct}({value})"


def loop_globals(parallel: bool) -> dict:
    """The globals generated loops read: NumPy, math, the dtype constructors (``type_fn``), the
    scalar helpers, the fast forms' guards, and ``prange`` (``range`` for the serial compile)."""
    return {"np": np, "math": math, "cmath": cmath, "prange": numba.prange if parallel else range,
            **JIT_HELPERS, **GUARD_GLOBALS, **TYPE_FNS}


def crosswise(arrays) -> bool:
    """Whether an input walks memory across a long inner dimension of the loop: its last
    stride is larger than the one before (a transposed view), so the tiled nest pays."""
    for a in arrays:
        if a.ndim >= 2:
            s1, s0 = abs(a.strides[-1]), abs(a.strides[-2])
            if s1 > s0 > 0 and a.shape[-1] >= TILE_MIN_INNER and a.shape[-2] > 1:
                return True
    return False


Body = Callable[[Callable[[str], str]], list]


class Nest:
    """The loops of one kernel over ``ndim`` dimensions whose arrays are the parameters ``inputs``
    and ``outputs``; ``sizes`` (default: the first output) is the array whose shape is iterated.

    ``setup`` holds the lines before the loops (flat views, sizes); ``loop(body)`` the loops
    around a body.  A body is a function of ``at``, which maps an array parameter to its element
    at the current index (``at("a0")`` is ``f0[i]`` flat, ``a0[i0, i1]`` strided), and returns
    the body's statements.  A nest may be looped more than once (a check's counting pass, then
    the computation), always in the same order.  ``parallel=False``: no loop is ``prange`` (a
    reduction into shared accumulators along dimension 0)."""

    def __init__(self, kind: str, ndim: int, inputs: list, outputs: list, sizes: str | None = None,
                 parallel: bool = True):
        if kind == "tiled" and ndim < 2:
            kind = "strided"
        self.kind, self.ndim, self.par = kind, ndim, "prange" if parallel else "range"
        sizes = sizes or outputs[0]
        self.setup: list[str] = []
        if kind == "flat":
            # reshape costs ~100 ns of reference counting per call: only for ndim != 1
            self.views = {}
            for names, v in ((inputs, "f"), (outputs, "g")):
                for j, a in enumerate(names):
                    self.views[a] = f"{v}{j}"
                    self.setup.append(f"    {v}{j} = {a}" + ("" if ndim == 1 else f".reshape({a}.size)"))
            self.setup.append(f"    n0 = {self.views[sizes]}.shape[0]")
            self.index = "i"
        else:
            self.views = {a: a for a in list(inputs) + list(outputs)}
            if ndim:
                dims = ", ".join(f"n{d}" for d in range(ndim)) + ("," if ndim == 1 else "")
                self.setup.append(f"    {dims} = {sizes}.shape")
            self.index = ", ".join(f"i{d}" for d in range(ndim)) or "()"

    def at(self, name: str) -> str:
        return f"{self.views[name]}[{self.index}]"

    def _head(self, d: int) -> str:
        return f"{'    ' * (d + 1)}for i{d} in {self.par if d == 0 else 'range'}(n{d}):"

    def _outer(self) -> tuple[list[str], str, str, str]:
        """(headers of the loops around the innermost one, its indentation, variable, bound)."""
        if self.kind == "flat":
            return [], "    ", "i", "n0"
        k = self.ndim - 2 if self.kind == "tiled" else self.ndim - 1
        return [self._head(d) for d in range(k)], "    " * (k + 1), f"i{k}", f"n{k}"

    def loop(self, body: Body, level: int | None = None, before: tuple = (), after: tuple = ()) -> list[str]:
        """The nest around ``body``; with ``level``, the statements ``before`` run where the loop
        of dimension ``level`` starts and ``after`` where it ends (a reduction over the dimensions
        from ``level`` on: its accumulator's start and its store)."""
        if self.kind != "flat" and self.ndim == 0:
            return [f"    {s}" for s in body(self.at)]
        heads, ind, var, bound = self._outer()
        par = self.par if not heads else "range"
        if self.kind == "tiled":
            (tr, tc), k = TILE, self.ndim - 2
            heads += [f"{ind}for tt in {par}(({bound} + {tr - 1}) // {tr}):",
                      f"{ind}    for uu in range(0, n{k + 1}, {tc}):",
                      f"{ind}        for i{k} in range(tt * {tr}, min(tt * {tr} + {tr}, n{k})):",
                      f"{ind}            for i{k + 1} in range(uu, min(uu + {tc}, n{k + 1})):"]
            return heads + [f"{ind}                {s}" for s in body(self.at)]
        lines = heads + [f"{ind}for {var} in {par}({bound}):"] + [f"{ind}    {s}" for s in body(self.at)]
        if level is not None:
            pad = "    " * (level + 1)
            lines = lines[:level] + [pad + s for s in before] + lines[level:] + [pad + s for s in after]
        return lines

    def loop_chunks(self, before: tuple, body: Body, after: tuple) -> list[str]:
        """A full reduction's nest: the flat range, or dimension 0, split into ``nc`` chunks
        (``nc`` a variable of the kernel, from ``full_chunks``) of ``blk`` elements, the last shorter,
        ``prange`` over the chunks; ``before`` and ``after`` run per chunk around its loops.  The
        chunks are those of the eager reduction kernel, so partial sums round alike."""
        bound = "n0"
        lines = [f"    blk = ({bound} + nc - 1) // nc",
                 f"    for ch in {self.par}(nc):",
                 "        lo = ch * blk",
                 f"        hi = min(lo + blk, {bound})"] + [f"        {s}" for s in before]
        # each chunk loops from 0 over its own slices: ``range(lo, hi)`` over the whole arrays
        # does not vectorize (measured 60 ms against 11 ms for 1e7 float32 on one core)
        chunk = {}
        for j, (a, v) in enumerate(self.views.items()):
            chunk[a] = f"h{j}"
            lines.append(f"        h{j} = {v}[lo:hi]")
        idx = "i" if self.kind == "flat" else ", ".join(f"i{d}" for d in range(self.ndim))
        lines.append(f"        for {'i' if self.kind == 'flat' else 'i0'} in range(hi - lo):")
        lines += [f"{'    ' * (d + 2)}for i{d} in range(n{d}):" for d in range(1, self.ndim if self.kind != "flat" else 1)]
        ind = "    " * ((self.ndim if self.kind != "flat" else 1) + 2)
        lines += [ind + s for s in body(lambda name: f"{chunk[name]}[{idx}]")]
        return lines + [f"        {s}" for s in after]

    def loop_guarded(self, scan: Body, fast: Body, body: Body) -> list[str]:
        """The nest around ``fast`` where a whole chunk of GUARD_CHUNK elements of the innermost loop
        passes ``scan`` (statements that clear ``ok`` for an element outside the fast form's
        domain), around ``body`` elsewhere: per chunk, a vectorized scan, then one loop or the other.  ``fast`` must give ``body``'s bits where the guard holds, so
        an element's result never depends on its neighbours (support/sincos_f32.py)."""
        if self.kind == "tiled" or self.ndim == 0:
            return self.loop(body)
        heads, ind, var, bound = self._outer()
        par = self.par if not heads else "range"
        c = GUARD_CHUNK

        def inner(i2: str, stmts: list) -> list:
            # unsigned indices: with signed ones Numba checks each load for a negative index and
            # the loop does not vectorize (measured 158 us against 27 us for 3e4 float32 sin)
            return [f"{i2}for {var} in range(np.uint64(lo), np.uint64(hi)):"] + [f"{i2}    {s}" for s in stmts]

        return heads + [f"{ind}for c in {par}(({bound} + {c - 1}) // {c}):",
                        f"{ind}    lo = c * {c}",
                        f"{ind}    hi = min(lo + {c}, {bound})",
                        f"{ind}    ok = True"] + \
            inner(ind + "    ", scan(self.at)) + [f"{ind}    if ok:"] + \
            inner(ind + "        ", fast(self.at)) + [f"{ind}    else:"] + inner(ind + "        ", body(self.at))
