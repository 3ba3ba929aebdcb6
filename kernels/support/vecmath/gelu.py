"""float32 gelu's tanh form and its derivative, one vectorizable function each (the exact form
and its derivative: erf_f32.py, in float32 arithmetic), and the libm forms of all four that
float64 rows, CUDA and the simulator use.

Each is straight-line float64 code over one element, ending in one rounding to float32, as
widened.py's functions: the eager kernel and compiled mode's fused loop run one pass over
the tensor where the composite made five.  Written so that nothing cancels:

* 1 + tanh(u) = 2 sigmoid(2u), so gelu_tanh(x) = x / (1 + exp(-2u)).
* the derivative: s + 2 x s (1 - s) u'(x), s = sigmoid(2u).

Error bounds, measured against float64 references (tests/kernels/support/test_vecmath.py): the
form within 0.51 ulp, the derivative (times g, one float32 rounding) within 0.6 ulp.  Special
values as torch's: gelu(+inf) = +inf, gelu(-inf) = NaN (-inf * 0), gelu(-0) = -0; the
derivative is NaN at +-inf (torch's too).
"""

from __future__ import annotations

import math

import numpy as np

from dispatch_jit.jit.source import define

from .core import CONSTS, exp2

__all__ = ["SOURCES", "functions"]

_K = {"_SQRT1_2": math.sqrt(0.5), "_INV_SQRT_2PI": 1.0 / math.sqrt(2.0 * math.pi), "_SQRT_PI": math.sqrt(math.pi),
      "_BETA": math.sqrt(2.0 / math.pi), "_KAPPA": 0.044715, "_F32_NAN": np.float32(np.nan)}
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
              "_gelu_erf_backward_f32": _gelu_erf_backward_libm, "_gelu_tanh_backward_f32": _gelu_tanh_backward_libm}
