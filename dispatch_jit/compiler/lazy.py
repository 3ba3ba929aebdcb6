"""Global compiled mode: ``dj.set_mode('compiled')``, ``with dj.mode('compiled'):``,
``DISPATCH_JIT_MODE=compiled``.

In compiled mode the Tracer key is in the thread's include set and the
thread's ``LazyRecorder`` is the active tracer, so every operator call lands
in ``LazyRecorder.record``.  A fusible elementwise op (the same test as
``dj.compile``'s fusion: ``elementwise.result_of``) on CPU or CUDA tensors that do
not require grad is *recorded*: it appends a node to the thread's pending
graph and returns a ``LazyTensor``, a real ``dj.Tensor`` whose ``_data`` is
not computed yet (its shape, dtype and ndim are known).  So are, of a value
pending in the graph: a reduction (it becomes the epilogue of the loop that
computes the value), a view (permute, transpose, expand, unsqueeze, view,
reshape, flatten, narrow; views.py's VIEW_OPS) with int arguments, and basic
indexing (``t[1:, ::2]``, ``t[0]``, ``t[None]``, ``t[..., 1]``), whose output
shapes are computed from the input's (views.py: ``view_shape``,
``index_shape``) and whose static arguments are part of the record, so that
``sink_views`` fuses them into the loops around them as it does for
``dj.compile``.  A view whose arguments eager mode would reject is not
recorded: it runs eagerly and raises there.  Every other op runs eagerly,
first forcing the pending graph if it reads a pending value or writes into a
tensor (in place, ``out=``); an op that does neither (a view of an input, a
creation function) leaves the graph pending, so ``(a * 2) + b.T`` is still one
loop, reading ``b.T`` with its strides.

Recording is as cheap as eager dispatch: the Tracer fallback specializes per
call signature (``_specialize``), so the dispatcher's memo holds, for each
signature, generated code that knows already whether the op fuses, its
output type and its node encoding, and per call only looks up the inputs'
value ids and shapes, appends one record and makes one LazyTensor (whose
pending state lives in its ``_data`` slot, not an instance dict).  Which
recorded values are still wanted is read from reference counts at the flush,
not kept with weak references.

Forcing ("flush") runs the pending graph through the passes, plan and
codegen of ``dj.compile`` (dce, cse, fusion, one Numba loop per region);
values whose lazy tensors were dropped are never computed.  Plans are cached
by the graph's structure (ops, constants, input signatures, which values are
live), so a loop that records the same chain again reuses the plan, and the
Numba loops are shared process-wide by source in any case.  A Python float or
int operand of an elementwise op on CPU tensors is not a constant of the plan
but a runtime value (``_scalar_slots``; ``Plan.run``'s scalars): ``x * float(i)``
in a loop reuses one plan whatever ``i`` is, keyed by the number's type only.
Bools, NumPy scalars, ``alpha=`` and the operands of CUDA ops stay constants,
keyed by value.

What forces: any access to a lazy tensor's data (``.numpy()``,
``__array__``, ``.item()``, ``.tolist()``, ``repr``, ``bool()``, advanced
indexing (tensors, lists, bools), ``backward()``, ``detach()``; anything that
reads ``_data``), any op that is not recorded and reads a pending value,
leaving compiled mode, and a pending graph of ``max_pending()`` nodes.  A write
into a tensor (an in-place op, ``out=``, ``t[...] = v``, ``copy_``, through any
view of its storage, and handing the storage out with ``.numpy()`` /
``__array__``), in any thread and in either mode, first runs every pending
graph, of any thread, that reads that storage (``_before_write``; the
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
handed out that way (``_exported``), each recorded op that reads it reads a
copy taken when the op is recorded, which is when eager mode reads it.  Known
gap: memory shared with a NumPy array that did not come from the tensor
(``dj.asarray(a)`` / ``dj.from_numpy(a)``, then ``a[...] = ...`` before the
flush) is not tracked: the pending graph sees the write where eager mode would
have used the old values.  Take a copy (``dj.tensor(a)``), or write through
the tensor instead.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import math
import os
import sys
import threading
import time
import weakref

import numpy as np

from dispatch_jit.bufferpool import pool as _pool
from dispatch_jit import registry
from dispatch_jit.broadcast import broadcast_shapes
from dispatch_jit.dispatcher import ExcludeDispatchKeyGuard, set_write_guard, tls
from dispatch_jit.keys import DispatchKey
from dispatch_jit.signature import DEVICE_MASK, DEVICE_SHIFT, KS_SHIFT, decode, make_sig
from dispatch_jit.tensor import CPU_BITS, CUDA_BITS, CPU_DEVICE, Tensor, device as _device, share_view, wrap

from .elementwise import reduced_shape, reduction_info, result_of, scalar_op_of
from .ir import Graph, GraphError, Node, TensorType, Var, runtime_scalar
from .passes import optimize
from .plan import Plan, Stats
from .trace import _state, install_tracer_fallback, tracer_fallback
from .views import GETITEM, VIEW_SHAPES, index_shape, index_type, view_shape, view_type

__all__ = ["set_mode", "get_mode", "mode", "LazyTensor", "flush", "lazy_info", "max_pending",
           "set_max_pending", "init_mode_from_env", "MODES"]

MODES = ("eager", "compiled")
_K = DispatchKey
_TRACER_BIT = 1 << _K.Tracer.value
_SLOT_DATA = Tensor.__dict__["_data"]     # the slot descriptor
_get_slot, _set_slot = _SLOT_DATA.__get__, _SLOT_DATA.__set__
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
    for f in list(_GENERATED):
        f.__globals__["_LIMIT"] = int(n)


# the generated record functions (their globals hold _LIMIT); weakly, as they live in dispatch
# memos, which every registration clears
_GENERATED = weakref.WeakSet()


class LazyTensor(Tensor):
    """A ``dj.Tensor`` whose data a pending graph has yet to compute.  Reading
    ``_data`` forces the graph; the tensor then becomes a plain ``Tensor``.

    While pending, its ``_data`` slot holds ``(recorder, value id, shape, TensorType)``
    instead of an array (no instance dict: a LazyTensor costs what a Tensor does).
    ``_lazy`` is that same slot under another name, read and written at C speed
    where ``_data`` is the forcing property."""

    __slots__ = ()
    _lazy = _SLOT_DATA

    @property
    def _data(self):
        _force(self)
        return _get_slot(self, Tensor)

    @_data.setter
    def _data(self, value):
        _force(self)
        _set_slot(self, value)

    # metadata known without computing anything.  Another thread may compute the tensor at any
    # moment (its flush stores the array in the slot, then makes the tensor a plain Tensor), so
    # each read tests what the slot holds: the pending state, or already the array
    @property
    def shape(self) -> tuple:
        z = _get_slot(self, Tensor)
        return z[2] if z.__class__ is tuple else z.shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self):
        z = _get_slot(self, Tensor)
        return z[3].dtype if z.__class__ is tuple else Tensor.dtype.fget(self)

    @property
    def device(self):
        # a plain tensor reads a CUDA device's index off its data; a pending one's is in its signature
        sig = self._sig
        return _device("cuda", (sig & DEVICE_MASK) >> DEVICE_SHIFT) if sig & _CUDA_SIG else CPU_DEVICE

    def size(self, dim: int | None = None):
        s = self.shape
        if dim is None:
            return s
        if not -len(s) <= dim < max(len(s), 1):
            return Tensor.size(self, dim)      # eager mode's error (it forces the graph)
        return s[dim]

    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __getitem__(self, index):
        # basic indexing of a value pending in this thread's graph is recorded (a getitem node,
        # which sink_views can fuse); anything else reads _data, which forces the graph
        r = _state.tracer
        if r.__class__ is LazyRecorder:
            t = r.record_getitem(self, index)
            if t is not None:
                return t
        return Tensor.__getitem__(self, index)

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
    z = _get_slot(t, Tensor)
    if z.__class__ is tuple:
        z[0].flush()               # under its recorder's lock: whichever thread recorded it
        z = _get_slot(t, Tensor)
        if z.__class__ is tuple:
            if z[0] is _FAILED:
                raise RuntimeError("a pending compiled-mode graph failed to run") from z[1]
            # never hand out the pending state as if it were the data
            raise GraphError(f"compiled mode: value %{z[1]} (shape {z[2]}, {z[3]}) is still pending after "
                             f"its graph ran; this is a bug in dispatch_jit, please report it.  Run the "
                             f"code in eager mode (dj.set_mode('eager')) meanwhile")


def _pending(t):
    """``(recorder, vid, shape, type)`` of a LazyTensor still pending, else None."""
    z = _get_slot(t, Tensor)
    return z if z.__class__ is tuple else None


# False on a free-threaded interpreter, where LazyRecorder's lock-free handshake is not sound
_GIL = getattr(sys, "_is_gil_enabled", lambda: True)()
_stats = Stats()
_plans: dict = {}
_counters = {"records": 0, "flushes": 0, "plan_hits": 0, "plans": 0, "eager_ops": 0, "size_flushes": 0,
             "dead_values": 0}


def lazy_info() -> dict:
    """Counters of compiled mode (all threads): ops recorded, flushes, plan cache
    hits and builds, ops run eagerly, flushes caused by the size limit, fused
    loops compiled, recorded values never computed because they were dropped,
    and the output pool's hits and misses (all compiled and eager large outputs)."""
    r = _mstate.recorder
    info = dict(_counters, loop_compiles=_stats.compiles, plan_cache_size=len(_plans),
                pool_hits=_pool.hits, pool_misses=_pool.misses)
    info["records"] += r.pending if r is not None else 0     # counted per flush; this thread's pending too
    return info


