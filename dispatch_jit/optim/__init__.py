"""``dj.optim``: optimizers with PyTorch's names, options and defaults, each step one Numba loop
per dtype for all parameters (foreach.py).

>>> import dispatch_jit as dj
>>> model = dj.nn.Linear(2, 1)
>>> opt = dj.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
>>> len(opt.param_groups[0]["params"])
2
"""

from __future__ import annotations

from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]
