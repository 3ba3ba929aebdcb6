"""Batching rules, one table per op family (JAX's ``primitive_batchers``, functorch's
``BatchRules*.cpp``).  Every rule moves the batch dim of its batched arguments first
(a view), so the batch is dimension 0 of every batched value it passes on, and shifts
the op's dimension arguments by one.  A rule returns NotImplemented where it does not
cover a case (a batched index of index_select, a weighted loss): the call then takes
the boxed fallback, with its one-time warning.
"""

from __future__ import annotations

import re

from dispatch_jit.registry import lookup

from ..elementwise import SCHEMAS as _ELEMENTWISE_SCHEMAS
from .core import batch_size, front, invoke

__all__ = ["RULES", "WRAPPED_RULES"]


def _op(name):
    return lookup("aten::" + name).entry


def _lrank(v, b):
    return v.ndim - (b is not None)


def _align(args, bdims, expand: bool = False):
    """Tensor arguments with their batch dims first, padded with size-1 dims after the batch so
    every batched value has the same logical rank (the call's broadcast rank); with ``expand``,
    unbatched tensors are expanded to the batch too.  Returns (values, logical rank, B)."""
    from dispatch_jit.tensor import Tensor
    B = batch_size(args, bdims)
    r = max((_lrank(v, b) for v, b in zip(args, bdims) if isinstance(v, Tensor)), default=0)
    out = []
    for v, b in zip(args, bdims):
        if isinstance(v, Tensor) and b is not None:
            v = front(v, b)
            lr = v.ndim - 1
            if lr < r:
                v = v.reshape((B,) + (1,) * (r - lr) + tuple(v.shape[1:]))
        elif isinstance(v, Tensor) and expand:
            v = v.expand((B,) + (1,) * (r - v.ndim) + tuple(v.shape)) if v.ndim < r else v.expand((B,) + v.shape)
        out.append(v)
    return out, r, B


def _norm(d, n):
    n = max(n, 1)
    if not -n <= d < n:
        from dispatch_jit.errors import ShapeError
        raise ShapeError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    return d % n


# -- elementwise: align, run once -------------------------------------------------------
def pointwise(op, args, bdims):
    vals, r, B = _align(args, bdims)
    return invoke(op, vals), 0


def pointwise_inplace(op, args, bdims):
    if bdims[0] is None:
        from dispatch_jit.errors import InvalidArgumentError
        raise InvalidArgumentError(
            f"vmap: {op.name}(self, *extra_args) is not possible because there exists a Tensor `other` in "
            f"extra_args that has more elements than `self`. This happened due to `other` being vmapped over but "
            f"`self` not being vmapped over in a vmap. Please try to use out-of-place operators instead of "
            f"{op.name}.")
    vals, r, B = _align(args, bdims)
    if vals[0].ndim - 1 < r:
        return NotImplemented
    invoke(op, vals)
    return args[0], bdims[0]


# -- reductions: shift the axis ---------------------------------------------------------
def reduce_axes(op, args, bdims):
    """``int[]? axis`` reductions (sum, mean, std, ...): None / [] reduce every logical dim."""
    v = front(args[0], bdims[0])
    lr = v.ndim - 1
    B = v.shape[0]
    axis = args[1]
    keep = args[2] if op.schema.arguments[2].name == "keepdims" else args[3]
    if lr == 0:
        v = v.reshape((B, 1))
        axes = [1]
        new = list(args)
        new[0], new[1] = v, axes
        out = invoke(op, new)
        return (out.reshape((B,)) if keep else out), 0
    if axis is None or (not isinstance(axis, int) and len(axis) == 0):
        axes = list(range(1, lr + 1))
    else:
        axes = [_norm(a, lr) + 1 for a in ([axis] if isinstance(axis, int) else axis)]
    new = list(args)
    new[0], new[1] = v, axes
    return invoke(op, new), 0


def reduce_argmax(op, args, bdims):
    v = front(args[0], bdims[0])
    lr, B = v.ndim - 1, v.shape[0]
    axis, keep = args[1], args[2]
    if axis is None:
        out = invoke(op, [v.reshape((B, -1)), 1, False])
        return (out.reshape((B,) + (1,) * lr) if keep else out), 0
    if lr == 0:
        out = invoke(op, [v.reshape((B, 1)), 1, False])
        return out, 0
    return invoke(op, [v, _norm(axis, lr) + 1, keep]), 0


