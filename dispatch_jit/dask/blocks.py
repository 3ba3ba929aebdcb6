"""What runs on a chunk: dispatch_jit's own CPU kernels, called on NumPy blocks.

Each function here is a top-level function taking the op's name and the
chunk's arrays, so Dask can pickle it to worker processes; there it looks the
op up (importing dispatch_jit registers every kernel) and calls it on CPU
tensors that wrap the blocks without a copy.  The call takes the ordinary
dispatch hot path: one memo lookup, then the compiled per-dtype Numba kernel
(compiled once per worker process and dtype signature, or loaded from
Numba's disk cache).
"""

from __future__ import annotations

import numpy as np

from ..ops import ops
from ..tensor import Tensor, wrap

__all__ = ["ARRAY", "apply_op", "reduce_blocks", "matmul_blocks"]




class _Array:
    """Pickles as itself (the placeholder must survive the trip to a worker process)."""

    def __reduce__(self):
        return (_array_marker, ())

    def __repr__(self):
        return "ARRAY"


def _array_marker():
    return ARRAY


ARRAY = _Array()          # a placeholder in an argument template: the next block goes here
_OPS: dict = {}


def op_handle(name: str):
    """The public overload for "aten::add.Tensor" (cached: the name is all a worker is sent)."""
    h = _OPS.get(name)
    if h is None:
        ns, _, rest = name.partition("::")
        packet, _, overload = rest.partition(".")
        p = getattr(getattr(ops, ns), packet)
        h = _OPS[name] = getattr(p, overload or "default")
    return h


def _tensor(block) -> Tensor:
    # Dask may hand a read-only or non-contiguous block; the kernels take either, no copy needed
    return wrap(block if isinstance(block, np.ndarray) else np.asarray(block))


def apply_op(name: str, template: tuple, kwargs: dict, *blocks) -> np.ndarray:
    """``op(*template, **kwargs)`` on CPU tensors, the blocks filling the template's ARRAY slots."""
    it = iter(blocks)
    args = [_tensor(next(it)) if a is ARRAY else wrap(a) if isinstance(a, np.ndarray) else a for a in template]
    return op_handle(name)(*args, **kwargs).numpy()


def reduce_blocks(name: str, extra: dict, x, axis=None, keepdims=False, computing_meta=False) -> np.ndarray:
    """A reduction's chunk, combine and aggregate step (Dask's ``da.reduction`` protocol):
    ``op(x, axis, keepdims, **extra)`` with dispatch_jit's kernel."""
    if isinstance(x, list):           # concatenate=False never reaches here; defensive for empty groups
        x = np.concatenate(x, axis=axis[0] if axis else 0)
    axes = list(range(x.ndim)) if axis is None else [int(a) for a in axis]
    return op_handle(name)(_tensor(x), axes, bool(keepdims), **extra).numpy()


def matmul_blocks(a, b) -> np.ndarray:
    """One output block of a blockwise matmul: the contracted dimension arrives concatenated."""
    return op_handle("aten::matmul")(_tensor(a), _tensor(b)).numpy()
