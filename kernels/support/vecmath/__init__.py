"""Vectorizable float32 math: the scalar definitions of the elementwise table's float32 rows.

libm's functions are opaque calls per element; NumPy and PyTorch run SIMD versions, and the
PyPI llvmlite has no vector math library (SVML).  The functions here are arithmetic,
bit casts and selects, so LLVM vectorizes the Numba loops that call them, in the eager
kernels and in compiled mode's fused loops alike (one definition: the same bits).

* widened.py: expm1, pow, erf, evaluated in float64
  (core.py's log and exp2 blocks) and rounded once: within 0.51 ulp;
* exp_f32.py: exp in float32 arithmetic (Cephes' method), within 0.75 ulp;
* log_f32.py: log, log2 and log1p in float32 arithmetic (fdlibm's method, one shared
  reduction), within 0.83, 0.85 and 0.85 ulp;
* sigmoid_f32.py: sigmoid in float32 arithmetic (Cephes' exp), within 2.35 ulp (torch's: 2.4);
* tanh_f32.py: tanh in float32 arithmetic (Cephes' exp, compensated), within 0.8 ulp;
* fma.py: the fused multiply-add these four use (LLVM's ``llvm.fma``);
* ../sincos_f32.py: sin and cos (float64 Cody-Waite and Payne-Hanek reductions), 0.52 ulp;
* erf_f32.py: gelu's exact form and its derivative in float32 arithmetic: 5.3 ulp (1.8 above
  x = -0.64) and 4.7 ulp;
* gelu.py: gelu's tanh form and its derivative, one pass each: 0.51 and 0.6 ulp.

float64 tensors keep libm (``math.*``): these float64 evaluations are not accurate to a
float64 ulp.  CUDA keeps its own libm too (``CUDA_FORMS``): ``expf`` and ``logf`` are already
vector code on a GPU, and the bit casts here are CPU intrinsics.
"""

from __future__ import annotations

import math

import numpy as np

from . import gelu as _gelu
from . import widened as _widened
from .erf_f32 import _gelu_erf_backward_f32, _gelu_erf_f32
from .log_f32 import _log1p_f32, _log2_f32, _log_f32
from .sigmoid_f32 import _sigmoid_f32
from .tanh_f32 import _tanh_f32

__all__ = ["functions", "NAMES", "CUDA_FORMS", "SIMULATOR_FORMS"]


def functions() -> dict:
    """Every helper of the package as a plain Python function, by name."""
    return {**_widened.functions(), **_gelu.functions(), "_log_f32": _log_f32, "_log2_f32": _log2_f32,
            "_log1p_f32": _log1p_f32, "_sigmoid_f32": _sigmoid_f32,
            "_tanh_f32": _tanh_f32, "_gelu_erf_f32": _gelu_erf_f32,
            "_gelu_erf_backward_f32": _gelu_erf_backward_f32}


NAMES = tuple(_widened.SOURCES) + tuple(_gelu.SOURCES) + ("_log_f32", "_log2_f32", "_log1p_f32", "_sigmoid_f32",
                                                          "_tanh_f32", "_gelu_erf_f32", "_gelu_erf_backward_f32")


def _cuda_expm1(x):
    return math.expm1(x)


def _cuda_log(x):
    return math.log(x)


def _cuda_log2(x):
    return math.log2(x)


def _cuda_log1p(x):
    return math.log1p(x)


def _cuda_pow(x, y):
    return x ** y


def _cuda_tanh(x):
    return math.tanh(x)


def _cuda_sigmoid(x):
    one = np.float32(1.0)              # float32 throughout, as the row's former _one / (_one + exp(-x))
    return one / (one + math.exp(-x))


def _cuda_erf(x):
    return math.erf(x)


# name -> a plain function CUDA compiles in its place (libdevice's functions); _exp_f32's is
# dispatch_jit/cuda/codegen.py's own
CUDA_FORMS = {"_expm1_f32": _cuda_expm1, "_log_f32": _cuda_log, "_log2_f32": _cuda_log2,
              "_log1p_f32": _cuda_log1p, "_pow_f32": _cuda_pow, "_tanh_f32": _cuda_tanh,
              "_sigmoid_f32": _cuda_sigmoid, "_erf_f32": _cuda_erf, **_gelu.CUDA_FORMS}


def _sim_sigmoid(x):
    return np.float32(1.0) / (np.float32(1.0) + np.exp(-x))


def _sim_erf(x):
    return np.float32(math.erf(x))


# the CUDA simulator runs kernels as Python, where math.log(-1.0) raises: NumPy's functions there
SIMULATOR_FORMS = {"_expm1_f32": np.expm1, "_log_f32": np.log, "_log2_f32": np.log2,
                   "_log1p_f32": np.log1p, "_pow_f32": np.power, "_tanh_f32": np.tanh, "_sigmoid_f32": _sim_sigmoid,
                   "_erf_f32": _sim_erf, **_gelu.CUDA_FORMS}
