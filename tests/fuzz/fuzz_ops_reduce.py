"""The fuzzers' rows for the reductions, scans and index-wise writes of kernels/reduction/{composite,
counting,scans}.py and kernels/indexing/{composite,reduce}.py (branch reduceops): nansum, nanmean,
count_nonzero, cummax, cummin, logcumsumexp, kthvalue, nanmedian, quantile, repeat_interleave,
index_add, index_fill, masked_select, scatter_reduce.  fuzz_ops.py adds them to its ROWS (its last lines
import this module, once the names used here are defined).  Index and mask parameters are literals
in the source, as fuzz_ops_torch.py's."""

from __future__ import annotations

import numpy as np

from fuzz_ops import (EXACT, OracleError, Row, _axes_param, _norm_axes, _sum_rule, as_dtype_unchecked, tol_sum,
                      ulps)
from fuzz_ops_torch import _gather_params, _mask_params


def _dim_params(ch, args):
    p = _axes_param(ch, args[0])
    return p


def _one_axis(ch, args):
    a = args[0]
    return None if a.ndim == 0 else {"axis": ch.int(-a.ndim, a.ndim - 1)}


def _dim_src(name, method=True):
    forms = [lambda a, p: f"dj.{name}({a[0]}, {p['axis']!r}, {p['keepdims']!r})"]
    if method:
        forms.append(lambda a, p: f"{a[0]}.{name}(dim={p['axis']!r}, keepdim={p['keepdims']!r})")
    return tuple(forms)


def _nansum_np(args, p):
    a = args[0]
    if a.dtype.kind == "b":
        raise OracleError("nansum of bool: not judged here")
    acc = np.float64 if a.dtype.kind == "f" else _sum_rule(a.dtype)
    with np.errstate(all="ignore"):
        r = np.nansum(a.astype(acc), axis=_norm_axes(a, p["axis"]), keepdims=p["keepdims"])
    return as_dtype_unchecked(r, a.dtype if a.dtype.kind == "f" else _sum_rule(a.dtype))


def _nanmean_np(args, p):
    a = args[0]
    if a.dtype.kind != "f":
        raise OracleError("nanmean: floating point only")
    f = a.astype(np.float64)
    ax = _norm_axes(a, p["axis"])
    with np.errstate(all="ignore"):
        s = np.nansum(f, axis=ax, keepdims=p["keepdims"])
        n = np.sum(~np.isnan(f), axis=ax, keepdims=p["keepdims"])
        return as_dtype_unchecked(s / n, a.dtype)


def _count_nonzero_np(args, p):
    a = args[0]
    return np.asarray(np.count_nonzero(a, axis=_norm_axes(a, p["axis"])), np.int64)


def _cumext_np(fn):
    def run(args, p):
        a = args[0]
        return fn.accumulate(a, axis=p["axis"]) if a.size else a.copy()
    return run


def _lcse_np(args, p):
    a = args[0]
    if a.dtype.kind != "f":
        raise OracleError("logcumsumexp: floating point only")
    with np.errstate(all="ignore"):
        return as_dtype_unchecked(np.logaddexp.accumulate(a.astype(np.float64), axis=p["axis"]), a.dtype) \
            if a.size else a.copy()


def _tol_lcse(args, p, want):
    eps = float(np.finfo(want.dtype).eps)
    n = max(args[0].shape[p["axis"]], 1) if args[0].ndim else 1
    return 8 * n * eps, 8 * n * eps * np.maximum(1.0, np.abs(np.nan_to_num(want.astype(np.float64), posinf=0,
                                                                             neginf=0)))


def _kth_params(ch, args):
    a = args[0]
    if a.ndim == 0 or 0 in a.shape or a.dtype.kind not in "if" or a.dtype in (np.uint16, np.uint32, np.uint64):
        return None
    axis = ch.int(-a.ndim, a.ndim - 1)
    return {"axis": axis, "k": ch.int(1, a.shape[axis])}


def _kth_np(args, p):
    return np.take(np.sort(args[0], axis=p["axis"]), p["k"] - 1, axis=p["axis"])


def _nanmedian_params(ch, args):
    a = args[0]
    if a.ndim == 0 or 0 in a.shape or a.dtype.kind not in "if" or a.dtype in (np.uint16, np.uint32, np.uint64):
        return None
    return {"axis": ch.int(-a.ndim, a.ndim - 1)}


def _nanmedian_np(args, p):
    a, ax = args[0], p["axis"]
    s = np.sort(a, axis=ax)
    c = np.sum(~np.isnan(a), axis=ax, keepdims=True) if a.dtype.kind == "f" else \
        np.full([1 if d == ax % a.ndim else n for d, n in enumerate(a.shape)], a.shape[ax])
    pos = np.maximum(c - 1, 0) // 2
    return np.squeeze(np.take_along_axis(s, pos, axis=ax), axis=ax)


