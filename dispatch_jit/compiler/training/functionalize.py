"""The trace of a whole training step: forward, ``backward()``, ``.grad`` and the update, one graph.

AOTAutograd and functionalization in miniature.  A ``StepTracer`` is a ``ShapedTracer``
(the call's sizes: the derivative formulas read them) that also

* binds every real tensor the step reads (a parameter, its ``.grad``, an optimizer's
  state) to a graph input the first time an op reads it, and hands the ops a symbolic
  stand-in for it (``bound``: the real tensor, its input value, its current value);
* records the forward's differentiable steps as joint.py's walk does, and runs that walk
  (``joint.walk_back``: the derivative table's formulas) when ``loss.backward()`` is
  called on a traced loss, then accumulates each leaf's gradient into its ``.grad`` as
  the engine does (``g`` where it was None, else ``grad + g``, a new tensor), ``.grad``
  holding the symbolic result for the rest of the trace;
* functionalizes writes: ``p.copy_(v)``, ``p.sub_(u)`` (any ``op_`` whose ``op`` exists),
  ``buf.copy_(...)`` record the out-of-place value and rebind the tensor's current value
  to it; the graph returns every rebound value, and the entry (training/whole_step.py) copies it back
  into the real tensor after the plan ran, with one version bump;
* sees each optimizer step and ``zero_grad`` (dj.optim's hook, ``optimizer.STEP_TRACE``,
  which training/driver.py fills; it also runs the trace, ``trace_step``):
  the optimizers' per-tensor update ops are what it records, and every number they read
  (the learning rate, momentum, betas, ..., and Adam's bias corrections, which change every
  step) is a runtime scalar of the plan (``scalar_sources``: the entry calls the optimizer's
  ``step_values`` per call for their values, which also advances Adam's step counts);
* stands in for the watched optimizers' numeric options (``stand_in_options``): while the
  trace runs, each group's float and int options are runtime scalars too (``option_reads``:
  the entry reads them per call), which the optimizer's own step reads freely (its flags,
  ``step_values``) but whose use in Python anywhere else marks the trace (``options_used``):
  the entry then keys the options by value (training/whole_step.py).

Whatever the trace cannot stand for aborts it with the reason (``TraceAbort``): the step
runs eagerly and ``explain()`` says why.  The real tensors' ``.grad``, their classes and
the optimizers' Python state are restored when the trace ends: tracing changes nothing.
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.autograd import is_grad_enabled, set_grad_enabled
from dispatch_jit.autograd.graph import edge_of
from dispatch_jit.keys import DispatchKey
from dispatch_jit.ops import entries
from dispatch_jit.optim.adam import Adam, AdamW
from dispatch_jit.optim.sgd import SGD
from dispatch_jit.registry import Tag
from dispatch_jit.tensor import TRACE_MARK, Tensor, wrap

from ..graph.ir import Var, runtime_scalar, vars_in
from ..graph.joint import grad_rule, walk_back
from ..graph.views import GETITEM, is_view
from ..trace.fallback import TRACED_SCALARS, flat_tensors, misplaced_scalars
from ..trace.shaped import ShapedTracer
from ..trace.symbolic import _state
from ..trace.symbolic_tensor import _SIZE_READS, _prop_guard, guarded_by

__all__ = ["StepTracer", "StepTrace", "StepTensor", "OPTIMIZERS", "OptionRead"]

_K = DispatchKey
A = entries("aten")

# the optimizers a step compiles (their per-tensor update ops are traced): exact classes, since a
# subclass may override step() with Python the trace would not see
OPTIMIZERS = (SGD, Adam, AdamW)


class OptionRead(str):
    """Why a step's trace did not compile, when the step used an optimizer option's value in Python
    (or passed it where a runtime scalar cannot go): its entry keys options by value from then on
    and traces again, the options being plain numbers of the trace."""


class StepTrace:
    """What a step's trace found: the graph (outputs ``(the function's result, the rebound
    values, the final gradients)``) and where each input and output lives."""

    def __init__(self, tracer):
        self.graph = tracer.graph
        self.sources = [tracer.source_of(x) for x in tracer.order]    # per bound input: how to fetch it
        self.writes = [tracer.source_of(x) for x in tracer.written.values()]   # per rebound value
        # per rebound value: the input position of the tensor it is copied into (-1: not an input)
        self.write_inputs = [next((i for i, y in enumerate(tracer.order) if y is x), -1)
                             for x in tracer.written.values()]
        self.grad_params = [tracer.source_of(p) for p in tracer.grad_params.values()]               # per final gradient output
        self.result_grad = tracer.result_grad    # per tensor of the result: did it require grad (a loss)
        self.option_reads = list(tracer.option_reads)      # runtime scalars 0..k-1: (opt, group, key, pos)
        self.scalar_sources = list(tracer.scalar_sources)  # then per optimizer update: its step_values
        self.optimizers = list(tracer.optimizers)


class StepTracer(ShapedTracer):
    """A ShapedTracer for a whole step (see the module docstring)."""

    FORWARD = False      # its walk differentiates the step itself (trace/symbolic.py)

    def __init__(self, sources: dict, opts=()):
        super().__init__()
        self.sources = sources        # id(real tensor) -> how a call fetches it (training/whole_step.py's watch)
        self.opts = list(opts)        # the optimizers whose options the entry's key watches
        self.bound: dict = {}         # id(real) -> [real, input value id, current value id]
        self.order: list = []         # the bound real tensors, in input order
        self.stand: dict = {}         # id(real) -> (value id, its symbolic stand-in for that value)
        self.owner: dict = {}         # id(stand-in) -> the real tensor it stands for
        self.viewed_ids: set = set()  # value ids some view reads
        self.grad: set = set()        # value ids that require grad
        self.fwd: list = []           # differentiable forward steps, as joint.walk_back reads them
        self.backward_done = False
        self.in_backward = 0
        self.start_grads: dict = {}   # id(tensor) -> (tensor, its _grad when the trace began)
        self.grad_params: dict = {}   # id -> parameter whose .grad the step sets
        self.written: dict = {}       # id -> real tensor the step writes
        self.optimizers: list = []    # (optimizer, its Python state before the trace)
        self.scalar_sources: list = []   # (optimizer, group index, params, how many values)
        self.stand_ins: list = []
        self.option_reads: list = []     # per option stand-in: (optimizer, group index, key, tuple position)
        self.options: list = []          # (group, key, the real value) to put back
        self.options_used = ""           # what Python did with an option's value

    # -- the watched optimizers' numeric options: runtime scalars ---------------------------------
    def stand_in_options(self):
        """Replace each watched optimizer's float and int options (betas' items too) by runtime
        scalars, runtime scalars 0..k-1, for the length of the trace (``restore`` puts them back)."""
        for opt in self.opts:
            for gi, group in enumerate(opt.param_groups):
                for key, v in list(group.items()):
                    if v.__class__ is tuple and all(x.__class__ in (float, int) for x in v):
                        new = tuple(self._option(opt, gi, key, j, x) for j, x in enumerate(v))
                    elif v.__class__ in (float, int):
                        new = self._option(opt, gi, key, -1, v)
                    else:
                        continue
                    self.options.append((group, key, v))
                    group[key] = new

    def _option(self, opt, gi, key, pos, value):
        s = runtime_scalar(value, len(self.stand_ins), TRACED_SCALARS[value.__class__])
        s._tracer = self
        self.stand_ins.append(s)
        self.option_reads.append((opt, gi, key, pos))
        return s

    # -- real tensors: bound inputs -----------------------------------------------------------
    def source_of(self, x):
        got = self.sources.get(id(x))
        return ("obj", x) if got is None else got[1]

    def snapshot_grad(self, t):
        if id(t) not in self.start_grads:
            self.start_grads[id(t)] = (t, t.__dict__.get("_grad"))

    def bind(self, x: Tensor) -> int:
        if x.is_cuda:
            self.abort("a CUDA tensor: a whole step is compiled for CPU tensors only")
        sym = self.shaped_input(x)
        vid = sym.__dict__[TRACE_MARK][1]
        self.bound[id(x)] = [x, vid, vid]
        self.order.append(x)
        self.stand[id(x)] = (vid, sym)
        self.owner[id(sym)] = x
        self.snapshot_grad(x)
        if x.requires_grad:
            if id(x) not in self.sources:
                self.abort("a tensor that requires grad reached the step by identity from something no guard "
                           "watches (not an argument's or a captured dj.nn.Module's parameter, nor an "
                           "optimizer's): pass the module or the optimizer as an argument or a global")
            self.grad.add(vid)
        return vid

    def sym(self, x):
        """``x`` with each real tensor replaced by the symbolic stand-in of its current value."""
        if isinstance(x, Tensor):
            if TRACE_MARK in x.__dict__ or self.in_backward:
                return x
            b = self.bound.get(id(x))
            vid = b[2] if b is not None and b[0] is x else self.bind(x)
            have = self.stand.get(id(x))
            if have is not None and have[0] == vid:
                return have[1]
            sym = self.place(self.symbolic(self.graph.types[vid], vid), self.shapes[vid])
            self.stand[id(x)] = (vid, sym)
            self.owner[id(sym)] = x
            return sym
        if isinstance(x, (list, tuple)):
            return type(x)(self.sym(y) for y in x) if type(x) in (list, tuple) else x
        if isinstance(x, dict):
            return {k: self.sym(v) for k, v in x.items()}
        return x

    # -- recording ------------------------------------------------------------------------------
    def _record(self, op, args: tuple, kwargs: dict):
        entry = op._entry
        args, kwargs = self.sym(args), self.sym(kwargs)
        mutated = [(a, v) for a, v in zip(entry.schema.arguments, args + tuple(kwargs.values()))
                   if a.is_mutable and v is not None]
        if mutated:
            return self._inplace(entry, mutated, args, kwargs)
        if self.in_backward or not is_grad_enabled() or entry.decomposition(_K.CPU) is not None:
            return super()._record(op, args, kwargs)
        out = super()._record(op, args, kwargs)
        self._note_grad(op, args, kwargs, out)
        return out

    def record_getitem(self, t, index):
        t = self.sym(t)
        out = super().record_getitem(t, index)
        self.viewed_ids.add(_vid(t))
        if is_grad_enabled() and _vid(t) in self.grad:
            self.abort("basic indexing (t[...]) of a value that requires grad has no traceable backward rule yet")
        return out

    def _note_grad(self, op, args, kwargs, out):
        """joint.py's step 1: the steps whose output requires grad, with what their formula reads."""
        node = self.graph.nodes[-1]
        if is_view(node):
            self.viewed_ids.update(_vid(t) for t in flat_tensors((args, kwargs), []))
        reads = [_vid(t) for t in flat_tensors((args, kwargs), [])]
        if not any(r in self.grad for r in reads):
            return
        rule = grad_rule(op)
        if rule == "none":
            return
        if isinstance(rule, str):
            self.abort(rule)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != 1:
            self.abort(f"{op.name()} has several outputs")
        if outs[0].dtype.category < 2:
            return
        self.grad.add(_vid(outs[0]))
        self.fwd.append((node, rule, args, kwargs, outs[0]))

    # -- functionalization -----------------------------------------------------------------------
    def _inplace(self, entry, mutated, args, kwargs):
        (arg, dest), = mutated if len(mutated) == 1 else self.abort(
            f"{entry.name} writes into several arguments (not compiled)")
        base = entry.name.split("::")[-1].split(".")[0]
        if arg.name != "self" or Tag.inplace not in entry.tags or getattr(A, base[:-1], None) is None:
            self.abort(f"{entry.name} writes into its argument '{arg.name}' (out= and this in-place op are "
                       f"not compiled)")
        self.in_meta -= 1     # the out-of-place op is the function's own call, recorded as any
        try:
            new = getattr(A, base[:-1])(*args, **kwargs)
        finally:
            self.in_meta += 1
        self.assign(dest, new)
        real = self._real_of(dest)     # ``p -= u`` rebinds p to what sub_ returns: the tensor itself
        return dest if real is None else real

    def assign(self, dest, value):
        """``dest`` holds ``value`` from now on (a copy_, an in-place op's result)."""
        real = self._real_of(dest)
        if not isinstance(value, Tensor):
            self.abort("copy_ of a Python number into a tensor is not compiled")
        value = self.sym(value)
        if tuple(self.shape_of(value)) != tuple(self.shape_of(dest)):
            self.abort(f"an in-place write of shape {tuple(self.shape_of(value))} into a tensor of shape "
                       f"{tuple(self.shape_of(dest))} (broadcast in-place writes are not compiled)")
        if value.dtype != dest.dtype:
            self.abort(f"an in-place write of {value.dtype} into a {dest.dtype} tensor (not compiled)")
        nv = _vid(value)
        if real is not None and real is not dest and self.bound.get(id(real), [0, 0, None])[2] in self.viewed_ids:
            # eager mode's views of it would show the new value; the graph's view keeps the old one
            self.abort("an in-place write to a tensor that has views (not compiled)")
        if real is not None:
            if real.requires_grad and is_grad_enabled():
                self.abort("an in-place write to a tensor that requires grad outside no_grad (eager mode raises)")
            if real.requires_grad and not self.backward_done:
                self.abort("a parameter is written before backward()")
            self.sym(real)
            self.bound[id(real)][2] = nv
            self.written[id(real)] = real
            return
        vid = _vid(dest)
        if vid in self.viewed_ids or _made_by_view(self.graph, vid):
            self.abort("an in-place write to a view or to a tensor that has views (not compiled)")
        if vid in self.grad and is_grad_enabled():
            self.abort("an in-place write to a value that requires grad (not compiled)")
        dest.__dict__[TRACE_MARK] = (self, nv)

    def _real_of(self, t):
        return t if TRACE_MARK not in t.__dict__ else self.owner.get(id(t))

    # -- backward ------------------------------------------------------------------------------
    def backward(self, loss, gradient=None, retain_graph=None, create_graph=False):
        if self.backward_done:
            self.abort("a second backward() in one step (the first freed the graph in eager mode)")
        if create_graph:
            self.abort("backward(create_graph=True) (a compiled step records no graph)")
        if retain_graph:
            self.abort("backward(retain_graph=True) (a compiled step keeps no graph)")
        lv = _vid(loss)
        if lv not in self.grad:
            self.abort("backward() of a value that does not require grad (eager mode raises)")
        for real, inp, cur in list(self.bound.values()):
            if real.requires_grad and real.grad_fn is None and edge_of(real)[0].pre_hooks:
                self.abort("a gradient hook is registered on a parameter (hooks run in Python)")
        for *_, out in self.fwd:
            if out.__dict__.get("_retains_grad"):
                self.abort("retain_grad() of a non-leaf (its .grad is not compiled)")
        self.in_backward += 1
        grad_mode = set_grad_enabled(False)     # as the engine without create_graph: formulas record nothing
        grad_mode.__enter__()
        try:
            if gradient is None:
                if self.shape_of(loss) != ():
                    self.abort("backward() of a non-scalar without gradient= (eager mode raises)")
                seed = wrap(np.ones((), loss.dtype.np))     # the engine's seed: a constant of the graph
            else:
                self.in_backward -= 1
                seed = self.sym(gradient)
                self.in_backward += 1
            grads = {lv: seed}
            walk_back(self, self.fwd, grads, self.grad)
            for real, inp, cur in list(self.bound.values()):
                g = grads.get(inp) if real.requires_grad else None
                if g is None:
                    continue
                self.snapshot_grad(real)
                old = real.__dict__.get("_grad")
                if old is not None:
                    self.in_backward -= 1
                    old = self.sym(old)
                    self.in_backward += 1
                    g = A.add(old, g)        # the engine's ``cur + g``: a new tensor
                elif _made_by_view(self.graph, _vid(g)):
                    g = A.clone(g)           # the engine's: a view never becomes .grad (engine._accumulated)
                real.__dict__["_grad"] = g
                self.grad_params[id(real)] = real
        finally:
            grad_mode.__exit__(None, None, None)
            self.in_backward -= 1
        self.backward_done = True

    # -- the optimizers' hook (dj.optim.optimizer.STEP_TRACE) ------------------------------------
    def step(self, opt, closure, run):
        """dj.optim's ``step()``: checked, then ``run(closure)``, whose per-tensor ops are recorded.
        The optimizer reads its own options in Python (its flags, ``step_values``), as the entry
        does per call: their use there is no use by the function, so they do not mark the trace."""
        mine = [s for s, (o, *_) in zip(self.stand_ins, self.option_reads) if o is opt]
        for s in mine:
            s._tracer = None
        try:
            self._check_step(opt, closure)
            self.optimizers.append((opt, {p: dict(s) for p, s in opt.state.items()}))
            return run(closure)
        finally:
            for s in mine:
                s._tracer = self

    def _check_step(self, opt, closure):
        if closure is not None:
            self.abort(f"{type(opt).__name__}.step(closure) (the closure runs its own backward)")
        if type(opt) not in OPTIMIZERS:
            self.abort(f"{type(opt).__name__}.step() is not compiled (only SGD, Adam and AdamW are)")
        if not self.backward_done:
            self.abort(f"{type(opt).__name__}.step() before backward() in the step")
        if all(o is not opt for o in self.opts):
            self.abort(f"a {type(opt).__name__} that no guard watches (reached through an object's attribute, "
                       f"not an argument or a global, or a list or dict of them): its options are not in the key")
        for group in opt.param_groups:
            for p in group["params"]:
                if p.__dict__.get("_grad") is None:
                    continue
                s = opt.state.get(p)
                if isinstance(opt, Adam) and s is None or isinstance(opt, SGD) and group["momentum"] != 0 and \
                        (s is None or s.get("momentum_buffer") is None):
                    self.abort(f"{type(opt).__name__}'s first step creates its state (this call runs eagerly; "
                               f"the next ones compile)")

    def zero_grad(self, opt, set_to_none):
        if not set_to_none:
            self.abort("zero_grad(set_to_none=False) inside a compiled step (not compiled)")
        for group in opt.param_groups:
            for p in group["params"]:
                self.snapshot_grad(p)
                if p.__dict__.get("_grad") is not None:
                    p.__dict__["_grad"] = None
                    self.grad_params[id(p)] = p

    def step_scalars(self, opt, group, params, values):
        out = []
        n = 0
        for vals in values:
            row = []
            for x in vals:
                cls = int if x.__class__ is int else float     # the type eager's update reads
                s = runtime_scalar(cls(x), len(self.stand_ins), TRACED_SCALARS[cls])
                s._tracer = self
                self.stand_ins.append(s)
                row.append(s)
                n += 1
            out.append(row)
        # by identity: ``index`` compares the groups as dicts, so their parameters with ``==`` (traced)
        gi = next(i for i, g in enumerate(opt.param_groups) if g is group)
        self.scalar_sources.append((opt, gi, list(params), n))
        return out

    def active(self):
        return self if _state.tracer is self else None

    # -- the end ------------------------------------------------------------------------------
    def close(self, result):
        if not self.backward_done:
            self.abort("the function did not call backward() in this trace")
        res = self.to_arg(self.sym(result))
        self.result_grad = [v.id in self.grad for v in vars_in(res)]
        writes = tuple(Var(self.bound[id(t)][2]) for t in self.written.values())
        grads = tuple(None if (g := p.__dict__.get("_grad")) is None else self.to_arg(self.sym(g))
                      for p in self.grad_params.values())
        self.graph.outputs = (res, writes, grads)
        # only an elementwise op's operand reads a runtime scalar per call: elsewhere it is a constant
        bad = {**misplaced_scalars(self.graph), **self.tainted}
        if bad:
            i, why = min(bad.items())
            if i < len(self.option_reads):
                opt, gi, key, pos = self.option_reads[i]
                self.options_used = (f"{type(opt).__name__}'s option {key!r}{f'[{pos}]' if pos >= 0 else ''}: "
                                     f"{why}")
                self.abort(f"the step uses the value of {self.options_used}")
            self.abort(f"a per-step value of the optimizer was used in Python ({why})")
        self.graph.check()

    def restore(self):
        for t, g in self.start_grads.values():
            if g is None:
                t.__dict__.pop("_grad", None)
            else:
                t.__dict__["_grad"] = g
        for opt, state in self.optimizers:    # the Python state as it was (a trace may add entries)
            before = {id(p) for p in state}
            for p in [p for p in opt.state if id(p) not in before]:
                del opt.state[p]
            for p, s in state.items():
                opt.state[p].clear()
                opt.state[p].update(s)
        for s in self.stand_ins:
            s._tracer = None
        for group, key, v in reversed(self.options):
            group[key] = v
        self.options = []


