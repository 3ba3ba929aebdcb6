"""``dj.nn.functional``'s regression, margin and embedding losses and the distances they use:
PyTorch's names, signatures, defaults and formulas (ATen's, where ATen computes them), written as
compositions of elementwise ops and reductions, so autograd, ``@dj.compile`` and the compiled mode
see ordinary op calls and the gradients come from those ops' derivative rows.

>>> import dispatch_jit as dj
>>> import dispatch_jit.nn.functional as F
>>> F.smooth_l1_loss(dj.tensor([0.5, 3.0]), dj.tensor([0.0, 0.0]))
tensor(1.3125)
"""

from __future__ import annotations

import math
import warnings

from ..autograd.grad_mode import no_grad
from ..dtypes import FLOAT, promote_types
from ..errors import DTypeError, InvalidArgumentError, ShapeError
from ..ops import entries

__all__ = ["smooth_l1_loss", "huber_loss", "soft_margin_loss", "margin_ranking_loss", "kl_div", "poisson_nll_loss",
           "gaussian_nll_loss", "hinge_embedding_loss", "cosine_embedding_loss", "triplet_margin_loss",
           "multilabel_soft_margin_loss", "multi_margin_loss", "cosine_similarity", "pairwise_distance", "pdist",
           "triplet_margin_with_distance_loss", "multilabel_margin_loss"]

A = entries("aten")


def _reduction(who: str, size_average, reduce, reduction: str) -> str:
    """PyTorch's legacy ``size_average``/``reduce`` flags, folded into ``reduction`` as it does."""
    if size_average is None and reduce is None:
        if reduction not in ("mean", "sum", "none"):
            # PyTorch's ValueError and words, with the function's name
            raise InvalidArgumentError(f"{who}: {reduction} is not a valid value for reduction "
                                       f"(expected 'mean', 'sum' or 'none')")
        return reduction
    warnings.warn(f"{who}: size_average and reduce are deprecated, use reduction= instead", UserWarning,
                  stacklevel=3)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else "mean" if size_average else "sum"


def _reduce(x, reduction: str):
    return A.mean(x) if reduction == "mean" else A.sum(x) if reduction == "sum" else x


def _floats(who: str, *tensors) -> None:
    for t in tensors:
        if t.dtype.category != FLOAT:
            raise DTypeError(f"{who}: expected floating point tensors, got {t.dtype.name}; convert first: x.float()")


def _no_grad_clamp_min(x, lo: float):
    """``x`` with values below ``lo`` raised to ``lo`` and the gradient of ``x`` itself (PyTorch
    clamps these denominators in place under no_grad)."""
    with no_grad():
        shift = A.sub(A.clamp_min(x, lo), x)
    return A.add(x, shift)


def _pnorm(d, p: float, dim: int, keepdim: bool):
    """The ``p``-norm of ``d`` along ``dim``; where it is 0 its gradient is 0 (PyTorch's norm
    backward), not the NaN of the root's derivative at 0."""
    a = A.abs(d)
    if p == math.inf:
        return A.max(a, dim, keepdim)
    if p == -math.inf:
        return A.min(a, dim, keepdim)
    if p == 0:
        return A.sum(A.ne(d, 0).to(d.dtype), dim, keepdim)
    s = A.sum(a if p == 1 else A.mul(a, a) if p == 2 else A.pow(a, float(p)), dim, keepdim)
    if p == 1:
        return s
    zero = A.eq(s, 0)
    safe = A.where(zero, 1.0, s)
    root = A.sqrt(safe) if p == 2 else A.pow(safe, 1.0 / p)
    return A.where(zero, 0.0, root)


