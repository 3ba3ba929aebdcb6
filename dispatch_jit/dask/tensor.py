"""Dask tensors: a dispatch_jit Tensor whose storage is a ``dask.array.Array``.

Everything dispatch needs comes from the Dask array's metadata (shape, dtype,
ndim), so dispatch and type promotion never compute: the tensor's signature
carries ``DispatchKey.PrivateUse1`` (renamed "dask"), and each op's kernel at
that key builds a bigger graph (kernels.py).  Data exists only when asked for:
``.numpy()``, ``.compute()``, ``.to("cpu")``, ``.item()``; ``repr`` shows the
graph's metadata and never computes.
"""

from __future__ import annotations

import numpy as np

from ..devices import device
from ..dtypes import from_numpy_dtype
from ..errors import AutogradError, DTypeError
from ..keys import DispatchKey, key_bits, privateuse1_backend_name
from ..signature import MAX_NDIM, make_sig
from ..tensor import Tensor, wrap

__all__ = ["DaskTensor", "wrap_dask", "is_dask_array"]

_BITS = key_bits(DispatchKey.PrivateUse1)
_new = object.__new__


class DaskTensor(Tensor):
    """A tensor whose data is a Dask array: ops on it build a graph, ``.numpy()`` computes it."""

    __slots__ = ()

    @property
    def device(self) -> device:
        return device(privateuse1_backend_name())

    @property
    def is_cuda(self) -> bool:
        return False

    @property
    def dask(self):
        """The Dask array holding this tensor's graph (for ``client.compute``, ``persist``, ...)."""
        return self._data

    @property
    def chunks(self) -> tuple:
        return self._data.chunks

    @property
    def strides(self) -> tuple:
        # logically C-contiguous: a chunk's layout is the kernel's business, not the caller's
        return tuple(int(np.prod(self.shape[i + 1:])) for i in range(self.ndim))

    def is_contiguous(self) -> bool:
        return True

    def contiguous(self) -> "DaskTensor":
        return self

    def compute(self, **kwargs) -> Tensor:
        """Run the graph (``kwargs`` go to ``dask.compute``: ``scheduler=...``); a CPU tensor."""
        return wrap(np.asarray(self._data.compute(**kwargs)))

    def numpy(self) -> np.ndarray:
        return np.asarray(self._data.compute())

    def _host(self) -> np.ndarray:
        return self.numpy()

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None or np.dtype(dtype) == a.dtype else a.astype(dtype)

    def cpu(self) -> Tensor:
        return self.compute()

    def requires_grad_(self, requires_grad: bool = True) -> "DaskTensor":
        if requires_grad:
            raise AutogradError("autograd is not supported on Dask tensors: compute gradients on the CPU "
                                "(t.to('cpu').requires_grad_()) or keep the Dask tensor out of the graph")
        return self

    def detach(self) -> "DaskTensor":
        return wrap_dask(self._data)

    def __getitem__(self, index):
        index = _unwrap_index(index)
        return wrap_dask(self._data[index])

    def __setitem__(self, index, value):
        raise TypeError("Dask tensors are immutable (a Dask graph is): build a new one, e.g. with dj.where")

    def __repr__(self) -> str:
        a = self._data
        chunks = tuple(c[0] if len(set(c)) == 1 else c for c in a.chunks)
        return (f"tensor(<dask shape={tuple(a.shape)}, chunks={chunks}, tasks={len(a.__dask_graph__())}>, "
                f"dtype=dj.{self.dtype.name}, device='{self.device}')")


def _unwrap_index(index):
    items = index if isinstance(index, tuple) else (index,)
    out = []
    for i in items:
        if isinstance(i, DaskTensor):
            i = i._data
        elif isinstance(i, Tensor):
            i = i.numpy()
        out.append(i)
    return tuple(out) if isinstance(index, tuple) else out[0]


def is_dask_array(x) -> bool:
    return type(x).__module__.startswith("dask.array") and hasattr(x, "__dask_graph__")


def wrap_dask(arr) -> DaskTensor:
    """A Dask tensor over Dask array ``arr`` (no compute): its signature from ``arr``'s metadata."""
    if arr.ndim > MAX_NDIM:
        raise DTypeError(f"tensors have at most {MAX_NDIM} dimensions, got {arr.ndim}")
    if any(np.isnan(s) for s in arr.shape):
        raise ValueError(f"from_dask: the Dask array's shape {arr.shape} has unknown sizes; call "
                         f"compute_chunk_sizes() on it first")
    t = _new(DaskTensor)
    t._data = arr
    t._sig = make_sig(_BITS, from_numpy_dtype(arr.dtype), arr.ndim, True)
    return t
