"""``set_default_dtype``: the dtype Python floats and float creation functions take.

PyTorch's rule: the default is a floating dtype (float16, float32 or float64); Python complex
numbers follow it (complex128 under float64).  The dispatcher's memo keys on a Python float's
class, not on what it promotes to, so a change drops every op's memo; dj.compile's cache keys
on the default already (compiler/api.py).
"""

from __future__ import annotations

from .dtypes import _set_default_dtype, as_dtype, float16, float32, float64
from .errors import DTypeError
from .registry import all_operators

__all__ = ["set_default_dtype"]

_ALLOWED = (float16, float32, float64)


def set_default_dtype(d) -> None:
    """Make ``d`` (float16, float32 or float64) the default floating dtype, as
    ``torch.set_default_dtype``: ``dj.tensor([1.0])``, ``dj.zeros``, ``dj.rand``, ``dj.arange(0.5,
    ...)`` and Python floats in arithmetic with integer tensors take it.

    >>> import dispatch_jit as dj
    >>> dj.set_default_dtype(dj.float64)
    >>> dj.tensor([1.5]).dtype, (dj.tensor([1, 2]) * 0.5).dtype
    (dispatch_jit.float64, dispatch_jit.float64)
    >>> dj.set_default_dtype(dj.float32)
    """
    dt = as_dtype(d)
    if dt not in _ALLOWED:
        raise DTypeError(f"set_default_dtype: only floating-point types are supported as the default type "
                         f"(float16, float32, float64), got {dt.name}")
    _set_default_dtype(dt)
    for op in all_operators():
        op.memo.clear()
