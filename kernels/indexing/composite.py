"""PyTorch's masked and index-wise writes as compositions of the indexing ops: masked_select,
masked_scatter, index_fill, index_copy, index_add, index_put, put and ``scatter_reduce``'s public
function (``PY_FUNCTIONS``: ``dj.X`` and ``Tensor.X``; out of place, as their functional forms).

index_copy/index_add are scatter/scatter_add with the index spread over the source's shape;
index_put and put flatten the indexed dims to one and become index_copy/index_add along it;
masked_scatter takes the source's elements in order through a cumulative count of the mask.
So autograd differentiates through the scatter, gather and where ops they call.
"""

from __future__ import annotations

from dispatch_jit.broadcast import broadcast_shapes
from dispatch_jit.dtypes import BOOL, INT, int64
from dispatch_jit.errors import BroadcastError, DTypeError, InvalidArgumentError, OutOfBoundsError, ShapeError
from dispatch_jit.ops import entries
from dispatch_jit.registry import lookup

from ..shape.op import normalize_axis

__all__ = ["PY_FUNCTIONS"]

A = entries("aten")


def _bshape(who: str, *shapes):
    try:
        return broadcast_shapes(*[tuple(s) for s in shapes])
    except ValueError:
        raise BroadcastError(f"{who}: the shapes {', '.join(str(tuple(s)) for s in shapes)} do not broadcast") \
            from None


def masked_select(input, mask):  # noqa: A002  (PyTorch's argument names)
    """The elements of ``input`` where the bool ``mask`` is True (both broadcast), as a 1-D tensor.

    >>> import dispatch_jit as dj
    >>> dj.masked_select(dj.tensor([[1, 2], [3, 4]]), dj.tensor([True, False]))
    tensor([1, 3])
    """
    if mask.dtype is not _bool():
        raise DTypeError(f"masked_select: expected BoolTensor for mask, got {mask.dtype.name}")
    shape = _bshape("masked_select", input.shape, mask.shape)
    x = A.expand(input, shape) if tuple(input.shape) != shape else input
    m = A.expand(mask, shape) if tuple(mask.shape) != shape else mask
    if not shape:
        x, m = A.reshape(x, (1,)), A.reshape(m, (1,))
    return x[m]


def _bool():
    from dispatch_jit.dtypes import bool_
    return bool_


def masked_scatter(input, mask, source):  # noqa: A002
    """``input`` with the positions where ``mask`` is True filled, in order, by the first elements
    of ``source``, as ``torch.masked_scatter``.

    >>> import dispatch_jit as dj
    >>> dj.zeros(4).masked_scatter(dj.tensor([True, False, True, False]), dj.tensor([5.0, 6.0, 7.0]))
    tensor([5., 0., 6., 0.])
    """
    if mask.dtype is not _bool():
        raise DTypeError(f"masked_scatter_: expected BoolTensor for mask, got {mask.dtype.name}")
    if source.dtype is not input.dtype:
        raise DTypeError(f"masked_scatter: expected self and source to have same dtypes but got "
                         f"{input.dtype.name} and {source.dtype.name}")
    shape = _bshape("masked_scatter", input.shape, mask.shape)
    x = A.expand(input, shape) if tuple(input.shape) != shape else input
    m = A.reshape(A.expand(mask, shape) if tuple(mask.shape) != shape else mask, (-1,))
    n = m.shape[0]
    if n == 0:
        return A.clone(x)
    pos = A.cumsum(m.to(int64), 0)
    need = int(pos[-1].item())
    flat = A.reshape(source, (-1,))
    if need > flat.shape[0]:
        raise ShapeError(f"masked_scatter: Number of elements of source < number of ones in mask ({flat.shape[0]} "
                         f"< {need})")
    if flat.shape[0] == 0:
        return A.clone(x)
    taken = A.take(flat, A.clamp(A.sub(pos, 1), 0, flat.shape[0] - 1))
    return A.reshape(A.where(m, taken, A.reshape(x, (-1,))), shape)


def _index_1d(who: str, index, size: int):
    if index.dtype.category != INT:
        raise DTypeError(f"{who}(): Expected dtype int64 for index (got {index.dtype.name})")
    if index.ndim > 1:
        raise ShapeError(f"{who}(): Index is supposed to be a vector")
    idx = A.reshape(index, (-1,)).to(int64)
    if idx.numel():
        lo, hi = int(A.min(idx, None).item()), int(A.max(idx, None).item())
        if lo < -size or hi >= size:
            raise OutOfBoundsError(f"{who}(): index {lo if lo < -size else hi} is out of bounds for dimension "
                                   f"with size {size}")
        if lo < 0:
            idx = A.remainder(idx, size)
    return idx


