"""float32 log in float32 arithmetic (16 lanes where float64 has 8): within 0.83 ulp.

The reduction and polynomial of FreeBSD's ``e_logf.c`` (after Sun's fdlibm), written
branch-free.  x = 2**k m with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact), s = f / (2 + f);
log(1 + f) = f - (f*f/2 - s (f*f/2 + R(s*s))) with R a degree-4 minimax polynomial
(|log(1 + f) / s - 2 - R| < 2**-34), and k ln 2 added as a two-part constant, the first part
short enough that k times it is exact.  Subnormal x are first scaled by 2**23.

The polynomial and the last sums are fused multiply-adds (fma.py): 0.85x the time of the
unfused form.  fdlibm states an error below 1 ulp; measured here on 5 million float32s (random
bit patterns, every binade, a dense sweep of [0, 2]): 0.82 ulp (torch's float32 log on the
same samples: 0.90).  NumPy's AVX-512 logf is within 3.5 ulp; the loop over this one takes
1.04x its time at 3e4 elements (1.4x while k was left int64: see below).

Special values: log(0) = -inf, log(negative) = NaN, log(inf) = inf, NaN -> NaN.
"""

from __future__ import annotations

import numpy as np

from ..intrinsics import bits_from_f32, f32_from_bits
from .fma import fma

__all__ = ["_log_f32"]

_LG1 = np.float32(0.66666662693)
_LG2 = np.float32(0.40000972152)
_LG3 = np.float32(0.28498786688)
_LG4 = np.float32(0.24279078841)
_LN2_HI = np.float32(6.9313812256e-01)    # 16 significant bits: k * _LN2_HI is exact for |k| < 256
_LN2_LO = np.float32(9.0580006145e-06)
_SQRT_HALF_BITS = np.int32(0x3F3504F3)
_MIN_NORMAL = np.float32(1.1754944e-38)
_TWO23 = np.float32(2.0 ** 23)
_SUB_SHIFT = np.float32(23.0)
_HALF = np.float32(0.5)
_ONE = np.float32(1.0)
_TWO = np.float32(2.0)
_ZERO = np.float32(0.0)
_INF = np.float32(np.inf)
_NINF = np.float32(-np.inf)
_NAN = np.float32(np.nan)


def _log_f32(x):
    sub = x < _MIN_NORMAL
    xs = x * _TWO23 if sub else x
    # subtracting sqrt(1/2)'s bits puts the exponent step at m = sqrt(1/2): k is x's exponent,
    # or one more where the mantissa is above sqrt(2)
    # int32 throughout: Numba widens int32 arithmetic to int64, and a k left int64 kept the
    # vector loop in 8-lane int64 registers (sign extensions, int64 shifts, vcvtqq2ps)
    k = np.int32(np.int32(bits_from_f32(xs) - _SQRT_HALF_BITS) >> np.int32(23))
    m = f32_from_bits(np.int32(bits_from_f32(xs) - (k << np.int32(23))))
    dk = np.float32(k) - (_SUB_SHIFT if sub else _ZERO)
    f = m - _ONE
    s = f / (_TWO + f)
    z = s * s
    w = z * z
    r = fma(z, fma(w, _LG3, _LG1), w * fma(w, _LG4, _LG2))
    hfsq = _HALF * f * f
    y = fma(dk, _LN2_HI, -((hfsq - fma(s, hfsq + r, dk * _LN2_LO)) - f))
    y = y if x < _INF else x                          # inf, NaN
    return y if x > _ZERO else (_NINF if x == _ZERO else _NAN)
