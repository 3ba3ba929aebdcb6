"""Composite operators: decompositions into other operators.

Registered at CompositeImplicitAutograd, so every backend (and, later,
autograd and tracing) gets them for free from the ops they call.
"""

from __future__ import annotations

import math
import warnings

from dispatch_jit.dtypes import COMPLEX, FLOAT, result_type
from dispatch_jit.errors import BroadcastError, DTypeError, SchemaError
from dispatch_jit.ops import entries

from .shape.cpu import broadcast_shapes

__all__ = ["SCHEMAS", "KERNELS", "METHODS"]

SCHEMAS = [
    "gelu(Tensor self, *, str approximate='none') -> Tensor",
    "silu(Tensor self) -> Tensor",
    "mse_loss(Tensor self, Tensor target, str reduction='mean') -> Tensor",
]
METHODS: list = []


A = entries("aten")    # the ops are defined after this module is imported


def _floating(x, op: str) -> None:
    """PyTorch's activations refuse integer and bool tensors (their kernels exist for floats only)."""
    if x.dtype.category not in (FLOAT, COMPLEX):
        raise DTypeError(f"{op}: expected a floating point tensor, got {x.dtype.name}; convert first: x.float()")


def gelu(x, approximate="none"):
    # one elementwise row per form (elementwise/rows_activation.py), with its derivative row: one pass
    # forward and one backward, where the decomposition took five kernels each way
    _floating(x, "gelu")
    if approximate == "none":
        return A._gelu_erf(x)
    if approximate == "tanh":
        return A._gelu_tanh(x)
    raise SchemaError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def silu(x):
    _floating(x, "silu")
    return A.mul(x, A.sigmoid(x))


def _check_loss_shapes(op: str, x, target) -> None:
    """Errors and warnings name the loss, not the ``sub`` inside it; a target that broadcasts
    to another shape warns, as PyTorch (the mean is then over the broadcast shape)."""
    xs, ts = tuple(x.shape), tuple(getattr(target, "shape", ()))
    if xs == ts:
        return
    try:
        broadcast_shapes(xs, ts)
    except ValueError:
        raise BroadcastError(f"{op}: the size of input {xs} and target {ts} cannot be broadcast together; "
                             f"pass a target of the input's shape") from None
    warnings.warn(f"{op}: using a target size ({ts}) that is different to the input size ({xs}). This will "
                  f"likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
                  UserWarning, stacklevel=3)


def mse_loss(x, target, reduction="mean"):
    if reduction not in ("mean", "sum", "none"):
        raise SchemaError(f"mse_loss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    _check_loss_shapes("mse_loss", x, target)
    dt = result_type(x, target)
    if dt.category != FLOAT:    # PyTorch's mse_loss kernels exist for real floating dtypes only
        raise DTypeError(f"mse_loss: expected floating point input and target, got {x.dtype.name} and "
                         f"{getattr(getattr(target, 'dtype', None), 'name', type(target).__name__)} (computed in {dt.name}); "
                         f"convert first: x.float()")
    d = A.sub(x, target)
    sq = A.mul(d, d)
    if reduction == "mean":
        return A.mean(sq)
    if reduction == "sum":
        return A.sum(sq)
    if reduction == "none":
        return sq
    raise SchemaError(f"mse_loss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


KERNELS = {"CompositeImplicitAutograd": {"gelu": gelu, "silu": silu, "mse_loss": mse_loss}}
