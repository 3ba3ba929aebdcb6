"""QuantizedCUDA kernels: quantize / dequantize, int8 matmul and linear with int32
accumulation, add, relu -- the CPU kernels' math (kernels/quantized/cpu.py) on device.

Every result equals the CPU kernel's bit for bit on the same inputs:

- quantize: ``clamp(round_half_even(float64(x) / scale) + zero_point)``; the
  rounding is written out (floor, then ties to even), exact in float64;
- dequantize: ``(float32(q) - float32(zp)) * float32(scale)`` in float32;
- matmul: ``acc = sum_p (a[i,p] - za) * (b[p,j] - zb)`` in int32 (exact: the
  CPU refuses k > 33024 for the same reason), then ``clamp(rint(acc * mult +
  colbias[j]) + zo)`` in float64 with ``mult = sa * sb / so`` computed on the
  host as the CPU does;
- add: ``v = sa * (a - za) + sb * (b - zb)`` in float64, ``clamp(rint(v / so) + zo)``;
- relu: ``max(q, zero_point)``.

NVVM contracts ``x * y + z`` into one fused multiply-add by default, which
would round differently from the CPU; on hardware the products are written
with libdevice's ``dmul_rn`` (never contracted).  Under the simulator (plain
Python) they are ordinary multiplies.  The hardware path was never executed
in the session that wrote it.

Output parameters of the plain ``aten::matmul`` / ``aten::add.Tensor``
(MinMaxObserver's rule, ``quantized.minmax_qparams``) depend on the result's
range: the kernels reduce min / max on device with atomics and read those two
numbers back (one synchronization, as any data-dependent host value needs).
The explicit ``quantized_matmul`` / ``quantized_add`` / ``quantized_linear``
never synchronize.

The matmul is one thread per output element (grid-stride), operands read in
place through their strides: simple and exact, not tuned (no shared-memory
tiling, no dp4a).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from dispatch_jit.cuda.array import CudaArray, empty, from_host
from dispatch_jit.cuda.codegen import compile_cuda, grid_stride
from dispatch_jit.cuda.copy import contiguous_copy
from dispatch_jit.cuda.launch import launch as _launch
from dispatch_jit.cuda.runtime import is_simulator
from dispatch_jit.jit.source import define

from .op import check_accumulator, minmax_qparams

__all__ = ["quantize_cuda", "dequantize_cuda", "CUDA"]


def _exact_mul_globals() -> dict:
    """``_dmul(x, y)``: a float64 product rounded once, never fused into an FMA."""
    if is_simulator():
        return {"_dmul": _py_mul_device()}
    from numba.cuda import libdevice
    return {"_dmul": libdevice.dmul_rn}


_PYMUL: list = []


def _py_mul_device():
    if not _PYMUL:
        from dispatch_jit.cuda.runtime import cuda_module

        def _m(x, y):
            return x * y
        _PYMUL.append(cuda_module().jit(device=True)(_m))
    return _PYMUL[0]


# round half to even of a float64, written out (exact): r = floor(v); ties go to the even neighbour
_RINT = """\
def _rint(v):
    if not abs(v) < 4503599627370496.0:    # 2**52: already an integer (or inf / nan)
        return v
    r = float(math.floor(v))
    d = v - r
    if d > 0.5 or (d == 0.5 and math.fmod(r, 2.0) != 0.0):
        r += 1.0
    return r
