"""PyTorch's counting and searching functions over the sort, search, scatter and gather ops:
argwhere, histc, histogram, bincount, bucketize, isin, unique_consecutive and repeat_interleave
(``PY_FUNCTIONS``: ``dj.X``, and ``Tensor.X`` where PyTorch has the method).

Their result sizes depend on the data (a count, a maximum), so each reads one number back
(``.item()``) before it shapes its output, as PyTorch's CPU kernels do.  repeat_interleave is
an ``index_select`` (differentiable); the others return integer tensors or counts.
"""

from __future__ import annotations

from dispatch_jit.dtypes import BOOL, COMPLEX, FLOAT, float64, int64, promote_types
from dispatch_jit.errors import DTypeError, InvalidArgumentError, ShapeError
from dispatch_jit.ops import entries
from dispatch_jit.return_types import named

from ..shape.op import normalize_axis

__all__ = ["PY_FUNCTIONS"]

A = entries("aten")


def _arange(n: int, like, dtype=int64):
    from dispatch_jit.creation import arange
    return arange(n, dtype=dtype, device=like.device)


def _zeros(n, dtype, like):
    from dispatch_jit.creation import zeros
    return zeros(n, dtype=dtype, device=like.device)


def argwhere(input):  # noqa: A002
    """The indices of the non-zero elements, one row each (``nonzero``), as ``torch.argwhere``.

    >>> import dispatch_jit as dj
    >>> dj.argwhere(dj.tensor([[0, 1], [1, 0]]))
    tensor([[0, 1],
            [1, 0]])
    """
    return A.nonzero(input)


def histc(input, bins=100, min=0, max=0):  # noqa: A002  (PyTorch's argument names)
    """A histogram of ``bins`` equal bins over [min, max] (both 0: the data's range); elements outside
    are ignored, the maximum falls in the last bin; as ``torch.histc``.

    >>> import dispatch_jit as dj
    >>> dj.histc(dj.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3)
    tensor([0., 2., 1., 0.])
    """
    if input.dtype.category != FLOAT:
        raise DTypeError(f"\"histogram_cpu\" not implemented for '{input.dtype.name}'; convert first: x.float()")
    if bins <= 0:
        raise InvalidArgumentError(f"torch.histc(): bins must be > 0, but got {bins} for dimension 0")
    lo, hi = float(min), float(max)
    if lo == hi and input.numel():
        lo, hi = float(A.min(input, None).item()), float(A.max(input, None).item())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (lo == lo and hi == hi and abs(lo) != float("inf") and abs(hi) != float("inf")):
        raise InvalidArgumentError(f"torch.histc(): range of [{lo}, {hi}] is not finite")
    if lo > hi:
        raise InvalidArgumentError("torch.histc(): max must be larger than min")
    x = A.reshape(input, (-1,))
    inside = A.logical_and(A.ge(x, lo), A.le(x, hi))
    pos = A.floor(A.mul(A.div(A.sub(x, lo), hi - lo), bins)).to(int64)
    pos = A.clamp(A.where(inside, pos, 0), 0, bins - 1)
    counts = A.scatter_add(_zeros(bins, input.dtype, input), 0, pos, inside.to(input.dtype))
    return counts


HistogramResult = named("histogram", ("hist", "bin_edges"))


def histogram(input, bins, *, range=None, weight=None, density=False):  # noqa: A002  (PyTorch's names)
    """A histogram of ``input``'s elements over ``bins`` (a count of equal bins over ``range``, by
    default the data's range, or a 1-D tensor of increasing edges), as ``torch.histogram``:
    ``(hist, bin_edges)``; each bin holds [left, right) and the last one its right edge too; elements
    outside are ignored; ``weight`` sums weights, ``density`` normalizes to unit area.

    >>> import dispatch_jit as dj
    >>> dj.histogram(dj.tensor([1.0, 2.0, 1.0, 4.0]), 3)
    histogram(hist=tensor([2., 1., 1.]), bin_edges=tensor([1., 2., 3., 4.]))
    """
    if input.dtype.category != FLOAT:
        raise DTypeError(f"torch.histogram: input tensor and bins tensors should have the same dtype, and be "
                         f"float32 or float64 (got input {input.dtype.name})")
    x = A.reshape(input, (-1,))
    if hasattr(bins, "_sig"):
        if bins.ndim != 1 or bins.shape[0] < 1:
            raise ShapeError(f"torch.histogram(): bins tensor should have one dimension, but got {bins.ndim} "
                             f"dimensions")
        if bins.dtype is not input.dtype:
            raise DTypeError(f"torch.histogram: input tensor and bins tensors should have the same dtype, but "
                             f"got input {input.dtype.name} and bins {bins.dtype.name}")
        edges = bins
    else:
        if int(bins) <= 0:
            raise InvalidArgumentError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
        if range is not None:
            lo, hi = float(range[0]), float(range[1])
        elif x.numel():
            lo, hi = float(A.min(x, None).item()), float(A.max(x, None).item())
        else:
            lo, hi = 0.0, 0.0
        if lo > hi:
            raise InvalidArgumentError(f"torch.histogram(): min should not exceed max, but got min {lo} max {hi} "
                                       f"for dimension 0")
        if not all(v == v and abs(v) != float("inf") for v in (lo, hi)):
            raise InvalidArgumentError(f"torch.histogram(): range of [{lo}, {hi}] is not finite")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        from dispatch_jit.creation import linspace
        edges = linspace(lo, hi, int(bins) + 1, dtype=input.dtype, device=input.device)
    nb = edges.shape[0] - 1
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise ShapeError("torch.histogram: if weight tensor is provided it should have the same shape as the input "
                         "tensor excluding its innermost dimension")
    w = A.reshape(weight, (-1,)).to(input.dtype) if weight is not None else A.add(A.mul(x, 0), 1)
    if nb == 0 or x.numel() == 0:
        hist = _zeros(nb, input.dtype, input)
    else:
        first, last = A.narrow(edges, 0, 0, 1), A.narrow(edges, 0, nb, 1)
        inside = A.logical_and(A.ge(x, first), A.le(x, last))
        # the bin whose [left, right) holds x, found on the edges themselves; the last edge closes the last bin
        pos = A.clamp(A.sub(A.searchsorted(edges, x, right=True), 1), 0, nb - 1)
        hist = A.scatter_add(_zeros(nb, input.dtype, input), 0, pos, A.where(inside, w, A.mul(w, 0)))
    if density:
        widths = A.sub(A.narrow(edges, 0, 1, nb), A.narrow(edges, 0, 0, nb))
        hist = A.div(hist, A.mul(A.sum(hist), widths))
    return HistogramResult(hist, edges)


