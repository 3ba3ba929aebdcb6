"""LazyRecorder: one thread's pending graph, and its generic recording paths (decompositions,
reductions and views of pending values, basic indexing, and whatever the generated
per-signature recorders of specialize.py leave to it)."""

from __future__ import annotations

import threading
import time
import weakref
from typing import NamedTuple

from dispatch_jit.autograd.grad_mode import is_grad_enabled
from dispatch_jit.dispatcher import ExcludeDispatchKeyGuard
from dispatch_jit.keys import DispatchKey
from dispatch_jit.ops import overload_of
from dispatch_jit.registry import Tag, lookup
from dispatch_jit.tensor import _AUTOGRAD_SIG_BITS as _AG, Tensor, bump_version

from ..elementwise import reduced_shape, reduction_info, result_of, scalar_op_of
from ..graph.ir import Node, TensorType, Var
from ..graph.views import GETITEM, index_shape, normalize_index, view_shape
from . import execute, generic, grad
from .encode import (BASIC_INDEX, KEEPS_CONTIGUOUS, NEEDS_CONTIGUOUS, RUNTIME_TYPES, SCALARS, broadcast,
                     canon, device_of, encode_index, generic_spec, out_sig, plain_dense, sig_type,
                     view_spec, view_statics)
from .layout import FIRST_SLOT, OUT, SPEC
from .state import GIL, MISS, state
from .tensor import (CUDA_SIG, SLOT_DATA, LazyTensor, Pending, PendingGraph, get_slot, make_pending, new,
                     pending, reads_pending)
from .watch import exported_storages, is_exported, snapshot_of, storage_root, unwatch_reads, watch_reads

_K = DispatchKey


class _Known(NamedTuple):
    """What ``LazyRecorder._record`` keeps per signature of a fusible op (``state.specs``)."""
    spec: object       # its records' Spec
    ty: TensorType     # the output's type
    sig: int           # and signature
    consts: tuple      # the positions of the constants among the positional slots


def decomposition_of(op, cuda: bool):
    """The CompositeImplicitAutograd kernel to record through, if eager mode runs it for dense
    tensors of that device: not where a kernel at the backend key (or CompositeExplicitAutograd)
    takes precedence (registry.compute_table_entry)."""
    d = state.decomps.get((op, cuda), MISS)
    if d is MISS:
        d = state.decomps[(op, cuda)] = op._entry.decomposition(_K.CUDA if cuda else _K.CPU)
    return d


def _on_cuda(args: tuple) -> bool:
    for x in args:
        if isinstance(x, Tensor):
            return bool(x._sig & CUDA_SIG)
    return False


