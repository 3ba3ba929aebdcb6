"""CUDA copies: strided copy with broadcasting and dtype conversion, and fill.

These are the primitives under ``.to(dtype)``, ``.contiguous()``,
``clone``, ``cat``, ``t[i] = v`` and reshape-that-must-copy on CUDA
tensors.  One generated kernel per (ndim, source dtype, destination dtype,
contiguity), compiled lazily.
"""

from __future__ import annotations

import numpy as np

from .. import bf16
from ..dtypes import BF16_STORAGE
from .array import CudaArray, empty
from .launch import launch
from .words import words

from .codegen import compile_cuda, grid_stride, operand_params, unravel

__all__ = ["copy_into", "fill", "contiguous_copy", "astype", "cast_expr"]

_F32 = np.dtype(np.float32)


def cast_expr(src: str, sdt: np.dtype, ddt: np.dtype) -> str:
    """Scalar conversion ``src`` (of dtype sdt) -> ddt, as NumPy's unsafe cast does; a bfloat16
    side is its uint16 word, converted as dispatch_jit/bf16.py's ``cast`` converts arrays
    (through float32 both ways, rounded to nearest even on the way in)."""
    if sdt == ddt:
        return src
    if sdt == BF16_STORAGE:
        return cast_expr(f"_bf16_load({src})", _F32, ddt)
    if ddt == BF16_STORAGE:
        if sdt.kind == "c":
            src = f"{src}.real"
        elif sdt == np.bool_:
            src = f"(1 if {src} else 0)"
        return f"_bf16_store(np.float32({src}))"
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


def _operand(a: CudaArray, nd: int) -> list:
    """(buffer, offset, strides...) of a copy's operand, a bfloat16 buffer as its words."""
    return [words(a.storage.buf), a.offset, *(a.elem_strides() if nd else ())]


def copy_into(dst: CudaArray, src: CudaArray) -> None:
    """``dst[...] = src``: src is broadcast to dst's shape and converted to its dtype."""
    if src.shape != dst.shape:
        src = src.view_as(lambda l: np.broadcast_to(l, dst.shape))
    n = dst.size
    if n == 0:
        return
    nd = dst.ndim
    contiguous = dst.flags.c_contiguous and src.flags.c_contiguous
    nd_k, shape = (0, ()) if contiguous else (nd, dst.shape)
    dst_args, src_args = _operand(dst, nd_k), _operand(src, nd_k)
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
    if dt == BF16_STORAGE:      # the value's word, rounded on the host
        dt, v = np.dtype(np.uint16), bf16.from_float32(np.asarray(value, np.float32)).view(np.uint16)[()]
    else:
        v = dt.type(value) if dt.kind != "b" else np.bool_(bool(value))
    if dst.flags.c_contiguous:
        k, args = _fill_kernel(0, dt, True), [*_operand(dst, 0), v, n]
    else:
        k, args = _fill_kernel(dst.ndim, dt, False), [*_operand(dst, dst.ndim), v, *dst.shape, n]
    launch(k, n, dst.device_index, *args)


def contiguous_copy(a: CudaArray, dtype=None) -> CudaArray:
    """A new C-contiguous device array with a's values (converted to ``dtype``)."""
    out = empty(a.shape, a.dtype if dtype is None else np.dtype(dtype), a.device_index)
    copy_into(out, a)
    return out


def astype(a: CudaArray, dtype) -> CudaArray:
    return contiguous_copy(a, dtype)
