"""vmap's ``randomness=`` modes.

Every random draw asks ``random.VMAP_RANDOM_HOOK`` first.  Inside a vmap: "error" raises
torch.func's error; "same" lets the draw happen once at the example's shape, so every example
shares it (it broadcasts against the batch); "different" stops the batched call before the
draw (nothing is drawn) and vmap runs the function once per example instead, each with its
own draws, and stacks the results.  Draws under a vmap nested inside the outermost one
follow the innermost vmap's mode.
"""

from __future__ import annotations

import contextlib
import threading

from .. import random as _random
from ..errors import VmapError

__all__ = ["vmap_randomness", "NeedsLoop"]


class NeedsLoop(Exception):
    """Internal: a random draw in randomness="different" mode; vmap reruns per example."""

    def __init__(self, level):
        super().__init__(level)
        self.level = level


class _State(threading.local):
    def __init__(self):
        self.modes: list = []      # (mode, level)


_state = _State()


def _hook(fname: str) -> None:
    if not _state.modes:
        return
    mode, level = _state.modes[-1]
    if mode == "error":
        raise VmapError(f"vmap: called random operation ({fname}) while in randomness error mode. Please either "
                        f"use the 'same' or 'different' randomness flags on vmap or perform the randomness "
                        f"operation out of vmap")
    if mode == "different":
        raise NeedsLoop(level)


@contextlib.contextmanager
def vmap_randomness(mode: str, batch_size: int, level: int):
    # installed once, for good: outside a vmap it returns at once (other threads may be inside one)
    _random.VMAP_RANDOM_HOOK[0] = _hook
    _state.modes.append((mode, level))
    try:
        yield
    finally:
        _state.modes.pop()


@contextlib.contextmanager
def per_example():
    """Inside the per-example rerun of a "different" vmap: draws are plain draws."""
    _state.modes.append(("same", None))
    try:
        yield
    finally:
        _state.modes.pop()
