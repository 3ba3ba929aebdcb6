"""Sparse COO tensors: the tensor type, its constructor, coalescing and ``to_sparse``.

A ``SparseCooTensor`` of shape ``size`` stores its nonzeros as two arrays, as
PyTorch's ``torch.sparse_coo`` layout does:

- ``indices`` (int64, shape ``(ndim, nnz)``): column ``k`` is the position of
  nonzero ``k``;
- ``values`` (shape ``(nnz,)``, the tensor's dtype): their values.

Entries may repeat a position and come in any order; such a tensor is
*uncoalesced* and stands for the sum of its entries.  ``coalesce()`` sorts
the positions (row-major) and sums duplicates; ``indices()``/``values()``
need a coalesced tensor, ``_indices()``/``_values()`` do not (as PyTorch's).

Its signature carries the ``SparseCPU`` key (PyTorch's name; plus
``AutogradCPU`` when its values require grad), so every op called on it
dispatches to the kernels registered at SparseCPU (kernels/sparse/coo.py).
On CUDA (``A.cuda()``, ``device="cuda"``) both arrays live in device memory
and the key is ``SparseCUDA`` (+ ``AutogradCUDA``; kernels/sparse/coo_cuda.py).
Gradients flow through ``dj.sparse.mm``/``matmul`` only, into the values
(``A.values().grad``, or ``A.grad`` as a COO tensor) and the dense operand.

>>> import dispatch_jit as dj
>>> a = dj.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()
>>> a.indices(), a.values()
(tensor([[0, 1],
        [1, 0]]), tensor([2., 3.]))
>>> a.layout == dj.sparse_coo, a.is_coalesced()
(True, True)
"""

from __future__ import annotations

import numpy as np

from .conversions import conversion
from .dtypes import as_dtype, from_numpy_dtype, get_default_dtype
from .errors import DTypeError, InvalidArgumentError, ShapeError, SparseLayoutError
from .keys import DispatchKey, key_bits
from .signature import make_sig
from .sparse_base import SparseTensor, coerce_values, contiguous_values, host_array, move_index, on_cuda, \
    resolve_device
from .tensor import Tensor, wrap

__all__ = ["SparseCooTensor", "sparse_coo", "sparse_coo_tensor", "to_sparse_coo", "SPARSE_COO_BITS", "make_coo",
           "coalesce_arrays", "mm", "sum", "SPARSE_COO_CPU_BITS", "SPARSE_COO_CUDA_BITS"]

sparse_coo = "sparse_coo"   # the layout marker: ``A.layout == dj.sparse_coo``

SPARSE_COO_CPU_BITS = key_bits(DispatchKey.SparseCPU)
SPARSE_COO_CUDA_BITS = key_bits(DispatchKey.SparseCUDA)
SPARSE_COO_BITS = SPARSE_COO_CPU_BITS | SPARSE_COO_CUDA_BITS      # either device
_AUTOGRAD_CPU_BITS = key_bits(DispatchKey.AutogradCPU)
_AUTOGRAD_CUDA_BITS = key_bits(DispatchKey.AutogradCUDA)
_new = object.__new__
_NO_HISTORY = ("a sparse COO result cannot carry autograd history; only dj.sparse.mm / dj.matmul of a COO "
               "matrix by a dense one is differentiable")


def _indent(text: str, n: int) -> str:
    return text.replace("\n", "\n" + " " * n)


