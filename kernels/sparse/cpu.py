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

import functools
from types import SimpleNamespace

import numba
import numpy as np
from numba import prange

from dispatch_jit.autograd.kernel import Derivative
from dispatch_jit.dtypes import result_type
from dispatch_jit.errors import SchemaError
from dispatch_jit.jit import cache
from dispatch_jit.keys import DispatchKey
from dispatch_jit.registry import lookup
from dispatch_jit.sparse import SPARSE_CSR_BITS, SparseCsrTensor
from dispatch_jit.sparse_coo import SPARSE_COO_BITS
from dispatch_jit.tensor import Tensor, wrap

from . import merge
from .op import check_matmul_operand

__all__ = ["PARALLEL_WORK", "sparse_csr_mm", "bucket_sort", "csr_matmul_t", "csr_matmul_arrays"]

PARALLEL_WORK = 1 << 15   # nnz * columns of the dense operand above which row loops use prange


# -- Numba kernels -----------------------------------------------------------------------------------
# Called through Numba's own type dispatch; each compile for new argument types goes through the disk
# cache (cache.on_disk), counted under this module's name.
_CACHE_KIND = __name__
_on_disk = functools.partial(cache.on_disk, _CACHE_KIND)


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


_mm_par = _on_disk(numba.njit(parallel=True, fastmath=True)(_mm_body))
_mm_ser = _on_disk(numba.njit(fastmath=True)(_mm_body))
_mv_par = _on_disk(numba.njit(parallel=True, fastmath=True)(_mv_body))
_mv_ser = _on_disk(numba.njit(fastmath=True)(_mv_body))


@_on_disk
@numba.njit
def _bucket(keys, ptr, perm):
    """A stable counting sort of ``keys`` (each in [0, len(ptr) - 1)): ``ptr`` (zeroed by the caller)
    gets each key's start, ``perm`` the entries in key order, equal keys in their original order.
    O(nnz), where an argsort is O(nnz log nnz): ~10x less at 1e6 entries."""
    for k in range(keys.shape[0]):
        ptr[keys[k] + 1] += 1
    for j in range(ptr.shape[0] - 1):
        ptr[j + 1] += ptr[j]
    cursor = ptr[:-1].copy()
    for k in range(keys.shape[0]):
        j = keys[k]
        perm[cursor[j]] = k
        cursor[j] += 1


def bucket_sort(keys: np.ndarray, nkeys: int):
    """(pointers, permutation) of a stable counting sort of int64 ``keys`` in [0, nkeys)."""
    ptr = np.zeros(nkeys + 1, dtype=np.int64)
    perm = np.empty(keys.shape[0], dtype=np.int64)
    _bucket(keys, ptr, perm)
    return ptr, perm


@_on_disk
@numba.njit(parallel=True, fastmath=True)
def _mm_t(crow, col, val, g, out, nparts):
    """out = A^T @ g (out zeroed by the caller): a scatter, split by output rows into ``nparts``
    bands, each thread scanning all of A and adding only into its band.  Every output row is
    added to by one thread in A's order, as the serial scatter does: the bits do not depend on
    nparts (so neither on the thread count); the scan of A repeats per band, the arithmetic not."""
    m = out.shape[0]
    n = g.shape[1]
    for p in prange(nparts):
        lo = p * m // nparts
        hi = (p + 1) * m // nparts
        for i in range(crow.shape[0] - 1):
            for k in range(crow[i], crow[i + 1]):
                j = col[k]
                if lo <= j < hi:
                    v = val[k]
                    for c in range(n):
                        out[j, c] += v * g[i, c]


def csr_matmul_t(crow, col, val, g: np.ndarray, ncols: int) -> np.ndarray:
    """A^T @ g for A = CSR(crow, col, val) of ncols columns, g 2-D (same dtype as val).  Above
    PARALLEL_WORK the output rows split into one band per Numba thread (_mm_t: same bits)."""
    out = np.zeros((ncols, g.shape[1]), dtype=val.dtype)
    if col.shape[0] and g.shape[1]:
        par = col.shape[0] * g.shape[1] >= PARALLEL_WORK
        _mm_t(crow, col, val, g, out, numba.get_num_threads() if par else 1)
    return out


@_on_disk
@numba.njit(parallel=True, fastmath=True)
def _sddmm(crow, col, g, b, out):
    """out[k] = g[i, :] . b[col[k], :] for each nonzero k of row i."""
    for i in prange(crow.shape[0] - 1):
        for k in range(crow[i], crow[i + 1]):
            j = col[k]
            out[k] = 0
            for c in range(g.shape[1]):
                out[k] += g[i, c] * b[j, c]


@_on_disk
@numba.njit
def _to_dense(crow, col, val, out):
    for i in range(crow.shape[0] - 1):
        for k in range(crow[i], crow[i + 1]):
            out[i, col[k]] = val[k]


def _merge(signature: str, body: str, npdt, *args) -> None:
    """Run a row merge of merge.py (one row after another), compiled once per argument types."""
    name = signature.split("(")[0]
    ep, _ = cache.njit_source(_CACHE_KIND, merge.serial(signature, "rows", body), name,
                        tuple(numba.typeof(a) for a in args), {"_dt": npdt.type}, key=(npdt.str,), disk=True)
    ep(*args)


