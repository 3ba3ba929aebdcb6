"""The nn ops: schemas, their argument checks (written once, for every backend), and
their kernels per backend key.

- ``softmax``/``log_softmax`` and their backward ops ``_softmax_backward_data``/
  ``_log_softmax_backward_data`` (PyTorch's names): one row-wise loop each on the CPU.
- ``nll_loss`` over log-probabilities and ``cross_entropy_loss`` over logits, both with
  class indices (``weight``, ``ignore_index``, ``reduction``; cross-entropy also
  ``label_smoothing``), each one loop forward and one backward (``nll_loss_backward``,
  ``cross_entropy_loss_backward``): the log-softmax is never stored.  A target that is
  no class raises ``TargetError`` before anything is written.
- ``linear``: one BLAS product plus the bias on the CPU (x @ W.T + b).

CUDA tensors run the formulas of decomp.py (other ops' CUDA kernels), below the
autograd keys, so that the op records one node.  Integer, bool and complex inputs are
refused as PyTorch refuses them, naming the function.
"""

from __future__ import annotations

import numpy as np

from dispatch_jit import bf16
from dispatch_jit.broadcast import broadcast_shapes
from dispatch_jit.creation import empty
from dispatch_jit.dispatcher import ExcludeDispatchKeyGuard
from dispatch_jit.dtypes import BF16_STORAGE, FLOAT, as_dtype
from dispatch_jit.errors import DTypeError, SchemaError, ShapeError
from dispatch_jit.keys import AUTOGRAD_BITS, DispatchKeySet
from dispatch_jit.tensor import wrap

from . import cpu, decomp
from ..linalg.cpu import get_matmul
from ..shape.cpu import normalize_axis

__all__ = ["SCHEMAS", "METHODS", "PUBLIC", "CPU_KERNELS", "CUDA_KERNELS", "META_KERNELS", "check_loss_args"]

_LOSS = "Tensor? weight=None, str reduction='mean', int ignore_index=-100"
SCHEMAS = [
    "softmax(Tensor self, int axis=-1, *, ScalarType? dtype=None) -> Tensor",
    "log_softmax(Tensor self, int axis=-1, *, ScalarType? dtype=None) -> Tensor",
    "_softmax_backward_data(Tensor grad_output, Tensor output, int axis) -> Tensor",
    "_log_softmax_backward_data(Tensor grad_output, Tensor output, int axis) -> Tensor",
    f"nll_loss(Tensor self, Tensor target, {_LOSS}) -> Tensor",
    f"nll_loss_backward(Tensor grad_output, Tensor self, Tensor target, {_LOSS}) -> Tensor",
    f"cross_entropy_loss(Tensor self, Tensor target, {_LOSS}, float label_smoothing=0.0) -> Tensor",
    f"cross_entropy_loss_backward(Tensor grad_output, Tensor self, Tensor target, {_LOSS}, "
    f"float label_smoothing=0.0) -> Tensor",
    "linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
    "linear_backward(Tensor grad_output, Tensor input, Tensor weight, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
]
METHODS = ["softmax", "log_softmax"]
PUBLIC = ["softmax", "log_softmax", "nll_loss", "linear"]     # dj.<name>; the rest via dj.ops.aten
_REDUCTIONS = ("none", "mean", "sum")
_F16 = np.dtype(np.float16)


def below_autograd(fn):
    """``fn`` run with the autograd keys excluded: a kernel written with other ops, called
    below the op's own Autograd kernel, must not record their nodes too (PyTorch's
    AutoDispatchBelowADInplaceOrView)."""
    def run(*args, **kwargs):
        with ExcludeDispatchKeyGuard(DispatchKeySet.from_bits(AUTOGRAD_BITS)):
            return fn(*args, **kwargs)
    run.__name__ = fn.__name__
    return run


