"""BatchedTensor: a tensor with one batch dimension at one vmap level.

vmap wraps each mapped input as a ``BatchedTensor`` whose *logical* shape is
the per-example shape; its *value* is an ordinary tensor (or a BatchedTensor of
an outer level) holding every example, with the batch at dimension ``bdim``.
Its signature carries the ``Batched`` dispatch key and no backend key, so
every op on it lands on the op's batching rule (kernels/batching) or on the
boxed fallback, which unwrap the arguments of the innermost level, run ops on
the values and wrap the results.  As functorch's dynamic layers, each vmap
pushes a level; a tensor wrapped at level k is unwrapped by level k only, so
an op mixing tensors of levels 1 and 2 runs level 2's rule on values that
are still batched at level 1, which the next dispatch handles.

Autograd sits above Batched in the key order: ``grad`` inside ``vmap`` records
its graph over BatchedTensors (the backward runs batched), and ``grad`` of
``vmap`` records over the values (the wrapper itself does not require grad).
"""

from __future__ import annotations

import threading

import numpy as np

from ..errors import InvalidArgumentError, OutOfBoundsError, ShapeError, VmapError
from ..keys import AUTOGRAD_BITS, BATCHED_BITS, DispatchKey, key_bits
from ..registry import lookup
from ..signature import keyset_sig_bits, make_sig
from ..tensor import Tensor

__all__ = ["BatchedTensor", "VmapError", "wrap_batched", "unwrap_at", "current_level", "push_level",
           "pop_level", "level_info", "is_batched", "max_level"]

_new = object.__new__
_AG_CPU_BITS = key_bits(DispatchKey.AutogradCPU)
_AUTOGRAD_SIG_BITS = keyset_sig_bits(AUTOGRAD_BITS)


class _Levels(threading.local):
    def __init__(self):
        self.stack: list = []       # (level, batch_size, randomness) of the vmaps now running


_levels = _Levels()
_counter = [0]
_counter_lock = threading.Lock()


def push_level(batch_size: int, randomness: str) -> int:
    with _counter_lock:
        _counter[0] += 1
        level = _counter[0]
    _levels.stack.append((level, batch_size, randomness))
    return level


def pop_level(level: int) -> None:
    top = _levels.stack.pop()
    assert top[0] == level, "vmap levels popped out of order"


def current_level():
    """(level, batch_size, randomness) of the innermost running vmap, or None."""
    return _levels.stack[-1] if _levels.stack else None


def level_info(level: int):
    for entry in _levels.stack:
        if entry[0] == level:
            return entry
    return None


class _Flags:
    c_contiguous = True
    f_contiguous = False
    writeable = False


class _LogicalMeta:
    """What a BatchedTensor's ``_data`` slot holds: the per-example shape and dtype, so
    ``.shape``, ``.dtype``, ``.ndim``, ``.numel()`` read as on any tensor, and no data:
    code that reads the array itself gets a VmapError naming what to do, never numbers."""

    flags = _Flags()
    device_index = 0

    def __init__(self, shape: tuple, dtype: np.dtype):
        self.shape = tuple(shape)
        self.ndim = len(self.shape)
        self.dtype = dtype
        self.itemsize = dtype.itemsize
        self.size = int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1
        strides, acc = [], self.itemsize
        for n in reversed(self.shape):
            strides.append(acc)
            acc *= max(n, 1)
        self.strides = tuple(reversed(strides))

    def __array__(self, *a, **k):
        raise VmapError("vmap: the data of a batched tensor cannot be read inside the vmapped function "
                        "(.numpy(), .item(), .tolist(), printing, NumPy functions); return the tensor from "
                        "the function and read it outside vmap")

    def __getattr__(self, name):
        # an AttributeError, so hasattr() probes (is it a CUDA array? a NumPy one?) answer "no"
        raise AttributeError(f"vmap: a batched tensor has no data to read ({name!r}); only its shape and dtype "
                        f"are known inside the vmapped function; return the tensor and read it outside vmap")


