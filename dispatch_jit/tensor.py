"""The Tensor: a NumPy array (CPU storage) plus the signature that dispatch keys on.

A tensor's data is a NumPy array; views are NumPy views of the same buffer,
so storage is shared exactly as NumPy shares it.  ``_sig`` (see
signature.py) is computed once at creation and again only when something it
encodes changes (``requires_grad_``).  Operators and methods are installed
from the op library's tables (kernels/surface.py), not written out here, and
so are the methods that need modules above this one (autograd/methods.py,
``copy_`` and conversions in _install.py).
"""

from __future__ import annotations

import warnings
from weakref import ref as _weakref

import numpy as np

from . import dispatcher
from .devices import CPU_DEVICE, _check_cpu, device, place  # noqa: F401  (CPU_DEVICE, _check_cpu: re-exported)
from .bf16 import to_float32
from .dtypes import BF16_STORAGE, DType, from_numpy_dtype
from .errors import ArgumentTypeError, AutogradError, DTypeError, InvalidArgumentError, ShapeError, TensorStateError
from .keys import AUTOGRAD_BITS, DispatchKey, DispatchKeySet, key_bits
from .signature import MAX_NDIM, keyset_sig_bits, make_sig, sig_keyset

__all__ = ["Tensor", "device", "place", "wrap", "wrap_like_sig", "wrap_view", "dispatch_keys", "is_tensor", "strided",
           "version_box", "version_of", "bump_version", "trace_of", "TRACE_MARK"]

_K = DispatchKey
CPU_BITS = key_bits(_K.CPU)
AUTOGRAD_CPU_BITS = key_bits(_K.AutogradCPU)
CUDA_BITS = key_bits(_K.CUDA)
AUTOGRAD_CUDA_BITS = key_bits(_K.AutogradCUDA)
_CUDA_SIG_BITS = keyset_sig_bits(CUDA_BITS)
_AUTOGRAD_SIG_BITS = keyset_sig_bits(AUTOGRAD_BITS)
strided = "strided"
_NON_LEAF_GRAD = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute won't "
    "be populated during autograd.backward(). If you indeed want the .grad field to be populated for a "
    "non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by "
    "mistake, make sure you access the leaf Tensor instead.")


