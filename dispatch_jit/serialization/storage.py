"""Storages: how ``dj.save`` lays tensors out as shared byte buffers, and how ``dj.load`` checks
each tensor's view of one before making it.

Tensors that view one NumPy buffer (a tensor and its slices, transposes, detached copies: a
module used twice in a ``state_dict``) are saved as one storage, the bytes they span, and each
as a view of it: dtype, shape, strides and offset in elements, as PyTorch's
``(storage, storage_offset, size, stride)``.  Loading reads each storage once and builds every
view on that one buffer, so views share memory again, and a file naming one storage many times
costs that storage once.  CUDA tensors viewing one device storage are saved the same way (one
copy to the host), and load as views of one device copy of it per dtype.  A tensor no view can
express (negative or overlapping strides, a misaligned start) gets a storage of its own.
"""

from __future__ import annotations

import re

import numpy as np

from ..dtypes import BY_NAME, from_numpy_dtype
from ..errors import LoadError, SparseLayoutError
from ..signature import MAX_NDIM

__all__ = ["StoragePlan", "TensorRef", "check_ref", "make_view"]

# Offsets of a span's start are rounded down to this many bytes past its buffer's start, so that
# every view of a buffer keeps its alignment (no dtype is wider than 16 bytes).
_ALIGN = 16
_LOCATION = re.compile(r"cpu|cuda:\d{1,4}")
_INT_MAX = 2 ** 62      # no dimension, stride or byte count of a real array comes near


def _overlaps(shape, strides) -> bool:
    """Whether two indices of a view with these shape and (non-negative) strides address one element:
    taken by increasing stride, each dimension must step past all the smaller ones span."""
    reach = 0
    for st, n in sorted((st, n) for n, st in zip(shape, strides) if n > 1):
        if st <= reach:
            return True
        reach += (n - 1) * st
    return False


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _extent(shape, strides, itemsize: int) -> int:
    """Bytes from a non-empty view's first element to the end of its last."""
    return sum((n - 1) * s for n, s in zip(shape, strides)) + itemsize


class StoragePlan:
    """The storages of one ``dj.save`` and the reference (``persistent_id``) of each tensor.

    ``add`` every tensor first (a pickling pass that only collects them), then ``ref`` gives
    each one's reference; a tensor first met by ``ref`` (made while pickling) gets its own storage.
    """

    def __init__(self):
        self.storages: list = []      # (uint8 array, location) per storage number
        self._number: dict = {}       # id(tensor) -> tensor number
        self._refs: dict = {}         # id(tensor) -> reference, once laid out
        self._alive: list = []        # the tensors keyed by id, kept alive so that no id is reused
        self._pending: list = []

    def add(self, t) -> None:
        if getattr(t, "layout", "strided") in ("sparse_coo", "sparse_csr"):     # else only the values would be saved
            raise SparseLayoutError(f"dj.save: a {t.layout} tensor cannot be saved; save t.to_dense(), or its "
                                    f"index and values tensors")
        if id(t) not in self._number:
            self._number[id(t)] = len(self._alive)
            self._alive.append(t)
            self._pending.append(t)

    def ref(self, t) -> tuple:
        r = self._refs.get(id(t))
        if r is None:
            self.add(t)
            self.layout()
            r = self._refs[id(t)]
        return r

    def layout(self) -> None:
        """Assign storages to the tensors added since the last layout: one per NumPy buffer or
        CUDA device storage that tensors view, one of its own for any other tensor."""
        groups: dict = {}
        for t in self._pending:
            a = t._data
            if isinstance(a, np.ndarray):
                root = _shareable_root(a)
                key = None if root is None else ("cpu", id(root))
            else:
                root = a.storage if t.is_cuda and _shareable_on_device(a) else None
                key = None if root is None else ("cuda", id(root))
            if key is None:
                host, location = _host(t)
                self._new_storage(np.ascontiguousarray(host).reshape(-1).view(np.uint8), location,
                                  [(t, host.dtype, host.shape, _c_strides(host.shape), 0)])
            else:
                groups.setdefault(key, (root, []))[1].append((t, a))
        self._pending = []
        for (where, _), (root, members) in groups.items():
            (_cpu_storage if where == "cpu" else _cuda_storage)(self, root, members)

    def _new_storage(self, data: np.ndarray, location: str, views: list) -> None:
        """Storage ``data`` (uint8), and the references of ``views``: (tensor, dtype, shape, strides,
        offset), strides and offset in elements."""
        n = len(self.storages)
        self.storages.append((data, location))
        for t, dtype, shape, strides, offset in views:
            self._refs[id(t)] = ("tensor", self._number[id(t)], n, data.nbytes, location,
                                 from_numpy_dtype(dtype).name, tuple(shape), tuple(strides), offset,
                                 bool(t.requires_grad), bool(t.__dict__.get("_is_param")))


