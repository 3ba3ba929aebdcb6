"""float32 exp in float32 arithmetic (Cephes' expf, branch-free): within 0.95 ulp.

Its constants are shared: sigmoid_f32.py and tanh_f32.py reduce their arguments with the
same two-part ln 2 and evaluate the same degree-5 polynomial.
"""

from __future__ import annotations

import numpy as np

from ..intrinsics import f32_from_bits

__all__ = ["_exp_f32"]

_EXP_HI = np.float32(88.72283)
# below ln(2**-150) ~ -103.972 exp rounds to 0; from there up to -87.3 its results are subnormal,
# which the two-factor 2**n below builds exactly (each factor stays a normal float32)
_EXP_LO = np.float32(-104.0)
# float32 constants as module globals: Numba types a global NumPy scalar as a constant, while each
# np.float32(...) call in a body is one more call for type inference to resolve (compile time)
_LOG2E = np.float32(1.44269504088896341)
_HALF = np.float32(0.5)
_LN2_HI = np.float32(0.693359375)             # 9 significant bits: n * _LN2_HI is exact (|n| <= 150)
_LN2_LO = np.float32(-2.12194440e-4)
_E5 = np.float32(1.9875691500e-4)
_E4 = np.float32(1.3981999507e-3)
_E3 = np.float32(8.3334519073e-3)
_E2 = np.float32(4.1665795894e-2)
_E1 = np.float32(1.6666665459e-1)
_E0 = np.float32(5.0000001201e-1)
_ONE = np.float32(1.0)
_INF = np.float32(np.inf)
_ZERO = np.float32(0.0)


def _exp_f32(x):
    """float32 exp as range reduction + polynomial (Cephes expf): within 0.95 ulp (torch's: 0.56).

    libm's expf is an opaque call per element; written as arithmetic, LLVM
    vectorizes the loop (the PyPI llvmlite has no SVML).  Subnormal results
    (x in [-103.97, -87.34]) are kept, as libm's expf and torch keep them:
    the last product rounds once into the subnormal range.
    """
    xc = min(max(x, _EXP_LO), _EXP_HI)
    # stay in float32/int32 throughout: int64 conversions do not vectorize well
    nf = np.floor(xc * _LOG2E + _HALF)
    r = xc - nf * _LN2_HI - nf * _LN2_LO
    p = _E5
    p = p * r + _E4
    p = p * r + _E3
    p = p * r + _E2
    p = p * r + _E1
    p = p * r + _E0
    # 2**n as two exact powers of two: n reaches 128 near the top of the range,
    # one past the largest float32 exponent
    n = np.int32(nf)
    h = n >> np.int32(1)
    y = (p * (r * r) + r + _ONE) * f32_from_bits(np.int32((h + 127) << 23)) \
        * f32_from_bits(np.int32((n - h + 127) << 23))
    if x > _EXP_HI:
        y = _INF
    if x < _EXP_LO:
        y = _ZERO
    if x != x:
        y = x
    return y
