"""QuantizedCPU kernels: int8 matmul / linear with int32 accumulation, add, relu.

Every kernel reads ``scale`` and ``zero_point`` from its input tensors at
call time: the dispatcher's memo key fixes the storage dtype, ndim and
layout, never the quantization parameters.

Output quantization parameters.  ``quantized_matmul``, ``quantized_add`` and
``quantized_linear`` take them as arguments (PyTorch's quantized ops do).
The plain ``aten::matmul`` and ``aten::add.Tensor`` on quantized tensors pick
them from the exact result, MinMaxObserver's rule: the result's real range
``[lo, hi]``, widened to contain 0, maps onto the full range of ``self``'s
quantized dtype: ``scale = (hi - lo) / (qmax - qmin)`` (1.0 when the result
is all zeros) and ``zero_point = qmin - round(lo / scale)``.  ``aten::relu``
keeps the input's scale and zero point and clamps at the zero point.

The matmul: both operands minus their zero points are widened to int16 (exact:
|q - zp| <= 255) and multiplied by a register-blocked microkernel (``_tile_madd``,
6 x 16 int32 accumulators) whose inner step is vpmaddwd: 16 multiply-adds of
int16 pairs into int32 per instruction, twice an FMA's 8, which is what lets the
int8 product beat float32 sgemm on a machine without VNNI.  b is packed once per
call into panels of 16 columns (pairs along k interleaved); a is packed per block
of 48 rows by the worker that takes the block from a shared counter (under
``prange``, above ``_PARALLEL_MIN`` multiply-adds), which then requantizes it:
``clamp(round_half_even(acc * sa * sb / so + bias / so) + zo)``.  The int32
accumulation is exact while k * 255 * 255 < 2**31, i.e. k < 33025; larger k is
refused.  Kernels compile lazily, once per signature; the matmul has one
signature for every int8/uint8 combination (uint8 storage goes in as an int8
view and is masked), in a serial and a prange variant.
"""

from __future__ import annotations

from types import SimpleNamespace

import numba
import numpy as np
from llvmlite import ir
from numba import types as nbt
from numba.core import cgutils
from numba.extending import intrinsic

from dispatch_jit.jit import cache

from .op import check_accumulator, minmax_qparams

__all__ = ["SCHEMAS", "CPU", "quantized_matmul_arrays", "minmax_qparams", "compiled_signatures"]

SCHEMAS = [
    "quantized_matmul(Tensor self, Tensor other, float output_scale, int output_zero_point) -> Tensor",
    "quantized_add(Tensor self, Tensor other, float output_scale, int output_zero_point) -> Tensor",
    "quantized_linear(Tensor input, Tensor weight, Tensor? bias, float output_scale, "
    "int output_zero_point) -> Tensor",
]

# --- the int8 matmul ---------------------------------------------------------------------------
#
# Why it looks like this (measured on the 2-core AVX2 machine, 1024^3, one thread, CPU time):
# LLVM's auto-vectorizer turns int16 dot products and i-k-j nests into vpmulld or into
# 128-bit vpmaddwd (37-66 ms; the previous i-k-j kernel here: 50 ms), and sgemm takes
# ~24 ms.  vpmaddwd on 256-bit registers does 16 multiply-adds per instruction (FMA: 8;
# with its vpaddd it is as many instructions per multiply-add, but they spread over more
# pipes), so the int8 product can beat sgemm only from a register-blocked microkernel built
# on it: ``_tile_madd`` below, 12 accumulators (6 rows x 16 columns), 12 vpmaddwd + 12
# vpaddd + 2 loads + 6 broadcasts per k pair, nothing spilled: 16.5-17 ms with packing and
# requantization, ~90% of the same loop written in assembly.  It is written in portable
# LLVM IR (sext, mul, even/odd shuffle, add), which LLVM's x86 backend matches to vpmaddwd
# (pmaddwd on SSE2; with VNNI it may fuse the add too, vpdpwssd); other targets get
# correct generic code.
_MR, _NR = 6, 16       # register tile: 6 rows x 16 columns of int32 (12 ymm accumulators)
_KCP = 256             # k pairs per block: a 16 KB micro-panel of b stays in L1
_MCR = 48              # rows per work item: its packed a (<= 96 KB) stays in L2
_PARALLEL_MIN = 1 << 22  # multiply-adds (~1 ms on one core): below it, waking the pool costs more

