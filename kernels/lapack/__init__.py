"""Dense linear algebra and FFTs through the libraries made for them: LAPACK (through
``numpy.linalg``) and ``scipy.fft`` (pocketfft), registered at the CPU key as ops of their own
(PyTorch's ``linalg_*`` and ``fft_*`` names).  No CUDA kernels: on a CUDA tensor the dispatcher raises
NoKernelError (README).

Each op is a row: its schema and the NumPy function over arrays.  The kernels take and return
Tensors; inputs must be floating or complex (the standard's rule: an integer matrix has no
dtype to compute its inverse in), and results keep the input's precision.
"""

from __future__ import annotations

from .op import CPU_KERNELS, SCHEMAS

__all__ = ["SCHEMAS", "KERNELS"]

KERNELS = {"CPU": CPU_KERNELS}
