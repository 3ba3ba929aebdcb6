"""Indexing in a trace, as eager mode decomposes it (dispatch_jit/autograd/indexing.py):
``t[idx]`` with an advanced index is a recorded view (a ``getitem`` node) for its basic part
and one recorded ``aten::index`` call like any op; ``t[idx] = v`` is recorded functionally,
as one ``aten::index_put`` whose result the traced tensor stands for from then on (the
tracer's functionalization of the one in-place op it takes).  That is exact only where no
other tensor shares ``t``'s storage: ``t`` is made inside the function by an op that is no
view, and no view of it was taken; any other write aborts the trace (eager mode runs it).
"""

from __future__ import annotations

from dispatch_jit.autograd.indexing import split_index
from dispatch_jit.creation import tensor
from dispatch_jit.registry import lookup
from dispatch_jit.tensor import TRACE_MARK, Tensor

from ..graph.views import is_view

__all__ = ["record_index", "traced_setitem"]


def _split(tr, t, index) -> tuple:
    try:
        return split_index(t, index)
    except Exception as e:      # an invalid index: eager mode raises its error
        tr.abort(f"an invalid index ({type(e).__name__}: {e})")


def _trivial(basic: tuple) -> bool:
    return all(i.__class__ is slice and i == slice(None) for i in basic)


def record_index(tr, t: Tensor, index, why: str):
    """``t[index]`` for an index that is not basic: a view and one ``aten::index``, recorded;
    ``why`` is the reason to abort with if the index cannot be split."""
    basic, indices = _split(tr, t, index)
    if indices is None:
        tr.abort(why)
    view = t if _trivial(basic) else tr.record_getitem(t, basic)
    return lookup("aten::index.Tensor").entry(view, indices)


def traced_setitem(self, index, value):
    """``SymbolicTensor.__setitem__``: ``self[index] = value`` with an advanced index, recorded as
    ``index_put`` (see the module docstring); anything else aborts."""
    sym = self.__dict__.get(TRACE_MARK)
    if sym is None or sym[0].in_meta:
        return Tensor.__setitem__(self, index, value)
    tr, vid = sym
    basic, indices = _split(tr, self, index)
    if indices is None or not _trivial(basic):
        tr.abort("item assignment with a basic index (a write into a view) is not traced yet")
    producer = next((n for n in reversed(tr.graph.nodes) if vid in n.outs), None)
    if producer is None or is_view(producer) or any(is_view(n) and vid in n.inputs() for n in tr.graph.nodes):
        tr.abort("item assignment into a function input, a view, or a tensor viewed elsewhere is not traced "
                 "yet (other tensors share its storage)")
    if self.requires_grad:
        tr.abort("item assignment into a tensor that requires grad is not traced yet")
    values = value if isinstance(value, Tensor) else tensor(value, dtype=self.dtype)
    if values.dtype is not self.dtype:
        values = values.to(self.dtype)
    out = lookup("aten::index_put").entry(self, indices, values, False)
    self.__dict__[TRACE_MARK] = out.__dict__[TRACE_MARK]
