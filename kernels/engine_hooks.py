"""The op library's kernels that the engine calls directly, registered into it.

The engine never imports kernels/: its tensor types find the CUDA
quantize/dequantize/dense -> CSR conversions in dispatch_jit/conversions.py,
and generated CUDA kernels find the scalar helpers in
dispatch_jit/cuda/codegen.py.  Importing this module fills both.
"""

from __future__ import annotations

from dispatch_jit.conversions import register_conversion
from dispatch_jit.cuda.codegen import register_scalar_helpers

from .cuda_quantized import dequantize_cuda, quantize_cuda
from .cuda_sparse import dense_to_csr
from .scalar_helpers import HELPERS

register_scalar_helpers(HELPERS)
register_conversion("quantize", "cuda", quantize_cuda)
register_conversion("dequantize", "cuda", dequantize_cuda)
register_conversion("dense_to_csr", "cuda", dense_to_csr)
