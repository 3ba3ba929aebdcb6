"""Which recorded ops are elementwise, and their types, from kernels/elementwise/table.py.

An op fuses when it is the functional overload of a ``SCALAR_OPS`` entry and
every dtype involved is generated: bfloat16 on the CPU is computed in float32
and each node's result rounded to bfloat16 as eager mode stores it (codegen.py);
float16 and complex are not generated yet (eager steps).
The types come from the same ``type_rule`` the eager kernels use, so a fused
chain stores every intermediate in the dtype eager mode would have materialized
it in.

A reduction (``sum``, ``prod``, ``mean``, ``max``, ``min``) fuses as the
epilogue of a region when ``reduction_info`` resolves it: its axes are
static, it has no ``dtype=``, and its dtype rules (result and accumulator)
are read from the eager kernels' table in kernels/reduction/table.py, so the fused
loop accumulates as eager mode does (ints in int64, floats in float64; bfloat16 by
float32's rules, its float32 result rounded once on store).

Devices: a value's type carries its device ("cpu" or "cuda"); an
elementwise node whose tensor operands are on different devices does not
fuse, and on CUDA only full reductions end a region (compiler/cuda.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dispatch_jit.dtypes import COMPLEX, DType, as_dtype, bfloat16, float16, float32, result_type
from dispatch_jit.kernels.elementwise.table import ELEMENTWISE_SCHEMAS
from dispatch_jit.kernels.reduction.table import REDUCTIONS
from dispatch_jit.kernels.shape.op import _EMPTY_AXES
from dispatch_jit.registry import Tag
from dispatch_jit.kernels.elementwise.table import SCALAR_OPS, WHERE_CONDITION_DTYPES, ScalarOp, type_rule

from .graph.ir import Node, TensorType, Var

__all__ = ["Elementwise", "elementwise_info", "scalar_op_of", "SCALAR_TYPES", "Reduction", "reduction_info",
           "reduction_result", "reduced_shape"]

# Python scalars a fused loop takes as arguments
SCALAR_TYPES = (bool, int, float, np.bool_, np.integer, np.floating)
_FUNCTIONAL = {f.split("(")[0]: name for name, (f, _) in ELEMENTWISE_SCHEMAS.items()}


def scalar_op_of(op) -> ScalarOp | None:
    """The ScalarOp of an ``aten`` functional elementwise overload, else None."""
    if isinstance(op, str):
        return None
    ns, _, rest = op.name().partition("::")
    name = _FUNCTIONAL.get(rest) if ns == "aten" else None
    return SCALAR_OPS[name] if name else None


@dataclass(frozen=True)
class Elementwise:
    """One elementwise node, resolved: operands (Var, scalar or None, as x, y, z),
    static parameters (alpha), and the op's compute/result dtypes and casts."""

    sop: ScalarOp
    operands: tuple
    statics: tuple          # ((name, value), ...)
    compute: DType
    result: DType
    casts: tuple


def _fusible_dtype(d: DType) -> bool:
    # bfloat16 fuses: computed in float32, each node's result rounded where eager stores it (codegen.py;
    # CUDA kernels read and store its words as the eager CUDA kernels do)
    return d is not float16 and d.category != COMPLEX


def elementwise_info(node: Node, types: dict[int, TensorType]) -> tuple[Elementwise | None, str]:
    """(info, "") when ``node`` can run inside a fused loop, else (None, why not)."""
    sop = scalar_op_of(node.op)
    if sop is None:
        return None, "not an elementwise op"
    operands = tuple(node.args[:sop.arity])
    if node.kwargs.get("out") is not None:
        return None, "writes to out="
    statics = tuple((k, v) for k, v in node.kwargs.items() if k != "out")
    promo = []
    devices = set()
    for x in operands:
        if isinstance(x, Var):
            t = types[x.id]
            if not _fusible_dtype(t.dtype):
                return None, f"{t.dtype.name} inputs are not fused yet"
            devices.add(t.device)
            promo.append(t)
        elif x is None:
            continue
        elif isinstance(x, SCALAR_TYPES):
            promo.append(x)
        else:
            return None, f"operand of type {type(x).__name__} is not fused"
    if not any(isinstance(x, Var) for x in operands):
        return None, "no tensor operand"
    if len(devices) > 1:
        return None, "operands on different devices (a CPU scalar tensor joining a CUDA op) run eagerly"
    for _, v in statics:
        if not isinstance(v, SCALAR_TYPES):
            return None, f"static parameter of type {type(v).__name__} is not fused"
    if sop.rule == "where":
        if result_type(promo[0]).name not in WHERE_CONDITION_DTYPES:
            return None, "where's condition is not bool (eager mode raises)"
        promo = promo[1:]
    compute, result, casts = type_rule(sop, result_type(*promo), len(operands))
    if compute.category not in sop.cats:
        return None, f"{sop.name} does not support {compute.name}"
    if compute.category < 2 and any(isinstance(v, (float, np.floating)) for _, v in statics):
        return None, "float static parameter on integral inputs (eager mode raises)"
    if not (_fusible_dtype(compute) and _fusible_dtype(result)):
        return None, f"{compute.name} arithmetic is not fused yet"
    return Elementwise(sop, operands, statics, compute, result, casts), ""


def result_of(node: Node, types: dict[int, TensorType]) -> TensorType | None:
    """The output type of a fusible elementwise node, without running anything."""
    info, _ = elementwise_info(node, types)
    if info is None:
        return None
    vs = [types[x.id] for x in info.operands if isinstance(x, Var)]
    return TensorType(info.result, max(t.ndim for t in vs), vs[0].device)


