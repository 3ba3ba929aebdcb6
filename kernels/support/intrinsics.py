"""Tiny LLVM-level primitives that Numba's Python subset cannot spell.

``f32_from_bits`` reinterprets an int32 as a float32 (a bitcast, no
conversion).  It lets the vectorizable exp in vecmath/exp_f32.py build 2**n
exactly, with plain integer arithmetic that LLVM can put in SIMD registers.
``bits_from_f32`` is its inverse (sincos_f32.py reads the exponent and the
mantissa of a float32 with it).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["f32_from_bits", "bits_from_f32"]


def _bitcast(name, src, dst, llvm_dst):
    """The typer of an intrinsic reinterpreting a ``src`` value's bits as ``dst`` (same width)."""
    def typer(typingctx, x):
        if x != src:
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], llvm_dst)
        return dst(src), codegen
    typer.__name__ = typer.__qualname__ = name
    return typer


f32_from_bits = intrinsic(_bitcast("f32_from_bits", types.int32, types.float32, ir.FloatType()))
bits_from_f32 = intrinsic(_bitcast("bits_from_f32", types.float32, types.int32, ir.IntType(32)))