_MISS = object()
_sig_type: dict = {}  # tensor sig -> TensorType
_specs: dict = {}     # (op, arg signatures/types, kwarg names/types) -> _Spec, or None: not recorded
_decomps: dict = {}   # (op, on CUDA) -> the decomposition to record through, or None
_SCALARS = frozenset([bool, int, float, type(None), np.float32, np.float64, np.int64, np.int32, np.bool_])


def _decomposition(op, cuda: bool):
    """The CompositeImplicitAutograd kernel to record through, if eager mode runs it for dense
    tensors of that device: not where a kernel at the backend key (or CompositeExplicitAutograd)
    takes precedence (registry.compute_table_entry)."""
    d = _decomps.get((op, cuda), _MISS)
    if d is _MISS:
        d = _decomps[(op, cuda)] = op._entry.decomposition(_K.CUDA if cuda else _K.CPU)
    return d


def _on_cuda(args: tuple) -> bool:
    for x in args:
        if isinstance(x, Tensor):
            return bool(x._sig & _CUDA_SIG)
    return False


_sig_ok: dict = {}
_REDUCTION_NAMES = frozenset(["aten::sum", "aten::prod", "aten::mean", "aten::max", "aten::min"])


# a plain dense tensor's dispatch keys, per device: tensors with any other key (autograd, sparse,
# quantized, ...) are not recorded
_DENSE_BITS = {"cpu": CPU_BITS, "cuda": CUDA_BITS}
_CUDA_SIG = CUDA_BITS << KS_SHIFT


def _kind(device: str) -> str:
    """"cpu" or "cuda" (a TensorType's device) of an ArgMeta's "cpu" / "cuda:N"."""
    return "cpu" if device == "cpu" else "cuda"


def _plain_dense(sig) -> bool:
    ok = _sig_ok.get(sig)
    if ok is None:
        m = decode(sig)
        ok = _sig_ok[sig] = (m.kind == "tensor" and m.keyset == _DENSE_BITS[_kind(m.device)])
    return ok


def _device_of(sigs: list):
    """The signature of the first tensor among ``sigs`` when all tensors there are on one device
    (cuda:N included), else None: eager mode raises on a mix."""
    first = dev = None
    for s in sigs:
        if s.__class__ is int:
            d = s & (DEVICE_MASK | _CUDA_SIG)
            if first is None:
                first, dev = s, d
            elif d != dev:
                return None
    return first


def _out_sig(like: int, ty: TensorType, contiguous: bool = True) -> int:
    """The signature of a recorded value of type ``ty`` made from a value with signature
    ``like`` (same device and device index)."""
    return make_sig(_DENSE_BITS[ty.device], ty.dtype, ty.ndim, contiguous) | (like & DEVICE_MASK)


