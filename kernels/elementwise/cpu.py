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

A hit on the flat case runs generated straight-line code (``_Plan.fast``; in place,
``_Plan.fast_inplace``, which writes into the first operand when no other operand overlaps it
and it is writeable), and anything its per-call checks refuse goes to the general path.

Each exists in a serial and a ``prange`` variant; the parallel one is
compiled only when an output of at least ``PARALLEL_MIN`` elements first
shows up, since starting threads costs microseconds.  Outputs are allocated
with NumPy in Python, never inside njit (several times slower here).
float16 has no arithmetic in Numba's CPU backend: it is stored as float16 and
computed in float32.  bfloat16 is computed in float32 too, inside the loop:
its arrays are passed as uint16 views of their words, which the loop widens
on reading and rounds to nearest even on storing (support/loops: ``read_cast``,
``store``), so the result is written in place, with no float32 buffer.
"""

from __future__ import annotations

import re

import numba
import numpy as np
from numba import types as nbt

from dispatch_jit.bufferpool import pool
from dispatch_jit.dtypes import ALL_DTYPES, bfloat16, can_cast, float16, float32
from dispatch_jit.jit import cache, threads
from dispatch_jit.jit.source import define
from dispatch_jit.signature import make_sig
from dispatch_jit.tensor import CPU_BITS, Tensor, bump_version

from ..support.loops import MAX_LOOP_NDIM, PARALLEL_MIN, Nest, loop_globals, read_cast, store, type_fn
from ..support.numba_types import NB_DTYPE, NB_PY
from .table import (ElementwiseKernel, ScalarOp, broadcast_shape, check_output, check_statics,
                    kernel_prelude, output_tensor)
from ..shape.cpu import loop_operands

__all__ = ["ElementwiseCPU", "PARALLEL_MIN", "compiled_kernels"]

_NAMES = ("x", "y", "z")

_CACHE_KIND = "elementwise"      # the compile cache's name for these loops; shared by all ops and tests


def compiled_kernels() -> int:
    """Eager elementwise loops compiled in this process (all ops)."""
    return cache.size(_CACHE_KIND)


def _gen_source(op: ScalarOp, kinds: tuple, casts: tuple, compute, ndim: int, flat: bool,
                static_names: tuple, in_dtypes: tuple = (), out_dtype=None) -> str:
    """One loop nest (support/loops: a region of one node).  ``kinds[i]`` is "array", "scalar" or
    "none" per input; ``in_dtypes`` and ``out_dtype`` the arrays' dtypes (bfloat16's are read and
    stored through its words)."""
    in_dtypes = in_dtypes or (None,) * len(kinds)
    present = tuple(_NAMES[i] for i, k in enumerate(kinds) if k != "none")
    expr = op.expression(compute.category, present, compute.name)
    guarded = op.fast.get(compute.name) if ndim else None
    check = op.checks.get(compute.category)
    ct = type_fn(compute.name)
    params = [f"a{i}" for i, k in enumerate(kinds) if k != "none"] + list(static_names) + ["out"]
    lines = [f"def kernel({', '.join(params)}):"] + kernel_prelude(static_names, ct)
    if check is not None and check.scalar:
        # tested once, on the Python numbers as given (see Check); where they are tensors, no check
        raw = {_NAMES[i]: f"a{i}" for i, k in enumerate(kinds) if k == "scalar"}
        if check.names() <= raw.keys():
            lines += [f"    if {_substitute(check.guard, raw)}:", f"        {check.raise_stmt()}"]
        check = None
    arrays = [f"a{i}" for i, k in enumerate(kinds) if k == "array"]
    for i, k in enumerate(kinds):
        if k == "scalar":
            lines.append(f"    s{i} = {read_cast(casts[i], f'a{i}', ct)}")
    nest = Nest("flat" if flat else "strided", ndim, arrays, ["out"])
    lines += nest.setup

    def element(stmt: str = "", value: str = ""):
        """A body reading the operands, then running ``stmt`` or storing ``value``."""
        def body(at) -> list:
            reads = [f"{_NAMES[i]} = " + (f"s{i}" if k == "scalar" else
                                          read_cast(casts[i], at(f"a{i}"), ct, in_dtypes[i]))
                     for i, k in enumerate(kinds) if k != "none"]
            return reads + [stmt or store(at("out"), value, out_dtype)]
        return body

    if check is not None:
        # Count the refused elements (a prange reduction), raise once: a raise inside prange is lost
        # with its thread.  Counting first, in its own vectorized pass, leaves in-place and out=
        # operands untouched when the kernel raises.
        lines += ["    bad = 0"] + nest.loop(element(f"bad += {check.guard}"))
        lines += ["    if bad:", f"        {check.raise_stmt()}"]
    if guarded is None:
        lines += nest.loop(element(value=expr))
    else:
        fast, guard = guarded
        lines += nest.loop_guarded(element(f"ok &= {guard}"), element(value=fast),
                                   element(value=expr))
    return "\n".join(lines) + "\n"


def _substitute(expr: str, names: dict) -> str:
    """``expr`` with the operand names x, y, z renamed."""
    return re.sub(r"\b[xyz]\b", lambda m: names.get(m.group(0), m.group(0)), expr)


def _compile(src: str, compute_np: np.dtype, argtypes: tuple, parallel: bool):
    def glb():
        return loop_globals(parallel)
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
        # float16 is converted on the general path; bfloat16's arrays go to the flat loop as stored
        # (the broadcast and in-place paths are float16/bfloat16-free: those take the general path)
        flat_ok = all(m.contiguous and m.dtype is not float16
                      for m in in_metas if m.kind == "tensor") and result is not float16
        no_bf16 = all(m.dtype is not bfloat16 for m in in_metas if m.kind == "tensor") and result is not bfloat16
        same_rank = all(m.ndim == ndim for m in in_metas if m.kind == "tensor")
        if self.mode == "functional":
            if not flat_ok:
                return plan.general
            # operands of one rank: the flat path, which hands other shapes to the broadcast path
            return plan.fast(ndim) if same_rank else plan.broadcast if no_bf16 else plan.general
        # in place: the operand written must take the result (else the general path raises its error)
        written = in_metas[0]
        if flat_ok and no_bf16 and written.kind == "tensor" and can_cast(result, written.dtype):
            return plan.fast_inplace(ndim) if same_rank else plan.broadcast_inplace
        return plan.general


class _Plan:
    """Everything resolved for one signature; builds the flat fast path and the general path."""

    def __init__(self, kern, opname, kinds, casts, kcompute, compute, result, kresult, static_names,
                 in_idx, static_idx, out_pos, in_metas):
        self.kern, self.opname, self.kinds, self.casts = kern, opname, kinds, casts
        self.kcompute, self.compute, self.result, self.kresult = kcompute, compute, result, kresult
        self.static_names, self.in_idx, self.static_idx, self.out_pos = static_names, in_idx, static_idx, out_pos
        self.in_metas = in_metas
        self.variants: dict = {}
        self.shapes: dict = {}      # the broadcast path's plans, per tuple of operand shapes
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
                              self.static_names, in_dtypes, out_dtype)
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
        # one dimension: equal sizes are equal shapes, and .size makes no tuple as .shape does
        shape = "n" if ndim == 1 else "s"
        body.append(f"    {shape} = {first}.{'size' if ndim == 1 else 'shape'}")
        cond += [f"{data[j]}.{'size' if ndim == 1 else 'shape'} == {shape}" for j in arr[1:]]
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
        body += [f"    if {test}:"] + ([f"        n = {first}.size"] if ndim != 1 else []) + [
                 "        if n < _PAR:",
                 f"            r = _empty({shape}, _odt)",
                 f"            _ks({', '.join(kargs + ['r'])})",
                 "        else:",
                 f"            r = _pool_empty({first}.shape, _odt, n)",
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
             "_general": self.broadcast, "_check": self._check_statics}
        return define("\n".join(body) + "\n", "run", g, f"<dispatch_jit {self.opname} fast path>")

    def fast_inplace(self, ndim: int):
        """The in-place flat fast path (``a.add_(b)``, ``p -= lr * g``): every operand contiguous and of
        the written one's shape, and no other operand overlapping it unless it is the very same array
        (two arrays owning their memory, ``base is None``, cannot overlap; else NumPy's bounds test).
        Anything else, a read-only operand included, takes the general path, which copies or raises."""
        in_dtypes = tuple(m.dtype if k == "array" else None for m, k in zip(self.in_metas, self.kinds))
        v = self.variant(ndim, True, in_dtypes, self.in_metas[0].dtype)
        v.get(0)   # compile the serial loop now, on the miss path
        arr = [i for i, k in enumerate(self.kinds) if k == "array"]
        names = [f"p{i}" for i in range(len(self.in_idx) + len(self.static_idx))]
        body = [f"def run({', '.join(names)}):"]
        if self.int_compute and self.static_idx:
            body.append(f"    _check(({', '.join(names)},))")
        for j in arr:
            body.append(f"    d{j} = p{self.in_idx[j]}._data")
        body.append("    n = d0.size" if ndim == 1 else "    s = d0.shape")
        cond = ["d0.flags.writeable"]
        for j in arr[1:]:
            cond.append(f"d{j}.size == n" if ndim == 1 else f"d{j}.shape == s")
            cond.append(f"(d{j} is d0 or (d0.base is None and d{j}.base is None) or not _overlap(d{j}, d0))")
        kargs = [f"d{j}" if k == "array" else f"p{self.in_idx[j]}" for j, k in enumerate(self.kinds) if k != "none"]
        kargs += [f"p{i}" for i in self.static_idx] + ["d0"]
        w = f"p{self.in_idx[0]}"
        body += [f"    if {' and '.join(cond)}:"] + (["        n = d0.size"] if ndim != 1 else []) + [
                 "        if n < _PAR:",
                 f"            _ks({', '.join(kargs)})",
                 "        else:",
                 f"            _run(_vb, n, _v.parallel or _v.get(n), _vs, {', '.join(kargs)})",
                 # bump_version, inlined: autograd's saved-tensor checks see the write
                 f"        vc = {w}.__dict__.get('_vc')",
                 "        if vc is None:",
                 f"            {w}.__dict__['_vc'] = [1]",
                 "        else:",
                 "            vc[0] += 1",
                 f"        return {w}",
                 f"    return _general({', '.join(names)})"]
        g = {"_ks": v.serial, "_PAR": PARALLEL_MIN, "_v": v, "_run": threads.run, "_vb": v.best,
             "_vs": v.serial_loop, "_overlap": np.may_share_memory, "_general": self.broadcast_inplace,
             "_check": self._check_statics}
        return define("\n".join(body) + "\n", "run", g, f"<dispatch_jit {self.opname} in-place fast path>")

    # -- contiguous operands of other shapes: x + bias, x * scale[..., None] ----------------
    def broadcast(self, *args):
        """Functional, contiguous operands whose shapes differ: the strided loop over views that
        repeat each operand along its broadcast dimensions (stride 0), as the general path's, but
        with the shapes' plan (broadcast shape, strides, loop) kept per tuple of operand shapes and
        the views made with ``np.ndarray`` (``np.broadcast_to`` and ``np.broadcast_shapes`` cost
        microseconds each).  ``out=``, more than MAX_LOOP_NDIM dimensions or an empty operand:
        the general path."""
        if self.out_pos is not None and args[self.out_pos] is not None:
            return self.general(*args)
        arrays = [args[i]._data if k == "array" else None for i, k in zip(self.in_idx, self.kinds)]
        key = tuple([a.shape for a in arrays if a is not None])
        e = self.shapes.get(key)
        if e is None:
            e = self._broadcast_plan(key)
        if e is False:
            return self.general(*args)
        self._check_statics(args)
        shape, strides, v, sig = e
        kargs = []
        for j, k in enumerate(self.kinds):
            if k == "array":
                a, st = arrays[j], strides[j]
                kargs.append(a if st is None else _view(shape, a.dtype, a, 0, st))
            elif k == "scalar":
                kargs.append(args[self.in_idx[j]])
        kargs += [args[i] for i in self.static_idx]
        out = np.empty(shape, self.kresult.np)
        v.run(out.size, *kargs, out)
        t = _new(Tensor)
        t._data = out
        t._sig = sig
        return t

    def broadcast_inplace(self, *args):
        """In place, contiguous operands repeated along the written one's dimensions (``g.mul_(coef)``
        with a 0-dim ``coef``): as ``broadcast``, writing into the first operand when the general
        path would (shapes, writeable, no partial overlap: else the general path, which copies or
        raises)."""
        w = args[self.in_idx[0]]
        d0 = w._data
        arrays = [args[i]._data if k == "array" else None for i, k in zip(self.in_idx, self.kinds)]
        key = tuple([a.shape for a in arrays if a is not None])
        e = self.shapes.get(key)
        if e is None:
            e = self._broadcast_plan(key)
        if e is False or e[0] != d0.shape or not d0.flags.writeable:
            return self.general(*args)
        self._check_statics(args)
        shape, strides, v, _ = e
        kargs = [d0]
        for j in range(1, len(self.kinds)):
            k = self.kinds[j]
            if k == "array":
                a, st = arrays[j], strides[j]
                if not (a is d0 or (d0.base is None and a.base is None) or not _overlap(a, d0)):
                    return self.general(*args)
                kargs.append(a if st is None else _view(shape, a.dtype, a, 0, st))
            elif k == "scalar":
                kargs.append(args[self.in_idx[j]])
        kargs += [args[i] for i in self.static_idx]
        v.run(d0.size, *kargs, d0)
        bump_version(w)
        return w

    def _broadcast_plan(self, key: tuple):
        """(shape, per-operand view strides or None, loop variant, output signature) for operand
        shapes ``key``; False where the general path must run.  Raises the general path's errors."""
        shape = broadcast_shape(self.opname, list(key))
        if len(shape) > MAX_LOOP_NDIM or 0 in shape:
            e = False
        else:
            strides, it = [], iter(key)
            for k, m in zip(self.kinds, self.in_metas):
                if k != "array":
                    strides.append(None)
                    continue
                s = next(it)
                strides.append(None if s == shape else _broadcast_strides(s, shape, m.dtype.np.itemsize))
            in_dtypes = tuple(m.dtype if k == "array" else None for m, k in zip(self.in_metas, self.kinds))
            flat = all(st is None for st in strides)
            # in place, the loop stores into the written operand's dtype
            out_dtype = self.in_metas[0].dtype if self.kern.mode == "inplace" else self.kresult
            e = (shape, tuple(strides), self.variant(len(shape), flat, in_dtypes, out_dtype),
                 make_sig(CPU_BITS, self.result, len(shape), True))
        if len(self.shapes) >= 64:      # a bound for programs of many shapes: the plan is cheap to redo
            self.shapes.clear()
        self.shapes[key] = e
        return e

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
        in_dtypes = []
        for j, a in enumerate(arrays):
            d = None
            if self.kinds[j] == "array":
                if a.dtype == np.float16:
                    a = a.astype(np.float32)
                d = ALL_DTYPES[_DT_INDEX[a.dtype]]
                if a.shape != shape:
                    a = np.broadcast_to(a, shape)
                arrays[j] = a
            in_dtypes.append(d)
        in_dtypes = tuple(in_dtypes)
        target, out_dtype = out_arr, ALL_DTYPES[_DT_INDEX[out_arr.dtype]]
        if out_arr.dtype == np.float16:
            target, out_dtype = np.empty(shape, np.float32), float32
        # out= and in-place on contiguous, same-shape operands: the flat loop vectorizes,
        # the strided one (layout 'A') does not
        flat = target.flags.c_contiguous and all(
            a.flags.c_contiguous and a.shape == shape for a, k in zip(arrays, self.kinds) if k == "array")
        # above 16 dims (tensors have up to 64) the loop runs over coalesced views of the operands
        arrays, kt, loop_ndim = loop_operands(self.opname, shape, arrays, self.kinds, target)
        v = self.variant(loop_ndim, flat, in_dtypes, out_dtype)
        kargs = [a for a, k in zip(arrays, self.kinds) if k != "none"] + [args[i] for i in self.static_idx]
        v.run(target.size, *kargs, kt)
        if target is not out_arr and out_dtype is not bfloat16:
            np.copyto(out_arr, target, casting="unsafe")
        if out_t is not None:
            bump_version(out_t)    # in-place and out= writes are visible to autograd's saved-tensor checks
            return out_t
        t = Tensor.__new__(Tensor)
        t._data = out_arr
        t._sig = make_sig(CPU_BITS, self.result, ndim, out_arr.flags.c_contiguous)
        return t


_DT_INDEX = {d.np: d.index for d in ALL_DTYPES}
_view = np.ndarray
_new = object.__new__
_overlap = np.may_share_memory


def _broadcast_strides(s: tuple, shape: tuple, itemsize: int) -> tuple:
    """Byte strides of a C-contiguous array of shape ``s`` seen as ``shape``: 0 along the
    dimensions it is repeated on (NumPy's broadcasting rule)."""
    own, step = [], itemsize
    for n in reversed(s):
        own.append(step)
        step *= n
    own.reverse()
    lead = len(shape) - len(s)
    return (0,) * lead + tuple(0 if n == 1 and shape[lead + i] != 1 else own[i] for i, n in enumerate(s))
