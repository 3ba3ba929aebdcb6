"""Scalar special functions for the elementwise rows of kernels/elementwise/rows_math.py.

Numba's ``math`` has erf, erfc and lgamma; these are the others PyTorch's elementwise ops need
(erfinv, digamma, Hurwitz zeta, the modified Bessel functions, the normal distribution's
functions), written as plain Python over ``math`` so that one definition serves the eager CPU
kernels, the fused loops and CUDA (support/scalar_helpers.py registers them with the others).

Every function computes in float64 whatever its argument (a float32 input is widened once), so a
float32 result is the float64 value rounded once.  Accuracy in float64, against SciPy over each
domain with its tails (tests/kernels/elementwise/test_special_fns.py asserts these bounds):
erfinv and ndtri within 4 ulp (a rational first guess, then Newton steps on erf, or on log erfc
in the tails); i0, i1 and their scaled forms within 8 ulp (the power series, all of whose terms
are positive, up to 30; the asymptotic expansion above); erfcx within 8 ulp (exp(x^2) from an
exactly split x^2); digamma within 64 ulp for x > 0 (Cephes' psi: recurrence to x >= 10, then the
asymptotic series; measured relative to max(|result|, 1) around its root) and 512 ulp near the
poles of x < 0; zeta and polygamma within 64 ulp (Cephes' Euler-Maclaurin sum).  ndtr and
log_ndtr are PyTorch's formulas over erfc and erfcx: in the tails their error grows as x^2 / 2 ulp
(the rounding of x / sqrt 2), as PyTorch's does.  Helpers never raise (see scalar_helpers), also
where CUDA's simulator runs them as Python (domains are tested before math is called).
"""

from __future__ import annotations

import math

from numba.extending import register_jitable

_INF = math.inf
_NAN = math.nan
_TWO_OVER_SQRTPI = 2.0 / math.sqrt(math.pi)
_SQRT2 = math.sqrt(2.0)
_SQRT1_2 = math.sqrt(0.5)
_INV_SQRTPI = 1.0 / math.sqrt(math.pi)
_LOG_SQRTPI = 0.5 * math.log(math.pi)
_MACHEP = 1.11022302462515654042e-16
_INV_LN2 = 1.0 / math.log(2.0)
_PSI_10 = 2.25175258906672110764
# Cephes psi's asymptotic coefficients (highest degree first) and zeta's Euler-Maclaurin divisors
_PSI_A = (8.33333333333333333333e-2, -2.10927960927960927961e-2, 7.57575757575757575758e-3,
          -4.16666666666666666667e-3, 3.96825396825396825397e-3, -8.33333333333333333333e-3,
          8.33333333333333333333e-2)
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
           1.8152105401943546773e17, -7.1661652561756670113e18)


@register_jitable
def _is_int(x):
    """Whether a finite float is an integer (math.floor returns an int64 in Numba, which overflows
    past 2**63: x % 1.0 stays a float)."""
    return x % 1.0 == 0.0


@register_jitable
def _erfinv_guess(c):
    """Giles' single-precision approximation of erfinv(1 - c) (c in (0, 1]), widened to the far
    tail by the asymptotic t^2 = -log(c t sqrt(pi)) where his polynomials stop."""
    a = 1.0 - c
    w = -math.log(c * (2.0 - c))
    if w < 5.0:
        w = w - 2.5
        p = 2.81022636e-08
        p = 3.43273939e-07 + p * w
        p = -3.5233877e-06 + p * w
        p = -4.39150654e-06 + p * w
        p = 0.00021858087 + p * w
        p = -0.00125372503 + p * w
        p = -0.00417768164 + p * w
        p = 0.246640727 + p * w
        p = 1.50140941 + p * w
        return p * a
    if w < 30.0:
        w = math.sqrt(w) - 3.0
        p = -0.000200214257
        p = 0.000100950558 + p * w
        p = 0.00134934322 + p * w
        p = -0.00367342844 + p * w
        p = 0.00573950773 + p * w
        p = -0.0076224613 + p * w
        p = 0.00943887047 + p * w
        p = 1.00167406 + p * w
        p = 2.83297682 + p * w
        return p * a
    t = math.sqrt(-math.log(c))
    for _ in range(4):
        t = math.sqrt(-math.log(c * t * math.sqrt(math.pi)))
    return t


