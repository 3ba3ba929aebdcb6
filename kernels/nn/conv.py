"""Convolution as PyTorch's ``aten::convolution``/``convolution_backward`` (1-D and 2-D, any
stride, zero padding, dilation and groups; ``transposed=True`` is refused), with its
derivative row.

The CPU kernel is im2col + the BLAS product: per group, windows.py's ``im2col`` lays the
(zero-padded) input out as a (Cg*kh*kw, N*L) matrix and one ``get_matmul`` product with the
group's (Og, Cg*kh*kw) weight gives every output position of the whole batch.  The backward
reuses the same layout: grad_weight = g @ cols.T, grad_input = col2im(W.T @ g) (im2col's
adjoint, a scatter-add), grad_bias a float64 sum.  A recorded backward (create_graph=True)
calls ``convolution_backward_input``/``_weight`` instead, ops of one output with derivative rows
of their own (each is bilinear: its gradients are a convolution and the other op), so double
backward works.  Direct loops lost to this on the benchmark
shape (N=32, C=16, 28x28, k=3): the product is where BLAS's blocking pays.  A 1-D op runs as a
2-D one of height 1.  float16 computes in float32, integers in int64 (wrapping, then cast back, as
PyTorch 2.13's CPU convolution accepts integer tensors); bool and complex inputs are refused.

>>> import dispatch_jit as dj
>>> from dispatch_jit.ops import entries
>>> x = dj.ones(1, 1, 3, 3); w = dj.ones(1, 1, 2, 2)
>>> entries("aten").convolution(x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
tensor([[[[4., 4.],
          [4., 4.]]]])
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.autograd.grad_mode import is_grad_enabled
from dispatch_jit.autograd.kernel import AutogradKernel, Derivative, Grad
from dispatch_jit.creation import empty
from dispatch_jit.dtypes import FLOAT, INT
from dispatch_jit.errors import DTypeError, SchemaError, ShapeError
from dispatch_jit.ops import entries
from dispatch_jit.tensor import wrap

from . import windows
from ..linalg.cpu import get_matmul

__all__ = ["SCHEMAS", "KERNELS", "check_conv"]

A = entries("aten")
_ARGS = "int[] stride, int[] padding, int[] dilation, bool transposed, int[] output_padding, int groups"
SCHEMAS = [
    f"convolution(Tensor input, Tensor weight, Tensor? bias, {_ARGS}) -> Tensor",
    f"convolution_backward(Tensor grad_output, Tensor input, Tensor weight, int[]? bias_sizes, {_ARGS}, "
    f"bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
    # the two gradients as ops of one output each, with derivative rows: what a recorded backward
    # (create_graph=True) calls, so double (and higher) backward works
    f"convolution_backward_input(Tensor grad_output, Tensor weight, int[] input_size, {_ARGS}) -> Tensor",
    f"convolution_backward_weight(Tensor grad_output, Tensor input, int[] weight_size, {_ARGS}) -> Tensor",
]
_F16 = np.dtype(np.float16)


def _fmt(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def check_conv(x, weight, bias, stride, padding, dilation, transposed, groups):
    """PyTorch's convolution checks (its messages); returns the 2-D geometry
    ``(kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)`` (a 1-D op as height 1)."""
    if transposed:
        raise SchemaError("convolution: transposed convolution (conv_transpose) is not supported; "
                          "pass transposed=False")
    for t, name in ((x, "input"), (weight, "weight")):
        if t.dtype.category not in (FLOAT, INT):
            raise DTypeError(f"convolution: expected a floating point or integer {name}, got {t.dtype.name} "
                             f"(\"slow_conv2d_cpu\" not implemented for it); convert first: x.float()")
    if weight.dtype != x.dtype or (bias is not None and bias.dtype != x.dtype):
        raise DTypeError(f"Input type ({x.dtype.name}) and weight type ({weight.dtype.name}) should be the same"
                         + ("" if bias is None else f" (and bias type, {bias.dtype.name})"))
    xs, ws = tuple(x.shape), tuple(weight.shape)
    nd = len(ws) - 2
    if nd not in (1, 2):
        raise ShapeError(f"convolution: expected a 3-D (1-D conv) or 4-D (2-D conv) weight, got weight of size "
                         f"{_fmt(ws)}")
    if len(xs) != nd + 2:
        raise ShapeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to conv{nd}d, but got input "
                         f"of size: {_fmt(xs)}")
    stride, padding, dilation = (list(v) * (nd if len(v) == 1 else 1) for v in (stride, padding, dilation))
    if any(len(v) != nd for v in (stride, padding, dilation)):
        raise SchemaError(f"conv{nd}d: stride, padding and dilation must have {nd} element(s) each, got "
                          f"{stride}, {padding}, {dilation}")
    if any(s <= 0 for s in stride):
        raise SchemaError("non-positive stride is not supported")
    if any(p < 0 for p in padding):
        raise SchemaError("negative padding is not supported")
    if any(d <= 0 for d in dilation):
        raise SchemaError("dilation should be greater than zero")
    if groups <= 0:
        raise SchemaError("non-positive groups is not supported")
    if ws[0] % groups:
        raise ShapeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
                         f"got weight of size {_fmt(ws)} instead")
    if xs[1] != ws[1] * groups:
        raise ShapeError(f"Given groups={groups}, weight of size {_fmt(ws)}, expected input{_fmt(xs)} to have "
                         f"{ws[1] * groups} channels, but got {xs[1]} channels instead")
    if bias is not None and tuple(bias.shape) != (ws[0],):
        raise ShapeError(f"Given weight of size {_fmt(ws)}, expected bias to be 1-dimensional with {ws[0]} "
                         f"elements, but got bias of size {_fmt(tuple(bias.shape))} instead")
    padded = [xs[2 + i] + 2 * padding[i] for i in range(nd)]
    ext = [dilation[i] * (ws[2 + i] - 1) + 1 for i in range(nd)]
    if any(p < e for p, e in zip(padded, ext)):
        raise ShapeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel "
                         f"size: ({' x '.join(map(str, ext))}). Kernel size can't be greater than actual input size")
    out = [(padded[i] - ext[i]) // stride[i] + 1 for i in range(nd)]
    if nd == 1:
        return 1, ws[2], 1, stride[0], 0, padding[0], 1, dilation[0], 1, out[0]
    return ws[2], ws[3], stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], out[0], out[1]


def _as4(a: np.ndarray, cd) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=cd)
    return a if a.ndim == 4 else a.reshape(a.shape[:2] + (1,) + a.shape[2:])


def _cd(a: np.ndarray) -> np.dtype:
    # integers compute in int64: the products and sums wrap, and cast back (wrapping again) they give
    # what the input dtype's own wrapping arithmetic gives, as PyTorch's integer convolution
    if a.dtype.kind in "iu":
        return np.dtype(np.int64)
    return np.dtype(np.float32) if a.dtype == _F16 else a.dtype


def convolution_cpu(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = check_conv(x, weight, bias, stride, padding, dilation, transposed,
                                                        groups)
    a = x._data
    cd = _cd(a)
    x4, w4 = _as4(a, cd), _as4(weight._data, cd)
    n, c = x4.shape[:2]
    o = w4.shape[0]
    cg, og = c // groups, o // groups
    xp = np.pad(x4, ((0, 0), (0, 0), (ph, ph), (pw, pw))) if ph or pw else x4
    out = np.empty((n, o, oh, ow), cd)
    if out.size:
        cols = np.empty((cg * kh * kw, n * oh * ow), cd)
        w2, mm, i2c = w4.reshape(o, -1), get_matmul(cd), windows.get("im2col", cd)
        for g in range(groups):
            i2c(xp, kh, kw, sh, sw, dh, dw, g * cg, oh, ow, cols)
            out[:, g * og:(g + 1) * og] = mm(w2[g * og:(g + 1) * og], cols).reshape(og, n, oh, ow).transpose(1, 0, 2, 3)
        if bias is not None:
            out += np.asarray(bias._data, cd)[:, None, None]
    shape = (n, o, oh, ow) if a.ndim == 4 else (n, o, ow)
    return wrap(out.reshape(shape).astype(a.dtype, copy=False))


def convolution_backward_cpu(grad_output, x, weight, bias_sizes, stride, padding, dilation, transposed,
                             output_padding, groups, output_mask):
    """(grad of input, of weight, of bias), each only where ``output_mask`` asks (an empty tensor
    elsewhere)."""
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = check_conv(x, weight, None, stride, padding, dilation, transposed,
                                                        groups)
    a = x._data
    cd = _cd(a)
    # only what a gradient reads is copied: the input for the weight's, the weight for the input's (the
    # other may be a zero-strided stand-in of the right shape, convolution_backward_input/_weight's)
    x4 = _as4(a, cd) if output_mask[1] else None
    w2 = _as4(weight._data, cd).reshape(weight.shape[0], -1) if output_mask[0] else None
    g4 = _as4(np.broadcast_to(grad_output._data, tuple(grad_output.shape)), cd)
    n, c, h, w = a.shape if a.ndim == 4 else a.shape[:2] + (1,) + a.shape[2:]
    o = weight.shape[0]
    cg, og, L = c // groups, o // groups, oh * ow
    mm = get_matmul(cd)
    gg = g4.reshape(n, o, L)
    xp = np.pad(x4, ((0, 0), (0, 0), (ph, ph), (pw, pw))) if (ph or pw) and output_mask[1] else x4
    gxp = np.zeros((n, c, h + 2 * ph, w + 2 * pw), cd) if output_mask[0] else None
    gw = np.zeros((o, cg * kh * kw), cd) if output_mask[1] else None
    cols = np.empty((cg * kh * kw, n * L), cd) if output_mask[1] and L * n else None
    for grp in range(groups):
        if not n * L:
            break
        gog = np.ascontiguousarray(gg[:, grp * og:(grp + 1) * og].transpose(1, 0, 2)).reshape(og, n * L)
        if output_mask[1]:
            windows.get("im2col", cd)(xp, kh, kw, sh, sw, dh, dw, grp * cg, oh, ow, cols)
            gw[grp * og:(grp + 1) * og] = mm(gog, cols.T)
        if output_mask[0]:
            gcols = np.ascontiguousarray(mm(w2[grp * og:(grp + 1) * og].T, gog))
            windows.get("col2im", cd)(gcols, kh, kw, sh, sw, dh, dw, grp * cg, oh, ow, gxp)
    none = wrap(np.empty(0, a.dtype))
    res = [none, none, none]
    if output_mask[0]:
        res[0] = wrap(np.ascontiguousarray(gxp[:, :, ph:ph + h, pw:pw + w]).reshape(a.shape).astype(a.dtype))
    if output_mask[1]:
        res[1] = wrap(gw.reshape(weight.shape).astype(a.dtype, copy=False))
    if output_mask[2]:
        res[2] = wrap(gg.sum(axis=(0, 2), dtype=np.float64).astype(a.dtype))
    return tuple(res)


def _stand_in(shape, dtype):
    """A tensor of ``shape`` whose data is never read: one zero, broadcast."""
    return wrap(np.broadcast_to(np.zeros((), dtype), tuple(shape)))


def convolution_backward_input_cpu(grad_output, weight, input_size, stride, padding, dilation, transposed,
                                   output_padding, groups):
    x = _stand_in(input_size, weight._data.dtype)
    return convolution_backward_cpu(grad_output, x, weight, None, stride, padding, dilation, transposed,
                                    output_padding, groups, (True, False, False))[0]


def convolution_backward_weight_cpu(grad_output, x, weight_size, stride, padding, dilation, transposed,
                                    output_padding, groups):
    w = _stand_in(weight_size, x._data.dtype)
    return convolution_backward_cpu(grad_output, x, w, None, stride, padding, dilation, transposed,
                                    output_padding, groups, (False, True, False))[1]


def _size_meta(which):
    def meta(grad_output, t, size, stride, padding, dilation, transposed, output_padding, groups):
        other = empty(*tuple(size), dtype=t.dtype, device=t.device)
        x, w = (other, t) if which == "input" else (t, other)
        check_conv(x, w, None, stride, padding, dilation, transposed, groups)
        return other
    meta.__name__ = f"convolution_backward_{which}_meta"
    return meta


def convolution_meta(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    *_, oh, ow = check_conv(x, weight, bias, stride, padding, dilation, transposed, groups)
    shape = (x.shape[0], weight.shape[0]) + ((oh, ow) if x.ndim == 4 else (ow,))
    return empty(*shape, dtype=x.dtype, device=x.device)


def convolution_backward_meta(grad_output, x, weight, bias_sizes, stride, padding, dilation, transposed,
                              output_padding, groups, output_mask):
    check_conv(x, weight, None, stride, padding, dilation, transposed, groups)
    shapes = (tuple(x.shape), tuple(weight.shape), (weight.shape[0],))
    return tuple(empty(*(s if m else (0,)), dtype=x.dtype, device=x.device) for s, m in zip(shapes, output_mask))


# -- the derivative row: one convolution_backward call gives the weight's and the bias's gradients together
# (the bias's kept in the node's ctx until its Grad asks), as linear's row does
def _static(c):
    return (c["stride"], c["padding"], c["dilation"], c["transposed"], c["output_padding"], c["groups"])


def _grad_input(g, s, c):
    if is_grad_enabled():
        return A.convolution_backward_input(g, s["weight"], list(c["shapes"][0]), *_static(c))
    return A.convolution_backward(g, s["input"], s["weight"], None, *_static(c), (True, False, False))[0]


def _grad_weight(g, s, c):
    if is_grad_enabled():
        return A.convolution_backward_weight(g, s["input"], list(c["shapes"][1]), *_static(c))
    with_bias = c["shapes"][2] is not None
    _, gw, gb = A.convolution_backward(g, s["input"], s["weight"], None, *_static(c), (False, True, with_bias))
    if with_bias:
        c["_bias_grad"] = gb
    return gw


def _grad_bias(g, s, c):
    gb = c.pop("_bias_grad", None)
    return gb if gb is not None else A.sum(g, [0] + list(range(2, g.ndim)))


# both backward ops are bilinear, each the adjoint of a convolution in one argument: their gradients are
# a convolution and the other backward op
def _bi_grad_output(gg, s, c):
    return A.convolution(gg, s["weight"], None, *_static(c))


def _bi_weight(gg, s, c):
    return A.convolution_backward_weight(s["grad_output"], gg, list(c["shapes"][1]), *_static(c))


def _bw_grad_output(gg, s, c):
    return A.convolution(s["input"], gg, None, *_static(c))


def _bw_input(gg, s, c):
    return A.convolution_backward_input(s["grad_output"], gg, list(c["shapes"][1]), *_static(c))


DERIVATIVES = {
    "convolution": Derivative("ConvolutionBackward", (
        Grad(_grad_input, ("input", "weight")), Grad(_grad_weight, ("input", "weight")), Grad(_grad_bias))),
    "convolution_backward_input": Derivative("ConvolutionBackwardInputBackward", (
        Grad(_bi_grad_output, ("weight",)), Grad(_bi_weight, ("grad_output",)))),
    "convolution_backward_weight": Derivative("ConvolutionBackwardWeightBackward", (
        Grad(_bw_grad_output, ("input",)), Grad(_bw_input, ("grad_output",)))),
}

KERNELS = {"CPU": {"convolution": convolution_cpu, "convolution_backward": convolution_backward_cpu,
                   "convolution_backward_input": convolution_backward_input_cpu,
                   "convolution_backward_weight": convolution_backward_weight_cpu},
           "Meta": {"convolution": convolution_meta, "convolution_backward": convolution_backward_meta,
                    "convolution_backward_input": _size_meta("input"),
                    "convolution_backward_weight": _size_meta("weight")},
           "Autograd": {name: AutogradKernel(d) for name, d in DERIVATIVES.items()}}
