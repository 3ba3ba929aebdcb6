"""CUDA advanced indexing: the gather, scatter and scatter-add kernels of ``aten::index`` and
``index_put_`` (kernels/indexing/advanced.py's CUDA kernels).

Basic indices (ints, slices, None, ``...``) are no business of this module: they are the view
ops ``select``/``slice``/``unsqueeze``, whose CUDA kernels (kernels/shape) compute the view on
the tensor's layout.  Advanced indices (integer arrays, boolean masks) are turned into the
flat element positions they select, on the host, with NumPy's own indexing rules: the position of element (i0, i1, ...) is
``offset + i0*s0 + i1*s1 + ...``, so indexing one zero-stride broadcast
``arange`` per dimension and summing gives the positions without ever
materializing the source.  Index tensors on the GPU are copied to the host
for that (a boolean mask must be anyway: the result's size depends on it;
PyTorch synchronizes there too).  Then one kernel gathers, scatters or
scatter-adds (with atomics, so repeated indices accumulate) on the device.
"""

from __future__ import annotations

import numpy as np

from . import array as cuda_array
from .array import CudaArray
from .launch import launch
from ..errors import DTypeError

from .codegen import compile_cuda, grid_stride
from .copy import cast_expr

__all__ = ["gather", "scatter", "scatter_add"]


def _positions(arr: CudaArray, index) -> np.ndarray:
    """Flat buffer positions of the elements ``arr[index]`` selects (int64, the result's shape)."""
    shape, strides = arr.shape, arr.elem_strides()
    pos = np.full((), arr.offset, np.int64)
    comps = []
    for d, (n, s) in enumerate(zip(shape, strides)):
        c = (np.arange(n, dtype=np.int64) * s).reshape([-1 if k == d else 1 for k in range(len(shape))])
        comps.append(np.broadcast_to(c, shape))
    if not comps:
        return np.asarray(np.broadcast_to(pos, ())[index], np.int64)
    for c in comps:
        pos = pos + c[index]
    return np.ascontiguousarray(pos, np.int64)


_BODIES = {
    # out[i] = src[pos[i]]
    "gather": "o[i] = {cast}",
    # dst[pos[i]] = src[src_o + i * src_step] (src_step 0: one value for all)
    "scatter": "o[p[i]] = {cast}",
    "scatter_add": "cuda.atomic.add(o, p[i], {cast})",
}


def _index_kernel(kind: str, sdt: np.dtype, ddt: np.dtype):
    read = "s[p[i]]" if kind == "gather" else "s[s_o + i * s_step]"
    body = _BODIES[kind].format(cast=cast_expr(read, np.dtype(sdt), np.dtype(ddt)))
    return compile_cuda(grid_stride("index_kernel(o, s, p, s_o, s_step, total)", "total", body), "index_kernel",
                        {"_dt": np.dtype(ddt).type})


def _scatter(kind: str, arr: CudaArray, pos: np.ndarray, src: CudaArray) -> None:
    if src.shape != pos.shape:
        src = src.view_as(lambda l: np.broadcast_to(l, pos.shape))
    if not src.flags.c_contiguous:
        from .copy import contiguous_copy
        src = contiguous_copy(src)
    dpos = cuda_array.from_host(pos.reshape(-1), arr.device_index)
    k = _index_kernel(kind, src.dtype, arr.dtype)
    launch(k, pos.size, arr.device_index, arr.storage.buf, src.storage.buf, dpos.storage.buf, src.offset, 1,
           pos.size)


def gather(arr: CudaArray, items: tuple) -> CudaArray:
    """``arr[items]`` for an advanced index of host arrays and slices (aten::index's CUDA kernel):
    a new array, gathered on the device."""
    pos = _positions(arr, items)
    out = cuda_array.empty(pos.shape, arr.dtype, arr.device_index)
    if pos.size:
        dpos = cuda_array.from_host(pos, arr.device_index)
        k = _index_kernel("gather", arr.dtype, arr.dtype)
        launch(k, pos.size, arr.device_index, out.storage.buf, arr.storage.buf, dpos.storage.buf, 0, 0, pos.size)
    return out


def scatter(arr: CudaArray, items: tuple, src: CudaArray) -> None:
    """``arr[items] = src`` (src broadcast to the indexed shape; aten::index_put_'s CUDA kernel)."""
    pos = _positions(arr, items)
    if pos.size:
        _scatter("scatter", arr, pos, src)


def scatter_add(arr: CudaArray, items: tuple, src: CudaArray) -> None:
    """``arr[items] += src`` where repeated positions accumulate (np.add.at; index_put_ with accumulate)."""
    if arr.dtype.kind == "c" or arr.dtype == np.float16 or arr.dtype == np.bool_:
        raise DTypeError(f"index_put_(accumulate=True) on CUDA needs an atomic add, which {arr.dtype} lacks; "
                         f"accumulate in float32/float64")
    pos = _positions(arr, items)
    if pos.size:
        _scatter("scatter_add", arr, pos, src)