class Tensor:
    """An n-dimensional array whose operations run through the dispatcher.

    >>> import dispatch_jit as dj
    >>> x = dj.tensor([1.0, 2.0])
    >>> x * 2 + 1
    tensor([3., 5.])
    >>> x.shape, x.dtype, x.device
    ((2,), dispatch_jit.float32, device(type='cpu'))
    """

    # _data and _sig are read on every dispatch: slots.  The rest are rare and
    # default at class level, so creating a tensor costs two attribute stores.
    __slots__ = ("_data", "_sig", "__dict__", "__weakref__")
    grad_fn = None
    __array_priority__ = 1000    # NumPy defers `ndarray * Tensor` to us

    def __init__(self, data=None, *, dtype=None):
        raise ArgumentTypeError("construct tensors with dj.tensor(data), dj.asarray(data), dj.zeros(...) and friends")

    # -- metadata ------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self._data.shape

    def size(self, dim: int | None = None):
        return self._data.shape if dim is None else self._data.shape[_norm_dim(dim, self._data.ndim)]

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return self._data.size

    @property
    def dtype(self) -> DType:
        return from_numpy_dtype(self._data.dtype)

    @property
    def device(self) -> device:
        if self._sig & _CUDA_SIG_BITS:
            return device("cuda", self._data.device_index)
        return CPU_DEVICE

    @property
    def is_cuda(self) -> bool:
        return bool(self._sig & _CUDA_SIG_BITS)

    @property
    def __cuda_array_interface__(self) -> dict:
        """CUDA tensors share their device memory with CuPy, PyTorch and Numba (no copy)."""
        if not self._sig & _CUDA_SIG_BITS:
            raise AttributeError("__cuda_array_interface__: only CUDA tensors have one; this tensor is on the "
                                 "CPU (use .numpy() or __array_interface__)")
        return self._data.__cuda_array_interface__

    @property
    def layout(self) -> str:
        return strided

    @property
    def strides(self) -> tuple:
        """Strides in elements (PyTorch's convention), not bytes."""
        isz = self._data.itemsize
        return tuple(s // isz for s in self._data.strides)

    def stride(self, dim: int | None = None):
        s = self.strides
        return s if dim is None else s[_norm_dim(dim, self.ndim)]

    def element_size(self) -> int:
        return self._data.itemsize

    @property
    def itemsize(self) -> int:
        return self._data.itemsize

    def is_contiguous(self) -> bool:
        return bool(self._data.flags.c_contiguous)

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def grad(self):
        """The gradient accumulated by backward; None for a non-leaf tensor, which warns as
        PyTorch does unless it called ``retain_grad()``.  An assigned gradient must have the
        tensor's shape, dtype and device, as PyTorch's must (or be None).

        >>> import dispatch_jit as dj
        >>> w = dj.zeros(2, requires_grad=True)
        >>> w.grad = dj.ones(2); w.grad
        tensor([1., 1.])
        >>> w.grad = dj.ones(1)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dispatch_jit.errors.AutogradError: attempting to assign a gradient of size '[1]' to a tensor of size '[2]'...
        """
        d = self.__dict__
        g = d.get("_grad")
        if g is None and self.grad_fn is not None and not d.get("_retains_grad"):
            warnings.warn(_NON_LEAF_GRAD, UserWarning, stacklevel=2)
        return g

    @grad.setter
    def grad(self, value):
        if value is not None:
            _check_grad(self, value)
        self.__dict__["_grad"] = value

    @grad.deleter
    def grad(self):
        self.__dict__.pop("_grad", None)

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise ArgumentTypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    # -- conversion ------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The data as a NumPy array: sharing memory with a CPU tensor; for a CUDA
        tensor, a host copy (waits for pending kernels)."""
        if self._data.dtype == BF16_STORAGE:
            # NumPy has no bfloat16: handing out the 16-bit words would be a silent reinterpretation
            raise DTypeError("Got unsupported ScalarType BFloat16: NumPy has no bfloat16; convert first "
                             "with .float(), which is exact")
        if self._sig & _CUDA_SIG_BITS:
            return self._data.to_host()
        return self._data

    def _host(self) -> np.ndarray:
        return self._data.to_host() if self._sig & _CUDA_SIG_BITS else self._data

    def _host_values(self) -> np.ndarray:
        """The data on the host as values Python can read: a bfloat16 tensor's as float32 (exact)."""
        a = self._host()
        return to_float32(a) if a.dtype == BF16_STORAGE else a

    def __array__(self, dtype=None, copy=None):
        if self._data.dtype == BF16_STORAGE:
            self.numpy()    # raises, as PyTorch's __array__ of a bfloat16 tensor
        if self._sig & _CUDA_SIG_BITS:
            a = self._data.to_host()
            return a if dtype is None or np.dtype(dtype) == a.dtype else a.astype(dtype)
        a = self._data
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return a.astype(dtype)
        return a.copy() if copy else a

    def item(self):
        if self._data.size != 1:
            raise InvalidArgumentError(f"item(): a tensor with {self._data.size} elements cannot be converted to a "
                             f"Python scalar; index it first")
        return self._host_values().reshape(()).item()

    def tolist(self):
        return self._host_values().tolist()

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise TensorStateError(f"Boolean value of Tensor with {self._data.size} elements is ambiguous; "
                               f"use .any() or .all()")
        return bool(self._host_values().reshape(()))

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __complex__(self):
        return complex(self.item())

    def __index__(self):
        if self.dtype.category > 1 or self._data.size != 1:
            raise ArgumentTypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    __hash__ = object.__hash__

    def __getstate__(self):
        # copy, deepcopy and pickle: a copy is a leaf of its own.  Its accumulator (_leaf_edge,
        # where backward puts the gradient, holding the tensor weakly and a lock) stays with this
        # tensor; a copy made one lazily, as every leaf does
        d = self.__dict__
        if "_leaf_edge" in d:
            d = {k: v for k, v in d.items() if k != "_leaf_edge"}
        return d, {"_data": self._data, "_sig": self._sig}

    def __iter__(self):
        if self._data.ndim == 0:
            raise ArgumentTypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    def __repr__(self) -> str:
        from .printing import tensor_repr
        return tensor_repr(self)

    def __format__(self, spec: str) -> str:
        """A 0-d tensor formats as its Python number (PyTorch's and NumPy's rule); any other
        tensor takes an empty spec only (its repr).

        >>> import dispatch_jit as dj
        >>> f"{dj.tensor(2.0) / 3:.3f} {dj.tensor(7):>3d}"
        '0.667   7'
        """
        if self.ndim == 0 and self.layout == "strided":
            return format(self.item(), spec)
        if not spec:
            return str(self)
        raise ArgumentTypeError(f"unsupported format string {spec!r} for a tensor of shape {tuple(self.shape)}: "
                                f"format specs apply to 0-d tensors only; format its elements (t.tolist()) "
                                f"or index one (t[0])")

    # -- autograd ----------------------------------------------------------------
    # Indexing (``t[i]``, ``t[i] = v``), ``backward`` and ``register_hook`` need autograd, which
    # sits above this module: autograd/methods.py defines them and _install.py binds them here.

    def detach(self) -> "Tensor":
        """A tensor sharing this one's data (and version counter), cut from the graph."""
        t = _new(Tensor)
        t._data = self._data
        t._sig = self._sig & ~(_AUTOGRAD_SIG_BITS)
        t.__dict__["_vc"] = version_box(self)
        return t

    def detach_(self) -> "Tensor":
        self.grad_fn = None
        self.__dict__["requires_grad"] = False
        self._sig &= ~_AUTOGRAD_SIG_BITS
        return self

    def retain_grad(self) -> None:
        """Keep ``.grad`` for a non-leaf tensor after backward."""
        if self.grad_fn is None:
            return
        import threading
        import weakref
        self.__dict__["_retains_grad"] = True
        ref = weakref.ref(self)
        lock = threading.Lock()     # backward passes in several threads: none loses another's sum

        def keep(g):
            t = ref()
            if t is not None:
                with lock:
                    t.grad = g if t.grad is None else t.grad + g
        self.grad_fn.register_prehook(self.__dict__.get("_output_nr", 0), keep)

    @property
    def requires_grad(self) -> bool:
        return self.__dict__.get("requires_grad", False)

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        # PyTorch's setter is requires_grad_: the autograd key must enter (or leave) the signature
        # with the flag, or the dispatcher would go on (not) recording for this tensor.  The
        # library's own writes go to __dict__ and set the signature themselves.
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if requires_grad and self.dtype.category < 2:
            raise DTypeError(f"only floating point and complex tensors can require gradients, got {self.dtype}")
        if not requires_grad and self.grad_fn is not None:
            raise AutogradError("you can only change requires_grad flags of leaf variables; use .detach()")
        self.__dict__["requires_grad"] = rg = bool(requires_grad)
        self._sig = _sig_for(self._data, rg)
        return self


def _check_grad(t, g) -> None:
    """PyTorch's checks of ``t.grad = g``: a gradient of another shape, dtype or device is refused
    here, once, rather than trusted by every reader (the optimizers' loops read ``.grad`` as
    ``t.numel()`` elements of ``t``'s dtype).  The library's own writes go to ``__dict__``."""
    if not isinstance(g, Tensor):
        raise ArgumentTypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                                f"{type(g).__name__}")
    if tuple(g.shape) != tuple(t.shape):
        raise AutogradError(f"attempting to assign a gradient of size '{list(g.shape)}' to a tensor of size "
                            f"'{list(t.shape)}'. Please ensure that the gradient and the tensor are the same size")
    if g.dtype != t.dtype:
        raise AutogradError(f"attempting to assign a gradient with dtype '{g.dtype.name}' to a tensor with dtype "
                            f"'{t.dtype.name}'. Please ensure that the gradient and the tensor have the same dtype "
                            f"(convert it with .to(dj.{t.dtype.name}))")
    if g.device != t.device:
        raise AutogradError(f"attempting to assign a gradient located on device '{g.device}' to a tensor located "
                            f"on device '{t.device}'. Please ensure that the gradient and the tensor are on the "
                            f"same device (move it with .to('{t.device}'))")


