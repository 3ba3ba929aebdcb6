"""Quantized tensors: per-tensor affine quantization, as PyTorch's ``quantize_per_tensor``.

A quantized tensor stores integers ``q`` (int8 for ``qint8``, uint8 for
``quint8``) and stands for the real values ``(q - zero_point) * scale``.
It is a ``Tensor`` subclass whose ``_data`` is the integer storage and whose
signature carries the QuantizedCPU key (not CPU), so every op on it
dispatches to the kernels registered at QuantizedCPU (kernels/quantized.py);
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

from .dtypes import DType, from_numpy_dtype
from .errors import DTypeError
from .keys import DispatchKey
from .signature import MAX_NDIM, make_sig
from .tensor import Tensor, wrap, _new

__all__ = ["QDType", "qint8", "quint8", "QuantizedTensor", "quantize_per_tensor", "make_quantized",
           "QUANTIZED_CPU_BITS", "per_tensor_affine"]

QUANTIZED_CPU_BITS = 1 << DispatchKey.QuantizedCPU.value
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
_BY_STORAGE = {qint8.np: qint8, quint8.np: quint8}


class QuantizedTensor(Tensor):
    """A per-tensor affine quantized CPU tensor; make one with ``quantize_per_tensor``."""

    __slots__ = ()

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
        """The stored integers as a dense int8/uint8 tensor (a copy)."""
        return wrap(self._data.copy())

    def dequantize(self) -> Tensor:
        """The represented real values, ``(q - zero_point) * scale``, as float32."""
        return wrap(dequantize_array(self._data, self.scale, self.zero_point))

    def requires_grad_(self, requires_grad: bool = True):
        if requires_grad:
            raise DTypeError("quantized tensors cannot require gradients; dequantize() first")
        return self

    def detach(self) -> "QuantizedTensor":
        return make_quantized(self._data, self.scale, self.zero_point, self.qdtype)

    def __repr__(self) -> str:
        from .printing import format_data
        body = format_data(dequantize_array(self._data, self.scale, self.zero_point))
        return (f"tensor({body}, size={tuple(self.shape)}, dtype=dj.{self.qdtype.name}, "
                f"quantization_scheme={per_tensor_affine}, scale={self.scale}, zero_point={self.zero_point})")


def dequantize_array(q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    # int -> float32 is exact for int8/uint8; one float32 multiply, as PyTorch's dequantize
    return (q.astype(np.float32) - np.float32(zero_point)) * np.float32(scale)


def make_quantized(data: np.ndarray, scale: float, zero_point: int, qdtype: QDType) -> QuantizedTensor:
    """Wrap integer storage (no copy, no checks): the kernels' output path."""
    t = _new(QuantizedTensor)
    t._data = data
    t._sig = make_sig(QUANTIZED_CPU_BITS, from_numpy_dtype(data.dtype), data.ndim, data.flags.c_contiguous)
    t.scale, t.zero_point, t.qdtype = scale, zero_point, qdtype
    return t


def check_qparams(scale, zero_point, qdtype) -> tuple[float, int]:
    """Validate (scale, zero_point) for ``qdtype``; return them as (float, int)."""
    if not isinstance(qdtype, QDType):
        raise DTypeError(f"quantized dtype must be dj.qint8 or dj.quint8, got {qdtype!r}")
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating)):
        raise TypeError(f"scale must be a positive float, got {type(scale).__name__} {scale!r}")
    scale = float(scale)
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"scale must be a positive finite float, got {scale}")
    if isinstance(zero_point, bool) or not isinstance(zero_point, (int, np.integer)):
        raise TypeError(f"zero_point must be an int, got {type(zero_point).__name__} {zero_point!r}")
    zero_point = int(zero_point)
    if not qdtype.qmin <= zero_point <= qdtype.qmax:
        raise ValueError(f"zero_point {zero_point} is out of range for {qdtype.name}: expected "
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
        raise TypeError(f"quantize_per_tensor expects a float Tensor, got {type(t).__name__}; "
                        f"make one with dj.tensor(...)")
    if t._data.dtype.kind != "f":
        raise DTypeError(f"quantize_per_tensor expects a floating point tensor, got {t.dtype}; "
                         f"convert it with .to(dj.float32)")
    scale, zero_point = check_qparams(scale, zero_point, dtype)
    if t.ndim > MAX_NDIM:
        raise ValueError(f"tensors have at most {MAX_NDIM} dimensions, got {t.ndim}")
    return make_quantized(quantize_array(t._data, scale, zero_point, dtype), scale, zero_point, dtype)


def qdtype_of_storage(dt: np.dtype) -> QDType:
    return _BY_STORAGE[np.dtype(dt)]


