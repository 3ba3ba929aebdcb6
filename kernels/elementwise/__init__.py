"""Elementwise ops: every op of table.py (SCALAR_OPS) as the registration loop sees it.

``SCHEMAS`` are each op's functional and in-place schemas; ``KERNELS`` the
generated CPU and CUDA kernels, and at Autograd either the in-place
wrapper of a differentiable op (derivatives.py has its functional form) or
a fallthrough for the ops whose outputs never require grad (comparisons,
logical and bitwise ops).
"""

from __future__ import annotations

from dispatch_jit.autograd.inplace import AutogradInplaceKernel
from dispatch_jit.library import fallthrough_kernel

from ..derivatives import DERIVATIVES
from .cpu import ElementwiseCPU
from .cuda import ElementwiseCUDA
from .table import ELEMENTWISE_SCHEMAS, SCALAR_OPS

__all__ = ["SCHEMAS", "KERNELS"]


def _name(schema: str) -> str:
    return schema.split("(")[0]


SCHEMAS = [s for f, i in ELEMENTWISE_SCHEMAS.values() for s in (f, i) if s]


def _backend(kernel_class) -> dict:
    table = {}
    for op in SCALAR_OPS.values():
        f, i = ELEMENTWISE_SCHEMAS[op.name]
        table[_name(f)] = kernel_class(op, "functional")
        if i:
            table[_name(i)] = kernel_class(op, "inplace")
    return table


def _autograd() -> dict:
    table = {}
    for f, i in ELEMENTWISE_SCHEMAS.values():
        fname = _name(f)
        if fname not in DERIVATIVES:
            table[fname] = fallthrough_kernel
            if i:
                table[_name(i)] = fallthrough_kernel
        elif i:
            table[_name(i)] = AutogradInplaceKernel(f"aten::{fname}")
    return table


KERNELS = {"CPU": _backend(ElementwiseCPU), "CUDA": _backend(ElementwiseCUDA), "Autograd": _autograd()}