def _quantile_params(ch, args):
    a = args[0]
    if a.size == 0:
        return None
    return {"axis": ch.int(-a.ndim, a.ndim - 1) if a.ndim and ch.coin(0.7) else None,
            "q": ch.choice([0.0, 0.25, 0.5, 0.9, 1.0]), "interp": ch.choice(["linear", "lower", "higher", "midpoint",
                                                                             "nearest"])}


def _quantile_np(args, p):
    a = args[0]
    if a.dtype not in (np.float32, np.float64):
        raise OracleError("quantile: float32/float64 only")
    method = {"midpoint": "midpoint", "nearest": "nearest"}.get(p["interp"], p["interp"])
    with np.errstate(all="ignore"):
        r = np.quantile(a.astype(np.float64), p["q"], axis=p["axis"], method=method)
    if p["interp"] == "nearest":   # PyTorch rounds the rank half to even (NumPy's 'nearest' too, on the rank)
        pass
    return as_dtype_unchecked(r, a.dtype)


def _repeat_params(ch, args):
    a = args[0]
    if a.ndim == 0 or a.size > 1024:
        return None
    return {"axis": ch.int(-a.ndim, a.ndim - 1), "reps": ch.int(0, 3)}


def _index_params(ch, args):
    a = args[0]
    if a.ndim == 0 or a.size > 2048 or a.shape[0] == 0:
        return None
    n = a.shape[0]
    return {"index": [ch.int(0, n - 1) for _ in range(n)], "value": ch.choice([-1, 0, 2])}


def _index_add_np(args, p):
    a = args[0]
    acc = np.float32 if a.dtype == np.float16 else a.dtype      # dispatch_jit adds float16 in float32
    out = a.astype(acc)
    with np.errstate(all="ignore"):
        np.add.at(out, np.array(p["index"], np.int64), a.astype(acc))
    return out.astype(a.dtype)


def _index_fill_np(args, p):
    a = args[0].copy()
    # the value cast as a C cast, as dispatch_jit's (and PyTorch's) fill: -1 into uint32 wraps to
    # 2**32 - 1, which NumPy 2 refuses to assign from a Python int
    a[np.array(p["index"], np.int64)] = np.array(p["value"]).astype(a.dtype)
    return a


def _masked_select_np(args, p):
    a = args[0]
    m = np.array(p["mask"], bool).reshape(np.shape(p["mask"]))
    shape = np.broadcast_shapes(a.shape, m.shape)
    return np.broadcast_to(a, shape)[np.broadcast_to(m, shape)]


def _scatter_reduce_np(fn):
    def run(args, p):
        a = args[0]
        ax = p["axis"] % a.ndim
        i = np.array(p["index"], np.int64).reshape(a.shape)
        coords = list(np.indices(a.shape))
        coords[ax] = i
        out = a.copy()
        with np.errstate(all="ignore"):
            fn.at(out, tuple(coords), a)
        return out
    return run


