"""float32 tanh, its exp in float32 arithmetic and one float64 step: within 0.6 ulp.

a = |x|, the sign put back from x's bits at the end (tanh(-0) = -0), both forms computed and
one selected (branch-free, so LLVM vectorizes the loop):

* a < 0.625: a + a z P(z), z = a*a, P of degree 5 (a weighted least-squares fit to
  (tanh(a) - a) / a**3 on [0, 0.625**2], relative error 4e-8 with float32 coefficients).  The
  tail a z P is at most 0.14 a, evaluated in float32; the sum a + tail is taken in float64,
  so the result rounds once.
* a >= 0.625: 1 - 2 / (E + 1), E = e**(2a).  E's reduction and polynomial are exp_f32.py's
  (Cephes), in float32: 2a = n ln 2 + r exactly to the last rounding of r (|r| <= ln 2 / 2,
  error <= 2**-26), e**r - 1 = r + r**2 P(r) rounded to float32 (error <= 2**-26).  Only
  E = (1 + that) 2**n and 1 - 2 / (E + 1) are float64: with float32 there, the roundings of
  E, E + 1 and the quotient add up to 1.5 ulp.  E's relative error (<= 2**-25) reaches the
  result scaled by 2E / (E + 1)**2 <= 0.35: 0.2 ulp.
* a >= 10: +-1 (1 - tanh(10) < 2**-27, below half an ulp of 1); inf -> +-1, NaN -> NaN.

Measured on tests/kernels/support/test_vecmath.py's samples (random bit patterns, every binade,
a dense sweep of [-20, 20]): 0.53 ulp; torch's float32 tanh (SLEEF's u10): 0.51.  The
float64 form this replaces (widened.py's, 0.51 ulp) evaluated e**2a and the series in float64:
3.6x NumPy at 3e4 elements.
"""

from __future__ import annotations

import numpy as np

from ..intrinsics import bits_from_f32, f32_from_bits
from .exp_f32 import _E0, _E1, _E2, _E3, _E4, _E5, _HALF, _LN2_HI, _LN2_LO, _LOG2E

__all__ = ["_tanh_f32"]

_THIRD = -1.0 / 3.0                          # float64: in float32 it alone is 3e-8 off
_T2 = np.float32(0.13333311676979065)
_T3 = np.float32(-0.05396054685115814)
_T4 = np.float32(0.021776532754302025)
_T5 = np.float32(-0.008363565430045128)
_T6 = np.float32(0.0023110846523195505)
_SMALL = np.float32(0.625)
_A_MAX = np.float32(10.0)
_BIAS = np.int32(127)
_SIGN = np.int32(-0x80000000)
_ABS = np.int32(0x7FFFFFFF)


def _tanh_f32(x):
    a = min(abs(x), _A_MAX)
    z = a * a
    z2 = z * z
    q = z * ((_T3 * z + _T2) + z2 * ((_T5 * z + _T4) + _T6 * z2))
    ad = np.float64(a)
    zd = ad * ad
    small = ad + ad * zd * (_THIRD + np.float64(q))
    w = a + a
    nf = np.floor(w * _LOG2E + _HALF)
    r = (w - nf * _LN2_HI) - nf * _LN2_LO
    r2 = r * r
    em = ((_E5 * r + _E4) * r2 + (_E3 * r + _E2)) * (r2 * r2) + (_E1 * r + _E0) * r2 + r
    e = (1.0 + np.float64(em)) * np.float64(f32_from_bits(np.int32((np.int32(nf) + _BIAS) << np.int32(23))))
    big = 1.0 - 2.0 / (e + 1.0)
    t = np.float32(small if a < _SMALL else big)
    t = f32_from_bits(np.int32((bits_from_f32(t) & _ABS) | (bits_from_f32(x) & _SIGN)))
    return t if x == x else x
