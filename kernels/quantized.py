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

The matmul: both operands minus their zero points are widened to int16
(exact: |q - zp| <= 255) and packed in pairs along k (one int32 holds two
int16), then multiplied in a cache-blocked i-k-j nest, four rows at a time,
whose inner j loop LLVM turns into vpmaddwd/vpdpwssd, accumulating in int32 (exact while
k * 255 * 255 < 2**31, i.e. k < 33025; larger k is refused), then
requantized: ``clamp(round_half_even(acc * sa * sb / so + bias / so) + zo)``.
Above ``_PARALLEL_MIN`` multiply-adds the nest runs over contiguous row
chunks under ``prange``.  Kernels compile lazily, once per signature.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types as nbt

from dispatch_jit.errors import DTypeError, ShapeError
from dispatch_jit.library import Library
from dispatch_jit.registry import lookup
from dispatch_jit.quantized import QUANTIZED_CPU_BITS, QuantizedTensor, make_quantized

__all__ = ["SCHEMAS", "KERNELS", "quantized_matmul", "quantized_add", "quantized_linear",
           "quantized_matmul_arrays", "minmax_qparams", "compiled_signatures"]

SCHEMAS = [
    "quantized_matmul(Tensor self, Tensor other, float output_scale, int output_zero_point) -> Tensor",
    "quantized_add(Tensor self, Tensor other, float output_scale, int output_zero_point) -> Tensor",
    "quantized_linear(Tensor input, Tensor weight, Tensor? bias, float output_scale, "
    "int output_zero_point) -> Tensor",
]

# A KB x JB int16 tile of b (256 KB) stays in L2 while 4-row groups of a stream past it;
# 1024^2 serial on the (busy) 2-core machine: 18-26 ms, vs 36-40 ms when each accumulator
# store covered only one k pair, and 21-50 ms for linalg.py's one-row int16 nest.
_KB, _JB = 256, 512
_PARALLEL_MIN = 1 << 18
_MAX_K = 33024


# --- Numba kernels ----------------------------------------------------------------------------

@numba.njit(inline="always")
def _lo(x):
    return np.int32(np.int16(x & 0xFFFF))


@numba.njit(inline="always")
def _hi(x):
    return np.int32(x >> np.int32(16))


