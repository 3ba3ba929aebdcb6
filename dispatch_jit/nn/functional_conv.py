"""``dj.nn.functional``'s sliding-window names: ``conv1d``/``conv2d`` (one ``aten::convolution``
op: im2col + the BLAS product), ``max_pool1d``/``max_pool2d``, ``avg_pool1d``/``avg_pool2d``
(one op each: direct loops), ``adaptive_avg_pool2d`` and ``pad``, with PyTorch 2.13's
signatures, defaults and messages.  A 1-D op is its 2-D op on a plane of height 1; an unbatched
input (no N) gets one for the op and loses it after.  functional.py re-exports these.

>>> import dispatch_jit as dj
>>> x = dj.arange(16.0).reshape(1, 1, 4, 4)
>>> max_pool2d(x, 2)
tensor([[[[ 5.,  7.],
          [13., 15.]]]])
>>> conv2d(x, dj.ones(1, 1, 2, 2), stride=2).shape
(1, 1, 2, 2)
>>> pad(dj.tensor([[1.0, 2.0]]), (1, 1), mode="reflect")
tensor([[2., 1., 2., 1.]])
"""

from __future__ import annotations

import numpy as np

from ..creation import full
from ..errors import DTypeError, SchemaError, ShapeError
from ..ops import entries
from ..tensor import wrap

__all__ = ["conv1d", "conv2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool2d",
           "pad"]

A = entries("aten")


def _ntuple(v, n: int, name: str, who: str) -> list:
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    if len(v) == 1:
        v = v * n
    if len(v) != n or not all(isinstance(e, (int, np.integer)) for e in v):
        raise SchemaError(f"{who}: {name} must be an int or a tuple of {n} ints, got {v}")
    return [int(e) for e in v]


def _batched(who: str, input, nd: int):
    """(``input`` with a batch dim, whether one was added): PyTorch's unbatched inputs."""
    if input.ndim not in (nd + 1, nd + 2):
        raise ShapeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to {who}, but got input of "
                         f"size: [{', '.join(map(str, input.shape))}]")
    return (A.unsqueeze(input, 0), True) if input.ndim == nd + 1 else (input, False)