def _cpu_storage(plan: StoragePlan, root: np.ndarray, members: list) -> None:
    """The bytes of ``root`` that ``members`` (tensor, array viewing it) span, from a 16-byte boundary."""
    base = _address(root)
    lo = min(_address(a) for _, a in members)
    lo -= (lo - base) % _ALIGN
    hi = max(_address(a) + _extent(a.shape, a.strides, a.itemsize) for _, a in members)
    raw = root.reshape(-1, order="A").view(np.uint8)
    plan._new_storage(raw[lo - base:hi - base], "cpu",
                      [(t, a.dtype, a.shape, tuple(s // a.itemsize for s in a.strides),
                        (_address(a) - lo) // a.itemsize) for t, a in members])


def _cuda_storage(plan: StoragePlan, storage, members: list) -> None:
    """The elements of device ``storage`` that ``members`` (tensor, CudaArray) span, in one copy."""
    extents = [a.extent() for _, a in members]
    lo, hi = min(e[0] for e in extents), max(e[1] for e in extents)
    data = storage.buf[lo:hi].copy_to_host().reshape(-1).view(np.uint8)
    plan._new_storage(data, f"cuda:{storage.device_index}",
                      [(t, a.dtype, a.shape, a.elem_strides(), a.offset - lo) for t, a in members])


def _c_strides(shape) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _host(t) -> tuple:
    """``t``'s values as a host array, and the location its storage is saved from."""
    a = t._data
    if isinstance(a, np.ndarray):
        return a, "cpu"
    if t.is_cuda:
        return t.numpy(), f"cuda:{t.device.index or 0}"
    return np.asarray(t.cpu()._data), "cpu"    # a backend's tensor (Dask) is saved, and loads, as a CPU one


def _shareable_on_device(a) -> bool:
    """Whether CUDA array ``a`` can be saved as a view of its device storage (one dtype, strides
    that neither run backwards nor overlap)."""
    strides = a.elem_strides()
    return (a.size > 0 and a.dtype == a.storage.dtype and all(s >= 0 for s in strides)
            and not _overlaps(a.shape, strides))


def _shareable_root(a: np.ndarray):
    """The outermost NumPy array ``a`` views, when ``a`` can be saved as a view of (part of) its
    bytes; else None."""
    isz = a.itemsize
    if a.size == 0 or any(s < 0 or s % isz for s in a.strides) or _overlaps(a.shape, a.strides):
        return None
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if not (root.flags.c_contiguous or root.flags.f_contiguous):
        return None
    base, start = _address(root), _address(a)
    if (start - base) % isz or start + _extent(a.shape, a.strides, isz) > base + root.nbytes:
        return None
    return root


class TensorRef:
    """A checked reference: one tensor's place in one storage."""

    __slots__ = ("tensor", "storage", "nbytes", "location", "dtype", "shape", "strides", "offset",
                 "requires_grad", "is_param")

    def __init__(self, fields: tuple):
        (self.tensor, self.storage, self.nbytes, self.location, self.dtype, self.shape, self.strides,
         self.offset, self.requires_grad, self.is_param) = fields


def _is_count(x) -> bool:
    return type(x) is int and 0 <= x < _INT_MAX


def check_ref(pid) -> TensorRef:
    """The reference a file's pickle gives for a tensor, refused unless it is exactly what
    ``StoragePlan`` writes and its view lies inside its storage without overlapping itself."""
    if type(pid) is not tuple or len(pid) != 11 or pid[0] != "tensor":
        raise LoadError(f"load: the pickle refers to {_short(pid)}, which is no tensor reference dj.save writes")
    r = TensorRef(pid[1:])
    ok = (_is_count(r.tensor) and _is_count(r.storage) and _is_count(r.nbytes) and _is_count(r.offset)
          and type(r.location) is str and _LOCATION.fullmatch(r.location) is not None
          and type(r.dtype) is str and r.dtype in BY_NAME
          and type(r.shape) is tuple and type(r.strides) is tuple and len(r.shape) == len(r.strides) <= MAX_NDIM
          and all(map(_is_count, r.shape)) and all(map(_is_count, r.strides))
          and type(r.requires_grad) is bool and type(r.is_param) is bool)
    if not ok:
        raise LoadError(f"load: malformed tensor reference {_short(pid)} in the pickle: the file is corrupt or forged")
    isz = BY_NAME[r.dtype].itemsize
    size = isz
    for n in r.shape:
        size *= max(n, 1)      # an empty view's other dimensions still count for NumPy
    if size >= _INT_MAX:
        raise LoadError(f"load: tensor {r.tensor} has shape {r.shape}, larger than any array can be")
    start = r.offset * isz
    if 0 in r.shape:
        end = start
    else:
        if _overlaps(r.shape, r.strides):
            raise LoadError(f"load: tensor {r.tensor} has shape {r.shape} and strides {r.strides}, which address "
                            f"some elements twice; dj.save never writes that")
        end = start + _extent(r.shape, tuple(s * isz for s in r.strides), isz)
    if end > r.nbytes:
        raise LoadError(f"load: tensor {r.tensor} ({r.dtype}, shape {r.shape}, strides {r.strides}, offset "
                        f"{r.offset}) reaches byte {end} of a storage of {r.nbytes} bytes")
    return r


def make_view(r: TensorRef, buf: np.ndarray) -> np.ndarray:
    """The array ``r`` describes, on storage ``buf`` (a uint8 array of ``r.nbytes``), sharing it."""
    dt = BY_NAME[r.dtype].np
    isz = dt.itemsize
    return np.ndarray(r.shape, dtype=dt, buffer=buf, offset=r.offset * isz, strides=tuple(s * isz for s in r.strides))


def _short(x) -> str:
    s = repr(x)
    return s if len(s) <= 200 else s[:200] + "..."
