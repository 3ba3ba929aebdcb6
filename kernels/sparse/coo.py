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
``cpu.PARALLEL_WORK``) on row pointers built from the COO rows on each call (a
bincount, ~2% of the kernel's time at 1e6 non-zeros, so not cached on the
tensor, whose indices a caller may rewrite): a coalesced tensor's rows are
already sorted, an uncoalesced one is sorted by a stable counting sort
(duplicates then add up in the product, as they stand for a sum).
``aten::sparse_coo_mm(indices, values, dense, rows, cols)``, defined here, is
the differentiable form the AutogradCPU/AutogradCUDA router
(cpu.MatmulAutogradRouter) sends COO products to: its derivative
(coo_cuda.SPARSE_COO_MM_DERIVATIVE, either device) gives the dense operand A^T @ g and
each value the dot of g's row with the dense operand's row, as
``torch.sparse.mm``'s; one row per input, so a backward through a fixed matrix
(values not requiring grad) computes A^T @ g only.  A^T @ g runs in bands of
output rows, one per thread (cpu._mm_t), with the serial scatter's bits.

Each op class holds its argument handling (checked once per signature) over a
backend of compute functions: ``CPU_COO`` here (NumPy and the Numba CSR loops)
or coo_cuda.CUDA_COO (device kernels), registered at SparseCPU and SparseCUDA.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from dispatch_jit.broadcast import broadcast_shapes
from dispatch_jit.dtypes import as_dtype, result_type
from dispatch_jit.errors import DTypeError, SchemaError, ShapeError
from dispatch_jit.registry import lookup
from dispatch_jit.sparse_coo import SPARSE_COO_BITS, coalesce_arrays, make_coo
from dispatch_jit.tensor import Tensor, wrap

from . import cpu
from .op import check_float_or_int, check_matmul_operand, record

__all__ = ["SCHEMAS", "KERNELS", "coo_values_grad_cpu", "coo_dense_grad_cpu", "coo_matmul_arrays", "CPU_COO", "CooMatmul", "CooAdd",
           "CooMul", "CooSum", "coo_mm", "scalar_of", "t_coo", "CooMatmulRoute", "row_plan", "linear_positions"]

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


def linear_positions(idx: np.ndarray, shape: tuple) -> np.ndarray:
    """Each entry's row-major position (host arrays)."""
    if idx.shape[0] == 0:
        return np.zeros(idx.shape[1], dtype=np.int64)
    return np.ravel_multi_index(tuple(idx), shape).astype(np.int64, copy=False)


# -- the product -------------------------------------------------------------------------------------------
def row_plan(idx: np.ndarray, rows: int):
    """Row pointers, columns and the sorting permutation (None when the rows are already sorted)."""
    r = idx[0]
    if r.size > 1 and np.any(r[1:] < r[:-1]):
        crow, perm = cpu.bucket_sort(np.ascontiguousarray(r), rows)     # stable: duplicates keep their order
        return crow, idx[1][perm], perm
    crow = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=rows), out=crow[1:])
    return crow, np.ascontiguousarray(idx[1]), None


def _check_operand(rows: int, cols: int, shape: tuple) -> None:
    check_matmul_operand(rows, cols, tuple(shape), "COO")


