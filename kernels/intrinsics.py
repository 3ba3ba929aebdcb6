"""Tiny LLVM-level primitives that Numba's Python subset cannot spell.

``f32_from_bits`` reinterprets an int32 as a float32 (a bitcast, no
conversion).  It lets the vectorizable exp in scalar_helpers.py build 2**n
exactly, with plain integer arithmetic that LLVM can put in SIMD registers.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["f32_from_bits"]


@intrinsic
def f32_from_bits(typingctx, bits):
    if bits != types.int32:
        return None
    sig = types.float32(types.int32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return sig, codegen
