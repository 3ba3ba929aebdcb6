"""``t[index]``, as PyTorch decomposes it: the basic part of the index (ints, slices, None,
``...``) is applied as one view of ``t`` (recorded for autograd as IndexBackward, which puts
the gradient back at the view's place), then the advanced part (integer and bool tensors,
lists, arrays) is one call of the dispatcher op ``aten::index`` on that view, whose CPU/CUDA
kernels, meta function and derivative are kernels/indexing/advanced.py's and grad.py's.

Because ints are applied first, as selects, ``x[0, :, idx]`` has idx's dims where idx was
(PyTorch's shape), not in front (NumPy's rule, which counts an int beside an array as one more
array).  Item assignment, an in-place op (``index_put_`` for an advanced index), is in inplace.py.
"""

from __future__ import annotations

import numpy as np

from ..creation import tensor, zeros
from ..dtypes import int64
from ..errors import OutOfBoundsError
from ..registry import lookup
from ..tensor import Tensor, wrap_view
from .grad_mode import is_grad_enabled
from .graph import edge_of, mark_output, node_class

__all__ = ["getitem", "is_basic", "scatter_add_into_zeros", "split_index", "unwrap_index"]

_IndexBackward = node_class("IndexBackward")
_BASIC = (int, slice, type(None), type(Ellipsis))


def unwrap_index(index):
    """An index as NumPy takes it: the tensors in it replaced by their arrays."""
    if isinstance(index, Tensor):
        return index._data
    if isinstance(index, tuple):
        return tuple(i._data if isinstance(i, Tensor) else i for i in index)
    return index


def is_basic(index) -> bool:
    """Whether NumPy's basic indexing applies (ints, slices, None, ``...``): the result is a view."""
    items = index if isinstance(index, tuple) else (index,)
    return all(isinstance(i, _BASIC) and not isinstance(i, bool) for i in items)


def _as_index_tensor(i, device) -> Tensor:
    """A list, array or tensor used as an index, as the index tensor PyTorch makes of it (int64
    or bool), on ``device``."""
    if not isinstance(i, Tensor):
        a = np.asarray(i)
        if a.dtype != np.bool_:
            if a.size == 0:
                a = a.astype(np.int64)
            elif a.dtype.kind not in "iu":
                raise OutOfBoundsError(f"tensors used as indices must be long, int, byte or bool tensors (got an "
                                       f"index of {a.dtype} values)")
        i = tensor(a if a.dtype == np.bool_ else a.astype(np.int64, copy=False))
    if (i._data.__class__ is not np.ndarray or device.type != "cpu") and i.device != device:
        i = i.to(device)
    return i


def split_index(t, index) -> tuple:
    """``index`` for ``t`` as (a basic index of ints, slices and None, applied as one view; the
    ``aten::index`` list for that view, None if the index is basic)."""
    items = index if isinstance(index, tuple) else (index,)
    if is_basic(items):
        return items, None
    conv, used = [], 0
    for i in items:
        if isinstance(i, (bool, np.bool_)):
            conv.append(bool(i))
        elif isinstance(i, (np.integer,)):
            conv.append(int(i))
        elif isinstance(i, _BASIC):
            conv.append(i)
            used += i is not None and i is not Ellipsis
            continue
        else:
            i = _as_index_tensor(i, t.device)
            conv.append(i)
            used += i.ndim if i._data.dtype in (np.bool_, np.uint8) else 1
            continue
        used += not isinstance(conv[-1], bool)
    if used > t.ndim:
        raise OutOfBoundsError(f"too many indices for tensor of dimension {t.ndim} (got {used})")
    basic, indices, d = [], [], 0       # d: the dim of the view the next index entry refers to
    for i in conv:
        if i is Ellipsis:
            k = t.ndim - used
            basic += [slice(None)] * k
            d += k
        elif isinstance(i, bool):
            # PyTorch: a new dim of size 1, indexed by [True] (kept) or [False] (empty)
            basic.append(None)
            indices += [None] * (d - len(indices)) + [tensor([i], device=t.device)]
            d += 1
        elif isinstance(i, Tensor):
            mask = i._data.dtype in (np.bool_, np.uint8)
            if mask and i.ndim == 0:
                basic.append(None)
                i = i.reshape((1,))
                n = 1
            else:
                n = i.ndim if mask else 1
                basic += [slice(None)] * n
            indices += [None] * (d - len(indices)) + [i]
            d += n
        else:
            basic.append(i)
            d += i is None or i.__class__ is slice
    return tuple(basic), indices


def _trivial(basic: tuple) -> bool:
    return all(i.__class__ is slice and i == slice(None) for i in basic)


def getitem(t, index):
    """``t[index]``, recorded by autograd: a view for a basic index, else one ``aten::index``."""
    basic, indices = split_index(t, index)
    if indices is None:
        return _view(t, basic)
    view = t if _trivial(basic) else _view(t, basic)
    return lookup("aten::index.Tensor").entry(view, indices)


def _view(t, index: tuple):
    """The view ``t[index]`` for a basic index (NumPy's arithmetic on the layout, either device)."""
    if t.is_cuda:
        from ..cuda import index as cuda_index
        a = cuda_index.getitem(t._data, index)
    else:
        if all(i.__class__ is int for i in index):
            index = index + (Ellipsis,)      # every index an integer: a 0-d view, not NumPy's scalar
        a = t._data[index]
    out = wrap_view(t, a)
    if t.requires_grad and is_grad_enabled() and out.dtype.category >= 2:
        # As PyTorch: a basic index (ints, slices) is kept with the node, and a second backward works
        ctx = {"shape": tuple(t.shape), "dtype": t.dtype, "index": index}
        mark_output(out, _IndexBackward(_view_backward, (edge_of(t),), {}, ctx, "aten::index"))
    return out


def _view_backward(grads, saved, ctx, needs):
    return (scatter_add_into_zeros(grads[0], ctx["index"], ctx["shape"], ctx["dtype"]),)


def scatter_add_into_zeros(g, index, shape: tuple, dtype, flat: bool = False):
    """A zero tensor of ``shape`` with ``g`` put at ``index``: a basic index (distinct positions),
    or, with ``flat``, an array of positions in its flattened form where repeated positions
    accumulate (``index_put`` with ``accumulate=True``): the backward of a view or a gather.
    Differentiable in ``g``, so that backward formulas using it work under ``create_graph=True``."""
    gz = zeros(*shape, dtype=dtype, device=g.device)
    if flat:
        pos = tensor(np.asarray(index, np.int64), dtype=int64, device=g.device)
        put = lookup("aten::index_put").entry
        return put(gz.reshape((-1,)), [pos], g if g.dtype == dtype else g.to(dtype), True).reshape(tuple(shape))
    gz[index] = g       # item assignment: CopySlices records the gradient's own history (create_graph)
    return gz
