"""The fuzzers' rows for PyTorch's convenience surface (issue 15 part 5): gather, scatter_add,
advanced indexing (``t[idx]``, ``t[mask]``: aten::index; index_put; ``t[idx] = v``: index_put_), masked_fill, topk, repeat, mm, outer, t, clamp_min, clamp_max, einsum, and COO @ dense.  fuzz_ops.py adds them to
its ROWS (its last lines import this module, once the names used here are defined).

An index or mask is a static parameter written into the source as a literal
(``dj.tensor([[0, 2]])``), as the class-index losses' targets are, so a reproducer prints it.
"""

from __future__ import annotations

import numpy as np

from fuzz_ops import EXACT, OracleError, Row, _order_np, tol_matmul, as_dtype


def _index_for(ch, a, axis, same_shape):
    """A valid index for gather/scatter_add along ``axis`` of ``a``: a's shape (scatter_add, whose
    src is ``a`` itself), or no larger outside ``axis`` (gather)."""
    shape = list(a.shape)
    if not same_shape:
        shape = [ch.int(1, n) if n else 0 for n in shape]
        shape[axis] = ch.int(0, 4) if a.shape[axis] else 0
    n = a.shape[axis]
    # in [0, n): PyTorch's gather and scatter_add refuse a negative index (tests/kernels/indexing)
    vals = [ch.int(0, n - 1) for _ in range(int(np.prod(shape, dtype=np.int64)))] if n else []
    return np.array(vals, np.int64).reshape(shape).tolist()


def _gather_params(same_shape):
    def make(ch, args):
        a = args[0]
        if a.ndim == 0 or a.size == 0 or a.size > 4096:
            return None
        axis = ch.int(-a.ndim, a.ndim - 1)
        return {"axis": axis, "index": _index_for(ch, a, axis % a.ndim, same_shape)}
    return make


def _gather_np(args, p):
    a, i = args[0], np.array(p["index"], np.int64).reshape(np.shape(p["index"]))
    ax = p["axis"] % a.ndim
    return np.take_along_axis(a[tuple(slice(0, n) if d != ax else slice(None) for d, n in enumerate(i.shape))], i, ax)


def _scatter_add_np(args, p):
    a = args[0]
    ax = p["axis"] % a.ndim
    i = np.array(p["index"], np.int64).reshape(a.shape)
    coords = list(np.indices(a.shape))
    coords[ax] = i
    if a.dtype == np.bool_:       # PyTorch's bool scatter_add is an or
        out = a.copy()
        np.logical_or.at(out, tuple(coords), a)
        return out
    acc = np.float32 if a.dtype == np.float16 else a.dtype     # dispatch_jit accumulates float16 in float32
    out = a.astype(acc)
    with np.errstate(all="ignore"):
        np.add.at(out, tuple(coords), a.astype(acc))
    return out.astype(a.dtype)


def _index_select_params(ch, args):
    """An axis and a 1-D index of rows along it, repeats allowed (an embedding's lookup: its
    backward adds the repeats' gradients, a scatter_add)."""
    a = args[0]
    if a.ndim == 0 or a.size == 0 or a.size > 4096:
        return None
    axis = ch.int(-a.ndim, a.ndim - 1)
    n = a.shape[axis % a.ndim]
    return {"axis": axis, "index": [ch.int(0, n - 1) for _ in range(ch.int(1, 5))]}


def _torch_index(fn):
    def run(t, p):
        import torch
        return fn(torch, t[0], p["axis"], torch.tensor(p["index"], dtype=torch.int64).reshape(
            np.shape(p["index"])))
    return run


def _mask_params(ch, args):
    a = args[0]
    if a.size > 4096:
        return None
    mshape = tuple(n if ch.coin(0.7) else 1 for n in a.shape)[ch.int(0, a.ndim):] if a.ndim else ()
    mask = [ch.coin(0.5) for _ in range(int(np.prod(mshape, dtype=np.int64)))]
    kind = a.dtype.kind
    value = ch.coin(0.5) if kind == "b" else ch.int(-3, 3) if kind in "iu" else ch.choice([-1.5, 0.0, 2.25])
    if kind == "u":
        value = abs(value)
    return {"mask": np.array(mask, bool).reshape(mshape).tolist(), "value": value}


