"""The derivative table: operator -> backward formula.

One row per differentiable operator, PyTorch's derivatives.yaml in Python.
Each formula takes the output gradient ``g``, the saved values ``s`` (the
inputs named in ``save``; ``"result"`` is the output) and ``c`` (static
arguments, plus each tensor input's ``shapes``/``dtypes``), and returns one
gradient per tensor input.  Formulas are written with dispatch_jit ops, so
with ``create_graph=True`` the backward pass is itself recorded and second
derivatives work.  Gradients are summed back over broadcast dimensions and
cast to the input's dtype by the Autograd kernel, not here.  Composite ops
(softmax, gelu, ...) have no row: they differentiate through their
decomposition.
"""

from __future__ import annotations

import math

import numpy as np

from dispatch_jit.autograd.grad_mode import plain_no_grad
from dispatch_jit.autograd.kernel import AutogradKernel, Derivative, Grad
from dispatch_jit.dtypes import ALL_DTYPES, COMPLEX
from dispatch_jit.ops import entries
from dispatch_jit.signature import DTYPE_MASK, DTYPE_SHIFT, relayout
from dispatch_jit.tensor import Tensor, _AUTOGRAD_SIG_BITS, _CUDA_SIG_BITS

from .derivatives_elementwise import ROWS as ELEMENTWISE_ROWS, _not_differentiable, _zeros
from .reduction.op import correction_of

__all__ = ["DERIVATIVES", "KERNELS"]


A = entries("aten")    # the ops are defined after this module is imported
_LN2, _LN10 = math.log(2.0), math.log(10.0)
_2_SQRTPI = 2.0 / math.sqrt(math.pi)


def _scaled(g, alpha):
    return g if alpha == 1 else A.mul(g, alpha)


_COMPLEX = frozenset(d.index for d in ALL_DTYPES if d.category == COMPLEX)   # dtype indices
_COMPLEX_SIG = frozenset(i << DTYPE_SHIFT for i in _COMPLEX)                  # their signature bits
_DTYPE_BITS = DTYPE_MASK << DTYPE_SHIFT


def _cj(t):
    """``t.conj()`` where derivatives.yaml writes it: a complex input's gradient is the conjugate
    Wirtinger derivative, ``g * conj(f'(z))`` (PyTorch's convention); real tensors pass as they are,
    without a dispatch."""
    return A.conj(t) if t._sig & _DTYPE_BITS in _COMPLEX_SIG else t


def _cjs(g, v):
    """``_cj`` of a saved operand ``v`` of a product or quotient that may be a Python number (``x * 2.0``
    saves the 2.0).  Only a complex operand needs it, and then the output and its gradient ``g`` are
    complex: a real ``g`` (the hot path of every real backward) returns ``v`` after one bit test."""
    if g._sig & _DTYPE_BITS not in _COMPLEX_SIG:
        return v
    if isinstance(v, complex):
        return v.conjugate()
    return _cj(v) if hasattr(v, "_sig") else v


def _expand_back(g, c, keepdims_key="keepdims"):
    """Undo a reduction: re-insert reduced axes, then broadcast to the input shape."""
    shape = c["shapes"][0]
    axis = c.get("axis")
    eager = _eager_unrecorded(g)
    if not c.get(keepdims_key) and len(shape) != g.ndim:
        axes = range(len(shape)) if axis is None else sorted(d % max(len(shape), 1) for d in
                                                             ((axis,) if isinstance(axis, int) else axis))
        if eager:
            a = g._data
            if a.ndim:      # a 0-d gradient (a reduction over everything) broadcasts as it is
                kept = list(shape)
                for d in axes:
                    kept[d] = 1
                a = a.reshape(kept)
            return _broadcast_copy(g, a, shape)
        for d in axes:
            g = A.unsqueeze(g, d)
    if tuple(g.shape) == tuple(shape):
        return g
    return _broadcast_copy(g, g._data, shape) if eager else A.expand(g, shape)


