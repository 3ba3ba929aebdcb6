"""``dj.nn.functional``: PyTorch's functional names, signatures and defaults over dispatch_jit ops.

The losses of class indices are one op each (``aten::cross_entropy_loss``,
``aten::nll_loss``: one loop forward, one backward), softmax and log_softmax one op
each; the rest are short compositions of elementwise ops and reductions, which
autograd, ``@dj.compile`` and the compiled mode see as such.

>>> import dispatch_jit as dj
>>> import dispatch_jit.nn.functional as F
>>> logits = dj.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 2.0]], requires_grad=True)
>>> loss = F.cross_entropy(logits, dj.tensor([0, 2]))
>>> round(loss.item(), 4)
0.2395
>>> loss.backward(); logits.grad.shape
(2, 3)
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..bf16 import astype as bf16_astype
from ..creation import default_generator
from ..dtypes import FLOAT
from ..errors import DTypeError, InvalidArgumentError, OutOfBoundsError, SchemaError, ShapeError
from ..ops import entries
from ..tensor import wrap
from .functional_activation import *  # noqa: F401,F403  (its __all__ is part of ours)
from .functional_activation import __all__ as _ACTIVATIONS
from .functional_attention import batch_norm, normalize, scaled_dot_product_attention
from .functional_conv import adaptive_avg_pool2d, avg_pool1d, avg_pool2d, conv1d, conv2d, max_pool1d, max_pool2d, pad
from .functional_dropout import alpha_dropout, dropout1d, dropout2d
from .functional_loss import *  # noqa: F401,F403  (the regression, margin and embedding losses, distances)
from .functional_loss import __all__ as _LOSSES
from .functional_loss import _reduce, _reduction  # the legacy size_average/reduce flags, shared
from .functional_norm import *  # noqa: F401,F403  (group/instance/RMS/LRN norms, shuffles, adaptive pools)
from .functional_norm import __all__ as _NORMS

__all__ = ["cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy_with_logits", "one_hot",
           "linear", "relu", "gelu", "silu", "tanh", "sigmoid", "softmax", "log_softmax", "dropout", "layer_norm",
           "embedding", "binary_cross_entropy", "conv1d", "conv2d", "max_pool1d", "max_pool2d", "avg_pool1d",
           "avg_pool2d", "adaptive_avg_pool2d", "pad", "batch_norm", "normalize", "scaled_dot_product_attention",
           "dropout1d", "dropout2d", "alpha_dropout", *_ACTIVATIONS] + _LOSSES + _NORMS

A = entries("aten")


# -- losses --------------------------------------------------------------------------------------------
def cross_entropy(input, target, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                  reduction: str = "mean", label_smoothing: float = 0.0):
    """PyTorch's ``cross_entropy``: log_softmax over dim 1 (dim 0 of a 1-D input) and the
    negative log-likelihood, for class indices (an integer ``target`` of the input's shape
    without the class dim; ``ignore_index`` rows count nothing) or class probabilities (a
    float ``target`` of the input's shape).  ``weight`` rescales each class,
    ``label_smoothing`` mixes the target with the uniform distribution.

    >>> import dispatch_jit as dj
    >>> x = dj.tensor([[1.0, 2.0, 3.0]])
    >>> round(cross_entropy(x, dj.tensor([2])).item(), 4), round(cross_entropy(x, dj.tensor([[0.0, 0.0, 1.0]])).item(), 4)
    (0.4076, 0.4076)
    """
    reduction = _reduction("cross_entropy", size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise SchemaError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    if target.dtype.category == FLOAT and tuple(target.shape) == tuple(input.shape):
        return _cross_entropy_probs(input, target, weight, reduction, label_smoothing)
    return A.cross_entropy_loss(input, target, weight, reduction, ignore_index, float(label_smoothing))


def _cross_entropy_probs(input, target, weight, reduction: str, eps: float):
    """Class probabilities, as PyTorch's cross_entropy: the mean is over the batch, not the weights."""
    if input.dtype.category != FLOAT:
        raise DTypeError(f"cross_entropy: expected a floating point input (logits), got {input.dtype.name}")
    dim = 0 if input.ndim == 1 else 1
    nclass = input.shape[dim]
    if eps > 0:
        target = A.add(A.mul(target, 1.0 - eps), eps / nclass)
    logp = A.log_softmax(input, dim)
    if weight is not None:
        if tuple(weight.shape) != (nclass,):
            raise ShapeError(f"cross_entropy: weight must be a 1-D tensor of one value per class ({nclass}), "
                             f"got shape {tuple(weight.shape)}")
        logp = A.mul(logp, A.reshape(weight, (nclass,) + (1,) * (input.ndim - dim - 1)))
    rows = A.neg(A.sum(A.mul(logp, target), (dim,)))
    if reduction == "none":
        return rows
    total = A.sum(rows)
    if reduction == "sum":
        return total
    return A.div(total, float(input.numel() // nclass) if input.numel() else math.nan)


def nll_loss(input, target, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
             reduction: str = "mean"):
    """PyTorch's ``nll_loss`` over log-probabilities ``input`` (C), (N, C) or (N, C, d1, ...) and
    class indices ``target``.

    >>> import dispatch_jit as dj
    >>> nll_loss(dj.tensor([[-1.0, -2.0], [-3.0, -0.5]]), dj.tensor([0, 1]))
    tensor(0.7500)
    """
    return A.nll_loss(input, target, weight, _reduction("nll_loss", size_average, reduce, reduction), ignore_index)


def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """PyTorch's ``mse_loss``: the mean (or sum, or elements) of ``(input - target) ** 2``.

    >>> import dispatch_jit as dj
    >>> mse_loss(dj.tensor([1.0, 2.0]), dj.tensor([0.0, 0.0]))
    tensor(2.5000)
    """
    return A.mse_loss(input, target, _reduction("mse_loss", size_average, reduce, reduction))


def _float_pair(who: str, input, target) -> None:
    for name, t in (("input", input), ("target", target)):
        if t.dtype.category != FLOAT:
            raise DTypeError(f"{who}: expected a floating point {name}, got {t.dtype.name}; convert first: x.float()")
    if tuple(input.shape) != tuple(target.shape):
        raise ShapeError(f"{who}: target of shape {tuple(target.shape)} must have the input's shape "
                         f"{tuple(input.shape)}")


def l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """PyTorch's ``l1_loss``: the mean (or sum, or elements) of ``|input - target|``.

    >>> import dispatch_jit as dj
    >>> l1_loss(dj.tensor([1.0, -2.0]), dj.tensor([0.0, 0.0]))
    tensor(1.5000)
    """
    reduction = _reduction("l1_loss", size_average, reduce, reduction)
    _float_pair("l1_loss", input, target)
    return _reduce(A.abs(A.sub(input, target)), reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction: str = "mean", pos_weight=None):
    """PyTorch's ``binary_cross_entropy_with_logits``, in its stable form:
    ``(1 - t) * x + lw * (log1p(exp(-|x|)) + max(-x, 0))`` with ``lw = 1 + (pos_weight - 1) * t``.

    >>> import dispatch_jit as dj
    >>> round(binary_cross_entropy_with_logits(dj.tensor([0.0]), dj.tensor([1.0])).item(), 4)
    0.6931
    """
    reduction = _reduction("binary_cross_entropy_with_logits", size_average, reduce, reduction)
    _float_pair("binary_cross_entropy_with_logits", input, target)
    soft = A.add(A.log1p(A.exp(A.neg(A.abs(input)))), A.relu(A.neg(input)))
    if pos_weight is not None:
        soft = A.mul(A.add(A.mul(A.sub(pos_weight, 1.0), target), 1.0), soft)
    loss = A.add(A.mul(A.sub(1.0, target), input), soft)
    if weight is not None:
        loss = A.mul(loss, weight)
    return _reduce(loss, reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
    """PyTorch's ``binary_cross_entropy`` over probabilities ``input`` in [0, 1]:
    ``-(t * log(x) + (1 - t) * log(1 - x))``, each log clamped at -100 as PyTorch's (a 0 or 1
    input gives a finite loss).

    >>> import dispatch_jit as dj
    >>> round(binary_cross_entropy(dj.tensor([0.5]), dj.tensor([1.0])).item(), 4)
    0.6931
    """
    reduction = _reduction("binary_cross_entropy", size_average, reduce, reduction)
    if tuple(input.shape) != tuple(target.shape):
        raise ShapeError(f"Using a target size ({tuple(target.shape)}) that is different to the input size "
                         f"({tuple(input.shape)}) is deprecated. Please ensure they have the same size.")
    _float_pair("binary_cross_entropy", input, target)
    if input.numel() and not bool(A.all(A.logical_and(A.ge(input, 0.0), A.le(input, 1.0))).item()):
        raise InvalidArgumentError("binary_cross_entropy: all elements of input should be between 0 and 1")
    floor = -100.0
    log_x = A.clamp_min(A.log(input), wrap(np.array(floor, input.dtype.np)))
    log_1mx = A.clamp_min(A.log(A.sub(1.0, input)), wrap(np.array(floor, input.dtype.np)))
    loss = A.neg(A.add(A.mul(target, log_x), A.mul(A.sub(1.0, target), log_1mx)))
    if weight is not None:
        loss = A.mul(loss, weight)
    return _reduce(loss, reduction)


def one_hot(tensor, num_classes: int = -1):
    """PyTorch's ``one_hot``: int64 class indices -> an int64 tensor with a new last dim of
    ``num_classes`` (default: the largest index + 1).

    >>> import dispatch_jit as dj
    >>> one_hot(dj.tensor([0, 2]), 3)
    tensor([[1, 0, 0],
            [0, 0, 1]])
    """
    if tensor.dtype.category != 1:
        raise DTypeError(f"one_hot: expected a tensor of integer class indices (int64), got {tensor.dtype.name}")
    idx = tensor.numpy()
    if idx.size and idx.min() < 0:
        raise ShapeError(f"one_hot: class values must be non-negative, got {int(idx.min())}")
    if num_classes == -1:
        if not idx.size:
            raise ShapeError("one_hot: cannot infer the number of classes of an empty tensor; pass num_classes")
        num_classes = int(idx.max()) + 1
    elif idx.size and idx.max() >= num_classes:
        raise ShapeError(f"one_hot: class values must be smaller than num_classes={num_classes}, "
                         f"got {int(idx.max())}")
    out = np.zeros(idx.shape + (num_classes,), np.int64)
    np.put_along_axis(out, idx.astype(np.int64)[..., None], 1, axis=-1)
    return wrap(out) if not tensor.is_cuda else wrap(out).to(tensor.device)


# -- layers and activations ----------------------------------------------------------------------------
def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` (one op: one BLAS product and the bias on the CPU).

    >>> import dispatch_jit as dj
    >>> linear(dj.ones(1, 2), dj.tensor([[1.0, 2.0]]), dj.tensor([0.5]))
    tensor([[3.5000]])
    """
    return A.linear(input, weight, bias)


def relu(input, inplace: bool = False):
    """max(x, 0).

    >>> import dispatch_jit as dj; relu(dj.tensor([-1.0, 2.0]))
    tensor([0., 2.])
    """
    return A.relu_(input) if inplace else A.relu(input)


def gelu(input, approximate: str = "none"):
    """Gaussian error linear unit (``approximate='tanh'``: its tanh form).

    >>> import dispatch_jit as dj; gelu(dj.tensor([0.0]))
    tensor([0.])
    """
    return A.gelu(input, approximate=approximate)


def silu(input, inplace: bool = False):
    """x * sigmoid(x).

    >>> import dispatch_jit as dj; silu(dj.tensor([0.0]))
    tensor([0.])
    """
    out = A.silu(input)
    return input.copy_(out) if inplace else out


def tanh(input):
    """tanh(x).

    >>> import dispatch_jit as dj; tanh(dj.tensor([0.0]))
    tensor([0.])
    """
    return A.tanh(input)


def sigmoid(input):
    """1 / (1 + exp(-x)).

    >>> import dispatch_jit as dj; sigmoid(dj.tensor([0.0]))
    tensor([0.5000])
    """
    return A.sigmoid(input)


def _softmax_dim(name: str, ndim: int, stacklevel: int) -> int:
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  f"as an argument.", UserWarning, stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel: int = 3, dtype=None):
    """PyTorch's ``softmax`` along ``dim`` (one op).

    >>> import dispatch_jit as dj; softmax(dj.tensor([0.0, 0.0]), dim=0)
    tensor([0.5000, 0.5000])
    """
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim, _stacklevel)
    return A.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel: int = 3, dtype=None):
    """PyTorch's ``log_softmax`` along ``dim`` (one op).

    >>> import dispatch_jit as dj; log_softmax(dj.tensor([0.0, 0.0]), dim=0)
    tensor([-0.6931, -0.6931])
    """
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim, _stacklevel)
    return A.log_softmax(input, dim, dtype=dtype)


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False, *, generator=None):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``; the
    identity when ``training`` is False.  The mask is drawn from ``generator`` (default: the
    one ``dj.manual_seed`` seeds), so a seed reproduces it.

    >>> import dispatch_jit as dj
    >>> x = dj.ones(4)
    >>> _ = dj.manual_seed(0); a = dropout(x, 0.5)
    >>> _ = dj.manual_seed(0); bool((dropout(x, 0.5) == a).all()), dropout(x, 0.5, training=False) is x
    (True, True)
    """
    if not 0.0 <= p <= 1.0:
        raise SchemaError(f"dropout: probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if input.dtype.category != FLOAT:
        raise DTypeError(f"dropout: expected a floating point tensor, got {input.dtype.name}")
    rng = (generator or default_generator).rng
    keep = rng.random(tuple(input.shape)) >= p
    scale = bf16_astype(np.where(keep, 1.0 / (1.0 - p) if p < 1.0 else 0.0, 0.0), input.dtype)
    mask = wrap(scale) if not input.is_cuda else wrap(scale).to(input.device)
    return A.mul_(input, mask) if inplace else A.mul(input, mask)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """PyTorch's ``layer_norm``: normalize over the last ``len(normalized_shape)`` dims (biased
    variance), then scale by ``weight`` and shift by ``bias``.

    >>> import dispatch_jit as dj
    >>> layer_norm(dj.tensor([[1.0, 3.0]]), (2,))
    tensor([[-1.0000,  1.0000]])
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(input.shape[input.ndim - len(shape):]) != shape or len(shape) > input.ndim or not shape:
        raise ShapeError(f"layer_norm: normalized_shape {shape} must be the input's trailing dims; "
                         f"input shape {tuple(input.shape)}")
    if input.dtype.category != FLOAT:
        raise DTypeError(f"layer_norm: expected a floating point tensor, got {input.dtype.name}")
    # one op forward and one backward (kernels/nn/norm.py): a loop per row on the CPU
    return A._layer_norm(input, len(shape), weight, bias, eps)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False):
    """Rows of ``weight`` picked by the integer indices ``input``, each in ``[0, weight.shape[0])``
    (as PyTorch's, an index out of that range raises ``IndexError``, a negative one too); the row
    ``padding_idx`` gets no gradient.

    >>> import dispatch_jit as dj
    >>> embedding(dj.tensor([1, 0]), dj.tensor([[0.0, 1.0], [2.0, 3.0]]))
    tensor([[2., 3.],
            [0., 1.]])
    """
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise SchemaError("embedding: max_norm, scale_grad_by_freq and sparse are not supported; leave them "
                          "at their defaults")
    if input.dtype.category != 1:
        raise DTypeError(f"embedding: expected integer indices (int64), got {input.dtype.name}")
    if weight.ndim != 2:
        raise ShapeError(f"embedding: 'weight' must be 2-D, got a weight of shape {tuple(weight.shape)}")
    n = weight.shape[0]
    if padding_idx is not None and not -n <= padding_idx < n:
        raise SchemaError(f"embedding: padding_idx {padding_idx} must be within num_embeddings ({n})")
    if padding_idx is None:
        # one index_select of the rows: it refuses a negative row or one past the end (eager mode, a
        # compiled plan alike), and a trace records it without reading the indices
        try:
            rows = weight.index_select(0, input.reshape(-1))
        except OutOfBoundsError as e:
            raise OutOfBoundsError(str(e).replace("index_select:", "embedding:", 1)) from None
        return rows.view(tuple(input.shape) + (weight.shape[1],))
    # weight[input] is indexing, where -1 is the last row; an embedding's index is a row number, and
    # PyTorch refuses a negative one as it refuses one past the end
    idx = input.numpy()
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = int(idx.min()) if idx.min() < 0 else int(idx.max())
        raise OutOfBoundsError(f"embedding: index out of range in self: index {bad} is not a row of the weight "
                               f"(indices must be in [0, {n}); a negative index does not count from the end)")
    out = weight[input]
    if padding_idx is not None and weight.requires_grad:
        pad = padding_idx % n
        mask = wrap((idx == pad)[..., None])
        out = A.where(mask if not input.is_cuda else mask.to(input.device), weight.detach()[input], out)
    return out

