"""Ordering, scans and gathers (sort, argsort, searchsorted, cumsum, cumprod, nonzero, flip, roll,
tril, triu, index_select, take, take_along_dim), as the registration loop sees them: op.py's
schemas and CPU kernels over sorting.py's Numba loops, and grad.py's gradients (sort, cumsum,
cumprod).  No CUDA kernels yet (README)."""

from __future__ import annotations

from . import grad
from .op import CPU_KERNELS, META_KERNELS, SCHEMAS

__all__ = ["SCHEMAS", "KERNELS"]

KERNELS = {"CPU": CPU_KERNELS, "Meta": META_KERNELS, **grad.KERNELS}
