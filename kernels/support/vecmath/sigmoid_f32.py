"""float32 sigmoid in float32 arithmetic (16 lanes where float64 has 8): within 2.35 ulp.

sigmoid(x) = 1 / (1 + E) for x >= 0 and E / (1 + E) below, with E = exp(-|x|) in (0, 1]:
1 + E never overflows, and below x = -87.3 E itself is the subnormal result (1 + E rounds
to 1), so sigmoid keeps its subnormal values down to x = -103.97, as libm's expf would give.

E is exp_f32.py's reduction and polynomial (Cephes' expf with fused multiply-adds), written
branch-free: -|x| = n ln 2 + r, e**r = 1 + r + r**2 P(r), and 2**n applied as two halves
2**h * 2**(n - h) (n reaches -150: each half stays a normal float32, and the last product
rounds once into the subnormal range).  E's error (its rounding included, under 1 ulp)
reaches the result scaled by 1 / (1 + E) <= 1, but in ulps of the result, which can lie in
the binade below E's (twice as fine), plus the roundings of 1 + E and of the quotient:
measured 2.30 ulp at most (x = -3.4507) on 5 million samples (random bit patterns, every
binade, a dense sweep of [-110, 30]); within 0.75 where the result is subnormal.  torch's
float32 sigmoid on the same samples: 2.4 ulp in the normal range (x > -87), and 0 where the
true value is subnormal.  Carrying E's rounding error through the quotient (an exact
residual by fma) brings the bound to 0.78 ulp, at 1.5x the time: over torch's 1.2x target.

The float64 form this replaces (widened.py's, 0.51 ulp) cost 2.2x torch at 3e4 elements:
float64 arithmetic runs half the lanes.  Special values: NaN -> NaN, +inf -> 1, -inf -> 0,
+-0 -> 1/2.
"""

from __future__ import annotations

import numpy as np

from ..intrinsics import f32_from_bits
from .exp_f32 import _E0, _E1, _E2, _E3, _E4, _E5, _HALF, _LN2_HI, _LN2_LO, _LOG2E, _ONE, _ZERO
from .fma import fma

__all__ = ["_sigmoid_f32"]

_A_MAX = np.float32(104.0)                    # e**-104 rounds to 0 in float32 (below 2**-150)
_BIAS = np.int32(127)


def _sigmoid_f32(x):
    t = -min(abs(x), _A_MAX)
    nf = np.floor(fma(t, _LOG2E, _HALF))
    r = fma(nf, -_LN2_LO, fma(nf, -_LN2_HI, t))
    p = fma(fma(fma(fma(fma(_E5, r, _E4), r, _E3), r, _E2), r, _E1), r, _E0)
    n = np.int32(nf)
    h = n >> np.int32(1)
    e = (fma(r * r, p, r) + _ONE) * f32_from_bits(np.int32((h + _BIAS) << np.int32(23))) \
        * f32_from_bits(np.int32((n - h + _BIAS) << np.int32(23)))
    s = (e if x < _ZERO else _ONE) / (_ONE + e)
    return s if x == x else x