class LazyRecorder(PendingGraph):
    """One thread's pending graph, kept as flat records until it is flushed:
    ``(spec, out vid, *slots)`` (see ``Spec``), which is also the node's part of
    the structural cache key, so a cache hit builds no Graph at all.

    Only its thread records into it, but any thread may flush it (by reading one of its
    pending tensors, or by writing into a tensor it reads), so a record and a flush must
    exclude each other.  ``lock`` does that for the generic path and every flush; the
    generated per-signature recorders avoid its cost (as much as the record itself) until
    another thread flushes this recorder, by a two-flag handshake: the owner raises ``busy``
    and then reads ``contended``; another thread, holding the lock, raises ``contended`` and
    then waits for ``busy`` to fall.  Each side writes its flag before it reads the other's,
    so under the GIL at least one of them sees the other's (Dekker's argument) and a record
    never overlaps a foreign flush.  The owner lowers ``contended`` again in its own next
    flush, under the lock (so never during a foreign one).  A lock-free record blocks on
    nothing, so the waiting flusher never waits for long.  Where the interpreter runs
    without a GIL the handshake is off: ``contended`` stays raised.

    ``read_keys``: the storages its inputs view (``_storage_key``); while it has any, it is in
    ``pending_readers``, where writers look for the graphs to run first."""

    def __init__(self):
        self.lock = threading.RLock()
        self.owner = threading.get_ident()
        self.busy = False
        self.contended = not GIL
        self.read_keys: set = set()
        self.ref = weakref.ref(self, unwatch_reads)
        self._reset()

    def _reset(self):
        self.records: list = []           # (spec, out vid, *slots)
        self.types: dict = {}             # vid -> TensorType
        self.next = 0
        self.inputs: list = []            # input vids, in order
        self.tensors: list = []           # the real input tensors, same order
        # tensor -> vid.  Tensors hash by identity (object.__hash__) and ``==`` is never called:
        # equal hashes mean the same object, as the list above keeps every key alive
        self.input_ids: dict = {}
        self.lazies: list = []            # the LazyTensors made; liveness is read at flush (live_values)
        self.views = 0                    # view records among them
        self.viewed: set = set()          # the vids views view or are, of records[:view_scan] (_viewed)
        self.view_scan = 0
        self.multi: dict = {}             # first vid -> number of values, of records defining several

    @property
    def pending(self) -> int:
        return len(self.records)

    def add_input(self, x, ty) -> int:
        vid = self.next
        self.next += 1
        self.types[vid] = ty
        self.inputs.append(vid)
        root = storage_root(get_slot(x, Tensor))
        if exported_storages and is_exported(root):
            self.tensors.append(snapshot_of(x))      # not in input_ids: the next op copies it anew
            return vid
        key = id(root)
        self.tensors.append(x)
        self.input_ids[x] = vid
        if not self.read_keys:
            watch_reads(self)
        self.read_keys.add(key)
        return vid

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
        """The generic path (the Tracer fallback, boxed): decompositions, reductions and
        views of pending values, and whatever ``specialize.specialize`` left to it."""
        cia = decomposition_of(op, _on_cuda(args))
        if cia is not None:
            return cia(*args, **kwargs)      # a decomposition: record its pieces
        if args and args[0].__class__ is LazyTensor and Tag.inplace in op.tags:
            with self.lock:
                t = self._record_inplace(op, args, kwargs)
            if t is not None:
                return t
        if is_grad_enabled() and grad.requires_grad(args, kwargs):
            t = grad.record(self, op, args, kwargs)         # with its autograd node
            return self._eager(op, args, kwargs) if t is None else t
        with self.lock:
            t = self._record(op, args, kwargs)
        # an op that is not recorded runs outside the lock: it may write into a tensor that another
        # thread's graph reads, and so wait for that recorder's lock
        return self._eager(op, args, kwargs) if t is None else t

    def _record(self, op, args: tuple, kwargs: dict):
        """``record`` under the lock: the LazyTensor made, or None (not recorded).  A tensor that
        requires grad is recorded as a plain one: with grad mode off eager mode reads it so, and
        with grad mode on grad.py adds the node."""
        if args and args[0].__class__ is LazyTensor:
            how = state.of_pending.get(op, MISS)
            if how is MISS:
                how = state.of_pending[op] = of_pending(op)
            if how is not None:
                t = how(self, op, args, kwargs)
                if t is not None:
                    return t
        if generic.meta_of(op) is not None:      # an op with a meta function does not fuse
            return generic.record(self, op, args, kwargs)
        if args and args[0].__class__ in (list, tuple):
            return generic.record_list(self, op, args, kwargs)
        kinds, vals, shapes, sigs = [], [], [], []
        added = 0
        for x in args:
            cls = x.__class__
            if cls is LazyTensor:
                z = pending(x)
                if z is None or z.recorder is not self:
                    break
                self.types[z.vid] = z.type
                kinds.append("v")
                vals.append(z.vid)
                shapes.append(z.shape)
                sigs.append(x._sig)
            elif cls is Tensor:
                sig = x._sig
                data = SLOT_DATA.__get__(x, Tensor)
                vid = self.input_ids.get(x)
                if vid is None:
                    if not plain_dense(sig & ~_AG):
                        break
                    vid = self.add_input(x, sig_type(sig))
                    added += 1
                kinds.append("v")
                vals.append(vid)
                shapes.append(data.shape)
                sigs.append(sig)
            elif cls in SCALARS:
                kinds.append(cls)
                vals.append(x)                 # as it is: a runtime scalar, or canon'ed below
                sigs.append(cls)
            else:
                break
        else:
            kclasses = tuple([(k, v.__class__) for k, v in kwargs.items()])
            ok = all(c in SCALARS and (k != "out" or c is type(None)) for k, c in kclasses)
            if ok and shapes and device_of(sigs) is not None:
                mkey = (op, tuple(sigs), kclasses)
                known = state.specs.get(mkey, MISS)
                if known is MISS:
                    node = Node(op, tuple([Var(v) if k == "v" else x for k, v, x in zip(kinds, vals, args)]),
                                dict(kwargs), ())
                    ty = result_of(node, self.types)
                    known = None if ty is None else self._generic_known(op, kinds, kclasses, ty, sigs)
                    state.specs[mkey] = known
                if known is not None:
                    shape = shapes[0]
                    for s in shapes:
                        if s != shape:
                            shape = broadcast(*shapes)
                            break
                    if shape is not None:          # else eager mode raises its own error
                        for i in known.consts:
                            if not vals[i]:
                                vals[i] = canon(vals[i])
                        vals += [v if v else canon(v) for v in kwargs.values()]
                        return self._append(known.spec, vals, known.ty, known.sig, shape)
        self._rollback(added)
        return None

    def _record_inplace(self, op, args: tuple, kwargs: dict):
        """An in-place op on a tensor pending in this graph (``g.mul_(coef)`` of clip_grad_norm_ on
        a pending gradient): its out-of-place op recorded, and the tensor rebound to the new value,
        its version bumped as eager mode's write bumps it (a saved tensor's check sees it).  None:
        run it eagerly (forcing the graph), where the tensor requires grad (autograd's in-place
        rules), is a view or viewed (eager mode's views would see the write), or the result would
        not have its dtype and shape (eager mode raises)."""
        x = args[0]
        z = get_slot(x, Tensor)
        if z.__class__ is not Pending or z.recorder is not self or x._sig & _AG:
            return None
        fn = state.functional.get(op, MISS)
        if fn is MISS:
            fn = state.functional[op] = functional_of(op)
        if fn is None or z.vid in self._viewed():
            return None
        t = self._record(fn, args, kwargs)
        w = get_slot(t, Tensor) if t is not None else None
        if w is None or w.__class__ is not Pending or w.type != z.type or w.shape != z.shape:
            return None          # a record nothing holds: never computed
        x._lazy = w
        x._sig = t._sig
        bump_version(x)
        return x

    def _viewed(self) -> set:
        """The values that views of this graph view or are (so that an in-place write to one is
        not recorded); the records are scanned once each."""
        recs = self.records
        if self.view_scan < len(recs):
            if self.views:
                for r in recs[self.view_scan:]:
                    if r[SPEC].view:
                        self.viewed.add(r[OUT])
                        self.viewed.add(r[FIRST_SLOT])
            self.view_scan = len(recs)
        return self.viewed

    @staticmethod
    def _generic_known(op, kinds: list, kclasses: tuple, ty, sigs: list) -> tuple:
        """What ``_record`` keeps per signature of a fusible op: the spec, the output's type and
        signature, and the positions of the constants among the positional slots.  The Python
        floats and ints among the operands of a CPU op are runtime scalars."""
        like = device_of(sigs)
        if not like & CUDA_SIG:
            arity = scalar_op_of(op).arity
            kinds = [("s", k) if k in RUNTIME_TYPES and i < arity else k for i, k in enumerate(kinds)]
        consts = tuple(i for i, k in enumerate(kinds) if k != "v" and k.__class__ is not tuple)
        return _Known(generic_spec(op, tuple(kinds), kclasses), ty, out_sig(like, ty), consts)

    def _record_reduction(self, op, args: tuple, kwargs: dict):
        """A reduction of a pending value: recorded, so that fusion makes it the epilogue of
        the loop that computes the value (which is then never stored).  None: run it eagerly."""
        x = args[0]
        z = pending(x)
        if z is None or z.recorder is not self or len(args) > 3 or any(v is not None for v in kwargs.values()):
            return None
        self.types[z.vid] = z.type
        axis = args[1] if len(args) > 1 else None
        keepdims = args[2] if len(args) > 2 else False
        if isinstance(axis, list):
            axis = tuple(axis)
        if not (axis is None or axis.__class__ is int or (axis.__class__ is tuple
                                                          and all(a.__class__ is int for a in axis))):
            return None
        if keepdims.__class__ is not bool:
            return None
        node = Node(op, (Var(z.vid), axis, keepdims), {}, ())
        red, _ = reduction_info(node, self.types)
        if red is None:
            return None
        ty = TensorType(red.result, red.out_ndim, z.type.device)
        spec = generic_spec(op, ("v", axis.__class__, bool), ())
        return self._append(spec, (z.vid, axis, keepdims), ty, out_sig(x._sig, ty),
                            reduced_shape(z.shape, red.axes, keepdims))

    def _record_view(self, op, args: tuple, kwargs: dict):
        """A view of a pending value: recorded, so that sink_views can move it into the loop
        around it (views.py).  None: run it eagerly, which raises eager mode's own error where
        the arguments are wrong: nothing eager mode would reject is recorded."""
        x = args[0]
        z = pending(x)
        if z is None or z.recorder is not self or kwargs:
            return None
        name = op.name()
        statics = view_statics(op, args[1:])
        if statics is None or (name in NEEDS_CONTIGUOUS and not x._sig & 1):
            return None
        shape = view_shape(op, z.shape, statics)
        if shape is None:
            return None
        ty = TensorType(z.type.dtype, len(shape), z.type.device)     # a view keeps dtype and device
        contiguous = name in KEEPS_CONTIGUOUS and x._sig & 1
        return self._append_view(view_spec(op, len(statics)), (z.vid,) + statics, ty, shape, contiguous, x._sig)

    def record_getitem(self, t, index):
        """``t[index]`` of a ``t`` pending in this graph with a basic index (ints, slices, None,
        ``...``): a getitem node (views.py).  None: ``t`` is not pending here (any more), advanced
        indexing (eager mode copies), or an index eager mode rejects: ``t`` is forced and
        indexed eagerly."""
        if t._sig & _AG and is_grad_enabled():
            return None             # autograd's view tracking is eager mode's
        with self.lock:
            z = get_slot(t, Tensor)
            if z.__class__ is not Pending or z.recorder is not self:
                return None
            return self._record_getitem(z, index, t._sig)

    def _record_getitem(self, z, index, like):
        """``record_getitem`` under the lock; ``z``: ``t``'s pending state, ``like``: its signature."""
        items = index if index.__class__ is tuple else (index,)
        for i in items:
            if i.__class__ not in BASIC_INDEX:
                return None
        norm, _ = normalize_index(index, z.type.ndim)
        if norm is None:
            return None
        shape = index_shape(norm, z.shape)
        if shape is None:
            return None
        ty = TensorType(z.type.dtype, len(shape), z.type.device)
        self.types[z.vid] = z.type
        return self._append_view(view_spec(GETITEM, 1), (z.vid, encode_index(norm)), ty, shape, False, like)

    def _append_view(self, spec, vals, ty, shape, contiguous, like):
        self.views += 1
        return self._append(spec, vals, ty, out_sig(like, ty, bool(contiguous)), shape)

    def _append(self, spec, vals, ty, sig, shape):
        return self.append_values(spec, vals, ((ty, shape, sig),))[0]

    def append_values(self, spec, vals, outs) -> list:
        """Append the record ``(spec, first vid, *vals)`` defining one value per ``(type, shape,
        signature)`` of ``outs`` (consecutive vids), and make their LazyTensors."""
        first = self.next
        self.next = first + len(outs)
        self.records.append((spec, first, *vals))
        if len(outs) > 1:
            self.multi[first] = len(outs)
        made = []
        for j, (ty, shape, sig) in enumerate(outs):
            self.types[first + j] = ty
            t = new(LazyTensor)
            t._sig = sig
            t._lazy = make_pending(self, first + j, shape, ty)
            self.lazies.append(t)
            made.append(t)
        if len(self.records) >= state.max_pending:
            self.size_flush()
        return made

    def size_flush(self) -> None:
        state.counters["size_flushes"] += 1
        self.flush()

    def _eager(self, op, args, kwargs):
        state.counters["eager_ops"] += 1
        # an op that reads no pending value can not see the pending graph: it runs without forcing
        # it.  One that writes into a tensor the graph reads (in place, out=) forces it, as it does
        # every graph of any thread that reads the tensor: the dispatcher calls before_write first
        if self.records and reads_pending(args, kwargs):
            self.flush()
        with ExcludeDispatchKeyGuard(_K.Tracer):
            return op(*args, **kwargs)

    # -- forcing -------------------------------------------------------------------------
    def flush(self) -> None:
        """Run the pending graph; any thread may call it.  The storages it read stay watched
        until the run is over, so that a writer in another thread waits for it."""
        if not self.records and not self.read_keys and not self.contended:
            return
        with self.lock:
            if threading.get_ident() == self.owner:
                self.contended = not GIL   # re-armed: holding the lock, no foreign flush is under way
            elif self.records or self.read_keys:
                self.contended = True     # the owner's next records take the lock ...
                while self.busy:          # ... and one already inside a lock-free record finishes
                    time.sleep(0)
            if not self.records and not self.read_keys:
                return                    # nothing pending, or run meanwhile by the lock's holder
            try:
                execute.run(self)
            finally:
                if self.read_keys:
                    self.read_keys = set()
                    unwatch_reads(self.ref)



def functional_of(op):
    """The out-of-place op of in-place ``op`` (``aten::mul_.Tensor`` -> ``aten::mul.Tensor``), or
    None."""
    packet, _, overload = op.name().partition(".")
    if not packet.endswith("_"):
        return None
    try:
        return overload_of(lookup(packet[:-1] + ("." + overload if overload else "")))
    except LookupError:
        return None


def of_pending(op):
    """How a call of ``op`` whose first argument is a value pending in the graph is recorded, by
    the op's kind (``dj.Tag``), or None: a reduction becomes the epilogue of the loop computing the
    value (where the fused loops have its epilogue: else it runs eagerly), a view is moved by
    sink_views into the loops around it."""
    tags = op.tags
    if Tag.reduction in tags:
        return LazyRecorder._record_reduction
    return LazyRecorder._record_view if Tag.view in tags and op._entry.shape_fn is not None else None
