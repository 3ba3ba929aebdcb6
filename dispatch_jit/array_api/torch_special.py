"""``dj.special``: the ``torch.special`` functions that dispatch_jit's ops compute, with PyTorch's names,
signatures and defaults.  Missing for now (no kernel): erfc, erfinv, gammaln, digamma, i0, ndtr, ...

>>> import dispatch_jit as dj
>>> dj.special.expit(dj.tensor([0.0])), dj.special.xlogy(dj.tensor([0.0, 2.0]), dj.tensor([0.0, 1.0]))
(tensor([0.5000]), tensor([0., 0.]))
"""

from __future__ import annotations

import math

from dispatch_jit.dtypes import COMPLEX, FLOAT
from dispatch_jit.errors import SchemaError
from dispatch_jit.kernels.torch_kwargs import round as _round
from dispatch_jit.ops import entries
from dispatch_jit.registry import lookup

__all__ = ["erf", "expit", "logit", "xlogy", "log_softmax", "softmax", "logsumexp", "expm1", "exp2", "log1p",
           "round", "sinc"]

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


def exp2(input, *, out=None):  # noqa: A002
    """``2 ** x``, as ``torch.special.exp2``; integers compute in the default float dtype."""
    _no_out("exp2", out)
    return _ops.pow(2.0, input if input.dtype.category in (FLOAT, COMPLEX) else input.float())


def logit(input, eps=None, *, out=None):  # noqa: A002
    """``log(p / (1 - p))``, ``p`` clamped to ``[eps, 1 - eps]`` first when ``eps`` is given.

    >>> import dispatch_jit as dj
    >>> dj.special.logit(dj.tensor([0.5, 1.0]), eps=0.25)
    tensor([0.0000, 1.0986])
    """
    _no_out("logit", out)
    z = input if eps is None else _ops.clamp(input, eps, 1 - eps)
    return _ops.log(_ops.div(z, _ops.sub(1, z)))


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


def sinc(input, *, out=None):  # noqa: A002
    """The normalized sinc ``sin(pi x) / (pi x)``, 1 at 0."""
    _no_out("sinc", out)
    x = input if input.dtype.category in (FLOAT, COMPLEX) else input.float()
    px = _ops.mul(x, math.pi)
    return _ops.where(_ops.eq(x, 0), 1.0, _ops.div(_ops.sin(px), px))
