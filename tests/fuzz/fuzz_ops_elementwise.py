"""The fuzzers' rows for the math, special-function and activation rows of the elementwise table
(kernels/elementwise/rows_math.py, rows_activation.py): fmod, lgamma, erfinv, ..., and
nn.functional's leaky_relu, elu, softplus, ....  fuzz_ops.py adds them to its ROWS (its last lines
import this module, once the names used here are defined).

The NumPy side is SciPy's special functions in float64, rounded once to the result dtype, as the
kernels compute (support/special_fns.py widens float32 to float64).  Activations without a
``torch.<name>`` are rendered as ``dj.nn.functional.<name>(x)``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import scipy.special as sp

from fuzz_ops import EXACT, OracleError, Row, _f64, _int_nonzero_divisor, _sign, binary, ew, ulps, unary

U4, U8 = ulps(4), ulps(8)


def _near(n):
    """n ulps relative plus n eps absolute: for functions with roots (lgamma at 1 and 2, digamma near
    1.46), where the result's own ulp is no measure of the argument's rounding."""
    def tol(args, p, want):
        if want.dtype.kind != "f":
            return None
        eps = float(np.finfo(want.dtype).eps)
        return n * eps + (2.0 ** -10 if want.dtype == np.float16 else 0.0), n * eps
    return tol


def _torch_f(name, **kw):
    def call(t, p):
        import torch
        return getattr(torch.nn.functional, name)(*t, **kw)
    return call


def _act(name, fn, tol=EXACT, cats="f", rule="promote", torch_kw=None, grad=True, check=None, wide=True):
    """An nn.functional activation: dj.nn.functional.<name>(x) against torch.nn.functional.<name>.
    ``wide``: the oracle computes in float64 (the row's float literals); else in the compute dtype
    (a static such as negative_slope is cast to it, as PyTorch's opmath does)."""
    kw = torch_kw or {}
    args = "".join(f", {k}={v!r}" for k, v in kw.items())
    return Row(name, "unary", (lambda a, p, n=name, s=args: f"dj.nn.functional.{n}({a[0]}{s})",), cats,
               ew(_f64(fn) if wide else fn, rule, cats, check), _torch_f(name, **kw), tol, None, grad,
               torch_skip=lambda a, p: not all(isinstance(x, np.ndarray) and x.dtype.kind == "f" for x in a))


def _no_unsigned(cast, compute, args):
    if isinstance(args[0], np.ndarray) and args[0].dtype.kind == "u":
        raise OracleError("hardtanh refuses unsigned integers (a negative bound wraps around)")


def _heaviside(x, y):
    # NaN compares false both ways and gives 0, as PyTorch's (NumPy's heaviside gives NaN)
    return np.where(x == 0, y, np.where(x > 0, 1, 0)).astype(np.result_type(x, y))


def _ifmod(x, y):
    if x.dtype.kind == "f":
        return np.fmod(x, y)
    with np.errstate(all="ignore"):
        return np.fmod(x, np.where(y == 0, 1, y)).astype(x.dtype)


def _float_power(args, p):
    if any(isinstance(a, np.ndarray) and a.dtype.kind == "c" for a in args):
        raise OracleError("complex inputs are not fuzzed")
    with np.errstate(all="ignore"):
        return np.power(*[np.asarray(a, np.float64) for a in args])


def _gcd_safe(fn):
    def run(x, y):
        return fn(x, y).astype(np.result_type(x, y))
    return run


ROWS = [
    # -- math -------------------------------------------------------------------------------------
    unary("frac", lambda x: x - np.trunc(x), cats="f"),
    unary("deg2rad", _f64(np.deg2rad), "float", "f", U4, grad=True),
    unary("rad2deg", _f64(np.rad2deg), "float", "f", U4, grad=True),
    unary("exp2", _f64(np.exp2), "float", "f", U4, grad=True),
    unary("sinc", _f64(np.sinc), "float", "f", _near(8)),
    unary("sgn", _sign, cats="bif"),
    unary("positive", lambda x: x.copy(), cats="if"),
    unary("isposinf", np.isposinf, "predicate", "bif"),
    unary("isneginf", np.isneginf, "predicate", "bif"),
    unary("isreal", np.isreal, "predicate"),
    unary("erfc", _f64(sp.erfc), "float", "f", U8, grad=True),
    unary("erfinv", _f64(sp.erfinv), "float", "f", U8),
    unary("lgamma", _f64(sp.gammaln), "float", "f", _near(16)),
    unary("digamma", _f64(sp.digamma), "float", "f", _near(64)),
    unary("i0", _f64(sp.i0), "float", "f", U8, grad=True),
    binary("fmax", np.fmax, cats="bif", grad=True),
    binary("fmin", np.fmin, cats="bif", grad=True),
    binary("fmod", _ifmod, cats="if", check=_int_nonzero_divisor),
    replace(binary("heaviside", _heaviside, cats="bif"),   # PyTorch refuses mixed dtypes; dj promotes
            torch_skip=lambda a, p: len({x.dtype for x in a if isinstance(x, np.ndarray)}) > 1
            or not all(isinstance(x, np.ndarray) for x in a)),
    binary("gcd", _gcd_safe(np.gcd), cats="i"),
    binary("lcm", _gcd_safe(np.lcm), cats="i"),
    binary("logaddexp2", _f64(np.logaddexp2), cats="f", tol=_near(8), grad=True),   # x + 1 near x = -1 cancels
    Row("float_power", "binary", (lambda a, p: f"dj.float_power({a[0]}, {a[1]})",
                                  lambda a, p: f"{a[0]}.float_power({a[1]})"), "bif", _float_power,
        lambda t, p: __import__("torch").float_power(*t), U4, None, False, arity=2),
    # -- activations (``wide=False``: math.* on a float32 input computes in float32, as PyTorch's) --------------------------------------------------------------------------------
    _act("hardswish", lambda x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0),
    _act("hardsigmoid", lambda x: np.clip(x + 3.0, 0.0, 6.0) / 6.0),
    _act("hardtanh", lambda x: np.minimum(np.maximum(x, -1), 1), cats="if", check=_no_unsigned),
    _act("relu6", lambda x: np.minimum(np.maximum(x, 0), 6), cats="if", check=_no_unsigned),
    _act("leaky_relu", lambda x: np.where(x > 0, x, x * np.asarray(0.2, x.dtype)), torch_kw={"negative_slope": 0.2},
         wide=False),
    _act("elu", lambda x: np.where(x > 0, x, np.expm1(x) * 1.5), U8, torch_kw={"alpha": 1.5}, wide=False),
    _act("selu", lambda x: np.where(x > 0, x * 1.0507009873554805, np.expm1(x) * (1.6732632423543772 *
                                                                                 1.0507009873554805)), U8,
         wide=False),
    _act("celu", lambda x: np.where(x > 0, x, np.expm1(x / 2.0) * 2.0), U8, torch_kw={"alpha": 2.0}, wide=False),
    _act("softplus", lambda x: np.where(x * 2.0 > 20.0, x, np.log1p(np.exp(x * 2.0)) / 2.0), U8,
         torch_kw={"beta": 2.0}, wide=False),
    _act("softshrink", lambda x: np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, x * 0.0))),
    _act("hardshrink", lambda x: np.where((x >= -0.5) & (x <= 0.5), 0.0, x)),
    _act("softsign", lambda x: x / (1.0 + np.abs(x)), rule="float", cats="f"),
    _act("tanhshrink", lambda x: x - np.tanh(x), _near(8), rule="float", cats="f", wide=False),
    _act("mish", lambda x: x * np.tanh(np.log1p(np.exp(x))), U8, wide=False),
    _act("logsigmoid", lambda x: np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x))), U8, wide=False),
]
