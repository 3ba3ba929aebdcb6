"""Quantized tensors: per-tensor affine quantization, as PyTorch's ``quantize_per_tensor``.

A quantized tensor stores integers ``q`` (int8 for ``qint8``, uint8 for
``quint8``) and stands for the real values ``(q - zero_point) * scale``.
It is a ``Tensor`` subclass whose ``_data`` is the integer storage and whose
signature carries the QuantizedCPU key (not CPU), so every op on it
dispatches to the kernels registered at QuantizedCPU (kernels/quantized/cpu.py);
an op without one raises ``NoKernelError`` naming the keys that have kernels.

The dispatcher's memo key holds the signature (key set, storage dtype, ndim,
contiguity) but not ``scale`` / ``zero_point``: kernels read them from the
tensors at call time.

>>> import dispatch_jit as dj
>>> from dispatch_jit.quantized import quantize_per_tensor, qint8
>>> q = quantize_per_tensor(dj.tensor([-1.0, 0.0, 0.26]), 0.1, 0, qint8)
>>> q
tensor([-1.0000,  0.0000,  0.3000], size=(3,), dtype=dj.qint8, quantization_scheme=per_tensor_affine, scale=0.1, zero_point=0)
>>> q.int_repr()
tensor([-10,   0,   3], dtype=dj.int8)
>>> q.q_scale(), q.q_zero_point()
(0.1, 0)
"""

from __future__ import annotations

import math

import numpy as np

from .conversions import conversion
from .dtypes import DType, from_numpy_dtype
from .errors import ArgumentTypeError, DTypeError, InvalidArgumentError
from .keys import DispatchKey, key_bits
from .signature import MAX_NDIM, make_sig
from .tensor import Tensor, wrap, _new

__all__ = ["QDType", "qint8", "quint8", "QuantizedTensor", "quantize_per_tensor", "make_quantized",
           "QUANTIZED_CPU_BITS", "QUANTIZED_CUDA_BITS", "per_tensor_affine"]

QUANTIZED_CPU_BITS = key_bits(DispatchKey.QuantizedCPU)
QUANTIZED_CUDA_BITS = key_bits(DispatchKey.QuantizedCUDA)
per_tensor_affine = "per_tensor_affine"


class QDType:
    """A quantized dtype: a marker naming the storage integer type and its range.

    >>> qint8, quint8.qmin, quint8.qmax
    (dispatch_jit.qint8, 0, 255)
    """

    __slots__ = ("name", "np", "qmin", "qmax")

    def __init__(self, name: str, storage):
        self.name, self.np = name, np.dtype(storage)
        info = np.iinfo(self.np)
        self.qmin, self.qmax = int(info.min), int(info.max)

    @property
    def storage(self) -> DType:
        """The dense dtype of ``int_repr()``."""
        return from_numpy_dtype(self.np)

    is_floating_point = False
    is_quantized = True

    def __repr__(self) -> str:
        return f"dispatch_jit.{self.name}"


qint8 = QDType("qint8", np.int8)
quint8 = QDType("quint8", np.uint8)


def _on_cuda(a) -> bool:
    return type(a) is not np.ndarray and hasattr(a, "storage")     # a CudaArray


