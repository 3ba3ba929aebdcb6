"""Writes: the pending graphs (of every thread) that read a storage run before it is written.

A graph reads its inputs when it runs, eager mode when each op runs: a write in between must
run the graph first.  Each recorder lists the storages its inputs view (``read_keys``); while
it has any, it is in ``pending_readers``, and a write looks there (``before_write``: a write observer,
writes.py; item assignment, ``.numpy()``/``__array__``).  So writing into a tensor that no
pending graph reads costs the look at an empty list, or one set lookup per recording thread.

Storages handed out as writable NumPy arrays are ``exported_storages``: a graph reads them from a copy
taken at record time (``snapshot_of``)."""

from __future__ import annotations

import weakref

import numpy as np

from dispatch_jit.bufferpool import pool as _pool
from dispatch_jit.tensor import Tensor, wrap

from .tensor import Pending, get_slot

pending_readers: list = []      # weak references to the recorders with pending reads (append/remove are atomic)


def watch_reads(r) -> None:
    pending_readers.append(r.ref)


def unwatch_reads(ref) -> None:
    try:
        pending_readers.remove(ref)
    except ValueError:
        pass


def storage_root(a):
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
    return id(storage_root(a))


def before_write(t) -> None:
    """Run every pending graph, of any thread, that reads ``t``'s storage: the dispatcher calls
    this before an op writes into ``t`` (in place, ``out=``: switch.py registers it as a write
    observer), and so do item assignment (``copy_`` too) and ``.numpy()``/``__array__``, whose array may be written."""
    if get_slot(t, Tensor).__class__ is Pending:
        # a pending tensor has no storage yet, so no graph reads it; the write is recorded into
        # its graph (record.py's in-place records) or computes it first, as it reads its data
        return
    a = getattr(t, "_data", None)
    if a is None:
        return
    key = _storage_key(a)
    for ref in tuple(pending_readers):
        r = ref()
        if r is not None and key in r.read_keys:
            r.flush()


# Storages handed out as writable NumPy arrays (``.numpy()``, ``__array__``): the holder may write
# through the array at any time, unseen.  A graph reads such an input from a copy taken when the
# op is recorded (one per op), as eager mode reads it when the op runs.  id(root) -> a weak
# reference to the root (the mark goes with it), or, for a block of the output pool (which a weak
# reference would keep from being reused), how many times the pool had handed it out: once it is
# handed out again it was free in between, so no array the user took views it any more.
exported_storages: dict = {}


def mark_exported(a) -> None:
    root = storage_root(a)
    k = id(root)
    n = _pool.handouts(root)
    if n is not None:
        exported_storages[k] = n
        return
    mark = exported_storages.get(k)
    if mark is None or mark.__class__ is int or mark() is not root:    # a stale mark of a dead pool block
        try:
            exported_storages[k] = weakref.ref(root, lambda _, k=k: exported_storages.pop(k, None))
        except TypeError:        # a buffer without weak references (bytes): read-only
            pass


def is_exported(root) -> bool:
    mark = exported_storages.get(id(root))
    if mark is None:
        return False
    if mark.__class__ is int and mark != _pool.handouts(root):
        exported_storages.pop(id(root), None)       # a pool block reused since: the mark is stale
        return False
    return True


def snapshot_of(x) -> Tensor:
    """A copy of input ``x`` that no one else can write into (same layout kind, as far as the
    signature's contiguity bit goes)."""
    return wrap(get_slot(x, Tensor).copy(order="K"))

