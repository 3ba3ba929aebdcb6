"""The CUDA target of the loop generator: scalar expressions as CUDA device code compiles them,
and the device functions generated CUDA kernels call.

Eager CUDA elementwise kernels (kernels/elementwise/cuda.py) and fused CUDA regions
(dispatch_jit/compiler/cuda.py) both take their grid-stride loop from ``CudaNest``,
spell each op's expression through ``cuda_expression`` and run with ``device_globals``,
so the two index and round alike: products
never contracted into FMAs, libdevice where Numba's CUDA target lacks a NumPy function,
and the integer helpers that cannot raise on a device.

>>> from dispatch_jit.kernels.elementwise.table import SCALAR_OPS
>>> import dispatch_jit as dj
>>> cuda_expression(SCALAR_OPS["mul"], dj.float64, ("x", "y"), simulator=False)
'_ld.dmul_rn(x, y)'
"""

from __future__ import annotations

import ast
import functools

import numpy as np

from ..scalar_helpers import _ifloordiv, _iremainder

__all__ = ["cuda_expression", "device_globals", "CudaNest"]

# -- CUDA versions of the raising integer helpers (a kernel cannot raise) -------------------------
# Floor division and remainder are the CPU helpers themselves, which never raise (the CPU loop's
# check raises after it): x // 0 and x % 0 are 0, and MIN // -1 wraps to MIN and MIN % -1 is 0
# without dividing, as NumPy and torch.  A division there overflows: PTX leaves div.s/rem.s
# unspecified on overflow (x86 traps), and these gave whatever the hardware did.
_ifloordiv_cuda, _iremainder_cuda = _ifloordiv, _iremainder


def _ipow_cuda(a, b):
    if b < 0:
        # 1 // a**|b|: only bases 1 and -1 give a nonzero integer
        if a == 1:
            return a
        if a == -1:
            return a if b % 2 != 0 else -a
        return a - a
    r = a ** b
    return r


# bfloat16's load and store are dispatch_jit/cuda/words.py's (every generated CUDA kernel has them)


_CUDA_HELPERS: dict = {}


def device_globals() -> dict:
    """Device functions that override dispatch_jit.cuda.codegen's for the integer helpers (kept alive, one
    object each, so compile_cuda's cache key stays the same), bfloat16's load and store, and libdevice
    on hardware."""
    if not _CUDA_HELPERS:
        from dispatch_jit.cuda.runtime import cuda_module, is_simulator
        from dispatch_jit.cuda.words import device_bf16
        jit = cuda_module().jit(device=True)
        _CUDA_HELPERS.update(device_bf16())
        _CUDA_HELPERS.update({"_ifloordiv": jit(_ifloordiv_cuda), "_iremainder": jit(_iremainder_cuda),
                              "_ipow": jit(_ipow_cuda)})
        if not is_simulator():
            from numba.cuda import libdevice
            _CUDA_HELPERS["_ld"] = libdevice
        else:
            _CUDA_HELPERS.update(_simulator_math())
    return _CUDA_HELPERS


# -- products that are never contracted ------------------------------------------------------------
# NVVM contracts a multiply feeding an add into one fused multiply-add (its -fma=1 default, which
# numba.cuda.jit gives no way to turn off).  A fused region is one kernel where eager mode runs
# several, so `a * b + c` compiled rounded once where eager rounded twice: compiled and eager CUDA
# disagreed in the last bit (seen on an H100).  On hardware every float product of a generated
# kernel is therefore libdevice's fmul_rn/dmul_rn in the compute dtype (PTX mul.rn, which is never
# contracted), so each op rounds as on the CPU, whichever kernel it runs in.  (The scalar helpers
# return no real-valued products, and the CPU's float32 exp/tanh/sin/cos are math.* on CUDA.)

class _NoContract(ast.NodeTransformer):
    def __init__(self, fn: str):
        self.fn = fn

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Mult):
            fn = ast.Attribute(ast.Name("_ld", ast.Load()), self.fn, ast.Load())
            return ast.Call(fn, [node.left, node.right], [])
        return node


@functools.lru_cache(maxsize=None)
def _no_contract(expr: str, fn: str) -> str:
    """``expr`` with every ``a * b`` spelled ``_ld.fn(a, b)``."""
    return ast.unparse(_NoContract(fn).visit(ast.parse(expr, mode="eval")))


