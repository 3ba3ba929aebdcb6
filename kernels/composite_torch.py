"""PyTorch's convenience operators, as decompositions into other operators (composite.py's
style): mm, bmm, outer, t, clamp_min, clamp_max, isclose, masked_fill, repeat.

Registered at CompositeImplicitAutograd, so autograd, autocast and the tracer see only the ops
they call (matmul, mul, where, expand, ...), and every backend that has those
gets these.  Each checks PyTorch's preconditions first, so an error names the op called
("mm: expected 2-D tensors") rather than the matmul inside it.
"""

from __future__ import annotations

from dispatch_jit.broadcast import broadcast_shapes
from dispatch_jit.dtypes import BOOL, COMPLEX, FLOAT, bfloat16, float64
from dispatch_jit.errors import BroadcastError, DTypeError, ShapeError, ValueOverflowError
from dispatch_jit.ops import entries

__all__ = ["SCHEMAS", "KERNELS", "METHODS"]

SCHEMAS = [
    "mm(Tensor self, Tensor mat2) -> Tensor",
    "bmm(Tensor self, Tensor mat2) -> Tensor",
    "outer(Tensor self, Tensor vec2) -> Tensor",
    "t(Tensor(a) self) -> Tensor(a)",
    "clamp_min(Tensor self, Tensor min) -> Tensor",
    "clamp_max(Tensor self, Tensor max) -> Tensor",
    "isclose(Tensor self, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False) -> Tensor",
    "masked_fill(Tensor self, Tensor mask, Tensor value) -> Tensor",
    "repeat(Tensor self, int[] repeats) -> Tensor",
]
METHODS = ["mm", "bmm", "outer", "t", "clamp_min", "clamp_max", "isclose", "masked_fill", "repeat"]

A = entries("aten")    # the ops are defined after this module is imported


def _dims(op: str, x, n: int, name: str) -> None:
    if x.ndim != n:
        raise ShapeError(f"{op}: {name} must be a {n}-D tensor, got shape {tuple(x.shape)}")


def _same_dtype(op: str, x, other) -> None:
    # PyTorch's mm and bmm do not promote (matmul here does): mixed dtypes are an error there
    if x.dtype is not other.dtype:
        raise DTypeError(f"{op}: expected both operands to have the same dtype, but got {x.dtype.name} and "
                         f"{other.dtype.name}; convert one: mat2.to(self.dtype)")


def _matrices(op: str, x, mat2, n: int, fits: bool, shapes: str):
    """PyTorch's mm/bmm preconditions (n-D operands of one dtype whose shapes ``fits``), then matmul."""
    _dims(op, x, n, "self")
    _dims(op, mat2, n, "mat2")
    _same_dtype(op, x, mat2)
    if not fits(x.shape, mat2.shape):
        raise ShapeError(f"{op}: {shapes} shapes cannot be multiplied ({'x'.join(map(str, x.shape))} and "
                         f"{'x'.join(map(str, mat2.shape))})")
    return A.matmul(x, mat2)


def mm(x, mat2):
    return _matrices("mm", x, mat2, 2, lambda a, b: a[1] == b[0], "mat1 and mat2")


def bmm(x, mat2):
    return _matrices("bmm", x, mat2, 3, lambda a, b: a[0] == b[0] and a[2] == b[1], "batch1 and batch2")


def outer(x, vec2):
    _dims("outer", x, 1, "self")
    _dims("outer", vec2, 1, "vec2")
    # PyTorch's outer is a broadcast multiply: it promotes mixed dtypes, as mul does
    return A.mul(A.unsqueeze(x, 1), A.unsqueeze(vec2, 0))


def t(x):
    if x.ndim > 2:
        raise ShapeError(f"t: expects a tensor with <= 2 dimensions, but self is {x.ndim}D; use x.mT or "
                         f"x.transpose(d0, d1)")
    return A.transpose(x, 0, 1) if x.ndim == 2 else A.reshape(x, tuple(x.shape))


def clamp_min(x, min):  # noqa: A002  (PyTorch's argument name)
    return A.clamp(x, min, None)


def clamp_max(x, max):  # noqa: A002
    return A.clamp(x, None, max)


