"""Copies between host and device, differentiable: ``t.to("cuda")``, ``.cuda()``, ``.cpu()``.

The gradient of a device move is the gradient moved back, so a tensor that
requires grad on the CPU can be used on the GPU and still get its ``.grad``
(PyTorch's ToCopyBackward).
"""

from __future__ import annotations

from ..autograd.function import Function
from ..tensor import Tensor, device as _device, wrap
from .array import from_host

__all__ = ["to_device"]


def _move(t: Tensor, dev) -> Tensor:
    if dev.type == "cuda":
        from .runtime import require
        require(dev.index or 0)
        return wrap(from_host(t._host(), dev.index or 0))
    return wrap(t._host().copy() if not t.is_cuda else t._data.to_host())


class _ToDevice(Function):
    @staticmethod
    def forward(ctx, x, dev):
        ctx.source = x.device
        return _move(x, dev)

    @staticmethod
    def backward(ctx, g):
        return _move(g, ctx.source), None


def to_device(t: Tensor, dev) -> Tensor:
    """``t`` on device ``dev`` (itself when it is already there)."""
    dev = _device(dev)
    if t.device == dev:
        return t
    if t.requires_grad:
        return _ToDevice.apply(t, dev)
    return _move(t, dev)
