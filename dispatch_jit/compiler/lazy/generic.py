"""Generic records: an op that does not fuse (linear, softmax, log_softmax, the losses, their
backward ops, ...) recorded as one step of the flush's plan, which runs it through the eager
dispatcher as ``dj.compile``'s plans run such nodes (steps.EagerStep).

What is recorded: a CPU op with a meta function (its kernel at the Meta key: kernels/nn's ops,
topk, a custom op's ``register_fake``) whose arguments are plain dense tensors (pending in this
graph or not; one that requires grad counts as plain here: grad.py records its node), numbers,
strings, None and lists of numbers, and whose results are tensors.  Never: an op that writes
(in-place, ``out=``: its schema marks the argument mutable), an op without a meta function
(random ops have none: their draws must happen in eager mode's order; nor do ops whose output
shape depends on data), CUDA tensors, calls under autocast (its kernels cast first), and a
call whose meta raises: those run eagerly, which raises eager mode's own error.

The meta runs once per (op, argument signatures, shapes, static values), on zero-filled
stand-ins of the inputs' shapes and dtypes (never on the pending values themselves), and its
result types and shapes are kept (``state.metas``), so a recorded call costs one dict lookup
beyond the record.  Until the flush, a generic record's output claims no contiguity (eager
mode's kernels choose its layout): ``view`` of it runs eagerly, forcing it.
"""

from __future__ import annotations

import numpy as np

from dispatch_jit import return_types
from dispatch_jit.autograd.grad_mode import no_grad
from dispatch_jit.dispatcher import ExcludeDispatchKeyGuard, tls
from dispatch_jit.keys import AUTOCAST_BITS, DispatchKey
from dispatch_jit.tensor import _AUTOGRAD_SIG_BITS as _AG, Tensor, wrap

from ..graph.ir import Node, TensorType, Var
from ..trace.symbolic import _state
from .encode import SCALARS, Spec, canon, device_of, out_sig, plain_dense, sig_type
from .layout import FIRST_SLOT, OUT
from .state import MISS, state
from .tensor import CUDA_SIG, SLOT_DATA, LazyTensor, pending

_K = DispatchKey
_LISTED = frozenset([bool, int, float])        # the numbers a list argument may hold (output_mask, dims)
# ops without a meta function whose result's shape and dtype follow from their tensors' shapes and
# dtypes alone: their eager kernel, run on stand-ins, types them (a matmul in a backward formula)
SHAPE_TYPED = frozenset(["aten::matmul"])
# ops of a list of tensors whose result's shape and dtype follow from the tensors' shapes and dtypes
# alone: they have no meta function, so their eager kernel, run on stand-ins, types them
# (clip_grad_norm_'s stack of the gradients' norms, which would otherwise force the backward)
LIST_OPS = frozenset(["aten::stack", "aten::cat"])


class OpSpec(Spec):
    """The spec of a generic record ``(spec, first out vid, *slots)``: its ``nout`` outputs are
    the values ``first .. first + nout - 1``; a ``("l", i)`` argument is a list held as a tuple."""

    __slots__ = ("nout", "_lists")

    def __init__(self, op, args: tuple, kwargs: tuple, nout: int):
        super().__init__(op, tuple(("c", i) if k == "l" else (k, i) for k, i in args),
                         tuple((n, ("c", i) if k == "l" else (k, i)) for n, (k, i) in kwargs))
        self.nout = nout
        self._lists = frozenset(i for k, i in list(args) + [a for _, a in kwargs] if k == "l")

    def _arg(self, rec, kind, i, scalars):
        v = self._value(rec, kind, i, scalars)
        return list(v) if i in self._lists else v

    def node(self, rec, scalars) -> Node:
        val = self._arg
        return Node(self.op, tuple([val(rec, *a, scalars) for a in self.args]),
                    {name: val(rec, *a, scalars) for name, a in self.kwargs}, tuple(range(rec[OUT], rec[OUT] + self.nout)))


