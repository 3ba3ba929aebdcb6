"""CPU reduction kernels over NumPy arrays, compiled lazily with Numba.

sum, prod, mean, max, min, argmax, argmin, var, std, all, any, logsumexp;
dtype rules as PyTorch and the array API (see ``result_dtype``).

Ops are data: table.py holds each op's dtype rules and scalar
passes; codegen.py pastes them into a few loop shapes and compiles
them, once per (op, kernel dtype, variant), on first use.  This module plans
each call onto one of those kernels.  The loop shapes:

* rows ("inner", mode 0): per output, walk its reduced elements, whose
  innermost run is contiguous or strided; states live in registers and the
  loop vectorizes (float32 sums accumulate in float64, reassociation allowed).
* columns ("outer", mode 2): the kept axis is the contiguous one
  (``sum(axis=0)`` of a C array): read 16 reduced rows at a time in memory
  order, fold them into per-output state buffers that Python allocated.
* lanes: max/argmax-like steps (compare-and-select with NaN propagation) do
  not vectorize as reductions, so long contiguous runs fold into 32
  independent lane states, merged at the end.
* parallel (prange): rows split across threads, one long run split into
  chunks with per-chunk partial states, or column blocks; used above
  ``PARALLEL_THRESHOLD`` elements where a one-time probe finds that two
  threads really run at once (``support/loops/parallel.py``).

Every input is planned as a 4-D strided view ``(K1, K2, R1, R2)`` of one
1-D contiguous buffer (kept dims K, reduced dims R, element strides), dims
that address memory as one merged; so transposed, sliced, negative-stride
and broadcast inputs run without a copy unless more than two runs of kept
(or reduced) dims are left.  Plans are memoized per (shape, strides, axis,
keepdims).  As the project's rule says, outputs and state buffers are
allocated with NumPy in Python and passed in.

>>> import numpy as np
>>> f = get_reduction("sum", np.dtype(np.float32))
>>> f(np.ones((2, 3), np.float32), (1,), False)
array([3., 3.], dtype=float32)
>>> get_reduction("max", np.dtype(np.int8))(np.array([[1, 9], [4, 2]], np.int8), (0,), True)
array([[4, 9]], dtype=int8)
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Callable

import numba
import numpy as np

from dispatch_jit import bf16
from dispatch_jit.dtypes import BF16_STORAGE, bfloat16, from_numpy_dtype
from dispatch_jit.errors import DTypeError, SchemaError, ShapeError
from dispatch_jit.registry import CompiledSignature
from dispatch_jit.signature import make_sig
from dispatch_jit.tensor import CPU_BITS

from ..support.loops.parallel import (MIN_CHUNK, REDUCE_PARALLEL_MIN, chunk_length, reduce_pieces, splits_outputs,
                                      use_parallel)
from .codegen import LANE_MIN, compiled_signatures, kernel, warmup
from .table import (REDUCTIONS, Pass, ReductionSpec, _BOOL, _F32, _U8, check_dtype, kernel_dtype, result_dtype,
                              spec_of, state_dtypes)

_U16 = np.dtype(np.uint16)      # a bfloat16 array's words

__all__ = ["CPU", "REDUCTIONS", "ReductionSpec", "Pass", "get_reduction", "result_dtype",
           "compiled_signatures", "warmup", "PARALLEL_THRESHOLD"]

# From this many input elements on, a parallel variant may run where threads pay
# (support/loops/parallel.py: its ``PARALLEL`` forces the choice for tests and benchmarks).
PARALLEL_THRESHOLD = REDUCE_PARALLEL_MIN


# ---------------------------------------------------------------- planning
#
# A plan turns (shape, strides, axis, keepdims) into the kernel's integers
# and says how to get the flat buffer.  It depends on nothing else, so each
# callable memoizes plans by that key: a repeated call with the same layout
# is a dict hit, not a re-plan.

_MASK = (1 << 64) - 1   # negative strides travel as uint64 two's complement
# How the flat buffer is made: a view of a C or F contiguous array; a view
# spanning the strided array's memory; or a copy (see _plan for when).
_FLAT_C, _FLAT_F, _SPAN, _COPY_T, _COPY_C, _EMPTY = range(6)
_PLAN_CACHE_SIZE = 512


def _merge(dims: list[tuple]) -> list[tuple]:
    """Merge adjacent (size, *strides) dims that address memory as one dim."""
    out: list[tuple] = []
    for d in dims:
        if out and all(so == d[0] * sd for so, sd in zip(out[-1][1:], d[1:])):
            out[-1] = (out[-1][0] * d[0], *d[1:])
        else:
            out.append(d)
    return out


def _check_axis(axis, nd: int, name: str) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(nd))
    if (type(axis) is not tuple or any(type(d) is not int or not 0 <= d < nd for d in axis)
            or len(set(axis)) != len(axis)):
        raise ShapeError(f"{name}(): axis must be None or a tuple of distinct ints in [0, {nd}) "
                         f"(already normalized), got {axis!r} for a {nd}-d input")
    return axis


def _contiguous(shape, st, order) -> bool:
    acc = 1
    for n, s in (reversed(list(zip(shape, st))) if order == "C" else zip(shape, st)):
        if n != 1 and s != acc:
            return False
        acc *= n
    return True


def _plan(name, shape, strides, isz, axis, keepdims, ordered):
    """Plan one reduction: (how, extra, out_shape, K, R, ints).

    ints = (off, K1, K2, R1, R2, sK1, sK2, sR1, sR2, oK1, oK2, mode): the
    input as a 4-D (K1, K2, R1, R2) strided view of a flat buffer, in
    elements.  Kept dims are ordered by input stride (writes go through the
    output strides oK*), reduced dims too unless ``ordered`` (argmax's index
    is the C-order flat index); dims that address memory as one are merged.
    mode 0 ("inner") when the innermost reduced stride is the smaller, else
    2 ("outer").
    """
    nd = len(shape)
    axes = _check_axis(axis, nd, name)
    kept = [d for d in range(nd) if d not in axes]
    out_shape = (tuple(1 if d in axes else shape[d] for d in range(nd)) if keepdims
                 else tuple(shape[d] for d in kept))
    K, R = math.prod(shape[d] for d in kept), math.prod(shape[d] for d in axes)
    if K == 0 or R == 0:
        return _EMPTY, axes, out_shape, K, R, None
    how, extra = None, None
    if any(s % isz for s in strides):
        # strides that are not whole elements cannot index a flat buffer: copy
        how, strides = _COPY_C, [isz * math.prod(shape[d + 1:]) for d in range(nd)]
    st = [s // isz for s in strides]
    ostr, acc = {}, 1
    for d in reversed(kept):
        ostr[d] = acc
        acc *= shape[d]
    kd = sorted(((shape[d], st[d], ostr[d]) for d in kept if shape[d] > 1), key=lambda t: -abs(t[1]))
    rd = [(shape[d], st[d]) for d in sorted(axes) if shape[d] > 1]
    if not ordered:
        rd.sort(key=lambda t: -abs(t[1]))
    kd, rd = _merge(kd), _merge(rd)
    if len(kd) > 2 or len(rd) > 2:
        # Three or more kept (or reduced) runs that no stride order merges,
        # e.g. a[::2, ::3, ::2] reduced over axis 1: the 4-D view cannot
        # address it, so copy once, reduced axes last, and reduce a 2-D array.
        return _COPY_T, kept + sorted(axes), out_shape, K, R, (0, 1, K, 1, R, 0, R, 0, 1, 0, 1, 0 if R > 1 else 2)
    (K1, sK1, oK1), (K2, sK2, oK2) = ([(1, 0, 0)] * 2 + kd)[-2:]
    (R1, sR1), (R2, sR2) = ([(1, 0)] * 2 + rd)[-2:]
    kin = abs(sK2) if K2 > 1 else math.inf
    rin = abs(sR2) if R2 > 1 else math.inf
    mode = 0 if rin <= kin else 2
    off = 0
    if how is None:
        if _contiguous(shape, st, "C"):
            how = _FLAT_C
        elif _contiguous(shape, st, "F"):
            how = _FLAT_F
        else:
            # A 1-D contiguous view over the whole span the strided array
            # touches, from its lowest address: no copy, and the kernel's
            # inner loops still see unit-stride runs where the layout has them.
            how = _SPAN
            off = sum((n - 1) * -s for n, s in zip(shape, st) if s < 0)
            span = sum((n - 1) * abs(s) for n, s in zip(shape, st)) + 1
            flips = tuple(slice(None, None, -1) if s < 0 else slice(None) for s in st)
            extra = (flips if off else None, (span,), (isz,))
    ints = (off, K1, K2, R1, R2, sK1 & _MASK, sK2 & _MASK, sR1 & _MASK, sR2 & _MASK, oK1, oK2, mode)
    return how, extra, out_shape, K, R, ints


def _flat(a: np.ndarray, how: int, extra) -> np.ndarray:
    """The flat buffer a plan indexes (the miss-ish path: non-C layouts)."""
    if how == _FLAT_F:
        return a.reshape(-1, order="F")
    if how == _SPAN:
        flips, shape, strides = extra
        return np.lib.stride_tricks.as_strided(a if flips is None else a[flips], shape, strides)
    if how == _COPY_T:
        return np.ascontiguousarray(a.transpose(extra)).reshape(-1)
    return np.ascontiguousarray(a).reshape(-1)   # _COPY_C


# ---------------------------------------------------------------- parallel or not

def _parallel_plan(p) -> tuple[str, int]:
    """The parallel variant for a plan, and its block: (variant, blk)."""
    K1, K2, R1, R2, mode = p[2], p[3], p[4], p[5], p[12]
    nt = numba.get_num_threads()
    pieces = reduce_pieces()
    if mode == 2:
        # one block of columns per thread: long row segments stream best
        nb = max(1, min(-(-nt // K1), -(-K2 // 256)))
        return "cols", -(-K2 // nb)                          # columns per block
    K, R = K1 * K2, R1 * R2
    if K == 1 and R >= 2 * MIN_CHUNK or splits_outputs(K, R):
        return "chunks", chunk_length(R, pieces)             # chunk length (one rule with the fused epilogues)
    return "rows", -(-K // pieces)                           # rows per block


# ---------------------------------------------------------------- the callable

def _empty_result(spec, shape, axes, out_shape, rdt, R):
    if R == 0 and spec.identity is None:
        raise ShapeError(
            f"{spec.name}(): cannot reduce over a zero-size axis (axes {axes} of shape {shape}) "
            f"because it has no identity; pass a non-empty input, or reduce only over non-empty axes")
    return np.full(out_shape, spec.identity if R == 0 else 0, rdt)


_CALLABLES: dict[tuple[str, np.dtype], Callable] = {}


def get_reduction(name: str, dtype: np.dtype) -> Callable:
    """A reduction specialized to one input dtype.

    The callable is ``f(a, axis, keepdims, **static) -> np.ndarray`` where
    ``axis`` is None (all axes) or a tuple of normalized axes (``()``: no
    reduction), and the only static is ``correction`` (var/std, default 0).
    Full reductions return 0-d arrays.  Kernels compile on first use (the
    serial one first; a parallel one on the first input of
    ``PARALLEL_THRESHOLD`` elements or more, where threads pay) and are
    shared by all callers.

    >>> f = get_reduction("argmax", np.dtype(np.float64))
    >>> f(np.array([[1.0, 5.0, 5.0], [np.nan, 0.0, np.nan]]), (1,), True)
    array([[1],
           [0]])
    """
    spec = spec_of(name)
    # bfloat16: the kernels read its words (a free view) and compute as float32's, whose result
    # (a float32 array) this callable returns; the caller rounds it (_bind_bfloat16)
    words = np.dtype(getattr(dtype, "np", dtype)) == BF16_STORAGE
    dt = check_dtype(spec, _F32 if words else dtype)
    dt = BF16_STORAGE if words else dt
    key = (name, dt)
    fn = _CALLABLES.get(key)
    if fn is not None:
        return fn
    kname = spec.kernel or name          # derived ops run their base op's kernels
    kspec = REDUCTIONS[kname]
    kin = BF16_STORAGE if words else kernel_dtype(kspec, dt)
    fk = _F32 if words else kin          # the dtype the kernel computes in
    rdt, kout = spec.result(_F32 if words else dt), kspec.result(fk)
    conv_in = ((lambda a: a.view(_U16)) if words else None if kin == dt else (lambda a: a.view(_U8)) if kin == _U8
               else (lambda a: a.astype(kin)))
    conv_out = None if rdt == kout else (lambda r: r.view(rdt)) if rdt == _BOOL else (lambda r: r.astype(rdt))
    sdts = [sdt for _, sdt in state_dtypes(kspec, fk)]
    nostate = tuple(np.empty(0, sdt) for sdt in sdts)
    ordered, post, arg0, static_arg = kspec.ordered, spec.post, float(spec.arg), spec.static_arg
    compiled: dict[str, Callable] = {}   # variant -> overload, compiled on first need
    lanes = any(p.lanes for p in kspec.passes(fk))

    plans: dict = {}
    isz = kin.itemsize

    def reduce(a, axis=None, keepdims=False, **static):
        if type(a) is not np.ndarray:   # the kernels take plain arrays (a matrix reshapes to 2-D)
            a = np.asarray(a)
        if a.dtype != dt:
            raise DTypeError(f"{name}() kernel for {dt.name} got a {a.dtype.name} array")
        arg = arg0
        if static:
            if static_arg in static:
                arg = float(static.pop(static_arg))
            if static:
                raise SchemaError(f"{name}() got unexpected static argument(s) {sorted(static)}")
        src = a if conv_in is None else conv_in(a)
        if axis is None and not keepdims and src.flags.c_contiguous and src.size:
            # full reduction of a contiguous array: the common case, planned inline
            K, R, out_shape = 1, src.size, ()
            p = (src.reshape(-1), 0, 1, 1, 1, R, 0, 0, 0, 1, 0, 0, 0)
        else:
            try:
                how, extra, out_shape, K, R, ints = plans[(src.shape, src.strides, axis, keepdims)]
            except KeyError:
                if len(plans) >= _PLAN_CACHE_SIZE:
                    plans.clear()
                plan = plans[(src.shape, src.strides, axis, keepdims)] = _plan(
                    name, src.shape, src.strides, isz, axis, keepdims, ordered)
                how, extra, out_shape, K, R, ints = plan
            except TypeError:   # an unhashable axis (a list): let the checker say what is wrong
                _check_axis(axis, a.ndim, name)
                raise
            if how == _EMPTY:
                return _empty_result(spec, a.shape, extra, out_shape, rdt, R)
            p = (src.reshape(-1) if how == _FLAT_C else _flat(src, how, extra), *ints)
        out = np.empty(K, kout)
        scratch = tuple(np.empty(K, sdt) for sdt in sdts) if p[12] == 2 else nostate
        if K * R < PARALLEL_THRESHOLD or not use_parallel():
            variant, blk = "lanes" if lanes and p[12] == 0 and p[9] == 1 and p[5] >= LANE_MIN else "serial", 1
        else:
            variant, blk = _parallel_plan(p)
        ep = compiled.get(variant)
        if ep is None:
            ep = compiled[variant] = kernel(kname, kin, variant)
        ep(*p, R, arg, blk, out, *scratch)
        if post is not None:
            post(out, R)
        out = out.reshape(out_shape)
        return out if conv_out is None else conv_out(out)

    def full(a):
        """``reduce(a)`` of a C-contiguous array of this dtype: the plan above's inline case,
        with nothing to decide per call but the variant (the same kernel and arguments, so
        the same bits); empty and parallel-sized inputs take ``reduce``."""
        n = a.size
        if n == 0 or (n >= PARALLEL_THRESHOLD and use_parallel()):
            return reduce(a)
        if words:
            a = a.view(_U16)
        variant = "lanes" if lanes and n >= LANE_MIN else "serial"
        ep = compiled.get(variant)
        if ep is None:
            ep = compiled[variant] = kernel(kname, kin, variant)
        out = np.empty(1, kout)
        ep(a if a.ndim == 1 else a.reshape(-1), 0, 1, 1, 1, n, 0, 0, 0, 1, 0, 0, 0, n, arg0, 1, out, *nostate)
        if post is not None:
            post(out, n)
        return out.reshape(())

    reduce.__name__ = reduce.__qualname__ = f"{name}_{dt.name}"
    reduce.__doc__ = f"{name} over a {dt.name} array -> {rdt.name} (see get_reduction)."
    # the full reduction's shortcut, where no cast comes before or after the kernel
    reduce.full = full if (conv_in is None or words) and conv_out is None else None
    _CALLABLES[key] = reduce
    return reduce


def _bind(name: str, call, kernel_name: str):
    """The CPU ``reduce`` of one reduction op (reduction/op.py's Reduction calls it): the
    dtype-specialized callable is resolved here, once per signature.  bfloat16 (in, or
    ``dtype=``) reduces as float32, exactly widened, and a float32 result is rounded back to
    nearest even once (PyTorch's CPU reductions accumulate bfloat16 in float32 too)."""
    dt = call.metas[0].dtype
    call.op.note_compiled(kernel_name, CompiledSignature((dt.name,)))
    if dt is bfloat16:
        return _bind_bfloat16(name, call.metas[0].contiguous)
    fn = get_reduction(name, dt.np)

    def reduce(a, axes, keepdims, to, kw):
        if to is None:
            return np.asarray(fn(a, axes, keepdims, **kw))
        if to == BF16_STORAGE:
            return _bind_bfloat16(name)(bf16.cast(a, bfloat16), axes, keepdims, None, kw)
        return np.asarray(get_reduction(name, to)(a.astype(to), axes, keepdims, **kw))
    reduce.full = None
    if fn.full is not None and call.metas[0].contiguous:
        # the hot case of small reductions (a loss, a norm): a tensor's whole contiguous data;
        # the result's signature is known here (a 0-d CPU tensor of the result dtype)
        reduce.full = fn.full
        reduce.full_sig = make_sig(CPU_BITS, from_numpy_dtype(result_dtype(name, dt.np)), 0, True)
    return reduce


def _bind_bfloat16(name: str, contiguous: bool = False):
    # the kernels read the words, widening each to float32 in the loop (no float32 copy), and fold
    # as float32's; a float32 result is rounded to nearest even once
    fn = get_reduction(name, BF16_STORAGE)

    def reduce(a, axes, keepdims, to, kw):
        if to is not None and to != BF16_STORAGE:
            return np.asarray(get_reduction(name, to)(bf16.to_float32(a).astype(to), axes, keepdims, **kw))
        r = np.asarray(fn(a, axes, keepdims, **kw))
        return bf16.from_float32(r) if r.dtype == np.float32 else r
    reduce.full = None
    if fn.full is not None and contiguous:
        rdt = result_dtype(name, BF16_STORAGE)
        rounded = rdt == BF16_STORAGE
        fast = fn.full
        reduce.full = (lambda a: bf16.from_float32(fast(a))) if rounded else fast
        reduce.full_sig = make_sig(CPU_BITS, bfloat16 if rounded else from_numpy_dtype(rdt), 0, True)
    return reduce


CPU = SimpleNamespace(bind=_bind)