@register_jitable
def _erfinv_abs(a, c):
    """t >= 0 with erf(t) = a, given a = |y| and c = 1 - a (exact where the caller has it: the
    tail's Newton steps read c, whose bits 1 - a would lose)."""
    t = _erfinv_guess(c) if a >= 0.5 else _erfinv_guess(1.0 - a)
    for _ in range(6):
        e = math.exp(-t * t)
        if a < 0.5:
            step = (math.erf(t) - a) / (_TWO_OVER_SQRTPI * e)
        else:
            # in the tail, Newton on log(erfc(t)) - log(c): it converges from a far guess
            ec = math.erfc(t)
            if ec == 0.0 or e == 0.0:
                break
            step = -(math.log(ec) - math.log(c)) * ec / (_TWO_OVER_SQRTPI * e)
        t = t - step
        if abs(step) <= 1e-16 * t:
            break
    return t


def _erfinv(y):
    """Inverse error function: +-inf at +-1, NaN outside [-1, 1]."""
    y = float(y)
    if y != y or y < -1.0 or y > 1.0:
        return _NAN
    a = abs(y)
    if a == 1.0:
        return math.copysign(_INF, y)
    if a == 0.0:
        return y
    return math.copysign(_erfinv_abs(a, 1.0 - a), y)


def _ndtri(p):
    """The standard normal quantile: -inf at 0, inf at 1, NaN outside [0, 1]."""
    p = float(p)
    if p != p or p < 0.0 or p > 1.0:
        return _NAN
    if p == 0.0:
        return -_INF
    if p == 1.0:
        return _INF
    if 0.25 < p < 0.75:
        y = 2.0 * p - 1.0                      # exact (Sterbenz)
        return _SQRT2 * math.copysign(_erfinv_abs(abs(y), 1.0 - abs(y)), y)
    if p < 0.5:
        return -_SQRT2 * _erfinv_abs(1.0 - 2.0 * p, 2.0 * p)
    q = 1.0 - p                                # exact for p >= 0.5
    return _SQRT2 * _erfinv_abs(1.0 - 2.0 * q, 2.0 * q)


def _ndtr(x):
    x = float(x)
    return 0.5 * math.erfc(-x * _SQRT1_2)


def _erfcx(x):
    """exp(x^2) erfc(x): the product below 25, the asymptotic series above (erfc underflows)."""
    x = float(x)
    if x != x:
        return x
    if x < 0.0:
        if x < -26.7:
            return _INF
        return 2.0 * math.exp(x * x) - _erfcx_pos(-x)
    return _erfcx_pos(x)


@register_jitable
def _erfcx_pos(x):
    if x < 25.0:
        # exp(x^2) with x^2 split as hi^2 (exact: hi has 12 fraction bits) + (x - hi)(x + hi): the
        # rounding of x * x alone would cost x^2 / 2 ulps
        hi = math.floor(x * 4096.0) / 4096.0
        return math.exp(hi * hi) * math.exp((x - hi) * (x + hi)) * math.erfc(x)
    if x == _INF:
        return 0.0
    z = 1.0 / (2.0 * x * x)
    s, t = 1.0, 1.0
    for k in range(1, 12):
        t = -t * (2 * k - 1) * z
        s += t
    return s * _INV_SQRTPI / x


def _log_ndtr(x):
    """log of the standard normal CDF, PyTorch's split: erfcx below -1 (no underflow), log1p above."""
    x = float(x)
    t = x * _SQRT1_2
    if x < -1.0:
        return math.log(_erfcx_pos(-t) / 2.0) - t * t
    return math.log1p(-math.erfc(t) / 2.0)


