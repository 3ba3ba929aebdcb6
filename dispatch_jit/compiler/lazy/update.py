"""An optimizer's step in compiled mode: the update recorded into the pending graph that holds
the forward and the backward, and run with them as one plan at the end of ``step()``.

dj.optim's ``step()`` hands itself to ``STEP`` (``optimizer.LAZY_STEP``) when the calling thread
records in compiled mode.  Per parameter group, ``StepRecorder.group`` decides whether the update
can be recorded: exactly where eager mode would update the group with its multi-tensor loop
(foreach.py) and nothing could observe the difference (C-contiguous CPU float32/float64
parameters of one dtype, gradients and state of the same dtype and shape, none a view or viewed,
no storage handed out to NumPy, distinct storages, not the step that creates the state).  Then
the optimizer runs its per-tensor update ops (sgd.py ``_sgd_ops``, adam.py ``_adam_ops``, which
round as the loop does: the same bits), which record as any elementwise op does (their Python
numbers are runtime scalars of the plan: a learning-rate schedule reuses one plan), and hands
each written tensor's new value to ``assign`` instead of copying it in: the update reads the new
value from then on, and the tensor keeps its old data until the step ends.

The end of ``step()`` (``finish``) is the sync point: the pending graphs of other threads that
read a written tensor run first (as eager mode's ``written()`` does), then this thread's graph
runs once (forward tail, backward, ``.grad``, update: one plan, one compiled function after a
few steps), told which new values belong in which input's memory (``LazyRecorder.write_back``:
execute.py makes that the plan's ``inplace``, and the plan function writes them there where no
alias can see it, planfn.py ``_inplace``); the others are copied in.  Each written tensor gets
one version bump, as from the loop.  A group that cannot be recorded first runs the graph and
the writes recorded so far (so groups update in eager mode's order), then takes eager mode's
path; ``lazy_info()`` counts recorded steps and fallbacks, with the last fallback's reason.
"""

from __future__ import annotations

import threading

import numpy as np

from dispatch_jit.tensor import Tensor, bump_version

from ..tracer import _state
from .record import LazyRecorder
from .state import state
from .tensor import SLOT_DATA, LazyTensor, Pending, get_slot
from .watch import _is_exported, _storage_root, _watched

__all__ = ["StepRecorder", "STEP"]

_LOOP_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


class _Session(threading.local):
    def __init__(self):
        self.depth = 0             # step() calls under way in this thread (a closure may step)
        self.writes: dict = {}     # id(tensor) -> (tensor, its new value), in the order first written
        self.of: dict = {}         # id(a new value) -> (the tensor, the value): a value written again
        self.recorded = False      # a group of this step was recorded


def _plain_reason(t, what: str, dt, shape, written: bool = True) -> str:
    """Why the computed tensor ``t`` (a parameter, its state, a gradient) keeps the update out of
    the graph, or "".  A gradient is only read (any layout: the loop would read a copy)."""
    if t.__class__ is not Tensor:
        return f"{what} is a {type(t).__name__}, not a plain dense tensor"
    a = SLOT_DATA.__get__(t, Tensor)
    if a.__class__ is not np.ndarray:
        return f"{what} is on {t.device} (the update is recorded for CPU tensors)"
    if a.dtype not in _LOOP_DTYPES:
        return f"{what} is {a.dtype} (the update is recorded for float32/float64)"
    if dt is not None and (a.dtype != dt or a.shape != shape):
        return f"{what} is {a.dtype} of shape {a.shape}, its parameter {dt} of shape {shape}"
    if not written:
        return ""
    if not a.flags.c_contiguous:
        return f"{what} is not C-contiguous"
    d = t.__dict__
    if d.get("_base") is not None:
        return f"{what} is a view of another tensor"
    views = d.get("_views")
    if views and any(ref() is not None for ref in views):
        return f"{what} has views"
    if _is_exported(_storage_root(a)):
        return f"{what}'s storage was handed out to NumPy (.numpy(), __array__)"
    return ""


def _pending_reason(g, r, dt, shape) -> str:
    """Why the pending gradient ``g`` keeps the update out of the graph ``r``, or ""."""
    z = get_slot(g, Tensor)
    if z.__class__ is not Pending or z.recorder is not r:
        return "a gradient is pending in another graph"
    if z.type.dtype.np != dt or tuple(z.shape) != shape:
        return f"a gradient of {z.type.dtype.np} of shape {tuple(z.shape)}, its parameter {dt} of shape {shape}"
    return ""


