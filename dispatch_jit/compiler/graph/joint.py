"""The joint forward+backward graph of a compiled call whose inputs require grad.

AOTAutograd's approach: the derivative table (kernels/derivatives.py) writes each
formula with dispatch_jit ops, so running a formula on a tracer's symbolic tensors
records the backward's ops into a graph.  ``build_joint`` does that for one set of
input sizes (the formulas read sizes; shaped.py):

1. replay the traced forward graph through a ``ShapedTracer`` (the same ops on
   placeholders with the call's sizes), noting which values require grad as eager
   mode would: an input that requires grad, or a differentiable (floating) output of
   an op with an Autograd formula that reads one;
2. give each output that requires grad an incoming gradient (a new graph input);
3. walk the forward nodes backwards and run, for each node whose output got a
   gradient, the Autograd kernel's own steps through the traced ops: the row's
   formula (``AutogradKernel.formula``: the gradients, summed back over broadcast
   dimensions, cast to each input's dtype), then the accumulation into each input's
   gradient (``add``, where a value is used twice).

The result, ``Joint``, is one graph: forward inputs then incoming gradients in,
``(forward outputs, input gradients)`` out.  partition.py splits it into the two
plans.  Whatever the walk cannot trace (an op without an Autograd formula, a
``dj.autograd.Function``, a formula that reads data or uses a runtime scalar's value
in Python, ...) makes ``build_joint`` return the reason instead: that call's backward
then replays the forward eagerly (entries.Compiled) and ``explain()`` says why.
"""

from __future__ import annotations

from dataclasses import dataclass

from dispatch_jit.autograd.kernel import AutogradKernel
from dispatch_jit.dispatcher import IncludeDispatchKeyGuard
from dispatch_jit.keys import DispatchKey
from dispatch_jit.ops import entries
from dispatch_jit.registry import FALLTHROUGH_KINDS
from dispatch_jit.schema import bind
from dispatch_jit.signature import DTYPE_MASK, DTYPE_SHIFT
from dispatch_jit.tensor import TRACE_MARK, Tensor

from ..run.steps import subst
from ..trace.fallback import TRACED_SCALARS, active, flat_tensors, misplaced_scalars
from ..trace.shaped import ShapedTracer
from ..trace.symbolic import TraceAbort
from .ir import Graph, Var, is_runtime_scalar, rebuild, runtime_scalar, vars_in
from .views import GETITEM

__all__ = ["Joint", "build_joint", "grad_rule", "walk_back"]

_K = DispatchKey
A = entries("aten")


@dataclass
class Joint:
    """The joint graph and what the partition needs to know about it."""

    graph: Graph              # inputs: the forward's, then one gradient per entry of ``grad_of``
    n_forward_inputs: int
    grad_of: list             # flat output positions that receive a gradient, in grad-input order
    shapes: dict              # value id -> shape (this call's sizes)
    n_outputs: int            # flat forward outputs


def grad_rule(op):
    """The Autograd kernel eager mode runs for ``op`` on CPU tensors: an ``AutogradKernel``
    (a derivative row), "none" (a fallthrough: its outputs never require grad), or the reason
    why there is no traceable rule."""
    fn, kind = op._entry.table[_K.AutogradCPU.value]
    if getattr(fn, "dense_alias", False):      # a router whose dense case is the alias kernel
        alias = op._entry.kernels.get(_K.Autograd)
        fn = alias.fn if alias is not None else fn
    if isinstance(fn, AutogradKernel):
        return fn
    if op.name() in LIST_RULES:
        return LIST_RULES[op.name()]
    if kind in FALLTHROUGH_KINDS:
        return "none"
    return f"{op.name()} has no derivative formula to trace ({kind.value} at AutogradCPU)"


def _subst(x, env, scalars):
    if isinstance(x, Var):
        return env[x.id]
    if is_runtime_scalar(x):
        return scalars[x.index]
    if isinstance(x, (list, tuple)):
        return rebuild(x, (_subst(y, env, scalars) for y in x))
    if isinstance(x, dict):
        return {k: _subst(v, env, scalars) for k, v in x.items()}
    return x


