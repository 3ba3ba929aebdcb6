"""Views, shape ops, casts and copies, as the registration loop sees them.

The schemas are the keys of cpu.SHAPE_KERNELS, index.SCHEMAS (basic indexing's slice and
select) and assign.SCHEMAS (copy_, item assignment's store); the CUDA kernels
(cuda.CUDA_KERNELS) reuse the CPU views' arithmetic and copy with dispatch_jit/cuda/copy.py
where a view is impossible.
"""

from __future__ import annotations

from dispatch_jit import bf16
from dispatch_jit.creation import empty_like

from . import assign, cuda, index
from .cpu import SHAPE_KERNELS
from .op import RULES, TAGS as _TAGS

__all__ = ["SCHEMAS", "SHAPE_RULES", "TAGS", "KERNELS"]

SCHEMAS = list(SHAPE_KERNELS) + index.SCHEMAS + assign.SCHEMAS
SHAPE_RULES = {**RULES, **index.RULES}   # one rule per view: the kernels' checks, tracing's and lazy mode's shapes
TAGS = {**_TAGS, **index.TAGS}
KERNELS = {
    "CPU": {**{schema.split("(")[0]: kernel for schema, kernel in SHAPE_KERNELS.items()}, **index.CPU_KERNELS, **assign.CPU_KERNELS},
    "CUDA": {**cuda.CUDA_KERNELS, **index.cuda_kernels(cuda.view_kernel), **assign.CUDA_KERNELS},
    # clone's result type without its data (a fresh C-contiguous copy): what a trace and compiled
    # mode's records of it (autograd's .grad of a pending gradient) are typed by
    "Meta": {"clone": lambda self: empty_like(self), **index.META_KERNELS, **assign.META_KERNELS},
    **index.KERNELS,
}

# views move no values, and cat/stack/to/clone convert through dispatch_jit/bf16.py on the CPU and
# through dispatch_jit/cuda/copy.py's kernels (the same conversions, on the words) on CUDA
bf16.support(*(f"aten::{s.split('(')[0]}" for s in SCHEMAS), keys=("CPU", "CUDA"))
