"""Quantized int8 ops, as the registration loop sees them.

Each kernel is one op.py class (the argument handling) over the device's
compute functions: cpu.CPU at QuantizedCPU, cuda.CUDA (bit-identical
results) at QuantizedCUDA.  ``quantized_matmul``, ``quantized_add`` and
``quantized_linear`` are defined here; matmul, add and relu are dense ops
that get a kernel at the Quantized keys.
"""

from __future__ import annotations

from dispatch_jit.quantized import QUANTIZED_CPU_BITS, QUANTIZED_CUDA_BITS

from . import cpu, cuda, op

__all__ = ["SCHEMAS", "KERNELS", "CONVERSIONS"]

SCHEMAS = cpu.SCHEMAS


def _ops(device: str, bits: int, backend) -> dict:
    return {
        "matmul": op.QMatmul(False, device, bits, backend),
        "quantized_matmul": op.QMatmul(True, device, bits, backend),
        "add.Tensor": op.QAdd(False, device, bits, backend),
        "quantized_add": op.QAdd(True, device, bits, backend),
        "relu": op.QRelu(device, bits, backend),
        "quantized_linear": op.QLinear(device, bits, backend),
    }


KERNELS = {"QuantizedCPU": _ops("cpu", QUANTIZED_CPU_BITS, cpu.CPU),
           "QuantizedCUDA": _ops("cuda", QUANTIZED_CUDA_BITS, cuda.CUDA)}

# what the engine's QuantizedTensor calls to quantize / dequantize CUDA storage
CONVERSIONS = {"cuda": {"quantize": cuda.quantize_cuda, "dequantize": cuda.dequantize_cuda}}
