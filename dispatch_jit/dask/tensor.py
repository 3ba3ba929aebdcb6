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
from ..errors import ArgumentTypeError, AutogradError, DTypeError, InvalidArgumentError
from ..keys import DispatchKey, key_bits, privateuse1_backend_name
from ..signature import MAX_NDIM, make_sig
from ..tensor import Tensor, wrap

__all__ = ["DaskTensor", "wrap_dask", "is_dask_array"]

_BITS = key_bits(DispatchKey.PrivateUse1)
_NO_AUTOGRAD = ("autograd is not supported on Dask tensors: compute gradients on the CPU "
                "(t.to('cpu').requires_grad_()), or use inputs that do not require grad (dj.no_grad())")
_new = object.__new__


class DaskTensor(Tensor):
    """A tensor whose data is a Dask array: ops on it build a graph, ``.numpy()`` computes it."""

    # _origin: how a kernel at the Dask key made it (compiled.py fuses from it), or None;
    # _fused: its array with the regions below it fused, once asked for; _lazy: made in the
    # global compiled mode, so what computes it is the fused graph (as a lazy tensor's is)
    __slots__ = ("_origin", "_fused", "_lazy")
    _fuse = None      # compiled.py binds its fuse here (it sits above this module)

    @property
    def device(self) -> device:
        return device(privateuse1_backend_name())

    @property
    def is_cuda(self) -> bool:
        return False

    @property
    def dask(self):
        """The Dask array holding this tensor's graph (for ``client.compute``, ``persist``, ...);
        in the global compiled mode, the graph with its regions fused."""
        return self._fuse(self)._data if self._lazy else self._data

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
        return wrap(np.asarray(self.dask.compute(**kwargs)))

    def numpy(self) -> np.ndarray:
        return np.asarray(self.dask.compute())

    def _host(self) -> np.ndarray:
        return self.numpy()

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None or np.dtype(dtype) == a.dtype else a.astype(dtype)

    def cpu(self) -> Tensor:
        return self.compute()

    def requires_grad_(self, requires_grad: bool = True) -> "DaskTensor":
        if requires_grad:
            raise AutogradError(_NO_AUTOGRAD)
        return self

    @property
    def grad_fn(self):
        return None

    @grad_fn.setter
    def grad_fn(self, node) -> None:
        # autograd's recorders mark an output by setting its grad_fn: an op mixing a Dask tensor
        # with a CPU scalar tensor that requires grad would record one
        if node is not None:
            raise AutogradError(_NO_AUTOGRAD)

    def detach(self) -> "DaskTensor":
        return wrap_dask(self._data)

    def __getitem__(self, index):
        index = _unwrap_index(index)
        return wrap_dask(self._data[index])

    def __setitem__(self, index, value):
        raise ArgumentTypeError("Dask tensors are immutable (a Dask graph is): build a new one, e.g. with dj.where")

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
        raise InvalidArgumentError(f"from_dask: the Dask array's shape {arr.shape} has unknown sizes; call "
                         f"compute_chunk_sizes() on it first")
    t = _new(DaskTensor)
    t._data = arr
    t._origin = t._fused = None
    t._lazy = False
    t._sig = make_sig(_BITS, from_numpy_dtype(arr.dtype), arr.ndim, True)
    return t
