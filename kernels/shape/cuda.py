"""CUDA kernels for views, shape ops, casts and copies.

A view of a CUDA tensor is computed by the very CPU kernel of shape/cpu.py run
on a *phantom* tensor: a CPU tensor whose array is the CUDA tensor's layout
(shape, strides and offset over no data, see dispatch_jit/cuda/array.py).
NumPy works out the view and the CPU kernel's checks and error messages
apply unchanged; the result's layout is then rebound to the device storage.
Only reshapes that NumPy would answer with a copy need care: they copy on
the device first.  Ops that move data (cat, stack, casts, clone) use the
copy kernels of dispatch_jit/cuda/copy.py.
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.cuda import array as cuda_array
from dispatch_jit.cuda.copy import contiguous_copy, copy_into
from dispatch_jit.tensor import Tensor, wrap, wrap_view

from . import cpu
from . import op as rules

__all__ = ["CUDA_KERNELS", "view_kernel"]


def _phantom(t: Tensor) -> Tensor:
    p = Tensor.__new__(Tensor)
    p._data = t._data.layout
    p._sig = 0
    return p


def _rebind(base: Tensor, source, r: Tensor) -> Tensor:
    return wrap_view(base, source.derive(r._data))


def view_kernel(cpu_kernel):
    """The CUDA form of a CPU view kernel that never copies (permute, expand, narrow, ...)."""
    def kernel(self, *args):
        return _rebind(self, self._data, cpu_kernel(_phantom(self), *args))
    kernel.__name__ = f"{cpu_kernel.__name__}_cuda"
    return kernel


def _can_view(layout: np.ndarray, shape) -> bool:
    try:
        v = layout.view()
        v.shape = tuple(shape)       # raises instead of copying
        return True
    except (ValueError, AttributeError, TypeError):
        return False


def _copying_kernel(cpu_kernel, rule):
    """reshape/flatten: a view when strides allow, else a contiguous device copy first."""
    def kernel(self, *args):
        a = self._data
        if _can_view(a.layout, rule(a.shape, *args)):     # the rule raises the CPU kernel's errors
            return _rebind(self, a, cpu_kernel(_phantom(self), *args))
        c = wrap(contiguous_copy(a))
        return _rebind(c, c._data, cpu_kernel(_phantom(c), *args))
    kernel.__name__ = f"{cpu_kernel.__name__}_cuda"
    return kernel


def cat(tensors, axis=0):
    dt = cpu.common_dtype(tensors, "cat")
    arrays, ax, shape = cpu.cat_plan([t._data for t in tensors], axis)
    out = cuda_array.empty(shape, dt.np, arrays[0].device_index)
    start = 0
    for a in arrays:
        n = a.shape[ax]
        if n:
            index = (slice(None),) * ax + (slice(start, start + n),)
            copy_into(out.view_as(lambda l: l[index]), a)
        start += n
    return wrap(out)


def stack(tensors, axis=0):
    cpu.common_dtype(tensors, "stack")
    ax = cpu.stack_axis([t._data for t in tensors], axis)
    return cat([view_kernel(cpu.unsqueeze)(t, ax) for t in tensors], ax)


to_dtype = cpu.casting(contiguous_copy)


def clone(self):
    return wrap(contiguous_copy(self._data))


_VIEWS = {"permute": cpu.permute, "transpose.int": cpu.transpose, "expand": cpu.expand, "squeeze": cpu.squeeze,
          "unsqueeze": cpu.unsqueeze, "narrow": cpu.narrow, "view": cpu.view}

# overload name -> kernel; registered at the CUDA key (shape/__init__.py)
CUDA_KERNELS = {
    **{name: view_kernel(k) for name, k in _VIEWS.items()},
    "reshape": _copying_kernel(cpu.reshape, rules.reshape),
    "flatten": _copying_kernel(cpu.flatten, rules.flatten),
    "cat": cat,
    "stack": stack,
    "to.dtype": to_dtype,
    "clone": clone,
}
