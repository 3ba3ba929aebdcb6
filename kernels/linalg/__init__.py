"""matmul and dot, as the registration loop sees them: op.py's argument handling (``op.Linalg``)
over the CPU's array kernels (cpu.py, bound in op.CPU) and cuda.py's tiled kernel (cuda.CUDA)."""

from __future__ import annotations

from dispatch_jit import bf16

from . import cuda, op

__all__ = ["SCHEMAS", "KERNELS"]

SCHEMAS = op.SCHEMAS
KERNELS = {
    "CPU": {name: op.Linalg(name, "cpu", op.CPU) for name in ("matmul", "dot")},
    "CUDA": {name: op.Linalg(name, "cuda", cuda.CUDA) for name in ("matmul", "dot")},
}
# bfloat16 is multiplied in float32 and rounded once (cpu.py)
bf16.support("aten::matmul", "aten::dot", keys=("CPU",))