@register_jitable
def _digamma(x):
    """Cephes' psi, as PyTorch's calc_digamma: -inf/+inf at -0/+0, NaN at the negative integers."""
    x = float(x)
    if x != x:
        return x
    if x == 0.0:
        return math.copysign(_INF, -x)
    if x < 0.0:
        if _is_int(x) or math.isinf(x):
            return _NAN
        # reflection: digamma(1 - x) - pi / tan(pi x), tan's argument reduced first (period 1)
        result = -math.pi / math.tan(math.pi * (x % 1.0))
        x = 1.0 - x
    else:
        result = 0.0
    while x < 10.0:
        result -= 1.0 / x
        x += 1.0
    if x == 10.0:
        return result + _PSI_10
    y = 0.0
    if x < 1.0e17:
        z = 1.0 / (x * x)
        p = 0.0
        for c in _PSI_A:
            p = p * z + c
        y = z * p
    return result + math.log(x) - 0.5 / x - y


@register_jitable
def _zeta(x, q):
    """The Hurwitz zeta function sum_k (k + q)^-x (Cephes' zeta, as torch.special.zeta)."""
    x, q = float(x), float(q)
    if x != x or q != q:
        return _NAN
    if x == 1.0:
        return _INF
    if x < 1.0:
        return _NAN
    if q <= 0.0:
        if _is_int(q):
            return _INF
        if not _is_int(x):
            return _NAN
    s = q ** -x
    a = q
    i = 0
    b = 0.0
    while i < 9 or a <= 9.0:
        i += 1
        a += 1.0
        b = a ** -x
        s += b
        if abs(b / s) < _MACHEP:
            return s
    w = a
    s += b * w / (x - 1.0)
    s -= 0.5 * b
    a = 1.0
    k = 0.0
    for j in range(12):
        a *= x + k
        b /= w
        t = a * b / _ZETA_A[j]
        s = s + t
        if abs(t / s) < _MACHEP:
            return s
        k += 1.0
        a *= x + k
        b /= w
        k += 1.0
    return s


def _polygamma(n, x):
    """The n-th derivative of digamma: digamma itself for n = 0, else (-1)^(n+1) n! zeta(n + 1, x)."""
    if n == 0:
        return _digamma(x)
    sign = 1.0 if n % 2 == 1 else -1.0
    return sign * math.exp(math.lgamma(n + 1.0)) * _zeta(n + 1.0, x)


@register_jitable
def _bessel_i_scaled(nu, x):
    """exp(-|x|) I_nu(|x|) for nu in (0, 1): the power series below 30 (positive terms), the
    asymptotic expansion in 1 / x above."""
    ax = abs(x)
    if ax <= 30.0:
        h = 0.5 * ax
        t = 1.0 if nu == 0 else h
        s = t
        k = 0
        while True:
            k += 1
            t *= h * h / (k * (k + nu))
            s += t
            if t <= s * 1e-17:
                break
        return s * math.exp(-ax)
    mu = 4.0 * nu * nu
    t = 1.0
    s = 1.0
    for k in range(1, 40):
        nt = -t * (mu - (2 * k - 1) ** 2) / (k * 8.0 * ax)
        if abs(nt) >= abs(t) or abs(nt) <= abs(s) * 1e-17:
            break
        t = nt
        s += t
    return s / math.sqrt(2.0 * math.pi * ax)


def _i0e(x):
    x = float(x)
    if x != x:
        return x
    if math.isinf(x):
        return 0.0
    return _bessel_i_scaled(0, x)


def _i0(x):
    x = float(x)
    if x != x or math.isinf(x):             # NaN at +-inf, as PyTorch's (SciPy gives inf)
        return _NAN
    if abs(x) > 713.99:                        # overflows (exp alone would past 709.78)
        return _INF
    return _bessel_i_scaled(0, x) * math.exp(abs(x))


def _i1e(x):
    x = float(x)
    if x != x:
        return x
    if math.isinf(x):
        return math.copysign(0.0, x)
    return math.copysign(_bessel_i_scaled(1, x), x)


def _i1(x):
    x = float(x)
    if x != x or math.isinf(x):             # NaN at +-inf, as PyTorch's
        return _NAN
    if abs(x) > 713.99:
        return math.copysign(_INF, x)
    return math.copysign(_bessel_i_scaled(1, x) * math.exp(abs(x)), x)


def _sinc(x):
    """sin(pi x) / (pi x), 1 at 0 (PyTorch's sinc)."""
    x = float(x)
    if x == 0.0:
        return 1.0
    px = math.pi * x
    return math.sin(px) / px


