"""float32 gelu (exact form), x Phi(x), and its derivative in float32 arithmetic: 16 lanes where
float64 has 8.

Straight-line code, both forms computed and one selected (branch-free), so LLVM vectorizes the
eager kernel's loop and compiled mode's fused loops alike (one definition: the same bits):

* -0.6364 < x < 1.2728: Phi = 1/2 + x K(x*x), K of degree 6 (erf(x/sqrt 2) / 2x, fitted
  coefficient by coefficient in float32: relative error 2.8e-8).  Below -0.6364 this form
  would cancel (Phi < 1/4), so the tail form takes over there.
* elsewhere Phi = erfc(a)/2 (x < 0, no cancellation: the negative tail keeps its digits down to
  x = -14.85, where gelu leaves float32's subnormals) or 1 - erfc(a)/2, a = |x|/sqrt 2, with
  erfc(a) = e**(-a*a) R(a), R(a) = t P(t), t = 1 / (1 + 0.6 a), P of degree 9 (relative
  error 1.4e-9 on a in [0.45, 10.5]).  a*a = x*x/2 is carried exactly as two float32s (fma)
  into exp_f32.py's reduction and polynomial, so no digit of the large exponent is lost; the
  roundings of a and t reach R to first order only (put back, weighted by d ln R / d ln t);
  2**n is applied as two factors last, so subnormal results round once.
* the derivative, Phi(x) + x phi(x), phi(x) = e**(-x*x/2) / sqrt(2 pi) from the same
  exponential; below x = -1.3 as e**(-x*x/2) (R/2 + x / sqrt(2 pi)), 2**n applied last.  It is
  0 at x0 = -0.75179 (gelu's minimum), where the sum cancels: on [-1.3, -0.45] it is
  (x - x0) W(x), W a fit of degree 8, so the result keeps its relative accuracy through the zero.

Error, measured against a float64 reference on 5 million samples (random bit patterns, every
binade, dense sweeps of [-16, 16], tests/kernels/support/test_vecmath.py): 1.8 ulp for
x > -0.6364, 5.3 ulp in the negative tail (its roundings, about eight, add up there); the
derivative times g 4.7 ulp (1.9 for x > 1.27; the test allows 5).  torch's
float32 gelu (x/2 (1 + erf(x/sqrt 2))) on the same samples: 1.7 ulp near 0, 4-5 ulp for
x > 1.3, 11 ulp on [-1.5, -0.64], and 0 below x = -5.3, where the true value is -4e-8.  The
float64 forms these replace (gelu.py's, 0.51 and 0.6 ulp) took 2.4x the time (NumPy has no gelu).

An erf in the same float32 arithmetic (the small form x + x Q(x*x) below 0.9, 1 - erfc above)
measured 1.24 ulp (x = 0.921) against torch's 0.72; the elementwise ``erf`` row keeps
widened.py's float64 form (0.51 ulp), as the issue asks at most 1 ulp where torch is within 1.

Special values (as torch's): gelu(+inf) = +inf, gelu(-inf) = NaN (-inf * 0), gelu(-0) = -0,
NaN -> NaN, and -0 below x = -14.85; the derivative is NaN at +-inf (torch's too), 1/2 at +-0.
"""

from __future__ import annotations

import numpy as np
from numba.extending import register_jitable

from ..intrinsics import f32_from_bits
from .exp_f32 import _E0, _E1, _E2, _E3, _E4, _E5, _HALF, _INF, _LN2_HI, _LN2_LO, _LOG2E, _ONE, _ZERO
from .fma import fma

__all__ = ["_gelu_erf_f32", "_gelu_erf_backward_f32"]

_NAN = np.float32(np.nan)

_K0 = np.float32(0.3989422917366028)
_K1 = np.float32(-0.06649085879325867)
_K2 = np.float32(0.009976881556212902)
_K3 = np.float32(-0.0011958153918385506)
_K4 = np.float32(0.0001252155634574592)
_K5 = np.float32(-1.4568064216291532e-05)
_K6 = np.float32(1.5967365243341192e-06)
_P0 = np.float32(0.33851054310798645)
_P1 = np.float32(0.33862918615341187)
_P2 = np.float32(0.2757955491542816)
_P3 = np.float32(0.17140574753284454)
_P4 = np.float32(-0.08066229522228241)
_P5 = np.float32(0.20421229302883148)
_P6 = np.float32(-0.834212064743042)
_P7 = np.float32(1.0279428958892822)
_P8 = np.float32(-0.5625735521316528)
_P9 = np.float32(0.12098699808120728)
_TP = np.float32(0.6)
# d ln R / d ln t, within 1.3%: the weight of t's rounding error in R
_S0 = np.float32(0.9248558878898621)
_S1 = np.float32(1.6038767099380493)
_S2 = np.float32(-0.5853466391563416)
_G_LO = np.float32(-0.6364)                  # a = 0.45: Phi(x) = 0.26 there
_G_HI = np.float32(1.2728)                   # a = 0.9
_S_MAX = np.float32(110.25)                  # x*x/2 beyond: gelu below 2**-150 (x = -14.85)
_SQRT1_2 = np.float32(0.70710678118654752)
_SQRT1_2_LO = np.float32(0.70710678118654752 - float(_SQRT1_2))


