"""The derivative rows of the math, special-function and activation rows (elementwise/rows_math.py,
rows_activation.py): PyTorch's derivatives.yaml formulas, written with dispatch_jit ops as
derivatives.py's (so ``create_graph=True`` records them).  derivatives.py merges them into its table.
"""

from __future__ import annotations

import math

from dispatch_jit.autograd.kernel import Derivative, Grad
from dispatch_jit.errors import AutogradError
from dispatch_jit.ops import entries

__all__ = ["ROWS"]

A = entries("aten")    # the ops are defined after this module is imported
_D = Derivative
_SQRT_2PI = math.sqrt(2 * math.pi)
_SQRTPI_2 = math.sqrt(math.pi) / 2
_2_SQRTPI = 2 / math.sqrt(math.pi)
_LN2 = math.log(2.0)
_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_ALPHA = 1.6732632423543772848170429916717


def _zeros(g):
    # zeros, not g * 0: an infinite or NaN upstream gradient still gives 0, as PyTorch's zeros_like
    from dispatch_jit.creation import zeros_like
    return zeros_like(g)


def _not_differentiable(opname):
    def grad(g, s, c):
        raise AutogradError(f"the derivative for {opname} is not implemented (as in PyTorch); compute it under "
                            f"dj.no_grad() or .detach() its inputs")
    return grad


def _sinc_grad(g, s, c):
    x = s["self"]
    px = A.mul(x, math.pi)
    d = A.div(A.sub(A.mul(px, A.cos(px)), A.sin(px)), A.mul(px, x))
    return A.where(A.eq(x, 0), 0.0, A.mul(g, d))


def _logit_grad(g, s, c):
    x, eps = s["self"], c["eps"]
    d = A.div(g, A.mul(x, A.sub(1.0, x)))
    if eps < 0:
        return d
    return A.where(A.logical_or(A.lt(x, eps), A.gt(x, 1.0 - eps)), 0.0, d)


def _gelu_erf_second(x):
    """gelu''(x) = phi(x) (2 - x*x), phi the normal density."""
    return A.mul(A.mul(A.exp(A.mul(A.square(x), -0.5)), 1.0 / _SQRT_2PI), A.sub(2.0, A.square(x)))


def _gelu_tanh_second(x):
    """gelu_tanh''(x) = 2 s' + 2 x ((1 - 2s) s' u' + s (1 - s) u''): gelu_tanh(x) = x s,
    s = sigmoid(2u), u = beta (x + kappa x**3), s' = 2 s (1 - s) u'."""
    beta, kappa = math.sqrt(2.0 / math.pi), 0.044715
    s = A.sigmoid(A.mul(A.mul(A.add(x, A.mul(A.mul(A.square(x), x), kappa)), beta), 2.0))
    s1 = A.mul(s, A.sub(1.0, s))
    du = A.mul(A.add(A.mul(A.square(x), 3.0 * kappa), 1.0), beta)
    ds = A.mul(A.mul(s1, du), 2.0)
    inner = A.add(A.mul(A.mul(ds, A.sub(1.0, A.mul(s, 2.0))), du), A.mul(s1, A.mul(x, 6.0 * beta * kappa)))
    return A.add(A.mul(ds, 2.0), A.mul(A.mul(x, inner), 2.0))


def _fmaxmin(ge):
    """fmax/fmin as PyTorch: self takes g where it won (or other is NaN), other where it did not."""
    def wins(s):
        x, y = s["self"], s["other"]
        return A.logical_or(ge(x, y), A.isnan(y))
    return (Grad(lambda g, s, c: A.where(wins(s), g, 0.0), ("self", "other")),
            Grad(lambda g, s, c: A.where(wins(s), 0.0, g), ("self", "other")))


def _float_power_self(g, s, c):
    x, y = s["self"], s["other"]
    if hasattr(y, "_sig"):
        return A.where(A.eq(y, 0.0), 0.0, A.mul(g, A.mul(y, A.float_power(x, A.sub(y, 1)))))
    return A.mul(g, A.mul(A.float_power(x, y - 1), y)) if y != 0 else _zeros(g)


