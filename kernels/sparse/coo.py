"""Sparse COO kernels, registered at ``SparseCPU`` (PyTorch's key for the COO layout).

SparseCPU outranks CPU, so any call with a COO argument lands here:

- ``aten::to_dense``: scatter-add of the entries (duplicates of an
  uncoalesced tensor add up);
- ``aten::add.Tensor``: COO + COO -> COO (coalesced), dense + COO -> dense;
  COO + dense raises as PyTorch's does;
- ``aten::mul.Tensor``: COO * scalar (or 0-d), COO * COO (the positions in
  both), COO * dense broadcast to the COO's shape -> COO;
- ``aten::sum``: everything -> dense 0-d; some dims -> COO over the rest
  (``torch.sparse.sum``'s result);
- ``aten::matmul``: COO @ dense and dense @ COO -> dense;
- ``aten::t``.

The product runs the CSR row loops of cpu.py (Numba, parallel over rows above
``cpu.PARALLEL_WORK``) on row pointers built from the COO rows: a coalesced
tensor's rows are already sorted, an uncoalesced one is sorted by a stable
argsort once (duplicates then add up in the product, as they stand for a sum).
``aten::sparse_coo_mm(indices, values, dense, rows, cols)``, defined here, is
the differentiable form the AutogradCPU router (cpu.MatmulAutogradRouter)
sends COO products to: its derivative gives the dense operand A^T @ g and
each value the dot of g's row with the dense operand's row, as
``torch.sparse.mm``'s.
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.autograd.kernel import Derivative
from dispatch_jit.broadcast import broadcast_shapes
from dispatch_jit.dtypes import as_dtype, result_type
from dispatch_jit.errors import DTypeError, SchemaError, ShapeError
from dispatch_jit.registry import lookup
from dispatch_jit.sparse_coo import SPARSE_COO_BITS, coalesce_arrays, make_coo
from dispatch_jit.tensor import Tensor, wrap

from . import cpu
from .op import check_float_or_int, record

__all__ = ["SCHEMAS", "KERNELS", "SPARSE_COO_MM_DERIVATIVE", "coo_matmul_arrays"]

_NO_MATMUL = ("uint16", "uint32", "uint64")    # dense matmul has no kernel for them (nor has PyTorch)

SCHEMAS = ["sparse_coo_mm(Tensor indices, Tensor values, Tensor dense, int rows, int cols) -> Tensor"]


def _as(a: np.ndarray, npdt) -> np.ndarray:
    return a if a.dtype == npdt else a.astype(npdt)


def _what(m) -> str:
    if m.kind != "tensor":
        return m.kind
    return "COO" if m.keyset & SPARSE_COO_BITS else "dense"


def _no_out(opname: str, out) -> None:
    if out is not None:
        raise SchemaError(f"{opname}: out= is not supported for sparse COO tensors")


def _linear(idx: np.ndarray, shape: tuple) -> np.ndarray:
    if idx.shape[0] == 0:
        return np.zeros(idx.shape[1], dtype=np.int64)
    return np.ravel_multi_index(tuple(idx), shape).astype(np.int64, copy=False)


# -- the product -------------------------------------------------------------------------------------------
def _rows(idx: np.ndarray, rows: int):
    """Row pointers, columns and the sorting permutation (None when the rows are already sorted)."""
    r = idx[0]
    perm = np.argsort(r, kind="stable") if r.size > 1 and np.any(r[1:] < r[:-1]) else None
    rr, cc = (r, idx[1]) if perm is None else (r[perm], idx[1][perm])
    crow = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rr, minlength=rows), out=crow[1:])
    return crow, np.ascontiguousarray(cc), perm


def _check_operand(rows: int, cols: int, shape: tuple) -> None:
    if len(shape) not in (1, 2) or shape[0] != cols:
        raise ShapeError(f"matmul: a sparse COO matrix of shape ({rows}, {cols}) cannot multiply a tensor of "
                         f"shape {tuple(shape)}; expected ({cols},) or ({cols}, n)")


def coo_matmul_arrays(idx: np.ndarray, val: np.ndarray, b: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """COO(idx, val) of shape (rows, cols) @ b (1-D or 2-D), in val's dtype."""
    _check_operand(rows, cols, b.shape)
    crow, col, perm = _rows(idx, rows)
    v = val if perm is None else val[perm]
    if val.dtype == np.float16:      # Numba has no float16 arithmetic: float32 sums, rounded once
        return cpu.csr_matmul_arrays(crow, col, np.ascontiguousarray(v, np.float32), b.astype(np.float32),
                                     cols).astype(np.float16)
    return cpu.csr_matmul_arrays(crow, col, np.ascontiguousarray(v), b, cols)


