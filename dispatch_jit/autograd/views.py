"""Views under autograd, and in-place ops on them.

Every view remembers the tensor it was made from (``_base``, set by
``wrap_view`` whether or not anything requires grad); following ``_base``
while the storage is shared leads to the *root*, the tensor that owns the
storage.  An in-place op on a view writes into the root's storage, so the
root's history must change too, whether or not the root required grad
before.  As PyTorch's CopySlices, the root gets a node that sends the written
region of its gradient through the in-place op's node and the rest to the
root's previous history (if it had one); the view's own history becomes a
view of the root's new history (AsStridedBackward), as in PyTorch.

The region is described by its elements' positions in the root, computed
from the two memory layouts (PyTorch replays the view with ``as_strided`` the
same way), so any chain of view ops works, recorded by autograd or not.
"""

from __future__ import annotations

import numpy as np

from ..bf16 import from_float32
from ..dtypes import BF16_STORAGE
from ..errors import AutogradError
from ..tensor import place, wrap
from .graph import edge_of, mark_output, node_class
from .indexing import getitem, scatter_add_into_zeros

__all__ = ["bases_of", "root_of", "check_inplace_on_view", "copy_slices", "view_history", "refresh_views",
           "positions"]

_CopySlices = node_class("CopySlices")
_AsStridedBackward = node_class("AsStridedBackward")


def _same_storage(a, b) -> bool:
    da, db = a._data, b._data
    if isinstance(da, np.ndarray):
        return isinstance(db, np.ndarray) and np.may_share_memory(da, db)
    return getattr(da, "storage", None) is getattr(db, "storage", False)     # CUDA: one allocator block


def bases_of(t) -> list:
    """The tensors ``t`` views, nearest first: the last owns the storage (PyTorch's
    ``t._base``); empty when ``t`` is not a view.  The walk stops where a "view" op
    had to copy (a reshape of a non-contiguous tensor): the copy owns its storage."""
    bases = []
    base = t.__dict__.get("_base")
    while base is not None and _same_storage(base, t):
        bases.append(base)
        base = base.__dict__.get("_base")
    return bases


def root_of(t):
    """The tensor owning the storage that ``t`` views, or None when ``t`` is not a view."""
    bases = bases_of(t) if "_base" in t.__dict__ else ()
    return bases[-1] if bases else None


def check_inplace_on_view(root, opname: str) -> None:
    if root.requires_grad and root.grad_fn is None:
        raise AutogradError(f"{opname}: a view of a leaf Variable that requires grad is being used in an in-place "
                            f"operation; do it under dj.no_grad() or on a clone of the leaf")


def _layout(a, origin: int) -> tuple:
    """(shape, strides, offset of element 0), in elements; the offset counted from ``origin``
    (an address on the CPU, an element offset into the storage on CUDA).  Views never
    reinterpret the dtype here, so a view's offsets are whole elements of its root's."""
    if isinstance(a, np.ndarray):
        isz = a.itemsize
        return a.shape, tuple(s // isz for s in a.strides), (a.__array_interface__["data"][0] - origin) // isz
    return a.shape, a.elem_strides(), a.offset - origin


def _offsets(shape: tuple, strides: tuple, start: int) -> np.ndarray:
    """The element offset of every element of a strided layout, in its shape."""
    off = np.full((), start, np.intp)
    for d, (n, s) in enumerate(zip(shape, strides)):
        off = off + (np.arange(n, dtype=np.intp) * s).reshape([-1 if k == d else 1 for k in range(len(shape))])
    return np.broadcast_to(off, shape)


def positions(root, view) -> np.ndarray:
    """For each element of ``view``, the index (in C order) of the element of ``root`` it aliases."""
    r, v = root._data, view._data
    origin = r.__array_interface__["data"][0] if isinstance(r, np.ndarray) else r.offset
    rshape, rstrides, _ = _layout(r, origin)
    vshape, vstrides, vstart = _layout(v, origin)
    off = _offsets(vshape, vstrides, vstart)
    if r.flags.c_contiguous:
        return np.array(off, dtype=np.intp)          # memory order is C order
    # map memory offsets to C-order indices through a scratch buffer laid out as the root
    lo = sum(min(0, (n - 1) * s) for n, s in zip(rshape, rstrides))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(rshape, rstrides)) + 1
    scratch = np.empty(hi - lo, np.intp)
    laid = np.lib.stride_tricks.as_strided(scratch[-lo:], rshape, [s * scratch.itemsize for s in rstrides])
    laid[...] = np.arange(r.size, dtype=np.intp).reshape(rshape)
    return scratch[off - lo]