# -- the encoding of a recorded call --------------------------------------------------------
class _NegZero:
    """Stands for the constant -0.0 in a record: ``-0.0 == 0.0`` (and hashes alike), but
    ``x * -0.0`` and ``x * 0.0`` differ in sign, so the plan cache must tell them apart."""

    __slots__ = ()

    def __repr__(self):
        return "-0.0"


_NEG0 = _NegZero()


def _canon(x):
    """A falsy constant as a record stores it (the records' fast path tests truth first)."""
    return _NEG0 if x.__class__ in _FLOATS and math.copysign(1.0, x) < 0 else x


_FLOATS = frozenset([float, np.float32, np.float64])


class _Spec:
    """How the records of one call signature encode it: a record is the tuple
    ``(spec, out vid, *slots)`` and the spec says which slots are tensor value
    ids (``tpos``), which are constants, which are runtime scalars (``rt``), and
    where the node's arguments come from.  Specs compare by identity, so a record
    is also the node's part of the plan cache key (once ``_scalar_slots`` has
    taken the runtime scalars' values out of it), and a cache hit builds no Graph
    at all.

    ``args``/``kwargs``: per argument ``("v", i)`` (Var of slot i), ``("c", i)``
    (the constant in slot i), ``("s", i)`` (a runtime scalar: slot i holds the
    Python float/int as recorded, its index in the flush's scalars in the key) or
    ``("k", value)`` (fixed by the signature)."""

    __slots__ = ("op", "args", "kwargs", "tpos", "rt", "keyer", "ty")
    view = False       # a _ViewSpec's records are views (flush makes some from the values they view)

    def __init__(self, op, args: tuple, kwargs: tuple, ty=None):
        self.op, self.args, self.kwargs, self.ty = op, args, kwargs, ty    # ty: the output's, if the spec fixes it
        self.tpos = tuple(i for kind, i in list(args) + [a for _, a in kwargs] if kind == "v")
        self.rt = tuple(i for kind, i in args if kind == "s")
        slots = [i for kind, i in list(args) + [a for _, a in kwargs] if kind != "k"]
        self.keyer = _keyer(max(slots, default=1) + 1, self.rt) if self.rt else None

    @staticmethod
    def _value(rec, kind, x, scalars):
        if kind == "v":
            return Var(rec[x])
        if kind == "c":
            v = rec[x]
            return -0.0 if v is _NEG0 else v
        if kind == "s":
            i = rec[x]
            return i[1] if i.__class__ is tuple else runtime_scalar(scalars[i], i)
        return x

    def node(self, rec, scalars) -> Node:
        val = self._value
        return Node(self.op, tuple([val(rec, *a, scalars) for a in self.args]),
                    {name: val(rec, *a, scalars) for name, a in self.kwargs}, (rec[1],))


# Runtime scalars.  A Python float or int operand of an elementwise op on CPU tensors is a value
# of the plan, not part of its key: its slot holds the number as recorded (so recording costs no
# more than for a constant), and the flush moves it into the list the plan reads its runtime
# scalars from (``Plan.run(tensors, scalars)``), leaving its index in the key.  Its type stays in
# the key (the spec is per signature, whose memo key has the type): int and float promote
# differently.  Keyed by value still: bools and NumPy scalars (as ``dj.compile`` does), ints
# beyond int64 (the loops take int64; eager mode raises OverflowError, and so does the plan),
# keyword statics (alpha=), and every operand of a CUDA op (compiler/cuda.py's kernels take
# scalars as constants).  -0.0 and NaN then need nothing special: the key never holds them.
_RUNTIME_TYPES = (float, int)
_I64 = (-(1 << 63), (1 << 63) - 1)


def _scalar_slots(rec: tuple, rt: tuple, scalars: list) -> tuple:
    """``rec`` as the plan key holds it: each runtime scalar's value moved to ``scalars``, its
    index left in its slot; an int beyond int64 stays, as ``("c", value)``, a constant.
    (Each spec's ``keyer`` does this for its layout, straight-line; this is its slow path.)"""
    rec = list(rec)
    for p in rt:
        x = rec[p]
        if x.__class__ is not float and x.__class__ is not int:    # a subclass (IntEnum): the number
            x = float(x) if isinstance(x, float) else int(x)
        if x.__class__ is int and not _I64[0] <= x <= _I64[1]:
            rec[p] = ("c", x)
        else:
            rec[p] = len(scalars)
            scalars.append(x)
    return tuple(rec)


_keyers: dict = {}     # (record length, runtime slots) -> the generated _scalar_slots of that layout


def _keyer(n: int, rt: tuple):
    """``_scalar_slots`` for records of ``n`` slots with runtime scalars at ``rt``, generated:
    a flush runs it per record (measured, 2 records: 0.5 us as a loop, 0.25 us generated)."""
    f = _keyers.get((n, rt))
    if f is None:
        xs = [f"x{k}" for k in range(len(rt))]
        ok = " and ".join(f"({x}.__class__ is float or {x}.__class__ is int and _LO <= {x} <= _HI)" for x in xs)
        index = {p: f"i + {k}" if k else "i" for k, p in enumerate(rt)}
        items = [index.get(j, f"r[{j}]") for j in range(n)]
        lines = ["def keyer(r, sc):"]
        lines += [f"    {x} = r[{p}]" for x, p in zip(xs, rt)]
        lines += [f"    if {ok}:", "        i = len(sc)"]
        lines += [f"        sc.append({x})" for x in xs]
        lines += [f"        return ({', '.join(items)},)", "    return _slow(r, _RT, sc)"]
        g = {"_LO": _I64[0], "_HI": _I64[1], "_slow": _scalar_slots, "_RT": rt}
        exec(compile("\n".join(lines) + "\n", "<dispatch_jit lazy scalar slots>", "exec"), g)
        f = _keyers[(n, rt)] = g["keyer"]
    return f


def _generic_spec(op, kinds: tuple, kwargs: tuple) -> _Spec:
    """The spec of a record made by ``LazyRecorder.record``: ``kinds`` is "v" (a tensor)
    or the constant's type per positional slot, ``kwargs`` (name, type) per keyword slot.
    The types are part of the spec because ``1 == 1.0 == True`` in a key; a runtime scalar's
    kind is ``("s", its type)``."""
    key = ("generic", op, kinds, kwargs)
    s = _specs.get(key)
    if s is None:
        s = _specs[key] = _Spec(op, tuple((k if k == "v" else k[0] if k.__class__ is tuple else "c", 2 + i)
                                          for i, k in enumerate(kinds)),
                                tuple((n, ("c", 2 + len(kinds) + j)) for j, (n, _) in enumerate(kwargs)))
    return s


