"""Advanced indexing as dispatcher ops, PyTorch's ``aten::index`` and ``aten::index_put_``
(and the functional ``index_put``): what ``t[idx]`` and ``t[mask] = v`` reduce to once
``Tensor.__getitem__``/``__setitem__`` (dispatch_jit/autograd/indexing.py) have applied the
basic part of the index (ints, slices, None, ``...``) as a view.

``indices`` holds one entry per leading dimension of ``self``: None (the whole dimension), an
integer tensor (positions, negative counting from the end) or a bool/uint8 mask (covering as
many dimensions as it has, its True positions).  The result follows PyTorch's (and NumPy's)
rule: the broadcast shape of the index tensors replaces the dimensions they index where they
are adjacent, and comes first where a None separates them.

The CPU kernels are NumPy's fancy indexing (one C pass; the checks first, with PyTorch's
messages), ``np.add.at`` for ``accumulate=True`` (bfloat16 summed in float32, rounded once).
The CUDA kernels (cuda.py's neighbour, dispatch_jit/cuda/index.py) turn the index into flat
positions on the host and gather, scatter or scatter-add on the device.  Meta kernels give a
trace the output type; a mask's result size depends on its data, so ``index`` with a mask has
none (the trace falls back to eager there).
"""

from __future__ import annotations

import numpy as np

from dispatch_jit import bf16
from dispatch_jit.dtypes import BF16_STORAGE
from dispatch_jit.errors import (
    BroadcastError,
    DTypeError,
    OutOfBoundsError,
    ShapeError,
    SizeDependentError,
)
from dispatch_jit.tensor import Tensor, bump_version, wrap

__all__ = ["CPU_KERNELS", "CUDA_KERNELS", "META_KERNELS", "METHODS", "SCHEMAS", "check_indices"]

SCHEMAS = [
    "index.Tensor(Tensor self, Tensor?[] indices) -> Tensor",
    "index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor(a!)",
    "index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor",
]
METHODS = ["index_put_"]     # Tensor.index_put is composite.py's index_put (its docstring), over the op


def _is_mask(t) -> bool:
    d = t._data.dtype        # NumPy's dtype (either device): cheaper than Tensor.dtype on this hot path
    return d == np.bool_ or d == np.uint8


def check_indices(x, indices) -> list:
    """PyTorch's checks of ``indices`` against ``x`` (types, how many, masks' shapes), before any
    data is read: the dims each entry covers, in order (None for a None entry)."""
    if not isinstance(indices, (list, tuple)):
        raise DTypeError(f"index: indices must be a list of tensors (or None), got {type(indices).__name__}")
    covered, d = [], 0
    for k, t in enumerate(indices):
        if t is None:
            covered.append(None)
            d += 1
            continue
        if not isinstance(t, Tensor) or not (_is_mask(t) or t._data.dtype.kind in "iu"):
            got = t.dtype.name if isinstance(t, Tensor) else type(t).__name__
            raise OutOfBoundsError(f"tensors used as indices must be long, int, byte or bool tensors (got {got})")
        n = t.ndim if _is_mask(t) else 1
        if d + n > x.ndim:
            raise OutOfBoundsError(f"too many indices for tensor of dimension {x.ndim} (got {d + n})")
        if _is_mask(t) and tuple(x.shape[d:d + n]) != tuple(t.shape) and None not in t.shape:
            for j, (m, s) in enumerate(zip(t.shape, x.shape[d:d + n])):
                if m != s:
                    raise OutOfBoundsError(f"The shape of the mask {list(t.shape)} at index {j} does not match the "
                                           f"shape of the indexed tensor {list(x.shape)} at index {d + j}")
        covered.append(tuple(range(d, d + n)))
        d += n
    return covered


def _numpy_index(x, indices) -> tuple:
    """``indices`` as NumPy's index tuple for ``x``'s host array (NumPy checks the bounds: a caller
    turns its IndexError into PyTorch's message with ``bounds_error``)."""
    check_indices(x, indices)
    return tuple(slice(None) if t is None else _host(t).astype(bool, copy=False) if _is_mask(t) else _host(t)
                 for t in indices)


def bounds_error(x, indices, e: IndexError) -> OutOfBoundsError:
    """PyTorch's error for the first index out of range (NumPy raised ``e`` for it)."""
    d = 0
    for t in indices:
        if t is not None and not _is_mask(t):
            a, n = _host(t), x.shape[d]
            if a.size and (int(a.min()) < -n or int(a.max()) >= n):
                bad = int(a.min()) if int(a.min()) < -n else int(a.max())
                return OutOfBoundsError(f"index {bad} is out of bounds for dimension {d} with size {n}")
        d += 1 if t is None or not _is_mask(t) else t.ndim
    return OutOfBoundsError(str(e))


def _host(t) -> np.ndarray:
    """An index tensor's values on the host (PyTorch takes CPU indices for a CUDA tensor; CUDA
    indices are copied back, as PyTorch synchronizes there too)."""
    a = t._data
    return a if isinstance(a, np.ndarray) else a.to_host()


def _result_shape(shape: tuple, items: tuple) -> tuple:
    # a zero-stride stand-in: NumPy's own shape rule, with one byte allocated per result element
    return np.broadcast_to(np.zeros((), np.int8), shape)[items].shape