def _mask_outside(g, shape: tuple, pos: np.ndarray):
    """1 outside the written region of a root-shaped gradient, 0 inside."""
    m = np.ones(shape, dtype=g._data.dtype if g._data.dtype != BF16_STORAGE else np.float32)
    m.reshape(-1)[pos.reshape(-1)] = 0
    return wrap(place(m if m.dtype == g._data.dtype else from_float32(m), g.device))


def view_history(view, root, pos: np.ndarray | None = None) -> None:
    """Make ``view``'s history a view of ``root``'s new one (PyTorch's AsStridedBackward):
    its gradient lands at its elements' positions in a root-shaped gradient.  The views
    it was made from, between it and the root, see the same write: they get one too
    (PyTorch regenerates every view of the root lazily; other views of it keep theirs)."""
    for v in [view] + bases_of(view)[:-1]:
        ctx = {"shape": tuple(root.shape), "positions": positions(root, v) if pos is None or v is not view else pos}
        v.__dict__.pop("_output_nr", None)
        mark_output(v, _AsStridedBackward(_as_strided_backward, (edge_of(root),), {}, ctx, "aten::as_strided"))


def refresh_views(root, written) -> None:
    """After an in-place op recorded by autograd changed ``root``'s history, every other live
    view of its storage (``wrap_view`` keeps weak references) reads the new values, so its
    history becomes a view of the new history too, as PyTorch regenerates a view's grad_fn
    once its base's version moved.  ``written``: the tensor the op wrote through (it, and
    the views between it and the root, got theirs already)."""
    done = {id(root), id(written)}
    done.update(id(b) for b in bases_of(written))
    stack = [root]
    while stack:
        refs = stack.pop().__dict__.get("_views")
        if not refs:
            continue
        for r in refs:
            v = r()
            if v is None:
                continue
            stack.append(v)
            if id(v) in done or not _same_storage(v, root):
                continue
            done.add(id(v))
            ctx = {"shape": tuple(root.shape), "positions": positions(root, v)}
            v.__dict__.pop("_output_nr", None)
            mark_output(v, _AsStridedBackward(_as_strided_backward, (edge_of(root),), {}, ctx, "aten::as_strided"))


def _as_strided_backward(grads, saved, ctx, needs):
    g = grads[0]
    return (scatter_add_into_zeros(g, ctx["positions"], ctx["shape"], g.dtype, flat=True),)


def copy_slices(root, region, node) -> np.ndarray:
    """``region``, a view of ``root``, was just overwritten in place with the (only) output
    of ``node`` (None: with values that need no gradient): ``root`` gets a CopySlices node.
    Returns the region's positions in ``root``."""
    pos = positions(root, region)
    shape = tuple(root.shape)
    edges = (edge_of(root), (node, 0) if node is not None else None)
    # the positions are saved, and freed by backward, as PyTorch's CopySlices frees its view function:
    # a second backward through it raises unless retain_graph=True
    root.__dict__.pop("_output_nr", None)
    mark_output(root, _CopySlices(_copy_slices_backward, edges, {"positions": pos}, {"shape": shape}, "CopySlices"))
    return pos


def _copy_slices_backward(grads, saved, ctx, needs):
    g, pos = grads[0], saved["positions"]
    outside = g * _mask_outside(g, ctx["shape"], pos) if needs[0] else None
    inside = getitem(g.reshape((-1,)), pos) if needs[1] else None      # a gather: differentiable
    return outside, inside
