"""Running a pending graph (a flush): which recorded values are still wanted (``live_values``, read
from reference counts, ``_calibrate``d per interpreter), the plan for the records that compute
them (cached by the records themselves, ``state.plans``), the run, and the views made after it
from the tensors that the values they view became (``_derived_views``, ``_derive``)."""

from __future__ import annotations

import sys
import weakref

import numpy as np

from dispatch_jit.autograd.grad_mode import no_grad
from dispatch_jit.dispatcher import ExcludeDispatchKeyGuard, tls
from dispatch_jit.errors import InterpreterError
from dispatch_jit.keys import AUTOGRAD_BITS, DispatchKey, key_bits
from dispatch_jit.tensor import _AUTOGRAD_SIG_BITS as _AG, Tensor, share_view, wrap

from ..graph.ir import Graph, Var
from ..graph.passes import optimize
from ..run.call_rules import RULES
from ..run.plan import Plan
from ..trace.symbolic import _state
from .layout import FIRST_SLOT, OUT, SPEC
from .state import MAX_PLANS, state
from .tensor import FAILED, LazyTensor, get_slot, make_pending, new, set_slot

_K = DispatchKey
_FUNCTION_AFTER = 2      # plan cache hits before a lazy plan is made one compiled function
_TRACER_BITS = key_bits(_K.Tracer)


def run(recorder) -> None:
    """Run a recorder's pending graph and reset it (``LazyRecorder.flush``, holding its lock)."""
    records = recorder.records
    if not records:
        return
    lazies = recorder.lazies
    live, twins = _twins(live_values(lazies, DEAD_RC))
    inputs, tensors, types, next_id = recorder.inputs, recorder.tensors, recorder.types, recorder.next
    multi = recorder.multi
    derived, roots = _derived_views(records, live) if recorder.views else ([], [])
    recorder._reset()
    state.counters["flushes"] += 1
    state.counters["records"] += len(records)
    if not live:
        state.counters["dead_values"] += len(records)
        return
    if derived:
        later = {r[OUT] for r, _ in derived}
        live = [x for x in live if x[0] not in later]
    # drop what no live value needs, before the key is built
    needed = {v for v, _ in live}
    needed.update(roots)
    keep = []
    for r in reversed(records):
        o = r[OUT]
        if o in needed or (multi and o in multi and not needed.isdisjoint(range(o, o + multi[o]))):
            keep.append(r)
            for i in r[SPEC].tpos:
                needed.add(r[i])
    keep.reverse()
    state.counters["dead_values"] += len(records) - len(keep) - sum(1 for r, _ in derived if r[OUT] not in needed)
    scalars = []
    for j, r in enumerate(keep):
        s = r[SPEC]
        if s.ty is not None:      # the fast path's records: the spec knows the type
            types[r[OUT]] = s.ty
        k = s.keyer
        if k is not None:
            keep[j] = k(r, scalars)
    ins = [(v, t) for v, t in zip(inputs, tensors) if v in needed]
    outs_v = tuple([v for v, _ in live] + roots)
    # the inputs' shapes too: a plan becomes one compiled function for the sizes of one run, so two
    # flushes of one structure and other sizes (a GPT's token and position embeddings, each step)
    # get a plan each, rather than one whose function declines every other call
    key = (tuple(keep), tuple([v for v, _ in ins]), tuple([t._sig for _, t in ins]),
           tuple([get_slot(t, Tensor).shape for _, t in ins]), outs_v)
    plan = state.plans.get(key)
    try:
        if plan is None:
            g = Graph(inputs=[v for v, _ in ins], types=types, next_id=next_id,
                      outputs=tuple(Var(v) for v in outs_v), shapes=_shapes(recorder, ins, lazies))
            g.nodes = [r[SPEC].node(r, scalars) for r in keep]
            optimized, _ = optimize(g.check())
            plan = Plan(optimized, state.stats, True)
            # a graph of products and losses recorded again and again (a training loop): on its
            # _FUNCTION_AFTER-th cache hit the plan becomes one compiled function for the sizes of
            # that run where it can (run/function.py: the interpreted plan's bits; a call of other sizes
            # runs interpreted).  Plans of fused loops alone stay interpreted (None): their steps
            # are few, and a compile per such plan would cost more than it saves
            plan.hits_to_function = _FUNCTION_AFTER if any(
                n.name in RULES for n in optimized.nodes if n.op != "fused" and n.op != "const") else None
            if len(state.plans) >= MAX_PLANS:
                state.plans.clear()
            state.plans[key] = plan
            state.counters["plans"] += 1
        else:
            state.counters["plan_hits"] += 1
            if plan.hits_to_function is not None:
                plan.hits_to_function -= 1
                if plan.hits_to_function <= 0:
                    plan.hits_to_function = None
                    plan.one_function = True
        prev, prev_exclude = _state.tracer, tls.exclude
        _state.tracer = None
        # the Tracer key excluded, and grad mode off where an input requires grad: the plan computes
        # values; the nodes of the values that require grad were recorded with them (grad.py), and
        # those inputs are read as data.  (Its other values never require grad: they are the plan's
        # own.)  As ExcludeDispatchKeyGuard and no_grad would, in one exclude set (their objects
        # cost 2.8 us a flush)
        tls.exclude = prev_exclude | _TRACER_BITS | (AUTOGRAD_BITS if any([t._sig & _AG for _, t in ins]) else 0)
        tls.update()
        try:
            outs = plan.run([t for _, t in ins], scalars)
        finally:
            _state.tracer = prev
            tls.exclude = prev_exclude
            tls.update()
    except BaseException as e:
        _fail([t for _, t in live] + [t for _, t in derived if t is not None] + [t for t, _ in twins], e)
        raise
    given = set()
    for (_, t), o in zip(live, outs):
        a = o._data
        if id(a) in given:
            a = _copy(o)       # cse merged two values that eager mode keeps in separate memory
        given.add(id(a))
        set_slot(t, a)
        t._sig = o._sig | (t._sig & _AG)      # the autograd key stays: the tensor may require grad
        t.__class__ = Tensor
    if derived:
        made = dict(live)
        for v, o in zip(roots, outs[len(live):]):
            if id(o._data) in given:     # the same: a temporary of its own, as in eager mode
                o = wrap(_copy(o))
            given.add(id(o._data))
            made[v] = o
        _derive(derived, made)
    for t, of in twins:
        set_slot(t, get_slot(of, Tensor))
        t._sig = (of._sig & ~_AG) | (t._sig & _AG)
        t.__class__ = Tensor


