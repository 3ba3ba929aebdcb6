"""``unique`` as PyTorch has it: the ops ``_unique2`` (over all elements) and ``unique_dim`` (over
slices along a dimension), CPU kernels over NumPy's sort-based ``np.unique``, and ``dj.unique`` /
``Tensor.unique``, the Python function (kernels/surface.py's ``PY_FUNCTIONS``) that picks the op
and the outputs asked for, as ``torch.unique``.

The outputs are sorted whatever ``sorted`` says (PyTorch's CPU result is too); NaNs are never
equal to each other, so each is its own unique value, as PyTorch's.  Not differentiable.
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.dtypes import COMPLEX
from dispatch_jit.errors import DTypeError
from dispatch_jit.ops import entries
from dispatch_jit.tensor import wrap

from .shape.op import normalize_axis

__all__ = ["SCHEMAS", "KERNELS", "PY_FUNCTIONS"]

SCHEMAS = [
    "_unique2(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False) "
    "-> (Tensor, Tensor, Tensor)",
    "unique_dim(Tensor self, int dim, bool sorted=True, bool return_inverse=False, bool return_counts=False) "
    "-> (Tensor, Tensor, Tensor)",
]

A = entries("aten")


def _array(x, op: str) -> np.ndarray:
    if x.dtype.category == COMPLEX:
        raise DTypeError(f"{op}: \"unique_cpu\" not implemented for '{x.dtype.name}' (complex values are not "
                         f"ordered); take the unique real and imaginary parts, or of x.abs()")
    return x._data


def _results(values, inverse, counts):
    # np.array, not np.ascontiguousarray: that makes a 0-d inverse (of a 0-d input) 1-d
    return (wrap(np.array(values, order="C")), wrap(np.array(inverse, dtype=np.int64, order="C")),
            wrap(np.array(counts, dtype=np.int64, order="C")))


def unique2(x, sorted=True, return_inverse=False, return_counts=False):  # noqa: A002  (PyTorch's name)
    a = _array(x, "unique")
    values, inverse, counts = np.unique(a.reshape(-1), return_inverse=True, return_counts=True, equal_nan=False)
    return _results(values, inverse.reshape(a.shape) if return_inverse else np.zeros(0, np.int64),
                    counts if return_counts else np.zeros(0, np.int64))


def unique_dim(x, dim, sorted=True, return_inverse=False, return_counts=False):  # noqa: A002
    a = _array(x, "unique")
    axis = normalize_axis(dim, max(a.ndim, 1), "unique")
    if a.ndim == 0:
        a = a.reshape(1)
    values, inverse, counts = np.unique(a, return_inverse=True, return_counts=True, axis=axis, equal_nan=False)
    return _results(values, inverse.reshape(-1), counts)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The unique elements of ``input`` (or its unique slices along ``dim``), sorted; with
    ``return_inverse`` also where each element (slice) went, with ``return_counts`` how often each
    unique value occurs, as ``torch.unique``.

    >>> import dispatch_jit as dj
    >>> dj.unique(dj.tensor([3, 1, 3, 2]), return_counts=True)
    (tensor([1, 2, 3]), tensor([1, 1, 2]))
    >>> dj.tensor([[1, 2], [1, 2], [0, 5]]).unique(dim=0, return_inverse=True)
    (tensor([[0, 5],
            [1, 2]]), tensor([1, 1, 0]))
    """
    if dim is None:
        out, inverse, counts = A._unique2(input, sorted, return_inverse, return_counts)
    else:
        out, inverse, counts = A.unique_dim(input, dim, sorted, return_inverse, return_counts)
    extra = ([inverse] if return_inverse else []) + ([counts] if return_counts else [])
    return (out, *extra) if extra else out


KERNELS = {"CPU": {"_unique2": unique2, "unique_dim": unique_dim}}
PY_FUNCTIONS = {"unique": (unique, True)}
