"""The Autograd backend fallback: for operators with kernels but no autograd
formula (custom ops that never registered one).

It runs the op below autograd and returns outputs that do not require grad,
tagged with the op's name, so that a backward that would need them fails
naming the op and saying how to register a formula.
"""

from __future__ import annotations

from ..keys import AUTOGRAD_BITS

__all__ = ["autograd_not_implemented"]

_AG = AUTOGRAD_BITS


def autograd_not_implemented(op, keyset, args, kwargs):
    from ..dispatcher import ExcludeDispatchKeyGuard
    # below autograd for the whole kernel, as PyTorch's AutoDispatchBelowAutograd: a kernel
    # that calls other ops must not record a graph the op has no formula for
    with ExcludeDispatchKeyGuard(_AG_KEYS):
        out = op.redispatch(keyset - _AG_KEYS, *args, **kwargs)
    if any(getattr(a, "requires_grad", False) for a in list(args) + list(kwargs.values())):
        for o in (out if isinstance(out, tuple) else (out,)):
            if hasattr(o, "_sig"):
                o.__dict__["_no_autograd_op"] = op.name()
    return out


_AG_KEYS = None


def _init():
    global _AG_KEYS
    from ..keys import DispatchKeySet
    _AG_KEYS = DispatchKeySet.from_bits(_AG)


_init()
