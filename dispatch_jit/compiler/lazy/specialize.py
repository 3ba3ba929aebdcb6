"""The generated recorders: the Tracer fallback's kernel specialized per call signature.

Compiled mode's first entry registers ``recording_fallback`` at the Tracer key (the Tracer
fallback, with ``specialize``: trace.install_tracer_fallback); the dispatcher memoizes what
``specialize`` returns per signature, so recording an elementwise op costs about what eager
dispatch of it does.  This is the hot path: the records it builds are plain tuples (encode.py),
its pending states ``Pending`` named tuples built by the tuple constructor (tensor.py)."""

from __future__ import annotations

import weakref

from dispatch_jit.autograd.grad_mode import is_grad_enabled
from dispatch_jit.autograd.kernel import meta_requires_grad
from dispatch_jit.jit.source import define
from dispatch_jit.keys import DispatchKey, key_bits
from dispatch_jit.signature import make_sig
from dispatch_jit.tensor import Tensor

from ..elementwise import result_of, scalar_op_of
from ..graph.ir import Node, TensorType, Var
from ..trace.fallback import tracer_fallback
from ..trace.symbolic import _state
from . import generic, grad
from .encode import DENSE_BITS, RUNTIME_TYPES, SCALARS, Spec, broadcast, canon, device_kind
from .layout import FIRST_SLOT
from .record import LazyRecorder, decomposition_of, of_pending
from .state import state
from .tensor import LazyTensor, Pending, new

_AG_KS = key_bits(DispatchKey.AutogradCPU, DispatchKey.AutogradCUDA)     # in an argument's key set

# the generated record functions (their globals hold _LIMIT); weakly, as they live in dispatch
# memos, which every registration clears
_GENERATED = weakref.WeakSet()


def set_limit(n: int) -> None:
    """The pending-graph size at which the generated recorders flush (``set_max_pending``)."""
    state.max_pending = int(n)
    for f in list(_GENERATED):
        f.__globals__["_LIMIT"] = int(n)


