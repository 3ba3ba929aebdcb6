"""Quantized ops as data: their argument handling, written once for both backends.

Each class is one op at a Quantized key.  ``specialize`` checks once per
signature that the quantized arguments are quantized tensors of this
device and records the signature; ``run`` checks the values (shapes,
output qparams, bias, unsupported ``alpha``/``out=``) and hands the backend
(cpu.CPU or cuda.CUDA, a few functions over NumPy or device arrays) only
what it computes.  Both backends' results agree bit for bit.
"""

from __future__ import annotations

import math

from dispatch_jit.broadcast import broadcast_shapes
from dispatch_jit.errors import BroadcastError, DTypeError, ShapeError
from dispatch_jit.quantized import QuantizedTensor, check_qparams, make_quantized
from dispatch_jit.registry import CompiledSignature

__all__ = ["QMatmul", "QLinear", "QAdd", "QRelu", "MAX_K", "check_accumulator", "check_matmul_shapes",
           "minmax_qparams"]


# -- quantization parameters --------------------------------------------------------------------

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


def _require_quantized(opname: str, metas, names, bits: int) -> None:
    for m, name in zip(metas, names):
        if m is None or m.kind != "tensor" or not m.keyset & bits:
            what = "a Python number" if m is not None and m.kind == "scalar" else \
                "a dense tensor" if m is not None and m.kind == "tensor" else "not a tensor"
            raise DTypeError(f"{opname}: argument '{name}' must be a quantized tensor, got {what}; "
                             f"quantize it with dj.quantize_per_tensor(...) or dequantize() the others")


class _QuantizedOp:
    """One op at ``Quantized<device>``: checks the metas once on the miss path, then runs ``run``."""

    names: tuple = ()

    def __init__(self, opname: str, device: str, bits: int, backend):
        self.opname, self.device, self.bits, self.backend = opname, device, bits, backend
        self.__name__ = f"{opname}_quantized_{device}"

    def specialize(self, call):
        _require_quantized(call.op.name, call.metas, self.names, self.bits)
        dts = tuple(m.dtype.name for m in call.metas[:len(self.names)])
        call.op.note_compiled(self.__name__, CompiledSignature(dts))
        return self.run


MAX_K = 33024         # k * 255 * 255 < 2**31: the int32 accumulator cannot overflow


def check_accumulator(k: int) -> None:
    """The int32 accumulator's bound on the inner dimension, for both backends' products."""
    if k > MAX_K:
        raise ShapeError(f"quantized matmul: inner dimension {k} > {MAX_K} could overflow the int32 "
                         f"accumulator; split the product or dequantize()")


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


def _matmul(backend, x: QuantizedTensor, y: QuantizedTensor, so, zo, bias=None, name="matmul"):
    a, b = x._data, y._data
    k = check_matmul_shapes(a, b, name)
    qd = x.qdtype
    if so is not None:
        so, zo = check_qparams(so, zo, qd)
    out, so, zo = backend.matmul(a, x.zero_point, x.scale, b, y.zero_point, y.scale, k, qd, so, zo, bias)
    shape = a.shape[:-1] + ((b.shape[1],) if b.ndim == 2 else ())
    return make_quantized(backend.reshape(out, shape), so, zo, qd)


class QMatmul(_QuantizedOp):
    names = ("self", "other")

    def __init__(self, explicit: bool, device: str, bits: int, backend):
        super().__init__("quantized_matmul" if explicit else "matmul", device, bits, backend)

    def run(self, x, y, so=None, zo=None):
        return _matmul(self.backend, x, y, so, zo)


class QLinear(_QuantizedOp):
    names = ("input", "weight")

    def __init__(self, device: str, bits: int, backend):
        super().__init__("quantized_linear", device, bits, backend)

    def run(self, x, w, bias, so, zo):
        if w.ndim != 2:
            raise ShapeError(f"quantized_linear: weight must be 2-D (out_features, in_features), got {w.shape}")
        if bias is not None:
            if isinstance(bias, QuantizedTensor) or bias._data.dtype.kind != "f":
                raise DTypeError(f"quantized_linear: bias must be a float tensor, got {bias.dtype}")
            if bias.shape != (w.shape[0],):
                raise ShapeError(f"quantized_linear: bias has shape {bias.shape}, expected ({w.shape[0]},)")
            if self.device == "cuda" and not bias.is_cuda:
                raise DTypeError(f"quantized_linear: bias is on {bias.device} but the input is on {x.device}; "
                                 f"move it with .cuda()")
            bias = bias._data
        wt = make_quantized(self.backend.transpose(w._data), w.scale, w.zero_point, w.qdtype)
        return _matmul(self.backend, x, wt, so, zo, bias, "linear")


class QAdd(_QuantizedOp):
    names = ("self", "other")

    def __init__(self, explicit: bool, device: str, bits: int, backend):
        super().__init__("quantized_add" if explicit else "add", device, bits, backend)
        self.explicit = explicit

    def run(self, x, y, *rest):
        if self.explicit:
            so, zo = check_qparams(rest[0], rest[1], x.qdtype)
        else:
            alpha, out = rest
            if alpha != 1 or out is not None:
                raise DTypeError("quantized add: alpha and out= are not supported; use "
                                 "dj.quantized_add(a, b, output_scale, output_zero_point)")
            so = zo = None
        sa, sb = x._data.shape, y._data.shape
        shape = sa
        if sa != sb:
            try:
                shape = broadcast_shapes(sa, sb)
            except ValueError:
                raise BroadcastError(f"quantized add: shapes {sa} and {sb} cannot be broadcast together") from None
        backend, qd = self.backend, x.qdtype
        a, b = backend.flat(x._data, shape), backend.flat(y._data, shape)
        q = (x.scale, float(x.zero_point), y.scale, float(y.zero_point))
        if so is None:
            so, zo = minmax_qparams(*(backend.add_range(a, b, *q) if a.size else (0.0, 0.0)), qd)
        return make_quantized(backend.add(a, b, shape, *q, so, zo, qd), so, zo, qd)


class QRelu(_QuantizedOp):
    names = ("self",)

    def __init__(self, device: str, bits: int, backend):
        super().__init__("relu", device, bits, backend)

    def run(self, x, out=None):
        if out is not None:
            raise DTypeError("quantized relu: out= is not supported")
        return make_quantized(self.backend.relu(x._data, x.zero_point), x.scale, x.zero_point, x.qdtype)
