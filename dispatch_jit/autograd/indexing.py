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
    a = t._data[index]
    basic = _is_basic(index)
    if basic and not isinstance(a, np.ndarray):
        # every index an integer: NumPy returns a scalar; a trailing ``...`` makes it a 0-d view
        a = t._data[(index if isinstance(index, tuple) else (index,)) + (Ellipsis,)]
    out = wrap_view(t, a) if basic else wrap(np.array(a, copy=True))
    if t.requires_grad and is_grad_enabled() and out.dtype.category >= 2:
        from ..creation import zeros
        from .kernel import mark_output
        shape, dtype = tuple(t.shape), t.dtype

        def formula(grads, saved, ctx, needs):
            g = grads[0]
            gz = zeros(*shape, dtype=dtype)
            np.add.at(gz._data, index, g._data)   # repeated advanced indices accumulate
            return (gz,)
        node = _IndexBackward(formula, (edge_of(t),), {}, {}, "aten::index")
        mark_output(out, node)
        if basic:
            from .views import record_view
            record_view(out, t, lambda r: r[index])
    return out
