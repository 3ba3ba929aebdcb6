"""``Dropout1d``, ``Dropout2d`` (whole channels) and ``AlphaDropout`` (for SELU networks):
active in ``train()``, the identity in ``eval()``, as PyTorch's.

>>> import dispatch_jit as dj
>>> dj.nn.Dropout2d(0.5).eval()(dj.ones(1, 2, 2, 2)).shape
(1, 2, 2, 2)
"""

from __future__ import annotations

from ..errors import SchemaError
from . import functional as F
from .module import Module

__all__ = ["Dropout1d", "Dropout2d", "AlphaDropout"]


class _DropoutNd(Module):
    _fn = None

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise SchemaError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return type(self)._fn(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    _fn = staticmethod(F.dropout1d)


class Dropout2d(_DropoutNd):
    _fn = staticmethod(F.dropout2d)


class AlphaDropout(_DropoutNd):
    _fn = staticmethod(F.alpha_dropout)
