"""float32 log, log2 and log1p in float32 arithmetic (16 lanes where float64 has 8).

The reduction and polynomial of FreeBSD's ``e_logf.c`` (after Sun's fdlibm), written
branch-free.  x = 2**k m with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact), s = f / (2 + f);
log(1 + f) = f - (f*f/2 - s (f*f/2 + R(s*s))) with R a degree-4 minimax polynomial
(|log(1 + f) / s - 2 - R| < 2**-34), and k ln 2 added as a two-part constant, the first part
short enough that k times it is exact.  Subnormal x are first scaled by 2**23.  The three
functions share that reduction (``_log_reduce``) and polynomial (``_log_poly``), both inlined
in Numba's IR (a call returning a tuple per element would keep the loop from vectorizing).

The polynomial and the last sums are fused multiply-adds (fma.py): 0.85x the time of the
unfused form.  fdlibm states an error below 1 ulp; measured on 5 million float32s (random bit
patterns, every binade, a dense sweep of [0, 2]):

* ``_log_f32``: 0.82 ulp (torch's float32 log on the same samples: 0.90).  NumPy's AVX-512
  logf is within 3.5 ulp; the loop over this one takes 1.04x its time at 3e4 elements (1.4x
  while k was left int64: see below).
* ``_log2_f32``: FreeBSD's ``e_log2f.c``: log(1 + f) as hi + lo with hi's low 12 bits
  cleared, so that hi times the 12-bit head of 1/ln 2 is exact, and k added last as a
  two-sum.  Within 0.85 ulp (tests/kernels/support/test_vecmath.py; measured 0.83 on the samples
  above and 5 million more, torch's 0.52); exact at powers of two.
* ``_log1p_f32``: musl's ``log1pf``: u = 1 + x rounded, reduced as log's, and the rounding of
  1 + x put back to first order, c = (x - (u - 1)) / u (or 1 - (u - x) where x > 1, the exact
  form there); where 1 + x needs no reduction (k = 0) f is x itself.  Within 0.85 ulp
  (measured 0.81, torch's 1.0).

Special values: log(0) = -inf, log(negative) = NaN, log(inf) = inf, NaN -> NaN; log1p(-1) =
-inf, log1p(+-0) = +-0.
"""

from __future__ import annotations

import numpy as np
from numba.extending import register_jitable

from ..intrinsics import bits_from_f32, f32_from_bits
from .fma import fma

__all__ = ["_log1p_f32", "_log2_f32", "_log_f32"]

_LG1 = np.float32(0.66666662693)
_LG2 = np.float32(0.40000972152)
_LG3 = np.float32(0.28498786688)
_LG4 = np.float32(0.24279078841)
_LN2_HI = np.float32(6.9313812256e-01)    # 16 significant bits: k * _LN2_HI is exact for |k| < 256
_LN2_LO = np.float32(9.0580006145e-06)
_IVLN2_HI = np.float32(1.4428710938e+00)  # 1/ln 2 in two parts, the first of 12 significant bits
_IVLN2_LO = np.float32(-1.7605285393e-04)
_HI_MASK = np.int32(-0x1000)              # clears the low 12 bits: 0xfffff000
_SQRT_HALF_BITS = np.int32(0x3F3504F3)
_MIN_NORMAL = np.float32(1.1754944e-38)
_TWO23 = np.float32(2.0 ** 23)
_TWO25 = np.float32(2.0 ** 25)
_SUB_SHIFT = np.float32(23.0)
_HALF = np.float32(0.5)
_ONE = np.float32(1.0)
_TWO = np.float32(2.0)
_ZERO = np.float32(0.0)
_INF = np.float32(np.inf)
_NINF = np.float32(-np.inf)
_NAN = np.float32(np.nan)


@register_jitable(inline="always")
def _log_reduce(x):
    """x = 2**dk (1 + f), 1 + f in [sqrt(1/2), sqrt(2)): (dk as float32, f), for positive x
    (other x give garbage the callers select away)."""
    sub = x < _MIN_NORMAL
    xs = x * _TWO23 if sub else x
    # subtracting sqrt(1/2)'s bits puts the exponent step at m = sqrt(1/2): k is x's exponent,
    # or one more where the mantissa is above sqrt(2)
    # int32 throughout: Numba widens int32 arithmetic to int64, and a k left int64 kept the
    # vector loop in 8-lane int64 registers (sign extensions, int64 shifts, vcvtqq2ps)
    k = np.int32(np.int32(bits_from_f32(xs) - _SQRT_HALF_BITS) >> np.int32(23))
    m = f32_from_bits(np.int32(bits_from_f32(xs) - (k << np.int32(23))))
    return np.float32(k) - (_SUB_SHIFT if sub else _ZERO), m - _ONE


@register_jitable(inline="always")
def _log_poly(f):
    """(s, f*f/2, R(s*s)) of log(1 + f) = f - (f*f/2 - s (f*f/2 + R))."""
    s = f / (_TWO + f)
    z = s * s
    w = z * z
    r = fma(z, fma(w, _LG3, _LG1), w * fma(w, _LG4, _LG2))
    return s, _HALF * f * f, r


def _log_f32(x):
    dk, f = _log_reduce(x)
    s, hfsq, r = _log_poly(f)
    y = fma(dk, _LN2_HI, -((hfsq - fma(s, hfsq + r, dk * _LN2_LO)) - f))
    y = y if x < _INF else x                          # inf, NaN
    return y if x > _ZERO else (_NINF if x == _ZERO else _NAN)


def _log2_f32(x):
    dk, f = _log_reduce(x)
    s, hfsq, r = _log_poly(f)
    # log(1 + f) = hi + lo, hi short: hi * _IVLN2_HI is exact.  (f/ln 2 rounded, with its error
    # carried by fma into the tail, measured 0.98 ulp: this split's 0.83 costs three more
    # instructions)
    hi = f32_from_bits(np.int32(bits_from_f32(f - hfsq) & _HI_MASK))
    lo = fma(s, hfsq + r, (f - hi) - hfsq)
    vhi = hi * _IVLN2_HI
    vlo = fma(lo + hi, _IVLN2_LO, lo * _IVLN2_HI)
    # dk + vhi as a two-sum (|dk| >= |vhi| wherever dk != 0), its error joining vlo
    t = dk + vhi
    y = t + (vlo + ((dk - t) + vhi))
    y = y if x < _INF else x
    return y if x > _ZERO else (_NINF if x == _ZERO else _NAN)


def _log1p_f32(x):
    u = _ONE + x
    dk, fu = _log_reduce(u)
    # 1 + x's rounding, to first order (musl's); 0 where k = 0 (f is x itself) and from u =
    # 2**25 up, where it is below 2**-25 and the result above 17
    c = (_ONE - (u - x) if dk >= _TWO else x - (u - _ONE)) / u
    c = c if (dk != _ZERO) & (u < _TWO25) else _ZERO
    f = fu if dk != _ZERO else x
    s, hfsq, r = _log_poly(f)
    y = fma(dk, _LN2_HI, -((hfsq - fma(s, hfsq + r, fma(dk, _LN2_LO, c))) - f))
    y = y if u < _INF else u                          # inf, NaN
    y = y if x > -_ONE else (_NINF if x == -_ONE else _NAN)
    return x if x == _ZERO else y
