"""gather, scatter, scatter_add, topk and advanced indexing (index, index_put_, index_put: advanced.py), as the registration loop sees them: op.py's schemas and CPU
kernels over cpu.py's and select.py's Numba loops, and grad.py's derivative rows.  cuda.py's CUDA kernels (not topk's yet: README)."""

from __future__ import annotations

from . import advanced, batch, cuda, grad, op

__all__ = ["SCHEMAS", "KERNELS", "METHODS"]

SCHEMAS = op.SCHEMAS + advanced.SCHEMAS
METHODS = op.METHODS + advanced.METHODS
KERNELS = {"CPU": {**op.CPU_KERNELS, **advanced.CPU_KERNELS}, "CUDA": {**cuda.CUDA_KERNELS, **advanced.CUDA_KERNELS},
           "Meta": {**op.META_KERNELS, **advanced.META_KERNELS}, **grad.KERNELS, **batch.KERNELS}
