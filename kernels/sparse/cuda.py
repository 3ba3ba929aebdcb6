"""SparseCsrCUDA kernels: the CPU's sparse CSR ops (kernels/sparse/cpu.py) on device arrays.

A CUDA CSR tensor's ``_crow`` / ``_col`` are int64 CudaArrays and its values a
CUDA Tensor; these kernels read them in place.  Semantics, dtype rules and
error messages are the CPU kernels' (the ``specialize`` checks are shared).

- CSR @ dense 2-D: one thread per output element (row i, column c), looping
  over row i's nonzeros (consecutive threads share a row and read
  consecutive columns of the dense operand: coalesced); CSR @ vector: one
  thread per row.  The dense operand is read in place through its strides.
- CSR + CSR: one thread per row counts the merged row, the counts come back
  to the host (the output's nnz sizes its allocation: one synchronization,
  as in PyTorch), are prefix-summed there and uploaded, then one thread per
  row merges.  ``to_sparse_csr`` of a dense CUDA tensor works the same way.
- CSR * scalar (per nonzero), CSR * dense broadcast (one thread per row);
- sum: all -> the dense CUDA sum of the values; along axis 1 -> one thread
  per row; along axis 0 -> atomic adds (int32/int64/float32/float64), else
  one thread per column scanning the column indices;
- to_dense: fill with zeros, then one thread per row scatters.

Accumulation: float16 accumulates in float32 and rounds once at the store;
integers accumulate in int64 and store truncated (the same bits as the
CPU's wrapping in-dtype sums); other dtypes in their own.

Autograd of ``aten::sparse_csr_mm`` on CUDA (``sparse_mm_grads_cuda``):
the dense gradient A^T @ g scatters with atomic adds (float32 / float64;
float16 goes through a float32 buffer); the values' gradient (SDDMM) is one
thread per row.  Float sums run in a different order from the CPU's
(atomics, fastmath there), so float results agree to rounding, not bits.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from dispatch_jit.cuda.array import empty, from_host
from dispatch_jit.cuda.codegen import compile_cuda, grid_stride
from dispatch_jit.cuda.copy import contiguous_copy, fill
from dispatch_jit.cuda.launch import launch as _launch
from dispatch_jit.dtypes import result_type
from dispatch_jit.errors import DTypeError
from dispatch_jit.registry import lookup
from dispatch_jit.tensor import Tensor, wrap

from . import merge
from .op import check_matmul_operand

__all__ = ["dense_to_csr", "csr_matmul_cuda", "sparse_mm_grads_cuda", "sparse_mm_cuda", "to_dense_cuda", "CUDA"]


def _acc_type(dt: np.dtype):
    dt = np.dtype(dt)
    if dt == np.float16:
        return np.float32
    if dt.kind in "iub":
        return np.int64
    return dt.type


def _plain(a, npdt=None):
    """A C-contiguous device array at offset 0 (converted to ``npdt``): kernels index it from 0."""
    if (npdt is None or a.dtype == npdt) and a.flags.c_contiguous and a.offset == 0:
        return a
    return contiguous_copy(a, npdt)


def _k(src: str, name: str, **g):
    return compile_cuda(src, name, g)


# --- dense -> CSR ----------------------------------------------------------------------------------

_COUNT_NZ = grid_stride("count_nz(a, a_o, a_s0, a_s1, counts, rows, cols)", "rows", """\
n = 0
p = a_o + i * a_s0
for j in range(cols):
    if a[p] != 0:
        n += 1
    p += a_s1
counts[i] = n
""")

_FILL_NZ = grid_stride("fill_nz(a, a_o, a_s0, a_s1, crow, col, val, rows, cols)", "rows", """\
o = crow[i]
p = a_o + i * a_s0
for j in range(cols):
    v = a[p]
    if v != 0:
        col[o] = j
        val[o] = v
        o += 1
    p += a_s1
