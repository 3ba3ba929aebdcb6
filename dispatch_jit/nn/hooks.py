"""What a ``Module`` keeps that a compiled call depends on: its registries and its forward hooks.

A module's ``_parameters``, ``_buffers`` and ``_modules`` are ``Registry`` dicts: an
ordered dict whose every change (``add_module``, an assignment, ``del``, or a write
straight into the dict: ``m._modules["fc"] = ...``) bumps the autograd hooks' epoch
(autograd/hooks.py), so that a compiled function whose trace walked the module
looks at it again (``Sequential.append`` after the first call retraces).

Forward hooks run as PyTorch's (``Module.register_forward_pre_hook`` and
``register_forward_hook``): ``hook(module, args)`` before ``forward``, returning
None or the new positional arguments (a single value is wrapped in a tuple);
``hook(module, args, output)`` after it, returning None or the new output.
"""

from __future__ import annotations

from collections import OrderedDict

from ..autograd.hooks import RemovableHandle, bump_epoch
from ..errors import ArgumentTypeError

__all__ = ["Registry", "add_hook", "call_with_hooks"]


class Registry(OrderedDict):
    """An ordered dict that bumps the epoch on every change (reads cost what a dict's do)."""

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        bump_epoch()

    def __delitem__(self, key):
        super().__delitem__(key)
        bump_epoch()

    def pop(self, *args):
        bump_epoch()
        return super().pop(*args)

    def popitem(self, last: bool = True):
        bump_epoch()
        return super().popitem(last)

    def clear(self):
        super().clear()
        bump_epoch()

    def update(self, *args, **kwargs):
        super().update(*args, **kwargs)
        bump_epoch()

    def setdefault(self, key, default=None):
        bump_epoch()
        return super().setdefault(key, default)

    def move_to_end(self, key, last: bool = True):
        super().move_to_end(key, last)
        bump_epoch()

    def __ior__(self, other):
        self.update(other)
        return self


def add_hook(module, attr: str, hook, what: str) -> RemovableHandle:
    """Add ``hook`` to the module's hook dict ``attr`` (made on first use: a module without hooks
    keeps the class's empty default, and its ``__call__`` one truth test); a handle removes it.
    ``what``: the registering method, for the error."""
    if not callable(hook):
        raise ArgumentTypeError(f"{what}: the hook must be callable, got a {type(hook).__name__}")
    d = module.__dict__
    hooks = d.get(attr)
    if hooks is None:
        hooks = d[attr] = {}
    key = object()
    hooks[key] = hook
    bump_epoch()
    return RemovableHandle(lambda: hooks.pop(key, None))


def call_with_hooks(module, args: tuple, kwargs: dict):
    """``module(*args, **kwargs)`` with its forward pre-hooks and forward hooks, as PyTorch's."""
    for hook in list(module._forward_pre_hooks.values()):
        r = hook(module, args)
        if r is not None:
            args = r if isinstance(r, tuple) else (r,)
    out = module.forward(*args, **kwargs)
    for hook in list(module._forward_hooks.values()):
        r = hook(module, args, out)
        if r is not None:
            out = r
    return out