def _simulator_math() -> dict:
    """The simulator runs kernels as Python, where ``math.log(-1.0)`` raises and
    ``math.exp(1000.0)`` overflows with an exception; CUDA's functions return NaN and inf.
    In the simulator ``math`` and ``cmath`` are stand-ins with NumPy's functions, which
    return what the hardware (and the CPU kernels) do, in the argument's precision."""
    import math
    import types
    m = types.SimpleNamespace(
        exp=np.exp, expm1=np.expm1, log=np.log, log1p=np.log1p, log2=np.log2, log10=np.log10, sqrt=np.sqrt,
        sin=np.sin, cos=np.cos, tan=np.tan, asin=np.arcsin, acos=np.arccos, atan=np.arctan, sinh=np.sinh,
        cosh=np.cosh, tanh=np.tanh, atan2=np.arctan2, isinf=np.isinf, isfinite=np.isfinite, isnan=np.isnan,
        erf=math.erf, floor=math.floor, ceil=math.ceil, asinh=np.arcsinh, acosh=np.arccosh, atanh=np.arctanh,
        hypot=np.hypot, copysign=np.copysign)
    c = types.SimpleNamespace(
        exp=np.exp, log=np.log, log10=np.log10, sqrt=np.sqrt, sin=np.sin, cos=np.cos, tan=np.tan, sinh=np.sinh,
        cosh=np.cosh, tanh=np.tanh, isinf=np.isinf, isfinite=np.isfinite, isnan=np.isnan, asin=np.arcsin,
        acos=np.arccos, atan=np.arctan, asinh=np.arcsinh, acosh=np.arccosh, atanh=np.arctanh)
    from ..vecmath import SIMULATOR_FORMS
    return {"math": m, "cmath": c, "_exp_f32": np.exp, "_sin_f32": np.sin, "_cos_f32": np.cos, **SIMULATOR_FORMS}


# -- source generation -----------------------------------------------------------------------------
# NumPy functions with no CUDA lowering in Numba: libdevice's do the same (rint rounds half to
# even; nextafter steps to the neighbouring float).  The simulator runs Python, where NumPy's are right.
_LIBDEVICE_FUNCS = ("floor", "ceil", "rint", "trunc", "nextafter")


def cuda_expression(op, compute, present: tuple, simulator: bool) -> str:
    """The op's scalar expression as CUDA device code compiles it."""
    # int64 keeps the plain form: the CPU's wrapping uint64 forms (table._WRAP64) answer LLVM's
    # nsw flags, and the simulator's NumPy scalars convert a uint64 above 2**63 to int64 by value,
    # not by bits (NumPy's int64 arithmetic wraps by itself)
    expr = op.expression(compute.category, present, "" if compute.name == "int64" else compute.name)
    if not simulator and compute.category == 2:
        suffix = "f" if compute.np == np.float32 else ""
        for fn in _LIBDEVICE_FUNCS:
            expr = expr.replace(f"np.{fn}(", f"_ld.{fn}{suffix}(")
        if "*" in expr:
            expr = _no_contract(expr, "fmul_rn" if suffix else "dmul_rn")
    return expr


class CudaNest:
    """The grid-stride loop of one CUDA kernel over ``ndim`` dimensions (the CUDA twin of ``Nest``).

    Operands are (flat device buffer, element offset, element strides), as
    ``dispatch_jit/cuda/codegen.py`` passes them; ``flat``: every operand is C-contiguous with
    the iteration shape and is indexed ``offset + i``; otherwise the linear index is unravelled
    into one flat index per operand, except ``outputs`` when ``fresh_outputs`` (C-contiguous
    arrays the caller allocated, which take no strides)."""

    def __init__(self, flat: bool, ndim: int, inputs: list, outputs: list, fresh_outputs: bool = False):
        self.nd = 0 if flat else ndim
        self.operands = list(inputs) + list(outputs)
        self.contiguous = tuple(self.operands) if flat else tuple(outputs) if fresh_outputs else ()

    def params(self, name: str) -> list[str]:
        """The kernel parameters of the operand ``name``."""
        from dispatch_jit.cuda.codegen import operand_params
        return operand_params(name, 0 if name in self.contiguous else self.nd)

    def sizes(self) -> list[str]:
        """The last kernel parameters: the iteration shape and its element count."""
        return [f"n{d}" for d in range(self.nd)] + ["total"]

    @staticmethod
    def at(name: str) -> str:
        return f"{name}[{name}_k]"

    def kernel(self, name: str, params: list, body, prelude: list = (), epilogue: list = ()) -> str:
        """The source of kernel ``name``: ``body(at)``'s statements per element of the grid-stride loop."""
        from dispatch_jit.cuda.codegen import grid_stride, unravel
        lines = unravel(self.nd, self.operands, "", contiguous=self.contiguous) + list(body(self.at))
        return grid_stride(f"{name}({', '.join(params)})", "total", "\n".join(lines), prelude="\n".join(prelude),
                           epilogue="\n".join(epilogue))
