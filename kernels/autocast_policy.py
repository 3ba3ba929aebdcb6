"""Autocast policies per operator, and their kernels at AutocastCPU/AutocastCUDA.

As PyTorch's autocast op lists: ops that are fast and safe in lower precision
cast their floating inputs to the autocast dtype; ops that need range or
accuracy (reductions, exp/log, softmax, losses, pow) run in float32; ops that
combine several tensors run in the widest of their floating inputs.  Every
other op falls through the autocast keys at no cost.
"""

from __future__ import annotations

from dispatch_jit.autocast import AutocastKernel

__all__ = ["AUTOCAST_POLICY", "KERNELS"]

AUTOCAST_POLICY: dict[str, str] = {
    # lower precision
    "matmul": "lower_precision", "dot": "lower_precision", "linear": "lower_precision",
    # float32
    "sum": "fp32", "mean": "fp32", "prod": "fp32", "var": "fp32", "std": "fp32", "logsumexp": "fp32",
    "exp": "fp32", "expm1": "fp32", "log": "fp32", "log1p": "fp32", "log2": "fp32", "log10": "fp32",
    "softmax": "fp32", "log_softmax": "fp32", "mse_loss": "fp32", "pow.Tensor": "fp32", "rsqrt": "fp32",
    "reciprocal": "fp32", "sinh": "fp32", "cosh": "fp32", "tan": "fp32", "asin": "fp32", "acos": "fp32",
    # widest input type
    "add.Tensor": "promote", "sub.Tensor": "promote", "mul.Tensor": "promote", "div.Tensor": "promote",
    "cat": "promote", "stack": "promote", "where.self": "promote", "maximum.Tensor": "promote",
    "minimum.Tensor": "promote", "atan2.Tensor": "promote",
}

# one AutocastKernel per op and key (registered by kernels/__init__.py)
KERNELS = {key: {name: AutocastKernel(policy) for name, policy in AUTOCAST_POLICY.items()}
           for key in ("AutocastCPU", "AutocastCUDA")}
