"""dtypes and PyTorch's type promotion.

dtypes are singleton objects (``dj.float32``), named as in the Python array
API standard, each tied to the NumPy dtype that stores it.  Promotion follows
PyTorch's ``result_type``: categories bool < integer < floating < complex;
dimensioned tensors first, then zero-dim tensors, then Python scalars, where
a lower tier only matters when it is of a higher category.  One deviation:
there is no complex32, so float16 meeting a complex value gives complex64.

bfloat16 has no NumPy dtype (``ml_dtypes`` would give it one; it is not a
dependency): it is stored as its 16-bit words in a one-field structured dtype
(``BF16_STORAGE``), distinct from uint16 so that an array still says what it
holds, and every value conversion goes through ``bfloat16.py``.  It promotes
as PyTorch's: with float16 to float32, with a wider float to that float.
"""

from __future__ import annotations

import numpy as np

from .errors import DTypeError

__all__ = [
    "DType", "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128", "bfloat16", "ALL_DTYPES", "BF16_STORAGE",
    "promote_types", "result_type", "can_cast", "finfo", "iinfo", "as_dtype", "get_default_dtype", "default_complex_dtype", "from_numpy_dtype",
]

# category rank: the order PyTorch's promotion walks
BOOL, INT, FLOAT, COMPLEX = 0, 1, 2, 3

# bfloat16's storage: its bits as a uint16 field of a structured dtype, which no NumPy dtype
# equals, so ``from_numpy_dtype`` tells it from uint16; kernels read it through a uint16 view
BF16_STORAGE = np.dtype([("bfloat16", "<u2")])


class DType:
    """A tensor element type.

    >>> import dispatch_jit as dj
    >>> dj.float32, dj.float32.itemsize, dj.float32.is_floating_point
    (dispatch_jit.float32, 4, True)
    """

    __slots__ = ("name", "np", "index", "category", "itemsize", "is_signed")

    def __init__(self, name: str, np_dtype, index: int, category: int):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.index = index
        self.category = category
        self.itemsize = self.np.itemsize
        self.is_signed = category != BOOL and not name.startswith("uint")

    @property
    def is_floating_point(self) -> bool:
        return self.category == FLOAT

    @property
    def is_complex(self) -> bool:
        return self.category == COMPLEX

    @property
    def is_integral(self) -> bool:
        return self.category == INT

    def __repr__(self) -> str:
        return f"dispatch_jit.{self.name}"

    def __reduce__(self):
        return (as_dtype, (self.name,))


_SPECS = [
    ("bool", np.bool_, BOOL), ("int8", np.int8, INT), ("int16", np.int16, INT), ("int32", np.int32, INT),
    ("int64", np.int64, INT), ("uint8", np.uint8, INT), ("uint16", np.uint16, INT), ("uint32", np.uint32, INT),
    ("uint64", np.uint64, INT), ("float16", np.float16, FLOAT), ("float32", np.float32, FLOAT),
    ("float64", np.float64, FLOAT), ("complex64", np.complex64, COMPLEX), ("complex128", np.complex128, COMPLEX),
    ("bfloat16", BF16_STORAGE, FLOAT),
]
ALL_DTYPES: tuple[DType, ...] = tuple(DType(n, d, i, c) for i, (n, d, c) in enumerate(_SPECS))
(bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
 float16, float32, float64, complex64, complex128, bfloat16) = ALL_DTYPES

BY_NAME = {d.name: d for d in ALL_DTYPES}
BY_NP = {d.np: d for d in ALL_DTYPES}
# Also keyed by the NumPy scalar type (np.float32), which users pass as often as np.dtype objects
# (not bfloat16's: its storage's scalar type is np.void, which stands for no number type).
BY_NP_TYPE = {d.np.type: d for d in ALL_DTYPES if d is not bfloat16}
_ALIASES = {"float": float32, "double": float64, "half": float16, "long": int64, "int": int32,
            "cfloat": complex64, "cdouble": complex128}
_PY_TYPES = {bool: bool_, int: int64, float: float32, complex: complex64}

_default_dtype = float32
_default_complex = complex64     # follows _default_dtype: complex128 when the default is float64


def get_default_dtype() -> DType:
    """The dtype a Python float becomes (float32, as in PyTorch, until set_default_dtype).

    >>> import dispatch_jit as dj
    >>> dj.get_default_dtype()
    dispatch_jit.float32
    """
    return _default_dtype