# -- softmax and log_softmax -----------------------------------------------------------------------
def _float_input(x, dtype, op: str):
    """``x`` cast to ``dtype`` if given; integer, bool and complex inputs refused as PyTorch's."""
    if dtype is not None:
        x = x.to(as_dtype(dtype))
    _check_float(x.dtype, op)
    return x


def _check_float(dt, op: str) -> None:
    if dt.category > FLOAT:
        raise DTypeError(f"{op}: complex inputs are not supported (got {dt.name}; complex numbers are not "
                         f"ordered, so there is no max(x) to subtract), as in PyTorch")
    if dt.category != FLOAT:
        raise DTypeError(f"{op}: expected a floating point tensor, got {dt.name} (x - max(x) would wrap "
                         f"around); pass dtype=dj.float32 or convert first: x.float()")


def to_rows(a: np.ndarray, axis: int) -> np.ndarray:
    """``a`` as a C-contiguous (rows, a.shape[axis]) array, ``axis`` last (a copy unless it is)."""
    if a.ndim == 0:
        return a.reshape(1, 1)
    if axis != a.ndim - 1:
        a = np.moveaxis(a, axis, -1)
    return np.ascontiguousarray(a).reshape(-1, a.shape[-1])


def from_rows(r: np.ndarray, shape: tuple, axis: int) -> np.ndarray:
    """Undo ``to_rows`` (a C-contiguous result of ``shape``)."""
    if len(shape) == 0:
        return r.reshape(())
    if axis == len(shape) - 1:
        return r.reshape(shape)
    moved = shape[:axis] + shape[axis + 1:] + (shape[axis],)
    return np.ascontiguousarray(np.moveaxis(r.reshape(moved), -1, axis))


def _compute_dtype(a: np.ndarray) -> np.dtype:
    return np.dtype(np.float32) if a.dtype == _F16 or a.dtype == BF16_STORAGE else a.dtype


def _rowwise(name: str, arrays: tuple, axis: int) -> np.ndarray:
    """Kernel ``name`` over ``arrays`` (same shape) along ``axis``: float16 and bfloat16 in float32,
    rounded once (bf16.cast: to nearest even)."""
    shape, dt = arrays[0].shape, arrays[0].dtype
    if arrays[0].size == 0:
        return np.empty(shape, dt)
    cd = _compute_dtype(arrays[0])
    rows = [to_rows(a if a.dtype == cd else bf16.cast(a, cd), axis) for a in arrays]
    out = np.empty(rows[0].shape, cd)
    cpu.get(name, cd)(*rows, out)
    r = from_rows(out, shape, axis)
    return r if r.dtype == dt else bf16.cast(r, dt)


def _softmax_cpu(name):
    def kernel(x, axis=-1, dtype=None):
        x = _float_input(x, dtype, name)
        a = x._data
        return wrap(_rowwise(name, (a,), normalize_axis(axis, a.ndim, name)))
    kernel.__name__ = f"{name}_cpu"
    return kernel


def _softmax_backward_cpu(name):
    def kernel(grad_output, output, axis):
        g, y = grad_output._data, output._data
        if g.dtype != y.dtype:
            g = bf16.cast(g, y.dtype)
        if g.shape != y.shape:
            g = np.broadcast_to(g, y.shape)
        return wrap(_rowwise(f"{name}_backward", (g, y), normalize_axis(axis, y.ndim, name)))
    kernel.__name__ = f"{name}_backward_cpu"
    return kernel


def _softmax_cuda(name):
    body = getattr(decomp, name)

    def kernel(x, axis=-1, dtype=None):
        x = _float_input(x, dtype, name)
        ax = normalize_axis(axis, x.ndim, name)
        return x.exp() if 0 in tuple(x.shape) else body(x, ax)    # empty: an empty result of the dtype
    kernel.__name__ = f"{name}_cuda"
    return below_autograd(kernel)