# -- regression --------------------------------------------------------------------------------------
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0):
    """``0.5 * d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 * beta`` (``d = input - target``);
    ``beta=0`` is the L1 loss.

    >>> import dispatch_jit as dj
    >>> smooth_l1_loss(dj.tensor([0.5, 3.0]), dj.tensor([0.0, 0.0]), reduction="none")
    tensor([0.1250, 2.5000])
    """
    reduction = _reduction("smooth_l1_loss", size_average, reduce, reduction)
    if beta < 0:
        raise InvalidArgumentError("smooth_l1_loss does not support negative values for beta.")
    _floats("smooth_l1_loss", input, target)
    d = A.abs(A.sub(input, target))
    if beta == 0:
        return _reduce(d, reduction)
    return _reduce(A.where(A.lt(d, beta), A.div(A.mul(A.mul(d, d), 0.5), beta), A.sub(d, 0.5 * beta)), reduction)


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0, weight=None):
    """``0.5 * d**2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 * delta)``; ``weight``
    scales each element.

    >>> import dispatch_jit as dj
    >>> huber_loss(dj.tensor([0.5, 3.0]), dj.tensor([0.0, 0.0]), delta=2.0, reduction="none")
    tensor([0.1250, 4.0000])
    """
    reduction = _reduction("huber_loss", None, None, reduction)
    if delta <= 0:
        raise InvalidArgumentError(f"huber_loss does not support non-positive values for delta, got {delta}")
    _floats("huber_loss", input, target)
    d = A.abs(A.sub(input, target))
    loss = A.where(A.lt(d, delta), A.mul(A.mul(d, d), 0.5), A.mul(A.sub(d, 0.5 * delta), delta))
    if weight is not None:
        loss = A.mul(loss, weight)
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input: bool = True, full: bool = False, size_average=None,
                     eps: float = 1e-8, reduce=None, reduction: str = "mean"):
    """The negative log-likelihood of ``target`` under a Poisson distribution of rate ``exp(input)``
    (``log_input``) or ``input``; ``full`` adds Stirling's term for targets above 1.

    >>> import dispatch_jit as dj
    >>> poisson_nll_loss(dj.tensor([0.0, 1.0]), dj.tensor([1.0, 2.0]), reduction="none")
    tensor([1.0000, 0.7183])
    """
    reduction = _reduction("poisson_nll_loss", size_average, reduce, reduction)
    if log_input:
        loss = A.sub(A.exp(input), A.mul(target, input))
    else:
        loss = A.sub(input, A.mul(target, A.log(A.add(input, eps))))
    if full:
        stirling = A.add(A.sub(A.mul(target, A.log(target)), target), A.mul(A.log(A.mul(target, 2 * math.pi)), 0.5))
        loss = A.add(loss, A.where(A.gt(target, 1), stirling, 0.0))
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
    """The negative log-likelihood of ``target`` under Gaussians of mean ``input`` and variance
    ``var`` (a tensor of the input's shape, of it without the last dim, or with a last dim of 1; or a
    float): ``0.5 * (log(var) + (input - target)**2 / var)``, ``var`` clamped at ``eps``.

    >>> import dispatch_jit as dj
    >>> gaussian_nll_loss(dj.tensor([1.0]), dj.tensor([3.0]), dj.tensor([1.0]))
    tensor(2.)
    """
    if not hasattr(var, "_sig"):
        from ..creation import full as _full
        var = _full(tuple(input.shape), float(var), dtype=input.dtype, device=input.device)
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = A.unsqueeze(var, -1)
        elif not (tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.ndim and var.shape[-1] == 1):
            raise InvalidArgumentError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise InvalidArgumentError(reduction + " is not valid")
    if var.numel() and bool(A.any(A.lt(var, 0)).item()):
        raise InvalidArgumentError("var has negative entry/entries")
    var = _no_grad_clamp_min(var, eps)
    d = A.sub(input, target)
    loss = A.mul(A.add(A.log(var), A.div(A.mul(d, d), var)), 0.5)
    if full:
        loss = A.add(loss, 0.5 * math.log(2 * math.pi))
    return _reduce(loss, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False):
    """The Kullback-Leibler divergence of ``target`` from the log-probabilities ``input``:
    ``target * (log(target) - input)`` (0 where ``target`` is 0), or with ``log_target``
    ``exp(target) * (target - input)``; ``reduction="batchmean"`` divides the sum by the batch size.

    >>> import dispatch_jit as dj
    >>> kl_div(dj.tensor([-1.0, -1.0]), dj.tensor([0.5, 0.0]), reduction="sum")
    tensor(0.1534)
    """
    if size_average is not None or reduce is not None:
        reduction = _reduction("kl_div", size_average, reduce, "mean")
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=2)
    if reduction not in ("mean", "sum", "none", "batchmean"):
        raise InvalidArgumentError(f"{reduction} is not a valid value for reduction")
    if log_target:
        loss = A.mul(A.exp(target), A.sub(target, input))
    else:
        loss = A.sub(A.xlogy(target, target), A.mul(target, input))
    if reduction == "batchmean":
        total = A.sum(loss)
        return A.div(total, input.shape[0]) if input.ndim else total
    return _reduce(loss, reduction)


