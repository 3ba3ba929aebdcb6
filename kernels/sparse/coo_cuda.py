"""Sparse COO kernels on CUDA, registered at ``SparseCUDA``: coo.py's ops on device arrays.

A CUDA COO tensor's ``_idx`` is an int64 CudaArray ``(ndim, nnz)`` and its
values a CUDA tensor.  The op classes (argument handling, dtype rules, error
messages) are coo.py's, over ``CUDA_COO``, this module's compute functions.

Ordering entries is done on the host: the indices come back (one download,
a synchronization, as the CSR kernels' row counts do), a stable argsort of
their row-major positions gives the permutation and the segments of equal
positions, and those go up again.  PyTorch sorts on the device; here the
sort is NumPy's.  The product skips that round trip where the rows are in
order already (a coalesced tensor): a device check returns one flag and the
row pointers are binary searches on the device.  On the device:

- one thread per distinct position sums its segment's values in their
  original order, starting from what the output holds there (zero for
  ``coalesce``, the dense operand for dense + COO, zero for ``to_dense``):
  exactly the order ``np.add.at`` adds them on the CPU, with the same per-step
  rounding (float16 is rounded at every step, as NumPy's float16 adds), so
  ``coalesce``, ``add``, ``to_dense`` and ``sum`` over some dims give the
  CPU kernels' bits;
- COO @ dense runs the CSR product of kernels/sparse/cuda.py on row pointers
  built from the sorted rows (float16 accumulates in float32 there, as on the
  CPU; float sums agree with the CPU's to rounding, not bits);
- ``mul`` by a scalar is one thread per value; by a COO or dense tensor it
  gathers the matched values and multiplies them with the dense CUDA kernel;
- ``sum`` of everything is the dense CUDA sum of the values (a tree order);
- the gradients of ``sparse_coo_mm`` are the CSR ones (``sparse_mm_grads_cuda``)
  on the sorted entries, scattered back to the original order.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from dispatch_jit.autograd.kernel import Derivative, Grad
from dispatch_jit.cuda.array import empty, from_host
from dispatch_jit.cuda.codegen import grid_stride
from dispatch_jit.cuda.copy import contiguous_copy, copy_into, fill
from dispatch_jit.cuda.index import gather, scatter
from dispatch_jit.cuda.launch import launch as _launch
from dispatch_jit.dtypes import result_type
from dispatch_jit.sparse_base import host_array
from dispatch_jit.sparse_coo import make_coo
from dispatch_jit.tensor import wrap

from . import cuda
from .coo import _check_operand, coo_dense_grad_cpu, coo_values_grad_cpu, linear_positions, row_plan, scalar_of
from .cuda import _acc_type, _k, _plain, csr_matmul_cuda, sparse_mm_grads_cuda

__all__ = ["CUDA_COO", "SPARSE_COO_MM_DERIVATIVE", "coalesce_cuda", "dense_to_coo_cuda", "to_dense_coo_cuda",
           "coo_mm_grads_cuda", "sparse_coo_mm_cuda"]

_SEGSUM = grid_stride("coo_segsum(perm, starts, pos, val, out, nu)", "nu", """\
p = pos[u]
s = out[p]
for k in range(starts[u], starts[u + 1]):
    s = _dt(_acc(s) + _acc(val[perm[k]]))
out[p] = s
""", index="u")


def _step_type(dt: np.dtype):
    """What one addition computes in: the CPU's np.add.at adds in the dtype itself (float16 through
    float32, rounded each step); integers and bools wrap/saturate as the dtype's cast does."""
    return _acc_type(dt) if dt.kind != "c" else dt.type


def _plan(hidx: np.ndarray, shape: tuple):
    """(perm, starts, positions): the stable order of the entries by row-major position, where each
    run of equal positions starts (plus the end), and each run's position."""
    lin = linear_positions(hidx, shape)
    perm = np.argsort(lin, kind="stable")
    sl = lin[perm]
    first = np.ones(sl.shape[0], dtype=bool)
    first[1:] = sl[1:] != sl[:-1]
    starts = np.append(np.flatnonzero(first), sl.shape[0]).astype(np.int64)
    return perm.astype(np.int64), starts, sl[first]


def _segsum(out, pos: np.ndarray, perm: np.ndarray, starts: np.ndarray, val) -> None:
    """``out.flat[pos[u]] += val[perm[starts[u]:starts[u + 1]]]`` one by one, in order."""
    nu = pos.shape[0]
    if not nu:
        return
    dev = out.device_index
    up = [from_host(a, dev) for a in (perm, starts, pos)]
    dt = out.dtype
    _launch(_k(_SEGSUM, "coo_segsum", _acc=_step_type(dt), _dt=dt.type), nu, dev, up[0].storage.buf,
            up[1].storage.buf, up[2].storage.buf, val.storage.buf, out.storage.buf, nu)


