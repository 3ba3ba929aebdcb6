"""The kernels at the Dask key: each builds a graph, none computes.

Registered, as an out-of-tree backend's would be, through the public
``Library("aten", "IMPL")`` at ``PrivateUse1`` (renamed "dask").  One table
per kind of op:

* elementwise ops (every functional op of the elementwise table): one
  ``blockwise`` task per output chunk running dispatch_jit's compiled CPU
  kernel on the chunk, broadcasting by Dask's chunk alignment;
* reductions: Dask's reduction tree (``da.reduction``), dispatch_jit's
  kernel for the chunk, combine and aggregate steps;
* ``matmul``: a blockwise contraction, the contracted dimension concatenated;
* views and reshapes: Dask's own.

The output dtype and the argument checks come from one call of the CPU kernel
on one-element blocks of the inputs' dtypes (cached per signature): the same
promotion, the same errors, as eager CPU mode.  Anything else at this key is a
NoKernelError naming the op and the key, as for any backend.
"""

from __future__ import annotations

import functools

import numpy as np

from ..compiler.lazy import get_mode
from ..errors import ArgumentTypeError, NoKernelError, ShapeError
from ..tensor import Tensor
from .blocks import ARRAY, apply_op, matmul_blocks, reduce_blocks
from .tensor import DaskTensor, wrap_dask

__all__ = ["kernels", "elementwise_ops", "elementwise", "reduction"]


def elementwise_ops() -> list[str]:
    """The functional elementwise ops (``aten::add.Tensor``, ...), from the op library's table."""
    from ..kernels.elementwise.table import ELEMENTWISE_SCHEMAS
    names = []
    for functional, _ in ELEMENTWISE_SCHEMAS.values():
        names.append("aten::" + functional.split("(")[0])
    return names


# -- the meta call: dtype, shape and the argument checks, from the CPU kernel --------
_META: dict = {}


def _meta(name: str, template: tuple, kwargs: dict, arrays: list, size: int = 1) -> np.ndarray:
    """The CPU kernel's result on blocks of ``size`` along each dim, of the inputs' dtypes."""
    key = (name, tuple(type(a) if a is not ARRAY else ARRAY for a in template), repr(sorted(kwargs.items())),
           repr([a for a in template if a is not ARRAY]),
           tuple((a.dtype.str, a.ndim) for a in arrays), size)
    m = _META.get(key)
    if m is None:
        blocks = [np.ones((size,) * a.ndim, a.dtype) for a in arrays]
        m = _META[key] = apply_op(name, template, kwargs, *blocks)
    return m


def _split(args: tuple) -> tuple[tuple, list]:
    """(template, dask arrays): each Dask tensor's place marked ARRAY; a 0-d CPU tensor (which may
    join a computation on any device) travels as its NumPy value."""
    template, arrays = [], []
    for a in args:
        if isinstance(a, DaskTensor):
            template.append(ARRAY)
            arrays.append(a._data)
        elif isinstance(a, Tensor):
            template.append(np.array(a.numpy()))
        else:
            template.append(a)
    return tuple(template), arrays


def _no_out(name: str, kwargs: dict) -> dict:
    if kwargs.get("out") is not None:
        raise ArgumentTypeError(f"{name}: out= is not supported on Dask tensors (a Dask graph is immutable); "
                        f"use the returned tensor")
    return {k: v for k, v in kwargs.items() if k != "out"}


# -- elementwise ------------------------------------------------------------------
def elementwise(name: str, args: tuple, kwargs: dict) -> DaskTensor:
    import dask.array as da
    kwargs = _no_out(name, kwargs)
    template, arrays = _split(args)
    dt = _meta(name, template, kwargs, arrays).dtype
    ndim = max(a.ndim for a in arrays)
    out_ind = tuple(range(ndim))
    pairs = []
    for a in arrays:
        pairs += [a, out_ind[ndim - a.ndim:]]
    fn = functools.partial(apply_op, name, template, kwargs)
    out = wrap_dask(da.blockwise(fn, out_ind, *pairs, dtype=dt, meta=np.empty((0,) * ndim, dt),
                                 name=f"dj-{name.split('::')[1]}-" + _token(fn, arrays)))
    out._origin = ("ew", name, template, kwargs, [a for a in args if isinstance(a, DaskTensor)])
    out._lazy = get_mode() == "compiled"
    return out


def _token(*parts) -> str:
    from dask.base import tokenize
    return tokenize(*parts)


def _elementwise_kernel(name: str):
    def kernel(*args, **kwargs):
        return elementwise(name, args, kwargs)
    kernel.__name__ = kernel.__qualname__ = f"dask_{name.split('::')[1].replace('.', '_')}"
    return kernel