def isclose(x, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """PyTorch's isclose: equal, or |x - other| finite and <= atol + rtol * |other|; NaNs equal
    only with ``equal_nan``.  Integers compare in float64 (no wrap-around in the difference)."""
    dt = getattr(other, "dtype", None)
    if dt is not None and dt is not x.dtype:
        raise DTypeError(f"isclose: expected both inputs to have the same dtype, got {x.dtype.name} and "
                         f"{dt.name}; convert one: other.to(x.dtype)")
    if rtol < 0 or atol < 0:
        raise ShapeError(f"isclose: rtol and atol must be non-negative, got rtol={rtol} and atol={atol}")
    close = A.eq(x, other)
    if x.dtype.category == BOOL:
        return close
    if x.dtype.category not in (FLOAT, COMPLEX):
        x, other = x.to(float64), other.to(float64) if dt is not None else float(other)
    if equal_nan:
        close = A.logical_or(close, A.logical_and(A.isnan(x), A.isnan(other)))
    err = A.abs(A.sub(x, other))
    within = A.logical_and(A.isfinite(err), A.le(err, A.add(A.mul(A.abs(other), rtol), atol)))
    return A.logical_or(close, within)


def masked_fill(x, mask, value):
    if mask.dtype.category != BOOL:
        raise DTypeError(f"masked_fill: expected a bool mask, got {mask.dtype.name}; pass mask != 0")
    if getattr(value, "ndim", 0) != 0:
        raise ShapeError(f"masked_fill: value must be a number or a 0-d tensor, got shape {tuple(value.shape)}")
    try:
        fits = broadcast_shapes(tuple(x.shape), tuple(mask.shape)) == tuple(x.shape)
    except ValueError:
        fits = False
    if not fits:
        raise BroadcastError(f"masked_fill: the mask of shape {tuple(mask.shape)} does not broadcast to the "
                             f"input's shape {tuple(x.shape)}")
    if x.dtype.category not in (BOOL, COMPLEX):
        _check_real_value(x, value)
        if isinstance(value, complex):
            value = value.real
    # the result keeps the input's dtype: the value is cast to it, as PyTorch's
    if isinstance(value, (bool, int, float, complex)):
        value = x.dtype.np.type(value).item() if x.dtype is not bfloat16 else float(value)   # (rounded by where)
    out = A.where(mask, value, x)
    return out if out.dtype is x.dtype else out.to(x.dtype)


def _check_real_value(x, value):
    """PyTorch refuses a complex value with an imaginary part for a real (non-bool) tensor rather than
    dropping it; a complex 0-d tensor is read for that, as PyTorch reads it."""
    if isinstance(value, complex):
        v = value
    elif getattr(value, "dtype", None) is not None and value.dtype.category == COMPLEX:
        v = complex(value.item())
    else:
        return
    if v.imag != 0:
        raise ValueOverflowError(f"masked_fill: value cannot be converted to type {x.dtype.name} without overflow "
                                 f"(it is complex, {v}); fill a complex tensor, or pass the real part: value.real")


def repeat(x, repeats):
    """``repeats[d]`` copies along each dimension: every dimension split into (copies, size),
    broadcast along the copies, copied (``clone``) and merged back, so the gradient is expand's
    (a sum).  The copy is what makes the result new memory, as PyTorch's: merged back without it,
    a reshape that can view the broadcast would alias ``x`` (a later write into ``x`` showing
    through, and the result read-only)."""
    repeats = tuple(repeats)
    if len(repeats) < x.ndim:
        raise ShapeError(f"repeat: the number of repeats ({len(repeats)}) can not be smaller than the number of "
                         f"dimensions of the tensor ({x.ndim})")
    if any(r < 0 for r in repeats):
        raise ShapeError(f"repeat: repeats must be non-negative, got {list(repeats)}")
    shape = (1,) * (len(repeats) - x.ndim) + tuple(x.shape)
    split = tuple(s for n in shape for s in (1, n))
    grown = tuple(s for r, n in zip(repeats, shape) for s in (r, n))
    out = A.clone(A.expand(A.reshape(x, split), grown))
    return A.reshape(out, tuple(r * n for r, n in zip(repeats, shape)))


KERNELS = {"CompositeImplicitAutograd": {
    "mm": mm, "bmm": bmm, "outer": outer, "t": t, "clamp_min": clamp_min, "clamp_max": clamp_max,
    "isclose": isclose, "masked_fill": masked_fill, "repeat": repeat}}