def coalesce_cuda(idx, vals, shape: tuple):
    """(indices, values) on the device: sorted, unique positions and their summed values, as
    sparse_coo.coalesce_arrays (the same bits)."""
    hidx = host_array(idx)
    dev = vals.device_index
    lin = linear_positions(hidx, shape)
    if lin.size < 2 or np.all(lin[1:] > lin[:-1]):
        return (idx if idx is not hidx else from_host(hidx, dev)), vals
    perm, starts, uniq = _plan(hidx, shape)
    out = empty((uniq.shape[0],), vals.dtype, dev)
    fill(out, 0)
    _segsum(out, np.arange(uniq.shape[0], dtype=np.int64), perm, starts, _plain(vals))
    new_idx = np.array(np.unravel_index(uniq, shape), dtype=np.int64).reshape(len(shape), -1)
    return from_host(new_idx, dev), out


def dense_to_coo_cuda(a):
    """(indices, values) on the device of the dense CudaArray ``a`` (exact zeros dropped, row-major):
    the CSR conversion of kernels/sparse/cuda.py on ``a`` seen as (rows, last dim)."""
    shape = a.shape
    cols = shape[-1] if shape else 1
    rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
    if not a.flags.c_contiguous:
        a = contiguous_copy(a)
    crow, col, val = cuda.dense_to_csr(a.view_as(lambda l: l.reshape(rows, cols)))
    crow, col = crow.to_host(), col.to_host()
    lin = np.repeat(np.arange(rows, dtype=np.int64), np.diff(crow)) * cols + col
    if shape:
        idx = np.array(np.unravel_index(lin, shape), dtype=np.int64).reshape(len(shape), -1)
    else:
        idx = np.zeros((0, lin.shape[0]), dtype=np.int64)
    return from_host(idx, a.device_index), val


def to_dense_coo_cuda(x):
    """aten::to_dense at SparseCUDA: zeros, then each position's entries added in order (the CPU's
    np.add.at; a coalesced tensor's are single stores)."""
    v = _plain(x._data)
    out = empty(x._shape, v.dtype, v.device_index)
    fill(out, 0)
    if v.shape[0]:
        perm, starts, pos = _plan(host_array(x._idx), x._shape)
        _segsum(out, pos, perm, starts, v)
    return wrap(out)


# -- the product and its gradients --------------------------------------------------------------------------
_ROWS_UNSORTED = grid_stride("coo_rows_unsorted(r, flag, n)", "n - 1", """\
if r[i + 1] < r[i]:
    flag[0] = 1
""")

_ROW_POINTERS = grid_stride("coo_row_pointers(r, crow, nnz, rows)", "rows + 1", """\
lo = 0
hi = nnz
while lo < hi:
    mid = (lo + hi) // 2
    if r[mid] < i:
        lo = mid + 1
    else:
        hi = mid
crow[i] = lo
""")


def _csr_parts(idx, rows: int, dev):
    """(crow, col, perm) for the product: row pointers and columns on the device, and the
    permutation that sorts the entries by row (host; None when they are in row order already).
    Rows in order (a coalesced tensor's, or a transposed one's that happen to be) stay on the
    device: one flag comes back, the row pointers are binary searches; otherwise the indices
    make the host round trip of ``row_plan`` (a stable counting sort, as the CPU's)."""
    nnz = idx.shape[1]
    r = _plain(idx.view_as(lambda l: l[0]))
    if nnz > 1:
        flag = empty((1,), np.int64, dev)
        fill(flag, 0)
        _launch(_k(_ROWS_UNSORTED, "coo_rows_unsorted"), nnz - 1, dev, r.storage.buf, flag.storage.buf, nnz)
        if flag.to_host()[0]:
            crow, col, perm = row_plan(host_array(idx), rows)
            return from_host(crow, dev), from_host(col, dev), perm
    crow = empty((rows + 1,), np.int64, dev)
    _launch(_k(_ROW_POINTERS, "coo_row_pointers"), rows + 1, dev, r.storage.buf, crow.storage.buf, nnz, rows)
    return crow, _plain(idx.view_as(lambda l: l[1])), None


def _sorted_values(v, perm):
    return v if perm is None else gather(v, (perm,))


def _mm_cuda(indices, values, dense, rows, cols, npdt):
    _check_operand(rows, cols, dense.shape)
    v = _plain(values._data, npdt)
    crow, col, perm = _csr_parts(indices._data, rows, v.device_index)
    return wrap(csr_matmul_cuda(crow, col, _sorted_values(v, perm), dense._data, cols))


def sparse_coo_mm_cuda(indices, values, dense, rows, cols):
    """aten::sparse_coo_mm at CUDA (below autograd)."""
    return _mm_cuda(indices, values, dense, rows, cols, result_type(values.dtype, dense.dtype).np)


