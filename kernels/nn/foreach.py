"""Multi-tensor ops for gradient clipping, as PyTorch's: ``_foreach_norm`` (each tensor's norm, one
call) and ``_foreach_mul_`` (every tensor scaled in place by one 0-d tensor or number, one call).

``nn.utils.clip_grad_norm_`` called ``t.norm()`` per gradient (abs, mul, sum, sqrt: four
dispatches each) and ``g.mul_(coef)`` per gradient: about 150 dispatches for the GPT's 38
parameters.  Here the CPU kernel of each op is one call that runs, per tensor, the very array
kernels those ops run (NumPy's abs and multiply, the sum's compiled reduction with its plan,
an IEEE square root), so the norms and the scaled gradients have eager's per-tensor bits.
A tensor outside that case (another dtype or device, a strided view, a norm order other than 2, a gradient that
requires grad) takes the per-tensor ops, inside the same call.

Under ``@dj.compile`` and in compiled mode the ops' Tracer-key kernels are their decompositions
(the per-tensor ops): a trace records what it recorded before these ops existed, whose norms
and scaling the plan fuses with the optimizer's update.

>>> import dispatch_jit as dj
>>> gs = [dj.tensor([3.0, 4.0]), dj.tensor([[1.0, -1.0]])]
>>> dj.ops.aten._foreach_norm(gs)
[tensor(5.), tensor(1.4142)]
>>> dj.ops.aten._foreach_mul_(gs, dj.tensor(0.5)); gs[0]
tensor([1.5000, 2.0000])
"""

from __future__ import annotations

import numba
import numpy as np

from dispatch_jit.autograd.grad_mode import is_grad_enabled
from dispatch_jit.creation import empty
from dispatch_jit.errors import AutogradError, ShapeError
from dispatch_jit.jit import cache
from dispatch_jit.ops import entries
from dispatch_jit.tensor import bump_version, wrap
from dispatch_jit.writes import before_write

from ..reduction.cpu import get_reduction
from .op import below_autograd

__all__ = ["SCHEMAS", "KERNELS"]

A = entries("aten")

SCHEMAS = [
    "_foreach_norm.Scalar(Tensor[] self, Scalar ord=2, ScalarType? dtype=None) -> Tensor[]",
    "_foreach_mul_.Tensor(Tensor(a!)[] self, Tensor other) -> ()",
]
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_SUMS: dict = {}
_SQUARES: dict = {}          # dtype -> _abs_squares's compiled entry point


def _sum_of(dt):
    """The sum's CPU kernel for ``dt`` as ``A.sum`` runs it (the full reduction's shortcut)."""
    f = _SUMS.get(dt)
    if f is None:
        r = get_reduction("sum", dt)
        f = _SUMS[dt] = r.full or r
    return f


def _plain(a) -> bool:
    return a.__class__ is np.ndarray and a.dtype in _FLOATS


# -- the decompositions: the per-tensor ops (CUDA, Meta, a trace, the cases the loops leave) -------
def _norms_by_op(tensors, ord=2, dtype=None):
    return [t.norm(ord, dtype=dtype) for t in tensors]


def _zero_dim(other) -> None:
    if other.ndim != 0:
        raise ShapeError(f"_foreach_mul_: scalar tensor expected to be 0 dim but it has {other.ndim} dimensions; "
                         f"pass a 0-d tensor (other.reshape(()) of one element)")


def _mul_by_op(tensors, other):
    _zero_dim(other)
    for t in tensors:
        t.mul_(other)


# -- CPU -------------------------------------------------------------------------------------------
def foreach_norm_cpu(tensors, ord=2, dtype=None):
    """Each tensor's ``ord`` norm; the 2-norm of a float32/float64 array as ``t.norm()``'s ops
    compute it: sqrt(sum(|x| * |x|)), each step rounded to the tensor's dtype."""
    if dtype is not None or float(ord) != 2.0:
        return _norms_by_op(tensors, ord, dtype)
    out = []
    scratch = {}                # dtype -> one buffer of squares, reused across the tensors
    with np.errstate(all="ignore"):
        for t in tensors:
            a = t._data
            if not _plain(a) or a.size == 0 or not a.flags.c_contiguous:    # (a strided sum's order is its plan's)
                out.append(t.norm(2))
                continue
            sq = _squares(a.reshape(-1), scratch)
            out.append(wrap(np.sqrt(_sum_of(a.dtype)(sq))))
    return out


