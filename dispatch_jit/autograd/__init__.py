"""``dj.autograd``: reverse-mode differentiation as dispatch keys.

A tensor that requires grad carries AutogradCPU (or AutogradCUDA) in its key
set; the Autograd kernel of each differentiable op records a node from the
derivative table (kernels/derivatives.py) and redispatches to the backend.
Tensors that do not require grad, and every call under ``no_grad``, resolve
straight to the backend kernels.
"""

from __future__ import annotations

from .engine import backward, grad
from .function import Function, FunctionCtx
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import gradcheck

__all__ = ["backward", "grad", "Function", "FunctionCtx", "gradcheck", "no_grad", "enable_grad",
           "set_grad_enabled", "inference_mode", "is_grad_enabled"]
