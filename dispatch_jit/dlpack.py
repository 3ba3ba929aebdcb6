"""DLPack: tensors shared with NumPy, PyTorch, JAX, CuPy... without a copy.

A CPU tensor's storage is a NumPy array, and NumPy speaks DLPack (versions 0.x and 1.x,
``stream``, ``max_version``, ``dl_device``, ``copy``): ``Tensor.__dlpack__`` hands out the
capsule of the very buffer, and ``from_dlpack`` wraps what ``numpy.from_dlpack`` imports, so
both directions keep one data pointer.  CUDA tensors share device memory through
``__cuda_array_interface__`` (Numba's device arrays have no DLPack exporter): ``__dlpack__`` of
a CUDA tensor raises BufferError saying so, and ``from_dlpack`` of a CUDA producer (PyTorch,
CuPy) imports it through its ``__cuda_array_interface__``.

>>> import numpy as np, dispatch_jit as dj
>>> a = np.arange(3.0)
>>> t = dj.from_dlpack(a); a[0] = 7.0; t[0].item()
7.0
>>> np.from_dlpack(t).ctypes.data == a.ctypes.data
True
"""

from __future__ import annotations

import numpy as np

from .dtypes import BF16_STORAGE
from .errors import ArgumentTypeError
from .tensor import Tensor, wrap

__all__ = ["from_dlpack", "dlpack", "dlpack_device", "CPU", "CUDA"]

CPU, CUDA = 1, 2          # DLDeviceType: kDLCPU, kDLCUDA


def dlpack_device(self) -> tuple[int, int]:
    """``(device type, device index)`` as DLPack enumerates them."""
    return (CUDA, self._data.device_index) if self.is_cuda else (CPU, 0)


def dlpack(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    """A DLPack capsule of this tensor's memory (a copy only if ``copy=True`` or ``dl_device`` asks
    for another device)."""
    if self.is_cuda:
        raise BufferError("__dlpack__: CUDA tensors are shared through __cuda_array_interface__ here "
                          "(torch.as_tensor(t, device='cuda'), cupy.asarray(t)); "
                          "for DLPack, move it to the host first: t.cpu()")
    if dl_device is not None and tuple(dl_device) != (CPU, 0):
        raise BufferError(f"__dlpack__: cannot export a CPU tensor to device {tuple(dl_device)}; "
                          f"only (1, 0), the CPU, is available")
    if stream is not None:
        raise BufferError("__dlpack__: stream must be None for a CPU tensor")
    kw = {}
    if max_version is not None:
        kw["max_version"] = tuple(max_version)
    if copy is not None:
        kw["copy"] = copy
    if self._data.dtype == BF16_STORAGE:
        # NumPy exports the words as uint16; the capsule then says what they are: kDLBfloat, 16 bits
        return _retype(self._data.view(np.uint16).__dlpack__(**kw), _KDL_UINT, _KDL_BFLOAT)
    return self._data.__dlpack__(**kw)


def from_dlpack(x, /, *, device=None, copy=None) -> Tensor:
    """A tensor sharing ``x``'s memory through DLPack (any producer: NumPy, PyTorch, JAX, ...).

    ``copy=None`` shares memory when it can, ``False`` never copies (BufferError where it must),
    ``True`` always copies.  ``device`` is where the result lives ("cpu", or the producer's own).
    """
    if device is not None and str(device).startswith("cuda") or _on_cuda(x):
        if hasattr(x, "__cuda_array_interface__"):
            from .creation import asarray
            return asarray(x, device=device, copy=copy)
        raise BufferError(f"from_dlpack: a {type(x).__name__} on a CUDA device without __cuda_array_interface__ "
                          f"cannot be imported; copy it to the host first")
    if isinstance(x, Tensor):
        return wrap(x._data.copy()) if copy else x
    if not hasattr(x, "__dlpack__"):
        raise ArgumentTypeError(f"from_dlpack: a {type(x).__name__} does not support DLPack (no __dlpack__); "
                        f"use dj.asarray for NumPy arrays, buffers and sequences")
    kw = {} if copy is None else {"copy": copy}
    src = _Bfloat16Words(x) if _dl_dtype_code(x) == _KDL_BFLOAT else x
    a = np.from_dlpack(src, device="cpu", **kw) if device is not None else np.from_dlpack(src, **kw)
    return wrap(a.view(BF16_STORAGE) if src is not x else a)


# -- bfloat16 (DLDataType code kDLBfloat): NumPy has no such dtype, so its words travel as uint16 and
# the capsule's type code is rewritten on the way out and in.  The capsule points to a
# DLManagedTensor (name "dltensor") or, from DLPack 1.0, a DLManagedTensorVersioned
# ("dltensor_versioned"); in both the DLTensor's dtype code is one byte at a fixed offset.
_KDL_UINT, _KDL_BFLOAT = 1, 4
_CODE_OFFSET = {b"dltensor": 20, b"dltensor_versioned": 52}     # void* data, DLDevice, int32 ndim | + 32


def _capsule_code(capsule, new: int | None = None) -> int:
    import ctypes
    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype, api.PyCapsule_GetName.argtypes = ctypes.c_char_p, [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    name = api.PyCapsule_GetName(capsule)
    off = _CODE_OFFSET.get(name)
    if off is None:
        raise BufferError(f"DLPack: a capsule named {name!r} (already consumed?) holds no tensor")
    code = ctypes.c_uint8.from_address(api.PyCapsule_GetPointer(capsule, name) + off)
    old = code.value
    if new is not None:
        code.value = new
    return old


def _retype(capsule, old: int, new: int):
    """``capsule`` with its dtype code ``old`` rewritten to ``new`` (16-bit words either way)."""
    if _capsule_code(capsule) != old:
        raise BufferError("DLPack: expected 16-bit words to retype")
    _capsule_code(capsule, new)
    return capsule


def _dl_dtype_code(x) -> int | None:
    """The DLPack dtype code ``x`` exports, where the producer says it without a capsule (torch's
    ``dtype``); None where it does not matter (NumPy arrays are never bfloat16)."""
    if isinstance(x, np.ndarray):
        return None
    return _KDL_BFLOAT if str(getattr(x, "dtype", "")).endswith("bfloat16") else None


class _Bfloat16Words:
    """A bfloat16 producer as NumPy can import it: its capsules say uint16."""

    def __init__(self, x):
        self.x = x

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()

    def __dlpack__(self, **kw):
        return _retype(self.x.__dlpack__(**kw), _KDL_BFLOAT, _KDL_UINT)


def _on_cuda(x) -> bool:
    dev = getattr(x, "__dlpack_device__", None)
    if dev is not None:
        return dev()[0] in (CUDA, 13)        # 13: kDLCUDAManaged
    return hasattr(x, "__cuda_array_interface__")      # Numba's device arrays: no DLPack, the interface
