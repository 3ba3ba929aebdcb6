"""Sparse CSR ops as data: their argument handling, written once for both backends.

Each class is one op at a SparseCsr key.  ``specialize`` checks the call's
metadata once per signature (operand kinds, CSR-ness, result dtype) and
records the compiled dtype; the returned ``run`` checks the values once per
call (``out=``, shapes) and hands the backend only what it computes.  The
backend is a small object of functions (cpu.CPU, cuda.CUDA): the CPU's
Numba loops over NumPy arrays or the CUDA's grid-stride kernels over
device buffers.
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.broadcast import broadcast_shapes
from dispatch_jit.dtypes import as_dtype, result_type
from dispatch_jit.errors import DTypeError, SchemaError, ShapeError
from dispatch_jit.registry import CompiledSignature
from dispatch_jit.sparse import _make

__all__ = ["SparseMatmul", "SparseAdd", "SparseMul", "SparseSum", "record", "check_float_or_int",
           "check_matmul_operand"]


def record(call, name: str, dt) -> None:
    """Note ``dt`` among the op's compiled dtypes under the kernel's name (``dj.cache_info``)."""
    call.op.note_compiled(name, CompiledSignature((dt.name,)))


def check_float_or_int(dt, opname, layout: str = "CSR"):
    if dt.category < 1 or dt.category > 2:
        raise DTypeError(f"{opname}: sparse {layout} kernels support integer and floating dtypes, got {dt.name}; "
                         f"cast the operands (e.g. .to(dj.float32))")


def check_matmul_operand(rows: int, ncols: int, shape: tuple, layout: str = "CSR") -> None:
    """CSR or COO (rows, ncols) @ b: every backend's rule for the dense operand's ``shape``."""
    if len(shape) not in (1, 2) or shape[0] != ncols:
        raise ShapeError(f"matmul: a sparse {layout} matrix of shape ({rows}, {ncols}) cannot multiply a tensor of "
                         f"shape {shape}; expected ({ncols},) or ({ncols}, n)")


def _what(m, csr_bits: int) -> str:
    if m.kind != "tensor":
        return m.kind
    return "CSR" if m.keyset & csr_bits else "dense"


def _no_out(opname: str, out) -> None:
    if out is not None:
        raise SchemaError(f"{opname}: out= is not supported for sparse CSR tensors")


class _SparseOp:
    """One op at ``SparseCsr<device>``: the device's key bits and its compute functions."""

    op = ""

    def __init__(self, device: str, csr_bits: int, backend):
        self.bits, self.backend = csr_bits, backend
        self.__name__ = f"sparse_csr_{self.op}_{device}"


class SparseMatmul(_SparseOp):
    """aten::matmul: CSR @ dense (2-D or 1-D) -> dense."""

    op = "matmul"

    def specialize(self, call):
        a, b, bits = call.metas[0], call.metas[1], self.bits
        if a.kind != "tensor" or b.kind != "tensor" or not a.keyset & bits:
            raise SchemaError(f"matmul with sparse CSR tensors supports only CSR @ dense (got {_what(a, bits)} @ "
                              f"{_what(b, bits)}); convert with .to_dense()")
        if b.keyset & bits:
            raise SchemaError("matmul: CSR @ CSR is not implemented; convert one operand with .to_dense()")
        dt = result_type(a.dtype, b.dtype)
        check_float_or_int(dt, "matmul")
        record(call, self.__name__, dt)
        npdt, matmul = dt.np, self.backend.matmul

        def run(x, y):
            return matmul(x, y, npdt)
        return run


class SparseAdd(_SparseOp):
    """aten::add.Tensor: CSR + alpha * CSR -> CSR."""

    op = "add"

    def specialize(self, call):
        a, b, bits = call.metas[0], call.metas[1], self.bits
        if not (a.kind == "tensor" and b.kind == "tensor" and a.keyset & b.keyset & bits):
            raise SchemaError(f"add with sparse CSR tensors supports only CSR + CSR (got {_what(a, bits)} + "
                              f"{_what(b, bits)}); convert with .to_dense()")
        dt = result_type(a.dtype, b.dtype)
        check_float_or_int(dt, "add")
        record(call, self.__name__, dt)
        npdt, add = dt.np, self.backend.add

        def run(x, y, alpha=1, out=None):
            _no_out("add", out)
            if x._shape != y._shape:
                raise ShapeError(f"add: sparse CSR shapes {x._shape} and {y._shape} must match")
            crow, col, val = add(x, y, npdt.type(alpha), npdt)
            return _make(crow, col, val, x._shape)
        return run


class SparseMul(_SparseOp):
    """aten::mul.Tensor: CSR * scalar (or 0-d tensor) and CSR * dense broadcast to the CSR's
    shape -> CSR with the same pattern (either operand may be the CSR one)."""

    op = "mul"

    def specialize(self, call):
        a, b = call.metas[0], call.metas[1]
        swap = not (a.kind == "tensor" and a.keyset & self.bits)
        s, o = (b, a) if swap else (a, b)
        if o.kind == "tensor" and o.keyset & self.bits:
            raise SchemaError("mul: CSR * CSR is not implemented; convert one operand with .to_dense()")
        if o.kind == "scalar":
            dt = result_type(s.dtype, o.pytype(0))
        elif o.kind == "tensor":
            dt = result_type(s.dtype, o.dtype) if o.ndim else result_type(s.dtype, o.dtype.np.type(0))
        else:
            raise SchemaError(f"mul: cannot multiply a sparse CSR tensor by {o.kind}")
        check_float_or_int(dt, "mul")
        record(call, self.__name__, dt)
        npdt, dense_other = dt.np, o.kind == "tensor" and o.ndim > 0
        by_scalar, by_dense = self.backend.mul_scalar, self.backend.mul_dense

        def run(x, y, out=None):
            _no_out("mul", out)
            if swap:
                x, y = y, x
            if not dense_other:
                return _make(x._crow, x._col, by_scalar(x, y, npdt), x._shape)
            try:
                fits = broadcast_shapes(tuple(y.shape), x._shape) == x._shape
            except ValueError:
                fits = False
            if not fits:
                raise ShapeError(f"mul: a dense operand of shape {y.shape} does not broadcast to the sparse CSR "
                                 f"shape {x._shape}")
            return _make(x._crow, x._col, by_dense(x, y, npdt), x._shape)
        return run


class SparseSum(_SparseOp):
    """aten::sum: over everything, or along axis 0 or 1 -> dense.  Integer sums accumulate
    in int64, as PyTorch's do; ``dtype=`` casts the values first."""

    op = "sum"

    def specialize(self, call):
        record(call, self.__name__, call.metas[0].dtype)
        backend = self.backend

        def run(x, axis=None, keepdims=False, dtype=None):
            v = x._data
            if dtype is not None:
                to = as_dtype(dtype).np
            elif v.dtype.kind in "biu":
                to = np.dtype(np.int64)
            else:
                to = None
            axes = (0, 1) if axis is None else tuple(sorted(a % 2 for a in ((axis,) if isinstance(axis, int)
                                                                          else axis)))
            if axes == (0, 1) or axes == ():
                return backend.sum_all(x, to, keepdims)
            if axes == (1,):
                return backend.sum_rows(x, to, keepdims)
            return backend.sum_cols(x, to, keepdims)
        return run
