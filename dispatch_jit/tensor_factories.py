"""Tensor methods that make a new tensor like ``self``: ``new_zeros``, ``new_ones``, ``new_full``,
``new_empty``, ``new_tensor`` (PyTorch's: the dtype and device are ``self``'s unless given) and
``type_as``.  tensor_methods.py adds them to the ``METHODS`` that _install.py binds onto Tensor.

>>> import dispatch_jit as dj
>>> x = dj.ones(2, dtype=dj.float64)
>>> x.new_zeros(3), x.new_full((2,), 7).dtype, dj.tensor([1, 2]).type_as(x)
(tensor([0., 0., 0.], dtype=dj.float64), dispatch_jit.float64, tensor([1., 2.], dtype=dj.float64))
"""

from __future__ import annotations

from . import creation
from .errors import ArgumentTypeError
from .tensor import Tensor

__all__ = ["METHODS"]


def _kw(self, dtype, device) -> dict:
    return {"dtype": self.dtype if dtype is None else dtype, "device": self.device if device is None else device}


def new_zeros(self, *size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros of ``size`` (ints or one tuple), of ``self``'s dtype and device unless given.

    >>> import dispatch_jit as dj
    >>> dj.tensor([1, 2]).new_zeros(2, 2)
    tensor([[0, 0],
            [0, 0]])
    """
    return creation.zeros(*size, **_kw(self, dtype, device), requires_grad=requires_grad)


def new_ones(self, *size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones of ``size`` (ints or one tuple), of ``self``'s dtype and device unless given.

    >>> import dispatch_jit as dj
    >>> dj.tensor([1.5]).new_ones((3,))
    tensor([1., 1., 1.])
    """
    return creation.ones(*size, **_kw(self, dtype, device), requires_grad=requires_grad)


def new_empty(self, *size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """An uninitialized tensor of ``size``, of ``self``'s dtype and device unless given.

    >>> import dispatch_jit as dj
    >>> dj.tensor([1.5]).new_empty(2, 3).shape
    (2, 3)
    """
    return creation.empty(*size, **_kw(self, dtype, device), requires_grad=requires_grad)


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value``, of ``self``'s dtype (not the value's, unlike
    ``dj.full``) and device unless given.

    >>> import dispatch_jit as dj
    >>> dj.tensor([1.5]).new_full((2,), 3)
    tensor([3., 3.])
    """
    return creation.full(size, fill_value, **_kw(self, dtype, device), requires_grad=requires_grad)


def new_tensor(self, data, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A copy of ``data`` (lists, scalars, arrays, tensors) as a tensor of ``self``'s dtype and device
    unless given.

    >>> import dispatch_jit as dj
    >>> dj.tensor([1.5]).new_tensor([1, 2])
    tensor([1., 2.])
    """
    if isinstance(data, Tensor):
        data = data.detach()
    return creation.tensor(data, **_kw(self, dtype, device), requires_grad=requires_grad)


def type_as(self, other) -> Tensor:
    """``self`` cast to ``other``'s dtype (and moved to its device): ``self`` itself if both match.

    >>> import dispatch_jit as dj
    >>> dj.tensor([1, 2]).type_as(dj.tensor([0.5]))
    tensor([1., 2.])
    """
    if not isinstance(other, Tensor):
        raise ArgumentTypeError(f"type_as(): argument 'other' must be Tensor, not {type(other).__name__}")
    return self.to(other.device).to(other.dtype)


METHODS = {"new_zeros": new_zeros, "new_ones": new_ones, "new_empty": new_empty, "new_full": new_full,
           "new_tensor": new_tensor, "type_as": type_as}
