"""``Softmax``, ``LogSoftmax``, ``Flatten`` and ``Unflatten``, PyTorch's constructor
arguments and dim semantics (``dim=None``: PyTorch's legacy implicit choice, with its warning).

>>> import dispatch_jit as dj
>>> dj.nn.Softmax(dim=1)(dj.zeros(1, 2))
tensor([[0.5000, 0.5000]])
>>> dj.nn.Flatten()(dj.zeros(2, 3, 4)).shape, dj.nn.Unflatten(1, (3, 4))(dj.zeros(2, 12)).shape
((2, 12), (2, 3, 4))
"""

from __future__ import annotations

from ..errors import ShapeError
from ..ops import entries
from . import functional as F
from .module import Module

__all__ = ["Softmax", "LogSoftmax", "Flatten", "Unflatten"]

A = entries("aten")


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Flatten(Module):
    """Dims ``start_dim``..``end_dim`` merged into one (a view where the input allows)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return A.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Dim ``dim`` split into ``unflattened_size`` (one entry may be -1)."""

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input):
        dim = self.dim + input.ndim if self.dim < 0 else self.dim
        if not 0 <= dim < input.ndim:
            raise ShapeError(f"Unflatten: dim {self.dim} is out of range for an input of {input.ndim} dimensions")
        shape = list(input.shape)
        return A.reshape(input, shape[:dim] + list(self.unflattened_size) + shape[dim + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
