"""2-D max and average pooling as ops (``max_pool2d``, ``avg_pool2d``, their backward ops and
``max_pool2d_indices``), with their derivative rows; the 1-D ones run as height 1.  Direct
loops (windows.py): a window is a few elements, so there is no product for BLAS to win.

``max_pool2d`` keeps no index tensor for its backward: ``max_pool2d_backward`` finds each
window's argmax again from the input (one more read of it, no int64 tensor the size of the
output held between forward and backward) and adds the gradient there, which is what PyTorch's
saved indices give, ties and NaNs included.  ``max_pool2d_indices`` gives the indices
(``return_indices=True``), flat h*W + w in the unpadded plane, as PyTorch's.  Both backward ops
have derivative rows of their own (a gather at those indices; avg_pool2d itself), so double
backward works.  As PyTorch 2.13's CPU kernels, max_pool2d also takes integer input (compared in
its dtype) and avg_pool2d int64 (an int64 sum divided truncating toward zero).

>>> import dispatch_jit as dj
>>> from dispatch_jit.ops import entries
>>> entries("aten").max_pool2d(dj.arange(16.0).reshape(1, 1, 4, 4), [2, 2], [2, 2], [0, 0], [1, 1], False)
tensor([[[[ 5.,  7.],
          [13., 15.]]]])
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.autograd.kernel import AutogradKernel, Derivative, Grad
from dispatch_jit.creation import empty
from dispatch_jit.dtypes import FLOAT, INT
from dispatch_jit.errors import DTypeError, SchemaError, ShapeError
from dispatch_jit.ops import entries
from dispatch_jit.tensor import wrap

from . import windows

__all__ = ["SCHEMAS", "KERNELS", "pool_geometry"]

A = entries("aten")
_MAX = "int[] kernel_size, int[] stride, int[] padding, int[] dilation, bool ceil_mode"
_AVG = "int[] kernel_size, int[] stride, int[] padding, bool ceil_mode, bool count_include_pad, int? divisor_override"
SCHEMAS = [
    f"max_pool2d(Tensor self, {_MAX}) -> Tensor",
    f"max_pool2d_indices(Tensor self, {_MAX}) -> Tensor",
    f"max_pool2d_backward(Tensor grad_output, Tensor self, {_MAX}) -> Tensor",
    f"avg_pool2d(Tensor self, {_AVG}) -> Tensor",
    f"avg_pool2d_backward(Tensor grad_output, int[] input_size, {_AVG}) -> Tensor",
]
_F16 = np.dtype(np.float16)


def _out_size(size: int, k: int, pad: int, stride: int, dil: int, ceil: bool) -> int:
    """PyTorch's pooling_output_shape: a last window that starts in the right padding is dropped."""
    n = (size + 2 * pad - dil * (k - 1) - 1 + (stride - 1 if ceil else 0)) // stride + 1
    if ceil and (n - 1) * stride >= size + pad:
        n -= 1
    return n


def pool_geometry(who: str, shape: tuple, kernel_size, stride, padding, dilation, ceil_mode: bool):
    """PyTorch's pooling checks (its messages) on an input of ``shape`` (C, H, W) or (N, C, H, W);
    returns ``(kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)``."""
    def two(v, name, default=None):
        v = list(v) if isinstance(v, (list, tuple)) else [v]
        if not v and default is not None:
            return default
        if len(v) not in (1, 2):
            raise SchemaError(f"{who}: {name} must either be a single int, or a tuple of two ints")
        return v * 2 if len(v) == 1 else v
    kh, kw = two(kernel_size, "kernel_size")
    sh, sw = two(stride, "stride", [kh, kw])       # stride=[] (None): the kernel size, as PyTorch's
    ph, pw = two(padding, "padding")
    dh, dw = two(dilation, "dilation")
    if len(shape) not in (3, 4):
        raise ShapeError(f"{who}: Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, "
                         f"but got: [{', '.join(map(str, shape))}]")
    if kh <= 0 or kw <= 0:
        raise SchemaError(f"{who}: kernel size should be greater than zero, but got kH: {kh} kW: {kw}")
    if sh <= 0 or sw <= 0:
        raise SchemaError(f"{who}: stride should be greater than zero, but got dH: {sh} dW: {sw}")
    if dh <= 0 or dw <= 0:
        raise SchemaError(f"{who}: dilation should be greater than zero, but got dilationH: {dh} dilationW: {dw}")
    if ph < 0 or pw < 0:
        raise SchemaError(f"{who}: negative padding is not supported, got padH: {ph} padW: {pw}")
    if ph > kh // 2 or pw > kw // 2:     # PyTorch checks half the kernel size, whatever the dilation
        raise SchemaError(f"{who}: pad should be at most half of effective kernel size, but got pad={max(ph, pw)}, "
                          f"kernel_size={max(kh, kw)} and dilation={max(dh, dw)}")
    h, w = shape[-2:]
    oh, ow = _out_size(h, kh, ph, sh, dh, ceil_mode), _out_size(w, kw, pw, sw, dw, ceil_mode)
    if oh < 1 or ow < 1:
        raise ShapeError(f"{who}: Given input size: ({shape[-3]}x{h}x{w}). Calculated output size: "
                         f"({shape[-3]}x{oh}x{ow}). Output size is too small")
    return kh, kw, sh, sw, ph, pw, dh, dw, oh, ow


