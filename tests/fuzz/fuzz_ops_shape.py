"""The fuzzers' rows for the shape, split and product names (kernels/shape_views.py, shape_splits.py,
products.py): movedim, swapaxes, select, tile, rot90, fliplr, flipud, tensor_split, hstack, atleast_3d,
unflatten, diagflat, diag_embed, select_scatter, kron, mv.  fuzz_ops.py adds them to its ROWS (its
last lines import this module).

Each is a composition of views and copies, so eager and compiled agree bit for bit by construction;
the rows check that the compositions keep that and match NumPy's spelling of the same operation.
"""

from __future__ import annotations

import numpy as np

from fuzz_ops import EXACT, OracleError, Row, tol_matmul


def _axis(ch, a, extra=0):
    return ch.int(-(a.ndim + extra), a.ndim + extra - 1)


def _movedim_params(ch, args):
    a = args[0]
    return None if a.ndim == 0 else {"src": _axis(ch, a), "dst": _axis(ch, a)}


def _swap_params(ch, args):
    a = args[0]
    return None if a.ndim == 0 else {"d0": _axis(ch, a), "d1": _axis(ch, a)}


def _select_params(ch, args):
    a = args[0]
    if a.ndim == 0:
        return None
    axis = _axis(ch, a)
    n = a.shape[axis]
    return None if n == 0 else {"axis": axis, "index": ch.int(-n, n - 1)}


def _tile_params(ch, args):
    a = args[0]
    if a.size > 256:
        return None
    return {"reps": tuple(ch.int(1, 2) for _ in range(ch.int(1, max(1, a.ndim) + 1)))}


def _rot90_params(ch, args):
    a = args[0]
    if a.ndim < 2:
        return None
    d0 = ch.int(0, a.ndim - 1)
    d1 = ch.choice([d for d in range(a.ndim) if d != d0])
    return {"k": ch.int(-2, 5), "dims": (d0, d1)}


def _split_params(ch, args):
    a = args[0]
    if a.ndim == 0:
        return None
    n = ch.int(1, 4)
    return {"n": n, "axis": _axis(ch, a), "piece": ch.int(0, n - 1)}


def _unflatten_params(ch, args):
    a = args[0]
    if a.ndim == 0:
        return None
    axis = _axis(ch, a)
    n = a.shape[axis]
    split = [k for k in (1, 2, 3) if n % k == 0] if n else [1]
    k = ch.choice(split)
    return {"axis": axis, "sizes": (k, -1) if n else (k, 0)}


def _diagflat_params(ch, args):
    return None if args[0].size > 64 else {"k": ch.int(-2, 2)}


def _diag_embed_params(ch, args):
    a = args[0]
    if a.ndim == 0 or a.size > 64 or a.ndim > 3:
        return None
    d1 = ch.int(0, a.ndim)
    return {"k": ch.int(-2, 2), "d1": d1, "d2": ch.choice([d for d in range(a.ndim + 1) if d != d1])}


def _diag_embed_np(args, p):
    a, k = args[0], p["k"]
    n = a.shape[-1] + abs(k)
    out = np.zeros(a.shape[:-1] + (n, n), a.dtype)
    i = np.arange(a.shape[-1])
    out[..., i + max(-k, 0), i + max(k, 0)] = a
    return np.ascontiguousarray(np.moveaxis(out, (-2, -1), (p["d1"], p["d2"])))


def _select_scatter_np(args, p):
    a = args[0]
    out = a.copy()
    idx = [slice(None)] * a.ndim
    idx[p["axis"]] = p["index"]
    out[tuple(idx)] = np.zeros_like(np.take(a, p["index"], p["axis"]))
    return out


def _kron_params(ch, args):
    return None if args[0].size > 16 else {}


def _mv_np(args, p):
    m, v = args
    if m.ndim != 2 or v.ndim != 1 or m.dtype != v.dtype or m.dtype.kind not in "if" or m.dtype.kind == "u":
        raise OracleError("mv: a 2-D int/float matrix and a 1-D vector of one dtype")
    acc = np.float64 if m.dtype.kind == "f" else m.dtype
    with np.errstate(all="ignore"):
        return (m.astype(acc) @ v.astype(acc)).astype(m.dtype)