def _eager_unrecorded(g) -> bool:
    """A dense CPU gradient in a backward that records nothing (no create_graph, no mode)."""
    return g.__class__ is Tensor and not g._sig & _CUDA_SIG_BITS and plain_no_grad()


def _broadcast_copy(g, a, shape):
    """``expand`` of a gradient ``g`` (its data as ``a``) that no one records, as a contiguous
    copy made by NumPy: the same values, no dispatch, and the formulas reading it take the
    elementwise kernels' flat path (a stride-0 view takes the strided one, ~10x the per-call
    cost on small tensors; the gradient of every ``loss.sum().backward()`` is one)."""
    out = np.empty(shape, a.dtype)
    out[...] = a        # np.copyto's Python wrapper costs 3x this on small arrays
    t = _new(Tensor)
    t._data = out
    t._sig = relayout(g._sig & ~_AUTOGRAD_SIG_BITS, len(shape), True)
    return t


_new = object.__new__


def _count(c) -> int:
    shape, axis = c["shapes"][0], c.get("axis")
    if axis is None or not shape or axis == ():    # a 0-d input accepts axis 0 / -1; () is every dim
        return math.prod(shape)
    axes = (axis,) if isinstance(axis, int) else axis
    return math.prod(shape[a] for a in axes)


def _keep(c):
    """The reduction's result with reduced axes kept (for broadcasting against the input)."""
    return dict(c, keepdims=True)


def _extreme(g, s, c):
    """Ties share the gradient evenly.  ``axis=None`` is ``max(x)`` (dj.max passes it): PyTorch's
    evenly_distribute_backward, where a NaN result goes to the NaN elements, and the others get 0
    whatever the upstream gradient.  Given axes, and amax's default ``()`` (every dim), are
    scale_grad_by_count: ``g / count * mask``, so a NaN slice (no element equals NaN) gets NaN,
    as ``torch.amax(x).backward()`` and ``torch.amax(x, dim)``."""
    x, r = s["self"], _expand_back(s["result"], c)
    if c.get("axis") is None:
        mask = A.logical_or(A.eq(x, r), A.logical_and(A.isnan(x), A.isnan(r)))
        return A.where(mask, A.div(_expand_back(g, c), A.sum(mask.to(g.dtype))), 0.0)
    mask = A.eq(x, r).to(g.dtype)
    return A.mul(A.div(_expand_back(g, c), _expand_back(A.sum(mask, c.get("axis"), True), _keep(c))), mask)


def _dof(c) -> float:
    return _count(c) - correction_of("var", c.get("unbiased"), c.get("correction"))


def _var_backward(g, x, c):
    """PyTorch's var_backward: ``2 / (n - correction) * g * (x - mean)``, where 2 / 0 is inf (a
    float division, not a ZeroDivisionError).  Over all elements with n <= correction, torch
    gives NaN where x equals the mean and inf elsewhere, times g."""
    dof, ge = _dof(c), _expand_back(g, c)
    mean = A.mean(x, c.get("axis"), True)
    if dof <= 0 and (c.get("axis") is None or x.ndim == 0):
        return A.mul(ge, A.where(A.eq(x, mean), math.nan, math.inf))
    return A.mul(A.mul(ge, math.inf if dof == 0 else 2.0 / dof), A.sub(x, mean))


def _var_grad(g, s, c):
    return _var_backward(g, s["self"], c)


def _std_grad(g, s, c):
    # torch's std_backward: var's gradient of g / (2 std), with 0 where std == 0 (no 0 / 0)
    r = s["result"]
    return _var_backward(A.where(A.eq(r, 0.0), 0.0, A.div(g, A.mul(r, 2.0))), s["self"], c)


def _matmul_lift(g, c):
    """``g`` with the dimensions a 1-d operand lost put back (as matmul's 1-d rule adds them)."""
    sa, sb = c["shapes"]
    if len(sa) == 1:
        g = A.unsqueeze(g, -2)
    if len(sb) == 1:
        g = A.unsqueeze(g, -1)
    return g


