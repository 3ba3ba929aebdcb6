"""What a CompiledFunction's cache holds per call signature: a ``CompiledEntry`` (the fused
plan, and a generated runner once its loop is compiled), a ``GradEntry`` (the same under one
autograd node, ``Compiled``, whose backward is a compiled plan of the joint graph's backward,
or else replays the traced graph eagerly), or an
``EagerEntry`` (the call runs eagerly, and the entry says why)."""

from __future__ import annotations

from dispatch_jit import autograd as _autograd
from dispatch_jit.autograd import enable_grad, is_grad_enabled
from dispatch_jit.creation import zeros

from ..graph.ir import Graph, Var, rebuild, vars_in
from ..graph.joint import build_joint
from ..graph.partition import partition
from ..graph.passes import optimize
from ..trace.fallback import flat_tensors as _tensors
from ..trace.owners import make_check, unguarded
from .fastpath import NEVER, NOT_YET, fast_runner
from .plan import Plan
from .steps import Stats

__all__ = ["CompiledEntry", "GradEntry", "EagerEntry", "Compiled", "entry_for", "grad_obstacle"]


class CompiledEntry:
    """A signature that runs its fused plan."""

    # stale(args, caps) -> '' or why the tensors the trace used by identity changed (owners.py)
    stale = None

    def __init__(self, graph, optimized, plan, notes, direct: bool = False, paths: tuple = ()):
        self.graph, self.optimized, self.plan, self.notes = graph, optimized, plan, notes
        self.reason = ""
        self.lifted = list(graph.lifted)     # inputs after the arguments' and the captures'
        # the key says every argument is a positional tensor, and so is every capture: they are the
        # plan's inputs as they are, and a plan of one fused loop gets a generated runner
        # (fastpath.py) once its loop is compiled
        self.direct = direct
        self.fast = NOT_YET if direct else NEVER
        self.paths = paths       # where runtime scalar i is: ("a", position) or ("k", name)

    def inputs(self, args, kwargs, caps) -> list:
        """The plan's input tensors: the arguments', then those the captures read (guards.py)."""
        out = _tensors((args, kwargs), [])
        if caps:
            _tensors(caps, out)
        return out + self.lifted if self.lifted else out

    def scalars(self, args, kwargs) -> list:
        return [args[k] if where == "a" else kwargs[k] for where, k in self.paths]

    def run(self, tensors, scalars=()):
        return self.plan.run(tensors, scalars)

    def explain_lines(self) -> list:
        owners = getattr(self.graph, "owners", {})
        return [f"lifted {owners[id(t)][2]}: requires grad, used by identity: an input of the graph and of its "
                f"backward, read at every call (replaced, or its requires_grad flipped: a retrace)"
                for t in self.lifted if id(t) in owners]

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

    ``apply(entry, fn, args, kwargs, *tensors)``: forward runs the fused plan with grad
    recording off and returns its tensors flat.  Where the entry has a fused backward for
    these sizes (``GradEntry.fused_for``), the forward is the joint graph's forward plan,
    which also returns the values the backward needs (partition.py), and backward runs the
    compiled backward plan on them and the incoming gradients.  Otherwise (and for a
    ``create_graph=True`` backward, which must record a graph) backward replays the traced
    graph (every op as the trace recorded it, unfused) eagerly on detached copies of the
    inputs under ``enable_grad`` and returns ``dj.autograd.grad`` of the outputs.  Either
    way the backward uses what the forward used: the saved values, the captured tensors the
    forward read (saved with the arguments), the guarded values its trace was made for and
    the forward's runtime scalars, even if a global was rebound in between (eager mode's
    backward uses the values saved at forward time too)."""

    @staticmethod
    def forward(ctx, entry, fn, args, kwargs, *tensors):
        ctx.entry, ctx.scalars = entry, entry.scalars(args, kwargs)
        ctx.fused = fused = entry.fused_for(tensors, ctx.scalars)
        ctx.n = len(tensors)
        if fused is None:
            ctx.save_for_backward(*tensors)
            return tuple(_tensors(entry.run(list(tensors), ctx.scalars), []))
        outs, extra = fused.forward.run(list(tensors), ctx.scalars)
        flat = _tensors(outs, [])
        # an output is saved as a detached alias (its version counter shared: an in-place change
        # before backward is caught), so that the output -> node -> saved output cycle never forms
        saved = [tensors[i] if kind == "input" else flat[i].detach() if kind == "output" else extra[i]
                 for kind, i in fused.saved]
        ctx.save_for_backward(*tensors, *saved)
        # which outputs get no gradient is known only in backward: it makes zeros for them itself
        ctx.set_materialize_grads(False)
        ctx.out_meta = [(flat[i]._data.shape, flat[i].dtype) for i in fused.grad_of]
        return tuple(flat)

    @staticmethod
    def backward(ctx, *grads):
        saved = ctx.saved_tensors
        tensors = saved[:ctx.n]
        needs = ctx.needs_input_grad[4:]
        fused = ctx.fused
        if fused is not None and not is_grad_enabled():
            fused.runs += 1
            gs = [grads[i] for i in fused.grad_of]
            got = {j for j, g in enumerate(gs) if g is not None}
            if not got:
                return (None,) * (4 + ctx.n)
            gs = [zeros(*m[0], dtype=m[1]) if g is None else g for g, m in zip(gs, ctx.out_meta)]
            res = fused.backward.run(list(saved[ctx.n:]) + gs, ctx.scalars)
            # as eager mode: an input that only outputs without a gradient reach gets None
            return (None, None, None, None) + tuple(r if need and deps & got else None
                                                    for r, need, deps in zip(res, needs, fused.deps))
        ctx.entry.replays += 1
        double = is_grad_enabled()
        ctx.entry.replay_reason = ("a create_graph=True backward (a compiled plan records no graph)"
                                   if double else ctx.entry.fused_reason)
        with enable_grad():
            # create_graph=True: the replay runs on the inputs themselves, so that the gradients it
            # returns are functions of them (a second backward reaches them); else on detached copies
            xs = list(tensors) if double else [t.detach().requires_grad_(True) if need else t.detach()
                                               for t, need in zip(tensors, needs)]
            out = ctx.entry.replay(xs, ctx.scalars)
            pairs = [(o, g) for o, g in zip(_tensors(out, []), grads) if g is not None and o.requires_grad]
            wrt = [x for x, need in zip(xs, needs) if need]
            res = iter(_autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs], allow_unused=True,
                                      create_graph=double)
                       if pairs and wrt else [None] * len(wrt))
        return (None, None, None, None) + tuple(next(res) if need else None for need in needs)


class FusedGrad:
    """The compiled forward and backward plans of one GradEntry for one set of input sizes."""

    def __init__(self, split, grad_of, stats, parallel):
        self.split = split
        self.forward_graph, self.forward_notes = optimize(split.forward, distinct_outputs=True)
        self.backward_graph, self.backward_notes = optimize(split.backward, distinct_outputs=True)
        # the sizes are this FusedGrad's: each plan becomes one compiled function (run/function.py)
        self.forward = Plan(self.forward_graph, stats, parallel, one_function=True)
        self.backward = Plan(self.backward_graph, stats, parallel, one_function=True)
        self.saved, self.grad_of = split.saved, grad_of
        self.deps = [b | f for b, f in zip(_grad_deps(split.backward, len(grad_of)),
                                           _reach(split.forward, grad_of))]
        self.runs = 0

    def describe(self) -> str:
        kinds = [k for k, _ in self.saved]
        loops = len(self.forward.fused), len(self.backward.fused)
        return (f"fused backward ({self.runs} runs): the forward plan ({loops[0]} fused loop(s)) saves "
                f"{kinds.count('input')} input(s), {kinds.count('output')} output(s) and "
                f"{kinds.count('extra')} intermediate(s); the backward plan ({loops[1]} fused loop(s)) "
                f"recomputes {self.split.recomputed} forward op(s) from them; forward: "
                f"{self.forward.describe_function()}; backward: {self.backward.describe_function()}")


# input sizes a GradEntry traces a backward for; calls with other sizes replay eagerly
MAX_BACKWARD_SIZES = 8


class GradEntry(CompiledEntry):
    """A compiled signature whose inputs require grad: fused forward, one autograd node whose
    backward is a second compiled plan (per set of input sizes: the derivative formulas read
    sizes), or, where that cannot be traced, an eager replay (``fused_reason`` says why)."""

    reason = ""
    _replay = None
    replays = 0
    replay_reason = ""

    def setup_backward(self, stats, parallel):
        self.stats, self.parallel = stats, parallel
        self.fused: dict = {}          # input sizes -> FusedGrad, or why there is none
        self.fused_reason = ""
        return self

    def fused_for(self, tensors, scalars):
        """The FusedGrad for these inputs' sizes (traced and partitioned on first use), or None."""
        key = tuple([t._data.shape for t in tensors])
        f = self.fused.get(key)
        if f is None:
            if len(self.fused) >= MAX_BACKWARD_SIZES:
                self.fused_reason = (f"{MAX_BACKWARD_SIZES} input sizes have a fused backward already; "
                                     f"other sizes replay the forward eagerly")
                return None
            f = self.fused[key] = self._build_fused(tensors, scalars)
        if f.__class__ is str:
            self.fused_reason = f
            return None
        return f

    def _build_fused(self, tensors, scalars):
        needs = [t.requires_grad for t in tensors]
        joint = build_joint(self.graph, list(tensors), needs, scalars)
        if isinstance(joint, str):
            return joint
        return FusedGrad(partition(joint), joint.grad_of, self.stats, self.parallel)

    def explain_lines(self) -> list:
        lines = super().explain_lines()
        for sizes, f in self.fused.items():
            what = f"replays the traced ops eagerly: {f}" if f.__class__ is str else f.describe()
            lines.append(f"autograd (an input requires grad), input sizes {', '.join(str(tuple(s)) for s in sizes)}: {what}")
        if self.replays:
            lines.append(f"autograd: {self.replays} backward(s) replayed the traced ops eagerly "
                         f"and differentiated them; last because: {self.replay_reason}")
        return lines

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

    stale = None

    def __init__(self, reason: str):
        self.reason = reason
        self.calls = 0

    def __call__(self, fn, args, kwargs, caps=()):
        self.calls += 1
        return fn(*args, **kwargs)


