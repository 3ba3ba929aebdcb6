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

import numpy as np

from dispatch_jit.broadcast import broadcast_shapes
from dispatch_jit.cuda.array import CudaArray, empty
from dispatch_jit.cuda.launch import elementwise_config
from dispatch_jit.cuda.runtime import is_simulator
from dispatch_jit.errors import BroadcastError, DTypeError, ShapeError
from dispatch_jit.library import Library
from dispatch_jit.quantized import QUANTIZED_CUDA_BITS, QuantizedTensor, check_qparams, make_quantized

from ..cuda_codegen import compile_cuda
from ..cuda_copy import contiguous_copy
from .cpu import _MAX_K, _Kernel as _CpuKernel, check_matmul_shapes, minmax_qparams

__all__ = ["quantize_cuda", "dequantize_cuda", "CUDA_QUANTIZED_KERNELS"]


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
        ns = {"math": math}
        exec(_RINT, ns)
        _RINT_DEV.append(cuda_module().jit(device=True)(ns["_rint"]))
    return _RINT_DEV[0]


def _launch(kernel, n: int, device_index: int, *args) -> None:
    if n == 0:
        return
    blocks, threads = elementwise_config(n, device_index)
    kernel[blocks, threads](*args)


def _flat(a: CudaArray) -> CudaArray:
    """A C-contiguous version of ``a`` (itself when it already is one)."""
    return a if a.flags.c_contiguous else contiguous_copy(a)


# --- quantize / dequantize -----------------------------------------------------------------------

_QUANT_SRC = """\
def quantize_kernel(x, x_o, out, scale, zp, qmin, qmax, n):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        v = _rint(np.float64(x[x_o + i]) / scale) + zp
        out[i] = _dt(min(max(v, qmin), qmax))
        i += step
"""


def quantize_cuda(x: CudaArray, scale: float, zero_point: int, qdtype) -> CudaArray:
    """The integer storage of ``quantize_per_tensor`` for device floats ``x`` (validated qparams)."""
    x = _flat(x)
    out = empty(x.shape, qdtype.np, x.device_index)
    k = _with_rint(_QUANT_SRC, "quantize_kernel", {"_dt": qdtype.np.type})
    _launch(k, x.size, x.device_index, x.storage.buf, x.offset, out.storage.buf, float(scale), float(zero_point),
            float(qdtype.qmin), float(qdtype.qmax), x.size)
    return out


_DEQUANT_SRC = """\
def dequantize_kernel(q, q_o, out, zp, scale, n):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        out[i] = (np.float32(q[q_o + i]) - zp) * scale
        i += step
"""


def dequantize_cuda(q: CudaArray, scale: float, zero_point: int) -> CudaArray:
    """``(q - zero_point) * scale`` in float32, as ``quantized.dequantize_array``."""
    q = _flat(q)
    out = empty(q.shape, np.float32, q.device_index)
    k = compile_cuda(_DEQUANT_SRC, "dequantize_kernel")
    _launch(k, q.size, q.device_index, q.storage.buf, q.offset, out.storage.buf, np.float32(zero_point),
            np.float32(scale), q.size)
    return out


# --- matmul ---------------------------------------------------------------------------------------

_ACC_SRC = """\
def qmm_acc(a, a_o, a_s0, a_s1, b, b_o, b_s0, b_s1, za, zb, acc, mm, m, n, k, minmax):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < m * n:
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
        i += step
"""

_REQUANT_SRC = """\
def qmm_requant(acc, out, mult, bias, has_bias, so, zo, qmin, qmax, total, n):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < total:
        cb = 0.0
        if has_bias:
            cb = np.float64(bias[i % n]) / so
        v = _rint(_dmul(np.float64(acc[i]), mult) + cb) + zo
        out[i] = _dt(min(max(v, qmin), qmax))
        i += step
"""


def _matmul_cuda(a: CudaArray, za: int, sa: float, b: CudaArray, zb: int, sb: float, qdtype, so, zo,
                 bias: CudaArray | None):
    """``a @ b`` on 2-D device integer storage; returns (out storage, scale, zero_point)."""
    m, k = a.shape
    n = b.shape[1]
    if k > _MAX_K:
        raise ShapeError(f"quantized matmul: inner dimension {k} > {_MAX_K} could overflow the int32 "
                         f"accumulator; split the product or dequantize()")
    dev = a.device_index
    acc = empty((m, n), np.int32, dev)
    out = empty((m, n), qdtype.np, dev)
    auto = so is None
    mm = empty((2,), np.int32, dev)
    if auto:
        from ..cuda_copy import fill
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


class _Kernel(_CpuKernel):
    """A QuantizedCUDA kernel: the CPU kernels' checks, at the QuantizedCUDA key."""

    key_bits = QUANTIZED_CUDA_BITS
    suffix = "quantized_cuda"


def _matmul2d(x: QuantizedTensor, y: QuantizedTensor, so, zo, bias=None, name="matmul"):
    a, b = x._data, y._data
    k = check_matmul_shapes(a, b, name)
    lead = a.shape[:-1]
    b2 = b if b.ndim == 2 else b.view_as(lambda l: l.reshape(k, 1))
    if a.ndim != 2:
        a = _flat(a)
        a = a.view_as(lambda l: l.reshape(-1, k))
    qd = x.qdtype
    if so is not None:
        so, zo = check_qparams(so, zo, qd)
    out, so, zo = _matmul_cuda(a, x.zero_point, x.scale, b2, y.zero_point, y.scale, qd, so, zo, bias)
    shape = lead + ((b.shape[1],) if b.ndim == 2 else ())
    return make_quantized(out.view_as(lambda l: l.reshape(shape)), so, zo, qd)