def bincount(input, weights=None, minlength=0):  # noqa: A002
    """How often each value 0..max occurs in a 1-D non-negative integer tensor (at least
    ``minlength`` bins); with ``weights`` their sums instead, as ``torch.bincount``.

    >>> import dispatch_jit as dj
    >>> dj.bincount(dj.tensor([0, 2, 2]))
    tensor([1, 0, 2])
    """
    if input.ndim != 1 or input.dtype.category == FLOAT or input.dtype.category in (BOOL, COMPLEX):
        raise ShapeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise InvalidArgumentError("minlength should be >= 0")
    if weights is not None and (weights.ndim != 1 or weights.shape[0] != input.shape[0]):
        raise ShapeError("weights should be 1-d and have the same length as input")
    if input.numel() and int(A.min(input, None).item()) < 0:
        raise InvalidArgumentError("bincount only supports 1-d non-negative integral inputs.")
    n = int(minlength)
    if input.numel():
        n = builtins_max(n, int(A.max(input, None).item()) + 1)
    if weights is None:
        return A.scatter_add(_zeros(n, int64, input), 0, input.to(int64), A.add(A.mul(input.to(int64), 0), 1))
    dt = weights.dtype if weights.dtype.name == "float32" else float64
    return A.scatter_add(_zeros(n, dt, input), 0, input.to(int64), weights.to(dt))


def builtins_max(a, b):
    return a if a >= b else b