class _ViewSpec(_Spec):
    """The spec of a recorded view of a pending value: the record is ``(spec, out vid, source
    vid, *static arguments)``, the statics as the op takes them but hashable (records are plan
    cache keys): lists as tuples, and a getitem's index with each slice as a
    ``(start, stop, step)`` tuple (slices hash only from Python 3.12 on)."""

    __slots__ = ()
    view = True

    def __init__(self, op, n: int):
        super().__init__(op, (("v", 2),) + tuple(("c", 3 + i) for i in range(n)), ())

    def statics(self, rec) -> tuple:
        if self.op is GETITEM:
            return (tuple([slice(*i) if i.__class__ is tuple else i for i in rec[3]]),)
        return rec[3:]

    def node(self, rec, scalars=None) -> Node:
        return Node(self.op, (Var(rec[2]),) + self.statics(rec), {}, (rec[1],))


def _view_spec(op, n: int) -> _ViewSpec:
    key = ("view", op, n)
    s = _specs.get(key)
    if s is None:
        s = _specs[key] = _ViewSpec(op, n)
    return s


def _encode_index(index: tuple) -> tuple:
    return tuple([(i.start, i.stop, i.step) if i.__class__ is slice else i for i in index])


def _static_int(x):
    """An int argument of a view as eager mode reads it, or None: not an int (bools included),
    so the call runs eagerly."""
    if x.__class__ is int:
        return x
    return int(x) if isinstance(x, np.integer) else None


_view_lists: dict = {}    # view op -> per static argument, whether its schema type is an int list


def _view_statics(op, rest: tuple) -> tuple | None:
    """A view's arguments after the tensor, hashable (int lists as tuples of ints), or None:
    something else (eager mode handles, or rejects, it)."""
    lists = _view_lists.get(op)
    if lists is None:
        lists = _view_lists[op] = tuple(a.type.is_list for a in op.schema.arguments[1:])
    if len(rest) != len(lists):
        return None
    out = []
    for x, is_list in zip(rest, lists):
        if is_list:
            if x.__class__ is not tuple and x.__class__ is not list:
                return None
            x = tuple([_static_int(i) for i in x])
            if None in x:
                return None
        else:
            x = _static_int(x)
            if x is None:
                return None
        out.append(x)
    return tuple(out)


# the layouts eager mode gives views, as far as the signature's contiguity bit must tell: ``view``
# raises where the strides cannot express the new shape (so it is recorded only of a value eager
# mode would hold contiguous), and these views of a contiguous value are contiguous.  Every other
# view claims non-contiguous until it is computed (a claim the eager fast paths can only underuse)
_NEEDS_CONTIGUOUS = frozenset(["aten::view"])
_KEEPS_CONTIGUOUS = frozenset(["aten::view", "aten::reshape", "aten::flatten", "aten::unsqueeze"])
_BASIC_INDEX = frozenset([int, slice, type(None), type(Ellipsis)])   # eager mode's basic indexing: a view


def _broadcast(*shapes):
    try:
        return broadcast_shapes(*shapes)
    except ValueError:
        return None


