"""The nn family, as the registration loop sees it: op.py's schemas and kernels (CPU loops in
cpu.py, CUDA through decomp.py's formulas) and grad.py's derivative rows; conv.py's and
pool.py's sliding-window ops (CPU loops in windows.py), each with its own rows; foreach.py's
multi-tensor ops for gradient clipping."""

from __future__ import annotations

from dispatch_jit import bf16

from . import conv, foreach, grad, norm, op, pool

__all__ = ["SCHEMAS", "KERNELS", "METHODS"]

SCHEMAS = op.SCHEMAS + norm.SCHEMAS + conv.SCHEMAS + pool.SCHEMAS + foreach.SCHEMAS
METHODS = op.METHODS


def _merged(*tables):
    out: dict = {}
    for table in tables:
        for key, kernels in table.items():
            out.setdefault(key, {}).update(kernels)
    return out


KERNELS = _merged({"CPU": op.CPU_KERNELS, "CUDA": op.CUDA_KERNELS, "Meta": op.META_KERNELS, **grad.KERNELS},
                  norm.KERNELS, conv.KERNELS, pool.KERNELS, foreach.KERNELS)

# softmax's row kernels widen bfloat16 to float32 and round once; linear decomposes into matmul and add
bf16.support(*(f"aten::{n}" for n in ("softmax", "log_softmax", "_softmax_backward_data",
                                      "_log_softmax_backward_data", "linear", "linear_backward")), keys=("CPU",))
