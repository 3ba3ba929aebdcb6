"""``dj.nn.functional``'s pointwise activations: PyTorch's names, signatures and defaults over the
elementwise table's activation rows (kernels/elementwise/rows_activation.py: one op each, so the
eager kernel, the fused loop and the derivative come from the row), plus ``glu`` and ``softmin``,
which are compositions.  ``inplace=True`` calls the row's in-place op, as PyTorch's does.

>>> import dispatch_jit as dj
>>> import dispatch_jit.nn.functional as F
>>> F.leaky_relu(dj.tensor([-2.0, 3.0]), 0.5), F.hardtanh(dj.tensor([-2.0, 0.5]))
(tensor([-1.,  3.]), tensor([-1.0000,  0.5000]))
"""

from __future__ import annotations

from ..dtypes import BOOL, INT
from ..errors import InvalidArgumentError, ShapeError
from ..kernels.elementwise.torch_names import prelu as _prelu, rrelu as _rrelu
from ..ops import entries

__all__ = ["hardswish", "hardsigmoid", "hardtanh", "relu6", "leaky_relu", "elu", "selu", "celu", "softplus",
           "softshrink", "hardshrink", "threshold", "softsign", "tanhshrink", "mish", "logsigmoid", "prelu", "rrelu",
           "glu", "softmin"]

A = entries("aten")


def _call(name: str, input, inplace: bool, **statics):  # noqa: A002
    return getattr(A, name + "_")(input, **statics) if inplace else getattr(A, name)(input, **statics)


def _int_bound(input, v):  # noqa: A002
    """An integral tensor's bound as an int where it is one (hardtanh's -1.0 default on an int64 input)."""
    if input.dtype.category in (BOOL, INT) and isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def hardswish(input, inplace: bool = False):  # noqa: A002
    """``x * relu6(x + 3) / 6``.

    >>> import dispatch_jit as dj; hardswish(dj.tensor([-4.0, 1.0]))
    tensor([-0.0000,  0.6667])
    """
    return _call("hardswish", input, inplace)


def hardsigmoid(input, inplace: bool = False):  # noqa: A002
    """``relu6(x + 3) / 6``.

    >>> import dispatch_jit as dj; hardsigmoid(dj.tensor([0.0]))
    tensor([0.5000])
    """
    return _call("hardsigmoid", input, inplace)


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):  # noqa: A002
    """``x`` clamped to ``[min_val, max_val]``.

    >>> import dispatch_jit as dj; hardtanh(dj.tensor([-3.0, 0.5, 3.0]))
    tensor([-1.0000,  0.5000,  1.0000])
    """
    if input.dtype.category == BOOL:
        raise InvalidArgumentError("Bool inputs not supported for hardtanh")
    if input.dtype.category == INT and not input.dtype.is_signed:
        raise InvalidArgumentError(f"hardtanh: unsigned {input.dtype.name} inputs are not supported by dispatch_jit "
                                   f"(a negative bound wraps around); convert first: x.to(dj.int64)")
    if min_val > max_val:
        raise InvalidArgumentError(f"min_val cannot be greater than max_val (got {min_val} > {max_val})")
    lo, hi = _int_bound(input, min_val), _int_bound(input, max_val)
    if input.dtype.category == INT and (isinstance(lo, float) or isinstance(hi, float)):
        # PyTorch clamps an integer tensor to fractional bounds in floating point and truncates back
        out = A.hardtanh(input.double(), min_val=float(min_val), max_val=float(max_val)).to(input.dtype)
        return input.copy_(out) if inplace else out
    return _call("hardtanh", input, inplace, min_val=lo, max_val=hi)


def relu6(input, inplace: bool = False):  # noqa: A002
    """``min(max(x, 0), 6)``.

    >>> import dispatch_jit as dj; relu6(dj.tensor([-1.0, 7.0]))
    tensor([0., 6.])
    """
    return hardtanh(input, 0.0, 6.0, inplace)


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):  # noqa: A002
    """``x`` where positive, else ``negative_slope * x``.

    >>> import dispatch_jit as dj; leaky_relu(dj.tensor([-1.0, 2.0]), 0.1)
    tensor([-0.1000,  2.0000])
    """
    return _call("leaky_relu", input, inplace, negative_slope=negative_slope)


def elu(input, alpha: float = 1.0, inplace: bool = False):  # noqa: A002
    """``x`` where positive, else ``alpha * (exp(x) - 1)``.

    >>> import dispatch_jit as dj; elu(dj.tensor([0.0, 2.0]))
    tensor([0., 2.])
    """
    return _call("elu", input, inplace, alpha=alpha)


def selu(input, inplace: bool = False):  # noqa: A002
    """``scale * elu(x, alpha)`` with the self-normalizing constants.

    >>> import dispatch_jit as dj; selu(dj.tensor([0.0]))
    tensor([0.])
    """
    return _call("selu", input, inplace)


