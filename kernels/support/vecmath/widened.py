"""float32 expm1, pow and erf that LLVM vectorizes (log2 and log1p: log_f32.py).

Each is straight-line float64 code over one element (core.py's blocks), ending in one
rounding to float32; special values are chosen with selects, never branches, so a Numba
loop over them becomes SIMD code.  Error bound, every function: 0.51 ulp (0.5 for the
final rounding, plus the float64 evaluation's error: at most 2**-32 relative, i.e.
1/256 ulp; erf's fit adds 0.01 ulp), over the whole float32
range, subnormal arguments and results included; measured 0.5000-0.5076 ulp.  Special values follow C99/IEEE 754 (as libm,
NumPy and torch): see the comment at each function.

The functions are generated from source templates (the core blocks pasted in), so that
each is one Numba function with no calls but bit casts.
"""

from __future__ import annotations

import math

import numpy as np

from dispatch_jit.jit.source import define

from .core import CONSTS, EXP2, LOG, estrin, exp2

__all__ = ["SOURCES", "functions"]

_F32 = {"_INF": np.float32(np.inf), "_NINF": np.float32(-np.inf), "_NAN": np.float32(np.nan),
        "_ONE": np.float32(1.0), "_TWO24": np.float32(2.0 ** 24)}


def _log(p: str, u: str) -> str:
    return LOG.format(p=p, u=u)


def _exp2(p: str, w: str, terms: int = 12) -> str:
    """2**w; 9 terms (error 2**-32 relative, 1/256 ulp of float32) where the result is not
    amplified, 12 where it is (pow's exponent reaches 150: 150 * 2**-44)."""
    return (EXP2 if terms == 12 else exp2(terms)).format(p=p, w=w)


# exp(x) - 1 for |x| < 1/4: x (1 + x/2! + ... + x**7/8!), the rest below 2**-34 relative
_EXPM1_SMALL = estrin("h", [1.0 / math.factorial(k + 1) for k in range(8)])
# Both erf polynomials are numpy Chebyshev fits at 2000 Chebyshev nodes to math.erf/math.erfc,
# converted to the power basis.  erf(x) / x for |x| < 1, in t = x*x: degree 8, max relative
# error 9.3e-13.  erfc(a) e**(a*a) on [1, 4], in u = (a - 2.5) / 1.5: degree 12, max error of
# erfc 5.5e-10 absolute (erf is near 1 there: 0.01 of float32's half ulp).  Small polynomials
# keep the function under LLVM's inlining threshold: a call per element does not vectorize
_ERF_SMALL = estrin("t", [
    1.1283791670946952, -0.3761263888986915, 0.11283791313499304, -0.026866133625572382, 0.005223785007619217,
    -0.0008542670582573571, 0.00011956947034745604, -1.3911702633985797e-05, 1.0595279968506084e-06])
_ERFC_Q = estrin("u", [
    0.21080636427594102, -0.11152100469538243, 0.05611047258428737, -0.02700572528973036, 0.012489703671445973,
    -0.0055673329095803315, 0.002401701695570211, -0.001017117774186103, 0.00041450809763675606,
    -0.00014394859801405803, 5.494724840331687e-05, -3.6928723526932854e-05, 1.3819088939267646e-05])

SOURCES = {
    # expm1: the series near 0 (exp(x) - 1 would lose the low bits there); -0 -> -0, -inf -> -1
    "_expm1_f32": """
def _expm1_f32(x):
    h = np.float64(x)
    small = h * """ + _EXPM1_SMALL + """
    w = min(max(h * _LOG2E, -200.0), 200.0)""" + _exp2("", "w", 10) + """
    r = np.float32(small if abs(h) < 0.25 else v - 1.0)
    return r if x == x else x
""",
    # pow, C99's special values: pow(x, 0) = pow(1, y) = 1 (NaN too), pow(-1, +-inf) = 1,
    # a negative finite x to a non-integer finite y is NaN, an odd integer y keeps x's sign
    # (-0 included), and the infinities and zeros of x and y follow from log2 |x| = +-inf
    "_pow_f32": """
def _pow_f32(x, y):
    xd = np.float64(x)
    yd = np.float64(y)
    ax = abs(xd)""" + _log("", "ax") + """
    l2 = ef + lm * _LOG2E
    l2 = l2 if ax < _F64_INF else _F64_INF
    l2 = l2 if ax > 0.0 else -_F64_INF
    w = min(max(yd * l2, -200.0), 200.0)""" + _exp2("", "w") + """
    integral = np.floor(y) == y
    odd = integral & (abs(y) < _TWO24) & (np.floor(y * np.float32(0.5)) * np.float32(2.0) != y)
    v = -v if (math.copysign(1.0, xd) < 0.0) & odd else v
    v = _F64_NAN if (x < 0) & (x > _NINF) & (~integral) else v
    v = v if (x == x) & (y == y) else _F64_NAN
    one = (y == 0) | (x == _ONE) | ((ax == 1.0) & (abs(y) == _INF))
    return np.float32(1.0 if one else v)
""",
    # erf: x P(x*x) below |x| = 1; above, 1 - exp(-x*x) Q(|x|) (x*x is exact in float64),
    # the sign put back; |x| >= 4 is +-1 in float32 (erfc(4) < 2**-25).  -0 -> -0
    "_erf_f32": """
def _erf_f32(x):
    xd = np.float64(x)
    t = xd * xd
    small = xd * """ + _ERF_SMALL + """
    a = min(max(abs(xd), 1.0), 4.0)
    u = (a - 2.5) * (1.0 / 1.5)
    w = -(a * a) * _LOG2E""" + exp2(10).format(p="e", w="w") + """
    big = math.copysign(1.0 - ev * """ + _ERFC_Q + """, xd)
    r = np.float32(small if t < 1.0 else big)
    return r if x == x else x
""",
}


# over LLVM's inlining threshold: a call per element would keep the loop from vectorizing, so
# Numba inlines them in its own IR (support/numba_types.py reads the mark)
_INLINE = ("_pow_f32", "_erf_f32")


def functions() -> dict:
    """The helpers as plain Python functions, by name (each backend compiles them itself)."""
    out = {}
    for name, src in SOURCES.items():
        g = {"np": np, "math": math, **CONSTS, **_F32}
        out[name] = define(src, name, g, f"<dispatch_jit vecmath {name}>")
        if name in _INLINE:
            out[name].numba_inline = "always"
    return out