def _shapes(recorder, ins: list, lazies: list) -> dict:
    """vid -> shape of the inputs and of every value a LazyTensor was made for (the recorder's
    own: a value whose tensor was rebound by an in-place record stays unknown).  A plan is for
    the sizes of one run (its key holds the inputs' shapes), so fusion may read them: a value
    smaller than its loop (attention's mask, saved for masked_fill's backward) becomes a loop of
    its own (passes._smaller) instead of making the region run op by op at every call, and
    chains of different sizes are separate loops (passes._shape_groups)."""
    shapes = {v: get_slot(t, Tensor).shape for v, t in ins}
    for t in lazies:
        if t.__class__ is LazyTensor:
            z = t._lazy
            if z.recorder is recorder:
                shapes[z.vid] = z.shape
    return shapes


def _twins(live: list) -> tuple[list, list]:
    """``live`` without the tensors pending as a value that another one is pending as too
    (autograd's saved twin of an op's output, ``LazyTensor._saved_twin``), and those as
    (tensor, the tensor whose array it gets)."""
    if len(live) < 2:
        return live, ()
    first, twins = {}, []
    for v, t in live:
        if v in first:
            twins.append((t, first[v]))
        else:
            first[v] = t
    if twins:
        live = list(first.items())
    return live, twins


