"""float32 gelu's tanh form and the derivatives of both forms, one vectorizable function each
(the exact form itself: erf_f32.py, in float32 arithmetic).

Each is straight-line float64 code over one element, ending in one rounding to float32, as
widened.py's functions: the eager kernel and compiled mode's fused loop run one pass over
the tensor where the composite made five.  Written so that nothing cancels:

* exact: gelu(x) = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2.  Where |x| / sqrt 2 = a >= 1,
  Phi is 1 - erfc(a)/2 (x > 0) or erfc(a)/2 (x < 0), erfc(a) = exp(-a*a) Q(a) with Q a fit
  of relative error 1.9e-10 on [1, 4] and 3.3e-11 beyond (to a = 10.5, where gelu underflows
  float32), so gelu's negative tail keeps its digits where x/2 (1 + erf) rounds to 0 (torch's
  float32 gelu is 0 below x = -5.3; the true value, -4e-8 at x = -5.66, is ours).
* tanh: 1 + tanh(u) = 2 sigmoid(2u), so gelu_tanh(x) = x / (1 + exp(-2u)), no cancellation.
* the derivatives: Phi(x) + x phi(x) and s + 2 x s (1 - s) u'(x), s = sigmoid(2u).

Error bounds, measured against float64 references (tests/kernels/support/test_vecmath.py): the
forms within 0.51 ulp, the derivatives (times g, one float32 rounding) within 0.6 ulp.  Special
values as x/2 (1 + erf) in IEEE arithmetic, and as torch: gelu(+inf) = +inf, gelu(-inf) = NaN
(-inf * 0), gelu(-0) = -0; the derivatives are NaN at +-inf (torch's too).
"""

from __future__ import annotations

import math

import numpy as np

from dispatch_jit.jit.source import define

from .core import CONSTS, estrin, exp2

__all__ = ["SOURCES", "functions"]

_K = {"_SQRT1_2": math.sqrt(0.5), "_INV_SQRT_2PI": 1.0 / math.sqrt(2.0 * math.pi), "_SQRT_PI": math.sqrt(math.pi),
      "_BETA": math.sqrt(2.0 / math.pi), "_KAPPA": 0.044715, "_F32_NAN": np.float32(np.nan)}
# numpy Chebyshev fits (3000 nodes, weighted for relative error) converted to the power basis:
# erf(x) / x for |x| < 1 is widened.py's (9.3e-13 relative); Q(a) = erfc(a) exp(a*a) on [1, 4]
# in u = (a - 2.5) / 1.5, degree 14, 1.9e-10 relative; R(v) = a sqrt(pi) exp(a*a) erfc(a) on
# a in [4, 10.5] in v = 1 / (a*a), rescaled to [-1, 1], degree 6, 3.3e-11 relative
_ERF_SMALL = estrin("t", [
    1.1283791670946952, -0.3761263888986915, 0.11283791313499304, -0.026866133625572382, 0.005223785007619217,
    -0.0008542670582573571, 0.00011956947034745604, -1.3911702633985797e-05, 1.0595279968506084e-06])
_Q14 = estrin("u", [
    0.21080636407311062, -0.11152102064894265, 0.05611049239782727, -0.02700527866089529, 0.012489387459841201,
    -0.005570905498033086, 0.0024035950698880464, -0.0010048701130235375, 0.00040910760825348667,
    -0.00016435971313208698, 6.28567455229909e-05, -2.060093221445808e-05, 8.073646362093152e-06,
    -5.023649669333083e-06, 1.6398584105134414e-06])
_R6 = estrin("r", [
    0.9829912427063178, -0.012088991940475576, 0.00042009514535430796, -2.302172882145844e-05,
    1.6779023740944797e-06, -1.53236114539256e-07, 1.6137338487110678e-08])
_V_MID = (1.0 / 110.25 + 1.0 / 16.0) / 2.0
_V_HALF = (1.0 / 16.0 - 1.0 / 110.25) / 2.0

# Phi(x) (``phi``) and exp(-x*x/2) (``ev``, 0 where it underflows float64's 2**-200), from xd:
# t = x*x/2 is exact in float64 (a float32's square has 48 bits); past t = 110.25 (x = -14.85)
# gelu is below float32's smallest subnormal, and Phi is taken as 0 (x < 0) or 1
def _phi(near: bool) -> str:
    """The block computing Phi(x) (``phi``) and exp(-x*x/2) (``ev``) from xd: t = x*x/2 is exact
    in float64 (a float32's square has 48 bits).  Past t = 110.25 (x = -14.85) gelu is below
    float32's smallest subnormal, and Phi is taken as 0 (x < 0) or 1.  ``near``: the form for
    |x| < NEAR (a < 4) only, without the far fit and its division: there it computes the same
    operations as the full form, so the same bits (the eager loops' fast path, ScalarOp.fast)."""
    far = "" if near else """
    al = min(max(a, 4.0), 10.5)
    vr = 1.0 / (al * al)
    r = (vr - """ + repr(_V_MID) + """) * """ + repr(1.0 / _V_HALF) + """
    q = q if a < 4.0 else """ + _R6 + """ / (al * _SQRT_PI)"""
    tail = "" if near else """
    phi = phi if t < 110.25 else (0.0 if xd < 0.0 else 1.0)"""
    return """
    t = 0.5 * (xd * xd)
    a = abs(xd) * _SQRT1_2
    es = a * """ + _ERF_SMALL + """
    ac = min(max(a, 1.0), 4.0)
    u = (ac - 2.5) * (1.0 / 1.5)
    q = """ + _Q14 + far + """
    w = -min(t, 138.0) * _LOG2E""" + exp2(12).format(p="e", w="w") + """
    hc = 0.5 * ev * q
    phi = 0.5 * (1.0 + math.copysign(es, xd)) if t < 1.0 else (hc if xd < 0.0 else 1.0 - hc)""" + tail