def _vid(t) -> int | None:
    sym = t.__dict__.get(TRACE_MARK) if isinstance(t, Tensor) else None
    return None if sym is None else sym[1]


def _differentiable(t) -> bool:
    return isinstance(t, Tensor) and t.dtype.category >= 2


def build_joint(graph: Graph, inputs: list, needs: list, scalars=()) -> Joint | str:
    """The joint graph of ``graph`` for the sizes of ``inputs`` (its real input tensors, of
    which ``needs[i]`` require grad), or why it cannot be traced.  ``scalars``: the call's
    runtime scalars (only their types matter: the graph reads them at every call)."""
    if any(t.is_cuda for t in inputs):
        return "a CUDA input: the fused backward is traced for CPU tensors only"
    if graph.functions:
        return f"it applies dj.autograd.Function {', '.join(sorted(set(graph.functions)))} (a custom backward)"
    tracer = ShapedTracer()
    # runtime scalars as stand-ins that notice a formula using their value in Python (pow's
    # ``y - 1``): that value would be baked into the backward
    stand_ins = []
    for i, x in enumerate(scalars):
        s = runtime_scalar(x, i, TRACED_SCALARS[type(x) if type(x) in TRACED_SCALARS else float])
        s._tracer = tracer
        stand_ins.append(s)
    try:
        with IncludeDispatchKeyGuard(_K.Tracer), active(tracer):
            joint = _trace_joint(tracer, graph, inputs, needs, stand_ins)
    except TraceAbort as e:
        return f"tracing the backward aborted: {e.reason}"
    finally:
        for s in stand_ins:
            s._tracer = None
        tracer.finish()
    if isinstance(joint, str):
        return joint
    if tracer.tainted:
        return f"a derivative formula uses the value of a runtime scalar in Python ({next(iter(tracer.tainted.values()))})"
    bad = misplaced_scalars(joint.graph)
    if bad:
        return f"a runtime scalar reaches the backward as a constant ({next(iter(bad.values()))})"
    joint.graph.check()
    return joint


def _trace_joint(tracer, graph, inputs, needs, scalars):
    env: dict = {}
    grad: set = set()           # joint value ids that require grad
    for v, t, need in zip(graph.inputs, inputs, needs):
        s = env[v] = tracer.shaped_input(t)
        if need:
            grad.add(_vid(s))
    n_inputs = len(graph.inputs)
    # 1. the forward, replayed with sizes; records per node what its backward needs
    steps = []
    for n in graph.nodes:
        if n.op == "const":
            env[n.outs[0]] = n.value
            tracer.to_arg(n.value)
            continue
        args, kwargs = _subst(n.args, env, scalars), _subst(n.kwargs, env, scalars)
        if n.op is GETITEM:
            out = tracer.record_getitem(args[0], args[1])
            rule = "getitem"
        else:
            out = tracer.record(n.op, args, kwargs)
            rule = grad_rule(n.op)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        for v, o in zip(n.outs, outs):
            env[v] = o
        reads = [_vid(t) for t in flat_tensors((args, kwargs), [])]
        if not any(r in grad for r in reads):
            continue
        if isinstance(rule, str) and rule not in ("none", "getitem"):
            return rule
        if rule == "none":
            continue
        if rule == "getitem":
            return "basic indexing (t[...]) of a value that requires grad has no traceable backward rule yet"
        if len(outs) != 1:
            return f"{n.name} has several outputs"
        if not _differentiable(outs[0]):
            continue
        grad.add(_vid(outs[0]))
        steps.append((n, rule, args, kwargs, outs[0]))
    # 2. one incoming gradient per flat output that requires grad
    flat_out = [env[v.id] if isinstance(v, Var) else v for v in vars_in(graph.outputs)]
    grads: dict[int, Tensor] = {}
    grad_of = []
    for i, o in enumerate(flat_out):
        vid = _vid(o)
        if vid in grad and _differentiable(o):
            gi = tracer.new_input(tracer.graph.types[vid], tracer.shapes[vid])
            grad_of.append(i)
            grads[vid] = _accumulate(grads.get(vid), gi)
    # 3. the backward: each recorded node's formula, newest first
    walk_back(tracer, steps, grads, grad)
    in_grads = tuple(grads.get(_vid(env[v])) if need else None for v, need in zip(graph.inputs, needs))
    tracer.graph.outputs = (tracer.to_arg(subst(graph.outputs, env)), tracer.to_arg(in_grads))
    return Joint(tracer.graph, n_inputs, grad_of, tracer.shapes, len(flat_out))