@numba.njit(boundscheck=False)
def _acc_rows(ap, bp, acc, i0, i1):
    """acc[i0:i1] = a[i0:i1] @ b in int32, on k-pair-packed operands: each int32 of
    ap (m, k/2) and bp (k/2, n) holds two int16 values (low half: even k, high
    half: odd k), so the inner j loop is multiply-adds of int16 pairs into int32
    (LLVM emits vpmaddwd / vpdpwssd, no shuffles).  Four rows share every load
    of b and each accumulator store covers four k: the one-row, one-pair form
    was bound by b's L2 traffic and then by accumulator stores."""
    k2 = ap.shape[1]
    n = bp.shape[1]
    acc[i0:i1, :] = 0
    i4 = i0 + (i1 - i0) // 4 * 4
    for j0 in range(0, n, _JB):
        j1 = min(j0 + _JB, n)
        w = j1 - j0
        for p0 in range(0, k2, _KB // 2):
            p1 = min(p0 + _KB // 2, k2)
            pe = p0 + (p1 - p0) // 2 * 2
            for i in range(i0, i4, 4):
                o0, o1, o2, o3 = acc[i, j0:j1], acc[i + 1, j0:j1], acc[i + 2, j0:j1], acc[i + 3, j0:j1]
                for p in range(p0, pe, 2):
                    xa, xb, xc, xd = ap[i, p], ap[i + 1, p], ap[i + 2, p], ap[i + 3, p]
                    ya, yb, yc, yd = ap[i, p + 1], ap[i + 1, p + 1], ap[i + 2, p + 1], ap[i + 3, p + 1]
                    a0, a1, b0, b1 = _lo(xa), _hi(xa), _lo(xb), _hi(xb)
                    c0, c1, d0, d1 = _lo(xc), _hi(xc), _lo(xd), _hi(xd)
                    a2, a3, b2, b3 = _lo(ya), _hi(ya), _lo(yb), _hi(yb)
                    c2, c3, d2, d3 = _lo(yc), _hi(yc), _lo(yd), _hi(yd)
                    v = bp[p, j0:j1]
                    u = bp[p + 1, j0:j1]
                    for j in range(w):
                        vj = v[j]
                        uj = u[j]
                        v0, v1 = np.int32(np.int16(vj)), vj >> np.int32(16)
                        u0, u1 = np.int32(np.int16(uj)), uj >> np.int32(16)
                        o0[j] += np.int32(a0 * v0 + a1 * v1 + a2 * u0 + a3 * u1)
                        o1[j] += np.int32(b0 * v0 + b1 * v1 + b2 * u0 + b3 * u1)
                        o2[j] += np.int32(c0 * v0 + c1 * v1 + c2 * u0 + c3 * u1)
                        o3[j] += np.int32(d0 * v0 + d1 * v1 + d2 * u0 + d3 * u1)
                for p in range(pe, p1):
                    xa, xb, xc, xd = ap[i, p], ap[i + 1, p], ap[i + 2, p], ap[i + 3, p]
                    a0, a1, b0, b1 = _lo(xa), _hi(xa), _lo(xb), _hi(xb)
                    c0, c1, d0, d1 = _lo(xc), _hi(xc), _lo(xd), _hi(xd)
                    v = bp[p, j0:j1]
                    for j in range(w):
                        vj = v[j]
                        v0, v1 = np.int32(np.int16(vj)), vj >> np.int32(16)
                        o0[j] += np.int32(a0 * v0 + a1 * v1)
                        o1[j] += np.int32(b0 * v0 + b1 * v1)
                        o2[j] += np.int32(c0 * v0 + c1 * v1)
                        o3[j] += np.int32(d0 * v0 + d1 * v1)
            for i in range(i4, i1):
                o = acc[i, j0:j1]
                for p in range(p0, p1):
                    xa = ap[i, p]
                    a0, a1 = _lo(xa), _hi(xa)
                    v = bp[p, j0:j1]
                    for j in range(w):
                        vj = v[j]
                        o[j] += np.int32(a0 * np.int32(np.int16(vj)) + a1 * (vj >> np.int32(16)))


@numba.njit(boundscheck=False)
def _pack_b(b, zb, bp):
    """bp[p, j] = (b[2p, j] - zb) | (b[2p+1, j] - zb) << 16 as int16 pairs (zero past k)."""
    k, n = b.shape
    for p in range(bp.shape[0]):
        for j in range(n):
            lo = np.int32(b[2 * p, j]) - zb
            hi = np.int32(b[2 * p + 1, j]) - zb if 2 * p + 1 < k else np.int32(0)
            bp[p, j] = (lo & 0xFFFF) | (hi << np.int32(16))


@numba.njit(boundscheck=False)
def _pack_a(a, za, ap):
    """ap[i, p] = (a[i, 2p] - za) | (a[i, 2p+1] - za) << 16 (zero past k)."""
    m, k = a.shape
    for i in range(m):
        for p in range(ap.shape[1]):
            lo = np.int32(a[i, 2 * p]) - za
            hi = np.int32(a[i, 2 * p + 1]) - za if 2 * p + 1 < k else np.int32(0)
            ap[i, p] = (lo & 0xFFFF) | (hi << np.int32(16))


@numba.njit(boundscheck=False)
def _requant_rows(acc, out, i0, i1, mult, colbias, zo, qmin, qmax):
    """out = clamp(rint(acc * mult + colbias[j]) + zo, qmin, qmax): round half to even."""
    n = acc.shape[1]
    for i in range(i0, i1):
        for j in range(n):
            v = np.rint(acc[i, j] * mult + colbias[j]) + zo
            out[i, j] = min(max(v, qmin), qmax)


@numba.njit(boundscheck=False)
def _qmm_serial(a, b, acc, out, mult, colbias, zo, qmin, qmax, requant):
    _acc_rows(a, b, acc, 0, acc.shape[0])
    if requant:
        _requant_rows(acc, out, 0, acc.shape[0], mult, colbias, zo, qmin, qmax)


@numba.njit(parallel=True, boundscheck=False)
def _qmm_parallel(a, b, acc, out, mult, colbias, zo, qmin, qmax, requant):
    m = acc.shape[0]
    nchunks = numba.get_num_threads()
    quads = (m + 3) // 4
    for c in numba.prange(nchunks):  # contiguous chunks of 4-row groups keep b's tile reuse
        i0, i1 = min(m, 4 * (quads * c // nchunks)), min(m, 4 * (quads * (c + 1) // nchunks))
        _acc_rows(a, b, acc, i0, i1)
        if requant:
            _requant_rows(acc, out, i0, i1, mult, colbias, zo, qmin, qmax)


@numba.njit(boundscheck=False)
def _requant_all(acc, out, mult, colbias, zo, qmin, qmax):
    _requant_rows(acc, out, 0, acc.shape[0], mult, colbias, zo, qmin, qmax)


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


_I32_2D = nbt.Array(nbt.int32, 2, "C")
_F64_1D = nbt.Array(nbt.float64, 1, "C")
_ENTRY: dict = {}
_SIGNATURES: dict[str, list[str]] = {}


def _entry(name: str, func, sig: tuple):
    """The compiled entry point of ``func`` for ``sig``, compiled on first use."""
    fn = _ENTRY.get((name, sig))
    if fn is None:
        fn = _ENTRY[(name, sig)] = func.compile(sig)
        _SIGNATURES.setdefault(name, []).append(f"({', '.join(map(str, sig))})")
    return fn


def compiled_signatures() -> dict[str, list[str]]:
    """Kernel name -> the Numba signatures compiled so far.

    >>> isinstance(compiled_signatures(), dict)
    True
    """
    return {k: list(v) for k, v in _SIGNATURES.items()}


def _qmm_entry(parallel: bool, out_dt: np.dtype):
    o = nbt.Array(numba.from_dtype(out_dt), 2, "C")
    sig = (_I32_2D, _I32_2D, _I32_2D, o, nbt.float64, _F64_1D, nbt.float64, nbt.float64, nbt.float64,
           nbt.boolean)
    return _entry("qmm_parallel" if parallel else "qmm", _qmm_parallel if parallel else _qmm_serial, sig)


def _requant_entry(out_dt: np.dtype):
    o = nbt.Array(numba.from_dtype(out_dt), 2, "C")
    return _entry("requant", _requant_all, (_I32_2D, o, nbt.float64, _F64_1D, nbt.float64, nbt.float64,
                                             nbt.float64))


def _flat_entry(name: str, func, arrays: tuple, scalars: int):
    sig = tuple(nbt.Array(numba.from_dtype(a.dtype), 1, "C") for a in arrays) + (nbt.float64,) * scalars
    return _entry(name, func, sig)


# --- quantization parameters --------------------------------------------------------------------

def minmax_qparams(lo: float, hi: float, qdtype) -> tuple[float, int]:
    """MinMaxObserver's (scale, zero_point) for real values in [lo, hi] (widened to contain 0).

    >>> from dispatch_jit.quantized import quint8
    >>> minmax_qparams(-1.0, 3.0, quint8)
    (0.01568627450980392, 64)
    """
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = (hi - lo) / (qdtype.qmax - qdtype.qmin)
    if not scale > 0 or not math.isfinite(scale):
        scale = 1.0
    zp = qdtype.qmin - round(lo / scale)
    return scale, int(min(max(zp, qdtype.qmin), qdtype.qmax))


# --- array-level matmul ------------------------------------------------------------------------

def quantized_matmul_arrays(a: np.ndarray, za: int, sa: float, b: np.ndarray, zb: int, sb: float,
                            qdtype, so: float | None = None, zo: int | None = None,
                            bias: np.ndarray | None = None):
    """``a @ b`` on 2-D integer storage; returns (out storage, scale, zero_point).

    With ``so``/``zo`` None the output parameters come from the result's range
    (``minmax_qparams``); ``bias`` (float, length n) is added in real units.
    """
    m, k = a.shape
    n = b.shape[1]
    if k > _MAX_K:
        raise ShapeError(f"quantized matmul: inner dimension {k} > {_MAX_K} could overflow the int32 "
                         f"accumulator; split the product or dequantize()")
    k2 = (k + 1) // 2
    ap = np.empty((m, k2), np.int32)
    bp = np.empty((k2, n), np.int32)
    _entry("pack_a", _pack_a, (nbt.Array(numba.from_dtype(a.dtype), 2, "A"), nbt.int32, _I32_2D))(a, za, ap)
    _entry("pack_b", _pack_b, (nbt.Array(numba.from_dtype(b.dtype), 2, "A"), nbt.int32, _I32_2D))(b, zb, bp)
    acc = np.empty((m, n), np.int32)
    out = np.empty((m, n), qdtype.np)
    parallel = m * n * k >= _PARALLEL_MIN and m >= 2 and numba.get_num_threads() > 1
    fn = _qmm_entry(parallel, qdtype.np)
    colbias_real = np.zeros(n) if bias is None else np.ascontiguousarray(bias, np.float64).reshape(n)
    auto = so is None
    if auto:
        fn(ap, bp, acc, out, 0.0, colbias_real, 0.0, 0.0, 0.0, False)
        if acc.size:
            lo = float(acc.min()) * sa * sb + float(colbias_real.min(initial=0.0))
            hi = float(acc.max()) * sa * sb + float(colbias_real.max(initial=0.0))
        else:
            lo = hi = 0.0
        so, zo = minmax_qparams(lo, hi, qdtype)
        _requant_entry(qdtype.np)(acc, out, sa * sb / so, colbias_real / so, float(zo),
                                  float(qdtype.qmin), float(qdtype.qmax))
    else:
        fn(ap, bp, acc, out, sa * sb / so, colbias_real / so, float(zo), float(qdtype.qmin),
           float(qdtype.qmax), True)
    return out, so, zo


# --- dispatcher kernels ------------------------------------------------------------------------

def _require_quantized(opname: str, metas, names, bits: int = QUANTIZED_CPU_BITS) -> None:
    for m, name in zip(metas, names):
        if m is None or m.kind != "tensor" or not m.keyset & bits:
            what = "a Python number" if m is not None and m.kind == "scalar" else \
                "a dense tensor" if m is not None and m.kind == "tensor" else "not a tensor"
            raise DTypeError(f"{opname}: argument '{name}' must be a quantized tensor, got {what}; "
                             f"quantize it with dj.quantize_per_tensor(...) or dequantize() the others")


def _out_qparams(so, zo, qdtype):
    from dispatch_jit.quantized import check_qparams
    return check_qparams(so, zo, qdtype)


class _Kernel:
    """A QuantizedCPU kernel: checks the metas once on the miss path, then runs ``impl``.
    (The QuantizedCUDA kernels subclass it with their key's bits and suffix.)"""

    names: tuple = ()
    key_bits = QUANTIZED_CPU_BITS
    suffix = "quantized_cpu"

    def __init__(self, opname: str):
        self.opname = opname
        self.__name__ = f"{opname}_{self.suffix}"

    def specialize(self, call):
        _require_quantized(call.op.name, call.metas, self.names, self.key_bits)
        rec = call.op.compiled.setdefault(self.__name__, [])
        dts = "x".join(m.dtype.name for m in call.metas[:len(self.names)])
        if dts not in rec:
            rec.append(dts)
        return self.run


def check_matmul_shapes(a, b, name: str) -> int:
    """The quantized matmul's shape rule, (..., k) @ (k, n) or (k,); returns k."""
    if a.ndim < 1 or b.ndim < 1 or b.ndim > 2:
        raise ShapeError(f"quantized {name}: supports a (..., k) @ (k, n) or (k,), got shapes "
                         f"{a.shape} and {b.shape}")
    k = a.shape[-1]
    if b.shape[0] != k:
        raise ShapeError(f"quantized {name}: shapes {a.shape} and {b.shape} cannot be multiplied "
                         f"({k} != {b.shape[0]})")
    return k


def _matmul2d(x: QuantizedTensor, y: QuantizedTensor, so, zo, bias=None, name="matmul"):
    a, b = x._data, y._data
    k = check_matmul_shapes(a, b, name)
    lead = a.shape[:-1]
    b2 = b if b.ndim == 2 else b.reshape(k, 1)
    a2 = a.reshape(-1, k)
    qd = x.qdtype
    if so is not None:
        so, zo = _out_qparams(so, zo, qd)
    out, so, zo = quantized_matmul_arrays(a2, x.zero_point, x.scale, b2, y.zero_point, y.scale, qd, so, zo, bias)
    shape = lead + ((b.shape[1],) if b.ndim == 2 else ())
    return make_quantized(out.reshape(shape), so, zo, qd)


class QMatmul(_Kernel):
    names = ("self", "other")

    def __init__(self, explicit: bool):
        super().__init__("quantized_matmul" if explicit else "matmul")
        self.explicit = explicit

    def run(self, x, y, so=None, zo=None):
        return _matmul2d(x, y, so, zo)


class QLinear(_Kernel):
    names = ("input", "weight")

    def run(self, x, w, bias, so, zo):
        if w.ndim != 2:
            raise ShapeError(f"quantized_linear: weight must be 2-D (out_features, in_features), got {w.shape}")
        if bias is not None:
            if isinstance(bias, QuantizedTensor) or bias._data.dtype.kind != "f":
                raise DTypeError(f"quantized_linear: bias must be a float tensor, got {bias.dtype}")
            if bias.shape != (w.shape[0],):
                raise ShapeError(f"quantized_linear: bias has shape {bias.shape}, expected ({w.shape[0]},)")
            bias = bias._data
        wt = make_quantized(w._data.T, w.scale, w.zero_point, w.qdtype)
        return _matmul2d(x, wt, so, zo, bias, "linear")


def _flat_pair(x, y, name):
    a, b = x._data, y._data
    if a.shape != b.shape:
        try:
            shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            from dispatch_jit.errors import BroadcastError
            raise BroadcastError(f"quantized {name}: shapes {a.shape} and {b.shape} cannot be broadcast "
                                 f"together") from None
        a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
    return np.ascontiguousarray(a).ravel(), np.ascontiguousarray(b).ravel(), a.shape


class QAdd(_Kernel):
    names = ("self", "other")

    def __init__(self, explicit: bool):
        super().__init__("quantized_add" if explicit else "add")
        self.explicit = explicit

    def run(self, x, y, *rest):
        if self.explicit:
            so, zo = _out_qparams(rest[0], rest[1], x.qdtype)
        else:
            alpha, out = rest
            if alpha != 1 or out is not None:
                raise DTypeError("quantized add: alpha and out= are not supported; use "
                                 "dj.quantized_add(a, b, output_scale, output_zero_point)")
            so = None
        a, b, shape = _flat_pair(x, y, "add")
        qd = x.qdtype
        sa, za, sb, zb = x.scale, float(x.zero_point), y.scale, float(y.zero_point)
        if so is None:
            lo, hi = _flat_entry("add_minmax", _add_minmax, (a, b), 4)(a, b, sa, za, sb, zb) if a.size else (0, 0)
            so, zo = minmax_qparams(lo, hi, qd)
        out = np.empty(a.size, qd.np)
        _flat_entry("add", _add, (a, b, out), 8)(a, b, out, sa, za, sb, zb, so, float(zo), float(qd.qmin),
                                                 float(qd.qmax))
        return make_quantized(out.reshape(shape), so, zo, qd)


class QRelu(_Kernel):
    names = ("self",)

    def run(self, x, out=None):
        if out is not None:
            raise DTypeError("quantized relu: out= is not supported")
        a = np.ascontiguousarray(x._data)
        res = np.empty_like(a)
        fn = _entry("relu", _relu, (nbt.Array(numba.from_dtype(a.dtype), 1, "C"),) * 2 + (nbt.int64,))
        fn(a.reshape(-1), res.reshape(-1), x.zero_point)
        return make_quantized(res, x.scale, x.zero_point, x.qdtype)


KERNELS = {
    "matmul": QMatmul(False),
    "quantized_matmul": QMatmul(True),
    "add.Tensor": QAdd(False),
    "quantized_add": QAdd(True),
    "relu": QRelu("relu"),
    "quantized_linear": QLinear("quantized_linear"),
}

# -- definitions and registrations ---------------------------------------------------------------
aten_quantized_defs = Library("aten", "FRAGMENT")
for _schema in SCHEMAS:
    aten_quantized_defs.define(_schema)

aten_quantized = Library("aten", "IMPL", "QuantizedCPU")
for _name, _kernel in KERNELS.items():
    aten_quantized.impl(_name, _kernel)

# the public entries (dj.quantized_matmul, ...): the generated dispatcher functions
quantized_matmul = lookup("aten::quantized_matmul").entry
quantized_add = lookup("aten::quantized_add").entry
quantized_linear = lookup("aten::quantized_linear").entry

# the QuantizedCUDA kernels register themselves (numba.cuda is imported on first use only)
from . import cuda_quantized  # noqa: E402,F401
