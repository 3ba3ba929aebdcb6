"""What every sparse layout's tensor type shares: metadata, the values tensor as the autograd
leaf, and clear errors for dense-style access.

A sparse tensor here is a set of index arrays plus a dense 1-D ``values`` tensor
(``_values_t``); ``_data`` is that tensor's array (so dtype queries work), never a dense
view.  Gradients live on the values: ``A.grad`` is the values' gradient in A's pattern,
and a sparse result never carries autograd history of its own.  A layout (CSR in
sparse.py, COO in sparse_coo.py) names itself and says how to rebuild its pattern around
new values; everything else is here, so the layouts cannot drift apart.
"""

from __future__ import annotations

import numpy as np

from .dtypes import as_dtype, default_complex_dtype, get_default_dtype
from .errors import InvalidArgumentError, SparseLayoutError
from .tensor import TRACE_MARK, Tensor, wrap

__all__ = ["SparseTensor", "coerce_values", "contiguous_values", "on_cuda", "host_array", "move_index",
           "resolve_device"]


def on_cuda(a) -> bool:
    """Whether ``a`` (an index or values array) is a CudaArray."""
    return type(a) is not np.ndarray and hasattr(a, "storage")


def host_array(a) -> np.ndarray:
    """``a`` in host memory (a download when it is on the device: synchronizes)."""
    return a.to_host() if on_cuda(a) else a


def move_index(a, d):
    """Index array ``a`` (host or device) on device ``d``."""
    if d.type == "cuda":
        if on_cuda(a) and a.device_index == (d.index or 0):
            return a
        from .cuda.array import from_host
        from .cuda.runtime import require
        require(d.index or 0)
        return from_host(host_array(a), d.index or 0)
    return host_array(a)


def resolve_device(what: str, device, operands):
    """The device a sparse constructor ``what`` builds on: ``device`` when given, else the
    device of the first CUDA tensor among ``operands``, else None (the host)."""
    from .tensor import device as as_device
    if device is None:
        device = next((x.device for x in operands if isinstance(x, Tensor) and x.is_cuda), None)
    dev = None if device is None else as_device(device)
    if dev is not None and dev.type not in ("cpu", "cuda"):
        raise InvalidArgumentError(f"{what}: device must be 'cpu' or 'cuda', got {dev}")
    return dev


def contiguous_values(vt: Tensor) -> Tensor:
    """``vt`` as a contiguous values tensor the layout's kernels can read: a device array also
    from offset 0, since the CUDA kernels read values from the start of their buffer.  A copy
    keeps ``vt``'s requires_grad (it is a new leaf, as the values the caller passed were)."""
    if vt._data.flags.c_contiguous and not (vt.is_cuda and vt._data.offset):
        return vt
    if vt.is_cuda:
        from .cuda.copy import contiguous_copy
        return wrap(contiguous_copy(vt._data), requires_grad=vt.requires_grad)
    return wrap(np.ascontiguousarray(vt._data), requires_grad=vt.requires_grad)


def coerce_values(values, dtype, layout_type) -> Tensor:
    """The ``values`` argument of a sparse constructor as a contiguous dense tensor.

    A dense Tensor of the asked dtype is taken as it is (so it stays the autograd leaf the
    caller passed); anything else becomes a new array: ``dtype`` when given, else Python
    floats/complexes/ints take the default dtypes as ``dj.tensor`` gives them, while a NumPy
    array keeps its own dtype.
    """
    if isinstance(values, Tensor) and TRACE_MARK in values.__dict__:
        # a traced tensor's data is a placeholder: a sparse pattern must not be built around it, so
        # read it through the guarded numpy(), which aborts the trace (the call then runs eagerly)
        values.numpy()
    if isinstance(values, Tensor) and not isinstance(values, layout_type) and \
            (dtype is None or as_dtype(dtype) == values.dtype):
        return values
    v = np.asarray(values._host() if isinstance(values, Tensor) else values)
    if dtype is not None:
        v = v.astype(as_dtype(dtype).np)
    elif v.dtype.kind in "fc" and not isinstance(values, np.ndarray):
        v = v.astype((get_default_dtype() if v.dtype.kind == "f" else default_complex_dtype()).np)
    elif v.dtype.kind == "i" and not isinstance(values, np.ndarray):
        v = v.astype(np.int64)
    return wrap(np.ascontiguousarray(v))


