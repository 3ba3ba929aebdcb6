"""``dj.optim.SGD``: PyTorch's SGD (momentum, dampening, nesterov, weight decay, maximize)."""

from __future__ import annotations

from ..autograd.grad_mode import no_grad
from ..creation import zeros_like
from ..errors import SchemaError
from ..kernels.optim.fused import sgd_ops
from ..ops import entries
from .optimizer import Optimizer, _traced, check_params, required

__all__ = ["SGD"]

A = entries("aten")


class SGD(Optimizer):
    """Stochastic gradient descent, step for step PyTorch's::

        d = g (+ weight_decay * p);  buf = momentum * buf + (1 - dampening) * d  (buf = d at first)
        d = d + momentum * buf (nesterov) or buf;  p = p - lr * d

    Each group is updated by one call of ``_fused_sgd_`` (kernels/optim/): one Numba loop for
    all its parameters where they are CPU float32/float64 tensors of one dtype.

    >>> import dispatch_jit as dj
    >>> w = dj.nn.Parameter(dj.tensor([1.0, 2.0]))
    >>> opt = SGD([w], lr=0.1, momentum=0.9)
    >>> for _ in range(2):
    ...     opt.zero_grad(); (w * w).sum().backward(); opt.step()
    >>> w
    tensor([0.4600, 0.9200], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False):
        if lr is not required and lr < 0.0:
            raise SchemaError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise SchemaError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise SchemaError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise SchemaError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize))

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns ``closure()``'s loss if given."""
        if (tr := _traced()) is not None:
            return tr.step(self, closure, self._step)
        return self._step(closure)

    def step_values(self, group, params):
        """The numbers one update of ``params`` reads, computed from ``group``'s options as the
        update computes them: ``([lr, momentum, 1 - dampening, weight_decay],)``.  A compiled
        whole step (compiler/steptrace.py) takes them per call as its plan's runtime scalars."""
        return [group["lr"], group["momentum"], 1.0 - group["dampening"], group["weight_decay"]],

    def _step(self, closure):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            params = [p for p in group["params"] if p.__dict__.get("_grad") is not None]
            if not params:
                continue
            check_params(self, group, params)
            momentum = group["momentum"]
            states = [self.state.setdefault(p, {}) for p in params]
            first = momentum != 0 and any(s.get("momentum_buffer") is None for s in states)
            if first and not all(s.get("momentum_buffer") is None for s in states):
                # parameters that got their first gradient later than the others: one at a time
                for p, s in zip(params, states):
                    self._update(group, [p], [s])
                continue
            self._update(group, params, states)
        return loss

    def _update(self, group, params, states):
        momentum = group["momentum"]
        first = momentum != 0 and states[0].get("momentum_buffer") is None
        grads = [p.__dict__["_grad"] for p in params]
        if (tr := _traced()) is not None:
            # a compiled whole step: the per-tensor ops, their numbers runtime scalars of the plan (its
            # first step, which makes the buffers, runs eagerly)
            values = tr.step_scalars(self, group, params, self.step_values(group, params))
            flags = (group["weight_decay"] != 0, momentum != 0, group["nesterov"], group["maximize"], False)
            with no_grad():
                for p, g, s in zip(params, grads, states):
                    sgd_ops(p, g, s.get("momentum_buffer"), *values[0], *flags)
            return
        with no_grad():
            if first:      # the op writes the buffers at the first step, as PyTorch's allocates them
                for g, s in zip(grads, states):
                    s["momentum_buffer"] = zeros_like(g)
            A._fused_sgd_(params, grads, [s["momentum_buffer"] for s in states] if momentum != 0 else [],
                          weight_decay=group["weight_decay"], momentum=momentum, lr=group["lr"],
                          dampening=group["dampening"], nesterov=group["nesterov"], maximize=group["maximize"],
                          is_first_step=first)
