"""The replayed backward: ``loss.backward()`` of a pending loss, walked by the engine once per
structure of its graph and then replayed from the records that walk appended (what AOTAutograd
does for ``torch.compile``: the backward of a traced forward, made once).

In compiled mode the engine's walk of a pending graph computes nothing: each node's formula
dispatches ops that are recorded (grad.py), and the leaves' ``.grad`` become pending values.
What that walk appends is a function of the graph's structure: the records pending in this
thread's graph (ops, static arguments, constants and runtime scalars, exactly, with their
types), the inputs' signatures and shapes, which record made which node, each node's class and
edges, which leaves the edges end in, and the dispatcher's thread-local key sets.  That is the
key (``_key``); the first backward of a key runs the engine's walk as always and keeps what it
appended (``_capture``): the records, the types and multi-result records it added, the vid its
seed (the implicit ones) got as an input, the ``.grad`` each leaf got and which nodes it ran.
The next backward of that key appends those records again (the vids are the same: the pending
graph numbers its values in recording order) and does what the engine would: sets each leaf's
``.grad`` to a tensor pending as the value it got, frees what the nodes it ran saved, after
checking their saved tensors' versions.  Flushed, the graph is the one the walk would have left,
so the flush's plan cache hits its plan.

Only the plain case is replayed (``engine.run_backward`` asks first: one root, pending in this
thread's graph, on the CPU, with one element, no ``gradient=``, ``retain_graph``,
``create_graph`` or ``inputs=``); and a graph every node of which this pending graph recorded,
none with a hook (``register_hook``, ``retain_grad``) or already freed, whose leaves are plain
tensors read by the graph with no ``.grad`` yet.  A saved tensor whose version changed, a graph
near the size limit, or a walk that did anything else than record into this graph (an op run
eagerly, a new input besides the seed, a flush, a pending value other than a ``.grad`` left
alive) walks the engine as always (which raises its own error where eager mode does).  A walk
that read new inputs is walked once more with the seed pending in the graph (a recorded clone of
it): a formula that takes a view of the seed (``sum()``'s, ``mean()``'s expand it) then records
the view instead of running it eagerly, and the walk is kept if that was all."""

from __future__ import annotations

import math
import threading

import numpy as np

from dispatch_jit.autograd import engine
from dispatch_jit.autograd.graph import AccumulateGrad, SavedTensor
from dispatch_jit.dispatcher import tls
from dispatch_jit.tensor import Tensor, wrap, wrap_like_sig

from .execute import DEAD_RC, live_values
from .generic import OpSpec
from .layout import SPEC
from .state import MISS, state
from .tensor import CUDA_SIG, LazyTensor, Pending, get_slot, make_pending, new

MAX_BACKWARDS = 256       # kept structures (a loop whose structure changes every step keeps none)
_NEVER = ()               # a key whose walk does more than record: the engine walks it every time
_SEEDED = (None,)         # a key whose walk read the seed eagerly: walk it again with a pending seed


