"""CUDA copies: strided copy with broadcasting and dtype conversion, and fill.

These are the primitives under ``.to(dtype)``, ``.contiguous()``,
``clone``, ``cat``, ``t[i] = v`` and reshape-that-must-copy on CUDA
tensors.  One generated kernel per (ndim, source dtype, destination dtype,
contiguity), compiled lazily.
"""

from __future__ import annotations

import numpy as np

from .array import CudaArray, empty
from .launch import launch

from .codegen import compile_cuda, grid_stride, operand_args, operand_params, unravel

__all__ = ["copy_into", "fill", "contiguous_copy", "astype", "cast_expr"]


def cast_expr(src: str, sdt: np.dtype, ddt: np.dtype) -> str:
    """Scalar conversion ``src`` (of dtype sdt) -> ddt, as NumPy's unsafe cast does."""
    if sdt == ddt:
        return src
    if ddt == np.bool_:
        return f"({src} != 0)"
    if sdt.kind == "c" and ddt.kind != "c":
        src = f"{src}.real"
    if sdt == np.bool_:
        src = f"(1 if {src} else 0)"
    return f"_dt({src})"


def _copy_kernel(ndim: int, sdt: np.dtype, ddt: np.dtype, contiguous: bool):
    ops = ["d", "s"]
    params = operand_params("d", ndim) + operand_params("s", ndim) + [f"n{k}" for k in range(ndim)] + ["total"]
    body = unravel(ndim, ops, "", contiguous=tuple(ops) if contiguous else ())
    body.append(f"d[d_k] = {cast_expr('s[s_k]', sdt, ddt)}")
    src = grid_stride(f"copy_kernel({', '.join(params)})", "total", "\n".join(body))
    return compile_cuda(src, "copy_kernel", {"_dt": ddt.type})


def copy_into(dst: CudaArray, src: CudaArray) -> None:
    """``dst[...] = src``: src is broadcast to dst's shape and converted to its dtype."""
    if src.shape != dst.shape:
        src = src.view_as(lambda l: np.broadcast_to(l, dst.shape))
    n = dst.size
    if n == 0:
        return
    nd = dst.ndim
    contiguous = dst.flags.c_contiguous and src.flags.c_contiguous
    if contiguous:
        nd_k, dst_args, src_args, shape = 0, [dst.storage.buf, dst.offset], [src.storage.buf, src.offset], ()
    else:
        nd_k, dst_args, src_args, shape = nd, operand_args(dst, nd), operand_args(src, nd), dst.shape
    k = _copy_kernel(nd_k, src.dtype, dst.dtype, contiguous)
    launch(k, n, dst.device_index, *dst_args, *src_args, *shape, n)


def _fill_kernel(ndim: int, ddt: np.dtype, contiguous: bool):
    params = operand_params("d", ndim) + ["v"] + [f"n{k}" for k in range(ndim)] + ["total"]
    body = unravel(ndim, ["d"], "", contiguous=("d",) if contiguous else ()) + ["d[d_k] = v"]
    return compile_cuda(grid_stride(f"fill_kernel({', '.join(params)})", "total", "\n".join(body)), "fill_kernel")


def fill(dst: CudaArray, value) -> None:
    """Set every element of ``dst`` to ``value`` (converted to dst's dtype)."""
    n = dst.size
    if n == 0:
        return
    dt = dst.dtype
    v = dt.type(value) if dt.kind != "b" else np.bool_(bool(value))
    if dst.flags.c_contiguous:
        k, args = _fill_kernel(0, dt, True), [dst.storage.buf, dst.offset, v, n]
    else:
        k, args = _fill_kernel(dst.ndim, dt, False), [*operand_args(dst, dst.ndim), v, *dst.shape, n]
    launch(k, n, dst.device_index, *args)


def contiguous_copy(a: CudaArray, dtype=None) -> CudaArray:
    """A new C-contiguous device array with a's values (converted to ``dtype``)."""
    out = empty(a.shape, a.dtype if dtype is None else np.dtype(dtype), a.device_index)
    copy_into(out, a)
    return out


def astype(a: CudaArray, dtype) -> CudaArray:
    return contiguous_copy(a, dtype)
