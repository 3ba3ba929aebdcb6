"""The indexing ops' rows of the derivative table (kernels/derivatives.py's format), PyTorch's:
gather and scatter_add are each other's adjoints; scatter's input loses the gradient where it
was overwritten, and its src gets the gradient gathered from there.  The index gets none."""

from __future__ import annotations

from dispatch_jit.autograd.kernel import AutogradKernel, Derivative, Grad
from dispatch_jit.ops import entries

__all__ = ["DERIVATIVES", "KERNELS"]

A = entries("aten")


def _gather_grad(g, s, c):
    from dispatch_jit.creation import zeros
    return A.scatter_add(zeros(*c["shapes"][0], dtype=g.dtype), c["dim"], s["index"], g)


def _none(g, s, c):
    return None


def _src_grad(g, s, c):
    return A.gather(g, c["dim"], s["index"])


DERIVATIVES = {
    "gather": Derivative("GatherBackward", (Grad(_gather_grad, ("index",)), Grad(_none)), unbroadcast=False),
    "scatter": Derivative("ScatterBackward", (Grad(lambda g, s, c: A.scatter(g, c["dim"], s["index"], 0.0),
                                                   ("index",)),
                                              Grad(_none), Grad(_src_grad, ("index",))), unbroadcast=False),
    "scatter_add": Derivative("ScatterAddBackward", (Grad(lambda g, s, c: g), Grad(_none),
                                                     Grad(_src_grad, ("index",))), unbroadcast=False),
}

KERNELS = {"Autograd": {name: AutogradKernel(d) for name, d in DERIVATIVES.items()}}
