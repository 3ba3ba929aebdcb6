"""The optimizers' updates: the multi-tensor Numba loops (``foreach.py``) and the fused update ops
over lists of parameters and state (``fused.py``: ``_fused_sgd_``, ``_fused_adam_``,
``_fused_adamw_``, as PyTorch's), which dj.optim's ``step()`` calls."""

from dispatch_jit import bf16

from .fused import KERNELS, SCHEMAS

# bfloat16 parameters take the per-tensor form (the multi-tensor loop is float32/float64 only),
# whose ops round as eager's do
bf16.support("aten::_fused_sgd_", "aten::_fused_adam_", "aten::_fused_adamw_", keys=("CPU",))

__all__ = ["SCHEMAS", "KERNELS"]
