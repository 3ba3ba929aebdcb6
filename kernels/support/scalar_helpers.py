"""Scalar helper functions used by the expressions in elementwise/table.py.

Plain Python functions: each backend compiles them for itself (``numba.njit``
on the CPU, a device function on CUDA), so one definition serves all.  They
exist where an expression needs a branch: NaN-propagating maximum/minimum
(PyTorch's semantics, which Python's ``max`` lacks) and integer division,
remainder and power, which must never invoke undefined behaviour.

Helpers never raise.  An exception raised inside a ``prange`` loop is lost
with the worker thread that raised it (garbage for the rest of its chunk, or
a ``SystemError``), so inputs an op refuses are a ``Check`` of its
ScalarOp: the loops count the elements that fail it and raise once, after
the loop (elementwise/cpu.py, compiler/codegen.py).  For those elements the
helpers return a placeholder (0) that nobody sees.
"""

from __future__ import annotations

import cmath
import math

import numpy as np

from .intrinsics import bits_from_f32, f32_from_bits
from .sincos_f32 import functions as sincos_functions
from .special_fns import functions as special_functions
from .vecmath import functions as vecmath_functions
from .vecmath.exp_f32 import _exp_f32


def _maximum(a, b):
    # NaN propagates from either side, as torch.maximum / np.maximum
    return a if (a >= b or a != a) else b


def _minimum(a, b):
    return a if (a <= b or a != a) else b


def _sign(a):
    if a > 0:
        return 1
    if a < 0:
        return -1
    # 0 and NaN give 0, as torch.sign (NumPy's and the array API's sign keep NaN)
    return 0


def _ifloordiv(a, b):
    if b == 0:
        return a - a          # placeholder: the loop's check raises ZeroDivisionError
    if b == -1:
        # MIN // -1 wraps to MIN, as NumPy and torch (LLVM's sdiv overflows there: Numba gave 0)
        return a - a - a
    return a // b


def _iremainder(a, b):
    if b == 0 or b == -1:     # b == 0: placeholder (the loop raises); x % -1 is 0, MIN % -1 too
        return a - a
    return a % b


def _ipow(a, b):
    """a ** b by squaring, every product wrapping as NumPy's and torch's integer power
    (Numba's ``a ** b`` gave INT64_MIN for large exponents).  A negative exponent gives PyTorch's
    integer answer, 1 / a**|b| truncated: 1 for base 1, -1 or 1 for base -1 (odd or even b),
    else 0 (a Python int exponent below 0 never gets here: the op's check refuses it)."""
    zero = a - a
    # 1 and the base in a's (promoted) type: a literal 1 would make unsigned arithmetic float64
    one = zero - ~zero
    if b < 0:
        # ~zero is -1 (all bits set: the wrapping int64 form passes the base as uint64)
        if a == ~zero:
            return ~zero if b & 1 else one
        return one if a == one else zero
    r = one
    base = zero + a
    e = b
    while e != 0:
        if e & 1:
            r = r * base
        base = base * base
        e = e >> 1
    return r


def _bf16_load(u):
    """A bfloat16 (its uint16 word ``u``) as float32: the word is the float32's upper half (exact)."""
    return f32_from_bits(np.int32(np.uint32(u) << np.uint32(16)))


def _bf16_store(f):
    """float32 ``f`` rounded to bfloat16's word, to nearest, ties to even, as PyTorch's c10::BFloat16
    (dispatch_jit/bf16.py rounds arrays alike); a NaN becomes the quiet NaN 0x7FC0."""
    x = np.float32(f)
    u = np.uint32(bits_from_f32(x))
    r = np.uint16((u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16))
    if x != x:
        r = np.uint16(0x7FC0)
    return r


def _csign(z):
    # the array API's complex sign: z / |z|, and 0 at 0
    r = abs(z)
    return z - z if r == 0 else z / r


def _cdiv(a, b):
    # complex a / b.  Numba's complex division raises ZeroDivisionError at b == 0 (Python's rule,
    # whatever the error model); NumPy and PyTorch divide each part by |b.real| there: inf or nan
    if b.real == 0 and b.imag == 0:
        z = abs(b.real)
        return complex(a.real / z, a.imag / z)
    return a / b


def _cexpm1(z):
    # exp(z) - 1 without the cancellation near 0: the real part as expm1(a)cos(b) - 2sin(b/2)^2
    a, b = z.real, z.imag
    if b == 0:
        # the real axis: the real function (no inf * 0); + 0.0 makes expm1(-0 + 0j) = +0 + 0j, as
        # exp(z) - 1 rounds it (the standard's special case), where the real expm1(-0) is -0
        return complex(math.expm1(a) + 0.0, b)
    if math.isinf(a) and a < 0:
        return complex(-1.0, 0.0 * math.sin(b) if math.isfinite(b) else 0.0)   # exp(-inf + bj) is 0
    if math.isinf(a) and not math.isfinite(b):
        return complex(a, b - b)                  # +inf + NaN j
    s = math.sin(b / 2)
    return complex(math.expm1(a) * math.cos(b) - 2 * s * s, math.exp(a) * math.sin(b))


