"""The key of a compiled function's call arguments (CompiledFunction's cache key, beside the
guards' reader): a tensor by its signature, a Python float or int by its type only (it is a
runtime scalar of the loop), anything else hashable by its type and value."""

from __future__ import annotations

import math

import numpy as np

from dispatch_jit.tensor import Tensor

__all__ = ["Unhashable", "leaf_key", "arg_key", "perturbed"]

_FLOATS = frozenset([float, np.float16, np.float32, np.float64])


class Unhashable(Exception):
    """An argument that cannot be part of a key (its type's name): the call runs eagerly."""


def leaf_key(x):
    if x.__class__ is Tensor or isinstance(x, Tensor):
        return x._sig
    if isinstance(x, (list, tuple)):
        return (type(x),) + tuple(leaf_key(y) for y in x)
    if isinstance(x, dict):
        return (dict,) + tuple((k, leaf_key(v)) for k, v in x.items())
    try:
        hash(x)
    except TypeError:
        raise Unhashable(type(x).__name__) from None
    if x.__class__ in _FLOATS and not (x and x == x):
        # -0.0 == 0.0 and hashes alike, but x * -0.0 differs from x * 0.0; a NaN is unequal even to
        # itself, so as a key it would never hit.  Strings: no number's key can equal these
        return (type(x), "nan" if x != x else "-0.0" if math.copysign(1.0, x) < 0 else "0.0")
    return (type(x), x)


_INT64 = (-2 ** 63, 2 ** 63)


def arg_key(x):
    """The key of one argument: a Python float or int (in int64 range) by its type only, as
    it is a runtime scalar of the loop; anything else as ``leaf_key``."""
    c = x.__class__
    if c is float or (c is int and _INT64[0] <= x < _INT64[1]):
        return c
    return leaf_key(x)


def perturbed(x):
    """Another value of runtime scalar ``x``, to trace again with: the function must not
    have used the value anywhere the first trace could not see."""
    if x.__class__ is int:
        return x + 1
    return x + 1.0 if math.isfinite(x) and x + 1.0 != x else 0.5