# -- the fast path: the Tracer fallback specialized per signature ---------------------------
def _specialize(call, boxed):
    """The Tracer key's kernel for one call signature (the dispatcher memoizes it, as it
    does an eager kernel): for an elementwise op on plain tensors of one device, Python scalars and
    ``out=None``, generated code that records the call in a few dict and list operations;
    for anything else, or outside compiled mode (``dj.compile``'s tracer shares this
    memo entry), ``boxed``, the generic fallback.

    What the signature fixes is decided here or on the first call, once: the node's
    encoding, whether the op fuses, and the output's type and signature (``result_of``
    needs the constants' types, which the memo key fixes; their values never matter).
    Per call: each tensor's value id and shape, the output shape (no broadcasting when
    the shapes are equal), one record appended, one LazyTensor made.  A Python float or
    int operand of a CPU op is stored as it is (a runtime scalar, see ``_scalar_slots``);
    other constants through ``_canon``."""
    from dispatch_jit.ops import overload_of
    op = overload_of(call.op)
    cuda = any(m is not None and m.kind == "tensor" and m.device != "cpu" for m in call.metas)
    if _decomposition(op, cuda) is not None or scalar_op_of(op) is None:
        return boxed
    params, slots, tensors, args, kwargs = [], [], [], [], []
    devices = set()
    for a, m in zip(call.op.schema.arguments, call.metas):
        p = f"a{len(params)}"
        params.append(p)
        if a.type.is_tensor_like:
            if a.type.is_list or m is None:
                return boxed
            if m.kind == "tensor":
                if m.keyset != _DENSE_BITS[_kind(m.device)]:
                    return boxed
                devices.add(m.device)
                desc = ("v", 2 + len(slots))
                slots.append(f"v{len(tensors)}")
                tensors.append((p, TensorType(m.dtype, m.ndim, _kind(m.device))))
            elif m.kind == "scalar" and m.pytype in _RUNTIME_TYPES and not cuda and not a.kwarg_only:
                desc = ("s", 2 + len(slots))            # a runtime scalar: the number as it is
                slots.append(p)
            elif m.kind == "scalar" and m.pytype in _SCALARS:
                desc = ("c", 2 + len(slots))
                slots.append(f"({p} if {p} else _canon({p}))")
            elif m.kind == "none":
                desc = ("k", None)
            else:
                return boxed
        elif a.type.base == "Scalar" and not a.type.is_list:     # its type is in the memo key
            desc = ("c", 2 + len(slots))
            slots.append(f"({p} if {p} else _canon({p}))")
        else:
            return boxed                                         # a value the memo key does not fix
        if a.kwarg_only:
            kwargs.append((a.name, desc))
        else:
            args.append(desc)
    if not tensors or len(devices) > 1:
        return boxed          # one device (cuda:N included) per call: eager mode raises on a mix
    dev = devices.pop()
    dev_index = 0 if dev == "cpu" else int(dev.split(":")[1])
    spec = _Spec(op, tuple(args), tuple(kwargs))
    sig = ", ".join(params)
    fname = "record_" + "".join(c if c.isalnum() else "_" for c in op.name())
    # The body excludes a flush by another thread (LazyRecorder's ownership protocol): ``busy``
    # is raised around it, and once another thread has flushed this recorder (``contended``) it
    # runs under the lock instead, in the second function generated from the same body.  A call
    # it does not record leaves the one-pass loop with t = None and runs, unlocked, through
    # ``_boxed``.  A LazyTensor's slot is read once and tested for a tuple: another recorder's
    # may be computed meanwhile (the slot then holds its array)
    body = ["for _ in _ONCE:"]
    for k, (p, _) in enumerate(tensors):
        body += [f"    c = {p}.__class__",
                 "    if c is _LT:",
                 f"        z = {p}._lazy",
                 "        if z.__class__ is not tuple or z[0] is not r:",
                 "            break",
                 f"        v{k} = z[1]",
                 f"        s{k} = z[2]",
                 "    elif c is _T:",
                 f"        v{k} = r.input_ids.get({p})",
                 f"        if v{k} is None:",
                 f"            v{k} = r.add_input({p}, _TY{k})",
                 f"        s{k} = {p}._data.shape",
                 "    else:",
                 "        break"]
    shapes = [f"s{k}" for k in range(len(tensors))]
    if len(shapes) == 1:
        body.append("    shape = s0")
    else:
        body += [f"    shape = s0 if {' == '.join(shapes)} else _broadcast({', '.join(shapes)})",
                 "    if shape is None:",
                 "        break        # eager mode raises its own error"]
    body += ["    vid = r.next",
             "    r.next = vid + 1",
             f"    r.records.append((_S, vid, {', '.join(slots)}))",
             "    t = _new(_LT)",
             "    t._sig = _SIG",
             "    t._lazy = (r, vid, shape, _OUT)",
             "    r.lazies.append(t)"]
    # the size flush runs after ``busy`` is lowered: a flush may wait for other threads
    tail = ["    if t is None:",
            f"        return _boxed({sig})",
            "    if len(r.records) >= _LIMIT:",
            "        r.size_flush()",
            "    return t"]
    lines = [f"def {fname}({sig}):",
             "    r = _state.tracer",
             "    if r.__class__ is not _LR or _OUT is None:",
             f"        return _first(r, ({sig},))",
             "    r.busy = True",
             "    if r.contended:",
             "        r.busy = False",
             f"        return _locked(r, {sig})",
             "    t = None",
             "    try:"]
    lines += ["        " + b for b in body]
    lines += ["    finally:",
              "        r.busy = False"]
    lines += tail
    lines += ["", "", f"def _locked(r, {sig}):",
              "    t = None",
              "    with r.lock:"]
    lines += ["        " + b for b in body]
    lines += tail
    g = {"_state": _state, "_LR": LazyRecorder, "_LT": LazyTensor, "_T": Tensor, "_new": _new, "_S": spec,
         "_ONCE": (None,), "_boxed": boxed, "_canon": _canon, "_broadcast": _broadcast, "_LIMIT": _MAX_PENDING[0],
         "_OUT": None, "_SIG": None}
    for k, (_, ty) in enumerate(tensors):
        g[f"_TY{k}"] = ty
    src = "\n".join(lines) + "\n"
    exec(compile(src, f"<dispatch_jit lazy record {op.name()}>", "exec"), g)
    fast = g[fname]
    _GENERATED.add(fast)
    never = []

    def first(r, a):
        """Outside compiled mode: the generic fallback.  The first recorded call decides
        whether the op fuses for this signature and its output type, once."""
        if r.__class__ is not LazyRecorder or never:
            return boxed(*a)
        types = {k: ty for k, (_, ty) in enumerate(tensors)}
        pos = {p: k for k, (p, _) in enumerate(tensors)}
        vals = dict(zip(params, a))

        def value(p, desc):
            return Var(pos[p]) if desc[0] == "v" else desc[1] if desc[0] == "k" else vals[p]
        names = iter(params)
        descs = [(next(names), d) for d in args]
        kdescs = [(n, (next(names), d)) for n, d in kwargs]
        node = Node(op, tuple(value(p, d) for p, d in descs), {n: value(p, d) for n, (p, d) in kdescs}, ())
        ty = result_of(node, types)
        if ty is None:
            never.append(True)
            return boxed(*a)
        g["_SIG"] = make_sig(_DENSE_BITS[ty.device], ty.dtype, ty.ndim, True, dev_index)
        spec.ty = g["_OUT"] = ty
        return fast(*a)
    g["_first"] = first
    fast.__source__ = src
    return fast


