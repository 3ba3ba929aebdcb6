"""``dj.nn.functional``'s normalization and attention names: ``batch_norm``, ``normalize`` and
``scaled_dot_product_attention``, compositions of differentiable ops (mean, var, matmul,
softmax, ...) with PyTorch 2.13's signatures, defaults and messages, so autograd (double
backward included), ``@dj.compile`` and the compiled mode see ordinary op calls.
functional.py re-exports them.

>>> import dispatch_jit as dj
>>> q = dj.ones(1, 2, 3, 4)
>>> scaled_dot_product_attention(q, q, q, is_causal=True).shape
(1, 2, 3, 4)
"""

from __future__ import annotations

import math

import numpy as np

from ..autograd.grad_mode import no_grad
from ..dtypes import FLOAT
from ..errors import DTypeError, InvalidArgumentError, SchemaError, ShapeError
from ..ops import entries
from ..kernels.torch_functions import norm
from ..tensor import wrap
from .functional_dropout import dropout_mask

__all__ = ["batch_norm", "normalize", "scaled_dot_product_attention"]

A = entries("aten")


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5):
    """PyTorch's ``batch_norm`` over dim 1 of (N, C, ...): with ``training`` the batch's
    statistics (biased variance) normalize, and ``running_mean``/``running_var`` (when given)
    move by ``momentum`` towards the batch mean and the unbiased variance, in place; else the
    running statistics normalize.

    >>> import dispatch_jit as dj
    >>> rm, rv = dj.zeros(1), dj.ones(1)
    >>> batch_norm(dj.tensor([[1.0], [3.0]]), rm, rv, training=True)
    tensor([[-1.0000],
            [ 1.0000]])
    >>> rm, rv
    (tensor([0.2000]), tensor([1.1000]))
    """
    if input.ndim < 2:
        if input.ndim == 1 and input.numel() == 0 and input.dtype.category == FLOAT and \
                running_mean is not None and running_var is not None:
            # PyTorch counts the channels of a 1-D input as 0: an empty one with empty statistics is
            # its own (empty) result
            for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                            ("bias", bias)):
                if t is not None and t.numel() != 0:
                    raise ShapeError(f"{name} should contain 0 elements not {t.numel()}")
            return A.clone(input)
        raise ShapeError(f"batch_norm: expected an input of 2 or more dimensions (N, C, ...), got shape "
                         f"{tuple(input.shape)}")
    if input.dtype.category != FLOAT:
        raise DTypeError(f"batch_norm: expected a floating point input, got {input.dtype.name}")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None and t.numel() != c:
            raise ShapeError(f"{name} should contain {c} elements not {t.numel()}")
    axes = [0] + list(range(2, input.ndim))
    bshape = [1, c] + [1] * (input.ndim - 2)
    if training:
        count = input.numel() // max(c, 1)
        if count <= 1:
            raise InvalidArgumentError(f"Expected more than 1 value per channel when training, got input size "
                              f"{list(input.shape)}")
        mean = A.mean(input, axes, True)
        centered = A.sub(input, mean)
        var = A.mean(A.mul(centered, centered), axes, True)
        if running_mean is not None or running_var is not None:
            with no_grad():
                if running_mean is not None:
                    A.add_(A.mul_(running_mean, 1.0 - momentum), A.mul(A.reshape(mean.detach(), [c]), momentum))
                if running_var is not None:
                    unbiased = A.mul(A.reshape(var.detach(), [c]), count / (count - 1))
                    A.add_(A.mul_(running_var, 1.0 - momentum), A.mul(unbiased, momentum))
        out = A.mul(centered, A.rsqrt(A.add(var, eps)))
    else:
        if running_mean is None or running_var is None:
            raise SchemaError(f"{'running_mean' if running_mean is None else 'running_var'} must be defined in "
                              f"evaluation mode")
        out = A.mul(A.sub(input, A.reshape(running_mean, bshape)),
                    A.rsqrt(A.add(A.reshape(running_var, bshape), eps)))
    if weight is not None:
        out = A.mul(out, A.reshape(weight, bshape))
    if bias is not None:
        out = A.add(out, A.reshape(bias, bshape))
    return out


