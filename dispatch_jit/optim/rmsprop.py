"""``dj.optim.RMSprop``: PyTorch's RMSprop (smoothing ``alpha``, ``momentum``, ``centered``, weight
decay, maximize), written as eager in-place tensor ops, one parameter at a time, in the order of
PyTorch's single-tensor form (so ``foreach`` changes nothing here: both of PyTorch's forms give the
same update up to rounding).

>>> import dispatch_jit as dj
>>> w = dj.nn.Parameter(dj.tensor([1.0, -1.0]))
>>> opt = dj.optim.RMSprop([w], lr=0.01)
>>> (w * w).sum().backward(); opt.step(); w
tensor([ 0.9000, -0.9000], requires_grad=True)
"""

from __future__ import annotations

from .. import creation
from ..autograd.grad_mode import no_grad
from ..errors import DTypeError, InvalidArgumentError
from .optimizer import Optimizer, check_params

__all__ = ["RMSprop", "eager_params", "refuse_flags"]


def refuse_flags(who: str, **flags) -> None:
    """PyTorch options with no counterpart here (CUDA-graph capture, a differentiable update, fused
    kernels): accepted at their defaults, refused when set, rather than silently ignored."""
    for name, value in flags.items():
        if value:
            raise InvalidArgumentError(f"{who}: {name}={value!r} is not supported by dispatch_jit (no CUDA-graph "
                                       f"capture, differentiable or fused optimizer update); leave it at its "
                                       f"default")


def eager_params(opt, group: dict) -> list:
    """The parameters of ``group`` that have a gradient, checked (writeable, gradient of their shape,
    real: PyTorch updates a complex parameter as its real view, which dispatch_jit does not have)."""
    params = [p for p in group["params"] if p.__dict__.get("_grad") is not None]
    check_params(opt, group, params)
    for p in params:
        if p.is_complex():
            i = next(i for i, q in enumerate(group["params"]) if q is p)
            raise DTypeError(f"{type(opt).__name__}.step(): parameter {i} is complex ({p.dtype}); this optimizer "
                             f"updates real parameters only: optimize the real and imaginary parts as two real "
                             f"parameters")
    return params


class RMSprop(Optimizer):
    """RMSprop, step for step PyTorch's::

        g = g (+ weight_decay * p);  v = alpha * v + (1 - alpha) * g * g
        avg = sqrt(v - m * m) + eps with m = lerp(m, g, 1 - alpha) (centered) or sqrt(v) + eps
        buf = momentum * buf + g / avg; p = p - lr * buf  (momentum > 0)  or  p = p - lr * g / avg

    State per parameter, as PyTorch's: ``step`` (a 0-d float32 tensor), ``square_avg``, and
    ``momentum_buffer`` (momentum > 0) and ``grad_avg`` (centered).

    >>> import dispatch_jit as dj
    >>> w = dj.nn.Parameter(dj.tensor([2.0]))
    >>> opt = RMSprop([w], lr=0.1, momentum=0.9, centered=True)
    >>> (w * w).sum().backward(); opt.step(); sorted(opt.state[w])
    ['grad_avg', 'momentum_buffer', 'square_avg', 'step']
    """

    def __init__(self, params, lr: float = 0.01, alpha: float = 0.99, eps: float = 1e-08, weight_decay: float = 0,
                 momentum: float = 0, centered: bool = False, capturable: bool = False, foreach: bool | None = None,
                 maximize: bool = False, differentiable: bool = False):
        if not 0.0 <= lr:
            raise InvalidArgumentError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise InvalidArgumentError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise InvalidArgumentError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise InvalidArgumentError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise InvalidArgumentError(f"Invalid alpha value: {alpha}")
        refuse_flags("RMSprop", capturable=capturable, differentiable=differentiable)
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                                      weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns ``closure()``'s loss if given."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            for p in eager_params(self, group):
                state = self.state.setdefault(p, {})
                if not state:
                    state["step"] = creation.tensor(0.0)
                    state["square_avg"] = creation.zeros_like(p)
                    if group["momentum"] > 0:
                        state["momentum_buffer"] = creation.zeros_like(p)
                    if group["centered"]:
                        state["grad_avg"] = creation.zeros_like(p)
                with no_grad():
                    _update(p, p.__dict__["_grad"], state, group)
        return loss


def _update(p, grad, state, group) -> None:
    lr, alpha, eps, wd, momentum = group["lr"], group["alpha"], group["eps"], group["weight_decay"], group["momentum"]
    state["step"].add_(1)
    if group["maximize"]:
        grad = -grad
    if wd != 0:
        grad = grad + p * wd
    square_avg = state["square_avg"]
    square_avg.mul_(alpha).add_(grad * (1 - alpha) * grad)
    if group["centered"]:
        grad_avg = state["grad_avg"]
        grad_avg.add_((grad - grad_avg) * (1 - alpha))
        avg = (square_avg - grad_avg * grad_avg).sqrt_()
    else:
        avg = square_avg.sqrt()
    avg = avg.add_(eps)
    if momentum > 0:
        buf = state["momentum_buffer"]
        buf.mul_(momentum).add_(grad / avg)
        p.add_(buf, alpha=-lr)
    else:
        p.add_(grad * -lr / avg)