def _masked_fill_np(args, p):
    a = args[0]
    return np.where(np.array(p["mask"], bool).reshape(np.shape(p["mask"])), as_dtype(np.array(p["value"]), a.dtype.name),
                    a)


def _topk_params(ch, args):
    a = args[0]
    if a.ndim == 0:
        return None
    axis = ch.int(-a.ndim, a.ndim - 1)
    return {"axis": axis, "k": ch.int(0, a.shape[axis]), "largest": ch.coin(0.5)}


def _topk_np(args, p):
    a, ax = args[0], p["axis"]
    if a.dtype == np.bool_:
        raise OracleError("topk of bool: PyTorch has no kernel")
    srt = _order_np(False)(args, {"axis": ax, "descending": p["largest"]})
    return np.take(srt, np.arange(p["k"]), axis=ax)


def _repeat_params(ch, args):
    a = args[0]
    if a.size > 1024:
        return None
    return {"reps": [ch.int(0, 3) for _ in range(a.ndim + ch.int(0, 2))] or [2]}


def _mat2_np(args, p):
    a, b = args[0], args[1]
    if a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype:
        raise OracleError("mm: 2-D operands of one dtype")
    return _promoted(a, b, lambda x, y: x @ y)


def _sparse_mat_np(args, p):
    from fuzz_ops import _matmul_np
    if args[0].ndim != 2 or args[1].ndim not in (1, 2):
        raise OracleError("sparse matmul: a 2-D sparse matrix by a 1-D or 2-D operand")
    return _matmul_np(args, p)      # dense matmul's rules: promotion, the dtypes it refuses


def _einsum_np(args, p):
    a, b = args[0], args[1]
    if a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype:
        raise OracleError("einsum: matrices of one dtype")
    return _promoted(a, b, lambda x, y: np.einsum("...ij,...jk->...ik", x, y))


def _promoted(a, b, fn):
    from fuzz_ops import result_type
    dt = result_type(a, b)
    if np.dtype(dt).kind not in "fiu" or dt in ("uint16", "uint32", "uint64"):
        raise OracleError(f"matmul of {dt}: no kernel, as fuzz_ops._matmul_np")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise OracleError("batch shapes do not broadcast") from None
    if a.shape[-1] != b.shape[-2]:
        raise OracleError("inner dimensions differ")
    acc = np.float64 if np.dtype(dt).kind == "f" else dt
    with np.errstate(all="ignore"):
        return fn(a.astype(acc), b.astype(acc)).astype(dt)


def _clamp_params(ch, args):
    kind = args[0].dtype.kind
    return {"bound": ch.choice([-1.5, 0.0, 2.5]) if kind == "f" else ch.int(0, 3)} if kind != "b" else None


def _adv_index_params(ch, args):
    """An advanced index of ``a``: int positions (repeats, negatives) into one dim after ``lead`` full
    slices, or a bool mask over its leading dims."""
    a = args[0]
    if a.ndim == 0 or a.size == 0 or a.size > 4096:
        return None
    if ch.coin(0.3):
        k = ch.int(1, a.ndim)
        mask = [ch.coin(0.5) for _ in range(int(np.prod(a.shape[:k], dtype=np.int64)))]
        return {"lead": 0, "index": np.array(mask, bool).reshape(a.shape[:k]).tolist(), "mask": True,
                "accumulate": False}
    lead = ch.int(0, a.ndim - 1)
    n = a.shape[lead]
    if ch.coin(0.5):        # accumulate: repeats add up
        return {"lead": lead, "index": [ch.int(-n, n - 1) for _ in range(ch.int(0, 4))], "mask": False,
                "accumulate": True}
    # a write: distinct positions (which of two writes to one place wins is unspecified, as PyTorch's,
    # and so is the gradient of the lost one)
    pos = sorted({ch.int(0, n - 1) for _ in range(ch.int(0, 4))}, key=lambda _: ch.coin(0.5))
    return {"lead": lead, "index": [q - n if ch.coin(0.3) else q for q in pos], "mask": False, "accumulate": False}


def _adv_src(p) -> str:
    return f"{':, ' * p['lead']}dj.tensor({p['index']}, dtype=dj.{'bool' if p['mask'] else 'int64'})"


