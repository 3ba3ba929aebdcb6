"""``dj.optim.SGD``: PyTorch's SGD (momentum, dampening, nesterov, weight decay, maximize)."""

from __future__ import annotations

from ..autograd.grad_mode import no_grad
from ..errors import SchemaError
from ..ops import entries
from . import foreach
from .optimizer import Optimizer, _traced, check_params, fast_path, flat, lazy_step, required, written

__all__ = ["SGD"]

A = entries("aten")


class SGD(Optimizer):
    """Stochastic gradient descent, step for step PyTorch's::

        d = g (+ weight_decay * p);  buf = momentum * buf + (1 - dampening) * d  (buf = d at first)
        d = d + momentum * buf (nesterov) or buf;  p = p - lr * d

    All parameters of one dtype are updated by one Numba loop (foreach.py).

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
        if (lz := lazy_step()) is not None:      # compiled mode: the loop is recorded, then run
            return lz.step(self, closure, self._step)
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
        if (lz := lazy_step()) is not None:
            bufs = [] if momentum == 0 or first else [s["momentum_buffer"] for s in states]
            rec = lz.group(params, bufs, "the first step creates the momentum buffers" if first else "")
            # compiled mode: the multi-tensor loop below, as one record of the pending graph
            if rec is not None and rec("sgd", [params, [p.__dict__["_grad"] for p in params], bufs],
                                       tuple(self.step_values(group, params)[0])
                                       + (group["nesterov"], group["maximize"], False)):
                return
        if momentum != 0 and first:
            for p, s in zip(params, states):
                s["momentum_buffer"] = p.detach().clone() if fast_path(params) else None
        values = self.step_values(group, params)
        # what the update's form depends on (a compiled step's key holds it: whether a number is zero)
        flags = (values[0][3] != 0, momentum != 0, group["nesterov"], group["maximize"], first)
        bufs = [s["momentum_buffer"] for s in states] if momentum != 0 else []
        if fast_path(params, bufs):
            written(params + bufs)
            empty = flat(params[0])[:0]
            foreach.step("sgd", [flat(p) for p in params], [flat(p.__dict__["_grad"]) for p in params],
                         [flat(b) for b in bufs] if bufs else [empty] * len(params), params[0]._data.dtype,
                         tuple(values[0]) + flags[2:])
            return
        if (tr := _traced()) is not None:       # the numbers: runtime scalars of a compiled step
            values = tr.step_scalars(self, group, params, values)
        with no_grad():
            for p, s in zip(params, states):
                s["momentum_buffer"] = _sgd_ops(p, p.__dict__["_grad"], s.get("momentum_buffer"), *values[0], *flags)


def _sgd_ops(p, g, buf, lr, momentum, damp1, wd, decay, has_momentum, nesterov, maximize, first):
    """One parameter's update with dispatch_jit ops, in foreach._sgd's order of roundings; returns the
    momentum buffer.  The flags (``decay``: wd != 0, ``has_momentum``: momentum != 0) are read apart
    from the numbers, which a compiled step passes as runtime scalars (never read in Python)."""
    d = A.neg(g) if maximize else g
    if decay:
        d = A.add(d, A.mul(p, wd))
    if has_momentum:
        if first or buf is None:
            buf = A.clone(d)
        else:
            buf.copy_(A.add(A.mul(buf, momentum), A.mul(d, damp1)))
        d = A.add(d, A.mul(buf, momentum)) if nesterov else buf
    p.copy_(A.sub(p, A.mul(d, lr)))
    return buf