# -- reductions as region epilogues --------------------------------------------------------
# the reductions (ops tagged dj.Tag.reduction) that codegen.py's loops end a region with
_EPILOGUES = frozenset(["sum", "prod", "mean", "max", "min"])


@dataclass(frozen=True)
class Reduction:
    """One reduction node, resolved: the value it reads (``src``) and defines
    (``out``), its normalized sorted axes, and its input, result and
    accumulator dtypes (as the eager kernel: float32 sums in float64)."""

    kind: str
    src: int
    out: int
    axes: tuple
    keepdim: bool
    ndim: int
    input: DType
    result: DType
    acc: DType
    node: Node

    @property
    def full(self) -> bool:
        return len(self.axes) == self.ndim

    @property
    def out_ndim(self) -> int:
        return self.ndim if self.keepdim else self.ndim - len(self.axes)

    @property
    def trailing(self) -> bool:
        """The reduced axes are the last ones: one register accumulator per output."""
        return self.axes == tuple(range(self.ndim - len(self.axes), self.ndim))


def reduction_info(node: Node, types: dict[int, TensorType]) -> tuple[Reduction | None, str]:
    """(info, "") when ``node`` can end a fused region, else (None, why not)."""
    kind = node.op.name().split("::")[-1] if Tag.reduction in getattr(node.op, "tags", ()) else None
    if kind not in _EPILOGUES:
        return None, "not a reduction"
    if len(node.outs) > 1 or not node.args or not isinstance(node.args[0], Var):
        return None, f"{kind}: unexpected arguments"
    kw = dict(node.kwargs)
    if kw.pop("dtype", None) is not None:
        return None, f"{kind}(dtype=...) is not fused yet"
    rest = list(node.args[1:]) + [None] * 2
    axis = kw.pop("axis", kw.pop("dim", rest[0]))
    keepdim = kw.pop("keepdims", kw.pop("keepdim", rest[1] if len(node.args) > 2 else False))
    if kw or len(node.args) > 3:
        return None, f"{kind}: unexpected arguments"
    src = node.args[0].id
    t = types[src]
    nd = t.ndim
    if nd == 0:
        return None, "a 0-d reduction has nothing to fuse"
    if axis is None or (isinstance(axis, (list, tuple)) and not axis and _EMPTY_AXES.get(kind) == "all"):
        # () is every dim where eager says so (amax's default, as PyTorch's dim=[])
        axes = tuple(range(nd))
    elif isinstance(axis, (int, np.integer)) and not isinstance(axis, bool):
        axes = (int(axis),)
    elif isinstance(axis, (list, tuple)) and all(isinstance(a, (int, np.integer)) and not isinstance(a, bool)
                                                 for a in axis):
        axes = tuple(int(a) for a in axis)
    else:
        return None, f"{kind}: axis {axis!r} is not static"
    if not axes or any(not -nd <= a < nd for a in axes):
        return None, f"{kind}: axis {axis!r} runs eagerly (empty or out of range)"
    axes = tuple(sorted(a % nd for a in axes))
    if len(set(axes)) != len(axes):
        return None, f"{kind}: axis {axis!r} repeats a dimension"
    if t.device != "cpu" and len(axes) != nd:
        return None, (f"{kind} over axes {axes} on {t.device}: the fused elementwise part stores its value and "
                      f"the eager CUDA reduction kernel reduces it (only full reductions are CUDA epilogues)")
    if not isinstance(keepdim, (bool, np.bool_)):
        return None, f"{kind}: keepdims={keepdim!r} is not a bool"
    spec = REDUCTIONS[kind]
    # bfloat16 reduces as float32 (eager's kernels read its words as float32's), a float32 result
    # rounded once: the fold's rules are float32's, and the loop's store rounds
    words = t.dtype is bfloat16
    if words and t.device != "cpu":
        return None, (f"{kind} of bfloat16 on {t.device}: the fused elementwise part stores its value and the "
                      f"eager CUDA reduction kernel reduces it (its block tree's order, not this epilogue's)")
    dt = np.dtype(np.float32) if words else t.dtype.np
    if not _fusible_dtype(t.dtype) or dt.kind not in spec.kinds:
        return None, f"{kind} of {t.dtype.name} is not fused"
    acc_rule = REDUCTIONS[spec.kernel].acc if spec.kernel else spec.acc
    result, acc = as_dtype(spec.result(dt)), as_dtype(acc_rule(dt))
    if words and result is float32:
        result = bfloat16
    if not (_fusible_dtype(result) and _fusible_dtype(acc)):
        return None, f"{kind}: {result.name} results are not fused"
    out = node.outs[0] if node.outs else -1     # -1: not recorded yet (lazy mode asks for the type first)
    if out in types and types[out].dtype is not result:
        return None, f"{kind}: recorded dtype {types[out].dtype.name} is not the rule's {result.name}"
    return Reduction(kind, src, out, axes, bool(keepdim), nd, t.dtype, result, acc, node), ""


def reduction_result(node: Node, types: dict[int, TensorType]) -> TensorType | None:
    """The output type of a reduction that can end a fused region, without running anything."""
    red, _ = reduction_info(node, types)
    return None if red is None else TensorType(red.result, red.out_ndim)


def reduced_shape(shape: tuple, axes: tuple, keepdim: bool) -> tuple:
    """The shape of a reduction's output over ``shape``."""
    if keepdim:
        return tuple(1 if d in axes else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in axes)