def _dense_only(what: str):
    def method(self, *args, **kwargs):
        raise SparseLayoutError(f"{what} is not supported on a sparse {self._LAYOUT_WORD} tensor of shape "
                                f"{self.shape} (nnz={self._nnz()}); convert it with .to_dense() first")
    method.__name__ = what
    return method


class SparseTensor(Tensor):
    """The base of the sparse layouts' tensor types (not built directly).

    A subclass sets ``_LAYOUT_WORD`` (``"CSR"``, ``"COO"``: used in messages), ``_NO_HISTORY``
    (the error for a sparse result asked to carry autograd history) and defines ``_nnz()``,
    ``_with_values(values_t)`` (the same pattern around other values) and
    ``_signature(values_t)`` (the dispatch signature for those values).
    """

    _LAYOUT_WORD = "sparse"
    _NO_HISTORY = "a sparse result cannot carry autograd history"

    # -- metadata ------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self._shape

    def size(self, dim: int | None = None):
        return self._shape if dim is None else self._shape[dim]

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    def numel(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    def is_contiguous(self) -> bool:
        return True

    def __len__(self) -> int:
        return self._shape[0]

    @property
    def device(self):
        return self._values_t.device

    @staticmethod
    def _to_args(args, kwargs):
        """``(device, dtype)`` from ``A.to(...)``'s arguments, positional or keyword, either may be None."""
        dev, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        for a in args:
            if isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda") or type(a).__name__ == "device":
                dev = a
            else:
                dtype = a
        return dev, dtype

    def to_dense(self) -> Tensor:
        from .registry import lookup
        return lookup("aten::to_dense").entry(self)

    # -- autograd: the values tensor is the leaf -------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._values_t.requires_grad

    @requires_grad.setter
    def requires_grad(self, value) -> None:
        # autograd's mark_output sets this on outputs; only values-level tracking is supported
        if value and not self._values_t.requires_grad:
            raise SparseLayoutError(self._NO_HISTORY)

    @property
    def grad(self):
        g = self._values_t.grad
        return None if g is None else self._with_values(g)

    @grad.setter
    def grad(self, value) -> None:
        # ``A.grad = None`` (zero_grad) clears the values' gradient; a sparse gradient sets it
        self._values_t.grad = value._values_t if isinstance(value, SparseTensor) else value

    @property
    def grad_fn(self):
        return self._values_t.grad_fn

    @grad_fn.setter
    def grad_fn(self, node) -> None:
        # autograd's recorders mark an output by setting its grad_fn (mark_output, autograd/codegen.py)
        if node is not None:
            raise SparseLayoutError(self._NO_HISTORY)

    def requires_grad_(self, requires_grad: bool = True):
        self._values_t.requires_grad_(requires_grad)
        self._sig = self._signature(self._values_t)
        return self

    def detach(self):
        return self._with_values(self._values_t.detach())

    # -- dense-style access: clear errors ----------------------------------------------
    numpy = _dense_only("numpy()")
    __getitem__ = _dense_only("indexing")
    __setitem__ = _dense_only("index assignment")
    tolist = _dense_only("tolist()")
    __iter__ = _dense_only("iteration")
    item = _dense_only("item()")

    @property
    def strides(self):
        raise SparseLayoutError(f"a sparse {self._LAYOUT_WORD} tensor has no strides; convert it with "
                                f".to_dense() first")

    def __array__(self, dtype=None, copy=None):
        a = self.to_dense()._data
        if type(a) is not np.ndarray:       # a CudaArray: copy to the host
            a = a.to_host()
        return a if dtype is None else a.astype(dtype)