def dims_rule(*names, extra_rank: int = 0, expand: bool = False):
    """Align the tensor arguments, then shift the named dim arguments (an int, or a list of ints)
    by one; ``extra_rank``: the op's dims count one more than its input's (unsqueeze)."""
    def rule(op, args, bdims):
        vals, r, B = _align(args, bdims, expand)
        schema = op.schema.arguments
        scalar = r == 0 and extra_rank == 0
        if scalar:      # a 0-d example: run on (B, 1), the dim being 0 (or -1), and squeeze it back
            vals = [v.reshape((B, 1)) if hasattr(v, "ndim") and b is not None or (expand and hasattr(v, "ndim"))
                    else v for v, b in zip(vals, bdims)]
        for i, a in enumerate(schema):
            if a.name in names and vals[i] is not None:
                d = vals[i]
                n = max(r, 1) + extra_rank
                vals[i] = ([_norm(x, n) + 1 for x in d] if isinstance(d, (list, tuple))
                           else _norm(d, n) + 1)
        out = invoke(op, vals)
        if scalar:
            if isinstance(out, tuple):
                return type(out)(*(o.reshape((B,)) for o in out)) if hasattr(out, "_fields") else \
                    tuple(o.reshape((B,)) for o in out), (0,) * len(out)
            return out.reshape((B,)), 0
        if isinstance(out, tuple):
            return out, (0,) * len(out)
        return out, 0
    return rule


# -- views and shapes -------------------------------------------------------------------
def reshape_rule(op, args, bdims):
    v = front(args[0], bdims[0])
    shape = [args[1]] if isinstance(args[1], int) else list(args[1])
    return _op("reshape")(v, [v.shape[0]] + shape), 0


def permute_rule(op, args, bdims):
    v = front(args[0], bdims[0])
    lr = v.ndim - 1
    return invoke(op, [v, [0] + [_norm(d, lr) + 1 for d in args[1]]]), 0


def expand_rule(op, args, bdims):
    v = front(args[0], bdims[0])
    lr, B = v.ndim - 1, v.shape[0]
    size = list(args[1])
    if len(size) > lr:
        v = v.reshape((B,) + (1,) * (len(size) - lr) + tuple(v.shape[1:]))
    return invoke(op, [v, [B] + size]), 0


def squeeze_rule(op, args, bdims):
    v = front(args[0], bdims[0])
    lr = v.ndim - 1
    axis = args[1]
    if axis is None:
        axes = [d + 1 for d in range(lr) if v.shape[d + 1] == 1]
    else:
        axes = [_norm(d, lr) + 1 for d in ([axis] if isinstance(axis, int) else axis)]
        axes = [d for d in axes if d <= lr]
    return invoke(op, [v, axes]), 0


def flatten_rule(op, args, bdims):
    v = front(args[0], bdims[0])
    lr, B = v.ndim - 1, v.shape[0]
    if lr == 0:
        return v.reshape((B, 1)), 0
    return invoke(op, [v, _norm(args[1], lr) + 1, _norm(args[2], lr) + 1]), 0


def cat_rule(op, args, bdims):
    items, ib = args[0], bdims[0]
    B = next(v.shape[b] for v, b in zip(items, ib) if b is not None)
    vals = [front(v, b) if b is not None else v.expand((B,) + tuple(v.shape)) for v, b in zip(items, ib)]
    r = max(v.ndim - 1 for v in vals)
    n = r + (1 if op.name == "aten::stack" else 0)
    return invoke(op, [vals, _norm(args[1], n) + 1]), 0


def index_select_rule(op, args, bdims):
    if bdims[2] is not None:
        return NotImplemented
    v = front(args[0], bdims[0])
    return invoke(op, [v, _norm(args[1], v.ndim - 1) + 1, args[2]]), 0


def last_two_rule(op, args, bdims):
    """tril/triu: the op works on the last two dims, so a batch in front is one more leading dim."""
    v = front(args[0], bdims[0])
    if v.ndim - 1 < 2:
        return NotImplemented       # the per-example call raises the op's own error
    new = list(args)
    new[0] = v
    return invoke(op, new), 0


def roll_rule(op, args, bdims):
    v = front(args[0], bdims[0])
    B, shifts, dims = v.shape[0], args[1], args[2]
    if not dims:        # rolled as if flattened
        return invoke(op, [v.reshape((B, -1)), shifts, [1]]).reshape(tuple(v.shape)), 0
    lr = v.ndim - 1
    return invoke(op, [v, shifts, [_norm(d, lr) + 1 for d in dims]]), 0


def take_along_dim_rule(op, args, bdims):
    if args[2] is None:
        return NotImplemented
    return dims_rule("dim", expand=True)(op, args, bdims)


def take_rule(op, args, bdims):
    """take: the input read as flat, so one flat row per example; an unbatched index selects in each."""
    if bdims[1] is not None:
        return NotImplemented
    v = front(args[0], bdims[0])
    B, idx = v.shape[0], args[1]
    flat = _op("index_select")(v.reshape((B, -1)), 1, idx.reshape((-1,)))
    return flat.reshape((B,) + tuple(idx.shape)), 0


