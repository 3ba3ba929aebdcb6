"""Shared pieces of the generated CUDA kernels.

Every CUDA kernel of the op library indexes flat device buffers: an operand
is (buffer, element offset, element strides), and a thread turns its linear
index over the output into one flat index per operand.  The generated
source is compiled with ``numba.cuda.jit`` once per (source, globals),
lazily, on the dispatcher's miss path, through the one compile cache
(dispatch_jit/jit/cache.py, kind "cuda").
"""

from __future__ import annotations

import cmath
import math

import numpy as np

from ..jit import cache
from ..jit.source import define
from .runtime import cuda_module
from .words import device_bf16

__all__ = ["unravel", "operand_params", "compile_cuda", "compiled_cuda_kernels", "device_helpers",
           "register_scalar_helpers", "grid_stride"]

_CACHE_KIND = "cuda"      # the compile cache's name for CUDA kernels


def compiled_cuda_kernels() -> int:
    """CUDA kernels compiled in this process (eager kernels and fused regions)."""
    return cache.size(_CACHE_KIND)


def operand_params(name: str, ndim: int) -> list[str]:
    """Kernel parameters of one strided operand: buffer, offset, one stride per dim."""
    return [name, f"{name}_o"] + [f"{name}_s{d}" for d in range(ndim)]


def operand_args(arr, ndim: int) -> list:
    """The matching call arguments for a CudaArray (already broadcast to ``ndim`` dims)."""
    return [arr.storage.buf, arr.offset, *arr.elem_strides()]


def unravel(ndim: int, operands: list[str], indent: str, linear: str = "i", contiguous: tuple = ()) -> list[str]:
    """Source lines that set ``{op}_k`` (flat index into operand op's buffer) from the
    linear index over the output shape ``n0..n{ndim-1}``.  Operands listed in
    ``contiguous`` are C-contiguous with the output's shape: their index is ``op_o + i``."""
    lines = []
    strided = [op for op in operands if op not in contiguous]
    for op in operands:
        if op in contiguous:
            lines.append(f"{indent}{op}_k = {op}_o + {linear}")
    if not strided:
        return lines
    if ndim == 0:
        return lines + [f"{indent}{op}_k = {op}_o" for op in strided]
    lines.append(f"{indent}_r = {linear}")
    for op in strided:
        lines.append(f"{indent}{op}_k = {op}_o")
    for d in reversed(range(ndim)):
        if d:
            lines.append(f"{indent}_c = _r % n{d}")
            lines.append(f"{indent}_r = _r // n{d}")
            c = "_c"
        else:
            c = "_r"
        for op in strided:
            lines.append(f"{indent}{op}_k += {c} * {op}_s{d}")
    return lines


def register_scalar_helpers(helpers: dict) -> None:
    """Make the op library's scalar helpers (plain Python functions) callable from generated kernels.

    The op library registers them once, at import (kernels/__init__.py): the
    engine never imports kernels/.
    """
    _SCALAR_HELPERS.update(helpers)
    _HELPERS.clear()


def device_helpers() -> dict:
    """The registered scalar helpers as CUDA device functions."""
    h = _HELPERS.get("cuda")
    if h is None:
        cuda = cuda_module()
        h = {name: cuda.jit(device=True)(fn) for name, fn in _SCALAR_HELPERS.items()}
        # the CPU's vectorizable float32 exp, tanh, sin and cos are built from bit tricks and
        # tables; CUDA has expf, tanhf, sinf and cosf (with their own exact large-argument path)
        for name, fn in (("_exp_f32", _exp), ("_tanh_f32", _tanh), ("_sin_f32", _sin), ("_cos_f32", _cos)):
            h[name] = cuda.jit(device=True)(fn)
        h.update(device_bf16())     # the CPU's bit casts have no CUDA lowering
        _HELPERS["cuda"] = h
    return h


_HELPERS: dict = {}
_SCALAR_HELPERS: dict = {}   # name -> plain Python function, filled by register_scalar_helpers


def _exp(x):
    return math.exp(x)


def _tanh(x):
    return math.tanh(x)


def _sin(x):
    return math.sin(x)


def _cos(x):
    return math.cos(x)


def compile_cuda(src: str, name: str, extra_globals: dict | None = None):
    """``numba.cuda.jit`` of the function ``name`` defined by ``src`` (cached by source)."""
    return compile_cuda_counted(src, name, extra_globals)[0]


def compile_cuda_counted(src: str, name: str, extra_globals: dict | None = None):
    """``(kernel, how)``: ``compile_cuda`` and how the compile cache answered ("memory" or
    "compiled"), decided where it was decided, so that threads racing cannot miscount."""
    # globals by identity: the cached kernel's function keeps them (its __globals__) alive, so an
    # id in a live key is never reused by another object
    key = (src, name, tuple(sorted((k, id(v)) for k, v in (extra_globals or {}).items())))

    def build():
        cuda = cuda_module()
        g = {"cuda": cuda, "np": np, "math": math, "cmath": cmath, **device_helpers(), **(extra_globals or {})}
        return cuda.jit(define(src, name, g, f"<dispatch_jit cuda {name}>")), "compiled"

    return cache.lookup(_CACHE_KIND, key, build)


def grid_stride(signature: str, n: str, body: str, index: str = "i", prelude: str = "", epilogue: str = "") -> str:
    """The source of a CUDA kernel ``def signature:`` whose threads share the indices [0, n) in a
    grid-stride loop, running ``body`` (source at column 0) for each ``index``, after
    ``prelude`` and before ``epilogue`` (source at column 0, run once per thread before and
    after the loop).

    >>> print(grid_stride("fill(out, v, n)", "n", "out[i] = v"), end="")
    def fill(out, v, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            out[i] = v
            i += step
    """
    lines = [f"def {signature}:", f"    {index} = cuda.grid(1)", "    step = cuda.gridsize(1)"]
    lines += _indent(prelude, "    ") + [f"    while {index} < {n}:"] + _indent(body, "        ")
    lines += [f"        {index} += step"] + _indent(epilogue, "    ")
    return "\n".join(lines + [""])


def _indent(src: str, pad: str) -> list[str]:
    return [pad + line if line else line for line in src.rstrip("\n").split("\n")] if src.strip() else []
