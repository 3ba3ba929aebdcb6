"""The fuzzers' rows for diag, diagonal, addmm, xlogy, cross and median (kernels/composite_math.py), mode
(kernels/arrayops), and
scatter with reduce="multiply" (the op scatter.reduce, kernels/torch_kwargs.py).
fuzz_ops.py adds them to its ROWS (its last lines import this module, once the names used here are
defined)."""

from __future__ import annotations

import numpy as np

from fuzz_ops import EXACT, OracleError, Row, _f64, binary, tol_matmul, ulps
from fuzz_ops_torch import _gather_params


def _diag_params(ch, args):
    a = args[0]
    return None if a.ndim not in (1, 2) or a.size > 4096 else {"k": ch.int(-2, 2)}


def _diagonal_params(ch, args):
    a = args[0]
    if a.ndim < 2:
        return None
    d1 = ch.int(-a.ndim, a.ndim - 1)
    d2 = ch.choice([d for d in range(a.ndim) if d != d1 % a.ndim])
    return {"k": ch.int(-2, 2), "d1": d1, "d2": d2}


def _median_params(ch, args):
    a = args[0]
    return None if a.ndim == 0 or a.size == 0 or a.dtype.kind not in "iuf" else {"axis": ch.int(-a.ndim, a.ndim - 1)}


