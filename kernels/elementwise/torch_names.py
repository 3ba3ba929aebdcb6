"""PyTorch's names over the elementwise rows whose arguments a schema cannot say as torch does:
``polygamma(n, input)`` (the order first), ``logit(input, eps=None)``, ``nan_to_num``'s dtype
dependent defaults, ``mvlgamma``'s domain check, ``lerp``'s Scalar-or-Tensor weight, ``prelu``'s
channel weight and ``rrelu``'s random slopes.  kernels/surface.py lists them (``PY_FUNCTIONS``:
name -> (function, is it also a Tensor method)).
"""

from __future__ import annotations

import math

import numpy as np

from dispatch_jit.dtypes import BOOL, COMPLEX, FLOAT, INT
from dispatch_jit.errors import DTypeError, InvalidArgumentError, SchemaError, ShapeError
from dispatch_jit.ops import entries

__all__ = ["PY_FUNCTIONS", "prelu", "rrelu"]

A = entries("aten")


def _no_out(name: str, out) -> None:
    if out is not None:
        raise SchemaError(f"{name}: out= is not supported by dispatch_jit here; assign the result instead")


def polygamma(n, input, *, out=None):  # noqa: A002  (PyTorch's argument names)
    """The ``n``-th derivative of digamma, as ``torch.polygamma(n, input)`` (``x.polygamma(n)``).

    >>> import dispatch_jit as dj
    >>> dj.polygamma(1, dj.tensor([1.0]))
    tensor([1.6449])
    """
    _no_out("polygamma", out)
    if not isinstance(n, int) and isinstance(input, int):      # the method form: x.polygamma(n)
        n, input = input, n
    if n < 0:
        raise InvalidArgumentError(f"polygamma(n, x) does not support negative n (got n={n})")
    return A.polygamma(input, n=n)


def polygamma_(self, n):
    """In place: ``x.polygamma_(n)``.

    >>> import dispatch_jit as dj
    >>> dj.tensor([1.0]).polygamma_(1)
    tensor([1.6449])
    """
    return self.copy_(polygamma(n, self))


def logit(input, eps=None, *, out=None):  # noqa: A002
    """``log(p / (1 - p))``, ``p`` clamped to ``[eps, 1 - eps]`` first when ``eps`` is given.

    >>> import dispatch_jit as dj
    >>> dj.logit(dj.tensor([0.5, 1.0]), eps=0.25)
    tensor([0.0000, 1.0986])
    """
    _no_out("logit", out)
    return A.logit(input, eps=-1.0 if eps is None else float(eps))


def logit_(self, eps=None):
    """In place: ``x.logit_(eps)``.

    >>> import dispatch_jit as dj
    >>> dj.tensor([0.5, 0.75]).logit_()
    tensor([0.0000, 1.0986])
    """
    return A.logit_(self, eps=-1.0 if eps is None else float(eps))


def _nan_to_num_args(x, nan, posinf, neginf) -> dict:
    info = np.finfo(x.dtype.np if x.dtype.name != "bfloat16" else np.float32)
    return {"nan": 0.0 if nan is None else float(nan), "posinf": float(info.max) if posinf is None else float(posinf),
            "neginf": float(info.min) if neginf is None else float(neginf)}


