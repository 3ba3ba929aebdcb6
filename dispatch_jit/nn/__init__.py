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
from .activation import Flatten, LogSoftmax, Softmax, Unflatten
from .activation_modules import *  # noqa: F401,F403  (its __all__ is part of ours)
from .activation_modules import __all__ as _ACTIVATIONS
from .attention import MultiheadAttention
from .containers import ModuleDict, ModuleList
from .conv import Conv1d, Conv2d
from .dropout import AlphaDropout, Dropout1d, Dropout2d
from .module import IncompatibleKeys, Module, Parameter
from .modules import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, Dropout, Embedding, GELU, Identity, L1Loss, LayerNorm,
                      Linear, MSELoss, NLLLoss, ReLU, Sequential, SiLU, Sigmoid, Tanh)
from .normalization import BatchNorm1d, BatchNorm2d
from .loss import *  # noqa: F401,F403  (SmoothL1Loss, KLDivLoss, ..., CosineSimilarity, PairwiseDistance)
from .loss import __all__ as _LOSS_LAYERS
from .norm_layers import *  # noqa: F401,F403  (GroupNorm, InstanceNorm1d/2d, RMSNorm, shuffles, adaptive pools)
from .norm_layers import __all__ as _NORM_LAYERS
from .pooling import AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d

__all__ = ["functional", "init", "utils", "Module", "Parameter", "IncompatibleKeys", "Linear", "Sequential",
           "ModuleList", "ModuleDict", "ReLU", "Tanh", "Sigmoid", "GELU", "SiLU", "LayerNorm", "Dropout", "Embedding",
           "Identity", "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "BCEWithLogitsLoss",
           "Flatten", "Unflatten", "Softmax", "LogSoftmax", "Conv1d", "Conv2d", "BatchNorm1d", "BatchNorm2d",
           "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d", "Dropout1d", "Dropout2d",
           "AlphaDropout", "MultiheadAttention", "BCELoss", *_ACTIVATIONS] + _LOSS_LAYERS + _NORM_LAYERS