def coo_matmul_arrays(idx: np.ndarray, val: np.ndarray, b: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """COO(idx, val) of shape (rows, cols) @ b (1-D or 2-D), in val's dtype."""
    _check_operand(rows, cols, b.shape)
    crow, col, perm = row_plan(idx, rows)
    v = val if perm is None else val[perm]
    if val.dtype == np.float16:      # Numba has no float16 arithmetic: float32 sums, rounded once
        return cpu.csr_matmul_arrays(crow, col, np.ascontiguousarray(v, np.float32), b.astype(np.float32),
                                     cols).astype(np.float16)
    return cpu.csr_matmul_arrays(crow, col, np.ascontiguousarray(v), b, cols)


def _mm_cpu(indices, values, dense, rows, cols, npdt):
    return wrap(coo_matmul_arrays(indices._data, _as(values._data, npdt), _as(dense._data, npdt), rows, cols))


def _sparse_coo_mm_cpu(indices, values, dense, rows, cols):
    return _mm_cpu(indices, values, dense, rows, cols, result_type(values.dtype, dense.dtype).np)


def _grad_parts(g, idx):
    """g as 2-D in the dtype the gradients are computed in (float16: float32 sums, rounded once,
    as the forward), and the row plan of A."""
    ga = g._data
    npdt = np.dtype(np.float32) if ga.dtype == np.float16 else ga.dtype
    ga = _as(ga, npdt)
    g2 = ga.reshape(-1, 1) if ga.ndim == 1 else np.ascontiguousarray(ga)
    return g2, npdt, row_plan(idx, g2.shape[0])


def _rounded(a: np.ndarray, g) -> Tensor:
    return wrap(a if a.dtype == g._data.dtype else a.astype(g._data.dtype))


def coo_values_grad_cpu(g, s, c):
    """The values' gradient of ``sparse_coo_mm``: each entry's dot of g's row with the dense row."""
    g2, npdt, (crow, col, perm) = _grad_parts(g, s["indices"]._data)
    d = _as(s["dense"]._data, npdt)
    d2 = d.reshape(-1, 1) if d.ndim == 1 else np.ascontiguousarray(d)
    gsorted = np.zeros(col.shape[0], dtype=npdt)
    if col.shape[0] and g2.shape[1]:
        cpu._sddmm(crow, col, g2, d2, gsorted)
    if perm is None:
        return _rounded(gsorted, g)
    gvals = np.empty_like(gsorted)
    gvals[perm] = gsorted
    return _rounded(gvals, g)


def coo_dense_grad_cpu(g, s, c):
    """The dense operand's gradient of ``sparse_coo_mm``: A^T @ g."""
    g2, npdt, (crow, col, perm) = _grad_parts(g, s["indices"]._data)
    v = _as(s["values"]._data, npdt)
    v = np.ascontiguousarray(v if perm is None else v[perm])
    gdense = cpu.csr_matmul_t(crow, col, v, g2, c["cols"])
    return _rounded(gdense.reshape(s["dense"].shape), g)


def coo_mm(x, y, mm):
    """``x @ y`` with one COO operand, through ``mm(indices, values, dense, rows, cols)`` (the op or
    its CPU function); dense @ COO is (COO^T @ dense^T)^T."""
    if isinstance(y, Tensor) and y.layout == "sparse_coo":
        if isinstance(x, Tensor) and x.layout == "sparse_coo":
            raise SchemaError("matmul: COO @ COO is not implemented; convert one operand with .to_dense()")
        if y.ndim != 2:
            raise ShapeError(f"matmul: expected a 2-D sparse COO matrix, got shape {y.shape}")
        if x.ndim not in (1, 2) or x.shape[-1] != y.shape[0]:     # named as written, not as transposed
            raise ShapeError(f"matmul: a tensor of shape {tuple(x.shape)} cannot multiply a sparse COO matrix of "
                             f"shape {y.shape}; expected ({y.shape[0]},) or (n, {y.shape[0]})")
        at = y.t()
        if x.ndim == 1:
            return mm(wrap(at._idx), at._values_t, x, at._shape[0], at._shape[1])
        return mm(wrap(at._idx), at._values_t, x.t(), at._shape[0], at._shape[1]).t()
    if not isinstance(y, Tensor):
        raise SchemaError(f"matmul: cannot multiply a sparse COO matrix by {type(y).__name__}")
    if x.ndim != 2:
        raise ShapeError(f"matmul: expected a 2-D sparse COO matrix, got shape {x.shape}")
    return mm(wrap(x._idx), x._values_t, y, x._shape[0], x._shape[1])


# -- the CPU's compute functions ------------------------------------------------------------------------------
def scalar_of(y):
    """The value of a scalar operand (a Python number or a 0-d tensor, read once)."""
    return y._host() if isinstance(y, Tensor) else y


def _add_coo_cpu(x, y, alpha, npdt):
    yv = _as(y._data, npdt) * npdt.type(alpha) if alpha != 1 else _as(y._data, npdt)
    idx = np.concatenate([x._idx, y._idx], axis=1)
    vals = np.concatenate([_as(x._data, npdt), yv])
    idx, vals = coalesce_arrays(idx, vals, x._shape)
    return make_coo(idx, vals, x._shape, True)


def _add_dense_cpu(x, y, alpha, npdt):
    yv = _as(y._data, npdt) * npdt.type(alpha) if alpha != 1 else _as(y._data, npdt)
    res = np.array(_as(x._data, npdt), copy=True, order="C")
    np.add.at(res.reshape(-1), linear_positions(y._idx, y._shape), yv)
    return wrap(res)


def _mul_scalar_cpu(x, y, npdt):
    return make_coo(x._idx, _as(x._data, npdt) * npdt.type(scalar_of(y)), x._shape, x._coalesced)


def _mul_coo_cpu(x, y, npdt):
    cx, cy = x.coalesce(), y.coalesce()
    _, i, j = np.intersect1d(linear_positions(cx._idx, x._shape), linear_positions(cy._idx, y._shape),
                             assume_unique=True, return_indices=True)
    vals = _as(cx._data, npdt)[i] * _as(cy._data, npdt)[j]
    return make_coo(np.ascontiguousarray(cx._idx[:, i]), vals, x._shape, True)


def _mul_dense_cpu(x, y, npdt):
    d = np.broadcast_to(_as(y._data, npdt), x._shape)
    return make_coo(x._idx, _as(x._data, npdt) * d[tuple(x._idx)], x._shape, x._coalesced)


def _sum_all_cpu(x, to):
    return wrap(np.asarray(_as(x._data, to).sum(dtype=to)))


def _sum_dims_cpu(x, keep, shape, to):
    idx, vals = coalesce_arrays(np.ascontiguousarray(x._idx[keep]), _as(x._data, to), shape)
    return make_coo(np.ascontiguousarray(idx), vals, shape, True)


CPU_COO = SimpleNamespace(device="cpu", mm=_mm_cpu, add_coo=_add_coo_cpu, add_dense=_add_dense_cpu,
                          mul_scalar=_mul_scalar_cpu, mul_coo=_mul_coo_cpu, mul_dense=_mul_dense_cpu,
                          sum_all=_sum_all_cpu, sum_dims=_sum_dims_cpu)


# -- ops at SparseCPU / SparseCUDA ----------------------------------------------------------------------------
class _CooOp:
    op = ""

    def __init__(self, backend=CPU_COO):
        self.be = backend
        self.__name__ = f"sparse_coo_{self.op}_{backend.device}"


class CooMatmul(_CooOp):
    """aten::matmul: COO @ dense, dense @ COO -> dense."""

    op = "matmul"

    def specialize(self, call):
        a, b = call.metas[0], call.metas[1]
        if a.kind != "tensor" or b.kind != "tensor":
            raise SchemaError(f"matmul with sparse COO tensors supports COO @ dense and dense @ COO (got "
                              f"{_what(a)} @ {_what(b)})")
        dt = result_type(a.dtype, b.dtype)
        check_float_or_int(dt, "matmul", "COO")
        if dt.name in _NO_MATMUL:
            raise DTypeError(f"matmul: dtype {dt.name} is not supported (as for dense tensors); cast the "
                             f"operands to a signed integer or floating dtype")
        record(call, self.__name__, dt)
        npdt, be = dt.np, self.be

        def mm(indices, values, dense, rows, cols):
            return be.mm(indices, values, dense, rows, cols, npdt)

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
        npdt = dt.np
        add = self.be.add_coo if a.keyset & SPARSE_COO_BITS else self.be.add_dense

        def run(x, y, alpha=1, out=None):
            _no_out("add", out)
            if tuple(x.shape) != y._shape:
                raise ShapeError(f"add: expected 'self' and 'other' to have same size, but self has size "
                                 f"{list(x.shape)} while other has size {list(y._shape)} (FYI: dense-sparse "
                                 f"addition does not currently support broadcasting)")
            return add(x, y, alpha, npdt)
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
        npdt, be = dt.np, self.be
        kind = "coo" if o.kind == "tensor" and o.keyset & SPARSE_COO_BITS else \
            "dense" if o.kind == "tensor" and o.ndim > 0 else "scalar"

        def run(x, y, out=None):
            _no_out("mul", out)
            if swap:
                x, y = y, x
            if kind == "scalar":
                return be.mul_scalar(x, y, npdt)
            if kind == "coo":
                if x._shape != y._shape:
                    raise ShapeError(f"mul: sparse COO shapes {x._shape} and {y._shape} must match")
                return be.mul_coo(x, y, npdt)
            try:
                fits = broadcast_shapes(tuple(y.shape), x._shape) == x._shape
            except ValueError:
                fits = False
            if not fits:
                raise ShapeError(f"mul: a dense operand of shape {tuple(y.shape)} does not broadcast to the sparse "
                                 f"COO shape {x._shape}")
            return be.mul_dense(x, y, npdt)
        return run


class CooSum(_CooOp):
    """aten::sum: over everything -> dense 0-d; over some dims -> COO over the others.  Integer
    sums accumulate in int64, as PyTorch's do; ``dtype=`` casts the values first."""

    op = "sum"

    def specialize(self, call):
        record(call, self.__name__, call.metas[0].dtype)
        be = self.be

        def run(x, axis=None, keepdims=False, dtype=None):
            vdt = x._data.dtype
            to = as_dtype(dtype).np if dtype is not None else np.dtype(np.int64) if vdt.kind in "biu" else vdt
            nd = x.ndim
            axes = set(range(nd)) if axis is None else {a % nd if nd else 0 for a in
                                                         ((axis,) if isinstance(axis, int) else axis)}
            if not axes:
                axes = set(range(nd))
            if keepdims:
                raise SchemaError("sum: keepdim=True is not supported for sparse COO tensors")
            if len(axes) >= nd:
                return be.sum_all(x, to)
            keep = [d for d in range(nd) if d not in axes]
            return be.sum_dims(x, keep, tuple(x._shape[d] for d in keep), to)
        return run


def to_dense_coo(x):
    out = np.zeros(x._shape, dtype=x._data.dtype)
    if x._idx.shape[1]:
        if x._coalesced:
            out.reshape(-1)[linear_positions(x._idx, x._shape)] = x._data     # (0-d too)
        else:
            np.add.at(out.reshape(-1), linear_positions(x._idx, x._shape), x._data)
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