class LazyRecorder:
    """One thread's pending graph, kept as flat records until it is flushed:
    ``(spec, out vid, *slots)`` (see ``_Spec``), which is also the node's part of
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
    ``_watched``, where writers look for the graphs to run first."""

    def __init__(self):
        self.lock = threading.RLock()
        self.owner = threading.get_ident()
        self.busy = False
        self.contended = not _GIL
        self.read_keys: set = set()
        self.ref = weakref.ref(self, _unwatch)
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
        self.lazies: list = []            # the LazyTensors made; liveness is read at flush (_live)
        self.views = 0                    # view records among them

    @property
    def pending(self) -> int:
        return len(self.records)

    def add_input(self, x, ty) -> int:
        vid = self.next
        self.next += 1
        self.types[vid] = ty
        self.inputs.append(vid)
        root = _storage_root(_get_slot(x, Tensor))
        if _exported and _is_exported(root):
            self.tensors.append(_snapshot(x))      # not in input_ids: the next op copies it anew
            return vid
        key = id(root)
        self.tensors.append(x)
        self.input_ids[x] = vid
        if not self.read_keys:
            _watch(self)
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
        views of pending values, and whatever ``_specialize`` left to it."""
        cia = _decomposition(op, _on_cuda(args))
        if cia is not None:
            return cia(*args, **kwargs)      # a decomposition: record its pieces
        with self.lock:
            t = self._record(op, args, kwargs)
        # an op that is not recorded runs outside the lock: it may write into a tensor that another
        # thread's graph reads, and so wait for that recorder's lock
        return self._eager(op, args, kwargs) if t is None else t

    def _record(self, op, args: tuple, kwargs: dict):
        """``record`` under the lock: the LazyTensor made, or None (not recorded)."""
        if args and args[0].__class__ is LazyTensor:
            how = _of_pending.get(op, _MISS)
            if how is _MISS:
                how = _of_pending[op] = _OF_PENDING.get(op.name())
            if how is not None:
                t = how(self, op, args, kwargs)
                if t is not None:
                    return t
        kinds, vals, shapes, sigs = [], [], [], []
        added = 0
        for x in args:
            cls = x.__class__
            if cls is LazyTensor:
                z = _pending(x)
                if z is None or z[0] is not self:
                    break
                self.types[z[1]] = z[3]
                kinds.append("v")
                vals.append(z[1])
                shapes.append(z[2])
                sigs.append(x._sig)
            elif cls is Tensor:
                sig = x._sig
                data = _SLOT_DATA.__get__(x, Tensor)
                vid = self.input_ids.get(x)
                if vid is None:
                    ty = _sig_type.get(sig)
                    if ty is None:
                        if not _plain_dense(sig):
                            break
                        m = decode(sig)
                        ty = _sig_type[sig] = TensorType(m.dtype, m.ndim, _kind(m.device))
                    vid = self.add_input(x, ty)
                    added += 1
                kinds.append("v")
                vals.append(vid)
                shapes.append(data.shape)
                sigs.append(sig)
            elif cls in _SCALARS:
                kinds.append(cls)
                vals.append(x)                 # as it is: a runtime scalar, or _canon'ed below
                sigs.append(cls)
            else:
                break
        else:
            kclasses = tuple([(k, v.__class__) for k, v in kwargs.items()])
            ok = all(c in _SCALARS and (k != "out" or c is type(None)) for k, c in kclasses)
            if ok and shapes and _device_of(sigs) is not None:
                mkey = (op, tuple(sigs), kclasses)
                known = _specs.get(mkey, _MISS)
                if known is _MISS:
                    node = Node(op, tuple([Var(v) if k == "v" else x for k, v, x in zip(kinds, vals, args)]),
                                dict(kwargs), ())
                    ty = result_of(node, self.types)
                    known = _specs[mkey] = None if ty is None else self._generic_known(op, kinds, kclasses, ty, sigs)
                if known is not None:
                    shape = shapes[0]
                    for s in shapes:
                        if s != shape:
                            shape = _broadcast(*shapes)
                            break
                    if shape is not None:          # else eager mode raises its own error
                        for i in known[3]:
                            if not vals[i]:
                                vals[i] = _canon(vals[i])
                        vals += [v if v else _canon(v) for v in kwargs.values()]
                        return self._append(known[0], vals, known[1], known[2], shape)
        self._rollback(added)
        return None

    @staticmethod
    def _generic_known(op, kinds: list, kclasses: tuple, ty, sigs: list) -> tuple:
        """What ``_record`` keeps per signature of a fusible op: the spec, the output's type and
        signature, and the positions of the constants among the positional slots.  The Python
        floats and ints among the operands of a CPU op are runtime scalars."""
        like = _device_of(sigs)
        if not like & _CUDA_SIG:
            arity = scalar_op_of(op).arity
            kinds = [("s", k) if k in _RUNTIME_TYPES and i < arity else k for i, k in enumerate(kinds)]
        consts = tuple(i for i, k in enumerate(kinds) if k != "v" and k.__class__ is not tuple)
        return _generic_spec(op, tuple(kinds), kclasses), ty, _out_sig(like, ty), consts

    def _record_reduction(self, op, args: tuple, kwargs: dict):
        """A reduction of a pending value: recorded, so that fusion makes it the epilogue of
        the loop that computes the value (which is then never stored).  None: run it eagerly."""
        x = args[0]
        z = _pending(x)
        if z is None or z[0] is not self or len(args) > 3 or any(v is not None for v in kwargs.values()):
            return None
        self.types[z[1]] = z[3]
        axis = args[1] if len(args) > 1 else None
        keepdims = args[2] if len(args) > 2 else False
        if isinstance(axis, list):
            axis = tuple(axis)
        if not (axis is None or axis.__class__ is int or (axis.__class__ is tuple
                                                          and all(a.__class__ is int for a in axis))):
            return None
        if keepdims.__class__ is not bool:
            return None
        node = Node(op, (Var(z[1]), axis, keepdims), {}, ())
        red, _ = reduction_info(node, self.types)
        if red is None:
            return None
        ty = TensorType(red.result, red.out_ndim, z[3].device)
        spec = _generic_spec(op, ("v", axis.__class__, bool), ())
        return self._append(spec, (z[1], axis, keepdims), ty, _out_sig(x._sig, ty),
                            reduced_shape(z[2], red.axes, keepdims))

    def _record_view(self, op, args: tuple, kwargs: dict):
        """A view of a pending value: recorded, so that sink_views can move it into the loop
        around it (views.py).  None: run it eagerly, which raises eager mode's own error where
        the arguments are wrong: nothing eager mode would reject is recorded."""
        x = args[0]
        z = _pending(x)
        if z is None or z[0] is not self or kwargs:
            return None
        name = op.name()
        statics = _view_statics(op, args[1:])
        if statics is None or (name in _NEEDS_CONTIGUOUS and not x._sig & 1):
            return None
        shape = view_shape(name, z[2], statics)
        if shape is None:
            return None
        self.types[z[1]] = z[3]
        ty = view_type(op, (Var(z[1]),) + statics, {}, self.types)
        if isinstance(ty, str):
            return None
        if ty is None:     # views.py leaves the type to the op's meta: a view keeps the dtype
            ty = TensorType(z[3].dtype, len(shape), z[3].device)
        contiguous = name in _KEEPS_CONTIGUOUS and x._sig & 1
        return self._append_view(_view_spec(op, len(statics)), (z[1],) + statics, ty, shape, contiguous, x._sig)

    def record_getitem(self, t, index):
        """``t[index]`` of a ``t`` pending in this graph with a basic index (ints, slices, None,
        ``...``): a getitem node (views.py).  None: ``t`` is not pending here (any more), advanced
        indexing (eager mode copies), or an index eager mode rejects: ``t`` is forced and
        indexed eagerly."""
        with self.lock:
            z = _get_slot(t, Tensor)
            if z.__class__ is not tuple or z[0] is not self:
                return None
            return self._record_getitem(z, index, t._sig)

    def _record_getitem(self, z, index, like):
        """``record_getitem`` under the lock; ``z``: ``t``'s pending state, ``like``: its signature."""
        items = index if index.__class__ is tuple else (index,)
        for i in items:
            if i.__class__ not in _BASIC_INDEX:
                return None
        norm, ty = index_type(index, z[3])
        if norm is None:
            return None
        shape = index_shape(norm, z[2])
        if shape is None:
            return None
        self.types[z[1]] = z[3]
        return self._append_view(_view_spec(GETITEM, 1), (z[1], _encode_index(norm)), ty, shape, False, like)

    def _append_view(self, spec, vals, ty, shape, contiguous, like):
        self.views += 1
        return self._append(spec, vals, ty, _out_sig(like, ty, bool(contiguous)), shape)

    def _append(self, spec, vals, ty, sig, shape):
        vid = self.next
        self.next += 1
        self.types[vid] = ty
        self.records.append((spec, vid, *vals))
        t = _new(LazyTensor)
        t._sig = sig
        t._lazy = (self, vid, shape, ty)
        self.lazies.append(t)
        if len(self.records) >= _MAX_PENDING[0]:
            self.size_flush()
        return t

    def size_flush(self) -> None:
        _counters["size_flushes"] += 1
        self.flush()

    def _eager(self, op, args, kwargs):
        _counters["eager_ops"] += 1
        # an op that reads no pending value can not see the pending graph: it runs without forcing
        # it.  One that writes into a tensor the graph reads (in place, out=) forces it, as it does
        # every graph of any thread that reads the tensor: the dispatcher calls _before_write first
        if self.records and _reads_pending(args, kwargs):
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
                self.contended = not _GIL   # re-armed: holding the lock, no foreign flush is under way
            elif self.records or self.read_keys:
                self.contended = True     # the owner's next records take the lock ...
                while self.busy:          # ... and one already inside a lock-free record finishes
                    time.sleep(0)
            if not self.records and not self.read_keys:
                return                    # nothing pending, or run meanwhile by the lock's holder
            try:
                self._run()
            finally:
                if self.read_keys:
                    self.read_keys = set()
                    _unwatch(self.ref)

    def _run(self) -> None:
        records = self.records
        if not records:
            return
        live = _live(self.lazies, _DEAD_RC)
        inputs, tensors, types, next_id = self.inputs, self.tensors, self.types, self.next
        derived, roots = _derived_views(records, live) if self.views else ([], [])
        self._reset()
        _counters["flushes"] += 1
        _counters["records"] += len(records)
        if not live:
            _counters["dead_values"] += len(records)
            return
        if derived:
            later = {r[1] for r, _ in derived}
            live = [x for x in live if x[0] not in later]
        # drop what no live value needs, before the key is built
        needed = {v for v, _ in live}
        needed.update(roots)
        keep = []
        for r in reversed(records):
            if r[1] in needed:
                keep.append(r)
                for i in r[0].tpos:
                    needed.add(r[i])
        keep.reverse()
        _counters["dead_values"] += len(records) - len(keep) - sum(1 for r, _ in derived if r[1] not in needed)
        scalars = []
        for j, r in enumerate(keep):
            s = r[0]
            if s.ty is not None:      # the fast path's records: the spec knows the type
                types[r[1]] = s.ty
            k = s.keyer
            if k is not None:
                keep[j] = k(r, scalars)
        ins = [(v, t) for v, t in zip(inputs, tensors) if v in needed]
        outs_v = tuple([v for v, _ in live] + roots)
        key = (tuple(keep), tuple([v for v, _ in ins]), tuple([t._sig for _, t in ins]), outs_v)
        plan = _plans.get(key)
        try:
            if plan is None:
                g = Graph(inputs=[v for v, _ in ins], types=types, next_id=next_id,
                          outputs=tuple(Var(v) for v in outs_v))
                g.nodes = [r[0].node(r, scalars) for r in keep]
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
                    outs = plan.run([t for _, t in ins], scalars)
            finally:
                _state.tracer = prev
        except BaseException as e:
            _fail([t for _, t in live] + [t for _, t in derived if t is not None], e)
            raise
        given = set()
        for (_, t), o in zip(live, outs):
            a = o._data
            if id(a) in given:
                a = _copy(o)       # cse merged two values that eager mode keeps in separate memory
            given.add(id(a))
            _set_slot(t, a)
            t._sig = o._sig
            t.__class__ = Tensor
        if derived:
            made = dict(live)
            for v, o in zip(roots, outs[len(live):]):
                if id(o._data) in given:     # the same: a temporary of its own, as in eager mode
                    o = wrap(_copy(o))
                given.add(id(o._data))
                made[v] = o
            _derive(derived, made)


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


