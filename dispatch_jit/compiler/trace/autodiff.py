"""Autograd on a trace's values: ``dj.func.grad``, ``vjp`` (and what is built on them) inside a
compiled function, the forward and its backward recorded as one graph.

A transform's level makes its inputs differentiable aliases (func/transforms.py ``_lift``); in a
trace they are symbolic tensors that require grad.  The Tracer key sits above the Autograd keys,
so a call on them lands in the Tracer's fallback, which records the op and then does what eager
mode's Autograd kernel does after running it: ``attach`` the node of the op's derivative row to
the symbolic result (``AutogradKernel.attach``, the same node class, edges, saved tensors and
ctx).  The transform's ``autograd.grad`` then runs the eager engine over those nodes, and every
op the formulas call on symbolic tensors is recorded too.

Why the engine on traced values rather than joint.py's walk over the recorded graph: the walk
sees the physical ops, after vmap's batching rules ran, where the gradient of an unbatched
parameter is summed over the batch; per-example gradients need the backward to run at the
grad level, on the BatchedTensors of vmap's level, as eager mode does.  A call on a
BatchedTensor reaches the Autograd key by itself (the fallback redispatches it below the
Tracer), so only the unbatched calls need ``attach``, and the levels compose as in eager mode:
grad inside vmap records over the BatchedTensors (the backward's ops go through the batching
rules, whose physical ops are recorded), grad of vmap over the values.

What the engine reads of a symbolic tensor itself are its class's methods (symbolic_tensor.py):
``detach()`` (an alias of the same value in a forward trace, ``Tracer.FORWARD``), the saved twin
of an op's output, indexing (which aborts on a value that requires grad).
"""

from __future__ import annotations

from dispatch_jit.autograd.grad_mode import is_grad_enabled
from dispatch_jit.autograd.kernel import AutogradKernel, layout
from dispatch_jit.keys import DispatchKey
from dispatch_jit.registry import FALLTHROUGH_KINDS
from dispatch_jit.schema import bind
from dispatch_jit.tensor import TRACE_MARK, Tensor

from .symbolic_tensor import SymbolicTensor

__all__ = ["needs_grad", "attach", "returns_grad", "DENSE"]

_K = DispatchKey


def needs_grad(args, kwargs) -> bool:
    """Whether a recorded call would have reached eager mode's Autograd key: grad mode is on and
    a symbolic argument requires grad (only a func transform's alias or what was computed from one)."""
    if not is_grad_enabled():
        return False
    for x in args:
        if isinstance(x, Tensor):
            if x.__dict__.get("requires_grad") and TRACE_MARK in x.__dict__:
                return True
        elif isinstance(x, (list, tuple)):
            if any(isinstance(y, Tensor) and y.__dict__.get("requires_grad") and TRACE_MARK in y.__dict__
                   for y in x):
                return True
    return any(isinstance(v, Tensor) and v.__dict__.get("requires_grad") and TRACE_MARK in v.__dict__
               for v in kwargs.values())


def attach(tracer, op, args, kwargs, out, dense):
    """After ``tracer`` recorded ``op``'s call as ``out``: the Autograd kernel's node on ``out``
    (``dense``: the classes of tensors that can require grad, the symbolic ones included).  A
    decomposition's pieces have their own nodes; an op without a derivative row aborts the trace
    (the call then runs eagerly and raises or differentiates as eager mode does)."""
    entry = op._entry
    if isinstance(out, Tensor) and out.is_cuda:
        tracer.abort("dj.func.grad/vjp of CUDA tensors inside a compiled function is traced for CPU tensors only")
    if entry.decomposition(_K.CPU) is not None:
        return out
    fn, kind = entry.table[_K.AutogradCPU.value]
    if getattr(fn, "dense_alias", False):      # a router whose dense case is the alias kernel
        alias = entry.kernels.get(_K.Autograd)
        fn = alias.fn if alias is not None else fn
    if kind in FALLTHROUGH_KINDS and not isinstance(fn, AutogradKernel):
        return out
    if not isinstance(fn, AutogradKernel):
        tracer.abort(f"{op.name()} has no derivative formula to trace ({kind.value} at AutogradCPU) inside "
                     f"dj.func.grad/vjp")
    if isinstance(out, (tuple, list)):
        tracer.abort(f"{op.name()} has several outputs (not differentiated inside a traced dj.func.grad/vjp)")
    schema = entry.schema
    bound = bind(schema, tuple(args), dict(kwargs), is_tensor=lambda v: isinstance(v, Tensor))
    names = [a.name for a in schema.arguments]
    return fn.attach(layout(schema), op.name(), tuple(bound[n] for n in names), out, dense)


def returns_grad(out: list, inputs: list):
    """Why a trace whose flat outputs are ``out`` (``inputs``: the graph's input value ids) cannot
    stand for the call, or None: a symbolic output that requires grad (a transform's
    differentiable value returned undetached): the plan's outputs never require grad, eager
    mode's would; or a ``detach()``'s alias returned where the plan would return the input or
    another output object itself (eager mode's ``detach()`` is a new tensor over the same memory)."""
    seen: dict = {}
    for t in out:
        d = t.__dict__
        if TRACE_MARK not in d:
            continue
        if d.get("requires_grad"):
            return ("the function returns a value that requires grad from inside a dj.func transform "
                    "(the compiled plan's outputs do not require grad)")
        vid = d[TRACE_MARK][1]
        other = seen.setdefault(vid, t)
        if d.get("_detached") and (vid in inputs or other is not t) or \
                other is not t and other.__dict__.get("_detached"):
            return ("the function returns a detach()ed value that is also an input or another output "
                    "(eager mode returns a new tensor over its memory)")
    return None


DENSE = (Tensor, SymbolicTensor)     # the classes of tensors attach() lets require grad