"""


def _with_rint(body: str, name: str, extra: dict | None = None):
    g = dict(extra or {})
    g["_rint"] = _rint_device()
    return compile_cuda(body, name, g)


_RINT_DEV: list = []


def _rint_device():
    if not _RINT_DEV:
        from dispatch_jit.cuda.runtime import cuda_module
        import math
        rint = define(_RINT, "_rint", {"math": math}, "<dispatch_jit quantized rint>")
        _RINT_DEV.append(cuda_module().jit(device=True)(rint))
    return _RINT_DEV[0]


def _flat(a: CudaArray) -> CudaArray:
    """A C-contiguous version of ``a`` (itself when it already is one)."""
    return a if a.flags.c_contiguous else contiguous_copy(a)


# --- quantize / dequantize -----------------------------------------------------------------------

_QUANT_SRC = grid_stride("quantize_kernel(x, x_o, out, scale, zp, qmin, qmax, n)", "n", """\
v = _rint(np.float64(x[x_o + i]) / scale) + zp
out[i] = _dt(min(max(v, qmin), qmax))
""")


def quantize_cuda(x: CudaArray, scale: float, zero_point: int, qdtype) -> CudaArray:
    """The integer storage of ``quantize_per_tensor`` for device floats ``x`` (validated qparams)."""
    x = _flat(x)
    out = empty(x.shape, qdtype.np, x.device_index)
    k = _with_rint(_QUANT_SRC, "quantize_kernel", {"_dt": qdtype.np.type})
    _launch(k, x.size, x.device_index, x.storage.buf, x.offset, out.storage.buf, float(scale), float(zero_point),
            float(qdtype.qmin), float(qdtype.qmax), x.size)
    return out


_DEQUANT_SRC = grid_stride("dequantize_kernel(q, q_o, out, zp, scale, n)", "n", """\
out[i] = (np.float32(q[q_o + i]) - zp) * scale
""")


def dequantize_cuda(q: CudaArray, scale: float, zero_point: int) -> CudaArray:
    """``(q - zero_point) * scale`` in float32, as ``quantized.dequantize_array``."""
    q = _flat(q)
    out = empty(q.shape, np.float32, q.device_index)
    k = compile_cuda(_DEQUANT_SRC, "dequantize_kernel")
    _launch(k, q.size, q.device_index, q.storage.buf, q.offset, out.storage.buf, np.float32(zero_point),
            np.float32(scale), q.size)
    return out


# --- matmul ---------------------------------------------------------------------------------------

_ACC_SRC = grid_stride("qmm_acc(a, a_o, a_s0, a_s1, b, b_o, b_s0, b_s1, za, zb, acc, mm, m, n, k, minmax)", "m * n", """\
r = i // n
c = i - r * n
s = np.int32(0)
pa = a_o + r * a_s0
pb = b_o + c * b_s1
for p in range(k):
    s += (np.int32(a[pa]) - za) * (np.int32(b[pb]) - zb)
    pa += a_s1
    pb += b_s0
sv = np.int32(s)
acc[i] = sv
if minmax:
    cuda.atomic.min(mm, 0, sv)
    cuda.atomic.max(mm, 1, sv)
""")

_REQUANT_SRC = grid_stride("qmm_requant(acc, out, mult, bias, has_bias, so, zo, qmin, qmax, total, n)", "total", """\
cb = 0.0
if has_bias:
    cb = np.float64(bias[i % n]) / so