# |x| below this: a = |x| / sqrt 2 < 4, where the near forms hold
NEAR = 5.65


# s = sigmoid(2u) = 1 / (1 + E), E = exp(-2u), u = beta (x + kappa x**3), with ``far`` where E is
# clamped to 2**+-200: there s is 0 or 1 to float64's precision and s (1 - s) is taken as 0
_SIG = """
    u = _BETA * (xd + _KAPPA * (xd * xd * xd))
    w = u * (-2.0 * _LOG2E)
    far = abs(w) >= 200.0
    w = min(max(w, -200.0), 200.0)""" + exp2(12).format(p="e", w="w") + """
    s = 1.0 / (1.0 + ev)"""

SOURCES = {
    # below w = 200 (x = -11.8) the result is 0 in float32; x * 0 keeps its sign (and -inf's NaN)
    "_gelu_tanh_f32": """
def _gelu_tanh_f32(x):
    xd = np.float64(x)""" + _SIG + """
    r = xd * s if w < 200.0 else xd * 0.0
    return np.float32(r)
""",
    # g (Phi(x) + x phi(x)); x * 0 at +-inf is NaN, as torch's
    "_gelu_erf_backward_f32": """
def _gelu_erf_backward_f32(g, x):
    xd = np.float64(x)""" + _phi(False) + """
    pdf = ev * _INV_SQRT_2PI if t < 138.0 else 0.0
    return np.float32(np.float64(g) * (phi + xd * pdf))
""",
    "_gelu_erf_backward_near_f32": """
def _gelu_erf_backward_near_f32(g, x):
    xd = np.float64(x)""" + _phi(True) + """
    pdf = ev * _INV_SQRT_2PI if t < 138.0 else 0.0
    return np.float32(np.float64(g) * (phi + xd * pdf))
""",
    "_gelu_tanh_backward_f32": """
def _gelu_tanh_backward_f32(g, x):
    xd = np.float64(x)""" + _SIG + """
    ss = 0.0 if far else ev * s * s
    d = s + (2.0 * xd) * ss * (_BETA * (1.0 + 3.0 * _KAPPA * (xd * xd)))
    r = np.float32(np.float64(g) * d)
    return r if abs(x) < np.float32(np.inf) else _F32_NAN
""",
}

# over LLVM's inlining threshold: Numba inlines them (support/numba_types.py), so loops vectorize
_INLINE = tuple(SOURCES)


def functions() -> dict:
    """The helpers as plain Python functions, by name (each backend compiles them itself), and the
    libm forms that float64 rows call (``_gelu_*_libm``)."""
    out = {}
    for name, src in SOURCES.items():
        g = {"np": np, "math": math, **CONSTS, **_K}
        out[name] = define(src, name, g, f"<dispatch_jit vecmath {name}>")
        out[name].numba_inline = "always"
    for name, fn in CUDA_FORMS.items():
        if "near" not in name:
            out[name.replace("_f32", "_libm")] = fn
    return out


# float64 rows, CUDA and the simulator: torch's formulas (aten's CPU gelu kernels) with libm
_ALPHA = 2.0 / math.sqrt(math.pi) * math.sqrt(0.5) * 0.5      # kAlpha: M_2_SQRTPI * M_SQRT1_2 * 0.5


def _gelu_erf_libm(x):
    return x * 0.5 * (1.0 + math.erf(x * 0.7071067811865476))


def _gelu_tanh_libm(x):
    return 0.5 * x * (1.0 + math.tanh(0.7978845608028654 * (x + 0.044715 * (x * x * x))))


def _gelu_erf_backward_libm(g, x):
    cdf = 0.5 * (1.0 + math.erf(x * 0.7071067811865476))
    return g * (cdf + x * (_ALPHA * math.exp(x * x * -0.5)))


def _gelu_tanh_backward_libm(g, x):
    th = math.tanh(0.7978845608028654 * (x + 0.044715 * (x * x * x)))
    return g * (0.5 * (1.0 + th) + (0.5 * x) * (1.0 - th * th) * (0.7978845608028654 * (1.0 + 3.0 * 0.044715 * (x * x))))


CUDA_FORMS = {"_gelu_erf_f32": _gelu_erf_libm, "_gelu_tanh_f32": _gelu_tanh_libm,
              "_gelu_erf_backward_f32": _gelu_erf_backward_libm, "_gelu_tanh_backward_f32": _gelu_tanh_backward_libm,
              "_gelu_erf_backward_near_f32": _gelu_erf_backward_libm}
