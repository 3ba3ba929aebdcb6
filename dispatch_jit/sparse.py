"""Sparse CSR tensors: the tensor type, its constructors and its validation.

A ``SparseCsrTensor`` is a 2-D matrix stored as three arrays, as in PyTorch
and scipy.sparse:

- ``crow_indices`` (int64, length rows + 1): row ``i``'s nonzeros are the
  slice ``crow[i]:crow[i + 1]`` of the other two;
- ``col_indices`` (int64, length nnz): their columns, sorted and unique
  within each row;
- ``values`` (length nnz, the tensor's dtype): their values.

Its signature carries the ``SparseCsrCPU`` key (plus ``AutogradCPU`` when
its values require grad), so every op called on it dispatches to the kernels
registered at SparseCsrCPU (kernels/sparse/cpu.py); a call mixing it with dense
tensors ORs their key sets and SparseCsrCPU, being higher than CPU, wins.

The values are an ordinary dense 1-D ``Tensor`` (``values()``): gradients
with respect to the values accumulate into ``A.values().grad``; ``A.grad``
is that gradient as a CSR tensor with A's pattern.

Dense-style access (``numpy()``, indexing, ``tolist()``, iteration) raises an
error that says to convert with ``.to_dense()`` first.

>>> import dispatch_jit as dj
>>> import dispatch_jit.kernels.sparse      # the kernels (dispatch_jit's import brings them once wired)
>>> a = dj.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse_csr()
>>> a.crow_indices(), a.col_indices(), a.values()
(tensor([0, 1, 2]), tensor([1, 0]), tensor([2., 3.]))
>>> a.layout == sparse_csr, a.shape
(True, (2, 2))
>>> a.to_dense()
tensor([[0., 2.],
        [3., 0.]])
"""

from __future__ import annotations

import numpy as np

from .conversions import conversion
from .dtypes import from_numpy_dtype
from .errors import DTypeError, InvalidArgumentError, ShapeError, SparseLayoutError
from .keys import DispatchKey, key_bits
from .signature import make_sig
from .sparse_coo import SparseCooTensor, make_coo, mm, sum, to_sparse_coo  # noqa: F401 (dj.sparse.mm, .sum)
from .sparse_base import SparseTensor, coerce_values, contiguous_values, host_array as _host, \
    move_index as _move_index, on_cuda as _on_cuda, resolve_device
from .tensor import Tensor, wrap

__all__ = ["SparseCsrTensor", "sparse_csr", "sparse_csr_tensor", "to_sparse_csr", "is_sparse_csr",
           "check_csr_invariants", "mm", "sum"]

sparse_csr = "sparse_csr"   # the layout marker: ``A.layout == dj.sparse_csr``

SPARSE_CSR_CPU_BITS = key_bits(DispatchKey.SparseCsrCPU)
SPARSE_CSR_CUDA_BITS = key_bits(DispatchKey.SparseCsrCUDA)
SPARSE_CSR_BITS = SPARSE_CSR_CPU_BITS | SPARSE_CSR_CUDA_BITS     # either device
_AUTOGRAD_CPU_BITS = key_bits(DispatchKey.AutogradCPU)
_AUTOGRAD_CUDA_BITS = key_bits(DispatchKey.AutogradCUDA)
_new = object.__new__