def _float_power_other(g, s, c):
    x, r = s["self"], s["result"]
    if not hasattr(x, "_sig"):        # a Python base: log(x) is a number
        log_x = math.log(x) if x > 0 else -math.inf if x == 0 else math.nan
        return A.mul(g, A.mul(r, log_x))
    return A.mul(g, A.where(A.logical_and(A.eq(x, 0.0), A.ge(s["other"], 0.0)), 0.0, A.mul(r, A.log(x))))


def _elu_grad(alpha, scale, input_scale):
    def grad(g, s, c):
        x = s["self"]
        a, sc, i = alpha(c), scale(c), input_scale(c)
        return A.where(A.gt(x, 0), A.mul(g, sc), A.mul(g, A.mul(A.exp(A.mul(x, i)), i * a * sc)))
    return grad


def _softplus_grad(g, s, c):
    x, beta = s["self"], c["beta"]
    z = A.exp(A.mul(x, beta))
    return A.where(A.gt(A.mul(x, beta), c["threshold"]), g, A.mul(g, A.div(z, A.add(z, 1.0))))


def _mish_grad(g, s, c):
    x = s["self"]
    t = A.tanh(A.log1p(A.exp(x)))
    return A.mul(g, A.add(t, A.mul(A.mul(x, A.sigmoid(x)), A.sub(1.0, A.mul(t, t)))))


def _i1_grad(g, s, c):
    x, r = s["self"], s["result"]
    return A.mul(g, A.where(A.eq(x, 0), 0.5, A.sub(A.i0(x), A.div(r, x))))


def _i1e_grad(g, s, c):
    x, r = s["self"], s["result"]
    return A.mul(g, A.where(A.eq(x, 0), 0.5, A.sub(A.special_i0e(x), A.mul(r, A.add(A.sgn(x), A.reciprocal(x))))))


