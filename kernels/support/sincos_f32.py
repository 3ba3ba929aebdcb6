"""float32 sin and cos that LLVM can vectorize, exact over the whole float32 range.

libm's ``sinf``/``cosf`` are opaque calls per element (the PyPI llvmlite has
no vector math library), 2-3x slower than PyTorch's SIMD versions.  Here the
argument is reduced in float64, x = n*pi + r, and sin(r) on [-pi/2, pi/2] is
its Taylor series to r**13, both as fused multiply-adds (vecmath/fma.py: 0.75x
the time of the unfused form); the float64 result rounded to float32 is within
0.52 ulp of the true value (measured 0.511 on random bit patterns, on every
exponent, and near multiples of pi/2).

* Below ``FAST_MAX`` = 2**24, Cody-Waite: pi in three parts, the first two
  short enough that n * part is exact (n < 2**23).
* From 2**24 up, a float32 is m * 2**k with m < 2**24 an integer, so
  x/pi mod 2 = m * (2**k/pi mod 2): the second factor comes from a table per
  exponent, in three float64 parts (29 + 29 + 53 bits) so that the products
  by m are exact (Payne and Hanek's idea, with the table read by exponent).

Each op has two forms, generated from one template:

* ``_sin_f32(x)``: exact everywhere.  It is the op's scalar definition, so
  the eager kernels and the fused code of compiled mode compute the same bits
  for the same element.  LLVM still vectorizes it (both reductions computed,
  one selected), but the table reads cost ~1 ns an element;
* ``_sin_f32_fast(x)``: the Cody-Waite form alone.  The eager kernels run it
  over a chunk after a vectorized scan found every |x| < 2**24 there
  (``GUARD``); it then equals ``_sin_f32`` bit for bit (the same operations,
  no fast-math contraction).  NaN passes the guard: both forms return NaN.

sin(-0.0) is -0.0; inf gives NaN.
"""

from __future__ import annotations

import math

import numpy as np

from dispatch_jit.jit.source import define

from .intrinsics import bits_from_f32
from .vecmath.fma import fma

__all__ = ["FAST_MAX", "GUARD", "GUARD_GLOBALS", "FAST_FORMS", "functions"]

FAST_MAX = np.float32(2.0 ** 24)
# the guard of one element, over the name x: the chunk runs the fast form when it is true for all
GUARD = "(abs(x) < _SINCOS_FAST_MAX) | (x != x)"
GUARD_GLOBALS = {"_SINCOS_FAST_MAX": FAST_MAX}


_PREC = 400