def walk_back(tracer, steps, grads: dict, grad: set) -> None:
    """The backward walk on ``tracer``'s symbolic tensors: for each recorded forward step
    ``(node, rule, args, kwargs, out)``, newest first, whose output has a gradient in ``grads``
    (value id -> symbolic gradient), its formula's gradients added into ``grads`` under the ids
    of its inputs that require grad (``grad``).  The whole-step trace (training/functionalize.py) runs it too."""
    for n, rule, args, kwargs, out in reversed(steps):
        g = grads.pop(_vid(out), None)
        if g is None:
            continue
        for t, gi in _node_grads(tracer, n, rule, args, kwargs, out, g, grad):
            vid = _vid(t)
            grads[vid] = _accumulate(grads.get(vid), gi)


def _index_grads(tracer, args, kwargs, g, grad):
    """``index``'s formula (kernels/indexing/grad.py's IndexBackward): ``self``'s gradient is ``g``
    put, accumulating, into zeros of its sizes; the indices get none."""
    from dispatch_jit.creation import zeros
    x = args[0]
    if _vid(x) not in grad:
        return []
    indices = list(args[1] if len(args) > 1 else kwargs["indices"])
    return [(x, A.index_put(zeros(*tracer.shape_of(x), dtype=g.dtype, device=g.device), indices, g, True))]


# ops whose Autograd kernel records a node of its own (an index list beside self, which a row of
# the derivative table cannot describe): their formulas for the traced backward
LIST_RULES = {"aten::index.Tensor": _index_grads}


def _node_grads(tracer, n, rule, args, kwargs, out, g, grad):
    """(input tensor, its gradient) for each input of ``n`` that requires grad: the Autograd
    kernel's recording (kernel.py ``run``) and its node's formula, on the traced tensors."""
    if not isinstance(rule, AutogradKernel):      # LIST_RULES
        return rule(tracer, args, kwargs, g, grad)
    schema = n.op._entry.schema
    bound = bind(schema, tuple(args), dict(kwargs), is_tensor=lambda v: isinstance(v, Tensor))
    arguments = schema.arguments
    lists = [a.name for a in arguments if a.type.is_list and a.type.is_tensor_like]
    if lists:
        tensors = list(bound[lists[0]])
    else:
        tensors = [bound[a.name] for a in arguments if a.type.is_tensor_like and a.name != "out"]
    needs = [isinstance(t, Tensor) and _vid(t) in grad for t in tensors]
    d = rule.d
    saved = {}
    for name in d.saves_for(needs):
        saved[name] = out if name == "result" else bound[name]
    ctx = {a.name: bound[a.name] for a in arguments if not a.type.is_tensor_like}
    ctx["shapes"] = [tracer.shape_of(t) if isinstance(t, Tensor) else None for t in tensors]
    ctx["dtypes"] = [(t._sig >> DTYPE_SHIFT) & DTYPE_MASK if isinstance(t, Tensor) else None for t in tensors]
    res = rule.formula((g,), saved, ctx, needs)
    return [(t, gi) for t, gi, need in zip(tensors, res, needs) if need and gi is not None]


def _accumulate(old, g):
    # the engine's accumulation: a value used twice gets the sum of its gradients
    return g if old is None else A.add(old, g)

