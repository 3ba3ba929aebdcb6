"""The nn ops' rows of the derivative table (kernels/derivatives.py's format).

Each gradient is one op when the backward records nothing (PyTorch's
``_softmax_backward_data``, ``nll_loss_backward``, ...: one loop on the CPU), and
decomp.py's formula over differentiable ops when it does (``create_graph=True``: grad
mode is on while the formulas run), so double backward works through any of them.
"""

from __future__ import annotations

from dispatch_jit.autograd.grad_mode import is_grad_enabled
from dispatch_jit.autograd.kernel import AutogradKernel, Derivative, Grad
from dispatch_jit.ops import entries

from . import decomp
from ..derivatives import _not_differentiable

__all__ = ["DERIVATIVES", "KERNELS"]

A = entries("aten")


def _softmax_like(name):
    fused, formula = f"_{name}_backward_data", getattr(decomp, f"{name}_backward")

    def grad(g, s, c):
        y, axis = s["result"], c["axis"] % max(len(c["shapes"][0]), 1)
        return formula(g, y, axis) if is_grad_enabled() else getattr(A, fused)(g, y, axis)
    return grad


def _loss(logits: bool):
    fused = "cross_entropy_loss_backward" if logits else "nll_loss_backward"

    def grad(g, s, c):
        x, t, w = s["self"], s["target"], s["weight"]
        eps = c.get("label_smoothing", 0.0)
        if is_grad_enabled():
            return decomp.loss_backward(g, x, t, w, c["reduction"], c["ignore_index"], eps, logits)
        extra = (eps,) if logits else ()
        return getattr(A, fused)(g, x, t, w, c["reduction"], c["ignore_index"], *extra)
    return grad


# linear: with nothing recorded, one linear_backward call gives the weight's and the bias's gradients
# together (the bias's is kept in the node's ctx until its Grad asks); recording (create_graph),
# decomp.py's differentiable formulas
def _linear_input(g, s, c):
    if is_grad_enabled():
        return decomp.linear_grad_input(g, s["weight"])
    return A.linear_backward(g, s["input"], s["weight"], (True, False, False))[0]


def _linear_weight(g, s, c):
    if is_grad_enabled():
        return decomp.linear_grad_weight(g, s["input"], s["weight"])
    with_bias = c["shapes"][2] is not None and s["weight"].ndim == 2
    _, gw, gb = A.linear_backward(g, s["input"], s["weight"], (False, True, with_bias))
    if with_bias:
        c["_bias_grad"] = gb
    return gw


def _linear_bias(g, s, c):
    gb = c.pop("_bias_grad", None)
    return gb if gb is not None else decomp.linear_grad_bias(g)


_D = Derivative
DERIVATIVES = {
    "softmax": _D("SoftmaxBackward", _softmax_like("softmax"), ("result",)),
    "log_softmax": _D("LogSoftmaxBackward", _softmax_like("log_softmax"), ("result",)),
    "nll_loss": _D("NllLossBackward", (Grad(_loss(False), ("self", "target", "weight")), Grad(lambda g, s, c: None),
                                       Grad(_not_differentiable("nll_loss's weight")))),
    "cross_entropy_loss": _D("CrossEntropyLossBackward", (
        Grad(_loss(True), ("self", "target", "weight")), Grad(lambda g, s, c: None),
        Grad(_not_differentiable("cross_entropy's weight")))),
    # the bias's gradient is g summed back to the bias's shape, by the Autograd kernel
    "linear": _D("LinearBackward", (Grad(_linear_input, ("input", "weight")), Grad(_linear_weight, ("input", "weight")),
                                    Grad(_linear_bias))),
}

KERNELS = {"Autograd": {name: AutogradKernel(d) for name, d in DERIVATIVES.items()}}