def backward(root) -> bool:
    """A LazyTensor's ``__backward__``, which ``engine.run_backward`` tries first for a plain
    ``root.backward()``: True when it did the backward (replayed, or walked and kept), False: the engine
    walks the graph itself."""
    z = get_slot(root, Tensor)
    if z.__class__ is not Pending or root._sig & CUDA_SIG or math.prod(z.shape) != 1:
        return False
    r = z.recorder
    if r.owner != threading.get_ident():
        return False        # another thread's graph: its recorder, its structure
    with r.lock:
        if get_slot(root, Tensor) is not z:
            return False    # computed meanwhile, by another thread
        fn = root.grad_fn
        walked = None if fn is None or root.__dict__.get("_output_nr", 0) else _walk(r, fn)
        if walked is None:
            return False
        struct, order = walked
        key = _key(r, z.vid, struct)
        rep = state.backwards.get(key)
        if rep is None or rep is _SEEDED:
            before = _Before(r)
        elif rep is _NEVER:
            return False
        else:
            return _replay(r, rep, order, z)
    seed = _seed(z)
    # the walk, with the seed it would make; or a copy pending in the graph, for a walk that takes
    # a view of it (sum's, mean's backward expand it): views of a tensor that is not pending run
    # eagerly, and the graph would read that view as an input of its own, which a replay can not
    # make.  (A pending copy costs the plan a step: only where needed.)
    pending_seed = rep is _SEEDED
    engine.run_backward([root], [seed.clone() if pending_seed else seed], False, False)
    with r.lock:
        rep = _capture(r, before, seed, order)
        if rep is _NEVER and not pending_seed and any(t is not seed for t in r.tensors[before.inputs:]):
            rep = _SEEDED
    if rep is not None:
        if len(state.backwards) >= MAX_BACKWARDS:
            state.backwards.clear()
        state.backwards[key] = rep
        if rep is not _NEVER and rep is not _SEEDED:
            state.counters["backward_captures"] += 1
    return True


def _walk(r, fn):
    """(the structure of the graph from ``fn``, its nodes in walk order), or None where it is not
    replayed: a node this pending graph did not record (now), a hook, a freed node, a leaf that is
    not a plain tensor this graph reads or that has a ``.grad``."""
    recs, ids = r.records, r.input_ids
    index = {fn: 0}
    order = [fn]
    struct = []
    i = 0
    while i < len(order):
        node = order[i]
        i += 1
        if node.pre_hooks:
            return None
        if node.__class__ is AccumulateGrad:
            var = node.variable()
            if var is None or var.__class__ is not Tensor or var.__dict__.get("_grad") is not None:
                return None
            vid = ids.get(var)
            if vid is None:
                return None
            struct.append(vid)
            continue
        at = node.__dict__.get("_lazy_at")
        if at is None or at[0] is not recs or node.saved is None:
            return None     # (a freed node that saved nothing runs again: so does its replay)
        edges = []
        for e in node.next_functions:
            if e is None:
                edges.append(None)
                continue
            j = index.get(e[0])
            if j is None:
                j = index[e[0]] = len(order)
                order.append(e[0])
            edges.append((j, e[1]))
        struct.append((at[1], node.__class__, tuple(edges)))
    return tuple(struct), order


def _key(r, vid: int, struct: tuple) -> tuple:
    """What the engine's walk of the graph from value ``vid`` appends is a function of."""
    recs = r.records
    exact = [_exact(rec) for rec in recs if rec[SPEC].rt or (rec[SPEC].__class__ is OpSpec and rec[SPEC]._lists)]
    return (tuple(recs), tuple(exact), vid, struct, tuple([(t._sig, get_slot(t, Tensor).shape) for t in r.tensors]),
            tls.include, tls.exclude)


def _exact(v):
    """A record's slots with their types and the sign of zero: records compare equal where their
    runtime scalars (``x * 0.0`` and ``x * -0.0``) or number lists (``(1, 0)``, ``(True, False)``)
    differ in those only."""
    c = v.__class__
    if c is tuple:
        return tuple([_exact(x) for x in v])
    if c is float:
        return c, v, math.copysign(1.0, v)
    return c, v


def _seed(z):
    """The implicit gradient of the one-element root pending as ``z``: ones of its shape and dtype
    (what the engine's ``ones_like`` gives), a tensor of its own, which the walk reads as an input:
    a copy of a read-only template, with the template's signature (a fresh array's)."""
    key = (z.shape, z.type.dtype)
    ones = _ONES.get(key)
    if ones is None:
        a = np.empty(z.shape, z.type.dtype.np)
        a[...] = 1
        a.flags.writeable = False
        ones = _ONES[key] = (a, wrap(a.copy())._sig)
    return wrap_like_sig(ones[0].copy(), ones[1])


