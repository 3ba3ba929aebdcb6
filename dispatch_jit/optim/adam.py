"""``dj.optim.Adam`` and ``dj.optim.AdamW``: PyTorch's (betas, eps, weight decay, amsgrad, maximize)."""

from __future__ import annotations

import math

from ..autograd.grad_mode import no_grad
from ..creation import zeros_like
from ..errors import SchemaError
from ..ops import entries
from ..tensor import version_box, wrap
from . import foreach
from .optimizer import Optimizer, _traced, check_params, fast_path, flat_real, lazy_step, loop_dtype, written

__all__ = ["Adam", "AdamW"]

A = entries("aten")


class Adam(Optimizer):
    """Adam, step for step PyTorch's (``decoupled_weight_decay=True``: AdamW)::

        g = g (+ weight_decay * p, or p *= 1 - lr * weight_decay for AdamW)
        m = m + (g - m) * (1 - beta1);  v = v * beta2 + g * g * (1 - beta2)
        p = p - lr / (1 - beta1 ** t) * m / (sqrt(v) / sqrt(1 - beta2 ** t) + eps)

    with ``max(v)`` over the steps in place of ``v`` when ``amsgrad``.  All parameters of one
    dtype are updated by one Numba loop (foreach.py).

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
        if (lz := lazy_step()) is not None:      # compiled mode: the loop is recorded, then run
            return lz.step(self, closure, self._step)
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
        amsgrad, values = group["amsgrad"], None
        if (lz := lazy_step()) is not None:
            first = any(p not in self.state for p in params)
            keys = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if amsgrad else ("exp_avg", "exp_avg_sq")
            lists = [[] if first else [self.state[p][k] for p in params] for k in keys]
            rec = lz.group(params, [t for ts in lists for t in ts], "the first step creates the state" if first else "")
            if rec is not None:       # compiled mode: the multi-tensor loop below, one record of the pending graph
                values = self.step_values(group, params)
                if rec("adam", [params, [p.__dict__["_grad"] for p in params], *lists] + ([] if amsgrad else [[]]),
                       (values[0], values[1], *values[2], group["decoupled_weight_decay"], amsgrad, group["maximize"])):
                    return
        if values is None:
            values = self.step_values(group, params)
        states = [self.state[p] for p in params]
        # what the update's form depends on (a compiled step's key holds it: whether a number is zero)
        flags = (values[2][5] != 0, group["decoupled_weight_decay"], amsgrad, group["maximize"])
        avgs, sqs = [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states]
        maxs = [s["max_exp_avg_sq"] for s in states] if amsgrad else []
        # a complex parameter is updated as its real view, as PyTorch's is (view_as_real): its real
        # and imaginary parts are two independent float parameters, not one complex number
        if fast_path(params, avgs + sqs + maxs, real_view=True):
            written(params + avgs + sqs + maxs)
            empty = flat_real(params[0])[:0]
            foreach.step("adam", [flat_real(p) for p in params], [flat_real(p.__dict__["_grad"]) for p in params],
                         [flat_real(t) for t in avgs], [flat_real(t) for t in sqs],
                         [flat_real(t) for t in maxs] if amsgrad else [empty] * len(params),
                         loop_dtype(params[0]._data.dtype), (values[0], values[1], *values[2], *flags[1:]))
            return
        complex_ = [p.is_complex() for p in params]
        if (tr := _traced()) is not None:       # the numbers: runtime scalars of a compiled step
            if any(complex_):
                tr.abort(f"{type(self).__name__} on complex parameters (updated as their real views, which a "
                         f"compiled step does not trace)")
            values = tr.step_scalars(self, group, params, values)
        step_size, bc2_sqrt, shared = values
        with no_grad():
            for p, s, ss, bc, c in zip(params, states, step_size, bc2_sqrt, complex_):
                if c:
                    for part in _parts(p, s):
                        _adam_ops(*part, ss, bc, *shared, *flags)
                else:
                    _adam_ops(p, p.__dict__["_grad"], s, ss, bc, *shared, *flags)


def _parts(p, s) -> tuple:
    """The real view of a complex CPU parameter, its gradient and its state ``s``, as two float
    updates: ``(p, g, s)`` of the real parts, then of the imaginary parts, each a tensor over the
    complex tensor's own memory (a NumPy view, written in place) sharing its version counter."""
    keys = [k for k in _STATE if k in s]
    ts = [p, p.__dict__["_grad"]] + [s[k] for k in keys]
    out = []
    for name in ("real", "imag"):
        views = [_over(t, getattr(t._data, name)) for t in ts]
        out.append((views[0], views[1], dict(zip(keys, views[2:]))))
    return tuple(out)


_STATE = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")


def _over(t, a):
    """A plain tensor over ``a``, a NumPy view of ``t``'s memory, sharing ``t``'s version counter."""
    v = wrap(a)
    v.__dict__["_vc"] = version_box(t)
    return v


def _adam_ops(p, g, s, step_size, bc2_sqrt, shrink, beta1c, beta2, beta2c, eps, wd, decay, decoupled, amsgrad,
              maximize):
    """One parameter's update with dispatch_jit ops, in foreach._adam's order of roundings.  The flags
    (``decay``: wd != 0) are read apart from the numbers, which a compiled step passes as runtime
    scalars (never read in Python)."""
    if maximize:
        g = A.neg(g)
    if decoupled:
        if decay:
            p.copy_(A.mul(p, shrink))
    elif decay:
        g = A.add(g, A.mul(p, wd))
    m, v = s["exp_avg"], s["exp_avg_sq"]
    m.copy_(A.add(m, A.mul(A.sub(g, m), beta1c)))
    v.copy_(A.add(A.mul(v, beta2), A.mul(A.mul(g, g), beta2c)))
    if amsgrad:
        vm = s["max_exp_avg_sq"]
        vm.copy_(A.maximum(vm, v))
        v = vm
    denom = A.add(A.div(A.sqrt(v), bc2_sqrt), eps)
    p.copy_(A.sub(p, A.mul(A.div(m, denom), step_size)))


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
