"""Broadcasting shapes past NumPy's 32 dimensions.

NumPy's multi-iterator (``np.broadcast_shapes``, ``np.broadcast_arrays``,
``np.nditer``) stops at 32 dimensions, and a tensor may have 64 (PyTorch's
limit), so every layer that broadcasts shapes (the kernels, autograd, the
compiled mode) calls this one instead.  Below the kernels in the import order.
"""

from __future__ import annotations

import numpy as np

from .errors import BroadcastError

__all__ = ["broadcast_shapes", "NUMPY_MAXDIMS"]

NUMPY_MAXDIMS = 32


def broadcast_shapes(*shapes) -> tuple:
    """``np.broadcast_shapes`` for any ndim; raises ValueError where the shapes do not broadcast.

    >>> broadcast_shapes((2, 1), (3,)), len(broadcast_shapes((1,) * 40, (5,)))
    ((2, 3), 40)
    """
    if max(map(len, shapes), default=0) <= NUMPY_MAXDIMS:
        return np.broadcast_shapes(*shapes)
    out = [1] * max(len(s) for s in shapes)
    for s in shapes:
        for i, n in enumerate(s, len(out) - len(s)):
            if n != out[i] and out[i] != 1 and n != 1:
                raise BroadcastError(f"shape mismatch: {tuple(s)} does not broadcast to {tuple(out)}")
            out[i] = n if out[i] == 1 else out[i]
    return tuple(out)