@_on_disk
@numba.njit
def _mul_dense(crow, col, val, d, out):
    for i in range(crow.shape[0] - 1):
        for k in range(crow[i], crow[i + 1]):
            out[k] = val[k] * d[i, col[k]]


@_on_disk
@numba.njit
def _sum_rows(crow, val, out):
    for i in range(crow.shape[0] - 1):
        out[i] = 0
        for k in range(crow[i], crow[i + 1]):
            out[i] += val[k]


@_on_disk
@numba.njit
def _sum_cols(col, val, out):
    for k in range(col.shape[0]):
        out[col[k]] += val[k]


def _as(a: np.ndarray, npdt) -> np.ndarray:
    return a if a.dtype == npdt else a.astype(npdt)


# -- the matmul ------------------------------------------------------------------------------------------
def csr_matmul_arrays(crow, col, val, b: np.ndarray, ncols: int) -> np.ndarray:
    """CSR(crow, col, val) of shape (len(crow) - 1, ncols) @ b (1-D or 2-D), same dtype."""
    rows = crow.shape[0] - 1
    check_matmul_operand(rows, ncols, b.shape)
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
    gdense = csr_matmul_t(crow, col, v, g2, d2.shape[0])
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
    """aten::matmul at AutogradCPU and AutogradCUDA: a COO operand -> ``coo_route`` (aten::sparse_coo_mm);
    CSR self (either device) ->
    aten::sparse_csr_mm (which has the sparse derivative); anything else -> the
    Autograd alias kernel, as before this module registered (decided once per
    signature)."""

    __name__ = "autograd_matmul_sparse_router"
    # dense operands get the Autograd alias kernel: compiler/joint.py traces that kernel's formula
    dense_alias = True

    def __init__(self, coo_route=None):
        # a COO operand (either side): coo_route() runs it (coo.CooMatmulRoute, which imports this module)
        self.coo_route = coo_route

    def specialize(self, call):
        a = call.metas[0]
        if self.coo_route is not None and any(m.kind == "tensor" and m.keyset & SPARSE_COO_BITS
                                              for m in call.metas[:2]):
            return self.coo_route()
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


# -- matmul, add, mul, sum: what sparse/op.py's ops compute on the CPU -------------------------------------
def _matmul(x, y, npdt):
    return wrap(csr_matmul_arrays(x._crow, x._col, _as(x._data, npdt), _as(y._data, npdt), x._shape[1]))


def _add(x, y, alpha, npdt):
    counts = np.empty(x._shape[0], dtype=np.int64)
    _merge(merge.COUNT_SIGNATURE, merge.COUNT, np.dtype(np.int64), x._crow, x._col, y._crow, y._col, counts,
           x._shape[0])
    crow = np.zeros(x._shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=crow[1:])
    nnz = int(crow[-1])
    col = np.empty(nnz, dtype=np.int64)
    val = np.empty(nnz, dtype=npdt)
    _merge(merge.FILL_SIGNATURE, merge.FILL, np.dtype(npdt), x._crow, x._col, _as(x._data, npdt), y._crow, y._col,
           _as(y._data, npdt), alpha, crow, col, val, x._shape[0])
    return crow, col, val


def _mul_scalar(x, y, npdt):
    k = y._data if isinstance(y, Tensor) else y
    return _as(x._data, npdt) * npdt.type(k)


def _mul_by_dense(x, y, npdt):
    v = _as(x._data, npdt)
    vals = np.empty(v.shape[0], dtype=npdt)
    _mul_dense(x._crow, x._col, v, np.broadcast_to(_as(y._data, npdt), x._shape), vals)
    return vals


def _values(x, to):
    return x._data if to is None else x._data.astype(to)


def _sum_all(x, to, keepdims):
    v = _values(x, to)
    r = np.asarray(v.sum(dtype=v.dtype))
    return wrap(r.reshape(1, 1) if keepdims else r)


def _sum_along_rows(x, to, keepdims):
    v = _values(x, to)
    r = np.empty(x._shape[0], dtype=v.dtype)
    _sum_rows(x._crow, v, r)
    return wrap(r.reshape(-1, 1) if keepdims else r)


def _sum_along_cols(x, to, keepdims):
    v = _values(x, to)
    r = np.zeros(x._shape[1], dtype=v.dtype)
    _sum_cols(x._col, v, r)
    return wrap(r.reshape(1, -1) if keepdims else r)


CPU = SimpleNamespace(matmul=_matmul, add=_add, mul_scalar=_mul_scalar, mul_dense=_mul_by_dense,
                      sum_all=_sum_all, sum_rows=_sum_along_rows, sum_cols=_sum_along_cols)


def to_dense_cpu(x):
    out = np.zeros(x._shape, dtype=x._data.dtype)
    _to_dense(x._crow, x._col, x._data, out)
    return wrap(out)


def to_dense_dense(x):
    """to_dense on a dense tensor: the identity (registered at CPU and CUDA)."""
    return x
