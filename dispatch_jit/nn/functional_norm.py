"""``dj.nn.functional``'s group, instance, RMS and local response normalizations, the pixel and
channel shuffles, and the 1-D adaptive poolings and 2-D adaptive max pooling: PyTorch's names,
signatures, defaults and checks, as compositions of reductions, elementwise ops, reshapes and
gathers (so their gradients are those ops' rows, and a trace sees ordinary op calls).

>>> import dispatch_jit as dj
>>> import dispatch_jit.nn.functional as F
>>> F.pixel_shuffle(dj.arange(4.0).reshape(1, 4, 1, 1), 2)
tensor([[[[0., 1.],
          [2., 3.]]]])
"""

from __future__ import annotations

import numpy as np

from ..autograd.grad_mode import no_grad
from ..dtypes import FLOAT
from ..errors import DTypeError, InvalidArgumentError, SchemaError, ShapeError
from ..ops import entries

__all__ = ["group_norm", "instance_norm", "rms_norm", "local_response_norm", "pixel_shuffle", "pixel_unshuffle",
           "channel_shuffle", "adaptive_avg_pool1d", "adaptive_max_pool1d", "adaptive_max_pool2d"]

A = entries("aten")


def _affine(out, weight, bias, c: int, ndim: int):
    shape = (1, c) + (1,) * (ndim - 2)
    if weight is not None:
        out = A.mul(out, A.reshape(weight, shape))
    if bias is not None:
        out = A.add(out, A.reshape(bias, shape))
    return out


def _normalize(x, axes, eps: float):
    mean = A.mean(x, axes, True)
    centered = A.sub(x, mean)
    var = A.mean(A.mul(centered, centered), axes, True)
    return A.mul(centered, A.rsqrt(A.add(var, eps))), mean, var


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):
    """Normalizes each of ``num_groups`` groups of channels of (N, C, ...) by its own mean and
    (biased) variance, then scales and shifts each channel by ``weight``/``bias``.

    >>> import dispatch_jit as dj
    >>> group_norm(dj.tensor([[1.0, 3.0, 5.0, 7.0]]), 2)
    tensor([[-1.0000,  1.0000, -1.0000,  1.0000]])
    """
    if input.ndim < 2:
        raise ShapeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    if input.dtype.category != FLOAT:
        raise DTypeError(f"group_norm: expected a floating point input, got {input.dtype.name}")
    n, c = input.shape[0], input.shape[1]
    if num_groups <= 0 or c % num_groups:
        raise ShapeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                         f"shape {list(input.shape)} and num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.numel() != c):
            raise ShapeError(f"Expected {name} to be a vector of size equal to the number of channels in input, "
                             f"but got {name} of shape {list(t.shape)} and input of shape {list(input.shape)}")
    grouped = A.reshape(input, (n, num_groups, -1)) if input.numel() else input
    if not input.numel():
        return _affine(input, weight, bias, c, input.ndim)
    out = A.reshape(_normalize(grouped, [2], eps)[0], tuple(input.shape))
    return _affine(out, weight, bias, c, input.ndim)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5):
    """Normalizes each channel of each sample of (N, C, ...) over its spatial dims; with running
    statistics given and ``use_input_stats``, they move by ``momentum`` towards the batch's mean of
    the instance means and variances (unbiased), in place; without ``use_input_stats`` they
    normalize instead.

    >>> import dispatch_jit as dj
    >>> instance_norm(dj.tensor([[[1.0, 3.0]], [[0.0, 4.0]]]))
    tensor([[[-1.0000,  1.0000]],
    <BLANKLINE>
            [[-1.0000,  1.0000]]])
    """
    if input.ndim < 3:
        raise ShapeError(f"instance_norm: expected an input of 3 or more dimensions (N, C, L, ...), got shape "
                         f"{tuple(input.shape)}")
    if input.dtype.category != FLOAT:
        raise DTypeError(f"instance_norm: expected a floating point input, got {input.dtype.name}")
    c = input.shape[1]
    axes = list(range(2, input.ndim))
    bshape = (1, c) + (1,) * (input.ndim - 2)
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise SchemaError("Expected running_mean and running_var to be defined when use_input_stats is false")
        out = A.mul(A.sub(input, A.reshape(running_mean, bshape)),
                    A.rsqrt(A.add(A.reshape(running_var, bshape), eps)))
        return _affine(out, weight, bias, c, input.ndim)
    count = int(np.prod(input.shape[2:]))
    if count <= 1:
        raise InvalidArgumentError(f"Expected more than 1 spatial element when training, got input size "
                                   f"{list(input.shape)}")
    out, mean, var = _normalize(input, axes, eps)
    if running_mean is not None or running_var is not None:
        with no_grad():
            if running_mean is not None:
                m = A.mean(A.reshape(mean.detach(), (input.shape[0], c)), [0])
                A.add_(A.mul_(running_mean, 1.0 - momentum), A.mul(m, momentum))
            if running_var is not None:
                v = A.mean(A.reshape(var.detach(), (input.shape[0], c)), [0])
                A.add_(A.mul_(running_var, 1.0 - momentum), A.mul(v, momentum * count / (count - 1)))
    return _affine(out, weight, bias, c, input.ndim)


