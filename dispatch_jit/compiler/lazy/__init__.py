"""Global compiled mode: ``dj.set_mode('compiled')``, ``with dj.execution_mode('compiled'):``,
``DISPATCH_JIT_MODE=compiled``.

In compiled mode the Tracer key is in the thread's include set and the
thread's ``LazyRecorder`` is the active tracer, so every operator call lands
in ``LazyRecorder.record``.  A fusible elementwise op (the same test as
``dj.compile``'s fusion: ``elementwise.result_of``) on plain dense CPU or CUDA tensors is
*recorded*: it appends a node to the thread's pending graph and returns a ``LazyTensor``, a
real ``dj.Tensor`` whose ``_data`` is not computed yet (its shape, dtype and ndim are known).  So are, of a value
pending in the graph: a reduction (it becomes the epilogue of the loop that
computes the value), a view (an op tagged ``dj.Tag.view`` with a shape
rule: permute, transpose, expand, squeeze, unsqueeze, view, reshape, flatten,
narrow) with int arguments, and basic
indexing (``t[1:, ::2]``, ``t[0]``, ``t[None]``, ``t[..., 1]``), whose output
shapes are computed from the input's (views.py: ``view_shape``,
``index_shape``) and whose static arguments are part of the record, so that
``sink_views`` fuses them into the loops around them as it does for
``dj.compile``.  A view whose arguments eager mode would reject is not
recorded: it runs eagerly and raises there.  An op that does not fuse but has a meta function
(its kernel at the Meta key: linear, softmax, log_softmax, the losses, their backward ops
(``linear_backward``, ``_softmax_backward_data``, ...), clone, topk, a custom op's
``register_fake``) is recorded on CPU tensors as one step of the plan, which runs its eager
kernel at the flush (``generic``: typed by the meta on stand-ins, once per shapes and static
arguments); so are ``matmul`` and ``stack`` and ``cat`` of a list of tensors, which have no
meta (typed by their eager kernel on stand-ins: their result's shape follows from the tensors').  An in-place op on a value pending
in the graph that does not require grad, is no view and has none (``g.mul_(coef)`` of
``clip_grad_norm_`` on a pending gradient) is recorded as its out-of-place op, the tensor rebound
to the new value and its version bumped as eager mode's write bumps it.  Never recorded: random
ops (their draws keep eager mode's order), other writes (in place into a computed tensor,
``out=``), ops with data-dependent output shapes or without a meta, calls under autocast, a call
whose meta raises.

Autograd (``grad``): with grad mode on, an op whose inputs require grad is recorded as above
(a tensor that requires grad is a plain input to the graph) and gets the node eager mode's
Autograd kernel gives it, made by that kernel around the pending result, saving pending
tensors: per signature, its generated recorder (``AutogradKernel.recorder``, from
``specialize``), else ``AutogradKernel.attach`` (``grad``).  So ``loss.backward()`` computes
nothing: the engine runs the nodes' formulas, whose ops (grad mode off) are recorded into the
same graph, and the leaves' ``.grad`` become pending values; the next read (an optimizer's
step, below, ``loss.item()``) runs forward and backward as one plan.  A training loop records the same
graph every step, and so the same backward: a plain ``loss.backward()`` of a pending loss whose
graph this thread's pending graph recorded (no hooks, ``retain_graph``, ``create_graph``,
``gradient=``, no ``.grad`` set yet) is walked by the engine once per structure of that graph
and then replayed: the records that walk appended are appended again, ``.grad`` set and the
nodes freed as the walk would (``backward``; ``lazy_info()``'s ``backward_captures`` and
``backward_replays``).  Hooks, ``retain_graph``, ``create_graph`` and the
saved tensors' version checks are the engine's own; views and indexing of tensors that require
grad, ``dj.autograd.Function`` and in-place ops on tensors that require grad still run eagerly
(forcing what they read).
An error that eager mode raises inside a recorded op's kernel (a class index out of range)
is raised, as the same class, by the read that runs the graph.

The optimizer step (``update``): ``opt.step()`` of dj.optim's SGD, Adam and AdamW calls a fused
update op per group (``_fused_sgd_``, ``_fused_adam_``, ``_fused_adamw_``), whose Tracer-key kernel
records its multi-tensor loop (foreach.py, eager mode's own update) as one step of the same graph,
reading the pending gradients, its numbers (the learning rate, betas, Adam's bias corrections)
runtime scalars, so a schedule reuses one plan.  The update is the sync point (as
``xm.mark_step()`` is torch_xla's): one flush runs forward tail, backward, ``.grad`` and update as
one plan, whose compiled function calls the loop itself; the loop writes the parameters and the
optimizer's state in their own memory, as in eager mode (same bits), one version bump each.  A
group eager mode would not update with its loop, the step that creates the state, a parameter
that is a view or whose storage was handed to NumPy runs the graph and then eager mode's path;
``lazy_info()`` counts ``steps_recorded`` and ``step_fallbacks`` (per group) and keeps
``step_fallback_reason``.  In-place writes of one's own (``p -= lr * p.grad``) are not recorded:
they run the graph first.  Every other op runs eagerly,
first forcing the pending graph if it reads a pending value or writes into a
tensor (in place, ``out=``); an op that does neither (a view of an input, a
creation function) leaves the graph pending, so ``(a * 2) + b.T`` is still one
loop, reading ``b.T`` with its strides.

Recording is as cheap as eager dispatch: the Tracer fallback specializes per
call signature (``specialize.specialize``), so the dispatcher's memo holds, for each
signature, generated code that knows already whether the op fuses, its
output type and its node encoding, and per call only looks up the inputs'
value ids and shapes, appends one record and makes one LazyTensor (whose
pending state lives in its ``_data`` slot, not an instance dict).  Which
recorded values are still wanted is read from reference counts at the flush,
not kept with weak references.

Forcing ("flush") runs the pending graph through the passes, plan and
codegen of ``dj.compile`` (dce, cse, fusion, one Numba loop per region; a plan with
products or losses that runs a third time becomes one compiled function for that run's
sizes, ``run/function.py``, which other sizes run interpreted);
values whose lazy tensors were dropped are never computed.  Plans are cached
by the graph's structure (ops, constants, input signatures and shapes, which values are
live: a plan's compiled function is for one run's sizes), so a loop that records the same chain again reuses the plan, and the
Numba loops are shared process-wide by source in any case.  A Python float or
int operand of an elementwise op on CPU tensors is not a constant of the plan
but a runtime value (``_scalar_slots``; ``Plan.run``'s scalars): ``x * float(i)``
in a loop reuses one plan whatever ``i`` is, keyed by the number's type only.
Bools, NumPy scalars, ``alpha=`` and the operands of CUDA ops stay constants,
keyed by value.

What forces: any access to a lazy tensor's data (``.numpy()``,
``__array__``, ``.item()``, ``.tolist()``, ``repr``, ``bool()``, advanced
indexing (tensors, lists, bools), ``detach()``; anything that reads ``_data``;
not ``backward()``, see Autograd above), any op that is not recorded and reads a pending value,
leaving compiled mode, and a pending graph of ``max_pending()`` nodes.  A write
into a tensor (an in-place op, ``out=``, ``t[...] = v``, ``copy_``, through any
view of its storage, and handing the storage out with ``.numpy()`` /
``__array__``), in any thread and in either mode, first runs every pending
graph, of any thread, that reads that storage (``before_write``; the
dispatcher calls it for ops whose schema marks the argument written).  Results
equal eager mode's bit for bit (the fused loops apply eager mode's per-op
casts).

Views keep eager mode's aliasing and layout: a view that is still wanted at
the flush is made after the run, by the eager view op, from the tensor that
the value it views became (the plan returns that value too, even when only
the view is wanted), so it shares that tensor's memory, version counter and
``_base`` (in-place ops on either are seen by both; autograd's in-place rules
apply) and has eager mode's strides (an ``expand`` is read-only, a reshape
copies where eager mode's does).  Views nothing holds on to are the ones
``sink_views`` fuses.  Until it is computed, a view's signature claims
contiguity only where eager mode's would be contiguous, and ``view`` is
recorded only of such a value (eager mode raises where the strides do not
allow it).

CUDA tensors record as CPU ones do: the flush runs a fused region of CUDA
values as one ``numba.cuda.jit`` kernel (compiler/cuda.py), on the values'
device, and views of CUDA values as eager steps of the plan.  A call that
mixes devices (cpu and cuda, or two CUDA devices) is not recorded: it runs
eagerly, which raises eager mode's DeviceMismatchError.

The mode is per thread (the dispatcher's include set is thread-local); the
environment variable sets the importing thread's mode.  Threads: each thread
records into its own graph, under the recorder's lock, and any thread may run
it (reading one of its tensors, or writing into what it reads), under the same
lock; an op that is not recorded runs outside it.  Results equal eager mode's
whatever other threads do, as far as eager mode's own result is determined
(two threads racing on one tensor without synchronizing get one of the
outcomes eager mode could give).

NumPy arrays: a write through an array obtained from ``.numpy()`` /
``__array__`` cannot be intercepted, so once a tensor's storage has been
handed out that way (``exported_storages``), each recorded op that reads it reads a
copy taken when the op is recorded, which is when eager mode reads it.  Known
gap: memory shared with a NumPy array that did not come from the tensor
(``dj.asarray(a)`` / ``dj.from_numpy(a)``, then ``a[...] = ...`` before the
flush) is not tracked: the pending graph sees the write where eager mode would
have used the old values.  Take a copy (``dj.tensor(a)``), or write through
the tensor instead.

Modules, each importing only those before it: ``state`` (the caches, counters and size
limit, one object), ``tensor`` (LazyTensor, forcing), ``encode`` (a record's encoding),
``watch`` (writes run the graphs that read the storage first), ``execute`` (a flush: liveness,
the plan, the run, the views derived after it), ``generic`` (records typed by meta functions),
``backward`` (a pending loss's backward, replayed per graph structure),
``grad`` (the autograd nodes of recorded ops), ``record`` (LazyRecorder), ``specialize``
(the generated per-signature recorders), ``update`` (an optimizer's loops recorded into the graph),
``switch`` (the mode and the hooks it installs).
"""

from .record import LazyRecorder  # noqa: F401  (the recorder class, as lazy.LazyRecorder)
from .switch import (MODES, flush, get_mode, init_mode_from_env, lazy_info, max_pending, mode, set_max_pending,
                     set_mode)
from .tensor import LazyTensor

__all__ = ["set_mode", "get_mode", "mode", "LazyTensor", "flush", "lazy_info", "max_pending",
           "set_max_pending", "init_mode_from_env", "MODES"]
