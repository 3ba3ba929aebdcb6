"""``t[index]``: NumPy's indexing (basic -> view, advanced -> copy), recorded
for autograd as IndexBackward, which scatters the gradient back."""

from __future__ import annotations

import numpy as np

from ..tensor import wrap, wrap_view
from .graph import edge_of, node_class
from .grad_mode import is_grad_enabled

__all__ = ["getitem"]

_IndexBackward = node_class("IndexBackward")


def _is_basic(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return all(isinstance(i, (int, slice, type(None), type(Ellipsis))) and not isinstance(i, bool) for i in items)


def getitem(t, index):
    basic = _is_basic(index)
    if t.is_cuda:
        from ..kernels import cuda_index
        a = cuda_index.getitem(t._data, index)      # a view, or a fresh gathered array
        out = wrap_view(t, a) if basic else wrap(a)
    else:
        a = t._data[index]
        if basic and not isinstance(a, np.ndarray):
            # every index an integer: NumPy returns a scalar; a trailing ``...`` makes it a 0-d view
            a = t._data[(index if isinstance(index, tuple) else (index,)) + (Ellipsis,)]
        out = wrap_view(t, a) if basic else wrap(np.array(a, copy=True))
    if t.requires_grad and is_grad_enabled() and out.dtype.category >= 2:
        from ..creation import zeros
        from .kernel import mark_output
        shape, dtype, dev = tuple(t.shape), t.dtype, t.device

        def formula(grads, saved, ctx, needs):
            g = grads[0]
            gz = zeros(*shape, dtype=dtype, device=dev)
            _index_add(gz, index, g)               # repeated advanced indices accumulate
            return (gz,)
        node = _IndexBackward(formula, (edge_of(t),), {}, {}, "aten::index")
        mark_output(out, node)
        if basic:
            from .views import record_view
            record_view(out, t, lambda r: r[index])
    return out


def _index_add(gz, index, g) -> None:
    if gz.is_cuda:
        from ..kernels import cuda_index
        cuda_index.index_add(gz._data, index, g._data)
    else:
        np.add.at(gz._data, index, g._data)


def _assign_zero(t, index) -> None:
    if t.is_cuda:
        from ..kernels import cuda_index
        cuda_index.setitem_data(t._data, index, 0)
    else:
        t._data[index] = 0


_IndexPutBackward = node_class("IndexPutBackward")


def setitem(t, index, value, write) -> None:
    """``t[index] = value`` where ``write()`` does the (cast-checked) store.

    Under autograd the assignment is an in-place op: ``t`` gets an
    IndexPutBackward node (zero gradient where it was overwritten, the
    region's gradient to ``value``), and a view's base is rebased as for any
    in-place op on a view."""
    from ..errors import AutogradError
    value_grad = getattr(value, "requires_grad", False)
    if not is_grad_enabled() or not (t.requires_grad or value_grad):
        write()
        return
    if t.requires_grad and t.grad_fn is None:
        raise AutogradError("a leaf Variable that requires grad is being used in an in-place operation "
                            "(item assignment); assign under dj.no_grad() or to a clone")
    from .views import check_inplace_on_view, rebase_root
    view = t.__dict__.get("_view_of")
    if view is not None:
        check_inplace_on_view(t, "setitem")
    edges = (edge_of(t), edge_of(value) if value_grad else None)
    vshape = tuple(value.shape) if value_grad else None
    write()
    from .kernel import mark_output, sum_to

    def formula(grads, saved, ctx, needs):
        g = grads[0]
        gt = g.clone()
        _assign_zero(gt, index)                  # overwritten elements had no say in the result
        gv = None
        if needs[1]:
            gv = sum_to(getitem(g.detach(), index).clone(), vshape)
        return gt, gv

    t.__dict__.pop("_output_nr", None)
    mark_output(t, _IndexPutBackward(formula, edges, {}, {}, "aten::index_put_"))
    if view is not None:
        rebase_root(t, t.grad_fn)