def _norm_dim(dim: int, ndim: int) -> int:
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise ShapeError(f"dimension {dim} is out of range for a tensor of {ndim} dimensions "
                         f"(expected in [{-max(ndim, 1)}, {max(ndim, 1) - 1}])")
    return dim % max(ndim, 1)


_new = object.__new__


def _sig_for(a, requires_grad: bool = False) -> int:
    if a.ndim > MAX_NDIM:
        raise ShapeError(f"tensors have at most {MAX_NDIM} dimensions (as PyTorch), got {a.ndim}")
    if type(a) is not np.ndarray and hasattr(a, "storage"):      # a CudaArray
        ks = CUDA_BITS | (AUTOGRAD_CUDA_BITS if requires_grad else 0)
        return make_sig(ks, from_numpy_dtype(a.dtype), a.ndim, a.flags.c_contiguous, a.device_index)
    ks = CPU_BITS | (AUTOGRAD_CPU_BITS if requires_grad else 0)
    return make_sig(ks, from_numpy_dtype(a.dtype), a.ndim, a.flags.c_contiguous)


# dj.compile's tracer (compiler/trace/symbolic.py) marks each symbolic tensor with this instance attribute:
# (its trace, its value id).  Lower layers ask through ``trace_of``, never by the name
TRACE_MARK = "_sym"


