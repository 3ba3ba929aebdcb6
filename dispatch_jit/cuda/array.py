"""Device arrays: the storage of CUDA tensors.

A CUDA tensor's ``_data`` is a ``CudaArray``: a ``DeviceStorage`` (one
allocator block seen as a flat, typed device array) plus a *layout*.  The
layout is a NumPy array with the tensor's shape, strides and element offset
that points into a phantom buffer, never at data: NumPy's own view logic
(reshape without copy, transpose, broadcast_to, basic slicing) then computes
the views of device tensors exactly as it does for CPU tensors, and a
kernel receives the flat device buffer, the element offset and the strides.
Nothing ever reads the phantom's memory: every access to a CudaArray's
values goes through the device buffer.

Metadata reads (``shape``, ``strides``, ``dtype``, ``flags``) look like an
ndarray's, so the dispatcher and the Tensor need no CUDA special cases for
them.
"""

from __future__ import annotations

import ctypes
import weakref

import numpy as np

from ..errors import InvalidArgumentError

from .allocator import allocator
from .runtime import cuda_module, is_simulator, require

__all__ = ["DeviceStorage", "CudaArray", "empty", "from_host", "from_cuda_array_interface", "phantom"]

_PHANTOM_LEN = 1 << 40
_PHANTOM: dict = {}


def phantom(dtype: np.dtype) -> tuple[np.ndarray, int]:
    """(A 1-D layout array of 2**40 elements over one real element, its address):
    slicing and reshaping it computes layouts; reading it past element 0 is never done."""
    dtype = np.dtype(dtype)
    p = _PHANTOM.get(dtype)
    if p is None:
        base = np.zeros(1, dtype)
        p = np.lib.stride_tricks.as_strided(base, shape=(_PHANTOM_LEN,), strides=(dtype.itemsize,))
        _PHANTOM[dtype] = (p, p.__array_interface__["data"][0])
        p = _PHANTOM[dtype]
    return p


class DeviceStorage:
    """A flat device buffer of ``numel`` elements of ``dtype``.

    ``buf`` is what kernels index (a Numba device array, 1-D); ``ptr`` the
    device address of element 0 (for ``__cuda_array_interface__``).  A block
    from the caching allocator goes back to it when the storage dies; a
    buffer borrowed from another library keeps that library's object alive.
    """

    __slots__ = ("buf", "numel", "dtype", "ptr", "device_index", "owner", "__weakref__")

    def __init__(self, buf, numel: int, dtype: np.dtype, ptr: int, device_index: int = 0, owner=None):
        self.buf, self.numel, self.dtype, self.ptr = buf, numel, np.dtype(dtype), ptr
        self.device_index, self.owner = device_index, owner

    @classmethod
    def allocate(cls, numel: int, dtype, device_index: int = 0) -> "DeviceStorage":
        dtype = np.dtype(dtype)
        block = allocator.malloc(max(numel, 1) * dtype.itemsize)
        view = block.views.get(dtype)
        if view is None:
            view = block.views[dtype] = (block.mem.view(dtype), _device_ptr(block.mem))
        s = cls(view[0], numel, dtype, view[1], device_index, None)
        weakref.finalize(s, allocator.free, block)
        return s


def _device_ptr(devarray) -> int:
    if is_simulator():
        return devarray._ary.__array_interface__["data"][0]   # simulated device memory is host memory
    return devarray.__cuda_array_interface__["data"][0]


