"""Eager CPU kernels for the elementwise ops, generated from table.py.

For one op and one resolved signature (dtypes, ndim, contiguity of every
input) ``ElementwiseCPU.specialize`` returns the callable the dispatcher
memoizes.  It owns two loop nests, each compiled lazily with ``numba.njit``
for exactly those argument types (we keep the overload's entry point, so a
call skips Numba's own type dispatch):

* flat: every input C-contiguous and of the output's shape -> one 1-D loop
  over ``reshape(size)`` views, which LLVM vectorizes;
* strided: anything else (broadcasting, transposes, slices, ``out=``,
  in-place with overlap) -> one loop per dimension over NumPy broadcast views,
  which have zero strides where an input is broadcast, so no input is copied.

Each exists in a serial and a ``prange`` variant; the parallel one is
compiled only when an output of at least ``PARALLEL_MIN`` elements first
shows up, since starting threads costs microseconds.  Outputs are allocated
with NumPy in Python, never inside njit (several times slower here).
float16 has no arithmetic in Numba's CPU backend: it is stored as float16 and
computed in float32.
"""

from __future__ import annotations

import cmath
import math
import re

import numba
import numpy as np
from numba import types as nbt

from dispatch_jit.bufferpool import pool
from dispatch_jit.dtypes import ALL_DTYPES, float16, float32
from dispatch_jit.jit import cache, threads
from dispatch_jit.jit.source import define
from dispatch_jit.signature import make_sig
from dispatch_jit.tensor import CPU_BITS, Tensor, bump_version

from ..support.numba_types import JIT_HELPERS, NB_DTYPE, NB_PY
from ..support.sincos_f32 import GUARD_GLOBALS
from .table import (READ_CASTS, ElementwiseKernel, ScalarOp, broadcast_shape, check_output, check_statics,
                    kernel_prelude, output_tensor)
from ..shape.cpu import loop_operands

__all__ = ["ElementwiseCPU", "PARALLEL_MIN", "compiled_kernels"]

# Below this many output elements one core is faster than waking the pool:
# a serial float32 add of 2**18 elements takes ~60-100 us, a parallel region
# costs 5-10 us to start on a quiet machine and far more on a busy one.
PARALLEL_MIN = 1 << 18

_NAMES = ("x", "y", "z")

_CACHE_KIND = "elementwise"      # the compile cache's name for these loops; shared by all ops and tests


def compiled_kernels() -> int:
    """Eager elementwise loops compiled in this process (all ops)."""
    return cache.size(_CACHE_KIND)


