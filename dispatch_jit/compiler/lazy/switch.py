"""The mode switch: ``set_mode``/``get_mode``/``mode``/``flush``/``init_mode_from_env``, and the
hooks compiled mode installs the first time any thread enters it: the generated recorders
(the Tracer key's fallback, specialized per call signature), a write observer (writes.py), and
the Tensor methods that write or export memory outside the dispatcher."""

from __future__ import annotations

import functools
import os
import threading

import numpy as np

from dispatch_jit.bufferpool import pool as _pool
from dispatch_jit.dispatcher import tls
from dispatch_jit.errors import InvalidArgumentError
from dispatch_jit.keys import DispatchKey, key_bits
from dispatch_jit.tensor import Tensor
from dispatch_jit.writes import observe_writes

from ..trace.fallback import install_tracer_fallback
from ..trace.symbolic import _state
from . import backward, update
from .record import LazyRecorder
from .specialize import recording_fallback, set_limit
from .state import state
from .tensor import CUDA_SIG
from .watch import before_write, mark_exported, pending_readers

MODES = ("eager", "compiled")
_TRACER_BIT = key_bits(DispatchKey.Tracer)


def max_pending() -> int:
    """Pending-graph size (nodes) at which compiled mode flushes by itself."""
    return state.max_pending


def set_max_pending(n: int) -> None:
    if n < 1:
        raise InvalidArgumentError(f"max_pending must be >= 1, got {n}")
    set_limit(n)


def lazy_info() -> dict:
    """Counters of compiled mode (all threads): ops recorded, flushes, plan cache
    hits and builds, ops run eagerly, flushes caused by the size limit, fused
    loops compiled, recorded values never computed because they were dropped,
    records of ops that do not fuse (``generic_records``: typed by their meta
    functions), autograd nodes made for recorded ops (``grad_nodes``), backwards
    of pending losses walked and kept for replay (``backward_captures``) and
    replayed from those records (``backward_replays``: backward.py), the
    optimizer steps whose update was recorded into the graph (``steps_recorded``),
    the parameter groups that took eager mode's update instead (``step_fallbacks``)
    and why the last one did (``step_fallback_reason``), and the output pool's
    hits and misses (all compiled and eager large outputs)."""
    r = _mstate.recorder
    info = dict(state.counters, loop_compiles=state.stats.compiles, plan_cache_size=len(state.plans),
                pool_hits=_pool.hits, pool_misses=_pool.misses, step_fallback_reason=state.step_fallback_reason)
    info["records"] += r.pending if r is not None else 0     # counted per flush; this thread's pending too
    return info


class _ModeState(threading.local):
    def __init__(self):
        self.mode = "eager"
        self.recorder = None
        self.prev_tracer = None


_mstate = _ModeState()


def get_mode() -> str:
    """This thread's execution mode: "eager" or "compiled"."""
    return _mstate.mode


def flush() -> None:
    """Run this thread's pending graph now (a no-op in eager mode)."""
    r = _mstate.recorder
    if r is not None:
        r.flush()


def set_mode(name: str) -> None:
    """Switch this thread to "eager" (ops run as they are called) or "compiled"
    (elementwise ops are recorded and run fused when a value is needed).
    Leaving compiled mode runs the pending graph.

    >>> import dispatch_jit as dj
    >>> from dispatch_jit.compiler import set_mode, get_mode
    >>> set_mode("compiled"); y = dj.tensor([1.0, -2.0]) * 3.0 + 1.0; set_mode("eager")
    >>> y
    tensor([ 4., -5.])
    """
    if name not in MODES:
        raise InvalidArgumentError(f"unknown mode {name!r}; expected one of {', '.join(map(repr, MODES))}")
    st = _mstate
    if name == st.mode:
        return
    if name == "compiled":
        _install_forcing_hooks()
        if st.recorder is None:
            st.recorder = LazyRecorder()
        st.prev_tracer = _state.tracer
        _state.tracer = st.recorder
        tls.include |= _TRACER_BIT
        tls.update()
        st.mode = "compiled"
    else:
        try:
            st.recorder.flush()
        finally:
            _state.tracer = st.prev_tracer
            st.prev_tracer = None
            tls.include &= ~_TRACER_BIT
            tls.update()
            st.mode = "eager"


class mode:
    """``with mode("compiled"):`` run the block in that mode, then restore the previous one (also a
    decorator).  A class, not a generator context manager: a training step enters and leaves it
    every step, and contextlib's machinery cost 1.9 us of its 4.4.

    >>> import dispatch_jit as dj
    >>> from dispatch_jit.compiler import mode
    >>> with mode("compiled"):
    ...     y = dj.exp(dj.tensor([0.0, 1.0])) * 2.0
    ...     print(y.shape)
    (2,)
    >>> y
    tensor([2.0000, 5.4366])
    """

    __slots__ = ("name", "prev")

    def __init__(self, name: str):
        self.name = name

    def __enter__(self) -> None:
        self.prev = _mstate.mode
        set_mode(self.name)

    def __exit__(self, *exc) -> None:
        set_mode(self.prev)

    def __call__(self, fn):
        @functools.wraps(fn)
        def in_mode(*args, **kwargs):
            with mode(self.name):          # one of its own per call: prev is per entry
                return fn(*args, **kwargs)
        return in_mode


def init_mode_from_env() -> None:
    """Apply ``DISPATCH_JIT_MODE`` (eager|compiled) to the calling thread."""
    m = os.environ.get("DISPATCH_JIT_MODE", "").strip().lower()
    if m:
        set_mode(m)


_hooks: list = []
_hooks_lock = threading.Lock()


def _install_forcing_hooks():
    """On entering compiled mode the first time (in any thread): the Tracer fallback specializes
    per signature (the generated recorders), writes outside the dispatcher (item assignment,
    NumPy views) run the pending readers first, and a write observer (writes.py) does it for ops."""
    with _hooks_lock:
        if _hooks:
            return
        _install()
        _hooks.append(True)


def _install():
    # the engine takes write observers for writes by ops (writes.py) but has none for item
    # assignment and NumPy exports: those Tensor methods are wrapped, once, process-wide
    install_tracer_fallback(recording_fallback)
    backward.install()        # a pending loss's backward: replayed per structure (backward.py)

    def writes_first(orig):
        @functools.wraps(orig)
        def hooked(self, *a, **k):
            if pending_readers:
                before_write(self)
            return orig(self, *a, **k)
        return hooked

    def exports(orig):
        @functools.wraps(orig)
        def hooked(self, *a, **k):
            if pending_readers:
                before_write(self)
            out = orig(self, *a, **k)
            if out.__class__ is np.ndarray and not self._sig & CUDA_SIG:     # CUDA: a host copy
                mark_exported(out)
            return out
        return hooked
    Tensor.__setitem__ = writes_first(Tensor.__dict__["__setitem__"])
    for name in ("numpy", "__array__"):
        setattr(Tensor, name, exports(Tensor.__dict__[name]))
    _hooks.append(observe_writes(before_write, pending_readers))
    # dj.optim's steps record their updates into the pending graph (update.py)
    update.install()


install_tracer_fallback()