class SparseCooTensor(SparseTensor):
    """A sparse tensor in coordinate (COO) layout.

    Build one with ``dj.sparse_coo_tensor(indices, values, size)`` or
    ``t.to_sparse()``; see the module docstring.  ``_data`` is the values
    array (so dtype queries work), never a dense view of the tensor.
    """

    _LAYOUT_WORD = "COO"
    _NO_HISTORY = _NO_HISTORY

    def sparse_dim(self) -> int:
        return len(self._shape)

    def dense_dim(self) -> int:
        return 0

    def _nnz(self) -> int:
        return int(self._idx.shape[1])

    @property
    def layout(self) -> str:
        return sparse_coo

    @property
    def is_sparse(self) -> bool:
        return True

    @property
    def is_sparse_csr(self) -> bool:
        return False

    # -- device: indices and values live together, in host or device memory -------------
    @property
    def is_cuda(self) -> bool:
        return self._values_t.is_cuda

    def cuda(self, device=None) -> "SparseCooTensor":
        """This tensor with its indices and values in device memory (key SparseCUDA).  The values
        move differentiably: gradients flow back to the CPU values.

        >>> import dispatch_jit as dj
        >>> a = dj.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2))
        >>> if dj.cuda.is_available():
        ...     assert a.cuda().to_dense().cpu().tolist() == [[0.0, 2.0], [3.0, 0.0]]
        """
        from .tensor import device as _device
        d = _device("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))
        if d.type != "cuda":
            raise InvalidArgumentError(f"cuda(): expected a CUDA device, got {d}")
        return self._to_device(d)

    def cpu(self) -> "SparseCooTensor":
        from .tensor import CPU_DEVICE
        return self._to_device(CPU_DEVICE)

    def _to_device(self, d) -> "SparseCooTensor":
        if d == self.device:
            return self
        if d.type not in ("cpu", "cuda"):
            raise InvalidArgumentError(f"sparse COO tensors live on 'cpu' or 'cuda', not {d}")
        return make_coo(move_index(self._idx, d), self._values_t.to(d), self._shape, self._coalesced)

    # -- components ------------------------------------------------------------
    def is_coalesced(self) -> bool:
        return self._coalesced

    def coalesce(self) -> "SparseCooTensor":
        """This tensor with its positions sorted (row-major) and duplicates summed.

        >>> import dispatch_jit as dj
        >>> dj.sparse_coo_tensor([[1, 0, 1]], [1.0, 2.0, 3.0], (2,)).coalesce().values()
        tensor([2., 4.])
        """
        if self._coalesced:
            return self
        if self.requires_grad:
            raise SparseLayoutError("coalesce() of a sparse COO tensor whose values require grad is not "
                                    "differentiable here; coalesce before setting requires_grad")
        coalesce = conversion("coo_coalesce", "cuda") if self.is_cuda else coalesce_arrays
        idx, vals = coalesce(self._idx, self._data, self._shape)
        return make_coo(idx, vals, self._shape, True)

    def _indices(self) -> Tensor:
        return wrap(self._idx)

    def _values(self) -> Tensor:
        return self._values_t

    def indices(self) -> Tensor:
        if not self._coalesced:
            raise SparseLayoutError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return wrap(self._idx)

    def values(self) -> Tensor:
        """The values as a dense 1-D tensor (shared, not copied): the leaf that
        collects gradients with respect to the nonzeros."""
        if not self._coalesced:
            raise SparseLayoutError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._values_t

    def to_sparse(self, sparse_dim: int | None = None, *, layout=None, blocksize=None, dense_dim=None):
        if layout is not None or blocksize is not None or dense_dim is not None:
            return to_sparse_coo(self, sparse_dim, layout=layout, blocksize=blocksize, dense_dim=dense_dim) \
                if layout != sparse_coo else self.to_sparse(sparse_dim)
        if sparse_dim is not None and sparse_dim != self.ndim:
            raise SparseLayoutError("to_sparse: conversion from Sparse to Sparse with sparse_dim argument "
                                    "!=self.sparse_dim() is not supported")
        return self

    def to_sparse_coo(self) -> "SparseCooTensor":
        return self

    def t(self) -> "SparseCooTensor":
        """The transpose of a matrix (1-D and 0-D tensors are their own): rows and columns of
        the indices swap, so the result is uncoalesced, as PyTorch's."""
        if self.ndim > 2:
            raise ShapeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
        if self.ndim < 2:
            return self
        if self.is_cuda:
            from .cuda.copy import contiguous_copy
            idx = contiguous_copy(self._idx.view_as(lambda l: l[::-1]))
        else:
            idx = np.ascontiguousarray(self._idx[::-1])
        return make_coo(idx, self._values_t, self._shape[::-1], self._nnz() < 2)

    def _with_values(self, values_t) -> "SparseCooTensor":
        return make_coo(self._idx, values_t, self._shape, self._coalesced)

    def _signature(self, values_t) -> int:
        return _coo_sig(values_t, len(self._shape))

    def to(self, *args, **kwargs):
        """``A.to("cuda")`` / ``A.to("cpu")`` move the tensor; a dtype converts the values."""
        from .tensor import device as _device
        dev, dtype = self._to_args(args, kwargs)
        t = self if dev is None else self._to_device(_device(dev))
        if dtype is not None:
            t = t._with_values(t._values_t.to(dtype))
        return t

    def __repr__(self) -> str:
        # PyTorch's layout, with dj in place of torch
        dt = "" if self.dtype in (get_default_dtype(), as_dtype("int64"), as_dtype("bool")) else \
            f"dtype=dj.{self.dtype.name}, "
        host_idx, host_vals = host_array(self._idx), host_array(self._data)
        idx = repr(wrap(host_idx))
        if host_idx.size == 0:
            idx = f"tensor([], size={tuple(host_idx.shape)})"
        vals = repr(wrap(host_vals)) if host_vals.size else "tensor([], size=(0,))"
        tail = f", {dt[:-2]})"
        if dt and vals.endswith(tail):        # the dtype is printed once, after nnz (as torch's)
            vals = vals[:-len(tail)] + ")"
        dev = f"device='{self.device}', " if self.is_cuda else ""
        return (f"tensor(indices={_indent(idx, 15)},\n       values={_indent(vals, 14)},\n"
                f"       {dev}size={self._shape}, nnz={self._nnz()}, {dt}layout=dj.sparse_coo)")


def _coo_sig(values_t: Tensor, ndim: int) -> int:
    """SparseCPU (+ AutogradCPU) for host values, SparseCUDA (+ AutogradCUDA) and the device index
    for device values."""
    a = values_t._data
    if on_cuda(a):
        ks = SPARSE_COO_CUDA_BITS | (_AUTOGRAD_CUDA_BITS if values_t.requires_grad else 0)
        return make_sig(ks, from_numpy_dtype(a.dtype), ndim, True, a.device_index)
    ks = SPARSE_COO_CPU_BITS | (_AUTOGRAD_CPU_BITS if values_t.requires_grad else 0)
    return make_sig(ks, from_numpy_dtype(a.dtype), ndim, True)


def make_coo(idx: np.ndarray, values, shape: tuple, coalesced: bool) -> SparseCooTensor:
    """Trusted constructor (kernels): no validation, no copies."""
    if not isinstance(values, Tensor):
        values = wrap(values)
    t = _new(SparseCooTensor)
    t._idx, t._values_t, t._shape, t._coalesced = idx, values, tuple(int(s) for s in shape), bool(coalesced)
    t._data = values._data
    t._sig = _coo_sig(values, len(t._shape))
    return t


def _linear(idx: np.ndarray, shape: tuple) -> np.ndarray:
    """Each entry's row-major position: the order coalesce sorts by."""
    if idx.shape[0] == 0:
        return np.zeros(idx.shape[1], dtype=np.int64)
    return np.ravel_multi_index(tuple(idx), shape).astype(np.int64, copy=False)


def coalesce_arrays(idx: np.ndarray, vals: np.ndarray, shape: tuple):
    """Sorted, unique positions and their summed values (duplicates added in their original order)."""
    lin = _linear(idx, shape)
    if lin.size < 2 or np.all(lin[1:] > lin[:-1]):
        return idx, vals
    uniq, inv = np.unique(lin, return_inverse=True)
    out = np.zeros(uniq.shape[0], dtype=vals.dtype)
    np.add.at(out, inv, vals)
    new_idx = np.array(np.unravel_index(uniq, shape), dtype=np.int64).reshape(len(shape), -1)
    return new_idx, out


def is_coalesced_arrays(idx: np.ndarray, shape: tuple) -> bool:
    lin = _linear(idx, shape)
    return bool(lin.size < 2 or np.all(lin[1:] > lin[:-1]))


def _check_bounds(idx: np.ndarray, shape: tuple) -> None:
    if idx.shape[1] == 0:
        return
    lo, hi = idx.min(axis=1), idx.max(axis=1)
    for d in range(idx.shape[0]):
        if lo[d] < 0:
            raise InvalidArgumentError(f"sparse_coo_tensor: found negative index {int(lo[d])} for dim {d}")
        if hi[d] >= shape[d]:
            raise InvalidArgumentError(f"sparse_coo_tensor: size is inconsistent with indices: for dim {d}, size "
                                       f"is {shape[d]} but found index {int(hi[d])}")


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory: bool = False,
                      requires_grad: bool = False, check_invariants=None, is_coalesced=None) -> SparseCooTensor:
    """A sparse COO tensor from its indices ``(ndim, nnz)`` and values ``(nnz,)``, as ``torch.sparse_coo_tensor``.

    Args:
        indices: integer positions, one column per nonzero; repeats are allowed (they add up).
        values: one value per column of ``indices`` (a dense 1-D Tensor is used as is, so
            gradients flow back to it).
        size: the shape; inferred as ``indices.max(1) + 1`` if None.
        dtype: convert the values to this dtype.
        device: "cpu" or "cuda[:N]"; by default the device of the values (or of the indices)
            when they are CUDA tensors, else the CPU.  Validation runs on the host before the
            arrays are uploaded.
        pin_memory: must be False (pinned host memory is not implemented).
        requires_grad: make the values a leaf that requires grad.
        check_invariants: indices are always checked against ``size`` here (an index out of
            range is an error, never a crash in a kernel); True also checks ``is_coalesced=True``.
        is_coalesced: True promises sorted, unique positions (checked when ``check_invariants``);
            None finds out.

    >>> import dispatch_jit as dj
    >>> a = dj.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3))
    >>> a.to_dense()
    tensor([[0., 0., 3.],
            [4., 0., 5.]])
    >>> dj.sparse_coo_tensor([[0, 5]], [1.0, 2.0], (3,))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dispatch_jit.errors.InvalidArgumentError: sparse_coo_tensor: size is inconsistent with indices: for dim 0, size is 3 but found index 5
    """
    if pin_memory:
        raise InvalidArgumentError("sparse_coo_tensor: pin_memory=True is not supported (pinned host memory is "
                                   "not implemented); build the tensor, then move it with .cuda()")
    dev = resolve_device("sparse_coo_tensor", device, (values, indices))
    idx = indices._host() if isinstance(indices, Tensor) else np.asarray(indices)
    if idx.size == 0 and idx.dtype.kind == "f":
        idx = idx.astype(np.int64)
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"sparse_coo_tensor: indices must be an int64 tensor, got dtype {idx.dtype}")
    if idx.ndim != 2:
        raise ShapeError(f"sparse_coo_tensor: indices must be sparse_dim x nnz, but got: {list(idx.shape)}")
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    vt = contiguous_values(coerce_values(values, dtype, SparseCooTensor))
    vshape = tuple(vt.shape)
    if len(vshape) != 1:
        raise ShapeError(f"sparse_coo_tensor: values must be 1-D (one per nonzero), got shape {vt.shape}; hybrid "
                         f"COO tensors (values with dense dimensions) are not supported")
    if idx.shape[1] != vshape[0]:
        raise ShapeError(f"sparse_coo_tensor: indices and values must have same nnz, but got nnz from indices: "
                         f"{idx.shape[1]}, nnz from values: {vshape[0]}")
    if size is None:
        size = tuple(int(m) + 1 for m in idx.max(axis=1)) if idx.shape[1] else (0,) * idx.shape[0]
    size = tuple(int(s) for s in size)
    if len(size) != idx.shape[0]:
        raise ShapeError(f"sparse_coo_tensor: 'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = "
                         f"{len(size)}, sparse_dim = {idx.shape[0]}, dense_dim = 0")
    if any(s < 0 for s in size):
        raise ShapeError(f"sparse_coo_tensor: size must have non-negative entries, got {size}")
    _check_bounds(idx, size)
    coalesced = is_coalesced_arrays(idx, size)
    if is_coalesced and not coalesced and check_invariants:
        raise InvalidArgumentError("sparse_coo_tensor: is_coalesced=True, but the indices are not sorted and "
                                   "unique; pass is_coalesced=None or call .coalesce()")
    if dev is not None:
        # (a move of values that require grad is differentiable: gradients flow back to them)
        vt = vt.to(dev)
        if dev.type == "cuda":
            idx = move_index(idx, dev)
    if requires_grad:
        vt.requires_grad_(True)
    return make_coo(idx, vt, size, coalesced)