def _sparse_coo_mm_cpu(indices, values, dense, rows, cols):
    npdt = result_type(values.dtype, dense.dtype).np
    return wrap(coo_matmul_arrays(indices._data, _as(values._data, npdt), _as(dense._data, npdt), rows, cols))


def _sparse_coo_mm_grads(g, s, c):
    idx, vals, dense = s["indices"]._data, s["values"], s["dense"]
    ga = g._data
    half = ga.dtype == np.float16      # float32 sums, rounded once (as the forward)
    npdt = np.dtype(np.float32) if half else ga.dtype
    ga = _as(ga, npdt)
    rows = ga.shape[0]
    crow, col, perm = _rows(idx, rows)
    v = _as(vals._data, npdt)
    v = np.ascontiguousarray(v if perm is None else v[perm])
    d = _as(dense._data, npdt)
    g2 = ga.reshape(-1, 1) if ga.ndim == 1 else np.ascontiguousarray(ga)
    d2 = d.reshape(-1, 1) if d.ndim == 1 else np.ascontiguousarray(d)
    gdense = np.zeros(d2.shape, dtype=npdt)
    cpu._mm_t(crow, col, v, g2, gdense)
    gsorted = np.zeros(col.shape[0], dtype=npdt)
    if col.shape[0] and g2.shape[1]:
        cpu._sddmm(crow, col, g2, d2, gsorted)
    if perm is None:
        gvals = gsorted
    else:
        gvals = np.empty_like(gsorted)
        gvals[perm] = gsorted
    if half:
        gvals, gdense = gvals.astype(np.float16), gdense.astype(np.float16)
    return None, wrap(gvals), wrap(gdense.reshape(d.shape))


SPARSE_COO_MM_DERIVATIVE = Derivative("SparseCooMmBackward", _sparse_coo_mm_grads, ("indices", "values", "dense"),
                                      unbroadcast=False)


def coo_mm(x, y, mm):
    """``x @ y`` with one COO operand, through ``mm(indices, values, dense, rows, cols)`` (the op or
    its CPU function); dense @ COO is (COO^T @ dense^T)^T."""
    if isinstance(y, Tensor) and y.layout == "sparse_coo":
        if isinstance(x, Tensor) and x.layout == "sparse_coo":
            raise SchemaError("matmul: COO @ COO is not implemented; convert one operand with .to_dense()")
        if y.ndim != 2:
            raise ShapeError(f"matmul: expected a 2-D sparse COO matrix, got shape {y.shape}")
        at = y.t()
        if x.ndim == 1:
            return mm(wrap(at._idx), at._values_t, x, at._shape[0], at._shape[1])
        if x.ndim != 2:
            raise ShapeError(f"matmul: a tensor of shape {x.shape} cannot multiply a sparse COO matrix of shape "
                             f"{y.shape}; expected ({y.shape[0]},) or (n, {y.shape[0]})")
        return mm(wrap(at._idx), at._values_t, x.t(), at._shape[0], at._shape[1]).t()
    if not isinstance(y, Tensor):
        raise SchemaError(f"matmul: cannot multiply a sparse COO matrix by {type(y).__name__}")
    if x.ndim != 2:
        raise ShapeError(f"matmul: expected a 2-D sparse COO matrix, got shape {x.shape}")
    return mm(wrap(x._idx), x._values_t, y, x._shape[0], x._shape[1])


