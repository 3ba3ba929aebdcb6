"""A compiled function that is a whole training step: ``StepEntry``.

When a ``dj.compile`` trace aborts because the function calls ``backward()`` or an
optimizer's ``step()``/``zero_grad()`` (tracer.STEP_REASONS), the signature's entry is
a ``StepEntry``.  It traces the call again as one step (steptrace.py: the forward, the
joint backward through the derivative table, the ``.grad`` accumulation and the
optimizer's update, functionalized) and runs that graph as one plan, which after its
first run is one compiled function (planfn.py).  Per call:

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
3. the plan runs; each written tensor gets its new value copied in (one version bump,
   the write guard first, as ``optim.written``), each parameter its new ``.grad``
   (or None), and the function's result is returned (a plain tensor: no graph).

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
>>> step._last.variants[step._last._key((x, y), {})].runs
2
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from dispatch_jit.optim.optimizer import Optimizer, written

from .entries import CompiledEntry
from .ir import Graph
from .owners import make_check, module_tensors
from .passes import optimize
from .plan import Plan
from .stepdrive import trace_step
from .steptrace import OptionRead
from .trace import flat_tensors
from .tracer import STEP_REASONS

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


def _fetch(src, tensors, caps=()):
    """The tensor ``src`` names for this call (``tensors``: the call's argument tensors, flat;
    ``caps``: the tensors its captured globals and closure variables hold, flat)."""
    kind = src[0]
    if kind == "arg":
        return tensors[src[1]]
    if kind == "cap":
        return caps[src[1]]
    if kind == "obj":
        return src[1]
    if kind == "grad":
        return _fetch(src[1], tensors, caps).__dict__.get("_grad")
    return src[1].state[src[2]][src[3]]


class _Variant:
    """One traced step: its plan and where its inputs and outputs live."""

    def __init__(self, tr, stats, parallel):
        self.trace = tr
        self.optimized, self.notes = optimize(tr.graph, distinct_outputs=True, split_chains=True)
        self.plan = Plan(self.optimized, stats, parallel, one_function=True)
        self.runs = 0

    def __call__(self, args, kwargs, caps):
        tr = self.trace
        flat, cflat = flat_tensors((args, kwargs), []), flat_tensors(caps, [])
        tensors = [_fetch(s, flat, cflat) for s in tr.sources]
        scalars = [opt.param_groups[gi][k] if j < 0 else opt.param_groups[gi][k][j]
                   for opt, gi, k, j in tr.option_reads]
        for opt, gi, params, _ in tr.scalar_sources:
            for row in opt.step_values(opt.param_groups[gi], params):
                scalars += row
        res, new, grads = self.plan.run(tensors, scalars)
        targets = [_fetch(s, flat, cflat) for s in tr.writes]
        # a new value that is an input (``buf.copy_(p)`` before p's update: the plan returns p itself)
        # or, interpreted, a view of one, is read before any target is written
        ins = {id(t) for t in tensors}
        interpreted = self.plan.function is None
        new = [v._data.copy() if id(v) in ins or interpreted and any(np.may_share_memory(v._data, t._data)
                                                                    for t in targets) else v._data for v in new]
        written(targets)
        for t, v in zip(targets, new):
            np.copyto(t._data, v)
        for src, g in zip(tr.grad_params, grads):
            p = _fetch(src, flat, cflat)
            if g is None:
                p.__dict__.pop("_grad", None)
            else:
                p.__dict__["_grad"] = g
        self.runs += 1
        return res

    def describe(self) -> str:
        tr = self.trace
        n = sum(k for *_, k in tr.scalar_sources)
        return (f"whole step compiled ({self.runs} runs): {len(tr.sources)} parameter/gradient/state input(s), "
                f"{len(tr.option_reads)} optimizer option(s) and {n} per-step number(s) read per call, "
                f"{len(tr.writes)} tensor(s) updated in place, {len(tr.grad_params)} .grad(s) set, "
                f"{len(self.plan.fused)} fused loop(s); {self.plan.describe_function()}")


class StepEntry(CompiledEntry):
    """The entry of a signature whose function is a whole training step (see the module docstring)."""

    def __init__(self, cf, args, caps):
        empty = Graph()
        empty.outputs = ()
        super().__init__(empty, empty, Plan(empty, cf._stats), [])
        self.stats, self.parallel = cf._stats, cf.parallel
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

    def _key(self, args, kwargs):
        key = [(t._data.shape, t.__dict__.get("_grad") is None) for t in flat_tensors((args, kwargs), [])]
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
        try:
            key = self._key(args, kwargs)
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
        return v(args, kwargs, caps)

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
                key = self._key(args, kwargs)
            except TypeError as e:
                return f"an optimizer option is not hashable ({e})"
            return self._build(key, fn, args, kwargs, caps)
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
