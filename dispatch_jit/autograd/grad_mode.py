"""Grad mode: whether ops record the autograd graph, per thread.

Grad mode is not a flag the kernels test: turning it off adds the autograd
keys to this thread's dispatch exclude set, so calls resolve (and memoize)
straight to the backend kernels and pay nothing for autograd, exactly as
PyTorch's ``AutoGradMode`` does through its TLS exclude set.
"""

from __future__ import annotations

import functools

from ..dispatcher import tls
from ..keys import AUTOGRAD_BITS

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled", "plain_no_grad"]


def is_grad_enabled() -> bool:
    return not (tls.exclude & AUTOGRAD_BITS)


def plain_no_grad() -> bool:
    """Grad mode is off and nothing else watches ops in this thread: no key included (no
    dispatch mode, tracer, autocast), no dispatch trace printing.  A backward formula may then
    compute a value with NumPy instead of dispatching ops that nobody records or sees."""
    return tls.include == 0 and tls.exclude & AUTOGRAD_BITS == AUTOGRAD_BITS and not tls.trace


def _set(enabled: bool) -> None:
    state = tls
    key = (state.k, enabled)
    new = _SWITCHED.get(key)
    if new is None:
        state.exclude = (state.exclude & ~AUTOGRAD_BITS) | (0 if enabled else AUTOGRAD_BITS)
        state.update()
        _SWITCHED[key] = (state.exclude, state.k)
    else:
        state.exclude, state.k = new


# (state id, enabled) -> (exclude set, state id) after _set(enabled): a state id stands for one
# (include, exclude, trace), so the switch is a function of it, computed once (every backward
# switches twice, every no_grad block too)
_SWITCHED: dict = {}


class _GradModeContext:
    """Context manager and decorator."""

    enabled: bool

    def __enter__(self):
        self.prev = is_grad_enabled()
        _set(self.enabled)
        return self

    def __exit__(self, *exc):
        _set(self.prev)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__() if not isinstance(self, set_grad_enabled) else set_grad_enabled(self.enabled):
                return fn(*args, **kwargs)
        return wrapper


class _NoArgGradModeContext(_GradModeContext):
    """``no_grad``/``enable_grad``: also usable bare as a decorator
    (``@dj.no_grad`` as well as ``@dj.no_grad()``), as in PyTorch."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_NoArgGradModeContext):
    """Ops inside do not record gradients.

    >>> import dispatch_jit as dj
    >>> w = dj.tensor([1.0], requires_grad=True)
    >>> with dj.no_grad():
    ...     y = w * 2
    >>> y.requires_grad
    False
    """

    enabled = False


class enable_grad(_NoArgGradModeContext):
    """Re-enable gradient recording inside a ``no_grad`` region."""

    enabled = True


class inference_mode(_GradModeContext):
    """``inference_mode()``: no gradient recording inside, as ``no_grad`` (dispatch_jit has no
    separate inference tensors); ``inference_mode(False)`` records.  A context manager and a
    decorator, bare or called, as PyTorch's.

    >>> import dispatch_jit as dj
    >>> w = dj.tensor([1.0], requires_grad=True)
    >>> @dj.inference_mode
    ... def f(x):
    ...     return x * 2
    >>> f(w).requires_grad, dj.is_grad_enabled()
    (False, True)
    """

    def __new__(cls, mode=True):
        if callable(mode):      # @dj.inference_mode, no parentheses
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True):
        self.enabled = not mode

    def __call__(self, fn):
        mode = not self.enabled

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)
        return wrapper


class set_grad_enabled(_GradModeContext):
    """``set_grad_enabled(False)`` sets grad mode now (like PyTorch) and, used
    as a context manager, restores the previous mode on exit."""

    def __init__(self, mode: bool):
        self.enabled = bool(mode)
        self.prev = is_grad_enabled()
        _set(self.enabled)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _set(self.prev)

    def __call__(self, fn):
        # used as a decorator: the mode applies inside calls only, not from decoration on
        _set(self.prev)
        return super().__call__(fn)
