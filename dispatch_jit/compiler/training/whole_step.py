"""A compiled function that is a whole training step: ``StepEntry``.

When a ``dj.compile`` trace aborts because the function calls ``backward()`` or an
optimizer's ``step()``/``zero_grad()`` (tracer.STEP_REASONS), the signature's entry is
a ``StepEntry``.  It traces the call again as one step (training/functionalize.py: the forward, the
joint backward through the derivative table, the ``.grad`` accumulation and the
optimizer's update, functionalized) and runs that graph as one plan, which after its
first run is one compiled function (run/function.py).  Per call:

1. the variant key (``_key``): the arguments' sizes; per watched parameter (the
   optimizers' and the captured modules'), its signature, sizes and whether its
   ``.grad`` is None; per optimizer, each group's options (a float or int option by its
   type and whether it is zero, ``option_key``: its value is a runtime scalar; flags
   such as ``nesterov`` and anything else by value), parameters' identities and which
   state exists.  One dict lookup finds the variant (a miss traces);
2. the inputs: the arguments, then each bound tensor fetched anew (a parameter itself,
   ``p.grad``, ``opt.state[p][name]``: eager mode replaces gradients between steps);
   the runtime scalars: the options' current values, then the optimizers' per-step
   numbers (``step_values``: the learning rate, ..., Adam's bias corrections, computed as
   eager's update computes them; Adam's step counts advance), so a learning-rate schedule
   runs one plan;
3. the plan runs (the write observers first, as ``optim.written``); each written tensor gets its
   new value, copied in, or written in place by the plan function where no alias can see the
   difference (run/function.py ``_inplace``), and one version bump; each parameter its new ``.grad``
   (or None), and the function's result is returned.  A result tensor that required grad in
   the trace (the loss) requires grad, its ``grad_fn`` a ``CompiledStepBackward`` whose graph
   is freed, as eager mode's loss after ``backward()``: a second ``loss.backward()`` raises
   eager's error ("Trying to backward through the graph a second time ...").

A variant whose trace fails (the optimizer's first step creates its state, a hook, a
second backward, a data read, ...) runs eagerly, its reason kept for ``explain()``; a
later call with another key traces again.  A step that uses an option's value in Python
(``lr * 0.5`` computed by the function) makes the entry key options by value (``by_value``)
and trace again: each value is then a variant, as before issue 14.

>>> import dispatch_jit as dj
>>> model = dj.nn.Linear(2, 1)
>>> opt = dj.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
>>> @dj.compile
... def step(x, y):
...     opt.zero_grad()
...     loss = ((model(x) - y) ** 2).mean()
...     loss.backward()
...     opt.step()
...     return loss
>>> x, y = dj.ones(4, 2), dj.zeros(4, 1)
>>> losses = [step(x, y) for _ in range(3)]     # the first makes the momentum buffers eagerly
>>> print(step.explain().split("whole training step: ")[1].splitlines()[0])
2 step trace(s), 2 variant(s), 1 eager call(s)
>>> step._last.variants[step._last._key([x, y])].runs
2
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from dispatch_jit.autograd.graph import Node, mark_output
from dispatch_jit.jit.source import define
from dispatch_jit.optim.optimizer import Optimizer, read_only_error
from dispatch_jit.tensor import bump_version
from dispatch_jit.writes import before_write

from ..graph.ir import Graph, Var
from ..graph.passes import optimize
from ..run.cached import CompiledEntry
from ..run.plan import Plan
from ..trace.fallback import flat_tensors
from ..trace.breaks import take_site
from ..trace.owners import make_check, module_tensors
from ..trace.symbolic_tensor import STEP_REASONS
from .driver import trace_step
from .functionalize import OptionRead

__all__ = ["StepEntry", "step_entry", "is_step", "option_key", "MAX_STEP_VARIANTS"]

MAX_STEP_VARIANTS = 8


def option_key(v):
    """What a step's trace depends on in optimizer option ``v``: a float or int (a runtime scalar of
    the plan) by its type and whether it is zero (which decides the update's form: momentum
    buffers, weight decay); a tuple of them (betas) item by item; anything else by value."""
    c = v.__class__
    if c is float or c is int:
        return c if v else (c, 0)
    if c is tuple:
        return tuple([option_key(x) for x in v])
    return v


def _optimizers(x, out: list, depth: int = 0) -> list:
    if isinstance(x, Optimizer):
        if all(o is not x for o in out):
            out.append(x)
    elif depth < 2 and isinstance(x, (list, tuple)):
        for y in x:
            _optimizers(y, out, depth + 1)
    elif depth < 2 and isinstance(x, dict):
        for y in x.values():
            _optimizers(y, out, depth + 1)
    return out


class CompiledStepBackward(Node):
    """The ``grad_fn`` of a compiled whole step's loss: the step's backward already ran inside the
    compiled plan, which keeps no graph, so running it raises eager mode's error for a graph that
    a backward freed (there, ``retain_graph=True`` runs the step eagerly and keeps the graph)."""

    def name(self) -> str:
        return "CompiledStepBackward (the backward of a dj.compile'd training step, run inside the step)"


def _fetch_expr(src, glb: dict) -> str:
    """The expression that fetches the tensor ``src`` names for a call, in a function of ``flat``
    (the call's argument tensors, flat) and ``caps`` (the tensors its captured globals and closure
    variables hold, flat); the objects it names go into ``glb``."""
    kind = src[0]
    if kind == "arg":
        return f"flat[{src[1]}]"
    if kind == "cap":
        return f"caps[{src[1]}]"
    if kind == "grad":
        return f"{_fetch_expr(src[1], glb)}.__dict__.get('_grad')"
    names = []
    for obj in (src[1],) if kind == "obj" else src[1:3]:
        names.append(f"o{len(glb)}")
        glb[names[-1]] = obj
    return names[0] if kind == "obj" else f"{names[0]}.state[{names[1]}][{src[3]!r}]"


def fetcher(sources):
    """``fetch(flat, caps)``: the list of the tensors ``sources`` name for a call, as one generated
    function (one call per step, not one per tensor: this is the hot path of a compiled step)."""
    glb: dict = {}
    items = ", ".join([_fetch_expr(s, glb) for s in sources])
    return define(f"def fetch(flat, caps):\n    return [{items}]\n", "fetch", glb, "<dispatch_jit compiled step fetch>")


class _Variant:
    """One traced step: its plan and where its inputs and outputs live."""

    def __init__(self, tr, stats, parallel):
        self.trace = tr
        self.optimized, self.notes = optimize(tr.graph, distinct_outputs=True, split_chains=True)
        self.plan = Plan(self.optimized, stats, parallel, one_function=True)
        self.runs = 0
        # released (saved None) from the start: one node for every call's loss
        self.node = CompiledStepBackward(None, (), None, {}, "compiled step") if any(tr.result_grad) else None
        self.needs_caps = any(_root(s)[0] == "cap" for s in tr.sources + tr.writes + tr.grad_params)
        self.inputs, self.targets, self.grad_owners = (fetcher(x) for x in (tr.sources, tr.writes, tr.grad_params))
        # where the plan function's env holds the outputs (the result, each rebound value, each .grad)
        res, writes, grads = self.optimized.outputs
        self.res = res.id if isinstance(res, Var) else res
        self.direct = isinstance(res, Var) and all(isinstance(x, Var) for x in writes) and \
            all(x is None or isinstance(x, Var) for x in grads)
        if self.direct:
            self.write_ids = [x.id for x in writes]
            self.grad_ids = [None if x is None else x.id for x in grads]
            # a rebound value that is an input (``buf.copy_(p)`` before p's update: the plan returns p
            # itself) is copied before any target is written
            ins = set(self.optimized.inputs)
            self.copy_first = [j for j, v in enumerate(self.write_ids) if v in ins]
            # the plan function may write a rebound value straight into its tensor (planfn._inplace)
            self.plan.inplace = {v: i for v, i in zip(self.write_ids, tr.write_inputs) if i >= 0 and v not in ins}

    def __call__(self, flat, caps):
        tr = self.trace
        cflat = flat_tensors(caps, []) if self.needs_caps else ()
        tensors = self.inputs(flat, cflat)
        targets = self.targets(flat, cflat)
        for t in targets:       # made read-only since the trace: the plan would write through NumPy's flag
            if not t._data.flags.writeable:
                raise read_only_error("a compiled step", "a parameter or optimizer state tensor it updates",
                                      t._data.shape)
        scalars = [opt.param_groups[gi][k] if j < 0 else opt.param_groups[gi][k][j]
                   for opt, gi, k, j in tr.option_reads]
        for opt, gi, params, _ in tr.scalar_sources:
            for row in opt.step_values(opt.param_groups[gi], params):
                scalars += row
        fn = self.plan.function
        for t in targets:                       # pending compiled-mode readers run before anything is written
            before_write(t)
        env = fn(tensors, scalars) if fn is not None and self.direct else None
        if env is None:
            res, new, grads = self._interpreted(tensors, scalars, targets, fn is not None and self.direct)
        else:
            res = env[self.res]
            new = [env[v]._data for v in self.write_ids]
            for j in self.copy_first:
                new[j] = new[j].copy()
            grads = [None if v is None else env[v] for v in self.grad_ids]
        for t, v in zip(targets, new):
            a = t._data
            if v is not a:           # else the plan wrote it in place
                np.copyto(a, v)
            bump_version(t)
        for p, g in zip(self.grad_owners(flat, cflat), grads):
            if g is None:
                p.__dict__.pop("_grad", None)
            else:
                p.__dict__["_grad"] = g
        self.runs += 1
        if self.node is not None:
            for t, g in zip(flat_tensors(res, []), self.trace.result_grad):
                if g and not t.requires_grad:       # a new tensor, never an input's (a parameter's)
                    mark_output(t, self.node)
        return res

    def _interpreted(self, tensors, scalars, targets, declined):
        """The plan run step by step (its first run, or a call its function declined): the outputs,
        the rebound values' arrays copied where they are inputs or views of one."""
        res, new, grads = self.plan.run(tensors, scalars, declined)
        ins = {id(t) for t in tensors}
        new = [v._data.copy() if id(v) in ins or any(np.may_share_memory(v._data, t._data) for t in targets)
               else v._data for v in new]
        return res, new, grads

    def describe(self) -> str:
        tr = self.trace
        n = sum(k for *_, k in tr.scalar_sources)
        return (f"whole step compiled ({self.runs} runs): {len(tr.sources)} parameter/gradient/state input(s), "
                f"{len(tr.option_reads)} optimizer option(s) and {n} per-step number(s) read per call, "
                f"{len(tr.writes)} tensor(s) updated in place ({len(getattr(self.plan.function, 'inplace', ()))} "
                f"written by the plan function itself where no alias can see it, the others copied in), "
                f"{len(tr.grad_params)} .grad(s) set, "
                f"{len(self.plan.fused)} fused loop(s); {self.plan.describe_function()}")