def rms_norm(input, normalized_shape, weight=None, eps: float | None = None):
    """``input / sqrt(mean(input**2) + eps)`` over the last ``len(normalized_shape)`` dims, times
    ``weight``; ``eps`` defaults to the dtype's machine epsilon.

    >>> import dispatch_jit as dj
    >>> rms_norm(dj.tensor([[3.0, 4.0]]), [2], eps=0.0)
    tensor([[0.8485, 1.1314]])
    """
    shape = (int(normalized_shape),) if isinstance(normalized_shape, int) else tuple(int(s) for s in normalized_shape)
    k = len(shape)
    if k == 0:
        raise ShapeError(f"Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
                         f"element, but got normalized_shape = {list(shape)}")
    if tuple(input.shape[input.ndim - k:]) != shape or k > input.ndim:
        raise ShapeError(f"Given normalized_shape={list(shape)}, expected input with shape [*, "
                         f"{', '.join(map(str, shape))}], but got input of size{list(input.shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        raise ShapeError(f"Expected weight to be of same shape as normalized_shape, but got weight of shape "
                         f"{list(weight.shape)} and normalized_shape = {list(shape)}")
    if input.dtype.category != FLOAT:
        raise DTypeError(f"rms_norm: expected a floating point input, got {input.dtype.name}")
    if eps is None:
        eps = float(np.finfo(input.dtype.np).eps)
    axes = list(range(input.ndim - k, input.ndim))
    out = A.mul(input, A.rsqrt(A.add(A.mean(A.mul(input, input), axes, True), eps))) if axes else \
        A.mul(input, A.rsqrt(A.add(A.mul(input, input), eps)))
    return A.mul(out, weight) if weight is not None else out


