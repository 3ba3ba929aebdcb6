"""Write observers: whoever must see a write into a tensor before it happens.

A layer above the engine that keeps readers of tensors outside the tensors themselves (compiled
mode's pending graphs, compiler/lazy/watch.py) registers an observer here, as a cache derived from
registrations subscribes with ``registry.on_change``: ``observe_writes(before, watched)`` returns a
handle whose ``remove()`` undoes it.  While any observer is registered, the dispatcher's miss path
wraps the memo entries of the call signatures that pass a tensor to an argument the schema marks
written (in-place ops, out=) so that each observer's ``before(t)`` runs first, whenever its
``watched`` container is not empty; every other entry, ``out=None`` calls included, is unchanged.
Writes that are not op calls (``x.data = y``, ``.grad`` zeroed in place, a compiled step's update)
call ``before_write``.

>>> seen = []
>>> h = observe_writes(seen.append, [True])
>>> import dispatch_jit as dj
>>> x = dj.zeros(2); _ = x.add_(1.0); seen == [x]
True
>>> h.remove(); _ = x.add_(1.0); len(seen)
1
"""

from __future__ import annotations

from typing import Callable

__all__ = ["observe_writes", "before_write", "guard_writes"]

# the registered (before(t), watched) pairs, as registry.py keeps its on_change listeners
_observers: list = []


def observe_writes(before: Callable, watched):
    """Register ``before(t)``, run before a write into ``t`` whenever ``watched`` (a container the
    observer keeps) is not empty.  Memo entries resolved before are dropped (they were not
    wrapped).  Returns a ``RegistrationHandle``."""
    from .registry import RegistrationHandle, all_operators, registry_lock
    pair = (before, watched)
    with registry_lock:
        _observers.append(pair)
        for op in all_operators():
            op.memo.clear()

    def undo():
        _observers.remove(pair)
        for op in all_operators():
            op.memo.clear()
    return RegistrationHandle(undo, f"write observer {getattr(before, '__qualname__', before)!r}")


def before_write(t) -> None:
    """Run what must run before ``t``'s storage is written outside an op, or replaced (``x.data =
    y``, an optimizer's multi-tensor loop): every observer watching something."""
    if _observers:             # the common case, no observer: one truth test, as cheap as no call
        for before, watched in _observers:
            if watched:
                before(t)


def guard_writes(op, metas: tuple, fn: Callable) -> Callable:
    """``fn`` (the kernel an entry of ``op`` calls for arguments ``metas``), wrapped to run the
    observers on each tensor it writes, when one is registered and the schema marks one written
    (not a kernel marked ``runs_write_observers``: it runs them itself, where it writes)."""
    if not _observers or getattr(getattr(fn, "__wrapped__", fn), "runs_write_observers", False):
        return fn
    observers = tuple(_observers)
    written = [(i, m.kind == "list") for i, (a, m) in enumerate(zip(op.schema.arguments, metas))
               if a.is_mutable and m is not None and m.kind in ("tensor", "list")]
    if not written:
        return fn

    def guarded(*args):
        for before, watched in observers:
            if watched:
                for i, is_list in written:
                    for t in (args[i] if is_list else (args[i],)):
                        before(t)
        return fn(*args)
    guarded.__wrapped__ = fn
    return guarded
