"""The standard's manipulation functions: views and copies over the dispatcher's shape ops,
with the standard's parameter names and errors (an axis out of range is an IndexError,
``squeeze`` of an axis that is not 1 a ValueError, ``reshape(copy=False)`` never copies)."""

from __future__ import annotations

from dispatch_jit.errors import AxisError, InvalidArgumentError, ShapeError
from dispatch_jit.ops import entries
from dispatch_jit.broadcast import broadcast_shapes as _broadcast_shapes

from ._dtypes import result_type

__all__ = ["broadcast_arrays", "broadcast_shapes", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis",
           "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "tile", "unstack", "normalize"]

A = entries("aten")


def normalize(axis: int, ndim: int, what: str = "axis") -> int:
    if not -ndim <= axis < ndim:
        raise AxisError(f"{what} {axis} is out of range for an array of {ndim} dimensions "
                        f"(expected in [{-ndim}, {ndim - 1}])")
    return axis % ndim


def _same_dtype(arrays):
    dt = result_type(*arrays)
    return [a if a.dtype is dt else A.to(a, dt, False) for a in arrays]


def broadcast_shapes(*shapes):
    try:
        return _broadcast_shapes(*shapes)
    except ValueError:
        raise ShapeError(f"broadcast_shapes: shapes {', '.join(map(str, shapes))} cannot be broadcast") from None


def broadcast_to(x, /, shape):
    shape = tuple(shape)
    if broadcast_shapes(tuple(x.shape), shape) != shape:
        raise ShapeError(f"broadcast_to: an array of shape {tuple(x.shape)} cannot be broadcast to {shape}")
    return A.expand(x, shape)


def broadcast_arrays(*arrays):
    shape = broadcast_shapes(*[tuple(a.shape) for a in arrays])
    return tuple(A.expand(a, shape) for a in arrays)


def concat(arrays, /, *, axis=0):
    arrays = _same_dtype(list(arrays))
    if axis is None:
        return A.cat([A.reshape(a, (-1,)) for a in arrays], 0)
    return A.cat(arrays, normalize(axis, arrays[0].ndim))


def stack(arrays, /, *, axis=0):
    arrays = _same_dtype(list(arrays))
    return A.stack(arrays, normalize(axis, arrays[0].ndim + 1))


def expand_dims(x, /, axis=0):
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    n = x.ndim + len(axes)
    norm = sorted(normalize(a, n) for a in axes)
    if len(set(norm)) != len(norm):
        raise InvalidArgumentError(f"expand_dims: repeated axis in {axes}")
    for a in norm:
        x = A.unsqueeze(x, a)
    return x


def squeeze(x, /, axis):
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    norm = tuple(normalize(a, x.ndim) for a in axes)
    for a in norm:
        if x.shape[a] != 1:
            raise ShapeError(f"squeeze: axis {a} has size {x.shape[a]}, not 1; only size-1 axes can be removed")
    return A.squeeze(x, norm) if norm else x


def flip(x, /, *, axis=None):
    axes = range(x.ndim) if axis is None else ((axis,) if isinstance(axis, int) else axis)
    return A.flip(x, [normalize(a, x.ndim) for a in axes])


def roll(x, /, shift, *, axis=None):
    shifts = [shift] if isinstance(shift, int) else list(shift)
    if axis is None:
        return A.roll(x, shifts, [])
    axes = [axis] if isinstance(axis, int) else list(axis)
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    return A.roll(x, shifts, [normalize(a, x.ndim) for a in axes])


def permute_dims(x, /, axes):
    return A.permute(x, [normalize(a, x.ndim) for a in axes])


def moveaxis(x, source, destination, /):
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise InvalidArgumentError(f"moveaxis: source {src} and destination {dst} must have the same number of axes")
    src = [normalize(a, x.ndim) for a in src]
    dst = [normalize(a, x.ndim) for a in dst]
    order = [a for a in range(x.ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return A.permute(x, order)


def reshape(x, /, shape, *, copy=None):
    shape = tuple(shape)
    if copy:
        return A.reshape(A.clone(x), shape)
    if copy is False:
        return A.view(x, shape)          # a view or a ShapeError (a ValueError): never a copy
    return A.reshape(x, shape)


def repeat(x, repeats, /, *, axis=None):
    """Each element repeated ``repeats`` times (an int, or one count per element along ``axis``),
    as an index_select of the repeated positions."""
    from dispatch_jit.creation import arange
    from dispatch_jit.tensor import Tensor
    if axis is None:
        x, axis = A.reshape(x, (-1,)), 0
    ax = normalize(axis, x.ndim)
    n = x.shape[ax]
    if isinstance(repeats, Tensor):
        if repeats.ndim == 0:
            repeats = int(repeats.item())
        else:
            if tuple(repeats.shape) not in ((n,), (1,)):
                raise ShapeError(f"repeat: {tuple(repeats.shape)} repeats for an axis of size {n}")
            counts = A.expand(repeats, (n,)) if repeats.shape[0] != n else repeats
            ends = A.cumsum(counts, 0)
            total = int(ends[-1].item()) if n else 0
            pos = A.searchsorted(ends, arange(total, device=x.device), right=True)
            return A.index_select(x, ax, pos)
    if repeats < 0:
        raise InvalidArgumentError(f"repeat: repeats must be non-negative, got {repeats}")
    pos = A.floor_divide(arange(n * repeats, device=x.device), repeats) if repeats else arange(0, device=x.device)
    return A.index_select(x, ax, pos)


def tile(x, repetitions, /):
    reps = tuple(repetitions)
    nd = max(len(reps), x.ndim)
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (nd - x.ndim) + tuple(x.shape)
    inter = [v for s in shape for v in (1, s)]
    big = [v for r, s in zip(reps, shape) for v in (r, s)]
    return A.reshape(A.clone(A.expand(A.reshape(x, inter), big)), [r * s for r, s in zip(reps, shape)])


def unstack(x, /, *, axis=0):
    if x.ndim == 0:
        raise AxisError("unstack: a zero-dimensional array has no axis")
    ax = normalize(axis, x.ndim)
    return tuple(A.squeeze(A.narrow(x, ax, i, 1), (ax,)) for i in range(x.shape[ax]))
