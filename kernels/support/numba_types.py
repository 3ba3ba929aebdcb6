"""The Numba type tables that the eager CPU kernels and the compiler's generated code share.

``NB_DTYPE`` maps a NumPy dtype to its Numba type (float16 has none: the CPU
kernels compute it in float32); ``NB_PY`` types a Python scalar argument;
``JIT_HELPERS`` are support/scalar_helpers.py's functions compiled with
``numba.njit`` once, so every generated kernel calls the same overloads.
"""

from __future__ import annotations

import numba
from numba import types as nbt

from dispatch_jit.dtypes import ALL_DTYPES, bfloat16, float16

from .scalar_helpers import HELPERS

__all__ = ["NB_DTYPE", "NB_PY", "JIT_HELPERS"]

NB_DTYPE = {d.np: numba.from_dtype(d.np) for d in ALL_DTYPES if d is not float16 and d is not bfloat16}
# a bfloat16 array reaches a kernel as stored: a one-field record of its word (support/loops: read_cast, store)
NB_DTYPE[bfloat16.np] = numba.from_dtype(bfloat16.np)
NB_PY = {bool: nbt.boolean, int: nbt.int64, float: nbt.float64, complex: nbt.complex128}
# numba_inline: helpers too large for LLVM's inliner (support/vecmath) are inlined by Numba
JIT_HELPERS = {name: numba.njit(error_model="numpy", inline=getattr(fn, "numba_inline", "never"))(fn)
               for name, fn in HELPERS.items()}
