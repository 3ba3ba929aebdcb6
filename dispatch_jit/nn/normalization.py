"""``BatchNorm1d`` and ``BatchNorm2d``: PyTorch's constructor arguments, parameters and buffers
(``weight``, ``bias``, ``running_mean``, ``running_var``, ``num_batches_tracked``: the same
``state_dict`` keys, so a PyTorch checkpoint loads), ``momentum=None`` as a cumulative average,
and ``track_running_stats=False`` normalizing with the batch's statistics in eval mode too.

>>> import dispatch_jit as dj
>>> bn = dj.nn.BatchNorm1d(2)
>>> list(bn.state_dict())
['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
>>> bn(dj.tensor([[1.0, 2.0], [3.0, 6.0]]))
tensor([[-1.0000, -1.0000],
        [ 1.0000,  1.0000]], grad_fn=<AddBackward>)
"""

from __future__ import annotations

from ..autograd.grad_mode import no_grad
from ..creation import ones, tensor, zeros
from ..errors import ShapeError
from . import functional as F
from .module import Module, Parameter

__all__ = ["BatchNorm1d", "BatchNorm2d"]


class _NormBase(Module):
    """What batch and instance norms share, as PyTorch's ``_NormBase``: the affine parameters
    (``weight``, ``bias``) and the running statistics buffers, under PyTorch's names."""

    _dims: tuple = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum=0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(ones(num_features, dtype=dtype, device=device))
            if bias:
                self.bias = Parameter(zeros(num_features, dtype=dtype, device=device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", tensor(0, dtype="int64", device=device))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()


class _BatchNorm(_NormBase):
    def forward(self, input):
        if input.ndim not in self._dims:
            want = " or ".join(f"{d}D" for d in self._dims)
            raise ShapeError(f"expected {want} input (got {input.ndim}D input)")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked.item()) if self.momentum is None else self.momentum
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None, self.running_var if track else None,
                            self.weight, self.bias, bn_training, factor, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalization over (N, C) or (N, C, L), per channel C."""
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization over (N, C, H, W), per channel C."""
    _dims = (4,)
