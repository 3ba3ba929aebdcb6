"""Which recorded ops are elementwise, and their types, from kernels/scalar_ops.py.

An op fuses when it is the functional overload of a ``SCALAR_OPS`` entry and
every dtype involved has Numba arithmetic of its own (float16 is computed in
float32 and rounded per op in eager mode, complex is not generated yet: both
stay eager steps).  The types come from the same ``type_rule`` the eager
kernels use, so a fused chain stores every intermediate in the dtype eager
mode would have materialized it in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dispatch_jit.dtypes import COMPLEX, DType, float16, result_type
from dispatch_jit.kernels.aten import ELEMENTWISE_SCHEMAS
from dispatch_jit.kernels.scalar_ops import SCALAR_OPS, ScalarOp, type_rule

from .ir import Node, TensorType, Var

__all__ = ["Elementwise", "elementwise_info", "scalar_op_of", "SCALAR_TYPES"]

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
    for x in operands:
        if isinstance(x, Var):
            t = types[x.id]
            if not _fusible_dtype(t.dtype):
                return None, f"{t.dtype.name} inputs are not fused yet"
            promo.append(t)
        elif x is None:
            continue
        elif isinstance(x, SCALAR_TYPES):
            promo.append(x)
        else:
            return None, f"operand of type {type(x).__name__} is not fused"
    if not any(isinstance(x, Var) for x in operands):
        return None, "no tensor operand"
    for _, v in statics:
        if not isinstance(v, SCALAR_TYPES):
            return None, f"static parameter of type {type(v).__name__} is not fused"
    if sop.rule == "where":
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
    ndim = max(types[x.id].ndim for x in info.operands if isinstance(x, Var))
    return TensorType(info.result, ndim)