def _spread(idx, source, axis: int):
    """The 1-D ``idx`` along ``axis``, broadcast over the source's other dims (a scatter's index)."""
    shape = [1] * source.ndim
    shape[axis] = idx.shape[0]
    return A.expand(A.reshape(idx, tuple(shape)), tuple(source.shape))


def _index_write(who: str, x, dim, index, source, add: bool):
    axis = normalize_axis(dim, max(x.ndim, 1), who)
    if x.ndim == 0:
        x1, src = A.reshape(x, (1,)), A.reshape(source, (-1,))
    else:
        x1, src = x, source if source.ndim else A.reshape(source, (1,))
    if src.dtype is not x.dtype:
        raise DTypeError(f"{who}(): self ({x.dtype.name}) and source ({src.dtype.name}) must have the same scalar "
                         f"type")
    idx = _index_1d(who, index, x1.shape[axis])
    if src.ndim != x1.ndim or src.shape[axis] != idx.shape[0] or any(
            src.shape[d] != x1.shape[d] for d in range(x1.ndim) if d != axis):
        raise ShapeError(f"{who}(): Source/destination tensor must have same slice shapes and the index must have "
                         f"one entry per source slice: self {tuple(x.shape)}, index {tuple(index.shape)}, source "
                         f"{tuple(source.shape)}, dim {dim}")
    out = (A.scatter_add if add else A.scatter)(x1, axis, _spread(idx, src, axis), src)
    return A.reshape(out, ()) if x.ndim == 0 else out


def index_add(input, dim, index, source, *, alpha=1):  # noqa: A002
    """``input`` with ``alpha * source[i]`` added to its slice ``index[i]`` along ``dim`` (repeated
    indices add up), as ``torch.index_add``.

    >>> import dispatch_jit as dj
    >>> dj.zeros(3).index_add(0, dj.tensor([0, 2, 0]), dj.tensor([1.0, 2.0, 3.0]))
    tensor([4., 0., 2.])
    """
    if alpha != 1:
        source = A.mul(source, alpha)
    return _index_write("index_add", input, dim, index, source, True)


def index_copy(input, dim, index, source):  # noqa: A002
    """``input`` with its slice ``index[i]`` along ``dim`` replaced by ``source[i]``, as
    ``torch.index_copy`` (with a repeated index, which write wins is unspecified, as PyTorch's).

    >>> import dispatch_jit as dj
    >>> dj.zeros(3).index_copy(0, dj.tensor([2, 0]), dj.tensor([1.0, 2.0]))
    tensor([2., 0., 1.])
    """
    return _index_write("index_copy", input, dim, index, source, False)


def index_fill(input, dim, index, value):  # noqa: A002
    """``input`` with the slices ``index`` along ``dim`` set to ``value`` (a number or a 0-d tensor).

    >>> import dispatch_jit as dj
    >>> dj.ones(2, 3).index_fill(1, dj.tensor([0, 2]), -1.0)
    tensor([[-1.,  1., -1.],
            [-1.,  1., -1.]])
    """
    axis = normalize_axis(dim, max(input.ndim, 1), "index_fill")
    if hasattr(value, "_sig") and value.ndim:
        raise ShapeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                         f"{value.ndim} dimension(s).")
    n = input.shape[axis] if input.ndim else 1
    idx = _index_1d("index_fill", index, n)
    from dispatch_jit.creation import zeros
    marks = A.scatter(zeros(n, dtype=int64, device=input.device), 0, idx, A.add(A.mul(idx, 0), 1)) \
        if idx.numel() else zeros(n, dtype=int64, device=input.device)
    shape = [1] * input.ndim
    if input.ndim:
        shape[axis] = n
    hit = A.ne(A.reshape(marks, tuple(shape)), 0)
    if hasattr(value, "_sig"):
        value = value.to(input.dtype)
    elif input.dtype.category in (INT, BOOL) and isinstance(value, float) and value != int(value):
        value = int(value)
    return A.where(hit, value, input).to(input.dtype)


