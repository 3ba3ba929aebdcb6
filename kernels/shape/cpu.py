"""CPU kernels for views, shape ops, casts and copies.

Views are NumPy views of the input's buffer (shared storage, new strides);
nothing here computes, so these kernels are plain NumPy rather than Numba:
moving or re-describing memory is what NumPy's C code already does at
memory speed (except cat of large pieces along an inner axis, where NumPy's
strided row copies were slower than concat.py's compiled loop).  Each takes
and returns Tensors, in schema order.
"""

from __future__ import annotations

import numpy as np

from dispatch_jit import bf16
from dispatch_jit.dtypes import as_dtype, result_type
from dispatch_jit.broadcast import broadcast_shapes  # noqa: F401  (re-exported: NumPy's stops at 32 dims)
from dispatch_jit.errors import ShapeError, SchemaError
from dispatch_jit.tensor import wrap, wrap_view

from ..support.loops import MAX_LOOP_NDIM
from . import op as rules
from .concat import CAT_LOOP_MIN, cat_into
from .op import normalize_axes, normalize_axis  # noqa: F401  (re-exported)

__all__ = ["SHAPE_KERNELS", "normalize_axis", "normalize_axes", "broadcast_shapes", "coalesce_dims", "loop_operands",
           "MAX_LOOP_NDIM"]




def coalesce_dims(shape: tuple, arrays: list) -> tuple:
    """(shape, views): the same elements of ``arrays`` (each of ``shape``) over the fewest
    dimensions: size-1 dimensions dropped, and neighbours merged where every array steps through
    the pair as through one dimension (PyTorch's TensorIterator coalesces the same way)."""
    new_shape: list = []
    strides: list = [[] for _ in arrays]
    for i, n in enumerate(shape):
        if n == 1:
            continue
        if new_shape and all(st[-1] == a.strides[i] * n for st, a in zip(strides, arrays)):
            new_shape[-1] *= n
            for st, a in zip(strides, arrays):
                st[-1] = a.strides[i]
        else:
            new_shape.append(n)
            for st, a in zip(strides, arrays):
                st.append(a.strides[i])
    views = [np.lib.stride_tricks.as_strided(a, tuple(new_shape), tuple(st), writeable=a.flags.writeable)
             for a, st in zip(arrays, strides)]
    return tuple(new_shape), views


def loop_operands(op: str, shape: tuple, arrays: list, kinds, target) -> tuple:
    """(arrays, target, ndim) for a strided loop over ``shape``: as given up to MAX_LOOP_NDIM
    dimensions, coalesced above it (tensors have up to 64); a ShapeError if that cannot fit."""
    if len(shape) <= MAX_LOOP_NDIM or 0 in shape:
        return arrays, target, len(shape)
    idx = [j for j, k in enumerate(kinds) if k == "array"]
    # elementwise: any order of the dims computes the same elements; the output's memory order
    # (largest stride first) lets a permuted output merge with inputs permuted alike
    order = sorted(range(len(shape)), key=lambda i: -abs(target.strides[i]))
    ops = [np.transpose(a, order) for a in [arrays[j] for j in idx] + [target]]
    new_shape, views = coalesce_dims(tuple(shape[i] for i in order), ops)
    if len(new_shape) > MAX_LOOP_NDIM:
        # inputs laid out otherwise: copies in the output's order, which coalesce with it
        copies = [np.ascontiguousarray(a) for a in ops[:-1]]
        new_shape, views = coalesce_dims(tuple(shape[i] for i in order), copies + [ops[-1]])
    if len(new_shape) > MAX_LOOP_NDIM:
        raise ShapeError(f"{op}: the output of shape {tuple(shape)} steps through {len(new_shape)} dimensions "
                         f"that cannot be merged; the strided loops take at most {MAX_LOOP_NDIM}: write into a "
                         f"contiguous tensor (.contiguous())")
    arrays = list(arrays)
    for j, v in zip(idx, views):
        arrays[j] = v
    return arrays, views[-1], len(new_shape)


def reshape(self, shape):
    a = self._data
    target = rules.reshape(a.shape, shape)
    try:
        r = a.reshape(target)
    except ValueError:         # NumPy's limits (e.g. more than 64 dimensions)
        raise ShapeError(f"reshape: shape {list(shape)} is invalid for input of shape {a.shape}: NumPy refuses it")
    # NumPy copies where the strides cannot express the new shape: a copy is a new tensor, with its
    # own version counter (an in-place op on it must not look like a change to ``self``)
    return wrap_view(self, r) if np.may_share_memory(r, a) else wrap(r)


def view(self, shape):
    a = self._data
    v, target = a.view(), rules.view(a.shape, shape)
    try:
        v.shape = target       # raises instead of copying when strides do not allow a view
    except (ValueError, AttributeError):
        raise ShapeError(f"view: shape {list(shape)} is not compatible with input of shape "
                         f"{tuple(a.shape)} and strides {self.strides}; use .reshape(...) "
                         f"(which copies when it must)") from None
    return wrap_view(self, v)


def permute(self, dims):
    a = self._data
    rules.permute(a.shape, dims)
    return wrap_view(self, a.transpose(tuple(d % max(a.ndim, 1) for d in dims)))


def transpose(self, dim0, dim1):
    a = self._data
    rules.transpose(a.shape, dim0, dim1)
    if a.ndim == 0:
        return wrap_view(self, a)
    return wrap_view(self, np.swapaxes(a, dim0 % a.ndim, dim1 % a.ndim))


