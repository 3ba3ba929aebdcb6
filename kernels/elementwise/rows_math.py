"""The elementwise table's math and special-function rows (torch's fmod, lgamma, special.i0e, ...).

Rows as table.py's: one scalar expression each, from which the eager CPU and CUDA kernels and the
fused loops of compiled mode are generated.  The special functions are support/special_fns.py's
helpers (their accuracy is stated there); PyTorch's type rules: integer inputs of a float function
compute in the default float dtype ("float"), ``float_power`` in float64 ("double").
"""

from __future__ import annotations

from dispatch_jit.dtypes import BOOL, COMPLEX, INT

from .scalar_op import ALL, FLT, FLT_C, INTS, NUM, REAL, REAL_B, Check, ScalarOp

__all__ = ["ROWS"]

_FMOD0 = Check("y == 0", "ZeroDivisionError", "fmod: integer division by zero; mask the zero divisors "
               "or compute in floating point (x.to(dj.float32))")
_DEG = 0.017453292519943295      # pi / 180
_RAD = 57.29577951308232         # 180 / pi


def _f(name, expr, **kw):
    """A float function of one input: integers compute in the default float dtype."""
    return ScalarOp(name, 1, expr, rule="float", cats=FLT, **kw)


ROWS = [
    # -- unary ----------------------------------------------------------------------------------
    ScalarOp("frac", 1, "x - np.trunc(x)", cats=FLT),
    _f("deg2rad", "x * 0.017453292519943295", by_cat={"float32": f"x * np.float32({_DEG!r})"}),
    _f("rad2deg", "x * 57.29577951308232", by_cat={"float32": f"x * np.float32({_RAD!r})"}),
    _f("exp2", "_exp2(x)"),
    _f("sinc", "_sinc(x)"),
    ScalarOp("sgn", 1, "_sign(x)", cats=ALL, by_cat={COMPLEX: "_csign(x)", BOOL: "x"}),
    ScalarOp("positive", 1, "x", cats=NUM, inplace=False),
    ScalarOp("isposinf", 1, "math.isinf(x) and x > _zero", rule="predicate", cats=REAL_B, by_cat={INT: "False", BOOL: "False"},
             inplace=False),
    ScalarOp("isneginf", 1, "math.isinf(x) and x < _zero", rule="predicate", cats=REAL_B, by_cat={INT: "False", BOOL: "False"},
             inplace=False),
    ScalarOp("isreal", 1, "True", rule="predicate", cats=ALL, by_cat={COMPLEX: "x.imag == 0"}, inplace=False),
    _f("erfc", "_erfc(x)"),
    _f("erfinv", "_erfinv(x)"),
    _f("lgamma", "_lgamma(x)"),
    _f("logit", "_logit(x, eps)", statics=("float eps=-1.0",), function=False, method=False),
    _f("digamma", "_digamma(x)"),
    _f("i0", "_i0(x)"),
    # torch.special's: no method, no in-place form (dj.special.<name>)
    _f("special_i0e", "_i0e(x)", inplace=False, method=False, function=False),
    _f("special_i1", "_i1(x)", inplace=False, method=False, function=False),
    _f("special_i1e", "_i1e(x)", inplace=False, method=False, function=False),
    _f("special_ndtr", "_ndtr(x)", inplace=False, method=False, function=False),
    _f("special_ndtri", "_ndtri(x)", inplace=False, method=False, function=False),
    _f("special_log_ndtr", "_log_ndtr(x)", inplace=False, method=False, function=False),
    _f("special_erfcx", "_erfcx(x)", inplace=False, method=False, function=False),
    _f("special_entr", "_entr(x)", inplace=False, method=False, function=False),
    # polygamma's order is a static int (torch.polygamma(n, x) is a Python function over it)
    _f("polygamma", "_polygamma(n, x)", statics=("int n",), function=False, method=False, inplace=False),
    # -- binary ---------------------------------------------------------------------------------
    ScalarOp("fmax", 2, "_fmax(x, y)", cats=REAL_B, inplace=False),
    ScalarOp("fmin", 2, "_fmin(x, y)", cats=REAL_B, inplace=False),
    ScalarOp("fmod", 2, "np.fmod(x, y)", cats=REAL, by_cat={INT: "_ifmod(x, y)"}, checks={INT: _FMOD0}),
    # x == 0 takes the values; NaN compares false both ways and gives 0, as PyTorch's
    ScalarOp("heaviside", 2, "y if x == 0 else (_one if x > _zero else _zero)", cats=REAL_B),
    ScalarOp("gcd", 2, "_gcd(x, y)", cats=INTS),
    ScalarOp("lcm", 2, "_lcm(x, y)", cats=INTS),
    ScalarOp("logaddexp2", 2, "_logaddexp2(x, y)", cats=FLT, inplace=False),
    ScalarOp("ldexp", 2, "x * _exp2(y)", rule="float", cats=FLT),
    ScalarOp("float_power", 2, "x ** y", rule="double", cats=FLT_C),
    ScalarOp("special_xlog1py", 2, "_xlog1py(x, y)", rule="float", cats=FLT, inplace=False, method=False,
             function=False),
    ScalarOp("special_zeta", 2, "_zeta(x, y)", rule="float", cats=FLT, inplace=False, method=False, function=False),
]
ROWS.append(ScalarOp("nan_to_num", 1, "nan if x != x else (x if not math.isinf(x) else (posinf if x > _zero else neginf))",
                     cats=FLT, statics=("float nan", "float posinf", "float neginf"), function=False, method=False))