# -- reductions ----------------------------------------------------------------------
def _reduced_axes(name: str, x, axis, extra: dict) -> list[int]:
    """The axes ``axis`` reduces, asked of the CPU kernel itself (with keepdims, on blocks of 2:
    a reduced axis comes back as 1), so that ``None``, ``[]`` and negative axes mean what they do there."""
    m = _meta(name, (ARRAY, axis, True), extra, [x], size=2)
    return [i for i in range(x.ndim) if m.shape[i] == 1]


def reduction(name: str, self: DaskTensor, axis, keepdims: bool, extra: dict) -> DaskTensor:
    import dask.array as da
    x = self._data
    dt = _meta(name, (ARRAY, axis, keepdims), extra, [x]).dtype
    axes = _reduced_axes(name, x, axis, extra) if x.ndim else []
    if not axes:
        return elementwise(name, (self, axis, keepdims), extra)
    chunk = functools.partial(reduce_blocks, name, extra)
    combine = functools.partial(reduce_blocks, name, {})     # the partial results have the output dtype
    out = da.reduction(x, chunk, combine, combine=combine, axis=tuple(axes), keepdims=keepdims, dtype=dt,
                       concatenate=True, meta=np.empty((0,) * (x.ndim if keepdims else x.ndim - len(axes)), dt),
                       name=f"dj-{name.split('::')[1]}")
    t = wrap_dask(out)
    t._origin = ("reduce", name, axes, bool(keepdims), extra, self)
    t._lazy = get_mode() == "compiled"
    return t


def _sum_like(name: str):
    def kernel(self, axis=None, keepdims=False, *, dtype=None):
        return reduction(name, self, axis, keepdims, {} if dtype is None else {"dtype": dtype})
    kernel.__name__ = f"dask_{name.split('::')[1]}"
    return kernel


def _max_like(name: str):
    def kernel(self, axis=(), keepdims=False):
        return reduction(name, self, axis, keepdims, {})
    kernel.__name__ = f"dask_{name.split('::')[1]}"
    return kernel


def dask_mean(self, axis=None, keepdims=False, *, dtype=None):
    """The mean as the sum over the count: the sum in the mean's dtype (the CPU kernel's own check
    refuses integer inputs, as eager mode does), then one elementwise division."""
    x = self._data
    dt = _meta("aten::mean", (ARRAY, axis, keepdims), {} if dtype is None else {"dtype": dtype}, [x]).dtype
    from ..dtypes import from_numpy_dtype
    total = reduction("aten::sum", self, axis, keepdims, {"dtype": from_numpy_dtype(dt)})
    axes = _reduced_axes("aten::sum", x, axis, {}) if x.ndim else []
    count = int(np.prod([x.shape[i] for i in axes])) if axes else 1
    return elementwise("aten::div.Tensor", (total, float(count)), {})


def _arg_like(name: str):
    """argmax/argmin: Dask's own arg-reduction tree (index and value carried together through the
    combine, which a plain reduction kernel cannot do); the dtype and checks from the CPU kernel."""
    def kernel(self, axis=None, keepdims=False):
        import dask.array as da
        x = self._data
        dt = _meta(name, (ARRAY, axis, keepdims), {}, [x]).dtype
        ax = None if axis is None or x.ndim == 0 else _dims(axis, x.ndim)[0]
        out = getattr(da, name.split("::")[1])(x, axis=ax, keepdims=bool(keepdims)).astype(dt)
        if keepdims and ax is None and x.ndim:
            out = out.reshape((1,) * x.ndim)
        return wrap_dask(out)
    kernel.__name__ = f"dask_{name.split('::')[1]}"
    return kernel


# -- matmul: a blockwise contraction -------------------------------------------------
_MATMUL_INDEX = {(2, 2): ("ij", "jk", "ik"), (1, 2): ("j", "jk", "k"), (2, 1): ("ij", "j", "i"), (1, 1): ("j", "j", "")}