class QuantizedTensor(Tensor):
    """A per-tensor affine quantized tensor; make one with ``quantize_per_tensor``.

    Its integer storage is a NumPy array (key QuantizedCPU) or a CudaArray
    (key QuantizedCUDA, kernels in kernels/quantized/cuda.py)."""

    __slots__ = ()

    # -- device ------------------------------------------------------------------
    @property
    def device(self):
        from .tensor import device, CPU_DEVICE
        return device("cuda", self._data.device_index) if _on_cuda(self._data) else CPU_DEVICE

    @property
    def is_cuda(self) -> bool:
        return _on_cuda(self._data)

    def _host(self) -> np.ndarray:
        return self._data.to_host() if _on_cuda(self._data) else self._data

    def numpy(self) -> np.ndarray:
        """The stored integers (a host copy for a CUDA tensor)."""
        return self._host()

    def __array__(self, dtype=None, copy=None):
        a = self._host()
        return a if dtype is None else a.astype(dtype)

    def cuda(self, device=None) -> "QuantizedTensor":
        """The same quantized tensor with its integers in device memory (key QuantizedCUDA)."""
        from .tensor import device as _device
        d = _device("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))
        if d.type != "cuda":
            raise InvalidArgumentError(f"cuda(): expected a CUDA device, got {d}")
        return self._to_device(d)

    def cpu(self) -> "QuantizedTensor":
        from .tensor import CPU_DEVICE
        return self._to_device(CPU_DEVICE)

    def to(self, *args, **kwargs):
        """``q.to("cuda")`` / ``q.to("cpu")`` move the integers; other conversions dispatch
        (and raise the missing-kernel error: dequantize() first)."""
        from .tensor import device as _device
        dev = kwargs.get("device")
        rest = []
        for a in args:
            if isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda") or type(a).__name__ == "device":
                dev = a
            else:
                rest.append(a)
        if dev is not None and not rest and kwargs.keys() <= {"device"}:
            return self._to_device(_device(dev))
        return Tensor.to(self, *args, **kwargs)

    def _to_device(self, d) -> "QuantizedTensor":
        if d == self.device:
            return self
        if d.type == "cuda":
            from .cuda.array import from_host
            from .cuda.runtime import require
            require(d.index or 0)
            data = from_host(self._host(), d.index or 0)
        elif d.type == "cpu":
            data = self._host().copy() if not _on_cuda(self._data) else self._data.to_host()
        else:
            raise InvalidArgumentError(f"quantized tensors live on 'cpu' or 'cuda', not {d}")
        return make_quantized(data, self.scale, self.zero_point, self.qdtype)

    @property
    def dtype(self) -> QDType:
        return self.qdtype

    @property
    def is_quantized(self) -> bool:
        return True

    def qscheme(self) -> str:
        return per_tensor_affine

    def q_scale(self) -> float:
        return self.scale

    def q_zero_point(self) -> int:
        return self.zero_point

    def int_repr(self) -> Tensor:
        """The stored integers as a dense int8/uint8 tensor (a copy, on this tensor's device)."""
        if _on_cuda(self._data):
            from .cuda.copy import contiguous_copy
            return wrap(contiguous_copy(self._data))
        return wrap(self._data.copy())

    def dequantize(self) -> Tensor:
        """The represented real values, ``(q - zero_point) * scale``, as float32 (on this tensor's device)."""
        if _on_cuda(self._data):
            return wrap(conversion("dequantize", "cuda")(self._data, self.scale, self.zero_point))
        return wrap(dequantize_array(self._data, self.scale, self.zero_point))

    def requires_grad_(self, requires_grad: bool = True):
        if requires_grad:
            raise DTypeError("quantized tensors cannot require gradients; dequantize() first")
        return self

    def detach(self) -> "QuantizedTensor":
        return make_quantized(self._data, self.scale, self.zero_point, self.qdtype)

    def __repr__(self) -> str:
        from .printing import format_data
        body = format_data(dequantize_array(self._host(), self.scale, self.zero_point))
        dev = f", device='{self.device}'" if _on_cuda(self._data) else ""
        return (f"tensor({body}, size={tuple(self.shape)}, dtype=dj.{self.qdtype.name}, "
                f"quantization_scheme={per_tensor_affine}, scale={self.scale}, zero_point={self.zero_point}{dev})")


def dequantize_array(q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    # int -> float32 is exact for int8/uint8; one float32 multiply, as PyTorch's dequantize
    return (q.astype(np.float32) - np.float32(zero_point)) * np.float32(scale)


def quantized_sig(data) -> int:
    """The signature of quantized storage ``data``: QuantizedCPU for a NumPy array,
    QuantizedCUDA (with its device index) for a CudaArray."""
    if _on_cuda(data):
        return make_sig(QUANTIZED_CUDA_BITS, from_numpy_dtype(data.dtype), data.ndim, data.flags.c_contiguous,
                        data.device_index)
    return make_sig(QUANTIZED_CPU_BITS, from_numpy_dtype(data.dtype), data.ndim, data.flags.c_contiguous)


def make_quantized(data, scale: float, zero_point: int, qdtype: QDType) -> QuantizedTensor:
    """Wrap integer storage (a NumPy array or a CudaArray; no copy, no checks): the kernels' output path."""
    t = _new(QuantizedTensor)
    t._data = data
    t._sig = quantized_sig(data)
    t.scale, t.zero_point, t.qdtype = scale, zero_point, qdtype
    return t


def check_qparams(scale, zero_point, qdtype) -> tuple[float, int]:
    """Validate (scale, zero_point) for ``qdtype``; return them as (float, int)."""
    if not isinstance(qdtype, QDType):
        raise DTypeError(f"quantized dtype must be dj.qint8 or dj.quint8, got {qdtype!r}")
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating)):
        raise ArgumentTypeError(f"scale must be a positive float, got {type(scale).__name__} {scale!r}")
    scale = float(scale)
    if not (scale > 0 and math.isfinite(scale)):
        raise InvalidArgumentError(f"scale must be a positive finite float, got {scale}")
    if isinstance(zero_point, bool) or not isinstance(zero_point, (int, np.integer)):
        raise ArgumentTypeError(f"zero_point must be an int, got {type(zero_point).__name__} {zero_point!r}")
    zero_point = int(zero_point)
    if not qdtype.qmin <= zero_point <= qdtype.qmax:
        raise InvalidArgumentError(f"zero_point {zero_point} is out of range for {qdtype.name}: expected "
                         f"{qdtype.qmin} <= zero_point <= {qdtype.qmax}")
    return scale, zero_point


