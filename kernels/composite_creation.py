"""PyTorch's remaining creation names and its conjugation no-ops: logspace, triu_indices,
tril_indices, scalar_tensor, empty_strided, empty_permuted, Tensor.new_empty_strided, resolve_conj,
resolve_neg, conj_physical.

The factories take no tensor (nothing to dispatch on): their values are computed once with NumPy,
as creation.py's, and become a tensor there.  dispatch_jit keeps no lazy conjugate or negative
bit, so ``resolve_conj``/``resolve_neg`` return their input itself, as PyTorch's do for a tensor
without the bit, and ``conj_physical`` of a real tensor is its input too (PyTorch's, likewise).
"""

from __future__ import annotations

import math

import numpy as np

from dispatch_jit.errors import InvalidArgumentError, SchemaError
from dispatch_jit.ops import entries

__all__ = ["PY_FUNCTIONS"]

A = entries("aten")


def _scalar(v, name: str):
    if hasattr(v, "ndim"):
        if v.ndim != 0:
            raise InvalidArgumentError(f"logspace: {name} must be a 0-d tensor or a number, got shape "
                                       f"{tuple(v.shape)}")
        return v.item()
    return v


def logspace(start, end, steps, base=10.0, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False):
    """``steps`` values ``base ** e`` for ``e`` evenly spaced from ``start`` to ``end``, as
    ``torch.logspace`` (the first half of the exponents counts up from ``start``, the second down
    from ``end``; an integer dtype truncates the endpoints first and each power after).

    >>> import dispatch_jit as dj
    >>> dj.logspace(0, 2, 3)
    tensor([  1.,  10., 100.])
    >>> dj.logspace(0, 3, 4, base=2, dtype=dj.int64)
    tensor([1, 2, 4, 8])
    """
    from dispatch_jit.creation import tensor
    from dispatch_jit.dtypes import as_dtype, get_default_dtype
    if out is not None:
        raise SchemaError("logspace: out= is not supported; use the returned tensor")
    if not isinstance(steps, int) or isinstance(steps, bool):
        raise SchemaError(f"logspace: steps must be an int, got {type(steps).__name__}")
    if steps < 0:
        raise InvalidArgumentError(f"logspace: number of steps must be non-negative, got {steps}")
    start, end = _scalar(start, "start"), _scalar(end, "end")
    dt = as_dtype(dtype) if dtype is not None else get_default_dtype()
    if dt.is_complex or isinstance(start, complex) or isinstance(end, complex):
        raise SchemaError("logspace: complex exponents are not supported by dispatch_jit")
    if dt.is_integral:
        start, end = int(start), int(end)
    idx = np.arange(steps, dtype=np.float64)
    step = (end - start) / (steps - 1) if steps > 1 else 0.0
    half = steps // 2
    expo = np.where(idx < half, start + step * idx, end - step * (steps - 1 - idx))
    if steps == 1:
        expo = np.array([start], np.float64)     # start alone, as PyTorch
    with np.errstate(all="ignore"):
        vals = np.power(np.float64(base), expo)
    if dt.is_integral:
        vals = np.trunc(vals)
    return tensor(vals.astype(dt.np) if steps else np.empty(0, dt.np), dtype=dt, device=device,
                  requires_grad=requires_grad)


def _tri_indices(name: str, lower: bool):
    def fn(row, col, offset=0, *, dtype=None, device=None, layout=None):
        from dispatch_jit.creation import tensor
        from dispatch_jit.dtypes import as_dtype, int64
        dt = int64 if dtype is None else as_dtype(dtype)
        if dt.name not in ("int32", "int64"):
            raise SchemaError(f"{name}: \"{name}\" not implemented for '{dt.name}'; pass dtype=dj.int64 or dj.int32")
        if row < 0 or col < 0:
            raise InvalidArgumentError(f"{name}: row must be non-negative, got {row}" if row < 0 else
                                       f"{name}: col must be non-negative, got {col}")
        r, c = np.indices((row, col))
        keep = (c - r <= offset) if lower else (c - r >= offset)
        return tensor(np.stack([r[keep], c[keep]]).astype(dt.np).reshape(2, -1), dtype=dt, device=device)
    fn.__name__ = fn.__qualname__ = name
    return fn


tril_indices = _tri_indices("tril_indices", True)
tril_indices.__doc__ = """The (row, column) indices of the lower triangle (on and below the ``offset``-th
diagonal) of a ``row`` x ``col`` matrix, row by row, as a (2, N) tensor, as ``torch.tril_indices``.

>>> import dispatch_jit as dj
>>> dj.tril_indices(2, 2)
tensor([[0, 1, 1],
        [0, 0, 1]])
"""
triu_indices = _tri_indices("triu_indices", False)
triu_indices.__doc__ = """The (row, column) indices of the upper triangle (on and above the ``offset``-th
diagonal) of a ``row`` x ``col`` matrix, row by row, as a (2, N) tensor, as ``torch.triu_indices``.

>>> import dispatch_jit as dj
>>> dj.triu_indices(2, 3, 1)
tensor([[0, 0, 1],
        [1, 2, 2]])
"""


