"""Sparse CSR kernels: Numba loops over the CSR arrays, registered at SparseCsrCPU.

Registered at ``SparseCsrCPU`` (the call's key whenever one argument is a
CSR tensor, since SparseCsrCPU outranks CPU):

- ``aten::matmul``: CSR @ dense 2-D and CSR @ 1-D vector -> dense
  (parallel over rows above ``PARALLEL_WORK``);
- ``aten::add.Tensor``: CSR + CSR -> CSR (rows merged; alpha supported);
- ``aten::mul.Tensor``: CSR * scalar, CSR * dense (broadcast) -> CSR with
  the same pattern;
- ``aten::sum``: all, or along axis 0 / 1 -> dense;
- ``aten::to_dense`` (defined here; the identity on dense tensors).

Autograd: ``aten::matmul``'s Autograd kernel records the dense formula,
which cannot transpose a CSR operand.  So a direct ``AutogradCPU`` kernel for
``aten::matmul`` (it outranks the Autograd alias) routes calls with a CSR
``self`` to ``aten::sparse_csr_mm(crow, col, values, dense, ncols)``, an op
defined here whose derivative row gives the gradients with respect to the
dense operand (A^T @ g) and the values (per-nonzero dot of g's row with the
dense operand's row); every other call goes to the alias kernel unchanged,
resolved once on the miss path.  Gradients through the other sparse ops are
not implemented (a CSR result of an op on tensors requiring grad raises).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from dispatch_jit.autograd.kernel import AutogradKernel, Derivative
from dispatch_jit.dtypes import result_type
from dispatch_jit.errors import DTypeError, SchemaError, ShapeError
from dispatch_jit.keys import DispatchKey
from dispatch_jit.library import Library
from dispatch_jit.registry import lookup
from dispatch_jit.sparse import SPARSE_CSR_BITS, SPARSE_CSR_CPU_BITS, SparseCsrTensor, _make
from dispatch_jit.tensor import Tensor, wrap

__all__ = ["PARALLEL_WORK", "sparse_csr_mm"]

PARALLEL_WORK = 1 << 15   # nnz * columns of the dense operand above which row loops use prange


# -- Numba kernels -----------------------------------------------------------------------------------
def _mm_body(crow, col, val, b, out):
    n = b.shape[1]
    for i in prange(crow.shape[0] - 1):
        for c in range(n):
            out[i, c] = 0
        for k in range(crow[i], crow[i + 1]):
            v = val[k]
            j = col[k]
            for c in range(n):
                out[i, c] += v * b[j, c]


def _mv_body(crow, col, val, x, out):
    for i in prange(crow.shape[0] - 1):
        out[i] = 0
        for k in range(crow[i], crow[i + 1]):
            out[i] += val[k] * x[col[k]]


_mm_par = numba.njit(parallel=True, fastmath=True)(_mm_body)
_mm_ser = numba.njit(fastmath=True)(_mm_body)
_mv_par = numba.njit(parallel=True, fastmath=True)(_mv_body)
_mv_ser = numba.njit(fastmath=True)(_mv_body)


@numba.njit(fastmath=True)
def _mm_t(crow, col, val, g, out):
    """out = A^T @ g (out zeroed by the caller): a scatter, so serial."""
    for i in range(crow.shape[0] - 1):
        for k in range(crow[i], crow[i + 1]):
            v = val[k]
            j = col[k]
            for c in range(g.shape[1]):
                out[j, c] += v * g[i, c]


@numba.njit(parallel=True, fastmath=True)
def _sddmm(crow, col, g, b, out):
    """out[k] = g[i, :] . b[col[k], :] for each nonzero k of row i."""
    for i in prange(crow.shape[0] - 1):
        for k in range(crow[i], crow[i + 1]):
            j = col[k]
            out[k] = 0
            for c in range(g.shape[1]):
                out[k] += g[i, c] * b[j, c]


@numba.njit
def _to_dense(crow, col, val, out):
    for i in range(crow.shape[0] - 1):
        for k in range(crow[i], crow[i + 1]):
            out[i, col[k]] = val[k]


@numba.njit
def _add_count(ca, ia, cb, ib, counts):
    for i in range(ca.shape[0] - 1):
        p, pe, q, qe, n = ca[i], ca[i + 1], cb[i], cb[i + 1], 0
        while p < pe or q < qe:
            if q >= qe or (p < pe and ia[p] < ib[q]):
                p += 1
            elif p >= pe or ib[q] < ia[p]:
                q += 1
            else:
                p += 1
                q += 1
            n += 1
        counts[i] = n


@numba.njit
def _add_fill(ca, ia, va, cb, ib, vb, alpha, crow, col, val):
    for i in range(ca.shape[0] - 1):
        p, pe, q, qe, o = ca[i], ca[i + 1], cb[i], cb[i + 1], crow[i]
        while p < pe or q < qe:
            if q >= qe or (p < pe and ia[p] < ib[q]):
                col[o] = ia[p]
                val[o] = va[p]
                p += 1
            elif p >= pe or ib[q] < ia[p]:
                col[o] = ib[q]
                val[o] = alpha * vb[q]
                q += 1
            else:
                col[o] = ia[p]
                val[o] = va[p] + alpha * vb[q]
                p += 1
                q += 1
            o += 1


@numba.njit
def _mul_dense(crow, col, val, d, out):
    for i in range(crow.shape[0] - 1):
        for k in range(crow[i], crow[i + 1]):
            out[k] = val[k] * d[i, col[k]]


@numba.njit
def _sum_rows(crow, val, out):
    for i in range(crow.shape[0] - 1):
        out[i] = 0
        for k in range(crow[i], crow[i + 1]):
            out[i] += val[k]


@numba.njit
def _sum_cols(col, val, out):
    for k in range(col.shape[0]):
        out[col[k]] += val[k]


def _record(call, name: str, dt) -> None:
    rec = call.op.compiled.setdefault(name, [])
    if dt.name not in rec:
        rec.append(dt.name)


def _as(a: np.ndarray, npdt) -> np.ndarray:
    return a if a.dtype == npdt else a.astype(npdt)


def _check_float_or_int(dt, opname):
    if dt.category < 1 or dt.category > 2:
        raise DTypeError(f"{opname}: sparse CSR kernels support integer and floating dtypes, got {dt.name}")


# -- the matmul ------------------------------------------------------------------------------------------
def csr_matmul_arrays(crow, col, val, b: np.ndarray, ncols: int) -> np.ndarray:
    """CSR(crow, col, val) of shape (len(crow) - 1, ncols) @ b (1-D or 2-D), same dtype."""
    rows = crow.shape[0] - 1
    if b.ndim not in (1, 2) or b.shape[0] != ncols:
        raise ShapeError(f"matmul: a sparse CSR matrix of shape ({rows}, {ncols}) cannot multiply a tensor of "
                         f"shape {b.shape}; expected ({ncols},) or ({ncols}, n)")
    par = col.shape[0] * (b.shape[1] if b.ndim == 2 else 1) >= PARALLEL_WORK
    if b.ndim == 1:
        out = np.empty(rows, dtype=val.dtype)
        (_mv_par if par else _mv_ser)(crow, col, val, np.ascontiguousarray(b), out)
    else:
        out = np.empty((rows, b.shape[1]), dtype=val.dtype)
        if b.shape[1]:
            (_mm_par if par else _mm_ser)(crow, col, val, np.ascontiguousarray(b), out)
        else:
            out[...] = 0
    return out


class SparseMatmul:
    """aten::matmul at SparseCsrCPU: CSR @ dense (2-D or 1-D) -> dense."""

    __name__ = "sparse_csr_matmul_cpu"

    def specialize(self, call):
        a, b = call.metas[0], call.metas[1]
        if a.kind != "tensor" or b.kind != "tensor" or not a.keyset & SPARSE_CSR_CPU_BITS:
            raise SchemaError(f"matmul with sparse CSR tensors supports only CSR @ dense (got {_what(a)} @ "
                              f"{_what(b)}); convert with .to_dense()")
        if b.keyset & SPARSE_CSR_CPU_BITS:
            raise SchemaError("matmul: CSR @ CSR is not implemented; convert one operand with .to_dense()")
        dt = result_type(a.dtype, b.dtype)
        _check_float_or_int(dt, "matmul")
        _record(call, self.__name__, dt)
        npdt = dt.np

        def run(x, y):
            return wrap(csr_matmul_arrays(x._crow, x._col, _as(x._data, npdt), _as(y._data, npdt), x._shape[1]))
        return run


def _what(m) -> str:
    if m.kind != "tensor":
        return m.kind
    return "CSR" if m.keyset & SPARSE_CSR_CPU_BITS else "dense"


# aten::sparse_csr_mm: the differentiable form (values and dense operand are ordinary tensors)
def _sparse_mm_cpu(crow, col, values, dense, ncols):
    dt = result_type(values.dtype, dense.dtype)
    npdt = dt.np
    return wrap(csr_matmul_arrays(crow._data, col._data, _as(values._data, npdt), _as(dense._data, npdt), ncols))


def _sparse_mm_grads(g, s, c):
    crow, col, vals, dense = s["crow_indices"]._data, s["col_indices"]._data, s["values"], s["dense"]
    if g.is_cuda:
        from .cuda import sparse_mm_grads_cuda
        gvals, gdense = sparse_mm_grads_cuda(crow, col, vals, dense, g)
        return None, None, gvals, gdense
    ga = g._data
    npdt = ga.dtype
    d = _as(dense._data, npdt)
    v = _as(vals._data, npdt)
    g2 = ga.reshape(-1, 1) if ga.ndim == 1 else np.ascontiguousarray(ga)
    d2 = d.reshape(-1, 1) if d.ndim == 1 else np.ascontiguousarray(d)
    gdense = np.zeros(d2.shape, dtype=npdt)
    _mm_t(crow, col, v, g2, gdense)
    gvals = np.empty(col.shape[0], dtype=npdt)
    if col.shape[0]:
        if g2.shape[1]:
            _sddmm(crow, col, g2, d2, gvals)
        else:
            gvals[:] = 0
    return None, None, wrap(gvals), wrap(gdense.reshape(d.shape))


SPARSE_MM_DERIVATIVE = Derivative("SparseCsrMmBackward", _sparse_mm_grads,
                                  ("crow_indices", "col_indices", "values", "dense"), unbroadcast=False)


class MatmulAutogradRouter:
    """aten::matmul at AutogradCPU and AutogradCUDA: CSR self (either device) ->
    aten::sparse_csr_mm (which has the sparse derivative); anything else -> the
    Autograd alias kernel, as before this module registered (decided once per
    signature)."""

    __name__ = "autograd_matmul_sparse_router"

    def specialize(self, call):
        a = call.metas[0]
        if a.kind == "tensor" and a.keyset & SPARSE_CSR_BITS:
            mm = lookup("aten::sparse_csr_mm").entry
            b = call.metas[1]
            if b.kind == "tensor" and b.keyset & SPARSE_CSR_BITS:
                raise SchemaError("matmul: CSR @ CSR is not implemented; convert one operand with .to_dense()")

            def run(x, y):
                return mm(x.crow_indices(), x.col_indices(), x._values_t, y, x._shape[1])
            return run
        if a.kind == "tensor" and call.metas[1].kind == "tensor" and call.metas[1].keyset & SPARSE_CSR_BITS:
            raise SchemaError("matmul: dense @ CSR is not implemented; compute (B^T @ A^T)^T or convert "
                              "with .to_dense()")
        alias = call.op.kernels[DispatchKey.Autograd].fn
        return alias.specialize(call)


def sparse_csr_mm(a: SparseCsrTensor, dense: Tensor) -> Tensor:
    """``a @ dense`` through the differentiable op (what ``dj.matmul`` routes to under autograd)."""
    return lookup("aten::sparse_csr_mm").entry(a.crow_indices(), a.col_indices(), a._values_t, dense, a._shape[1])


# -- add, mul, sum, to_dense -------------------------------------------------------------------------------------
class SparseAdd:
    """aten::add.Tensor at SparseCsrCPU: CSR + alpha * CSR -> CSR."""

    __name__ = "sparse_csr_add_cpu"

    def specialize(self, call):
        a, b = call.metas[0], call.metas[1]
        if not (a.kind == "tensor" and b.kind == "tensor" and a.keyset & b.keyset & SPARSE_CSR_CPU_BITS):
            raise SchemaError(f"add with sparse CSR tensors supports only CSR + CSR (got {_what(a)} + {_what(b)}); "
                              f"convert with .to_dense()")
        dt = result_type(a.dtype, b.dtype)
        _check_float_or_int(dt, "add")
        _record(call, self.__name__, dt)
        npdt = dt.np

        def run(x, y, alpha=1, out=None):
            if out is not None:
                raise SchemaError("add: out= is not supported for sparse CSR tensors")
            if x._shape != y._shape:
                raise ShapeError(f"add: sparse CSR shapes {x._shape} and {y._shape} must match")
            counts = np.empty(x._shape[0], dtype=np.int64)
            _add_count(x._crow, x._col, y._crow, y._col, counts)
            crow = np.zeros(x._shape[0] + 1, dtype=np.int64)
            np.cumsum(counts, out=crow[1:])
            nnz = int(crow[-1])
            col = np.empty(nnz, dtype=np.int64)
            val = np.empty(nnz, dtype=npdt)
            _add_fill(x._crow, x._col, _as(x._data, npdt), y._crow, y._col, _as(y._data, npdt), npdt.type(alpha),
                      crow, col, val)
            return _make(crow, col, val, x._shape)
        return run


def mul_plan(call, csr_bits: int, kernel_name: str):
    """CSR * scalar / dense, resolved once per signature (for the CPU and CUDA kernels):
    (whether the CSR operand is second, the result dtype, whether the other operand is a
    dense tensor of ndim > 0)."""
    a, b = call.metas[0], call.metas[1]
    swap = not (a.kind == "tensor" and a.keyset & csr_bits)
    s, o = (b, a) if swap else (a, b)
    if o.kind == "tensor" and o.keyset & csr_bits:
        raise SchemaError("mul: CSR * CSR is not implemented; convert one operand with .to_dense()")
    if o.kind == "scalar":
        dt = result_type(s.dtype, o.pytype(0))
    elif o.kind == "tensor":
        dt = result_type(s.dtype, o.dtype) if o.ndim else result_type(s.dtype, o.dtype.np.type(0))
    else:
        raise SchemaError(f"mul: cannot multiply a sparse CSR tensor by {o.kind}")
    _check_float_or_int(dt, "mul")
    _record(call, kernel_name, dt)
    return swap, dt, o.kind == "tensor" and o.ndim > 0


class SparseMul:
    """aten::mul.Tensor at SparseCsrCPU: CSR * scalar (or 0-d tensor) and CSR *
    dense broadcast to the CSR's shape -> CSR with the same pattern."""

    __name__ = "sparse_csr_mul_cpu"

    def specialize(self, call):
        swap, dt, dense_other = mul_plan(call, SPARSE_CSR_CPU_BITS, self.__name__)
        npdt = dt.np

        def run(x, y, out=None):
            if out is not None:
                raise SchemaError("mul: out= is not supported for sparse CSR tensors")
            if swap:
                x, y = y, x
            v = _as(x._data, npdt)
            if not dense_other:
                k = y._data if isinstance(y, Tensor) else y
                return _make(x._crow, x._col, v * npdt.type(k), x._shape)
            try:
                d = np.broadcast_to(_as(y._data, npdt), x._shape)
            except ValueError:
                raise ShapeError(f"mul: a dense operand of shape {y.shape} does not broadcast to the sparse CSR "
                                 f"shape {x._shape}") from None
            vals = np.empty(v.shape[0], dtype=npdt)
            _mul_dense(x._crow, x._col, v, d, vals)
            return _make(x._crow, x._col, vals, x._shape)
        return run