ROWS: dict[str, Derivative] = {
    # -- math --------------------------------------------------------------------------------------
    "frac": _D("FracBackward", lambda g, s, c: g),
    "deg2rad": _D("Deg2RadBackward", lambda g, s, c: A.mul(g, math.pi / 180)),
    "rad2deg": _D("Rad2DegBackward", lambda g, s, c: A.mul(g, 180 / math.pi)),
    "exp2": _D("Exp2Backward", lambda g, s, c: A.mul(g, A.mul(s["result"], _LN2)), ("result",)),
    "sinc": _D("SincBackward", _sinc_grad, ("self",)),
    "sgn": _D("SgnBackward", lambda g, s, c: _zeros(g)),
    "positive": _D("PositiveBackward", lambda g, s, c: g),
    "erfc": _D("ErfcBackward", lambda g, s, c: A.mul(g, A.mul(A.exp(A.neg(A.square(s["self"]))), -_2_SQRTPI)),
               ("self",)),
    "erfinv": _D("ErfinvBackward", lambda g, s, c: A.mul(g, A.mul(A.exp(A.square(s["result"])), _SQRTPI_2)),
                 ("result",)),
    "lgamma": _D("LgammaBackward", lambda g, s, c: A.mul(g, A.digamma(s["self"])), ("self",)),
    "digamma": _D("DigammaBackward", lambda g, s, c: A.mul(g, A.polygamma(s["self"], n=1)), ("self",)),
    "polygamma": _D("PolygammaBackward", lambda g, s, c: A.mul(g, A.polygamma(s["self"], n=c["n"] + 1)), ("self",)),
    "logit": _D("LogitBackward", _logit_grad, ("self",)),
    "i0": _D("I0Backward", lambda g, s, c: A.mul(g, A.special_i1(s["self"])), ("self",)),
    "special_i0e": _D("SpecialI0EBackward", lambda g, s, c: A.mul(g, A.sub(
        A.special_i1e(s["self"]), A.mul(A.sgn(s["self"]), s["result"]))), ("self", "result")),
    "special_i1": _D("SpecialI1Backward", _i1_grad, ("self", "result")),
    "special_i1e": _D("SpecialI1EBackward", _i1e_grad, ("self", "result")),
    "special_ndtr": _D("SpecialNdtrBackward", lambda g, s, c: A.mul(g, A.div(
        A.exp(A.mul(A.square(s["self"]), -0.5)), _SQRT_2PI)), ("self",)),
    "special_ndtri": _D("SpecialNdtriBackward", lambda g, s, c: A.mul(g, A.mul(
        A.exp(A.mul(A.square(s["result"]), 0.5)), _SQRT_2PI)), ("result",)),
    "special_log_ndtr": _D("SpecialLogNdtrBackward", lambda g, s, c: A.mul(g, A.div(A.exp(
        A.sub(A.mul(A.square(s["self"]), -0.5), s["result"])), _SQRT_2PI)), ("self", "result")),
    "special_erfcx": _D("SpecialErfcxBackward", lambda g, s, c: A.mul(g, A.sub(
        A.mul(A.mul(s["self"], s["result"]), 2.0), _2_SQRTPI)), ("self", "result")),
    "special_entr": _D("SpecialEntrBackward", lambda g, s, c: A.mul(g, A.neg(A.add(A.log(s["self"]), 1.0))),
                       ("self",)),
    "nan_to_num": _D("NanToNumBackward", lambda g, s, c: A.where(A.isfinite(s["self"]), g, 0.0), ("self",)),
    "fmax.Tensor": _D("FmaxBackward", _fmaxmin(lambda x, y: A.ge(x, y))),
    "fmin.Tensor": _D("FminBackward", _fmaxmin(lambda x, y: A.le(x, y))),
    "fmod.Tensor": _D("FmodBackward", (Grad(lambda g, s, c: g), Grad(lambda g, s, c: A.mul(
        A.neg(g), A.trunc(A.div(s["self"], s["other"]))), ("self", "other")))),
    "heaviside.Tensor": _D("HeavisideBackward", _not_differentiable("aten::heaviside")),
    "logaddexp2.Tensor": _D("Logaddexp2Backward", (
        Grad(lambda g, s, c: A.div(g, A.add(A.exp2(A.sub(s["other"], s["self"])), 1.0)), ("self", "other")),
        Grad(lambda g, s, c: A.div(g, A.add(A.exp2(A.sub(s["self"], s["other"])), 1.0)), ("self", "other")))),
    "ldexp.Tensor": _D("LdexpBackward", (Grad(lambda g, s, c: A.mul(g, A.exp2(s["other"])), ("other",)),
                                         Grad(lambda g, s, c: A.mul(g, A.mul(s["result"], _LN2)), ("result",)))),
    "float_power.Tensor": _D("FloatPowerBackward", (Grad(_float_power_self, ("self", "other")),
                                                    Grad(_float_power_other, ("self", "other", "result")))),
    "special_xlog1py.Tensor": _D("SpecialXlog1pyBackward", (
        Grad(lambda g, s, c: A.where(A.logical_and(A.eq(s["self"], 0), A.le(s["other"], -1)), 0.0,
                                     A.special_xlog1py(g, s["other"])), ("self", "other")),
        Grad(lambda g, s, c: A.div(A.mul(g, s["self"]), A.add(s["other"], 1.0)), ("self", "other")))),
    "special_zeta.Tensor": _D("SpecialZetaBackward", (
        Grad(_not_differentiable("aten::special_zeta (its first argument)")),
        Grad(lambda g, s, c: A.mul(g, A.mul(A.neg(s["self"]), A.special_zeta(A.add(s["self"], 1.0), s["other"]))),
             ("self", "other")))),
    # -- activations --------------------------------------------------------------------------------
    # PyTorch's hardswish_backward: 0 up to -3 included, the slope below 3, g from 3 on
    "hardswish": _D("HardswishBackward", lambda g, s, c: A.where(A.le(s["self"], -3.0), 0.0, A.where(
        A.lt(s["self"], 3.0), A.mul(g, A.add(A.div(s["self"], 3.0), 0.5)), g)), ("self",)),
    "hardsigmoid": _D("HardsigmoidBackward", lambda g, s, c: A.where(A.logical_and(
        A.gt(s["self"], -3.0), A.lt(s["self"], 3.0)), A.div(g, 6.0), 0.0), ("self",)),
    "hardtanh": _D("HardtanhBackward", lambda g, s, c: A.where(A.logical_or(
        A.le(s["self"], c["min_val"]), A.ge(s["self"], c["max_val"])), 0.0, g), ("self",)),
    "leaky_relu": _D("LeakyReluBackward", lambda g, s, c: A.where(
        A.gt(s["self"], 0), g, A.mul(g, c["negative_slope"])), ("self",)),
    "elu": _D("EluBackward", _elu_grad(lambda c: c["alpha"], lambda c: c["scale"], lambda c: c["input_scale"]),
              ("self",)),
    "selu": _D("SeluBackward", _elu_grad(lambda c: _SELU_ALPHA, lambda c: _SELU_SCALE, lambda c: 1.0), ("self",)),
    "celu": _D("CeluBackward", _elu_grad(lambda c: c["alpha"], lambda c: 1.0, lambda c: 1.0 / c["alpha"]), ("self",)),
    "softplus": _D("SoftplusBackward", _softplus_grad, ("self",)),
    "softshrink": _D("SoftshrinkBackward", lambda g, s, c: A.where(
        A.gt(A.abs(s["self"]), c["lambd"]), g, 0.0), ("self",)),
    "hardshrink": _D("HardshrinkBackward", lambda g, s, c: A.where(A.logical_and(
        A.ge(s["self"], -c["lambd"]), A.le(s["self"], c["lambd"])), 0.0, g), ("self",)),
    "threshold": _D("ThresholdBackward", lambda g, s, c: A.where(A.le(s["self"], c["threshold"]), 0.0, g),
                    ("self",)),
    "softsign": _D("SoftsignBackward", lambda g, s, c: A.div(g, A.square(A.add(A.abs(s["self"]), 1.0))),
                   ("self",)),
    "tanhshrink": _D("TanhshrinkBackward", lambda g, s, c: A.mul(g, A.square(A.tanh(s["self"]))), ("self",)),
    "mish": _D("MishBackward", _mish_grad, ("self",)),
    "log_sigmoid": _D("LogSigmoidBackward", lambda g, s, c: A.mul(g, A.sigmoid(A.neg(s["self"]))), ("self",)),
    # gelu's rows: the backward is one op (PyTorch's gelu_backward), with its own row below
    "_gelu_erf": _D("GeluBackward", lambda g, s, c: A._gelu_erf_backward(g, s["self"]), ("self",)),
    "_gelu_tanh": _D("GeluBackward", lambda g, s, c: A._gelu_tanh_backward(g, s["self"]), ("self",)),
    # second derivatives: linear in g; in x, g * gelu''(x)
    "_gelu_erf_backward.Tensor": _D("GeluBackwardBackward", (
        Grad(lambda gg, s, c: A._gelu_erf_backward(gg, s["other"]), ("other",)),
        Grad(lambda gg, s, c: A.mul(A.mul(gg, s["self"]), _gelu_erf_second(s["other"])), ("self", "other")))),
    "_gelu_tanh_backward.Tensor": _D("GeluBackwardBackward", (
        Grad(lambda gg, s, c: A._gelu_tanh_backward(gg, s["other"]), ("other",)),
        Grad(lambda gg, s, c: A.mul(A.mul(gg, s["self"]), _gelu_tanh_second(s["other"])), ("self", "other")))),
    "_prelu_kernel.Tensor": _D("PreluKernelBackward", (
        Grad(lambda g, s, c: A.where(A.gt(s["self"], 0), g, A.mul(g, s["other"])), ("self", "other")),
        Grad(lambda g, s, c: A.where(A.gt(s["self"], 0), 0.0, A.mul(g, s["self"])), ("self",)))),
}
