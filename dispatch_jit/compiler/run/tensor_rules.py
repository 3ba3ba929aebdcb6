"""Plan-function rules (call_rules.py's table) for the tensor ops a transformer's step runs between
its fused loops: ``matmul`` of batches of matrices, ``softmax`` and its backward, ``index_select``
(an embedding's read) and ``scatter_add`` (its backward), ``cat`` and ``stack``.

Each rule writes what the op's eager CPU kernel does, in the same order, so that the bits are
eager mode's:

* ``matmul``: kernels/linalg/cpu.py's ``_matmul``: its plan (``_make_plan``: BLAS, or the i-k-j
  loop nest for small or skinny products) for the recorded shapes, each operand as the
  ``(batch, rows, cols)`` array ``_as_3d`` makes (a transposed operand handed to gemm with its
  flag, not copied; a strided one copied to C order), and one gemm (or ``ikj_rows``) per matrix
  of the batch; the loop nest's rows do not depend on how eager splits them among threads;
* ``softmax``, ``log_softmax`` and their backwards: kernels/nn/cpu.py's row kernels on the C-contiguous
  ``(rows, classes)`` arrays kernels/nn/op.py's ``to_rows`` makes (the last dimension only);
* ``scatter_add``: the input copied, then kernels/indexing/cpu.py's loop, which adds in the
  index's C order;
* ``index_select``, ``cat``, ``stack``: copies, which any order gives the same bits; ``index``
  (one 1-D index per dimension, ``logp[arange(N), y]``) too, and ``index_put`` with accumulate as
  ``np.add.at``: in index order;
* ``_layer_norm`` / ``_layer_norm_backward``: kernels/nn/norm.py's row loops on the
  ``(rows, normalized)`` arrays its kernels make, the weight and bias gradients summed in
  float64 and rounded once, as there.

An operand that the plan function made as a view (``site.views``) is a Numba array of any
layout: it is copied to C order (``np.ascontiguousarray``) where the kernel wants C order, as
eager's kernels copy it.  An index out of range returns the node's position (the call runs
interpreted, and eager mode's own error is raised there).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from dispatch_jit.kernels.indexing import cpu as _indexing
from dispatch_jit.kernels.linalg import cpu as _linalg, strided as _strided
from dispatch_jit.kernels.linalg.gemm import gemm
from dispatch_jit.kernels.linalg.product import ikj_rows
from dispatch_jit.kernels.nn import cpu as _nn
from dispatch_jit.kernels.nn import norm as _norm

__all__ = ["RULES", "HELPERS", "c_typed", "c_order"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))


@numba.njit(boundscheck=False)
def batched_gemm(a3, ta, b3, tb, o3, step_a, step_b):
    """kernels/linalg/cpu.py's ``_blas`` with batch index ``t * step`` (0: one matrix for the batch)."""
    for t in range(o3.shape[0]):
        gemm(a3[t * step_a], ta, b3[t * step_b], tb, o3[t])


@numba.njit(boundscheck=False)
def batched_ikj(a3, b3, o3, step_a, step_b):
    """kernels/linalg/cpu.py's serial ``ikj`` kernel (each row's bits whatever the split)."""
    for t in range(o3.shape[0]):
        ikj_rows(a3[t * step_a], b3[t * step_b], o3[t], 0, o3.shape[1])


@numba.njit(boundscheck=False)
def take_along(x3, idx, o3):
    """``o3[:, i] = x3[:, idx[i]]``; the position of the first index outside [0, n) (eager's
    index_select refuses negative ones too), else -1."""
    n = x3.shape[1]
    for i in range(idx.shape[0]):
        j = idx[i]
        if j < 0 or j >= n:
            return i
        o3[:, i, :] = x3[:, j, :]
    return -1


@numba.njit(boundscheck=False)
def round_into(src, dst):
    """``dst[:] = src`` elementwise with C's conversion (NumPy's ``astype``: round to nearest)."""
    for i in range(dst.shape[0]):
        dst[i] = src[i]


@numba.njit(boundscheck=False)
def _point(shape, idx, i):
    """The flat C offset of point ``i`` of ``idx`` (one index array per dimension, negative
    indices from the end, as NumPy's), or -1 where an index is out of range."""
    off = 0
    for d in range(len(idx)):
        j, n = idx[d][i], shape[d]
        if j < 0:
            j += n
        if j < 0 or j >= n:
            return -1
        off = off * n + j
    return off


