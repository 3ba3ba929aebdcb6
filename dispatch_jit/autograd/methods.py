"""The Tensor methods that autograd provides: ``backward``, ``register_hook``,
and indexing (``t[i]`` and ``t[i] = v``, recorded as ops on views); and ``zero_grads``,
the one body of ``Module.zero_grad`` and ``Optimizer.zero_grad``.

tensor.py sits below autograd and cannot import it, so these are defined here
and bound onto ``Tensor`` by dispatch_jit/_install.py, with the methods of the
op library (``METHODS`` maps each method name to its function).
"""

from __future__ import annotations

import numpy as np

from ..bf16 import cast as bf16_cast
from ..dtypes import BF16_STORAGE, BOOL, COMPLEX, FLOAT, INT
from ..errors import AutogradError, CastingError, ShapeError, ValueOverflowError
from ..tensor import Tensor, bump_version
from ..writes import before_write
from .engine import run_backward
from .graph import edge_of
from .indexing import getitem
from .inplace import setitem, store

__all__ = ["METHODS", "zero_grads"]


def _getitem(self, index):
    # NumPy's basic indexing gives views; advanced indexing gives copies
    return getitem(self, index)


def _setitem(self, index, value):
    # NumPy refuses a write into a read-only array deep inside its own code: say why here, before
    # anything is recorded, as the in-place ops do (elementwise/table.py check_output)
    if not self._data.flags.writeable:
        raise ShapeError(f"cannot write into a tensor of shape {tuple(self.shape)} and strides {self.strides}: it is "
                         f"read-only (an expand()ed view, whose elements share memory, or a read-only NumPy "
                         f"buffer); write into a .clone() of it instead")
    # Assignment casts as PyTorch's copy_/fill_ do (a float into an int tensor truncates): a number
    # is checked to fit, arrays and tensors convert as .to() converts them
    if isinstance(value, (bool, int, float, complex, np.generic)):
        value = _assignable_number(value, self.dtype)
    elif getattr(value, "requires_grad", False) and self.dtype.category < FLOAT:
        value = value.detach()        # an integral tensor takes the values, never a gradient
    src = value._data if isinstance(value, Tensor) else value
    if self._data.dtype == BF16_STORAGE or getattr(src, "dtype", None) == BF16_STORAGE:
        # no NumPy cast knows bfloat16's words: values convert (round to nearest even) through bf16.py
        src = bf16_cast(np.asarray(src), self._data.dtype) if np.asarray(src).dtype != self._data.dtype else src

    def write():
        store(self, index, value, src)
        bump_version(self)
    setitem(self, index, value, write)     # an advanced index: the op index_put_, not write()


def _assignable_number(v, dtype):
    """``v`` as an element of a ``dtype`` tensor, by PyTorch's rule for ``t[i] = v``: a float
    truncates toward zero into an integer tensor and any nonzero number is True in a bool one; a
    value the dtype cannot hold (a NaN, an infinity, out of range, an imaginary part) raises."""
    if isinstance(v, np.generic):
        v = v.item()
    if dtype.category == BOOL:
        return bool(v)
    if isinstance(v, complex) and dtype.category < COMPLEX:
        if v.imag != 0:
            raise CastingError(f"cannot assign {v!r} into a {dtype.name} tensor: it has an imaginary part (PyTorch: "
                               f"value cannot be converted to type {dtype.name} without overflow); assign its "
                               f".real, or use a complex tensor")
        v = v.real
    if isinstance(v, (int, float)) and dtype.category == INT:
        info = np.iinfo(dtype.np)
        # PyTorch's overflow check reads the value before truncation: -0.5 does not fit uint8
        if not (info.min <= v <= info.max):
            raise ValueOverflowError(f"cannot assign {v!r} into a {dtype.name} tensor: value cannot be converted "
                                     f"to type {dtype.name} without overflow (it holds [{info.min}, {info.max}]"
                                     f"{'; floats in that range truncate toward zero' if isinstance(v, float) else ''})")
        return int(v)
    return v


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