def _vid(t):
    sym = t.__dict__.get(TRACE_MARK) if isinstance(t, Tensor) else None
    return None if sym is None else sym[1]


def _made_by_view(graph, vid) -> bool:
    for n in reversed(graph.nodes):
        if vid in n.outs:
            return n.op is GETITEM or is_view(n)
    return False


# -- the real tensors a step reads: their own class while the trace runs -----------------------
# what a step may read of a real tensor: its sizes and layout are in the variant key (training/whole_step.py)
_LAYOUT_READS = _SIZE_READS | {"is_contiguous", "stride", "strides"}


def _step_check(self, name, reason, prop):
    tr = _state.tracer
    if isinstance(tr, StepTracer) and not tr.in_meta and name not in _LAYOUT_READS:
        tr.abort(reason.replace("a traced tensor", "a parameter or optimizer state"))


@guarded_by(_step_check)
class StepTensor(Tensor):
    """A real tensor the step reads (a parameter, a gradient, an optimizer's state), for the length
    of a step's trace: ``copy_`` is functionalized, data reads abort (sizes are keyed)."""

    __slots__ = ()

    def copy_(self, src):
        tr = _state.tracer
        if isinstance(tr, StepTracer) and not tr.in_meta:
            tr.assign(self, src if not isinstance(src, Tensor) or src.dtype == self.dtype else src.to(self.dtype))
            return self
        return Tensor.copy_(self, src)

    def __getitem__(self, index):
        tr = _state.tracer
        if isinstance(tr, StepTracer) and not tr.in_meta:     # a view: recorded, so writes see it
            return tr.record_getitem(self, index)
        return Tensor.__getitem__(self, index)

    # ``.data`` is a second tensor over the same memory, outside autograd: a write through it would
    # change the real tensor while tracing
    data = _prop_guard("data", ".data of a parameter or optimizer state (a second tensor over its memory)",
                       _step_check)
