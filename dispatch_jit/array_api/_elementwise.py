"""The standard's elementwise functions, as a table over the dispatcher's ops.

Each entry names the op that computes the function; a binary function first brings both
arrays to the standard's common dtype (``_dtypes.common``).  The few functions whose
semantics differ from PyTorch's (``sign`` keeps NaN, ``clip`` without bounds, ``positive``)
are written out below the table.
"""

from __future__ import annotations

from dispatch_jit.dtypes import FLOAT
from dispatch_jit.errors import ArgumentTypeError
from dispatch_jit.ops import entries
from dispatch_jit.registry import lookup
from dispatch_jit.tensor import Tensor

from ._dtypes import common

A = entries("aten")

# the standard's name -> the op (aten::<op>) that computes it
UNARY = {
    "abs": "abs", "acos": "acos", "acosh": "acosh", "asin": "asin", "asinh": "asinh", "atan": "atan",
    "atanh": "atanh", "bitwise_invert": "bitwise_not", "ceil": "ceil", "conj": "conj", "cos": "cos",
    "cosh": "cosh", "exp": "exp", "expm1": "expm1", "floor": "floor", "imag": "imag", "isfinite": "isfinite",
    "isinf": "isinf", "isnan": "isnan", "log": "log", "log1p": "log1p", "log2": "log2", "log10": "log10",
    "logical_not": "logical_not", "negative": "neg", "real": "real", "reciprocal": "reciprocal",
    "round": "round", "signbit": "signbit", "sin": "sin", "sinh": "sinh", "square": "square", "sqrt": "sqrt",
    "tan": "tan", "tanh": "tanh", "trunc": "trunc",
}
BINARY = {
    "add": "add", "atan2": "atan2", "bitwise_and": "bitwise_and", "bitwise_left_shift": "bitwise_left_shift",
    "bitwise_or": "bitwise_or", "bitwise_right_shift": "bitwise_right_shift", "bitwise_xor": "bitwise_xor",
    "copysign": "copysign", "divide": "div", "equal": "eq", "floor_divide": "floor_divide", "greater": "gt",
    "greater_equal": "ge", "hypot": "hypot", "less": "lt", "less_equal": "le", "logaddexp": "logaddexp",
    "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor", "maximum": "maximum",
    "minimum": "minimum", "multiply": "mul", "nextafter": "nextafter", "not_equal": "ne", "pow": "pow",
    "remainder": "remainder", "subtract": "sub",
}


def _unary(name: str, opname: str):
    op = lookup(f"aten::{opname}").entry

    def fn(x, /):
        return op(x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"The array API's ``{name}``, computed by ``aten::{opname}``."
    return fn


def _binary(name: str, opname: str):
    op = lookup(f"aten::{opname}").entry

    def fn(x1, x2, /):
        if not isinstance(x1, Tensor) and not isinstance(x2, Tensor):
            raise ArgumentTypeError(f"{name}: at least one argument must be an array, got {type(x1).__name__} and "
                            f"{type(x2).__name__}")
        x1, x2 = common(x1, x2)
        return op(x1, x2)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"The array API's ``{name}`` (operands promoted by dtype), computed by ``aten::{opname}``."
    return fn


FUNCTIONS = {name: _unary(name, op) for name, op in UNARY.items()}
FUNCTIONS.update({name: _binary(name, op) for name, op in BINARY.items()})


def sign(x, /):
    """The sign of ``x`` (``x / |x|`` for complex); unlike PyTorch's, NaN stays NaN.

    >>> from dispatch_jit import array_api as xp
    >>> xp.sign(xp.asarray([-2.0, 0.0, float("nan")]))
    tensor([-1.,  0., nan])
    """
    s = A.sign(x)
    if x.dtype.category == FLOAT:
        s = A.where(A.isnan(x), x, s)
    return s


def positive(x, /):
    return A.clone(x)


def clip(x, /, min=None, max=None):  # noqa: A002  (the standard's parameter names)
    """``x`` limited to ``[min, max]``; either bound may be None (both: a copy), the result has
    ``x``'s dtype."""
    if min is None and max is None:
        return A.clone(x)
    bounds = [b if not isinstance(b, Tensor) or b.dtype is x.dtype else A.to(b, x.dtype, False) for b in (min, max)]
    if x.dtype.category < FLOAT:
        # an int bound outside the dtype's range clips nothing on that side
        import numpy as np
        info = np.iinfo(x.dtype.np) if x.dtype.category else None
        if info is not None:
            bounds = [None if isinstance(b, int) and not info.min <= b <= info.max else b for b in bounds]
        if bounds[0] is None and bounds[1] is None:
            return A.clone(x)
    r = A.clamp(x, bounds[0], bounds[1])
    return r if r.dtype is x.dtype else A.to(r, x.dtype, False)


FUNCTIONS.update(sign=sign, positive=positive, clip=clip)