# -- ops at SparseCPU ----------------------------------------------------------------------------------------
class _CooOp:
    op = ""

    def __init__(self):
        self.__name__ = f"sparse_coo_{self.op}_cpu"


class CooMatmul(_CooOp):
    """aten::matmul: COO @ dense, dense @ COO -> dense."""

    op = "matmul"

    def specialize(self, call):
        a, b = call.metas[0], call.metas[1]
        if a.kind != "tensor" or b.kind != "tensor":
            raise SchemaError(f"matmul with sparse COO tensors supports COO @ dense and dense @ COO (got "
                              f"{_what(a)} @ {_what(b)})")
        dt = result_type(a.dtype, b.dtype)
        check_float_or_int(dt, "matmul")
        if dt.name in _NO_MATMUL:
            raise DTypeError(f"matmul: dtype {dt.name} is not supported (as for dense tensors); cast the "
                             f"operands to a signed integer or floating dtype")
        record(call, self.__name__, dt)
        npdt = dt.np

        def mm(indices, values, dense, rows, cols):
            return wrap(coo_matmul_arrays(indices._data, _as(values._data, npdt), _as(dense._data, npdt), rows,
                                          cols))

        def run(x, y):
            if x.layout != "sparse_coo" and y.layout != "sparse_coo":
                raise SchemaError("matmul: a sparse COO operand was expected")
            return coo_mm(x, y, mm)
        return run


class CooAdd(_CooOp):
    """aten::add.Tensor: COO + COO -> COO (coalesced); dense + COO -> dense."""

    op = "add"

    def specialize(self, call):
        a, b = call.metas[0], call.metas[1]
        if not (a.kind == "tensor" and b.kind == "tensor"):
            raise SchemaError(f"add with sparse COO tensors supports COO + COO and dense + COO (got {_what(a)} + "
                              f"{_what(b)})")
        if not b.keyset & SPARSE_COO_BITS:
            raise SchemaError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
        dt = result_type(a.dtype, b.dtype)
        record(call, self.__name__, dt)
        npdt, both = dt.np, bool(a.keyset & SPARSE_COO_BITS)

        def run(x, y, alpha=1, out=None):
            _no_out("add", out)
            if tuple(x.shape) != y._shape:
                raise ShapeError(f"add: expected 'self' and 'other' to have same size, but self has size "
                                 f"{list(x.shape)} while other has size {list(y._shape)} (FYI: dense-sparse "
                                 f"addition does not currently support broadcasting)")
            yv = _as(y._data, npdt) * npdt.type(alpha) if alpha != 1 else _as(y._data, npdt)
            if both:
                idx = np.concatenate([x._idx, y._idx], axis=1)
                vals = np.concatenate([_as(x._data, npdt), yv])
                idx, vals = coalesce_arrays(idx, vals, x._shape)
                return make_coo(idx, vals, x._shape, True)
            res = np.array(_as(x._data, npdt), copy=True, order="C")
            np.add.at(res.reshape(-1), _linear(y._idx, y._shape), yv)
            return wrap(res)
        return run