def _entr(x):
    """-x log(x); 0 at 0, -inf below 0 (torch.special.entr)."""
    x = float(x)
    if x != x:
        return x
    if x > 0.0:
        return -x * math.log(x)
    if x == 0.0:
        return 0.0
    return -_INF


def _xlog1py(x, y):
    """x log1p(y), 0 where x is 0 unless y is NaN (torch.special.xlog1py)."""
    x, y = float(x), float(y)
    if y != y:
        return y
    if x == 0.0:
        return 0.0
    if y <= -1.0:      # log1p's domain ends there (tested here: CUDA's simulator runs Python's math)
        return x * -_INF if y == -1.0 else _NAN
    return x * math.log1p(y)


def _logaddexp2(a, b):
    """log2(2^a + 2^b) without overflow (PyTorch's: equal infinities give themselves)."""
    a, b = float(a), float(b)
    if a != a or b != b:
        return a + b
    m = a if a > b else b
    if math.isinf(m) and a == b:
        return a
    if math.isinf(m):
        return m
    # times 1 / ln 2, as PyTorch (dividing by ln 2 rounds differently)
    return m + math.log1p(2.0 ** -abs(a - b)) * _INV_LN2


@register_jitable
def _gcd(a, b):
    """Euclid's gcd of |a| and |b| (torch.gcd: gcd(0, 0) = 0).

    abs() of a signed type's minimum overflows to itself, and Euclid (Python's %, the divisor's sign)
    then ends on -gcd (int8 gcd(-128, 1) was -1; NumPy and torch give 1): each remainder is a - q*b, so
    the last divisor is the gcd up to its sign, and the closing abs() gives it.  Only a gcd of exactly
    the minimum wraps, as NumPy's does.  (Negating instead of abs() would break the unsigned types.)"""
    a = abs(a)
    b = abs(b)
    while a != 0:
        c = a
        a = b % a
        b = c
    return abs(b)


def _lcm(a, b):
    g = _gcd(a, b)
    if g == 0:
        return g
    return abs(a // g * b)


def _ifmod(a, b):
    """C's integer remainder (the sign of the dividend), as torch.fmod; b == 0 is the loop's check."""
    if b == 0 or b == -1 or b == 1:
        return a - a
    r = a % b
    if r != 0 and (r < 0) != (a < 0):
        r -= b
    return r


def _fmax(a, b):
    # NaN loses against a number (C's fmax; torch.fmax), where maximum propagates it
    return a if (a >= b or b != b) else b


def _fmin(a, b):
    return a if (a <= b or b != b) else b


def _lgamma(x):
    """log|gamma(x)|: +inf at 0 and the negative integers (libm's; Python's math raises there)."""
    x = float(x)
    if x <= 0.0 and (_is_int(x) or math.isinf(x)):
        return _INF
    return math.lgamma(x)


def _erfc(x):
    return math.erfc(float(x))


def _exp2(x):
    """2 ** x: inf past the largest float64 and 0 below the smallest (Python's pow raises there)."""
    x = float(x)
    if x > 1024.0:
        return _INF
    if x < -1080.0:
        return 0.0
    return 2.0 ** x


def _logit(x, eps):
    """log(x / (1 - x)), x clamped to [eps, 1 - eps] first where eps >= 0 (NaN stays NaN)."""
    x, eps = float(x), float(eps)
    if eps >= 0.0:
        hi = 1.0 - eps
        x = eps if x < eps else (hi if x > hi else x)
    if x != x or x < 0.0 or x > 1.0:
        return _NAN
    if x == 1.0:
        return _INF
    if x == 0.0:
        return -_INF
    return math.log(x / (1.0 - x))


FUNCTION_NAMES = ("_erfinv", "_ndtri", "_ndtr", "_erfcx", "_log_ndtr", "_digamma", "_zeta", "_polygamma", "_i0",
                  "_i0e", "_i1", "_i1e", "_sinc", "_entr", "_xlog1py", "_logaddexp2", "_gcd", "_lcm", "_ifmod",
                  "_fmax", "_fmin", "_logit", "_lgamma", "_erfc", "_exp2")


def functions() -> dict:
    """The helpers generated expressions call, by name."""
    g = globals()
    return {name: g[name] for name in FUNCTION_NAMES}
