"""The standard's creation functions, over dispatch_jit's: the standard's parameter names
(``stop``, ``num``, ``endpoint``, ``k``, ``shape``), its default dtypes for Python scalars
(bool, int64, and dispatch_jit's default floating dtype and its complex twin: float32 and complex64
until ``dj.set_default_dtype``), and ``copy=`` as the standard means it (False: share memory or
raise)."""

from __future__ import annotations

import builtins
import math

import numpy as np

from dispatch_jit import creation
from dispatch_jit.dtypes import BOOL, COMPLEX, FLOAT, as_dtype, bool_, default_complex_dtype, get_default_dtype, int64
from dispatch_jit.errors import DTypeError, InvalidArgumentError, ValueOverflowError
from dispatch_jit.ops import entries
from dispatch_jit.tensor import Tensor

from ._dtypes import result_type

__all__ = ["arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like", "linspace",
           "meshgrid", "ones", "ones_like", "tril", "triu", "zeros", "zeros_like"]

A = entries("aten")


def _scalar_dtype(v):
    if isinstance(v, builtins.bool):
        return bool_
    if isinstance(v, int):
        return int64
    if isinstance(v, float):
        return get_default_dtype()
    if isinstance(v, complex):
        return default_complex_dtype()
    raise DTypeError(f"expected a Python scalar, got {type(v).__name__}: {v!r}")


def _shape(shape) -> tuple:
    return (shape,) if isinstance(shape, int) else tuple(shape)


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """An array from ``obj`` (an array, a NumPy array or buffer, a Python scalar or nested
    sequence).  ``copy=None`` shares memory where it can, ``True`` always copies, ``False``
    never does (a ValueError where it would have to).

    >>> from dispatch_jit import array_api as xp
    >>> x = xp.asarray([1, 2]); xp.asarray(x, dtype=x.dtype, copy=False) is x
    True
    """
    dt = as_dtype(dtype) if dtype is not None else None
    if isinstance(obj, Tensor):
        if device is not None and obj.device != device:
            if copy is False:
                raise InvalidArgumentError("asarray(copy=False): the array is on another device; a copy is needed")
            obj = obj.to(device=device)
        if dt is not None and dt is not obj.dtype:
            if copy is False:
                raise InvalidArgumentError(f"asarray(copy=False): casting {obj.dtype.name} to {dt.name} needs a copy")
            return A.to(obj, dt, True)
        return A.clone(obj) if copy else obj
    if copy is False and not hasattr(obj, "__array_interface__") and not isinstance(obj, np.ndarray) \
            and not hasattr(obj, "__dlpack__") and not hasattr(obj, "__buffer__"):
        raise InvalidArgumentError(f"asarray(copy=False): a {type(obj).__name__} has no memory to share; pass copy=None")
    if dt is None and not isinstance(obj, (np.ndarray, np.generic)) and not hasattr(obj, "__array_interface__"):
        dt = _infer(obj)
    if isinstance(obj, (builtins.bool, int)) and dt is not None and dt.category != BOOL and dt.category < FLOAT:
        info = np.iinfo(dt.np)
        if not info.min <= obj <= info.max:
            raise ValueOverflowError(f"asarray: {obj} does not fit in {dt.name} [{info.min}, {info.max}]")
    if not isinstance(obj, (np.ndarray, np.generic)) and hasattr(obj, "__buffer__") and \
            not hasattr(obj, "__array_interface__"):
        obj = np.frombuffer(obj, dtype=np.uint8 if dt is None else dt.np)
    return creation.asarray(obj, dtype=dt, device=device, copy=copy)


def _infer(obj):
    """The dtype of nested Python scalars (and arrays) by the standard's kinds."""
    if isinstance(obj, (builtins.bool, int, float, complex)):
        return _scalar_dtype(obj)
    if isinstance(obj, (list, tuple)):
        kinds = [_infer(o) for o in obj]
        kinds = [k for k in kinds if k is not None]
        if not kinds:
            return None
        out = kinds[0]
        for k in kinds[1:]:
            out = max(out, k, key=lambda d: (d.category, d.itemsize))
        return out
    if isinstance(obj, Tensor):
        return obj.dtype
    return None