_IR_I32 = ir.IntType(32)
_IR_V8 = ir.VectorType(_IR_I32, 8)
_IR_V16 = ir.VectorType(_IR_I32, 16)
_IR_H16 = ir.VectorType(ir.IntType(16), 16)
_IR_EVEN = ir.Constant(_IR_V8, [ir.Constant(_IR_I32, 2 * i) for i in range(8)])
_IR_ODD = ir.Constant(_IR_V8, [ir.Constant(_IR_I32, 2 * i + 1) for i in range(8)])
_IR_ZERO = ir.Constant(_IR_V8, [ir.Constant(_IR_I32, 0)] * 8)


def _ir_madd(b, x, y):
    """Per int32 lane of x, y (<8 x i32>, each an int16 pair): x.lo*y.lo + x.hi*y.hi (vpmaddwd)."""
    p = b.mul(b.sext(b.bitcast(x, _IR_H16), _IR_V16), b.sext(b.bitcast(y, _IR_H16), _IR_V16))
    return b.add(b.shuffle_vector(p, p, _IR_EVEN), b.shuffle_vector(p, p, _IR_ODD))


@intrinsic
def _tile_madd(typingctx, a, b, c, a_off, lda, b_off, c_off, ldc, kp, accumulate):
    """c[c_off + r*ldc + j] (+)= sum over p < kp of madd(a[a_off + r*lda + p], b[b_off + p*_NR + j])
    for r < _MR, j < _NR, on int32 arrays holding int16 pairs (a: rows of pairs along k;
    b: a packed panel, _NR pairs per k pair).  The 12 accumulators live in registers."""
    if not all(isinstance(t, nbt.Array) and t.dtype == nbt.int32 and t.layout == "C" for t in (a, b, c)):
        return None
    sig = nbt.void(a, b, c, nbt.intp, nbt.intp, nbt.intp, nbt.intp, nbt.intp, nbt.intp, nbt.boolean)

    def codegen(context, builder, signature, args):
        arr_a, arr_b, arr_c, a_off, lda, b_off, c_off, ldc, kp, accumulate = args
        pa, pb, pc = (context.make_array(t)(context, builder, v).data
                      for t, v in zip(signature.args[:3], (arr_a, arr_b, arr_c)))

        def const(x):
            return ir.Constant(a_off.type, x)

        def vec(base, offset):   # <8 x i32>* at base + offset
            return builder.bitcast(builder.gep(base, [offset]), _IR_V8.as_pointer())

        rows = [builder.gep(pa, [builder.add(a_off, builder.mul(const(r), lda))]) for r in range(_MR)]
        pb, pc = builder.gep(pb, [b_off]), builder.gep(pc, [c_off])
        # allocas in the entry block: LLVM promotes them to the loop's registers
        accs = [[cgutils.alloca_once_value(builder, _IR_ZERO) for _ in range(_NR // 8)] for _ in range(_MR)]
        undef = ir.Constant(_IR_V8, ir.Undefined)
        with cgutils.for_range(builder, kp) as loop:
            p = loop.index
            bv = [builder.load(vec(pb, builder.add(builder.mul(p, const(_NR)), const(8 * v))), align=4)
                  for v in range(_NR // 8)]
            for r in range(_MR):
                pair = builder.insert_element(undef, builder.load(builder.gep(rows[r], [p]), align=4),
                                              ir.Constant(_IR_I32, 0))
                bcast = builder.shuffle_vector(pair, undef, _IR_ZERO)
                for v, acc in enumerate(accs[r]):
                    builder.store(builder.add(builder.load(acc), _ir_madd(builder, bcast, bv[v])), acc)
        with builder.if_else(accumulate) as (add, store):
            for adding, block in ((True, add), (False, store)):
                with block:
                    for r in range(_MR):
                        for v, acc in enumerate(accs[r]):
                            ptr = vec(pc, builder.add(builder.mul(const(r), ldc), const(8 * v)))
                            val = builder.load(acc)
                            if adding:
                                val = builder.add(builder.load(ptr, align=4), val)
                            builder.store(val, ptr, align=4)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _fetch_add(typingctx, counters, index, value):
    """Atomically ``old = counters[index]; counters[index] += value; return old``: a work queue's ticket."""
    if not (isinstance(counters, nbt.Array) and counters.dtype == nbt.int64):
        return None
    sig = nbt.int64(counters, nbt.intp, nbt.int64)

    def codegen(context, builder, signature, args):
        ptr = builder.gep(context.make_array(signature.args[0])(context, builder, args[0]).data, [args[1]])
        return builder.atomic_rmw("add", ptr, args[2], "monotonic")

    return sig, codegen


@numba.njit(boundscheck=False)
def _pack_b(b, bt, zb, mask, bp, jp, k2):
    """Panel ``jp`` of the packed b: ``bp[(jp*k2 + p)*_NR + c]`` holds the int16 pair
    ``(b[2p, j] - zb, b[2p+1, j] - zb)`` for j = jp*_NR + c; zero past k and n.
    ``bt``: b is given transposed, as (n, k) rows (quantized_linear's weight)."""
    kdim = b.shape[1] if bt else b.shape[0]
    n = b.shape[0] if bt else b.shape[1]
    j0 = jp * _NR
    w = min(_NR, n - j0)
    base = jp * k2 * _NR
    if w < _NR:
        bp[base:base + k2 * _NR] = 0
    for p in range(k2):
        o, q = base + p * _NR, 2 * p
        q1 = min(q + 1, kdim - 1)          # an odd k's last pair: hi is zeroed below
        hmask = np.int32(-1) if q + 1 < kdim else np.int32(0)
        if bt:
            for c in range(w):
                lo = (np.int32(b[j0 + c, q]) & mask) - zb
                hi = ((np.int32(b[j0 + c, q1]) & mask) - zb) & hmask
                bp[o + c] = (lo & 0xFFFF) | (hi << 16)
        else:
            for c in range(w):
                lo = (np.int32(b[q, j0 + c]) & mask) - zb
                hi = ((np.int32(b[q1, j0 + c]) & mask) - zb) & hmask
                bp[o + c] = (lo & 0xFFFF) | (hi << 16)


def _qmm_body(a, za, ua, b, zb, ub, bt, bp, ablk, ablk16, acc, out, counters, nworkers, minmax,
              mult, colbias, zo, qmin, qmax, requant):
    """``out = requant(a @ b)`` on int8 storage (uint8 viewed as int8: ``ua``/``ub``).

    1. The ``nworkers`` workers take panels of _NR columns of b from ``counters[0]``
       and pack them into ``bp``.
    2. They take blocks of _MCR rows from ``counters[1]`` (a dynamic schedule: a worker
       whose core another process is using takes fewer blocks), widen the block's rows
       of a minus za into their ``ablk`` slice, run the tiles k block by k block into
       their ``acc`` slice and requantize the block into ``out``.  Without ``requant``
       the accumulators go to ``acc`` rows r0.. instead, and the block's min and max to
       ``minmax[2*block:2*block + 2]`` (the min/max path picks the output parameters
       from them, then requantizes).

    The last tile of a block may reach past its rows (``ablk`` holds stale rows there)
    and past n (``bp`` is zero there): those accumulators are never read.
    """
    m, kdim = a.shape
    n = b.shape[0] if bt else b.shape[1]
    k2 = (kdim + 1) // 2
    npad = (n + _NR - 1) // _NR * _NR
    njp = npad // _NR
    amask = np.int32(0xFF) if ua else np.int32(-1)
    bmask = np.int32(0xFF) if ub else np.int32(-1)
    for w in numba.prange(nworkers):
        while True:
            jp = _fetch_add(counters, 0, 1)
            if jp >= njp:
                break
            _pack_b(b, bt, zb, bmask, bp, jp, k2)
    nblocks = (m + _MCR - 1) // _MCR
    for w in numba.prange(nworkers):
        wa = w * _MCR * k2
        while True:
            blk = _fetch_add(counters, 1, 1)
            if blk >= nblocks:
                break
            r0 = blk * _MCR
            r1 = min(r0 + _MCR, m)
            for i in range(r0, r1):
                o = 2 * (wa + (i - r0) * k2)
                for q in range(kdim):
                    ablk16[o + q] = (np.int32(a[i, q]) & amask) - za
                if kdim % 2:
                    ablk16[o + kdim] = 0
            crow = w * _MCR if requant else r0
            if k2 == 0:
                acc[crow * npad:(crow + r1 - r0) * npad] = 0
            for p0 in range(0, k2, _KCP):
                kp = min(_KCP, k2 - p0)
                for jp in range(njp):
                    for i in range(r0, r1, _MR):
                        _tile_madd(ablk, bp, acc, wa + (i - r0) * k2 + p0, k2, (jp * k2 + p0) * _NR,
                                   (crow + i - r0) * npad + jp * _NR, npad, kp, p0 > 0)
            if requant:
                _requant_rows(acc, crow * npad, npad, out, r0 * n, n, r1 - r0, mult, colbias, zo, qmin, qmax)
            else:
                _minmax_rows(acc, crow * npad, npad, n, r1 - r0, minmax, 2 * blk)


@numba.njit(boundscheck=False)
def _minmax_rows(acc, c0, ldc, n, rows, minmax, at):
    """minmax[at], minmax[at + 1] = min, max of acc[c0 + i*ldc + j] over i < rows, j < n."""
    lo, hi = np.int32(2**31 - 1), np.int32(-2**31)
    for i in range(rows):
        src = acc[c0 + i * ldc:c0 + i * ldc + n]
        for j in range(n):
            lo, hi = min(lo, src[j]), max(hi, src[j])
    minmax[at], minmax[at + 1] = lo, hi


@numba.njit(boundscheck=False)
def _requant_rows(acc, c0, ldc, out, o0, n, rows, mult, colbias, zo, qmin, qmax):
    """out[o0 + i*n + j] = clamp(rint(acc[c0 + i*ldc + j] * mult + colbias[j]) + zo): round half to even."""
    for i in range(rows):
        src = acc[c0 + i * ldc:c0 + i * ldc + n]   # slices: the j loop vectorizes (offsets: it does not)
        dst = out[o0 + i * n:o0 + (i + 1) * n]
        for j in range(n):
            v = np.rint(src[j] * mult + colbias[j]) + zo
            dst[j] = np.int8(np.int32(min(max(v, qmin), qmax)))


_qmm_serial = numba.njit(boundscheck=False)(_qmm_body)
_qmm_parallel = numba.njit(boundscheck=False, parallel=True)(_qmm_body)


# --- add / relu kernels ------------------------------------------------------------------------

@numba.njit(boundscheck=False)
def _add_minmax(a, b, sa, za, sb, zb):
    lo, hi = 0.0, 0.0
    for i in range(a.size):
        v = sa * (np.float64(a[i]) - za) + sb * (np.float64(b[i]) - zb)
        lo, hi = min(lo, v), max(hi, v)
    return lo, hi


@numba.njit(boundscheck=False)
def _add(a, b, out, sa, za, sb, zb, so, zo, qmin, qmax):
    for i in range(a.size):
        v = sa * (np.float64(a[i]) - za) + sb * (np.float64(b[i]) - zb)
        out[i] = min(max(np.rint(v / so) + zo, qmin), qmax)


@numba.njit(boundscheck=False)
def _relu(a, out, zp):
    for i in range(a.size):
        out[i] = max(a[i], zp)


_F64_1D = nbt.Array(nbt.float64, 1, "C")
_CACHE_KIND = __name__               # the compile cache's name for these kernels (one per module copy)
_ENTRY = cache.entries(_CACHE_KIND)  # (kernel name, signature) -> compiled entry point


def _entry(name: str, func, sig: tuple):
    """The compiled entry point of ``func`` for ``sig``, compiled on first use."""
    fn = _ENTRY.get((name, sig))
    if fn is None:
        fn = cache.njit_function(_CACHE_KIND, (name, sig), name, func, sig)
    return fn


def compiled_signatures() -> dict[str, list[str]]:
    """Kernel name -> the Numba signatures compiled so far.

    >>> isinstance(compiled_signatures(), dict)
    True
    """
    return cache.signatures(_CACHE_KIND)


_I8_2D = nbt.Array(nbt.int8, 2, "C")
_I8_1D, _I16_1D, _I32_1D, _I64_1D = (nbt.Array(t, 1, "C") for t in (nbt.int8, nbt.int16, nbt.int32, nbt.int64))
_QMM_SIG = (_I8_2D, nbt.int32, nbt.boolean, _I8_2D, nbt.int32, nbt.boolean, nbt.boolean, _I32_1D,
            _I32_1D, _I16_1D, _I32_1D, _I8_1D, _I64_1D, nbt.int64, _I64_1D, nbt.float64, _F64_1D,
            nbt.float64, nbt.float64, nbt.float64, nbt.boolean)
_REQUANT_SIG = (_I32_1D, nbt.int64, nbt.int64, _I8_1D, nbt.int64, nbt.int64, nbt.int64, nbt.float64, _F64_1D,
                nbt.float64, nbt.float64, nbt.float64)


def _qmm_entry(parallel: bool):
    return _entry("qmm_parallel" if parallel else "qmm", _qmm_parallel if parallel else _qmm_serial, _QMM_SIG)


def _flat_entry(name: str, func, arrays: tuple, scalars: int):
    sig = tuple(nbt.Array(numba.from_dtype(a.dtype), 1, "C") for a in arrays) + (nbt.float64,) * scalars
    return _entry(name, func, sig)


# --- array-level matmul ------------------------------------------------------------------------

def _int8_view(x: np.ndarray) -> np.ndarray:
    return x.view(np.int8) if x.dtype == np.uint8 else x


def quantized_matmul_arrays(a: np.ndarray, za: int, sa: float, b: np.ndarray, zb: int, sb: float,
                            qdtype, so: float | None = None, zo: int | None = None,
                            bias: np.ndarray | None = None):
    """``a @ b`` on 2-D integer storage; returns (out storage, scale, zero_point).

    With ``so``/``zo`` None the output parameters come from the result's range
    (``minmax_qparams``); ``bias`` (float, length n) is added in real units.
    A ``b`` whose transpose is C-contiguous (``linear``'s weight.T) is packed as it is.
    """
    m, k = a.shape
    n = b.shape[1]
    check_accumulator(k)
    a8 = _int8_view(np.ascontiguousarray(a))
    bt = not b.flags.c_contiguous and b.T.flags.c_contiguous
    b8 = _int8_view(b.T if bt else np.ascontiguousarray(b))
    k2, npad, mpad, nblocks = (k + 1) // 2, -(-n // _NR) * _NR, -(-m // _MR) * _MR, -(-m // _MCR)
    parallel = m * n * k >= _PARALLEL_MIN and nblocks >= 2 and numba.get_num_threads() > 1
    nworkers = numba.get_num_threads() if parallel else 1
    auto = so is None
    # every buffer comes from NumPy (allocating inside njit is several times slower here)
    bp = np.empty(npad * k2, np.int32)
    ablk = np.empty(nworkers * _MCR * k2, np.int32)
    acc = np.empty((mpad if auto else nworkers * _MCR) * npad, np.int32)
    minmax = np.empty(2 * nblocks if auto else 0, np.int64)
    out = np.empty((m, n), qdtype.np)
    out8 = _int8_view(out.reshape(-1))
    colbias = np.zeros(n) if bias is None else np.ascontiguousarray(bias, np.float64).reshape(n)
    qmin, qmax = float(qdtype.qmin), float(qdtype.qmax)
    args = (a8, za, a.dtype == np.uint8, b8, zb, b.dtype == np.uint8, bt, bp, ablk, ablk.view(np.int16),
            acc, out8, np.zeros(2, np.int64), nworkers, minmax)
    if not auto:
        _qmm_entry(parallel)(*args, sa * sb / so, colbias / so, float(zo), qmin, qmax, True)
        return out, so, zo
    _qmm_entry(parallel)(*args, 0.0, colbias, 0.0, qmin, qmax, False)
    lo = hi = 0.0
    if m and n:
        lo = float(minmax[0::2].min()) * sa * sb + float(colbias.min(initial=0.0))
        hi = float(minmax[1::2].max()) * sa * sb + float(colbias.max(initial=0.0))
    so, zo = minmax_qparams(lo, hi, qdtype)
    _entry("requant", _requant_rows, _REQUANT_SIG)(acc, 0, npad, out8, 0, n, m, sa * sb / so, colbias / so,
                                                    float(zo), qmin, qmax)
    return out, so, zo


# --- what quantized/op.py's ops compute on the CPU ----------------------------------------------

def _matmul(a, za, sa, b, zb, sb, k, qdtype, so, zo, bias):
    b2 = b if b.ndim == 2 else b.reshape(k, 1)
    return quantized_matmul_arrays(a.reshape(-1, k), za, sa, b2, zb, sb, qdtype, so, zo, bias)


def _flat(a: np.ndarray, shape: tuple) -> np.ndarray:
    return np.ascontiguousarray(np.broadcast_to(a, shape) if a.shape != shape else a).ravel()


def _add_range(a, b, sa, za, sb, zb):
    return _flat_entry("add_minmax", _add_minmax, (a, b), 4)(a, b, sa, za, sb, zb)


def _add_arrays(a, b, shape, sa, za, sb, zb, so, zo, qd):
    out = np.empty(a.size, qd.np)
    _flat_entry("add", _add, (a, b, out), 8)(a, b, out, sa, za, sb, zb, so, float(zo), float(qd.qmin), float(qd.qmax))
    return out.reshape(shape)


def _relu_array(a, zero_point):
    a = np.ascontiguousarray(a)
    res = np.empty_like(a)
    fn = _entry("relu", _relu, (nbt.Array(numba.from_dtype(a.dtype), 1, "C"),) * 2 + (nbt.int64,))
    fn(a.reshape(-1), res.reshape(-1), zero_point)
    return res


CPU = SimpleNamespace(matmul=_matmul, reshape=np.reshape, transpose=np.transpose, flat=_flat, add_range=_add_range,
                      add=_add_arrays, relu=_relu_array)
