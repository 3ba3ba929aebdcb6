"""``dispatch_jit.array_api``: the Python array API standard's namespace (version 2025.12).

The top level of dispatch_jit speaks PyTorch (names, zero-dim promotion, ``var``'s default
correction, ``sum`` of uint8 as int64); this namespace speaks the standard, as a thin layer of
Python functions over the same dispatcher and kernels.  Where the two disagree it adapts the
call (casts to the standard's common dtype, passes the standard's reduction dtype, renames
parameters, returns tuples, raises IndexError for an axis out of range); it never computes
anything itself.  ``Tensor.__array_namespace__()`` returns it, so array-API code
(scikit-learn, SciPy, array-api-compat users) runs on dispatch_jit tensors.

>>> import dispatch_jit as dj
>>> x = dj.tensor([3, 1, 2], dtype=dj.uint8)
>>> xp = x.__array_namespace__()
>>> xp.sort(x), xp.sum(x).dtype, xp.__array_api_version__
(tensor([1, 2, 3], dtype=dj.uint8), dispatch_jit.uint64, '2025.12')
>>> xp.bitwise_or(xp.asarray(0, dtype=xp.uint16), x).dtype     # by dtype, not PyTorch's 0-d rule
dispatch_jit.uint16

Layer: above the kernels and the compiler (docs/ARCHITECTURE.md); the engine reaches it only
through ``Tensor.__array_namespace__``, which ``install`` below binds.
"""

from __future__ import annotations

import math

from dispatch_jit.errors import InvalidArgumentError
from dispatch_jit.tensor import Tensor

from . import fft, linalg
from ._creation import (arange, asarray, empty, empty_like, eye, from_dlpack, full, full_like, linspace, meshgrid,
                        ones, ones_like, tril, triu, zeros, zeros_like)
from ._dtypes import (astype, bool, can_cast, complex64, complex128, finfo, float32, float64, iinfo, int8, int16,
                      int32, int64, isdtype, result_type, uint8, uint16, uint32, uint64)
from ._elementwise import FUNCTIONS as _ELEMENTWISE
from ._info import __array_namespace_info__
from ._linear import matmul, matrix_transpose, tensordot, vecdot
from ._manipulation import (broadcast_arrays, broadcast_shapes, broadcast_to, concat, expand_dims, flip, moveaxis,
                            permute_dims, repeat, reshape, roll, squeeze, stack, tile, unstack)
from ._searching import (argmax, argmin, argsort, isin, nonzero, searchsorted, sort, take, take_along_axis,
                         unique_all, unique_counts, unique_inverse, unique_values, where)
from ._statistics import (all, any, count_nonzero, cumulative_prod, cumulative_sum, diff, max, mean, min, prod,
                          std, sum, var)

__array_api_version__ = "2025.12"

e, inf, nan, pi = math.e, math.inf, math.nan, math.pi
newaxis = None

globals().update(_ELEMENTWISE)

__all__ = sorted(
    ["__array_api_version__", "__array_namespace_info__", "e", "inf", "nan", "pi", "newaxis", "fft", "linalg",
     "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like", "linspace", "meshgrid",
     "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
     "astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type",
     "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
     "complex64", "complex128",
     "matmul", "matrix_transpose", "tensordot", "vecdot",
     "broadcast_arrays", "broadcast_shapes", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis",
     "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "tile", "unstack",
     "argmax", "argmin", "argsort", "isin", "nonzero", "searchsorted", "sort", "take", "take_along_axis",
     "unique_all", "unique_counts", "unique_inverse", "unique_values", "where",
     "all", "any", "count_nonzero", "cumulative_prod", "cumulative_sum", "diff", "max", "mean", "min", "prod",
     "std", "sum", "var"] + list(_ELEMENTWISE))


def _array_namespace(self, /, *, api_version=None):
    """The array API namespace for this tensor: ``dispatch_jit.array_api``."""
    if api_version is not None and api_version not in ("2021.12", "2022.12", "2023.12", "2024.12", "2025.12"):
        raise InvalidArgumentError(f"__array_namespace__: unsupported api_version {api_version!r}; this namespace "
                         f"implements 2025.12 (and the earlier versions it contains)")
    import sys
    return sys.modules[__name__]


def _to_device(self, device, /, *, stream=None):
    """This tensor on ``device`` (no copy if it is there already)."""
    if stream is not None and not self.is_cuda:
        raise InvalidArgumentError("to_device: stream must be None for a CPU tensor")
    return self if self.device == device else self.to(device=device)


def install() -> None:
    """Bind the standard's tensor methods the engine cannot define (it sits below this layer)."""
    Tensor.__array_namespace__ = _array_namespace
    Tensor.to_device = _to_device
