"""The indexing ops' rows of the derivative table (kernels/derivatives.py's format), PyTorch's:
gather and scatter_add are each other's adjoints; scatter's input loses the gradient where it
was overwritten, and its src gets the gradient gathered from there.  The index gets none.
topk returns two tensors, which a row cannot describe: its Autograd kernel gathers the values."""

from __future__ import annotations

from dispatch_jit.autograd.grad_mode import no_grad
from dispatch_jit.autograd.kernel import AutogradKernel, Derivative, Grad
from dispatch_jit.ops import entries

from .op import TopkResult

__all__ = ["DERIVATIVES", "KERNELS"]

A = entries("aten")


def _gather_grad(g, s, c):
    from dispatch_jit.creation import zeros
    return A.scatter_add(zeros(*c["shapes"][0], dtype=g.dtype, device=g.device), c["dim"], s["index"], g)


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

def topk_autograd(x, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    """topk with an input that requires grad: the indices from the kernel (no history), the
    values gathered at them, so their gradient is gather's (a scatter_add), as PyTorch's."""
    with no_grad():
        idx = A.topk(x, k, dim, largest, sorted).indices
    return TopkResult(A.gather(x, dim, idx) if x.ndim else A.clone(x), idx)


KERNELS = {"Autograd": {"topk": topk_autograd, **{name: AutogradKernel(d) for name, d in DERIVATIVES.items()}}}