def _pi_fixed() -> int:
    """pi * 2**_PREC, from Machin's formula in integer fixed point (to a few units)."""
    one = 1 << _PREC

    def atan_inv(q: int) -> int:
        total = term = one // q
        k, sign = 1, -1
        while term:
            term //= q * q
            k += 2
            total += sign * (term // k)
            sign = -sign
        return total

    return 16 * atan_inv(5) - 4 * atan_inv(239)


def _parts(v: int, scale: int, bits: tuple) -> list:
    """The integer ``v`` / 2**scale as float64 parts of ``bits`` significant bits each, truncated."""
    out = []
    for b in bits:
        keep = v >> max(v.bit_length() - b, 0) << max(v.bit_length() - b, 0) if v else 0
        out.append(math.ldexp(keep, -scale))
        v -= keep
    return out


_PI = _pi_fixed()
# pi split 29 + 29 + 53 bits: n < 2**23 (plus a half for cos) times a 29-bit part is exact
_PI_A, _PI_B, _PI_C = _parts(_PI, _PREC, (29, 29, 53))
# rows for the exponents of float32 x >= 2**24 (biased 151..254), then one for inf/NaN:
# x = m * 2**k, k = exponent - 150; the row holds 2**k/pi mod 2
_INV_PI_FIXED = (1 << (2 * _PREC)) // _PI                 # 1/pi * 2**_PREC
_TABLE = np.array([_parts((_INV_PI_FIXED << k) % (2 << _PREC), _PREC, (29, 29, 53)) for k in range(1, 106)])
_CONSTS = {"_INV_PI": 1.0 / math.pi, "_PI_A": _PI_A, "_PI_B": _PI_B, "_PI_C": _PI_C, "_PI": math.pi,
           "_T_HI": np.ascontiguousarray(_TABLE[:, 0]), "_T_MID": np.ascontiguousarray(_TABLE[:, 1]),
           "_T_LO": np.ascontiguousarray(_TABLE[:, 2]), "_INF": np.float32(np.inf),
           "_SINCOS_FAST_MAX": FAST_MAX, "np": np, "math": math, "_bits": bits_from_f32,
           "_fma": fma}
# sin(r) = sum_j (-1)**j r**(2j+1) / (2j+1)!; the first term left out, r**15/15!, is below
# 7e-10 (2**-30) on [-pi/2, pi/2].  Pairs in s, then Horner's rule in s2, all fused: a
# dependency chain of four, where Horner's rule in s would be seven (the scalar exact form
# waits on it)
_CONSTS.update({f"_S{j}": (-1) ** j / math.factorial(2 * j + 1) for j in range(7)})
_POLY = "_fma(s2, _fma(s2, _fma(s2, _S6, _fma(s, _S5, _S4)), _fma(s, _S3, _S2)), _fma(s, _S1, _S0))"

# sin: x = n*pi + r with n the nearest integer, sin x = (-1)**n sin r.
# cos: x = (n + 1/2)*pi + r with n = floor(x/pi), cos x = (-1)**(n+1) sin r.
_FORMS = {"sin": ("0.5", "0.0"), "cos": ("0.0", "0.5")}

_TEMPLATE = """
def {name}(x):
    xd = np.float64(x)
    n = np.floor(xd * _INV_PI + {shift}) + {half}
    r = _fma(n, -_PI_C, _fma(n, -_PI_B, _fma(n, -_PI_A, xd))){large}
    s = r * r
    s2 = s * s
    v = r * ({poly})
    k = (n + {half}) * 0.5
    v = -v if np.floor(k) != k else v{tail}
    return np.float32(v)
"""
# |x| >= 2**24: n and r from the table; m carries the sign, so m * part stays exact.  Computed
# for every element and selected (a branch around the table reads keeps LLVM from vectorizing)
_LARGE = """
    a = abs(x)
    b = _bits(a)
    i = min(max((b >> np.int32(23)) - np.int32(151), np.int32(0)), np.int32(104))
    m = np.float64((b & np.int32(0x7FFFFF)) | np.int32(0x800000))
    m = -m if x < 0 else m
    p = m * _T_HI[i]
    q = m * _T_MID[i]
    nl = np.floor(p + q + {shift}) + {half}
    rl = ((p - nl) + q + m * _T_LO[i]) * _PI
    big = a >= _SINCOS_FAST_MAX
    n = nl if big else n
    r = rl if big else r"""
_INF_TAIL = """
    v = v if a < _INF else xd - xd        # inf (and NaN): NaN"""

# op -> (exact helper, fast helper)
FAST_FORMS = {op: (f"_{op}_f32", f"_{op}_f32_fast") for op in _FORMS}


def functions() -> dict:
    """The four helpers as plain Python functions, by name (each backend compiles them itself)."""
    out = {}
    for op, (shift, half) in _FORMS.items():
        exact, fast = FAST_FORMS[op]
        for name, large, tail in ((exact, _LARGE.format(shift=shift, half=half), _INF_TAIL), (fast, "", "")):
            src = _TEMPLATE.format(name=name, large=large, tail=tail, shift=shift, half=half, poly=_POLY)
            out[name] = define(src, name, dict(_CONSTS), f"<dispatch_jit {name}>")
    return out