class SparseCsrTensor(SparseTensor):
    """A 2-D sparse matrix in compressed sparse row (CSR) layout.

    Build one with ``dj.sparse_csr_tensor(crow, col, values, size)`` or
    ``t.to_sparse_csr()``; see the module docstring.  ``_data`` is the values
    array (so dtype queries work), never a dense view of the matrix.
    """

    _LAYOUT_WORD = "CSR"
    _NO_HISTORY = "a sparse CSR result cannot carry autograd history; only dj.matmul(csr, dense) is differentiable"

    @property
    def nnz(self) -> int:
        return int(self._col.shape[0])

    def _nnz(self) -> int:
        return self.nnz

    @property
    def layout(self) -> str:
        return sparse_csr

    @property
    def is_sparse_csr(self) -> bool:
        return True

    def _with_values(self, values_t) -> "SparseCsrTensor":
        return _make(self._crow, self._col, values_t, self._shape)

    def _signature(self, values_t) -> int:
        return _csr_sig(values_t)

    # -- device: the three arrays live together, in host or device memory ----------------
    @property
    def is_cuda(self) -> bool:
        return self._values_t.is_cuda

    def cuda(self, device=None) -> "SparseCsrTensor":
        """This matrix with its three arrays in device memory (key SparseCsrCUDA).
        The values move differentiably: gradients flow back to the CPU values."""
        from .tensor import device as _device
        d = _device("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))
        if d.type != "cuda":
            raise InvalidArgumentError(f"cuda(): expected a CUDA device, got {d}")
        return self._to_device(d)

    def cpu(self) -> "SparseCsrTensor":
        from .tensor import CPU_DEVICE
        return self._to_device(CPU_DEVICE)

    def to(self, *args, **kwargs):
        """``A.to("cuda")`` / ``A.to("cpu")`` move the matrix; a dtype converts the values."""
        from .tensor import device as _device
        dev, dtype = self._to_args(args, kwargs)
        t = self if dev is None else self._to_device(_device(dev))
        if dtype is not None:
            t = t._with_values(t._values_t.to(dtype))
        return t

    def _to_device(self, d) -> "SparseCsrTensor":
        if d == self.device:
            return self
        if d.type not in ("cpu", "cuda"):
            raise InvalidArgumentError(f"sparse CSR tensors live on 'cpu' or 'cuda', not {d}")
        crow, col = _move_index(self._crow, d), _move_index(self._col, d)
        return _make(crow, col, self._values_t.to(d), self._shape)

    # -- components ------------------------------------------------------------
    def crow_indices(self) -> Tensor:
        return wrap(self._crow)

    def col_indices(self) -> Tensor:
        return wrap(self._col)

    def values(self) -> Tensor:
        """The values as a dense 1-D tensor (shared, not copied): the leaf that
        collects gradients with respect to the nonzeros."""
        return self._values_t

    def __repr__(self) -> str:
        dev = f", device='{self.device}'" if self.is_cuda else ""
        return (f"tensor(crow_indices={_host(self._crow).tolist()}, col_indices={_host(self._col).tolist()}, "
                f"values={_host(self._data).tolist()}, size={self._shape}, nnz={self.nnz}, "
                f"dtype={self.dtype}, layout=dj.sparse_csr{dev})")


def _csr_sig(values_t: Tensor) -> int:
    """SparseCsrCPU (+ AutogradCPU) for host values, SparseCsrCUDA (+ AutogradCUDA) and the
    device index for device values."""
    a = values_t._data
    if _on_cuda(a):
        ks = SPARSE_CSR_CUDA_BITS | (_AUTOGRAD_CUDA_BITS if values_t.requires_grad else 0)
        return make_sig(ks, from_numpy_dtype(a.dtype), 2, True, a.device_index)
    ks = SPARSE_CSR_CPU_BITS | (_AUTOGRAD_CPU_BITS if values_t.requires_grad else 0)
    return make_sig(ks, from_numpy_dtype(a.dtype), 2, True)


def _make(crow: np.ndarray, col: np.ndarray, values, shape: tuple) -> SparseCsrTensor:
    """Trusted constructor (kernels): no validation, no copies."""
    if not isinstance(values, Tensor):
        values = wrap(values)
    t = _new(SparseCsrTensor)
    t._crow, t._col, t._values_t, t._shape = crow, col, values, (int(shape[0]), int(shape[1]))
    t._data = values._data
    t._sig = _csr_sig(values)
    return t


def is_sparse_csr(x) -> bool:
    return isinstance(x, SparseCsrTensor)


def check_csr_invariants(crow: np.ndarray, col: np.ndarray, nvalues: int, shape: tuple) -> None:
    """Raise ShapeError/ValueError naming the offending row or index if the
    arrays do not form a valid CSR matrix of ``shape``."""
    rows, cols = shape
    if crow.ndim != 1 or col.ndim != 1:
        raise ShapeError(f"sparse_csr_tensor: crow_indices and col_indices must be 1-D, got shapes "
                         f"{crow.shape} and {col.shape}")
    if crow.shape[0] != rows + 1:
        raise ShapeError(f"sparse_csr_tensor: crow_indices must have rows + 1 = {rows + 1} entries for size "
                         f"{tuple(shape)}, got {crow.shape[0]}")
    if col.shape[0] != nvalues:
        raise ShapeError(f"sparse_csr_tensor: col_indices and values must have the same length (nnz), got "
                         f"{col.shape[0]} and {nvalues}")
    if crow[0] != 0:
        raise InvalidArgumentError(f"sparse_csr_tensor: crow_indices[0] must be 0, got {int(crow[0])}")
    d = np.diff(crow)
    if np.any(d < 0):
        i = int(np.argmax(d < 0))
        raise InvalidArgumentError(f"sparse_csr_tensor: crow_indices must be non-decreasing, but row {i} has "
                         f"crow_indices[{i}] = {int(crow[i])} > crow_indices[{i + 1}] = {int(crow[i + 1])}")
    if crow[-1] != nvalues:
        raise InvalidArgumentError(f"sparse_csr_tensor: crow_indices[-1] must equal nnz = {nvalues}, got {int(crow[-1])}")
    if nvalues == 0:
        return
    bad = (col < 0) | (col >= cols)
    if np.any(bad):
        k = int(np.argmax(bad))
        row = int(np.searchsorted(crow, k, side="right")) - 1
        raise InvalidArgumentError(f"sparse_csr_tensor: col_indices[{k}] = {int(col[k])} (row {row}) is out of range "
                         f"for {cols} columns; expected 0 <= col < {cols}")
    # within a row, columns must strictly increase; a step down is allowed only at a row start
    step_ok = np.diff(col) > 0
    row_start = np.zeros(nvalues, dtype=bool)
    starts = crow[:-1][crow[:-1] < nvalues]
    row_start[starts] = True
    bad = ~step_ok & ~row_start[1:]
    if np.any(bad):
        k = int(np.argmax(bad)) + 1
        row = int(np.searchsorted(crow, k, side="right")) - 1
        what = "duplicate" if col[k] == col[k - 1] else "unsorted"
        raise InvalidArgumentError(f"sparse_csr_tensor: {what} column indices in row {row}: col_indices[{k - 1}] = "
                         f"{int(col[k - 1])} then col_indices[{k}] = {int(col[k])}; columns must be sorted "
                         f"and unique within each row")


def _index_array(x, name: str) -> np.ndarray:
    a = x._host() if isinstance(x, Tensor) else np.asarray(x)
    if a.size == 0 and a.dtype.kind == "f":
        a = a.astype(np.int64)
    if a.dtype.kind not in "iu":
        raise DTypeError(f"sparse_csr_tensor: {name} must hold integers, got dtype {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.int64)


def sparse_csr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None, device=None,
                      requires_grad: bool = False, check_invariants: bool = True) -> SparseCsrTensor:
    """A sparse CSR matrix from its three arrays (validated unless told not to).

    Args:
        crow_indices: row pointers, length rows + 1, starting at 0, non-decreasing.
        col_indices: column of each nonzero, sorted and unique within each row.
        values: value of each nonzero (a dense 1-D Tensor is used as is, so
            gradients flow back to it; anything else is converted).
        size: (rows, cols); inferred as (len(crow) - 1, max(col) + 1) if None.
        dtype: convert the values to this dtype.
        device: "cpu" or "cuda[:N]"; by default the device of the values (or of the
            index tensors) when they are CUDA tensors, else the CPU.  Validation
            runs on the host before the arrays are uploaded.
        requires_grad: make the values a leaf that requires grad.

    >>> import dispatch_jit.kernels.sparse
    >>> a = sparse_csr_tensor([0, 2, 3], [0, 2, 1], [1.0, 2.0, 3.0], (2, 3))
    >>> a.to_dense()
    tensor([[1., 0., 2.],
            [0., 3., 0.]])
    >>> sparse_csr_tensor([0, 2], [1, 0], [1.0, 2.0], (1, 2))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dispatch_jit.errors.InvalidArgumentError: sparse_csr_tensor: unsorted column indices in row 0: col_indices[0] = 1 then col_indices[1] = 0...
    """
    dev = resolve_device("sparse_csr_tensor", device, (values, crow_indices, col_indices))
    crow = _index_array(crow_indices, "crow_indices")
    col = _index_array(col_indices, "col_indices")
    vt = coerce_values(values, dtype, SparseCsrTensor)
    if vt._data.ndim != 1:
        raise ShapeError(f"sparse_csr_tensor: values must be 1-D (one per nonzero), got shape {vt.shape}")
    vt = contiguous_values(vt)
    if size is None:
        size = (max(crow.shape[0] - 1, 0), int(col.max()) + 1 if col.size else 0)
    size = tuple(int(s) for s in size)
    if len(size) != 2 or min(size) < 0:
        raise ShapeError(f"sparse_csr_tensor: size must be (rows, cols) with non-negative entries, got {size}")
    if check_invariants:
        check_csr_invariants(crow, col, vt._data.shape[0], size)
    if dev is not None:
        # (a move of values that require grad is differentiable: gradients flow back to them)
        vt = vt.to(dev)
        if dev.type == "cuda":
            crow, col = _move_index(crow, dev), _move_index(col, dev)
    if requires_grad:
        vt.requires_grad_(True)
    return _make(crow, col, vt, size)


def to_sparse_csr(t: Tensor) -> SparseCsrTensor:
    """The CSR form of a dense 2-D tensor (its exact zeros are dropped).

    >>> import dispatch_jit as dj
    >>> dj.tensor([[0, 5], [0, 0]]).to_sparse_csr().values()
    tensor([5])
    """
    if isinstance(t, SparseCsrTensor):
        return t
    if isinstance(t, SparseCooTensor):
        return _coo_to_csr(t)
    a = t._data
    if _on_cuda(a):
        if a.ndim != 2:
            raise ShapeError(f"to_sparse_csr: expected a 2-D tensor, got {a.ndim} dimensions (shape {a.shape})")
        crow, col, val = conversion("dense_to_csr", "cuda")(a)
        return _make(crow, col, val, a.shape)
    a = t.numpy()      # a data read (under dj.compile the call then runs eagerly), no copy
    if a.ndim != 2:
        raise ShapeError(f"to_sparse_csr: expected a 2-D tensor, got {a.ndim} dimensions (shape {a.shape})")
    rows, cols = np.nonzero(a)       # row-major order: sorted within each row
    crow = np.zeros(a.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=a.shape[0]), out=crow[1:])
    return _make(crow, cols.astype(np.int64), np.ascontiguousarray(a[rows, cols]), a.shape)