def _check_values(op: str, x, values, shape: tuple) -> None:
    if not isinstance(values, Tensor):
        raise DTypeError(f"{op}(): values must be a tensor, got {type(values).__name__}")
    if values.dtype is not x.dtype:
        raise DTypeError(f"Index put requires the source and destination dtypes match, got {x.dtype.name} for "
                         f"the destination and {values.dtype.name} for the source.")
    try:
        fits = np.broadcast_shapes(values._data.shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise BroadcastError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast to "
                             f"indexing result of shape {list(shape)}")


def index(x, indices):
    """``x[indices]`` (NumPy's fancy indexing, a new array)."""
    if len(indices) == 1 and indices[0] is not None and indices[0]._data.dtype == np.int64 and \
            indices[0]._data.ndim and x._data.ndim:
        # the common x[idx]: one take along dim 0 (a new C-contiguous array; a 0-d index would give
        # NumPy's scalar), without the general checks
        try:
            return wrap(x._data.take(indices[0]._data, axis=0))
        except IndexError as e:
            raise bounds_error(x, indices, e) from None
    items = _numpy_index(x, indices)
    try:
        return wrap(np.array(x._data[items], copy=True, order="C"))
    except IndexError as e:
        raise bounds_error(x, indices, e) from None


def index_put_(x, indices, values, accumulate=False):
    """Write (``accumulate``: add, repeated positions adding up) ``values`` at ``x[indices]``."""
    items = _numpy_index(x, indices)
    a = x._data
    if values.ndim or values.dtype is not x.dtype:     # (a 0-d value of the dtype fits any result)
        try:
            shape = _result_shape(a.shape, items)   # (NumPy checks the bounds here, before any write)
        except IndexError as e:
            raise bounds_error(x, indices, e) from None
        _check_values("index_put_", x, values, shape)
    if not a.flags.writeable:
        raise ShapeError(f"index_put_: cannot write into a read-only tensor of shape {tuple(x.shape)} (an "
                         f"expand()ed view, or a read-only buffer); write into a .clone() of it instead")
    try:
        _put(a, items, values._data, accumulate)
    except IndexError as e:     # NumPy checks every index before it writes
        raise bounds_error(x, indices, e) from None
    bump_version(x)
    return x


def _put(a, items, v, accumulate) -> None:
    if not accumulate:
        a[items] = v
    elif a.dtype == BF16_STORAGE:
        f = bf16.to_float32(a)
        np.add.at(f, items, bf16.to_float32(v))
        a[...] = bf16.from_float32(f)
    elif a.dtype == np.bool_:
        np.logical_or.at(a, items, v)        # PyTorch's bool accumulate is an or
    else:
        np.add.at(a, items, v)


def index_put(x, indices, values, accumulate=False):
    """``x`` with ``values`` written (or added) at ``x[indices]``, as a new tensor."""
    from dispatch_jit.ops import entries
    return entries("aten").index_put_(entries("aten").clone(x), indices, values, accumulate)


# -- CUDA: positions on the host, one gather / scatter / scatter-add launch (cuda/index.py) ------------
def _cuda_items(x, indices) -> tuple:
    items = _numpy_index(x, indices)
    try:
        _result_shape(tuple(x.shape), items)        # NumPy's bounds check, before any launch
    except IndexError as e:
        raise bounds_error(x, indices, e) from None
    return tuple(np.nonzero(i) if isinstance(i, np.ndarray) and i.dtype == np.bool_ else (i,) for i in items)


def _flatten_items(parts) -> tuple:
    return tuple(p for part in parts for p in part)


def index_cuda(x, indices):
    from dispatch_jit.cuda import index as cuda_index
    items = _flatten_items(_cuda_items(x, indices))
    return wrap(cuda_index.gather(x._data, items))


def index_put_cuda(x, indices, values, accumulate=False):
    from dispatch_jit.cuda import index as cuda_index
    items = _flatten_items(_cuda_items(x, indices))
    _check_values("index_put_", x, values, _result_shape(tuple(x.shape), items))
    (cuda_index.scatter_add if accumulate else cuda_index.scatter)(x._data, items, values._data)
    bump_version(x)
    return x


# -- Meta: the output types without data ----------------------------------------------------------
def index_meta(x, indices):
    from dispatch_jit.creation import empty
    check_indices(x, indices)
    if any(t is not None and _is_mask(t) for t in indices):
        raise SizeDependentError("index: a bool mask's result size depends on its data (how many are True)")
    items = tuple(slice(None) if t is None else np.zeros(tuple(t.shape), np.int64) for t in indices)
    return empty(*_result_shape(tuple(x.shape), items), dtype=x.dtype, device=x.device)


def index_put_meta(x, indices, values, accumulate=False):
    check_indices(x, indices)
    if values.dtype is not x.dtype:
        raise DTypeError(f"Index put requires the source and destination dtypes match, got {x.dtype.name} for "
                         f"the destination and {values.dtype.name} for the source.")
    return x


def index_put_functional_meta(x, indices, values, accumulate=False):
    from dispatch_jit.creation import empty_like
    index_put_meta(x, indices, values, accumulate)
    return empty_like(x)


CPU_KERNELS = {"index.Tensor": index, "index_put_": index_put_, "index_put": index_put}
CUDA_KERNELS = {"index.Tensor": index_cuda, "index_put_": index_put_cuda, "index_put": index_put}
META_KERNELS = {"index.Tensor": index_meta, "index_put_": index_put_meta, "index_put": index_put_functional_meta}

# fancy indexing moves elements; accumulate sums through float32 (above)
bf16.support("aten::index.Tensor", "aten::index_put_", "aten::index_put", keys=("CPU",))
