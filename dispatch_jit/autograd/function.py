"""``dj.autograd.Function``: user-defined forward and backward.

The Python form of the seed's MyAddFunction: ``apply`` runs ``forward``
with grad recording off, then records one node whose backward calls the
user's ``backward(ctx, *grads)``.
"""

from __future__ import annotations

import weakref

from ..creation import zeros
from ..errors import AutogradError
from ..tensor import trace_of
from .grad_mode import is_grad_enabled, no_grad
from .graph import SavedTensor, edge_of, mark_output, node_class
from .kernel import grad_to_shape

__all__ = ["Function", "FunctionCtx", "record_node"]


class FunctionCtx:
    """What ``forward`` and ``backward`` share: saved tensors and flags."""

    def __init__(self, needs_input_grad: tuple):
        self._node_ref = None
        self.needs_input_grad = needs_input_grad
        self._saved: tuple = ()
        self.materialize_grads = True

    # The node's formula holds the ctx: a strong reference back would make a
    # cycle that only the cyclic GC could free, so the node is held weakly.
    @property
    def _node(self):
        return self._node_ref() if self._node_ref is not None else None

    @_node.setter
    def _node(self, node):
        self._node_ref = weakref.ref(node) if node is not None else None

    def set_materialize_grads(self, value: bool) -> None:
        """By default an output that received no gradient gets zeros in
        ``backward``; ``False`` passes None instead (as PyTorch)."""
        self.materialize_grads = bool(value)

    def save_for_backward(self, *tensors) -> None:
        self._saved = tuple(SavedTensor(t, name=f"saved tensor {i}") if t is not None else None
                            for i, t in enumerate(tensors))

    @property
    def saved_tensors(self) -> tuple:
        # as in PyTorch, a freed graph fails only where backward reads what forward saved
        if self._saved and self._node is not None and self._node.released:
            raise AutogradError("Trying to backward through the graph a second time: the saved tensors of this "
                                "Function were freed; specify retain_graph=True on the first backward")
        return tuple(s.unpack(self._node) if s is not None else None for s in self._saved)


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grads)``.

    >>> import dispatch_jit as dj
    >>> class MyAdd(dj.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, a, b):
    ...         return a + b
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         return g, g
    >>> w = dj.tensor([1.0, 2.0], requires_grad=True)
    >>> MyAdd.apply(w, dj.tensor([3.0, 4.0])).sum().backward(); w.grad
    tensor([1., 1.])
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("a Function subclass must define backward(ctx, *grads) to be differentiated")

    @classmethod
    def apply(cls, *args, **kwargs):
        tensor_args = [a for a in args if hasattr(a, "_sig")]
        edges = tuple(edge_of(a) if hasattr(a, "_sig") else None for a in args)
        record = is_grad_enabled() and any(e is not None for e in edges)
        ctx = FunctionCtx(tuple(e is not None for e in edges))
        for a in tensor_args:
            # traced by dj.compile (compiler/trace/fallback.py): the trace must know its backward is custom
            trace = trace_of(a)
            if trace is not None:
                trace.function_applied(cls.__name__)
                break
        with no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        if not record:
            return out
        outputs = out if isinstance(out, tuple) else (out,)
        in_shapes = tuple(a._data.shape if hasattr(a, "_sig") else None for a in args)
        record_node(node_class(f"{cls.__name__}Backward"), cls.__name__, edges, outputs, ctx, cls.backward,
                    _gather(cls, len(args), in_shapes))
        del tensor_args
        return out


def record_node(node_cls: type, op_name: str, edges: tuple, outputs: tuple, ctx: FunctionCtx, backward, gather):
    """Record the one node of a user-written backward, the way both ``Function.apply`` and
    ``custom_op``'s ``register_autograd`` record theirs: a ``node_cls`` node with ``edges``,
    the grad_fn of each floating-point output, held weakly by ``ctx``.  Its formula passes
    zeros for outputs that got no gradient (unless ``ctx.set_materialize_grads(False)``),
    calls ``backward(ctx, *grads)`` and returns ``gather(result, needs)``: one gradient per
    edge, checked by the caller's rules.  Returns the node."""
    metas = tuple((o._data.shape, o.dtype) if hasattr(o, "_sig") else None for o in outputs)

    def formula(grads, saved, c, needs):
        if ctx.materialize_grads and any(g is None for g in grads):
            # outputs that took no part in the loss: zeros, so backward can do arithmetic on every grad
            grads = tuple(zeros(*m[0], dtype=m[1]) if g is None and m is not None else g
                          for g, m in zip(grads, metas))
        return gather(backward(ctx, *grads), needs)

    node = node_cls(formula, edges, {}, {}, op_name)
    node.metadata = {"num_outputs": len(outputs)}
    ctx._node = node
    for i, o in enumerate(outputs):
        if hasattr(o, "_sig") and o.dtype.category >= 2:
            mark_output(o, node, i)
    return node


def _gather(cls, nargs, in_shapes):
    """A Function's gradients: one per argument, each summed back to its argument's shape."""
    def gather(res, needs):
        if not isinstance(res, tuple):
            res = (res,)
        if len(res) != nargs:
            raise AutogradError(f"{cls.__name__}.backward returned {len(res)} gradients, but forward took "
                                f"{nargs} arguments; return one per argument (None where there is none)")
        out = []
        for i, (g, shape, need) in enumerate(zip(res, in_shapes, needs)):
            if g is None or not need:
                out.append(None)
                continue
            out.append(grad_to_shape(g, shape, f"{cls.__name__}.backward", f"argument {i}"))
        return tuple(out)
    return gather