""")


def _host_prefix(counts) -> tuple:
    """(crow on device, nnz): the per-row counts come back, are summed and go up again."""
    c = counts.to_host()
    crow = np.zeros(c.shape[0] + 1, dtype=np.int64)
    np.cumsum(c, out=crow[1:])
    return from_host(crow, counts.device_index), int(crow[-1])


def dense_to_csr(a):
    """(crow, col, values) device arrays of the dense 2-D CudaArray ``a`` (exact zeros dropped)."""
    rows, cols = a.shape
    dev = a.device_index
    s0, s1 = a.elem_strides()
    counts = empty((rows,), np.int64, dev)
    _launch(_k(_COUNT_NZ, "count_nz"), rows, dev, a.storage.buf, a.offset, s0, s1, counts.storage.buf, rows, cols)
    crow, nnz = _host_prefix(counts)
    col = empty((nnz,), np.int64, dev)
    val = empty((nnz,), a.dtype, dev)
    if nnz:
        _launch(_k(_FILL_NZ, "fill_nz"), rows, dev, a.storage.buf, a.offset, s0, s1, crow.storage.buf,
                col.storage.buf, val.storage.buf, rows, cols)
    return crow, col, val


# --- matmul ------------------------------------------------------------------------------------------

_MM = grid_stride("csr_mm(crow, col, val, b, b_o, b_s0, b_s1, out, rows, n)", "rows * n", """\
r = i // n
c = i - r * n
s = _acc(0)
for k in range(crow[r], crow[r + 1]):
    s += _acc(val[k]) * _acc(b[b_o + col[k] * b_s0 + c * b_s1])
out[i] = _dt(s)
""")

_MV = grid_stride("csr_mv(crow, col, val, x, x_o, x_s0, out, rows)", "rows", """\
s = _acc(0)
for k in range(crow[i], crow[i + 1]):
    s += _acc(val[k]) * _acc(x[x_o + col[k] * x_s0])
out[i] = _dt(s)
""")


def csr_matmul_cuda(crow, col, val, b, ncols: int):
    """CSR(crow, col, val) of shape (len(crow) - 1, ncols) @ b (1-D or 2-D CudaArray), val's dtype
    (b is converted to it)."""
    rows = crow.shape[0] - 1
    check_matmul_operand(rows, ncols, b.shape)
    dt = val.dtype
    dev = val.device_index
    if b.dtype != dt:
        b = contiguous_copy(b, dt)
    val = _plain(val)
    g = {"_acc": _acc_type(dt), "_dt": dt.type}
    if b.ndim == 1:
        out = empty((rows,), dt, dev)
        _launch(_k(_MV, "csr_mv", **g), rows, dev, crow.storage.buf, col.storage.buf, val.storage.buf,
                b.storage.buf, b.offset, b.elem_strides()[0], out.storage.buf, rows)
        return out
    n = b.shape[1]
    out = empty((rows, n), dt, dev)
    s0, s1 = b.elem_strides()
    _launch(_k(_MM, "csr_mm", **g), rows * n, dev, crow.storage.buf, col.storage.buf, val.storage.buf,
            b.storage.buf, b.offset, s0, s1, out.storage.buf, rows, n)
    return out


def _matmul(x, y, npdt):
    v = x._data if x._data.dtype == npdt else contiguous_copy(x._data, npdt)
    return wrap(csr_matmul_cuda(x._crow, x._col, v, y._data, x._shape[1]))


def sparse_mm_cuda(crow, col, values, dense, ncols):
    """aten::sparse_csr_mm at CUDA (below autograd)."""
    dt = result_type(values.dtype, dense.dtype)
    v = values._data if values._data.dtype == dt.np else contiguous_copy(values._data, dt.np)
    return wrap(csr_matmul_cuda(crow._data, col._data, v, dense._data, ncols))


# --- autograd of sparse_csr_mm ---------------------------------------------------------------------

_MM_T = grid_stride("csr_mm_t(crow, col, val, g, out, rows, n)", "rows * n", """\
r = i // n
c = i - r * n
gv = _acc(g[i])
for k in range(crow[r], crow[r + 1]):
    cuda.atomic.add(out, col[k] * n + c, _acc(val[k]) * gv)
""")

_SDDMM = grid_stride("csr_sddmm(crow, col, g, b, out, rows, n)", "rows", """\
for k in range(crow[i], crow[i + 1]):
    j = col[k]
    s = _acc(0)
    for c in range(n):
        s += _acc(g[i * n + c]) * _acc(b[j * n + c])
    out[k] = _dt(s)
