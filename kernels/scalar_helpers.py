"""Scalar helper functions used by the expressions in scalar_ops.py.

Plain Python functions: each backend compiles them for itself (``numba.njit``
on the CPU, a device function on CUDA), so one definition serves all.  They
exist where an expression needs a branch or an error: NaN-propagating
maximum/minimum (PyTorch's semantics, which Python's ``max`` lacks) and
integer division, remainder and power, which must raise instead of invoking
undefined behaviour.
"""

from __future__ import annotations


def _maximum(a, b):
    # NaN propagates from either side, as torch.maximum / np.maximum
    return a if (a >= b or a != a) else b


def _minimum(a, b):
    return a if (a <= b or a != a) else b


def _sign(a):
    if a > 0:
        return 1
    if a < 0:
        return -1
    if a == 0:
        return 0
    return a  # NaN stays NaN


def _ifloordiv(a, b):
    if b == 0:
        raise ZeroDivisionError("floor_divide: integer division by zero; mask the zero divisors "
                                "or divide in floating point (x.to(dj.float32))")
    return a // b


def _iremainder(a, b):
    if b == 0:
        raise ZeroDivisionError("remainder: integer modulo by zero; mask the zero divisors "
                                "or compute in floating point (x.to(dj.float32))")
    return a % b


def _ipow(a, b):
    if b < 0:
        raise ValueError("pow: integers to negative integer powers are not allowed; "
                         "use a floating point base (x.to(dj.float32))")
    r = a ** b
    return r


HELPERS = {f.__name__: f for f in (_maximum, _minimum, _sign, _ifloordiv, _iremainder, _ipow)}
