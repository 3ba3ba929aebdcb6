"""The float64 building blocks of the float32 functions: log and 2**w as straight-line code.

Every float32 function of this package converts its argument to float64 (exact), computes
there with a reduction and a polynomial accurate to 2**-32 or better (each function takes
the series lengths it needs), and rounds once to float32.  The float32 result is then the
correctly rounded one except where the true value lies within ~1/100 ulp of a rounding
boundary: each function's stated bound is 0.51 ulp (tests/kernels/support/test_vecmath.py
checks it, and torch's error on the same samples).  Float64 arithmetic runs in SIMD registers as float32 does
(half as many lanes), with none of the double-float tricks a float32-only evaluation needs.

The blocks are source templates, pasted into each function (``{p}`` prefixes their names):
a nested call per block would cost each loop that uses the function a further Numba
compile, and straight-line code with selects is what LLVM's loop vectorizer needs.

* ``LOG``: ``{u}`` a positive normal float64 -> ``{p}ef`` (its exponent e, as float64) and
  ``{p}lm`` = log(m), ``{u}`` = 2**e * m with m in [sqrt(1/2), sqrt(2)).  With f = m - 1
  (exact) and s = f / (2 + f), log(m) = 2 atanh(s) = 2s + 2s(z/3 + z**2/5 + ... + z**7/15),
  z = s*s <= 0.0295; the first term left out, 2s z**8/17, is below 2**-40 relative
  (``log(terms)``: fewer terms where 2**-34 is enough).
  Other inputs (0, inf, NaN, negatives) give garbage that the caller selects away.
* ``EXP2``: ``{w}`` a float64 in [-200, 200] -> ``{p}v`` = 2**w.  w = n + r, n an integer,
  |r| <= 1/2; 2**r = e**t with t = r ln 2, |t| <= 0.347, as its Taylor series to t**11
  (the rest below 2**-44 relative; ``exp2(terms)``: fewer where less is enough); 2**n
  built from the bits.  Subnormal float32 results are
  normal float64 ones, so they round once, as libm's and torch's do.
"""

from __future__ import annotations

import math

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ..intrinsics import _bitcast
from .fma import fma

__all__ = ["LOG", "EXP2", "log", "exp2", "CONSTS", "estrin"]

f64_from_bits = intrinsic(_bitcast("f64_from_bits", types.int64, types.float64, ir.DoubleType()))
bits_from_f64 = intrinsic(_bitcast("bits_from_f64", types.float64, types.int64, ir.IntType(64)))


def estrin(var: str, coeffs: list, sq: str | None = None) -> str:
    """The polynomial sum(c[i] var**i) in Estrin's form: pairs c0 + c1 var, then pairs of pairs
    with var**2, var**4, ...  Half the dependency chain of Horner's rule, which matters for
    the scalar (unvectorized) uses and costs nothing vectorized.  Each step a fused
    multiply-add (``_fma``, fma.py): one instruction and one rounding."""
    terms = [f"_fma({var}, {b!r}, {a!r})" for a, b in zip(coeffs[0::2], coeffs[1::2])]
    if len(coeffs) % 2:
        terms.append(repr(coeffs[-1]))
    power = sq or f"({var} * {var})"
    while len(terms) > 1:
        nxt = [f"_fma({power}, {b}, {a})" for a, b in zip(terms[0::2], terms[1::2])]
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms, power = nxt, f"({power} * {power})"
    return terms[0]





def _exp_poly(terms: int) -> str:
    """e**t = sum_k t**k / k!, k < terms (12: the rest below 2**-44 relative for |t| <= 0.347)."""
    return estrin("{p}t", [1.0 / math.factorial(k) for k in range(terms)])

CONSTS = {
    "_f64": f64_from_bits, "_i64": bits_from_f64, "_fma": fma,
    "_SQRT_HALF_BITS": 0x3FE6A09E667F3BCD,     # the bits of sqrt(1/2)
    "_LN2": math.log(2.0), "_LOG2E": 1.0 / math.log(2.0),
    "_F64_INF": math.inf, "_F64_NAN": math.nan,
}



def log(terms: int = 7) -> str:
    """The LOG block with ``terms`` terms of the atanh series after 2s: 2s z**k / (2k + 1),
    k = 1..terms (7: the rest below 2**-40 relative; 5: below 2**-34)."""
    poly = estrin("{p}z", [2.0 / (2 * k + 1) for k in range(1, terms + 1)])
    return """
    {p}b = _i64({u}) - _SQRT_HALF_BITS
    {p}k = {p}b >> 52
    {p}m = _f64(_i64({u}) - ({p}k << 52))
    {p}f = {p}m - 1.0
    {p}s = {p}f / (2.0 + {p}f)
    {p}z = {p}s * {p}s
    {p}lm = ({p}s + {p}s) + {p}s * {p}z * """ + poly + """
    {p}ef = np.float64({p}k)"""


LOG = log()



def exp2(terms: int = 12) -> str:
    """The EXP2 block with a Taylor series of ``terms`` terms (fewer where the caller needs less)."""
    return """
    {p}n = np.floor({w} + 0.5)
    {p}t = ({w} - {p}n) * _LN2
    {p}v = """ + _exp_poly(terms) + """ * _f64((np.int64({p}n) + 1023) << 52)"""


EXP2 = exp2()