""")


def sparse_mm_grads_cuda(crow, col, vals: Tensor, dense: Tensor, g: Tensor, want=(True, True)):
    """(grad of values, grad of dense) for ``CSR @ dense`` on CUDA, in g's dtype; only those the
    ``want`` flags ask for, None for the others."""
    ga = g._data
    npdt = ga.dtype
    if npdt.kind != "f":
        raise DTypeError(f"sparse_csr_mm backward: CUDA gradients support floating dtypes, got {npdt}")
    dev = ga.device_index
    d = dense._data
    d2 = d.view_as(lambda l: l.reshape(-1, 1)) if d.ndim == 1 else d
    g2 = ga.view_as(lambda l: l.reshape(-1, 1)) if ga.ndim == 1 else ga
    g2, d2 = _plain(g2, npdt), _plain(d2, npdt)
    v = _plain(vals._data, npdt)
    rows = crow.shape[0] - 1
    n = g2.shape[1]
    acc = np.float32 if npdt == np.float16 else npdt.type
    gv = gd = None
    if want[1]:
        gd = empty(d2.shape, acc, dev)
        fill(gd, 0)
        _launch(_k(_MM_T, "csr_mm_t", _acc=acc), rows * n, dev, crow.storage.buf, col.storage.buf, v.storage.buf,
                g2.storage.buf, gd.storage.buf, rows, n)
        if gd.dtype != npdt:
            gd = contiguous_copy(gd, npdt)
        gd = wrap(gd.view_as(lambda l: l.reshape(d.shape)))
    nnz = col.shape[0]
    if want[0]:
        gv = empty((nnz,), npdt, dev)
        if nnz:
            _launch(_k(_SDDMM, "csr_sddmm", _acc=_acc_type(npdt), _dt=npdt.type), rows, dev, crow.storage.buf,
                    col.storage.buf, g2.storage.buf, d2.storage.buf, gv.storage.buf, rows, n)
        gv = wrap(gv)
    return gv, gd


# --- add, mul, sum, to_dense -------------------------------------------------------------------------

_ADD_COUNT = grid_stride(merge.COUNT_SIGNATURE, "rows", merge.COUNT)
_ADD_FILL = grid_stride(merge.FILL_SIGNATURE, "rows", merge.FILL)


def _add(x, y, alpha, npdt):
    rows = x._shape[0]
    dev = x._data.device_index
    counts = empty((rows,), np.int64, dev)
    _launch(_k(_ADD_COUNT, "csr_add_count"), rows, dev, x._crow.storage.buf, x._col.storage.buf,
            y._crow.storage.buf, y._col.storage.buf, counts.storage.buf, rows)
    crow, nnz = _host_prefix(counts)
    col = empty((nnz,), np.int64, dev)
    val = empty((nnz,), npdt, dev)
    if nnz:
        va, vb = _plain(x._data, npdt), _plain(y._data, npdt)
        _launch(_k(_ADD_FILL, "csr_add_fill", _dt=npdt.type), rows, dev, x._crow.storage.buf,
                x._col.storage.buf, va.storage.buf, y._crow.storage.buf, y._col.storage.buf, vb.storage.buf,
                alpha, crow.storage.buf, col.storage.buf, val.storage.buf, rows)
    return crow, col, wrap(val)


_MUL_SCALAR = grid_stride("csr_mul_scalar(v, s, out, n)", "n", """\
out[i] = _dt(v[i] * s)
""")

_MUL_DENSE = grid_stride("csr_mul_dense(crow, col, val, d, d_o, d_s0, d_s1, out, rows)", "rows", """\
for k in range(crow[i], crow[i + 1]):
    out[k] = _dt(val[k] * d[d_o + i * d_s0 + col[k] * d_s1])