class SparseSum:
    """aten::sum at SparseCsrCPU: over everything, or along axis 0 or 1 -> dense."""

    __name__ = "sparse_csr_sum_cpu"

    def specialize(self, call):
        _record(call, self.__name__, call.metas[0].dtype)

        def run(x, axis=None, keepdims=False, dtype=None):
            v = x._data
            if dtype is not None:
                from dispatch_jit.dtypes import as_dtype
                v = v.astype(as_dtype(dtype).np)
            elif v.dtype.kind in "biu":
                v = v.astype(np.int64)       # integer sums accumulate in int64, as PyTorch's do
            axes = (0, 1) if axis is None else tuple(sorted(a % 2 for a in ((axis,) if isinstance(axis, int)
                                                                          else axis)))
            if axes == (0, 1) or axes == ():
                r = np.asarray(v.sum(dtype=v.dtype))
                if keepdims:
                    r = r.reshape(1, 1)
            elif axes == (1,):
                r = np.empty(x._shape[0], dtype=v.dtype)
                _sum_rows(x._crow, v, r)
                if keepdims:
                    r = r.reshape(-1, 1)
            else:
                r = np.zeros(x._shape[1], dtype=v.dtype)
                _sum_cols(x._col, v, r)
                if keepdims:
                    r = r.reshape(1, -1)
            return wrap(r)
        return run