class CudaArray:
    """Storage + layout; the ``_data`` of a CUDA tensor."""

    __slots__ = ("storage", "layout", "offset")

    def __init__(self, storage: DeviceStorage, layout: np.ndarray, offset: int):
        self.storage, self.layout, self.offset = storage, layout, offset

    # -- ndarray-like metadata ----------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self.layout.shape

    @property
    def strides(self) -> tuple:
        return self.layout.strides

    @property
    def ndim(self) -> int:
        return self.layout.ndim

    @property
    def size(self) -> int:
        return self.layout.size

    @property
    def dtype(self) -> np.dtype:
        return self.layout.dtype

    @property
    def itemsize(self) -> int:
        return self.layout.itemsize

    @property
    def nbytes(self) -> int:
        return self.layout.nbytes

    @property
    def flags(self):
        return self.layout.flags

    @property
    def device_index(self) -> int:
        return self.storage.device_index

    @property
    def buf(self):
        return self.storage.buf

    def elem_strides(self) -> tuple:
        isz = self.layout.itemsize
        return tuple(s // isz for s in self.layout.strides)

    # -- views ----------------------------------------------------------------------------------
    def derive(self, layout: np.ndarray) -> "CudaArray":
        """A view of the same storage with ``layout``, a NumPy view of this array's layout."""
        base = phantom(layout.dtype)[1]
        off = (layout.__array_interface__["data"][0] - base) // layout.itemsize
        return CudaArray(self.storage, layout, off)

    def view_as(self, fn) -> "CudaArray":
        """``fn(layout)`` must be a NumPy operation that returns a view."""
        v = fn(self.layout)
        if not isinstance(v, np.ndarray) or not np.may_share_memory(v, self.layout) and v.size:
            raise AssertionError("a layout operation made a copy")   # would mean reading the phantom
        return self.derive(v)

    def extent(self) -> tuple[int, int]:
        """The smallest and one past the largest element index this view touches."""
        if self.layout.size == 0:
            return self.offset, self.offset
        lo = hi = self.offset
        for n, s in zip(self.layout.shape, self.elem_strides()):
            if s > 0:
                hi += (n - 1) * s
            else:
                lo += (n - 1) * s
        return lo, hi + 1

    # -- host transfers ---------------------------------------------------------------------------
    def to_host(self) -> np.ndarray:
        """A new C-contiguous host array with this view's values (synchronizes)."""
        lo, hi = self.extent()
        out = np.empty(self.layout.shape, self.layout.dtype)
        if hi == lo:
            return out
        span = self.storage.buf[lo:hi].copy_to_host()
        st = self.layout.strides
        np.copyto(out, np.lib.stride_tricks.as_strided(span[self.offset - lo:], self.layout.shape, st))
        return out

    @property
    def __cuda_array_interface__(self) -> dict:
        lay = self.layout
        return {"shape": lay.shape, "typestr": lay.dtype.str, "version": 3,
                "data": (self.storage.ptr + self.offset * lay.itemsize if lay.size else 0, False),
                "strides": None if lay.flags.c_contiguous else lay.strides, "stream": 1}

    def __repr__(self):
        return f"CudaArray(shape={self.shape}, dtype={self.dtype}, offset={self.offset}, strides={self.strides})"


def empty(shape, dtype, device_index: int = 0) -> CudaArray:
    """A new C-contiguous device array (uninitialized memory from the caching allocator)."""
    dtype = np.dtype(dtype)
    n = 1
    for s in shape:
        n *= s
    st = DeviceStorage.allocate(n, dtype, device_index)
    lay = phantom(dtype)[0][:n].reshape(shape)
    return CudaArray(st, lay, 0)


def from_host(a: np.ndarray, device_index: int = 0) -> CudaArray:
    """Copy a host array to a new C-contiguous device array."""
    require(device_index)
    a = np.asarray(a, order="C")          # (np.ascontiguousarray would make a 0-d array 1-d)
    d = empty(a.shape, a.dtype, device_index)
    if a.size:
        d.storage.buf[:a.size].copy_to_device(a.reshape(-1))
    return d


def from_cuda_array_interface(obj, device_index: int = 0) -> CudaArray:
    """Wrap the device memory of any object exposing ``__cuda_array_interface__``
    (CuPy, PyTorch, Numba device arrays) without copying; the object is kept alive."""
    require(device_index)
    iface = obj.__cuda_array_interface__
    shape = tuple(iface["shape"])
    dtype = np.dtype(iface["typestr"])
    if iface.get("mask") is not None:
        raise InvalidArgumentError("arrays with a mask in __cuda_array_interface__ are not supported")
    isz = dtype.itemsize
    strides = tuple(iface["strides"]) if iface.get("strides") else None
    if strides is None:
        strides, acc = [], isz
        for n in reversed(shape):
            strides.append(acc)
            acc *= n
        strides = tuple(reversed(strides))
    if any(s % isz for s in strides):
        raise InvalidArgumentError(f"strides {strides} are not multiples of the item size {isz}")
    ptr = iface["data"][0]
    n = int(np.prod(shape, dtype=np.int64))
    lo = hi = 0
    for d, s in zip(shape, strides):
        if n and s > 0:
            hi += (d - 1) * s // isz
        elif n:
            lo += (d - 1) * s // isz
    span = hi - lo + 1 if n else 0
    base_ptr = ptr + lo * isz
    cuda = cuda_module()
    if is_simulator():
        # simulated device memory is host memory: the pointer is a host address
        raw = (ctypes.c_char * max(span * isz, 1)).from_address(base_ptr) if span else None
        host = np.frombuffer(raw, dtype, count=span) if span else np.empty(0, dtype)
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
        buf = FakeCUDAArray(host)
    else:
        buf = cuda.from_cuda_array_interface(
            {"shape": (span,), "strides": None, "typestr": dtype.str, "version": 3,
             "data": (base_ptr, False)}, owner=obj, sync=True)
    st = DeviceStorage(buf, span, dtype, base_ptr, device_index, owner=obj)
    lay = np.lib.stride_tricks.as_strided(phantom(dtype)[0][-lo:] if lo else phantom(dtype)[0], shape, strides)
    return CudaArray(st, lay, -lo)