def _conv(who: str, nd: int, input, weight, bias, stride, padding, dilation, groups):
    x, added = _batched(who, input, nd)
    stride, dilation = _ntuple(stride, nd, "stride", who), _ntuple(dilation, nd, "dilation", who)
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise SchemaError(f"Invalid padding string '{padding}', should be one of {{'valid', 'same'}}")
        if padding == "same" and any(s != 1 for s in stride):
            raise SchemaError("padding='same' is not supported for strided convolutions")
        if padding == "valid" or weight.ndim != nd + 2:
            padding = [0] * nd
        else:
            # 'same': the total d*(k-1) split evenly, an odd one's extra element on the right (PyTorch pads the
            # input for it, as here)
            total = [dilation[i] * (weight.shape[2 + i] - 1) for i in range(nd)]
            padding = [t // 2 for t in total]
            extra = [t - 2 * (t // 2) for t in total]
            if any(extra):
                x = pad(x, [v for e in reversed(extra) for v in (0, e)])
    else:
        padding = _ntuple(padding, nd, "padding", who)
    out = A.convolution(x, weight, bias, stride, padding, dilation, False, [0] * nd, int(groups))
    return A.squeeze(out, [0]) if added else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """PyTorch's ``conv1d`` over (N, C_in, L) or (C_in, L); ``padding`` an int, a 1-tuple,
    ``'valid'`` or ``'same'``.

    >>> import dispatch_jit as dj
    >>> conv1d(dj.ones(1, 1, 4), dj.ones(1, 1, 3), padding="same")
    tensor([[[2., 3., 3., 2.]]])
    """
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """PyTorch's ``conv2d`` over (N, C_in, H, W) or (C_in, H, W) with a weight of
    (C_out, C_in / groups, kH, kW); ``padding`` an int, a pair, ``'valid'`` or ``'same'``.

    >>> import dispatch_jit as dj
    >>> conv2d(dj.ones(1, 2, 3, 3), dj.ones(4, 2, 3, 3), padding=1).shape
    (1, 4, 3, 3)
    """
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def _floating(who: str, x) -> None:
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{who}: expected a floating point input, got {x.dtype.name} (\"{who}\" not implemented "
                         f"for it); convert first: x.float()")


def _pool_args(who, nd, kernel_size, stride, padding, dilation=1):
    k = _ntuple(kernel_size, nd, "kernel_size", who)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and not stride) else _ntuple(stride, nd, "stride", who)
    p, d = _ntuple(padding, nd, "padding", who), _ntuple(dilation, nd, "dilation", who)
    if nd == 1:     # (1, k): the 2-D op on a plane of height 1
        return [1] + k, [1] + s, [0] + p, [1] + d
    return k, s, p, d


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """PyTorch's ``max_pool2d`` over (N, C, H, W) or (C, H, W); ``stride`` defaults to the kernel
    size; with ``return_indices`` also the argmax of each window, flat in its input plane.

    >>> import dispatch_jit as dj
    >>> max_pool2d(dj.arange(4.0).reshape(1, 2, 2), 2, return_indices=True)
    (tensor([[[3.]]]), tensor([[[3]]]))
    """
    k, s, p, d = _pool_args("max_pool2d", 2, kernel_size, stride, padding, dilation)
    out = A.max_pool2d(input, k, s, p, d, bool(ceil_mode))
    return (out, A.max_pool2d_indices(input, k, s, p, d, bool(ceil_mode))) if return_indices else out


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """PyTorch's ``max_pool1d`` over (N, C, L) or (C, L).

    >>> import dispatch_jit as dj
    >>> max_pool1d(dj.tensor([[1.0, 3.0, 2.0, 0.0]]), 2)
    tensor([[3., 2.]])
    """
    if input.ndim not in (2, 3):
        raise ShapeError(f"max_pool1d() Expected 2D or 3D input tensor, but got [{', '.join(map(str, input.shape))}]")
    _floating("max_pool1d_impl", input)  # PyTorch's max_pool1d, unlike max_pool2d, refuses integers
    k, s, p, d = _pool_args("max_pool1d", 1, kernel_size, stride, padding, dilation)
    x = A.unsqueeze(input, -2)
    out = A.squeeze(A.max_pool2d(x, k, s, p, d, bool(ceil_mode)), [-2])
    if return_indices:
        return out, A.squeeze(A.max_pool2d_indices(x, k, s, p, d, bool(ceil_mode)), [-2])
    return out


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """PyTorch's ``avg_pool2d`` over (N, C, H, W) or (C, H, W).

    >>> import dispatch_jit as dj
    >>> avg_pool2d(dj.arange(4.0).reshape(1, 2, 2), 2)
    tensor([[[1.5000]]])
    """
    k, s, p, _ = _pool_args("avg_pool2d", 2, kernel_size, stride, padding)
    return A.avg_pool2d(input, k, s, p, bool(ceil_mode), bool(count_include_pad), divisor_override)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """PyTorch's ``avg_pool1d`` over (N, C, L) or (C, L).

    >>> import dispatch_jit as dj
    >>> avg_pool1d(dj.tensor([[1.0, 3.0, 2.0, 0.0]]), 2)
    tensor([[2., 1.]])
    """
    if input.ndim not in (2, 3):
        raise ShapeError(f"avg_pool1d: Expected 2D or 3D input tensor, but got [{', '.join(map(str, input.shape))}]")
    k, s, p, _ = _pool_args("avg_pool1d", 1, kernel_size, stride, padding)
    out = A.avg_pool2d(A.unsqueeze(input, -2), k, s, p, bool(ceil_mode), bool(count_include_pad), None)
    return A.squeeze(out, [-2])


def adaptive_avg_pool2d(input, output_size):
    """PyTorch's ``adaptive_avg_pool2d``: output bin i of a dim of size n averages
    ``[floor(i*n/o), ceil((i+1)*n/o))``; ``None`` keeps the input's size.  One ``avg_pool2d``
    when the sizes divide, else a mean per bin.

    >>> import dispatch_jit as dj
    >>> adaptive_avg_pool2d(dj.arange(16.0).reshape(1, 4, 4), 1)
    tensor([[[7.5000]]])
    """
    if input.ndim not in (3, 4):
        raise ShapeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got "
                         f"[{', '.join(map(str, input.shape))}]")
    _floating("adaptive_avg_pool2d", input)  # PyTorch refuses integers (avg_pool2d takes int64)
    size = list(output_size) if isinstance(output_size, (list, tuple)) else [output_size, output_size]
    h, w = input.shape[-2:]
    oh, ow = (h if size[0] is None else int(size[0])), (w if size[1] is None else int(size[1]))
    if oh < 0 or ow < 0 or (oh == 0) != (ow == 0) or oh == 0:
        raise ShapeError(f"adaptive_avg_pool2d: output_size must be positive, got ({oh}, {ow})")
    if h % oh == 0 and w % ow == 0:
        return A.avg_pool2d(input, [h // oh, w // ow], [h // oh, w // ow], [0, 0], False, True, None)
    rows = []
    for i in range(oh):
        r0, r1 = (i * h) // oh, -((-(i + 1) * h) // oh)
        band = A.narrow(input, input.ndim - 2, r0, r1 - r0)
        cols = [A.mean(A.narrow(band, input.ndim - 1, (j * w) // ow, -((-(j + 1) * w) // ow) - (j * w) // ow),
                       [-2, -1], True) for j in range(ow)]
        rows.append(A.cat(cols, -1))
    return A.cat(rows, -2)


_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _pad_index(mode: str, n: int, lo: int, hi: int) -> np.ndarray:
    """The source index of each position of a dim of size ``n`` padded by (lo, hi)."""
    i = np.arange(-lo, n + hi)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    if mode == "circular":
        return np.mod(i, n)
    period = 2 * (n - 1)    # reflect: mirrored about the first and last elements, which are not repeated
    i = np.mod(np.abs(i), period) if period else np.zeros_like(i)
    return np.where(i >= n, period - i, i)


def pad(input, pad, mode: str = "constant", value=None):
    """PyTorch's ``pad``: ``pad`` lists (left, right) pairs from the last dim backwards; modes
    ``'constant'`` (``value``, default 0; a negative pad crops), ``'reflect'``, ``'replicate'``
    and ``'circular'`` (those pad the last 1, 2 or 3 dims of a batched or unbatched input).
    Differentiable: a constant pad is a ``cat``, the others one ``index_select`` per dim.

    >>> import dispatch_jit as dj
    >>> pad(dj.tensor([[1.0, 2.0]]), (1, 2), value=9.0)
    tensor([[9., 1., 2., 9., 9.]])
    """
    pad = [int(p) for p in pad]
    if len(pad) % 2:
        raise SchemaError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise ShapeError(f"Padding length should be less than or equal to two times the input dimension but got "
                         f"padding length {len(pad)} and input of dimension {input.ndim}")
    if mode not in _PAD_MODES:
        raise SchemaError(f"Unrecognised padding mode {mode}; expected one of {', '.join(map(repr, _PAD_MODES))}")
    if mode != "constant":
        if value is not None and value != 0:
            raise SchemaError(f"Padding mode \"{mode}\" doesn't take in value argument")
        nd = len(pad) // 2
        if nd not in (1, 2, 3) or input.ndim not in (nd + 1, nd + 2):
            raise ShapeError(f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor. Supported "
                             f"combinations for non-constant padding: 2D or 3D input with padding size 2, 3D or 4D "
                             f"with 4, 4D or 5D with 6")
    out = input
    for k in range(len(pad) // 2):
        dim, lo, hi = input.ndim - 1 - k, pad[2 * k], pad[2 * k + 1]
        if lo == 0 and hi == 0:
            continue
        if mode == "constant":
            out = _pad_constant(out, dim, lo, hi, 0.0 if value is None else value)
            continue
        if mode == "replicate":
            out = _pad_replicate(out, dim, lo, hi, input.shape)
            continue
        if lo < 0 or hi < 0:    # a negative pad crops first; the rest pads the cropped dim, as PyTorch's
            out = _pad_constant(out, dim, min(lo, 0), min(hi, 0), 0.0)
            lo, hi = max(lo, 0), max(hi, 0)
        n = out.shape[dim]
        if mode == "reflect" and (lo >= n or hi >= n):
            raise ShapeError(f"Argument #4: Padding size should be less than the corresponding input dimension, but "
                             f"got: padding ({lo}, {hi}) at dimension {dim} of input "
                             f"[{', '.join(map(str, input.shape))}]")
        if mode == "circular" and (lo > n or hi > n):
            raise ShapeError(f"Padding value causes wrapping around more than once: padding ({lo}, {hi}) at "
                             f"dimension {dim} of size {n}")
        if n == 0:
            raise ShapeError(f"{mode} padding of an empty dimension {dim} (input [{', '.join(map(str, input.shape))}])")
        idx = wrap(_pad_index(mode, n, lo, hi))
        out = A.index_select(out, dim, idx.to(out.device) if out.is_cuda else idx)
    return out


def _pad_replicate(x, dim: int, lo: int, hi: int, shape):
    """Output j of the dim reads input clamp(j - lo, 0, n - 1), as PyTorch's replicate padding: a negative
    pad crops, and may crop past the edge (pad (-4, 5) of 4 elements gives 5 copies of the last), or
    empty the dim (pad (-4, 0))."""
    n = x.shape[dim]
    m = n + lo + hi
    if m < 0:
        raise ShapeError(f"pad: padding ({lo}, {hi}) gives dimension {dim} of size {n} the negative size {m} "
                         f"(input [{', '.join(map(str, shape))}])")
    if m and n == 0:
        raise ShapeError(f"replicate padding of an empty dimension {dim} (input [{', '.join(map(str, shape))}])")
    idx = wrap(np.clip(np.arange(m, dtype=np.int64) - lo, 0, max(n - 1, 0)))
    return A.index_select(x, dim, idx.to(x.device) if x.is_cuda else idx)


def _pad_constant(x, dim: int, lo: int, hi: int, value):
    if lo < 0 or hi < 0:    # a negative pad crops
        start, stop = max(-lo, 0), x.shape[dim] - max(-hi, 0)
        if stop < start:
            raise ShapeError(f"pad: negative padding ({lo}, {hi}) removes more than the {x.shape[dim]} elements "
                             f"of dimension {dim}")
        x = A.narrow(x, dim, start, stop - start)
        lo, hi = max(lo, 0), max(hi, 0)

    def filler(n):
        shape = list(x.shape)
        shape[dim] = n
        return full(shape, value, dtype=x.dtype, device=x.device)
    parts = ([filler(lo)] if lo else []) + [x] + ([filler(hi)] if hi else [])
    return A.cat(parts, dim) if len(parts) > 1 else x
