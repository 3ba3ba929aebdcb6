"""Reductions, as the registration loop sees them.

op.py holds the schemas and the argument handling (``op.Reduction``: axes,
``dtype=``, var/std's PyTorch argument order), written once; cpu.CPU and
cuda.CUDA only reduce.  The index and boolean reductions are not
differentiable: they fall through Autograd.
"""

from __future__ import annotations

from dispatch_jit import bf16
from dispatch_jit.library import fallthrough_kernel
from dispatch_jit.registry import Tag

from . import cpu, cuda, op

__all__ = ["SCHEMAS", "TAGS", "KERNELS"]

SCHEMAS = op.SCHEMAS
TAGS = dict.fromkeys(op.EXTRA, (Tag.reduction,))     # every op here reduces over ``axis``
KERNELS = {
    "CPU": op.kernels("cpu", cpu.CPU),
    "CUDA": op.kernels("cuda", cuda.CUDA),
    "Autograd": {name: fallthrough_kernel for name in ("argmax", "argmin", "all", "any")},
}
# cpu.py and cuda.py reduce bfloat16 as float32 and round the result once
bf16.support(*(f"aten::{s.split('(')[0]}" for s in SCHEMAS), keys=("CPU", "CUDA"))