class BatchedTensor(Tensor):
    """A tensor batched at one vmap level (functorch's BatchedTensorImpl).

    Its ``shape`` is the per-example shape; ``_value`` holds all examples with the batch
    at ``_bdim``; ``_level`` is the vmap that made it.  Users meet it only inside a
    vmapped function, where it behaves as one example.

    >>> import dispatch_jit as dj
    >>> dj.func.vmap(lambda x: (x.shape, x * 2)[1])(dj.ones(3, 2)).shape
    (3, 2)
    """

    __slots__ = ()

    def __repr__(self) -> str:
        d = self.__dict__
        return f"BatchedTensor(lvl={d['_level']}, bdim={d['_bdim']}, value=\n{d['_value']!r})"

    def numpy(self, *a, **k):
        return self._data.__array__()

    def item(self):
        return self._data.__array__()

    def tolist(self):
        return self._data.__array__()

    def __bool__(self):
        raise VmapError("vmap: data-dependent control flow is not supported: a batched tensor has no single "
                        "truth value (it holds one per example); use dj.where(cond, a, b) instead of if/else")

    def detach(self) -> "BatchedTensor":
        """A wrapper at the same level cut from this level's graph (the value, which belongs
        to the levels outside, keeps its own)."""
        d = self.__dict__
        return wrap_batched(d["_value"], d["_bdim"], d["_level"])

    def requires_grad_(self, requires_grad: bool = True) -> "BatchedTensor":
        if requires_grad and self.dtype.category < 2:
            from ..errors import DTypeError
            raise DTypeError(f"only floating point and complex tensors can require gradients, got {self.dtype}")
        if not requires_grad and self.grad_fn is not None:
            from ..errors import AutogradError
            raise AutogradError("you can only change requires_grad flags of leaf variables; use .detach()")
        self.__dict__["requires_grad"] = rg = bool(requires_grad)
        self._sig = (self._sig & ~_AUTOGRAD_SIG_BITS) | (keyset_sig_bits(_AG_CPU_BITS) if rg else 0)
        return self

    def __getitem__(self, index):
        """Indexing of one example: basic indexing (ints, slices, None, ...) written as
        narrow/squeeze/unsqueeze/index_select on this tensor, an advanced index as that view and
        one aten::index: each has a batching rule and a derivative, so indexing works under grad
        inside vmap too."""
        if not isinstance(index, tuple):
            index = (index,)
        if any(isinstance(i, (list, bool, Tensor)) for i in index):
            # advanced indexing: PyTorch's decomposition, a view and one aten::index (its batching rule)
            from ..autograd.indexing import split_index
            basic, indices = split_index(self, index)
            return lookup("aten::index.Tensor").entry(self[basic], indices)
        n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
        if any(i is Ellipsis for i in index):
            at = index.index(Ellipsis)
            index = index[:at] + (slice(None),) * (self.ndim - n_real) + index[at + 1:]
        if n_real > self.ndim:
            raise OutOfBoundsError(f"too many indices for tensor of dimension {self.ndim}")
        t, d = self, 0
        for i in index:
            if i is None:
                t = t.unsqueeze(d)
                d += 1
            elif isinstance(i, bool) or not isinstance(i, (int, slice, Tensor)):
                raise VmapError(f"vmap: indexing a batched tensor with {type(i).__name__} is not supported; "
                                f"use ints, slices, None, ... or dj.index_select/dj.gather")
            elif isinstance(i, int):
                size = t.shape[d]
                if not -size <= i < size:
                    raise OutOfBoundsError(f"index {i} is out of bounds for dimension {d} with size {size}")
                t = t.narrow(d, i % size, 1).squeeze(d)
            elif isinstance(i, slice):
                start, stop, step = i.indices(t.shape[d])
                if step <= 0:
                    raise VmapError("step must be greater than zero")
                if step == 1:
                    t = t.narrow(d, start, max(0, stop - start))
                else:
                    from ..creation import arange
                    t = index_select_op()(t, d, arange(start, stop, step))
                d += 1
            else:
                if i.__class__ is BatchedTensor or i.ndim != 1 or i.dtype.category != 1:
                    raise VmapError("vmap: indexing a batched tensor with a tensor index is supported for one "
                                    "unbatched 1-D integer tensor only; use dj.gather or dj.take_along_dim")
                t = index_select_op()(t, d, i)
                d += 1
        return t


def index_select_op():
    from ..registry import lookup
    return lookup("aten::index_select").entry


def is_batched(x) -> bool:
    return isinstance(x, BatchedTensor)


def movedim_front(v, bdim: int):
    """``v`` with dimension ``bdim`` moved first (a view)."""
    if bdim == 0:
        return v
    perm = [bdim] + [i for i in range(v.ndim) if i != bdim]
    return v.permute(perm)


def wrap_batched(value, bdim: int, level: int) -> BatchedTensor:
    """A BatchedTensor of ``value`` batched along ``bdim`` at ``level``."""
    if not isinstance(value, Tensor):
        raise InvalidArgumentError(f"vmap: a batching rule returned {type(value).__name__}, expected a Tensor")
    nd = value.ndim
    if not -nd <= bdim < nd:
        raise ShapeError(f"vmap: batch dim {bdim} out of range for a value of {nd} dims")
    bdim %= nd
    shape = value.shape[:bdim] + value.shape[bdim + 1:]
    t = _new(BatchedTensor)
    t._data = _LogicalMeta(shape, np.dtype(value.dtype.np))
    t._sig = make_sig(BATCHED_BITS, value.dtype, len(shape), True)
    t.__dict__.update(_value=value, _bdim=bdim, _level=level)
    return t


def unwrap_at(x, level: int):
    """(value, bdim) of ``x`` at ``level``: a BatchedTensor of that level gives its value and
    batch dim; anything else (a plain tensor, one batched only at outer levels) is unbatched there."""
    if x.__class__ is BatchedTensor:
        d = x.__dict__
        if d["_level"] == level:
            return d["_value"], d["_bdim"]
    return x, None


def max_level(args) -> int | None:
    """The innermost vmap level among ``args`` (tensors, or lists of them)."""
    best = None
    for a in args:
        if a.__class__ is BatchedTensor:
            lv = a.__dict__["_level"]
            best = lv if best is None or lv > best else best
        elif a.__class__ in (list, tuple):
            lv = max_level(a)
            if lv is not None and (best is None or lv > best):
                best = lv
    return best


def _saved_twin(self, box):
    """What autograd saves of a batched output (graph._output_data): a wrapper of the same value."""
    d = self.__dict__
    t = wrap_batched(d["_value"], d["_bdim"], d["_level"])
    t._sig = self._sig
    t.__dict__["_vc"] = box
    t.__dict__["requires_grad"] = self.requires_grad
    return t


BatchedTensor._saved_twin = _saved_twin
