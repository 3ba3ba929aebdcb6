"""Composite operators: decompositions into other operators.

Registered at CompositeImplicitAutograd, so every backend (and, later,
autograd and tracing) gets them for free from the ops they call.
"""

from __future__ import annotations

import math

from dispatch_jit.errors import SchemaError
from dispatch_jit.ops import entries

__all__ = ["SCHEMAS", "KERNELS", "METHODS"]

SCHEMAS = [
    "softmax(Tensor self, int axis=-1) -> Tensor",
    "log_softmax(Tensor self, int axis=-1) -> Tensor",
    "gelu(Tensor self, *, str approximate='none') -> Tensor",
    "silu(Tensor self) -> Tensor",
    "mse_loss(Tensor self, Tensor target, str reduction='mean') -> Tensor",
    "linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
]
METHODS = ["softmax", "log_softmax"]


A = entries("aten")    # the ops are defined after this module is imported


def softmax(x, axis=-1):
    shifted = A.sub(x, A.max(x, (axis,), True))
    e = A.exp(shifted)
    return A.div(e, A.sum(e, (axis,), True))


def log_softmax(x, axis=-1):
    shifted = A.sub(x, A.max(x, (axis,), True))
    return A.sub(shifted, A.log(A.sum(A.exp(shifted), (axis,), True)))


_SQRT1_2 = 1.0 / math.sqrt(2.0)
_SQRT_2_PI = math.sqrt(2.0 / math.pi)


def gelu(x, approximate="none"):
    if approximate == "none":
        return A.mul(A.mul(x, 0.5), A.add(A.erf(A.mul(x, _SQRT1_2)), 1.0))
    if approximate == "tanh":
        inner = A.mul(A.add(x, A.mul(A.mul(A.mul(x, x), x), 0.044715)), _SQRT_2_PI)
        return A.mul(A.mul(x, 0.5), A.add(A.tanh(inner), 1.0))
    raise SchemaError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def silu(x):
    return A.mul(x, A.sigmoid(x))


def mse_loss(x, target, reduction="mean"):
    d = A.sub(x, target)
    sq = A.mul(d, d)
    if reduction == "mean":
        return A.mean(sq)
    if reduction == "sum":
        return A.sum(sq)
    if reduction == "none":
        return sq
    raise SchemaError(f"mse_loss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def linear(x, weight, bias=None):
    wt = A.transpose(weight, 0, 1) if weight.ndim == 2 else weight
    y = A.matmul(x, wt)
    return y if bias is None else A.add(y, bias)


KERNELS = {"softmax": softmax, "log_softmax": log_softmax, "gelu": gelu, "silu": silu, "mse_loss": mse_loss,
           "linear": linear}