def _gen_source(op: ScalarOp, kinds: tuple, casts: tuple, compute, ndim: int, flat: bool,
                static_names: tuple) -> str:
    """One loop nest.  ``kinds[i]`` is "array", "scalar" or "none" per input."""
    present = tuple(_NAMES[i] for i, k in enumerate(kinds) if k != "none")
    expr = op.expression(compute.category, present, compute.name)
    guarded = op.fast.get(compute.name) if ndim else None
    check = op.checks.get(compute.category)
    params = [f"a{i}" for i, k in enumerate(kinds) if k != "none"] + list(static_names) + ["out"]
    lines = [f"def kernel({', '.join(params)}):"] + kernel_prelude(static_names)
    if check is not None and check.scalar:
        # tested once, on the Python numbers as given (see Check); where they are tensors, no check
        raw = {_NAMES[i]: f"a{i}" for i, k in enumerate(kinds) if k == "scalar"}
        if check.names() <= raw.keys():
            lines += [f"    if {_substitute(check.guard, raw)}:", f"        {check.raise_stmt()}"]
        check = None
    reads = {}
    for i, (k, c) in enumerate(zip(kinds, casts)):
        if k == "none":
            continue
        cast = READ_CASTS[c]
        if k == "scalar":
            lines.append(f"    s{i} = {cast.format(f'a{i}')}")
            reads[i] = f"s{i}"
        else:
            reads[i] = cast.format(f"f{i}[IDX]" if flat else f"a{i}[IDX]")
    if flat:
        # reshape costs ~100 ns of reference counting per call: only for ndim != 1
        for i, k in enumerate(kinds):
            if k == "array":
                lines.append(f"    f{i} = a{i}" + ("" if ndim == 1 else f".reshape(a{i}.size)"))
        lines.append("    fo = out" + ("" if ndim == 1 else ".reshape(out.size)"))
        lines.append("    n0 = fo.shape[0]")
        outer, inner, store = [], "i", "fo[{}]"
    elif ndim == 0:
        lines += [f"    {_NAMES[i]} = {r.replace('IDX', '()')}" for i, r in reads.items()]
        if check is not None:
            lines += [f"    if {check.guard}:", f"        {check.raise_stmt()}"]
        return "\n".join(lines + [f"    out[()] = {expr}"]) + "\n"
    else:
        lines.append(f"    {', '.join(f'n{d}' for d in range(ndim))}{',' if ndim == 1 else ''} = out.shape")
        outer, inner = [f"i{d}" for d in range(ndim - 1)], f"i{ndim - 1}"
        store = "out[" + ", ".join(outer + ["{}"]) + "]"
    indent = "    " * (len(outer) + 1)
    last = f"n{ndim - 1}" if not flat else "n0"
    par = "prange" if not outer else "range"

    def headers() -> list:
        return [f"{'    ' * (d + 1)}for {v} in {'prange' if d == 0 else 'range'}(n{d}):" for d, v in enumerate(outer)]

    def loop(ind: str, over: str, stmt: str) -> list:
        idx = ", ".join(outer + [inner]) if not flat else inner
        out = [f"{ind}for {inner} in {over}:"]
        out += [f"{ind}    {_NAMES[i]} = {r.replace('IDX', idx)}" for i, r in reads.items()]
        return out + [f"{ind}    {stmt}"]

    if check is not None:
        # Count the refused elements (a prange reduction), raise once: a raise inside prange is lost
        # with its thread.  Counting first, in its own vectorized pass, leaves in-place and out=
        # operands untouched when the kernel raises.
        lines += ["    bad = 0"] + headers() + loop(indent, f"{par}({last})", f"bad += {check.guard}")
        lines += ["    if bad:", f"        {check.raise_stmt()}"]
    lines += headers()
    if guarded is None:
        lines += loop(indent, f"{par}({last})", f"{store.format(inner)} = {expr}")
        return "\n".join(lines) + "\n"
    # A fast form valid only where a guard holds (support/sincos_f32.py): per chunk, a vectorized scan
    # of the guard, then the fast loop or the exact one.  Both give the same bits where the
    # guard holds, so the result of an element never depends on its neighbours.
    fast, guard = guarded
    lines += [f"{indent}for c in {par}(({last} + {_CHUNK - 1}) // {_CHUNK}):",
              f"{indent}    lo = c * {_CHUNK}",
              f"{indent}    hi = min(lo + {_CHUNK}, {last})",
              f"{indent}    ok = True"]
    lines += loop(indent + "    ", "range(lo, hi)", f"ok &= {guard}")
    lines.append(f"{indent}    if ok:")
    lines += loop(indent + "        ", "range(lo, hi)", f"{store.format(inner)} = {fast}")
    lines.append(f"{indent}    else:")
    lines += loop(indent + "        ", "range(lo, hi)", f"{store.format(inner)} = {expr}")
    return "\n".join(lines) + "\n"


# elements per guard scan: a chunk's inputs stay in L1 between the scan and the loop
_CHUNK = 2048


def _substitute(expr: str, names: dict) -> str:
    """``expr`` with the operand names x, y, z renamed."""
    return re.sub(r"\b[xyz]\b", lambda m: names.get(m.group(0), m.group(0)), expr)


def _compile(src: str, compute_np: np.dtype, argtypes: tuple, parallel: bool):
    def glb():
        return {"np": np, "math": math, "cmath": cmath, "_ct": np.dtype(compute_np).type,
                "prange": numba.prange if parallel else range, **JIT_HELPERS, **GUARD_GLOBALS}
    return cache.njit_source(_CACHE_KIND, src, "kernel", argtypes, glb, parallel=parallel, key=np.dtype(compute_np),
                             disk=True)[0]


class _Variant:
    """One loop nest for one set of argument types, serial and parallel, compiled on demand.
    Each element is computed alone, so both give the same bits: the parallel one runs
    through the threads' watch (dispatch_jit/jit/threads.py), which takes the serial one
    while other processes hold the cores."""

    __slots__ = ("src", "compute", "argtypes", "serial", "parallel", "best")

    def __init__(self, src, compute, argtypes):
        self.src, self.compute, self.argtypes = src, compute, argtypes
        self.serial = self.parallel = None
        self.best: dict = {}       # the watch's best seconds per element, per size class

    def get(self, n: int):
        if n >= PARALLEL_MIN:
            if self.parallel is None:
                self.parallel = _compile(self.src, self.compute, self.argtypes, True)
            return self.parallel
        return self.serial_loop()

    def serial_loop(self):
        if self.serial is None:
            self.serial = _compile(self.src, self.compute, self.argtypes, False)
        return self.serial

    def run(self, n: int, *args) -> None:
        if n < PARALLEL_MIN:
            self.serial_loop()(*args)
        else:
            threads.run(self.best, n, self.parallel or self.get(n), self.serial_loop, *args)


