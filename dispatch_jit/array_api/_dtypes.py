"""The standard's data types and data type functions: ``finfo``, ``iinfo``, ``isdtype``,
``astype``, ``can_cast``, ``result_type``, and the promotion rule every binary function of
the namespace applies before it calls the dispatcher.

The standard promotes by dtype alone; PyTorch (the top level of dispatch_jit) lets a
dimensioned tensor's dtype win over a zero-dim tensor's of the same category.  The namespace
casts both operands to the standard's common dtype first, so the same kernels give the
standard's answer.  Python scalars stay weak in both (an ``int`` with an int8 array is int8).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dispatch_jit.dtypes import (BOOL, COMPLEX, FLOAT, INT, DType, as_dtype, bool_, complex64,
                                 complex128, default_complex_dtype, float32, float64, get_default_dtype, int8,
                                 int16, int32, int64, promote_types, uint8, uint16, uint32, uint64)
from dispatch_jit.errors import DTypeError
from dispatch_jit.ops import entries
from dispatch_jit.tensor import Tensor

__all__ = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
           "complex64", "complex128", "finfo", "iinfo", "isdtype", "astype", "can_cast", "result_type",
           "DTYPES", "common", "common_dtype"]

bool = bool_  # noqa: A001  (the standard's name)
A = entries("aten")
# the standard's dtypes (float16 is dispatch_jit's own extra)
DTYPES = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64, complex64, complex128)

_KINDS = {
    "bool": lambda d: d.category == BOOL,
    "signed integer": lambda d: d.category == INT and d.is_signed,
    "unsigned integer": lambda d: d.category == INT and not d.is_signed,
    "integral": lambda d: d.category == INT,
    "real floating": lambda d: d.category == FLOAT,
    "complex floating": lambda d: d.category == COMPLEX,
    "numeric": lambda d: d.category != BOOL,
}


def isdtype(dtype, kind) -> bool:
    """Whether ``dtype`` is of ``kind``: a dtype, a kind name or a tuple of them.

    >>> from dispatch_jit import array_api as xp
    >>> xp.isdtype(xp.int8, "signed integer"), xp.isdtype(xp.float32, ("integral", xp.float32))
    (True, True)
    """
    if not isinstance(dtype, DType):
        raise DTypeError(f"isdtype: expected a dtype, got {dtype!r}")
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, DType):
        return dtype is kind
    if isinstance(kind, str) and kind in _KINDS:
        return _KINDS[kind](dtype)
    raise DTypeError(f"isdtype: kind must be a dtype, one of {sorted(_KINDS)} or a tuple of them; got {kind!r}")


@dataclass(frozen=True)
class finfo_object:
    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: DType


@dataclass(frozen=True)
class iinfo_object:
    bits: int
    max: int
    min: int
    dtype: DType


def _dtype_of(x) -> DType:
    return x.dtype if isinstance(x, Tensor) else as_dtype(x)


def finfo(type) -> finfo_object:  # noqa: A002  (the standard's parameter name)
    """Machine limits of a floating dtype (of a complex one: of its real part).

    >>> from dispatch_jit import array_api as xp
    >>> xp.finfo(xp.float32).bits, xp.finfo(xp.complex128).dtype
    (32, dispatch_jit.float64)
    """
    d = _dtype_of(type)
    if d.category not in (FLOAT, COMPLEX):
        raise DTypeError(f"finfo: expected a floating point or complex dtype, got {d.name}; use iinfo for integers")
    real = {complex64: float32, complex128: float64}.get(d, d)
    f = np.finfo(real.np)
    return finfo_object(int(f.bits), float(f.eps), float(f.max), float(f.min), float(f.smallest_normal), real)


def iinfo(type) -> iinfo_object:  # noqa: A002
    """Machine limits of an integer dtype.

    >>> from dispatch_jit import array_api as xp
    >>> xp.iinfo(xp.uint8).max
    255
    """
    d = _dtype_of(type)
    if d.category != INT:
        raise DTypeError(f"iinfo: expected an integer dtype, got {d.name}; use finfo for floating point")
    i = np.iinfo(d.np)
    return iinfo_object(int(i.bits), int(i.max), int(i.min), d)


def common_dtype(a: DType, b: DType) -> DType:
    """The standard's promotion of two dtypes (PyTorch's table agrees wherever the standard
    defines one; mixed kinds, which it leaves undefined, follow PyTorch)."""
    return a if a is b else promote_types(a, b)


def result_type(*arrays_and_dtypes) -> DType:
    """The dtype the standard's promotion gives ``arrays_and_dtypes`` (arrays, dtypes and
    Python scalars, which only count where they are of a higher kind).

    >>> from dispatch_jit import array_api as xp
    >>> xp.result_type(xp.asarray(0, dtype=xp.uint16), xp.uint8)
    dispatch_jit.uint16
    """
    out = None
    scalars = []
    for x in arrays_and_dtypes:
        if isinstance(x, (Tensor, DType)):
            d = _dtype_of(x)
            out = d if out is None else common_dtype(out, d)
        elif isinstance(x, (int, float, complex)):      # bool is an int
            scalars.append(x)
        else:
            out = _dtype_of(x) if out is None else common_dtype(out, _dtype_of(x))
    if out is None:
        raise DTypeError("result_type: at least one array or dtype is required (Python scalars alone have none)")
    for s in scalars:
        out = _scalar_kind(out, s)
    return out


def _scalar_kind(d: DType, s) -> DType:
    """A Python scalar meeting dtype ``d``: ``d`` unless the scalar is of a higher kind."""
    import builtins
    if isinstance(s, builtins.bool):
        return d
    if isinstance(s, int):
        return int64 if d.category == BOOL else d
    if isinstance(s, float):
        return d if d.category >= FLOAT else get_default_dtype()
    if d.category == COMPLEX:
        return d
    # a real floating array keeps its precision; an integral one takes the default's complex twin
    return complex128 if d is float64 else complex64 if d.category == FLOAT else default_complex_dtype()


def can_cast(from_, to, /) -> bool:
    """Whether the standard's promotion of ``from_`` and ``to`` is ``to`` (a cast that loses nothing
    by the promotion rules; mixed kinds only upwards: bool < int < float < complex)."""
    f, t = _dtype_of(from_), as_dtype(to)
    if f is t:
        return True
    if f.category > t.category or f.category == BOOL or (f.category == INT and t.category != INT):
        return False
    try:
        return promote_types(f, t) is t
    except DTypeError:
        return False


def astype(x, dtype, /, *, copy: bool = True, device=None):
    """``x`` as ``dtype`` (a new array unless ``copy=False`` and nothing changes).

    >>> from dispatch_jit import array_api as xp
    >>> xp.astype(xp.asarray([1.7, -2.5]), xp.int32)
    tensor([ 1, -2], dtype=dj.int32)
    """
    if device is not None:
        x = x.to(device=device)
    d = as_dtype(dtype)
    if d is x.dtype and not copy:
        return x
    return A.to(x, d, True)


def common(x1, x2):
    """Both operands of a binary function in the standard's common dtype (Python scalars as
    they are: weak, as in the standard)."""
    if isinstance(x1, Tensor) and isinstance(x2, Tensor):
        d1, d2 = x1._data.dtype, x2._data.dtype
        if d1 != d2:
            d = common_dtype(x1.dtype, x2.dtype)
            if x1.dtype is not d:
                x1 = A.to(x1, d, False)
            if x2.dtype is not d:
                x2 = A.to(x2, d, False)
    return x1, x2

