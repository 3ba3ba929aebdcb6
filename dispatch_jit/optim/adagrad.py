"""``dj.optim.Adagrad``: PyTorch's Adagrad (``lr_decay``, weight decay, ``initial_accumulator_value``,
eps, maximize), written as eager in-place tensor ops, one parameter at a time, in the order of
PyTorch's single-tensor form.  As PyTorch's, the state (``step``, ``sum``) is made when the
optimizer is, so that ``state_dict()`` holds it before the first step.

>>> import dispatch_jit as dj
>>> w = dj.nn.Parameter(dj.tensor([1.0, -1.0]))
>>> opt = dj.optim.Adagrad([w], lr=0.5)
>>> (w * w).sum().backward(); opt.step(); w
tensor([ 0.5000, -0.5000], requires_grad=True)
"""

from __future__ import annotations

from .. import creation
from ..autograd.grad_mode import no_grad
from ..errors import InvalidArgumentError
from .optimizer import Optimizer
from .rmsprop import eager_params, refuse_flags

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad, step for step PyTorch's::

        g = g (+ weight_decay * p);  clr = lr / (1 + (step - 1) * lr_decay)
        sum = sum + g * g;  p = p - clr * g / (sqrt(sum) + eps)

    >>> import dispatch_jit as dj
    >>> w = dj.nn.Parameter(dj.tensor([2.0]))
    >>> opt = Adagrad([w], initial_accumulator_value=0.1)
    >>> sorted(opt.state[w]), opt.state[w]["sum"]
    (['step', 'sum'], tensor([0.1000]))
    """

    def __init__(self, params, lr: float = 0.01, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, fused: bool | None = None):
        if not 0.0 <= lr:
            raise InvalidArgumentError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise InvalidArgumentError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise InvalidArgumentError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise InvalidArgumentError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise InvalidArgumentError(f"Invalid epsilon value: {eps}")
        refuse_flags("Adagrad", differentiable=differentiable, fused=fused)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, fused=fused))

    def add_param_group(self, param_group: dict) -> None:
        """Add a group (as the base's); its parameters get their state at once, as at construction."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        for p in group["params"]:
            self.state[p] = {"step": creation.tensor(0.0),
                             "sum": creation.full_like(p, group["initial_accumulator_value"])}

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns ``closure()``'s loss if given."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            for p in eager_params(self, group):
                with no_grad():
                    _update(p, p.__dict__["_grad"], self.state[p], group)
        return loss


def _update(p, grad, state, group) -> None:
    state["step"].add_(1)
    step = state["step"].item()
    if group["maximize"]:
        grad = -grad
    if group["weight_decay"] != 0:
        grad = grad + p * group["weight_decay"]
    clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
    state_sum = state["sum"]
    state_sum.add_(grad * grad)
    std = state_sum.sqrt().add_(group["eps"])
    p.add_(grad * -clr / std)
