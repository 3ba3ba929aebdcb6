"""``dj.optim``: optimizers with PyTorch's names, options and defaults, each step of SGD, Adam and
AdamW one fused update op per group (``_fused_sgd_``, ``_fused_adam_``, ``_fused_adamw_``:
kernels/optim/, one Numba loop per dtype for all parameters; RMSprop and Adagrad: eager tensor
ops, having no fused op), and
``dj.optim.lr_scheduler``, PyTorch's learning-rate schedulers.

>>> import dispatch_jit as dj
>>> model = dj.nn.Linear(2, 1)
>>> opt = dj.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
>>> len(opt.param_groups[0]["params"])
2
"""

from __future__ import annotations

from . import lr_scheduler
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "lr_scheduler"]
