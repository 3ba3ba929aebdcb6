"""``t[index]``, as PyTorch decomposes it: the basic part of the index (ints, slices, None,
``...``) is a chain of the dispatcher's view ops ``select``, ``slice`` and ``unsqueeze`` (their
kernels per device, shape rules and derivatives SelectBackward/SliceBackward are
kernels/shape/index.py's), then the advanced part (integer and bool tensors, lists, arrays) is
one call of the dispatcher op ``aten::index`` on that view, whose CPU/CUDA kernels, meta
function and derivative are kernels/indexing/advanced.py's and grad.py's.  Nothing here asks
which device a tensor is on: each op's kernel at the tensor's key does its part.

Because ints are applied first, as selects, ``x[0, :, idx]`` has idx's dims where idx was
(PyTorch's shape), not in front (NumPy's rule, which counts an int beside an array as one more
array).  Item assignment, an in-place op (``index_put_`` for an advanced index), is in inplace.py.
"""

from __future__ import annotations

import operator

import numpy as np

from ..creation import tensor, zeros
from ..dtypes import int64
from ..errors import OutOfBoundsError, SchemaError
from ..registry import lookup
from ..tensor import Tensor

__all__ = ["basic_view", "getitem", "is_basic", "scatter_add_into_zeros", "split_index", "unwrap_index"]

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
    if sum(i is Ellipsis for i in conv) > 1:
        raise OutOfBoundsError("an index can only have a single ellipsis ('...')")
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


class _Ops:
    """The dispatcher entries indexing calls, looked up once (the ops are defined after this
    module is imported)."""

    def __getattr__(self, name):
        if name not in _OP_NAMES:   # e.g. inspect.unwrap's __wrapped__ (doctest collection): no op
            raise AttributeError(name)
        entry = lookup(_OP_NAMES[name]).entry
        setattr(self, name, entry)
        return entry


_OP_NAMES = {"select": "aten::select.int", "slice": "aten::slice.Tensor", "unsqueeze": "aten::unsqueeze",
             "view": "aten::view", "index": "aten::index.Tensor"}
_ops = _Ops()


def getitem(t, index):
    """``t[index]``, as PyTorch decomposes it: the basic part a chain of the view ops ``select``,
    ``slice`` and ``unsqueeze`` (each recorded by autograd as its own backward node), the
    advanced part one ``aten::index`` on that view.  The index's class picks the path once, by
    one dict lookup: one int, one slice and one index tensor go straight to their op."""
    return _PATHS.get(index.__class__, _general)(t, index)


def _general(t, index):
    basic, indices = split_index(t, index)
    if indices is None:
        return basic_view(t, basic)
    return _ops.index(t if _trivial(basic) else basic_view(t, basic), indices)


def _one_int(t, i):
    return _ops.select(t, 0, i)


def _one_slice(t, s):
    try:
        return _ops.slice(t, 0, s.start, s.stop, 1 if s.step is None else s.step)
    except SchemaError:        # bounds that are not ints (np.int64, a 0-d tensor): as general indexing
        return _general(t, s)


def _one_tensor(t, i):
    if i.ndim == 0 or i.device != t.device:
        return _general(t, i)       # a 0-d mask is a new dim; an index elsewhere moves first
    return _ops.index(t, [i])


def _bound(v):
    return v if v is None else operator.index(v)


def basic_view(t, basic: tuple):
    """The view ``t[basic]`` for a basic index (ints, slices, None, ``...``) as a chain of
    ``select``, ``slice`` and ``unsqueeze``, PyTorch's: each device's kernel makes its part."""
    used = ellipses = 0
    for i in basic:
        if i is Ellipsis:
            ellipses += 1
        elif i is not None:
            used += 1
    if ellipses > 1:
        raise OutOfBoundsError("an index can only have a single ellipsis ('...')")
    if used > t.ndim:
        raise OutOfBoundsError(f"too many indices for tensor of dimension {t.ndim} (got {used})")
    out, d = t, 0
    for i in basic:
        if i is None:
            out = _ops.unsqueeze(out, d)
            d += 1
        elif i is Ellipsis:
            d += t.ndim - used
        elif i.__class__ is slice:
            if i.start is not None or i.stop is not None or i.step is not None:
                step = 1 if i.step is None else operator.index(i.step)
                out = _ops.slice(out, d, _bound(i.start), _bound(i.stop), step)
            d += 1
        else:
            out = _ops.select(out, d, operator.index(i))
    if out is t:          # t[:], t[...]: a new view of all of t (PyTorch's alias), not t itself
        out = _ops.view(t, list(t.shape))
    return out


def _tuple(t, index):
    for i in index:
        if i.__class__ not in _BASIC_CLASSES:
            return _int_tensors(t, index) if i.__class__ is Tensor else _general(t, index)
    return basic_view(t, index)


def _int_tensors(t, index):
    """``t[i0, i1, ...]`` with integer index tensors on the host, no more than ``t`` has dims (the
    loss's ``logp[arange(N), y]``): split_index's result is these tensors over the trivial view,
    so ``aten::index`` gets them as given, without split_index's conversions (a third of the
    call).  Anything else (a mask, a uint8 index, a device, a number): the general path."""
    if t._data.__class__ is not np.ndarray or len(index) > t._data.ndim:
        return _general(t, index)
    for i in index:
        if i.__class__ is not Tensor or i._data.__class__ is not np.ndarray or i._data.dtype not in _POSITIONS:
            return _general(t, index)
    return _ops.index(t, list(index))


_BASIC_CLASSES = frozenset(_BASIC)      # (by class: a bool is no int here, as in is_basic)
# the integer dtypes an index tensor is taken as positions in (uint8 is a mask, as bool: PyTorch's rule)
_POSITIONS = frozenset(np.dtype(d) for d in (np.int8, np.int16, np.int32, np.int64, np.uint16, np.uint32,
                                                  np.uint64))
_PATHS = {int: _one_int, slice: _one_slice, Tensor: _one_tensor, tuple: _tuple}


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