@numba.njit(boundscheck=False)
def _abs_squares(a, out):
    """out[i] = |a[i]| * |a[i]|: NumPy's abs then multiply, the same two roundings, in one pass."""
    for i in range(a.shape[0]):
        v = abs(a[i])
        out[i] = v * v


def _squares(flat, scratch: dict):
    """|x| * |x| of 1-D ``flat`` in the front of ``scratch``'s buffer of its dtype.  (One pass into
    one buffer per call: np.abs's fresh array per gradient and its in-place multiply, under an
    errstate per tensor, cost 217 us over the GPT's 29 gradients, this 128 us, load 10.)"""
    n = flat.shape[0]
    buf = scratch.get(flat.dtype)
    if buf is None or buf.shape[0] < n:
        buf = scratch[flat.dtype] = np.empty(max(n, 1 << 16), flat.dtype)
    sq = buf[:n]
    ep = _SQUARES.get(flat.dtype)
    if ep is None:
        sig = (numba.types.Array(numba.from_dtype(flat.dtype), 1, "C"),) * 2
        ep = _SQUARES[flat.dtype] = cache.njit_function("foreach", ("abs_squares", flat.dtype), "abs_squares",
                                                        _abs_squares, sig)
    ep(flat, sq)
    return sq


def _no_grad_needed(tensors, other) -> None:
    """The op records no gradient (its use, clipping, runs under no_grad): a tensor that requires
    grad is refused, a leaf as ``mul_`` refuses it."""
    for t in (*tensors, other):
        if t.requires_grad:
            if t.is_leaf and t is not other:
                raise AutogradError("aten::_foreach_mul_.Tensor: a leaf Variable that requires grad is being used "
                                    "in an in-place operation; do it under dj.no_grad() or on a clone")
            raise AutogradError("aten::_foreach_mul_.Tensor records no gradient, and a tensor passed to it requires "
                                "grad; call it under dj.no_grad(), or use mul_ per tensor where the graph needs it")


def foreach_mul_cpu(tensors, other):
    """Every tensor times ``other`` in place; a 0-d ``other`` of each tensor's dtype by NumPy's
    multiply (``mul_``'s bits), anything else by ``mul_`` itself."""
    _zero_dim(other)
    o = other._data
    tensors = list(tensors)
    fast = o.__class__ is np.ndarray and o.ndim == 0
    plain, rest = [], []
    for t in tensors:
        a = t._data
        if fast and _plain(a) and a.dtype == o.dtype and a.flags.writeable:
            plain.append(t)
        else:
            rest.append(t)
    for t in plain:
        before_write(t)
    scalar = o[()] if plain else None
    with np.errstate(all="ignore"):     # inf * 0 is NaN without a warning, as mul_'s
        for t in plain:
            a = t._data
            np.multiply(a, scalar, out=a)
            bump_version(t)
    if rest:
        _mul_by_op(rest, other)


def foreach_mul_autograd(tensors, other):
    """Autograd's kernel: refuse what needs a gradient, then the backend's kernel."""
    tensors = list(tensors)
    if is_grad_enabled():
        _no_grad_needed(tensors, other)
    _below(tensors, other)


_below = below_autograd(lambda tensors, other: A._foreach_mul_(tensors, other))


def foreach_norm_meta(tensors, ord=2, dtype=None):
    return [empty((), dtype=dtype if dtype is not None else t.dtype, device=t.device) for t in tensors]


KERNELS = {
    "CPU": {"_foreach_norm.Scalar": foreach_norm_cpu, "_foreach_mul_.Tensor": foreach_mul_cpu},
    "CUDA": {"_foreach_norm.Scalar": below_autograd(_norms_by_op), "_foreach_mul_.Tensor": _mul_by_op},
    "Meta": {"_foreach_norm.Scalar": foreach_norm_meta, "_foreach_mul_.Tensor": lambda tensors, other: None},
    "Autograd": {"_foreach_mul_.Tensor": foreach_mul_autograd},
    "Tracer": {"_foreach_norm.Scalar": _norms_by_op, "_foreach_mul_.Tensor": _mul_by_op},
}