def celu(input, alpha: float = 1.0, inplace: bool = False):  # noqa: A002
    """``x`` where positive, else ``alpha * (exp(x / alpha) - 1)``.

    >>> import dispatch_jit as dj; celu(dj.tensor([0.0]))
    tensor([0.])
    """
    if alpha == 0:
        raise InvalidArgumentError("ZeroDivisionError: celu's alpha must not be 0")
    return _call("celu", input, inplace, alpha=alpha)


def softplus(input, beta: float = 1.0, threshold: float = 20.0):  # noqa: A002
    """``log(1 + exp(beta x)) / beta``; ``x`` itself where ``beta x > threshold``.

    >>> import dispatch_jit as dj; softplus(dj.tensor([0.0, 30.0]))
    tensor([ 0.6931, 30.0000])
    """
    return A.softplus(input, beta=beta, threshold=threshold)


def softshrink(input, lambd: float = 0.5):  # noqa: A002
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0.

    >>> import dispatch_jit as dj; softshrink(dj.tensor([-1.0, 0.2, 2.0]))
    tensor([-0.5000,  0.0000,  1.5000])
    """
    if lambd < 0:
        raise InvalidArgumentError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    return A.softshrink(input, lambd=lambd)


def hardshrink(input, lambd: float = 0.5):  # noqa: A002
    """``x`` where ``|x| > lambd``, else 0.

    >>> import dispatch_jit as dj; hardshrink(dj.tensor([-1.0, 0.2]))
    tensor([-1.,  0.])
    """
    return A.hardshrink(input, lambd=lambd)


def threshold(input, threshold: float, value: float, inplace: bool = False):  # noqa: A002
    """``value`` where ``x <= threshold``, else ``x``.

    >>> import dispatch_jit as dj; threshold(dj.tensor([0.5, 2.0]), 1.0, -1.0)
    tensor([-1.,  2.])
    """
    return _call("threshold", input, inplace, threshold=_int_bound(input, threshold), value=_int_bound(input, value))


def softsign(input):  # noqa: A002
    """``x / (1 + |x|)``.

    >>> import dispatch_jit as dj; softsign(dj.tensor([1.0]))
    tensor([0.5000])
    """
    return A.softsign(input)


def tanhshrink(input):  # noqa: A002
    """``x - tanh(x)``.

    >>> import dispatch_jit as dj; tanhshrink(dj.tensor([0.0]))
    tensor([0.])
    """
    return A.tanhshrink(input)


def mish(input, inplace: bool = False):  # noqa: A002
    """``x * tanh(softplus(x))``.

    >>> import dispatch_jit as dj; mish(dj.tensor([0.0]))
    tensor([0.])
    """
    return _call("mish", input, inplace)


def logsigmoid(input):  # noqa: A002
    """``log(sigmoid(x))``, computed without overflow.

    >>> import dispatch_jit as dj; logsigmoid(dj.tensor([0.0]))
    tensor([-0.6931])
    """
    return A.log_sigmoid(input)


def prelu(input, weight):  # noqa: A002
    """``max(0, x) + weight * min(0, x)`` with one weight or one per channel (dim 1).

    >>> import dispatch_jit as dj; prelu(dj.tensor([-2.0, 1.0]), dj.tensor([0.5]))
    tensor([-1.,  1.])
    """
    return _prelu(input, weight)


def rrelu(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,  # noqa: A002
          inplace: bool = False):
    """Randomized leaky ReLU: random slopes in ``[lower, upper]`` in training, their mean otherwise.

    >>> import dispatch_jit as dj; rrelu(dj.tensor([-3.0, 1.0]), 0.25, 0.75)
    tensor([-1.5000,  1.0000])
    """
    out = _rrelu(input, lower, upper, training)
    return input.copy_(out) if inplace else out


def glu(input, dim: int = -1):  # noqa: A002
    """``a * sigmoid(b)``, ``a`` and ``b`` the halves of ``input`` along ``dim``.

    >>> import dispatch_jit as dj; glu(dj.tensor([1.0, 0.0]))
    tensor([0.5000])
    """
    if input.ndim == 0:
        raise ShapeError("glu does not support scalars because halving size must be even")
    n = input.shape[dim]
    if n % 2:
        raise ShapeError(f"Halving dimension must be even, but dimension {dim % input.ndim} is size {n}")
    return A.mul(A.narrow(input, dim, 0, n // 2), A.sigmoid(A.narrow(input, dim, n // 2, n // 2)))


def softmin(input, dim=None, _stacklevel: int = 3, dtype=None):  # noqa: A002
    """``softmax(-x)`` along ``dim``.

    >>> import dispatch_jit as dj; softmin(dj.tensor([0.0, 0.0]), 0)
    tensor([0.5000, 0.5000])
    """
    if dim is None:
        import warnings
        warnings.warn("Implicit dimension choice for softmin has been deprecated. Change the call to include "
                      "dim=X as an argument.", stacklevel=_stacklevel)
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return A.softmax(A.neg(input if dtype is None else input.to(dtype)), dim)