class QMatmulCUDA(_Kernel):
    names = ("self", "other")

    def __init__(self, explicit: bool):
        super().__init__("quantized_matmul" if explicit else "matmul")

    def run(self, x, y, so=None, zo=None):
        return _matmul2d(x, y, so, zo)


class QLinearCUDA(_Kernel):
    names = ("input", "weight")

    def run(self, x, w, bias, so, zo):
        if w.ndim != 2:
            raise ShapeError(f"quantized_linear: weight must be 2-D (out_features, in_features), got {w.shape}")
        if bias is not None:
            if isinstance(bias, QuantizedTensor) or bias._data.dtype.kind != "f":
                raise DTypeError(f"quantized_linear: bias must be a float tensor, got {bias.dtype}")
            if bias.shape != (w.shape[0],):
                raise ShapeError(f"quantized_linear: bias has shape {bias.shape}, expected ({w.shape[0]},)")
            if not bias.is_cuda:
                raise DTypeError(f"quantized_linear: bias is on {bias.device} but the input is on {x.device}; "
                                 f"move it with .cuda()")
            bias = bias._data
        wt = make_quantized(w._data.view_as(lambda l: l.T), w.scale, w.zero_point, w.qdtype)
        return _matmul2d(x, wt, so, zo, bias, "linear")


# --- add, relu ------------------------------------------------------------------------------------

_ADD_SRC = """\
def qadd(a, b, out, sa, za, sb, zb, so, zo, qmin, qmax, n):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        v = _dmul(sa, np.float64(a[i]) - za) + _dmul(sb, np.float64(b[i]) - zb)
        out[i] = _dt(min(max(_rint(v / so) + zo, qmin), qmax))
        i += step
"""

_ADD_MINMAX_SRC = """\
def qadd_minmax(a, b, mm, sa, za, sb, zb, n):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        v = _dmul(sa, np.float64(a[i]) - za) + _dmul(sb, np.float64(b[i]) - zb)
        cuda.atomic.min(mm, 0, v)
        cuda.atomic.max(mm, 1, v)
        i += step
"""


def _flat_pair(x, y, name):
    a, b = x._data, y._data
    shape = a.shape
    if a.shape != b.shape:
        try:
            shape = broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise BroadcastError(f"quantized {name}: shapes {a.shape} and {b.shape} cannot be broadcast "
                                 f"together") from None
        if a.shape != shape:
            a = a.view_as(lambda l: np.broadcast_to(l, shape))
        if b.shape != shape:
            b = b.view_as(lambda l: np.broadcast_to(l, shape))
    a, b = _flat(a), _flat(b)
    if a.offset:
        a = contiguous_copy(a)
    if b.offset:
        b = contiguous_copy(b)
    return a, b, shape


class QAddCUDA(_Kernel):
    names = ("self", "other")

    def __init__(self, explicit: bool):
        super().__init__("quantized_add" if explicit else "add")
        self.explicit = explicit

    def run(self, x, y, *rest):
        if self.explicit:
            so, zo = check_qparams(rest[0], rest[1], x.qdtype)
        else:
            alpha, out = rest
            if alpha != 1 or out is not None:
                raise DTypeError("quantized add: alpha and out= are not supported; use "
                                 "dj.quantized_add(a, b, output_scale, output_zero_point)")
            so = None
        a, b, shape = _flat_pair(x, y, "add")
        qd = x.qdtype
        dev = a.device_index
        sa, za, sb, zb = x.scale, float(x.zero_point), y.scale, float(y.zero_point)
        n = a.size
        mul = _exact_mul_globals()
        if so is None:
            if n:
                from dispatch_jit.cuda.array import from_host
                mm = from_host(np.zeros(2, np.float64), dev)     # the CPU's lo, hi start at 0.0
                k = compile_cuda(_ADD_MINMAX_SRC, "qadd_minmax", mul)
                _launch(k, n, dev, a.storage.buf, b.storage.buf, mm.storage.buf, sa, za, sb, zb, n)
                lo, hi = (float(v) for v in mm.to_host())         # the one synchronization
            else:
                lo = hi = 0.0
            so, zo = minmax_qparams(lo, hi, qd)
        out = empty(shape, qd.np, dev)
        k = _with_rint(_ADD_SRC, "qadd", {"_dt": qd.np.type, **mul})
        _launch(k, n, dev, a.storage.buf, b.storage.buf, out.storage.buf, sa, za, sb, zb, float(so), float(zo),
                float(qd.qmin), float(qd.qmax), n)
        return make_quantized(out, so, zo, qd)


_RELU_SRC = """\
def qrelu(a, a_o, out, zp, n):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        v = a[a_o + i]
        out[i] = v if v > zp else zp
        i += step
"""


class QReluCUDA(_Kernel):
    names = ("self",)

    def run(self, x, out=None):
        if out is not None:
            raise DTypeError("quantized relu: out= is not supported")
        a = _flat(x._data)
        res = empty(a.shape, a.dtype, a.device_index)
        k = compile_cuda(_RELU_SRC, "qrelu")
        _launch(k, a.size, a.device_index, a.storage.buf, a.offset, res.storage.buf, a.dtype.type(x.zero_point),
                a.size)
        return make_quantized(res, x.scale, x.zero_point, x.qdtype)


CUDA_QUANTIZED_KERNELS = {
    "matmul": QMatmulCUDA(False),
    "quantized_matmul": QMatmulCUDA(True),
    "add.Tensor": QAddCUDA(False),
    "quantized_add": QAddCUDA(True),
    "relu": QReluCUDA("relu"),
    "quantized_linear": QLinearCUDA("quantized_linear"),
}

aten_quantized_cuda = Library("aten", "IMPL", "QuantizedCUDA")
for _name, _kernel in CUDA_QUANTIZED_KERNELS.items():
    aten_quantized_cuda.impl(_name, _kernel)
