"""PyTorch's public functions whose results are not one tensor (``split`` and ``chunk`` return
views, ``allclose`` a bool, ``where(cond)`` a tuple), or whose arguments a schema cannot say
(``einsum``'s operands, ``norm``'s ``p="fro"``): Python functions over the ops, as
kernels/surface.py's ``PY_FUNCTIONS`` (name -> (function, is it also a Tensor method)).
"""

from __future__ import annotations

import math

from dispatch_jit.errors import SchemaError, ShapeError
from dispatch_jit.ops import entries
from dispatch_jit.registry import lookup

from .einsum import einsum
from .shape.op import normalize_axis

__all__ = ["PY_FUNCTIONS"]

A = entries("aten")
_MISSING = object()


def split(tensor, split_size_or_sections, dim=0):
    """Views of ``tensor`` along ``dim``: pieces of ``split_size_or_sections`` (the last one
    smaller) or of the listed sizes, as ``torch.split``.

    >>> import dispatch_jit as dj
    >>> dj.arange(5).split(2)
    (tensor([0, 1]), tensor([2, 3]), tensor([4]))
    >>> dj.split(dj.arange(5), [1, 4])
    (tensor([0]), tensor([1, 2, 3, 4]))
    """
    axis = normalize_axis(dim, tensor.ndim, "split")
    n = tensor.shape[axis]
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size <= 0 and not (size == 0 and n == 0):
            raise ShapeError(f"split: split_size must be positive, got {size}")
        sizes = [min(size, n - s) for s in range(0, n, size)] if n else [0]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise ShapeError(f"split: split_sizes {sizes} must be non-negative and sum to the size of dimension "
                             f"{axis} ({n})")
    out, start = [], 0
    for s in sizes:
        out.append(A.narrow(tensor, axis, start, s))
        start += s
    return tuple(out)


def chunk(input, chunks, dim=0):  # noqa: A002  (PyTorch's argument name)
    """``chunks`` views along ``dim`` of ``ceil(size / chunks)`` elements each (fewer if the size
    runs out), as ``torch.chunk``.

    >>> import dispatch_jit as dj
    >>> dj.arange(5).chunk(3)
    (tensor([0, 1]), tensor([2, 3]), tensor([4]))
    """
    if chunks <= 0:
        raise ShapeError(f"chunk: chunks must be positive, got {chunks}")
    n = input.shape[normalize_axis(dim, input.ndim, "chunk")]
    # PyTorch: an empty dimension gives ``chunks`` empty pieces
    return split(input, math.ceil(n / chunks), dim) if n else split(input, [0] * chunks, dim)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:  # noqa: A002
    """Whether every element of ``isclose(input, other, ...)`` is True.

    >>> import dispatch_jit as dj
    >>> dj.allclose(dj.tensor([1.0, 2.0]), dj.tensor([1.0, 2.0 + 1e-7]))
    True
    """
    return bool(A.all(A.isclose(input, other, rtol, atol, equal_nan)).item())


_INF = math.inf


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):  # noqa: A002
    """The vector p-norm over ``dim`` (every element when None), as ``torch.norm``: ``p`` a
    number, ``inf``, ``-inf``, or ``"fro"`` (2 over the elements given); ``"nuc"``, the nuclear
    norm (the sum of the singular values) of the matrices over the two dims ``dim``.

    >>> import dispatch_jit as dj
    >>> dj.norm(dj.tensor([3.0, 4.0]))
    tensor(5.)
    >>> dj.tensor([[1.0, -2.0], [3.0, 4.0]]).norm(1, dim=1)
    tensor([3., 7.])
    >>> dj.norm(dj.tensor([[3.0, 0.0], [0.0, -4.0]]), p="nuc")
    tensor(7.)
    """
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_floating_point and input.dtype.name not in ("complex64", "complex128"):
        raise SchemaError(f"norm: expected a floating point or complex tensor, got {input.dtype.name}; "
                          f"convert first: x.float()")
    if p == "nuc":
        return _nuclear_norm(input, dim, keepdim)
    if p == "fro" or p is None:
        p = 2
    if isinstance(dim, int):
        dim = (dim,)
    axis = None if dim is None else tuple(dim)
    a = A.abs(input)
    if p == _INF:
        return A.max(a, axis if axis is not None else [], keepdim)
    if p == -_INF:
        return A.min(a, axis if axis is not None else [], keepdim)
    if p == 0:
        return A.sum(A.ne(a, 0).to(a.dtype), axis, keepdim)
    if p == 1:
        return A.sum(a, axis, keepdim)
    if p == 2:
        return A.sqrt(A.sum(A.mul(a, a), axis, keepdim))
    return A.pow(A.sum(A.pow(a, float(p)), axis, keepdim), 1.0 / p)


def _nuclear_norm(x, dim, keepdim):
    """The sum of the singular values of the matrices over the two dims ``dim`` (the only two when None),
    as ``torch.norm(p='nuc')`` (that is ``linalg.matrix_norm(ord='nuc')``)."""
    dims = tuple(range(x.ndim)) if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) != 2:
        raise ShapeError(f"norm: p='nuc' takes the matrices over exactly two dims (dim must be a 2-tuple); got "
                         f"dim={dims} for a {x.ndim}-d tensor")
    d0, d1 = (normalize_axis(d, x.ndim, "norm") for d in dims)
    if d0 == d1:
        raise ShapeError(f"norm: p='nuc' needs two different dims; got {dims}")
    rest = [d for d in range(x.ndim) if d not in (d0, d1)]
    r = A.sum(A.linalg_svdvals(A.permute(x, rest + [d0, d1])), (-1,), False)
    if keepdim:
        for d in sorted((d0, d1)):
            r = A.unsqueeze(r, d)
    return r


def where(condition, input=_MISSING, other=_MISSING):  # noqa: A002
    """``where(condition, input, other)``: elements of ``input`` where ``condition``, else of
    ``other``; ``where(condition)`` alone is ``nonzero(condition, as_tuple=True)``.

    >>> import dispatch_jit as dj
    >>> dj.where(dj.tensor([[0, 1], [1, 0]]))
    (tensor([0, 1]), tensor([1, 0]))
    """
    if input is _MISSING and other is _MISSING:
        nz = A.nonzero(condition)
        return tuple(A.squeeze(n, (1,)) for n in split(nz, 1, 1)) if condition.ndim else (A.reshape(nz, (-1,)),)
    if input is _MISSING or other is _MISSING:
        raise SchemaError("where: pass condition alone, or condition, input and other")
    return _WHERE(condition, input, other)


_WHERE = lookup("aten::where.self").entry


def numel(input) -> int:  # noqa: A002
    """The number of elements of ``input``.

    >>> import dispatch_jit as dj
    >>> dj.numel(dj.zeros(2, 3))
    6
    """
    return input.numel()


PY_FUNCTIONS = {
    "split": (split, True), "chunk": (chunk, True), "allclose": (allclose, True), "norm": (norm, True),
    "einsum": (einsum, False), "where": (where, False), "numel": (numel, False),
}
