"""matmul and dot, as the registration loop sees them: op.py's schemas and CPU adapters, cuda.py's tiled kernel."""

from __future__ import annotations

from . import cuda, op

__all__ = ["SCHEMAS", "KERNELS"]

SCHEMAS = op.SCHEMAS
KERNELS = {"CPU": op.CPU_KERNELS, "CUDA": cuda.CUDA_KERNELS}
