"""``dj.signal``: PyTorch's ``torch.signal`` (its ``windows`` namespace).

>>> import dispatch_jit as dj
>>> dj.signal.windows.hann(4, sym=False)
tensor([0.0000, 0.5000, 1.0000, 0.5000])
"""

from __future__ import annotations

from . import windows

__all__ = ["windows"]