def bucketize(input, boundaries, *, out_int32=False, right=False):  # noqa: A002
    """The index of the bucket of ``boundaries`` (1-D, ascending) each element falls in, as
    ``torch.bucketize`` (``right``: a value equal to a boundary goes to the bucket after it).

    >>> import dispatch_jit as dj
    >>> dj.bucketize(dj.tensor([1, 5, 9]), dj.tensor([2, 5, 8]))
    tensor([0, 1, 3])
    """
    if not hasattr(boundaries, "_sig") or boundaries.ndim != 1:
        raise ShapeError(f"boundaries tensor must be 1 dimension, but got dim("
                         f"{getattr(boundaries, 'ndim', 0)})")
    if not hasattr(input, "_sig"):
        from dispatch_jit.creation import tensor
        input = tensor(input, device=boundaries.device)  # noqa: A001
    return A.searchsorted(boundaries, input, out_int32=out_int32, right=right)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of ``elements`` is in ``test_elements`` (either may be a scalar), as
    ``torch.isin``: a sort of the test elements and a binary search for each element.

    >>> import dispatch_jit as dj
    >>> dj.isin(dj.tensor([1, 2, 3]), dj.tensor([3, 1]))
    tensor([ True, False,  True])
    """
    from dispatch_jit.creation import tensor
    if not hasattr(elements, "_sig") and not hasattr(test_elements, "_sig"):
        raise DTypeError("isin(): at least one of elements and test_elements must be a Tensor")
    like = elements if hasattr(elements, "_sig") else test_elements
    e = elements if hasattr(elements, "_sig") else tensor(elements, device=like.device)
    t = test_elements if hasattr(test_elements, "_sig") else tensor(test_elements, device=like.device)
    if not hasattr(test_elements, "_sig") and e.dtype.category != FLOAT and isinstance(test_elements, float):
        t = t.to(promote_types(e.dtype, t.dtype))
    dt = promote_types(e.dtype, t.dtype)
    e, t = e.to(dt), t.to(dt)
    flat = A.reshape(t, (-1,))
    if flat.numel() == 0:
        found = A.ne(A.mul(e, 0), A.mul(e, 0)) if dt.category != BOOL else A.logical_and(e, A.logical_not(e))
    else:
        s = A.sort(flat, 0, False, stable=True).values
        at = A.clamp(A.searchsorted(s, A.reshape(e, (-1,))), 0, s.shape[0] - 1)
        found = A.reshape(A.eq(A.gather(s, 0, at), A.reshape(e, (-1,))), tuple(e.shape))
    return A.logical_not(found) if invert else found


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """``input`` with each run of equal consecutive elements (or slices along ``dim``) made one,
    as ``torch.unique_consecutive``; ``return_inverse``: the run of each element,
    ``return_counts``: each run's length.

    >>> import dispatch_jit as dj
    >>> dj.unique_consecutive(dj.tensor([1, 1, 2, 2, 1]), return_counts=True)
    (tensor([1, 2, 1]), tensor([2, 2, 1]))
    """
    if dim is None:
        x, axis = A.reshape(input, (-1,)), 0
    else:
        axis = normalize_axis(dim, max(input.ndim, 1), "unique_consecutive")
        x = input if input.ndim else A.reshape(input, (1,))
    n = x.shape[axis]
    if n == 0:
        out = x
        inverse, counts = _zeros(tuple(input.shape) if dim is None else (0,), int64, input), _zeros(0, int64, input)
    else:
        later = A.narrow(x, axis, 1, n - 1)
        earlier = A.narrow(x, axis, 0, n - 1)
        ne = A.ne(later, earlier)
        if x.ndim > 1:
            ne = A.any(ne, [d for d in range(x.ndim) if d != axis])
        start = A.cat([A.eq(_zeros(1, int64, input), 0), ne], 0)          # a run starts here
        firsts = A.reshape(A.nonzero(start), (-1,))
        out = A.index_select(x, axis, firsts)
        run = A.sub(A.cumsum(start.to(int64), 0), 1)
        inverse = A.reshape(run, tuple(input.shape)) if dim is None else run
        ends = A.cat([A.narrow(firsts, 0, 1, firsts.shape[0] - 1), A.add(_zeros(1, int64, input), n)], 0)
        counts = A.sub(ends, firsts)
    extra = ([inverse] if return_inverse else []) + ([counts] if return_counts else [])
    return (out, *extra) if extra else out


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):  # noqa: A002
    """Each element (or slice along ``dim``) repeated ``repeats`` times (an int, or one count per
    element), as ``torch.repeat_interleave``; ``repeat_interleave(counts)`` alone repeats each
    index ``i`` ``counts[i]`` times.

    >>> import dispatch_jit as dj
    >>> dj.repeat_interleave(dj.tensor([1, 2]), 2), dj.repeat_interleave(dj.tensor([2, 1]))
    (tensor([1, 1, 2, 2]), tensor([0, 0, 1]))
    """
    if repeats is None:
        counts = input
        if counts.ndim != 1 or counts.dtype.category == FLOAT or counts.dtype.category == BOOL:
            raise ShapeError("repeat_interleave: repeats must be 0-dim or 1-dim tensor of integers")
        return _repeat_index(counts, counts, output_size)
    if dim is None:
        x, axis = A.reshape(input, (-1,)), 0
    else:
        axis = normalize_axis(dim, max(input.ndim, 1), "repeat_interleave")
        x = input if input.ndim else A.reshape(input, (1,))
    n = x.shape[axis]
    if hasattr(repeats, "_sig"):
        if repeats.ndim > 1 or repeats.dtype.category in (FLOAT, BOOL, COMPLEX):
            raise ShapeError("repeats must be 0-dim or 1-dim tensor of integers")
        if repeats.ndim == 1 and repeats.shape[0] not in (1, n):
            raise ShapeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                             f"{repeats.shape[0]} and input.size({axis}) = {n}")
        counts = A.expand(A.reshape(repeats, (-1,)), (n,)) if repeats.numel() == 1 else repeats
    else:
        if repeats < 0:
            raise InvalidArgumentError("repeats can not be negative")
        from dispatch_jit.creation import full
        counts = full((n,), int(repeats), dtype=int64, device=x.device)
    return A.index_select(x, axis, _repeat_index(counts, x, output_size))


def _repeat_index(counts, like, output_size):
    if counts.numel() and int(A.min(counts, None).item()) < 0:
        raise InvalidArgumentError("repeats can not be negative")
    counts = counts.to(int64)
    ends = A.cumsum(counts, 0)
    total = int(ends[-1].item()) if counts.numel() else 0
    if output_size is not None and output_size != total:
        raise InvalidArgumentError(f"allocated size does not match required size: output_size={output_size}, "
                                   f"repeats sum to {total}")
    return A.searchsorted(ends, _arange(total, like), right=True)


PY_FUNCTIONS = {
    "argwhere": (argwhere, True), "histc": (histc, True), "histogram": (histogram, True), "bincount": (bincount, True), "bucketize": (bucketize, False),
    "isin": (isin, False), "unique_consecutive": (unique_consecutive, True),
    "repeat_interleave": (repeat_interleave, True),
}
