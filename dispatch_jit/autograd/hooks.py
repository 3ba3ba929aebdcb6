"""Handles that undo a hook's registration, and the epoch that says a registration changed.

A hook registration returns a ``RemovableHandle`` whose ``remove()`` undoes it, as PyTorch's.

A compiled function (``dj.compile``) traces a call once and then runs its plan
without running the Python code again: a hook registered later, or a module added
to a container the call walked, would go unseen by that plan.  So every API that
changes such a thing bumps one process-wide counter, ``EPOCH``: a gradient hook on
a leaf tensor (registered or removed), a module's forward hooks, and any change to
a module's parameters, buffers or submodules (``nn/module.py``).  A compiled
function compares the counter with the value its entry was last checked at (one
integer comparison per call) and only when it differs walks again what the entry
depends on (compiler/structure.py).  A hook on a non-leaf tensor does not bump it:
that tensor's node is made by a call that runs eagerly, whose engine reads the
node's hooks when it runs.

>>> import dispatch_jit as dj
>>> w = dj.ones(2, requires_grad=True)
>>> handle = w.register_hook(lambda g: g * 0)
>>> (w * 3).sum().backward(); w.grad
tensor([0., 0.])
>>> handle.remove()
>>> w.grad = None; (w * 3).sum().backward(); w.grad
tensor([3., 3.])
"""

from __future__ import annotations

__all__ = ["EPOCH", "bump_epoch", "RemovableHandle"]

# a list, so that readers hold the list and see every bump; compared with != (two threads
# bumping at once may lose one increment, never both: the value still differs)
EPOCH = [0]


def bump_epoch() -> None:
    """Say that a hook or a module's registries changed (see the module docstring)."""
    EPOCH[0] += 1


class RemovableHandle:
    """What a hook registration returns: ``remove()`` unregisters the hook (once; a second
    call does nothing); as a context manager, the hook is removed on exit."""

    __slots__ = ("_undo",)

    def __init__(self, undo):
        self._undo = undo

    def remove(self) -> None:
        undo, self._undo = self._undo, None
        if undo is not None:
            undo()
            bump_epoch()

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()
