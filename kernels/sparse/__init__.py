"""Sparse CSR and COO ops, as the registration loop sees them (COO: coo.py at SparseCPU, coo_cuda.py at
SparseCUDA).

Two ops are defined here (to_dense, and sparse_csr_mm, the differentiable
core of CSR @ dense); the others (matmul, add, mul, sum) are dense ops that
get a kernel at SparseCsrCPU/SparseCsrCUDA, which outrank the dense keys
whenever an argument is a CSR tensor.  Each of those is one op.py class
(its argument handling) over the device's compute functions (cpu.CPU,
cuda.CUDA).  At AutogradCPU/AutogradCUDA matmul goes through a router that
sends CSR @ dense needing grad to sparse_csr_mm and everything else on to
the dense derivative.
"""

from __future__ import annotations

from dispatch_jit.autograd.kernel import AutogradKernel
from dispatch_jit.sparse import SPARSE_CSR_CPU_BITS, SPARSE_CSR_CUDA_BITS

from . import coo, coo_cuda, cpu, cuda, op

__all__ = ["SCHEMAS", "KERNELS", "CONVERSIONS"]

SCHEMAS = [
    "to_dense(Tensor self) -> Tensor",
    "sparse_csr_mm(Tensor crow_indices, Tensor col_indices, Tensor values, Tensor dense, int ncols) -> Tensor",
] + coo.SCHEMAS


def _ops(device: str, bits: int, backend, to_dense) -> dict:
    return {"matmul": op.SparseMatmul(device, bits, backend), "add.Tensor": op.SparseAdd(device, bits, backend),
            "mul.Tensor": op.SparseMul(device, bits, backend), "sum": op.SparseSum(device, bits, backend),
            "to_dense": to_dense}


KERNELS = {
    "SparseCsrCPU": _ops("cpu", SPARSE_CSR_CPU_BITS, cpu.CPU, cpu.to_dense_cpu),
    "CPU": {"to_dense": cpu.to_dense_dense, "sparse_csr_mm": cpu._sparse_mm_cpu, **coo.KERNELS["CPU"]},
    "Autograd": {"sparse_csr_mm": AutogradKernel(cpu.SPARSE_MM_DERIVATIVE),
                 "sparse_coo_mm": AutogradKernel(coo_cuda.SPARSE_COO_MM_DERIVATIVE)},
    "SparseCPU": coo.KERNELS["SparseCPU"],
    "AutogradCPU": {"matmul": cpu.MatmulAutogradRouter(coo.CooMatmulRoute)},
    "AutogradCUDA": {"matmul": cpu.MatmulAutogradRouter(coo.CooMatmulRoute)},
    "SparseCsrCUDA": _ops("cuda", SPARSE_CSR_CUDA_BITS, cuda.CUDA, cuda.to_dense_cuda),
    "SparseCUDA": {"matmul": coo.CooMatmul(coo_cuda.CUDA_COO), "add.Tensor": coo.CooAdd(coo_cuda.CUDA_COO),
                   "mul.Tensor": coo.CooMul(coo_cuda.CUDA_COO), "sum": coo.CooSum(coo_cuda.CUDA_COO),
                   "to_dense": coo_cuda.to_dense_coo_cuda, "t": coo.t_coo},
    "CUDA": {"to_dense": cpu.to_dense_dense, "sparse_csr_mm": cuda.sparse_mm_cuda,
             "sparse_coo_mm": coo_cuda.sparse_coo_mm_cuda},
}

# what the engine's sparse tensor types call on CUDA: dense -> CSR, dense -> COO, COO coalescing
CONVERSIONS = {"cuda": {"dense_to_csr": cuda.dense_to_csr, "dense_to_coo": coo_cuda.dense_to_coo_cuda,
                        "coo_coalesce": coo_cuda.coalesce_cuda}}