def entry_for(graph, paths, tensors, direct, stats, parallel):
    """The entry of a traced signature: ``tensors``: the arguments' and the captures'; ``direct``:
    whether the key says every argument and capture is a positional tensor (see CompiledEntry).
    An input that requires grad under grad mode (an argument, a capture, or a tensor the trace
    lifted) makes it a GradEntry; the tensors the trace used by identity are checked at every
    call (owners.py: ``stale``)."""
    why = unguarded(graph, graph.owners)
    if why:
        return EagerEntry(why)
    optimized, notes = optimize(graph, distinct_outputs=True)
    if is_grad_enabled() and any(t.requires_grad for t in tensors + graph.lifted):
        why = grad_obstacle(graph)
        if why:
            return EagerEntry(f"inputs require grad and {why}, so the call runs eagerly")
        entry = GradEntry(graph, optimized, Plan(optimized, stats, parallel), notes, False,
                          paths).setup_backward(stats, parallel)
    else:
        entry = CompiledEntry(graph, optimized, Plan(optimized, stats, parallel), notes,
                              direct and not graph.lifted, paths)
    entry.stale = make_check(graph, graph.owners)
    return entry


def grad_obstacle(graph) -> str:
    """Why one autograd node cannot stand for the whole graph ('' if it can)."""
    outs = [v.id for v in vars_in(graph.outputs)]
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