class ElementwiseCPU(ElementwiseKernel):
    """The CPU kernel of one ScalarOp ("functional" or "inplace", see ElementwiseKernel)."""

    device = "cpu"

    # -- miss path ---------------------------------------------------------------------------
    def plan(self, call, r, kcompute):
        in_metas, result = r.in_metas, r.result
        kinds = tuple("none" if m.kind == "none" else ("array" if m.kind == "tensor" else "scalar")
                      for m in in_metas)
        ndim = max(m.ndim for m in in_metas if m.kind == "tensor")
        # no CPU float16 arithmetic in Numba: a float16 result is computed into float32, then cast
        kresult = float32 if result is float16 else result
        plan = _Plan(self, call.op.name, kinds, r.casts, kcompute, r.compute, result, kresult, r.static_names,
                     r.in_idx, r.static_idx, r.out_pos, in_metas)
        fast_ok = (self.mode == "functional" and all(m.contiguous and m.ndim == ndim and m.dtype is not float16
                                                      for m in in_metas if m.kind == "tensor")
                   and result is not float16)
        return plan.fast(ndim) if fast_ok else plan.general


class _Plan:
    """Everything resolved for one signature; builds the flat fast path and the general path."""

    def __init__(self, kern, opname, kinds, casts, kcompute, compute, result, kresult, static_names,
                 in_idx, static_idx, out_pos, in_metas):
        self.kern, self.opname, self.kinds, self.casts = kern, opname, kinds, casts
        self.kcompute, self.compute, self.result, self.kresult = kcompute, compute, result, kresult
        self.static_names, self.in_idx, self.static_idx, self.out_pos = static_names, in_idx, static_idx, out_pos
        self.in_metas = in_metas
        self.variants: dict = {}
        self.int_compute = compute.category < 2

    def _argtypes(self, ndim, layout, in_dtypes, out_dtype):
        ts = []
        for k, m, d in zip(self.kinds, self.in_metas, in_dtypes):
            if k == "array":
                ts.append(nbt.Array(NB_DTYPE[d.np], ndim, layout))
            elif k == "scalar":
                ts.append(NB_PY.get(m.pytype) or numba.from_dtype(np.dtype(m.pytype)))
        for _ in self.static_names:
            ts.append(NB_PY[complex] if self.kcompute.category == 3 else
                      NB_PY[float] if self.kcompute.category == 2 else NB_PY[int])
        ts.append(nbt.Array(NB_DTYPE[out_dtype.np], ndim, layout))
        return tuple(ts)

    def variant(self, ndim, flat, in_dtypes, out_dtype):
        key = (ndim, flat, in_dtypes, out_dtype)
        v = self.variants.get(key)
        if v is None:
            src = _gen_source(self.kern.op, self.kinds, self.casts, self.kcompute, ndim, flat,
                              self.static_names)
            v = _Variant(src, self.kcompute.np, self._argtypes(ndim, "C" if flat else "A", in_dtypes, out_dtype))
            self.variants[key] = v
            self._record(in_dtypes, out_dtype, ndim, flat)
        return v

    def _record(self, in_dtypes, out_dtype, ndim, flat):
        from dispatch_jit.registry import CompiledSignature, lookup
        try:
            op = lookup(self.opname)
        except LookupError:
            return
        names = tuple(d.name if d is not None else (m.pytype.__name__ if m.kind == "scalar" else "None")
                      for d, m in zip(in_dtypes, self.in_metas))
        op.note_compiled(self.kern.__name__,
                         CompiledSignature(names, out_dtype.name, f"{ndim}d {'flat' if flat else 'strided'}"))

    def _check_statics(self, args):
        if self.int_compute:
            check_statics(self.opname, self.static_idx, self.static_names, args)

    # -- the flat fast path, generated so that a hit runs straight-line code -------------------
    def fast(self, ndim: int):
        in_dtypes = tuple(m.dtype if k == "array" else None for m, k in zip(self.in_metas, self.kinds))
        v = self.variant(ndim, True, in_dtypes, self.kresult)
        v.get(0)   # compile the serial loop now, on the miss path
        arr = [i for i, k in enumerate(self.kinds) if k == "array"]
        names = [f"p{i}" for i in range(len(self.in_idx) + len(self.static_idx) + (self.out_pos is not None))]
        pos_of = {p: f"p{p}" for p in range(len(names))}
        data = {j: f"d{j}" for j in arr}
        body = [f"def run({', '.join(names)}):"]
        cond = []
        if self.out_pos is not None:
            cond.append(f"{pos_of[self.out_pos]} is None")
        if self.int_compute and self.static_idx:
            body.append(f"    _check(({', '.join(pos_of[i] for i in range(len(names)))},))")
        for j in arr:
            body.append(f"    d{j} = {pos_of[self.in_idx[j]]}._data")
        first = data[arr[0]]
        body.append(f"    s = {first}.shape")
        cond += [f"{data[j]}.shape == s" for j in arr[1:]]
        kargs = []
        for j, k in enumerate(self.kinds):
            if k == "array":
                kargs.append(data[j])
            elif k == "scalar":
                kargs.append(pos_of[self.in_idx[j]])
        kargs += [pos_of[i] for i in self.static_idx]
        test = " and ".join(cond) if cond else "True"
        # a large output comes from the output pool (dispatch_jit/bufferpool.py): memory whose pages
        # are mapped already, once nothing refers to a previous output any more
        body += [f"    if {test}:",
                 f"        n = {first}.size",
                 "        if n < _PAR:",
                 "            r = _empty(s, _odt)",
                 f"            _ks({', '.join(kargs + ['r'])})",
                 "        else:",
                 "            r = _pool_empty(s, _odt, n)",
                 f"            _run(_vb, n, _v.parallel or _v.get(n), _vs, {', '.join(kargs + ['r'])})",
                 # wrap_like_sig, inlined: a call costs as much as the two stores
                 "        t = _new(_T)",
                 "        t._data = r",
                 "        t._sig = _osig",
                 "        return t",
                 f"    return _general({', '.join(names)})"]
        g = {"_empty": np.empty, "_odt": self.kresult.np, "_ks": v.serial, "_PAR": PARALLEL_MIN, "_v": v,
             "_run": threads.run, "_vb": v.best, "_vs": v.serial_loop,
             "_pool_empty": pool.empty,
             "_new": object.__new__, "_T": Tensor, "_osig": make_sig(CPU_BITS, self.kresult, ndim, True),
             "_general": self.general, "_check": self._check_statics}
        return define("\n".join(body), "run", g, f"<dispatch_jit {self.opname} fast path>")

    # -- everything else: broadcasting, strides, out=, in-place, float16 ----------------------
    def general(self, *args):
        self._check_statics(args)
        inputs = [args[i] for i in self.in_idx]
        arrays = [x._data if k == "array" else x for x, k in zip(inputs, self.kinds)]
        shape = broadcast_shape(self.opname, [a.shape for a, k in zip(arrays, self.kinds) if k == "array"])
        out_t = output_tensor(self.kern.mode, inputs, args, self.out_pos)
        if out_t is not None:
            check_output(self.opname, self.kern.mode == "inplace", self.result, out_t, shape)
            out_arr = out_t._data
        else:
            out_arr = np.empty(shape, self.result.np)
        ndim = len(shape)
        # Inputs that overlap the output without being the very same view would be
        # read after being written: copy them first (PyTorch does the same).
        for j, a in enumerate(arrays):
            if self.kinds[j] == "array" and a is not out_arr and np.may_share_memory(a, out_arr) and not (
                    a.__array_interface__["data"][0] == out_arr.__array_interface__["data"][0]
                    and a.strides == out_arr.strides and a.shape == out_arr.shape):
                arrays[j] = a.copy()
        for j, a in enumerate(arrays):
            if self.kinds[j] == "array":
                if a.dtype == np.float16:
                    a = a.astype(np.float32)
                if a.shape != shape:
                    a = np.broadcast_to(a, shape)
                arrays[j] = a
        target = out_arr
        if out_arr.dtype == np.float16:
            target = np.empty(shape, np.float32)
        in_dtypes = tuple(ALL_DTYPES[_DT_INDEX[a.dtype]] if k == "array" else None
                          for a, k in zip(arrays, self.kinds))
        out_dtype = ALL_DTYPES[_DT_INDEX[target.dtype]]
        # out= and in-place on contiguous, same-shape operands: the flat loop vectorizes,
        # the strided one (layout 'A') does not
        flat = target.flags.c_contiguous and all(
            a.flags.c_contiguous and a.shape == shape for a, k in zip(arrays, self.kinds) if k == "array")
        # above 16 dims (tensors have up to 64) the loop runs over coalesced views of the operands
        arrays, kt, loop_ndim = loop_operands(self.opname, shape, arrays, self.kinds, target)
        v = self.variant(loop_ndim, flat, in_dtypes, out_dtype)
        kargs = [a for a, k in zip(arrays, self.kinds) if k != "none"] + [args[i] for i in self.static_idx]
        v.run(target.size, *kargs, kt)
        if target is not out_arr:
            np.copyto(out_arr, target, casting="unsafe")
        if out_t is not None:
            bump_version(out_t)    # in-place and out= writes are visible to autograd's saved-tensor checks
            return out_t
        t = Tensor.__new__(Tensor)
        t._data = out_arr
        t._sig = make_sig(CPU_BITS, self.result, ndim, out_arr.flags.c_contiguous)
        return t


_DT_INDEX = {d.np: d.index for d in ALL_DTYPES}
