"""PyTorch's splitting, stacking and scattering names over the view ops: split_with_sizes,
tensor_split, hsplit/vsplit/dsplit, unsafe_split/unsafe_chunk, hstack/vstack/dstack/column_stack,
select_scatter, slice_scatter, diagonal_scatter, diag_embed, diagflat and unfold.

Python functions over the dispatcher's ops, as shape_views.py's (PyTorch's CompositeImplicitAutograd
style): the pieces of a split are ``narrow`` views; the scatters are new tensors built with ``cat``,
``index_select`` and ``where``, so their gradients come from those ops' rows.

``Tensor.unfold`` is PyTorch's overlapping-window view (``as_strided``), which no composition of
the view ops here can express: it is a copy, made read-only, as ``diagonal`` is (composite_math.py),
so a write into it raises instead of being lost.
"""

from __future__ import annotations

import itertools

from dispatch_jit.errors import DTypeError, ShapeError
from dispatch_jit.ops import entries

from .shape.op import normalize_axis
from .shape_views import atleast_1d, atleast_2d, atleast_3d, movedim
from .torch_functions import chunk, split

__all__ = ["PY_FUNCTIONS"]

A = entries("aten")


def _index_tensor(values, like):
    from dispatch_jit.creation import tensor
    from dispatch_jit.dtypes import int64
    return tensor(list(values), dtype=int64, device=like.device)


def split_with_sizes(input, split_sizes, dim=0):  # noqa: A002  (PyTorch's argument name)
    """Views of ``input`` along ``dim`` of the listed sizes, which must sum to its size there.

    >>> import dispatch_jit as dj
    >>> dj.split_with_sizes(dj.arange(5), [2, 3])
    (tensor([0, 1]), tensor([2, 3, 4]))
    """
    sizes = list(split_sizes)
    n = input.shape[normalize_axis(dim, input.ndim, "split_with_sizes")]
    if sum(sizes) != n or any(s < 0 for s in sizes):
        raise ShapeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at "
                         f"dimension {dim}), but got split_sizes={sizes}")
    return split(input, sizes, dim)


def unsafe_split(tensor, split_size, dim=0):
    """``split(tensor, split_size, dim)`` (PyTorch's unsafe_ variant skips view tracking; the
    values are the same).

    >>> import dispatch_jit as dj
    >>> dj.unsafe_split(dj.arange(3), 2)
    (tensor([0, 1]), tensor([2]))
    """
    return split(tensor, split_size, dim)


def unsafe_chunk(input, chunks, dim=0):  # noqa: A002
    """``chunk(input, chunks, dim)``.

    >>> import dispatch_jit as dj
    >>> dj.unsafe_chunk(dj.arange(4), 2)
    (tensor([0, 1]), tensor([2, 3]))
    """
    return chunk(input, chunks, dim)


def split_with_sizes_copy(input, split_sizes, dim=0):  # noqa: A002
    """``split_with_sizes``, each piece copied.

    >>> import dispatch_jit as dj
    >>> dj.split_with_sizes_copy(dj.arange(3), [1, 2])
    (tensor([0]), tensor([1, 2]))
    """
    return tuple(A.clone(t) for t in split_with_sizes(input, split_sizes, dim))


