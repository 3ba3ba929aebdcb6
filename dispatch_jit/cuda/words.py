"""bfloat16 on the device: a kernel reads and writes a bfloat16 buffer as its uint16 words.

``device_bf16()`` gives the two device functions every generated CUDA kernel
uses for them (dispatch_jit/cuda/codegen.py puts them in each kernel's
globals): ``_bf16_load`` widens a word exactly (``word << 16``) and
``_bf16_store`` rounds a float32 to nearest, ties to even, a NaN made the
quiet 0x7FC0, as the CPU's helpers (kernels/support/scalar_helpers.py) and
dispatch_jit/bf16.py do, with the bit casts as libdevice spells them (the
simulator runs Python, where NumPy scalars' views are the bit casts).
``words(buf)`` is the uint16 view a kernel indexes.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import BF16_STORAGE
from .runtime import cuda_module, is_simulator

__all__ = ["device_bf16", "words", "U16"]

U16 = np.dtype(np.uint16)


def words(buf):
    """The device buffer a kernel indexes: a bfloat16 one as its uint16 words, any other as is."""
    return buf.view(U16) if buf.dtype == BF16_STORAGE else buf


def _hardware(ld) -> tuple:
    def load(u):
        return ld.int_as_float(np.int32(np.uint32(u) << np.uint32(16)))

    def store(f):
        x = np.float32(f)
        u = np.uint32(ld.float_as_int(x))
        r = np.uint16((u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16))
        if x != x:
            r = np.uint16(0x7FC0)
        return r
    return load, store


def _load_sim(u):
    return np.uint32(np.uint32(u) << np.uint32(16)).view(np.float32)


def _store_sim(f):
    x = np.float32(f)
    if x != x:
        return np.uint16(0x7FC0)
    u = int(x.view(np.uint32))
    return np.uint16((u + 0x7FFF + ((u >> 16) & 1)) >> 16)


_DEVICE: dict = {}


def device_bf16() -> dict:
    """``{"_bf16_load": ..., "_bf16_store": ...}`` as device functions (one object each, kept: the
    compile cache keys kernels by their globals' identities)."""
    if not _DEVICE:
        if is_simulator():
            load, store = _load_sim, _store_sim
        else:
            from numba.cuda import libdevice
            load, store = _hardware(libdevice)
        jit = cuda_module().jit(device=True)
        _DEVICE.update({"_bf16_load": jit(load), "_bf16_store": jit(store)})
    return _DEVICE
