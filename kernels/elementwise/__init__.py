"""Elementwise ops: every op of table.py (SCALAR_OPS) as the registration loop sees it.

``SCHEMAS`` are each op's functional and in-place schemas; ``KERNELS`` the
generated CPU and CUDA kernels, and at Autograd either the in-place
wrapper of a differentiable op (derivatives.py has its functional form) or
a fallthrough for the ops whose outputs never require grad (comparisons,
logical and bitwise ops); any other op (nextafter) has the backend fallback.
"""

from __future__ import annotations

from dispatch_jit import bf16
from dispatch_jit.autograd.inplace import AutogradInplaceKernel
from dispatch_jit.library import fallthrough_kernel

from ..derivatives import DERIVATIVES
from .cpu import ElementwiseCPU
from .cuda import ElementwiseCUDA
from .table import COMPLEX, ELEMENTWISE_SCHEMAS, FLOAT, SCALAR_OPS

__all__ = ["SCHEMAS", "KERNELS"]


def _name(schema: str) -> str:
    return schema.split("(")[0]


SCHEMAS = [s for f, i in ELEMENTWISE_SCHEMAS.values() for s in (f, i) if s]

# the CPU and CUDA loops read and store bfloat16 through its words (support/loops: read_cast, store)
bf16.support(*(f"aten::{_name(s)}" for s in SCHEMAS), keys=("CPU", "CUDA"))


def _backend(kernel_class) -> dict:
    table = {}
    for op in SCALAR_OPS.values():
        f, i = ELEMENTWISE_SCHEMAS[op.name]
        table[_name(f)] = kernel_class(op, "functional")
        if i:
            table[_name(i)] = kernel_class(op, "inplace")
    return table


# rules whose results are bool or integer: no gradient flows through them, so autograd falls through
# at no cost.  An op of another rule without a derivative row gets the backend fallback, whose
# NotImplemented node raises if a backward reaches it (nextafter, as in PyTorch)
_INTEGRAL_RULES = frozenset(["compare", "predicate", "logical"])
_DIFFERENTIABLE_CATS = frozenset([FLOAT, COMPLEX])


def _autograd() -> dict:
    table = {}
    for op in SCALAR_OPS.values():
        f, i = ELEMENTWISE_SCHEMAS[op.name]
        fname = _name(f)
        if fname not in DERIVATIVES:
            if op.rule in _INTEGRAL_RULES or not op.cats & _DIFFERENTIABLE_CATS:
                table[fname] = fallthrough_kernel
                if i:
                    table[_name(i)] = fallthrough_kernel
        elif i:
            table[_name(i)] = AutogradInplaceKernel(f"aten::{fname}")
    return table


KERNELS = {"CPU": _backend(ElementwiseCPU), "CUDA": _backend(ElementwiseCUDA), "Autograd": _autograd()}
