"""The ops a plan function (run/function.py) calls inside its one compiled function: per op, a rule
that writes the call into the function's source, or says why it cannot.

A rule gets the node and a ``Site`` (the names of the node's operands in the generated
source, and the arrays one interpreted run of the plan gave them, which fix their shapes,
dtypes and layouts for the sizes the plan function is made for) and returns the source
lines, or a string: why the op stays out (the plan then runs interpreted).  Each rule calls
what the op's eager CPU kernel calls, in the same order, so that the bits are eager mode's:
``linear`` and ``linear_backward`` kernels/linalg/product.py's ``product_into`` (eager matmul's
one kernel choice: the gemm of kernels/linalg/cpu.py's ``_blas``, the same operand layouts, or
the loop nest for a skinny product), and the bias's add and gradient
(``add_bias``, ``column_sum``) and the losses kernels/nn/cpu.py's njit kernels themselves.  A kernel that refuses its
input (a target out of range) makes the plan function return the node's position: the
plan runs interpreted for that call, and eager mode's own error is raised there.
"""

from __future__ import annotations

import numba
import numpy as np

from dispatch_jit.kernels.linalg.product import product_into
from dispatch_jit.kernels.nn import cpu as _nn

from . import tensor_rules

__all__ = ["RULES", "HELPERS", "RUNTIME_READERS", "Site"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


class Site:
    """Where a node's operands are: ``name(v)``: the source name of value ``v``'s array;
    ``array(v)``: the array one interpreted run gave it; ``scratch(shape, dtype, chunks_of=None)``:
    the name of a work array the caller allocates with the outputs (``chunks_of=n``: one
    element per chunk of a full reduction of n elements, as many as the eager kernel's); ``fail``: the statement that
    returns this node's position (the refusal above)."""

    def __init__(self, names: dict, arrays: dict, scratch, fail: str):
        self.names, self.arrays, self.scratch, self.fail = names, arrays, scratch, fail

    def name(self, v) -> str:
        return self.names[v.id]

    def array(self, v) -> np.ndarray:
        return self.arrays[v.id]


@numba.njit(boundscheck=False)
def count_kept(t, ignore_index):
    """How many targets are not ``ignore_index`` (the mean's divisor), as a float."""
    n = 0
    for i in range(t.shape[0]):
        n += t[i] != ignore_index
    return float(n)


HELPERS = {"_product": product_into, "_add_rows": _nn.add_bias, "_sum_rows": _nn.column_sum, "_count_kept": count_kept,
           "_cross_entropy": _nn.cross_entropy, "_cross_entropy_backward": _nn.cross_entropy_backward}


def _float_matrix(site, *vs, batched=()) -> str:
    """Why operands ``vs`` are not float matrices of one dtype ("" where they are); those in
    ``batched`` may have more dimensions (linear's input and gradient: eager flattens them)."""
    for v in vs:
        a = site.array(v)
        if a.dtype not in _FLOATS or not (a.ndim == 2 or (v in batched and a.ndim > 2)) \
                or not a.flags.c_contiguous:
            return (f"an operand of {a.dtype}, shape {a.shape}, {'' if a.flags.c_contiguous else 'not '}C-contiguous "
                    f"(only C-contiguous float32/64 matrices{', or batches of rows' if batched else ''})")
    if len({site.array(v).dtype for v in vs}) > 1:
        return "operands of different dtypes"
    return ""


def _rows(site, v) -> str:
    """The source of value ``v`` as the 2-D C-layout array of its rows: eager's ``reshape(-1, n)``
    (copied to C order first where it is not a C-layout array in the function)."""
    a = site.array(v)
    if a.ndim == 2 and tensor_rules.c_typed(site, v):
        return site.name(v)
    return f"{tensor_rules.c_order(site, v)}.reshape(({a.size // a.shape[-1]}, {a.shape[-1]}))"


def _out_rows(site, vid) -> str:
    a = site.arrays[vid]
    name = site.names[vid]
    return name if a.ndim == 2 else f"{name}.reshape(({a.size // a.shape[-1]}, {a.shape[-1]}))"


def _linear(node, site):
    x, w, b = (list(node.args) + [None, None])[:3]
    why = _float_matrix(site, x, w, batched=(x,))
    if why:
        return "linear: " + why
    if b is not None and (site.array(b).shape != site.array(w).shape[:1] or site.array(b).dtype != site.array(x).dtype):
        return "linear: a bias that is not one value per output feature"
    out = _out_rows(site, node.outs[0])
    lines = [f"_product({_rows(site, x)}, {site.name(w)}.T, {out})"]
    if b is not None:
        lines.append(f"_add_rows({out}, {site.name(b)})")
    return lines


def _linear_backward(node, site):
    g, x, w, mask = node.args
    why = _float_matrix(site, g, x, w, batched=(g, x))
    if why:
        return "linear_backward: " + why
    gi, gw, gb = node.outs
    g2 = _rows(site, g)
    lines = []
    if mask[0]:
        lines.append(f"_product({g2}, {site.name(w)}, {_out_rows(site, gi)})")
    if mask[1]:
        lines.append(f"_product({g2}.T, {_rows(site, x)}, {site.names[gw]})")
    if mask[2]:
        lines.append(f"_sum_rows({g2}, {site.names[gb]})")
    return lines


def _loss_operands(args, site, who: str):
    """(logits, target, reduction, ignore_index, smoothing) of a cross-entropy node's ``args``
    (those after the incoming gradient, for the backward), or why not."""
    x, t, w, reduction, ignore, eps = args
    why = _float_matrix(site, x)
    if why:
        return f"{who}: " + why
    ta = site.array(t)
    if ta.dtype != np.int64 or ta.ndim != 1 or not ta.flags.c_contiguous:
        return f"{who}: targets of {ta.dtype} with {ta.ndim} dimension(s) (only class indices, int64, 1-D)"
    if w is not None:
        return f"{who}: a class weight"
    if reduction not in ("mean", "sum"):
        return f"{who}: reduction={reduction!r}"
    return x, t, reduction, int(ignore), float(eps)


def _cross_entropy(node, site):
    ops = _loss_operands(node.args, site, "cross_entropy_loss")
    if isinstance(ops, str):
        return ops
    x, t, reduction, ignore, eps = ops
    rows = site.scratch((site.array(x).shape[0],), np.float64)
    nw = site.scratch((0,), site.array(x).dtype)
    out = site.names[node.outs[0]]
    # as kernels/nn/op.py's _finish_loss: the float64 total, over the float64 weight sum for a mean
    total = "tot / wsum" if reduction == "mean" else "tot"
    return [f"tot, wsum, bad = _cross_entropy({site.name(x)}, {site.name(t)}, {nw}, {ignore}, {eps!r}, {rows})",
            "if bad >= 0:", f"    {site.fail}", f"{out}[()] = {total}"]


def _cross_entropy_backward(node, site):
    g = node.args[0]
    ops = _loss_operands(node.args[1:], site, "cross_entropy_loss_backward")
    if isinstance(ops, str):
        return ops
    x, t, reduction, ignore, eps = ops
    ga = site.array(g)
    if ga.shape != () or ga.dtype != site.array(x).dtype:
        return "cross_entropy_loss_backward: an incoming gradient that is not one value of the logits' dtype"
    nw = site.scratch((0,), site.array(x).dtype)
    out = site.names[node.outs[0]]
    div = f"_count_kept({site.name(t)}, {ignore})" if reduction == "mean" else "1.0"
    return [f"_cross_entropy_backward({site.name(g)}.reshape(1), 0, {div}, {site.name(x)}, {site.name(t)}, "
            f"{nw}, {ignore}, {eps!r}, {out})"]


def _clone(node, site):
    # the eager kernel: a C-contiguous array of the same dtype, every element copied (the output is
    # allocated so by the caller)
    return [f"{site.names[node.outs[0]]}[...] = {site.name(node.args[0])}"]


# op name -> rule (see the module docstring)
RULES = {
    "aten::linear": _linear,
    "aten::linear_backward": _linear_backward,
    "aten::cross_entropy_loss": _cross_entropy,
    "aten::cross_entropy_loss_backward": _cross_entropy_backward,
    "aten::clone": _clone,
    **tensor_rules.RULES,
}
HELPERS.update(tensor_rules.HELPERS)

# the ops whose rules read the plan's runtime scalars themselves (a runtime scalar of index i is the
# plan function's parameter ``r<i>``): the multi-tensor loops of an optimizer's step recorded in
# compiled mode (compiler/lazy/update.py, which registers its rule above and its loops in HELPERS)
RUNTIME_READERS: set = set()