def _check_dtype(who: str, x) -> None:
    """PyTorch 2.13's CPU dtypes: max_pool2d takes floating and integer input (not bool), avg_pool2d
    floating and int64 only."""
    cat = x.dtype.category
    if cat == FLOAT or (cat == INT and (who == "max_pool2d" or x.dtype.name == "int64")):
        return
    ok = "a floating point or integer" if who == "max_pool2d" else "a floating point or int64"
    raise DTypeError(f"{who}: expected {ok} input, got {x.dtype.name} (\"{who}\" not implemented for it); "
                     f"convert first: x.float()")


def _lowest(cd) -> np.ndarray:
    """max_pool's start value (a window that misses the plane gives it): -inf, or the integer minimum."""
    return np.array([np.iinfo(cd).min if cd.kind in "iu" else -np.inf], cd)


def _as4(a: np.ndarray) -> tuple:
    """(``a`` as a C-contiguous (N, C, H, W) array in its compute dtype, that dtype)."""
    cd = np.dtype(np.float32) if a.dtype == _F16 else a.dtype
    a = np.ascontiguousarray(a, dtype=cd)
    return (a if a.ndim == 4 else a[None]), cd


def _out_shape(shape: tuple, oh: int, ow: int) -> tuple:
    return tuple(shape[:-2]) + (oh, ow)


def max_pool2d_cpu(x, kernel_size, stride, padding, dilation, ceil_mode, *, _indices=False):
    _check_dtype("max_pool2d", x)
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = pool_geometry("max_pool2d", tuple(x.shape), kernel_size, stride,
                                                           padding, dilation, ceil_mode)
    a4, cd = _as4(x._data)
    out = np.empty(a4.shape[:2] + (oh, ow), cd)
    idx = np.empty(out.shape, np.int64)
    if out.size:
        windows.get("max_pool", cd)(a4, kh, kw, sh, sw, ph, pw, dh, dw, out, idx, _lowest(cd))
    shape = _out_shape(tuple(x.shape), oh, ow)
    return wrap(idx.reshape(shape)) if _indices else wrap(out.reshape(shape).astype(x._data.dtype, copy=False))


def max_pool2d_indices_cpu(x, kernel_size, stride, padding, dilation, ceil_mode):
    return max_pool2d_cpu(x, kernel_size, stride, padding, dilation, ceil_mode, _indices=True)


def max_pool2d_backward_cpu(grad_output, x, kernel_size, stride, padding, dilation, ceil_mode):
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = pool_geometry("max_pool2d", tuple(x.shape), kernel_size, stride,
                                                           padding, dilation, ceil_mode)
    a4, cd = _as4(x._data)
    g4, _ = _as4(np.broadcast_to(grad_output._data, _out_shape(tuple(x.shape), oh, ow)).astype(cd))
    gx = np.zeros(a4.shape, cd)
    if g4.size:
        windows.get("max_pool_backward", cd)(g4, a4, kh, kw, sh, sw, ph, pw, dh, dw, gx, _lowest(cd))
    return wrap(gx.reshape(x._data.shape).astype(x._data.dtype, copy=False))


def _avg_check(divisor_override) -> None:
    if divisor_override is not None and divisor_override == 0:
        raise SchemaError("avg_pool2d: divisor must be not zero")


