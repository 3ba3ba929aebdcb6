"""What a CompiledFunction's cache holds per call signature: a ``CompiledEntry`` (the fused
plan, and a generated runner once its loop is compiled), a ``GradEntry`` (the same under one
autograd node, ``Compiled``, whose backward replays the traced graph eagerly), or an
``EagerEntry`` (the call runs eagerly, and the entry says why)."""

from __future__ import annotations

from dispatch_jit import autograd as _autograd
from dispatch_jit.autograd import enable_grad

from .fastpath import NEVER, NOT_YET, fast_runner
from .ir import Var, rebuild
from .plan import Plan
from .steps import Stats
from .trace import flat_tensors as _tensors

__all__ = ["CompiledEntry", "GradEntry", "EagerEntry", "Compiled", "grad_obstacle"]


class CompiledEntry:
    """A signature that runs its fused plan."""

    def __init__(self, graph, optimized, plan, notes, direct: bool = False, paths: tuple = ()):
        self.graph, self.optimized, self.plan, self.notes = graph, optimized, plan, notes
        self.reason = ""
        # the key says every argument is a positional tensor, and so is every capture: they are the
        # plan's inputs as they are, and a plan of one fused loop gets a generated runner
        # (fastpath.py) once its loop is compiled
        self.direct = direct
        self.fast = NOT_YET if direct else NEVER
        self.paths = paths       # where runtime scalar i is: ("a", position) or ("k", name)

    def inputs(self, args, kwargs, caps) -> list:
        """The plan's input tensors: the arguments', then those the captures read (guards.py)."""
        out = _tensors((args, kwargs), [])
        return _tensors(caps, out) if caps else out

    def scalars(self, args, kwargs) -> list:
        return [args[k] if where == "a" else kwargs[k] for where, k in self.paths]

    def run(self, tensors, scalars=()):
        return self.plan.run(tensors, scalars)

    def __call__(self, fn, args, kwargs, caps):
        fast = self.fast
        if fast:
            return fast(*args, *caps)
        if self.direct:
            out = self.plan.run(args + caps)
        else:
            out = self.plan.run(self.inputs(args, kwargs, caps), self.scalars(args, kwargs) if self.paths else ())
        if fast is NOT_YET:
            self.fast = fast_runner(self.plan)
        return out


class Compiled(_autograd.Function):
    """One autograd node for a whole compiled call (its node reads ``CompiledBackward``).

    ``apply(entry, fn, args, kwargs, *tensors)``: forward runs the fused plan
    (grad recording is off) and returns its tensors flat; backward replays the
    traced graph (every op as the trace recorded it, unfused) eagerly on
    detached copies of the inputs under ``enable_grad`` and returns
    ``dj.autograd.grad`` of the outputs.  Replaying the graph, not calling
    ``fn`` again, is what makes the backward use what the forward used: the
    captured tensors the forward read (saved with the arguments), the guarded
    values its trace was made for and the forward's runtime scalars, even if
    a global was rebound in between (eager mode's backward uses the values
    saved at forward time too)."""

    @staticmethod
    def forward(ctx, entry, fn, args, kwargs, *tensors):
        ctx.entry, ctx.scalars = entry, entry.scalars(args, kwargs)
        ctx.save_for_backward(*tensors)
        return tuple(_tensors(entry.run(list(tensors), ctx.scalars), []))

    @staticmethod
    def backward(ctx, *grads):
        tensors = ctx.saved_tensors
        needs = ctx.needs_input_grad[4:]
        with enable_grad():
            xs = [t.detach().requires_grad_(True) if need else t.detach() for t, need in zip(tensors, needs)]
            out = ctx.entry.replay(xs, ctx.scalars)
            pairs = [(o, g) for o, g in zip(_tensors(out, []), grads) if g is not None and o.requires_grad]
            wrt = [x for x, need in zip(xs, needs) if need]
            res = iter(_autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs], allow_unused=True)
                       if pairs and wrt else [None] * len(wrt))
        return (None, None, None, None) + tuple(next(res) if need else None for need in needs)


class GradEntry(CompiledEntry):
    """A compiled signature whose inputs require grad: fused forward, one autograd node."""

    reason = ""
    _replay = None

    def replay(self, tensors, scalars):
        """The traced graph run op by op through the eager dispatcher (the backward's forward)."""
        plan = self._replay
        if plan is None:
            plan = self._replay = Plan(self.graph, Stats(), False)     # no fused nodes: eager steps only
        return plan.run(tensors, scalars)

    def __call__(self, fn, args, kwargs, caps):
        flat = Compiled.apply(self, fn, args, kwargs, *self.inputs(args, kwargs, caps))
        return _fill(self.plan.outputs, iter(flat))


class EagerEntry:
    """A signature that runs eagerly, and why (``CompiledFunction.explain``)."""

    def __init__(self, reason: str):
        self.reason = reason
        self.calls = 0

    def __call__(self, fn, args, kwargs, caps=()):
        self.calls += 1
        return fn(*args, **kwargs)


def grad_obstacle(graph) -> str:
    """Why one autograd node cannot stand for the whole graph ('' if it can)."""
    outs = _flat_vars(graph.outputs, [])
    consts = {v for n in graph.nodes if n.op == "const" for v in n.outs}
    if any(v in graph.inputs for v in outs):
        return "the function returns an input tensor itself"
    if any(v in consts for v in outs):
        return "the function returns a captured tensor"
    if len(set(outs)) != len(outs):
        return "the function returns one tensor twice"
    if graph.functions:
        # the backward replays the traced ops through the derivative table: a Function's own
        # backward (max(x, dim)'s index-only gradient, a user's custom rule) would be lost
        return f"it applies dj.autograd.Function {', '.join(sorted(set(graph.functions)))}"
    return ""


def _fill(x, it):
    """The plan's output structure with its values (Vars) taken in order from ``it``."""
    if isinstance(x, Var):
        return next(it)
    if isinstance(x, (list, tuple)):
        return rebuild(x, (_fill(y, it) for y in x))
    if isinstance(x, dict):
        return {k: _fill(v, it) for k, v in x.items()}
    return x


def _flat_vars(x, out: list) -> list:
    if isinstance(x, Var):
        out.append(x.id)
    elif isinstance(x, (list, tuple)):
        for y in x:
            _flat_vars(y, out)
    elif isinstance(x, dict):
        for y in x.values():
            _flat_vars(y, out)
    return out
