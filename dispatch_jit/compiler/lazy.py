"""Global compiled mode: ``dj.set_mode('compiled')``, ``with dj.mode('compiled'):``,
``DISPATCH_JIT_MODE=compiled``.

In compiled mode the Tracer key is in the thread's include set and the
thread's ``LazyRecorder`` is the active tracer, so every operator call lands
in ``LazyRecorder.record``.  A fusible elementwise op (the same test as
``dj.compile``'s fusion: ``elementwise.result_of``) on CPU tensors that do
not require grad is *recorded*: it appends a node to the thread's pending
graph and returns a ``LazyTensor``, a real ``dj.Tensor`` whose ``_data`` is
not computed yet (its shape, dtype and ndim are known).  Every other op
first forces the pending graph, then runs eagerly.

Forcing ("flush") runs the pending graph through the passes, plan and
codegen of ``dj.compile`` (dce, cse, fusion, one Numba loop per region);
values whose lazy tensors were dropped are never computed.  Plans are cached
by the graph's structure (ops, constants, input signatures, which values are
live), so a loop that records the same chain again reuses the plan, and the
Numba loops are shared process-wide by source in any case.

What forces: any access to a lazy tensor's data (``.numpy()``,
``__array__``, ``.item()``, ``.tolist()``, ``repr``, ``bool()``, indexing,
``backward()``, ``detach()``; anything that reads ``_data``), any op that is
not recorded, ``t[...] = v`` / ``.numpy()`` on any tensor while a graph is
pending, leaving compiled mode, and a pending graph of ``max_pending()``
nodes.  Results equal eager mode's bit for bit (the fused loops apply eager
mode's per-op casts).

The mode is per thread (the dispatcher's include set is thread-local); the
environment variable sets the importing thread's mode.  Known gap: writing
into a NumPy array that a pending graph's input tensor shares memory with
(``dj.asarray(a)``, then ``a[...] = ...`` before forcing) is seen by the
pending graph, where eager mode would have used the old values.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import threading
import weakref

import numpy as np

from dispatch_jit.dispatcher import ExcludeDispatchKeyGuard, tls
from dispatch_jit.keys import DispatchKey
from dispatch_jit.registry import fallthrough_kernel
from dispatch_jit.signature import decode, make_sig
from dispatch_jit.tensor import CPU_BITS, Tensor

from .elementwise import reduced_shape, reduction_info, result_of
from .ir import Graph, Node, TensorType, Var
from .passes import optimize
from .plan import Plan, Stats
from .trace import _state, install_tracer_fallback

__all__ = ["set_mode", "get_mode", "mode", "LazyTensor", "flush", "lazy_info", "max_pending",
           "set_max_pending", "init_mode_from_env", "MODES"]

MODES = ("eager", "compiled")
_K = DispatchKey
_TRACER_BIT = 1 << _K.Tracer.value
_SLOT_DATA = Tensor.__dict__["_data"]     # the slot descriptor
_new = object.__new__
_MAX_PENDING = [int(os.environ.get("DISPATCH_JIT_MAX_PENDING", "512"))]
_MAX_PLANS = 4096


def max_pending() -> int:
    """Pending-graph size (nodes) at which compiled mode flushes by itself."""
    return _MAX_PENDING[0]


def set_max_pending(n: int) -> None:
    if n < 1:
        raise ValueError(f"max_pending must be >= 1, got {n}")
    _MAX_PENDING[0] = int(n)


class LazyTensor(Tensor):
    """A ``dj.Tensor`` whose data a pending graph has yet to compute.  Reading
    ``_data`` forces the graph; the tensor then becomes a plain ``Tensor``."""

    __slots__ = ()

    @property
    def _data(self):
        _force(self)
        return _SLOT_DATA.__get__(self, Tensor)

    @_data.setter
    def _data(self, value):
        _force(self)
        _SLOT_DATA.__set__(self, value)

    # metadata known without computing anything
    @property
    def shape(self) -> tuple:
        return self.__dict__["_shape"]

    @property
    def ndim(self) -> int:
        return len(self.__dict__["_shape"])

    def dim(self) -> int:
        return len(self.__dict__["_shape"])

    @property
    def dtype(self):
        return self.__dict__["_dtype"]

    def size(self, dim: int | None = None):
        s = self.__dict__["_shape"]
        if dim is None:
            return s
        if not -len(s) <= dim < max(len(s), 1):
            _force(self)
            return self.size(dim)
        return s[dim]

    def numel(self) -> int:
        return int(np.prod(self.__dict__["_shape"], dtype=np.int64))

    # copies and pickles are of the computed tensor (forcing turns self into a plain Tensor)
    def __copy__(self):
        _force(self)
        return copy.copy(self)

    def __deepcopy__(self, memo):
        _force(self)
        return copy.deepcopy(self, memo)

    def __reduce_ex__(self, protocol):
        _force(self)
        return self.__reduce_ex__(protocol)


def _force(t) -> None:
    lazy = t.__dict__.get("_lazy")
    if lazy is not None:
        lazy[0].flush()
        err = t.__dict__.get("_lazy_error")
        if err is not None:
            raise RuntimeError("a pending compiled-mode graph failed to run") from err


_stats = Stats()
_plans: dict = {}
_counters = {"records": 0, "flushes": 0, "plan_hits": 0, "plans": 0, "eager_ops": 0, "size_flushes": 0,
             "dead_values": 0}


def lazy_info() -> dict:
    """Counters of compiled mode (all threads): ops recorded, flushes, plan cache
    hits and builds, ops run eagerly, flushes caused by the size limit, fused
    loops compiled, and recorded values never computed because they were dropped."""
    return dict(_counters, loop_compiles=_stats.compiles, plan_cache_size=len(_plans))


_MISS = object()
_sig_type: dict = {}  # tensor sig -> TensorType
_types: dict = {}     # (op, arg signatures/types) -> (output TensorType, output sig), or None: not recorded
_decomps: dict = {}
_SCALARS = frozenset([bool, int, float, type(None), np.float32, np.float64, np.int64, np.int32, np.bool_])


def _decomposition(op):
    """The CompositeImplicitAutograd decomposition to record through, if any."""
    d = _decomps.get(op, _MISS)
    if d is _MISS:
        cia = op._entry.kernels.get(_K.CompositeImplicitAutograd)
        d = None
        if cia is not None and not hasattr(cia.fn, "specialize") and cia.fn is not fallthrough_kernel:
            d = cia.fn
        _decomps[op] = d
    return d


_sig_ok: dict = {}
_is_reduction: dict = {}         # op -> whether it may end a fused region (see elementwise.reduction_info)
_REDUCTION_NAMES = frozenset(["aten::sum", "aten::prod", "aten::mean", "aten::max", "aten::min"])


def _plain_cpu(sig) -> bool:
    ok = _sig_ok.get(sig)
    if ok is None:
        m = decode(sig)
        ok = _sig_ok[sig] = (m.kind == "tensor" and m.device == "cpu" and m.keyset == CPU_BITS)
    return ok


class LazyRecorder:
    """One thread's pending graph, kept as flat records until it is flushed:
    ``(op, args, kwargs, out)`` with each tensor argument as its value id (an
    int) and each constant as ``(type, value)``; that tuple is also the node's
    part of the structural cache key, so a cache hit builds no Graph at all."""

    def __init__(self):
        self._reset()

    def _reset(self):
        self.records: list = []           # (op, args, kwargs, out vid)
        self.types: dict = {}             # vid -> TensorType
        self.next = 0
        self.inputs: list = []            # input vids, in order
        self.tensors: list = []           # the real input tensors, same order
        self.input_ids: dict = {}         # id(tensor) -> vid
        self.lazies: dict = {}            # vid -> weakref to its LazyTensor

    @property
    def pending(self) -> int:
        return len(self.records)

    def _rollback(self, added: int):
        if added:
            for vid in self.inputs[-added:]:
                self.types.pop(vid, None)
            del self.inputs[-added:]
            del self.tensors[-added:]
            keep = set(self.inputs)
            self.input_ids = {k: v for k, v in self.input_ids.items() if v in keep}

    # -- recording -----------------------------------------------------------------------
    def record(self, op, args: tuple, kwargs: dict):
        cia = _decomposition(op)
        if cia is not None:
            return cia(*args, **kwargs)      # a decomposition: record its pieces
        if args and args[0].__class__ is LazyTensor:
            r = _is_reduction.get(op)
            if r is None:
                r = _is_reduction[op] = op.name() in _REDUCTION_NAMES
            if r:
                t = self._record_reduction(op, args, kwargs)
                if t is not None:
                    return t
        enc, shapes, sigs = [], [], []
        added = 0
        for x in args:
            cls = x.__class__
            if cls is LazyTensor:
                d = x.__dict__
                lazy = d.get("_lazy")
                if lazy is None or lazy[0] is not self:
                    break
                enc.append(lazy[1])
                shapes.append(d["_shape"])
                sigs.append(x._sig)
            elif cls is Tensor:
                sig = x._sig
                data = _SLOT_DATA.__get__(x, Tensor)
                vid = self.input_ids.get(id(x))
                if vid is None:
                    ty = _sig_type.get(sig)
                    if ty is None:
                        if not _plain_cpu(sig):
                            break
                        m = decode(sig)
                        ty = _sig_type[sig] = TensorType(m.dtype, m.ndim)
                    vid = self.next
                    self.next += 1
                    self.types[vid] = ty
                    self.inputs.append(vid)
                    self.tensors.append(x)
                    self.input_ids[id(x)] = vid
                    added += 1
                enc.append(vid)
                shapes.append(data.shape)
                sigs.append(sig)
            elif cls in _SCALARS:
                enc.append((cls, x))
                sigs.append(cls)
            else:
                break
        else:
            if kwargs:
                kenc = tuple([(k, v.__class__, v) for k, v in kwargs.items()])
                ok = all(c in _SCALARS and (k != "out" or v is None) for k, c, v in kenc)
            else:
                kenc, ok = (), True
            if ok and shapes:
                mkey = (op, tuple(sigs), tuple([e[:2] for e in kenc]))
                known = _types.get(mkey, _MISS)
                if known is _MISS:
                    node = Node(op, tuple([Var(a) if a.__class__ is int else a[1] for a in enc]),
                                {k: v for k, _, v in kenc}, ())
                    ty = result_of(node, self.types)
                    known = _types[mkey] = None if ty is None else \
                        (ty, make_sig(CPU_BITS, ty.dtype, ty.ndim, True))
                if known is not None:
                    shape = shapes[0]
                    for s in shapes:
                        if s != shape:
                            try:
                                shape = np.broadcast_shapes(*shapes)
                            except ValueError:
                                known = None       # eager mode raises its own error
                            break
                if known is not None:
                    return self._append(op, tuple(enc), kenc, known, shape)
        self._rollback(added)
        return self._eager(op, args, kwargs)

    def _record_reduction(self, op, args: tuple, kwargs: dict):
        """A reduction of a pending value: recorded, so that fusion makes it the epilogue of
        the loop that computes the value (which is then never stored).  None: run it eagerly."""
        x = args[0]
        lazy = x.__dict__.get("_lazy")
        if lazy is None or lazy[0] is not self or len(args) > 3 or any(v is not None for v in kwargs.values()):
            return None
        axis = args[1] if len(args) > 1 else None
        keepdims = args[2] if len(args) > 2 else False
        if isinstance(axis, list):
            axis = tuple(axis)
        if not (axis is None or axis.__class__ is int or (axis.__class__ is tuple
                                                          and all(a.__class__ is int for a in axis))):
            return None
        if keepdims.__class__ is not bool:
            return None
        node = Node(op, (Var(lazy[1]), axis, keepdims), {}, ())
        red, _ = reduction_info(node, self.types)
        if red is None:
            return None
        ty = TensorType(red.result, red.out_ndim)
        known = (ty, make_sig(CPU_BITS, ty.dtype, ty.ndim, True))
        enc = (lazy[1], (type(axis), axis), (bool, keepdims))
        return self._append(op, enc, (), known, reduced_shape(x.__dict__["_shape"], red.axes, keepdims))

    def _append(self, op, enc, kenc, known, shape):
        ty, sig = known
        vid = self.next
        self.next += 1
        self.types[vid] = ty
        self.records.append((op, enc, kenc, vid))
        t = _new(LazyTensor)
        t._sig = sig
        d = t.__dict__
        d["_lazy"] = (self, vid)
        d["_shape"] = shape
        d["_dtype"] = ty.dtype
        self.lazies[vid] = weakref.ref(t)
        _counters["records"] += 1
        if len(self.records) >= _MAX_PENDING[0]:
            _counters["size_flushes"] += 1
            self.flush()
        return t

    def _eager(self, op, args, kwargs):
        _counters["eager_ops"] += 1
        self.flush()
        with ExcludeDispatchKeyGuard(_K.Tracer):
            return op(*args, **kwargs)

    # -- forcing -------------------------------------------------------------------------
    def flush(self) -> None:
        records = self.records
        if not records:
            return
        live = []
        for vid, ref in self.lazies.items():
            t = ref()
            if t is not None and "_lazy" in t.__dict__:
                live.append((vid, t))
        inputs, tensors, types, next_id = self.inputs, self.tensors, self.types, self.next
        self._reset()
        _counters["flushes"] += 1
        if not live:
            _counters["dead_values"] += len(records)
            return
        # drop what no live value needs, before the key is built
        needed = {v for v, _ in live}
        keep = []
        for r in reversed(records):
            if r[3] in needed:
                keep.append(r)
                needed.update([a for a in r[1] if a.__class__ is int])
        keep.reverse()
        _counters["dead_values"] += len(records) - len(keep)
        ins = [(v, t) for v, t in zip(inputs, tensors) if v in needed]
        outs_v = tuple([v for v, _ in live])
        key = (tuple(keep), tuple([v for v, _ in ins]), tuple([t._sig for _, t in ins]), outs_v)
        plan = _plans.get(key)
        try:
            if plan is None:
                g = Graph(inputs=[v for v, _ in ins], types=types, next_id=next_id,
                          outputs=tuple(Var(v) for v in outs_v))
                g.nodes = [Node(op, tuple([Var(a) if a.__class__ is int else a[1] for a in enc]),
                                {k: v for k, _, v in kenc}, (out,)) for op, enc, kenc, out in keep]
                optimized, _ = optimize(g.check())
                plan = Plan(optimized, _stats, True)
                if len(_plans) >= _MAX_PLANS:
                    _plans.clear()
                _plans[key] = plan
                _counters["plans"] += 1
            else:
                _counters["plan_hits"] += 1
            prev = _state.tracer
            _state.tracer = None
            try:
                with ExcludeDispatchKeyGuard(_K.Tracer):
                    outs = plan.run([t for _, t in ins])
            finally:
                _state.tracer = prev
        except BaseException as e:
            for _, t in live:
                d = t.__dict__
                d["_lazy"] = (_FAILED, None)
                d["_lazy_error"] = e
            raise
        for (_, t), o in zip(live, outs):
            _SLOT_DATA.__set__(t, o._data)
            t._sig = o._sig
            d = t.__dict__
            del d["_lazy"], d["_shape"], d["_dtype"]
            t.__class__ = Tensor


class _Failed:
    @staticmethod
    def flush():
        pass


_FAILED = _Failed()


# -- the mode ------------------------------------------------------------------------------
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
        raise ValueError(f"unknown mode {name!r}; expected one of {', '.join(map(repr, MODES))}")
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


@contextlib.contextmanager
def mode(name: str):
    """``with mode("compiled"):`` run the block in that mode, then restore the previous one.

    >>> import dispatch_jit as dj
    >>> from dispatch_jit.compiler import mode
    >>> with mode("compiled"):
    ...     y = dj.exp(dj.tensor([0.0, 1.0])) * 2.0
    ...     print(y.shape)
    (2,)
    >>> y
    tensor([2.0000, 5.4366])
    """
    prev = get_mode()
    set_mode(name)
    try:
        yield
    finally:
        set_mode(prev)


def init_mode_from_env() -> None:
    """Apply ``DISPATCH_JIT_MODE`` (eager|compiled) to the calling thread."""
    m = os.environ.get("DISPATCH_JIT_MODE", "").strip().lower()
    if m:
        set_mode(m)


# -- writes and NumPy views of real tensors force the pending graph first -------------------
_hooks: list = []


def _install_forcing_hooks():
    if _hooks:
        return
    _hooks.append(True)
    for name in ("__setitem__", "numpy", "__array__"):
        orig = Tensor.__dict__[name]

        @functools.wraps(orig)
        def hooked(self, *a, _orig=orig, **k):
            r = _mstate.recorder
            if r is not None and r.records:
                r.flush()
            return _orig(self, *a, **k)
        setattr(Tensor, name, hooked)


install_tracer_fallback()
