"""float32 tanh in float32 arithmetic (16 lanes where float64 has 8): within 0.8 ulp.

a = |x|, the sign put back from x's bits at the end (tanh(-0) = -0), both forms computed and
one selected (branch-free, so LLVM vectorizes the loop); products and sums are fused where
``fma`` is written (fma.py):

* a < 0.625: a + a z P(z), z = a*a, P(z) = -1/3 + z Q(z), Q of degree 4 (a weighted
  least-squares fit to (tanh(a) - a) / a**3 on [0, 0.625**2] with -1/3 fixed, relative error
  1.4e-8 with float32 coefficients), -1/3 carried as two float32s.  The tail a z P is at most
  0.14 a, so its roundings reach the result shrunk: measured 0.75 ulp here.
* a >= 0.625: 1 - 2 / (E + 1), E = e**(2a) by exp_f32.py's reduction and polynomial
  (Cephes), with each rounding that would reach the result at full weight compensated: r's
  (2a - n ln 2), e**r's (1 + r + ...), E + 1's (Fast2Sum), and the quotient's (its exact
  residual by fma).  Without these, the roundings of E, E + 1 and the quotient add up to 1.5
  ulp.  Measured 0.78 ulp.
* a >= 10: +-1 (1 - tanh(10) < 2**-27, below half an ulp of 1); inf -> +-1, NaN -> NaN.

Measured on 5 million samples (random bit patterns, every binade, dense sweeps of [-12, 12]
and [0, 2]): 0.78 ulp (x = 0.83284); torch's float32 tanh (SLEEF's u10) 0.51, NumPy's 1.37.
The float64 form this replaces (widened.py's, 0.51 ulp) evaluated e**2a and the series in
float64 at half the lanes: 3.6x NumPy at 3e4 elements; this one 2.0x (NumPy's AVX-512 tanh
is a table of piecewise polynomials), 0.3x torch's.
"""

from __future__ import annotations

import numpy as np

from ..intrinsics import bits_from_f32, f32_from_bits
from .exp_f32 import _ONE, _exp_parts
from .fma import fma

__all__ = ["_tanh_f32"]

_TH_HI = np.float32(-1.0 / 3.0)
_TH_LO = np.float32(-1.0 / 3.0 - float(_TH_HI))
_TWO = np.float32(2.0)
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
    q = z * fma(z2, fma(_T6, z2, fma(_T5, z, _T4)), fma(_T3, z, _T2))
    # -1/3 as two float32s: its rounding alone was 3e-8 of the tail
    small = fma(a * z, (q + _TH_LO) + _TH_HI, a)
    # E = e**2a = (m + ml) 2**n: exp_f32.py's steps, with m's rounding error ml kept
    nf, hi, sm = _exp_parts(a + a)
    m = hi + sm
    ml = (hi - m) + sm
    s = f32_from_bits(np.int32((np.int32(nf) + _BIAS) << np.int32(23)))
    eh = m * s
    el = ml * s
    # 2 / (E + 1) with E + 1 = d + dl (dl exact) and the quotient's residual 2 - q d (exact by
    # fma) put back: q is within half its ulp, a quarter of the result's
    d = eh + _ONE
    dl = ((eh - d) + _ONE) + el
    inv = _ONE / d
    qq = _TWO * inv
    qq = fma(fma(-qq, dl, fma(-qq, d, _TWO)), inv, qq)
    big = _ONE - qq
    t = small if a < _SMALL else big
    t = f32_from_bits(np.int32((bits_from_f32(t) & _ABS) | (bits_from_f32(x) & _SIGN)))
    return t if x == x else x
