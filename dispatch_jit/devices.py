"""Devices: ``dj.device`` and placing host data on one.

``device("cpu")``, ``device("cuda:1")``; ``place`` puts a host array where a
device says (itself for the CPU, a copy in device memory for CUDA).
"""

from __future__ import annotations

import numpy as np

__all__ = ["device", "CPU_DEVICE", "place"]


class device:
    """A device: ``device("cpu")``, ``device("cuda")``, ``device("cuda:1")``.

    >>> import dispatch_jit as dj
    >>> dj.device("cpu"), dj.device("cuda:1").index
    (device(type='cpu'), 1)
    """

    __slots__ = ("type", "index")

    def __init__(self, spec="cpu", index: int | None = None):
        if isinstance(spec, device):
            spec, index = spec.type, spec.index
        if not isinstance(spec, str):
            raise TypeError(f"device must be a string like 'cpu' or 'cuda:0', got {spec!r}")
        typ, _, idx = spec.partition(":")
        if typ not in ("cpu", "cuda", "meta"):
            raise ValueError(f"unknown device type {typ!r}: expected 'cpu', 'cuda', 'cuda:N' or 'meta'")
        if idx:
            if not idx.isdigit():
                raise ValueError(f"bad device index in {spec!r}: expected a non-negative integer after ':'")
            index = int(idx)
        self.type, self.index = typ, index

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index or 0) == (other.type, other.index or 0)

    def __hash__(self):
        return hash((self.type, self.index or 0))

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        return f"device(type='{self.type}')" if self.index is None else \
            f"device(type='{self.type}', index={self.index})"


CPU_DEVICE = device("cpu")


def _check_cpu(dev) -> None:
    """Raise unless ``dev`` names a device tensors with data can live on."""
    if dev is None:
        return
    d = device(dev) if not isinstance(dev, device) else dev
    if d.type == "cuda":
        from .cuda.runtime import require
        require(d.index or 0)
    elif d.type != "cpu":
        raise ValueError(f"device {d} is not supported for tensors with data; use 'cpu' or 'cuda'")


def place(a: np.ndarray, dev):
    """The storage for host array ``a`` on device ``dev``: ``a`` itself for the CPU,
    a copy in device memory for CUDA."""
    if dev is None:
        return a
    d = device(dev) if not isinstance(dev, device) else dev
    if d.type == "cpu":
        return a
    _check_cpu(d)
    from .cuda.array import from_host
    return from_host(a, d.index or 0)
