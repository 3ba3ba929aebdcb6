"""Scalar helper functions used by the expressions in scalar_ops.py.

Plain Python functions: each backend compiles them for itself (``numba.njit``
on the CPU, a device function on CUDA), so one definition serves all.  They
exist where an expression needs a branch or an error: NaN-propagating
maximum/minimum (PyTorch's semantics, which Python's ``max`` lacks) and
integer division, remainder and power, which must raise instead of invoking
undefined behaviour.
"""

from __future__ import annotations


import numpy as np
from numba.extending import register_jitable

from .intrinsics import f32_from_bits


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


_EXP_HI = np.float32(88.72283)
_EXP_LO = np.float32(-87.33654)


@register_jitable    # callable from the other helpers' compiled code (_tanh_f32), still a plain function
def _exp_f32(x):
    """float32 exp as range reduction + polynomial (Cephes expf, <= 2 ulp).

    libm's expf is an opaque call per element; written as arithmetic, LLVM
    vectorizes the loop (the PyPI llvmlite has no SVML).  Results that would
    be subnormal (x < -87.3) flush to zero.
    """
    xc = min(max(x, _EXP_LO), _EXP_HI)
    # stay in float32/int32 throughout: int64 conversions do not vectorize well
    nf = np.floor(xc * np.float32(1.44269504088896341) + np.float32(0.5))
    r = xc - nf * np.float32(0.693359375) - nf * np.float32(-2.12194440e-4)
    p = np.float32(1.9875691500e-4)
    p = p * r + np.float32(1.3981999507e-3)
    p = p * r + np.float32(8.3334519073e-3)
    p = p * r + np.float32(4.1665795894e-2)
    p = p * r + np.float32(1.6666665459e-1)
    p = p * r + np.float32(5.0000001201e-1)
    # 2**n as two exact powers of two: n reaches 128 near the top of the range,
    # one past the largest float32 exponent
    n = np.int32(nf)
    h = n >> np.int32(1)
    y = (p * (r * r) + r + np.float32(1.0)) * f32_from_bits(np.int32((h + 127) << 23)) \
        * f32_from_bits(np.int32((n - h + 127) << 23))
    if x > _EXP_HI:
        y = np.float32(np.inf)
    if x < _EXP_LO:
        y = np.float32(0.0)
    if x != x:
        y = x
    return y


def _tanh_f32(x):
    """float32 tanh from ``_exp_f32`` (Cephes tanhf, a few ulp), so that the loop vectorizes.

    libm's tanhf per element made tanh 5x slower than NumPy's.  Both branches
    are computed and one selected (a branch would stop LLVM's vectorizer): an
    odd polynomial below |x| = 0.625, where 1 - 2/(e^2|x| + 1) would cancel,
    and the exp form above it (exp saturates to inf, giving exactly 1).
    Within 1.3 ulp of float64 tanh over [-12, 12] (measured).
    """
    a = abs(x)
    s = x * x
    p = ((((np.float32(-5.70498872745e-3) * s + np.float32(2.06390887954e-2)) * s
           - np.float32(5.37397155531e-2)) * s + np.float32(1.33314422036e-1)) * s
         - np.float32(3.33332819422e-1)) * s * x + x
    e = np.float32(1.0) - np.float32(2.0) / (_exp_f32(a + a) + np.float32(1.0))
    e = -e if x < 0 else e
    y = p if a < np.float32(0.625) else e
    return y if a > np.float32(0.0) else x      # NaN and -0.0 come back as they are


HELPERS = {f.__name__: f for f in (_maximum, _minimum, _sign, _ifloordiv, _iremainder, _ipow, _exp_f32, _tanh_f32)}