def quantize_array(x: np.ndarray, scale: float, zero_point: int, qdtype: QDType) -> np.ndarray:
    """``clamp(round_half_even(x / scale) + zero_point, qmin, qmax)`` as qdtype's storage."""
    r = np.rint(np.asarray(x, np.float64) / scale) + zero_point
    return np.clip(r, qdtype.qmin, qdtype.qmax).astype(qdtype.np)


def quantize_per_tensor(t, scale, zero_point, dtype) -> QuantizedTensor:
    """Quantize a float tensor with one (scale, zero_point) for all elements.

    Args:
        t: a float16/float32/float64 tensor.
        scale: the quantum, a positive float.
        zero_point: the stored integer that stands for 0.0, in the range of ``dtype``.
        dtype: ``dj.qint8`` (int8 storage) or ``dj.quint8`` (uint8 storage).

    Values round half to even and saturate at the storage range.

    >>> import dispatch_jit as dj
    >>> q = quantize_per_tensor(dj.tensor([0.0, 1.0, 100.0]), 0.5, 128, quint8)
    >>> q.int_repr().tolist(), q.dequantize().tolist()
    ([128, 130, 255], [0.0, 1.0, 63.5])
    """
    if isinstance(t, QuantizedTensor):
        raise DTypeError("quantize_per_tensor: the input is already quantized; dequantize() it first")
    if not isinstance(t, Tensor):
        raise ArgumentTypeError(f"quantize_per_tensor expects a float Tensor, got {type(t).__name__}; "
                        f"make one with dj.tensor(...)")
    if t._data.dtype.kind != "f":
        raise DTypeError(f"quantize_per_tensor expects a floating point tensor, got {t.dtype}; "
                         f"convert it with .to(dj.float32)")
    scale, zero_point = check_qparams(scale, zero_point, dtype)
    if t.ndim > MAX_NDIM:
        raise InvalidArgumentError(f"tensors have at most {MAX_NDIM} dimensions, got {t.ndim}")
    if _on_cuda(t._data):
        q = conversion("quantize", "cuda")(t._data, scale, zero_point, dtype)
        return make_quantized(q, scale, zero_point, dtype)
    return make_quantized(quantize_array(t._data, scale, zero_point, dtype), scale, zero_point, dtype)