def _fill_dtype(value, dtype):
    return as_dtype(dtype) if dtype is not None else _scalar_dtype(value)


def empty(shape, *, dtype=None, device=None):
    return creation.empty(_shape(shape), dtype=dtype, device=device)


def zeros(shape, *, dtype=None, device=None):
    return creation.zeros(_shape(shape), dtype=dtype, device=device)


def ones(shape, *, dtype=None, device=None):
    return creation.ones(_shape(shape), dtype=dtype, device=device)


def full(shape, fill_value, *, dtype=None, device=None):
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    return creation.full(_shape(shape), fill_value, dtype=_fill_dtype(fill_value, dtype), device=device)


def _like(x, dtype, device):
    return (dtype if dtype is not None else x.dtype), (device if device is not None else x.device)


def empty_like(x, /, *, dtype=None, device=None):
    dt, dev = _like(x, dtype, device)
    return creation.empty(tuple(x.shape), dtype=dt, device=dev)


def zeros_like(x, /, *, dtype=None, device=None):
    dt, dev = _like(x, dtype, device)
    return creation.zeros(tuple(x.shape), dtype=dt, device=dev)


def ones_like(x, /, *, dtype=None, device=None):
    dt, dev = _like(x, dtype, device)
    return creation.ones(tuple(x.shape), dtype=dt, device=dev)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    dt, dev = _like(x, dtype, device)
    return creation.full(tuple(x.shape), fill_value, dtype=dt, device=dev)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    """``[start, stop)`` in steps of ``step``; ints give int64, floats the default floating dtype.

    >>> from dispatch_jit import array_api as xp
    >>> xp.arange(1, 7, 2)
    tensor([1, 3, 5])
    """
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise InvalidArgumentError("arange: step must be nonzero")
    is_float = any(isinstance(v, float) for v in (start, stop, step))
    dt = as_dtype(dtype) if dtype is not None else (get_default_dtype() if is_float else int64)
    n = builtins.max(0, math.ceil((stop - start) / step))
    # computed in float64 or int64 and cast once: the count is the standard's ceil((stop-start)/step)
    a = (start + step * np.arange(n, dtype=np.float64 if is_float or dt.category >= FLOAT else np.int64))
    return creation.asarray(a.astype(dt.np), device=device)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    if not isinstance(num, int) or num < 0:
        raise InvalidArgumentError(f"linspace: num must be a non-negative int, got {num!r}")
    cplx = any(isinstance(v, complex) for v in (start, stop))
    dt = as_dtype(dtype) if dtype is not None else (default_complex_dtype() if cplx else get_default_dtype())
    if dt.category not in (FLOAT, COMPLEX):
        raise DTypeError(f"linspace: dtype must be floating or complex, got {dt.name}")
    a = np.linspace(start, stop, num, endpoint=endpoint, dtype=np.complex128 if dt.category == COMPLEX else np.float64)
    return creation.asarray(a.astype(dt.np), device=device)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    dt = as_dtype(dtype) if dtype is not None else get_default_dtype()
    return creation.asarray(np.eye(n_rows, n_cols, k, dtype=dt.np), device=device)


def meshgrid(*arrays, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise InvalidArgumentError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    if not arrays:
        return ()
    dt = result_type(*arrays)
    arrays = [a if a.dtype is dt else A.to(a, dt, False) for a in arrays]
    shape = [a.shape[0] for a in arrays]
    if indexing == "xy" and len(arrays) > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        j = (1 if i == 0 else 0 if i == 1 else i) if indexing == "xy" and len(arrays) > 1 else i
        view = [1] * len(arrays)
        view[j] = a.shape[0]
        out.append(A.clone(A.expand(A.reshape(a, view), shape)))
    return tuple(out)


def tril(x, /, *, k=0):
    return A.tril(x, k)


def triu(x, /, *, k=0):
    return A.triu(x, k)


def from_dlpack(x, /, *, device=None, copy=None):
    """An array sharing ``x``'s memory through the DLPack protocol (see dispatch_jit.dlpack)."""
    from dispatch_jit.dlpack import from_dlpack as _from
    return _from(x, device=device, copy=copy)
