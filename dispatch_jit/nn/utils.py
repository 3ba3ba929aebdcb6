"""``dj.nn.utils``: gradient clipping, as PyTorch's ``torch.nn.utils``.

``clip_grad_norm_`` computes what PyTorch's computes, op for op: each gradient's
``norm_type`` norm (one ``_foreach_norm`` call), the norm of those norms (the total), then one
factor ``clamp(max_norm / (total + 1e-6), max=1.0)`` that every gradient is multiplied
by in place (one ``_foreach_mul_``), with no Python branch on the total's value, so the clipping is
recorded and fused like any other ops inside a step under ``@dj.compile`` or
``dj.execution_mode("compiled")``.  It returns the total norm (a 0-d tensor), as PyTorch's.

>>> import dispatch_jit as dj
>>> w = dj.nn.Parameter(dj.tensor([3.0, 4.0]))
>>> (w * w).sum().backward()             # w.grad = [6, 8], norm 10
>>> dj.nn.utils.clip_grad_norm_([w], max_norm=1.0)
tensor(10.)
>>> [round(v, 4) for v in w.grad.tolist()]
[0.6, 0.8]
"""

from __future__ import annotations

import math

from ..autograd.grad_mode import no_grad
from ..creation import tensor as _tensor
from ..errors import TensorStateError
from ..ops import entries
from ..tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_"]

A = entries("aten")


def _grads(parameters) -> list:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _tensors(tensors) -> list:
    return [tensors] if isinstance(tensors, Tensor) else [t for t in tensors if t is not None]


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """The ``norm_type`` norm of the tensors' norms: the norm of all their elements as one vector.

    ``error_if_nonfinite``: raise if it is nan or inf (this reads the value: a sync point under
    compile).  ``foreach`` is accepted for PyTorch's signature; the result is the same either way.

    >>> import dispatch_jit as dj
    >>> get_total_norm([dj.tensor([3.0]), dj.tensor([4.0])])
    tensor(5.)
    """
    tensors = _tensors(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return _tensor(0.0)
    with no_grad():
        norms = A._foreach_norm(tensors, norm_type)
        total = A.stack(norms).norm(norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise TensorStateError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
                               f"so it cannot be clipped. To disable this error and scale the gradients by the "
                               f"non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm: float, total_norm: Tensor, foreach=None) -> None:
    """Scale the parameters' gradients in place by ``clamp(max_norm / (total_norm + 1e-6), max=1)``."""
    grads = _grads(parameters)
    if not grads:
        return
    with no_grad():
        coef = A.clamp(float(max_norm) / (total_norm + 1e-6), max=1.0)
        A._foreach_mul_(grads, coef)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach=None) -> Tensor:
    """Clip the gradients of ``parameters`` (an iterable of tensors, or one tensor) so that their
    total ``norm_type`` norm is at most ``max_norm``; return the total norm before clipping.

    Args:
        parameters: the tensors whose ``.grad`` is clipped (those without one are skipped).
        max_norm: the largest total norm left.
        norm_type: the norm's order (``float('inf')`` for the largest absolute value).
        error_if_nonfinite: raise ``RuntimeError`` if the total norm is nan or inf.
        foreach: accepted for PyTorch's signature.

    >>> import dispatch_jit as dj
    >>> w = dj.nn.Parameter(dj.tensor([1.0, -2.0]))
    >>> (w * 1.0).sum().backward()
    >>> clip_grad_norm_([w], 5.0, norm_type=float("inf")), w.grad    # norm 1 <= 5: unchanged
    (tensor(1.), tensor([1., 1.]))
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    parameters = list(parameters)
    total = get_total_norm(_grads(parameters), norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp each gradient of ``parameters`` into ``[-clip_value, clip_value]``, in place.

    >>> import dispatch_jit as dj
    >>> w = dj.nn.Parameter(dj.tensor([1.0, 2.0]))
    >>> (w * w).sum().backward(); clip_grad_value_([w], 3.0); w.grad
    tensor([2., 3.])
    """
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)
