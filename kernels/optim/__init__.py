"""The optimizers' updates: the multi-tensor Numba loops (``foreach.py``) and the fused update ops
over lists of parameters and state (``fused.py``: ``_fused_sgd_``, ``_fused_adam_``,
``_fused_adamw_``, as PyTorch's), which dj.optim's ``step()`` calls."""

from .fused import KERNELS, SCHEMAS

__all__ = ["SCHEMAS", "KERNELS"]