class ListSpec(OpSpec):
    """The spec of a record of an op whose first argument is a list of ``n`` tensors
    (``LIST_OPS``): its slots are their ``n`` value ids, then the other arguments' as OpSpec's."""

    __slots__ = ("n",)

    def __init__(self, op, n: int, args: tuple, kwargs: tuple):
        super().__init__(op, args, kwargs, 1)
        self.n = n
        self.tpos = tuple(range(FIRST_SLOT, FIRST_SLOT + n)) + self.tpos

    def node(self, rec, scalars) -> Node:
        val = self._arg
        first = [Var(v) for v in rec[FIRST_SLOT:FIRST_SLOT + self.n]]
        return Node(self.op, (first, *[val(rec, *a, scalars) for a in self.args]),
                    {name: val(rec, *a, scalars) for name, a in self.kwargs}, (rec[OUT],))


def _op_spec(op, kinds: tuple, names: tuple, nout: int) -> OpSpec:
    key = ("op", op, kinds, names)
    s = state.specs.get(key)
    if s is None:
        npos = len(kinds) - len(names)
        descs = [("v" if k == "v" else "l" if k is list else "c", FIRST_SLOT + i) for i, k in enumerate(kinds)]
        s = state.specs[key] = OpSpec(op, tuple(descs[:npos]), tuple(zip(names, descs[npos:])), nout)
    return s


def meta_of(op):
    """The meta function a call of ``op`` may be recorded with, or None: none registered, the
    op writes into an argument, or it returns anything but tensors."""
    m = state.meta_fns.get(op, MISS)
    if m is MISS:
        m = None
        k = op._entry.kernels.get(_K.Meta)
        sch = op.schema
        if k is None and op.name() in SHAPE_TYPED:
            m = op
        elif (k is not None and sch.returns and not any(a.is_mutable or a.name == "out" for a in sch.arguments)
                and all(r.type.base == "Tensor" and not r.type.is_list for r in sch.returns)):
            m = k.fn
        state.meta_fns[op] = m
    return m


def record(r, op, args: tuple, kwargs: dict):
    """Record ``op(*args, **kwargs)`` into recorder ``r`` (holding its lock) as a generic step: the
    LazyTensor made (a tuple of them for several results), or None: run it eagerly."""
    meta = meta_of(op)
    if meta is None or tls.include & AUTOCAST_BITS:
        return None        # under autocast the op's Autocast kernel casts first: eager mode runs it
    # one pass over the arguments builds the record's slots and the key of what the meta said
    # (per tensor its signature and shape, per constant its class and value)
    vals, key = [], [op]
    added = 0
    for x in (*args, *kwargs.values()):
        cls = x.__class__
        if cls is LazyTensor:
            z = pending(x)
            if z is None or z.recorder is not r:
                r._rollback(added)
                return None
            r.types[z.vid] = z.type
            vals.append(z.vid)
            key.append(x._sig)
            key.append(z.shape)
        elif cls is Tensor:
            sig = x._sig
            if not plain_dense(sig & ~_AG):
                r._rollback(added)
                return None
            vid = r.input_ids.get(x)
            if vid is None:
                vid = r.add_input(x, sig_type(sig))
                added += 1
            vals.append(vid)
            key.append(sig)
            key.append(SLOT_DATA.__get__(x, Tensor).shape)
        elif cls in SCALARS or cls is str:
            vals.append(x if x or cls is str else canon(x))
            key.append(cls)
            key.append(vals[-1])
        elif (cls is list or cls is tuple) and all(y.__class__ in _LISTED for y in x):
            vals.append(tuple(x))
            key.append(cls)
            key.append(vals[-1])
        else:
            r._rollback(added)
            return None
    if kwargs:
        key.append(tuple(kwargs))
    key = tuple(key)
    known = state.metas.get(key, MISS)
    if known is MISS:
        known = state.metas[key] = _known(op, meta, args, kwargs, key)
    if known is None:
        r._rollback(added)
        return None
    spec, outs, form = known
    state.counters["generic_records"] += 1
    made = r.append_values(spec, vals, outs)
    return made[0] if form is None else form(made)