def _matmul_grad_self(g, s, c):
    b, (sa, sb) = _cj(s["other"]), c["shapes"]
    if len(sa) == 1 and len(sb) == 1:
        return A.mul(g, b)
    b2 = A.unsqueeze(b, -1) if len(sb) == 1 else b
    ga = A.matmul(_matmul_lift(g, c), A.transpose(b2, -1, -2))
    return A.squeeze(ga, -2) if len(sa) == 1 else ga   # batch dimensions are summed back by the kernel


def _matmul_grad_other(g, s, c):
    a, (sa, sb) = _cj(s["self"]), c["shapes"]
    if len(sa) == 1 and len(sb) == 1:
        return A.mul(g, a)
    a2 = A.unsqueeze(a, 0) if len(sa) == 1 else a
    gb = A.matmul(A.transpose(a2, -1, -2), _matmul_lift(g, c))
    return A.squeeze(gb, -1) if len(sb) == 1 else gb


# pow: either side may be a Python number (x ** 2.0, 2.0 ** x); only a tensor gets a gradient.
# As PyTorch: no gradient to x where y == 0, none to y where x == 0 and y >= 0 (0 * log 0).
# The products keep PyTorch's order (g * (y * x ** (y - 1))): with inf or huge values the order decides
# between inf, nan and a finite number.
def _pow_grad_self(g, s, c):
    x, y = s["self"], s["other"]
    if hasattr(y, "_sig"):
        return A.where(A.eq(y, 0.0), 0.0, A.mul(g, A.mul(y, A.pow(x, A.sub(y, 1)))))
    return A.mul(g, A.mul(A.pow(x, y - 1), y)) if y != 0 else _zeros(g)


def _pow_grad_other(g, s, c):
    x, y, r = s["self"], s["other"], s["result"]
    if hasattr(x, "_sig"):
        return A.mul(g, A.where(A.logical_and(A.eq(x, 0.0), A.ge(y, 0.0)), 0.0, A.mul(r, A.log(x))))
    log_x = math.log(x) if x > 0 else -math.inf if x == 0 else math.nan
    return A.mul(g, A.where(A.ge(y, 0.0), 0.0, A.mul(r, log_x)) if x == 0 else A.mul(r, log_x))


def _prod_grad(g, s, c):
    # d prod / d x_i = prod / x_i, except where the reduced slice holds zeros (PyTorch's rule):
    # one zero gets the product of the others, everything else gets 0
    x, ge = s["self"], _expand_back(g, c)
    if not A.any(A.eq(x, 0.0)).item():
        return A.div(A.mul(ge, _cj(_expand_back(s["result"], c))), _cj(x))
    axis, keep = c.get("axis"), _keep(c)
    zero = A.eq(x, 0.0)
    nzero = _expand_back(A.sum(zero.to(x.dtype), axis, True), keep)
    x_nz = A.where(zero, 1.0, x)
    p_nz = _expand_back(A.prod(x_nz, axis, True), keep)
    grad = A.where(A.eq(nzero, 0.0), A.div(p_nz, x_nz),
                   A.where(A.logical_and(zero, A.eq(nzero, 1.0)), p_nz, 0.0))
    return A.mul(ge, _cj(grad))


def _clamp_grad_self(g, s, c):
    x, lo, hi = s["self"], s["min"], s["max"]
    inside = None
    if lo is not None:
        inside = A.ge(x, lo)
    if hi is not None:
        le = A.le(x, hi)
        inside = le if inside is None else A.logical_and(inside, le)
    return A.where(inside, g, 0.0) if inside is not None else g


# clamp's bounds, as torch's clamp_backward_min_max: with min > max the result is max everywhere,
# so min gets nothing and max gets every gradient
def _clamp_grad_min(g, s, c):
    x, lo, hi = s["self"], s["min"], s["max"]
    below = A.lt(x, lo)
    return A.where(below if hi is None else A.logical_and(below, A.lt(lo, hi)), g, 0.0)