# -- margins -------------------------------------------------------------------------------------------
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """``log(1 + exp(-target * input))``, the two-class logistic loss for targets of +-1.

    >>> import dispatch_jit as dj
    >>> soft_margin_loss(dj.tensor([0.0]), dj.tensor([1.0]))
    tensor(0.6931)
    """
    reduction = _reduction("soft_margin_loss", size_average, reduce, reduction)
    return _reduce(A.log1p(A.exp(A.mul(A.neg(input), target))), reduction)


def margin_ranking_loss(input1, input2, target, margin: float = 0, size_average=None, reduce=None,
                        reduction: str = "mean"):
    """``max(0, -target * (input1 - input2) + margin)``: ``target`` 1 asks input1 to rank higher.

    >>> import dispatch_jit as dj
    >>> margin_ranking_loss(dj.tensor([1.0, 2.0]), dj.tensor([2.0, 1.0]), dj.tensor([1.0, 1.0]))
    tensor(0.5000)
    """
    reduction = _reduction("margin_ranking_loss", size_average, reduce, reduction)
    if not (input1.ndim == input2.ndim == target.ndim):
        raise ShapeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                         f"input1: {tuple(input1.shape)}, input2: {tuple(input2.shape)}, "
                         f"target: {tuple(target.shape)} ")
    return _reduce(A.clamp_min(A.add(A.mul(A.neg(target), A.sub(input1, input2)), margin), 0), reduction)


