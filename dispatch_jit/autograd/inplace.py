"""In-place ops under autograd: the in-place kernels and item assignment.

An in-place op changes the history of the tensor it writes: its ``grad_fn``
becomes the op's node (PyTorch "rebases" it).  When the tensor is a view, the
write lands in the storage of its root, whose history changes too (views.py).
``AutogradInplaceKernel`` does this for the in-place operators (``add_``,
``mul_``, ...; ``index_put_``, what ``t[idx] = v`` with an advanced index calls), ``setitem``
for ``t[index] = value``.
"""

from __future__ import annotations

import numpy as np

from ..creation import tensor
from ..dtypes import can_cast
from ..errors import AutogradError, CastingError
from ..registry import lookup
from ..tensor import Tensor, wrap
from .grad_mode import is_grad_enabled, no_grad
from .graph import edge_of, mark_output, node_class
from .indexing import getitem, split_index
from .kernel import sum_to
from .views import check_inplace_on_view, copy_slices, refresh_views, root_of, view_history

__all__ = ["AutogradInplaceKernel", "setitem", "store"]


class AutogradInplaceKernel:
    """In-place ops under autograd: run the functional op on a clone (so the
    values it saves stay intact), write the result into ``self`` and move
    ``self``'s history onto the new node (PyTorch "rebases" it the same way)."""

    def __init__(self, functional_name: str):
        self.functional_name = functional_name
        self.__name__ = f"autograd_inplace_{functional_name.split('::')[-1]}"

    def specialize(self, call):
        below = call.redispatch()
        functional = lookup(self.functional_name).entry
        opname = call.op.name
        args_schema = call.op.schema.arguments

        def run(self_, *rest):
            if self_.requires_grad and self_.grad_fn is None:
                raise AutogradError(f"{opname}: a leaf Variable that requires grad is being used in an in-place "
                                    f"operation; do it under dj.no_grad() or on a clone")
            # a view writes into the storage of its root, whose history changes with it (views.py)
            root = root_of(self_)
            if root is not None:
                check_inplace_on_view(root, opname)
            if not any(getattr(t, "requires_grad", False) for t in (self_, *rest)):
                r = below(self_, *rest)
                return r
            kw = {a.name: v for a, v in zip(args_schema[1:], rest) if a.kwarg_only}
            pos = [v for a, v in zip(args_schema[1:], rest) if not a.kwarg_only]
            result = functional(self_.clone(), *pos, **kw)
            if not can_cast(result.dtype, self_.dtype):
                raise CastingError(f"{opname}: result type {result.dtype.name} can't be cast to the "
                                   f"desired output type {self_.dtype.name}")
            _write_into(self_, result)     # (item assignment bumps the version counter)
            self_.__dict__.pop("_output_nr", None)    # it may have been output 1 of a multi-output node
            if root is None:
                mark_output(self_, result.grad_fn)
            else:
                view_history(self_, root, copy_slices(root, self_, result.grad_fn))
            refresh_views(root if root is not None else self_, self_)
            return self_
        return run


def _write_into(dst, src) -> None:
    """The in-place op's result into ``dst``'s storage (the cast was checked by the caller): item
    assignment (either device), with nothing to record (the caller records the op's node)."""
    with no_grad():
        dst[...] = src.detach()


_CopyBackwards = node_class("CopyBackwards")


def setitem(t, index, value, write) -> None:
    """``t[index] = value`` where ``write()`` does the (cast-checked) store of a basic index.

    As PyTorch: an advanced index is one call of the in-place op ``index_put_`` on the view the
    basic part of the index makes (indexing.py's ``split_index``), which records like any
    in-place op (AutogradInplaceKernel: IndexPutBackward, a view's base rebased).  A basic index
    copies into the view ``t[index]``, so under autograd the tensor owning the storage gets a
    CopySlices node (views.py)."""
    basic, indices = split_index(t, index)
    if indices is not None:
        view = t if all(i.__class__ is slice and i == slice(None) for i in basic) else getitem(t, basic)
        lookup("aten::index_put_").entry(view, indices, _values(value, t))
        return
    value_grad = getattr(value, "requires_grad", False)
    if not is_grad_enabled() or not (t.requires_grad or value_grad):
        write()
        return
    if t.requires_grad and t.grad_fn is None:
        raise AutogradError("a leaf Variable that requires grad is being used in an in-place operation "
                            "(item assignment); assign under dj.no_grad() or to a clone")
    root = root_of(t)
    if root is not None:
        check_inplace_on_view(root, "setitem")
    with no_grad():
        region = getitem(t, index)
    write()
    node = None
    if value_grad:
        node = _CopyBackwards(_copy_backward, (edge_of(value),), {}, {"shape": tuple(value.shape),
                                                                       "dtype": value.dtype}, "aten::copy_")
    copy_slices(root if root is not None else t, region, node)
    if root is not None:
        view_history(t, root)
    refresh_views(root if root is not None else t, t)


def store(t, index, value, src) -> None:
    """The store of ``t[index] = value`` for a basic index: ``aten::copy_`` into the view
    ``t[index]`` (each device's kernel copies or fills, kernels/shape/assign.py), on ``t``
    detached, as the caller records the write itself.  ``src``: the value as converted for
    ``t`` (a number checked to fit, bfloat16 words), used where ``value`` is no tensor."""
    d = t.detach()
    region = d if index is Ellipsis else getitem(d, index)
    if not isinstance(value, Tensor) or src is not value._data:
        value = wrap(np.asarray(src))       # a number, an array, or values converted from bfloat16
    if value.ndim and value.device != region.device:
        value = value.to(region.device)     # (a 0-d host value is a number to the device kernel)
    _copy()(region, value.detach() if value.requires_grad else value)


def _copy():
    global _COPY_ENTRY
    if _COPY_ENTRY is None:
        _COPY_ENTRY = lookup("aten::copy_").entry
    return _COPY_ENTRY


_COPY_ENTRY = None


def _copy_backward(grads, saved, ctx, needs):
    g = sum_to(grads[0], ctx["shape"])
    return (g if g.dtype == ctx["dtype"] else g.to(ctx["dtype"]),)


def _values(value, t):
    """The values of ``t[index] = value`` as index_put_ takes them: a tensor of ``t``'s dtype and device."""
    if not isinstance(value, Tensor):
        if isinstance(value, (bool, int, float, complex)) and t._data.__class__ is np.ndarray and \
                t._data.dtype.kind in "biufc":
            return wrap(np.asarray(value, t._data.dtype))      # a number (checked to fit by the caller)
        return tensor(np.asarray(value) if not np.isscalar(value) else value, dtype=t.dtype, device=t.device)
    if value.dtype is not t.dtype or value.device != t.device:
        value = value.to(device=t.device, dtype=t.dtype)
    return value