v = _rint(_dmul(np.float64(acc[i]), mult) + cb) + zo
out[i] = _dt(min(max(v, qmin), qmax))
""")


def _matmul_cuda(a: CudaArray, za: int, sa: float, b: CudaArray, zb: int, sb: float, qdtype, so, zo,
                 bias: CudaArray | None):
    """``a @ b`` on 2-D device integer storage; returns (out storage, scale, zero_point)."""
    m, k = a.shape
    n = b.shape[1]
    check_accumulator(k)
    dev = a.device_index
    acc = empty((m, n), np.int32, dev)
    out = empty((m, n), qdtype.np, dev)
    auto = so is None
    mm = empty((2,), np.int32, dev)
    if auto:
        from dispatch_jit.cuda.copy import fill
        fill(mm.view_as(lambda l: l[:1]), np.iinfo(np.int32).max)
        fill(mm.view_as(lambda l: l[1:]), np.iinfo(np.int32).min)
    ka = compile_cuda(_ACC_SRC, "qmm_acc")
    sa0, sa1 = a.elem_strides()
    sb0, sb1 = b.elem_strides()
    _launch(ka, m * n, dev, a.storage.buf, a.offset, sa0, sa1, b.storage.buf, b.offset, sb0, sb1,
            np.int32(za), np.int32(zb), acc.storage.buf, mm.storage.buf, m, n, k, auto)
    if bias is not None:
        bias = _flat(bias)
    if auto:
        if m * n:
            lo_acc, hi_acc = (int(v) for v in mm.to_host())     # the one synchronization
            cb = np.zeros(n) if bias is None else bias.to_host().astype(np.float64)
            lo = float(lo_acc) * sa * sb + float(cb.min(initial=0.0))
            hi = float(hi_acc) * sa * sb + float(cb.max(initial=0.0))
        else:
            lo = hi = 0.0
        so, zo = minmax_qparams(lo, hi, qdtype)
    kr = _with_rint(_REQUANT_SRC, "qmm_requant", {"_dt": qdtype.np.type, **_exact_mul_globals()})
    if bias is not None and bias.offset:
        bias = contiguous_copy(bias)
    bbuf = bias.storage.buf if bias is not None else acc.storage.buf
    _launch(kr, m * n, dev, acc.storage.buf, out.storage.buf, sa * sb / so, bbuf, bias is not None, float(so),
            float(zo), float(qdtype.qmin), float(qdtype.qmax), m * n, max(n, 1))
    return out, so, zo


# --- what quantized/op.py's ops compute on CUDA ---------------------------------------------------

def _matmul(a, za, sa, b, zb, sb, k, qdtype, so, zo, bias):
    b2 = b if b.ndim == 2 else b.view_as(lambda l: l.reshape(k, 1))
    if a.ndim != 2:
        a = _flat(a).view_as(lambda l: l.reshape(-1, k))
    return _matmul_cuda(a, za, sa, b2, zb, sb, qdtype, so, zo, bias)


def _reshape(a: CudaArray, shape: tuple) -> CudaArray:
    return a.view_as(lambda l: l.reshape(shape))


def _transpose(a: CudaArray) -> CudaArray:
    return a.view_as(lambda l: l.T)


# --- add, relu ------------------------------------------------------------------------------------

_ADD_SRC = grid_stride("qadd(a, b, out, sa, za, sb, zb, so, zo, qmin, qmax, n)", "n", """\
v = _dmul(sa, np.float64(a[i]) - za) + _dmul(sb, np.float64(b[i]) - zb)
out[i] = _dt(min(max(_rint(v / so) + zo, qmin), qmax))
""")

_ADD_MINMAX_SRC = grid_stride("qadd_minmax(a, b, mm, sa, za, sb, zb, n)", "n", """\
v = _dmul(sa, np.float64(a[i]) - za) + _dmul(sb, np.float64(b[i]) - zb)
cuda.atomic.min(mm, 0, v)
cuda.atomic.max(mm, 1, v)
""")


def _flat_to(a: CudaArray, shape: tuple) -> CudaArray:
    """``a`` broadcast to ``shape``, C-contiguous at offset 0: the add kernels index it from 0."""
    if a.shape != shape:
        a = a.view_as(lambda l: np.broadcast_to(l, shape))
    a = _flat(a)
    return contiguous_copy(a) if a.offset else a


def _add_range(a, b, sa, za, sb, zb):
    mm = from_host(np.zeros(2, np.float64), a.device_index)     # the CPU's lo, hi start at 0.0
    k = compile_cuda(_ADD_MINMAX_SRC, "qadd_minmax", _exact_mul_globals())
    _launch(k, a.size, a.device_index, a.storage.buf, b.storage.buf, mm.storage.buf, sa, za, sb, zb, a.size)
    return tuple(float(v) for v in mm.to_host())         # the one synchronization


def _add_arrays(a, b, shape, sa, za, sb, zb, so, zo, qd):
    out = empty(shape, qd.np, a.device_index)
    k = _with_rint(_ADD_SRC, "qadd", {"_dt": qd.np.type, **_exact_mul_globals()})
    _launch(k, a.size, a.device_index, a.storage.buf, b.storage.buf, out.storage.buf, sa, za, sb, zb, float(so),
            float(zo), float(qd.qmin), float(qd.qmax), a.size)
    return out


_RELU_SRC = grid_stride("qrelu(a, a_o, out, zp, n)", "n", """\
v = a[a_o + i]
out[i] = v if v > zp else zp
""")


def _relu_array(a: CudaArray, zero_point) -> CudaArray:
    a = _flat(a)
    res = empty(a.shape, a.dtype, a.device_index)
    k = compile_cuda(_RELU_SRC, "qrelu")
    _launch(k, a.size, a.device_index, a.storage.buf, a.offset, res.storage.buf, a.dtype.type(zero_point), a.size)
    return res


CUDA = SimpleNamespace(matmul=_matmul, reshape=_reshape, transpose=_transpose, flat=_flat_to, add_range=_add_range,
                       add=_add_arrays, relu=_relu_array)