def _clamp_grad_max(g, s, c):
    x, lo, hi = s["self"], s["min"], s["max"]
    above = A.gt(x, hi)
    return A.where(above if lo is None else A.logical_or(above, A.lt(hi, lo)), g, 0.0)


def _max_min_grad(loses):
    """maximum/minimum as PyTorch: ``where(self == other, g / 2, g)``, zeroed where this input
    ``loses``: ties split in halves; a NaN compares false both ways, so both inputs get all of g."""
    def grad(g, s, c):
        x, y = s["self"], s["other"]
        return A.where(loses(x, y), 0.0, A.where(A.eq(x, y), A.div(g, 2.0), g))
    return Grad(grad, ("self", "other"))


def _atan2_grad(num):
    # torch: g * num / (x^2 + y^2), with the reciprocal 0 where it is infinite (atan2(0, 0) has gradient 0)
    def grad(g, s, c):
        x, y = s["self"], s["other"]
        recip = A.reciprocal(A.add(A.mul(x, x), A.mul(y, y)))
        return A.mul(A.mul(g, num(s)), A.where(A.isinf(recip), 0.0, recip))
    return Grad(grad, ("self", "other"))


def _cat_grads(g, s, c):
    axis = c["axis"]
    out, start = [], 0
    for shape in c["shapes"]:
        n = shape[axis % len(shape)] if shape else 0
        out.append(A.narrow(g, axis, start, n))
        start += n
    return tuple(out)


def _stack_grads(g, s, c):
    axis = c["axis"]
    return tuple(A.squeeze(A.narrow(g, axis, i, 1), (axis,)) for i in range(len(c["shapes"])))


def _narrow_grad(g, s, c):
    shape, axis, start = c["shapes"][0], c["axis"] % len(c["shapes"][0]), c["start"]
    if start < 0:
        start += shape[axis]
    parts = []
    if start:
        parts.append(_zeros_along(g, axis, start))
    parts.append(g)
    rest = shape[axis] - start - c["length"]
    if rest:
        parts.append(_zeros_along(g, axis, rest))
    return A.cat(parts, axis) if len(parts) > 1 else g


def _zeros_along(g, axis, n):
    from dispatch_jit.creation import zeros
    shape = list(g.shape)
    shape[axis] = n
    return zeros(*shape, dtype=g.dtype)


def _permute_grad(g, s, c):
    dims = [d % len(c["shapes"][0]) for d in c["dims"]]
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d] = i
    return A.permute(g, inv)


