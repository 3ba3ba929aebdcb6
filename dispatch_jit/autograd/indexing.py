"""``t[index]``: NumPy's indexing (basic -> view, advanced -> copy), recorded
for autograd as IndexBackward, which scatters the gradient back.

Item assignment, an in-place op, is in inplace.py."""

from __future__ import annotations

import numpy as np

from ..bf16 import from_float32, to_float32
from ..creation import zeros
from ..dtypes import BF16_STORAGE
from ..tensor import Tensor, wrap, wrap_view
from .grad_mode import is_grad_enabled
from .graph import edge_of, mark_output, node_class

__all__ = ["getitem", "unwrap_index", "is_basic", "scatter_add_into_zeros", "index_add"]

_IndexBackward = node_class("IndexBackward")


def unwrap_index(index):
    """An index as NumPy takes it: the tensors in it replaced by their arrays."""
    if isinstance(index, Tensor):
        return index._data
    if isinstance(index, tuple):
        return tuple(i._data if isinstance(i, Tensor) else i for i in index)
    return index


def is_basic(index) -> bool:
    """Whether NumPy's basic indexing applies (ints, slices, None, ``...``): the result is a view."""
    items = index if isinstance(index, tuple) else (index,)
    return all(isinstance(i, (int, slice, type(None), type(Ellipsis))) and not isinstance(i, bool) for i in items)


def getitem(t, index):
    """``t[index]`` for an index already unwrapped (``unwrap_index``), recorded by autograd."""
    basic = is_basic(index)
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
    elif gz._data.dtype == BF16_STORAGE:
        # bfloat16 sums in float32, rounded once (exact where no index repeats: adds to zeros)
        f = to_float32(gz._data)
        np.add.at(f, index, to_float32(g._data))
        gz._data[...] = from_float32(f)
    else:
        np.add.at(gz._data, index, g._data)
