"""``dj.nn.functional``'s channel and SELU dropouts: ``dropout1d``, ``dropout2d`` (one draw per
channel: the mask is (N, C, 1, ...), broadcast over the spatial dims) and ``alpha_dropout``
(dropped elements set to SELU's negative saturation, then an affine map that keeps the mean
and variance), as PyTorch 2.13's.  Masks are drawn from dj's default generator, so
``dj.manual_seed`` reproduces them.  functional.py re-exports these.

>>> import dispatch_jit as dj
>>> _ = dj.manual_seed(0)
>>> y = dropout2d(dj.ones(1, 4, 2, 2), 0.5)
>>> sorted({float(v) for v in y.reshape(-1).tolist()}) in ([0.0, 2.0], [0.0], [2.0])
True
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..bf16 import astype as bf16_astype
from ..creation import default_generator
from ..dtypes import FLOAT
from ..errors import DTypeError, SchemaError, ShapeError
from ..ops import entries
from ..tensor import wrap

__all__ = ["dropout1d", "dropout2d", "alpha_dropout", "dropout_mask"]

A = entries("aten")
_SELU_ALPHA_SCALED = 1.7580993408473766    # SELU's scale * alpha: its negative saturation is -this


def dropout_mask(x, shape: tuple, p: float, generator=None):
    """A tensor of ``shape`` (broadcastable to ``x``), 0 with probability ``p`` and 1/(1-p) else."""
    keep = (generator or default_generator).rng.random(shape) >= p
    scale = bf16_astype(np.where(keep, 1.0 / (1.0 - p) if p < 1.0 else 0.0, 0.0), x.dtype)
    return wrap(scale).to(x.device) if x.is_cuda else wrap(scale)


def _check(who: str, input, p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise SchemaError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input.dtype.category != FLOAT:
        raise DTypeError(f"{who}: expected a floating point tensor, got {input.dtype.name}")


def _feature_dropout(input, p: float, training: bool, inplace: bool, batched: bool):
    if not training or p == 0.0:
        return input
    shape = tuple(input.shape[:2] if batched else input.shape[:1]) + (1,) * (input.ndim - (2 if batched else 1))
    mask = dropout_mask(input, shape, p)
    return A.mul_(input, mask) if inplace else A.mul(input, mask)


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of (N, C, L) or (C, L) with probability ``p``, scaling the rest by
    1/(1-p).

    >>> import dispatch_jit as dj
    >>> dropout1d(dj.ones(2, 3), 0.5, training=False).shape
    (2, 3)
    """
    if not 0.0 <= p <= 1.0:
        raise SchemaError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input.ndim not in (2, 3):
        raise ShapeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
                         f"dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                         f"channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    _check("dropout1d", input, p)
    return _feature_dropout(input, p, training, inplace, input.ndim == 3)


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of (N, C, H, W) or (C, H, W) with probability ``p``, scaling the
    rest by 1/(1-p).  As PyTorch's, a 3-D input is read as (N, C, L), with a warning.

    >>> import dispatch_jit as dj
    >>> dropout2d(dj.ones(1, 2, 2, 2), 0.5, training=False).shape
    (1, 2, 2, 2)
    """
    if not 0.0 <= p <= 1.0:
        raise SchemaError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and will "
                      f"result in an error in a future release. To retain the behavior and silence this warning, "
                      f"please use dropout instead. Note that dropout2d exists to provide channel-wise dropout on "
                      f"inputs with 2 spatial dimensions, a channel dimension, and an optional batch dimension "
                      f"(i.e. 3D or 4D inputs).", UserWarning, stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "This behavior will change in a future release to interpret the input as one without a "
                      "batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, "
                      "please switch to using dropout1d instead.", UserWarning, stacklevel=2)
    if input.ndim < 2:
        raise ShapeError("Feature dropout requires at least 2 dimensions in the input")
    _check("dropout2d", input, p)
    return _feature_dropout(input, p, training, inplace, True)


def alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False):
    """PyTorch's ``alpha_dropout`` (for SELU networks): a dropped element becomes SELU's
    saturation value, then ``a * x + b`` restores zero mean and unit variance.

    >>> import dispatch_jit as dj
    >>> alpha_dropout(dj.ones(3), 0.5) is not None     # training=False: the input itself
    True
    """
    _check("alpha_dropout", input, p)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        zero = wrap(np.zeros((), input.dtype.np))
        return A.mul_(input, zero) if inplace else A.mul(input, zero)
    a = 1.0 / math.sqrt((_SELU_ALPHA_SCALED ** 2 * p + 1.0) * (1.0 - p))
    keep = default_generator.rng.random(tuple(input.shape)) >= p
    # input * (keep * a) + ((keep - 1) * alpha * a + alpha * a * p): PyTorch's two tensors
    mul = keep.astype(input.dtype.np) * np.asarray(a, input.dtype.np)
    add = ((keep.astype(np.float64) - 1.0) * _SELU_ALPHA_SCALED * a + _SELU_ALPHA_SCALED * a * p).astype(input.dtype.np)
    mul_t, add_t = (wrap(v).to(input.device) if input.is_cuda else wrap(v) for v in (mul, add))
    if inplace:
        return A.add_(A.mul_(input, mul_t), add_t)
    return A.add(A.mul(input, mul_t), add_t)