def dask_matmul(self, other):
    import dask.array as da
    if not isinstance(other, DaskTensor) or not isinstance(self, DaskTensor):
        raise NoKernelError("aten::matmul at PrivateUse1 (dask): both operands must be Dask tensors")
    a, b = self._data, other._data
    idx = _MATMUL_INDEX.get((a.ndim, b.ndim))
    if idx is None:
        raise NoKernelError(f"aten::matmul at PrivateUse1 (dask): operands of {a.ndim} and {b.ndim} dimensions "
                            f"have no Dask kernel (supported: 2x2, 1x2, 2x1, 1x1); compute them on the CPU with "
                            f".to('cpu')")
    if a.shape[-1] != b.shape[0]:
        raise ShapeError(f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be multiplied "
                         f"({a.shape[-1]} != {b.shape[0]})")
    dt = apply_op("aten::matmul", (ARRAY, ARRAY), {}, np.ones((1,) * a.ndim, a.dtype),
                  np.ones((1,) * b.ndim, b.dtype)).dtype
    ia, ib, io = idx
    out = da.blockwise(matmul_blocks, io, a, ia, b, ib, dtype=dt, concatenate=True,
                       meta=np.empty((0,) * len(io), dt))
    return wrap_dask(out)


# -- views and reshapes: Dask's own --------------------------------------------------
def _dims(dims, ndim: int) -> list[int]:
    dims = [dims] if isinstance(dims, int) else dims
    return [d % max(ndim, 1) for d in dims]


def dask_reshape(self, shape):
    shape = _resolve_shape(tuple(int(s) for s in shape), self.shape)
    try:
        return wrap_dask(self._data.reshape(shape))
    except NotImplementedError:
        # Dask reshapes only by merging or splitting dims along chunk boundaries; otherwise the
        # data is regrouped first (one chunk: correct for any shape, at the cost of parallelism)
        return wrap_dask(self._data.rechunk(-1).reshape(shape))


def _resolve_shape(shape: tuple, old: tuple) -> tuple:
    """``shape`` with its one -1 filled in, checked against ``old``'s size as eager mode checks it."""
    size = int(np.prod(old))
    known = int(np.prod([s for s in shape if s != -1]))
    if shape.count(-1) > 1 or any(s < -1 for s in shape) or \
            (known * (size // known if known else 0) != size if -1 in shape else known != size):
        raise ShapeError(f"reshape: shape {list(shape)} is invalid for a tensor of shape {tuple(old)} "
                         f"({size} elements)")
    return tuple(size // known if s == -1 else s for s in shape)


def dask_permute(self, dims):
    dims = _dims(dims, self.ndim)
    if sorted(dims) != list(range(self.ndim)):
        raise ShapeError(f"permute: dims {list(dims)} are not a permutation of the {self.ndim} dimensions")
    return wrap_dask(self._data.transpose(dims))


def dask_transpose(self, dim0, dim1):
    import dask.array as da
    d0, d1 = _dims((dim0, dim1), self.ndim)
    return wrap_dask(da.swapaxes(self._data, d0, d1))


def dask_expand(self, size):
    import dask.array as da
    size = tuple(int(s) for s in size)
    lead = len(size) - self.ndim
    shape = tuple(self.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(size))
    return wrap_dask(da.broadcast_to(self._data, shape))


def dask_squeeze(self, axis=None):
    axes = range(self.ndim) if axis is None else _dims(axis, self.ndim)
    keep = tuple(a for a in axes if self.shape[a] == 1)
    return wrap_dask(self._data.squeeze(axis=keep)) if keep else self


def dask_unsqueeze(self, axis):
    import dask.array as da
    if not -self.ndim - 1 <= axis <= self.ndim:
        raise ShapeError(f"unsqueeze: axis {axis} is out of range for {self.ndim} dimensions")
    return wrap_dask(da.expand_dims(self._data, axis % (self.ndim + 1)))


def dask_clone(self):
    return wrap_dask(self._data)      # a Dask graph is immutable: sharing it is a copy


def dask_to_dtype(self, dtype, copy=False):
    return elementwise("aten::to.dtype", (self, dtype, copy), {})


def kernels() -> dict:
    """``{op name: kernel}`` at the Dask key."""
    table = {n: _elementwise_kernel(n) for n in elementwise_ops()}
    table.update({
        "aten::sum": _sum_like("aten::sum"), "aten::prod": _sum_like("aten::prod"), "aten::mean": dask_mean,
        "aten::max": _max_like("aten::max"), "aten::min": _max_like("aten::min"),
        "aten::argmax": _arg_like("aten::argmax"), "aten::argmin": _arg_like("aten::argmin"),
        "aten::matmul": dask_matmul,
        "aten::reshape": dask_reshape, "aten::view": dask_reshape, "aten::permute": dask_permute,
        "aten::transpose.int": dask_transpose, "aten::expand": dask_expand, "aten::squeeze": dask_squeeze,
        "aten::unsqueeze": dask_unsqueeze, "aten::clone": dask_clone, "aten::to.dtype": dask_to_dtype,
        "aten::where.self": _elementwise_kernel("aten::where.self"),
    })
    return table