def _adv_items(p) -> tuple:
    return (slice(None),) * p["lead"] + (np.array(p["index"], bool if p["mask"] else np.int64),)


def _index_put_np(args, p):
    """``index_put(a, index, a.flatten()[0], accumulate)``: repeated positions add up in order
    (np.add.at, as the CPU kernel), a bool tensor's add is an or."""
    a = args[0]
    out, v, items = a.copy(), a.reshape(-1)[0], _adv_items(p)
    if not p["accumulate"]:
        out[items] = v
    elif a.dtype == np.bool_:
        np.logical_or.at(out, items, v)
    else:
        with np.errstate(all="ignore"):
            np.add.at(out, items, v)
    return out


def _setitem_index_np(args, p):
    """``target[index] = value`` with an advanced index: value cast to the target's dtype and broadcast."""
    target, value = args
    if isinstance(value, (int, float)) and not isinstance(value, bool) and target.dtype.kind in "iu" and not (
            np.iinfo(target.dtype).min <= value <= np.iinfo(target.dtype).max):
        raise OracleError(f"value {value} cannot be converted to {target.dtype} without overflow")
    items = _adv_items(p)
    try:
        v = np.broadcast_to(as_dtype(value, target.dtype), target[items].shape)
    except ValueError:
        raise OracleError("setitem: value does not broadcast") from None
    if not target.flags.writeable:
        raise OracleError("setitem into a read-only view")
    target[items] = v
    return target


