"""Compiling for a backend that is not built in (``DispatchKey.PrivateUse1``).

A fused loop runs on NumPy arrays; a backend whose tensors hold something
else (the Dask backend: a graph over chunks) decides itself what a compiled
call means for its tensors.  It registers a *builder* for its key here; when
a compiled function misses on a signature with a tensor on that key, the
builder's entry (a callable ``entry(fn, args, kwargs, caps)``, cached like any
other) stands for the call instead of a trace.  Without a builder, such a
call runs eagerly, on the backend's own kernels, and ``explain`` says so.
"""

from __future__ import annotations

from typing import Callable

from ..errors import InvalidArgumentError
from ..keys import DispatchKey, key_bits
from ..signature import keyset_sig_bits

__all__ = ["register_backend_compiler", "backend_entry"]

_BUILDERS: dict[DispatchKey, Callable] = {}
_SIG_BITS = {DispatchKey.PrivateUse1: keyset_sig_bits(key_bits(DispatchKey.PrivateUse1))}


def register_backend_compiler(key: DispatchKey, builder: Callable) -> None:
    """``builder(compiled_function) -> entry`` for calls with a tensor on ``key`` (PrivateUse1)."""
    if key not in _SIG_BITS:
        raise InvalidArgumentError(f"register_backend_compiler: only {list(_SIG_BITS)} take a compiler, not {key!r}")
    _BUILDERS[key] = builder


def backend_entry(cf, tensors: list):
    """The entry a backend builds for this call of ``cf``, or None when no tensor is on such a key."""
    for key, bits in _SIG_BITS.items():
        if any(t._sig & bits for t in tensors):
            build = _BUILDERS.get(key)
            if build is None:
                from .run.cached import EagerEntry
                return EagerEntry(f"the {key.name} backend registered no compiler: its kernels run eagerly")
            return build(cf)
    return None
