"""The nn family, as the registration loop sees it: op.py's schemas and kernels (CPU loops in
cpu.py, CUDA through decomp.py's formulas) and grad.py's derivative rows."""

from __future__ import annotations

from . import grad, op

__all__ = ["SCHEMAS", "KERNELS", "METHODS"]

SCHEMAS = op.SCHEMAS
METHODS = op.METHODS
KERNELS = {"CPU": op.CPU_KERNELS, "CUDA": op.CUDA_KERNELS, "Meta": op.META_KERNELS, **grad.KERNELS}
