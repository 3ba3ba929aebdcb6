"""The nn ops written with other dispatch_jit ops: what CUDA tensors run (the family has no
CUDA loops of its own), and the differentiable backward formulas a double backward
(``create_graph=True``) records.  Every function takes the op's own arguments, already
checked by op.py, and returns what the op's CPU kernel returns, to rounding.

Class-index losses are written over a target distribution ``q`` (R, C): row i holds
``(1 - eps) * w[t_i]`` at its class and ``eps / C * w_j`` everywhere (PyTorch's nll and
label-smoothing terms), zero for rows whose target is ``ignore_index``; the loss of row i
is ``-sum_j q_ij * log_softmax(x_i)_j`` and its gradient ``softmax(x_i) * sum_j q_ij - q_i``.
"""

from __future__ import annotations

from dispatch_jit.creation import arange
from dispatch_jit.ops import entries

__all__ = ["softmax", "log_softmax", "softmax_backward", "log_softmax_backward", "class_rows", "from_rows",
           "target_dist", "loss_forward", "loss_backward", "linear", "check_targets", "target_error",
           "linear_grad_input", "linear_grad_weight", "linear_grad_bias"]

A = entries("aten")


def softmax(x, axis):
    shifted = A.sub(x, A.max(x, (axis,), True))
    e = A.exp(shifted)
    return A.div(e, A.sum(e, (axis,), True))


def log_softmax(x, axis):
    shifted = A.sub(x, A.max(x, (axis,), True))
    return A.sub(shifted, A.log(A.sum(A.exp(shifted), (axis,), True)))


def softmax_backward(g, y, axis):
    return A.mul(y, A.sub(g, A.sum(A.mul(g, y), (axis,), True)))


def log_softmax_backward(g, y, axis):
    return A.sub(g, A.mul(A.exp(y), A.sum(g, (axis,), True)))


def class_rows(x, target):
    """(x as (R, C) rows of classes, target as (R,)): the class axis of (C,), (N, C) or (N, C, d...) last."""
    if x.ndim == 1:
        return A.reshape(x, (1, x.shape[0])), A.reshape(target, (1,))
    if x.ndim > 2:
        x = A.permute(x, (0,) + tuple(range(2, x.ndim)) + (1,))
    return A.reshape(x, (-1, x.shape[-1])), A.reshape(target, (-1,))


def from_rows(g, shape):
    """Undo ``class_rows`` for a gradient of the input's ``shape``."""
    if len(shape) <= 2:
        return A.reshape(g, shape)
    moved = (shape[0],) + tuple(shape[2:]) + (shape[1],)
    return A.permute(A.reshape(g, moved), (0, len(shape) - 1) + tuple(range(1, len(shape) - 1)))


def check_targets(t, nclass: int, ignore_index: int, who: str) -> None:
    """Raise the CPU kernels' TargetError for a target that is neither a class nor ignore_index
    (read on the host: a CUDA target is copied back once)."""
    tv = t.numpy()
    bad = (tv != ignore_index) & ((tv < 0) | (tv >= nclass))
    if bad.any():
        raise target_error(who, int(tv[bad][0]), nclass, ignore_index)


def target_error(who: str, value: int, nclass: int, ignore_index: int):
    from dispatch_jit.errors import TargetError
    return TargetError(f"{who}: Target {value} is out of bounds: class indices must be in [0, {nclass}) "
                       f"(or equal ignore_index={ignore_index})")


def target_dist(x2, t, weight, ignore_index: int, eps: float):
    """(q, w_t): the target distribution of rows ``x2`` (R, C) and each row's weight w[t_i] (0 if ignored)."""
    nclass = x2.shape[-1]
    valid = A.ne(t, ignore_index).to(x2.dtype)
    onehot = A.eq(A.unsqueeze(t, -1), arange(nclass, device=x2.device)).to(x2.dtype)
    wt = valid if weight is None else A.mul(A.sum(A.mul(onehot, weight), (-1,)), valid)
    q = A.mul(onehot, A.unsqueeze(wt, -1))
    if eps:
        smooth = A.unsqueeze(valid, -1) if weight is None else A.mul(A.unsqueeze(valid, -1), weight)
        q = A.add(A.mul(q, 1.0 - eps), A.mul(smooth, eps / nclass))
    return q, wt


def loss_forward(x, target, weight, reduction: str, ignore_index: int, eps: float, logits: bool):
    """cross_entropy (``logits``) or nll_loss of class indices."""
    x2, t = class_rows(x, target)
    check_targets(t, x2.shape[-1], ignore_index, "cross_entropy" if logits else "nll_loss")
    q, wt = target_dist(x2, t, weight, ignore_index, eps)
    logp = log_softmax(x2, 1) if logits else x2
    rows = A.neg(A.sum(A.mul(q, logp), (-1,)))
    if reduction == "none":
        return A.reshape(rows, tuple(target.shape))
    total = A.sum(rows)
    return A.div(total, A.sum(wt)) if reduction == "mean" else total


def loss_backward(g, x, target, weight, reduction: str, ignore_index: int, eps: float, logits: bool):
    """d loss / d x for ``loss_forward``, written with differentiable ops (the targets checked as the
    forward checks them: compiled mode may run this without the forward)."""
    x2, t = class_rows(x, target)
    check_targets(t, x2.shape[-1], ignore_index, "cross_entropy" if logits else "nll_loss")
    q, wt = target_dist(x2, t, weight, ignore_index, eps)
    if reduction == "none":
        scale = A.unsqueeze(A.reshape(g, (-1,)), -1)
    elif reduction == "mean":
        scale = A.div(g, A.sum(wt))
    else:
        scale = g
    if logits:
        grad = A.sub(A.mul(softmax(x2, 1), A.sum(q, (-1,), True)), q)
    else:
        grad = A.neg(q)
    return from_rows(A.mul(grad, scale), tuple(x.shape))


def linear(x, weight, bias=None):
    wt = A.transpose(weight, 0, 1) if weight.ndim == 2 else weight
    y = A.matmul(x, wt)
    return y if bias is None else A.add(y, bias)


def linear_grad_input(g, w):
    return A.matmul(g, w) if w.ndim == 2 else A.mul(A.unsqueeze(g, -1), w)


def linear_grad_weight(g, x, w):
    if w.ndim == 1:         # y = x @ w
        return A.sum(A.reshape(A.mul(A.unsqueeze(g, -1), x), (-1, x.shape[-1])), (0,))
    g2 = g if g.ndim == 2 else A.reshape(g, (-1, g.shape[-1]))
    x2 = x if x.ndim == 2 else A.reshape(x, (-1, x.shape[-1]))
    return A.matmul(A.transpose(g2, 0, 1), x2)


def linear_grad_bias(g):
    """g summed over every dim but the last (the Autograd kernel sums it on to the bias's shape)."""
    return A.sum(g, tuple(range(g.ndim - 1))) if g.ndim > 1 else g
