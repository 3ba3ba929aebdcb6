"""The Autograd backend fallback: for operators with kernels but no autograd
formula (custom ops that never registered one, library ops whose derivative is
not written yet).

It runs the op below autograd.  When grad mode is on and an input requires grad,
each floating-point or complex output requires grad too, its ``grad_fn`` a
``NotImplemented`` node (PyTorch's name for it) that raises, naming the op and
how to register a formula, if a backward reaches it.  So a gradient that would
need the missing derivative is never silently dropped: ``(f(w) + w).sum()
.backward()`` raises instead of giving ``w.grad`` without ``f``'s part, while a
backward that does not pass through the op runs as usual.  Integral and bool
outputs never require grad, as in PyTorch.

>>> import dispatch_jit as dj
>>> w = dj.tensor([1.0, 2.0], requires_grad=True)
>>> y = dj.nextafter(w, dj.zeros(2))
>>> y.requires_grad, y.grad_fn
(True, <NotImplemented>)
>>> try:
...     (y + w).sum().backward()
... except dj.errors.AutogradError as e:
...     print(str(e).split(";")[0])
the derivative of 'aten::nextafter.Tensor' is not implemented
"""

from __future__ import annotations

from ..errors import AutogradError
from ..keys import AUTOGRAD_BITS
from .grad_mode import is_grad_enabled
from .graph import edge_of, mark_output, node_class

__all__ = ["autograd_not_implemented"]

_AG = AUTOGRAD_BITS
_DIFFERENTIABLE_CATEGORY = 2          # dtype categories from FLOAT up carry gradients


def autograd_not_implemented(op, keyset, args, kwargs):
    from ..dispatcher import ExcludeDispatchKeyGuard
    # below autograd for the whole kernel, as PyTorch's AutoDispatchBelowAutograd: a kernel
    # that calls other ops must not record a graph the op has no formula for
    with ExcludeDispatchKeyGuard(_AG_KEYS):
        out = op.redispatch(keyset - _AG_KEYS, *args, **kwargs)
    if not is_grad_enabled():
        return out
    edges = tuple(edge_of(t) for t in _tensors(list(args) + list(kwargs.values())))
    if all(e is None for e in edges):
        return out
    outputs = [o for o in (out if isinstance(out, (tuple, list)) else (out,))
               if hasattr(o, "_sig") and o.dtype.category >= _DIFFERENTIABLE_CATEGORY]
    if outputs:
        name = op.name()
        node = _NotImplemented(_raise_for(name), edges, {}, {}, name)
        node.metadata = {"num_outputs": len(outputs)}
        for i, o in enumerate(outputs):
            mark_output(o, node, i)
    return out


def _tensors(values) -> list:
    out = []
    for v in values:
        if hasattr(v, "_sig"):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out += [t for t in v if hasattr(t, "_sig")]
    return out


def _raise_for(name: str):
    short = name.split("::")[-1].split(".")[0]

    def formula(grads, saved, ctx, needs):
        raise AutogradError(
            f"the derivative of '{name}' is not implemented; a backward reached one of its outputs. "
            f"Compute it under dj.no_grad() or on .detach()ed inputs if no gradient should flow through "
            f"it, or register a formula: dj.library.custom_op(...).register_autograd(backward) for a "
            f"custom op, Library.impl('{short}', kernel, 'Autograd') otherwise")
    return formula


_NotImplemented = node_class("NotImplemented")
_AG_KEYS = None


def _init():
    global _AG_KEYS
    from ..keys import DispatchKeySet
    _AG_KEYS = DispatchKeySet.from_bits(_AG)


_init()