class CooMul(_CooOp):
    """aten::mul.Tensor: COO * scalar or 0-d, COO * COO, COO * dense broadcast to its shape -> COO."""

    op = "mul"

    def specialize(self, call):
        a, b = call.metas[0], call.metas[1]
        swap = not (a.kind == "tensor" and a.keyset & SPARSE_COO_BITS)
        s, o = (b, a) if swap else (a, b)
        if o.kind == "scalar":
            dt = result_type(s.dtype, o.pytype(0))
        elif o.kind == "tensor":
            dt = result_type(s.dtype, o.dtype) if o.ndim or o.keyset & SPARSE_COO_BITS else \
                result_type(s.dtype, o.dtype.np.type(0))
        else:
            raise SchemaError(f"mul: cannot multiply a sparse COO tensor by {o.kind}")
        record(call, self.__name__, dt)
        npdt = dt.np
        kind = "coo" if o.kind == "tensor" and o.keyset & SPARSE_COO_BITS else \
            "dense" if o.kind == "tensor" and o.ndim > 0 else "scalar"

        def run(x, y, out=None):
            _no_out("mul", out)
            if swap:
                x, y = y, x
            v = _as(x._data, npdt)
            if kind == "scalar":
                k = y._data if isinstance(y, Tensor) else y
                return make_coo(x._idx, v * npdt.type(k), x._shape, x._coalesced)
            if kind == "coo":
                if x._shape != y._shape:
                    raise ShapeError(f"mul: sparse COO shapes {x._shape} and {y._shape} must match")
                cx, cy = x.coalesce(), y.coalesce()
                _, i, j = np.intersect1d(_linear(cx._idx, x._shape), _linear(cy._idx, y._shape),
                                         assume_unique=True, return_indices=True)
                vals = _as(cx._data, npdt)[i] * _as(cy._data, npdt)[j]
                return make_coo(np.ascontiguousarray(cx._idx[:, i]), vals, x._shape, True)
            try:
                fits = broadcast_shapes(tuple(y.shape), x._shape) == x._shape
            except ValueError:
                fits = False
            if not fits:
                raise ShapeError(f"mul: a dense operand of shape {tuple(y.shape)} does not broadcast to the sparse "
                                 f"COO shape {x._shape}")
            d = np.broadcast_to(_as(y._data, npdt), x._shape)
            return make_coo(x._idx, v * d[tuple(x._idx)], x._shape, x._coalesced)
        return run


class CooSum(_CooOp):
    """aten::sum: over everything -> dense 0-d; over some dims -> COO over the others.  Integer
    sums accumulate in int64, as PyTorch's do; ``dtype=`` casts the values first."""

    op = "sum"

    def specialize(self, call):
        record(call, self.__name__, call.metas[0].dtype)

        def run(x, axis=None, keepdims=False, dtype=None):
            v = x._data
            to = as_dtype(dtype).np if dtype is not None else np.dtype(np.int64) if v.dtype.kind in "biu" else v.dtype
            v = _as(v, to)
            nd = x.ndim
            axes = set(range(nd)) if axis is None else {a % nd if nd else 0 for a in
                                                         ((axis,) if isinstance(axis, int) else axis)}
            if not axes:
                axes = set(range(nd))
            if keepdims:
                raise SchemaError("sum: keepdim=True is not supported for sparse COO tensors")
            if len(axes) >= nd:
                return wrap(np.asarray(v.sum(dtype=to)))
            keep = [d for d in range(nd) if d not in axes]
            shape = tuple(x._shape[d] for d in keep)
            idx, vals = coalesce_arrays(np.ascontiguousarray(x._idx[keep]), v, shape)
            return make_coo(np.ascontiguousarray(idx), vals, shape, True)
        return run


def to_dense_coo(x):
    out = np.zeros(x._shape, dtype=x._data.dtype)
    if x._idx.shape[1]:
        if x._coalesced:
            out[tuple(x._idx)] = x._data
        else:
            np.add.at(out.reshape(-1), _linear(x._idx, x._shape), x._data)
    return wrap(out)


def t_coo(x):
    return x.t()


class CooMatmulRoute:
    """What cpu.MatmulAutogradRouter runs for a call with a COO operand: the differentiable op."""

    def __init__(self):
        self.mm = lookup("aten::sparse_coo_mm").entry

    def __call__(self, x, y):
        return coo_mm(x, y, self.mm)


KERNELS = {
    "SparseCPU": {"matmul": CooMatmul(), "add.Tensor": CooAdd(), "mul.Tensor": CooMul(), "sum": CooSum(),
                  "to_dense": to_dense_coo, "t": t_coo},
    "CPU": {"sparse_coo_mm": _sparse_coo_mm_cpu},
}
