"""Device conversions the engine's tensor types need, filled in by the op library.

Quantizing, dequantizing and dense -> CSR on a CUDA tensor run kernels that
live in kernels/ (the op library), which sits above the engine: the engine
never imports it.  Instead the op library registers those kernels here when
it is imported (the CONVERSIONS tables of kernels/quantized/ and
kernels/sparse/, in kernels/__init__.py's registration loop), as ATen
registers into the dispatcher, and the tensor types look them up by (name,
device type).
"""

from __future__ import annotations

from typing import Callable

__all__ = ["register_conversion", "conversion"]

_CONVERSIONS: dict[tuple[str, str], Callable] = {}


def register_conversion(name: str, device_type: str, fn: Callable) -> None:
    """Make ``fn`` the ``name`` conversion ("quantize", "dequantize", "dense_to_csr") on ``device_type``."""
    _CONVERSIONS[(name, device_type)] = fn


def conversion(name: str, device_type: str) -> Callable:
    fn = _CONVERSIONS.get((name, device_type))
    if fn is None:
        raise NotImplementedError(
            f"no {name!r} conversion is registered for device type {device_type!r}; "
            f"import dispatch_jit (it loads the op library, which registers them)")
    return fn