def _reads_pending(args: tuple, kwargs: dict) -> bool:
    for x in (*args, *kwargs.values()):
        if x.__class__ is LazyTensor or (x.__class__ in (list, tuple)
                                         and any(y.__class__ is LazyTensor for y in x)):
            return True
    return False


def _derived_views(records: list, live: list) -> tuple[list, list]:
    """The views a flush makes after the run, with the eager view ops, from the tensors that the
    values they view became: each live view, and the views between it and the first value it
    views that is not a view (its *root*), as ``(record, its LazyTensor or None)`` in program
    order; and the roots that are not live, which the plan then returns too.

    So a live view is what eager mode's would be: it shares its memory, version counter and
    ``_base`` (autograd's in-place rules follow it) with the tensor it views, whether or not cse
    merged that value with another, and it has eager mode's strides (sink_views moves no view
    of a value the plan returns: it would compute the view contiguously, in its loop)."""
    views = {r[1]: r for r in records if r[0].view}
    is_live = {v for v, _ in live}
    chain, roots = {}, []
    for v, _ in live:
        r = views.get(v)
        while r is not None and r[1] not in chain:
            chain[r[1]] = r
            src = r[2]
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
        with ExcludeDispatchKeyGuard(_K.Tracer):
            for r, t in derived:
                o = r[0].op(made[r[2]], *r[0].statics(r))
                if t is not None:
                    _set_slot(t, o._data)
                    t._sig = o._sig
                    share_view(t, o)                   # the version counter and _base it shares
                    t.__class__ = Tensor
                    o = t
                made[r[1]] = o
    except BaseException as e:
        _fail([t for _, t in derived if t is not None and t.__class__ is LazyTensor], e)
        raise
    finally:
        _state.tracer = prev