_D = Derivative
DERIVATIVES: dict[str, Derivative] = {
    # -- arithmetic ----------------------------------------------------------------------------
    # a Grad per input: a node saves only what the inputs that require grad read (x * 2.0 saves the 2.0)
    "add.Tensor": _D("AddBackward", (Grad(lambda g, s, c: g), Grad(lambda g, s, c: _scaled(g, c["alpha"])))),
    "sub.Tensor": _D("SubBackward", (Grad(lambda g, s, c: g), Grad(lambda g, s, c: _scaled(g, -c["alpha"])))),
    "mul.Tensor": _D("MulBackward", (Grad(lambda g, s, c: A.mul(g, _cjs(g, s["other"])), ("other",)),
                                     Grad(lambda g, s, c: A.mul(g, _cjs(g, s["self"])), ("self",)))),
    "div.Tensor": _D("DivBackward", (Grad(lambda g, s, c: A.div(g, _cjs(g, s["other"])), ("other",)),
                                     Grad(lambda g, s, c: A.mul(A.neg(g), _cj(A.div(s["result"], s["other"]))),
                                          ("result", "other")))),
    "neg": _D("NegBackward", lambda g, s, c: A.neg(g)),
    "abs": _D("AbsBackward", lambda g, s, c: A.mul(g, A.sign(s["self"])), ("self",)),
    "square": _D("SquareBackward", lambda g, s, c: A.mul(g, A.mul(_cj(s["self"]), 2.0)), ("self",)),
    "reciprocal": _D("ReciprocalBackward", lambda g, s, c: A.neg(A.mul(g, _cj(A.square(s["result"])))), ("result",)),
    "pow.Tensor": _D("PowBackward", (Grad(_pow_grad_self, ("self", "other")),
                                     Grad(_pow_grad_other, ("self", "other", "result")))),
    "maximum.Tensor": _D("MaximumBackward", (_max_min_grad(lambda x, y: A.lt(x, y)),
                                             _max_min_grad(lambda x, y: A.gt(x, y)))),
    "minimum.Tensor": _D("MinimumBackward", (_max_min_grad(lambda x, y: A.gt(x, y)),
                                             _max_min_grad(lambda x, y: A.lt(x, y)))),
    "atan2.Tensor": _D("Atan2Backward", (_atan2_grad(lambda s: s["other"]), _atan2_grad(lambda s: A.neg(s["self"])))),
    "remainder.Tensor": _D("RemainderBackward", (
        Grad(lambda g, s, c: g),
        Grad(lambda g, s, c: A.mul(A.neg(g), A.floor_divide(s["self"], s["other"])), ("self", "other")))),
    "floor_divide.Tensor": _D("FloorDivideBackward", _not_differentiable("aten::floor_divide")),
    # PyTorch's formulas: copysign's gradient is g * result / self (0 where self is 0) and none to the sign;
    # hypot's g * self / result; logaddexp's g / (1 + exp(other - self))
    "copysign.Tensor": _D("CopysignBackward", (
        Grad(lambda g, s, c: A.mul(g, A.where(A.eq(s["self"], 0.0), 0.0, A.div(s["result"], s["self"]))),
             ("self", "result")),
        Grad(lambda g, s, c: _zeros(g)))),
    "hypot.Tensor": _D("HypotBackward", (Grad(lambda g, s, c: A.mul(g, A.div(s["self"], s["result"])), ("self", "result")),
                                         Grad(lambda g, s, c: A.mul(g, A.div(s["other"], s["result"])),
                                              ("other", "result")))),
    "logaddexp.Tensor": _D("LogaddexpBackward", (
        Grad(lambda g, s, c: A.div(g, A.add(A.exp(A.sub(s["other"], s["self"])), 1.0)), ("self", "other")),
        Grad(lambda g, s, c: A.div(g, A.add(A.exp(A.sub(s["self"], s["other"])), 1.0)), ("self", "other")))),
    # complex parts: conj's gradient is the conjugate; real's and imag's are g and g * 1j (cast to the
    # input's dtype by the kernel); of a real input, real is the identity and imag a constant
    "conj": _D("ConjBackward", lambda g, s, c: _cj(g)),
    "real": _D("RealBackward", lambda g, s, c: g),
    "imag": _D("ImagBackward", lambda g, s, c: A.mul(g, 1j) if c["dtypes"][0] in _COMPLEX else _zeros(g)),
    # -- transcendental -------------------------------------------------------------------------
    "exp": _D("ExpBackward", lambda g, s, c: A.mul(g, _cj(s["result"])), ("result",)),
    "expm1": _D("Expm1Backward", lambda g, s, c: A.mul(g, _cj(A.add(s["result"], 1.0))), ("result",)),
    "log": _D("LogBackward", lambda g, s, c: A.div(g, _cj(s["self"])), ("self",)),
    "log1p": _D("Log1pBackward", lambda g, s, c: A.div(g, _cj(A.add(s["self"], 1.0))), ("self",)),
    "log2": _D("Log2Backward", lambda g, s, c: A.div(g, A.mul(_cj(s["self"]), _LN2)), ("self",)),
    "log10": _D("Log10Backward", lambda g, s, c: A.div(g, A.mul(_cj(s["self"]), _LN10)), ("self",)),
    "sqrt": _D("SqrtBackward", lambda g, s, c: A.div(g, A.mul(_cj(s["result"]), 2.0)), ("result",)),
    "rsqrt": _D("RsqrtBackward", lambda g, s, c: A.mul(A.mul(g, -0.5), _cj(A.pow(s["result"], 3.0))), ("result",)),
    "sin": _D("SinBackward", lambda g, s, c: A.mul(g, _cj(A.cos(s["self"]))), ("self",)),
    "cos": _D("CosBackward", lambda g, s, c: A.mul(g, A.neg(_cj(A.sin(s["self"])))), ("self",)),
    "tan": _D("TanBackward", lambda g, s, c: A.mul(g, _cj(A.add(A.square(s["result"]), 1.0))), ("result",)),
    "asin": _D("AsinBackward", lambda g, s, c: A.mul(g, _cj(A.rsqrt(A.sub(1.0, A.square(s["self"]))))), ("self",)),
    "acos": _D("AcosBackward", lambda g, s, c: A.neg(A.mul(g, _cj(A.rsqrt(A.sub(1.0, A.square(s["self"])))))), ("self",)),
    "atan": _D("AtanBackward", lambda g, s, c: A.div(g, _cj(A.add(A.square(s["self"]), 1.0))), ("self",)),
    "sinh": _D("SinhBackward", lambda g, s, c: A.mul(g, _cj(A.cosh(s["self"]))), ("self",)),
    "cosh": _D("CoshBackward", lambda g, s, c: A.mul(g, _cj(A.sinh(s["self"]))), ("self",)),
    "asinh": _D("AsinhBackward", lambda g, s, c: A.mul(g, _cj(A.rsqrt(A.add(A.square(s["self"]), 1.0)))),
                ("self",)),
    "acosh": _D("AcoshBackward", lambda g, s, c: A.mul(g, _cj(A.rsqrt(A.sub(A.square(s["self"]), 1.0)))),
                ("self",)),
    "atanh": _D("AtanhBackward", lambda g, s, c: A.div(g, _cj(A.sub(1.0, A.square(s["self"])))), ("self",)),
    "tanh": _D("TanhBackward", lambda g, s, c: A.tanh_backward(g, s["result"]), ("result",)),
    "sigmoid": _D("SigmoidBackward", lambda g, s, c: A.sigmoid_backward(g, s["result"]), ("result",)),
    # their backward ops' own rows (second derivatives): g * (1 - y*y) and g * y * (1 - y), in g and in y
    "tanh_backward.Tensor": _D("TanhBackwardBackward", (
        Grad(lambda gg, s, c: A.tanh_backward(gg, s["other"]), ("other",)),
        Grad(lambda gg, s, c: A.mul(A.mul(gg, s["self"]), A.mul(s["other"], -2.0)), ("self", "other")))),
    "sigmoid_backward.Tensor": _D("SigmoidBackwardBackward", (
        Grad(lambda gg, s, c: A.sigmoid_backward(gg, s["other"]), ("other",)),
        Grad(lambda gg, s, c: A.mul(A.mul(gg, s["self"]), A.sub(1.0, A.mul(s["other"], 2.0))), ("self", "other")))),
    # torch's threshold_backward: a select, not g * mask (an infinite g must give 0, not nan, where x <= 0)
    "relu": _D("ReluBackward", lambda g, s, c: A.where(A.le(s["result"], 0), 0.0, g), ("result",)),
    "erf": _D("ErfBackward", lambda g, s, c: A.mul(g, A.mul(A.exp(A.neg(A.square(s["self"]))), _2_SQRTPI)),
              ("self",)),
    # piecewise constant: zero gradient, as in PyTorch
    "sign": _D("SignBackward", lambda g, s, c: _zeros(g)),
    "floor": _D("FloorBackward", lambda g, s, c: _zeros(g)),
    "ceil": _D("CeilBackward", lambda g, s, c: _zeros(g)),
    "round": _D("RoundBackward", lambda g, s, c: _zeros(g)),
    "trunc": _D("TruncBackward", lambda g, s, c: _zeros(g)),
    # -- selection -------------------------------------------------------------------------------
    "where.self": _D("WhereBackward", (Grad(lambda g, s, c: None),
                                       Grad(lambda g, s, c: A.where(s["condition"], g, 0.0), ("condition",)),
                                       Grad(lambda g, s, c: A.where(s["condition"], 0.0, g), ("condition",)))),
    "clamp": _D("ClampBackward", (Grad(_clamp_grad_self, ("self", "min", "max")),
                                  Grad(_clamp_grad_min, ("self", "min", "max")),
                                  Grad(_clamp_grad_max, ("self", "min", "max")))),
    # -- reductions ------------------------------------------------------------------------------
    "sum": _D("SumBackward", lambda g, s, c: _expand_back(g, c), unbroadcast=False),
    "mean": _D("MeanBackward", lambda g, s, c: A.div(_expand_back(g, c), float(_count(c))), unbroadcast=False),
    "prod": _D("ProdBackward", _prod_grad, ("self", "result"), unbroadcast=False),
    "max": _D("MaxBackward", _extreme, ("self", "result"), unbroadcast=False),
    "min": _D("MinBackward", _extreme, ("self", "result"), unbroadcast=False),
    "var": _D("VarBackward", _var_grad, ("self",), unbroadcast=False),
    "std": _D("StdBackward", _std_grad, ("self", "result"), unbroadcast=False),
    "logsumexp": _D("LogsumexpBackward", lambda g, s, c: A.mul(
        _expand_back(g, c), A.exp(A.sub(s["self"], _expand_back(s["result"], c)))), ("self", "result"),
        unbroadcast=False),
    # -- linear algebra --------------------------------------------------------------------------
    "matmul": _D("MatmulBackward", (Grad(_matmul_grad_self, ("other",)), Grad(_matmul_grad_other, ("self",)))),
    "dot": _D("DotBackward", (Grad(lambda g, s, c: A.mul(g, _cjs(g, s["other"])), ("other",)),
                              Grad(lambda g, s, c: A.mul(g, _cjs(g, s["self"])), ("self",)))),
    # -- views and shape ops ---------------------------------------------------------------------
    "reshape": _D("ReshapeBackward", lambda g, s, c: A.reshape(g, c["shapes"][0]), unbroadcast=False),
    "view": _D("ViewBackward", lambda g, s, c: A.reshape(g, c["shapes"][0]), unbroadcast=False),
    "flatten": _D("FlattenBackward", lambda g, s, c: A.reshape(g, c["shapes"][0]), unbroadcast=False),
    "squeeze": _D("SqueezeBackward", lambda g, s, c: A.reshape(g, c["shapes"][0]), unbroadcast=False),
    "unsqueeze": _D("UnsqueezeBackward", lambda g, s, c: A.reshape(g, c["shapes"][0]), unbroadcast=False),
    "permute": _D("PermuteBackward", _permute_grad, unbroadcast=False),
    "transpose.int": _D("TransposeBackward", lambda g, s, c: A.transpose(g, c["dim0"], c["dim1"]),
                        unbroadcast=False),
    "expand": _D("ExpandBackward", lambda g, s, c: g),        # summed back to the input shape by the kernel
    "narrow": _D("NarrowBackward", _narrow_grad, unbroadcast=False),
    "cat": _D("CatBackward", _cat_grads, unbroadcast=False),
    "stack": _D("StackBackward", _stack_grads, unbroadcast=False),
    "clone": _D("CloneBackward", lambda g, s, c: g),
    "to.dtype": _D("ToCopyBackward", lambda g, s, c: g),     # cast back to the input dtype by the kernel
}

DERIVATIVES.update(ELEMENTWISE_ROWS)     # the math/special/activation rows (derivatives_elementwise.py)

# one Autograd kernel per row (registered by kernels/__init__.py)
KERNELS = {"Autograd": {name: AutogradKernel(d) for name, d in DERIVATIVES.items()}}
