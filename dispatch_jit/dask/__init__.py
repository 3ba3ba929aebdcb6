"""The Dask backend: tensors whose storage is a Dask array, on ``DispatchKey.PrivateUse1``.

Built as an out-of-tree backend would be: it renames PrivateUse1 to "dask"
(``dj.utils.rename_privateuse1_backend``), registers its kernels through the
public ``Library("aten", "IMPL")`` at that key, and gives the engine its
device module (``from_host``, ``to_device``).  It claims the key on first
use (``dj.from_dask``, ``device="dask"``, ``enable()``), not at import, so
PrivateUse1 stays free for other backends and users' boxed fallbacks in a
process that never uses Dask.  Dask itself is imported only then.

Scheduling, data movement, spilling and retries are Dask's: use any of its
schedulers (threads, processes, ``dask.distributed``).
"""

from __future__ import annotations

import numpy as np

from ..devices import register_lazy_device_module
from ..errors import ArgumentTypeError, InvalidArgumentError, RegistrationError
from ..keys import privateuse1_backend_name, rename_privateuse1_backend
from ..tensor import Tensor
from .tensor import DaskTensor, is_dask_array, wrap_dask

__all__ = ["enable", "from_dask", "from_host", "to_device", "DaskTensor", "is_enabled"]

NAME = "dask"
_STATE: dict = {}
# device="dask" anywhere enables the backend on first use (nothing is imported before)
register_lazy_device_module(NAME, __name__)


def enable() -> None:
    """Claim PrivateUse1 for Dask and register its kernels (once; later calls do nothing)."""
    if _STATE.get("lib") is not None:
        return
    try:
        import dask.array  # noqa: F401
    except ImportError as e:
        raise ImportError("the Dask backend needs dask: pip install 'dispatch_jit[dask]' "
                          "(dask[array] and distributed)") from e
    if privateuse1_backend_name() not in ("privateuseone", NAME):
        raise RegistrationError(f"the Dask backend needs DispatchKey.PrivateUse1, but it is already the "
                           f"{privateuse1_backend_name()!r} backend")
    from ..devices import register_device_module
    from ..library import Library
    from .kernels import kernels
    rename_privateuse1_backend(NAME)
    lib = Library("aten", "IMPL", "PrivateUse1")
    for name, fn in kernels().items():
        lib.impl(name.split("::", 1)[1], fn)
    import sys
    register_device_module(NAME, sys.modules[__name__])
    from ..compiler.backends import register_backend_compiler
    from ..keys import DispatchKey
    from .compiled import build_entry
    register_backend_compiler(DispatchKey.PrivateUse1, build_entry)
    _STATE["lib"] = lib


def is_enabled() -> bool:
    return _STATE.get("lib") is not None


def from_dask(arr) -> DaskTensor:
    """A tensor over a Dask array, without computing it.

    >>> import dispatch_jit as dj, dask.array as da
    >>> t = dj.from_dask(da.ones((4, 6), chunks=(2, 3), dtype="float32"))
    >>> (t * 2 + 1).sum().item()
    72.0
    >>> t.device, dj.dispatch_keys(t)
    (device(type='dask'), DispatchKeySet(PrivateUse1))
    """
    enable()
    if not is_dask_array(arr):
        raise ArgumentTypeError(f"from_dask expects a dask.array.Array, got {type(arr).__name__}; for host data use "
                        f"dj.tensor(...).to('dask', chunks=...)")
    return wrap_dask(arr)


def _checked_chunks(chunks, shape: tuple, dtype) -> tuple:
    """``chunks=`` as Dask's explicit block sizes per dimension, or the error that names it: Dask
    itself takes -5 as a block of size -5 (a tensor of negative shape) and divides by 0."""
    from dask.array.core import normalize_chunks

    def bad(why: str) -> InvalidArgumentError:
        return InvalidArgumentError(
            f"dask: chunks={chunks!r} {why} for shape {tuple(shape)}; give a positive block size, -1 or None "
            f"(a whole dimension), 'auto', one of these per dimension, or each dimension's block sizes")
    if isinstance(chunks, (bool, np.bool_)):
        raise bad("is a bool")
    per_dim = chunks.values() if isinstance(chunks, dict) else chunks if (
        isinstance(chunks, (tuple, list)) and len(chunks) == len(shape)) else [chunks]
    for c in per_dim:
        if isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_)) and c != -1 and c < 1:
            raise bad(f"asks for blocks of size {c}")
    try:
        blocks = normalize_chunks(chunks, tuple(shape), dtype=np.dtype(dtype))
    except (ValueError, TypeError, ZeroDivisionError) as e:
        raise bad(f"is refused ({type(e).__name__}: {str(e).splitlines()[0]})") from None
    if any(b < 0 for dim in blocks for b in dim) or tuple(sum(dim) for dim in blocks) != tuple(shape):
        raise bad(f"gives blocks {blocks}")
    return blocks


def from_host(a: np.ndarray, chunks="auto") -> DaskTensor:
    """The device module's placement: host array ``a`` in chunks (``dask.array.from_array``)."""
    import dask.array as da
    enable()
    a = np.asarray(a)
    return wrap_dask(da.from_array(a, chunks=_checked_chunks(chunks, a.shape, a.dtype)))


def to_device(t: Tensor, device, chunks="auto", **compute_kwargs) -> Tensor:
    """``t.to("dask", chunks=...)`` and ``t.to("cpu")`` (which computes; ``compute_kwargs`` go to Dask)."""
    if device.type == NAME:
        if isinstance(t, DaskTensor):
            return t if chunks == "auto" else wrap_dask(t._data.rechunk(_checked_chunks(chunks, t.shape, t._data.dtype)))
        return from_host(t.numpy(), chunks=chunks)
    if not isinstance(t, DaskTensor):
        raise ArgumentTypeError(f"to({device}): {type(t).__name__} is not a Dask tensor")
    if chunks != "auto":
        raise ArgumentTypeError(f"to({device}): chunks= applies only to the 'dask' device")
    out = t.compute(**compute_kwargs)
    return out if device.type == "cpu" else out.to(device)
