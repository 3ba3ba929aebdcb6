"""Launch configuration, chosen from the device's attributes.

Elementwise kernels use grid-stride loops, so the grid never needs to cover
the whole array: enough blocks to fill every multiprocessor a few times is
as fast and launches faster.  The simulator runs one Python thread per CUDA
thread, so there blocks are one warp.
"""

from __future__ import annotations

import functools

from .runtime import device_attributes

__all__ = ["elementwise_config", "launch", "BLOCKS_PER_SM"]

BLOCKS_PER_SM = 8


@functools.lru_cache(maxsize=4096)
def elementwise_config(n: int, device_index: int = 0) -> tuple[int, int]:
    """(blocks, threads per block) for a grid-stride loop over ``n`` elements."""
    a = device_attributes(device_index)
    threads = 32 if a.simulated else min(256, a.max_threads)
    if n <= 0:
        return 1, threads
    blocks = min(-(-n // threads), a.sm_count * (1 if a.simulated else BLOCKS_PER_SM))
    return max(blocks, 1), threads


def launch(kernel, n: int, device_index: int, *args) -> None:
    """Run a grid-stride ``kernel`` over ``n`` elements (nothing when ``n`` is 0)."""
    if n == 0:
        return
    blocks, threads = elementwise_config(n, device_index)
    kernel[blocks, threads](*args)