class StepEntry(CompiledEntry):
    """The entry of a signature whose function is a whole training step (see the module docstring)."""

    def __init__(self, cf, args, caps):
        empty = Graph()
        empty.outputs = ()
        super().__init__(empty, empty, Plan(empty, cf._stats), [])
        self.stats, self.parallel = cf._stats, cf.parallel
        self.breaks = cf._breaks
        self.variants: dict = {}
        self.traces = 0
        self.eager_calls = 0
        self.last_reason = ""
        self.by_value = ""       # why options are keyed by value (the step used one in Python)
        owners = module_tensors(args, caps, cf._captures)
        self.opts = _optimizers(list(args) + list(caps), [])
        seen, params = set(), []
        for t, _, _ in owners.values():
            if id(t) not in seen:
                seen.add(id(t))
                params.append(t)
        for opt in self.opts:
            for g in opt.param_groups:
                for p in g["params"]:
                    if id(p) not in seen:
                        seen.add(id(p))
                        params.append(p)
        self.params = params
        self.stale = make_check(SimpleNamespace(nodes=[], lifted=[t for t, _, _ in owners.values()]), owners)

    def _key(self, flat):
        key = [(t._data.shape, t.__dict__.get("_grad") is None) for t in flat]
        for p in self.params:
            key.append((p._sig, p._data.shape, p.__dict__.get("_grad") is None))
        for opt in self.opts:
            for g in opt.param_groups:
                key.append(tuple([v if self.by_value else option_key(v) for k, v in g.items() if k != "params"]))
                key.append(tuple([id(p) for p in g["params"]]))
            key.append(tuple([(id(p), tuple([v is None for v in s.values()])) for p, s in opt.state.items()]))
        return tuple(key)

    def _sources(self, args, kwargs, caps) -> dict:
        """id(tensor) -> (tensor, how a call fetches it): the arguments (by position), the tensors
        the captures hold (a global rebound to another tensor is read anew), the watched
        parameters, their gradients and the optimizers' state tensors."""
        flat = flat_tensors((args, kwargs), [])
        src = {id(t): (t, ("arg", i)) for i, t in enumerate(flat)}
        for i, t in enumerate(flat_tensors(caps, [])):
            src.setdefault(id(t), (t, ("cap", i)))
        for p in self.params:
            src.setdefault(id(p), (p, ("obj", p)))
        for t in self.params + flat:
            g = t.__dict__.get("_grad")
            if g is not None:
                src[id(g)] = (g, ("grad", src[id(t)][1]))
        for opt in self.opts:
            for p, s in opt.state.items():
                for k, v in s.items():
                    if hasattr(v, "_data"):
                        src[id(v)] = (v, ("state", opt, p, k))
        return src

    def __call__(self, fn, args, kwargs, caps):
        flat = flat_tensors((args, kwargs), [])
        try:
            key = self._key(flat)
            v = self.variants.get(key)
        except TypeError as e:       # an option that is not hashable: no key can hold it
            v = f"an optimizer option is not hashable ({e})"
            key = None
        if v is None:
            v = self._build(key, fn, args, kwargs, caps)
        if v.__class__ is str:
            self.eager_calls += 1
            self.last_reason = v
            return fn(*args, **kwargs)
        self.last_reason = ""
        return v(flat, caps)

    def _build(self, key, fn, args, kwargs, caps):
        if len(self.variants) >= MAX_STEP_VARIANTS:
            return f"{MAX_STEP_VARIANTS} step variants were traced already; other keys run eagerly"
        self.traces += 1
        tr = trace_step(fn, args, kwargs, self._sources(args, kwargs, caps), self.opts, not self.by_value)
        if isinstance(tr, OptionRead):
            # the options are constants of this step's trace: keyed by value from now on
            self.by_value = tr
            self.variants.clear()
            try:
                key = self._key(flat_tensors((args, kwargs), []))
            except TypeError as e:
                return f"an optimizer option is not hashable ({e})"
            return self._build(key, fn, args, kwargs, caps)
        if isinstance(tr, str):
            self.breaks.tell(tr, take_site())
        v = tr if isinstance(tr, str) else _Variant(tr, self.stats, self.parallel)
        if not isinstance(v, str):
            self.plan, self.graph, self.optimized, self.notes = v.plan, tr.graph, v.optimized, v.notes
        self.variants[key] = v
        return v

    def explain_lines(self) -> list:
        lines = [f"whole training step: {self.traces} step trace(s), {len(self.variants)} variant(s), "
                 f"{self.eager_calls} eager call(s)"]
        if self.last_reason:
            lines.append(f"last call ran eagerly: {self.last_reason}")
        if self.by_value:
            lines.append(f"optimizer options are keyed by value (a new value traces again): {self.by_value}")
        for v in self.variants.values():
            lines.append(f"  variant: {v}" if v.__class__ is str else f"  variant: {v.describe()}")
        return lines


def _root(src):
    return _root(src[1]) if src[0] == "grad" else src


def _names(code, depth=0) -> set:
    names = set(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names") and depth < 3:
            names |= _names(c, depth + 1)
    return names


def is_step(fn, reason: str) -> bool:
    """Whether a plain trace that aborted with ``reason`` is traced again as a whole step: it
    reached ``backward()`` or an optimizer, or it aborted earlier (a size read, which a step's
    trace answers: it has the call's sizes) in a function whose code calls ``backward``."""
    if reason in STEP_REASONS:
        return True
    code = getattr(getattr(fn, "func", fn), "__code__", None)
    return code is not None and "backward" in _names(code)


def step_entry(cf, args, caps) -> StepEntry:
    """The entry of a signature whose trace found a training step (api.py ``_build``)."""
    return StepEntry(cf, args, caps)
