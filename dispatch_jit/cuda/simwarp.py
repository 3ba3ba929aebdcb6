"""Warp shuffles in Numba's CUDA simulator, which has none.

The simulator runs a block's threads as Python threads.  ``sim_shfl_down_sync``
stands in for ``cuda.shfl_down_sync`` with a full mask: the 32 lanes of a warp
post their values, wait for each other, read lane + delta's, and wait again
before the slots are reused.  It lets the simulator run the hardware's
generated tail of a block reduction (kernels/reduction/cuda.py with
``SHUFFLES = True``); on hardware the generated source calls the intrinsic.
"""

from __future__ import annotations

import threading

__all__ = ["sim_shfl_down_sync"]

_WARPS: dict = {}
_WARPS_LOCK = threading.Lock()


def sim_shfl_down_sync(mask, value, delta):
    th = threading.current_thread()
    tid = th.threadIdx.x
    lane, key = tid % 32, (tuple(th.blockIdx), tid // 32)
    with _WARPS_LOCK:
        w = _WARPS.get(key)
        if w is None:
            w = _WARPS[key] = (threading.Barrier(32), [None] * 32)
    barrier, slots = w
    slots[lane] = value
    barrier.wait()
    src = lane + delta
    got = slots[src] if src < 32 else value
    barrier.wait()
    return got
