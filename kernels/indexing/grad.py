"""The indexing ops' rows of the derivative table (kernels/derivatives.py's format), PyTorch's:
gather and scatter_add are each other's adjoints; scatter's input loses the gradient where it
was overwritten, and its src gets the gradient gathered from there.  The index gets none.
topk returns two tensors, which a row cannot describe: its Autograd kernel gathers the values."""

from __future__ import annotations

from dispatch_jit.autograd.grad_mode import no_grad
from dispatch_jit.autograd.graph import edge_of, mark_output, node_class
from dispatch_jit.autograd.inplace import AutogradInplaceKernel
from dispatch_jit.autograd.kernel import AutogradKernel, Derivative, Grad, sum_to
from dispatch_jit.dtypes import FLOAT
from dispatch_jit.ops import entries
from dispatch_jit.registry import lookup

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



# index and index_put take a list of optional tensors beside self (and values), which the generic
# AutogradKernel's layout cannot describe (it reads a list op's list alone): their rows are written
# here as the two formulas PyTorch's derivatives.yaml gives, and recorded by small kernels.  The
# index list is saved with the node (and freed by backward, as PyTorch's saved indices).
_IndexBackward = node_class("IndexBackward")
_IndexPutBackward = node_class("IndexPutBackward")


def _index_backward(grads, saved, ctx, needs):
    """index: ``self``'s gradient is g put, accumulating, into zeros (repeated indices add up)."""
    from dispatch_jit.creation import zeros
    g = grads[0]
    z = zeros(*ctx["shape"], dtype=g.dtype, device=g.device)
    return (_index_put()(z, saved["indices"], g, True),)


def _index_put_backward(grads, saved, ctx, needs):
    """index_put: ``self`` keeps g where it was not overwritten (all of it with accumulate);
    ``values`` gets g gathered at the indices, summed over the dims it was broadcast along."""
    from dispatch_jit.creation import zeros
    g, indices = grads[0], saved["indices"]
    gx = gv = None
    if needs[0]:
        gx = g if ctx["accumulate"] else _index_put()(g, indices, zeros((), dtype=g.dtype, device=g.device), False)
    if needs[1]:
        gv = sum_to(_index()(g, indices), ctx["vshape"])
    return gx, gv


def _index():
    return lookup("aten::index.Tensor").entry


def _index_put():
    return lookup("aten::index_put").entry


def index_autograd(x, indices):
    with no_grad():
        out = _index()(x, indices)
    if x.requires_grad and out.dtype.category >= FLOAT:
        mark_output(out, _IndexBackward(_index_backward, (edge_of(x),), {"indices": list(indices)},
                                        {"shape": tuple(x.shape)}, "aten::index"))
    return out


def index_put_autograd(x, indices, values, accumulate=False):
    with no_grad():
        out = _index_put()(x, indices, values, accumulate)
    edges = tuple(edge_of(t) if getattr(t, "requires_grad", False) else None for t in (x, values))
    if any(e is not None for e in edges) and out.dtype.category >= FLOAT:
        mark_output(out, _IndexPutBackward(_index_put_backward, edges, {"indices": list(indices)},
                                           {"accumulate": bool(accumulate), "vshape": tuple(values.shape)},
                                           "aten::index_put"))
    return out


KERNELS = {"Autograd": {"topk": topk_autograd, "index.Tensor": index_autograd, "index_put": index_put_autograd,
                        "index_put_": AutogradInplaceKernel("aten::index_put"),
                        **{name: AutogradKernel(d) for name, d in DERIVATIVES.items()}}}
