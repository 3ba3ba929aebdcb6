"""More of PyTorch's everyday math, as decompositions into other operators (composite_torch.py's
style): diag, diagonal, addmm, addmv, baddbmm, xlogy, cross, and median's two forms.

Registered at CompositeImplicitAutograd, so autograd, autocast and the tracer see only the ops
they call (matmul, mul, where, gather, sort, ...), whose derivative rows give the gradients.
Each checks PyTorch's preconditions first, so that an error names the op called.

``diagonal`` here is a copy (PyTorch's is a view): its result is made read-only where it can be,
so that a write into it, which would not reach the input, raises instead of being lost.
"""

from __future__ import annotations

from dispatch_jit.broadcast import broadcast_shapes
from dispatch_jit.dtypes import BOOL, COMPLEX, FLOAT, get_default_dtype, promote_types
from dispatch_jit.errors import BroadcastError, DTypeError, ShapeError
from dispatch_jit.ops import entries
from dispatch_jit.registry import lookup
from dispatch_jit.return_types import named

from .shape.op import normalize_axis

__all__ = ["SCHEMAS", "KERNELS", "METHODS", "PY_FUNCTIONS"]

SCHEMAS = [
    "diag(Tensor self, int diagonal=0) -> Tensor",
    "diagonal(Tensor self, int offset=0, int dim1=0, int dim2=1) -> Tensor",
    "addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
    "addmv(Tensor self, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
    "baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
    "xlogy.Tensor(Tensor self, Tensor other) -> Tensor",
    "cross(Tensor self, Tensor other, int? dim=None) -> Tensor",
    "median(Tensor self) -> Tensor",
    "median.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
]
METHODS = ["diag", "diagonal", "addmm", "addmv", "baddbmm", "xlogy", "cross"]

A = entries("aten")    # the ops are defined after this module is imported
MedianResult = named("median", ("values", "indices"))


def _arange(n: int, like):
    from dispatch_jit.creation import arange
    return arange(n, device=like.device)


def diag(x, diagonal=0):
    """A 1-D ``x`` on the ``diagonal``-th diagonal of a square matrix, or the ``diagonal``-th
    diagonal of a 2-D ``x``."""
    if x.ndim == 2:
        return A.diagonal(x, diagonal, 0, 1)
    if x.ndim != 1:
        raise ShapeError(f"diag(): Supports 1D or 2D tensors. Got {x.ndim}D")
    k, n = diagonal, x.shape[0] + abs(diagonal)
    from dispatch_jit.creation import zeros
    pad = A.cat([x, zeros(abs(k), dtype=x.dtype, device=x.device)], 0)
    idx = _arange(n, x)
    # entry (r, c) is on the diagonal where c - r == k; its value is pad[r] (k >= 0) or pad[c] (k < 0)
    on = A.eq(A.sub(A.unsqueeze(idx, 0), A.unsqueeze(idx, 1)), k)
    vals = A.expand(A.unsqueeze(pad, 1) if k >= 0 else A.unsqueeze(pad, 0), (n, n))
    out = A.where(on, vals, 0)
    return out if out.dtype is x.dtype else out.to(x.dtype)


def diagonal(x, offset=0, dim1=0, dim2=1):
    """The elements ``x[..., i, i + offset]`` over dimensions ``dim1``/``dim2``, as a last dimension."""
    d1 = normalize_axis(dim1, x.ndim, "diagonal")
    d2 = normalize_axis(dim2, x.ndim, "diagonal")
    if d1 == d2:
        raise ShapeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    t = A.permute(x, [d for d in range(x.ndim) if d not in (d1, d2)] + [d1, d2])
    n1, n2 = t.shape[-2], t.shape[-1]
    r0, c0 = (0, offset) if offset >= 0 else (-offset, 0)
    size = max(0, min(n1 - r0, n2 - c0))
    t = A.narrow(A.narrow(t, -2, min(r0, n1), size), -1, min(c0, n2), size)
    idx = A.expand(A.unsqueeze(_arange(size, x), 1), tuple(t.shape[:-1]) + (1,))
    out = A.squeeze(A.gather(t, -1, idx), -1)
    a = out._data
    if hasattr(a, "flags"):
        a.flags.writeable = False   # a copy, not PyTorch's view: a write into it must not be silently lost
    return out


