"""``aten::copy_``, PyTorch's: ``self``'s elements set from ``src``, broadcast to ``self``'s shape
and converted to its dtype.  The write of item assignment with a basic index (``t[1:, 0] = v``
is ``copy_`` into the view ``t[1:, 0]``, autograd/inplace.py) and so of ``fill_``/``zero_``, so
that each device's kernel does the store: NumPy's ``copyto`` on the CPU, the copy or fill kernel
of dispatch_jit/cuda/copy.py on a GPU.  Autograd is not this op's: item assignment records the
write itself (CopySlices, autograd/views.py), and calls it on detached tensors.

>>> import dispatch_jit as dj
>>> x = dj.zeros(2, 3)
>>> dj.ops.aten.copy_(x[0], dj.tensor([1, 2, 3]))
tensor([1., 2., 3.])
>>> x
tensor([[1., 2., 3.],
        [0., 0., 0.]])
"""

from __future__ import annotations

import numpy as np

from dispatch_jit import bf16
from dispatch_jit.errors import BroadcastError

__all__ = ["SCHEMAS", "CPU_KERNELS", "CUDA_KERNELS", "META_KERNELS"]

SCHEMAS = ["copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)"]


def _source(src, shape: tuple):
    """``src``'s array as it is stored into ``shape``: leading size-1 dims beyond ``shape``'s
    dropped (PyTorch's and NumPy's item assignment take ``t[0:2] = ones(1, 2)``), checked to
    broadcast."""
    a = src._data
    while a.ndim > len(shape) and a.shape[0] == 1:
        a = a[0] if a.ndim > 1 else a.reshape(())
    try:
        fits = np.broadcast_shapes(a.shape, shape) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise BroadcastError(f"shape mismatch: value tensor of shape {list(src.shape)} cannot be broadcast to "
                             f"indexing result of shape {list(shape)}")
    return a


def copy_cpu(self, src, non_blocking=False):
    dst = self._data
    a = _source(src, dst.shape)
    np.copyto(dst, a if a.dtype == dst.dtype else bf16.cast(a, dst.dtype))
    return self


def copy_cuda(self, src, non_blocking=False):
    """A 0-d host ``src`` (the dispatcher's one mixed-device case, a number) is a fill."""
    from dispatch_jit.cuda.copy import copy_into, fill
    dst = self._data
    a = _source(src, dst.shape)
    if a.__class__ is np.ndarray:
        # a bfloat16 number is a structured 0-d array, whose item() is a tuple of its word: fill by value
        fill(dst, a.item() if not bf16.is_bfloat16(a.dtype) else bf16.to_float32(a).item())
    else:
        copy_into(dst, a)
    return self


def copy_meta(self, src, non_blocking=False):
    _source(src, tuple(self.shape))
    return self


CPU_KERNELS = {"copy_": copy_cpu}
CUDA_KERNELS = {"copy_": copy_cuda}
META_KERNELS = {"copy_": copy_meta}