@numba.njit(boundscheck=False)
def take_points(xf, shape, idx, out):
    """``out[i] = x[idx[0][i], idx[1][i], ...]`` (NumPy's fancy indexing with one index per
    dimension); the position of the first index out of range, else -1."""
    for i in range(out.shape[0]):
        off = _point(shape, idx, i)
        if off < 0:
            return i
        out[i] = xf[off]
    return -1


@numba.njit(boundscheck=False)
def add_points(af, shape, idx, v):
    """``np.add.at(a, idx, v)``: ``v[i]`` added at each point in index order (repeats add up); the
    position of the first index out of range (what was added before it is discarded: the
    caller's array is a fresh copy, and the call runs interpreted), else -1."""
    for i in range(v.shape[0]):
        off = _point(shape, idx, i)
        if off < 0:
            return i
        af[off] += v[i]
    return -1


HELPERS = {"_round_into": round_into, "_take_points": take_points, "_add_points": add_points, "_ln_forward": _norm._forward, "_ln_backward": _norm._backward,
           "_batched_gemm": batched_gemm, "_batched_gemm_view": _strided.batched_gemm_view, "_batched_ikj": batched_ikj, "_take_along": take_along,
           "_softmax": _nn.softmax, "_softmax_backward": _nn.softmax_backward,
           "_log_softmax": _nn.log_softmax, "_log_softmax_backward": _nn.log_softmax_backward,
           "_scatter_add": _indexing._LOOPS["scatter_add"]}


def _made_view(site, v) -> bool:
    return v.id in (site.views or {})


def c_typed(site, v) -> bool:
    """Whether value ``v`` is a C-layout array in the function: not a view made inside it, and
    C-contiguous when recorded (the function's parameters are typed from the recorded arrays:
    compiled mode's inputs may be broadcast or strided)."""
    return not _made_view(site, v) and site.array(v).flags.c_contiguous


def c_order(site, v) -> str:
    """The source of value ``v`` as a C-layout Numba array (copied where it is not one)."""
    return site.name(v) if c_typed(site, v) else f"np.ascontiguousarray({site.name(v)})"


def _contiguous_as(site, v, shape) -> str:
    """``v``'s memory, C-contiguous in the recorded run (as ``shape``, or its transpose's), as an
    array of ``shape`` without a copy: a reshape, or for a view made inside, ``as_strided`` of the
    contiguous value it views from the view's first element."""
    a = site.array(v)
    strides = tuple(int(np.prod(shape[k + 1:])) * a.itemsize for k in range(len(shape)))
    if c_typed(site, v):
        return f"{site.name(v)}.reshape({tuple(shape)})"
    if not _made_view(site, v):
        return f"np.ascontiguousarray({site.name(v)}).reshape({tuple(shape)})"
    root = site.views[v.id]
    r = site.array_of(root)
    lo = a.__array_interface__["data"][0] + sum(min(0, (n - 1) * st) for n, st in zip(a.shape, a.strides))
    off = (lo - r.__array_interface__["data"][0]) // a.itemsize
    return f"_as_strided({site.names[root]}.reshape(-1)[{off}:], {tuple(shape)}, {strides})"


def _as_3d(site, v, nb, r, c, trans_ok):
    """(source, transposed) of kernels/linalg/cpu.py's ``_as_3d`` of ``v``."""
    x = site.array(v)
    if x.flags.c_contiguous:
        return _contiguous_as(site, v, (nb, r, c)), False
    if trans_ok and x.ndim >= 2 and x.swapaxes(-1, -2).flags.c_contiguous and _made_view(site, v):
        return _contiguous_as(site, v, (nb, c, r)), True
    return f"np.ascontiguousarray({site.name(v)}).reshape({(nb, r, c)})", False


def _view_4d(site, v) -> str:
    nd = site.array(v).ndim
    return site.name(v) + (f"[{', '.join(['None'] * (4 - nd))}]" if nd < 4 else "")


def _step(index, nbatch) -> int | None:
    """1 where a batch index map is the identity, 0 where it is all zeros, else None."""
    if np.array_equal(index, np.arange(nbatch)):
        return 1
    return 0 if not np.any(index) else None