def coo_mm_grads_cuda(idx, vals, dense, g, want=(True, True)):
    """(None, grad of values, grad of dense) of ``sparse_coo_mm`` on CUDA, in g's dtype; only those
    ``want`` flags (values, dense), None for the others."""
    rows = g.shape[0]
    crow, col, perm = _csr_parts(idx, rows, g._data.device_index)
    v = _sorted_values(_plain(vals._data, g._data.dtype), perm)
    gv, gd = sparse_mm_grads_cuda(crow, col, wrap(v), dense, g, want)
    if perm is not None and gv is not None:
        back = empty(gv.shape, gv._data.dtype, gv._data.device_index)
        scatter(back, (perm,), gv._data)
        gv = wrap(back)
    return None, gv, gd


def _values_grad(g, s, c):
    if g.is_cuda:
        return coo_mm_grads_cuda(s["indices"]._data, s["values"], s["dense"], g, (True, False))[1]
    return coo_values_grad_cpu(g, s, c)


def _dense_grad(g, s, c):
    if g.is_cuda:
        return coo_mm_grads_cuda(s["indices"]._data, s["values"], s["dense"], g, (False, True))[2]
    return coo_dense_grad_cpu(g, s, c)


# the derivative of aten::sparse_coo_mm on either device (here, as this module imports coo.py): one row per
# input, so that a call whose values do not require grad (a fixed adjacency matrix) computes only A^T @ g
SPARSE_COO_MM_DERIVATIVE = Derivative("SparseCooMmBackward", (
    Grad(lambda g, s, c: None),
    Grad(_values_grad, ("indices", "values", "dense")),
    Grad(_dense_grad, ("indices", "values", "dense"))), unbroadcast=False)


# -- add, mul, sum ------------------------------------------------------------------------------------------
def _scaled(y, alpha, npdt):
    """y's values in ``npdt``, times ``alpha`` (rounded once, as the CPU's ``v * alpha``)."""
    return cuda._mul_scalar(y, alpha, npdt)._data if alpha != 1 else _plain(y._data, npdt)


def _add_coo_cuda(x, y, alpha, npdt):
    hidx = np.concatenate([host_array(x._idx), host_array(y._idx)], axis=1)
    n1, n2 = x._data.shape[0], y._data.shape[0]
    dev = x._data.device_index
    vals = empty((n1 + n2,), npdt, dev)
    if n1:
        copy_into(vals.view_as(lambda l: l[:n1]), x._data)
    if n2:
        copy_into(vals.view_as(lambda l: l[n1:]), _scaled(y, alpha, npdt))
    idx, vals = coalesce_cuda(hidx, vals, x._shape)
    return make_coo(idx, vals, x._shape, True)


def _add_dense_cuda(x, y, alpha, npdt):
    res = contiguous_copy(x._data, npdt)
    if y._data.shape[0]:
        perm, starts, pos = _plan(host_array(y._idx), y._shape)
        _segsum(res, pos, perm, starts, _plain(_scaled(y, alpha, npdt)))
    return wrap(res)


def _mul_scalar_cuda(x, y, npdt):
    return make_coo(x._idx, cuda._mul_scalar(x, scalar_of(y), npdt), x._shape, x._coalesced)


def _mul_coo_cuda(x, y, npdt):
    cx, cy = x.coalesce(), y.coalesce()
    hx = host_array(cx._idx)
    _, i, j = np.intersect1d(linear_positions(hx, x._shape), linear_positions(host_array(cy._idx), y._shape),
                             assume_unique=True, return_indices=True)
    a = wrap(gather(_plain(cx._data, npdt), (i.astype(np.int64),)))
    b = wrap(gather(_plain(cy._data, npdt), (j.astype(np.int64),)))
    idx = from_host(np.ascontiguousarray(hx[:, i]), x._data.device_index)
    return make_coo(idx, a * b, x._shape, True)


def _mul_dense_cuda(x, y, npdt):
    d = y._data if y._data.dtype == npdt else contiguous_copy(y._data, npdt)
    d = d.view_as(lambda l: np.broadcast_to(l, x._shape))
    picked = wrap(gather(d, tuple(host_array(x._idx))))
    return make_coo(x._idx, wrap(_plain(x._data, npdt)) * picked, x._shape, x._coalesced)


def _sum_all_cuda(x, to):
    return cuda._sum_all(x, to, False)


def _sum_dims_cuda(x, keep, shape, to):
    hidx = np.ascontiguousarray(host_array(x._idx)[keep])
    idx, vals = coalesce_cuda(hidx, _plain(x._data, to), shape)
    return make_coo(idx, vals, shape, True)


CUDA_COO = SimpleNamespace(device="cuda", mm=_mm_cuda, add_coo=_add_coo_cuda, add_dense=_add_dense_cuda,
                           mul_scalar=_mul_scalar_cuda, mul_coo=_mul_coo_cuda, mul_dense=_mul_dense_cuda,
                           sum_all=_sum_all_cuda, sum_dims=_sum_dims_cuda)