def _addmm_like(op: str, x, product, beta, alpha):
    """``beta * x + alpha * product`` as PyTorch's addmm family: ``x`` broadcasts to the product's
    shape (never beyond it) and is ignored when ``beta`` is 0 (NaN in it does not propagate)."""
    try:
        fits = broadcast_shapes(tuple(x.shape), tuple(product.shape)) == tuple(product.shape)
    except ValueError:
        fits = False
    if not fits:
        raise BroadcastError(f"{op}: self of shape {tuple(x.shape)} does not broadcast to the product's shape "
                             f"{tuple(product.shape)}")
    if product.dtype.category not in (FLOAT, COMPLEX) and any(isinstance(v, float) for v in (beta, alpha)):
        raise DTypeError(f"{op}: for integral input tensors, argument beta and alpha must not be a floating point "
                         f"number (got beta={beta!r}, alpha={alpha!r}); pass ints or convert the tensors to float")
    if x.dtype is not product.dtype:
        raise DTypeError(f"{op}: self and the matrices must have the same dtype, but got {x.dtype.name} and "
                         f"{product.dtype.name}; convert one: self.to(mat.dtype)")
    if alpha != 1:
        product = A.mul(product, alpha)
    if beta == 0:
        return A.expand(product, tuple(product.shape)) if product.ndim else product
    return A.add(A.mul(x, beta) if beta != 1 else x, product)


def addmm(x, mat1, mat2, beta=1, alpha=1):
    return _addmm_like("addmm", x, A.mm(mat1, mat2), beta, alpha)


def baddbmm(x, batch1, batch2, beta=1, alpha=1):
    return _addmm_like("baddbmm", x, A.bmm(batch1, batch2), beta, alpha)


def addmv(x, mat, vec, beta=1, alpha=1):
    if mat.ndim != 2 or vec.ndim != 1:
        raise ShapeError(f"addmv: vector + matrix @ vector expected, got {x.ndim}, {mat.ndim}, {vec.ndim}")
    if mat.shape[1] != vec.shape[0]:
        raise ShapeError(f"size mismatch, got input ({x.shape[0] if x.ndim else 1}), mat ({mat.shape[0]}x"
                         f"{mat.shape[1]}), vec ({vec.shape[0]})")
    if mat.dtype is not vec.dtype:
        raise DTypeError(f"addmv: mat and vec must have the same dtype, but got {mat.dtype.name} and "
                         f"{vec.dtype.name}")
    return _addmm_like("addmv", x, A.matmul(mat, vec), beta, alpha)


def xlogy(x, other):
    """``x * log(other)``, 0 where ``x`` is 0 (even where ``other`` is 0 or inf), NaN where ``other``
    is NaN; integers and bools compute in the default float dtype."""
    dt = promote_types(x.dtype, other.dtype) if hasattr(other, "dtype") else x.dtype
    if dt.category == COMPLEX:
        raise DTypeError("xlogy: complex inputs are not supported (as PyTorch)")
    if dt.category != FLOAT:
        dt = get_default_dtype()
    x = x.to(dt)
    other = other.to(dt) if hasattr(other, "dtype") else float(other)
    prod = A.mul(x, A.log(other) if hasattr(other, "dtype") else _log_scalar(other))
    out = A.where(A.eq(x, 0), 0.0, prod)
    if hasattr(other, "dtype"):
        out = A.where(A.isnan(other), other, out)
    elif other != other:
        out = A.mul(out, float("nan"))
    return out if out.dtype is dt else out.to(dt)


def _log_scalar(v: float) -> float:
    import math
    return math.log(v) if v > 0 else (float("-inf") if v == 0 else float("nan"))