def _matmul(node, site):
    a, b = node.args[:2]
    xa, xb = site.array(a), site.array(b)
    if xa.dtype not in _FLOATS or xb.dtype != xa.dtype:
        return f"matmul of {xa.dtype} and {xb.dtype} (only float32 or float64, one dtype)"
    if xa.ndim < 2 or xb.ndim < 2 or xa.size == 0 or xb.size == 0:
        return f"matmul of shapes {xa.shape} and {xb.shape} (only non-empty operands of 2 or more dimensions)"
    shape, m, k, n, nbatch, na, nb, ia, ib, kernel, _ = _linalg._make_plan("blas", xa.shape, xb.shape)
    sa, sb = _step(ia, nbatch), _step(ib, nbatch)
    if sa is None or sb is None:
        return f"matmul of batch shapes {xa.shape[:-2]} and {xb.shape[:-2]} (broadcast other than from one matrix)"
    out = f"{site.names[node.outs[0]]}.reshape({(nbatch, m, n)})"
    if kernel == "blas":
        a3, ta = _as_3d(site, a, na, m, k, True)
        b3, tb = _as_3d(site, b, nb, k, n, True)
        copies = a3.startswith("np.ascontiguousarray") or b3.startswith("np.ascontiguousarray")
        if copies and _strided.eligible(xa) and _strided.eligible(xb):
            # eager's choice (cpu.py): the strided views go to gemm as they are (strided.py)
            ia, ib = (f"np.arange({nbatch})" if s else f"np.zeros({nbatch}, np.intp)" for s in (sa, sb))
            return [f"_batched_gemm_view({_view_4d(site, a)}, {_view_4d(site, b)}, {out}, {ia}, {ib})"]
        return [f"_batched_gemm({a3}, {ta}, {b3}, {tb}, {out}, {sa}, {sb})"]
    a3, _ = _as_3d(site, a, na, m, k, False)
    b3, _ = _as_3d(site, b, nb, k, n, False)
    return [f"_batched_ikj({a3}, {b3}, {out}, {sa}, {sb})"]


def _last_axis(who, x, dim) -> str:
    if x.dtype not in _FLOATS or x.ndim == 0 or x.size == 0:
        return f"{who} of {x.dtype}, shape {x.shape} (only non-empty float32/64 tensors)"
    if dim % x.ndim != x.ndim - 1:
        return f"{who} along dimension {dim} of {x.ndim} (only the last)"
    return ""


def _rows(site, v, x) -> str:
    return f"{c_order(site, v)}.reshape(({x.size // x.shape[-1]}, {x.shape[-1]}))"