def to_sparse_coo(t: Tensor, sparse_dim: int | None = None, *, layout=None, blocksize=None, dense_dim=None):
    """The COO form of a dense tensor (its exact zeros dropped; coalesced): ``Tensor.to_sparse``.

    ``sparse_dim`` may only be the tensor's ndim (hybrid tensors are not supported);
    ``layout=dj.sparse_csr`` gives the CSR form instead (``to_sparse_csr()``).

    >>> import dispatch_jit as dj
    >>> dj.tensor([[0, 5], [0, 0]]).to_sparse()
    tensor(indices=tensor([[0],
                           [1]]),
           values=tensor([5]),
           size=(2, 2), nnz=1, layout=dj.sparse_coo)
    """
    if blocksize is not None or dense_dim is not None:
        raise SparseLayoutError("to_sparse: blocksize= and dense_dim= (block and hybrid layouts) are not supported")
    if layout is not None and layout not in (sparse_coo, "sparse_csr"):
        raise SparseLayoutError(f"to_sparse: layout must be dj.sparse_coo or dj.sparse_csr, got {layout!r}")
    if layout == "sparse_csr":
        if sparse_dim is not None:
            raise SparseLayoutError("to_sparse: sparse_dim= goes with the COO layout only")
        return t.to_sparse_csr()
    if isinstance(t, SparseCooTensor):
        return t.to_sparse(sparse_dim)
    if sparse_dim is not None and sparse_dim != t.ndim:
        raise SparseLayoutError(f"to_sparse(sparse_dim={sparse_dim}) of a {t.ndim}-D tensor would make a hybrid "
                                f"COO tensor, which is not supported; use to_sparse() (sparse_dim={t.ndim})")
    if t.is_cuda:
        idx, vals = conversion("dense_to_coo", "cuda")(t._data)
        return make_coo(idx, vals, tuple(t.shape), True)
    a = t.numpy()      # a data read (under dj.compile the call then runs eagerly), no copy
    if a.ndim == 0:                  # (np.nonzero refuses 0-d arrays) one entry, or none for a zero
        vals = a.reshape(-1)[a.reshape(-1) != 0]
        return make_coo(np.zeros((0, vals.shape[0]), dtype=np.int64), vals, (), True)
    pos = np.nonzero(a)              # row-major: sorted and unique
    idx = np.array(pos, dtype=np.int64).reshape(a.ndim, -1)
    vals = np.ascontiguousarray(a[pos])
    return make_coo(idx, vals, a.shape, True)