""")


def _mul_scalar(x, y, npdt):
    v = _plain(x._data, npdt)
    nnz = v.shape[0]
    res = empty((nnz,), npdt, v.device_index)
    k = y._host().item() if isinstance(y, Tensor) else y    # a 0-d tensor: read once
    _launch(_k(_MUL_SCALAR, "csr_mul_scalar", _dt=npdt.type), nnz, v.device_index, v.storage.buf, npdt.type(k),
            res.storage.buf, nnz)
    return wrap(res)


def _mul_by_dense(x, y, npdt):
    v = _plain(x._data, npdt)
    dev = v.device_index
    res = empty((v.shape[0],), npdt, dev)
    d = y._data if y._data.dtype == npdt else contiguous_copy(y._data, npdt)
    d = d.view_as(lambda l: np.broadcast_to(l, x._shape))
    s0, s1 = d.elem_strides()
    _launch(_k(_MUL_DENSE, "csr_mul_dense", _dt=npdt.type), x._shape[0], dev, x._crow.storage.buf,
            x._col.storage.buf, v.storage.buf, d.storage.buf, d.offset, s0, s1, res.storage.buf, x._shape[0])
    return wrap(res)


_SUM_ROWS = grid_stride("csr_sum_rows(crow, val, out, rows)", "rows", """\
s = _acc(0)
for k in range(crow[i], crow[i + 1]):
    s += _acc(val[k])
out[i] = _dt(s)
""")

_SUM_COLS_ATOMIC = grid_stride("csr_sum_cols_atomic(col, val, out, nnz)", "nnz", """\
cuda.atomic.add(out, col[i], val[i])
""")

_SUM_COLS_SCAN = grid_stride("csr_sum_cols_scan(col, val, out, nnz, cols)", "cols", """\
s = _acc(0)
for k in range(nnz):
    if col[k] == j:
        s += _acc(val[k])
out[j] = _dt(s)
""", index="j")

_ATOMIC_ADD_DTYPES = {np.dtype(t) for t in (np.int32, np.int64, np.uint32, np.uint64, np.float32, np.float64)}


def _sum_all(x, to, keepdims):
    v = _plain(x._data, to)
    r = lookup("aten::sum").entry(wrap(v))
    if r.dtype.np != v.dtype:
        r = r.to(v.dtype)
    return r.reshape(1, 1) if keepdims else r


def _sum_along_rows(x, to, keepdims):
    v = _plain(x._data, to)
    rows, dt = x._shape[0], v.dtype
    r = empty((rows,), dt, v.device_index)
    _launch(_k(_SUM_ROWS, "csr_sum_rows", _acc=_acc_type(dt), _dt=dt.type), rows, v.device_index,
            x._crow.storage.buf, v.storage.buf, r.storage.buf, rows)
    return wrap(r.view_as(lambda l: l.reshape(rows, 1)) if keepdims else r)


def _sum_along_cols(x, to, keepdims):
    v = _plain(x._data, to)
    cols, dt, dev, nnz = x._shape[1], v.dtype, v.device_index, v.shape[0]
    r = empty((cols,), dt, dev)
    if dt in _ATOMIC_ADD_DTYPES:
        fill(r, 0)
        _launch(_k(_SUM_COLS_ATOMIC, "csr_sum_cols_atomic"), nnz, dev, x._col.storage.buf, v.storage.buf,
                r.storage.buf, nnz)
    else:
        _launch(_k(_SUM_COLS_SCAN, "csr_sum_cols_scan", _acc=_acc_type(dt), _dt=dt.type), cols, dev,
                x._col.storage.buf, v.storage.buf, r.storage.buf, nnz, cols)
    return wrap(r.view_as(lambda l: l.reshape(1, cols)) if keepdims else r)


_TO_DENSE = grid_stride("csr_to_dense(crow, col, val, out, rows, cols)", "rows", """\
for k in range(crow[i], crow[i + 1]):
    out[i * cols + col[k]] = val[k]
""")


def to_dense_cuda(x):
    v = _plain(x._data)
    rows, cols = x._shape
    dev = v.device_index
    out = empty((rows, cols), v.dtype, dev)
    fill(out, 0)
    _launch(_k(_TO_DENSE, "csr_to_dense"), rows, dev, x._crow.storage.buf, x._col.storage.buf, v.storage.buf,
            out.storage.buf, rows, cols)
    return wrap(out)



CUDA = SimpleNamespace(matmul=_matmul, add=_add, mul_scalar=_mul_scalar, mul_dense=_mul_by_dense,
                       sum_all=_sum_all, sum_rows=_sum_along_rows, sum_cols=_sum_along_cols)