def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None):
    """PyTorch's ``normalize``: ``input / max(||input||_p along dim, eps)``.

    >>> import dispatch_jit as dj
    >>> normalize(dj.tensor([[3.0, 4.0]]))
    tensor([[0.6000, 0.8000]])
    """
    denom = A.clamp_min(norm(input, p, dim, True), wrap(np.array(eps, input.dtype.np)))
    result = A.div(input, denom)
    if out is not None:
        out.copy_(result)
        return out
    return result


def _neg_inf(x):
    return wrap(np.array(-np.inf, x.dtype.np)).to(x.device) if x.is_cuda else wrap(np.array(-np.inf, x.dtype.np))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0, is_causal: bool = False,
                                 scale=None, enable_gqa: bool = False):
    """PyTorch's ``scaled_dot_product_attention``, its math form:
    ``softmax(q @ k^T * scale + mask) @ v`` over (..., L, E) queries and (..., S, E) keys.
    ``attn_mask`` is boolean (True: take part) or added (float); ``is_causal`` masks the upper
    triangle (instead of an ``attn_mask``); ``scale`` defaults to 1/sqrt(E); ``enable_gqa`` repeats the key/value heads
    (dim -3) to the query's.  A row that every key is masked out of is 0, as PyTorch's.
    ``dropout_p`` drops attention weights (always: the functional has no training flag).

    >>> import dispatch_jit as dj
    >>> q = dj.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    >>> scaled_dot_product_attention(q, q, q, attn_mask=dj.tensor([[True, False], [True, True]]))[0, 0]
    tensor([1., 0.])
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.dtype.category != FLOAT:
            raise DTypeError(f"scaled_dot_product_attention: expected a floating point {name}, got {t.dtype.name}")
    if query.dtype != key.dtype or query.dtype != value.dtype:
        raise DTypeError(f"Expected query, key, and value to have the same dtype, but got query.dtype: "
                         f"{query.dtype.name} key.dtype: {key.dtype.name} and value.dtype: {value.dtype.name} instead.")
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise ShapeError("scaled_dot_product_attention: query, key and value must have 2 or more dimensions "
                         "(..., L or S, E)")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ShapeError(f"scaled_dot_product_attention: query {tuple(query.shape)}, key {tuple(key.shape)} and "
                         f"value {tuple(value.shape)} do not fit: query and key need one embedding size (last dim), "
                         f"key and value one sequence length (dim -2)")
    if is_causal and attn_mask is not None:
        raise SchemaError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if not 0.0 <= dropout_p <= 1.0:
        raise SchemaError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        hq, hk = query.shape[-3], key.shape[-3]
        if hk == 0 or hq % hk or value.shape[-3] != hk:
            raise ShapeError(f"scaled_dot_product_attention: with enable_gqa the query's heads ({hq}) must be a "
                             f"multiple of the key's and value's ({hk}, {value.shape[-3]})")
        key, value = (_repeat_heads(t, hq // hk) for t in (key, value))
    L, S = query.shape[-2], key.shape[-2]
    s = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    scores = A.mul(A.matmul(query, A.transpose(key, -2, -1)), s)
    if attn_mask is not None:
        if attn_mask.dtype.name == "bool":
            scores = A.masked_fill(scores, A.logical_not(attn_mask), _neg_inf(scores))
        else:
            scores = A.add(scores, attn_mask)
    if is_causal:
        keep = wrap(np.tril(np.ones((L, S), dtype=bool)))
        scores = A.masked_fill(scores, A.logical_not(keep.to(scores.device) if scores.is_cuda else keep),
                               _neg_inf(scores))
    weights = A.softmax(scores, -1)
    if attn_mask is not None or is_causal:
        # PyTorch's _safe_softmax: a row with every score -inf attends to nothing (0), not NaN
        dead = A.all(A.eq(scores, _neg_inf(scores)), [-1], True)
        weights = A.masked_fill(weights, dead, wrap(np.array(0, weights.dtype.np)))
    if dropout_p > 0.0:
        weights = A.mul(weights, dropout_mask(weights, tuple(weights.shape), dropout_p))
    return A.matmul(weights, value)


def _repeat_heads(t, n: int):
    """(..., H, S, E) -> (..., H*n, S, E), each head repeated n times in a row (repeat_interleave)."""
    shape = list(t.shape)
    expanded = A.expand(A.unsqueeze(t, -3), shape[:-2] + [n] + shape[-2:])
    return A.reshape(expanded, shape[:-3] + [shape[-3] * n] + shape[-2:])