def hinge_embedding_loss(input, target, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean"):
    """``input`` where ``target`` is 1, ``max(0, margin - input)`` where it is -1.

    >>> import dispatch_jit as dj
    >>> hinge_embedding_loss(dj.tensor([0.3, 0.3]), dj.tensor([1.0, -1.0]), reduction="none")
    tensor([0.3000, 0.7000])
    """
    reduction = _reduction("hinge_embedding_loss", size_average, reduce, reduction)
    zero = A.mul(input, 0)
    margin_part = A.where(A.ne(target, 1), A.clamp_min(A.sub(margin, input), 0), zero)
    self_part = A.where(A.ne(target, -1), input, zero)
    return _reduce(A.add(margin_part, self_part), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction: str = "mean"):
    """The mean over classes of the logistic loss of each label: ``-(t * logsigmoid(x) + (1 - t) *
    logsigmoid(-x))``, ``weight`` scaling each class.

    >>> import dispatch_jit as dj
    >>> multilabel_soft_margin_loss(dj.tensor([[0.0, 0.0]]), dj.tensor([[1.0, 0.0]]))
    tensor(0.6931)
    """
    reduction = _reduction("multilabel_soft_margin_loss", size_average, reduce, reduction)
    loss = A.neg(A.add(A.mul(target, _logsigmoid(input)), A.mul(A.sub(1, target), _logsigmoid(A.neg(input)))))
    if weight is not None:
        loss = A.mul(loss, weight)
    cdim = input.ndim - 1
    loss = A.div(A.sum(loss, (cdim,)), input.shape[cdim]) if input.ndim else loss
    return _reduce(loss, reduction)


def _logsigmoid(x):
    return A.sub(A.minimum(x, A.mul(x, 0)), A.log1p(A.exp(A.neg(A.abs(x)))))


def multi_margin_loss(input, target, p: int = 1, margin: float = 1.0, weight=None, size_average=None,
                      reduce=None, reduction: str = "mean"):
    """The multi-class hinge loss: for each row, the mean over the other classes ``j`` of
    ``max(0, margin - x[y] + x[j]) ** p`` (``p`` 1 or 2), scaled by ``weight[y]``.

    >>> import dispatch_jit as dj
    >>> multi_margin_loss(dj.tensor([[0.1, 0.2, 0.4, 0.8]]), dj.tensor([3]))
    tensor(0.3250)
    """
    reduction = _reduction("multi_margin_loss", size_average, reduce, reduction)
    if p not in (1, 2):
        raise InvalidArgumentError("only p == 1 and p == 2 supported")
    if input.ndim > 2 or (input.ndim == 2 and input.shape[1] == 0):
        raise ShapeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                         f"{list(input.shape)}")
    x = A.reshape(input, (1, -1)) if input.ndim <= 1 else input
    n, c = x.shape
    t = A.reshape(target, (-1,))
    if t.numel() != n:
        raise ShapeError(f"inconsistent target size, expected {n} but got {list(target.shape)}")
    if weight is not None and (weight.ndim > 1 or weight.numel() != c):
        raise ShapeError(f"inconsistent weight size, expected {c} but got {list(weight.shape)}")
    if n and (bool(A.any(A.lt(t, 0)).item()) or bool(A.any(A.ge(t, c)).item())):
        raise InvalidArgumentError(f"target out of range: every target must be in [0, {c})")
    col = A.unsqueeze(t, 1)
    xy = A.gather(x, 1, col)
    z = A.clamp_min(A.add(A.sub(x, xy), margin), 0)
    if p == 2:
        z = A.mul(z, z)
    if weight is not None:
        z = A.mul(z, A.unsqueeze(A.index_select(weight, 0, t), 1))
    from ..creation import arange
    not_target = A.ne(A.unsqueeze(arange(c, device=x.device), 0), col)
    rows = A.div(A.sum(A.where(not_target, z, A.mul(z, 0)), (1,)), c)
    if input.ndim <= 1 and reduction == "none":
        rows = A.reshape(rows, tuple(target.shape))
    return _reduce(rows, reduction)


# -- distances and embeddings --------------------------------------------------------------------------
def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8):
    """``sum(x1 * x2) / (max(||x1||, eps) * max(||x2||, eps))`` along ``dim`` (the inputs broadcast).

    >>> import dispatch_jit as dj
    >>> cosine_similarity(dj.tensor([[1.0, 0.0], [1.0, 1.0]]), dj.tensor([[1.0, 1.0], [1.0, 1.0]]))
    tensor([0.7071, 1.0000])
    """
    _floats("cosine_similarity", x1, x2)
    dt = promote_types(x1.dtype, x2.dtype)
    x1, x2 = x1.to(dt), x2.to(dt)
    from ..broadcast import broadcast_shapes
    try:
        shape = broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    except ValueError:
        raise ShapeError(f"cosine_similarity: the shapes {tuple(x1.shape)} and {tuple(x2.shape)} do not "
                         f"broadcast") from None
    x1, x2 = A.expand(x1, shape), A.expand(x2, shape)
    n1 = _no_grad_clamp_min(_pnorm(x1, 2, dim, True), eps)
    n2 = _no_grad_clamp_min(_pnorm(x2, 2, dim, True), eps)
    return A.sum(A.mul(A.div(x1, n1), A.div(x2, n2)), (dim,))


def pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
    """The ``p``-norm of ``x1 - x2 + eps`` along the last dimension.

    >>> import dispatch_jit as dj
    >>> pairwise_distance(dj.tensor([[3.0, 0.0]]), dj.tensor([[0.0, 4.0]]), eps=0.0)
    tensor([5.])
    """
    nd = max(x1.ndim, x2.ndim)
    d = A.add(A.sub(x1, x2), eps)
    if nd == 0:
        return A.abs(d)
    return _pnorm(d, p, nd - 1, keepdim)


def pdist(input, p: float = 2):
    """The ``p``-norm distance between each pair of rows ``i < j`` of a 2-D ``input``, as one vector
    in row-major order of the pairs.

    >>> import dispatch_jit as dj
    >>> pdist(dj.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
    tensor([5.0000, 1.0000, 4.2426])
    """
    if input.ndim != 2:
        raise ShapeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if input.dtype.category != FLOAT:
        raise DTypeError(f"pdist only supports floating-point dtypes, got {input.dtype.name}")
    if p < 0:
        raise InvalidArgumentError("pdist only supports non-negative p values")
    import numpy as np
    from ..creation import tensor
    i, j = np.triu_indices(input.shape[0], 1)
    rows_i = A.index_select(input, 0, tensor(i.astype(np.int64), device=input.device))
    rows_j = A.index_select(input, 0, tensor(j.astype(np.int64), device=input.device))
    return _pnorm(A.sub(rows_i, rows_j), p, 1, False)


def cosine_embedding_loss(input1, input2, target, margin: float = 0, size_average=None, reduce=None,
                          reduction: str = "mean"):
    """``1 - cos(x1, x2)`` where ``target`` is 1, ``max(0, cos(x1, x2) - margin)`` where it is -1
    (cosines along the last dim).

    >>> import dispatch_jit as dj
    >>> cosine_embedding_loss(dj.tensor([[1.0, 0.0]]), dj.tensor([[0.0, 1.0]]), dj.tensor([1.0]))
    tensor(1.)
    """
    reduction = _reduction("cosine_embedding_loss", size_average, reduce, reduction)
    if target.ndim == 1 and (input1.ndim != 2 or input2.ndim != 2):
        raise ShapeError(f"1D target tensor expects 2D input tensors, but found inputs with sizes "
                         f"{list(input1.shape)} and {list(input2.shape)}.")
    if target.ndim == 0 and (input1.ndim != 1 or input2.ndim != 1):
        raise ShapeError(f"0D target tensor expects 1D input tensors, but found inputs with sizes "
                         f"{list(input1.shape)} and {list(input2.shape)}.")
    if target.ndim > 1:
        raise ShapeError("0D or 1D target tensor expected, multi-target not supported")
    eps = 1e-12
    last = input1.ndim - 1
    prod = A.sum(A.mul(input1, input2), (last,))
    m1 = A.add(A.sum(A.mul(input1, input1), (last,)), eps)
    m2 = A.add(A.sum(A.mul(input2, input2), (last,)), eps)
    cos = A.div(prod, A.sqrt(A.mul(m1, m2)))
    zero = A.mul(cos, 0)
    loss = A.add(A.where(A.eq(target, 1), A.sub(1, cos), zero),
                 A.where(A.eq(target, -1), A.clamp_min(A.sub(cos, margin), 0), zero))
    return _reduce(loss, reduction)