def specialize(call, boxed):
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
    other constants through ``canon``."""
    from dispatch_jit.ops import overload_of
    op = overload_of(call.op)
    cuda = any(m is not None and m.kind == "tensor" and m.device != "cpu" for m in call.metas)
    if decomposition_of(op, cuda) is not None:
        return boxed
    if is_grad_enabled() and any(m is not None and meta_requires_grad(m) for m in call.metas):
        recordable = scalar_op_of(op) is not None or (not cuda and generic.meta_of(op) is not None)
        return _grad_recorder(call, op, boxed) if recordable else boxed
    if scalar_op_of(op) is None:
        return _generic_recorder(call, op, boxed) if not cuda and generic.meta_of(op) is not None else boxed
    fast = _elementwise_recorder(call, op, cuda, boxed, boxed)
    return boxed if fast is None else fast


def _elementwise_recorder(call, op, cuda: bool, boxed, miss):
    """The generated recorder of one signature of an elementwise op (see ``specialize``), or None
    where the signature is not one it records.  ``miss`` runs a call it does not record: the boxed
    fallback, or (``_grad_recorder``'s, whose tensors may require grad: recorded as plain ones, the
    node is made around the record) a function returning None."""
    got = _operands(call, cuda, miss is boxed)
    if got is None:
        return None
    params, slots, tensors, args, kwargs, dev = got
    spec = Spec(op, tuple(args), tuple(kwargs))
    sig = ", ".join(params)
    fname = "record_" + "".join(c if c.isalnum() else "_" for c in op.name())
    g = {"_state": _state, "_LR": LazyRecorder, "_LT": LazyTensor, "_T": Tensor, "_new": new, "_S": spec,
         "_ONCE": (None,), "_P": Pending, "_mk": tuple.__new__, "_miss": miss, "_canon": canon,
         "_broadcast": broadcast, "_LIMIT": state.max_pending, "_OUT": None, "_SIG": None}
    for k, (_, ty) in enumerate(tensors):
        g[f"_TY{k}"] = ty
    src = _recorder_source(fname, sig, _record_body(tensors, slots))
    fast = define(src, fname, g, f"<dispatch_jit lazy record {op.name()}>")
    _GENERATED.add(fast)
    dev_index = 0 if dev == "cpu" else int(dev.split(":")[1])
    g["_first"] = _first_call(op, spec, g, fast, (params, tensors, args, kwargs), dev_index, boxed, miss)
    fast.__source__ = src
    return fast


def _operands(call, cuda: bool, boxed_miss: bool):
    """How the recorder of this signature reads each argument, or None where it records none of
    its calls: ``(params, slots, tensors, args, kwargs, device)``.  ``params``: the generated
    function's parameters; ``slots``: the expression of each record slot (from ``FIRST_SLOT``
    on); ``tensors``: ``(param, TensorType)`` per tensor operand; ``args``/``kwargs``: each
    argument's ``(kind, slot)`` as the spec keeps it ("v" a tensor's value id, "s" a runtime
    scalar, "c" a canonical constant, "k" a None)."""
    params, slots, tensors, args, kwargs = [], [], [], [], []
    devices = set()
    for a, m in zip(call.op.schema.arguments, call.metas):
        p = f"a{len(params)}"
        params.append(p)
        if a.type.is_tensor_like:
            if a.type.is_list or m is None:
                return None
            if m.kind == "tensor":
                if m.keyset & ~_AG_KS != DENSE_BITS[device_kind(m.device)] or (m.keyset & _AG_KS and boxed_miss):
                    return None
                devices.add(m.device)
                desc = ("v", FIRST_SLOT + len(slots))
                slots.append(f"v{len(tensors)}")
                tensors.append((p, TensorType(m.dtype, m.ndim, device_kind(m.device))))
            elif m.kind == "scalar" and m.pytype in RUNTIME_TYPES and not cuda and not a.kwarg_only:
                desc = ("s", FIRST_SLOT + len(slots))            # a runtime scalar: the number as it is
                slots.append(p)
            elif m.kind == "scalar" and m.pytype in SCALARS:
                desc = ("c", FIRST_SLOT + len(slots))
                slots.append(f"({p} if {p} else _canon({p}))")
            elif m.kind == "none":
                desc = ("k", None)
            else:
                return None
        elif a.type.base == "Scalar" and not a.type.is_list:     # its type is in the memo key
            desc = ("c", FIRST_SLOT + len(slots))
            slots.append(f"({p} if {p} else _canon({p}))")
        else:
            return None                                          # a value the memo key does not fix
        if a.kwarg_only:
            kwargs.append((a.name, desc))
        else:
            args.append(desc)
    if not tensors or len(devices) > 1:
        return None           # one device (cuda:N included) per call: eager mode raises on a mix
    return params, slots, tensors, args, kwargs, devices.pop()


def _record_body(tensors, slots) -> list:
    """The lines that record one call: a one-pass loop that reads each tensor operand's value id
    and shape (a pending value of this recorder, or a real tensor made an input), broadcasts the
    shapes, appends the record ``(spec, out vid, *slots)`` (layout.py) and makes the LazyTensor
    ``t``.  A call it does not record leaves the loop with ``t = None``.  A LazyTensor's slot is
    read once and tested for a Pending: another recorder's may be computed meanwhile (the slot
    then holds its array)."""
    body = ["for _ in _ONCE:"]
    for k, (p, _) in enumerate(tensors):
        body += [f"    c = {p}.__class__",
                 "    if c is _LT:",
                 f"        z = {p}._lazy",
                 "        if z.__class__ is not _P or z.recorder is not r:",
                 "            break",
                 f"        v{k} = z.vid",
                 f"        s{k} = z.shape",
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
    return body + ["    vid = r.next",
                   "    r.next = vid + 1",
                   f"    r.records.append((_S, vid, {', '.join(slots)}))",
                   "    t = _new(_LT)",
                   "    t._sig = _SIG",
                   "    t._lazy = _mk(_P, (r, vid, shape, _OUT))",
                   "    r.lazies.append(t)"]


def _recorder_source(fname: str, sig: str, body: list) -> str:
    """The recorder around ``body``, lock-free: it excludes a flush by another thread
    (LazyRecorder's ownership protocol) by raising ``busy`` around the body; once another thread
    has flushed this recorder (``contended``) it runs under the lock instead, in ``_locked``, the
    second function generated from the same body.  A call the body does not record runs,
    unlocked, through ``_miss``; the size flush runs after ``busy`` is lowered (a flush may wait
    for other threads)."""
    tail = ["    if t is None:",
            f"        return _miss({sig})",
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
    return "\n".join(lines) + "\n"


def _first_call(op, spec, g, fast, operands, dev_index: int, boxed, miss):
    """The recorder's ``_first``: outside compiled mode, the generic fallback; in it, the first
    recorded call decides whether the op fuses for this signature and its output type, once."""
    params, tensors, args, kwargs = operands
    never = []

    def first(r, a):
        if r.__class__ is not LazyRecorder:
            return boxed(*a)
        if never:
            return miss(*a)
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
            return miss(*a)
        g["_SIG"] = make_sig(DENSE_BITS[ty.device], ty.dtype, ty.ndim, True, dev_index)
        spec.ty = g["_OUT"] = ty
        return fast(*a)
    return first


def _generic_recorder(call, op, boxed):
    """The Tracer key's kernel for one signature of an op that generic.py records, no tensor of
    which requires grad (or grad mode is off: both are in the memo key): straight to its record,
    skipping the boxed fallback's generic tests."""
    split = _splitter(call)

    def record(*a):
        r = _state.tracer
        if r.__class__ is not LazyRecorder:
            return boxed(*a)
        args, kwargs = split(a)
        with r.lock:
            t = generic.record(r, op, args, kwargs)
        return boxed(*a) if t is None else t      # the boxed fallback runs it eagerly
    return record


def _none(*a):
    return None


def _splitter(call):
    """(positional arguments, keyword-only ones as a dict) of the dispatcher's flat argument tuple."""
    kwnames = tuple(a.name for a in call.op.schema.arguments if a.kwarg_only)
    npos = len(call.op.schema.arguments) - len(kwnames)
    none = {}
    if not kwnames:
        return lambda a: (a, none)
    return lambda a: (a[:npos], dict(zip(kwnames, a[npos:])))


def _grad_recorder(call, op, boxed):
    """The Tracer key's kernel for one signature of a recordable op with a tensor that requires
    grad (grad mode on): the op's record (``LazyRecorder._record``, as grad.py makes it) and its
    node, made by the recorder eager mode's Autograd kernel generates for this signature
    (``AutogradKernel.recorder``: the same node class, edges, saved tensors, ctx), with pending
    tensors' shapes read from their pending state and a saved output saved as its twin.  Where
    the op is not recorded (``out=`` given included: eager mode raises), the boxed fallback runs it."""
    how = grad.autograd_of(op)
    if how is None:
        return boxed              # no AutogradKernel: grad.py's generic path runs it eagerly
    split = _splitter(call)
    # an op with a meta function that is not recorded otherwise of a pending value (of_pending: a
    # reduction, a view) is a generic record whatever its arguments: straight there; an elementwise
    # op's signature that the generated recorders record, through one (tensors that require grad
    # are plain inputs of the graph, as in LazyRecorder._record)
    rec = generic.record if generic.meta_of(op) is not None and of_pending(op) is None else None
    cuda = any(m is not None and m.kind == "tensor" and m.device != "cpu" for m in call.metas)
    fast = _elementwise_recorder(call, op, cuda, boxed, _none) if scalar_op_of(op) is not None else None

    def below(*a):
        r = _state.tracer
        args, kwargs = split(a)
        with r.lock:
            return rec(r, op, args, kwargs) if rec is not None else r._record(op, args, kwargs)
    gen = how[0].recorder(call, below if fast is None else fast, LazyTensor, boxed)

    def record(*a):
        r = _state.tracer
        if r.__class__ is not LazyRecorder:
            return boxed(*a)
        out = gen(*a)
        fn = out.__dict__.get("grad_fn")
        if fn is not None:
            d = fn.__dict__
            z = out._lazy if out.__class__ is LazyTensor else None
            if "_lazy_at" not in d and z is not None and z.__class__ is Pending and z.recorder is r:
                # which record of which graph made it: backward.py replays a backward of such nodes
                d["_lazy_at"] = (r.records, z.vid)
                state.counters["grad_nodes"] += 1
        return out
    return record


def recording_fallback(op, keyset, args, kwargs):
    """The Tracer key's fallback from compiled mode's first entry on: ``trace.tracer_fallback``,
    which the dispatcher asks to ``specialize`` per call signature (dispatcher.py: a backend
    fallback with ``.specialize``)."""
    return tracer_fallback(op, keyset, args, kwargs)


recording_fallback.specialize = specialize
