"""Autograd on pending values: a differentiable op whose inputs require grad (grad mode on) is
recorded as if grad were off, and gets the autograd node that eager mode's Autograd kernel
would give it, built by that kernel (``AutogradKernel.attach``: the same derivative row, edges,
saved tensors with their versions, ctx), around the pending result.

So ``loss.backward()`` of a pending loss computes nothing: the engine walks the nodes, whose
formulas run dj ops with grad mode off on the saved (pending) tensors, and those ops are
recorded into the same pending graph; the leaves' ``.grad`` become pending values, and the next
read (the optimizer's step, ``loss.item()``) runs forward and backward as one plan.  An op's
output saved for its backward is saved as a twin pending as the same value
(``LazyTensor._saved_twin``), which the flush gives the same array.

Semantics are eager mode's because the pieces are eager mode's: the engine, the nodes and
their formulas are the same code; hooks run on the (pending) gradients they are given (reading
their data forces the graph); ``retain_graph`` and ``create_graph`` are the engine's (with
``create_graph`` the formulas run with grad mode on, and are recorded here in turn); an in-place
op on a saved tensor is never recorded, so it runs eagerly (forcing) and bumps the version that
the node's unpack checks.

Not recorded here (they run eagerly, forcing the values they read, as before): views and basic
indexing of tensors that require grad (autograd's view tracking, ``_base`` and version sharing,
is eager mode's), ops whose Autograd kernel is not an ``AutogradKernel`` (a
``dj.autograd.Function``, custom ops' ``register_autograd``, in-place ops), ops on lists of
tensors, ops with several results, and anything the recorder itself does not record."""

from __future__ import annotations

from dispatch_jit.autograd.kernel import AutogradKernel, layout
from dispatch_jit.keys import DispatchKey
from dispatch_jit.tensor import _AUTOGRAD_SIG_BITS as _AG, Tensor

from ..graph.views import is_view_op
from .state import MISS, state
from .tensor import LazyTensor, Pending, get_slot

_K = DispatchKey
_DENSE = (Tensor, LazyTensor)       # the tensors whose requires_grad the node reads


def requires_grad(args: tuple, kwargs: dict) -> bool:
    """Whether a tensor among the arguments requires grad (its signature has the autograd key)."""
    for x in args:
        if isinstance(x, Tensor) and x._sig & _AG:
            return True
        if (x.__class__ is list or x.__class__ is tuple) and any(isinstance(y, Tensor) and y._sig & _AG for y in x):
            return True
    for x in kwargs.values():
        if isinstance(x, Tensor) and x._sig & _AG:
            return True
    return False


def autograd_of(op):
    """(the op's AutogradKernel, its layout, its keyword-only arguments with defaults) where a
    call may be recorded with its node, else None."""
    how = state.autograd.get(op, MISS)
    if how is MISS:
        how = None
        fn, _ = op._entry.table[_K.AutogradCPU.value]
        if getattr(fn, "dense_alias", False):
            # a router that gives dense operands the Autograd alias kernel (matmul's, for its
            # sparse layouts): only plain dense tensors are recorded, so that kernel is eager mode's
            k = op._entry.kernels.get(_K.Autograd)
            fn = k.fn if k is not None else None
        sch = op.schema
        if (isinstance(fn, AutogradKernel) and not is_view_op(op) and len(sch.returns) == 1
                and sch.returns[0].type.base == "Tensor" and not sch.returns[0].type.is_list):
            lay = layout(sch)
            if not lay[1]:
                kwonly = tuple((a.name, a.default) for a in sch.arguments if a.kwarg_only)
                how = (fn, lay, kwonly)
        state.autograd[op] = how
    return how


def record(r, op, args: tuple, kwargs: dict):
    """Record ``op(*args, **kwargs)``, some of whose tensors require grad, into recorder ``r``
    with its autograd node: the (pending) result, or None: run it eagerly."""
    how = autograd_of(op)
    if how is None:
        return None
    kernel, lay, kwonly = how
    full = args + tuple([kwargs.get(n, d) for n, d in kwonly])
    if lay[2] is not None and full[lay[2]] is not None:
        return None                      # out=: eager mode raises its error
    with r.lock:
        out = r._record(op, args, kwargs)
        if out is None:
            return None
        state.counters["grad_nodes"] += 1
        out = kernel.attach(lay, op._entry.name, full, out, _DENSE)
        fn = out.__dict__.get("grad_fn")
        z = get_slot(out, Tensor)
        if fn is not None and z.__class__ is Pending and z.recorder is r:
            # which record of which graph made it: backward.py replays a backward of such nodes
            fn.__dict__["_lazy_at"] = (r.records, z.vid)
        return out