_ONES: dict = {}          # (shape, dtype) -> (ones, the signature of a copy)


class _Before:
    """The recorder's state before a walk is captured."""

    def __init__(self, r):
        self.records, self.n = r.records, len(r.records)
        self.inputs, self.next, self.views = len(r.inputs), r.next, r.views
        self.types, self.multi = dict(r.types), dict(r.multi)


def _capture(r, b: _Before, seed, order: list):
    """What the walk that ran after ``b`` appended, as ``_replay`` appends it again: a tuple
    (records, types, multi-result records, views, the next vid, the seed's vid or None, each
    ``.grad`` as (walk index of its leaf, vid, shape, type, signature), the walk indexes of the
    nodes it ran), or ``_NEVER`` (it did more than record), or None (the graph was run meanwhile:
    nothing is known)."""
    if r.records is not b.records:
        return None
    new_inputs = r.inputs[b.inputs:]
    if new_inputs and (len(new_inputs) > 1 or r.tensors[b.inputs] is not seed):
        return _NEVER
    grads, applied, wanted = [], [], set()
    for j, node in enumerate(order):
        if node.__class__ is not AccumulateGrad:
            if getattr(node, "_released", False):
                applied.append(j)
            continue
        g = node.variable().__dict__.get("_grad")
        if g is None:
            continue
        z = get_slot(g, Tensor) if g.__class__ is LazyTensor else None
        if z is None or z.__class__ is not Pending or z.recorder is not r or z.vid < b.next or g.__dict__:
            return _NEVER
        grads.append((j, z.vid, z.shape, z.type, g._sig))
        wanted.add(z.vid)
    if any(v >= b.next and v not in wanted for v, _ in live_values(r.lazies, DEAD_RC)):
        return _NEVER         # a value of the walk is still held (by what, the replay could not know)
    types = tuple((v, t) for v, t in r.types.items() if b.types.get(v, MISS) is not t)
    multi = tuple((v, n) for v, n in r.multi.items() if b.multi.get(v) != n)
    grads.sort(key=lambda g: g[1])     # the order the walk made them in: the flush's key lists them so
    return (tuple(r.records[b.n:]), types, multi, r.views - b.views, r.next,
            new_inputs[0] if new_inputs else None, tuple(grads), tuple(applied))


def _replay(r, rep: tuple, order: list, z) -> bool:
    """Append the walk's records again and do what the engine's walk does besides (holding the
    recorder's lock); False: walk it (a saved tensor was modified, or the graph would reach the
    size limit)."""
    records, types, multi, views, nxt, seed_vid, grads, applied = rep
    for j in applied:
        saved = order[j].saved
        if saved:
            for v in saved.values():
                if v.__class__ is SavedTensor and v.box[0] != v.version:
                    return False      # the engine raises eager mode's error
    if len(r.records) + len(records) >= state.max_pending:
        return False
    r.records.extend(records)
    r.types.update(types)
    if multi:
        r.multi.update(multi)
    r.views += views
    if seed_vid is not None:
        # LazyRecorder.add_input, less watching the seed's storage: nothing else can reach it
        seed = _seed(z)
        r.inputs.append(seed_vid)
        r.tensors.append(seed)
        r.input_ids[seed] = seed_vid
    r.next = nxt
    lazies = r.lazies
    for j, vid, shape, ty, sig in grads:
        t = new(LazyTensor)
        t._sig = sig
        t._lazy = make_pending(r, vid, shape, ty)
        lazies.append(t)
        order[j].variable().__dict__["_grad"] = t
    for j in applied:
        node = order[j]
        node._released = True
        if node.saved:
            node.saved = None
    state.counters["backward_replays"] += 1
    return True


def install() -> None:
    """Compiled mode's first entry makes the replay a pending tensor's own backward (the engine
    asks a tensor subclass's ``__backward__`` first: autograd/engine.py)."""
    LazyTensor.__backward__ = staticmethod(backward)
