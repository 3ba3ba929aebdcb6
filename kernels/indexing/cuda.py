"""CUDA kernels for gather, scatter and scatter_add: one thread per index element, which turns
its flat position into coordinates of the index's shape (a division per dimension: a thread
has no neighbour to carry from), replaces the ``dim`` coordinate by the index value and reads
or writes through the element strides and offset of the other array.

A bad index is recorded (the largest failing position, by an atomic max: any one names a bad
value) and raised after the launch with the CPU kernels' message.  scatter_add adds atomically, so repeated indices accumulate; dtypes that CUDA
cannot add atomically (float16, bool, 8- and 16-bit integers) accumulate in float32 / int64 and
are cast back.  scatter with repeated indices keeps one of the writes (PyTorch documents the
choice as unspecified).  topk has no CUDA kernel yet (NoKernelError, README).
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.cuda.array import empty, from_host
from dispatch_jit.cuda.codegen import compile_cuda, grid_stride
from dispatch_jit.cuda.copy import contiguous_copy
from dispatch_jit.cuda.launch import launch
from dispatch_jit.errors import OutOfBoundsError
from dispatch_jit.tensor import Tensor, wrap

from .op import _ADD_AS, _check

__all__ = ["CUDA_KERNELS"]

# the offsets of one index element: ``x_off`` in x with the ``dim`` coordinate replaced by the
# index value (outside [0, size), negative too, as PyTorch's: recorded, and 0 read instead), ``s_off`` in src at the element itself
_OFFSETS = """\
rem = i
x_off = x_o
s_off = s_o
v = idx[i]
if v < 0 or v >= size:
    cuda.atomic.max(bad, 0, i)
    v = 0
for d in range(nd - 1, -1, -1):
    c = rem % ishape[d]
    rem //= ishape[d]
    x_off += (v if d == dim else c) * x_st[d]
    s_off += c * s_st[d]
"""
_SIG = "(x, x_o, x_st, idx, ishape, nd, dim, size, s, s_o, s_st, n, bad)"
_SRC = {
    "gather": grid_stride("gather" + _SIG, "n", _OFFSETS + "s[i] = x[x_off]\n"),
    "scatter": grid_stride("scatter" + _SIG, "n", _OFFSETS + "x[x_off] = s[s_off]\n"),
    "scatter_add": grid_stride("scatter_add" + _SIG, "n", _OFFSETS + "cuda.atomic.add(x, x_off, s[s_off])\n"),
}
# what CUDA's atomic add takes; other dtypes accumulate in these
_ATOMIC_AS = {**_ADD_AS, np.dtype(np.int8): np.int64, np.dtype(np.uint8): np.int64, np.dtype(np.int16): np.int64,
              np.dtype(np.uint16): np.int64, np.dtype(np.bool_): np.int64}


def _run(name: str, x, x_o: int, x_st, index, axis: int, s, s_o: int, s_st) -> None:
    dev = index._data.device_index
    idx = contiguous_copy(index._data, np.int64)
    ishape = tuple(index.shape) or (1,)
    n = int(np.prod(ishape))
    bad = from_host(np.array([-1], np.int64), dev)
    size = (tuple(x.shape) or (1,))[axis]
    # held in names until the launch returns: a temporary's block goes back to the caching
    # allocator at once, and the next upload would reuse it
    x_st, s_st = from_host(np.array(x_st or (0,), np.int64), dev), from_host(np.array(s_st or (0,), np.int64), dev)
    shape = from_host(np.array(ishape, np.int64), dev)
    launch(compile_cuda(_SRC[name], name), n, dev, x.buf, x_o, x_st.buf, idx.buf, shape.buf, len(ishape), axis, size,
           s.buf, s_o, s_st.buf, n, bad.buf)
    pos = int(bad.to_host()[0])
    if pos >= 0:
        value = int(idx.to_host().reshape(-1)[pos])
        hint = " (negative indices are refused, as PyTorch's; add the size to count from the end)" if value < 0 else ""
        raise OutOfBoundsError(f"{name}: index {value} is out of bounds for dimension of size {size}{hint}")


def gather(x, dim, index, sparse_grad=False):
    axis = _check("gather", x, dim, index)
    a = x._data
    out = empty(tuple(index.shape), a.dtype, a.device_index)
    _run("gather", a, a.offset, a.elem_strides(), index, axis, out, 0, _c_strides(index.shape or (1,)))
    return wrap(out)


def _c_strides(shape) -> tuple:
    st, acc = [], 1
    for s in reversed(tuple(shape)):
        st.append(acc)
        acc *= s
    return tuple(reversed(st))


def _scatter(op: str, accumulate: bool):
    def scatter(x, dim, index, src):
        axis = _check(op, x, dim, index, src)
        a = x._data
        compute = _ATOMIC_AS.get(a.dtype) if accumulate else None
        out = contiguous_copy(a, compute)            # a fresh C-contiguous copy: the result
        if isinstance(src, Tensor):
            s = src._data if compute is None else contiguous_copy(src._data, compute)
            s_o, s_st = s.offset, s.elem_strides()
        else:   # a Python number: PyTorch's scatter.value, cast to the input's dtype
            host = np.full(tuple(index.shape) or (1,), np.asarray(src).astype(a.dtype), dtype=compute or a.dtype)
            s = from_host(host, a.device_index)
            s_o, s_st = 0, _c_strides(host.shape)
        _run(op, out, 0, _c_strides(out.shape or (1,)), index, axis, s, s_o, s_st)
        if compute is not None:
            out = contiguous_copy(out, a.dtype) if a.dtype != np.bool_ else _to_bool(out)
        return wrap(out)
    scatter.__name__ = f"{op}_cuda"
    return scatter


def _to_bool(out):
    # PyTorch's bool scatter_add is an or: any nonzero count is True (a cast, as the CPU kernel's != 0)
    return contiguous_copy(out, np.bool_)


CUDA_KERNELS = {"gather": gather, "scatter": _scatter("scatter", False), "scatter_add": _scatter("scatter_add", True)}