def index_put(input, indices, values, accumulate=False):  # noqa: A002
    """``input`` with ``values`` written (or, with ``accumulate``, added: repeated positions add up)
    at the positions ``input[indices]`` names (a tuple of index tensors, int or bool, one per
    leading dim), as ``torch.index_put``.

    >>> import dispatch_jit as dj
    >>> dj.zeros(2, 2).index_put((dj.tensor([0, 0]), dj.tensor([1, 1])), dj.tensor(1.0), accumulate=True)
    tensor([[0., 2.],
            [0., 0.]])
    """
    return lookup("aten::index_put").entry(input, list(indices), values, accumulate)


def put(input, index, source, accumulate=False):  # noqa: A002
    """``input`` with ``source``'s elements written (or added) at the flat positions ``index``
    (negative counts from the end), as ``torch.put``.

    >>> import dispatch_jit as dj
    >>> dj.zeros(2, 2).put(dj.tensor([3, -4]), dj.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 1.]])
    """
    if index.numel() != source.numel():
        raise ShapeError(f"put_(): Expected source and index to have the same number of elements, but got "
                         f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    if input.numel() == 0 and index.numel():
        raise OutOfBoundsError("put_(): Tried to indexed an empty tensor")
    flat = A.reshape(input, (-1,))
    out = index_put(flat, (A.reshape(index, (-1,)),), A.reshape(source, (-1,)), accumulate)
    return A.reshape(out, tuple(input.shape))


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):  # noqa: A002
    """``input`` with ``src`` combined into the positions ``index`` names along ``dim`` by
    ``reduce`` ("sum", "prod", "mean", "amax", "amin"), counting the input's own value unless
    ``include_self=False``, as ``torch.scatter_reduce``.

    >>> import dispatch_jit as dj
    >>> dj.zeros(3).scatter_reduce(0, dj.tensor([0, 0, 2]), dj.tensor([1.0, 3.0, 5.0]), "amax", include_self=False)
    tensor([3., 0., 5.])
    """
    return lookup("aten::scatter_reduce.two").entry(input, dim, index, src, reduce, include_self=include_self)


def index_reduce(input, dim, index, source, reduce, *, include_self=True):  # noqa: A002
    """``input`` with each slice ``source[i]`` combined into its slice ``index[i]`` along ``dim`` by
    ``reduce`` ("prod", "mean", "amax", "amin"; the input's own values count unless
    ``include_self=False``), as ``torch.index_reduce``: scatter_reduce with the index spread over the
    source's slices.

    >>> import dispatch_jit as dj
    >>> dj.ones(3).index_reduce(0, dj.tensor([0, 0, 2]), dj.tensor([2.0, 3.0, 5.0]), "prod")
    tensor([6., 1., 5.])
    """
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise InvalidArgumentError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got "
                                   f"{reduce}.")
    axis = normalize_axis(dim, max(input.ndim, 1), "index_reduce")
    x1 = A.reshape(input, (1,)) if input.ndim == 0 else input
    src = A.reshape(source, (-1,)) if input.ndim == 0 else (source if source.ndim else A.reshape(source, (1,)))
    if src.dtype is not input.dtype:
        raise DTypeError(f"index_reduce_(): self ({input.dtype.name}) and source ({src.dtype.name}) must have the "
                         f"same scalar type")
    idx = _index_1d("index_reduce", index, x1.shape[axis])
    if src.ndim != x1.ndim or src.shape[axis] != idx.shape[0] or any(
            src.shape[d] != x1.shape[d] for d in range(x1.ndim) if d != axis):
        raise ShapeError(f"index_reduce_(): Source/destination tensor must have same slice shapes and the index "
                         f"must have one entry per source slice: self {tuple(input.shape)}, index "
                         f"{tuple(index.shape)}, source {tuple(source.shape)}, dim {dim}")
    out = scatter_reduce(x1, axis, _spread(idx, src, axis), src, reduce, include_self=include_self)
    return A.reshape(out, ()) if input.ndim == 0 else out


PY_FUNCTIONS = {
    "index_reduce": (index_reduce, True),
    "masked_select": (masked_select, True), "masked_scatter": (masked_scatter, True),
    "index_add": (index_add, True), "index_copy": (index_copy, True), "index_fill": (index_fill, True),
    "index_put": (index_put, True), "put": (put, True), "scatter_reduce": (scatter_reduce, True),
}