def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2, eps: float = 1e-6,
                        swap: bool = False, size_average=None, reduce=None, reduction: str = "mean"):
    """``max(0, margin + d(anchor, positive) - d(anchor, negative))`` with ``d`` the pairwise
    ``p``-distance; ``swap`` uses the smaller of d(a, n) and d(p, n).

    >>> import dispatch_jit as dj
    >>> a, pos, neg = dj.tensor([[0.0, 0.0]]), dj.tensor([[0.0, 1.0]]), dj.tensor([[0.0, 3.0]])
    >>> round(triplet_margin_loss(a, pos, neg).item(), 4)
    0.0
    """
    reduction = _reduction("triplet_margin_loss", size_average, reduce, reduction)
    if margin <= 0:
        raise InvalidArgumentError(f"triplet_margin_loss: margin must be greater than 0, got {margin}")
    if not (anchor.ndim == positive.ndim == negative.ndim):
        raise ShapeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                         f"dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative "
                         f"{negative.ndim}D inputs")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = A.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(A.clamp_min(A.sub(A.add(d_pos, margin), d_neg), 0), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean"):
    """``max(0, margin + d(anchor, positive) - d(anchor, negative))`` with any ``distance_function``
    (default: ``pairwise_distance``); ``swap`` uses the smaller of d(a, n) and d(p, n).

    >>> import dispatch_jit as dj
    >>> a, pos, neg = dj.tensor([[0.0, 0.0]]), dj.tensor([[0.0, 1.0]]), dj.tensor([[0.0, 1.5]])
    >>> triplet_margin_with_distance_loss(a, pos, neg, distance_function=lambda x, y: (x - y).abs().sum(-1))
    tensor(0.5000)
    """
    reduction = _reduction("triplet_margin_with_distance_loss", None, None, reduction)
    if margin <= 0:
        raise InvalidArgumentError(f"triplet_margin_with_distance_loss: expected margin to be greater than 0, got "
                                   f"{margin} instead")
    if not (anchor.ndim == positive.ndim == negative.ndim):
        raise ShapeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                         f"dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative "
                         f"{negative.ndim}D inputs")
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        d_neg = A.minimum(d_neg, dist(positive, negative))
    return _reduce(A.clamp_min(A.sub(A.add(d_pos, margin), d_neg), 0), reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """The multi-label hinge loss: for each sample, the sum over its target classes ``y`` (the
    leading entries of ``target`` before the first -1) and the other classes ``i`` of
    ``max(0, 1 - (x[y] - x[i]))``, divided by the number of classes.

    >>> import dispatch_jit as dj
    >>> multilabel_margin_loss(dj.tensor([[0.1, 0.2, 0.4, 0.8]]), dj.tensor([[3, 0, -1, 1]]))
    tensor(0.8500)
    """
    reduction = _reduction("multilabel_margin_loss", size_average, reduce, reduction)
    if input.ndim > 2 or (input.ndim == 2 and input.shape[1] == 0 and input.shape[0] != 0) or \
            (input.ndim == 1 and input.shape[0] == 0):
        raise ShapeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                         f"{list(input.shape)}")
    if tuple(target.shape) != tuple(input.shape):
        raise ShapeError(f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")
    x = A.reshape(input, (1, -1)) if input.ndim <= 1 else input
    t = A.reshape(target, tuple(x.shape)).to(_int64())
    n, c = x.shape
    if t.numel() and (bool(A.any(A.lt(t, -1)).item()) or bool(A.any(A.ge(t, c)).item())):
        raise InvalidArgumentError(f"multilabel_margin_loss: target out of range: every target must be in "
                                   f"[-1, {c})")
    from ..creation import arange
    valid = A.ne(A.cumprod(A.ne(t, -1).to(_int64()), 1), 0)                          # (N, J): before the first -1
    classes = arange(c, device=x.device)
    hit = A.logical_and(A.eq(A.unsqueeze(t, 2), A.reshape(classes, (1, 1, c))), A.unsqueeze(valid, 2))
    is_target = A.any(hit, [1])                                                       # (N, C)
    xy = A.gather(x, 1, A.clamp_min(t, 0))                                            # (N, J)
    z = A.clamp_min(A.add(A.sub(A.unsqueeze(x, 1), A.unsqueeze(xy, 2)), 1.0), 0)      # (N, J, C)
    keep = A.logical_and(A.unsqueeze(valid, 2), A.unsqueeze(A.logical_not(is_target), 1))
    rows = A.div(A.sum(A.where(keep, z, A.mul(z, 0)), [1, 2]), c) if c else A.sum(A.mul(x, 0), [1])
    if input.ndim <= 1 and reduction == "none":
        rows = A.reshape(rows, ())
    return _reduce(rows, reduction)


def _int64():
    from ..dtypes import int64
    return int64