def cross(x, other, dim=None):
    """The cross product of 3-vectors along ``dim`` (default: the first dimension of size 3, with
    PyTorch's deprecation warning; ``dj.linalg.cross`` defaults to the last)."""
    if x.ndim != other.ndim:
        raise ShapeError(f"linalg.cross: inputs must have the same number of dimensions, got {x.ndim} and "
                         f"{other.ndim}")
    try:
        shape = broadcast_shapes(tuple(x.shape), tuple(other.shape))
    except ValueError:
        raise BroadcastError(f"linalg.cross: the shapes {tuple(x.shape)} and {tuple(other.shape)} do not "
                             f"broadcast") from None
    if dim is None:
        import warnings
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated. Please either pass the dim "
                      "explicitly or simply use torch.linalg.cross. The default value of dim will change to agree "
                      "with that of linalg.cross in a future release.", UserWarning, stacklevel=3)
        dim = next((d for d, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise ShapeError(f"no dimension of size 3 in input (shapes {tuple(x.shape)} and {tuple(other.shape)})")
    d = normalize_axis(dim, len(shape), "cross")
    if x.shape[d] != 3 or other.shape[d] != 3:
        raise ShapeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {x.shape[d]} and "
                         f"{other.shape[d]}")
    x, other = A.expand(x, shape), A.expand(other, shape)
    if x.dtype is not other.dtype:
        dt = promote_types(x.dtype, other.dtype)
        x, other = x.to(dt), other.to(dt)
    a = [A.narrow(x, d, i, 1) for i in range(3)]
    b = [A.narrow(other, d, i, 1) for i in range(3)]
    return A.cat([A.sub(A.mul(a[1], b[2]), A.mul(a[2], b[1])), A.sub(A.mul(a[2], b[0]), A.mul(a[0], b[2])),
                  A.sub(A.mul(a[0], b[1]), A.mul(a[1], b[0]))], d)


def _median_along(x, axis: int, keepdim: bool):
    """PyTorch's median along ``axis``: the lower of the two middle values, and its index; a row
    holding NaN gives NaN and the index of its first NaN."""
    if x.dtype.category in (COMPLEX, BOOL) or x.dtype.name in ("uint16", "uint32", "uint64"):
        raise DTypeError(f"\"median_out\" not implemented for '{x.dtype.name}' (as PyTorch); convert first: "
                         f"x.to(dj.int64) or x.to(dj.float64)")
    n = x.shape[axis]
    if n == 0:
        raise ShapeError(f"median(): Expected reduction dim {axis} to have non-zero size.")
    order = A.sort(x, axis, False, stable=True).indices
    idx = A.narrow(order, axis, (n - 1) // 2, 1)
    if x.dtype.category == FLOAT:
        nan = A.isnan(x)
        first_nan = A.unsqueeze(A.argmax(nan.to(get_default_dtype()), axis), axis)
        idx = A.where(A.unsqueeze(A.any(nan, axis), axis), first_nan, idx)
    values = A.gather(x, axis, idx)
    if not keepdim:
        values, idx = A.squeeze(values, axis), A.squeeze(idx, axis)
    return values, idx


def median(x):
    if x.numel() == 0:
        from dispatch_jit.creation import full
        return full((), float("nan"), dtype=x.dtype, device=x.device)
    return _median_along(A.reshape(x, (-1,)), 0, False)[0]


def median_dim(x, dim, keepdim=False):
    axis = normalize_axis(dim, max(x.ndim, 1), "median")
    if x.ndim == 0:
        return MedianResult(A.clone(x), _zero_index(x))
    return MedianResult(*_median_along(x, axis, keepdim))


def _zero_index(x):
    from dispatch_jit.creation import zeros
    from dispatch_jit.dtypes import int64
    return zeros((), dtype=int64, device=x.device)


KERNELS = {"CompositeImplicitAutograd": {
    "diag": diag, "diagonal": diagonal, "addmm": addmm, "addmv": addmv, "baddbmm": baddbmm, "xlogy.Tensor": xlogy,
    "cross": cross, "median": median, "median.dim": median_dim}}


def median_function(input, dim=None, keepdim=False):  # noqa: A002  (PyTorch's argument name)
    """The lower median of all elements of ``input`` (a 0-d tensor), or, with ``dim``, of each row
    along it with its index (``values``, ``indices``), as ``torch.median``; NaN wins.

    >>> import dispatch_jit as dj
    >>> dj.median(dj.tensor([4.0, 1.0, 3.0, 2.0]))
    tensor(2.)
    >>> dj.tensor([[1, 5, 3], [2, 0, 4]]).median(1)
    median(values=tensor([3, 2]), indices=tensor([2, 0]))
    """
    if dim is None:
        return A.median(input)
    return lookup("aten::median.dim").entry(input, dim, keepdim)


PY_FUNCTIONS = {"median": (median_function, True)}
