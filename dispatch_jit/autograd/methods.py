"""The Tensor methods that autograd provides: ``backward``, ``register_hook``,
and indexing (``t[i]`` and ``t[i] = v``, recorded as ops on views); and ``zero_grads``,
the one body of ``Module.zero_grad`` and ``Optimizer.zero_grad``.

tensor.py sits below autograd and cannot import it, so these are defined here
and bound onto ``Tensor`` by dispatch_jit/_install.py, with the methods of the
op library (``METHODS`` maps each method name to its function).
"""

from __future__ import annotations

import numpy as np

from ..dtypes import can_cast, from_numpy_dtype, result_type
from ..errors import AutogradError, CastingError, ShapeError
from ..tensor import Tensor, bump_version
from ..writes import before_write
from .engine import run_backward
from .graph import edge_of
from .indexing import getitem, unwrap_index
from .inplace import setitem

__all__ = ["METHODS", "zero_grads"]


def _getitem(self, index):
    # NumPy's basic indexing gives views; advanced indexing gives copies
    return getitem(self, unwrap_index(index))


def _setitem(self, index, value):
    # NumPy refuses a write into a read-only array deep inside its own code: say why here, before
    # anything is recorded, as the in-place ops do (elementwise/table.py check_output)
    if not self.is_cuda and not self._data.flags.writeable:
        raise ShapeError(f"cannot write into a tensor of shape {tuple(self.shape)} and strides {self.strides}: it is "
                         f"read-only (an expand()ed view, whose elements share memory, or a read-only NumPy "
                         f"buffer); write into a .clone() of it instead")
    # Assignment is a copy into a view: check the cast as an in-place op would.
    src = value._data if isinstance(value, Tensor) else value
    vt = result_type(value) if isinstance(value, (Tensor, bool, int, float, complex)) else \
        from_numpy_dtype(np.asarray(value).dtype)
    if not can_cast(vt, self.dtype):
        raise CastingError(f"cannot assign {vt.name} values into a {self.dtype.name} tensor without "
                           f"losing information; convert them first with .to(dj.{self.dtype.name})")
    idx = unwrap_index(index)

    def write():
        if self.is_cuda:
            from ..cuda.index import setitem as cuda_setitem
            cuda_setitem(self, idx, value)
        else:
            self._data[idx] = src
        bump_version(self)
    setitem(self, idx, value, write)


def backward(self, gradient=None, retain_graph: bool | None = None, create_graph: bool = False) -> None:
    """Accumulate the gradient of this tensor into the leaves' ``.grad``.

    >>> import dispatch_jit as dj
    >>> w = dj.tensor([3.0, 4.0], requires_grad=True)
    >>> (w * w).sum().backward(); w.grad
    tensor([6., 8.])
    """
    run_backward([self], [gradient], create_graph if retain_graph is None else retain_graph, create_graph)


def register_hook(self, fn):
    """Call ``fn(grad)`` when this tensor's gradient is computed; a non-None
    return value replaces the gradient.  Returns a handle whose ``remove()``
    unregisters the hook, as PyTorch's.

    >>> import dispatch_jit as dj
    >>> w = dj.tensor([1.0, 2.0], requires_grad=True)
    >>> h = w.register_hook(lambda g: g * 10)
    >>> (w * w).sum().backward(); w.grad
    tensor([20., 40.])
    >>> h.remove()
    """
    if not self.requires_grad:
        raise AutogradError("cannot register a hook on a tensor that doesn't require gradient")
    node, idx = edge_of(self)
    return node.register_prehook(idx, fn)


METHODS = {"__getitem__": _getitem, "__setitem__": _setitem, "backward": backward, "register_hook": register_hook}


def zero_grads(params, set_to_none: bool) -> None:
    """Reset each tensor's ``.grad``: to None, or to zeros in place (the same tensor, one version
    bump), after any pending compiled-mode graph that reads it has run, as for any other write."""
    for p in params:
        grad = p.__dict__.get("_grad")
        if grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            before_write(grad)
            bump_version(grad)
            grad._data[...] = 0
