"""``dj.nn``: modules, parameters and the functional namespace, as PyTorch's ``torch.nn``.

A layer above the op library and below the compiler: it calls ops through the
dispatcher as user code does, so eager, ``@dj.compile`` and the compiled mode all
see its work as ordinary op calls.

>>> import dispatch_jit as dj
>>> lin = dj.nn.Linear(3, 2)
>>> [name for name, _ in lin.named_parameters()]
['weight', 'bias']
"""

from __future__ import annotations

from . import functional, init, utils
from .containers import ModuleDict, ModuleList
from .module import IncompatibleKeys, Module, Parameter
from .modules import (BCEWithLogitsLoss, CrossEntropyLoss, Dropout, Embedding, GELU, Identity, L1Loss, LayerNorm,
                      Linear, MSELoss, NLLLoss, ReLU, Sequential, SiLU, Sigmoid, Tanh)

__all__ = ["functional", "init", "utils", "Module", "Parameter", "IncompatibleKeys", "Linear", "Sequential",
           "ModuleList", "ModuleDict", "ReLU", "Tanh", "Sigmoid", "GELU", "SiLU", "LayerNorm", "Dropout", "Embedding",
           "Identity", "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "BCEWithLogitsLoss"]