def local_response_norm(input, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
    """Divides each element by ``(k + alpha * mean of the squares of the ``size`` neighbouring
    channels) ** beta`` (zero padded at the edges, as PyTorch's average pooling).

    >>> import dispatch_jit as dj
    >>> local_response_norm(dj.tensor([[[2.0], [2.0]]]), 2, alpha=1.0, beta=1.0, k=0.0)
    tensor([[[1.0000],
             [0.5000]]])
    """
    if input.ndim < 3:
        raise ShapeError(f"Expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if input.numel() == 0:
        return input
    sq = A.mul(input, input)
    lo, hi = size // 2, (size - 1) // 2
    from ..creation import zeros
    shape = list(sq.shape)
    parts = []
    if lo:
        shape[1] = lo
        parts.append(zeros(tuple(shape), dtype=sq.dtype, device=sq.device))
    parts.append(sq)
    if hi:
        shape[1] = hi
        parts.append(zeros(tuple(shape), dtype=sq.dtype, device=sq.device))
    padded = A.cat(parts, 1) if len(parts) > 1 else sq
    c = input.shape[1]
    total = None
    for o in range(size):
        piece = A.narrow(padded, 1, o, c)
        total = piece if total is None else A.add(total, piece)
    # an integer input averages as PyTorch's integer avg_pool does: the sum divided with truncation
    avg = A.floor_divide(total, size) if input.dtype.category != FLOAT else A.div(total, size)
    div = A.pow(A.add(A.mul(avg, alpha), k), beta)
    return A.div(input, div)


def pixel_shuffle(input, upscale_factor: int):
    """(*, C * r**2, H, W) -> (*, C, H * r, W * r) with ``r = upscale_factor``.

    >>> import dispatch_jit as dj
    >>> pixel_shuffle(dj.ones(1, 8, 2, 3), 2).shape
    (1, 2, 4, 6)
    """
    r = int(upscale_factor)
    if input.ndim < 3:
        raise ShapeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                         f"{input.ndim} dimension(s)")
    if r <= 0:
        raise InvalidArgumentError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    c, h, w = input.shape[-3:]
    if c % (r * r):
        raise ShapeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                         f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    lead = tuple(input.shape[:-3])
    b = len(lead)
    x = A.reshape(input, lead + (c // (r * r), r, r, h, w))
    x = A.permute(x, list(range(b)) + [b, b + 3, b + 1, b + 4, b + 2])
    return A.reshape(x, lead + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor: int):
    """(*, C, H * r, W * r) -> (*, C * r**2, H, W) with ``r = downscale_factor``: pixel_shuffle's
    inverse.

    >>> import dispatch_jit as dj
    >>> pixel_unshuffle(dj.ones(1, 2, 4, 6), 2).shape
    (1, 8, 2, 3)
    """
    r = int(downscale_factor)
    if input.ndim < 3:
        raise ShapeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                         f"{input.ndim} dimension(s)")
    if r <= 0:
        raise InvalidArgumentError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    c, h, w = input.shape[-3:]
    if h % r:
        raise ShapeError(f"pixel_unshuffle expects height to be divisible by downscale_factor, but input.size(-2)="
                         f"{h} is not divisible by {r}")
    if w % r:
        raise ShapeError(f"pixel_unshuffle expects width to be divisible by downscale_factor, but input.size(-1)="
                         f"{w} is not divisible by {r}")
    lead = tuple(input.shape[:-3])
    b = len(lead)
    x = A.reshape(input, lead + (c, h // r, r, w // r, r))
    x = A.permute(x, list(range(b)) + [b, b + 2, b + 4, b + 1, b + 3])
    return A.reshape(x, lead + (c * r * r, h // r, w // r))


def channel_shuffle(input, groups: int):
    """Interleaves the channels of (N, C, ...) from ``groups`` groups: (N, g, C/g, ...) transposed
    to (N, C/g, g, ...).

    >>> import dispatch_jit as dj
    >>> channel_shuffle(dj.arange(4.0).reshape(1, 4, 1), 2).flatten()
    tensor([0., 2., 1., 3.])
    """
    if input.ndim < 3:
        raise ShapeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with "
                         f"{input.ndim} dimension(s)")
    if groups <= 0:
        raise InvalidArgumentError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    n, c = input.shape[0], input.shape[1]
    if c % groups:
        raise ShapeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    rest = tuple(input.shape[2:])
    x = A.reshape(input, (n, groups, c // groups) + rest)
    return A.reshape(A.transpose(x, 1, 2), (n, c) + rest)


def _size1(who: str, output_size) -> int:
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != 1:
            raise ShapeError(f"{who}: output_size must be 1")
        output_size = output_size[0]
    return int(output_size)


def _bins(n: int, o: int):
    return [((i * n) // o, -((-(i + 1) * n) // o)) for i in range(o)]


def adaptive_avg_pool1d(input, output_size):
    """Output bin i of a length-n signal averages ``[floor(i*n/o), ceil((i+1)*n/o))``.

    >>> import dispatch_jit as dj
    >>> adaptive_avg_pool1d(dj.tensor([[[1.0, 2.0, 3.0, 4.0]]]), 2)
    tensor([[[1.5000, 3.5000]]])
    """
    if input.ndim not in (2, 3):
        raise ShapeError(f"adaptive_avg_pool1d(): Expected 2D or 3D tensor, but got {list(input.shape)}")
    o = _size1("adaptive_avg_pool1d", output_size)
    if o <= 0:
        raise ShapeError(f"adaptive_avg_pool1d: output_size must be positive, got {o}")
    n = input.shape[-1]
    return A.cat([A.mean(A.narrow(input, input.ndim - 1, a, b - a), [-1], True) for a, b in _bins(n, o)], -1)


def _window_max(window, start: int, nd: int):
    """The maximum of each flattened window (last dim) and its index, ``start`` + its position."""
    pos = A.argmax(window, -1, True)
    return A.gather(window, -1, pos), A.add(pos, start) if start else pos


def adaptive_max_pool1d(input, output_size, return_indices: bool = False):
    """Output bin i of a length-n signal is the maximum of ``[floor(i*n/o), ceil((i+1)*n/o))``
    (NaN wins); ``return_indices`` also gives where it was.

    >>> import dispatch_jit as dj
    >>> adaptive_max_pool1d(dj.tensor([[[1.0, 5.0, 3.0, 4.0]]]), 2, return_indices=True)
    (tensor([[[5., 4.]]]), tensor([[[1, 3]]]))
    """
    if input.ndim not in (2, 3):
        raise ShapeError(f"adaptive_max_pool1d(): Expected 2D or 3D tensor, but got {list(input.shape)}")
    o = _size1("adaptive_max_pool1d", output_size)
    if o <= 0:
        raise ShapeError(f"adaptive_max_pool1d: output_size must be positive, got {o}")
    if input.shape[-1] == 0:
        raise ShapeError(f"adaptive_max_pool1d(): Expected input to have non-zero size for non-batch dimensions, "
                         f"but input has sizes {list(input.shape)} with dimension {input.ndim - 1} being empty")
    vals, idx = zip(*(_window_max(A.narrow(input, input.ndim - 1, a, b - a), a, 1) for a, b in _bins(input.shape[-1], o)))
    out = A.cat(list(vals), -1)
    return (out, A.cat(list(idx), -1)) if return_indices else out


def adaptive_max_pool2d(input, output_size, return_indices: bool = False):
    """Output bin (i, j) is the maximum of rows ``[floor(i*h/oh), ceil((i+1)*h/oh))`` by columns
    likewise (NaN wins); ``return_indices`` gives its flat index ``row * w + col`` in the plane.

    >>> import dispatch_jit as dj
    >>> adaptive_max_pool2d(dj.arange(16.0).reshape(1, 4, 4), 2)
    tensor([[[ 5.,  7.],
             [13., 15.]]])
    """
    if input.ndim not in (3, 4):
        raise ShapeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got {list(input.shape)}")
    size = list(output_size) if isinstance(output_size, (list, tuple)) else [output_size, output_size]
    if len(size) != 2:
        raise ShapeError("adaptive_max_pool2d: internal error: output_size.size() must be 2")
    h, w = input.shape[-2:]
    oh, ow = (h if size[0] is None else int(size[0])), (w if size[1] is None else int(size[1]))
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"adaptive_max_pool2d: output_size must be positive, got ({oh}, {ow})")
    if h == 0 or w == 0:
        raise ShapeError(f"adaptive_max_pool2d(): Expected input to have non-zero size for non-batch dimensions, "
                         f"but input has sizes {list(input.shape)}")
    lead = tuple(input.shape[:-2])
    rows_v, rows_i = [], []
    for r0, r1 in _bins(h, oh):
        band = A.narrow(input, input.ndim - 2, r0, r1 - r0)
        cols_v, cols_i = [], []
        for c0, c1 in _bins(w, ow):
            win = A.reshape(A.narrow(band, input.ndim - 1, c0, c1 - c0), lead + (-1,))
            v, p = _window_max(win, 0, 2)
            # position p in the (r1 - r0) x (c1 - c0) window -> the plane's flat index
            wc = c1 - c0
            cols_v.append(v)
            cols_i.append(A.add(A.add(A.mul(A.floor_divide(p, wc), w), A.remainder(p, wc)), r0 * w + c0))
        rows_v.append(A.unsqueeze(A.cat(cols_v, -1), -2))
        rows_i.append(A.unsqueeze(A.cat(cols_i, -1), -2))
    out = A.cat(rows_v, -2)
    return (out, A.cat(rows_i, -2)) if return_indices else out
