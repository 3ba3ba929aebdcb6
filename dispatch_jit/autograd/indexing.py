"""``t[index]``: NumPy's indexing (basic -> view, advanced -> copy), recorded
for autograd as IndexBackward, which scatters the gradient back."""

from __future__ import annotations

import numpy as np

from ..creation import ones, zeros
from ..errors import AutogradError
from ..tensor import wrap, wrap_view
from .grad_mode import is_grad_enabled, no_grad
from .graph import edge_of, node_class
from .kernel import mark_output, sum_to

__all__ = ["getitem"]

_IndexBackward = node_class("IndexBackward")


def _is_basic(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return all(isinstance(i, (int, slice, type(None), type(Ellipsis))) and not isinstance(i, bool) for i in items)


def getitem(t, index):
    basic = _is_basic(index)
    if t.is_cuda:
        from ..cuda import index as cuda_index
        a = cuda_index.getitem(t._data, index)      # a view, or a fresh gathered array
        out = wrap_view(t, a) if basic else wrap(a)
    else:
        a = t._data[index]
        if basic and not isinstance(a, np.ndarray):
            # every index an integer: NumPy returns a scalar; a trailing ``...`` makes it a 0-d view
            a = t._data[(index if isinstance(index, tuple) else (index,)) + (Ellipsis,)]
        out = wrap_view(t, a) if basic else wrap(np.array(a, copy=True))
    if t.requires_grad and is_grad_enabled() and out.dtype.category >= 2:
        ctx = {"shape": tuple(t.shape), "dtype": t.dtype, "device": t.device}
        # As PyTorch: a basic index (ints, slices) is kept with the node, and a second backward
        # works; an advanced index's arrays are saved, and freed by backward (IndexBackward)
        if basic:
            ctx["index"] = index
        saved = {} if basic else {"index": index}
        mark_output(out, _IndexBackward(_index_backward, (edge_of(t),), saved, ctx, "aten::index"))
    return out


def _index_backward(grads, saved, ctx, needs):
    index = saved["index"] if saved else ctx["index"]
    return (scatter_add_into_zeros(grads[0], index, ctx["shape"], ctx["dtype"]),)


_ScatterBackward = node_class("IndexAddBackward")


def scatter_add_into_zeros(g, index, shape: tuple, dtype, flat: bool = False):
    """A zero tensor of ``shape`` with ``g`` added at ``index`` (of its flattened form when
    ``flat``), repeated indices accumulating: the backward of a gather.  Differentiable in
    ``g`` (its own backward is the gather again), so that backward formulas using it work
    under ``create_graph=True``."""
    gz = zeros(*shape, dtype=dtype, device=g.device)
    index_add(gz.reshape((-1,)) if flat else gz, index, g.detach())   # reshape of fresh zeros: a view
    if g.requires_grad and is_grad_enabled():
        mark_output(gz, _ScatterBackward(_scatter_backward, (edge_of(g),), {}, {"index": index, "flat": flat},
                                         "aten::index_add"))
    return gz


def _scatter_backward(grads, saved, ctx, needs):
    gg = grads[0]
    return (getitem(gg.reshape((-1,)) if ctx["flat"] else gg, ctx["index"]),)


def index_add(gz, index, g) -> None:
    """``gz[index] += g`` in place, repeated indices accumulating (no autograd)."""
    if gz.is_cuda:
        from ..cuda import index as cuda_index
        cuda_index.index_add(gz._data, index, g._data)
    else:
        np.add.at(gz._data, index, g._data)


def _assign_zero(t, index) -> None:
    if t.is_cuda:
        from ..cuda import index as cuda_index
        cuda_index.setitem_data(t._data, index, 0)
    else:
        t._data[index] = 0


_IndexPutBackward = node_class("IndexPutBackward")
_CopyBackwards = node_class("CopyBackwards")


def setitem(t, index, value, write) -> None:
    """``t[index] = value`` where ``write()`` does the (cast-checked) store.

    Under autograd the assignment is an in-place op, recorded as PyTorch does:
    a basic index copies into the view ``t[index]``, so the tensor owning the
    storage gets a CopySlices node (views.py); an advanced index records
    IndexPutBackward on ``t`` (zero gradient where it was overwritten, the
    region's gradient to ``value``), and a view's base is rebased as for any
    in-place op on a view."""
    value_grad = getattr(value, "requires_grad", False)
    if not is_grad_enabled() or not (t.requires_grad or value_grad):
        write()
        return
    if t.requires_grad and t.grad_fn is None:
        raise AutogradError("a leaf Variable that requires grad is being used in an in-place operation "
                            "(item assignment); assign under dj.no_grad() or to a clone")
    from .views import check_inplace_on_view, copy_slices, refresh_views, root_of, view_history
    root = root_of(t)
    if root is not None:
        check_inplace_on_view(root, "setitem")
    vedge = edge_of(value) if value_grad else None
    if _is_basic(index):
        with no_grad():
            region = getitem(t, index)
        write()
        node = None
        if value_grad:
            node = _CopyBackwards(_copy_backward, (vedge,), {}, {"shape": tuple(value.shape), "dtype": value.dtype},
                                  "aten::copy_")
        copy_slices(root if root is not None else t, region, node)
        if root is not None:
            view_history(t, root)
        refresh_views(root if root is not None else t, t)
        return
    ctx = {"shape": tuple(value.shape) if value_grad else None}
    node = _IndexPutBackward(_index_put_backward, (edge_of(t), vedge), {"index": index}, ctx, "aten::index_put_")
    write()
    if root is None:
        t.__dict__.pop("_output_nr", None)
        mark_output(t, node)
    else:
        view_history(t, root, copy_slices(root, t, node))
    refresh_views(root if root is not None else t, t)


def _copy_backward(grads, saved, ctx, needs):
    g = sum_to(grads[0], ctx["shape"])
    return (g if g.dtype == ctx["dtype"] else g.to(ctx["dtype"]),)


def _index_put_backward(grads, saved, ctx, needs):
    g, index = grads[0], saved["index"]
    gt = gv = None
    if needs[0]:
        # overwritten elements had no say in the result: g times a mask, so that the formula
        # is itself differentiable (create_graph)
        mask = ones(*g.shape, dtype=g.dtype, device=g.device)
        _assign_zero(mask, index)
        gt = g * mask
    if needs[1]:
        gv = sum_to(getitem(g, index).clone(), ctx["shape"])
    return gt, gv
