"""``fma(a, b, c)``: a * b + c with one rounding, for the polynomials of this package.

Numba compiles without LLVM's ``contract`` flag, so ``a * b + c`` is two roundings and two
instructions; written as ``llvm.fma`` it is one of each (``vfmadd`` on x86-64 with FMA3, and on
AArch64), and the vectorized loops do about half the arithmetic: Cephes' exp over 3e4 float32
values took 0.7x the time (exp_f32.py spends some of that on compensated sums: 0.87x), expm1 0.8x, log2 and log1p 0.9x, sin and cos 0.76x (float64
evaluations).  The result is defined by IEEE 754 on every machine (a CPU without FMA calls
libm's ``fmaf``/``fma``, exact and slower), so the bits do not depend on the host, and the eager
kernels and compiled mode's fused loops, which call the same functions, agree bit for bit.

CUDA compiles its own forms of these functions (``CUDA_FORMS``, cuda/codegen.py), which never
reach this intrinsic.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["fma"]

_F32 = ir.FloatType()
_F64 = ir.DoubleType()


@intrinsic
def fma(typingctx, a, b, c):
    """float32 or float64 (all three alike)."""
    if a == b == c == types.float32:
        t, lt = types.float32, _F32
    elif a == b == c == types.float64:
        t, lt = types.float64, _F64
    else:
        return None

    def codegen(context, builder, signature, args):
        fn = builder.module.declare_intrinsic("llvm.fma", [lt], ir.FunctionType(lt, [lt] * 3))
        return builder.call(fn, args)
    return t(t, t, t), codegen
