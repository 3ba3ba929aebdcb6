"""Compiled mode's process-wide state: what it computes once from the registrations and keeps
(record specs, decompositions, plans, ...), its counters and its size limit, in one object.

The caches hold only what registrations determine, so every registration change clears them
(``registry.on_change``, with the dispatch memos, which hold the generated recorders)."""

from __future__ import annotations

import os
import sys

from dispatch_jit import registry

from ..run.steps import Stats

# False on a free-threaded interpreter, where LazyRecorder's lock-free handshake is not sound
GIL = getattr(sys, "_is_gil_enabled", lambda: True)()
MAX_PLANS = 4096
MISS = object()


class LazyState:
    """The caches, counters and settings of compiled mode (all threads)."""

    def __init__(self):
        self.max_pending = int(os.environ.get("DISPATCH_JIT_MAX_PENDING", "512"))
        self.stats = Stats()                 # the fused loops' compile counters
        self.counters = {"records": 0, "flushes": 0, "plan_hits": 0, "plans": 0, "eager_ops": 0,
                         "size_flushes": 0, "dead_values": 0, "generic_records": 0, "grad_nodes": 0,
                         "backward_captures": 0, "backward_replays": 0, "steps_recorded": 0, "step_fallbacks": 0}
        self.step_fallback_reason = ""       # why an optimizer's group last took eager mode's update
        # cleared on every registration change (registrations_changed):
        self.specs: dict = {}        # (op, arg signatures/types, kwarg names/types) -> known, or None: not recorded
        self.decomps: dict = {}      # (op, on CUDA) -> the decomposition to record through, or None
        self.of_pending: dict = {}   # op -> how a call on a pending value records (record.of_pending), or None
        self.view_lists: dict = {}   # view op -> per static argument, whether its schema type is an int list
        self.functional: dict = {}   # in-place op -> its out-of-place op (record.functional_of), or None
        self.plans: dict = {}        # a flush's structural key -> Plan
        self.meta_fns: dict = {}     # op -> the meta function its generic records are typed by, or None
        self.metas: dict = {}        # (op, arg kinds/sigs/shapes/statics) -> its results' (type, shape), or None
        self.autograd: dict = {}     # op -> (its AutogradKernel, layout) for grad.py, or None
        self.backwards: dict = {}    # a pending backward's structural key -> its records (backward.py)
        # determined by the key alone, whatever is registered:
        self.keyers: dict = {}       # (record length, runtime slots) -> generated _scalar_slots of that layout
        self.sig_type: dict = {}     # tensor sig -> TensorType
        self.sig_ok: dict = {}       # tensor sig -> a plain dense tensor's

    def registrations_changed(self) -> None:
        """A registration changed (registry.on_change, with the dispatch memos, which hold the
        record specializations): drop what was computed from the old ones."""
        for cache in (self.decomps, self.of_pending, self.view_lists, self.functional, self.specs, self.plans, self.meta_fns,
                      self.metas, self.autograd, self.backwards):
            cache.clear()


state = LazyState()
registry.on_change(state.registrations_changed)
