"""Views under autograd, and in-place ops on them.

A view recorded while its base requires grad (a basic index, reshape,
transpose, ...) remembers its root base and how to remake the view from the
root (``replay``).  An in-place op on the view writes into the root's
storage, so the root's history must change too.  As PyTorch's CopySlices,
the root gets a node that sends the view's region of its gradient through
the in-place op's node, and the rest to the root's previous history.
"""

from __future__ import annotations

import numpy as np

from ..errors import AutogradError
from .graph import edge_of, node_class

__all__ = ["record_view", "check_inplace_on_view", "rebase_root"]

_CopySlices = node_class("CopySlices")


def record_view(out, base, fn) -> None:
    """``out = fn(base)`` shares ``base``'s storage."""
    if not np.may_share_memory(out._data, base._data):
        return          # the op had to copy (reshape of a non-contiguous tensor): not a view
    info = base.__dict__.get("_view_of")
    if info is None:
        out.__dict__["_view_of"] = (base, fn)
    else:
        root, inner = info
        out.__dict__["_view_of"] = (root, lambda r: fn(inner(r)))


def check_inplace_on_view(t, opname: str) -> None:
    info = t.__dict__.get("_view_of")
    if info is not None and info[0].requires_grad and info[0].grad_fn is None:
        raise AutogradError(f"{opname}: a view of a leaf Variable that requires grad is being used in an in-place "
                            f"operation; do it under dj.no_grad() or on a clone of the leaf")


def rebase_root(view, node) -> None:
    """``view`` was just overwritten in place with the output of ``node``: give its root a CopySlices node."""
    from ..creation import ones
    from .grad_mode import no_grad
    from .kernel import mark_output
    root, replay = view.__dict__["_view_of"]
    shape, dtype = tuple(root.shape), root.dtype

    def formula(grads, saved, ctx, needs):
        g = grads[0]
        outside = ones(*shape, dtype=dtype)
        with no_grad():
            replay(outside).mul_(0.0)       # 1 outside the view's region, 0 inside
        return (g * outside, replay(g))

    mark_output(root, _CopySlices(formula, (edge_of(root), (node, 0)), {}, {}, "CopySlices"))