def unrecordable(r, params: list, tensors: list) -> str:
    """Why the update of ``params`` (with their gradients) writing them and ``tensors`` (their
    optimizer state) cannot be recorded into ``r``'s graph, or "" (see the module docstring)."""
    roots = set()
    dt = None
    for p in params:
        why = _plain_reason(p, "a parameter", None, None)
        if why:
            return why
        a = SLOT_DATA.__get__(p, Tensor)
        if dt is None:
            dt = a.dtype
        elif a.dtype != dt:
            return "a group with parameters of several dtypes"
        g = p.__dict__.get("_grad")
        if g.__class__ is LazyTensor:
            why = _pending_reason(g, r, dt, a.shape)
        else:
            why = _plain_reason(g, "a gradient", dt, a.shape, written=False)
        if why:
            return why
        roots.add(id(_storage_root(a)))
    for t, p in zip(tensors, params * (len(tensors) // max(len(params), 1))):
        a = SLOT_DATA.__get__(p, Tensor)
        why = _plain_reason(t, "an optimizer state tensor", a.dtype, a.shape)
        if why:
            return why
        roots.add(id(_storage_root(SLOT_DATA.__get__(t, Tensor))))
    if len(roots) != len(params) + len(tensors):
        return "parameters or optimizer state share memory"
    return ""


class StepRecorder:
    """What ``optimizer.LAZY_STEP`` holds (see the module docstring)."""

    def __init__(self):
        self.tls = _Session()

    @staticmethod
    def recording() -> bool:
        """Whether this thread records in compiled mode."""
        return _state.tracer.__class__ is LazyRecorder

    def step(self, opt, closure, run):
        """``run(closure)`` (the optimizer's step, whose groups call ``group``), then ``finish``."""
        s = self.tls
        if s.depth:
            return run(closure)
        s.depth, s.recorded = 1, False
        try:
            return run(closure)
        finally:
            s.depth = 0
            if s.recorded:
                state.counters["steps_recorded"] += 1
            self.finish()

    def group(self, params: list, tensors: list, why: str = ""):
        """The write function for the update of ``params`` (which writes them and ``tensors``) if it
        can be recorded, else None, after running the graph and the writes recorded so far."""
        r = _state.tracer
        why = why or unrecordable(r, params, tensors)
        if why:
            state.counters["step_fallbacks"] += 1
            state.step_fallback_reason = why
            self.finish()
            return None
        self.tls.recorded = True
        return self.assign

    def assign(self, t, value):
        """``t`` gets ``value`` at the end of the step; the update reads ``value`` as ``t`` until then
        (so ``t`` may be such a value: AdamW writes ``p`` twice)."""
        s = self.tls
        t = s.of.get(id(t), (t,))[0]
        s.writes[id(t)] = (t, value)
        s.of[id(value)] = (t, value)        # holds the value: its id stays its own
        return value

    def finish(self) -> None:
        """Run this thread's pending graph and give each written tensor its new value."""
        r = _state.tracer
        writes = list(self.tls.writes.values())
        self.tls.writes, self.tls.of = {}, {}
        if not writes:
            r.flush()
            return
        # other threads' graphs that read what the step writes run first, as before eager's loop
        keys = {id(_storage_root(get_slot(t, Tensor))) for t, _ in writes}
        for ref in tuple(_watched):
            o = ref()
            if o is not None and o is not r and not keys.isdisjoint(o.read_keys):
                o.flush()
        with r.lock:
            into = {}
            for t, v in writes:
                z = get_slot(v, Tensor) if v.__class__ is LazyTensor else None
                iv = r.input_ids.get(t)
                if z.__class__ is Pending and z.recorder is r and iv is not None:
                    into[iv] = z.vid
            r.write_back = into
            try:
                r.flush()
            finally:
                r.write_back = None
        for t, v in writes:
            a, new = get_slot(t, Tensor), v._data
            if new is not a:       # else the plan function wrote it in place
                np.copyto(a, new)
            bump_version(t)


STEP = StepRecorder()