def mm(mat1: Tensor, mat2: Tensor, reduce: str = "sum") -> Tensor:
    """``torch.sparse.mm``: sparse (COO or CSR) @ dense -> dense, differentiable with respect to
    the sparse operand's values and the dense operand (dense @ sparse works too).

    >>> import dispatch_jit as dj
    >>> a = dj.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()
    >>> dj.sparse.mm(a, dj.tensor([[1.0], [10.0]]))
    tensor([[20.],
            [ 3.]])
    """
    if reduce != "sum":
        raise InvalidArgumentError(f"sparse.mm: reduce={reduce!r} is not supported; only 'sum'")
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise ShapeError(f"sparse.mm: expected two 2-D matrices, got shapes {tuple(mat1.shape)} and "
                         f"{tuple(mat2.shape)}; dj.matmul also takes a 1-D operand")
    from .registry import lookup
    return lookup("aten::matmul").entry(mat1, mat2)


def sum(input: Tensor, dim=None, dtype=None) -> Tensor:     # noqa: A001 (torch.sparse.sum's name)
    """``torch.sparse.sum``: the sum of a sparse tensor over ``dim`` (all dims if None).  A COO
    result keeps the dims not summed (sparse); summing every dim gives a dense 0-d tensor.

    >>> import dispatch_jit as dj
    >>> a = dj.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3))
    >>> dj.sparse.sum(a), dj.sparse.sum(a, 0).to_dense()
    (tensor(12.), tensor([4., 0., 8.]))
    """
    from .registry import lookup
    axis = None if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    return lookup("aten::sum").entry(input, axis, dtype=dtype)


Tensor.to_sparse = to_sparse_coo
Tensor.is_sparse = False      # True for the COO layout only, as torch's (a CSR tensor says False too)
Tensor.to_sparse_coo = lambda self: to_sparse_coo(self)