def trace_of(t):
    """The trace recording ``t`` when it is a symbolic tensor of ``dj.compile``'s tracer, else None."""
    d = getattr(t, "__dict__", None)
    mark = d.get(TRACE_MARK) if d else None
    return None if mark is None else mark[0]


def wrap(a, requires_grad: bool = False) -> Tensor:
    """Make a tensor that owns or views ``a`` (no copy): a NumPy array gives a CPU
    tensor, a ``CudaArray`` a CUDA tensor."""
    t = _new(Tensor)
    t._data = a
    t._sig = _sig_for(a, requires_grad)
    if requires_grad:
        t.requires_grad_(True)
    return t


def wrap_like_sig(a: np.ndarray, sig: int) -> Tensor:
    """Kernel fast path: the caller knows ``a``'s signature already."""
    t = _new(Tensor)
    t._data = a
    t._sig = sig
    return t


def version_box(t) -> list:
    """The version counter of ``t``'s storage: a one-element list shared by all
    views, bumped by every in-place write (autograd checks saved tensors against it)."""
    vc = t.__dict__.get("_vc")
    if vc is None:
        vc = t.__dict__["_vc"] = [0]
    return vc


def version_of(t) -> int:
    vc = t.__dict__.get("_vc")
    return vc[0] if vc is not None else 0


def bump_version(t) -> None:
    version_box(t)[0] += 1


def wrap_view(base: Tensor, a: np.ndarray) -> Tensor:
    """A tensor viewing ``base``'s storage: it shares the version counter, and
    remembers ``base`` (``_base``) so that an in-place op on the view can give
    the tensor owning the storage autograd history (autograd/views.py).  ``base``
    keeps a weak reference to it (``_views``): after an in-place op recorded by
    autograd, the other views of the storage get the new history too."""
    t = wrap(a)
    d = t.__dict__
    d["_vc"] = version_box(base)
    d["_base"] = base
    bd = base.__dict__
    views = bd.get("_views")
    if views is None:
        views = bd["_views"] = _ViewRefs()
    views.add(t)
    return t


def share_view(dst: Tensor, src: Tensor) -> None:
    """Make ``dst``, which holds ``src``'s data, alias what ``src`` does: the same version
    counter and ``_base`` (and ``src``'s other attributes), and a place among the base's views."""
    d = dst.__dict__
    for k, v in src.__dict__.items():
        if k != "_views":
            d[k] = v
    base = d.get("_base")
    if base is not None:
        base.__dict__["_views"].add(dst)


class _ViewRefs(list):
    """Weak references to the views made of one tensor, pruned of dead ones whenever the
    list has doubled since the last pruning (amortized O(1) an append)."""

    __slots__ = ("limit",)

    def __init__(self):
        super().__init__()
        self.limit = 32

    def __reduce__(self):
        return _ViewRefs, ()       # a pickled or copied tensor has no views yet

    def __deepcopy__(self, memo):
        return _ViewRefs()

    def add(self, t) -> None:
        self.append(_weakref(t))
        if len(self) >= self.limit:
            self[:] = [r for r in self if r() is not None]
            self.limit = max(32, 2 * len(self))


def dispatch_keys(t: Tensor) -> DispatchKeySet:
    """The dispatch key set a tensor contributes to every call.

    >>> import dispatch_jit as dj
    >>> dj.dispatch_keys(dj.tensor([1.0]))
    DispatchKeySet(CPU)
    """
    if not isinstance(t, Tensor):
        raise ArgumentTypeError(f"dispatch_keys() expects a Tensor, got {type(t).__name__}")
    return DispatchKeySet.from_bits(sig_keyset(t._sig))


def is_tensor(x) -> bool:
    return isinstance(x, Tensor)


dispatcher.set_tensor_type(Tensor)
