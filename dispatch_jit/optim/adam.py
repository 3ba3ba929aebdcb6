"""``dj.optim.Adam`` and ``dj.optim.AdamW``: PyTorch's (betas, eps, weight decay, amsgrad, maximize)."""

from __future__ import annotations

import math

from ..autograd.grad_mode import no_grad
from ..creation import zeros_like
from ..errors import SchemaError
from ..kernels.optim.fused import adam_ops
from ..ops import entries
from .optimizer import Optimizer, _traced, check_params

__all__ = ["Adam", "AdamW"]

A = entries("aten")


class Adam(Optimizer):
    """Adam, step for step PyTorch's (``decoupled_weight_decay=True``: AdamW)::

        g = g (+ weight_decay * p, or p *= 1 - lr * weight_decay for AdamW)
        m = m + (g - m) * (1 - beta1);  v = v * beta2 + g * g * (1 - beta2)
        p = p - lr / (1 - beta1 ** t) * m / (sqrt(v) / sqrt(1 - beta2 ** t) + eps)

    with ``max(v)`` over the steps in place of ``v`` when ``amsgrad``.  Each group is updated by one
    call of ``_fused_adam_`` (``_fused_adamw_``; kernels/optim/): one Numba loop for all its
    parameters where they are CPU float32/float64 (or complex) tensors of one dtype.

    >>> import dispatch_jit as dj
    >>> w = dj.nn.Parameter(dj.tensor([1.0, -1.0]))
    >>> opt = Adam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); w
    tensor([ 0.9000, -0.9000], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
                 amsgrad: bool = False, *, maximize: bool = False, decoupled_weight_decay: bool = False):
        if lr < 0.0:
            raise SchemaError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise SchemaError(f"Invalid epsilon value: {eps}")
        for i, b in enumerate(betas):
            if not 0.0 <= b < 1.0:
                raise SchemaError(f"Invalid beta parameter at index {i}: {b}")
        if weight_decay < 0.0:
            raise SchemaError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, decoupled_weight_decay=decoupled_weight_decay))

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns ``closure()``'s loss if given."""
        if (tr := _traced()) is not None:
            return tr.step(self, closure, self._step)
        return self._step(closure)

    def _step(self, closure):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            params = [p for p in group["params"] if p.__dict__.get("_grad") is not None]
            if params:
                check_params(self, group, params, real_view=True)
                self._update(group, params)
        return loss

    def advance(self, group, params):
        """The Python side of one step for ``params`` (those of ``group`` with a gradient): their state
        (made on the first step), each step count advanced, and the bias corrections of the new
        counts, ``(states, step sizes, sqrt(1 - beta2 ** t))``."""
        beta1, beta2 = group["betas"]
        states = []
        for p in params:
            s = self.state.get(p)
            if s is None:
                s = self.state[p] = {"step": 0, "exp_avg": zeros_like(p), "exp_avg_sq": zeros_like(p)}
                if group["amsgrad"]:
                    s["max_exp_avg_sq"] = zeros_like(p)
            s["step"] += 1
            states.append(s)
        step_size = [group["lr"] / (1 - beta1 ** s["step"]) for s in states]
        bc2_sqrt = [math.sqrt(1 - beta2 ** s["step"]) for s in states]
        return states, step_size, bc2_sqrt

    def step_values(self, group, params):
        """The numbers one update of ``params`` reads, computed from ``group``'s options and the
        step counts (which it advances: call it once per step), as the update computes them:
        ``(step sizes, sqrt(1 - beta2 ** t) per parameter, [1 - lr * weight_decay, 1 - beta1,
        beta2, 1 - beta2, eps, weight_decay])``.  A compiled whole step (compiler/steptrace.py)
        takes them per call as its plan's runtime scalars."""
        _, step_size, bc2_sqrt = self.advance(group, params)
        beta1, beta2 = group["betas"]
        lr, wd = group["lr"], group["weight_decay"]
        return step_size, bc2_sqrt, [1 - lr * wd, 1 - beta1, beta2, 1 - beta2, group["eps"], wd]

    def _update(self, group, params):
        amsgrad = group["amsgrad"]
        keys = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if amsgrad else ("exp_avg", "exp_avg_sq")
        grads = [p.__dict__["_grad"] for p in params]
        if (tr := _traced()) is not None:
            # a compiled whole step: the per-tensor ops, their numbers runtime scalars of the plan
            if any(p.is_complex() for p in params):
                tr.abort(f"{type(self).__name__} on complex parameters (updated as their real views, which a "
                         f"compiled step does not trace)")
            step_size, bc2_sqrt, shared = tr.step_scalars(self, group, params, self.step_values(group, params))
            flags = (group["weight_decay"] != 0, group["decoupled_weight_decay"], amsgrad, group["maximize"])
            with no_grad():
                for p, g, ss, bc in zip(params, grads, step_size, bc2_sqrt):
                    adam_ops(p, g, [self.state[p][k] for k in keys], ss, bc, *shared, *flags)
            return
        states = self.advance(group, params)[0]
        beta1, beta2 = group["betas"]
        op = A._fused_adamw_ if group["decoupled_weight_decay"] else A._fused_adam_
        with no_grad():
            op(params, grads, *[[s[k] for s in states] for k in keys], *([] if amsgrad else [[]]),
               [float(s["step"]) for s in states], lr=group["lr"], beta1=beta1, beta2=beta2,
               weight_decay=group["weight_decay"], eps=group["eps"], amsgrad=amsgrad, maximize=group["maximize"])


class AdamW(Adam):
    """Adam with decoupled weight decay (``p *= 1 - lr * weight_decay`` before the update), PyTorch's
    defaults (``weight_decay=1e-2``).

    >>> import dispatch_jit as dj
    >>> w = dj.nn.Parameter(dj.tensor([1.0]))
    >>> opt = AdamW([w], lr=0.1, weight_decay=0.5)
    >>> (w * 0.0).sum().backward(); opt.step(); w
    tensor([0.9500], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2,
                 amsgrad: bool = False, *, maximize: bool = False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True)