def _fail(lazies: list, e: BaseException) -> None:
    """Mark pending tensors failed: reading them raises, chained to ``e``."""
    for t in lazies:
        z = _get_slot(t, Tensor)
        _set_slot(t, (_FAILED, e, z[2], z[3]))


def _live(lazies: list, limit: int) -> list:
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
            if z is not None and z[0] is not _FAILED:
                live.append((z[1], t))
    return live


def _calibrate() -> int:
    """The ``limit`` of ``_live``: measured, since interpreters differ in the temporary
    references they hold."""
    t = _new(LazyTensor)
    t._lazy = (None, 0, (), None)
    lst = [t]
    del t
    for limit in range(1, 16):
        if not _live(lst, limit):
            held = lst[0]                  # a second reference must make it live
            ok = len(_live(lst, limit)) == 1
            del held
            if ok:
                return limit
            break
    raise RuntimeError("compiled mode: cannot calibrate reference counts on this interpreter")


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


# -- writes: the pending graphs (of every thread) that read a storage run before it is written ----
# A graph reads its inputs when it runs, eager mode when each op runs: a write in between must
# run the graph first.  Each recorder lists the storages its inputs view (``read_keys``); while
# it has any, it is in ``_watched``, and a write looks there.  So writing into a tensor that no
# pending graph reads costs the look at an empty list, or one set lookup per recording thread.
_watched: list = []      # weak references to the recorders with pending reads (append/remove are atomic)


def _watch(r) -> None:
    _watched.append(r.ref)


def _unwatch(ref) -> None:
    try:
        _watched.remove(ref)
    except ValueError:
        pass


def _storage_root(a):
    """The object that owns the memory of array ``a``: NumPy views chain to it through ``.base``
    (an array owning its data, the output pool's block, a buffer); CUDA arrays name their storage."""
    if a.__class__ is np.ndarray:
        b = a.base
        while b is not None:
            a = b
            b = getattr(b, "base", None)
        return a
    st = getattr(a, "storage", None)
    return a if st is None else st


def _storage_key(a) -> int:
    return id(_storage_root(a))


def _before_write(t) -> None:
    """Run every pending graph, of any thread, that reads ``t``'s storage: the dispatcher calls
    this before an op writes into ``t`` (in place, ``out=``; dispatcher.set_write_guard), and so
    do item assignment (``copy_`` too) and ``.numpy()``/``__array__``, whose array may be written."""
    a = getattr(t, "_data", None)       # a pending tensor is computed first: the write forces it anyway
    if a is None:
        return
    key = _storage_key(a)
    for ref in tuple(_watched):
        r = ref()
        if r is not None and key in r.read_keys:
            r.flush()


# Storages handed out as writable NumPy arrays (``.numpy()``, ``__array__``): the holder may write
# through the array at any time, unseen.  A graph reads such an input from a copy taken when the
# op is recorded (one per op), as eager mode reads it when the op runs.  id(root) -> a weak
# reference to the root (the mark goes with it), or, for a block of the output pool (which a weak
# reference would keep from being reused), how many times the pool had handed it out: once it is
# handed out again it was free in between, so no array the user took views it any more.
_exported: dict = {}


def _mark_exported(a) -> None:
    root = _storage_root(a)
    k = id(root)
    n = _pool.handouts(root)
    if n is not None:
        _exported[k] = n
        return
    mark = _exported.get(k)
    if mark is None or mark.__class__ is int or mark() is not root:    # a stale mark of a dead pool block
        try:
            _exported[k] = weakref.ref(root, lambda _, k=k: _exported.pop(k, None))
        except TypeError:        # a buffer without weak references (bytes): read-only
            pass


def _is_exported(root) -> bool:
    mark = _exported.get(id(root))
    if mark is None:
        return False
    if mark.__class__ is int and mark != _pool.handouts(root):
        _exported.pop(id(root), None)       # a pool block reused since: the mark is stale
        return False
    return True


def _snapshot(x) -> Tensor:
    """A copy of input ``x`` that no one else can write into (same layout kind, as far as the
    signature's contiguity bit goes)."""
    return wrap(_get_slot(x, Tensor).copy(order="K"))


_hooks: list = []


def _install_forcing_hooks():
    """On entering compiled mode the first time (in any thread): writes outside the dispatcher
    (item assignment, NumPy views) run the pending readers first, and the dispatcher's write
    guard does it for ops."""
    if _hooks:
        return
    _hooks.append(True)

    def writes_first(orig):
        @functools.wraps(orig)
        def hooked(self, *a, **k):
            if _watched:
                _before_write(self)
            return orig(self, *a, **k)
        return hooked

    def exports(orig):
        @functools.wraps(orig)
        def hooked(self, *a, **k):
            if _watched:
                _before_write(self)
            out = orig(self, *a, **k)
            if out.__class__ is np.ndarray and not self._sig & _CUDA_SIG:     # CUDA: a host copy
                _mark_exported(out)
            return out
        return hooked
    Tensor.__setitem__ = writes_first(Tensor.__dict__["__setitem__"])
    for name in ("numpy", "__array__"):
        setattr(Tensor, name, exports(Tensor.__dict__[name]))
    set_write_guard(_before_write, _watched)


# ops recorded when their first argument is a value pending in the graph: reductions (they become
# the epilogue of the loop computing it) and views (sink_views moves them into the loops around them)
_OF_PENDING = dict.fromkeys(_REDUCTION_NAMES, LazyRecorder._record_reduction)
_OF_PENDING.update(dict.fromkeys(VIEW_SHAPES, LazyRecorder._record_view))
_of_pending: dict = {}       # op -> its _OF_PENDING entry (None: none), per OpOverload



def _registrations_changed() -> None:
    """A registration changed (registry.on_change, with the dispatch memos, which hold the record
    specializations): drop what was computed from the old ones."""
    for cache in (_decomps, _of_pending, _view_lists, _specs, _plans):
        cache.clear()


registry.on_change(_registrations_changed)
_DEAD_RC = _calibrate()
install_tracer_fallback()
# the Tracer fallback specializes per call signature (dispatcher.py: backend fallbacks with .specialize)
tracer_fallback.specialize = _specialize