def tensor_split(input, indices_or_sections, dim=0):  # noqa: A002
    """Views of ``input`` along ``dim``: ``sections`` nearly equal pieces (the first
    ``size % sections`` one longer), or the pieces between the given indices, as
    ``torch.tensor_split`` (a 0-d/1-d int64 tensor is read as sections/indices).

    >>> import dispatch_jit as dj
    >>> dj.tensor_split(dj.arange(5), 3)
    (tensor([0, 1]), tensor([2, 3]), tensor([4]))
    >>> dj.arange(5).tensor_split([1, 4])
    (tensor([0]), tensor([1, 2, 3]), tensor([4]))
    """
    if input.ndim == 0:
        raise ShapeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    spec = indices_or_sections
    if hasattr(spec, "ndim"):
        if spec.dtype.name != "int64":
            raise DTypeError(f"tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                             f"{spec.dtype.name}")
        if spec.ndim > 1:
            raise ShapeError(f"tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                             f"one-dimensional tensor, but got a tensor with {spec.ndim} dims")
        spec = int(spec.item()) if spec.ndim == 0 else [int(v) for v in spec.tolist()]
    d = normalize_axis(dim, input.ndim, "tensor_split")
    n = input.shape[d]
    if isinstance(spec, int):
        if spec <= 0:
            raise ShapeError(f"number of sections must be larger than 0, got {spec}")
        q, r = divmod(n, spec)
        sizes = [q + 1] * r + [q] * (spec - r)
        return split(input, sizes, d)
    bounds = [None, *spec, None]
    out = []
    for a, b in itertools.pairwise(bounds):
        start, stop, _ = slice(a, b).indices(n)
        out.append(A.narrow(input, d, start, max(0, stop - start)))
    return tuple(out)


def _split_along(name: str, need: int, dim_of):
    def fn(input, indices_or_sections):  # noqa: A002
        if input.ndim < need:
            raise ShapeError(f"torch.{name} requires a tensor with at least {need} dimension, but got a tensor with "
                             f"{input.ndim} dimensions!")
        d = dim_of(input.ndim)
        if isinstance(indices_or_sections, int):
            size = input.shape[d]
            if indices_or_sections == 0 or size % indices_or_sections:
                raise ShapeError(f"torch.{name} attempted to split along dimension {d}, but the size of the "
                                 f"dimension {size} is not divisible by the split_size {indices_or_sections}!")
        return tensor_split(input, indices_or_sections, d)
    fn.__name__ = fn.__qualname__ = name
    return fn


hsplit = _split_along("hsplit", 1, lambda n: 1 if n > 1 else 0)
hsplit.__doc__ = """``tensor_split`` along the columns (dimension 1, or 0 of a 1-D tensor); an int
must divide that size, as ``torch.hsplit``.

>>> import dispatch_jit as dj
>>> dj.hsplit(dj.arange(4), 2)
(tensor([0, 1]), tensor([2, 3]))
"""
vsplit = _split_along("vsplit", 2, lambda n: 0)
vsplit.__doc__ = """``tensor_split`` along the rows (dimension 0) of a tensor of at least 2 dimensions.

>>> import dispatch_jit as dj
>>> dj.vsplit(dj.arange(4).reshape(2, 2), 2)
(tensor([[0, 1]]), tensor([[2, 3]]))
"""
dsplit = _split_along("dsplit", 3, lambda n: 2)
dsplit.__doc__ = """``tensor_split`` along dimension 2 of a tensor of at least 3 dimensions.

>>> import dispatch_jit as dj
>>> [t.shape for t in dj.dsplit(dj.zeros(1, 1, 4), [1])]
[(1, 1, 1), (1, 1, 3)]
"""


def _tensors(name: str, tensors):
    tensors = list(tensors)
    if not tensors:
        raise ShapeError(f"{name} expects a non-empty TensorList")
    return tensors


def hstack(tensors):
    """The tensors joined column-wise (along dimension 1; 1-D ones end to end), as ``torch.hstack``.

    >>> import dispatch_jit as dj
    >>> dj.hstack([dj.tensor([1, 2]), dj.tensor([3])])
    tensor([1, 2, 3])
    """
    ts = atleast_1d(_tensors("hstack", tensors))
    return A.cat(list(ts), 0 if ts[0].ndim == 1 else 1)


def vstack(tensors):
    """The tensors, as rows (at least 2-D), joined along dimension 0, as ``torch.vstack``.

    >>> import dispatch_jit as dj
    >>> dj.vstack([dj.tensor([1, 2]), dj.tensor([3, 4])])
    tensor([[1, 2],
            [3, 4]])
    """
    return A.cat(list(atleast_2d(_tensors("vstack", tensors))), 0)


def dstack(tensors):
    """The tensors (at least 3-D) joined along dimension 2, as ``torch.dstack``.

    >>> import dispatch_jit as dj
    >>> dj.dstack([dj.tensor([1, 2]), dj.tensor([3, 4])]).shape
    (1, 2, 2)
    """
    return A.cat(list(atleast_3d(_tensors("dstack", tensors))), 2)


def column_stack(tensors):
    """The tensors as columns (0-d and 1-d ones made (n, 1)) joined along dimension 1.

    >>> import dispatch_jit as dj
    >>> dj.column_stack([dj.tensor([1, 2]), dj.tensor([3, 4])])
    tensor([[1, 3],
            [2, 4]])
    """
    ts = [A.reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t for t in _tensors("column_stack", tensors)]
    return A.cat(ts, 1)


def _same_dtype(op: str, x, src) -> None:
    if src.dtype is not x.dtype:
        raise DTypeError(f"{op}: expected src to have the same dtype as self, but got {src.dtype.name} and "
                         f"{x.dtype.name}; convert it: src.to(self.dtype)")


def _check_src(op: str, src, want: tuple) -> None:
    if tuple(src.shape) != tuple(want):
        raise ShapeError(f"{op}: expected src to have a size equal to the slice of self. src size = "
                         f"{list(src.shape)}, slice size = {list(want)}")


def _scatter_along(x, src, d: int, positions: list):
    """``x`` with ``x[..., positions[j], ...] = src[..., j, ...]`` along ``d``: an index_select of
    ``src`` into place, chosen by a mask (so both inputs get their gradients)."""
    n = x.shape[d]
    if not positions:
        return A.clone(x)
    where_from = [0] * n
    chosen = [False] * n
    for j, p in enumerate(positions):
        where_from[p], chosen[p] = j, True
    from dispatch_jit.creation import tensor
    from dispatch_jit.dtypes import bool_
    shape = [1] * x.ndim
    shape[d] = n
    mask = A.reshape(tensor(chosen, dtype=bool_, device=x.device), tuple(shape))
    return A.where(mask, A.index_select(src, d, _index_tensor(where_from, x)), x)


def select_scatter(input, src, dim, index):  # noqa: A002
    """``input`` with the slice ``select(input, dim, index)`` replaced by ``src`` (a new tensor).

    >>> import dispatch_jit as dj
    >>> dj.select_scatter(dj.zeros(2, 2), dj.ones(2), 0, 0)
    tensor([[1., 1.],
            [0., 0.]])
    """
    if input.ndim == 0:
        raise ShapeError("select_scatter: select() cannot be applied to a 0-dim tensor.")
    d = normalize_axis(dim, input.ndim, "select_scatter")
    n = input.shape[d]
    if not -n <= index < n:
        raise ShapeError(f"select_scatter: index {index} out of range for tensor of size {list(input.shape)} at "
                         f"dimension {dim}")
    _check_src("select_scatter", src, input.shape[:d] + input.shape[d + 1:])
    _same_dtype("select_scatter", input, src)
    return _scatter_along(input, A.unsqueeze(src, d), d, [index % n])


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):  # noqa: A002
    """``input`` with the slice ``start:end:step`` along ``dim`` replaced by ``src`` (a new tensor).

    >>> import dispatch_jit as dj
    >>> dj.slice_scatter(dj.zeros(4), dj.ones(2), start=0, step=2)
    tensor([1., 0., 1., 0.])
    """
    if input.ndim == 0:
        raise ShapeError("slice_scatter: slice() cannot be applied to a 0-dim tensor.")
    if step <= 0:
        raise ShapeError(f"slice_scatter: slice step must be positive, got {step}")
    d = normalize_axis(dim, input.ndim, "slice_scatter")
    positions = list(range(*slice(start, end, step).indices(input.shape[d])))
    _check_src("slice_scatter", src, input.shape[:d] + (len(positions),) + input.shape[d + 1:])
    _same_dtype("slice_scatter", input, src)
    return _scatter_along(input, src, d, positions)


def _diag_mask(r: int, c: int, offset: int, like):
    from dispatch_jit.creation import arange
    rows, cols = arange(r, device=like.device), arange(c, device=like.device)
    return A.eq(A.sub(A.unsqueeze(cols, 0), A.unsqueeze(rows, 1)), offset)


def _on_diagonal(vals, r: int, c: int, offset: int):
    """(..., r, c) with ``vals[..., i]`` at (i, i + offset) (offset >= 0) or (i - offset, i), zeros
    elsewhere unmasked: the values broadcast along the other axis, padded to it with zeros."""
    from dispatch_jit.creation import zeros
    along = r if offset >= 0 else c
    pad = along - vals.shape[-1]
    if pad:
        vals = A.cat([vals, zeros(*vals.shape[:-1], pad, dtype=vals.dtype, device=vals.device)], -1)
    vals = A.unsqueeze(vals, -1 if offset >= 0 else -2)
    return A.expand(vals, tuple(vals.shape[:-2]) + (r, c))


def diag_embed(input, offset=0, dim1=-2, dim2=-1):  # noqa: A002
    """A tensor whose diagonals (over ``dim1``/``dim2`` of the result) are the last dimension of
    ``input``, zeros elsewhere, as ``torch.diag_embed``.

    >>> import dispatch_jit as dj
    >>> dj.diag_embed(dj.tensor([1, 2]))
    tensor([[1, 0],
            [0, 2]])
    """
    nd = input.ndim + 1
    d1, d2 = normalize_axis(dim1, nd, "diag_embed"), normalize_axis(dim2, nd, "diag_embed")
    if d1 == d2:
        raise ShapeError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
    if input.ndim == 0:
        input = A.reshape(input, (1,))
    n = input.shape[-1] + abs(offset)
    from dispatch_jit.creation import zeros
    out = A.where(_diag_mask(n, n, offset, input), _on_diagonal(input, n, n, offset),
                  zeros((), dtype=input.dtype, device=input.device))
    return movedim(out, (nd - 2, nd - 1), (d1, d2))


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):  # noqa: A002
    """``input`` with its diagonal ``diagonal(input, offset, dim1, dim2)`` replaced by ``src``.

    >>> import dispatch_jit as dj
    >>> dj.diagonal_scatter(dj.zeros(2, 2), dj.ones(2))
    tensor([[1., 0.],
            [0., 1.]])
    """
    _check_src("diagonal_scatter", src, A.diagonal(input, offset, dim1, dim2).shape)
    _same_dtype("diagonal_scatter", input, src)
    d1, d2 = normalize_axis(dim1, input.ndim, "diagonal"), normalize_axis(dim2, input.ndim, "diagonal")
    t = movedim(input, (d1, d2), (-2, -1))
    r, c = t.shape[-2], t.shape[-1]
    out = A.where(_diag_mask(r, c, offset, t), _on_diagonal(src, r, c, offset), t)
    return movedim(out, (-2, -1), (d1, d2))