def record_list(r, op, args: tuple, kwargs: dict):
    """Record ``op(tensors, *args, **kwargs)`` of ``LIST_OPS`` into recorder ``r`` (holding its
    lock): the LazyTensor made, or None (run it eagerly).  The tensors are plain dense or pending
    in ``r``; the other arguments numbers (``dim``)."""
    if tls.include & AUTOCAST_BITS or op.name() not in LIST_OPS:
        return None
    vals, key = [], [op, len(args[0])]
    added = 0
    for x in args[0]:
        cls = x.__class__
        if cls is LazyTensor:
            z = pending(x)
            if z is None or z.recorder is not r:
                break
            r.types[z.vid] = z.type
            vals.append(z.vid)
            key += (x._sig, z.shape)
        elif cls is Tensor and plain_dense(x._sig & ~_AG):
            vid = r.input_ids.get(x)
            if vid is None:
                vid = r.add_input(x, sig_type(x._sig))
                added += 1
            vals.append(vid)
            key += (x._sig, SLOT_DATA.__get__(x, Tensor).shape)
        else:
            break
    else:
        rest = (*args[1:], *kwargs.values())
        if vals and all(v.__class__ is int for v in rest):
            key += (*rest, tuple(kwargs))
            key = tuple(key)
            known = state.metas.get(key, MISS)
            if known is MISS:
                known = state.metas[key] = _list_known(op, args, kwargs, key)
            if known is not None:
                spec, outs = known
                state.counters["generic_records"] += 1
                return r.append_values(spec, vals + list(rest), outs)[0]
    r._rollback(added)
    return None


def _list_known(op, args: tuple, kwargs: dict, key: tuple):
    """(the ListSpec, ((type, shape, signature),)) of a ``record_list`` key, or None."""
    def eager(xs, *a, **k):
        return op(xs, *a, **k)
    outs = _run_meta(eager, (list(args[0]), *args[1:]), kwargs)
    like = device_of(list(key[2:2 + 2 * key[1]:2]))
    if outs is None or len(outs) != 1 or like is None or like & CUDA_SIG:
        return None
    n, npos = key[1], len(args) - 1
    descs = [("c", FIRST_SLOT + n + i) for i in range(npos + len(kwargs))]
    spec = ListSpec(op, n, tuple(descs[:npos]), tuple(zip(kwargs, descs[npos:])))
    (ty, shape), = outs
    return spec, ((ty, shape, out_sig(like, ty, False)),)


def _known(op, meta, args: tuple, kwargs: dict, key: tuple):
    """What ``record`` keeps per key: (the spec, (type, shape, signature) per result, how the
    results are returned: None for one tensor, else a function of the list), or None."""
    outs = _run_meta(meta, args, kwargs)
    sigs = [s for s in key[1::2] if s.__class__ is int]
    like = device_of(sigs) if sigs else None
    if outs is None or like is None or like & CUDA_SIG:
        return None
    kinds = tuple([k if k.__class__ is not int else "v" for k in key[1:1 + 2 * (len(args) + len(kwargs)):2]])
    kinds = tuple(list if k is list else k for k in kinds)
    spec = _op_spec(op, kinds, tuple(kwargs), len(outs))
    outs = tuple((ty, shape, out_sig(like, ty, False)) for ty, shape in outs)
    if len(outs) == 1 and len(op.schema.returns) == 1:
        return spec, outs, None
    named = return_types.of(op.schema)
    return spec, outs, (tuple if named is None else lambda made: named(*made))


def _stand_in(x):
    """A CPU tensor of ``x``'s shape and dtype, zero-filled (calloc'ed: no pages are touched),
    that does not require grad: what the meta function runs on."""
    if isinstance(x, Tensor):
        return wrap(np.zeros(tuple(x.shape), x.dtype.np))
    if x.__class__ is list:
        return [_stand_in(y) for y in x]
    return x


def _run_meta(meta, args: tuple, kwargs: dict):
    """((TensorType, shape) per result) from ``meta`` on stand-ins, or None (it raised, or gave
    something other than CPU tensors: the call then runs eagerly and raises there)."""
    a = tuple(_stand_in(x) for x in args)
    k = {n: _stand_in(x) for n, x in kwargs.items()}
    prev = _state.tracer
    _state.tracer = None
    try:
        with ExcludeDispatchKeyGuard(_K.Tracer), no_grad(), np.errstate(all="ignore"):
            out = meta(*a, **k)
    except Exception:
        return None
    finally:
        _state.tracer = prev
    outs = out if isinstance(out, (tuple, list)) else (out,)
    if not outs or not all(o.__class__ is Tensor and not o._sig & CUDA_SIG for o in outs):
        return None
    return tuple((TensorType(o.dtype, o.ndim, "cpu"), tuple(o.shape)) for o in outs)
