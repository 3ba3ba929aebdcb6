"""Reductions, as the registration loop sees them.

op.py holds the schemas and the CPU adapters; cuda.py one CUDA kernel per
CPU one.  var/std take PyTorch's argument order, resolved by ``op.VarStd``
around either backend's kernel.  The index and boolean reductions are not
differentiable: they fall through Autograd.
"""

from __future__ import annotations

from dispatch_jit.library import fallthrough_kernel

from . import cuda, op

__all__ = ["SCHEMAS", "KERNELS"]

SCHEMAS = op.SCHEMAS
KERNELS = {
    "CPU": op.CPU_KERNELS,
    "CUDA": {name: op.VarStd(k) if name in op.VAR_STD else k for name, k in cuda.CUDA_KERNELS.items()},
    "Autograd": {name: fallthrough_kernel for name in ("argmax", "argmin", "all", "any")},
}