def _softmax_rule(who, helper):
    def rule(node, site):
        a = _bound(node, ("self", "axis"), {"axis": -1, "dtype": None})
        if a["dtype"] is not None or len(node.args) > 2:
            return f"{who} with a dtype"
        x = a["self"]
        xa = site.array(x)
        why = _last_axis(who, xa, a["axis"])
        if why:
            return why
        rows = (xa.size // xa.shape[-1], xa.shape[-1])
        return [f"{helper}({_rows(site, x, xa)}, {site.names[node.outs[0]]}.reshape({rows}))"]
    return rule


def _softmax_backward_rule(who, helper):
    def rule(node, site):
        g, y, dim = node.args[:3]
        ga, ya = site.array(g), site.array(y)
        why = _last_axis(who, ya, dim)
        if why:
            return why
        if ga.shape != ya.shape or ga.dtype != ya.dtype or len(node.args) > 3:
            return f"{who} of a gradient of another shape or dtype than the output's"
        rows = (ya.size // ya.shape[-1], ya.shape[-1])
        return [f"{helper}({_rows(site, g, ga)}, {_rows(site, y, ya)}, {site.names[node.outs[0]]}.reshape({rows}))"]
    return rule


def _index_select(node, site):
    x, dim, index = node.args[:3]
    xa, ia = site.array(x), site.array(index)
    if xa.ndim == 0 or ia.ndim != 1 or ia.dtype not in _INDEX_DTYPES or xa.size == 0:
        return f"index_select of shape {xa.shape} by a {ia.dtype} index of shape {ia.shape}"
    axis = dim % xa.ndim
    outer, inner = math.prod(xa.shape[:axis]), math.prod(xa.shape[axis + 1:])
    x3 = f"{c_order(site, x)}.reshape({(outer, xa.shape[axis], inner)})"
    o3 = f"{site.names[node.outs[0]]}.reshape({(outer, ia.shape[0], inner)})"
    bad = f"bad_{node.outs[0]}"
    return [f"{bad} = _take_along({x3}, {c_order(site, index)}, {o3})", f"if {bad} >= 0:", f"    {site.fail}"]


def _scatter_add(node, site):
    x, dim, index, src = node.args[:4]
    xa, ia, sa = site.array(x), site.array(index), site.array(src)
    if xa.ndim == 0 or xa.dtype not in _FLOATS + (np.dtype(np.int64),) or sa.dtype != xa.dtype \
            or ia.dtype != np.int64 or ia.ndim != xa.ndim or sa.ndim != xa.ndim or ia.size == 0:
        return f"scatter_add into {xa.dtype} {xa.shape} of {sa.dtype} by a {ia.dtype} index of shape {ia.shape}"
    out = site.names[node.outs[0]]
    axis = dim % xa.ndim

    def cstrides(shape):
        return tuple(int(np.prod(shape[k + 1:])) for k in range(len(shape)))
    bad = f"bad_{node.outs[0]}"
    return [f"{out}[...] = {site.name(x)}",
            f"{bad} = _scatter_add({out}.reshape(-1), np.array({cstrides(xa.shape)}, np.int64), "
            f"{c_order(site, index)}.reshape(-1), np.array({ia.shape}, np.int64), {axis}, {xa.shape[axis]}, "
            f"{c_order(site, src)}.reshape(-1), np.array({cstrides(sa.shape)}, np.int64))",
            f"if {bad} >= 0:", f"    {site.fail}"]


def _pieces(node, site, who):
    xs = node.args[0]
    out = site.array_of(node.outs[0])
    if not isinstance(xs, (list, tuple)) or any(site.array(x).dtype != out.dtype for x in xs):
        return f"{who} of tensors of other dtypes than its result's"
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    return xs, out, dim % out.ndim


def _cat(node, site):
    got = _pieces(node, site, "cat")
    if isinstance(got, str):
        return got
    xs, out, axis = got
    if any(site.array(x).ndim != out.ndim for x in xs):
        return "cat of tensors with fewer dimensions than its result (the legacy empty 1-D form)"
    lines, at, name = [], 0, site.names[node.outs[0]]
    for x in xs:
        n = site.array(x).shape[axis]
        if n:
            lines.append(f"{name}[{':, ' * axis}{at}:{at + n}] = {site.name(x)}")
        at += n
    return lines


def _stack(node, site):
    got = _pieces(node, site, "stack")
    if isinstance(got, str):
        return got
    xs, out, axis = got
    name = site.names[node.outs[0]]
    return [f"{name}[{':, ' * axis}{k}] = {site.name(x)}" + ("[()]" if site.array(x).ndim == 0 else "")
            for k, x in enumerate(xs)]


def _bound(node, names, defaults) -> dict:
    got = dict(defaults)
    got.update(zip(names, node.args))
    got.update(node.kwargs)
    return got


def _norm_operands(site, x, ndims, params, who):
    """Why eager's layer-norm loops would not take these operands ("" where they would):
    kernels/nn/norm.py's ``_loops`` case."""
    xa = site.array(x)
    if xa.dtype not in _FLOATS or xa.size == 0 or not 0 < ndims <= xa.ndim:
        return f"{who} of {xa.dtype}, shape {xa.shape} (only non-empty float32/64 tensors)"
    pshape = xa.shape[xa.ndim - ndims:]
    if any(p is not None and (site.array(p).dtype != xa.dtype or site.array(p).shape != pshape) for p in params):
        return f"{who} with a weight or bias of another dtype or shape than the normalized {pshape}"
    return ""


def _param(site, p, dt) -> str:
    return site.scratch((0,), dt) if p is None else f"{c_order(site, p)}.reshape(-1)"


def _layer_norm(node, site):
    a = _bound(node, ("input", "ndims", "weight", "bias", "eps"), {"weight": None, "bias": None, "eps": 1e-5})
    x, ndims, w, b = a["input"], int(a["ndims"]), a["weight"], a["bias"]
    why = _norm_operands(site, x, ndims, (w, b), "_layer_norm")
    if why:
        return why
    xa = site.array(x)
    n = math.prod(xa.shape[xa.ndim - ndims:])
    rows = (xa.size // n, n)
    return [f"_ln_forward({c_order(site, x)}.reshape({rows}), {_param(site, w, xa.dtype)}, "
            f"{_param(site, b, xa.dtype)}, {float(a['eps'])!r}, {site.names[node.outs[0]]}.reshape({rows}))"]


def _layer_norm_backward(node, site):
    a = _bound(node, ("grad_out", "input", "ndims", "weight", "eps", "output_mask"), {})
    g, x, ndims, w, mask = a["grad_out"], a["input"], int(a["ndims"]), a["weight"], tuple(a["output_mask"])
    why = _norm_operands(site, x, ndims, (w,), "_layer_norm_backward")
    if why:
        return why
    xa, ga = site.array(x), site.array(g)
    if ga.dtype != xa.dtype or ga.shape != xa.shape:
        return "_layer_norm_backward of a gradient of another shape or dtype than the input's"
    n = math.prod(xa.shape[xa.ndim - ndims:])
    rows = (xa.size // n, n)
    gi, gw, gb = (site.names[v] for v in node.outs)
    gw64, gb64 = site.scratch((n,), np.float64), site.scratch((n,), np.float64)
    lines = [f"{gw64}[:] = 0.0", f"{gb64}[:] = 0.0",
             f"_ln_backward({c_order(site, g)}.reshape({rows}), {c_order(site, x)}.reshape({rows}), "
             f"{_param(site, w, xa.dtype)}, {float(a['eps'])!r}, {bool(mask[0])}, "
             f"{gi + '.reshape(' + str(rows) + ')' if mask[0] else site.scratch((0, 0), xa.dtype)}, {gw64}, {gb64})"]
    if mask[1]:
        lines.append(f"_round_into({gw64}, {gw}.reshape(-1))")
    if mask[2]:
        lines.append(f"_round_into({gb64}, {gb}.reshape(-1))")
    return lines


def _points(site, x, indices, who):
    """(index arrays' source tuple, x's shape) where every index is a 1-D int64 tensor of one length
    and there is one per dimension of ``x`` (``logp[arange(N), y]``), else why not."""
    xa = site.array(x)
    idx = list(indices)
    if xa.dtype not in _FLOATS + (np.dtype(np.int64),) or any(i is None for i in idx) or len(idx) != xa.ndim:
        return f"{who} of a {xa.dtype} tensor of {xa.ndim} dimension(s) by {len(idx)} index(es) (only float32/64 or " \
               f"int64, one index tensor per dimension)"
    arrs = [site.array(i) for i in idx]
    if any(a.dtype != np.int64 or a.ndim != 1 or a.shape != arrs[0].shape for a in arrs):
        return f"{who} by index tensors other than 1-D int64 ones of one length"
    return "(" + "".join(f"{c_order(site, i)}, " for i in idx) + ")", xa.shape


def _index(node, site):
    a = _bound(node, ("self", "indices"), {})
    got = _points(site, a["self"], a["indices"], "index")
    if isinstance(got, str):
        return got
    tup, shape = got
    bad = f"bad_{node.outs[0]}"
    return [f"{bad} = _take_points({c_order(site, a['self'])}.reshape(-1), np.array({shape}, np.int64), {tup}, "
            f"{site.names[node.outs[0]]})", f"if {bad} >= 0:", f"    {site.fail}"]


def _index_put(node, site):
    a = _bound(node, ("self", "indices", "values", "accumulate"), {"accumulate": False})
    if not a["accumulate"]:
        return "index_put without accumulate"
    got = _points(site, a["self"], a["indices"], "index_put")
    if isinstance(got, str):
        return got
    tup, shape = got
    xa, va = site.array(a["self"]), site.array(a["values"])
    if va.dtype != xa.dtype or va.shape != site.array(a["indices"][0]).shape:
        return "index_put of values of another dtype, or not one per index"
    out, bad = site.names[node.outs[0]], f"bad_{node.outs[0]}"
    return [f"{out}[...] = {site.name(a['self'])}",
            f"{bad} = _add_points({out}.reshape(-1), np.array({shape}, np.int64), {tup}, {c_order(site, a['values'])})",
            f"if {bad} >= 0:", f"    {site.fail}"]


RULES = {
    "aten::index.Tensor": _index,
    "aten::index_put": _index_put,
    "aten::_layer_norm": _layer_norm,
    "aten::_layer_norm_backward": _layer_norm_backward,
    "aten::matmul": _matmul,
    "aten::softmax": _softmax_rule("softmax", "_softmax"),
    "aten::_softmax_backward_data": _softmax_backward_rule("_softmax_backward_data", "_softmax_backward"),
    "aten::log_softmax": _softmax_rule("log_softmax", "_log_softmax"),
    "aten::_log_softmax_backward_data": _softmax_backward_rule("_log_softmax_backward_data", "_log_softmax_backward"),
    "aten::index_select": _index_select,
    "aten::scatter_add": _scatter_add,
    "aten::cat": _cat,
    "aten::stack": _stack,
}