def _to_dense_sparse(x):
    out = np.zeros(x._shape, dtype=x._data.dtype)
    _to_dense(x._crow, x._col, x._data, out)
    return wrap(out)


def _to_dense_dense(x):
    return x


# -- registrations ------------------------------------------------------------------------------------------
aten_sparse_def = Library("aten", "FRAGMENT")
aten_sparse_def.define("to_dense(Tensor self) -> Tensor")
aten_sparse_def.define("sparse_csr_mm(Tensor crow_indices, Tensor col_indices, Tensor values, Tensor dense, "
                       "int ncols) -> Tensor")

aten_sparse_csr = Library("aten", "IMPL", "SparseCsrCPU")
aten_sparse_csr.impl("matmul", SparseMatmul())
aten_sparse_csr.impl("add.Tensor", SparseAdd())
aten_sparse_csr.impl("mul.Tensor", SparseMul())
aten_sparse_csr.impl("sum", SparseSum())
aten_sparse_csr.impl("to_dense", _to_dense_sparse)

aten_sparse_cpu = Library("aten", "IMPL", "CPU")
aten_sparse_cpu.impl("to_dense", _to_dense_dense)
aten_sparse_cpu.impl("sparse_csr_mm", _sparse_mm_cpu)

aten_sparse_autograd = Library("aten", "IMPL", "Autograd")
aten_sparse_autograd.impl("sparse_csr_mm", AutogradKernel(SPARSE_MM_DERIVATIVE))
aten_sparse_ag_cpu = Library("aten", "IMPL", "AutogradCPU")
aten_sparse_ag_cpu.impl("matmul", MatmulAutogradRouter())
aten_sparse_ag_cuda = Library("aten", "IMPL", "AutogradCUDA")
aten_sparse_ag_cuda.impl("matmul", MatmulAutogradRouter())

# the SparseCsrCUDA kernels register themselves (numba.cuda is imported on first use only)
from . import cuda as cuda_sparse  # noqa: E402,F401
