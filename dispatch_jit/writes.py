"""Writes into tensors that compiled mode must see before they happen.

Compiled mode (compiler/lazy/watch.py) must see every write into a tensor before it happens: a pending
graph of any thread that reads the tensor's storage runs first.  Its hook wraps, on the dispatcher's
miss path, the memo entries of the call signatures that pass a tensor to an argument the schema marks
written (in-place ops, out=); every other entry, ``out=None`` calls included, is unchanged.  Writes
that are not op calls (``x.data = y``, an optimizer's multi-tensor loop) call ``before_write``.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["set_write_guard", "before_write", "guard_writes"]

_WRITE_GUARD: list = [None]     # (before_write(tensor), watched: a container, empty when no graph reads)


def set_write_guard(before_write: Callable, watched) -> None:
    """Install compiled mode's hook: ``before_write(t)`` runs before a call writes into ``t``,
    whenever ``watched`` is not empty.  Memo entries resolved before it are dropped."""
    from .registry import all_operators
    _WRITE_GUARD[0] = (before_write, watched)
    for op in all_operators():
        op.memo.clear()


def before_write(t) -> None:
    """Run what must run before ``t``'s storage is written outside an op, or replaced (``x.data =
    y``, an optimizer's multi-tensor loop): every pending compiled-mode graph that reads it."""
    guard = _WRITE_GUARD[0]
    if guard is not None and guard[1]:
        guard[0](t)


def guard_writes(op, metas: tuple, fn: Callable) -> Callable:
    """``fn`` (the kernel an entry of ``op`` calls for arguments ``metas``), wrapped to call the
    hook on each tensor it writes, when a hook is installed and the schema marks one written."""
    guard = _WRITE_GUARD[0]
    if guard is None:
        return fn
    written = [(i, m.kind == "list") for i, (a, m) in enumerate(zip(op.schema.arguments, metas))
               if a.is_mutable and m is not None and m.kind in ("tensor", "list")]
    if not written:
        return fn
    before_write, watched = guard

    def guarded(*args):
        if watched:
            for i, is_list in written:
                for t in (args[i] if is_list else (args[i],)):
                    before_write(t)
        return fn(*args)
    guarded.__wrapped__ = fn
    return guarded