def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None, requires_grad=False):
    """A 0-d tensor holding the number ``s``, of the default dtype unless ``dtype`` is given (a
    bool or int is stored as a float, as ``torch.scalar_tensor``).

    >>> import dispatch_jit as dj
    >>> dj.scalar_tensor(3)
    tensor(3.)
    """
    from dispatch_jit.creation import tensor
    from dispatch_jit.dtypes import as_dtype, default_complex_dtype, get_default_dtype
    if hasattr(s, "ndim"):
        s = s.item()
    if not isinstance(s, (bool, int, float, complex)):
        raise SchemaError(f"scalar_tensor(): argument 's' must be Number, not {type(s).__name__}")
    dt = as_dtype(dtype) if dtype is not None else (default_complex_dtype() if isinstance(s, complex)
                                                     else get_default_dtype())
    if isinstance(s, float) and not math.isfinite(s) and dt.is_integral:
        raise InvalidArgumentError(f"scalar_tensor: value cannot be converted to type {dt.name} without overflow")
    return tensor(s, dtype=dt, device=device, requires_grad=requires_grad)


def _sizes(name: str, size) -> tuple:
    size = tuple(size)
    if any(n < 0 for n in size):
        raise InvalidArgumentError(f"{name}: Trying to create tensor with negative dimension {min(size)}: "
                                   f"{list(size)}")
    return size


def _strided(size: tuple, stride: tuple, dtype, device, requires_grad: bool):
    """An uninitialized tensor of ``size`` whose elements lie ``stride`` apart in one buffer (a
    NumPy view of it; on another device the data is moved there, contiguous)."""
    from dispatch_jit.creation import from_numpy
    from dispatch_jit.dtypes import as_dtype, get_default_dtype
    dt = as_dtype(dtype) if dtype is not None else get_default_dtype()
    span = 0 if 0 in size else 1 + sum((n - 1) * s for n, s in zip(size, stride))
    buf = np.empty(span, dt.np)
    a = np.lib.stride_tricks.as_strided(buf, size, tuple(s * buf.itemsize for s in stride))
    t = from_numpy(a)
    if device is not None and str(device) != "cpu":
        t = t.to(device)
    return t.requires_grad_(True) if requires_grad else t


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """An uninitialized tensor of ``size`` with the element steps ``stride``, as
    ``torch.empty_strided``.

    >>> import dispatch_jit as dj
    >>> dj.empty_strided((2, 3), (1, 2)).stride()
    (1, 2)
    """
    size, stride = _sizes("empty_strided", size), tuple(stride)
    if len(size) != len(stride):
        raise InvalidArgumentError(f"empty_strided: dimensionality of sizes ({len(size)}) must match dimensionality "
                                   f"of strides ({len(stride)})")
    if any(s < 0 for s in stride):
        raise InvalidArgumentError(f"empty_strided: strides must be non-negative, got {list(stride)}")
    return _strided(size, stride, dtype, device, requires_grad)


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, requires_grad=False,
                   pin_memory=False):
    """An uninitialized tensor of ``size`` laid out in memory in the dimension order
    ``physical_layout`` (outermost first), as ``torch.empty_permuted``.

    >>> import dispatch_jit as dj
    >>> dj.empty_permuted((2, 3, 4), (2, 0, 1)).stride()
    (3, 1, 6)
    """
    size, order = _sizes("empty_permuted", size), tuple(physical_layout)
    if len(order) != len(size):
        raise InvalidArgumentError(f"empty_permuted: Number of dimensions in size does not match the length of the "
                                   f"physical_layout; i.e. len(size) = {len(size)} is not equal to "
                                   f"len(physical_layout) = {len(order)}")
    if sorted(order) != list(range(len(size))):
        raise InvalidArgumentError(f"empty_permuted: Duplicate dim not allowed (physical_layout {list(order)} must "
                                   f"be a permutation of the dimensions)")
    stride, step = [0] * len(size), 1
    for d in reversed(order):
        stride[d], step = step, step * max(size[d], 1)
    return _strided(size, tuple(stride), dtype, device, requires_grad)


def new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False, layout=None,
                      pin_memory=False):
    """``empty_strided`` of ``self``'s dtype and device unless given.

    >>> import dispatch_jit as dj
    >>> dj.tensor([1]).new_empty_strided((2,), (3,)).dtype.name
    'int64'
    """
    return empty_strided(size, stride, dtype=dtype if dtype is not None else self.dtype,
                         device=device if device is not None else self.device, requires_grad=requires_grad)


def resolve_conj(input):  # noqa: A002  (PyTorch's argument name)
    """``input`` itself: dispatch_jit has no lazy conjugate bit to materialize.

    >>> import dispatch_jit as dj
    >>> x = dj.tensor([1.0]); dj.resolve_conj(x) is x
    True
    """
    return input


def resolve_neg(input):  # noqa: A002
    """``input`` itself: dispatch_jit has no lazy negative bit to materialize.

    >>> import dispatch_jit as dj
    >>> x = dj.tensor([1.0]); x.resolve_neg() is x
    True
    """
    return input


def conj_physical(input):  # noqa: A002
    """The complex conjugate of ``input``, computed; a real tensor is returned as it is, as
    ``torch.conj_physical``.

    >>> import dispatch_jit as dj
    >>> dj.conj_physical(dj.tensor([1 + 2j]))
    tensor([1.-2.j])
    """
    return A.conj(input) if input.dtype.is_complex else input


# name -> (function, also a Tensor method?)
PY_FUNCTIONS = {
    "logspace": (logspace, False), "triu_indices": (triu_indices, False), "tril_indices": (tril_indices, False),
    "scalar_tensor": (scalar_tensor, False), "empty_strided": (empty_strided, False),
    "empty_permuted": (empty_permuted, False), "resolve_conj": (resolve_conj, True),
    "resolve_neg": (resolve_neg, True), "conj_physical": (conj_physical, True),
}
METHODS_ONLY = {"new_empty_strided": new_empty_strided}
