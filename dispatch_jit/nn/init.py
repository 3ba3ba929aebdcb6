"""``dj.nn.init``: fill parameters in place from dispatch_jit's random generator.

Every function draws from ``generator`` (default: the one ``dj.manual_seed`` seeds), so a
seed reproduces a model's initial weights; the fill is a write into the tensor's storage
(no graph; its version counter bumps), as PyTorch's ``init`` functions run under no_grad.

>>> import dispatch_jit as dj
>>> w = dj.empty(3, 4)
>>> _ = dj.manual_seed(0); _ = kaiming_uniform_(w, a=5 ** 0.5)
>>> bool((w.abs() <= 0.5).all())        # bound = 1 / sqrt(fan_in) = 0.5
True
"""

from __future__ import annotations

import math

import numpy as np

from ..creation import default_generator
from ..errors import SchemaError, ShapeError
from ..tensor import bump_version

__all__ = ["uniform_", "normal_", "zeros_", "ones_", "constant_", "calculate_gain", "kaiming_uniform_",
           "xavier_uniform_"]


def _fill(t, values):
    if t.is_cuda:
        from ..creation import asarray
        t.copy_(asarray(values.astype(t.dtype.np)))   # no grad: init functions are called on leaves
    else:
        t._data[...] = values
        bump_version(t)
    return t


def _rng(generator):
    return (generator or default_generator).rng


def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None):
    """Fill with values drawn uniformly from [a, b)."""
    return _fill(tensor, _rng(generator).uniform(a, b, tuple(tensor.shape)))


def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None):
    return _fill(tensor, _rng(generator).normal(mean, std, tuple(tensor.shape)))


def constant_(tensor, val: float):
    return _fill(tensor, np.full(tuple(tensor.shape), val))


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def calculate_gain(nonlinearity: str, param=None) -> float:
    """PyTorch's recommended gains per nonlinearity."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise SchemaError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _fans(tensor) -> tuple:
    if tensor.ndim < 2:
        raise ShapeError(f"fan in and fan out can not be computed for a tensor with fewer than 2 dimensions "
                         f"(got shape {tuple(tensor.shape)})")
    field = math.prod(tensor.shape[2:])
    return tensor.shape[1] * field, tensor.shape[0] * field


def kaiming_uniform_(tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator=None):
    """Uniform in [-bound, bound], bound = gain * sqrt(3 / fan): PyTorch's Linear weights use
    ``a=sqrt(5)``, which makes bound = 1 / sqrt(in_features)."""
    fan_in, fan_out = _fans(tensor)
    fan = fan_in if mode == "fan_in" else fan_out
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan) if fan else 0.0
    return uniform_(tensor, -bound, bound, generator)


def xavier_uniform_(tensor, gain: float = 1.0, generator=None):
    fan_in, fan_out = _fans(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)