def _clog1p(z):
    # log(1 + z); near 0 the first term of the series keeps the precision 1 + z loses
    if abs(z) < 1e-8:
        return z - z * z / 2
    return cmath.log(z + 1)


def _clog2(z):
    return cmath.log(z) / math.log(2.0)


# cosh, sinh and tanh of a complex argument whose parts are not both finite: C99's special values
# (Annex G, the array API's special cases), which Numba's cmath functions do not give (they return
# NaN + NaN j for cosh(0 + inf j), -inf - inf j for cosh(inf + inf j), ...)
def _csinh(z):
    x, y = z.real, z.imag
    if math.isfinite(x) and math.isfinite(y):
        # on the real axis the real function: the formula's cosh(x) * sin(0) is inf * 0 past overflow
        return complex(math.sinh(x), y) if y == 0 else cmath.sinh(z)
    if math.isinf(x):
        if y == 0:
            return complex(x, y)
        if math.isfinite(y):
            return complex(x * math.cos(y), math.inf * math.sin(y))
        return complex(x, y - y)
    if math.isnan(x):
        return complex(x, y if y == 0 else x)
    return complex(x if x == 0 else y - y, y - y)       # finite x, y inf or NaN


def _ccosh(z):
    x, y = z.real, z.imag
    if math.isfinite(x) and math.isfinite(y):
        return complex(math.cosh(x), math.copysign(1.0, x) * y) if y == 0 else cmath.cosh(z)
    if math.isinf(x):
        if y == 0:
            return complex(math.inf, y if x > 0 else -y)
        if math.isfinite(y):
            return complex(math.inf * math.cos(y), x * math.sin(y))
        return complex(math.inf, y - y)
    if math.isnan(x):
        return complex(x, y if y == 0 else x)
    return complex(y - y, 0.0 if x == 0 else y - y)     # finite x, y inf or NaN


def _ctanh(z):
    x, y = z.real, z.imag
    if math.isinf(x):
        # the array API's tanh(+inf + yj) = 1 + 0j for y > 0 (C99 has 0 * sin(2y)): the zero takes y's sign
        return complex(math.copysign(1.0, x), math.copysign(0.0, y) if math.isfinite(y) else 0.0)
    if math.isnan(x):
        return complex(x, y if y == 0 else x)
    if not math.isfinite(y):
        return complex(x if x == 0 else y - y, y - y)
    if abs(x) > 20.0:
        # tanh has saturated (|tanh(x) - 1| < 1e-17) and the formula would divide inf by inf; the
        # imaginary part sin(2y) / (cosh(2x) + cos(2y)) is 2 sin(2y) exp(-2|x|) to double precision
        return complex(math.copysign(1.0, x), 2.0 * math.sin(2 * y) * math.exp(-2 * abs(x)))
    return cmath.tanh(z)


# inverse functions: the C99 special values Numba's cmath misses (the rest it gives)
def _cacos(z):
    if z.imag != z.imag and z.real == 0:
        return complex(math.pi / 2, z.imag)          # acos(+-0 + NaN j) = pi/2 + NaN j
    return cmath.acos(z)


def _cacosh(z):
    if z.imag != z.imag and z.real == 0:
        return complex(z.imag, math.pi / 2)          # acosh(+-0 + NaN j) = NaN + pi/2 j
    return cmath.acosh(z)


def _casinh(z):
    if z.real != z.real and z.imag == 0:
        return complex(z.real, z.imag)               # asinh(NaN + 0j) = NaN + 0j
    return cmath.asinh(z)


def _catanh(z):
    if z.imag != z.imag and z.real == 0:
        return complex(z.real, z.imag)               # atanh(+-0 + NaN j) = +-0 + NaN j
    if z.real != z.real and math.isfinite(z.imag):
        return complex(z.real, z.real)               # atanh(NaN + y j) = NaN + NaN j
    return cmath.atanh(z)


def _logaddexp(a, b):
    if a != a or b != b:
        return a + b                  # NaN
    m = a if a > b else b
    if math.isinf(m):
        return m                      # +inf wins; -inf with -inf stays -inf (no inf - inf)
    return m + math.log1p(math.exp(-abs(a - b)))


def _lshift(a, b):
    # shifting by the width or more moves every bit out (LLVM leaves such shifts undefined);
    # the count is taken as int64 so that uint64 operands do not mix with signed ones
    if b < 0 or b > 63:
        return a - a
    return a << np.int64(b)


def _rshift(a, b):
    # counts of the width or more (and negative ones, as NumPy's) leave only the sign: -1 for a
    # negative value, else 0 (a uint64 above 2**63 too, which a shift by 63 would leave 1)
    if 0 <= b <= 63:
        return a >> np.int64(b)
    return a >> np.int64(63) if a < 0 else a - a


HELPERS = {f.__name__: f for f in (_maximum, _minimum, _sign, _ifloordiv, _iremainder, _ipow, _exp_f32, _bf16_load, _bf16_store,
                                   _csign, _cdiv, _cexpm1, _clog1p, _clog2, _logaddexp, _lshift, _rshift, _csinh, _ccosh,
                                   _ctanh, _cacos, _cacosh, _casinh, _catanh)}
HELPERS.update(sincos_functions())
HELPERS.update(vecmath_functions())
HELPERS.update(special_functions())