ROWS = [
    Row("gather", "reduce", (lambda a, p: f"dj.gather({a[0]}, {p['axis']}, dj.tensor({p['index']}, dtype=dj.int64))",
                             lambda a, p: f"{a[0]}.gather({p['axis']}, dj.tensor({p['index']}, dtype=dj.int64))"),
        "bif", _gather_np, _torch_index(lambda torch, t, d, i: torch.gather(t, d, i)), EXACT,
        _gather_params(False), True),
    Row("index_select", "reduce", (lambda a, p: f"dj.index_select({a[0]}, {p['axis']}, "
                                                f"dj.tensor({p['index']}, dtype=dj.int64))",
                                   lambda a, p: f"{a[0]}.index_select({p['axis']}, dj.tensor({p['index']}, "
                                                f"dtype=dj.int64))"),
        "bif", lambda args, p: np.take(args[0], np.array(p["index"], np.int64), p["axis"]),
        _torch_index(lambda torch, t, d, i: torch.index_select(t, d, i)), EXACT, _index_select_params, True),
    Row("scatter_add", "reduce", (lambda a, p: f"dj.scatter_add({a[0]}, {p['axis']}, "
                                               f"dj.tensor({p['index']}, dtype=dj.int64), {a[0]})",),
        "bif", _scatter_add_np, _torch_index(lambda torch, t, d, i: torch.scatter_add(t, d, i, t)),
        lambda args, p, want: None if want.dtype.kind != "f" else (4 * float(np.finfo(want.dtype).eps), 0.0),
        _gather_params(True), True),
    Row("index", "reduce", (lambda a, p: f"{a[0]}[{_adv_src(p)}]",
                            lambda a, p: f"dj.ops.aten.index.Tensor({a[0]}, [{'None, ' * p['lead']}"
                                         f"dj.tensor({p['index']}, dtype=dj.{'bool' if p['mask'] else 'int64'})])"),
        "bif", lambda args, p: args[0][_adv_items(p)],
        lambda t, p: t[0][(slice(None),) * p["lead"] + (__import__("torch").tensor(
            np.array(p["index"], bool if p["mask"] else np.int64)),)], EXACT, _adv_index_params, True),
    Row("index_put", "reduce", (lambda a, p: f"dj.index_put({a[0]}, ({'None, ' * p['lead']}dj.tensor({p['index']}, "
                                             f"dtype=dj.{'bool' if p['mask'] else 'int64'}),), "
                                             f"{a[0]}.flatten()[0], accumulate={p['accumulate']})",
                                lambda a, p: f"{a[0]}.index_put(({'None, ' * p['lead']}dj.tensor({p['index']}, "
                                             f"dtype=dj.{'bool' if p['mask'] else 'int64'}),), "
                                             f"{a[0]}.flatten()[0], {p['accumulate']})"),
        "bif", _index_put_np, None, EXACT, _adv_index_params, True),
    Row("masked_fill", "reduce", (lambda a, p: f"{a[0]}.masked_fill(dj.tensor({p['mask']}, dtype=dj.bool), "
                                               f"{p['value']!r})",
                                  lambda a, p: f"dj.masked_fill({a[0]}, dj.tensor({p['mask']}, dtype=dj.bool), "
                                               f"{p['value']!r})"),
        "bif", _masked_fill_np, None, EXACT, _mask_params, True),
    Row("topk", "reduce", (lambda a, p: f"dj.topk({a[0]}, {p['k']}, {p['axis']}, largest={p['largest']}).values",
                           lambda a, p: f"{a[0]}.topk({p['k']}, dim={p['axis']}, largest={p['largest']})[0]"),
        "if", _topk_np, lambda t, p: t[0].topk(p["k"], p["axis"], largest=p["largest"]).values, EXACT,
        _topk_params, True),
    Row("repeat", "reduce", (lambda a, p: f"{a[0]}.repeat({', '.join(map(str, p['reps']))})",
                             lambda a, p: f"dj.repeat({a[0]}, {p['reps']})"),
        "bif", lambda args, p: np.tile(args[0], p["reps"]), lambda t, p: t[0].repeat(*p["reps"]), EXACT,
        _repeat_params, True),
    Row("t", "view", (lambda a, p: f"{a[0]}.t()", lambda a, p: f"dj.t({a[0]})"), "bif",
        lambda args, p: args[0].T if args[0].ndim <= 2 else (_ for _ in ()).throw(OracleError("t: ndim > 2")),
        None, EXACT, None, True, (), True),
    Row("clamp_min", "reduce", (lambda a, p: f"{a[0]}.clamp_min({p['bound']})",
                                lambda a, p: f"dj.clamp_min({a[0]}, {p['bound']})"), "if",
        lambda args, p: _clamp_np(args[0], p["bound"], np.maximum), None, EXACT, _clamp_params, True),
    Row("clamp_max", "reduce", (lambda a, p: f"{a[0]}.clamp_max({p['bound']})",), "if",
        lambda args, p: _clamp_np(args[0], p["bound"], np.minimum), None, EXACT, _clamp_params, True),
    Row("mm", "matmul", (lambda a, p: f"dj.mm({a[0]}, {a[1]})", lambda a, p: f"{a[0]}.mm({a[1]})"), "if", _mat2_np,
        lambda t, p: __import__("torch").mm(t[0], t[1]), tol_matmul, None, True, arity=2),
    Row("einsum", "matmul", (lambda a, p: f"dj.einsum('...ij,...jk->...ik', {a[0]}, {a[1]})",), "if", _einsum_np,
        lambda t, p: __import__("torch").einsum("...ij,...jk->...ik", t[0], t[1]), tol_matmul, None, True, arity=2),
    # the sparse COO product (SparseCPU), matmul's semantics: a converted operand, so no gradient
    # row; torch's sparse product has no kernel for some integer dtypes, nor for mixed dtypes
    Row("sparse_matmul", "matmul", (lambda a, p: f"{a[0]}.to_sparse() @ {a[1]}",
                                    lambda a, p: f"dj.matmul({a[0]}.to_sparse(), {a[1]})"), "if", _sparse_mat_np,
        lambda t, p: t[0].to_sparse() @ t[1], tol_matmul, None, False, arity=2,
        torch_skip=lambda args, p: args[0].dtype.kind != "f" or args[0].dtype != args[1].dtype),
]


def _clamp_np(a, bound, fn):
    from fuzz_ops import result_type
    dt = result_type(a, bound)
    with np.errstate(all="ignore"):
        return fn(a.astype(dt), np.array(bound).astype(dt))

# t[index] = value with an advanced index: the in-place op index_put_ (a statement mutating operand 0)
ROWS.append(Row("setitem_index", "setitem", (lambda a, p: f"{a[0]}[{_adv_src(p)}] = {a[1]}",), "bif",
                _setitem_index_np, None, EXACT, _adv_index_params, False, arity=2, statement=True))