ROWS = [
    Row("nansum", "reduce", _dim_src("nansum"), "if", _nansum_np, None, tol_sum, _dim_params, True),
    Row("nanmean", "reduce", _dim_src("nanmean"), "f", _nanmean_np, None, tol_sum, _dim_params, True),
    Row("count_nonzero", "reduce", (lambda a, p: f"dj.count_nonzero({a[0]}, {p['axis']!r})",
                                    lambda a, p: f"{a[0]}.count_nonzero({p['axis']!r})"), "bif",
        _count_nonzero_np, None, EXACT, _dim_params),
    Row("cummax", "reduce", (lambda a, p: f"dj.cummax({a[0]}, {p['axis']}).values",
                             lambda a, p: f"{a[0]}.cummax({p['axis']})[0]"), "bif", _cumext_np(np.maximum), None,
        EXACT, _one_axis, True),
    Row("cummin", "reduce", (lambda a, p: f"dj.cummin({a[0]}, {p['axis']}).values",), "bif",
        _cumext_np(np.minimum), None, EXACT, _one_axis, True),
    Row("logcumsumexp", "reduce", (lambda a, p: f"dj.logcumsumexp({a[0]}, {p['axis']})",
                                   lambda a, p: f"{a[0]}.logcumsumexp({p['axis']})"), "f", _lcse_np, None,
        _tol_lcse, _one_axis, True),
    Row("kthvalue", "reduce", (lambda a, p: f"dj.kthvalue({a[0]}, {p['k']}, {p['axis']}).values",
                               lambda a, p: f"{a[0]}.kthvalue({p['k']}, dim={p['axis']})[0]"), "if", _kth_np, None,
        EXACT, _kth_params, True),
    Row("nanmedian", "reduce", (lambda a, p: f"dj.nanmedian({a[0]}, {p['axis']}).values",), "if", _nanmedian_np,
        None, EXACT, _nanmedian_params, True),
    Row("quantile", "reduce", (lambda a, p: f"dj.quantile({a[0]}, {p['q']}, {p['axis']!r}, "
                                            f"interpolation={p['interp']!r})",), "f", _quantile_np, None, ulps(8),
        _quantile_params, True),
    Row("repeat_interleave", "reduce", (lambda a, p: f"dj.repeat_interleave({a[0]}, {p['reps']}, {p['axis']})",
                                        lambda a, p: f"{a[0]}.repeat_interleave({p['reps']}, dim={p['axis']})"),
        "bif", lambda args, p: np.repeat(args[0], p["reps"], p["axis"]), None, EXACT, _repeat_params, True),
    Row("index_add", "reduce", (lambda a, p: f"dj.index_add({a[0]}, 0, dj.tensor({p['index']}), {a[0]})",), "if",
        _index_add_np, None, EXACT, _index_params, True),
    Row("index_fill", "reduce", (lambda a, p: f"{a[0]}.index_fill(0, dj.tensor({p['index']}), {p['value']})",),
        "if", _index_fill_np, None, EXACT, _index_params, True),
    Row("masked_select", "reduce", (lambda a, p: f"dj.masked_select({a[0]}, dj.tensor({p['mask']}, "
                                                 f"dtype=dj.bool))",), "bif", _masked_select_np, None, EXACT,
        _mask_params, True),
    Row("scatter_reduce_sum", "reduce", (lambda a, p: f"dj.scatter_reduce({a[0]}, {p['axis']}, "
                                                      f"dj.tensor({p['index']}, dtype=dj.int64), {a[0]}, 'sum')",),
        "if", _scatter_reduce_np(np.add), None, EXACT, _gather_params(True), True),
    Row("scatter_reduce_amax", "reduce", (lambda a, p: f"{a[0]}.scatter_reduce({p['axis']}, "
                                                       f"dj.tensor({p['index']}, dtype=dj.int64), {a[0]}, 'amax')",),
        "if", _scatter_reduce_np(np.maximum), None, EXACT, _gather_params(True), True),
]


# -- dj.nn.functional's compositions (dispatch_jit/nn/functional_loss.py, functional_norm.py) ----------------
def _smooth_l1_np(args, p):
    a = args[0]
    if a.dtype.kind != "f":
        raise OracleError("smooth_l1_loss: floating point only")
    with np.errstate(all="ignore"):
        t = (a * a.dtype.type(0.5)).astype(np.float64)      # the target a * 0.5, rounded in a's dtype
        d = np.abs(a.astype(np.float64) - t)
        b = p["beta"]
        loss = d if b == 0 else np.where(d < b, 0.5 * d * d / b, d - 0.5 * b)
        r = {"mean": np.mean, "sum": np.sum, "none": lambda x: x}[p["reduction"]](loss)
    return as_dtype_unchecked(r, a.dtype)


def _tol_smooth_l1(args, p, want):
    eps = float(np.finfo(want.dtype).eps)
    a = np.nan_to_num(np.abs(args[0].astype(np.float64)), posinf=0, neginf=0)
    mag = float(np.max(a)) if a.size else 0.0
    mag = mag * mag / max(p["beta"], 1e-3) if mag < 1e150 else np.inf
    n = args[0].size if p["reduction"] != "none" else 1
    return 16 * eps, (16 + n) * eps * max(mag, 1.0) * 4


def _channel_shuffle_params(ch, args):
    a = args[0]
    if a.ndim < 3 or a.shape[1] == 0:
        return None
    g = ch.choice([d for d in range(1, a.shape[1] + 1) if a.shape[1] % d == 0])
    return {"groups": g}


def _channel_shuffle_np(args, p):
    a, g = args[0], p["groups"]
    n, c = a.shape[0], a.shape[1]
    return np.ascontiguousarray(np.swapaxes(a.reshape((n, g, c // g) + a.shape[2:]), 1, 2).reshape(a.shape))


ROWS += [
    Row("smooth_l1_loss", "reduce", (lambda a, p: f"dj.nn.functional.smooth_l1_loss({a[0]}, {a[0]} * 0.5, "
                                                  f"reduction={p['reduction']!r}, beta={p['beta']!r})",), "f",
        _smooth_l1_np, None, _tol_smooth_l1,
        lambda ch, args: {"reduction": ch.choice(["mean", "sum", "none"]), "beta": ch.choice([0.0, 0.5, 1.0])}, True),
    Row("channel_shuffle", "shape", (lambda a, p: f"dj.nn.functional.channel_shuffle({a[0]}, {p['groups']})",), "bif",
        _channel_shuffle_np, None, EXACT, _channel_shuffle_params, True),
]