def diagflat(input, offset=0):  # noqa: A002
    """A 2-D tensor with the flattened ``input`` on its ``offset``-th diagonal.

    >>> import dispatch_jit as dj
    >>> dj.diagflat(dj.tensor([[1, 2]]))
    tensor([[1, 0],
            [0, 2]])
    """
    return A.diag(A.reshape(input, (-1,)), offset)


def unfold_copy(input, dimension, size, step):  # noqa: A002
    """The windows of ``size`` elements every ``step`` along ``dimension``, as a new last dimension
    (that dimension becomes the window count), as ``torch.unfold_copy``.

    >>> import dispatch_jit as dj
    >>> dj.unfold_copy(dj.arange(5), 0, 2, 2)
    tensor([[0, 1],
            [2, 3]])
    """
    x = A.reshape(input, (1,)) if input.ndim == 0 else input
    d = normalize_axis(dimension, x.ndim, "unfold")
    n = x.shape[d]
    if size > n:
        raise ShapeError(f"unfold: maximum size for tensor at dimension {d} is {n} but size is {size}")
    if size < 0:
        raise ShapeError(f"unfold: size is {size} but must be >= 0")
    if step <= 0:
        raise ShapeError(f"unfold: step is {step} but must be > 0")
    count = (n - size) // step + 1
    idx = _index_tensor([i * step + j for i in range(count) for j in range(size)], x)
    out = A.index_select(x, d, idx)
    out = A.reshape(out, tuple(x.shape[:d]) + (count, size) + tuple(x.shape[d + 1:]))
    out = movedim(out, d + 1, -1)
    return A.reshape(out, (size,)) if input.ndim == 0 else out


