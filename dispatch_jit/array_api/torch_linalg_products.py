"""``dj.linalg.multi_dot`` and ``dj.linalg.vander``: torch.linalg's product names, compositions
of matmul, cat and cumprod (PyTorch's CompositeImplicitAutograd ones), so autograd and compiled
mode see those ops."""

from __future__ import annotations

from dispatch_jit.errors import DTypeError, SchemaError, ShapeError
from dispatch_jit.ops import entries

__all__ = ["multi_dot", "vander"]

_ops = entries("aten")


def multi_dot(tensors, *, out=None):
    """The product of the matrices in ``tensors``, left to right; the first may be a 1-D row and
    the last a 1-D column (their dimension is dropped from the result), as
    ``torch.linalg.multi_dot``.

    >>> import dispatch_jit as dj
    >>> dj.linalg.multi_dot([dj.tensor([1.0, 2.0]), dj.ones(2, 3), dj.ones(3)])
    tensor(9.)
    """
    if out is not None:
        raise SchemaError("linalg.multi_dot: out= is not supported by dispatch_jit; assign the result instead")
    ts = list(tensors)
    if len(ts) < 2:
        raise ShapeError(f"multi_dot(): expected at least 2 tensors but got {len(ts)}")
    for i, t in enumerate(ts):
        if i in (0, len(ts) - 1):
            if t.ndim not in (1, 2):
                where = "first" if i == 0 else "last"
                raise ShapeError(f"multi_dot(): the {where} tensor must be 1D or 2D but got {t.ndim}D")
        elif t.ndim != 2:
            raise ShapeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
        if t.dtype is not ts[0].dtype:
            raise DTypeError(f"multi_dot(): all tensors must have be the same dtype but tensor 0 is "
                             f"{ts[0].dtype.name} and tensor {i} {t.dtype.name}")
    first_1d, last_1d = ts[0].ndim == 1, ts[-1].ndim == 1
    mats = list(ts)
    if first_1d:
        mats[0] = _ops.unsqueeze(mats[0], 0)
    if last_1d:
        mats[-1] = _ops.unsqueeze(mats[-1], 1)
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise ShapeError(f"multi_dot(): tensors {i} and {i + 1} with shapes {list(ts[i].shape)} and "
                             f"{list(ts[i + 1].shape)} cannot be multiplied")
    result = mats[0]
    for m in mats[1:]:
        result = _ops.matmul(result, m)
    shape = tuple(result.shape)
    return _ops.reshape(result, shape[first_1d:len(shape) - last_1d])


def vander(x, *, N=None):  # noqa: N803  (PyTorch's argument name)
    """The Vandermonde matrix of ``x`` (..., n): columns ``x ** 0, x ** 1, ..., x ** (N - 1)``
    (``N`` defaults to n), as running products, as ``torch.linalg.vander`` (integers as int64).

    >>> import dispatch_jit as dj
    >>> dj.linalg.vander(dj.tensor([1, 2, 3]))
    tensor([[1, 1, 1],
            [1, 2, 4],
            [1, 3, 9]])
    """
    from dispatch_jit.creation import ones
    from dispatch_jit.dtypes import int64
    if x.dtype.name == "bool":
        raise DTypeError("linalg.vander supports floating point, complex, and integer tensors, but got Bool")
    if x.ndim == 0:
        x = _ops.reshape(x, (1,))     # PyTorch reads a 0-d x as one element
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise ShapeError("N must be greater than 1.")
    if x.dtype.is_integral:
        x = x.to(int64)
    powers = _ops.expand(_ops.unsqueeze(x, -1), tuple(x.shape) + (n - 1,))
    col0 = ones(*x.shape, 1, dtype=x.dtype, device=x.device)
    return _ops.cumprod(_ops.cat([col0, powers], -1), -1)