def _softmax_backward_cuda(name):
    body = getattr(decomp, f"{name}_backward")

    def kernel(grad_output, output, axis):
        return body(grad_output, output, normalize_axis(axis, output.ndim, name))
    kernel.__name__ = f"{name}_backward_cuda"
    return below_autograd(kernel)


# -- losses over class indices ---------------------------------------------------------------------
def check_loss_args(who: str, x, target, weight, reduction, logits: bool) -> None:
    """Every backend's checks of nll_loss / cross_entropy arguments, errors naming ``who``."""
    if reduction not in _REDUCTIONS:
        raise SchemaError(f"{who}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if x.dtype.category != FLOAT:
        raise DTypeError(f"{who}: expected a floating point input ({'logits' if logits else 'log-probabilities'}), "
                         f"got {x.dtype.name}; convert first: x.float()")
    if target.dtype.category != 1:
        hint = (" (class probabilities must have the input's shape " + str(tuple(x.shape)) + ")"
                if logits and target.dtype.category == FLOAT else "")
        raise DTypeError(f"{who}: expected a target of class indices with an integer dtype (int64), got "
                         f"{target.dtype.name}{hint}")
    xs, ts = tuple(x.shape), tuple(target.shape)
    want = () if len(xs) == 1 else (xs[0],) + xs[2:] if len(xs) >= 2 else None
    if want is None or ts != want:
        raise ShapeError(f"{who}: input of shape {xs} needs a target of shape {want} (class indices: the "
                         f"input's shape without its class dimension {1 if len(xs) > 1 else 0}), got {ts}"
                         if want is not None else f"{who}: expected an input of 1 or more dimensions "
                         f"(classes, or batch x classes x ...), got a 0-d tensor")
    nclass = xs[1] if len(xs) > 1 else xs[0]
    if weight is not None and tuple(weight.shape) != (nclass,):
        raise ShapeError(f"{who}: weight must be a 1-D tensor of one value per class ({nclass}), "
                         f"got shape {tuple(weight.shape)}")


def _class_arrays(x, target, weight):
    """(logits or log-probs as C-contiguous (R, C), targets (R,) int64, weights (C,) or empty, compute dtype)."""
    a = x._data
    cd = _compute_dtype(a)
    rows = to_rows(a.astype(cd, copy=False), 0 if a.ndim == 1 else 1)
    t = np.ascontiguousarray(target._data, dtype=np.int64).reshape(-1)
    w = np.empty(0, cd) if weight is None else np.ascontiguousarray(weight._data, dtype=cd).reshape(-1)
    return rows, t, w, cd


def _finish_loss(rows, total, wsum, reduction, target_shape, dt):
    if reduction == "none":
        return wrap(rows.reshape(target_shape).astype(dt))
    if reduction == "mean":
        with np.errstate(all="ignore"):
            total = np.float64(total) / np.float64(wsum)      # all targets ignored: 0 / 0 = nan, as PyTorch
    return wrap(np.array(total, dt))


def _loss_cpu(who: str, kname: str, logits: bool):
    def kernel(x, target, weight=None, reduction="mean", ignore_index=-100, label_smoothing=0.0):
        check_loss_args(who, x, target, weight, reduction, logits)
        rows2, t, w, cd = _class_arrays(x, target, weight)
        rows = np.empty(t.shape[0], np.float64)
        extra = (float(label_smoothing),) if logits else ()
        total, wsum, bad = cpu.get(kname, cd)(rows2, t, w, ignore_index, *extra, rows)
        if bad >= 0:
            raise decomp.target_error(who, int(t[bad]), rows2.shape[1], ignore_index)
        return _finish_loss(rows, total, wsum, reduction, tuple(target.shape), x._data.dtype)
    kernel.__name__ = f"{kname}_cpu"
    return kernel


def _loss_backward_cpu(who: str, kname: str, logits: bool):
    def kernel(grad_output, x, target, weight=None, reduction="mean", ignore_index=-100, label_smoothing=0.0):
        check_loss_args(who, x, target, weight, reduction, logits)
        rows2, t, w, cd = _class_arrays(x, target, weight)
        # the forward raised already in eager mode; compiled mode may run this without the forward (a loss
        # nobody holds is dead code there), and the loop below indexes rows by the targets unchecked
        bad, value = cpu.check_targets(t, rows2.shape[1], ignore_index)
        if bad >= 0:
            raise decomp.target_error(who, int(value), rows2.shape[1], ignore_index)
        g = np.ascontiguousarray(grad_output._data, dtype=cd).reshape(-1)
        div = 1.0
        if reduction == "mean":
            valid = t != ignore_index
            div = float(np.count_nonzero(valid)) if weight is None else float(w[t[valid]].astype(np.float64).sum())
        out = np.empty(rows2.shape, cd)
        extra = (float(label_smoothing),) if logits else ()
        if logits:
            cpu.get(kname, cd)(g, 1 if reduction == "none" else 0, div, rows2, t, w, ignore_index, *extra, out)
        else:
            cpu.get(kname, cd)(g, 1 if reduction == "none" else 0, div, t, w, ignore_index, out)
        a = x._data
        return wrap(from_rows(out, a.shape, 0 if a.ndim == 1 else 1).astype(a.dtype, copy=False))
    kernel.__name__ = f"{kname}_cpu"
    return kernel


def _loss_cuda(who: str, logits: bool):
    def kernel(x, target, weight=None, reduction="mean", ignore_index=-100, label_smoothing=0.0):
        check_loss_args(who, x, target, weight, reduction, logits)
        return decomp.loss_forward(x, target, weight, reduction, ignore_index, label_smoothing, logits)
    kernel.__name__ = f"{who}_cuda"
    return below_autograd(kernel)


def _loss_backward_cuda(who: str, logits: bool):
    def kernel(grad_output, x, target, weight=None, reduction="mean", ignore_index=-100, label_smoothing=0.0):
        check_loss_args(who, x, target, weight, reduction, logits)
        return decomp.loss_backward(grad_output, x, target, weight, reduction, ignore_index, label_smoothing,
                                    logits)
    kernel.__name__ = f"{who}_backward_cuda"
    return below_autograd(kernel)


# -- linear ------------------------------------------------------------------------------------------
_BLAS = (np.dtype(np.float32), np.dtype(np.float64))


def check_linear(x, weight, bias) -> None:
    if x.ndim == 0 or weight.ndim not in (1, 2) or x.shape[-1] != weight.shape[-1]:
        raise ShapeError(f"linear: input of shape {tuple(x.shape)} and weight of shape {tuple(weight.shape)} "
                         f"do not fit: the input's last dimension must equal the weight's last (in_features)")
    out = tuple(weight.shape[:1]) if weight.ndim == 2 else ()
    if bias is not None and tuple(bias.shape) not in ((), (1,), out):
        raise ShapeError(f"linear: bias of shape {tuple(bias.shape)} does not fit the output features {out}; "
                         f"pass a bias of shape {out}")


_linear_decomp = below_autograd(decomp.linear)


def linear_cpu(x, weight, bias=None):
    check_linear(x, weight, bias)
    a, w = x._data, weight._data
    dt = a.dtype
    if dt == BF16_STORAGE and w.dtype == dt and (bias is None or bias._data.dtype == dt):
        # as PyTorch's CPU addmm: float32 products, sums and bias, one rounding to nearest even
        f32 = [None if t is None else wrap(bf16.to_float32(t._data)) for t in (x, weight, bias)]
        return wrap(bf16.from_float32(linear_cpu(*f32)._data))
    if dt in _BLAS and w.dtype == dt and w.ndim == 2 and (bias is None or (bias._data.dtype == dt
                                                                            and bias._data.ndim <= 1)):
        a2 = a if a.ndim == 2 else a.reshape(-1, a.shape[-1])
        out = get_matmul(dt)(a2, w.T)    # the weight's transpose goes to BLAS as is, never copied
        if bias is not None:             # the same float adds as add(matmul(x, W.T), b)
            b = bias._data
            if b.ndim == 1 and b.shape[0] == out.shape[1]:
                cpu.get("add_bias", dt)(out, np.ascontiguousarray(b))
            else:
                out += b                 # a 0-d or one-element bias
        return wrap(out if a.ndim == 2 else out.reshape(a.shape[:-1] + (w.shape[0],)))
    return _linear_decomp(x, weight, bias)


def _linear_backward_decomp(grad_output, x, weight, output_mask):
    g, none = grad_output, None
    gi = decomp.linear_grad_input(g, weight) if output_mask[0] else None
    gw = decomp.linear_grad_weight(g, x, weight) if output_mask[1] else None
    gb = decomp.linear_grad_bias(g) if output_mask[2] else None
    return tuple(t if t is not None else _empty_like(x, none) for t in (gi, gw, gb))


def _empty_like(x, none):
    return none if none is not None else empty(0, dtype=x.dtype, device=x.device)


_linear_backward_below = below_autograd(_linear_backward_decomp)


def linear_backward_cpu(grad_output, x, weight, output_mask):
    """(grad of input, of weight, of bias) of linear, each only where ``output_mask`` asks (an empty
    tensor elsewhere): two BLAS products and one column sum over the flattened batch."""
    g, a, w = grad_output._data, x._data, weight._data
    dt = a.dtype
    if not (dt in _BLAS and g.dtype == dt and w.dtype == dt and w.ndim == 2):
        return _linear_backward_below(grad_output, x, weight, output_mask)
    g2 = g.reshape(-1, g.shape[-1]) if g.ndim != 2 else g
    mm = get_matmul(dt)
    out = []
    if output_mask[0]:
        out.append(wrap(mm(g2, w).reshape(a.shape)))
    if output_mask[1]:
        a2 = a.reshape(-1, a.shape[-1]) if a.ndim != 2 else a
        out.append(wrap(mm(g2.T, a2)))
    if output_mask[2]:
        gb = np.empty(g2.shape[1], dt)
        cpu.get("column_sum", dt)(np.ascontiguousarray(g2), gb)
        out.append(wrap(gb))
    it = iter(out)
    none = wrap(np.empty(0, dt))
    return tuple(next(it) if m else none for m in output_mask)


def linear_cuda(x, weight, bias=None):
    check_linear(x, weight, bias)
    return _linear_decomp(x, weight, bias)


def _loss_meta(who: str, logits: bool, backward: bool):
    """What a trace learns about a loss without its data (compiler/trace/symbolic.py asks the Meta key): the
    result's dtype, ndim and sizes (the input's for a backward, the target's for reduction='none';
    a fused backward's trace, compiler/shaped.py, reads them).  Running the CPU kernel on a
    trace's placeholders would read their garbage as class indices."""
    def meta(*args):
        x, target, weight, reduction = args[1:5] if backward else args[:4]
        check_loss_args(who, x, target, weight, reduction, logits)
        shape = tuple(x.shape) if backward else tuple(target.shape) if reduction == "none" else ()
        return empty(*shape, dtype=x.dtype, device=x.device)
    meta.__name__ = f"{who}{'_backward' if backward else ''}_meta"
    return meta


def _softmax_meta(name):
    def meta(x, axis=-1, dtype=None):
        dt = as_dtype(dtype) if dtype is not None else x.dtype
        _check_float(dt, name)
        normalize_axis(axis, x.ndim, name)
        return empty(*tuple(x.shape), dtype=dt, device=x.device)
    meta.__name__ = f"{name}_meta"
    return meta


def _softmax_backward_meta(name):
    def meta(grad_output, output, axis):
        ys = tuple(output.shape)
        normalize_axis(axis, len(ys), name)
        if broadcast_shapes(tuple(grad_output.shape), ys) != ys:
            raise ShapeError(f"{name}_backward: a gradient of shape {tuple(grad_output.shape)} does not broadcast "
                             f"to the output's shape {ys}")
        return empty(*ys, dtype=output.dtype, device=output.device)
    meta.__name__ = f"{name}_backward_meta"
    return meta


def _blas_cpu(*ts) -> bool:
    """The CPU kernels' BLAS path: CPU tensors of one float32/float64 dtype (their results' too)."""
    return (not ts[0].is_cuda and ts[0].dtype.np in _BLAS
            and all(t is None or t.dtype == ts[0].dtype for t in ts))


def linear_meta(x, weight, bias=None):
    """linear's result type without its data: the BLAS path's, else the decomposition's on ``x``
    (a trace's placeholders, compiled mode's stand-ins)."""
    check_linear(x, weight, bias)
    if _blas_cpu(x, weight, bias) and weight.ndim == 2 and (bias is None or bias.ndim <= 1):
        return empty(*(tuple(x.shape[:-1]) + (weight.shape[0],)), dtype=x.dtype, device=x.device)
    return _linear_decomp(x, weight, bias)


def linear_backward_meta(grad_output, x, weight, output_mask):
    """linear_backward's result types: the gradients of the input, weight and bias (empty where
    ``output_mask`` asks for none), as linear_backward_cpu makes them."""
    if _blas_cpu(x, grad_output, weight) and weight.ndim == 2:
        shapes = (tuple(x.shape), tuple(weight.shape), tuple(grad_output.shape[-1:]))
        return tuple(empty(*(s if m else (0,)), dtype=x.dtype, device=x.device) for s, m in zip(shapes, output_mask))
    return _linear_backward_below(grad_output, x, weight, output_mask)


META_KERNELS = {"softmax": _softmax_meta("softmax"), "log_softmax": _softmax_meta("log_softmax"),
                "_softmax_backward_data": _softmax_backward_meta("softmax"),
                "_log_softmax_backward_data": _softmax_backward_meta("log_softmax"),
                "linear": linear_meta, "linear_backward": linear_backward_meta,
                "nll_loss": _loss_meta("nll_loss", False, False),
                "nll_loss_backward": _loss_meta("nll_loss", False, True),
                "cross_entropy_loss": _loss_meta("cross_entropy", True, False),
                "cross_entropy_loss_backward": _loss_meta("cross_entropy", True, True)}

CPU_KERNELS = {
    "softmax": _softmax_cpu("softmax"), "log_softmax": _softmax_cpu("log_softmax"),
    "_softmax_backward_data": _softmax_backward_cpu("softmax"),
    "_log_softmax_backward_data": _softmax_backward_cpu("log_softmax"),
    "nll_loss": _loss_cpu("nll_loss", "nll_loss", False),
    "nll_loss_backward": _loss_backward_cpu("nll_loss", "nll_loss_backward", False),
    "cross_entropy_loss": _loss_cpu("cross_entropy", "cross_entropy", True),
    "cross_entropy_loss_backward": _loss_backward_cpu("cross_entropy", "cross_entropy_backward", True),
    "linear": linear_cpu,
    "linear_backward": linear_backward_cpu,
}
CUDA_KERNELS = {
    "softmax": _softmax_cuda("softmax"), "log_softmax": _softmax_cuda("log_softmax"),
    "_softmax_backward_data": _softmax_backward_cuda("softmax"),
    "_log_softmax_backward_data": _softmax_backward_cuda("log_softmax"),
    "nll_loss": _loss_cuda("nll_loss", False), "nll_loss_backward": _loss_backward_cuda("nll_loss", False),
    "cross_entropy_loss": _loss_cuda("cross_entropy", True),
    "cross_entropy_loss_backward": _loss_backward_cuda("cross_entropy", True),
    "linear": linear_cuda,
    "linear_backward": _linear_backward_below,
}