def unfold(input, dimension, size, step):  # noqa: A002
    """``Tensor.unfold``: the windows of ``size`` elements every ``step`` along ``dimension``.
    PyTorch's is a view; this one is a read-only copy (see the module's note).

    >>> import dispatch_jit as dj
    >>> dj.arange(4).unfold(0, 2, 1)
    tensor([[0, 1],
            [1, 2],
            [2, 3]])
    """
    out = unfold_copy(input, dimension, size, step)
    a = out._data
    if hasattr(a, "flags"):
        a.flags.writeable = False   # not PyTorch's view: a write into it must not be silently lost
    return out


# name -> (function, also a Tensor method?); Tensor.unfold only (torch.unfold is not a function)
PY_FUNCTIONS = {
    "split_with_sizes": (split_with_sizes, True), "unsafe_split": (unsafe_split, True),
    "unsafe_chunk": (unsafe_chunk, True), "split_with_sizes_copy": (split_with_sizes_copy, False),
    "tensor_split": (tensor_split, True), "hsplit": (hsplit, True), "vsplit": (vsplit, True),
    "dsplit": (dsplit, True), "hstack": (hstack, False), "vstack": (vstack, False), "dstack": (dstack, False),
    "column_stack": (column_stack, False), "select_scatter": (select_scatter, True),
    "slice_scatter": (slice_scatter, True), "diag_embed": (diag_embed, True),
    "diagonal_scatter": (diagonal_scatter, True), "diagflat": (diagflat, True), "unfold_copy": (unfold_copy, False),
}
METHODS_ONLY = {"unfold": unfold}