def _copy(t):
    """A copy of a computed tensor's data (NumPy's, or a CUDA array's through the eager clone)."""
    a = t._data
    if isinstance(a, np.ndarray):
        return a.copy()
    prev = _state.tracer
    _state.tracer = None
    try:
        with ExcludeDispatchKeyGuard(_K.Tracer):
            return t.clone()._data
    finally:
        _state.tracer = prev


def _derived_views(records: list, live: list) -> tuple[list, list]:
    """The views a flush makes after the run, with the eager view ops, from the tensors that the
    values they view became: each live view, and the views between it and the first value it
    views that is not a view (its *root*), as ``(record, its LazyTensor or None)`` in program
    order; and the roots that are not live, which the plan then returns too.

    So a live view is what eager mode's would be: it shares its memory, version counter and
    ``_base`` (autograd's in-place rules follow it) with the tensor it views, whether or not cse
    merged that value with another, and it has eager mode's strides (sink_views moves no view
    of a value the plan returns: it would compute the view contiguously, in its loop)."""
    views = {r[OUT]: r for r in records if r[SPEC].view}
    is_live = {v for v, _ in live}
    chain, roots = {}, []
    for v, _ in live:
        r = views.get(v)
        while r is not None and r[OUT] not in chain:
            chain[r[OUT]] = r
            src = r[FIRST_SLOT]
            r = views.get(src)
            if r is None and src not in is_live and src not in roots:
                roots.append(src)
    if not chain:
        return [], []
    tensor = dict(live)
    return [(chain[v], tensor.get(v)) for v in sorted(chain)], roots


def _derive(derived: list, made: dict) -> None:
    """Make the views ``_derived_views`` chose; ``made``: vid -> the tensor of each root and
    each live value (it gains the views)."""
    prev = _state.tracer
    _state.tracer = None
    try:
        with ExcludeDispatchKeyGuard(_K.Tracer), no_grad():
            for r, t in derived:
                o = r[SPEC].op(made[r[FIRST_SLOT]], *r[SPEC].statics(r))
                if t is not None:
                    set_slot(t, o._data)
                    t._sig = o._sig
                    share_view(t, o)                   # the version counter and _base it shares
                    t.__class__ = Tensor
                    o = t
                made[r[OUT]] = o
    except BaseException as e:
        _fail([t for _, t in derived if t is not None and t.__class__ is LazyTensor], e)
        raise
    finally:
        _state.tracer = prev


def _fail(lazies: list, e: BaseException) -> None:
    """Mark pending tensors failed: reading them raises, chained to ``e``."""
    for t in lazies:
        z = get_slot(t, Tensor)
        set_slot(t, make_pending(FAILED, e, z.shape, z.type))


def live_values(lazies: list, limit: int) -> list:
    """(vid, tensor) of each pending LazyTensor that something besides the recorder refers to.
    The recorder holds its LazyTensors strongly until the flush (a list append per record is
    cheaper than a weak reference); one that nothing else refers to (its refcount, as seen
    from here, is at most ``limit``) and no weak reference can reach can never be read, so
    its value is never computed."""
    live = []
    rc, wc = sys.getrefcount, weakref.getweakrefcount
    for i in range(len(lazies)):
        if rc(lazies[i]) > limit or wc(lazies[i]):
            t = lazies[i]
            z = t._lazy if t.__class__ is LazyTensor else None
            if z is not None and z.recorder is not FAILED:
                live.append((z.vid, t))
    return live


def _calibrate() -> int:
    """The ``limit`` of ``live_values``: measured, since interpreters differ in the temporary
    references they hold."""
    t = new(LazyTensor)
    t._lazy = make_pending(None, 0, (), None)
    lst = [t]
    del t
    for limit in range(1, 16):
        if not live_values(lst, limit):
            held = lst[0]                  # a second reference must make it live
            ok = len(live_values(lst, limit)) == 1
            del held
            if ok:
                return limit
            break
    raise InterpreterError("compiled mode: cannot calibrate reference counts on this interpreter")


DEAD_RC = _calibrate()
