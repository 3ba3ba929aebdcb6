"""Python dispatch modes: interpose on every operator call, like TorchDispatchMode.

Entering a mode pushes it on this thread's mode stack and adds the Python key
to the thread-local include set, so every call resolves to the Python key's
backend fallback, which hands the call to the innermost mode's
``__dispatch__`` with that mode popped (so calling the op again inside runs
the next mode or the kernels below).

>>> import dispatch_jit as dj
>>> class Log(dj.DispatchMode):
...     def __dispatch__(self, op, types, args, kwargs):
...         print("saw", op.name())
...         return op(*args, **kwargs)
>>> with Log():
...     _ = dj.add(dj.tensor([1.0]), 1.0)
saw aten::add.Tensor
"""

from __future__ import annotations

from .dispatcher import tls
from .keys import DispatchKey, key_bits
from .registry import register_fallback

__all__ = ["DispatchMode"]

_PY_BIT = key_bits(DispatchKey.Python)


class DispatchMode:
    """Subclass and define ``__dispatch__(self, op, types, args, kwargs)``."""

    def __dispatch__(self, op, types, args, kwargs):
        return op(*args, **kwargs)

    def __enter__(self):
        tls.modes.append(self)
        tls.include |= _PY_BIT
        tls.update()
        return self

    def __exit__(self, *exc):
        tls.modes.remove(self)
        if not tls.modes:
            tls.include &= ~_PY_BIT
            tls.update()


def _python_key_fallback(op, keyset, args, kwargs):
    mode = tls.modes.pop()
    if not tls.modes:
        tls.include &= ~_PY_BIT
        tls.update()
    try:
        types = tuple({type(a) for a in args if hasattr(a, "_sig")})
        return mode.__dispatch__(op, types, args, kwargs)
    finally:
        tls.modes.append(mode)
        tls.include |= _PY_BIT
        tls.update()


_HANDLE = register_fallback(DispatchKey.Python, _python_key_fallback)