def expand(self, size):
    return wrap_view(self, np.broadcast_to(self._data, rules.expand(self._data.shape, size)))


def squeeze(self, axis=None):
    return wrap_view(self, self._data.reshape(rules.squeeze(self._data.shape, axis)))


def unsqueeze(self, axis):
    return wrap_view(self, self._data.reshape(rules.unsqueeze(self._data.shape, axis)))


def flatten(self, start_dim=0, end_dim=-1):
    return wrap_view(self, self._data.reshape(rules.flatten(self._data.shape, start_dim, end_dim)))


def narrow(self, axis, start, length):
    a = self._data
    rules.narrow(a.shape, axis, start, length)
    ax = axis % a.ndim
    st = start + a.shape[ax] if start < 0 else start
    return wrap_view(self, a[(slice(None),) * ax + (slice(st, st + length),)])


def cat_plan(arrays: list, axis: int) -> tuple[list, int, tuple]:
    """cat's argument rules, for the CPU and CUDA kernels: (the arrays that take part, the
    normalized axis, the result's shape)."""
    # PyTorch skips 1-D empty tensors in cat for backwards compatibility
    arrays = [a for a in arrays if not (a.ndim == 1 and a.size == 0)] or arrays[:1]
    nd = arrays[0].ndim
    if nd == 0:
        raise ShapeError("cat: zero-dimensional tensors cannot be concatenated; use stack")
    ax = normalize_axis(axis, nd, "cat")
    for a in arrays[1:]:
        if a.ndim != nd or a.shape[:ax] + a.shape[ax + 1:] != arrays[0].shape[:ax] + arrays[0].shape[ax + 1:]:
            raise ShapeError(f"cat: sizes of tensors must match except in dimension {ax}; got shapes "
                             f"{', '.join(str(tuple(x.shape)) for x in arrays)}")
    shape = list(arrays[0].shape)
    shape[ax] = sum(a.shape[ax] for a in arrays)
    return arrays, ax, tuple(shape)


def stack_axis(arrays: list, axis: int) -> int:
    """stack's argument rules, for the CPU and CUDA kernels: the normalized new axis."""
    if any(a.shape != arrays[0].shape for a in arrays):
        raise ShapeError(f"stack: expects each tensor to be equal size, got shapes "
                         f"{', '.join(str(tuple(x.shape)) for x in arrays)}")
    return normalize_axis(axis, arrays[0].ndim + 1, "stack")


def common_dtype(tensors, op):
    """cat's and stack's dtype, for the CPU and CUDA kernels: the promoted one of a non-empty list."""
    if not tensors:
        raise SchemaError(f"{op}: expected a non-empty list of tensors")
    return result_type(*tensors)


def _same_dtype_arrays(tensors, op):
    if tensors:
        # the common case, pieces of one dtype, skips type promotion's rules (2 us a call)
        arrays = [t._data for t in tensors]
        d0 = arrays[0].dtype
        if all(a.dtype == d0 for a in arrays):
            return arrays, tensors[0].dtype
    dt = common_dtype(tensors, op)
    return [t._data if t.dtype is dt else bf16.cast(t._data, dt) for t in tensors], dt


def cat(tensors, axis=0):
    arrays, dt = _same_dtype_arrays(tensors, "cat")
    arrays, ax, shape = cat_plan(arrays, axis)
    out = np.empty(shape, dt.np)
    if out.size >= CAT_LOOP_MIN:
        cat_into(arrays, ax, out)
    else:
        np.concatenate(arrays, axis=ax, out=out)
    return wrap(out)


def stack(tensors, axis=0):
    arrays, dt = _same_dtype_arrays(tensors, "stack")
    ax = stack_axis(arrays, axis)
    return wrap(np.stack(arrays, axis=ax))


def casting(convert):
    """``to.dtype``'s kernel over ``convert(data, numpy dtype) -> a new array``: its argument
    handling, for the CPU and CUDA kernels (no copy where the dtype is the tensor's own and
    ``copy`` is False, as PyTorch's)."""
    def to_dtype(self, dtype, copy=False):
        d = as_dtype(dtype)
        if d is self.dtype and not copy:
            return self
        return wrap(convert(self._data, d.np))
    return to_dtype


to_dtype = casting(bf16.cast)     # NumPy's casts, or bfloat16's (to and from float32, rounded to nearest even)


def clone(self):
    out = np.empty(self._data.shape, self._data.dtype)
    np.copyto(out, self._data)
    return wrap(out)


# schema -> kernel; registered at the CPU key (shape/__init__.py)
SHAPE_KERNELS = {
    "reshape(Tensor(a) self, int[] shape) -> Tensor(a)": reshape,
    "view(Tensor(a) self, int[] shape) -> Tensor(a)": view,
    "permute(Tensor(a) self, int[] dims) -> Tensor(a)": permute,
    "transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)": transpose,
    "expand(Tensor(a) self, int[] size) -> Tensor(a)": expand,
    "squeeze(Tensor(a) self, int[]? axis=None) -> Tensor(a)": squeeze,
    "unsqueeze(Tensor(a) self, int axis) -> Tensor(a)": unsqueeze,
    "flatten(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)": flatten,
    "narrow(Tensor(a) self, int axis, int start, int length) -> Tensor(a)": narrow,
    "cat(Tensor[] tensors, int axis=0) -> Tensor": cat,
    "stack(Tensor[] tensors, int axis=0) -> Tensor": stack,
    "to.dtype(Tensor self, ScalarType dtype, bool copy=False) -> Tensor": to_dtype,
    "clone(Tensor self) -> Tensor": clone,
}