def _rows():
    sel = "dj.select_scatter({0}, dj.zeros_like({0}.select({1}, {2})), {1}, {2})"
    return [
        Row("movedim", "view", (lambda a, p: f"dj.movedim({a[0]}, {p['src']}, {p['dst']})",
                                lambda a, p: f"{a[0]}.moveaxis({p['src']}, {p['dst']})"), "bif",
            lambda args, p: np.moveaxis(args[0], p["src"], p["dst"]), None, EXACT, _movedim_params, True),
        Row("swapaxes", "view", (lambda a, p: f"dj.swapaxes({a[0]}, {p['d0']}, {p['d1']})",
                                 lambda a, p: f"{a[0]}.swapdims({p['d0']}, {p['d1']})"), "bif",
            lambda args, p: np.swapaxes(args[0], p["d0"], p["d1"]), None, EXACT, _swap_params, True),
        Row("select", "view", (lambda a, p: f"{a[0]}.select({p['axis']}, {p['index']})",
                               lambda a, p: f"dj.select({a[0]}, {p['axis']}, {p['index']})"), "bif",
            lambda args, p: np.take(args[0], p["index"], p["axis"]), None, EXACT, _select_params, True),
        Row("tile", "reduce", (lambda a, p: f"dj.tile({a[0]}, {p['reps']})",
                               lambda a, p: f"{a[0]}.tile({p['reps']})"), "bif",
            lambda args, p: np.tile(args[0], p["reps"]), lambda t, p: t[0].tile(p["reps"]), EXACT, _tile_params,
            True),
        Row("rot90", "reduce", (lambda a, p: f"dj.rot90({a[0]}, {p['k']}, {p['dims']})",
                                lambda a, p: f"{a[0]}.rot90({p['k']}, {list(p['dims'])})"), "bif",
            # a copy, as PyTorch's (np.rot90 of k=0 is a view, which ascontiguousarray kept)
            lambda args, p: np.rot90(args[0], p["k"], p["dims"]).copy(),
            lambda t, p: t[0].rot90(p["k"], list(p["dims"])), EXACT, _rot90_params, True),
        Row("flipud", "reduce", (lambda a, p: f"dj.flipud({a[0]})", lambda a, p: f"{a[0]}.flipud()"), "bif",
            lambda args, p: np.flipud(args[0]) if args[0].ndim else (_ for _ in ()).throw(OracleError("0-d")),
            lambda t, p: t[0].flipud(), EXACT, None, True),
        Row("fliplr", "reduce", (lambda a, p: f"dj.fliplr({a[0]})",), "bif",
            lambda args, p: np.fliplr(args[0]) if args[0].ndim >= 2 else (_ for _ in ()).throw(OracleError("< 2-d")),
            lambda t, p: t[0].fliplr(), EXACT, None, True),
        Row("tensor_split", "view", (lambda a, p: f"dj.tensor_split({a[0]}, {p['n']}, {p['axis']})[{p['piece']}]",
                                     lambda a, p: f"{a[0]}.tensor_split({p['n']}, dim={p['axis']})[{p['piece']}]"),
            "bif", lambda args, p: np.array_split(args[0], p["n"], p["axis"])[p["piece"]], None, EXACT,
            _split_params, True),
        Row("hstack", "reduce", (lambda a, p: f"dj.hstack([{a[0]}, {a[0]}])",), "bif",
            lambda args, p: np.hstack([args[0], args[0]]), None, EXACT, None, True),
        Row("atleast_3d", "view", (lambda a, p: f"dj.atleast_3d({a[0]})",), "bif",
            lambda args, p: np.atleast_3d(args[0]), None, EXACT, None, True),
        Row("unflatten", "view", (lambda a, p: f"{a[0]}.unflatten({p['axis']}, {p['sizes']})",
                                  lambda a, p: f"dj.unflatten({a[0]}, {p['axis']}, {p['sizes']})"), "bif",
            lambda args, p: args[0].reshape(args[0].shape[:p["axis"] % args[0].ndim] + (
                p["sizes"][0], args[0].shape[p["axis"]] // p["sizes"][0]) + args[0].shape[p["axis"] % args[0].ndim + 1:]),
            None, EXACT, _unflatten_params, True),
        Row("diagflat", "reduce", (lambda a, p: f"dj.diagflat({a[0]}, {p['k']})",
                                   lambda a, p: f"{a[0]}.diagflat({p['k']})"), "bif",
            lambda args, p: np.diagflat(args[0], p["k"]), lambda t, p: t[0].diagflat(p["k"]), EXACT,
            _diagflat_params, True),
        Row("diag_embed", "reduce", (lambda a, p: f"dj.diag_embed({a[0]}, {p['k']}, {p['d1']}, {p['d2']})",), "bif",
            _diag_embed_np, lambda t, p: t[0].diag_embed(p["k"], p["d1"], p["d2"]), EXACT, _diag_embed_params,
            True),
        Row("select_scatter", "reduce", (lambda a, p: sel.format(a[0], p["axis"], p["index"]),), "bif",
            _select_scatter_np, None, EXACT, _select_params, True),
        # the operand is used twice: its gradient sums two contributions, which compiled modes must
        # add in eager's order
        Row("kron", "reduce", (lambda a, p: f"dj.kron({a[0]}, {a[0]})", lambda a, p: f"{a[0]}.kron({a[0]})"), "bif",
            lambda args, p: np.kron(args[0], args[0]), lambda t, p: t[0].kron(t[0]), EXACT, _kron_params, True),
        Row("mv", "matmul", (lambda a, p: f"dj.mv({a[0]}, {a[1]})", lambda a, p: f"{a[0]}.mv({a[1]})"), "if", _mv_np,
            lambda t, p: t[0].mv(t[1]), tol_matmul, None, True, arity=2),
    ]


ROWS = _rows()