# -- images: pooling and convolution over (C, H, W) or (N, C, H, W) -----------------------
def images_rule(n_images: int, spatial: int | None = 2):
    """The first ``n_images`` arguments are images, ``(C, *spatial)`` or ``(N, C, *spatial)``; the
    others must be unbatched.  An unbatched example joins the batch as N; a batched one merges
    the vmap batch into its N and splits it back after.  ``spatial=None``: the rank comes from the
    weight (argument 1) as convolution's does."""
    def rule(op, args, bdims):
        from dispatch_jit.tensor import Tensor
        if any(b is not None for b in bdims[n_images:]):
            return NotImplemented       # a batched weight or size: the fallback's per-example calls
        B = batch_size(args, bdims)
        vals = list(args)
        for i in range(n_images):
            v = args[i]
            if isinstance(v, Tensor):
                vals[i] = front(v, bdims[i]) if bdims[i] is not None else v.expand((B,) + tuple(v.shape))
        full = (args[1].ndim if spatial is None else spatial + 2)        # the rank with N
        lr = vals[0].ndim - 1
        if lr == full - 1:
            return invoke(op, vals), 0
        if lr != full:
            return NotImplemented       # the per-example call raises the op's own error
        N = vals[0].shape[1]
        for i in range(n_images):
            if isinstance(vals[i], Tensor):
                vals[i] = vals[i].reshape((B * N,) + tuple(vals[i].shape[2:]))
        out = invoke(op, vals)
        return out.reshape((B, N) + tuple(out.shape[1:])), 0
    return rule


# -- matmul family ----------------------------------------------------------------------
def matmul_rule(op, args, bdims):
    a, b = args[0], args[1]
    ba, bb = bdims[0], bdims[1]
    a = front(a, ba)
    b = front(b, bb)
    la, lb = _lrank(a, ba), _lrank(b, bb)
    if la == 0 or lb == 0:
        return NotImplemented
    sq = []
    if la == 1 and ba is not None:        # (B, k) -> (B, 1, k)
        a, la = a.unsqueeze(1), 2
        sq.append(-2 if lb >= 2 or bb is not None else -1)    # by an unbatched vector: (B, 1) out
    if lb == 1 and bb is not None:        # (B, k) -> (B, k, 1)
        b, lb = b.unsqueeze(2), 2
        sq.append(-1)
    r = max(la, lb)
    B = (a if ba is not None else b).shape[0]
    if ba is not None and la < r:
        a = a.reshape((B,) + (1,) * (r - la) + tuple(a.shape[1:]))
    if bb is not None and lb < r:
        b = b.reshape((B,) + (1,) * (r - lb) + tuple(b.shape[1:]))
    if ba is None and la >= 2:     # unbatched operands broadcast against the batch dim from the left
        a = a.reshape((1,) * (r + 1 - la) + tuple(a.shape))
    if bb is None and lb >= 2:
        b = b.reshape((1,) * (r + 1 - lb) + tuple(b.shape))
    out = invoke(op, [a, b])
    for d in sorted(sq):
        out = out.squeeze(d)
    return out, 0


def dot_rule(op, args, bdims):
    vals, r, B = _align(args, bdims)
    return _op("sum")(_op("mul.Tensor")(vals[0], vals[1]), [-1]), 0


def linear_rule(op, args, bdims):
    x, w, bias = args
    if bdims[1] is not None or bdims[2] is not None:
        return NotImplemented
    x = front(x, bdims[0])
    if x.ndim == 1:
        return NotImplemented
    return invoke(op, [x, w, bias]), 0


# -- losses: per example, through the 'none' reduction -----------------------------------
def _loss_common(args, bdims, nargs_after):
    x, t, weight, reduction, ignore_index = args[:5]
    if weight is not None or (len(args) > 5 and args[5] != 0.0):
        return None
    B = batch_size([x, t], bdims[:2])
    x, t = [front(v, b) if b is not None else v.expand((B,) + tuple(v.shape)) for v, b in zip((x, t), bdims[:2])]
    lr = x.ndim - 1
    if lr not in (1, 2) or t.ndim - 1 != lr - 1:
        return None
    C = x.shape[-1]
    return x, t, B, lr, C, reduction, ignore_index


def loss_rule(op, args, bdims):
    c = _loss_common(args, bdims, 0)
    if c is None:
        return NotImplemented
    x, t, B, lr, C, reduction, ii = c
    new = list(args)
    new[0], new[1], new[3] = x.reshape((-1, C)), t.reshape((-1,)), "none"
    per = invoke(op, new).reshape((B, -1))      # (B, N)
    if reduction == "none":
        return (per.reshape((B,)) if lr == 1 else per), 0
    total = _op("sum")(per, [1])
    if reduction == "sum":
        return total, 0
    count = _op("sum")(_op("ne.Tensor")(t.reshape((B, -1)), ii).to(per.dtype), [1])
    return _op("div.Tensor")(total, count), 0