def default_complex_dtype() -> DType:
    """The dtype a Python complex becomes: complex64, or complex128 under a float64 default."""
    return _default_complex


def _set_default_dtype(d: DType) -> None:
    """Engine-internal: dispatch_jit/defaults.py's set_default_dtype, which also drops the
    dispatcher's memo (the kernels resolved for Python floats depend on it)."""
    global _default_dtype, _default_complex
    _default_dtype = d
    _default_complex = complex128 if d is float64 else complex64


def from_numpy_dtype(npdt) -> DType:
    try:
        return BY_NP[np.dtype(npdt)]
    except (KeyError, TypeError):
        raise DTypeError(f"NumPy dtype {npdt!r} has no dispatch_jit equivalent; "
                         f"supported: {', '.join(d.name for d in ALL_DTYPES)}") from None


def as_dtype(d) -> DType:
    """Accept a DType, its name, a NumPy dtype or scalar type, or a Python type."""
    if isinstance(d, DType):
        return d
    if isinstance(d, str):
        found = BY_NAME.get(d) or _ALIASES.get(d)
        if found is not None:
            return found
    elif d in _PY_TYPES:
        return _PY_TYPES[d]
    elif d in BY_NP_TYPE:
        return BY_NP_TYPE[d]
    else:
        try:
            return BY_NP[np.dtype(d)]
        except (TypeError, KeyError):
            pass
    raise DTypeError(f"not a dtype: {d!r}; use one of {', '.join(d.name for d in ALL_DTYPES)} "
                     f"(e.g. dj.float32)")


def _complex_of(d: DType) -> DType:
    return complex128 if d is float64 else complex64


def promote_types(a, b) -> DType:
    """The smallest dtype both ``a`` and ``b`` convert to, by PyTorch's rules.

    >>> import dispatch_jit as dj
    >>> dj.promote_types(dj.int64, dj.float32), dj.promote_types(dj.uint8, dj.int8)
    (dispatch_jit.float32, dispatch_jit.int16)
    """
    a, b = as_dtype(a), as_dtype(b)
    return _PROMOTE[a.index][b.index]


def _promote_slow(a: DType, b: DType) -> DType:
    if a is b:
        return a
    if bfloat16 in (a, b) and a.category == b.category == FLOAT:
        other = b if a is bfloat16 else a
        return float32 if other is float16 else other
    if a.category != b.category:
        hi, lo = (a, b) if a.category > b.category else (b, a)
        if hi.category == COMPLEX and lo.category == FLOAT and lo.itemsize == 8:
            return complex128
        return hi
    if a.category == INT and {a.is_signed, b.is_signed} == {True, False}:
        u, s = (a, b) if not a.is_signed else (b, a)
        if u is uint64 or (u.itemsize >= s.itemsize and u.itemsize == 8):
            raise DTypeError(f"cannot promote {a.name} and {b.name}: no signed integer type holds both; "
                             f"cast one of them first (e.g. .to(dj.int64))")
    return BY_NP[np.promote_types(a.np, b.np)]


def _table():
    rows = []
    for a in ALL_DTYPES:
        row = []
        for b in ALL_DTYPES:
            try:
                row.append(_promote_slow(a, b))
            except DTypeError:
                row.append(None)
        rows.append(row)
    return rows


_PROMOTE_RAW = _table()


class _PromoteRow:
    __slots__ = ("a", "row")

    def __init__(self, a, row):
        self.a, self.row = a, row

    def __getitem__(self, j):
        r = self.row[j]
        if r is None:
            _promote_slow(self.a, ALL_DTYPES[j])  # raises the explanatory error
        return r


_PROMOTE = [_PromoteRow(a, r) for a, r in zip(ALL_DTYPES, _PROMOTE_RAW)]


def _combine_categories(higher: DType | None, lower: DType | None) -> DType | None:
    # PyTorch's combine_categories (ATen/native/TypeProperties.cpp)
    if higher is None:
        return lower
    if higher.category == COMPLEX:
        return higher
    if lower is not None and lower.category == COMPLEX:
        return _complex_of(higher) if higher.category == FLOAT else lower
    if higher.category == FLOAT:
        return higher
    if lower is not None and (higher is bool_ or lower.category == FLOAT):
        return promote_types(higher, lower)
    return higher