def _dense_to_dense(self: Tensor) -> Tensor:
    """A dense tensor is its own dense form (as in PyTorch).  (A traced tensor is never a
    sparse one: a sparse tensor reaching a compiled function makes the call run eagerly.)"""
    return self


def _coo_to_csr(t: SparseCooTensor) -> SparseCsrTensor:
    """The CSR form of a 2-D COO tensor, on its device (values shared with the coalesced tensor).
    On CUDA the row counts are made on the host from the downloaded rows (one round trip)."""
    if t.ndim != 2:
        raise ShapeError(f"to_sparse_csr: expected a 2-D tensor, got {t.ndim} dimensions (shape {t.shape})")
    if t.requires_grad:
        raise SparseLayoutError("to_sparse_csr() of a sparse COO tensor whose values require grad is not "
                                "differentiable here")
    c = t.coalesce()
    idx = _host(c._idx)
    crow = np.zeros(t.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(idx[0], minlength=t.shape[0]), out=crow[1:])
    col = np.ascontiguousarray(idx[1])
    if c.is_cuda:
        crow, col = _move_index(crow, c.device), _move_index(col, c.device)
    return _make(crow, col, c._values_t, t.shape)


def _csr_to_coo(self: SparseCsrTensor, sparse_dim: int | None = None) -> SparseCooTensor:
    """The COO form of a CSR matrix (coalesced: CSR rows are sorted and unique), on its device;
    values shared."""
    if sparse_dim is not None and sparse_dim != 2:
        raise SparseLayoutError("to_sparse: conversion from SparseCsr to Sparse with sparse_dim argument != 2 "
                                "is not supported")
    crow, col = _host(self._crow), _host(self._col)
    rows = np.repeat(np.arange(self._shape[0], dtype=np.int64), np.diff(crow))
    idx = np.stack([rows, col])
    if self.is_cuda:
        idx = _move_index(idx, self.device)
    return make_coo(idx, self._values_t, self._shape, True)


Tensor.to_sparse_csr = to_sparse_csr
SparseCsrTensor.to_sparse = _csr_to_coo
SparseCsrTensor.to_sparse_coo = lambda self: _csr_to_coo(self)
Tensor.to_dense = _dense_to_dense
