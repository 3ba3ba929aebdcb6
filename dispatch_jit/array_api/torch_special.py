"""``dj.special``: the ``torch.special`` functions that dispatch_jit's ops compute, with PyTorch's names,
signatures and defaults (the Bessel polynomials and Airy functions are not here).

>>> import dispatch_jit as dj
>>> dj.special.expit(dj.tensor([0.0])), dj.special.xlogy(dj.tensor([0.0, 2.0]), dj.tensor([0.0, 1.0]))
(tensor([0.5000]), tensor([0., 0.]))
"""

from __future__ import annotations


from dispatch_jit.errors import SchemaError
from dispatch_jit.kernels.elementwise.torch_names import mvlgamma, polygamma as _polygamma
from dispatch_jit.kernels.torch_kwargs import round as _round
from dispatch_jit.ops import entries
from dispatch_jit.registry import lookup

__all__ = ["erf", "expit", "logit", "xlogy", "log_softmax", "softmax", "logsumexp", "expm1", "exp2", "log1p",
           "round", "sinc", "erfc", "erfinv", "i0", "i0e", "i1", "i1e", "ndtr", "ndtri", "log_ndtr", "erfcx", "entr",
           "gammaln", "digamma", "psi", "polygamma", "multigammaln", "xlog1py", "zeta", "logit"]

_ops = entries("aten")


def _no_out(name: str, out) -> None:
    if out is not None:
        raise SchemaError(f"special.{name}: out= is not supported by dispatch_jit; assign the result instead")


def _unary(name: str, opname: str, doc: str):
    def fn(input, *, out=None):  # noqa: A002  (PyTorch's argument name)
        _no_out(name, out)
        return lookup(f"aten::{opname}").entry(input)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


erf = _unary("erf", "erf", "The error function, as ``torch.special.erf``.")
expit = _unary("expit", "sigmoid", "The logistic sigmoid ``1 / (1 + exp(-x))``, as ``torch.special.expit``.")
expm1 = _unary("expm1", "expm1", "``exp(x) - 1``, accurate near 0.")
log1p = _unary("log1p", "log1p", "``log(1 + x)``, accurate near 0.")


exp2 = _unary("exp2", "exp2", "``2 ** x``, as ``torch.special.exp2``.")
sinc = _unary("sinc", "sinc", "The normalized sinc ``sin(pi x) / (pi x)``, 1 at 0.")
erfc = _unary("erfc", "erfc", "The complementary error function ``1 - erf(x)``.")
erfinv = _unary("erfinv", "erfinv", "The inverse error function (+-inf at +-1).")
i0 = _unary("i0", "i0", "The modified Bessel function of the first kind, order 0.")
i0e = _unary("i0e", "special_i0e", "``exp(-|x|) i0(x)``.")
i1 = _unary("i1", "special_i1", "The modified Bessel function of the first kind, order 1.")
i1e = _unary("i1e", "special_i1e", "``exp(-|x|) i1(x)``.")
ndtr = _unary("ndtr", "special_ndtr", "The standard normal CDF.")
ndtri = _unary("ndtri", "special_ndtri", "The standard normal quantile (the inverse of ndtr).")
log_ndtr = _unary("log_ndtr", "special_log_ndtr", "``log(ndtr(x))``, accurate in the left tail.")
erfcx = _unary("erfcx", "special_erfcx", "The scaled complementary error function ``exp(x**2) erfc(x)``.")
entr = _unary("entr", "special_entr", "``-x log(x)`` (0 at 0, -inf below 0).")
gammaln = _unary("gammaln", "lgamma", "``log|gamma(x)|``, as ``torch.special.gammaln``.")
digamma = _unary("digamma", "digamma", "The logarithmic derivative of gamma.")
psi = _unary("psi", "digamma", "digamma, as ``torch.special.psi``.")


def logit(input, eps=None, *, out=None):  # noqa: A002
    """``log(p / (1 - p))``, ``p`` clamped to ``[eps, 1 - eps]`` first when ``eps`` is given.

    >>> import dispatch_jit as dj
    >>> dj.special.logit(dj.tensor([0.5, 1.0]), eps=0.25)
    tensor([0.0000, 1.0986])
    """
    _no_out("logit", out)
    return lookup("aten::logit").entry(input, eps=-1.0 if eps is None else float(eps))


def polygamma(n, input, *, out=None):  # noqa: A002
    """The ``n``-th derivative of digamma, as ``torch.special.polygamma(n, input)``."""
    _no_out("polygamma", out)
    return _polygamma(n, input)


def multigammaln(input, p, *, out=None):  # noqa: A002
    """The multivariate log-gamma of dimension ``p`` (``torch.mvlgamma``)."""
    _no_out("multigammaln", out)
    return mvlgamma(input, p)


def xlog1py(input, other, *, out=None):  # noqa: A002
    """``x * log1p(y)``, 0 where ``x`` is 0 (unless ``y`` is NaN).

    >>> import dispatch_jit as dj
    >>> dj.special.xlog1py(dj.tensor([0.0, 2.0]), dj.tensor([-1.0, 0.0]))
    tensor([0., 0.])
    """
    _no_out("xlog1py", out)
    return lookup("aten::special_xlog1py.Tensor").entry(input, other)


def zeta(input, other, *, out=None):  # noqa: A002
    """The Hurwitz zeta function ``sum_k (k + other) ** -input``."""
    _no_out("zeta", out)
    return lookup("aten::special_zeta.Tensor").entry(input, other)


def xlogy(input, other, *, out=None):  # noqa: A002
    """``x * log(y)``, 0 where ``x`` is 0, as ``torch.special.xlogy``."""
    _no_out("xlogy", out)
    return lookup("aten::xlogy.Tensor").entry(input, other)


def log_softmax(input, dim, *, dtype=None):  # noqa: A002
    """``log(softmax(x))`` along ``dim``, computed stably."""
    return _ops.log_softmax(input, dim, dtype=dtype)


def softmax(input, dim, *, dtype=None):  # noqa: A002
    """``exp(x) / sum(exp(x))`` along ``dim``."""
    return _ops.softmax(input, dim, dtype=dtype)


def logsumexp(input, dim, keepdim=False, *, out=None):  # noqa: A002
    """``log(sum(exp(x)))`` over ``dim``, computed stably."""
    _no_out("logsumexp", out)
    return _ops.logsumexp(input, [dim] if isinstance(dim, int) else list(dim), keepdim)


def round(input, *, decimals=0, out=None):  # noqa: A001,A002
    """Round half to even (to ``decimals`` places), as ``torch.special.round``."""
    return _round(input, decimals=decimals, out=out)