def scalar_dtype(x) -> DType:
    """The dtype a Python scalar takes part in promotion as."""
    t = type(x)
    if t in _PY_TYPES:
        return _default_dtype if t is float else _default_complex if t is complex else _PY_TYPES[t]
    if isinstance(x, np.generic):
        return from_numpy_dtype(x.dtype)
    for base, d in ((bool, bool_), (int, int64), (float, _default_dtype), (complex, _default_complex)):
        if isinstance(x, base):
            return d
    raise DTypeError(f"expected a tensor or a Python number, got {type(x).__name__}: {x!r}")


def result_type(*args) -> DType:
    """The dtype of an elementwise op on ``args`` (tensors, dtypes, Python numbers).

    >>> import dispatch_jit as dj
    >>> dj.result_type(dj.tensor([1, 2]), 2.5)            # int tensor, float scalar
    dispatch_jit.float32
    >>> dj.result_type(dj.tensor([1.0], dtype=dj.float16), dj.tensor(1.0, dtype=dj.float64))
    dispatch_jit.float16
    """
    dim = zero = wrapped = None
    for x in args:
        d = getattr(x, "dtype", None)
        if isinstance(d, DType):
            if x.ndim > 0:
                dim = d if dim is None else promote_types(dim, d)
            else:
                zero = d if zero is None else promote_types(zero, d)
        elif isinstance(x, DType):
            dim = x if dim is None else promote_types(dim, x)
        else:
            s = scalar_dtype(x)
            # NumPy scalars carry a dtype of their own and count as zero-dim tensors.
            if isinstance(x, np.generic):
                zero = s if zero is None else promote_types(zero, s)
            else:
                wrapped = s if wrapped is None else promote_types(wrapped, s)
    out = _combine_categories(dim, _combine_categories(zero, wrapped))
    if out is None:
        raise DTypeError("result_type() needs at least one tensor, dtype or number")
    return out


def can_cast(from_, to) -> bool:
    """Whether a value of dtype ``from_`` may be stored into ``to`` without a category downgrade.

    >>> import dispatch_jit as dj
    >>> dj.can_cast(dj.int32, dj.float32), dj.can_cast(dj.float32, dj.int32)
    (True, False)
    """
    f, t = as_dtype(from_), as_dtype(to)
    if f.category > t.category:
        return False
    # bool is its own category: only bool may be stored into bool
    return not (t is bool_ and f is not bool_)


class finfo:
    """Machine limits of a floating point dtype, as ``torch.finfo`` (of a complex dtype: of its
    real part; without an argument: of the default dtype).

    >>> import dispatch_jit as dj
    >>> f = dj.finfo(dj.bfloat16)
    >>> f.bits, f.eps, f.max, f.tiny
    (16, 0.0078125, 3.3895313892515355e+38, 1.1754943508222875e-38)
    """

    __slots__ = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")

    def __init__(self, type=None):  # noqa: A002  (torch's parameter name)
        d = _default_dtype if type is None else as_dtype(type)
        if d.category not in (FLOAT, COMPLEX):
            raise DTypeError(f"torch.finfo() requires a floating point input type, got {d.name}; "
                             f"use dj.iinfo for integer types")
        d = {complex64: float32, complex128: float64}.get(d, d)
        if d is bfloat16:
            # the largest bfloat16 is 0x7F7F: float32's exponent range, 8 significant bits
            self.bits, self.eps, self.max, self.tiny, self.resolution = 16, 2.0 ** -7, 3.3895313892515355e+38, \
                2.0 ** -126, 0.01
        else:
            f = np.finfo(d.np)
            self.bits, self.eps, self.max = int(f.bits), float(f.eps), float(f.max)
            self.tiny, self.resolution = float(f.smallest_normal), float(str(f.resolution))
        self.min, self.smallest_normal, self.dtype = -self.max, self.tiny, d.name

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.tiny:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Machine limits of an integer dtype, as ``torch.iinfo``.

    >>> import dispatch_jit as dj
    >>> dj.iinfo(dj.int8).min, dj.iinfo(dj.int8).max
    (-128, 127)
    """

    __slots__ = ("bits", "max", "min", "dtype")

    def __init__(self, type):  # noqa: A002
        d = as_dtype(type)
        if d.category not in (BOOL, INT):
            raise DTypeError(f"torch.iinfo() requires an integer input type, got {d.name}; use dj.finfo for "
                             f"floating point types")
        i = np.iinfo(np.uint8 if d is bool_ else d.np)
        self.bits, self.max, self.min, self.dtype = int(i.bits), int(i.max), int(i.min), d.name

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