def _flow(g: Graph, seeds: dict, carries=None) -> dict:
    """Value id -> the union of the labels of the ``seeds`` (value id -> set of labels) it is
    computed from, along ``g``'s nodes; ``carries(v)``: whether value ``v`` passes them on."""
    flow = dict(seeds)
    for n in g.nodes:
        labels = set().union(*[flow.get(v, set()) for v in n.inputs()])
        if labels:
            for v in n.outs:
                if carries is None or carries(v):
                    flow[v] = labels
    return flow


def _grad_deps(g, n_grads: int) -> list:
    """Per output of backward graph ``g`` (an input's gradient, or None), the positions of the
    incoming gradients (its last ``n_grads`` inputs) it depends on."""
    deps = _flow(g, {v: {j} for j, v in enumerate(g.inputs[len(g.inputs) - n_grads:])})
    return [deps.get(v.id, set()) if isinstance(v, Var) else set() for v in g.outputs]


def _fill(x, it):
    """The plan's output structure with its values (Vars) taken in order from ``it``."""
    if isinstance(x, Var):
        return next(it)
    if isinstance(x, (list, tuple)):
        return rebuild(x, (_fill(y, it) for y in x))
    if isinstance(x, dict):
        return {k: _fill(v, it) for k, v in x.items()}
    return x


def _reach(forward: Graph, grad_of: list) -> list:
    """Per forward input, the positions in ``grad_of`` of the outputs it reaches through
    floating-point values: where eager mode records a path, so that the input gets a gradient
    (zeros, when every formula on the path gives zeros: ``x ** 0``) even where the backward's
    values do not depend on the incoming gradient."""
    reach = _flow(forward, {v: {i} for i, v in enumerate(forward.inputs)},
                  lambda v: forward.types[v].dtype.category >= 2)
    flat = [v.id for v in vars_in(forward.outputs[0])]
    out = [set() for _ in forward.inputs]
    for j, pos in enumerate(grad_of):
        for i in reach.get(flat[pos], ()):
            out[i].add(j)
    return out