def _median_np(args, p):
    a, ax = args[0], p["axis"]
    if a.dtype.kind == "b" or a.dtype == np.uint16 or a.dtype == np.uint32 or a.dtype == np.uint64:
        raise OracleError("median: no bool/uint kernel in PyTorch")
    s = np.sort(a, axis=ax)          # NaN sorts last; a row with NaN has median NaN
    out = np.take(s, (a.shape[ax] - 1) // 2, axis=ax)
    if a.dtype.kind == "f":
        out = np.where(np.isnan(a).any(axis=ax), np.nan, out).astype(a.dtype)
    return out


def _mode_np(args, p, part):
    """torch.mode along the axis: the smallest of the most frequent values, the index of its last
    occurrence (NaN rows are PyTorch's sort order's business: not judged)."""
    a, ax = args[0], p["axis"]
    if a.dtype.kind == "f" and np.isnan(a).any():
        raise OracleError("mode: rows with NaN are not judged")
    rows = np.moveaxis(a, ax, -1).reshape(-1, a.shape[ax])
    vals, idx = np.empty(rows.shape[0], a.dtype), np.empty(rows.shape[0], np.int64)
    for r, row in enumerate(rows):
        u, c = np.unique(row, return_counts=True)
        vals[r] = u[np.argmax(c)]                 # argmax: the first (smallest) of the tied values
        idx[r] = np.flatnonzero(row == vals[r])[-1]
    shape = np.moveaxis(a, ax, -1).shape[:-1]
    return (vals if part == 0 else idx).reshape(shape)


def _xlogy_np(x, y):
    with np.errstate(all="ignore"):
        return np.where(np.isnan(y), np.nan, np.where(x == 0, 0.0, x * np.log(y)))


def _addmm_np(args, p):
    a, b = args[0], args[1]
    if a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype or a.shape[1] != b.shape[0] or a.shape[0] == 0 \
            or a.shape[1] == 0 or a.dtype.kind not in "if" or a.dtype.kind == "u":
        raise OracleError("addmm: 2-D non-empty int/float operands of one dtype")
    acc = np.float64 if a.dtype.kind == "f" else a.dtype
    with np.errstate(all="ignore"):
        return (2 * a[:1, :1].astype(acc) + 3 * (a.astype(acc) @ b.astype(acc))).astype(a.dtype)


def _tol_addmm(args, p, want):
    """mm's bound (tol_matmul) for the product, scaled by alpha = 3, plus the roundings of the scaling
    and of adding beta * self."""
    if want.dtype.kind != "f":
        return None
    rtol, atol = tol_matmul(args, p, want)
    eps = float(np.finfo(want.dtype).eps)
    return rtol, 3 * atol + 4 * eps * np.abs(np.nan_to_num(args[0][:1, :1].astype(np.float64), posinf=0, neginf=0))


def _cross_params(ch, args):
    a = args[0]
    dims = [d for d, n in enumerate(a.shape) if n == 3]
    return {"axis": ch.choice(dims)} if dims else None


ROWS = [
    Row("diag", "reduce", (lambda a, p: f"dj.diag({a[0]}, {p['k']})", lambda a, p: f"{a[0]}.diag({p['k']})"), "bif",
        lambda args, p: np.diag(args[0], p["k"]), lambda t, p: t[0].diag(p["k"]), EXACT, _diag_params, True),
    Row("diagonal", "reduce", (lambda a, p: f"dj.diagonal({a[0]}, {p['k']}, {p['d1']}, {p['d2']})",
                               lambda a, p: f"{a[0]}.diagonal({p['k']}, {p['d1']}, {p['d2']})"), "bif",
        lambda args, p: np.ascontiguousarray(np.diagonal(args[0], p["k"], p["d1"], p["d2"])),
        lambda t, p: t[0].diagonal(p["k"], p["d1"], p["d2"]), EXACT, _diagonal_params, True),
    Row("median", "reduce", (lambda a, p: f"dj.median({a[0]}, {p['axis']}).values",
                             lambda a, p: f"{a[0]}.median({p['axis']})[0]"), "if", _median_np,
        lambda t, p: t[0].median(p["axis"]).values, EXACT, _median_params, True),
    Row("mode", "reduce", (lambda a, p: f"dj.mode({a[0]}, {p['axis']}).values",
                           lambda a, p: f"{a[0]}.mode({p['axis']})[0]"), "if", lambda args, p: _mode_np(args, p, 0),
        lambda t, p: t[0].mode(p["axis"]).values, EXACT, _median_params, True),
    # no PyTorch oracle for the indices: where the most frequent value occurs more than once, torch.mode's
    # index is not a fixed one of its positions (a (1024, 512) row gave the first where the others gave the
    # last); dj documents the last, which the NumPy mirror checks
    Row("mode_indices", "reduce", (lambda a, p: f"dj.mode({a[0]}, {p['axis']}).indices",), "if",
        lambda args, p: _mode_np(args, p, 1), None, EXACT, _median_params, False),
    Row("cross", "reduce", (lambda a, p: f"dj.cross({a[0]}, {a[0]}.flip({p['axis']}) + 1, dim={p['axis']})",), "if",
        lambda args, p: _cross_np(args[0], p["axis"]), None, EXACT, _cross_params, True),
    Row("addmm", "matmul", (lambda a, p: f"dj.addmm({a[0]}[:1, :1], {a[0]}, {a[1]}, beta=2, alpha=3)",), "if",
        _addmm_np, lambda t, p: __import__("torch").addmm(t[0][:1, :1], t[0], t[1], beta=2, alpha=3),
        _tol_addmm, None, True, arity=2),
    binary("xlogy", _f64(_xlogy_np), "float", "bif", ulps(8), grad=True, pos=(1,)),
    Row("scatter_multiply", "reduce", (lambda a, p: f"dj.scatter({a[0]}, {p['axis']}, "
                                                    f"dj.tensor({p['index']}, dtype=dj.int64), {a[0]}, "
                                                    f"reduce='multiply')",),
        "if", lambda args, p: _scatter_mul_np(args, p), None, EXACT, _gather_params(True), False),
]


def _scatter_mul_np(args, p):
    a = args[0]
    if a.dtype.kind not in "iuf" or a.dtype in (np.uint16, np.uint32, np.uint64):
        raise OracleError("scatter(reduce='multiply'): PyTorch has no uint16/32/64 kernel")
    ax = p["axis"] % a.ndim
    i = np.array(p["index"], np.int64).reshape(a.shape)
    coords = list(np.indices(a.shape))
    coords[ax] = i
    out = a.copy()
    with np.errstate(all="ignore"):
        np.multiply.at(out, tuple(coords), a)
    return out


def _cross_np(a, ax):
    with np.errstate(all="ignore"):
        return np.cross(a, np.flip(a, ax) + np.array(1, a.dtype), axis=ax).astype(a.dtype)
