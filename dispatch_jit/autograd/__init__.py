"""``dj.autograd``: reverse-mode differentiation as dispatch keys.

A tensor that requires grad carries AutogradCPU (or AutogradCUDA) in its key
set; the Autograd kernel of each differentiable op records a node from the
derivative table (kernels/derivatives.py) and redispatches to the backend.
Tensors that do not require grad, and every call under ``no_grad``, resolve
straight to the backend kernels.
"""

from __future__ import annotations

from .function import Function, FunctionCtx
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import gradcheck

__all__ = ["backward", "grad", "Function", "FunctionCtx", "gradcheck", "no_grad", "enable_grad",
           "set_grad_enabled", "is_grad_enabled"]


def _as_seq(x):
    if x is None:
        return None
    return list(x) if isinstance(x, (list, tuple)) else [x]


def backward(tensors, grad_tensors=None, retain_graph: bool | None = None, create_graph: bool = False) -> None:
    """Accumulate gradients of ``tensors`` into the leaves' ``.grad``."""
    from .engine import run_backward
    ts = _as_seq(tensors)
    gs = _as_seq(grad_tensors) or [None] * len(ts)
    run_backward(ts, gs, retain_graph=create_graph if retain_graph is None else retain_graph,
                 create_graph=create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph: bool | None = None, create_graph: bool = False,
         allow_unused: bool = False) -> tuple:
    """The gradients of ``outputs`` with respect to ``inputs`` (nothing is accumulated into ``.grad``).

    >>> import dispatch_jit as dj
    >>> x = dj.tensor(3.0, requires_grad=True)
    >>> (g,) = dj.autograd.grad(x * x * x, x, create_graph=True); g
    tensor(27., grad_fn=<AddBackward>)
    >>> dj.autograd.grad(g, x)[0]
    tensor(18.)
    """
    from .engine import run_backward
    outs = _as_seq(outputs)
    gs = _as_seq(grad_outputs) or [None] * len(outs)
    return run_backward(outs, gs, retain_graph=create_graph if retain_graph is None else retain_graph,
                        create_graph=create_graph, inputs=_as_seq(inputs), allow_unused=allow_unused)