def loss_backward_rule(op, args, bdims):
    go, gb = args[0], bdims[0]
    c = _loss_common(args[1:], bdims[1:], 0)
    if c is None:
        return NotImplemented
    x, t, B, lr, C, reduction, ii = c
    N = x.shape[1] if lr == 2 else 1
    go = front(go, gb) if gb is not None else go.expand((B,) + tuple(go.shape))
    if reduction == "none":
        g_el = go.reshape((B, N))
    else:
        g_el = go.reshape((B, 1)).expand((B, N))
        if reduction == "mean":
            count = _op("sum")(_op("ne.Tensor")(t.reshape((B, -1)), ii).to(go.dtype), [1], True)
            g_el = _op("div.Tensor")(g_el, count)
    new = list(args)
    new[0], new[1], new[2], new[4] = g_el.reshape((-1,)), x.reshape((-1, C)), t.reshape((-1,)), "none"
    out = invoke(op, new)
    return out.reshape((B,) + tuple(x.shape[1:])), 0


# -- rules written with other ops on the batched tensors themselves ----------------------
def linear_decomposed(x, w, bias=None):
    out = _op("matmul")(x, _op("transpose.int")(w, -1, -2))
    return out if bias is None else _op("add.Tensor")(out, bias)


def linear_backward_decomposed(go, x, w, mask):
    out_f, in_f = w.shape[-2], w.shape[-1]
    g2 = _op("reshape")(go, [-1, out_f])
    x2 = _op("reshape")(x, [-1, in_f])
    gi = _op("matmul")(go, w) if mask[0] else None
    gw = _op("matmul")(_op("transpose.int")(g2, 0, 1), x2) if mask[1] else None
    gb = _op("sum")(g2, [0]) if mask[2] else None
    return gi, gw, gb


# -- the tables ---------------------------------------------------------------------------
_EW = [re.match(r"([\w.]+)\(", s).group(1) for s in _ELEMENTWISE_SCHEMAS]

RULES: dict = {}
RULES.update({n: pointwise_inplace if n.split(".")[0].endswith("_") else pointwise for n in _EW})
RULES.update({n: pointwise for n in ("clone", "to.dtype")})
RULES.update({n: reduce_axes for n in ("sum", "mean", "prod", "max", "min", "std", "var", "logsumexp",
                                       "all", "any")})
RULES.update({n: reduce_argmax for n in ("argmax", "argmin")})
RULES.update({
    "softmax": dims_rule("axis"), "log_softmax": dims_rule("axis"),
    "_softmax_backward_data": dims_rule("axis"), "_log_softmax_backward_data": dims_rule("axis"),
    "cumsum": dims_rule("dim"), "cumprod": dims_rule("dim"),
    "cummax": dims_rule("dim"), "cummin": dims_rule("dim"), "logcumsumexp": dims_rule("dim"), "mode": dims_rule("dim"),
    "scatter_reduce.two": dims_rule("dim", expand=True),
    "sort": dims_rule("dim"), "topk": dims_rule("dim"), "argsort": dims_rule("dim"), "take": take_rule,
    "transpose.int": dims_rule("dim0", "dim1"), "narrow": dims_rule("axis"),
    "slice.Tensor": dims_rule("dim"), "select.int": dims_rule("dim"), "flip": dims_rule("dims"),
    "unsqueeze": dims_rule("axis", extra_rank=1),
    "gather": dims_rule("dim", expand=True), "scatter_add": dims_rule("dim", expand=True),
    "scatter": dims_rule("dim", expand=True),
    "view": reshape_rule, "reshape": reshape_rule, "permute": permute_rule, "expand": expand_rule,
    "squeeze": squeeze_rule, "flatten": flatten_rule, "cat": cat_rule, "stack": cat_rule,
    "index_select": index_select_rule, "tril": last_two_rule, "triu": last_two_rule, "roll": roll_rule,
    "take_along_dim": take_along_dim_rule,
    "matmul": matmul_rule, "dot": dot_rule, "linear": linear_rule,
    "nll_loss": loss_rule, "cross_entropy_loss": loss_rule,
    "max_pool2d": images_rule(1), "max_pool2d_indices": images_rule(1), "avg_pool2d": images_rule(1),
    "max_pool2d_backward": images_rule(2), "convolution": images_rule(1, spatial=None),
    "nll_loss_backward": loss_backward_rule, "cross_entropy_loss_backward": loss_backward_rule,
})

# ops whose batched form is other ops on the BatchedTensors (each of which has a rule)
WRAPPED_RULES = {"linear_backward": linear_backward_decomposed}