@register_jitable(inline="always")
def _phi_parts(x):
    """The pieces of Phi(x) both passes use: k (Phi = 1/2 + x k near 0), sh = x*x/2 rounded,
    m 2**n = e**(-x*x/2) with 2**n as the two factors s1 s2, and R (erfc(a) = e**(-a*a) R).

    Inlined in Numba's IR (``inline="always"``): a call returning a tuple per element would keep
    the loop from vectorizing, and the two passes then compute the same bits as one written form.
    m is not cut to 0 past _S_MAX here: each caller selects where that suits its own NaNs.
    """
    s = x * x
    k = fma(s, fma(s, fma(s, fma(s, fma(s, fma(s, _K6, _K5), _K4), _K3), _K2), _K1), _K0)
    # x*x/2 = sh + sl exactly; a = |x|/sqrt 2 only feeds R
    sh = _HALF * s
    sl = _HALF * fma(x, x, -s)
    shc = min(sh, _S_MAX)
    ax = abs(x)
    a = ax * _SQRT1_2
    al = fma(ax, _SQRT1_2, -a) + ax * _SQRT1_2_LO
    nf = np.floor(fma(-shc, _LOG2E, _HALF))
    rh = fma(nf, -_LN2_HI, -shc)
    rl = fma(nf, -_LN2_LO, -sl)
    r = rh + rl
    c = (rh - r) + rl
    p = fma(fma(fma(fma(fma(_E5, r, _E4), r, _E3), r, _E2), r, _E1), r, _E0)
    hi = _ONE + r
    m = hi + fma(r * r, p, ((_ONE - hi) + r) + c)
    n = np.int32(nf)
    h = n >> np.int32(1)
    s1 = f32_from_bits(np.int32((h + np.int32(127)) << np.int32(23)))
    s2 = f32_from_bits(np.int32((n - h + np.int32(127)) << np.int32(23)))
    d = fma(_TP, a, _ONE)
    dl = fma(_TP, a, _ONE - d) + _TP * al
    tt = _ONE / d
    # t's rounding error (and d's) reaches R scaled by up to 1.8: put back to first order
    rho = fma(-tt, dl, fma(-tt, d, _ONE))
    u = tt * tt
    u2 = u * u
    pp = fma(u2 * u2, fma(_P9, tt, _P8), fma(u2, fma(fma(_P7, tt, _P6), u, fma(_P5, tt, _P4)),
                                               fma(fma(_P3, tt, _P2), u, fma(_P1, tt, _P0))))
    rr = tt * pp
    rr = fma(rr * rho, fma(fma(_S2, tt, _S1), tt, _S0), rr)
    return k, sh, m, s1, s2, rr


def _gelu_erf_f32(x):
    k, sh, m, s1, s2, rr = _phi_parts(x)
    small = x * fma(x, k, _HALF)
    # erfc(a) / 2 = m R / 2 * 2**n; in the negative tail x times it, scaled last (one rounding)
    hc = m * (_HALF * rr)
    hc = hc if sh < _S_MAX else _ZERO
    neg = (x * hc) * s1 * s2
    pos = x * (_ONE - hc * s1 * s2)
    y = neg if x < _ZERO else pos
    return small if (x > _G_LO) & (x < _G_HI) else y


# over LLVM's inlining threshold: Numba inlines it (support/numba_types.py), so loops vectorize
_gelu_erf_f32.numba_inline = "always"


# gelu'(x) = Phi(x) + x phi(x) is 0 at x0 = -0.75179 (gelu's minimum): on [-1.3, -0.45] it is
# (x - x0) W(x + 0.875), W of degree 8 (relative error 2.1e-8), x - x0 with x0 as two float32s
_X0_HI = np.float32(-0.7517915368080139)
_X0_LO = np.float32(1.211444988769017e-08)
_W_C = np.float32(-0.875)
_W0 = np.float32(0.3835870027542114)
_W1 = np.float32(0.38770970702171326)
_W2 = np.float32(0.022250188514590263)
_W3 = np.float32(-0.10396603494882584)
_W4 = np.float32(-0.02559940330684185)
_W5 = np.float32(0.015421395190060139)
_W6 = np.float32(0.006374210584908724)
_W7 = np.float32(-0.0013517674524337053)
_W8 = np.float32(-0.0014838854549452662)
_R_LO = np.float32(-1.3)
_R_HI = np.float32(-0.45)
_INV_SQRT_2PI = np.float32(0.3989422804014327)


def _gelu_erf_backward_f32(g, x):
    k, sh, m, s1, s2, rr = _phi_parts(x)
    phi_small = fma(x, k, _HALF)
    m = m if sh < _S_MAX else _ZERO
    hr = _HALF * rr
    # below -1.3: e**(-x*x/2) (R/2 + x / sqrt(2 pi)), the factor 2**n applied last
    neg = (g * (m * fma(x, _INV_SQRT_2PI, hr))) * s1 * s2
    z = x - _W_C
    z2 = z * z
    z4 = z2 * z2
    w = fma(z4 * z4, _W8, fma(z4, fma(z2, fma(_W7, z, _W6), fma(_W5, z, _W4)),
                              fma(z2, fma(_W3, z, _W2), fma(_W1, z, _W0))))
    root = g * (((x - _X0_HI) - _X0_LO) * w)
    ev = m * s1 * s2
    phi = phi_small if (x > _G_LO) & (x < _G_HI) else _ONE - ev * hr
    pos = g * fma(x, ev * _INV_SQRT_2PI, phi)
    y = neg if x <= _R_LO else (root if x < _R_HI else pos)
    return y if abs(x) < _INF else _NAN


_gelu_erf_backward_f32.numba_inline = "always"