def nan_to_num(input, nan=0.0, posinf=None, neginf=None, *, out=None):  # noqa: A002
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (the dtype's largest and
    smallest finite values by default); integer and bool tensors are returned as a copy.

    >>> import dispatch_jit as dj
    >>> dj.nan_to_num(dj.tensor([float("nan"), float("inf"), 1.0]), posinf=9.0)
    tensor([0., 9., 1.])
    """
    _no_out("nan_to_num", out)
    if input.dtype.category in (BOOL, INT):
        return A.clone(input)
    if input.dtype.category == COMPLEX:
        raise DTypeError("nan_to_num: complex tensors are not supported by dispatch_jit; apply it to .real and .imag")
    return A.nan_to_num(input, **_nan_to_num_args(input, nan, posinf, neginf))


def nan_to_num_(self, nan=0.0, posinf=None, neginf=None):
    """In place: ``x.nan_to_num_(...)``.

    >>> import dispatch_jit as dj
    >>> dj.tensor([float("nan"), 1.0]).nan_to_num_(5.0)
    tensor([5., 1.])
    """
    if self.dtype.category in (BOOL, INT):
        return self
    return A.nan_to_num_(self, **_nan_to_num_args(self, nan, posinf, neginf))


def mvlgamma(input, p, *, out=None):  # noqa: A002
    """The multivariate log-gamma of dimension ``p``: ``sum_i lgamma(x - i / 2) + p (p - 1) / 4 log(pi)``;
    every element must exceed ``(p - 1) / 2``, as PyTorch checks.

    >>> import dispatch_jit as dj
    >>> dj.mvlgamma(dj.tensor([2.5]), 2)
    tensor([0.8570])
    """
    _no_out("mvlgamma", out)
    if p < 1:
        raise InvalidArgumentError(f"p has to be greater than or equal to 1 (got p={p})")
    x = input if input.dtype.category == FLOAT else input.float()
    if A.any(A.le(x, (p - 1) / 2)).item():
        raise InvalidArgumentError(f"All elements must be greater than (p-1)/2 (got p={p}, so each element "
                                   f"must exceed {(p - 1) / 2})")
    total = A.lgamma(x)
    for i in range(1, p):
        total = A.add(total, A.lgamma(A.sub(x, i / 2)))
    return A.add(total, p * (p - 1) / 4 * math.log(math.pi))


def mvlgamma_(self, p):
    """In place: ``x.mvlgamma_(p)``.

    >>> import dispatch_jit as dj
    >>> dj.tensor([2.5]).mvlgamma_(2)
    tensor([0.8570])
    """
    return self.copy_(mvlgamma(self, p))


def lerp(input, end, weight, *, out=None):  # noqa: A002
    """``input + weight * (end - input)``, in PyTorch's two-sided form (exact at weight 1):
    ``end - (end - input) * (1 - weight)`` where ``|weight| >= 0.5``.

    >>> import dispatch_jit as dj
    >>> dj.lerp(dj.tensor([0.0, 1.0]), dj.tensor([10.0, 3.0]), 0.5)
    tensor([5., 2.])
    """
    _no_out("lerp", out)
    if input.dtype.category != FLOAT or getattr(end, "dtype", input.dtype) is not input.dtype:
        raise DTypeError(f"lerp: expected end to have the same dtype as start and both floating point, but got "
                         f"{input.dtype.name} and {getattr(end, 'dtype', input.dtype).name}")
    diff = A.sub(end, input)
    if isinstance(weight, (int, float)):
        return A.add(input, A.mul(diff, weight)) if abs(weight) < 0.5 else \
            A.sub(end, A.mul(diff, 1 - weight))
    small = A.lt(A.abs(weight), 0.5)
    return A.where(small, A.add(input, A.mul(weight, diff)), A.sub(end, A.mul(diff, A.sub(1, weight))))


def lerp_(self, end, weight):
    """In place: ``x.lerp_(end, weight)``.

    >>> import dispatch_jit as dj
    >>> dj.tensor([0.0, 1.0]).lerp_(dj.tensor([10.0, 3.0]), 0.5)
    tensor([5., 2.])
    """
    return self.copy_(lerp(self, end, weight))


def prelu(input, weight):  # noqa: A002
    """``max(0, x) + weight * min(0, x)``, ``weight`` one value or one per channel (dim 1).

    >>> import dispatch_jit as dj
    >>> dj.prelu(dj.tensor([[-2.0, 3.0]]), dj.tensor([0.25]))
    tensor([[-0.5000,  3.0000]])
    """
    if weight.ndim > 1:
        raise ShapeError(f"prelu: weight must be a 0-d or 1-d tensor, got {weight.ndim} dimensions")
    n = weight.numel()
    if n != 1:
        channels = input.shape[1] if input.ndim >= 2 else (input.shape[0] if input.ndim == 1 else 1)
        if input.ndim == 0 or n != channels:
            raise ShapeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = {n} "
                             f"and channel size = {channels}.")
        if input.ndim >= 2:
            weight = A.reshape(weight, [n] + [1] * (input.ndim - 2))
    return A._prelu_kernel(input, weight)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):  # noqa: A002
    """Randomized leaky ReLU: in training, each negative element scaled by a slope drawn uniformly
    from ``[lower, upper]``; in evaluation, by their mean (PyTorch's semantics).

    >>> import dispatch_jit as dj
    >>> dj.rrelu(dj.tensor([-3.0, 1.0]), 0.25, 0.75)
    tensor([-1.5000,  1.0000])
    """
    if lower > upper:
        raise InvalidArgumentError(f"Lower bound should be less than or equal to the upper bound (got lower={lower}, "
                                   f"upper={upper})")
    if not training:
        return A.leaky_relu(input, negative_slope=(lower + upper) / 2)
    from dispatch_jit.random import rand_like
    slopes = A.add(A.mul(rand_like(input, generator=generator), upper - lower), lower)
    return A.where(A.ge(input, 0), input, A.mul(input, slopes))


PY_FUNCTIONS = {
    "polygamma": (polygamma, True), "polygamma_": (polygamma_, True), "logit": (logit, True),
    "logit_": (logit_, True), "nan_to_num": (nan_to_num, True), "nan_to_num_": (nan_to_num_, True),
    "mvlgamma": (mvlgamma, True), "mvlgamma_": (mvlgamma_, True), "lerp": (lerp, True), "lerp_": (lerp_, True),
    "prelu": (prelu, True), "rrelu": (rrelu, False),
}