def avg_pool2d_cpu(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    _check_dtype("avg_pool2d", x)
    _avg_check(divisor_override)
    kh, kw, sh, sw, ph, pw, _, _, oh, ow = pool_geometry("avg_pool2d", tuple(x.shape), kernel_size, stride,
                                                         padding, 1, ceil_mode)
    a4, cd = _as4(x._data)
    out = np.empty(a4.shape[:2] + (oh, ow), cd)
    if out.size:
        windows.get("avg_pool_int" if cd.kind == "i" else "avg_pool", cd)(
            a4, kh, kw, sh, sw, ph, pw, bool(count_include_pad), int(divisor_override or 0), out)
    return wrap(out.reshape(_out_shape(tuple(x.shape), oh, ow)).astype(x._data.dtype, copy=False))


def avg_pool2d_backward_cpu(grad_output, input_size, kernel_size, stride, padding, ceil_mode, count_include_pad,
                            divisor_override):
    _avg_check(divisor_override)
    shape = tuple(input_size)
    kh, kw, sh, sw, ph, pw, _, _, oh, ow = pool_geometry("avg_pool2d", shape, kernel_size, stride, padding, 1,
                                                         ceil_mode)
    g = grad_output._data
    g4, cd = _as4(np.broadcast_to(g, _out_shape(shape, oh, ow)))
    gx = np.zeros(g4.shape[:2] + shape[-2:], cd)
    if g4.size:
        windows.get("avg_pool_backward", cd)(g4, kh, kw, sh, sw, ph, pw, bool(count_include_pad),
                                             int(divisor_override or 0), gx)
    return wrap(gx.reshape(shape).astype(g.dtype, copy=False))


def _meta(who: str, indices: bool = False):
    def meta(x, kernel_size, stride, padding, *rest):
        dilation, ceil_mode = (rest[0], rest[1]) if who == "max_pool2d" else (1, rest[0])
        *_, oh, ow = pool_geometry(who, tuple(x.shape), kernel_size, stride, padding, dilation, ceil_mode)
        return empty(*_out_shape(tuple(x.shape), oh, ow), dtype="int64" if indices else x.dtype, device=x.device)
    meta.__name__ = f"{who}_meta"
    return meta


def _max_backward_meta(grad_output, x, *args):
    pool_geometry("max_pool2d", tuple(x.shape), *args)
    return empty(*tuple(x.shape), dtype=x.dtype, device=x.device)


def _avg_backward_meta(grad_output, input_size, kernel_size, stride, padding, ceil_mode, *rest):
    pool_geometry("avg_pool2d", tuple(input_size), kernel_size, stride, padding, 1, ceil_mode)
    return empty(*tuple(input_size), dtype=grad_output.dtype, device=grad_output.device)


def _max_grad(g, s, c):
    return A.max_pool2d_backward(g, s["self"], c["kernel_size"], c["stride"], c["padding"], c["dilation"],
                                 c["ceil_mode"])


def _avg_grad(g, s, c):
    return A.avg_pool2d_backward(g, list(c["shapes"][0]), c["kernel_size"], c["stride"], c["padding"],
                                 c["ceil_mode"], c["count_include_pad"], c["divisor_override"])


# double backward: both backward ops are linear in grad_output.  max_pool2d_backward adds g at each
# window's argmax, so its adjoint reads gg there (a gather at max_pool2d_indices; the argmax is locally
# constant, so self gets no gradient, as PyTorch's); avg_pool2d_backward's adjoint is avg_pool2d itself
def _max_backward_grad(gg, s, c):
    x = s["self"]
    args = (c["kernel_size"], c["stride"], c["padding"], c["dilation"], c["ceil_mode"])
    idx = A.max_pool2d_indices(x, *args)
    lead = list(x.shape[:-2])
    flat_idx = A.reshape(idx, lead + [-1])
    picked = A.gather(A.reshape(gg, lead + [-1]), len(lead), A.clamp_min(flat_idx, 0))
    return A.reshape(picked, list(idx.shape))


def _avg_backward_grad(gg, s, c):
    return A.avg_pool2d(gg, c["kernel_size"], c["stride"], c["padding"], c["ceil_mode"], c["count_include_pad"],
                        c["divisor_override"])


DERIVATIVES = {"max_pool2d": Derivative("MaxPool2DBackward", (Grad(_max_grad, ("self",)),)),
               "avg_pool2d": Derivative("AvgPool2DBackward", (Grad(_avg_grad),)),
               "max_pool2d_backward": Derivative("MaxPool2DBackwardBackward", (
                   Grad(_max_backward_grad, ("self",)), Grad(lambda gg, s, c: None))),
               "avg_pool2d_backward": Derivative("AvgPool2DBackwardBackward", (Grad(_avg_backward_grad),))}

KERNELS = {
    "CPU": {"max_pool2d": max_pool2d_cpu, "max_pool2d_indices": max_pool2d_indices_cpu,
            "max_pool2d_backward": max_pool2d_backward_cpu, "avg_pool2d": avg_pool2d_cpu,
            "avg_pool2d_backward": avg_pool2d_backward_cpu},
    "Meta": {"max_pool2d": _meta("max_pool2d"), "max_pool2d_indices": _meta("max_pool2d", True),
             "max_pool2d_backward": _max_backward_meta, "avg_pool2d": _meta("avg_pool2d"),
             "avg_pool2d_backward": _avg_backward_meta},
    "Autograd": {name: AutogradKernel(d) for name, d in DERIVATIVES.items()},
}
