"""A tracer whose symbolic tensors have the sizes of one call: what tracing a backward needs.

The derivative table's formulas (kernels/derivatives.py) and the Autograd kernel's own
steps read sizes in Python: ``sum_to`` compares a gradient's shape with its input's,
a reduction's gradient re-expands to ``ctx["shapes"][0]``, mean divides by a count.
A plain trace has none (sizes are not in ``dj.compile``'s key), so the joint
forward+backward graph (joint.py) is traced by a ``ShapedTracer``, once per set of
input sizes: each placeholder is a zero-strided array of the value's real shape
(no memory behind it), and ``.shape``, ``.size()``, ``.numel()`` and ``len()``
answer instead of aborting.  Data reads still abort, as in any trace.

Sizes of new values: an elementwise op broadcasts its tensor operands' shapes; an op
whose type came from running it on the placeholders (reductions, matmul) has the
result's; a view (whose type comes from views.py) is run on the placeholders, which
costs nothing (zero strides, no copy).
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.broadcast import broadcast_shapes
from dispatch_jit.dispatcher import ExcludeDispatchKeyGuard
from dispatch_jit.keys import DispatchKey
from dispatch_jit.signature import CONTIGUOUS_BIT
from dispatch_jit.tensor import TRACE_MARK, Tensor, wrap

from ..elementwise import scalar_op_of
from ..graph.ir import Var, vars_in
from ..graph.views import is_view
from .symbolic import Tracer

__all__ = ["ShapedTracer"]


def _flat(x) -> list:
    return list(x) if isinstance(x, (tuple, list)) else [x]


class ShapedTracer(Tracer):
    """A ``Tracer`` whose values have concrete sizes (``shapes``: value id -> shape)."""

    shaped = True
    lifts = False        # see lift()

    def __init__(self):
        super().__init__()
        self.shapes: dict[int, tuple] = self.graph.shapes
        self.last_meta = None

    def place(self, t: Tensor, shape) -> Tensor:
        """Give symbolic ``t`` the sizes ``shape``: a zero-strided zero array (no memory behind
        it; its signature says non-contiguous, so no kernel walks it as a flat buffer)."""
        shape = tuple(shape)
        t._data = np.broadcast_to(np.zeros((), t._data.dtype), shape)
        t._sig &= ~CONTIGUOUS_BIT
        self.shapes[t.__dict__[TRACE_MARK][1]] = shape
        return t

    def shaped_input(self, t: Tensor) -> Tensor:
        """A graph input standing for real tensor ``t``, with its sizes."""
        return self.place(self.add_input(t), t._data.shape)

    def new_input(self, ty, shape) -> Tensor:
        """A graph input of type ``ty`` and sizes ``shape`` (an output's incoming gradient)."""
        vid = self.graph.new_value(ty)
        self.graph.inputs.append(vid)
        return self.place(self.symbolic(ty, vid), shape)

    def shape_of(self, x) -> tuple:
        return self.shapes[x.__dict__[TRACE_MARK][1]] if TRACE_MARK in x.__dict__ else tuple(x._data.shape)

    def to_arg(self, x):
        """A real tensor (a constant the formulas made, ``zeros_like(g)``) becomes one const node,
        found again by identity when it is used again."""
        if isinstance(x, Tensor) and TRACE_MARK not in x.__dict__ and id(x) not in self.captured:
            v = super().to_arg(x)
            self.captured[id(x)] = (x, v.id, "a constant")
            self.shapes[v.id] = tuple(x._data.shape)
            return v
        return super().to_arg(x)

    def lift(self, x: Tensor):
        if self.lifts:       # a sized forward trace (fallback.trace): a parameter as Tracer lifts it
            v = super().lift(x)
            self.shapes[v.id] = tuple(x._data.shape)
            return v
        # the joint graph's inputs are fixed before its walk: a constant that requires grad is
        # caught by the entry's check (owners.py) before it gets here
        self.abort("a constant of the traced graph requires grad")

    def view_type(self, op, gargs: tuple, gkwargs: dict):
        """A view whose rank depends on the sizes (``squeeze(dim)``, as autograd's matmul formula of
        a vector operand calls it) is typed by its kernel on the placed arrays: this trace has the
        sizes, which the call's key holds."""
        ty = super().view_type(op, gargs, gkwargs)
        return None if isinstance(ty, str) and gargs[0].id in self.shapes else ty

    def _record(self, op, args: tuple, kwargs: dict):
        self.last_meta = None
        out = super()._record(op, args, kwargs)
        outs = _flat(out)
        if all(o.__dict__.get(TRACE_MARK, (None, None))[1] in self.shapes for o in outs):
            return out          # a decomposition's pieces were placed as they were recorded
        if self.last_meta is not None:
            shapes = [m._data.shape for m in _flat(self.last_meta)]
        elif scalar_op_of(op) is not None:
            shapes = [broadcast_shapes(*[self.shape_of(a) for a in args + tuple(kwargs.values())
                                         if isinstance(a, Tensor)])]
        else:
            shapes = [m._data.shape for m in _flat(self._run(op, args, kwargs))]
        for o, s in zip(outs, shapes):
            self.place(o, s)
        return out

    def _run(self, op, args, kwargs):
        self.in_meta += 1
        try:
            with ExcludeDispatchKeyGuard(DispatchKey.Tracer), np.errstate(all="ignore"):
                return op(*args, **kwargs)
        finally:
            self.in_meta -= 1

    def record_getitem(self, t: Tensor, index):
        out = super().record_getitem(t, index)
        if out.__dict__[TRACE_MARK][1] in self.shapes:   # advanced: recorded as ops, placed by _record
            return out
        a = t._data[index]
        if not isinstance(a, np.ndarray):      # every index an integer: a 0-d view, as eager's getitem
            a = t._data[(index if isinstance(index, tuple) else (index,)) + (Ellipsis,)]
        return self.place(out, a.shape)

    def contiguous(self, t: Tensor) -> Tensor:
        """``t.contiguous()`` of a view, as eager mode answers it: the view's layout follows from
        its chain of views over a value whose layout is known (an op's result is C-contiguous, an
        input's contiguity is part of the key), replayed on a one-byte probe of that value's sizes:
        ``t`` itself where the replayed view is contiguous, else a recorded clone.  (A plain trace
        has no sizes, so there it aborts.)"""
        vid = t.__dict__[TRACE_MARK][1]
        if vid in self.input_contiguous:
            return super().contiguous(t)
        chain, v = [], vid
        producers = {o: n for n in self.graph.nodes for o in n.outs}
        while (node := producers.get(v)) is not None and is_view(node):
            srcs = vars_in((node.args, tuple(node.kwargs.values())))
            if len(srcs) != 1:
                return super().contiguous(t)
            chain.append(node)
            v = srcs[0].id
        if node is None and not self.input_contiguous.get(v, False) or v not in self.shapes:
            return super().contiguous(t)     # a constant, or a non-contiguous input: abort
        probe = wrap(np.empty(self.shapes[v], np.uint8))
        self.in_meta += 1
        try:
            with ExcludeDispatchKeyGuard(DispatchKey.Tracer):
                for node in reversed(chain):
                    args = tuple(probe if isinstance(a, Var) else a for a in node.args)
                    kwargs = {k: probe if isinstance(a, Var) else a for k, a in node.kwargs.items()}
                    probe = node.op(*args, **kwargs)
        finally:
            self.in_meta -= 1
        return t if probe._data.flags.c_contiguous else t.clone()

    def var_shape(self, v: Var) -> tuple:
        return self.shapes[v.id]
